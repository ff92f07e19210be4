"""The reliability report's bookkeeping (``Tally``, ``Fault``), its database handle and its
sites: gunicorn and Celery workers on one broker queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools.workers import (  # noqa: E402
    BROKERS,
    Process,
    Reply,
    call,
    free_port,
    looks_like_traceback,
    manage,
    new_queue,
    remove_queue,
    start_gunicorn,
    start_worker,
    wait_until,
)

TEAMS, UPLOADS_PER_TEAM, DAILY_QUOTA = 20, 5, 3
BOARD_RUNS = 500
BIG_DIALOGUES = 20_000
JSON_TARGET_P95 = 0.200
CACHE_DB = 12


def say(message: str) -> None:
    print(f"[reliability] {message}", flush=True)


@dataclass
class Fault:
    name: str
    ok: bool
    outcome: str


@dataclass
class Tally:
    inputs_tried: int = 0
    rejected_correctly: int = 0
    rejection_problems: list[str] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    accepted: set[int] = field(default_factory=set)  # runs answered 202 (or made to be scored) in the scratch db
    tracebacks: int = 0
    unclean: int = 0
    quota_violations: int = 0
    lost: int = 0
    duplicates: int = 0
    phantoms: int = 0
    drill_accepted: int = 0
    load_rows: list[tuple[str, str]] = field(default_factory=list)
    targets_missed: list[str] = field(default_factory=list)
    targets_judged: list[str] = field(default_factory=list)
    names_tried: int = 0
    names_refused: int = 0
    name_problems: list[str] = field(default_factory=list)
    trust_rows: list[tuple[str, str]] = field(default_factory=list)  # issue 11's probes
    trust_problems: int = 0
    kind_inputs: int = 0  # KIND_CASES sent (issue 24)

    def trust(self, name: str, row: tuple[str, int]) -> None:
        text, problems = row
        self.trust_rows.append((name, text))
        self.trust_problems += problems

    def see(self, reply: Reply) -> Reply:
        if looks_like_traceback(reply):
            self.tracebacks += 1
        return reply


# The database, straight ----------------------------------------------------------------------------

class Database:
    def __init__(self, url: str) -> None:
        import psycopg

        self.url = url
        self.connection = psycopg.connect(url, autocommit=True)

    def one(self, query: str, *params: Any) -> Any:
        row = self.connection.execute(query, params).fetchone()
        return None if row is None else (row[0] if len(row) == 1 else row)

    def all(self, query: str, *params: Any) -> list[tuple]:
        return self.connection.execute(query, params).fetchall()

    def sql(self, query: str, *params: Any) -> list[tuple]:
        """Any statement: the rows of a query, nothing for an UPDATE."""
        cursor = self.connection.execute(query, params)
        return cursor.fetchall() if cursor.description else []

    def status(self, run_id: int) -> str:
        return self.one("SELECT status FROM tasks_run WHERE id = %s", run_id)

    def wait_status(self, run_id: int, wanted: set[str], timeout: float, *processes: Process,
                    interval: float = 0.05) -> str:
        wait_until(f"run {run_id} to be {sorted(wanted)}", lambda: self.status(run_id) in wanted, timeout,
                   *processes, interval=interval)
        return self.status(run_id)

    def close(self) -> None:
        self.connection.close()


# A site: gunicorn and workers on one broker ---------------------------------------------------------

class Site:
    """gunicorn and Celery workers sharing one database, one broker queue and one upload folder."""

    def __init__(self, label: str, env: dict[str, str], broker_url: str, queue: str, work_dir: Path) -> None:
        self.label, self.env, self.broker_url, self.queue, self.work_dir = label, env, broker_url, queue, work_dir
        self.processes: list[Process] = []
        self.base_url = ""

    def worker(self, node: str) -> Process:
        worker = start_worker(self.env, self.queue, node, self.work_dir / f"{self.label}-{node}.log")
        self.processes.append(worker)
        worker.wait_for_log(" ready.")
        return worker

    def web(self, env: dict[str, str] | None = None, name: str = "web", workers: int | None = None,
            threads: int | None = None) -> str:
        port = free_port()
        web = start_gunicorn(env or self.env, port, self.work_dir / f"{self.label}-{name}.log", workers, threads)
        self.processes.append(web)
        base_url = f"http://127.0.0.1:{port}"
        wait_until(f"{name} to answer", lambda: call(f"{base_url}/healthz").status == 200, 45, web)
        if not self.base_url:
            self.base_url = base_url
        return base_url

    def requeue_stuck(self) -> list[int]:
        answer = manage(self.env, "requeue_stuck").strip()
        return [int(run_id) for run_id in answer.split(": ", 1)[1].split(", ")] if ": " in answer else []

    def close(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        remove_queue(self.broker_url, self.queue)


@contextmanager
def site(label: str, base_env: dict[str, str], broker: str, work_dir: Path) -> Iterator[Site]:
    _, _, broker_url = BROKERS[broker]
    queue = new_queue(f"evalserver-reliability-{label}")
    env = {**base_env, "CELERY_BROKER_URL": broker_url, "EVALSERVER_TEST_QUEUE": queue}
    current = Site(label, env, broker_url, queue, work_dir)
    try:
        yield current
    finally:
        current.close()
