"""Machinery shared by the fault and load tests and ``benchmarks/reliability_report.py``.

Real processes (Celery workers, gunicorn, a private PostgreSQL cluster) with their output in log
files, big synthetic data made fast, HTTP calls that never raise, a reader-load generator and a
``seed`` command that builds a site in a fresh database. Free of pytest, so that the report can
use it: failures raise ``RuntimeError`` with the end of the process's log.

    python -m tests.workers seed SPEC.json   # what the report and the PostgreSQL test run
"""

from __future__ import annotations

import glob
import gzip
import http.client
import json
import math
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
START_TIMEOUT = 45.0
# Redis database 13 and queues named per test keep these processes away from anything else on the
# brokers (the integration tests use the same database with queues of their own).
BROKERS = {
    "redis": ("Redis", 6379, "redis://127.0.0.1:6379/13"),
    "rabbitmq": ("RabbitMQ", 5672, "amqp://guest:guest@127.0.0.1:5672//"),
}
# Short scoring limits for faults: a run "scoring" for 4 + 1 s belongs to a dead worker.
FAULT_LIMITS = {"EVALSERVER_SCORING_SOFT_TIME_LIMIT": "3", "EVALSERVER_SCORING_TIME_LIMIT": "4",
                "EVALSERVER_STALE_GRACE_SECONDS": "1"}
VECTORS_PER_SCORE = 21  # 3 quality dimensions x 6 measures + 3 nugget measures


