"""What follows a change to what a task's boards show: new cache keys, and the signals that tell
whatever is derived from the boards (the significance statistics, in ``leaderboard``) to catch up.

``tasks`` sends these signals and never imports their receivers: the leaderboard sits on top of
the tasks, not beside them.
"""

from __future__ import annotations

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from tasks.lookup import forget_task
from tasks.models import Phase, Task

# Sent once a change to a task's boards has committed, with ``task_id``: scores, a run's
# visibility, a team's name, a phase added or removed, a publication; and ``run_ids`` when the
# change is to those runs only, or ``phase_ids`` when it is to those phases' boards only (None:
# anything on the task's boards may have changed), so that the other boards keep their statistics.
boards_changed = Signal()

# Sent when a phase's results are published or withdrawn, with ``phase``, inside the saving
# transaction and before ``boards_changed``: statistics computed over the other scope must go first.
publication_changed = Signal()
# Sent every minute by the broker-less background worker (tasks.worker), which does what celery
# beat does in production: the leaderboard looks for statistics whose computation was forgotten.
periodic_sweep = Signal()

# Sent by the background worker once when it starts, before it loads anything (``tasks.worker``):
# a kind's app sets up what only a long-lived scoring process may do (the response kind forks
# spaCy taggers over both cores there, never inside a daemonic Celery child).
scoring_worker_starting = Signal()

# Sent inside the transaction that ends a run's scoring (scored or failed), with ``run_id`` and
# ``status``: whatever follows from it (an e-mail to the team, in ``notices``) is recorded in the
# same transaction, so that it is neither lost nor told of a change that was rolled back.
run_finished = Signal()

# Sent by the phase clock (``tasks.phaseclock``) while a phase opens or ends within one of
# ``REMINDER_HOURS`` (the nearest), with ``phase``, ``event`` ("opens" or "closes"), ``hours``,
# ``at`` (the start or end it is about) and the clock's ``now``. Sent at every tick in that
# window: a receiver records it once (by a key of its own, with ``at`` in it), so that a phase
# moved to another time is told again.
phase_reminder = Signal()
REMINDER_HOURS = (24, 1)


def touch_scores(task: Task) -> None:
    """Invalidate cached leaderboards: their cache keys include ``scores_changed_at``, and the
    cached task that carries it gets a new generation once the change commits."""
    now = timezone.now()
    Task.objects.filter(pk=task.pk).update(scores_changed_at=now)
    task.scores_changed_at = now
    forget_task(task.slug)


def board_changed(task: Task, run_ids: list[int] | None = None, phase_ids: list[int] | None = None) -> None:
    """Something the task's boards show changed (scores, a run's visibility, a team's name, a
    publication): new board cache keys at once, and ``boards_changed`` once the change commits
    (the significance statistics, which name the runs they compare, are computed again, debounced,
    for the boards that show ``run_ids`` when the change is to those runs only, for the boards of
    ``phase_ids`` when it is to those boards only)."""
    touch_scores(task)
    task_id = task.pk
    runs = list(run_ids) if run_ids is not None else None
    phases = list(phase_ids) if phase_ids is not None else None
    transaction.on_commit(lambda: boards_changed.send(sender=Task, task_id=task_id, run_ids=runs, phase_ids=phases))


def boards_on_gold(phase: Phase) -> list[int]:
    """The phases whose boards a publication or the end of ``phase`` changes: those on its gold
    version. What a board shows depends on other phases only through the test phases on its own
    gold (``tasks.access.board_rule``: whether their results are published and count); a board on
    another gold (a development phase's, say) shows the same runs and scores as before."""
    return list(Phase.objects.filter(task_id=phase.task_id, gold_version_id=phase.gold_version_id)
                .values_list("pk", flat=True))


def phase_published(phase: Phase) -> None:
    """A phase's results were published or withdrawn (from the dashboard, the admin or code)."""
    publication_changed.send(sender=Phase, phase=phase)
    # Boards of other phases on the same gold change too (a test board leaves its live subset
    # when the final phase is published); the other boards do not, and keep their statistics.
    board_changed(Task.objects.get(pk=phase.task_id), phase_ids=boards_on_gold(phase))
