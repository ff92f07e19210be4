"""One computation of a board's statistics at a time, across processes, through the database.

Every process that schedules or computes statistics (web processes in the thread mode, Celery
workers, management commands) goes through the board's :class:`StatisticsState` row:

- ``request(task_id)``: a trigger. Adds one to ``requested`` of each board of the task.
- ``run_due(task_id)``: for each board with a request no computation has served, once its
  scores have been quiet for the debounce (at most ``MAX_WAIT_FACTOR`` debounces after the
  first unserved trigger, so a steady stream of uploads cannot postpone statistics for ever),
  claim the board with one conditional UPDATE, compute, store if no newer result exists, and
  release. It answers when to look again: a board still waiting for its debounce, a board held
  by another process (in case that process dies), or a board that became dirty during the
  computation (its one follow-up).

The claim is a lease kept alive by a heartbeat every ``HEARTBEAT_SECONDS``; a claim whose
heartbeat is older than ``LEASE_SECONDS`` belongs to a dead process (killed worker, restarted
web server) and may be taken over. Locks held by a process (``threading.Lock``) or in the cache
would not see the other processes; the row does.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import DateTimeField, Exists, F, OuterRef, Q, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from leaderboard.models import StatisticsState, TaskStatistics
from tasks import leases
from tasks.models import Phase

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 10.0
# A claim without a heartbeat for this long is taken over. The Tukey kernel releases the GIL
# between chunks (a few seconds each), so a live computation beats well within it.
LEASE_SECONDS = 90.0
# Scores that keep changing postpone the computation at most this many debounce windows.
MAX_WAIT_FACTOR = 6
# A computation that became dirty while it ran is followed by at most this many more in a row
# when forced (sync mode, commands); the scheduled modes follow up through run_due's answer.
FORCED_FOLLOW_UPS = 3


def debounce_seconds() -> float:
    """How long a board's scores must be quiet before its statistics are computed (one setting
    for every mode)."""
    return float(settings.EVALSERVER_STATISTICS_DEBOUNCE_SECONDS)


def max_wait_seconds() -> float:
    return MAX_WAIT_FACTOR * debounce_seconds()


def board_filter(task_id: int) -> Q:
    """The state rows of the boards the task has now: one per phase, or one without a phase."""
    phase_ids = list(Phase.objects.filter(task_id=task_id).values_list("pk", flat=True))
    return Q(task_id=task_id) & (Q(phase_id__in=phase_ids) if phase_ids else Q(phase__isnull=True))


def _shown() -> Q:
    """``board_filter`` over every task at once: a phase's row, or the phase-less row of a task
    without phases. Once a task has phases its phase-less board is never shown and ``run_due``
    never serves it."""
    return Q(phase__isnull=False) | ~Exists(Phase.objects.filter(task_id=OuterRef("task_id")))


RETIRED = "not computed: this board is no longer shown (the task has phases)"


def retire_unshown() -> int:
    """Close the pending requests of boards no page shows (the phase-less board of a task that
    has phases): nobody needs their statistics and ``run_due`` never serves them, so left
    pending they were overdue for ever and beat sent their task a job every minute. Returns
    how many were closed."""
    return StatisticsState.objects.filter(~_shown(), requested__gt=F("completed")).update(
        completed=F("requested"), pending_since=None, finished_at=timezone.now(), outcome=RETIRED)


def state_for(task_id: int, phase_id: int | None) -> StatisticsState:
    """The board's state row, created on first use (two processes creating it at once: one wins)."""
    for _ in range(2):
        found = StatisticsState.objects.filter(task_id=task_id, phase_id=phase_id).first()
        if found is not None:
            return found
        try:
            with transaction.atomic():
                return StatisticsState.objects.create(task_id=task_id, phase_id=phase_id)
        except IntegrityError:
            continue
    return StatisticsState.objects.get(task_id=task_id, phase_id=phase_id)


