#!/usr/bin/env python3
"""Capacity of one machine in the production shape, files in object storage (issue 31;
``docs/capacity.md`` reports its figures).

Sets everything up itself, on loopback only: moto's S3 server (``moto[server]``) with a private
bucket, a scratch PostgreSQL database (dropped at the end), Redis (database 13, queues of its own),
gunicorn (``gunicorn.conf.py``: a process per core, 2 threads each), a shared cache in Redis
(database 9) and Celery workers with
``--pool=solo`` (one process each), every process with its own empty folder (no shared disk).
Three tasks at DialEval sizes: DQ/ND (``stc3``) on 390 dialogues (the Chinese test set of NTCIR-14
STC-3 and DialEval-1), response evaluation on 300 contexts and a metrics track of 300 contexts x 10
systems (3,000 responses), plus a board of 100 scored runs for the readers.

Then it measures, printing the 1-minute load average beside every figure (the machine may be
shared, so compare figures of one run):

1. **Uploads per minute per kind**, with 1 and then 2 worker processes: ``--runs`` runs of each
   kind uploaded back to back through the API (two clients), until the last is scored;
   statistics off, so that only scoring is measured. Also each run's scoring time in the worker
   (the database's ``started_at`` to ``finished_at``), from which one worker's ceiling follows.
2. **Board readers**: N readers at once, each GET right after the last answer (the public
   leaderboard JSON and page of the 100-run board), for N in ``--readers``; idle, then while
   DQ/ND runs are uploaded and scored; p50, p95 and requests per second.
3. **Statistics after a burst**: the compose shape (one worker on the scoring queue, one on the
   heavy queue), statistics on: ``--burst`` uploads in 5 s (``statistics_burst.burst_statistics``);
   seconds from the last upload's answer to statistics over every run, and how long a DQ/ND run
   uploaded while the statistics compute takes to be scored (the heavy queue must not delay it).

    .venv/bin/python benchmarks/capacity.py --database evalserver_capacity
    .venv/bin/python benchmarks/capacity.py --runs 4 --readers 2,8 --burst 5    # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from devtools.workers import (  # noqa: E402
    PYTHON,
    ObjectStore,
    Process,
    call,
    drop_database,
    free_port,
    new_queue,
    reachable,
    read_load,
    remove_queue,
    scratch_database,
    site_env,
    start_gunicorn,
    start_worker,
    upload,
    wait_until,
)

SIZES = {"stc3": 390, "response": 300, "metric": 300}  # dialogues, contexts, contexts (x 10 systems)
BOARD_RUNS = 100
CACHE_DB = 9  # Redis database of the shared cache (flushed at the start; 13 holds the queues)
P95_TARGET = 0.200


def say(message: str) -> None:
    print(f"[capacity] {message}", flush=True)


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


# Seeding (run inside Django, as a subprocess: python benchmarks/capacity.py seed) -----------------

def run_content(kind: str, gold: Any, number: int) -> bytes:
    """A distinct, valid run of ``kind`` for ``gold`` (the fixtures' generators; seeds differ)."""
    import orjson

    if kind == "stc3":
        from fixtures.synthetic import generate_run

        return orjson.dumps(generate_run(gold, "noisy", noise=0.1 + 0.01 * (number % 40), seed=1000 + number))
    if kind == "response":
        from fixtures.response_demo import generate_runs

        return orjson.dumps(generate_runs(gold, seed=1000 + number)[("strong", "medium", "weak")[number % 3]])
    from fixtures.metric_demo import generate_runs

    return orjson.dumps(generate_runs(gold, seed=1000 + number)[("close", "coarse", "noisy")[number % 3]])


def gold_of(kind: str) -> Any:
    if kind == "stc3":
        from fixtures.synthetic import generate_gold

        return generate_gold(SIZES["stc3"], seed=7)
    if kind == "response":
        from fixtures.response_demo import generate_gold

        return generate_gold(SIZES["response"], seed=3)
    from fixtures.metric_demo import generate_gold

    return generate_gold(SIZES["metric"], 10, seed=1)


def seed() -> dict[str, Any]:
    import django
    import orjson

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from devtools.workers import fill_board
    from tasks import jobs, organising, submissions
    from tasks.models import Team
    from tasks.tokens import issue_token

    call_command("migrate", verbosity=0, interactive=False)
    user = get_user_model().objects.create_user("capacity", password=uuid.uuid4().hex)
    team = Team.objects.create(name="Capacity", slug="capacity")
    team.members.add(user)
    tasks = {}
    for kind in SIZES:
        task = organising.create_task(f"cap-{kind}", title=f"Capacity {kind}", kind=kind)
        organising.load_gold_version(task, orjson.dumps(gold_of(kind)), "gold.json")
        tasks[kind] = task.pk
    board = organising.create_task("cap-board", title="Capacity board", kind="stc3")
    gold = gold_of("stc3")
    organising.load_gold_version(board, orjson.dumps(gold), "gold.json")
    jobs.score_run(submissions.submit_run(board, user, submissions.Submission(
        content=run_content("stc3", gold, 0), filename="seed.json", name="seed-run")).pk)
    archive = [Team.objects.create(name=f"Archive {number:02d}", slug=f"archive-{number:02d}") for number in range(10)]
    fill_board(board, BOARD_RUNS, archive)
    return {"token": issue_token(user), "tasks": tasks}


# Measurements -----------------------------------------------------------------------------------

class Site:
    def __init__(self, work: Path, database_url: str, broker_url: str, store: ObjectStore) -> None:
        self.work, self.database_url, self.broker_url, self.store = work, database_url, broker_url, store
        self.queue = new_queue("evalserver-capacity")
        self.processes: list[Process] = []
        self.web: Process | None = None
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"

    def env(self, home: str, statistics_mode: str) -> dict[str, str]:
        folder = self.work / home
        folder.mkdir(parents=True, exist_ok=True)
        # One cache for every process, as on several hosts (README): a cache per host would keep
        # each host's "statistics already planned" mark and task look-ups to itself.
        return site_env(self.database_url, folder, self.broker_url, EVALSERVER_QUEUE=self.queue,
                        CACHE_URL=f"rediscache://127.0.0.1:6379/{CACHE_DB}",
                        EVALSERVER_UPLOAD_DIR=str(folder / "uploads"), EVALSERVER_STATISTICS_MODE=statistics_mode,
                        DJANGO_SECRET_KEY="capacity-benchmark-" + "k" * 40, **self.store.env())

    def start_web(self, statistics_mode: str) -> None:
        self.web = start_gunicorn(self.env("web", statistics_mode), self.port, self.work / "gunicorn.log")
        self.processes.append(self.web)
        wait_until("gunicorn to answer", lambda: call(f"{self.base}/healthz").status == 200, 60, self.web)

    def start_workers(self, count: int, statistics_mode: str, split: bool = False) -> list[Process]:
        """``count`` worker processes on both queues, or (``split``) one scoring, one heavy."""
        started = []
        for number in range(count):
            node = f"w{number}-{uuid.uuid4().hex[:4]}"
            queue = self.queue if not split or number == 0 else f"{self.queue}-heavy"
            worker = start_worker(self.env(node, statistics_mode), queue, node, self.work / f"{node}.log",
                                  heavy=not split)
            self.processes.append(worker)
            started.append(worker)
        for worker in started:
            worker.wait_for_log(" ready.", timeout=90)
        return started

    def stop(self, processes: list[Process]) -> None:
        for process in processes:
            process.stop()
            if process in self.processes:
                self.processes.remove(process)

    def rows(self, query: str, parameters: tuple = ()) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.database_url, autocommit=True) as connection:
            return connection.execute(query, parameters).fetchall()

    def close(self) -> None:
        self.stop(list(reversed(self.processes)))
        remove_queue(self.broker_url, self.queue)


