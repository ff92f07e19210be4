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