def request(task_id: int, phase_ids: list[int | None] | None = None) -> int:
    """A trigger: the boards ``phase_ids`` of the task (None: every board it has) ask for a
    computation newer than any before. A board the task does not show is left alone (a test-phase
    upload must not start a computation of the development board). Returns the number of boards."""
    shown = list(Phase.objects.filter(task_id=task_id).values_list("pk", flat=True)) or [None]
    chosen = shown if phase_ids is None else [phase_id for phase_id in shown if phase_id in set(phase_ids)]
    if not chosen:
        return 0
    for phase_id in chosen:
        state_for(task_id, phase_id)
    now = timezone.now()
    boards = Q(task_id=task_id) & (Q(phase__isnull=True) if chosen == [None] else Q(phase_id__in=chosen))
    return StatisticsState.objects.filter(boards).update(
        requested=F("requested") + 1, requested_at=now,
        pending_since=Coalesce(F("pending_since"), Value(now, output_field=DateTimeField())))


def seconds_until_due(state: StatisticsState, now: datetime | None = None) -> float | None:
    """Seconds until the board's pending request may start a computation; None if nothing is pending."""
    if not state.pending:
        return None
    if state.requested_at is None:
        return 0.0
    now = now or timezone.now()
    due = state.requested_at + timedelta(seconds=debounce_seconds())
    if state.pending_since is not None:
        due = min(due, state.pending_since + timedelta(seconds=max_wait_seconds()))
    return max(0.0, (due - now).total_seconds())


def lease_is_live(state: StatisticsState, now: datetime | None = None) -> bool:
    now = now or timezone.now()
    return bool(state.claim_token) and state.heartbeat_at is not None and \
        state.heartbeat_at >= now - timedelta(seconds=LEASE_SECONDS)


def _unheld(now: datetime) -> Q:
    """No claim, or a claim whose heartbeat lapsed (its process is dead)."""
    return Q(claim_token="") | Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=now - timedelta(seconds=LEASE_SECONDS))


@dataclass(frozen=True)
class Claim:
    """A won claim: this process computes ``generation`` of the board until it finishes."""

    state_id: int
    task_id: int
    phase_id: int | None
    generation: int
    token: str
    started: float  # time.monotonic()


def claim(state_id: int) -> Claim | None:
    """Claim the board if a request is pending and no live claim holds it: one conditional UPDATE,
    so of two processes trying at once exactly one wins. The generation computed is the
    ``requested`` counter at the moment of the claim; any trigger after it makes the board dirty."""
    now = timezone.now()
    token = uuid.uuid4().hex
    won = StatisticsState.objects.filter(_unheld(now), pk=state_id, requested__gt=F("completed")).update(
        claim_token=token, computing=F("requested"), running_since=now, heartbeat_at=now, pending_since=None,
        computations=F("computations") + 1)
    if not won:
        return None
    row = StatisticsState.objects.filter(pk=state_id, claim_token=token).values(
        "computing", "task_id", "phase_id").first()
    if row is None:  # taken over between the two statements: only possible after LEASE_SECONDS
        return None
    return Claim(state_id, row["task_id"], row["phase_id"], row["computing"], token, time.monotonic())


def may_store(claim: Claim) -> bool:
    """Inside the transaction that writes the result: lock the state row and allow the write only
    if no newer result is stored and the board was not reset after this generation was claimed."""
    state = StatisticsState.objects.select_for_update().get(pk=claim.state_id)
    return claim.generation > state.stored_generation and claim.generation > state.floor


def mark_stored(claim: Claim) -> None:
    StatisticsState.objects.filter(pk=claim.state_id).update(stored_generation=claim.generation,
                                                             stored_at=timezone.now())


def finish(claim: Claim, outcome: str) -> bool:
    """Release the claim and record what happened. True when the board became dirty while this
    computation ran (a trigger after the claim): then exactly one follow-up is due."""
    released = StatisticsState.objects.filter(pk=claim.state_id, claim_token=claim.token).update(
        claim_token="", computing=None, running_since=None, heartbeat_at=None,
        completed=Greatest(F("completed"), Value(claim.generation)), finished_at=timezone.now(),
        last_seconds=time.monotonic() - claim.started, outcome=outcome[:300])
    if not released:  # taken over after a missed heartbeat: the new holder is in charge of follow-ups
        return False
    requested = StatisticsState.objects.filter(pk=claim.state_id).values_list("requested", flat=True).first()
    return requested is not None and requested > claim.generation


