"""gunicorn settings for the web app (``gunicorn -c gunicorn.conf.py evalserver.wsgi``).

One worker process per core, each with a few threads. Requests here are mostly CPU (Django,
JSON, gzip) with short waits on PostgreSQL and Redis: more processes than cores only adds
context switches, and many threads per process contend for the interpreter lock. Measured on
2 cores with 50 readers of a 500-run leaderboard (docs/reliability.md): 2 workers x 2 threads
served 600 requests/s with p99 214 ms, 4 x 4 served 510/s with p99 1.2 s.
"""

import multiprocessing
import os


def _positive_int(name: str, default: int) -> int:
    """Like evalserver.settings.env_int: a value that is not a whole number >= 1 stops the start,
    naming the variable (gunicorn reads this file before Django's settings exist)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise SystemExit(f"{name}={raw!r} is not a whole number of at least 1")
    return int(raw)


bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = _positive_int("WEB_CONCURRENCY", multiprocessing.cpu_count())
threads = _positive_int("GUNICORN_THREADS", 2)
worker_class = "gthread"
timeout = 60  # a run upload is validated in the request: up to a few seconds for 32 MiB
graceful_timeout = 20
keepalive = 5
# gunicorn 27 opens a control socket in ~/.gunicorn by default: one path for every server of the
# user (two servers on one machine would take it from each other), and nothing here uses it.
control_socket_disable = True


# The embedded default (no CELERY_BROKER_URL): uploads are scored by a background worker beside
# the web server (``manage.py scoring_worker``, tasks.worker), started and stopped by gunicorn's
# master, so that an upload is answered at once (202) without a broker. The database is its
# queue. Setting EVALSERVER_SCORING_MODE=inline scores in the request instead, with no worker.
if not os.environ.get("CELERY_BROKER_URL", "").strip():
    os.environ.setdefault("EVALSERVER_SCORING_MODE", "worker")


class _ScoringWorker:
    """The background worker as a child of gunicorn's master: started when the master is ready,
    started again if it dies (after 1 s, doubling up to 30 s while it keeps dying young), and
    stopped with SIGTERM when the master exits (SIGKILL after 15 s). The worker also stops by
    itself when the master is gone (``--parent-pid``): no orphan either way."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.process = None

    def start(self, server) -> None:  # noqa: ANN001 - gunicorn's Arbiter
        import threading

        threading.Thread(target=self._supervise, args=(server.log,), name="scoring-worker", daemon=True).start()

    def _supervise(self, log) -> None:  # noqa: ANN001 - gunicorn's logger
        import subprocess
        import sys
        import time
        from pathlib import Path

        manage = str(Path(__file__).resolve().parent / "manage.py")
        delay = 1.0
        while True:
            with self.lock:
                if self.stopping.is_set():
                    return
                started = time.monotonic()
                self.process = subprocess.Popen([sys.executable, manage, "scoring_worker",
                                                 "--parent-pid", str(os.getpid())])
                log.info("Started the scoring worker (pid: %s)", self.process.pid)
            # gunicorn's master reaps every child it sees exit; wait() then reports 0 (its status is
            # lost, not its exit).
            code = self.process.wait()
            if self.stopping.wait(0):
                return
            delay = delay * 2 if time.monotonic() - started < 60 else 1.0
            delay = min(delay, 30.0)
            log.error("The scoring worker exited (status %s); starting it again in %.0f s", code, delay)
            if self.stopping.wait(delay):
                return

    def stop(self) -> None:
        import subprocess

        with self.lock:
            self.stopping.set()
            process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


_scoring_worker = _ScoringWorker() if os.environ.get("EVALSERVER_SCORING_MODE") == "worker" else None


def when_ready(server) -> None:  # noqa: ANN001 - gunicorn's server hook
    if _scoring_worker is not None:
        _scoring_worker.start(server)


def on_exit(server) -> None:  # noqa: ANN001 - gunicorn's server hook
    if _scoring_worker is not None:
        _scoring_worker.stop()
