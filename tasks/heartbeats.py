"""Worker heartbeats: which background processes are alive, for ``/healthz`` and ``/metrics``.

A run's own heartbeat (``Run.heartbeat_at``, ``tasks.leases``) says a claim is alive, and only
while a run is scored; an idle worker writes none, and a dead idle worker looks the same as a
live one. So every background process (the embedded default's scoring and statistics workers,
each Celery worker) also writes one row here from a daemon thread of its own, every
``EVALSERVER_WORKER_HEARTBEAT_SECONDS``, busy or not: a row older than a few beats is a worker
that is gone. Rows of processes gone for a day are removed by the next process that starts.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection, models
from django.utils import timezone

log = logging.getLogger(__name__)
ROLES = ("scoring", "statistics", "celery")
FORGOTTEN_AFTER = timedelta(days=1)


class WorkerHeartbeat(models.Model):
    """A background process and the last time it said it was alive."""

    name = models.CharField(max_length=200, unique=True, help_text="role@host:pid")
    role = models.CharField(max_length=20, help_text="scoring, statistics or celery")
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField(db_index=True)

    class Meta:
        app_label = "tasks"

    def __str__(self) -> str:
        return f"{self.name} ({self.beat_at:%Y-%m-%d %H:%M:%S})"


def every() -> float:
    return float(settings.EVALSERVER_WORKER_HEARTBEAT_SECONDS)


def dead_after() -> timedelta:
    """A worker whose last beat is older than this is gone (three beats missed)."""
    return timedelta(seconds=3 * every())


def beat(name: str, role: str, started_at: object) -> None:
    WorkerHeartbeat.objects.update_or_create(name=name, defaults={"role": role, "started_at": started_at,
                                                                  "beat_at": timezone.now()})


def start(role: str, stopping: threading.Event | None = None) -> threading.Thread:
    """Beat for this process as ``role`` from a daemon thread until ``stopping`` is set (or the
    process ends); the first beat is written before this returns."""
    if role not in ROLES:
        raise ValueError(f"unknown worker role {role!r}")
    name, started_at = f"{role}@{socket.gethostname()}:{os.getpid()}", timezone.now()
    stopping = stopping or threading.Event()
    WorkerHeartbeat.objects.filter(beat_at__lt=started_at - FORGOTTEN_AFTER).delete()
    beat(name, role, started_at)

    def keep_beating() -> None:
        while not stopping.wait(every()):
            try:
                beat(name, role, started_at)
            except DatabaseError:  # an outage: the next beat tries again; /healthz shows the gap
                log.warning("%s: heartbeat not written", name, exc_info=True)
            finally:
                connection.close()  # this thread's own connection, never kept across a wait

    thread = threading.Thread(target=keep_beating, name=f"{role}-heartbeat", daemon=True)
    thread.start()
    return thread


def alive(role: str | None = None) -> list[WorkerHeartbeat]:
    rows = WorkerHeartbeat.objects.filter(beat_at__gte=timezone.now() - dead_after())
    return list(rows.filter(role=role) if role else rows)


__all__ = ["ROLES", "WorkerHeartbeat", "alive", "beat", "dead_after", "every", "start"]
