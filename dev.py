#!/usr/bin/env python3
"""Set up and run the project with nothing but Python 3.11+.

    python3 dev.py serve   # virtualenv, dependencies, database, demo task; gunicorn at http://127.0.0.1:8000
    python3 dev.py serve 0.0.0.0:8080   # another address (else GUNICORN_BIND, else 127.0.0.1:8000)
    python3 dev.py test    # the whole test suite (uses PostgreSQL, Redis, RabbitMQ on localhost if running)
    python3 dev.py test --quick    # without the tests marked slow; --sqlite: on SQLite even where PostgreSQL runs

Only the standard library is used here: this script is what makes the virtualenv.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import venv
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".installed-pyproject-sha256"


def say(message: str) -> None:
    print(f"[dev.py] {message}", flush=True)


def ensure_environment() -> None:
    """Create .venv and install the project's dependencies when pyproject.toml changed."""
    if not PYTHON.exists():
        say("creating the virtualenv in .venv")
        venv.EnvBuilder(with_pip=True).create(VENV)
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text().strip() == wanted:
        return
    say("installing dependencies (first run takes a minute or two)")
    subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
    subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[dev]"], check=True)
    STAMP.write_text(wanted)


def manage(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([str(PYTHON), str(ROOT / "manage.py"), *args], check=True, cwd=ROOT, env=env)


def reachable(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


DEFAULT_ADDRESS = "127.0.0.1:8000"


def serve_address(args: list[str], environ: Mapping[str, str]) -> str:
    """Where ``serve`` listens: the address given (``dev.py serve 0.0.0.0:8080``), else
    GUNICORN_BIND, else loopback. gunicorn's ``--bind`` wins over gunicorn.conf.py's GUNICORN_BIND,
    so without this a GUNICORN_BIND set for ``dev.py serve`` was silently ignored (issue 37)."""
    if len(args) > 1:
        sys.exit(f"dev.py serve takes at most one address (HOST:PORT), not {len(args)} arguments: {' '.join(args)}")
    if args:
        return args[0]
    return environ.get("GUNICORN_BIND", "").strip() or DEFAULT_ADDRESS


def serve(args: list[str]) -> None:
    address = serve_address(args, os.environ)
    ensure_environment()
    # The quickstart serves plain HTTP on loopback: HTTPS-only cookies would make sign-in impossible.
    os.environ.setdefault("DJANGO_SECURE", "false")
    manage("migrate", "--noinput", "-v", "0")
    manage("collectstatic", "--noinput", "-v", "0")
    manage("demo")
    # Annotation campaigns on the demo tasks (campaigns/ sits above the generic apps, so the demo
    # command, in leaderboard/, does not make them itself).
    manage("demo_campaigns")
    say(f"serving http://{address}/ with gunicorn, a background scoring worker and a statistics worker "
        "(Ctrl-C stops all three)")
    # The production server (gunicorn.conf.py: a process per core, 2 threads each, static files by
    # whitenoise), not Django's development server, whose listen backlog of 10 left 50 readers
    # waiting on TCP retries (issue 28). Without a broker, gunicorn.conf.py starts the background
    # scoring and statistics workers beside it; exec, so that this process is gunicorn's master and
    # a signal sent to it (Ctrl-C, SIGTERM) stops the web processes and the workers.
    os.execv(str(PYTHON), [str(PYTHON), "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"),  # noqa: S606
                           "--chdir", str(ROOT), "--bind", address, "evalserver.wsgi"])


# The second pass of CI: the fast tests again on SQLite, the embedded default, without what needs
# a service (a worker process cannot share the test's SQLite), a browser, or the slow sweeps that
# the PostgreSQL pass runs (the whole suite on both took 16.6 minutes, past CI's 15). Database-
# specific failures (SQLite's 64-bit integers, its locking) then show up in CI, not on a laptop.
SQLITE_MARKS = "not services and not browser and not slow"


def pytest_command(args: list[str]) -> list[str]:
    command = [str(PYTHON), "-m", "pytest", *args]
    if not any(arg.startswith(("-n", "--numprocesses", "--dist")) or arg == "no:xdist" for arg in args):
        # Two processes (pytest-xdist), each with its own test database: about half the time of
        # one process on two cores. "-n 0" runs it in one process. Work stealing: a process that
        # runs out of tests takes half of what the other still has queued, so the sweeps of a
        # minute each (tests/conftest.py queues them first) cannot pile up on one process at the end.
        command += ["-n", "2", "--dist", "worksteal"]
    return command


def test(args: list[str]) -> None:
    """The suite: on PostgreSQL when it answers on 127.0.0.1:5432 (else SQLite); with CI=true,
    then a second pass on SQLite. ``--quick`` leaves out the tests marked slow (the leak matrix,
    the hostile-parameter sweep, the service drills) for everyday work; ``--sqlite`` runs on
    SQLite even where PostgreSQL answers."""
    ensure_environment()
    quick, sqlite_only = "--quick" in args, "--sqlite" in args
    args = [arg for arg in args if arg not in ("--quick", "--sqlite")]
    env = dict(os.environ)
    in_ci = env.get("CI", "").lower() in ("1", "true", "yes")
    if sqlite_only:
        env.pop("DATABASE_URL", None)
    elif "DATABASE_URL" not in env and reachable(5432):
        env["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/evalserver"
    if in_ci and not sqlite_only and "DATABASE_URL" not in env:
        sys.exit("CI=true but PostgreSQL is not reachable on 127.0.0.1:5432")
    on_postgres = env.get("DATABASE_URL", "").startswith("postgres")
    say(f"database: {'PostgreSQL' if on_postgres else 'SQLite'}; "
        f"services tests: {'required (CI)' if in_ci else 'run when the services are reachable'}"
        f"{'; quick: tests marked slow left out' if quick else ''}")
    env.pop("CELERY_BROKER_URL", None)  # the suite's own settings decide; integration tests start their worker
    marks = [SQLITE_MARKS] if in_ci and not on_postgres else []  # CI on SQLite alone: what it can run
    marks += ["not slow"] if quick else []
    first = ["-m", " and ".join(f"({mark})" for mark in marks), *args] if marks else args
    status = subprocess.run(pytest_command(first), cwd=ROOT, env=env).returncode
    if in_ci and on_postgres:
        say(f"second pass on SQLite (the embedded default): -m '{SQLITE_MARKS}', the tests that open the database")
        env.pop("DATABASE_URL")
        # Only the tests that open the test database (tests/conftest.py, DATABASE_TESTS_ONLY): the
        # others ran in the first pass and cannot tell the databases apart.
        env["EVALSERVER_DATABASE_TESTS_ONLY"] = "1"
        marks = SQLITE_MARKS
        second = subprocess.run(pytest_command(["-m", marks, *args]), cwd=ROOT, env=env).returncode
        status = status or second
    sys.exit(status)


def main() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs on whatever python3 the machine has
        sys.exit("Python 3.11 or newer is needed")
    commands = {"serve": serve, "test": test}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    commands[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