def free_port() -> int:
    """A loopback port nothing listens on (the kernel's choice, released at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def process_alive(pid: int) -> bool:
    """Whether the process runs (a zombie, exited and not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(what: str, condition: Callable[[], bool], timeout: float, *processes: Process,
               interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for process in processes:
            process.check_alive()
        if time.monotonic() > deadline:
            tails = "\n".join(process.tail() for process in processes)
            raise RuntimeError(f"{what}: not after {timeout:.0f} s\n{tails}")
        time.sleep(interval)


# Processes -------------------------------------------------------------------------------------

class Process:
    """A server process in a session of its own, with stdout and stderr in a log file."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], log_path: Path) -> None:
        self.name, self.log_path = name, log_path
        self._log = log_path.open("ab")
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self.pid = self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self, lines: int = 40) -> str:
        return f"--- {self.name} log ({self.log_path}):\n" + "\n".join(self.log().splitlines()[-lines:])

    def alive(self) -> bool:
        return self.process.poll() is None

    def check_alive(self) -> None:
        if not self.alive():
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}\n{self.tail()}")

    def wait_for_log(self, text: str, timeout: float = START_TIMEOUT) -> None:
        wait_until(f"{self.name} to log {text!r}", lambda: text in self.log(), timeout, self)

    def kill(self) -> None:
        """SIGKILL, as the kernel's OOM killer or a lost machine would: no clean-up at all."""
        os.kill(self.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def stop(self, timeout: float = 20) -> None:
        if self.alive():
            try:
                os.killpg(self.pid, signal.SIGCONT)  # a paused process cannot act on SIGTERM
                os.killpg(self.pid, signal.SIGTERM)  # its own session: gunicorn's workers go too
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.process.wait(timeout=5)
            except ProcessLookupError:
                pass
        else:
            try:  # the leader is gone (killed): its children, if any, are not
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._log.close()


def start_worker(env: dict[str, str], queue: str, node: str, log_path: Path, pool: str = "solo",
                 heavy: bool = True) -> Process:
    """A Celery worker on one queue and, unless ``heavy`` is false, its heavy jobs' queue
    (``<queue>-heavy``: statistics, pool jobs). With ``--pool=solo`` it is one process: SIGKILL
    kills the job too."""
    queues = f"{queue},{queue}-heavy" if heavy else queue
    return Process(f"worker {node}", [
        PYTHON, "-m", "celery", "-A", "evalserver.celery", "worker", f"--pool={pool}", "--concurrency=1",
        "-l", "info", "-Q", queues, "-n", f"{node}-{queue}@%h",
        # Nothing to learn from other workers; these only slow the start down.
        "--without-gossip", "--without-mingle"], env, log_path)


def deployment_page_workers(text: str) -> list[str]:
    """The ``celery ... worker`` commands of the page's "Without Docker" section, as written."""
    section = text.split("\n## Without Docker", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"^(?:- `)?(celery -A evalserver\.celery worker[^`#\n]*)", section, re.MULTILINE)
    return [command.strip() for command in found]


def compose_workers(text: str) -> list[str]:
    """The commands of the compose file's Celery worker services."""
    import yaml

    services = yaml.safe_load(text)["services"]
    return [shlex.join(service["command"]) for service in services.values()
            if isinstance(service.get("command"), list) and service["command"][:1] == ["celery"]
            and "worker" in service["command"]]


def documented_worker_argv(command: str, queue: str, node: str) -> list[str]:
    """A documented ``celery ... worker`` command as a process of this Python, with ``celery``'s queue
    names replaced by ``queue``'s (in ``-Q``; give the process ``EVALSERVER_QUEUE=queue`` too), a
    node name of its own, and ``-l info`` where no level is given (its "ready" line is waited for)."""
    words = shlex.split(command)
    if words[:4] != ["celery", "-A", "evalserver.celery", "worker"]:
        raise ValueError(f"not a Celery worker command: {command}")
    argv = [PYTHON, "-m", "celery", *words[1:]]
    for index, word in enumerate(argv):
        if index and argv[index - 1] == "-Q":
            argv[index] = ",".join(queue + name.removeprefix("celery") for name in word.split(","))
    if not any(word.startswith(("-l", "--loglevel")) for word in argv):
        argv += ["-l", "info"]
    return [*argv, "-n", f"{node}@%h", "--without-gossip", "--without-mingle"]


def start_gunicorn(env: dict[str, str], port: int, log_path: Path, workers: int | None = None,
                   threads: int | None = None) -> Process:
    """gunicorn with the project's gunicorn.conf.py (one worker per core, 2 threads each, unless
    ``workers``/``threads`` say otherwise), on loopback."""
    gunicorn = Path(PYTHON).with_name("gunicorn")
    command = [str(gunicorn)] if gunicorn.exists() else [PYTHON, "-m", "gunicorn"]
    options = ["-w", str(workers)] if workers else []
    options += ["--threads", str(threads)] if threads else []
    return Process("gunicorn", [*command, "-c", str(ROOT / "gunicorn.conf.py"), "evalserver.wsgi",
                                "-b", f"127.0.0.1:{port}", *options, "--graceful-timeout", "5"], env, log_path)


# An S3-compatible object store ----------------------------------------------------------------------

S3_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "evalserver-test", "AWS_SECRET_ACCESS_KEY": "evalserver-test-secret",
                  "AWS_DEFAULT_REGION": "us-east-1"}


class ObjectStore:
    """moto's S3 server (the ``moto[server]`` package: an independent implementation of the S3 API)
    on a free loopback port, in a process of its own, with one private bucket."""

    def __init__(self, log_path: Path, bucket: str = "evalserver-blobs") -> None:
        self.port, self.bucket = free_port(), bucket
        self.endpoint = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, **S3_CREDENTIALS}
        self.process = Process("object store", [PYTHON, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                               env, log_path)
        wait_until("the object store to listen", lambda: _listening(self.port), START_TIMEOUT, self.process)
        self.client().create_bucket(Bucket=bucket)

    @property
    def url(self) -> str:
        """The server's ``EVALSERVER_STORAGE_URL``."""
        return f"s3://{self.bucket}?endpoint_url={self.endpoint}&region_name=us-east-1"

    def env(self) -> dict[str, str]:
        return {"EVALSERVER_STORAGE_URL": self.url, **S3_CREDENTIALS}

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=S3_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=S3_CREDENTIALS["AWS_SECRET_ACCESS_KEY"])

    def keys(self) -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def stop(self) -> None:
        self.process.stop()


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def local_files(directory: Path) -> list[str]:
    """Every file under ``directory``, relative to it."""
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*") if path.is_file())


def queue_settings_module(directory: Path) -> dict[str, str]:
    """Environment for processes that must publish to and read from ``EVALSERVER_TEST_QUEUE``
    instead of Celery's shared default queue (the settings read no variable for it)."""
    (directory / "queue_settings.py").write_text(
        "import os\n\nfrom evalserver.settings import *  # noqa: F403\n\n"
        'CELERY_TASK_DEFAULT_QUEUE = os.environ["EVALSERVER_TEST_QUEUE"]\n')
    return {"DJANGO_SETTINGS_MODULE": "queue_settings", "PYTHONPATH": f"{directory}{os.pathsep}{ROOT}"}


def site_env(database_url: str, var_dir: Path, broker_url: str | None = None, queue: str | None = None,
             **extra: str) -> dict[str, str]:
    """The environment of a server process: plain HTTP on loopback, no upload throttle, no statistics."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("CELERY_", "EVALSERVER_", "DJANGO_", "CACHE_URL"))}
    env.update(DATABASE_URL=database_url, EVALSERVER_VAR_DIR=str(var_dir), EVALSERVER_STATISTICS_MODE="off",
               DJANGO_SETTINGS_MODULE="evalserver.settings", DJANGO_SECURE="false",
               EVALSERVER_UPLOAD_RATE="100000/min", PYTHONPATH=str(ROOT))
    if broker_url:
        env["CELERY_BROKER_URL"] = broker_url
    if queue:
        var_dir.mkdir(parents=True, exist_ok=True)
        env.update(queue_settings_module(var_dir), EVALSERVER_TEST_QUEUE=queue)
    env.update(extra)
    return env


def manage(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    completed = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=timeout)
    if completed.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{completed.stderr[-3000:]}")
    return completed.stdout


# Brokers --------------------------------------------------------------------------------------

def new_queue(prefix: str = "evalserver-fault") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def queue_length(broker_url: str, queue: str) -> int:
    from kombu import Connection
    from kombu.exceptions import ChannelError

    with Connection(broker_url, connect_timeout=5) as connection:
        try:
            return connection.default_channel.queue_declare(queue=queue, passive=True).message_count
        except ChannelError:  # no such queue (Redis deletes an emptied one): no messages
            return 0


def remove_queue(broker_url: str, queue: str) -> None:
    """Delete the queue, its exchange and, on Redis, the unacknowledged copies a killed worker left
    in kombu's ``unacked`` hash (they would come back an hour later)."""
    from kombu import Connection
    from kombu.exceptions import ChannelError

    with Connection(broker_url, connect_timeout=5) as connection:
        for name in (queue, f"{queue}-heavy"):  # the heavy jobs' queue too (evalserver.celery)
            channel = connection.channel()
            try:
                channel.queue_purge(name)
                channel.queue_delete(name)
                channel.exchange_delete(name)
            except ChannelError:  # never declared (RabbitMQ closes the channel for that)
                pass
            finally:
                channel.close()
    if broker_url.startswith("redis://"):
        import redis

        client = redis.Redis.from_url(broker_url)
        try:
            for tag, payload in client.hgetall("unacked").items():
                try:
                    _message, exchange, routing_key = json.loads(payload)
                except ValueError:
                    continue
                if exchange in (queue, f"{queue}-heavy") or routing_key in (queue, f"{queue}-heavy"):
                    client.hdel("unacked", tag)
                    client.zrem("unacked_index", tag)
            leftovers = list(client.scan_iter(match=f"*{queue}*"))
            if leftovers:
                client.delete(*leftovers)
        finally:
            client.close()


# The test process as a publisher, and the runs' fate in the database --------------------------------

@contextmanager
def publishing_to(broker_url: str, queue: str) -> Iterator[None]:
    """Jobs queued by this process (the test and its live server) go to ``queue`` on a real broker
    (or to a dead address) instead of running in-process; the configuration is restored after."""
    from django.conf import settings

    from evalserver.celery import app
    from tests.test_integration_celery import _reset_producers

    keys = ("broker_url", "task_always_eager", "task_default_queue")
    previous, eager = {key: app.conf[key] for key in keys}, settings.CELERY_TASK_ALWAYS_EAGER
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.update(broker_url=broker_url, task_always_eager=False, task_default_queue=queue)
    _reset_producers(app)
    try:
        yield
    finally:
        app.conf.update(previous)
        settings.CELERY_TASK_ALWAYS_EAGER = eager
        _reset_producers(app)


def worker_env(broker_url: str, upload_dir: Path, **extra: str) -> dict[str, str]:
    """A worker's environment: this test's database and upload folder, the given broker."""
    from tests.test_integration_celery import database_url

    env = {key: value for key, value in os.environ.items() if not key.startswith(("CELERY_", "EVALSERVER_"))}
    env.update(DATABASE_URL=database_url(), CELERY_BROKER_URL=broker_url, EVALSERVER_UPLOAD_DIR=str(upload_dir),
               EVALSERVER_STATISTICS_MODE="off", DJANGO_SETTINGS_MODULE="evalserver.settings", **extra)
    return env


def run_state(run_id: int) -> tuple[str, int]:
    from tasks.models import Run

    return Run.objects.filter(pk=run_id).values_list("status", "attempts").get()


def wait_for_status(run_id: int, statuses: Iterable[str], timeout: float, *processes: Process,
                    interval: float = 0.05) -> str:
    wanted = set(statuses)
    wait_until(f"run {run_id} to reach {sorted(wanted)}", lambda: run_state(run_id)[0] in wanted, timeout,
               *processes, interval=interval)
    return run_state(run_id)[0]


def scored_once(run_id: int) -> list[str]:
    """What is wrong with a run that should be done and scored exactly once (empty: nothing)."""
    from tasks.models import Run, Score, ScoreVector

    run = Run.objects.get(pk=run_id)
    problems = []
    if run.status != Run.DONE:
        problems.append(f"run {run_id} is {run.status!r}: {run.errors}")
    scores = list(Score.objects.filter(run_id=run_id, gold_version=run.gold_version).values_list("scope", flat=True))
    if sorted(scores) != sorted(set(scores)) or Score.FULL not in scores:
        problems.append(f"run {run_id} has scores {scores}, expected one per scope")
    vectors = ScoreVector.objects.filter(score__run_id=run_id, score__scope=Score.FULL).count()
    if vectors != VECTORS_PER_SCORE:
        problems.append(f"run {run_id} has {vectors} score vectors, expected {VECTORS_PER_SCORE}")
    return problems


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


# Big synthetic data, fast --------------------------------------------------------------------------

_BASE_CACHE: dict[tuple[int, int], list] = {}


def big_gold(n_dialogues: int, seed: int = 7, base: int = 1000) -> list[dict[str, Any]]:
    """A gold of ``n_dialogues`` made of ``base`` generated dialogues repeated under new ids:
    scoring cost grows with the number of dialogues, not with their variety, and generating
    20,000 dialogues one by one takes 12 s where this takes a fraction of a second."""
    from fixtures.synthetic import generate_gold

    key = (min(base, n_dialogues), seed)
    if key not in _BASE_CACHE:
        _BASE_CACHE[key] = generate_gold(key[0], seed=seed)
    pattern = _BASE_CACHE[key]
    return [{**pattern[i % len(pattern)], "id": str(5 * 10**15 + i)} for i in range(n_dialogues)]


def big_run(gold: list[dict[str, Any]], noise: float = 0.3, seed: int = 1, base: int = 1000) -> bytes:
    """A noisy run for a gold made by ``big_gold`` (the same repetition), as upload bytes."""
    import orjson

    from fixtures.synthetic import generate_run

    pattern = generate_run(gold[:base], "noisy", noise=noise, seed=seed)
    return orjson.dumps([{**pattern[i % len(pattern)], "id": dialogue["id"]} for i, dialogue in enumerate(gold)])


def hostile_run_files(first_id: str, size: int) -> dict[str, bytes]:
    """The hostile shapes of issue 11 (defect 4), each filled to ``size`` bytes: what the shape
    check must refuse before the parser builds anything (``benchmarks/upload_memory.py``)."""
    def fill(prefix: bytes, unit: bytes, suffix: bytes) -> bytes:
        return prefix + unit * ((size - len(prefix) - len(suffix)) // len(unit)) + suffix

    entry = b'[{"id":"' + first_id.encode() + b'","x":'
    return {
        "empty objects [{},{},...]": fill(b"[", b"{},", b"{}]"),
        "empty lists [[],[],...]": fill(b"[", b"[],", b"[]]"),
        "deep nesting [[[[...": fill(b"", b"[", b""),
        'deep objects {"a":{"a":...': fill(b"", b'{"a":', b"1"),
        "long list of numbers in one entry": fill(entry + b"[", b"1.5,", b"1]}]"),
        "long list of short strings": fill(entry + b"[", b'"ab",', b'"ab"]}]'),
        "huge string": fill(entry + b'"', b"a", b'"}]'),
        "many keys in one object": entry + b"{" + b",".join(b'"k%d":1' % i for i in range(size // 13)) + b"}}]",
    }


# Filling a leaderboard --------------------------------------------------------------------------

def fill_board(task: Any, count: int, teams: list[Any], phase: Any = None, seed: int = 3) -> list[int]:
    """Add ``count`` public, scored runs to a task's board by copying the scores of a run already
    scored (one Score and its 21 vectors each), every number moved a little so that ranks differ.

    Real scoring of 500 runs takes minutes; what a board's readers cost depends on its rows.
    """
    from datetime import timedelta

    import numpy as np
    from django.db import transaction
    from django.utils import timezone

    from tasks.changes import touch_scores
    from tasks.models import Run, Score, ScoreVector

    template = (Score.objects.filter(run__task=task, run__status=Run.DONE, scope=Score.FULL,
                                     gold_version=task.latest_gold())
                .select_related("run").order_by("-run__is_baseline", "pk").last())
    if template is None:
        raise RuntimeError(f"task {task.slug} has no scored run to copy")
    vectors = list(template.vectors.all())
    rng = np.random.default_rng(seed)
    now = timezone.now()
    with transaction.atomic():
        runs = Run.objects.bulk_create([Run(
            task=task, team=teams[number % len(teams)], phase=phase, name=f"board-{number:04d}",
            description="copied scores for a full board", file_sha256=template.run.file_sha256,
            file_size=template.run.file_size, original_filename="board.json", parts=template.run.parts,
            status=Run.DONE, gold_version=template.gold_version, attempts=1,
            created_at=now - timedelta(days=2), queued_at=now, started_at=now, finished_at=now)
            for number in range(count)])
        factors = np.clip(rng.normal(1.0, 0.08, size=count), 0.5, 1.5)
        scores = Score.objects.bulk_create([Score(run=run, gold_version=template.gold_version, scope=Score.FULL,
                                                  summary=_scaled(template.summary, float(factor)))
                                            for run, factor in zip(runs, factors, strict=True)])
        ScoreVector.objects.bulk_create([
            ScoreVector(score=score, key=vector.key, mean=min(1.0, vector.mean * float(factor)),
                        values=np.clip(vector.array() * float(factor), 0.0, 1.0).tobytes())
            for score, factor in zip(scores, factors, strict=True) for vector in vectors], batch_size=2000)
        touch_scores(task)
    return [run.pk for run in runs]


def _scaled(summary: dict[str, Any], factor: float) -> dict[str, Any]:
    """A copied summary with every headline figure scaled (distances, so at most 1)."""
    return {**summary, "measures": {key: min(1.0, value * factor) for key, value in summary["measures"].items()}}


# HTTP -----------------------------------------------------------------------------------------------

@dataclass
class Reply:
    status: int  # 0: no HTTP answer at all (connection refused or reset)
    body: bytes
    headers: dict[str, str]
    seconds: float

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


def multipart(fields: dict[str, str], filename: str, content: bytes) -> tuple[bytes, str]:
    boundary = f"----evalserver-{uuid.uuid4().hex}"
    head = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
                    for name, value in fields.items())
    part = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
            "Content-Type: application/json\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
    return head + part, f"multipart/form-data; boundary={boundary}"


def send_case(url: str, token: str, transport: str, fields: dict[str, str], filename: str,
              content: bytes) -> Reply:
    """An upload sent over HTTP the way a hostile corpus case says (``Case.transport``)."""
    if transport == "json":
        return call(url, token, content, "application/json")
    body, content_type = multipart(fields, filename, content)
    boundary = content_type.split("boundary=", 1)[1]
    if transport == "no-file":
        body = body.replace(b'name="file"', b'name="attachment"', 1)
    elif transport == "many-files":
        extra = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="extra"; filename="x{i}.json"\r\n'
                         f"Content-Type: application/json\r\n\r\n[]\r\n".encode() for i in range(120))
        body = extra + body
    elif transport == "chunked":
        # As curl -H 'Transfer-Encoding: chunked' sends it: no Content-Length at all.
        parts = urlsplit(url)
        started = time.perf_counter()
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            connection.putrequest("POST", parts.path)
            connection.putheader("Authorization", f"Token {token}")
            connection.putheader("Content-Type", content_type)
            connection.putheader("Transfer-Encoding", "chunked")
            connection.endheaders()
            connection.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
            response = connection.getresponse()
            return Reply(response.status, response.read(), {k.lower(): v for k, v in response.getheaders()},
                         time.perf_counter() - started)
        except OSError:
            return Reply(0, b"", {}, time.perf_counter() - started)
        finally:
            connection.close()
    return call(url, token, body, content_type)


def call(url: str, token: str | None = None, body: bytes | None = None, content_type: str | None = None,
         timeout: float = 60, accept: str = "application/json") -> Reply:
    """One request on a fresh connection; HTTP errors and refused connections are answers, not exceptions."""
    parts = urlsplit(url)
    headers = {"Accept": accept, "Connection": "close"}
    if token:
        headers["Authorization"] = f"Token {token}"
    if content_type:
        headers["Content-Type"] = content_type
    started = time.perf_counter()
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request("POST" if body is not None else "GET", parts.path + (f"?{parts.query}" if parts.query
                                                                                 else ""), body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        return Reply(response.status, data, {k.lower(): v for k, v in response.getheaders()},
                     time.perf_counter() - started)
    except (OSError, http.client.HTTPException) as error:
        return Reply(0, f"{type(error).__name__}: {error}".encode(), {}, time.perf_counter() - started)
    finally:
        connection.close()


def upload(base_url: str, slug: str, token: str, content: bytes, name: str, timeout: float = 60) -> Reply:
    body, content_type = multipart({"name": name, "description": "reliability test run"}, f"{name}.json", content)
    return call(f"{base_url}/api/v1/tasks/{slug}/runs/", token, body, content_type, timeout=timeout)


def upload_patiently(base_url: str, slug: str, token: str, content: bytes, name: str, timeout: float = 60,
                     tries: int = 10) -> Reply:
    """``upload``, sent again as a client should when the server answers 503 with Retry-After
    (it is validating other uploads and stored nothing)."""
    for _ in range(tries):
        reply = upload(base_url, slug, token, content, name, timeout=timeout)
        retry = reply.headers.get("retry-after", "")
        if reply.status != 503 or not retry.isdigit():
            return reply
        time.sleep(min(int(retry), 30))
    return reply


def looks_like_traceback(reply: Reply) -> bool:
    text = reply.body[:20000].decode(errors="replace")
    return "Traceback (most recent call last)" in text or "technical_500" in text or 'id="traceback"' in text


# Reader load ------------------------------------------------------------------------------------------

@dataclass
class LoadResult:
    latencies: list[float] = field(default_factory=list)  # request sent to the last byte of the body read
    statuses: Counter = field(default_factory=Counter)
    wall_seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    # The reader's own decompression of each answer (0 when it had none), after its latency's clock
    # stopped: one per latency, in the same order.
    decoding: list[float] = field(default_factory=list)

    def merge(self, other: LoadResult) -> None:
        self.latencies += other.latencies
        self.decoding += other.decoding
        self.statuses += other.statuses
        self.failures += other.failures[:5]

    def percentile_with_decoding(self, fraction: float) -> float:
        """As ``percentile``, of each answer's latency plus the reader's decompression of it."""
        ordered = sorted(latency + decoding for latency, decoding in zip(self.latencies, self.decoding, strict=True))
        return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)] if ordered else math.nan

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    @property
    def throughput(self) -> float:
        return self.requests / self.wall_seconds if self.wall_seconds else 0.0

    def percentile(self, fraction: float) -> float:
        """Nearest rank, in seconds."""
        ordered = sorted(self.latencies)
        return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)] if ordered else math.nan


