"""Backups: ``manage.py backup DIR`` and ``manage.py restore DIR`` (docs/operators/backups.md).

A backup is a folder: the database's snapshot (``tasks.snapshots``), every file of the blob store
(``tasks.blobs``, local or object storage) under its key in ``files/``, and ``manifest.json``
with every file's SHA-256 and size, the database, and the schema: the migrations applied to it.

It is consistent while the server runs because of the blob store's one rule: a file is durable
before any row names it, and never changes. So the database is copied first (one instant of it),
then the store: every file a row of the snapshot names was there before the snapshot was taken;
files stored later are copied too and are harmless (nothing names them). A content-addressed file
is checked against its name as it is copied, so a damaged store stops the backup instead of
going into it. The folder is written beside its final place and renamed when complete: a
half-written backup never has the name.

Restoring checks before it writes: the manifest, every file's size and SHA-256, that the backup's
schema is not newer than this release's (migrations it does not know), that the database is of
the same kind and the installation is empty. Then the files go into the store and the database
is put in place in one step; if that fails, the files this restore added are taken back. A
backup from an older release is migrated forward (``migrate``) once it is in place.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import DatabaseError, connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

from tasks import blobs, snapshots
from tasks.models import Run, Task

FORMAT = 1
MANIFEST = "manifest.json"
FILES = "files"
CHUNK = 1 << 20


class BackupRefused(RuntimeError):
    """A backup that cannot be written or restored; the message says why, and that nothing was."""


@dataclass(frozen=True)
class Outcome:
    folder: Path
    database_bytes: int
    files: int
    file_bytes: int
    migrations: int
    seconds: float
    migrated: list[str]  # migrations applied after a restore (a backup from an older release)


def applied_migrations() -> list[str]:
    """The schema version: every migration applied to the database, as ``app.name``, sorted."""
    return sorted(f"{app}.{name}" for app, name in MigrationRecorder(connection).applied_migrations())


def known_migrations() -> set[str]:
    loader = MigrationLoader(None, ignore_no_migrations=True)
    return {f"{app}.{name}" for app, name in loader.disk_migrations}


def backup(folder: Path, say: Callable[[str], None] = lambda _: None) -> Outcome:
    """Write a backup into ``folder`` (absent or empty)."""
    started = time.monotonic()
    folder = Path(folder).absolute()
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise BackupRefused(f"{folder} exists and is not an empty folder; name a new one (nothing was written)")
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.partial-"))
    try:
        schema = applied_migrations()
        say("copying the database")
        database = snapshots.dump(partial)
        if applied_migrations() != schema:
            raise BackupRefused("migrations ran while the database was copied; run the backup again")
        say("copying the stored files")
        files = {database.name: _digest(database)}
        skipped = 0
        for key in blobs.stored_keys():
            copied = _copy_blob(key, partial / FILES / key)
            if copied is None:
                skipped += 1  # removed since it was listed: nothing in the snapshot names it
            else:
                files[f"{FILES}/{key}"] = copied
        manifest = {"format": FORMAT, "created_at": timezone.now().isoformat(), "database": {
            "vendor": snapshots.vendor(), "file": database.name}, "schema": schema,
            "files": {name: {"sha256": sha, "size": size} for name, (sha, size) in sorted(files.items())}}
        written = partial / MANIFEST
        written.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        with written.open("rb+") as stream:
            os.fsync(stream.fileno())
        if folder.exists():
            folder.rmdir()
        os.replace(partial, folder)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    blob_sizes = [size for name, (_, size) in files.items() if name.startswith(FILES + "/")]
    return Outcome(folder, files[database.name][1], len(blob_sizes), sum(blob_sizes), len(schema),
                   time.monotonic() - started, [])


def _copy_blob(key: str, target: Path) -> tuple[str, int] | None:
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    try:
        source = blobs.storage().open(key, "rb")
    except FileNotFoundError:
        return None
    with source, target.open("wb") as output:
        for chunk in iter(lambda: source.read(CHUNK), b""):
            digest.update(chunk)
            output.write(chunk)
            size += len(chunk)
        output.flush()
        os.fsync(output.fileno())
    folder, name = blobs.parse_key(key) or ("", "")
    if folder not in blobs.NAMED and digest.hexdigest() != name:
        raise BackupRefused(f"the stored file {key} does not have the SHA-256 it is stored under: the store is "
                            "damaged (restore that file from an earlier backup); nothing was written")
    return digest.hexdigest(), size


def _digest(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(CHUNK), b""):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest, checked against every file of the backup (``BackupRefused`` naming each problem)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BackupRefused(f"{folder} is not a folder")
    try:
        manifest = orjson.loads((folder / MANIFEST).read_bytes())
    except FileNotFoundError:
        raise BackupRefused(f"{folder} has no {MANIFEST}: it is not a backup, or an unfinished one") from None
    except orjson.JSONDecodeError as error:
        raise BackupRefused(f"{MANIFEST} is not valid JSON ({error}): the backup is damaged") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("format"), int):
        raise BackupRefused(f"{MANIFEST} has no format number: it is not a backup this server wrote")
    if manifest["format"] > FORMAT:
        raise BackupRefused(f"the backup's format {manifest['format']} is newer than this release reads ({FORMAT}); "
                            "restore it with the release that wrote it or a newer one")
    files, database, schema = manifest.get("files"), manifest.get("database"), manifest.get("schema")
    if (not isinstance(files, dict) or not isinstance(database, dict) or not isinstance(schema, list)
            or database.get("vendor") not in snapshots.FILES or database.get("file") not in files):
        raise BackupRefused(f"{MANIFEST} lacks its list of files, its database or its schema: the backup is damaged")
    problems = []
    for name, entry in sorted(files.items()):
        path = folder / name
        if ".." in Path(name).parts or Path(name).is_absolute():
            problems.append(f"{name}: not a path inside the backup")
        elif not path.is_file():
            problems.append(f"{name}: missing")
        elif (actual := _digest(path)) != (entry.get("sha256"), entry.get("size")):
            problems.append(f"{name}: {actual[1]:,} bytes with SHA-256 {actual[0][:12]}..., the manifest says "
                            f"{entry.get('size'):,} bytes with {str(entry.get('sha256'))[:12]}...")
    listed = {folder / name for name in files} | {folder / MANIFEST}
    problems += [f"{path.relative_to(folder)}: not in the manifest" for path in sorted(folder.rglob("*"))
                 if path.is_file() and path not in listed]
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise BackupRefused(f"the backup is damaged ({len(problems)} problem(s)): {shown}")
    return manifest


def installation_contents() -> str | None:
    """What this installation holds already, in words, or None when it is empty (no accounts,
    tasks or runs; a database that was never migrated is empty)."""
    try:
        counts = {"accounts": get_user_model().objects.count(), "tasks": Task.objects.count(),
                  "runs": Run.objects.count()}
    except DatabaseError:  # no tables yet
        connection.close()
        return None
    held = [f"{count} {name}" for name, count in counts.items() if count]
    stored = next(iter(blobs.stored_keys()), None)
    if stored:
        held.append(f"stored files ({stored}, ...)")
    return ", ".join(held) or None


def restore(folder: Path, say: Callable[[str], None] = lambda _: None) -> Outcome:
    """Restore the backup in ``folder`` onto this (empty) installation."""
    started = time.monotonic()
    folder = Path(folder).absolute()
    say("checking every file of the backup")
    manifest = read_manifest(folder)
    unknown = sorted(set(manifest["schema"]) - known_migrations())
    if unknown:
        raise BackupRefused(f"the backup was made by a newer release: its database has {len(unknown)} migration(s) "
                            f"this release does not know ({', '.join(unknown[:5])}); upgrade this installation "
                            "first (docs: Upgrades), then restore; nothing was restored")
    if manifest["database"]["vendor"] != snapshots.vendor():
        raise BackupRefused(f"the backup holds a {manifest['database']['vendor']} database and this installation "
                            f"uses {snapshots.vendor()}; restore onto an installation with the same database; "
                            "nothing was restored")
    held = installation_contents()
    if held:
        raise BackupRefused(f"this installation is not empty ({held}); restore only onto a new one (an empty "
                            "database and store); nothing was restored")
    blob_names = sorted(name for name in manifest["files"] if name.startswith(FILES + "/"))
    say(f"storing {len(blob_names)} files")
    added: list[tuple[str, str]] = []
    try:
        for name in blob_names:
            _put_blob(name[len(FILES) + 1:], folder / name, added)
        say("putting the database in place")
        snapshots.load(folder / manifest["database"]["file"], manifest["database"]["vendor"])
    except BaseException:
        for place, sha in added:
            blobs.forget(place, sha)
        raise
    missing = sorted(known_migrations() - set(applied_migrations()))
    if missing:
        say(f"applying the {len(missing)} migration(s) of this release the backup predates")
        call_command("migrate", verbosity=0)
    sizes = [manifest["files"][name]["size"] for name in blob_names]
    return Outcome(folder, manifest["files"][manifest["database"]["file"]]["size"], len(sizes), sum(sizes),
                   len(manifest["schema"]), time.monotonic() - started, missing)


def _put_blob(key: str, path: Path, added: list[tuple[str, str]]) -> None:
    parsed = blobs.parse_key(key)
    if parsed is None:
        raise BackupRefused(f"{FILES}/{key} is not a file the store keeps; the backup is damaged")
    folder, name = parsed
    if folder in blobs.NAMED:
        handle, written = tempfile.mkstemp(dir=blobs.staging(folder), prefix=".restore-")
        os.close(handle)
        shutil.copyfile(path, written)
        if blobs.keep_named(folder, name, written):
            added.append(parsed)
        return
    stored = blobs.store(folder, path)
    if stored.sha256 != name:  # checked with the manifest already; a disk failing under us
        raise BackupRefused(f"{FILES}/{key} changed while it was restored; nothing was restored")
    if stored.created:
        added.append(parsed)


__all__ = ["FORMAT", "MANIFEST", "BackupRefused", "Outcome", "applied_migrations", "backup", "installation_contents",
           "known_migrations", "read_manifest", "restore"]
