"""A private PostgreSQL cluster (initdb, pg_ctl) and scratch databases on a shared server.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from devtools.workers.processes import free_port

# A private PostgreSQL cluster ----------------------------------------------------------------------

def postgres_bin() -> Path | None:
    """The directory of initdb/pg_ctl: Debian keeps them out of PATH, under /usr/lib/postgresql/N/bin."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


class PrivatePostgres:
    """A PostgreSQL cluster of our own on a free port and a temporary directory: it can be stopped
    and restarted without touching the shared server. Runs as ``postgres`` when we are root."""

    def __init__(self, fast: bool = True) -> None:
        bin_dir = postgres_bin()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL's initdb/pg_ctl are not installed")
        self.bin_dir, self.fast = bin_dir, fast
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="evalserver-pg-"))
        self.data = self.directory / "data"
        self.log_path = self.directory / "postgres.log"
        self._as: list[str] = []
        if os.geteuid() == 0:  # initdb refuses to run as root
            account = pwd.getpwnam("postgres")
            os.chown(self.directory, account.pw_uid, account.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *command: str, timeout: float = 60) -> None:
        completed = subprocess.run([*self._as, *command], capture_output=True, text=True, timeout=timeout,
                                   cwd=self.directory)
        if completed.returncode:
            raise RuntimeError(f"{' '.join(command)} failed:\n{completed.stdout[-1500:]}{completed.stderr[-1500:]}"
                               f"\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def init(self) -> None:
        self._run(str(self.bin_dir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                  "-E", "UTF8", "--no-sync", "--no-instructions")
        self.start()

    def start(self) -> None:
        options = [f"-p {self.port}", "-c listen_addresses=127.0.0.1", f"-k {self.directory}",
                   "-c max_connections=60"]
        if self.fast:  # the test is about restarts, not durability
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log_path), "-w", "-t", "30",
                  "-o", " ".join(options), "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def destroy(self) -> None:
        try:
            if self.running():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def scratch_database(server_url: str, name: str) -> str:
    """Drop and create ``name`` on a PostgreSQL server; return its URL."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(f"{server_url}/postgres", autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return f"{server_url}/{name}"


def drop_database(server_url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(f"{server_url}/postgres", autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
