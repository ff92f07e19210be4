#!/usr/bin/env python3
"""End-to-end latency: upload a run over HTTP, until the API says it is done.

Sets everything up itself, on loopback only: a scratch PostgreSQL database (dropped at the end),
a task with a generated gold of ``--dialogues`` dialogues (management commands ``migrate``,
``create_task``, ``load_gold``, ``create_participant``), gunicorn (gunicorn.conf.py: a worker per core) and one Celery
worker (``--concurrency=1``) over Redis, statistics off so they do not compete with scoring.
Then it uploads ``--runs`` generated runs (different noise and seeds) through the API,
sequentially by default: upload, poll every 50 ms until done, wait ``--gap`` seconds, next run;
``--in-flight K`` keeps K runs going at a time instead.

Latency of a run = from just before its POST to the first poll that sees ``done``.
Targets: median <= 2 s, p95 <= 5 s (p95 by nearest rank). Exit status 0 when both are met,
1 when not, 2 when the set-up failed.

    .venv/bin/python benchmarks/e2e_latency.py                       # 50 runs, 4,000 dialogues
    .venv/bin/python benchmarks/e2e_latency.py --runs 5 --dialogues 300   # a quick smoke run
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from devtools.workers import free_port, reachable

ROOT = Path(__file__).resolve().parent.parent

VENV_BIN = ROOT / ".venv" / "bin"
PYTHON = str(VENV_BIN / "python") if (VENV_BIN / "python").exists() else sys.executable
GUNICORN = str(VENV_BIN / "gunicorn") if (VENV_BIN / "gunicorn").exists() else "gunicorn"
TASK_SLUG = "bench"
TARGET_MEDIAN, TARGET_P95 = 2.0, 5.0
START_TIMEOUT = 60.0


def say(message: str) -> None:
    print(f"[bench] {message}", flush=True)


# Set-up ------------------------------------------------------------------------------------------

@contextmanager
def scratch_database(server_url: str, name: str, keep: bool) -> Iterator[str]:
    import psycopg
    from psycopg import sql

    def run(statement: sql.Composed) -> None:
        with psycopg.connect(f"{server_url}/postgres", autocommit=True) as connection:
            connection.execute(statement)

    run(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    run(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"{server_url}/{name}"
    finally:
        if not keep:
            run(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def manage(env: dict[str, str], *args: str) -> str:
    completed = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=600)
    if completed.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{completed.stderr[-3000:]}")
    return completed.stdout


class Service:
    """A server process with its output in a log file; stopped with SIGTERM, then SIGKILL."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], log_path: Path) -> None:
        self.name, self.log_path = name, log_path
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                        start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            tail = "\n".join(self.log().splitlines()[-30:])
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{tail}")

    def stop(self) -> None:
        if self.process.poll() is None:
            # Its own session: gunicorn's workers go with their master.
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)
        self._log.close()


def wait_for(what: str, ready: Any, services: list[Service]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not ready():
        for service in services:
            service.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready after {START_TIMEOUT:.0f} s")
        time.sleep(0.1)


def purge_queue(broker_url: str, queue: str = "celery") -> int:
    from kombu import Connection

    with Connection(broker_url, connect_timeout=5) as connection:
        return connection.default_channel.queue_purge(queue) or 0


# HTTP -----------------------------------------------------------------------------------------

def multipart(fields: dict[str, str], filename: str, content: bytes) -> tuple[bytes, str]:
    boundary = f"----bench-{uuid.uuid4().hex}"
    head = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
                    for name, value in fields.items())
    file_part = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
                 "Content-Type: application/json\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
    return head + file_part, f"multipart/form-data; boundary={boundary}"


