"""``manage.py create_task SLUG [--kind stc3] [--preset P] [--config-file F] [--title T] [--contact C]
[--rules-file F] [--citation-file F] [--terms-file F]``."""

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from scoring.kinds import KINDS
from tasks.errors import Rejected
from tasks.organising import create_task


class Command(BaseCommand):
    help = "Create a shared task of a kind, configured by one of the kind's presets."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="short name used in URLs, e.g. stc3-dq-nd-zh")
        parser.add_argument("--kind", choices=sorted(KINDS), default="stc3",
                            help="the kind of task (default stc3: DQ/ND)")
        parser.add_argument("--preset", default="", help="one of the kind's presets (default: the kind's own "
                            + "; ".join(f"{kind.name}: {', '.join(sorted(kind.presets))}" for kind in KINDS.values())
                            + ")")
        parser.add_argument("--config-file", type=Path,
                            help="a JSON object of settings over the preset's (a metrics task's dimensions and "
                                 "languages, say); every problem is named and nothing is created")
        parser.add_argument("--title", default="")
        parser.add_argument("--description", default="")
        parser.add_argument("--organiser", action="append", default=[], help="username of an organiser (repeatable)")
        parser.add_argument("--contact", default="", help="how to reach the organisers (email address or URL)")
        parser.add_argument("--rules-file", type=Path, help="the rules, shown on the overview page (UTF-8 text)")
        parser.add_argument("--citation-file", type=Path, help="how to cite the task (UTF-8 text, e.g. BibTeX)")
        parser.add_argument("--terms-file", type=Path,
                            help="terms participants accept before they submit or download data kept for "
                                 "registered teams (UTF-8 text)")

    def handle(self, *args: Any, **options: Any) -> None:
        organisers = []
        for username in options["organiser"]:
            user = get_user_model().objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"no user named {username!r}", returncode=2)
            organisers.append(user)
        texts = {"contact": options["contact"]}
        for field in ("rules", "citation", "terms"):
            path = options[f"{field}_file"]
            if path is not None:
                try:
                    texts[field] = path.read_text(encoding="utf-8-sig").strip()
                except (OSError, UnicodeDecodeError) as error:
                    raise CommandError(f"{path}: cannot be read as UTF-8 text ({error})", returncode=2) from None
        settings = _settings(options["config_file"])
        try:
            with transaction.atomic():
                task = create_task(options["slug"], options["preset"], options["title"], options["description"],
                                   kind=options["kind"], **texts)
                if settings:
                    task.config = {**task.config, **settings}
                    try:
                        task.full_clean()
                    except ValidationError as error:
                        problems = [line for lines in error.message_dict.values() for line in lines]
                        raise Rejected([f"{options['config_file']}: {line}" for line in problems]) from None
                    task.save(update_fields=["config"])
        except Rejected as error:
            raise CommandError("; ".join(error.errors), returncode=2) from None
        task.organisers.add(*organisers)
        preset = options["preset"] or task.kind_impl.default_preset
        self.stdout.write(f"created task {task.slug} ({task.title}), kind {task.kind}, with preset {preset}")


def _settings(path: Path | None) -> dict[str, Any]:
    """The settings of ``--config-file``: a JSON object (every problem named, before anything is made)."""
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError) as error:
        raise CommandError(f"{path}: cannot be read as UTF-8 text ({error})", returncode=2) from None
    except json.JSONDecodeError as error:
        raise CommandError(f"{path}: not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})",
                           returncode=2) from None
    if not isinstance(data, dict):
        raise CommandError(f"{path}: must be a JSON object of settings, not {type(data).__name__}", returncode=2)
    return data
