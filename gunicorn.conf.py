"""gunicorn settings for the web app (``gunicorn -c gunicorn.conf.py evalserver.wsgi``).

One worker process per core, each with a few threads. Requests here are mostly CPU (Django,
JSON, gzip) with short waits on PostgreSQL and Redis: more processes than cores only adds
context switches, and many threads per process contend for the interpreter lock. Measured on
2 cores with 50 readers of a 500-run leaderboard (docs/reliability.md): 2 workers x 2 threads
served 600 requests/s with p99 214 ms, 4 x 4 served 510/s with p99 1.2 s.
"""

import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", multiprocessing.cpu_count()))
threads = int(os.environ.get("GUNICORN_THREADS", "2"))
worker_class = "gthread"
timeout = 60  # a run upload is validated in the request: up to a few seconds for 32 MiB
graceful_timeout = 20
keepalive = 5