def upload_all(site: Site, token: str, slug: str, contents: list[bytes], prefix: str, clients: int = 2) -> list[int]:
    def send(item: tuple[int, bytes]) -> int:
        number, content = item
        for _ in range(20):
            reply = upload(site.base, slug, token, content, f"{prefix}-{number}", timeout=120)
            if reply.status == 503:  # the validation slots are taken: come back, as clients do
                time.sleep(float(reply.headers.get("retry-after", "1")))
                continue
            if reply.status != 202:
                raise RuntimeError(f"upload {prefix}-{number}: {reply.status} {reply.body[:300]!r}")
            return reply.json()["id"]
        raise RuntimeError(f"upload {prefix}-{number}: 503 twenty times")

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(send, enumerate(contents)))


def wait_scored(site: Site, run_ids: list[int], timeout: float = 900) -> None:
    def done() -> bool:
        rows = site.rows("SELECT status, count(*) FROM tasks_run WHERE id = ANY(%s) GROUP BY status", (run_ids,))
        counts = dict(rows)
        if counts.get("failed"):
            raise RuntimeError(f"{counts['failed']} run(s) failed")
        return counts.get("done", 0) == len(run_ids)

    wait_until(f"{len(run_ids)} runs to be scored", done, timeout, *site.processes, interval=0.1)