def call(url: str, token: str, data: bytes | None = None, content_type: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Token {token}", "Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    try:
        with urlopen(Request(url, data=data, headers=headers), timeout=60) as response:
            return response.status, json.loads(response.read())
    except HTTPError as error:
        return error.code, error.read()[:2000]
    except (URLError, OSError) as error:
        raise RuntimeError(f"{url}: {error}") from None


@dataclass
class Measurement:
    number: int
    upload_seconds: float
    latency_seconds: float
    server_seconds: float  # finished_at - submitted_at as the server recorded them
    status: str


def measure_run(base_url: str, token: str, number: int, content: bytes, poll: float, timeout: float) -> Measurement:
    body, content_type = multipart({"name": f"bench-run-{number:03d}", "description": "benchmark run"},
                                   f"bench-run-{number:03d}.json", content)
    started = time.perf_counter()
    status, data = call(f"{base_url}/api/v1/tasks/{TASK_SLUG}/runs/", token, body, content_type)
    uploaded = time.perf_counter()
    if status != 202:
        raise RuntimeError(f"run {number}: upload answered {status}: {data!r}")
    url = f"{base_url}{data['url']}"
    while True:
        status, data = call(url, token)
        seen = time.perf_counter()
        if status != 200:
            raise RuntimeError(f"run {number}: status poll answered {status}: {data!r}")
        if data["status"] in ("done", "failed"):
            break
        if seen - started > timeout:
            raise RuntimeError(f"run {number}: still {data['status']} after {timeout:.0f} s")
        time.sleep(poll)
    server = (datetime.fromisoformat(data["finished_at"]) - datetime.fromisoformat(data["submitted_at"])
              ).total_seconds() if data.get("finished_at") else math.nan
    return Measurement(number, uploaded - started, seen - started, server, data["status"])


# Report ---------------------------------------------------------------------------------------

def nearest_rank(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def describe(values: list[float]) -> str:
    return (f"median {statistics.median(values):6.3f} s   p95 {nearest_rank(values, 0.95):6.3f} s   "
            f"max {max(values):6.3f} s   min {min(values):6.3f} s")


def report(measurements: list[Measurement], wall_seconds: float, args: argparse.Namespace, run_bytes: int) -> bool:
    latencies = [m.latency_seconds for m in measurements]
    mode = ("sequential" if args.in_flight == 1 else f"{args.in_flight} in flight") + f", gap {args.gap:g} s"
    print()
    print(f"{len(measurements)} runs of {args.dialogues} dialogues ({run_bytes / 1e6:.1f} MB each), {mode}, "
          f"poll every {args.poll * 1000:.0f} ms; gunicorn (gunicorn.conf.py), one celery worker (solo), "
          "Redis, PostgreSQL")
    print(f"upload-to-done latency   {describe(latencies)}")
    print(f"upload request alone     {describe([m.upload_seconds for m in measurements])}")
    server = [m.server_seconds for m in measurements if not math.isnan(m.server_seconds)]
    if server:
        print(f"server: created->done    {describe(server)}")
    print(f"first run                {latencies[0]:.3f} s (cold caches in the processes)")
    print(f"throughput               {len(measurements) / wall_seconds * 60:.1f} runs/minute "
          f"({wall_seconds:.1f} s wall time, gaps included)")
    median, p95 = statistics.median(latencies), nearest_rank(latencies, 0.95)
    met = median <= TARGET_MEDIAN and p95 <= TARGET_P95
    print(f"targets: median <= {TARGET_MEDIAN:g} s: {'met' if median <= TARGET_MEDIAN else 'MISSED'}; "
          f"p95 <= {TARGET_P95:g} s: {'met' if p95 <= TARGET_P95 else 'MISSED'}")
    return met


# Main -----------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--dialogues", type=int, default=4000)
    parser.add_argument("--in-flight", type=int, default=1, help="runs going at a time (default 1: sequential)")
    parser.add_argument("--gap", type=float, default=0.2, help="seconds between one run done and the next upload")
    parser.add_argument("--poll", type=float, default=0.05, help="seconds between status polls")
    parser.add_argument("--run-timeout", type=float, default=60.0, help="give up on a run after this many seconds")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432", help="server URL, no database")
    parser.add_argument("--database", default="evalserver_bench", help="scratch database (dropped and re-created)")
    parser.add_argument("--redis-db", type=int, default=14)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database and the temporary folder")
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= 1000 or not 1 <= args.dialogues <= 50_000 or not 1 <= args.in_flight <= 8:
        parser.error("need 1 <= --runs <= 1000, 1 <= --dialogues <= 50000 and 1 <= --in-flight <= 8")
    if not 0 <= args.redis_db <= 15 or args.poll <= 0 or args.gap < 0:
        parser.error("need 0 <= --redis-db <= 15, --poll > 0 and --gap >= 0")
    return args


def _interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for name, port in (("PostgreSQL", 5432), ("Redis", 6379)):
        if not reachable(port):
            say(f"{name} is not reachable on 127.0.0.1:{port}")
            return 2
    signal.signal(signal.SIGTERM, _interrupt)  # e.g. a CI timeout: the same clean-up as Ctrl-C
    workdir = Path(tempfile.mkdtemp(prefix="evalserver-bench-"))
    try:
        with scratch_database(args.postgres, args.database, args.keep) as database_url:
            return benchmark(args, workdir, database_url)
    except KeyboardInterrupt:
        say("interrupted")
        return 2
    except RuntimeError as error:
        say(f"failed: {error}")
        return 2
    finally:
        if args.keep:
            say(f"kept {workdir} and database {args.database}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def benchmark(args: argparse.Namespace, workdir: Path, database_url: str) -> int:
    import orjson

    from fixtures.synthetic import generate_gold, generate_run

    env = {key: value for key, value in os.environ.items() if not key.startswith("CELERY_")}
    env.update(DATABASE_URL=database_url, EVALSERVER_VAR_DIR=str(workdir / "var"),
               EVALSERVER_STATISTICS_MODE="off", DJANGO_SETTINGS_MODULE="evalserver.settings",
               # Plain HTTP on loopback: no redirect to HTTPS; and the default 30 uploads a minute
               # would throttle the benchmark.
               DJANGO_SECURE="false", EVALSERVER_UPLOAD_RATE="100000/min")
    say(f"scratch database {args.database}, files in {workdir}")
    manage(env, "migrate", "--noinput", "-v", "0")
    gold = generate_gold(args.dialogues, seed=2019)
    gold_path = workdir / "gold.json"
    gold_path.write_bytes(orjson.dumps(gold))
    manage(env, "create_task", TASK_SLUG, "--preset", "stc3", "--title", "Benchmark")
    # Without CELERY_BROKER_URL the two baselines are scored here, before any timing starts.
    manage(env, "load_gold", TASK_SLUG, str(gold_path))
    token = manage(env, "create_participant", "bench-user", "--team", "Bench Team").strip().splitlines()[-1]
    say(f"task {TASK_SLUG} with {args.dialogues} dialogues; generating {args.runs} runs")
    runs = [orjson.dumps(generate_run(gold, "noisy", noise=0.05 + 0.9 * (number % 10) / 9, seed=number))
            for number in range(args.runs)]

    broker_url = f"redis://127.0.0.1:6379/{args.redis_db}"
    env["CELERY_BROKER_URL"] = broker_url
    purge_queue(broker_url)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    services: list[Service] = []
    try:
        services.append(Service("celery worker", [
            PYTHON, "-m", "celery", "-A", "evalserver.celery", "worker", "--pool=solo", "--concurrency=1",
            "-l", "info", "-n", f"bench-{os.getpid()}@%h", "--without-gossip", "--without-mingle"],
            env, workdir / "worker.log"))
        services.append(Service("gunicorn", [GUNICORN, "-c", str(ROOT / "gunicorn.conf.py"), "evalserver.wsgi",
                                              "-b", f"127.0.0.1:{port}"],
                                env, workdir / "gunicorn.log"))
        wait_for("celery worker", lambda: " ready." in services[0].log(), services)
        wait_for("gunicorn", lambda: reachable(port), services)
        if (answer := call(f"{base_url}/api/v1/tasks/", token))[0] != 200:
            raise RuntimeError(f"GET /api/v1/tasks/ answered {answer}")
        say(f"server at {base_url}; uploading {args.runs} runs")
        measurements: list[Measurement] = []
        lock = threading.Lock()

        def one(number: int) -> None:
            measurement = measure_run(base_url, token, number, runs[number], args.poll, args.run_timeout)
            with lock:
                measurements.append(measurement)
            if measurement.status != "done":
                raise RuntimeError(f"run {number} {measurement.status}; see {workdir / 'worker.log'}")
            time.sleep(args.gap)

        started = time.perf_counter()
        pool = ThreadPoolExecutor(max_workers=args.in_flight)
        try:
            for future in [pool.submit(one, number) for number in range(args.runs)]:
                future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # after a failure, start no further run
        wall = time.perf_counter() - started - args.gap  # the last gap waits for nothing
    finally:
        for service in reversed(services):
            service.stop()
        purge_queue(broker_url)
    measurements.sort(key=lambda m: m.number)
    return 0 if report(measurements, wall, args, len(runs[0])) else 1


if __name__ == "__main__":
    sys.exit(main())
