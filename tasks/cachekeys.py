"""Every key the server puts in the shared cache, and how long each lives: one place to read
what is cached, what a key depends on, and why no entry can outlive a change.

Keys never need deleting when something changes: a key carries what it depends on (the task's
``scores_changed_at``, a phase's publication, a generation token), so a change makes readers ask
for a new key, and stale entries simply expire. The one signal that moves them is
``tasks.changes.board_changed`` (scores, visibility, publication), which bumps
``scores_changed_at``; task and phase rows renew their generation token (``tasks.lookup``).
"""

from __future__ import annotations

from typing import Any

BOARD_SECONDS = 600  # boards, rendered board sections and leaderboard JSON bodies
ROUTE_SECONDS = 60  # a task with its phases: bounds how long a raw QuerySet.update() goes unseen
TOKEN_SECONDS = 24 * 3600  # a task's generation token


def task_token(slug: str) -> str:
    """The random generation token of a task's cached lookups (renewed when it or a phase changes)."""
    return f"task-token:{slug}"


def task_route(slug: str, token: str) -> str:
    """A task and its phases, under the task's current generation token."""
    return f"task-route:{slug}:{token}"


# Part of every board's key: a new layout of leaderboard.board.Board (or of its rows) is never read
# from a board the previous code pickled into a shared cache, which would lack the new fields.
BOARD_LAYOUT = 2


def phase_clock(phases: Any, now: Any = None) -> str:
    """Where the task's phases stand now: upcoming, open or ended, and published or not, per phase.
    What a board shows turns on these (a publication counts once no phase accepts runs on its
    gold), and a phase opens or ends by the clock alone, with no save that could renew a key."""
    from django.utils import timezone

    now = now or timezone.now()
    return "".join(f"{phase.state(now)[0]}{int(phase.published_at(now))}"
                   for phase in sorted(phases, key=lambda phase: phase.pk))


def board(task: Any, phase: Any, organiser: bool, preview: bool = False, phases: Any = None) -> str:
    """A board (the public's, an organiser's, or the organisers' preview of published results):
    changes whenever a score, a run's visibility, a phase's publication or a phase's state by the
    clock changes. ``phases``: the task's phases when the caller has them (else one query)."""
    if phases is None:
        phases = list(task.phases.all()) if task.pk else []
    return (f"board{BOARD_LAYOUT}:{task.pk}:{phase.pk if phase else 0}:{int(organiser)}:"
            f"{task.scores_changed_at.timestamp()}:{phase_clock(phases)}"
            + (":preview" if preview else ""))


def asl_curves(board_key: str, record_pk: int, generation: int, computed_at: float) -> str:
    """A statistics page's ASL curves, rebuilt from stored counts for the runs a board shows."""
    return f"asl:{board_key}:{record_pk}:{generation}:{computed_at}"


def statistics_charts(board_key: str, record_pk: int, generation: int, computed_at: float) -> str:
    """A statistics page's pictures (power bars, ASL curves, Kendall heat maps) as drawn for a board,
    with their markup (``statcharthtml``: entries stored before the markup was have none)."""
    return f"statcharthtml:{board_key}:{record_pk}:{generation}:{computed_at}"


def board_section(board_key: str, tab: str, sort: str, show: str, statistics_token: str) -> str:
    """A task page's rendered board, per tab, sort, view and state of its statistics."""
    return f"page:{board_key}:{tab}:{sort}:{show}:{statistics_token}"


def board_json(board_key: str) -> str:
    """The leaderboard JSON of a board (``:identity`` and ``:gzip`` are added per encoding)."""
    return f"json:{board_key}"


def statistics_pending(task_id: int) -> str:
    """When a Celery statistics job for the task is already planned (spares duplicate messages)."""
    return f"statistics-pending:{task_id}"