def uploads_per_minute(site: Site, token: str, kind: str, count: int, offset: int, workers: int) -> dict[str, Any]:
    gold = gold_of(kind)
    slug = f"cap-{kind}"
    # Two runs per worker first, at once, not measured: a fresh worker loads the kind's resources
    # (spaCy for responses) at its first run of the kind.
    warm = [run_content(kind, gold, offset + 50 + number) for number in range(2 * workers)]
    wait_scored(site, upload_all(site, token, slug, warm, f"warm-{offset}", clients=workers))
    contents = [run_content(kind, gold, offset + 1 + number) for number in range(count)]
    size = statistics.mean(len(content) for content in contents)
    started = time.monotonic()
    run_ids = upload_all(site, token, slug, contents, f"m-{offset}")
    uploaded = time.monotonic() - started
    wait_scored(site, run_ids)
    seconds = time.monotonic() - started
    scoring = [row[0] for row in site.rows(
        "SELECT EXTRACT(EPOCH FROM finished_at - started_at) FROM tasks_run WHERE id = ANY(%s)", (run_ids,))]
    return {"kind": kind, "runs": count, "bytes": round(size), "seconds": round(seconds, 2),
            "per_minute": round(count / seconds * 60, 1), "upload_seconds": round(uploaded, 2),
            "scoring_median": round(float(statistics.median(scoring)), 3), "load": round(os.getloadavg()[0], 2)}


def readers(site: Site, counts: list[int], requests: int, token: str | None = None) -> list[dict[str, Any]]:
    paths = ["/api/v1/tasks/cap-board/leaderboard/", "/tasks/cap-board/"]
    results = []
    for count in counts:
        result = read_load(site.base, paths, count, requests, client="gzip")
        bad = sum(n for status, n in result.statuses.items() if status != 200)
        results.append({"readers": count, "requests": result.requests, "errors": bad,
                        "p50_ms": round(result.percentile(0.5) * 1000, 1),
                        "p95_ms": round(result.percentile(0.95) * 1000, 1),
                        "per_second": round(result.throughput, 1), "load": round(os.getloadavg()[0], 2)})
        say(f"  {count:3d} readers: p50 {results[-1]['p50_ms']} ms, p95 {results[-1]['p95_ms']} ms, "
            f"{results[-1]['per_second']} req/s, {bad} errors ({load()})")
    return results


def readers_under_uploads(site: Site, token: str, counts: list[int], requests: int) -> list[dict[str, Any]]:
    """``readers`` while DQ/ND runs are uploaded and scored, one after another, all along."""
    stop = threading.Event()
    gold = gold_of("stc3")

    def feed() -> None:
        number = 5000
        while not stop.is_set():
            upload_all(site, token, "cap-stc3", [run_content("stc3", gold, number)], "feed", clients=1)
            number += 1

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        return readers(site, counts, requests)
    finally:
        stop.set()
        feeder.join(timeout=120)


