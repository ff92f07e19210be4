"""``manage.py restore DIR``: a backup put back on an empty installation, every checksum checked
first (``tasks.backup``; docs/operators/backups.md)."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tasks.backup import BackupRefused, read_manifest, restore
from tasks.snapshots import SnapshotRefused


class Command(BaseCommand):
    help = ("Restore the backup in DIR onto this installation, which must be empty, after checking every file's "
            "SHA-256; --check only checks the backup.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", metavar="DIR", help="a folder written by manage.py backup")
        parser.add_argument("--check", action="store_true",
                            help="only check the backup (every file against the manifest); change nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        folder = Path(options["folder"])
        try:
            if options["check"]:
                manifest = read_manifest(folder)
                self.stdout.write(f"backup {folder} is whole: {len(manifest['files']):,} files match their SHA-256 "
                                  f"sums; written {manifest['created_at']}")
                return
            done = restore(folder, say=lambda text: self.stderr.write(text) if options["verbosity"] > 1 else None)
        except (BackupRefused, SnapshotRefused) as error:
            raise CommandError(f"not restored: {error}", returncode=2) from None
        after = (f"; then applied {len(done.migrated)} migration(s) of this release" if done.migrated else "")
        self.stdout.write(f"restored {done.folder}: the database ({done.migrations} migrations) and {done.files:,} "
                          f"stored files ({done.file_bytes:,} bytes) in {done.seconds:.1f} s{after}")
