"""gunicorn settings for the web app (``gunicorn -c gunicorn.conf.py evalserver.wsgi``).

One worker process per core, each with a few threads. Requests here are mostly CPU (Django,
JSON, gzip) with short waits on PostgreSQL and Redis: more processes than cores only adds
context switches, and many threads per process contend for the interpreter lock. Measured on
2 cores with 50 readers of a 500-run leaderboard (docs/reliability.md): 2 workers x 2 threads
served 600 requests/s with p99 214 ms, 4 x 4 served 510/s with p99 1.2 s.
"""

# Everything the supervising threads below use is imported here, in the main thread: an import
# running in such a thread while the master forks a web process leaves that module's import lock
# held in the child for ever (seen: a web process hung importing billiard, never answering).
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path


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
# the web server (``manage.py scoring_worker``, tasks.worker) and the boards' statistics computed
# by another (``manage.py statistics_worker``, leaderboard.worker), both started and stopped by
# gunicorn's master, so that an upload is answered at once (202) without a broker. The database is
# their queue. Setting EVALSERVER_SCORING_MODE=inline scores in the request instead, with no
# scoring worker; EVALSERVER_STATISTICS_MODE=thread computes statistics in a thread of whichever
# process scored, with no statistics worker. A third sends the notifications' e-mails
# (``manage.py notices_worker``, notices.worker), so that no request and no scoring waits for a
# mail server.
if not os.environ.get("CELERY_BROKER_URL", "").strip():
    os.environ.setdefault("EVALSERVER_SCORING_MODE", "worker")
    os.environ.setdefault("EVALSERVER_STATISTICS_MODE", "worker")
    os.environ.setdefault("EVALSERVER_NOTICE_MODE", "worker")


# Held while a background worker is started (subprocess.Popen, in a supervising thread) and while
# gunicorn's master forks a web process (os.fork, in its main thread), so the two never overlap.
# Popen waits until its child has exec'd, reading a close-on-exec pipe; a web process forked in
# between inherits that pipe's write end and never execs, so Popen waited until that web process
# exited: the worker ran, but its supervisor hung (seen: "Started the scoring worker" logged only
# at shutdown, and a dead worker would not have been started again). Popen without preexec_fn
# runs no fork hooks, so holding the lock around it cannot deadlock.
_forking = threading.RLock()


def _new_lock_in_child() -> None:
    # The child (a web process) starts with a fresh lock: the inherited one is held by the thread
    # that forked, and a fork from another thread of the child would wait for it for ever.
    global _forking
    _forking = threading.RLock()


os.register_at_fork(before=lambda: _forking.acquire(), after_in_parent=lambda: _forking.release(),
                    after_in_child=_new_lock_in_child)


class _Background:
    """A background worker (a management command) as a child of gunicorn's master: started when
    the master is ready, started again if it dies (after 1 s, doubling up to 30 s while it keeps
    dying young), and stopped with SIGTERM when the master exits (SIGKILL after 15 s). The worker
    also stops by itself when the master is gone (``--parent-pid``): no orphan either way."""

    def __init__(self, command: str, title: str) -> None:
        self.command, self.title = command, title
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.process = None

    def start(self, server) -> None:  # noqa: ANN001 - gunicorn's Arbiter
        threading.Thread(target=self._supervise, args=(server,), name=self.command, daemon=True).start()

    def _supervise(self, server) -> None:  # noqa: ANN001 - gunicorn's Arbiter
        log = server.log
        manage = str(Path(__file__).resolve().parent / "manage.py")
        delay = 1.0
        while True:
            with self.lock:
                # A master shutting down has closed its listeners (Arbiter.stop) but calls on_exit
                # only once its web processes are gone: a worker that stopped on the same signal
                # (Ctrl-C reaches the whole process group) must not be started again meanwhile.
                if self.stopping.is_set() or not server.LISTENERS:
                    return
                started = time.monotonic()
                with _forking:
                    self.process = subprocess.Popen([sys.executable, manage, self.command,
                                                     "--parent-pid", str(os.getpid())])
                log.info("Started the %s (pid: %s)", self.title, self.process.pid)
            # gunicorn's master reaps every child it sees exit; wait() then reports 0 (its status is
            # lost, not its exit).
            code = self.process.wait()
            if self.stopping.wait(0) or not server.LISTENERS:
                return
            delay = delay * 2 if time.monotonic() - started < 60 else 1.0
            delay = min(delay, 30.0)
            log.error("The %s exited (status %s); starting it again in %.0f s", self.title, code, delay)
            if self.stopping.wait(delay):
                return

    def signal_stop(self) -> None:
        with self.lock:
            self.stopping.set()
            process = self.process
        if process is not None and process.poll() is None:
            process.terminate()

    def wait_stopped(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


_background = [worker for mode, worker in (
    ("EVALSERVER_SCORING_MODE", _Background("scoring_worker", "scoring worker")),
    ("EVALSERVER_STATISTICS_MODE", _Background("statistics_worker", "statistics worker")),
    ("EVALSERVER_NOTICE_MODE", _Background("notices_worker", "e-mail sender")))
    if os.environ.get(mode) == "worker"]


def when_ready(server) -> None:  # noqa: ANN001 - gunicorn's server hook
    for worker in _background:
        worker.start(server)


def on_exit(server) -> None:  # noqa: ANN001 - gunicorn's server hook
    # Both are told at once, then waited for: a stop takes the longer of the two, not their sum.
    for worker in _background:
        worker.signal_stop()
    for worker in _background:
        worker.wait_stopped()
