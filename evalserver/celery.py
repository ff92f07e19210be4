"""The Celery application; configuration comes from Django settings (``CELERY_*``).

Two queues (settings, "Celery"): the default queue for scoring and light jobs and ``<default>-heavy``
for jobs marked ``heavy=True`` (statistics, vBLEU pool jobs), so a long one never holds up the
scoring of an upload. A worker started without ``-Q`` consumes both."""

import os
from typing import Any

from celery import Celery
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalserver.settings")

app = Celery("evalserver")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Task modules are named jobs.py (a module named tasks.tasks would be confusing), so look for those.
app.autodiscover_tasks(related_name="jobs")


def heavy_queue(default_queue: str | None = None) -> str:
    """The heavy jobs' queue: the default queue's name (read when asked: tests change it) + "-heavy"."""
    return f"{default_queue or app.conf.task_default_queue}-heavy"


def route(name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **_: Any) -> dict[str, str] | None:
    """Celery's router (``task_routes``): a task declared ``@shared_task(heavy=True)`` goes to the
    heavy queue; everything else to the default queue."""
    if getattr(task, "heavy", False):
        return {"queue": heavy_queue()}
    return None


@app.on_after_configure.connect
def _both_queues(sender: Celery, **_: Any) -> None:
    # Declared, so that a worker started without -Q consumes the heavy queue as well.
    if not sender.conf.task_queues:
        default = sender.conf.task_default_queue
        sender.conf.task_queues = tuple(Queue(name, Exchange(name), routing_key=name)
                                        for name in (default, heavy_queue(default)))