CLIENTS = ("plain", "gzip", "revalidating")


def _reader(host: str, port: int, paths: list[str], count: int, timeout: float, result: LoadResult,
            lock: threading.Lock, check: Callable[[bytes], bool] | None, pause: float, client: str) -> None:
    """One reader: ``count`` GETs over a kept-alive connection (re-opened when the server closes
    it), ``pause`` seconds apart (0: the next as soon as the last is answered).

    ``client``: ``plain`` asks for the identity encoding and never revalidates (the worst case);
    ``gzip`` sends ``Accept-Encoding: gzip`` and decompresses, as browsers, curl --compressed
    and HTTP libraries do; ``revalidating`` also sends back the last ETag of each path
    (``If-None-Match``), as a browser refreshing a page does, and counts a 304 as an answer.

    A latency is the time from sending the request to reading the body's last byte (a browser's
    ``responseStart`` to ``responseEnd``, which also stop before decoding). The decompression that
    follows is timed apart (``LoadResult.decoding``): a reader's own CPU, which on this one machine
    is taken from the server being measured (2.1 ms for a 500-run board's JSON, at 350 answers a
    second 0.7 of the 2 cores), and which ``percentile_with_decoding`` adds back.
    """
    connection = None
    local = LoadResult()
    etags: dict[str, str] = {}
    for number in range(count):
        if number and pause:
            time.sleep(pause)
        path = paths[number % len(paths)]
        headers = {"Accept": "application/json, text/html"}
        if client in ("gzip", "revalidating"):
            headers["Accept-Encoding"] = "gzip"
        if client == "revalidating" and path in etags:
            headers["If-None-Match"] = etags[path]
        started = time.perf_counter()
        answered, decoding = None, 0.0
        try:
            if connection is None:
                connection = http.client.HTTPConnection(host, port, timeout=timeout)
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            body = response.read()
            answered = time.perf_counter()
            status = response.status
            if response.getheader("content-encoding", "") == "gzip":
                body = gzip.decompress(body)
                decoding = time.perf_counter() - answered
            if response.getheader("etag"):
                etags[path] = response.getheader("etag")
            if response.getheader("connection", "").lower() == "close":
                connection.close()
                connection = None
            if status == 200 and check is not None and not check(body):
                status = -1
                local.failures.append(f"{path}: unexpected body {body[:200]!r}")
        except (OSError, http.client.HTTPException) as error:
            if connection is not None:
                connection.close()
            connection = None
            status = 0
            local.failures.append(f"{path}: {type(error).__name__}: {error}")
        local.latencies.append((answered or time.perf_counter()) - started)
        local.decoding.append(decoding)
        local.statuses[status] += 1
    if connection is not None:
        connection.close()
    with lock:
        result.merge(local)


