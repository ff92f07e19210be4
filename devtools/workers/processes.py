"""Real server processes for the fault and load tests: Celery workers, gunicorn, an S3 object store.

Also the shared settings (``ROOT``, ``BROKERS``, ``FAULT_LIMITS``...), waiting for a condition, a
site's environment and ``manage.py`` in a subprocess.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent  # devtools/workers/processes.py -> the repository
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


def reachable(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a service listens on ``host:port`` (PostgreSQL, Redis, RabbitMQ, a server started)."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


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
