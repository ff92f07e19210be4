"""Celery tasks: thin wrappers that receive database ids and call ordinary functions."""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.core.cache import cache

from evalserver.celery import app
from tasks import services

log = logging.getLogger(__name__)


# A database restart or a cut connection: retry after 1, 2, 4, ... s, at most a minute apart,
# for about two minutes in all.
DB_RETRIES = 7
DB_RETRY_BACKOFF_MAX = 60


def db_retry_countdown(retries: int) -> int:
    """Seconds before the next retry after a transient database error: exponential, capped."""
    return min(DB_RETRY_BACKOFF_MAX, 2 ** retries)


@app.task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def score_run_task(self, run_id: int, reclaim_attempt: int | None = None) -> str:
    """Score a run; retry transient database errors only, taking back this job's own claim.

    Not ``autoretry_for``: a retry must carry the attempt number that the cut job claimed
    (``reclaim_attempt``), or it would find the run ``scoring`` under its own earlier attempt,
    answer "skipped" and leave the run to ``requeue_stuck`` until the claim is stale. Once
    ``DB_RETRIES`` are spent the error is raised and ``requeue_stuck`` re-sends the run later.
    """
    retry = {"countdown": db_retry_countdown(self.request.retries), "max_retries": DB_RETRIES}
    try:
        outcome = services.score_run(run_id, reclaim_attempt=reclaim_attempt)
    except services.ScoringInterrupted as interrupted:
        raise self.retry(args=(run_id,), kwargs={"reclaim_attempt": interrupted.attempt}, exc=interrupted,
                         **retry) from interrupted
    except services.TRANSIENT_DB_ERRORS as error:
        # Before any claim (the claim itself failed, or the run could not be read): nothing
        # changed; keep whatever attempt this job was allowed to take back.
        raise self.retry(args=(run_id,), kwargs={"reclaim_attempt": reclaim_attempt}, exc=error, **retry) from error
    if outcome.startswith("skipped") and (self.request.delivery_info or {}).get("redelivered"):
        # The broker redelivered this job because the worker that had it died (acks_late): the run
        # still says "scoring" under the dead attempt. Try again once that attempt is stale.
        wait = services.seconds_until_claimable(run_id)
        if wait is not None:
            raise self.retry(countdown=wait + 1, max_retries=3)
    return outcome


@app.task(acks_late=True)
def requeue_stuck_runs_task() -> list[int]:
    return services.requeue_stuck_runs()


STATISTICS_DEBOUNCE_SECONDS = 5


def schedule_statistics(task_id: int) -> None:
    """Ask for the task's statistics to be recomputed; triggers close together share one run.

    A cache key marks a pending computation; only the trigger that sets it sends a job, delayed
    by the debounce window, so a burst of scored runs causes one recomputation over all of them.
    """
    mode = settings.EVALSERVER_STATISTICS_MODE
    if mode == "off":
        return
    if mode == "sync":
        compute_statistics_task.apply((task_id,))
        return
    key = f"statistics-pending:{task_id}"
    if mode == "thread":
        _schedule_in_thread(task_id)
        return
    if cache.add(key, 1, timeout=STATISTICS_DEBOUNCE_SECONDS * 6):
        try:
            compute_statistics_task.apply_async((task_id,), countdown=STATISTICS_DEBOUNCE_SECONDS)
        except Exception:
            cache.delete(key)
            log.exception("could not queue statistics for task %s", task_id)


_pending_threads: dict[int, threading.Timer] = {}
_pending_lock = threading.Lock()


def _schedule_in_thread(task_id: int) -> None:
    """Without a broker, recompute in a background thread after the debounce window, so an
    upload's response does not wait for the statistics (the embedded default)."""

    def run() -> None:
        with _pending_lock:
            _pending_threads.pop(task_id, None)
        try:
            from django.db import close_old_connections

            compute_statistics_task.apply((task_id,))
            close_old_connections()
        except Exception:
            log.exception("statistics of task %s failed", task_id)

    with _pending_lock:
        if task_id in _pending_threads:
            return
        timer = threading.Timer(STATISTICS_DEBOUNCE_SECONDS / 5, run)
        timer.daemon = True
        _pending_threads[task_id] = timer
        timer.start()


@app.task(acks_late=True, soft_time_limit=600, time_limit=720)
def compute_statistics_task(task_id: int) -> str:
    from leaderboard.statistics import compute_task_statistics

    cache.delete(f"statistics-pending:{task_id}")
    return compute_task_statistics(task_id)
