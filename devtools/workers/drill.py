"""PostgreSQL restarted under traffic: the traffic, the drill, and what a clean failure is.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools.workers.brokers import remove_queue
from devtools.workers.data import big_gold, big_run
from devtools.workers.postgres import PrivatePostgres
from devtools.workers.processes import (
    FAULT_LIMITS,
    START_TIMEOUT,
    Process,
    free_port,
    manage,
    site_env,
    start_gunicorn,
    start_worker,
    wait_until,
)
from devtools.workers.seeding import seed_site
from devtools.workers.web import Reply, call, looks_like_traceback, upload, upload_patiently

# PostgreSQL restarted under traffic -------------------------------------------------------------------

def clean_failure(what: str, reply: Reply) -> bool:
    """A refusal a person or a client can act on: a 5xx page or, from the API and the health
    check, JSON saying what is wrong; never a traceback, never a dropped connection."""
    if reply.status not in (500, 502, 503) or looks_like_traceback(reply):
        return False
    if what.startswith("/api/") or what in ("upload", "/healthz"):
        try:
            data = reply.json()
        except ValueError:
            return False
        return bool(data.get("errors") or data.get("status") == "error")
    return "text/html" in reply.content_type


class Traffic:
    """Readers of every kind of page and an uploader, running until stopped; every answer is
    kept as (what, when, status, clean refusal?) and every accepted run's id."""

    def __init__(self, base_url: str, slug: str, token: str, content: bytes, readers_per_path: int = 1) -> None:
        self.base_url, self.slug, self.token, self.content = base_url, slug, token, content
        self.answers: list[tuple[str, float, int, bool]] = []
        self.accepted: list[int] = []
        self.refusals: list[str] = []  # the first few answers that were neither 2xx nor clean
        self._stop = threading.Event()
        self._lock = threading.Lock()
        paths = [f"/api/v1/tasks/{slug}/leaderboard/", f"/tasks/{slug}/", "/healthz", f"/api/v1/tasks/{slug}/my-runs/"]
        self._threads = [threading.Thread(target=self._read, args=(path,), daemon=True)
                         for path in paths for _ in range(readers_per_path)]
        self._threads.append(threading.Thread(target=self._upload, daemon=True))

    def _note(self, what: str, reply: Reply) -> None:
        clean = clean_failure(what, reply)
        with self._lock:
            self.answers.append((what, time.monotonic(), reply.status, clean))
            if reply.status not in (200, 202) and not clean and len(self.refusals) < 10:
                self.refusals.append(f"{what}: {reply.status} {reply.content_type} {reply.body[:300]!r}")

    def _read(self, path: str) -> None:
        while not self._stop.is_set():
            self._note(path, call(self.base_url + path, self.token, timeout=20))
            time.sleep(0.02)

    def _upload(self) -> None:
        number = 0
        while not self._stop.is_set() and number < 500:
            number += 1
            reply = upload(self.base_url, self.slug, self.token, self.content, f"traffic-{number}", timeout=20)
            self._note("upload", reply)
            if reply.status == 202:
                with self._lock:
                    self.accepted.append(reply.json()["id"])
            time.sleep(0.2)

    def __enter__(self) -> Traffic:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def between(self, start: float, end: float) -> list[tuple[str, float, int, bool]]:
        with self._lock:
            return [answer for answer in self.answers if start <= answer[1] < end]


