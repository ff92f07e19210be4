"""``manage.py add_data_file SLUG FILE [--phase NAME] [--name NAME] [--description TEXT] [--replace]``:
add a file to a task's data section (guidelines, training data, a script)."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasks.datafiles import add_data_file, default_data_file_name
from tasks.errors import Rejected
from tasks.models import Task


class Command(BaseCommand):
    help = ("Add a file to a task's data section: of one phase (listed there, with that phase's access rule) or of "
            "the whole task (listed in every data section, for everyone who can see the task).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("file", type=Path)
        parser.add_argument("--phase", metavar="NAME", help="the phase whose data section lists the file "
                                                            "(default: the whole task)")
        parser.add_argument("--name", help="the download's file name: letters, digits, '.', '-' and '_' "
                                           "(default: the file's own name, other characters as '_')")
        parser.add_argument("--description", default="", help="what the file is, shown beside it")
        parser.add_argument("--replace", action="store_true",
                            help="replace the task's file of the same name (content, phase and description)")

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["slug"]).first()
        if task is None:
            raise CommandError(f"no task {options['slug']!r}; create it with create_task", returncode=2)
        phase = None
        if options["phase"] is not None:
            phase = task.phases.filter(name=options["phase"]).first()
            if phase is None:
                known = ", ".join(task.phases.values_list("name", flat=True)) or "none"
                raise CommandError(f"no phase {options['phase']!r} in {task.slug} (its phases: {known}); "
                                   "nothing was stored", returncode=2)
        path: Path = options["file"]
        name = options["name"] if options["name"] is not None else default_data_file_name(path.name)
        try:
            with path.open("rb") as stream:
                data_file = add_data_file(task, name, stream, phase=phase, description=options["description"],
                                          replace=options["replace"])
        except OSError as error:
            raise CommandError(f"{path}: cannot read: {error.strerror or error}", returncode=2) from None
        except Rejected as rejected:
            for line in rejected.errors:
                self.stderr.write(f"{path}: {line}")
            raise CommandError(f"{len(rejected.errors)} problem(s); nothing was stored", returncode=2) from None
        where = f"the {phase.name} phase" if phase is not None else "the whole task"
        self.stdout.write(f"{task.slug}: {data_file.name} ({data_file.size:,} bytes, sha256 {data_file.sha256[:12]}) "
                          f"in the data section of {where}")
