"""The Celery application; configuration comes from Django settings (``CELERY_*``).

Two queues (settings, "Celery"): the default queue for scoring and light jobs and ``<default>-heavy``
for jobs marked ``heavy=True`` (statistics, vBLEU pool jobs). A long one holds up the scoring of an
upload only if one worker consumes both, which a worker started without ``-Q`` does: every
documented start runs two workers (``-Q celery`` and ``-Q celery-heavy``), and a worker that takes
both queues says so loudly when it starts (``shared_queue_warning``)."""

import logging
import os
from collections.abc import Iterable
from typing import Any

from celery import Celery
from celery.signals import celeryd_after_setup, worker_ready
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


log = logging.getLogger(__name__)


def shared_queue_warning(consumed: Iterable[str], slots: int, default_queue: str | None = None) -> str | None:
    """What is wrong with a worker that consumes ``consumed`` with ``slots`` jobs at once, or None.

    Taking both the scoring queue and the heavy queue lets statistics and pool jobs (a minute to
    an hour each) fill every slot, and an upload's scoring (under a second) then waits for them:
    the audit of issue 43 measured a median of 57 s from upload to stored score this way."""
    default = default_queue or app.conf.task_default_queue
    heavy = heavy_queue(default)
    if not {default, heavy} <= set(consumed):
        return None
    if slots <= 1:
        when = "every statistics or vBLEU pool job holds up the scoring of every upload for its whole length"
    else:
        when = (f"whenever {slots} statistics or vBLEU pool jobs run at once (one per task whose scores "
                "changed), the scoring of every upload waits for them")
    return (f"THIS WORKER CONSUMES BOTH THE SCORING QUEUE {default!r} AND THE HEAVY QUEUE {heavy!r} "
            f"WITH {slots} SLOT{'S' if slots != 1 else ''}: {when}. Start two workers instead: "
            f"`celery -A evalserver.celery worker -Q {default}` (scoring) and "
            f"`celery -A evalserver.celery worker -Q {heavy} --concurrency=1` (statistics, pool jobs).")


def worker_slots(worker: Any) -> int:
    """How many jobs a starting worker runs at once: one for the solo pool, else its concurrency
    (the largest, under --autoscale)."""
    pool = worker.pool_cls if isinstance(worker.pool_cls, str) else getattr(worker.pool_cls, "__module__", "")
    if "solo" in str(pool):
        return 1
    return max(int(worker.concurrency or 1), int(getattr(worker, "max_concurrency", None) or 0))


@celeryd_after_setup.connect
def _warn_if_scoring_can_wait(sender: str, instance: Any, **_: Any) -> None:
    # After -Q has been applied (celeryd_after_setup), before the first job is taken.
    warning = shared_queue_warning(instance.app.amqp.queues.consume_from, worker_slots(instance),
                                   instance.app.conf.task_default_queue)
    if warning:
        log.warning("%s\n%s\n%s", "!" * 100, warning, "!" * 100)


@worker_ready.connect
def _beat_while_alive(sender: Any, **_: Any) -> None:
    # /healthz and /metrics tell a live Celery worker from a gone one by this row (tasks.heartbeats);
    # Celery's own heartbeats are events, off here (CELERY_WORKER_SEND_TASK_EVENTS) and not stored.
    from tasks import heartbeats

    heartbeats.start("celery")
