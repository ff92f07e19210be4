#!/usr/bin/env python3
"""Burst statistics: 10 uploads in 5 s against a live server; when do the stored statistics cover
every run on the board?

Issue 11 (defect 2): on the embedded default, ten uploads 0.6 s apart started 4-5 statistics
computations at once (each 77-95 s instead of 20-26 s alone) and the last writer stored
statistics over only 5 of 12 runs. The target: statistics over every run, visible within the
computation's own time plus the debounce after the last upload, one computation at a time.

By default it runs the embedded default as a new user would: a scratch ``EVALSERVER_VAR_DIR``
with SQLite, ``manage.py demo`` (300 dialogues, B = 10,000), then ``manage.py runserver`` without
a broker (scoring in-process, statistics in a background thread after the 5 s debounce).
``--database postgres://.../name`` uses a scratch PostgreSQL database (dropped and re-created)
and gunicorn (``gunicorn.conf.py``: several worker processes, each with its own timers; the
claim in the database must keep them to one computation).

``--broker redis://127.0.0.1:6379/13`` (with ``--database``) is the production shape: gunicorn,
PostgreSQL, a Celery worker on a queue of its own; the worker computes the statistics.

``burst_statistics()`` is the measurement alone, for the reliability report: it needs the base
URL, a participant's token, the task, the gold, a callable that runs SQL on the server's database
and the log of the processes that compute (the web server in the thread mode, the Celery
worker otherwise), whose ``leaderboard.scheduling`` lines give each computation's start and end.

    .venv/bin/python benchmarks/statistics_burst.py
    .venv/bin/python benchmarks/statistics_burst.py --database postgres://postgres@127.0.0.1:5432/burst_bench
    .venv/bin/python benchmarks/statistics_burst.py --database postgres://postgres@127.0.0.1:5432/burst_bench \
        --broker redis://127.0.0.1:6379/13
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
import orjson  # noqa: E402

from devtools.workers import (  # noqa: E402
    PYTHON,
    Process,
    call,
    drop_database,
    free_port,
    manage,
    new_queue,
    remove_queue,
    scratch_database,
    site_env,
    start_gunicorn,
    start_worker,
    upload,
    wait_until,
)
from fixtures.synthetic import generate_run  # noqa: E402

Rows = Callable[[str, tuple], list[tuple]]
# The project's log format (web processes) and Celery's ("[2026-11-23 05:40:01,123: INFO/MainProcess] ...").
LOG_LINE = re.compile(r"^\[?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}).*?statistics of "
                      r"(\S+): generation (\d+) (started|finished in ([\d.]+) s)")


@dataclass
class BurstResult:
    uploads: int
    accepted: int
    upload_seconds: float  # first upload sent to last upload answered
    runs_on_board: int
    covered: int  # runs on the board the stored statistics cover at the end
    computations: int  # computations started (claims won) during the burst and after it
    max_concurrent: int  # most computations of the board running at the same time (server log)
    complete_after: float | None  # seconds from the last upload's answer to statistics over every run
    last_computation: float  # seconds the final computation took
    debounce: float

    @property
    def target(self) -> float:
        return self.last_computation + self.debounce

    @property
    def passed(self) -> bool:
        # One second of slack: the poll interval and the timer's wake-up.
        return (self.complete_after is not None and self.covered == self.runs_on_board
                and self.computations >= 1 and self.max_concurrent == 1
                and self.complete_after <= self.target + 1.0)

    def lines(self) -> list[str]:
        done = "never" if self.complete_after is None else f"{self.complete_after:.1f} s"
        return [
            f"uploads accepted                      {self.accepted} of {self.uploads} in {self.upload_seconds:.1f} s",
            f"computations started                  {self.computations}",
            f"max computations at once              {self.max_concurrent}",
            f"last upload -> complete statistics    {done}",
            f"  target: own time + debounce         {self.last_computation:.1f} s + {self.debounce:.0f} s = "
            f"{self.target:.1f} s",
            f"statistics cover                      {self.covered} of the {self.runs_on_board} runs on the board",
            f"verdict                               {'PASS' if self.passed else 'FAIL'}",
        ]


def board_runs(rows: Rows, task_id: int) -> set[int]:
    """The runs of the public phaseless board: scored, public, not withdrawn."""
    return {row[0] for row in rows("SELECT id FROM tasks_run WHERE task_id = %s AND status = 'done' "
                                   "AND is_public AND withdrawn_at IS NULL", (task_id,))}


def stored(rows: Rows, task_id: int) -> tuple[set[int], dict[str, Any]]:
    record = rows("SELECT run_ids FROM leaderboard_taskstatistics WHERE task_id = %s AND phase_id IS NULL", (task_id,))
    state = rows("SELECT requested, completed, claim_token, computations, last_seconds FROM "
                 "leaderboard_statisticsstate WHERE task_id = %s AND phase_id IS NULL", (task_id,))
    run_ids = record[0][0] if record else []
    run_ids = set(json.loads(run_ids) if isinstance(run_ids, str) else run_ids)
    names = ("requested", "completed", "claim_token", "computations", "last_seconds")
    return run_ids, dict(zip(names, state[0], strict=True)) if state else {}


def concurrency(log: str, since: datetime) -> tuple[int, int]:
    """Computations started after ``since`` and the most running at once, from the server's log."""
    events: list[tuple[datetime, int]] = []
    started = 0
    for line in log.splitlines():
        match = LOG_LINE.match(line)
        if not match:
            continue
        when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
        if when < since:
            continue
        if match.group(4) == "started":
            started += 1
            events.append((when, 1))
        else:
            events.append((when, -1))
    running = most = 0
    for _, step in sorted(events, key=lambda event: (event[0], event[1])):
        running += step
        most = max(most, running)
    return started, most