def statistics_burst(site: Site, token: str, task_id: int, uploads: int, worker_logs: list[Process]) -> dict[str, Any]:
    from statistics_burst import burst_statistics

    gold = gold_of("stc3")
    result: dict[str, Any] = {}

    def computing() -> bool:
        state = site.rows("SELECT claim_token FROM leaderboard_statisticsstate WHERE task_id = %s "
                          "AND phase_id IS NULL", (task_id,))
        return bool(state and state[0][0])

    # The runs scored so far have no statistics (they were off): one upload starts them. While
    # they compute on the heavy worker, one more run is timed from upload to scored.
    wait_scored(site, upload_all(site, token, "cap-stc3", [run_content("stc3", gold, 8999)], "start", clients=1))
    wait_until("a statistics computation to start", computing, 300, *worker_logs, interval=0.05)
    started = time.monotonic()
    wait_scored(site, upload_all(site, token, "cap-stc3", [run_content("stc3", gold, 9000)], "probe", clients=1))
    probe = {"seconds": time.monotonic() - started, "still_computing": computing()}
    burst = burst_statistics(site.base, "cap-stc3", token, task_id, gold, site.rows,
                             lambda: "\n".join(worker.log() for worker in worker_logs), uploads=uploads, within=5.0)
    result.update(uploads=burst.uploads, accepted=burst.accepted, runs_on_board=burst.runs_on_board,
                  covered=burst.covered, computations=burst.computations,
                  complete_after=None if burst.complete_after is None else round(burst.complete_after, 1),
                  last_computation=round(burst.last_computation, 1), debounce=burst.debounce,
                  probe_scored_seconds=round(probe["seconds"], 2) if "seconds" in probe else None,
                  probe_during_statistics=bool(probe.get("still_computing")), load=round(os.getloadavg()[0], 2))
    return result


def main() -> int:
    if len(sys.argv) == 2 and sys.argv[1] == "seed":
        print(json.dumps(seed()))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server URL")
    parser.add_argument("--database", default="evalserver_capacity", help="scratch database (dropped, re-created)")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--runs", type=int, default=8, help="measured uploads per kind and worker count")
    parser.add_argument("--readers", default="1,2,4,8,16", help="reader counts, comma-separated")
    parser.add_argument("--requests", type=int, default=40, help="requests per reader")
    parser.add_argument("--burst", type=int, default=10, help="uploads in the statistics burst")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    if not reachable(5432) or not reachable(6379):
        say("needs PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379")
        return 2
    # Stopped with SIGTERM: clean up as on Ctrl-C (the finally below stops every process started).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    import redis

    redis.Redis(port=6379, db=CACHE_DB).flushdb()
    work = Path(tempfile.mkdtemp(prefix="evalserver-capacity-"))
    store = ObjectStore(work / "moto.log")
    database_url = scratch_database(args.server, args.database)
    site = Site(work, database_url, args.broker, store)
    figures: dict[str, Any] = {"cores": os.cpu_count(), "started_load": round(os.getloadavg()[0], 2)}
    try:
        say(f"seeding ({load()})")
        env = {key: value for key, value in site.env("seed", "off").items() if key != "CELERY_BROKER_URL"}
        import subprocess

        completed = subprocess.run([PYTHON, str(Path(__file__).resolve()), "seed"], cwd=ROOT, env=env,
                                   capture_output=True, text=True, timeout=900)
        if completed.returncode:
            raise RuntimeError(completed.stderr[-3000:])
        seeded = json.loads(completed.stdout.strip().splitlines()[-1])
        token = seeded["token"]
        site.start_web("off")
        figures["uploads"] = []
        offset = 0
        for count in (1, 2):
            workers = site.start_workers(count, "off")
            say(f"{count} worker process(es)")
            for kind in SIZES:
                offset += 100
                row = uploads_per_minute(site, token, kind, args.runs, offset, count)
                row["workers"] = count
                figures["uploads"].append(row)
                say(f"  {kind:8s} {row['runs']} runs of {row['bytes']:,} bytes: {row['per_minute']} per minute "
                    f"(scoring {row['scoring_median']} s each in the worker, uploads answered in "
                    f"{row['upload_seconds']} s; load {row['load']})")
            if count == 2:
                counts = [int(value) for value in args.readers.split(",")]
                say("board readers, idle")
                figures["readers_idle"] = readers(site, counts, args.requests)
                say("board readers while DQ/ND runs are uploaded and scored")
                figures["readers_uploading"] = readers_under_uploads(site, token, counts, args.requests)
            site.stop(workers)
        say("statistics after a burst (one scoring worker, one heavy worker, statistics on)")
        site.stop([site.web])
        site.start_web("celery")
        workers = site.start_workers(2, "celery", split=True)
        figures["burst"] = statistics_burst(site, token, seeded["tasks"]["stc3"], args.burst, workers)
        say(f"  {figures['burst']}")
    finally:
        site.close()
        store.stop()
        drop_database(args.server, args.database)
        shutil.rmtree(work, ignore_errors=True)
    figures["ended_load"] = round(os.getloadavg()[0], 2)
    print(json.dumps(figures, indent=1))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
