"""The phase clock: what happens on its own when a phase opens or ends, and when its results are
scheduled to be published.

Who may submit and what a board shows follow the clock already (``Phase.is_open``,
``tasks.access.publication_counts``, board cache keys carry ``cachekeys.phase_clock``), so nothing
has to flip for the rules to hold at the second. The clock adds what needs a process:

- each change of a phase's state (upcoming -> open -> ended) is recorded once, in the task's
  access log (who: nobody, the clock) and the server log;
- at a phase's end its boards change (``board_changed``): the final statistics are computed for
  what they now show;
- a publication scheduled by the organisers (``Phase.publish_at``) is recorded as published at its
  time, or, while a phase still takes runs on its gold, waits (said once in the log);
- 24 hours and 1 hour before a phase that takes runs opens or closes, ``phase_reminder`` is sent
  (``tasks.changes``; the e-mails to the task's participants, ``notices``, listen and record each
  reminder once).

``advance`` is idempotent and safe in several processes at once: a change is recorded by the one
conditional UPDATE that wins. It runs from Celery beat (``tasks.phaseclock.phase_clock_task``) or, in
the broker-less default, from a daemon thread of the web process (``ensure_thread``), which wakes
at the next boundary and at least every ``MAX_SLEEP_SECONDS``.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from tasks.changes import REMINDER_HOURS, board_changed, boards_on_gold, phase_reminder
from tasks.errors import Rejected
from tasks.models import AccessLog, Phase, Run

log = logging.getLogger("evalserver.phases")

MAX_SLEEP_SECONDS = 30.0


def _record(phase: Phase, what: str) -> None:
    AccessLog.objects.create(user=None, task_id=phase.task_id, what=what[:200])
    log.info("%s: %s", phase.task.slug, what)


def advance(now: datetime | None = None) -> list[str]:
    """Record every phase state change and scheduled publication due at ``now``; what happened."""
    from tasks.organising import set_publication

    now = now or timezone.now()
    done: list[str] = []
    for phase in Phase.objects.select_related("task").order_by("task_id", "starts_at"):
        state = phase.state(now)
        if phase.clock_state != state:
            # One process wins the change; the others see it recorded and move on.
            won = Phase.objects.filter(pk=phase.pk, clock_state=phase.clock_state).update(clock_state=state)
            if won and phase.clock_state:  # empty: first look since the clock was installed, nothing to tell
                what = _change(phase, state, now)
                _record(phase, what)
                done.append(what)
                if state == "ended":
                    with transaction.atomic():
                        # The final statistics, for what the boards on its gold show now.
                        board_changed(phase.task, phase_ids=boards_on_gold(phase))
            phase.clock_state = state
        if phase.publish_at is not None and phase.publish_at <= now and not phase.results_published:
            try:
                with transaction.atomic():
                    locked = Phase.objects.select_for_update().get(pk=phase.pk)
                    if locked.results_published or locked.publish_at is None or locked.publish_at > now:
                        continue
                    set_publication(locked, True)
                what = (f"published the results of the {phase.name} phase as scheduled for "
                        f"{phase.publish_at:%Y-%m-%d %H:%M:%S} UTC")
                _record(phase, what)
                done.append(what)
            except Rejected as rejected:
                what = f"the scheduled publication of the {phase.name} phase waits: {rejected.errors[0]}"
                if not AccessLog.objects.filter(task_id=phase.task_id, what=what[:200]).exists():
                    _record(phase, what)
                    done.append(what)
        for event, at, hours in due_reminders(phase, now):
            with transaction.atomic():
                phase_reminder.send(sender=Phase, phase=phase, event=event, hours=hours, at=at, now=now)
    return done


def due_reminders(phase: Phase, now: datetime) -> list[tuple[str, datetime, int]]:
    """("opens" or "closes", when, hours) for a phase that takes runs and opens or closes within
    one of ``REMINDER_HOURS`` of ``now``: the nearest only (a phase made 30 minutes before it
    opens gets the 1-hour reminder, not a late 24-hour one)."""
    if not phase.takes_runs:
        return []
    due = []
    for event, at in (("opens", phase.starts_at), ("closes", phase.ends_at)):
        if at <= now:
            continue
        within = [hours for hours in REMINDER_HOURS if at - timedelta(hours=hours) <= now]
        if within:
            due.append((event, at, min(within)))
    return due


def _change(phase: Phase, state: str, now: datetime) -> str:
    if state == "open":
        return f"the {phase.name} phase opened at {phase.starts_at:%Y-%m-%d %H:%M:%S} UTC"
    if state == "upcoming":
        return f"the {phase.name} phase was moved to start later, at {phase.starts_at:%Y-%m-%d %H:%M:%S} UTC"
    runs = Run.objects.filter(phase=phase, is_baseline=False).count()
    taken = f": {runs} run{'s' if runs != 1 else ''} submitted, submissions closed" if phase.takes_runs else ""
    return (f"the {phase.name} phase ended at {phase.ends_at:%Y-%m-%d %H:%M:%S} UTC{taken}; its final "
            "statistics are computed")


def next_boundary(now: datetime | None = None) -> datetime | None:
    """The next start, end, reminder before either, or scheduled publication of any phase."""
    now = now or timezone.now()
    times = [moment for starts, ends, publish in Phase.objects.values_list("starts_at", "ends_at", "publish_at")
             for moment in (starts, ends, publish,
                            *(edge - timedelta(hours=hours) for edge in (starts, ends) for hours in REMINDER_HOURS))
             if moment is not None and moment > now]
    return min(times, default=None)


_thread: threading.Thread | None = None
_thread_lock = threading.Lock()


def ensure_thread() -> None:
    """In the thread mode, start this process's clock thread once (on its first request)."""
    global _thread
    if settings.EVALSERVER_PHASE_CLOCK_MODE != "thread" or (_thread is not None and _thread.is_alive()):
        return
    with _thread_lock:
        if _thread is not None and _thread.is_alive():
            return
        _thread = threading.Thread(target=_run_forever, name="phase-clock", daemon=True)
        _thread.start()


def _run_forever() -> None:
    stop = threading.Event()
    while not stop.is_set():
        try:
            advance()
            upcoming = next_boundary()
        except Exception:  # the database unreachable: look again shortly
            log.exception("the phase clock could not look at the phases")
            upcoming = None
        finally:
            connections.close_all()  # this thread's own connections
        sleep = MAX_SLEEP_SECONDS
        if upcoming is not None:
            # Wake just after the boundary (the rules compare with "<", so the second after is safe).
            sleep = min(sleep, max(0.5, (upcoming - timezone.now() + timedelta(milliseconds=200)).total_seconds()))
        stop.wait(sleep)


class PhaseClockMiddleware:
    """Starts the clock thread with the web process's first request (thread mode only)."""

    def __init__(self, get_response: object) -> None:
        self.get_response = get_response

    def __call__(self, request: object) -> object:
        ensure_thread()
        return self.get_response(request)  # type: ignore[operator]


@shared_task(acks_late=True)
def phase_clock_task() -> list[str]:
    """Record phases that opened or ended and scheduled publications that are due (beat). Here,
    not in ``tasks.jobs``: the clock publishes through ``tasks.organising``, which queues scoring
    jobs (``CELERY_IMPORTS`` loads this module in the worker)."""
    return advance()
