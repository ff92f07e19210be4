#!/usr/bin/env python3
"""How long a backup of a realistic round takes, and its restore (issue 41, item 1).

    .venv/bin/python benchmarks/backup_round.py                  # SQLite, files on the local disk
    .venv/bin/python benchmarks/backup_round.py --database-url postgres://postgres@127.0.0.1:5432
    .venv/bin/python benchmarks/backup_round.py --runs 30 --dialogues 1672

The round: an STC-3 task the size of STC-3's English test set (1,672 dialogues by default), a
development phase over and a test phase open, three teams with ``--runs`` runs between them, every
run scored and the statistics of both boards computed; then ``manage.py backup`` of it, ``manage.py
restore --check`` of the backup, and ``manage.py restore`` onto a new installation, each timed as
an operator runs it (a process of its own, Django's start included). A new installation on PostgreSQL
is a scratch database on the server named, dropped at the end.

Measured (2026-11-29, 2 cores shared with 7 other sessions; SQLite, local disk; 1,672 dialogues per
gold, 30 runs, statistics of both boards; docs/operators/backups.md quotes it):

    backup:            19.8 s     63.2 MB   (the command's own work 4.0 s: database 10.7 MB, 36 files 52.5 MB)
    restore --check:   22.2 s
    restore:           17.6 s  onto an empty installation (the command's own work 2.7 s)

The rest of each figure is Django's start in a new process on the loaded machine (about 15 s).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def build(spec: dict) -> dict:
    """Inside Django: the round (runs in the child process of its installation)."""
    import django

    django.setup()
    from datetime import timedelta

    import orjson
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from fixtures.synthetic import generate_gold, generate_run
    from leaderboard.statistics import compute_task_statistics
    from tasks import jobs, organising
    from tasks.models import Phase, Team
    from tasks.submissions import Submission, submit_run

    call_command("migrate", verbosity=0)
    now = timezone.now()
    task = organising.create_task("round", "", "A round the size of STC-3 English")
    golds = {}
    for label, seed in (("development", 1), ("test", 2)):
        golds[label] = generate_gold(spec["dialogues"], seed=seed)
        version = organising.load_gold_version(task, orjson.dumps(golds[label]), f"{label}.json", label=label)
        Phase.objects.create(task=task, name=label, kind=Phase.DEVELOPMENT if label == "development" else Phase.TEST,
                             gold_version=version, starts_at=now - timedelta(days=30 if label == "development" else 1),
                             ends_at=now - timedelta(days=1) if label == "development" else now + timedelta(days=7))
    users = get_user_model()
    members = []
    for number in range(3):
        user = users.objects.create_user(f"member{number}")  # no password: never signs in
        Team.objects.create(name=f"Team {number + 1}", slug=f"team-{number + 1}").members.add(user)
        members.append(user)
    phase = task.phases.get(name="test")
    for number in range(spec["runs"]):
        content = orjson.dumps(generate_run(golds["test"], noise=0.2 + 0.02 * number, seed=number))
        run = submit_run(task, members[number % 3], Submission(content=content, filename="run.json",
                                                               name=f"run-{number + 1}"), phase)
        jobs.score_run(run.pk)
    compute_task_statistics(task.pk)
    return {"runs": task.runs.count()}


def env_for(folder: Path, database_url: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("EVALSERVER_", "DJANGO_"))}
    env.update(EVALSERVER_VAR_DIR=str(folder), DATABASE_URL=database_url, DJANGO_SETTINGS_MODULE="evalserver.settings",
               EVALSERVER_STATISTICS_MODE="off", DJANGO_SECURE="false", PYTHONPATH=str(ROOT))
    return env


def timed(env: dict[str, str], *args: str) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run([PYTHON, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return time.monotonic() - started, done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def scratch(server: str, name: str, drop_only: bool = False) -> str:
    import psycopg
    from psycopg import sql

    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        if not drop_only:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return f"{server}/{name}"


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogues", type=int, default=1672)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--database-url", default="", help="a PostgreSQL server (without a database name)")
    parser.add_argument("--build", help=argparse.SUPPRESS)  # the child that builds the round
    options = parser.parse_args()
    if options.build:
        print(json.dumps(build(json.loads(options.build))))
        return
    with tempfile.TemporaryDirectory(prefix="backup-round-") as work:
        work_path = Path(work)
        server = options.database_url.rstrip("/")
        urls = {name: scratch(server, f"backup_round_{name}") if server else
                f"sqlite:///{work_path / name / 'db.sqlite3'}" for name in ("original", "restored")}
        try:
            envs = {}
            for name in urls:
                (work_path / name).mkdir()
                envs[name] = env_for(work_path / name, urls[name])
            spec = json.dumps({"dialogues": options.dialogues, "runs": options.runs})
            seconds, _ = timed(envs["original"], __file__, "--build", spec)
            print(f"round built in {seconds:.0f} s: {options.dialogues:,} dialogues per gold, {options.runs} runs "
                  f"of 3 teams, both boards' statistics ({'PostgreSQL' if server else 'SQLite'}, local disk)")
            backup = work_path / "backup"
            seconds, said = timed(envs["original"], "manage.py", "backup", str(backup))
            print(f"backup:          {seconds:6.1f} s  {folder_bytes(backup) / 1e6:7.1f} MB   ({said})")
            seconds, said = timed(envs["original"], "manage.py", "restore", "--check", str(backup))
            print(f"restore --check: {seconds:6.1f} s")
            timed(envs["restored"], "manage.py", "migrate", "-v0")
            seconds, said = timed(envs["restored"], "manage.py", "restore", str(backup))
            print(f"restore:         {seconds:6.1f} s  onto an empty installation ({said})")
        finally:
            if server:
                for name in urls:
                    scratch(server, f"backup_round_{name}", drop_only=True)


if __name__ == "__main__":
    main()