def burst_statistics(base_url: str, slug: str, token: str, task_id: int, gold: list[dict[str, Any]], rows: Rows,
                     server_log: Callable[[], str], uploads: int = 10, within: float = 5.0, debounce: float = 5.0,
                     timeout: float = 600.0) -> BurstResult:
    """``uploads`` runs uploaded evenly over ``within`` seconds; then wait until the stored
    statistics cover every run on the board and no computation is pending."""

    def at_rest() -> bool:
        on_board = board_runs(rows, task_id)
        covered, state = stored(rows, task_id)
        unfinished = rows("SELECT count(*) FROM tasks_run WHERE task_id = %s AND status IN ('queued', 'scoring')",
                          (task_id,))[0][0]
        return (not unfinished and bool(on_board) and on_board <= covered and bool(state)
                and state["requested"] == state["completed"] and not state["claim_token"])

    wait_until("the board to be at rest before the burst", at_rest, timeout, interval=0.5)
    since = datetime.now()
    contents = [orjson.dumps(generate_run(gold, "noisy", noise=0.1 + 0.08 * number, seed=500 + number))
                for number in range(uploads)]
    first = time.monotonic()
    accepted = 0
    for number, content in enumerate(contents):
        due = first + number * within / max(1, uploads - 1)
        time.sleep(max(0.0, due - time.monotonic()))
        reply = upload(base_url, slug, token, content, f"burst-{number + 1}-{int(time.time())}")
        accepted += reply.status == 202
    last_answer = time.monotonic()
    complete_after = None
    deadline = last_answer + timeout
    while time.monotonic() < deadline:
        if at_rest():
            complete_after = time.monotonic() - last_answer
            break
        time.sleep(0.2)
    on_board = board_runs(rows, task_id)
    covered, state = stored(rows, task_id)
    computations, most = concurrency(server_log(), since)
    return BurstResult(uploads, accepted, last_answer - first, len(on_board), len(on_board & covered), computations,
                       most, complete_after, float(state.get("last_seconds") or 0.0), debounce)


# Set-up ------------------------------------------------------------------------------------------------

def sqlite_rows(path: Path) -> Rows:
    def rows(sql: str, params: tuple) -> list[tuple]:
        with sqlite3.connect(path, timeout=20) as db:
            return db.execute(sql.replace("%s", "?").replace(" AND is_public", " AND is_public = 1"),
                              params).fetchall()
    return rows


