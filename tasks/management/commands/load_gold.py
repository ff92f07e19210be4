"""``manage.py load_gold SLUG GOLD.json [--phase NAME]``: store a new gold version and re-score runs."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasks.errors import Rejected
from tasks.models import Task
from tasks.organising import load_gold_version


class Command(BaseCommand):
    help = "Validate a gold file, store it as the task's next gold version, create baselines and re-score runs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("gold", type=Path)
        parser.add_argument("--label", default="", help="e.g. development or test")
        parser.add_argument("--phase", action="append", default=[], metavar="NAME",
                            help="move this phase to the new version and re-score its runs (a corrected gold "
                                 "for a phase that already has runs); repeat for several phases")

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["slug"]).first()
        if task is None:
            raise CommandError(f"no task {options['slug']!r}; create it with create_task", returncode=2)
        phases = []
        for name in options["phase"]:
            phase = task.phases.filter(name=name).first()
            if phase is None:
                known = ", ".join(task.phases.values_list("name", flat=True)) or "none"
                raise CommandError(f"no phase {name!r} in {task.slug} (its phases: {known}); nothing was stored",
                                   returncode=2)
            phases.append(phase)
        try:
            content = options["gold"].read_bytes()
        except OSError as error:
            raise CommandError(f"{options['gold']}: cannot read: {error.strerror or error}", returncode=2) from None
        try:
            version = load_gold_version(task, content, source_name=options["gold"].name, label=options["label"],
                                        phases=phases)
        except Rejected as error:
            for line in error.errors:
                self.stderr.write(f"{options['gold']}: {line}")
            raise CommandError(f"{len(error.errors)} problem(s); nothing was stored", returncode=2) from None
        for warning in version.warnings:
            self.stderr.write(f"warning: {warning}")
        reruns = task.runs.filter(gold_version=version, is_baseline=False).count()
        moved = f"; phase(s) {', '.join(phase.name for phase in phases)} now use it" if phases else ""
        baselines = task.runs.filter(gold_version=version, is_baseline=True).count()
        self.stdout.write(f"{task.slug}: gold version {version.number} ({task.items(version.n_items)}); "
                          f"{baselines} baselines created; {reruns} run(s) queued for re-scoring{moved}")
        self.stdout.write(str(version.number))
