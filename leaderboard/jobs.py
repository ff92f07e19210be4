"""The significance statistics' wake-ups and their Celery tasks: when scores change, ask for the
task's statistics and look at them once the board has been quiet for the debounce.

``tasks`` announces changes with ``tasks.changes.boards_changed`` and ``publication_changed``;
the receivers are here (connected by ``LeaderboardConfig.ready``), so that ``tasks`` never
imports the leaderboard.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from celery import shared_task
from django.conf import settings
from django.core.cache import cache
from django.db import connections
from django.dispatch import receiver

from leaderboard import scheduling, statistics
from leaderboard.board import boards_showing
from tasks import cachekeys
from tasks.changes import boards_changed, periodic_sweep, publication_changed
from tasks.models import Phase

log = logging.getLogger(__name__)


@receiver(boards_changed)
def _boards_changed(sender: type, task_id: int, run_ids: list[int] | None = None,
                    phase_ids: list[int] | None = None, **kwargs: Any) -> None:
    # A change to some runs asks only the boards that show them (a test-phase upload used to start
    # a 16.6 s computation of the development board, which nothing had changed); a change to some
    # boards (a publication, a phase's end) only those boards.
    boards: list[int | None] | None = None if run_ids is None else boards_showing(task_id, run_ids)
    if phase_ids is not None:
        boards = list(phase_ids) if boards is None else [board for board in boards if board in set(phase_ids)]
    if boards != []:
        schedule_statistics(task_id, boards)


@receiver(periodic_sweep)
def _periodic_sweep(sender: type, **kwargs: Any) -> None:
    wake_forgotten_statistics()


@receiver(publication_changed)
def _publication_changed(sender: type, phase: Phase, **kwargs: Any) -> None:
    """The stored significance results of the phase's board were computed over the other scope,
    or over a board that is now hidden (they would keep showing full-test-set means): they go,
    and the statistics are computed again for what the board now shows."""
    scheduling.forget(phase.task_id, phase.pk)  # also refuses the results of computations already under way


def schedule_statistics(task_id: int, phase_ids: list[int | None] | None = None) -> None:
    """Scores changed: ask for the task's statistics, computed once the board has been quiet for
    the debounce (``EVALSERVER_STATISTICS_DEBOUNCE_SECONDS``, in every mode), for the boards
    ``phase_ids`` (None: every board of the task).

    The request is recorded in the database (``leaderboard.scheduling``), which is what makes a
    burst of triggers share one computation and keeps every process (web threads, workers,
    commands) to one computation per board at a time; the timer or message sent here only says
    when to look.
    """
    mode = settings.EVALSERVER_STATISTICS_MODE
    if mode == "off":
        return
    if not scheduling.request(task_id, phase_ids):
        return
    if mode == "worker":  # the statistics worker (leaderboard.worker) finds the request in the database
        return
    if mode == "sync":
        statistics.run_due(task_id, force=True)
        return
    wake_statistics(task_id, scheduling.debounce_seconds())


def wake_statistics(task_id: int, delay: float) -> None:
    """Look at the task's statistics after ``delay`` seconds: a Celery job, or in the thread mode
    a timer in this process (in the worker mode the statistics worker looks by itself). An earlier
    look already planned makes this one unnecessary: that one plans the next."""
    mode = settings.EVALSERVER_STATISTICS_MODE
    if mode == "thread":
        _wake_in_thread(task_id, delay)
    elif mode == "celery":
        _wake_in_celery(task_id, delay)


def _wake_in_celery(task_id: int, delay: float) -> None:
    # The cache only spares the broker duplicate messages; the claim in the database decides.
    run_at = time.time() + delay
    planned = cache.get(cachekeys.statistics_pending(task_id))
    if planned is not None and planned <= run_at + 0.5:
        return
    cache.set(cachekeys.statistics_pending(task_id), run_at, timeout=int(delay) + 300)
    try:
        compute_statistics_task.apply_async((task_id,), countdown=delay)
    except Exception:
        cache.delete(cachekeys.statistics_pending(task_id))
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

    with _timers_lock:
        current = _timers.get(task_id)
        if current is not None and current[0] is threading.current_thread():
            del _timers[task_id]
    again: float | None
    try:
        again = statistics.run_due(task_id)
    except Exception:  # the database unreachable: look again once it may be back
        log.exception("statistics of task %s failed", task_id)
        again = scheduling.LEASE_SECONDS
    finally:
        connections.close_all()  # this thread's own connections; the thread ends here
    if again is not None:
        _wake_in_thread(task_id, again)


@shared_task(acks_late=True, soft_time_limit=600, time_limit=720, heavy=True)  # its own queue (evalserver.celery)
def compute_statistics_task(task_id: int) -> str:
    """Compute the task's boards that are due; plan the next look if one is needed."""
    cache.delete(cachekeys.statistics_pending(task_id))
    again = statistics.run_due(task_id)
    if again is not None:
        _wake_in_celery(task_id, again)
        return f"next look in {again:.1f} s"
    return "nothing pending"


def wake_forgotten_statistics() -> list[int]:
    """Tasks whose statistics should be under way but are not (a lost message or timer, a dead
    computing process): look at them now."""
    if settings.EVALSERVER_STATISTICS_MODE not in ("celery", "thread"):
        return []
    task_ids = scheduling.overdue_task_ids()
    for task_id in task_ids:
        wake_statistics(task_id, 0.0)
    return task_ids


@shared_task(acks_late=True)
def statistics_sweep_task() -> list[int]:
    return wake_forgotten_statistics()
