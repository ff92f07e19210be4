"""``manage.py check_data_files [SLUG ...] [--remove]``: the organisers' data files that hold the
annotations of gold that is still secret (added before the guard compared content, or before the
gold they hold was loaded), with the reason; ``--remove`` takes them out of the data sections."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasks.datafiles import remove_data_file, stored_file_problems
from tasks.models import AccessLog, DataFile


class Command(BaseCommand):
    help = ("List the data files that hold secret gold annotations (exit status 1 when there is one); --remove takes "
            "them out of their data sections, recorded in each task's access log.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slugs", nargs="*", metavar="SLUG", help="only these tasks (default: every task)")
        parser.add_argument("--remove", action="store_true", help="remove every file found")

    def handle(self, *args: Any, **options: Any) -> None:
        files = DataFile.objects.select_related("task").order_by("task__slug", "name")
        if options["slugs"]:
            files = files.filter(task__slug__in=options["slugs"])
        checked = leaking = 0
        for data_file in files:
            checked += 1
            problems = stored_file_problems(data_file)
            if not problems:
                continue
            leaking += 1
            for problem in problems:
                self.stdout.write(f"{data_file.task.slug}: {data_file.name}: {problem}")
            if options["remove"]:
                remove_data_file(data_file)
                AccessLog.objects.create(user=None, task=data_file.task,
                                         what=f"removed the data file {data_file.name} (SHA-256 "
                                              f"{data_file.sha256[:12]}, which held secret gold annotations) with "
                                              "check_data_files"[:200])
                self.stdout.write(f"{data_file.task.slug}: {data_file.name}: removed")
        self.stdout.write(f"{checked} data file(s) checked, {leaking} holding secret gold annotations"
                          + (", removed" if options["remove"] and leaking else ""))
        if leaking and not options["remove"]:
            raise CommandError("remove them from the organisers' dashboard, or run again with --remove", returncode=1)
