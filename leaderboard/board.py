"""The leaderboard of a task: which runs, which scores, ranks; cached until a score changes."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db.models import Q

from scoring.kinds import measure_key
from scoring.measures import MEASURES
from tasks import access
from tasks.models import GoldVersion, Phase, Run, Score, Task

CACHE_SECONDS = 600


@dataclass
class Column:
    """One sortable number on the board: ``quality.A.rsnod`` or ``nugget.jsd``."""

    key: str
    subtask: str
    dimension: str | None
    measure: str

    @property
    def title(self) -> str:
        return self.measure.upper()

    @property
    def long_title(self) -> str:
        return MEASURES[self.measure].title

    @property
    def lower_is_better(self) -> bool:
        """The measure's direction, from the measure registry: what "best" means for statistics."""
        return MEASURES[self.measure].lower_is_better


@dataclass
class Board:
    task_id: int
    phase_id: int | None
    gold_version: int | None
    scope: str
    gold_version_id: int | None = None
    hidden_reason: str = ""
    columns: list[Column] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)

    def columns_for(self, subtask: str) -> list[Column]:
        return [column for column in self.columns if column.subtask == subtask]

    def dimensions(self) -> list[str]:
        seen: list[str] = []
        for column in self.columns:
            if column.dimension and column.dimension not in seen:
                seen.append(column.dimension)
        return seen


def board_cache_key(task: Task, phase: Phase | None, organiser: bool) -> str:
    """Changes whenever a score, a run's visibility or a phase's publication changes, so cached
    boards never need deleting: stale keys simply stop being asked for and expire."""
    return (f"board:{task.pk}:{phase.pk if phase else 0}:{int(organiser)}:"
            f"{task.scores_changed_at.timestamp()}:{int(phase.results_published) if phase else 0}")


def get_board(task: Task, phase: Phase | None = None, organiser: bool = False) -> Board:
    key = board_cache_key(task, phase, organiser)
    board = cache.get(key)
    if board is None:
        board = build_board(task, phase, organiser)
        cache.set(key, board, CACHE_SECONDS)
    return board


def build_board(task: Task, phase: Phase | None, organiser: bool) -> Board:
    """The board of ``phase`` (None: the phase-less board of a task without phases) as the public
    (``organiser`` False) or the task's organisers see it; ``tasks.access.board_rule`` decides
    its scope and whether it shows any run."""
    config = task.scoring_config
    phases = list(task.phases.all())
    scope, hidden_reason = access.board_rule(phases, phase, organiser)
    version: GoldVersion | None = phase.gold_version if phase else (None if phases else task.latest_gold())
    board = Board(task_id=task.pk, phase_id=phase.pk if phase else None,
                  gold_version=version.number if version else None, scope=scope,
                  gold_version_id=version.pk if version else None, hidden_reason=hidden_reason)
    if hidden_reason:
        return board
    if version is None:
        board.hidden_reason = "No gold data has been loaded for this task yet."
        return board
    runs = Run.objects.filter(task=task, status=Run.DONE, gold_version=version, withdrawn_at__isnull=True)
    if phase is not None:
        # Baselines have no phase: every board shows those of its gold version.
        if phase.kind == Phase.FINAL:
            runs = runs.filter(Q(phase__gold_version=version, phase__kind__in=(Phase.TEST, Phase.FINAL))
                               | Q(is_baseline=True))
        else:
            runs = runs.filter(Q(phase=phase) | Q(is_baseline=True))
    if not organiser:
        runs = runs.filter(is_public=True) | runs.filter(is_baseline=True)
    runs = runs.select_related("team").order_by("pk")
    scores = {score.run_id: score.summary for score in Score.objects.filter(
        run__in=runs, gold_version=version, scope=board.scope).only("run_id", "summary")}
    for dim in config.quality_dimensions if version.has_quality else ():
        board.columns += [Column(measure_key("quality", dim, name), "quality", dim, name)
                          for name in config.quality_measures]
    if version.has_nugget:
        board.columns += [Column(measure_key("nugget", name), "nugget", None, name) for name in config.nugget_measures]
    for run in runs:
        summary = scores.get(run.pk)
        if summary is None:
            continue
        values = {}
        for column in board.columns:
            if column.subtask == "quality":
                values[column.key] = summary.get("quality", {}).get(column.dimension, {}).get(column.measure)
            else:
                values[column.key] = summary.get("nugget", {}).get(column.measure)
        board.rows.append({
            "id": run.pk, "team": run.team.name if run.team_id else "baseline", "name": run.name,
            "description": run.description, "is_baseline": run.is_baseline, "is_public": run.is_public,
            "priority": run.priority, "submitted_at": run.created_at.isoformat(),
            "has_quality": "quality" in summary, "has_nugget": "nugget" in summary,
            "scores": summary, "values": values,
        })
    _rank(board)
    return board


def _rank(board: Board) -> None:
    """Rank per measure: 1 + the number of runs strictly better (lower), so ties share a rank."""
    for column in board.columns:
        values = sorted(row["values"][column.key] for row in board.rows if row["values"][column.key] is not None)
        for row in board.rows:
            value = row["values"][column.key]
            row.setdefault("ranks", {})[column.key] = None if value is None else bisect.bisect_left(values, value) + 1
