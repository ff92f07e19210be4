"""``manage.py load_vectors TASK VECTORS.txt [--name NAME]``: a response task's own word vectors."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from kinds.response.vectors import set_vector_table
from tasks.errors import Rejected
from tasks.models import Task


class Command(BaseCommand):
    help = ("Give a response task its own word vectors (word2vec text format: a header line 'N D', then one word "
            "and D numbers per line) instead of the pinned spaCy pipeline's; every run is scored again.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the task's short name")
        parser.add_argument("vectors", type=Path, help="the word2vec text file")
        parser.add_argument("--name", default="", help="a name shown with every score (default: the file's name)")

    def handle(self, *args: Any, **options: Any) -> None:
        task = Task.objects.filter(slug=options["slug"]).first()
        if task is None:
            raise CommandError(f"no task {options['slug']!r}", returncode=2)
        path: Path = options["vectors"]
        try:
            content = path.read_bytes()
        except OSError as error:
            raise CommandError(f"{path}: {error.strerror}", returncode=2) from None
        try:
            digest = set_vector_table(task, content, options["name"] or path.name)
        except Rejected as error:
            for line in error.errors:
                self.stderr.write(f"{path}: {line}")
            raise CommandError(f"{len(error.errors)} problem(s); nothing was changed", returncode=2) from None
        runs = task.runs.filter(withdrawn_at__isnull=True).count()
        self.stdout.write(f"{task.slug}: vectors {digest[:12]}… ({options['name'] or path.name}); "
                          f"{runs} run(s) queued for re-scoring")
