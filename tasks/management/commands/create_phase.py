"""``manage.py create_phase SLUG NAME --kind test --starts ... --ends ...``: add a phase to a task."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasks.models import Phase, Task
from tasks.organising import phase_overlaps, phase_problems


def _utc(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"not an ISO date and time: {text!r} (e.g. 2026-12-01T00:00)", returncode=2) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


class Command(BaseCommand):
    help = "Add a phase (development, test or final) with its gold version, dates (UTC) and quotas."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("name")
        parser.add_argument("--kind", choices=[kind for kind, _ in Phase.KINDS], default=Phase.DEVELOPMENT)
        parser.add_argument("--gold-version", type=int, default=None, help="default: the latest")
        parser.add_argument("--starts", required=True, help="ISO date and time, UTC unless an offset is given")
        parser.add_argument("--ends", required=True)
        parser.add_argument("--daily-quota", type=int, default=20)
        parser.add_argument("--total-quota", type=int, default=200)
        parser.add_argument("--live-subset", type=int, default=None,
                            help="test phase: score the live leaderboard on this many items")
        parser.add_argument("--subset-seed", type=int, default=0)
        # The DQ/ND name of the option stays as an alias: organisers' scripts use it.
        parser.add_argument("--no-per-item-feedback", "--no-per-dialogue-feedback", action="store_true",
                            dest="no_per_item_feedback",
                            help="development phases: no per-item scores for the run's owner (test and final "
                                 "phases never show them to participants before the results are published)")
        parser.add_argument("--data-registered-only", action="store_true",
                            help="the phase's data only for signed-in members of a team (approved where the task "
                                 "requires approval, having accepted the task's terms where it has terms)")
        described = parser.add_mutually_exclusive_group()
        described.add_argument("--require-description", dest="require_description", action="store_const",
                               const=True, default=None,
                               help="every run needs a method description (the default in a test phase)")
        described.add_argument("--no-require-description", dest="require_description", action="store_const",
                               const=False)

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["slug"]).first()
        if task is None:
            raise CommandError(f"no task {options['slug']!r}", returncode=2)
        versions = task.gold_versions.all()
        version = (versions.filter(number=options["gold_version"]).first() if options["gold_version"] is not None
                   else versions.order_by("-number").first())
        if version is None:
            raise CommandError("no such gold version; load gold first (load_gold)", returncode=2)
        phase = Phase(task=task, name=options["name"], kind=options["kind"], gold_version=version,
                      starts_at=_utc(options["starts"]), ends_at=_utc(options["ends"]),
                      daily_quota=options["daily_quota"], total_quota=options["total_quota"],
                      live_subset_size=options["live_subset"], live_subset_seed=options["subset_seed"],
                      per_item_feedback=not options["no_per_item_feedback"],
                      data_registered_only=options["data_registered_only"],
                      requires_method_description=(options["kind"] == Phase.TEST
                                                   if options["require_description"] is None
                                                   else options["require_description"]))
        # The dashboard's phase form checks the same (tasks.organising.phase_problems), in its words.
        problems = [problem.replace("ends: must be after the start", "--ends must be after --starts")
                    .replace("live subset: must be", "--live-subset must be") for problem in phase_problems(phase)]
        if problems:
            raise CommandError("; ".join(problems), returncode=2)
        phase.save()
        self.stdout.write(f"{task.slug}: phase {phase.name} ({phase.kind}) on gold v{version.number}, "
                          f"{phase.starts_at:%Y-%m-%d %H:%M} to {phase.ends_at:%Y-%m-%d %H:%M} UTC")
        for warning in phase_overlaps(phase):
            self.stderr.write(f"warning: {warning}")
