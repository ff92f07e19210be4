"""Celery tasks: thin wrappers that receive database ids and call ordinary functions."""

from __future__ import annotations

import logging
import threading
import time

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


def schedule_statistics(task_id: int) -> None:
    """Scores changed: ask for the task's statistics, computed once the board has been quiet for
    the debounce (``EVALSERVER_STATISTICS_DEBOUNCE_SECONDS``, in every mode).

    The request is recorded in the database (``leaderboard.scheduling``), which is what makes a
    burst of triggers share one computation and keeps every process (web threads, workers,
    commands) to one computation per board at a time; the timer or message sent here only says
    when to look.
    """
    from leaderboard import scheduling

    mode = settings.EVALSERVER_STATISTICS_MODE
    if mode == "off":
        return
    scheduling.request(task_id)
    if mode == "sync":
        scheduling.run_due(task_id, force=True)
        return
    wake_statistics(task_id, scheduling.debounce_seconds())


def wake_statistics(task_id: int, delay: float) -> None:
    """Look at the task's statistics after ``delay`` seconds: a Celery job, or in the thread mode
    a timer in this process. An earlier look already planned makes this one unnecessary: that
    one plans the next."""
    mode = settings.EVALSERVER_STATISTICS_MODE
    if mode == "thread":
        _wake_in_thread(task_id, delay)
    elif mode == "celery":
        _wake_in_celery(task_id, delay)


def _pending_key(task_id: int) -> str:
    return f"statistics-pending:{task_id}"


def _wake_in_celery(task_id: int, delay: float) -> None:
    # The cache only spares the broker duplicate messages; the claim in the database decides.
    run_at = time.time() + delay
    planned = cache.get(_pending_key(task_id))
    if planned is not None and planned <= run_at + 0.5:
        return
    cache.set(_pending_key(task_id), run_at, timeout=int(delay) + 300)
    try:
        compute_statistics_task.apply_async((task_id,), countdown=delay)
    except Exception:
        cache.delete(_pending_key(task_id))
        log.exception("could not queue statistics for task %s; the statistics sweep sends them later", task_id)


_timers: dict[int, tuple[threading.Timer, float]] = {}
_timers_lock = threading.Lock()


def _wake_in_thread(task_id: int, delay: float) -> None:
    """Without a broker (the embedded default): a timer thread in this web process. Several
    processes may each arm one; the claim lets one of them compute."""
    run_at = time.monotonic() + delay
    with _timers_lock:
        current = _timers.get(task_id)
        if current is not None and current[1] <= run_at + 0.05:
            return
        if current is not None:
            current[0].cancel()
        timer = threading.Timer(delay, _look_in_thread, (task_id,))
        timer.daemon = True
        _timers[task_id] = (timer, run_at)
        timer.start()


def _look_in_thread(task_id: int) -> None:
    from django.db import connections

    from leaderboard import scheduling

    with _timers_lock:
        current = _timers.get(task_id)
        if current is not None and current[0] is threading.current_thread():
            del _timers[task_id]
    again: float | None
    try:
        again = scheduling.run_due(task_id)
    except Exception:  # the database unreachable: look again once it may be back
        log.exception("statistics of task %s failed", task_id)
        again = scheduling.LEASE_SECONDS
    finally:
        connections.close_all()  # this thread's own connections; the thread ends here
    if again is not None:
        _wake_in_thread(task_id, again)


@app.task(acks_late=True, soft_time_limit=600, time_limit=720)
def compute_statistics_task(task_id: int) -> str:
    """Compute the task's boards that are due; plan the next look if one is needed."""
    from leaderboard import scheduling

    cache.delete(_pending_key(task_id))
    again = scheduling.run_due(task_id)
    if again is not None:
        _wake_in_celery(task_id, again)
        return f"next look in {again:.1f} s"
    return "nothing pending"


def wake_forgotten_statistics() -> list[int]:
    """Tasks whose statistics should be under way but are not (a lost message or timer, a dead
    computing process): look at them now."""
    from leaderboard import scheduling

    if settings.EVALSERVER_STATISTICS_MODE not in ("celery", "thread"):
        return []
    task_ids = scheduling.overdue_task_ids()
    for task_id in task_ids:
        wake_statistics(task_id, 0.0)
    return task_ids


@app.task(acks_late=True)
def statistics_sweep_task() -> list[int]:
    return wake_forgotten_statistics()