def give_back(claim: Claim) -> None:
    """Release a claim whose computation was cut off (its process told to stop): the request stays
    pending and is due at once, so the next process to look computes it without waiting for the
    lease to lapse."""
    StatisticsState.objects.filter(pk=claim.state_id, claim_token=claim.token).update(
        claim_token="", computing=None, running_since=None, heartbeat_at=None,
        pending_since=Coalesce(F("pending_since"), Value(timezone.now(), output_field=DateTimeField())))


def forget(task_id: int, phase_id: int | None) -> None:
    """Drop the board's stored statistics because the board changed under them (results
    published or withdrawn): no computation claimed before now may store its result."""
    state = state_for(task_id, phase_id)
    with transaction.atomic():
        StatisticsState.objects.select_for_update().filter(pk=state.pk).update(floor=F("requested"), stored_at=None)
        TaskStatistics.objects.filter(task_id=task_id, phase_id=phase_id).delete()


@contextmanager
def heartbeat(claim: Claim) -> Iterator[None]:
    """Keep the claim's lease alive while the computation runs (a thread with its own connection)."""
    rows = StatisticsState.objects.filter(pk=claim.state_id, claim_token=claim.token)
    with leases.heartbeat(rows, HEARTBEAT_SECONDS, f"statistics-state-{claim.state_id}", join_timeout=30):
        yield


def pending_task_ids() -> list[int]:
    """Tasks with a board that ``run_due`` serves whose request no computation has served and no
    live claim holds: what the statistics worker (``leaderboard.worker``) looks at, due or not."""
    return sorted(set(StatisticsState.objects.filter(_shown(), _unheld(timezone.now()), requested__gt=F("completed"))
                      .values_list("task_id", flat=True)))


def overdue_task_ids(slack: float = 60.0) -> list[int]:
    """Tasks with a board whose request should have started by now but no live claim holds it:
    its job was lost (broker restarted, web process restarted) or its computing process died."""
    retire_unshown()
    now = timezone.now()
    late = now - timedelta(seconds=debounce_seconds() + slack)
    cap = now - timedelta(seconds=max_wait_seconds() + slack)
    # Only boards run_due serves: a job sent for any other row could never complete it.
    return sorted(set(StatisticsState.objects.filter(_shown(), _unheld(now), requested__gt=F("completed")).filter(
        Q(requested_at__lt=late) | Q(pending_since__lt=cap) | Q(requested_at__isnull=True))
        .values_list("task_id", flat=True)))


@dataclass
class BoardStatus:
    """What the pages say about a board's statistics besides the stored numbers."""

    mode: str
    state: StatisticsState | None
    running: bool  # a live claim computes a newer generation now
    queued: bool  # a request is pending and no live claim serves it yet
    starts_in: float | None  # seconds until the queued computation may start
    running_for: float | None

    @property
    def pending(self) -> bool:
        return self.running or self.queued

    def cache_token(self) -> str:
        """Part of a cached page's key: changes whenever what the page says about it would."""
        if self.state is None:
            return "none"
        return f"{self.state.requested}-{self.state.completed}-{self.state.stored_generation}-{int(self.running)}"


def board_status(task_id: int, phase_id: int | None) -> BoardStatus:
    mode = settings.EVALSERVER_STATISTICS_MODE
    state = StatisticsState.objects.filter(task_id=task_id, phase_id=phase_id).first()
    if state is None:
        return BoardStatus(mode, None, False, False, None, None)
    now = timezone.now()
    live = lease_is_live(state, now)
    running = live and state.pending
    # With statistics off nothing would pick a request up: it is not "queued".
    queued = state.pending and not live and mode != "off"
    starts_in = seconds_until_due(state, now) if queued else None
    running_for = (now - state.running_since).total_seconds() if running and state.running_since else None
    return BoardStatus(mode, state, running, queued, starts_in, running_for)


def describe(status: BoardStatus) -> dict[str, Any]:
    """Template values: the last finished computation and what is under way."""
    state = status.state
    return {"status": status, "state": state, "debounce": debounce_seconds(),
            "last_outcome": state.outcome if state is not None else "",
            "last_seconds": state.last_seconds if state is not None else None}