def read_load(base_url: str, paths: list[str], readers: int, requests_per_reader: int, timeout: float = 30,
              check: Callable[[bytes], bool] | None = None, pause: float = 0.0, client: str = "plain") -> LoadResult:
    """``readers`` threads at once, each sending ``requests_per_reader`` GETs one after another."""
    if client not in CLIENTS:
        raise ValueError(f"client must be one of {', '.join(CLIENTS)}")
    parts = urlsplit(base_url)
    result, lock = LoadResult(), threading.Lock()
    threads = [threading.Thread(target=_reader, args=(parts.hostname, parts.port, paths[i % len(paths):]
                                                      + paths[:i % len(paths)], requests_per_reader, timeout,
                                                      result, lock, check, pause, client), daemon=True)
               for i in range(readers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=(timeout + pause) * requests_per_reader + 30)
    result.wall_seconds = time.perf_counter() - started
    return result


def _read_load_process(args: tuple) -> LoadResult:
    base_url, paths, readers, count, timeout, pause, client = args
    return read_load(base_url, paths, readers, count, timeout, pause=pause, client=client)


def read_load_processes(base_url: str, paths: list[str], readers: int, requests_per_reader: int,
                        processes: int = 4, timeout: float = 30, pause: float = 0.0,
                        client: str = "plain") -> LoadResult:
    """As ``read_load``, with the readers spread over client processes, so that one client's GIL
    does not become the bottleneck being measured."""
    import multiprocessing

    shares = [readers // processes + (1 if i < readers % processes else 0) for i in range(processes)]
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    with context.Pool(processes) as pool:
        parts = pool.map(_read_load_process, [(base_url, paths, share, requests_per_reader, timeout, pause, client)
                                              for share in shares if share])
    total = LoadResult(wall_seconds=time.perf_counter() - started)
    for part in parts:
        total.merge(part)
    return total


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


# Leak probe --------------------------------------------------------------------------------------

LEAK_PROBE_MEASURE = "quality.A.rsnod"
_NUMBER_TOKEN = re.compile(r"\d+\.\d+(?:[eE][-+]?\d+)?")


def leak_probe_phase_values(phase_names: list[str]) -> dict[str, tuple[str | None, bool]]:
    """``?phase=`` query strings by class: (query, whether it names a phase). A known name in
    percent-encoding is still that name; anything else must be a 404."""
    first = phase_names[0] if phase_names else "test"
    values: dict[str, tuple[str | None, bool]] = {"absent": (None, True), "empty": ("phase=", True)}
    for name in phase_names:
        values[f"known {name}"] = (f"phase={quote(name, safe='')}", True)
        values[f"percent-encoded {name}"] = ("phase=" + "".join(f"%{byte:02X}" for byte in name.encode()), True)
        for variant in {name.upper(), name.capitalize(), name.lower(), f" {name}", f"{name} ", f"{name}\n",
                        name[:1] + "\x00" + name[1:]} - set(phase_names):
            values[f"variant {variant!r}"] = (f"phase={quote(variant, safe='')}", False)
    values.update({
        "unknown": ("phase=bogus-phase", False), "NUL": ("phase=%00", False), "whitespace": ("phase=%20%09", False),
        # Decoded once by the server: "%74est" for "test", which is no phase's name.
        "double-encoded": (f"phase=%25{ord(first[0]):02X}{quote(first[1:], safe='')}", False),
        "unicode": ("phase=" + quote(first + "\u00e9", safe=""), False),
        "fullwidth": ("phase=" + quote("".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in first),
                                       safe=""), False),
        "very long": ("phase=" + "x" * 3000, False),
        "repeated, last unknown": (f"phase={quote(first, safe='')}&phase=bogus-phase", False),
    })
    return values


def leak_probe_paths(slug: str, measure: str = LEAK_PROBE_MEASURE) -> list[str]:
    """Every path that builds a board or serves data derived from one and takes ``?phase=``."""
    stats = f"/tasks/{slug}/statistics"
    return [f"/tasks/{slug}/", f"/tasks/{slug}/leaderboard.csv", f"/api/v1/tasks/{slug}/leaderboard/",
            f"{stats}/", f"{stats}/{measure}/pvalues/", f"{stats}/all/means.tex",
            *(f"{stats}/{measure}/{kind}" for kind in ("matrix.csv", "matrix.txt", "runs.txt", "pvalues.txt",
                                                        "pvalues.csv"))]


def number_forms(value: float, rounded: bool = True) -> set[str]:
    """How the server writes a number: ``repr`` (JSON, CSV, exports) and, if ``rounded``, 4 decimals
    (pages, LaTeX; Python's rounding and Django's ``floatformat``, which rounds the decimal repr
    half up)."""
    from decimal import ROUND_HALF_UP, Decimal

    forms = {f"{value:.4f}", str(Decimal(repr(value)).quantize(Decimal("0.0001"), ROUND_HALF_UP))} if rounded \
        else set()
    text = repr(value)
    if len(text) >= 8:  # "0.5" occurs in any page
        forms.add(text)
    return {form for form in forms if not form.endswith("00")}


def leak_probe(base_url: str, slug: str, phase_names: list[str], forbidden_numbers: Iterable[float],
               allowed_numbers: Iterable[float] = (), token: str | None = None,
               forbidden_exact: Iterable[float] = ()) -> list[str]:
    """Ask every board path of a task (``leak_probe_paths``) with every class of ``?phase=`` value
    (``leak_probe_phase_values``) as an anonymous reader (or with ``token``, which only the API
    reads) and return the problems: a 5xx, a value that names no phase answered otherwise than
    404, or a body holding a forbidden number in one of its written forms (``number_forms``:
    ``forbidden_exact`` ones, per-dialogue scores, only as ``repr``, since thousands of them
    rounded to 4 decimals would match any page; forms an allowed number shares are not searched).
    Empty: no leak."""
    allowed = {form for value in allowed_numbers for form in number_forms(value)}
    forbidden: dict[str, float] = {}
    for values, rounded in ((forbidden_numbers, True), (forbidden_exact, False)):
        for value in values:
            for form in number_forms(value, rounded) - allowed:
                forbidden.setdefault(form, value)
    problems = []
    for path in leak_probe_paths(slug):
        for label, (query, names_a_phase) in leak_probe_phase_values(phase_names).items():
            url = f"{base_url}{path}" + (f"?{query}" if query else "")
            reply = call(url, token, accept="*/*")
            shown = f"GET {path}" + (f"?{query[:60]}" if query else "") + f" ({label})"
            if reply.status == 0 or reply.status >= 500:
                problems.append(f"{shown}: {reply.status} {reply.body[:120]!r}")
            if not names_a_phase and reply.status != 404:
                problems.append(f"{shown}: {reply.status} instead of 404 for a phase that does not exist")
            body = (gzip.decompress(reply.body) if reply.headers.get("content-encoding") == "gzip"
                    else reply.body).decode("utf-8", errors="replace")
            leaked = sorted(set(_NUMBER_TOKEN.findall(body)) & forbidden.keys())
            if leaked:
                problems.append(f"{shown}: {reply.status} with {len(leaked)} forbidden number(s), e.g. "
                                f"{leaked[0]} ({forbidden[leaked[0]]!r})")
    return problems


def forbidden_test_numbers(slug: str) -> tuple[list[float], list[float], list[float]]:
    """(forbidden means, forbidden per-dialogue scores, allowed numbers) of a task for an anonymous
    reader, from the database (needs Django set up): on a test gold whose results are not
    published, every whole-set mean and every per-dialogue score; the numbers of hidden runs;
    everything else (and every stored statistic but the means) is allowed. The first two go to
    ``leak_probe`` as ``forbidden_numbers`` and ``forbidden_exact``."""
    from tasks import access
    from tasks.models import Score, ScoreVector, Task

    task = Task.objects.get(slug=slug)
    phases = access.task_phases(task.pk)
    hidden_golds = {phase.gold_version_id for phase in phases
                    if access.test_results_hidden(phases, phase.gold_version_id)}
    forbidden: list[float] = []
    per_dialogue: list[float] = []
    allowed: list[float] = []

    def secret(run: Any, gold_version_id: int, whole_set_or_dialogue: bool) -> bool:
        return ((not run.is_baseline and not run.is_public)
                or (gold_version_id in hidden_golds and whole_set_or_dialogue))

    for score in Score.objects.filter(run__task=task).select_related("run"):
        (forbidden if secret(score.run, score.gold_version_id, score.scope == Score.FULL)
         else allowed).extend(float(v) for v in score.summary.get("measures", {}).values())
    for vector in ScoreVector.objects.filter(score__run__task=task).select_related("score__run"):
        (per_dialogue if secret(vector.score.run, vector.score.gold_version_id, True)
         else allowed).extend(vector.array().tolist())
    allowed += statistics_numbers(task)
    return forbidden, per_dialogue, allowed


def statistics_numbers(task: Any) -> list[float]:
    """Every stored statistic of a task but the means (intervals, deltas, tau...), which pages round
    to 4 decimals too: a probe must not take them for scores. Means are left out on purpose: a
    stale record's means are the very scores a probe looks for."""
    from leaderboard.models import TaskStatistics

    found: list[float] = []

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for name, item in value.items():
                walk(item, name)
        elif isinstance(value, list) and key != "means":
            for item in value:
                walk(item, key)
        elif isinstance(value, float):
            found.append(value)

    for record in TaskStatistics.objects.filter(task=task).prefetch_related("measures"):
        walk(record.meta)
        for measure in record.measures.all():
            walk(measure.summary)
            for matrix in measure.matrices(record.permutations).values():
                # Pages print negative differences too; the probe reads numbers without their sign.
                found += [abs(value) for value in matrix.ravel().tolist()]
    return found


# Seeding a site in a fresh database --------------------------------------------------------------------

def kind_gold(kind: str) -> list[dict[str, Any]]:
    """The gold of ``seed``'s response or metric task (the same as tests/test_hostile_uploads.py's)."""
    from fixtures import metric_demo, response_demo

    return response_demo.generate_gold(30, seed=3) if kind == "response" else metric_demo.generate_gold(6, 3, seed=1)


def seed(spec: dict[str, Any]) -> dict[str, Any]:
    """Migrate, then build one task: gold from ``big_gold``, teams with one member and a token each,
    an optional phase with quotas, an optional filled board. Runs inside Django (``python -m
    tests.workers seed``); baselines are scored in-process when no broker is configured."""
    from datetime import timedelta

    import django
    import orjson

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from tasks import jobs, organising, submissions
    from tasks.models import Phase, Team
    from tasks.tokens import issue_token

    call_command("migrate", verbosity=0, interactive=False)
    users = get_user_model()
    if spec.get("kind") in ("response", "metric"):
        # A task of another kind on its demo gold (kind_gold), for the hostile corpus's KIND_CASES.
        task = organising.create_task(spec["slug"], title=spec.get("title", spec["slug"]), kind=spec["kind"])
        version = organising.load_gold_version(task, orjson.dumps(kind_gold(spec["kind"])), "gold.json")
        user = users.objects.get(username=spec["member"])
        return {"task": task.slug, "gold_version": version.number, "tokens": {}, "phase": None,
                "member": user.username}
    task = organising.create_task(spec["slug"], "stc3", spec.get("title", spec["slug"]))
    task.permutations = 200
    task.save()
    gold = big_gold(spec["dialogues"], seed=spec.get("seed", 7))
    version = organising.load_gold_version(task, orjson.dumps(gold), "gold.json")
    if spec.get("bare_staff"):
        # Staff status and nothing else: no permission, no team, organiser of nothing.
        users.objects.create_user(spec["bare_staff"]["username"], password=spec["bare_staff"]["password"],
                                  is_staff=True)
    if spec.get("superuser"):
        users.objects.create_user(spec["superuser"]["username"], password=spec["superuser"]["password"],
                                  is_staff=True, is_superuser=True)
    teams, tokens = [], {}
    for number in range(spec.get("teams", 1)):
        name = f"{spec.get('team_prefix', 'Team')} {number + 1:02d}"
        team = Team.objects.create(name=name, slug=f"{spec['slug']}-t{number + 1:02d}")
        user = users.objects.create_user(f"{spec['slug']}-u{number + 1:02d}", password=uuid.uuid4().hex)
        team.members.add(user)
        teams.append(team)
        tokens[name] = issue_token(user)
    phase = None
    if spec.get("phase"):
        now = timezone.now()
        phase = Phase.objects.create(task=task, name="test", kind=Phase.DEVELOPMENT, gold_version=version,
                                     starts_at=now - timedelta(days=3),
                                     ends_at=now + timedelta(seconds=spec["phase"].get("ends_in", 3600)),
                                     daily_quota=spec["phase"]["daily_quota"],
                                     total_quota=spec["phase"].get("total_quota", 200))
    board: list[int] = []
    if spec.get("board"):
        # Teams of their own, so that the board uses none of the participants' quotas.
        archive = [Team.objects.create(name=f"Archive {number:02d}", slug=f"{spec['slug']}-a{number:02d}")
                   for number in range(10)]
        archivist = users.objects.create_user(f"{spec['slug']}-archivist", password=uuid.uuid4().hex)
        archive[0].members.add(archivist)
        jobs.score_run(submissions.submit_run(task, archivist,
                                              submissions.Submission(content=big_run(gold, 0.4, seed=99),
                                                                     filename="seed.json", name="seed-run"),
                                              phase).pk)
        board = fill_board(task, spec["board"], archive, phase)
    return {"task": task.slug, "gold_version": version.number, "tokens": tokens, "board_runs": len(board),
            "phase": phase.name if phase else None}


def leak_site(spec: dict[str, Any]) -> dict[str, Any]:
    """Build a task with a development phase (its own gold, closed), an open test phase on the test
    gold with a live subset and an unpublished final phase on the same gold, runs of two teams
    (one hidden) and stored statistics; then ``leak_probe`` the live server at ``spec["base_url"]``
    for it. Runs inside Django (``python -m tests.workers leak``), scoring in-process."""
    from datetime import timedelta

    import django
    import orjson

    django.setup()
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from fixtures.synthetic import generate_gold, generate_run
    from leaderboard.statistics import compute_task_statistics
    from tasks import jobs, organising, submissions
    from tasks.models import Phase, Team

    slug = spec["slug"]
    task = organising.create_task(slug, "stc3", "Leak probe")
    task.permutations = 200
    task.save()
    development = organising.load_gold_version(task, orjson.dumps(generate_gold(30, seed=3)), "dev.json")
    test_gold = generate_gold(40, seed=4)
    test = organising.load_gold_version(task, orjson.dumps(test_gold), "test.json", label="test")
    now = timezone.now()
    Phase.objects.create(task=task, name="development", kind=Phase.DEVELOPMENT, gold_version=development,
                         starts_at=now - timedelta(days=9), ends_at=now - timedelta(days=2))
    phase = Phase.objects.create(task=task, name="test", kind=Phase.TEST, gold_version=test,
                                 starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=1),
                                 live_subset_size=15, live_subset_seed=3)
    Phase.objects.create(task=task, name="final", kind=Phase.FINAL, gold_version=test,
                         starts_at=now + timedelta(days=2), ends_at=now + timedelta(days=9))
    users = get_user_model()
    for number, public in ((1, True), (2, True), (3, False)):
        team = Team.objects.create(name=f"Leak {number}", slug=f"{slug}-t{number}")
        user = users.objects.create_user(f"{slug}-u{number}", password=uuid.uuid4().hex)
        team.members.add(user)
        run = submissions.submit_run(task, user, submissions.Submission(
            content=orjson.dumps(generate_run(test_gold, "noisy", noise=0.2 + 0.1 * number, seed=number)),
            name=f"leak-run-{number}", description="method", is_public=public), phase)
        jobs.score_run(run.pk)
    compute_task_statistics(task.pk)
    forbidden, per_dialogue, allowed = forbidden_test_numbers(slug)
    problems = leak_probe(spec["base_url"], slug, ["development", "test", "final"], forbidden, allowed,
                          forbidden_exact=per_dialogue)
    requests = len(leak_probe_paths(slug)) * len(leak_probe_phase_values(["development", "test", "final"]))
    return {"problems": problems, "requests": requests, "forbidden": len(forbidden),
            "per_dialogue": len(per_dialogue)}


def seed_site(env: dict[str, str], spec: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
    """``seed`` in a subprocess with ``env`` (its DATABASE_URL is the site's database)."""
    env = {key: value for key, value in env.items() if key != "CELERY_BROKER_URL"}  # baselines in-process
    completed = subprocess.run([PYTHON, "-m", "tests.workers", "seed", json.dumps(spec)], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=timeout)
    if completed.returncode:
        raise RuntimeError(f"seeding failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def count_rows(database_url: str, tables: Iterable[str] = ()) -> dict[str, int]:
    """Rows of every table of the public schema (or of ``tables``), straight from PostgreSQL."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(database_url, autocommit=True) as connection:
        names = list(tables) or [row[0] for row in connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")]
        return {name: connection.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(name)))
                .fetchone()[0] for name in names}


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "seed":
        print(json.dumps(seed(json.loads(argv[1]))))
        return 0
    if len(argv) == 2 and argv[0] == "leak":
        print(json.dumps(leak_site(json.loads(argv[1]))))
        return 0
    print("usage: python -m tests.workers seed|leak SPEC_JSON", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
