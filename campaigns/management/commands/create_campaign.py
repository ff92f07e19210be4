"""``manage.py create_campaign SLUG NAME --kind dialogues|references|responses ...``: an annotation
campaign on a task, checked as the dashboard's form checks it (every problem, exit 2, nothing stored)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from campaigns.assignment import open_campaign
from campaigns.building import Plan, create_campaign
from campaigns.models import KIND_WORDS
from campaigns.schemes import DEFAULT_RESPONSE_DIMENSIONS
from tasks.errors import Rejected
from tasks.models import Run, Task


def _read(path: str | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise CommandError(f"{what} {path}: {error.strerror}", returncode=2) from None


class Command(BaseCommand):
    help = ("Create an annotation campaign on a task: dialogues (STC-3's A, E, S and nugget labels), references "
            "(rated for deltaBLEU's weights) or responses (pooled, on dimensions you define).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the task")
        parser.add_argument("name", help="the campaign's name")
        parser.add_argument("--kind", required=True, choices=sorted(KIND_WORDS))
        parser.add_argument("--gold-version", type=int, default=None,
                            help="the gold version whose items are judged (default: the latest)")
        parser.add_argument("--dialogues", default=None,
                            help="dialogues: a JSON file [{\"id\", \"turns\"}] without annotations, in place of a "
                                 "gold version's dialogues")
        parser.add_argument("--run", action="append", default=[], dest="runs",
                            help="responses of a response task: a scored run (its id or name), repeatable")
        parser.add_argument("--item", action="append", default=[], dest="items",
                            help="judge only this item id (repeatable; default: all)")
        parser.add_argument("--dimensions", default=DEFAULT_RESPONSE_DIMENSIONS,
                            help="responses: one dimension per line, 'NAME MIN-MAX: meaning | ... | meaning'")
        parser.add_argument("-k", "--per-item", type=int, default=3, help="distinct assessors per item")
        parser.add_argument("--assessor", action="append", default=[], dest="assessors",
                            help="a user name (repeatable)")
        parser.add_argument("--checks", default=None, help="a JSON file of check items with their known answers")
        parser.add_argument("--instructions", default="", help="what assessors read above every item")
        parser.add_argument("--seed", type=int, default=40)
        parser.add_argument("--open", action="store_true", help="open it for its assessors at once")

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["slug"]).first()
        if task is None:
            raise CommandError(f"no task {options['slug']!r}", returncode=2)
        versions = task.gold_versions.all()
        version = (versions.filter(number=options["gold_version"]).first() if options["gold_version"] is not None
                   else versions.order_by("-number").first())
        if options["gold_version"] is not None and version is None:
            raise CommandError(f"no gold version {options['gold_version']} of {task.slug}", returncode=2)
        runs, problems = [], []
        for name in options["runs"]:
            found = Run.objects.filter(task=task, pk=int(name)) if name.isdigit() else Run.objects.filter(task=task,
                                                                                                        name=name)
            if found.count() != 1:
                problems.append(f"--run {name}: {'no' if not found.exists() else 'more than one'} run of {task.slug} "
                                "with that id or name")
            else:
                runs.append(found.get())
        if options["seed"] < 0:
            problems.append("--seed must be 0 or more")
        if problems:
            raise CommandError("; ".join(problems), returncode=2)
        dialogues = _read(options["dialogues"], "--dialogues")
        plan = Plan(name=options["name"], kind=options["kind"], per_item=options["per_item"],
                    instructions=options["instructions"], dimensions=options["dimensions"],
                    gold_version=None if dialogues else version, dialogues=dialogues, runs=runs,
                    item_ids=options["items"], checks=_read(options["checks"], "--checks"),
                    assessors=options["assessors"], seed=options["seed"])
        try:
            with transaction.atomic():  # a campaign that cannot open is not kept either
                campaign = create_campaign(task, plan)
                made = open_campaign(campaign) if options["open"] else 0
        except Rejected as rejected:
            raise CommandError("\n".join(rejected.errors), returncode=2) from None
        self.stdout.write(f"campaign {campaign.pk} on {task.slug}: {campaign.items.count()} items, "
                          f"{campaign.assessors.count()} assessors, "
                          + (f"open ({made} assignments)" if options["open"] else "a draft (open it on its page)"))
