"""The database half of a backup (``tasks.backup``): a consistent snapshot while the server runs,
and putting one back, on each database the server supports.

- **SQLite** (the embedded default): SQLite's online backup API (``sqlite3.Connection.backup``)
  copies every page in one read transaction; in write-ahead-log mode readers never block writers,
  so uploads and scoring go on meanwhile and the copy is the database as of one instant.
- **PostgreSQL**: ``pg_dump --format=custom`` (one repeatable-read snapshot, writers go on). It must
  be at least the server's major version (pg_dump refuses to dump a newer server, and says so
  only after connecting); a missing or older one is named before anything is written.

Restoring replaces an empty installation's database in one step: the SQLite file is renamed into
place; on PostgreSQL, dropping the installation's tables and loading the dump run in one
transaction (``psql --single-transaction``), so a failure leaves the database as it was.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from django.db import connection

SQLITE_FILE = "database.sqlite3"
POSTGRES_FILE = "database.pgdump"
FILES = {"sqlite": SQLITE_FILE, "postgresql": POSTGRES_FILE}


class SnapshotRefused(RuntimeError):
    """A snapshot that cannot be taken or put back; the message says why and what to do."""


def vendor() -> str:
    if connection.vendor not in FILES:
        raise SnapshotRefused(f"backups support SQLite and PostgreSQL, not {connection.vendor}")
    return connection.vendor


def dump(folder: Path) -> Path:
    """Write the database's snapshot into ``folder``; returns the file."""
    target = folder / FILES[vendor()]
    if vendor() == "sqlite":
        _sqlite_dump(target)
    else:
        _postgres_dump(target)
    return target


def load(snapshot: Path, snapshot_vendor: str) -> None:
    """Put ``snapshot`` in place of this installation's database (which the caller found empty)."""
    if snapshot_vendor != vendor():
        raise SnapshotRefused(f"the backup holds a {snapshot_vendor} database and this installation uses "
                              f"{vendor()}: restore it onto an installation with the same database")
    connection.close()
    if vendor() == "sqlite":
        _sqlite_load(snapshot)
    else:
        _postgres_load(snapshot)
    connection.close()


def _sqlite_name() -> str:
    return str(connection.settings_dict["NAME"])


def _sqlite_dump(target: Path) -> None:
    name = _sqlite_name()
    source = sqlite3.connect(name, timeout=60, uri=name.startswith("file:"))
    copy = sqlite3.connect(target)
    try:
        # pages=-1: every page in one step, one read transaction, hence one instant of the database.
        # In steps, every write by another process between two steps starts the copy over.
        source.backup(copy, pages=-1)
        copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
    finally:
        copy.close()
        source.close()
    _fsync(target)


def _sqlite_load(snapshot: Path) -> None:
    name = Path(_sqlite_name())
    name.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=name.parent, prefix=f".{name.name}.restore-")
    os.close(handle)
    try:
        shutil.copyfile(snapshot, temporary)
        _fsync(Path(temporary))
        check = sqlite3.connect(temporary)
        try:
            verdict = check.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            check.close()
        if verdict != "ok":
            raise SnapshotRefused(f"the database in the backup fails SQLite's integrity check: {verdict}")
        # A write-ahead log left by the empty database would be replayed over the restored file.
        for suffix in ("-wal", "-shm", "-journal"):
            Path(f"{name}{suffix}").unlink(missing_ok=True)
        os.replace(temporary, name)
    finally:
        Path(temporary).unlink(missing_ok=True)


def _client(program: str) -> str:
    """The PostgreSQL client ``program``, checked against the server's major version."""
    found = shutil.which(program)
    server = connection.pg_version // 10000 if connection.pg_version >= 100000 else connection.pg_version // 100
    package = f"postgresql-client-{server}"
    if not found:
        raise SnapshotRefused(f"{program} is not installed; it comes with the PostgreSQL {server} client "
                              f"(Debian and Ubuntu: apt-get install {package}); nothing was written")
    output = subprocess.run([found, "--version"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"(\d+)(?:\.(\d+))?", output)
    if not match:
        raise SnapshotRefused(f"{program} --version said {output.strip()!r}, which names no version")
    client = int(match.group(1))
    if client < server:
        raise SnapshotRefused(f"{program} is version {client} and the database server {server}: {program} cannot "
                              f"read a newer server; install {package} (or newer); nothing was written")
    return found


def _environment() -> dict[str, str]:
    """libpq's variables for this connection: the password never appears on a command line."""
    settings = connection.settings_dict
    env = {**os.environ}
    for variable, value in (("PGHOST", settings.get("HOST")), ("PGPORT", settings.get("PORT")),
                            ("PGUSER", settings.get("USER")), ("PGPASSWORD", settings.get("PASSWORD")),
                            ("PGDATABASE", settings.get("NAME"))):
        if value:
            env[variable] = str(value)
    options: dict[str, Any] = settings.get("OPTIONS") or {}
    for option, variable in (("sslmode", "PGSSLMODE"), ("sslrootcert", "PGSSLROOTCERT"),
                             ("sslcert", "PGSSLCERT"), ("sslkey", "PGSSLKEY")):
        if options.get(option):
            env[variable] = str(options[option])
    return env


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command, env=_environment(), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip().splitlines()
        raise SnapshotRefused(f"{what} failed: " + (" / ".join(message[-3:]) or f"exit status {result.returncode}"))


def _postgres_dump(target: Path) -> None:
    connection.ensure_connection()
    _run([_client("pg_dump"), "--format=custom", "--no-owner", "--no-privileges", f"--file={target}"], "pg_dump")
    _fsync(target)


def _postgres_load(snapshot: Path) -> None:
    connection.ensure_connection()
    restore, psql = _client("pg_restore"), _client("psql")
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        tables = [row[0] for row in cursor.fetchall()]
    connection.close()
    with tempfile.TemporaryDirectory(prefix="evalserver-restore-") as work:
        script, drops = Path(work) / "restore.sql", Path(work) / "drop.sql"
        _run([restore, "--no-owner", "--no-privileges", f"--file={script}", str(snapshot)], "pg_restore")
        # The tables an empty installation's migrate made, dropped in the transaction that loads the
        # dump: if loading fails, they are back as they were.
        drops.write_text("".join(f'DROP TABLE IF EXISTS "{table}" CASCADE;\n' for table in tables))
        _run([psql, "--no-psqlrc", "--quiet", "--set=ON_ERROR_STOP=1", "--single-transaction",
              f"--file={drops}", f"--file={script}"], "loading the dump (psql)")


def _fsync(path: Path) -> None:
    with path.open("rb+") as stream:
        os.fsync(stream.fileno())


__all__ = ["FILES", "SnapshotRefused", "dump", "load", "vendor"]