def children(pid: int) -> list[int]:
    """A process's children (gunicorn's workers): one restarted would have a new pid."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@dataclass
class RestartDrill:
    before: Counter  # (what, status) of answers before the outage
    during: Counter  # (what, status, clean refusal?) while PostgreSQL was down or starting
    after: Counter  # (what, status) once the health check passed again
    outage_seconds: float
    recovery_seconds: float  # from PostgreSQL accepting connections to the site's first healthy answer
    accepted: list[int]
    final_statuses: dict[int, str]
    requeued: list[str]  # runs left "scoring" by a cut connection, re-sent by requeue_stuck
    refusals: list[str]  # samples of unclean answers
    processes_kept: bool  # no web or worker process was restarted

    @property
    def unclean(self) -> int:
        return sum(count for (_, status, clean), count in self.during.items()
                   if status not in (200, 202) and not clean)

    @property
    def failed_after(self) -> int:
        return sum(count for (_, status), count in self.after.items() if status not in (200, 202))

    @property
    def lost(self) -> int:
        return sum(status != "done" for status in self.final_statuses.values())


def postgres_restart_drill(work_dir: Path, broker_url: str, queue: str, outage: float = 3.0,
                           readers_per_path: int = 1, fast: bool = True, big_dialogues: int = 20_000,
                           log: Callable[[str], None] = print) -> RestartDrill:
    """A site (gunicorn, a worker) on a private PostgreSQL cluster under traffic, with a run of
    ``big_dialogues`` being scored; the cluster is stopped (fast shutdown: connections cut) in
    the middle of that scoring, kept down for ``outage`` seconds and started again. Neither
    gunicorn nor the worker is restarted."""
    cluster = PrivatePostgres(fast=fast)
    processes: list[Process] = []
    try:
        cluster.init()
        env = site_env(cluster.create_database("evalserver"), work_dir / "var", broker_url, queue, **FAULT_LIMITS)
        token = next(iter(seed_site(env, {"slug": "restart", "dialogues": 30, "teams": 1})["tokens"].values()))
        big_token = next(iter(seed_site(env, {"slug": "restart-big", "dialogues": big_dialogues, "teams": 1,
                                              "team_prefix": "Big"})["tokens"].values()))
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        processes.append(start_worker(env, queue, "pg", work_dir / "pg-worker.log"))
        processes.append(start_gunicorn(env, port, work_dir / "pg-gunicorn.log", workers=2, threads=4))
        worker, web = processes
        worker.wait_for_log(" ready.")
        wait_until("gunicorn to answer", lambda: call(f"{base_url}/healthz").status == 200, START_TIMEOUT, web)
        web_workers = set(children(web.pid))
        import orjson

        from fixtures.synthetic import generate_run

        content = orjson.dumps(generate_run(big_gold(30), "noisy", noise=0.3, seed=5))
        big_content = big_run(big_gold(big_dialogues))
        with Traffic(base_url, "restart", token, content, readers_per_path) as traffic:
            time.sleep(1)
            reply = upload_patiently(base_url, "restart-big", big_token, big_content, "in-flight", timeout=120)
            if reply.status != 202:
                raise RuntimeError(f"the big upload answered {reply.status}: {reply.body[:300]!r}")
            big_id = reply.json()["id"]
            wait_until("the big run to be scoring", lambda: _status(base_url, big_token, big_id) != "queued", 30,
                       worker, interval=0.01)
            log(f"stopping PostgreSQL while run {big_id} is {_status(base_url, big_token, big_id)!r}; "
                f"down for {outage:g} s under traffic")
            stopped = time.monotonic()
            cluster.stop("fast")
            time.sleep(outage)
            cluster.start()
            started = time.monotonic()
            wait_until("the health check to pass again", lambda: call(f"{base_url}/healthz").status == 200, 30)
            healthy = time.monotonic()
            time.sleep(2)
            ended = time.monotonic()
        tokens = {**dict.fromkeys(traffic.accepted, token), big_id: big_token}
        final = _final_statuses(base_url, tokens, 5)
        requeued: list[str] = []
        if not set(final.values()) <= {"done", "failed"}:
            # A job whose database connection was cut after it claimed its run keeps the claim and
            # its retry takes it back (reclaim_attempt); should that retry still be waiting out its
            # backoff, or have given up, Celery beat's requeue_stuck hands the run on once the claim
            # is stale (hard time limit + grace).
            stale = stopped + float(FAULT_LIMITS["EVALSERVER_SCORING_TIME_LIMIT"]) + float(
                FAULT_LIMITS["EVALSERVER_STALE_GRACE_SECONDS"]) + 1
            time.sleep(max(0.0, stale - time.monotonic()))
            answer = manage(env, "requeue_stuck").strip()
            requeued = answer.split(": ", 1)[1].split(", ") if ": " in answer else []
            final = _final_statuses(base_url, tokens, 30)
        return RestartDrill(
            before=Counter((what, status) for what, _, status, _ in traffic.between(0, stopped)),
            during=Counter((what, status, clean) for what, _, status, clean in traffic.between(stopped, healthy)),
            after=Counter((what, status) for what, _, status, _ in traffic.between(healthy, ended)),
            outage_seconds=started - stopped, recovery_seconds=healthy - started,
            accepted=[*traffic.accepted, big_id], final_statuses=final, requeued=requeued,
            refusals=list(traffic.refusals),
            processes_kept=worker.alive() and web.alive() and set(children(web.pid)) == web_workers)
    finally:
        for process in reversed(processes):
            process.stop()
        cluster.destroy()
        remove_queue(broker_url, queue)


def _final_statuses(base_url: str, tokens: dict[int, str], timeout: float) -> dict[int, str]:
    final: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        final = {run_id: _status(base_url, token, run_id) for run_id, token in tokens.items()}
        if set(final.values()) <= {"done", "failed"}:
            break
        time.sleep(0.5)
    return final


def _status(base_url: str, token: str, run_id: int) -> str:
    reply = call(f"{base_url}/api/v1/runs/{run_id}/", token)
    return reply.json()["status"] if reply.status == 200 else f"HTTP {reply.status}"