def postgres_rows(url: str) -> Rows:
    import psycopg

    def rows(sql: str, params: tuple) -> list[tuple]:
        with psycopg.connect(url, autocommit=True) as db:
            return db.execute(sql, params).fetchall()
    return rows


def run_burst(database: str | None = None, broker: str | None = None, uploads: int = 10, within: float = 5.0,
              dialogues: int = 300) -> tuple[str, BurstResult]:
    """Set up a site (the embedded default, or gunicorn on ``database`` with a Celery worker on
    ``broker``), upload the burst and wait for complete statistics; everything is removed after."""
    work = Path(tempfile.mkdtemp(prefix="statistics-burst-"))
    server: Process | None = None
    worker: Process | None = None
    database_url = ""
    queue = new_queue("evalserver-burst") if broker else None
    try:
        if database:
            server_url, name = database.rsplit("/", 1)
            database_url = scratch_database(server_url, name)
        env = site_env(database_url, work / "var", broker_url=broker, queue=queue)
        env.pop("EVALSERVER_STATISTICS_MODE")  # the default: a thread without a broker, else celery
        if not database_url:
            env.pop("DATABASE_URL")  # the default: SQLite in the var folder
        manage(env, "migrate", "--no-input", timeout=600)
        if broker:  # before the demo, which sends its runs' scoring jobs to it
            worker = start_worker(env, queue, "burst", work / "worker.log")
            worker.wait_for_log("ready")
        manage(env, "demo", "--dialogues", str(dialogues), "--password", "burst-pass-1", timeout=900)
        logins = (work / "var" / "demo-logins.txt").read_text()
        token = re.search(r"alice's API token: (\w+)", logins).group(1)
        gold = json.loads((work / "var" / "demo" / "gold.json").read_text())
        port = free_port()
        computing_log: Callable[[], str]
        if worker is not None:
            server = start_gunicorn(env, port, work / "server.log")
            rows = postgres_rows(database_url)
            computing_log = worker.log
            shape = "gunicorn + PostgreSQL + a Celery worker (statistics in the worker)"
        elif database:
            server = start_gunicorn(env, port, work / "server.log")
            rows = postgres_rows(database_url)
            computing_log = server.log
            shape = "gunicorn + PostgreSQL, statistics in threads of the web workers"
        else:
            server = Process("runserver", [PYTHON, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
                             env, work / "server.log")
            rows = sqlite_rows(work / "var" / "db.sqlite3")
            computing_log = server.log
            shape = "manage.py runserver + SQLite, statistics in a background thread (embedded default)"
        base_url = f"http://127.0.0.1:{port}"
        wait_until("the server to answer", lambda: call(f"{base_url}/api/v1/tasks/", timeout=5).status == 200, 60,
                   server)
        task_id = rows("SELECT id FROM tasks_task WHERE slug = %s", ("stc3-demo",))[0][0]
        result = burst_statistics(base_url, "stc3-demo", token, task_id, gold, rows, computing_log,
                                  uploads=uploads, within=within)
        return shape, result
    finally:
        for process in (server, worker):
            if process is not None:
                process.stop()
        if queue:
            remove_queue(broker, queue)
        if database and database_url:
            drop_database(database.rsplit("/", 1)[0], database.rsplit("/", 1)[1])
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", help="a PostgreSQL URL whose database is dropped and re-created; "
                        "default: SQLite in a scratch folder (the embedded default)")
    parser.add_argument("--broker", help="with --database: a Celery broker URL; a worker computes the statistics")
    parser.add_argument("--uploads", type=int, default=10)
    parser.add_argument("--within", type=float, default=5.0, help="seconds over which the uploads are spread")
    parser.add_argument("--dialogues", type=int, default=300)
    args = parser.parse_args(argv)
    if args.broker and not args.database:
        parser.error("--broker needs --database (a worker cannot share the web server's SQLite)")
    shape, result = run_burst(args.database, args.broker, args.uploads, args.within, args.dialogues)
    print(f"Burst statistics: {args.uploads} uploads in {args.within:.0f} s, {args.dialogues} dialogues, "
          f"B = 10,000; {shape}")
    for line in result.lines():
        print("  " + line)
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
