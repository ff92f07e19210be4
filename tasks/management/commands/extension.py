"""``manage.py extension TASK PHASE TEAM --until ...``: give a team an extension of a phase's
deadline (``--end``: end it now; ``manage.py extension TASK``: list the task's extensions)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasks import late
from tasks.errors import Rejected
from tasks.management.commands.create_phase import _utc
from tasks.models import Task


class Command(BaseCommand):
    help = ("Let one team submit to a phase after its end, until a date and time (UTC); its runs after the end are "
            "marked late. --end ends the extension now; with the task alone, list its extensions.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the task's short name")
        parser.add_argument("phase", nargs="?", help="the phase's name")
        parser.add_argument("team", nargs="?", help="the team's name or short name")
        parser.add_argument("--until", help="ISO date and time, UTC unless an offset is given (e.g. 2026-12-16T12:00)")
        parser.add_argument("--note", default="", help="why (the team reads it on its upload page)")
        parser.add_argument("--end", action="store_true", help="end the team's extension now")

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["slug"]).first()
        if task is None:
            raise CommandError(f"no task {options['slug']!r}", returncode=2)
        if options["phase"] is None and options["team"] is None:
            if options["until"] or options["end"]:
                raise CommandError("name the phase and the team", returncode=2)
            for row in late.extension_rows(task):
                extension = row["extension"]
                self.stdout.write(f"{extension.phase.name}\t{extension.team.name}\tuntil "
                                  f"{extension.until:%Y-%m-%d %H:%M} UTC\t{'running' if row['running'] else 'over'}"
                                  f"\t{row['late_runs']} late run(s)\t{extension.note}")
            return
        if options["team"] is None:
            raise CommandError("name the team after the phase", returncode=2)
        if options["end"] == bool(options["until"]):
            raise CommandError("give --until (a new extension, or a new end for one) or --end, not both",
                               returncode=2)
        try:
            phase = late.find_phase(task, options["phase"])
            team = late.find_team(options["team"])
            if options["end"]:
                late.end_extension(phase, team)
                self.stdout.write(f"the extension of team {team.name!r} in the {phase.name} phase has ended")
                return
            extension = late.grant_extension(phase, team, _utc(options["until"]), note=options["note"])
        except Rejected as rejected:
            raise CommandError("nothing was changed: " + "; ".join(rejected.errors), returncode=2) from None
        self.stdout.write(f"team {team.name!r} may submit to the {phase.name} phase until "
                          f"{extension.until:%Y-%m-%d %H:%M} UTC (it ended at {phase.ends_at:%Y-%m-%d %H:%M} UTC for "
                          "the other teams); its runs after the end are marked late")
