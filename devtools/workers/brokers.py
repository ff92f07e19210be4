"""Brokers, and the runs' fate in the database: queues on RabbitMQ or Redis, the test process as a
publisher, waiting for a run's status, checking it was scored exactly once.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from devtools.workers.processes import VECTORS_PER_SCORE, Process, wait_until

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

    keys = ("broker_url", "task_always_eager", "task_default_queue")
    previous, eager = {key: app.conf[key] for key in keys}, settings.CELERY_TASK_ALWAYS_EAGER
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.update(broker_url=broker_url, task_always_eager=False, task_default_queue=queue)
    reset_producers(app)
    try:
        yield
    finally:
        app.conf.update(previous)
        settings.CELERY_TASK_ALWAYS_EAGER = eager
        reset_producers(app)


def reset_producers(app: Any) -> None:
    """Drop the app's cached connection pool and routing (built from the configuration in force
    when first used), as Celery itself does after a fork, so the next job goes where the
    configuration now says."""
    from kombu import pools

    pools.reset()  # closes the connections; kombu keeps its pools in a registry keyed by broker
    app._pool = None
    app.__dict__.pop("amqp", None)


def database_url() -> str:
    """The URL of the database this test uses (``test_<name>``), for the worker process."""
    from django.db import connection

    db = connection.settings_dict
    credentials = quote(db["USER"] or "postgres") + (f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else "")
    return f"postgres://{credentials}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def worker_env(broker_url: str, upload_dir: Path, **extra: str) -> dict[str, str]:
    """A worker's environment: this test's database and upload folder, the given broker."""
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
