"""``manage.py backup DIR``: a consistent backup of the database and every stored file while the
server runs (``tasks.backup``; docs/operators/backups.md)."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasks.backup import BackupRefused, backup
from tasks.snapshots import SnapshotRefused


class Command(BaseCommand):
    help = ("Write a backup (the database, every stored file and a manifest of their SHA-256 sums) into DIR, "
            "a new or empty folder, while the server runs.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", metavar="DIR", help="a new or empty folder for the backup")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            done = backup(Path(options["folder"]), say=lambda text: self.stderr.write(text) if options["verbosity"] > 1
                          else None)
        except (BackupRefused, SnapshotRefused) as error:
            raise CommandError(f"backup not written: {error}", returncode=2) from None
        self.stdout.write(f"backup written to {done.folder}: the database ({done.database_bytes:,} bytes, "
                          f"{done.migrations} migrations applied) and {done.files:,} stored files "
                          f"({done.file_bytes:,} bytes) in {done.seconds:.1f} s")
