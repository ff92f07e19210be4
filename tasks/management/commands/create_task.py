"""``manage.py create_task SLUG [--kind stc3] [--preset P] [--title T]``."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

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
        parser.add_argument("--title", default="")
        parser.add_argument("--description", default="")
        parser.add_argument("--organiser", action="append", default=[], help="username of an organiser (repeatable)")

    def handle(self, *args: Any, **options: Any) -> None:
        organisers = []
        for username in options["organiser"]:
            user = get_user_model().objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"no user named {username!r}", returncode=2)
            organisers.append(user)
        try:
            task = create_task(options["slug"], options["preset"], options["title"], options["description"],
                               kind=options["kind"])
        except Rejected as error:
            raise CommandError("; ".join(error.errors), returncode=2) from None
        task.organisers.add(*organisers)
        preset = options["preset"] or task.kind_impl.default_preset
        self.stdout.write(f"created task {task.slug} ({task.title}), kind {task.kind}, with preset {preset}")
