"""Significance statistics of leaderboards: computed in Celery, stored, and read by the pages.

The numbers come from the framework-free ``scoring.stats``; this module only gathers the
dialogue-by-run matrices (one query per board) and stores the results.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import F

from leaderboard import scheduling
from leaderboard.board import Board, build_board
from leaderboard.models import MeasureStatistics, StatisticsState, TaskStatistics
from leaderboard.scheduling import Claim
from scoring import stats
from tasks.models import Phase, ScoreVector, Task

log = logging.getLogger(__name__)

SUBTASKS = ("quality", "nugget")


@dataclass
class Matrices:
    """Per measure key, a (dialogues x runs) matrix; runs in ``run_ids`` order."""

    run_ids: list[int]
    by_key: dict[str, np.ndarray]


def gather_matrices(board: Board, subtask: str) -> Matrices:
    """Every per-dialogue vector of the board's runs for one subtask, in one query."""
    run_ids = [row["id"] for row in board.rows if row[f"has_{subtask}"]]
    keys = [column.key for column in board.columns_for(subtask)]
    if len(run_ids) < 2 or not keys:
        return Matrices(run_ids, {})
    column = {run_id: position for position, run_id in enumerate(run_ids)}
    vectors = ScoreVector.objects.filter(
        score__run_id__in=run_ids, score__gold_version__number=board.gold_version,
        score__gold_version__task_id=board.task_id, score__scope=board.scope, key__in=keys,
    ).values_list("score__run_id", "key", "values")
    by_key: dict[str, np.ndarray] = {}
    for run_id, key, values in vectors:
        array = np.frombuffer(bytes(values), dtype=np.float64)
        if key not in by_key:
            by_key[key] = np.full((array.size, len(run_ids)), np.nan)
        by_key[key][:, column[run_id]] = array
    # In the board's column order, so statistics and their pages list measures the same way each time.
    complete = {key: by_key[key] for key in keys if key in by_key and not np.isnan(by_key[key]).any()}
    return Matrices(run_ids, complete)


BOOTSTRAP_LEVEL = 0.95
KENDALL_RESAMPLES = 1000


def compute_board_statistics(task: Task, phase: Phase | None, claim: Claim) -> str:
    """Compute the statistics of the public board of a task (or phase) and store them if no newer
    result exists (``claim`` is this computation's claim on the board, ``leaderboard.scheduling``);
    returns what happened, for the board's state and its pages.

    Every number is drawn with the task's B and seed, the ones the record keeps: both subtasks
    use the same seed, so each measure's p-values and intervals can be reproduced from the
    recorded B, the recorded seed and the exported matrix. Subtasks over the same runs and
    the same number of dialogues are tested in one call, so that the permutations are drawn
    once for all their measures (with the same seed they would be the same permutations anyway).
    """
    started = time.perf_counter()
    board = build_board(task, phase, organiser=False)
    if board.hidden_reason:
        return f"nothing stored: {board.hidden_reason}"
    if board.gold_version is None:
        return "nothing stored: the board has no gold version"
    seed, permutations = task.statistics_seed, task.permutations
    resamples = min(permutations, 10_000)
    gathered: dict[str, Matrices] = {}
    for subtask in SUBTASKS:
        matrices = gather_matrices(board, subtask)
        # Each subtask on its own: one with a single dialogue is skipped, not the whole board.
        if matrices.by_key and next(iter(matrices.by_key.values())).shape[0] >= 2:
            gathered[subtask] = matrices
    groups: dict[tuple[tuple[int, ...], int], list[str]] = {}
    for subtask, matrices in gathered.items():
        shape_key = (tuple(matrices.run_ids), next(iter(matrices.by_key.values())).shape[0])
        groups.setdefault(shape_key, []).append(subtask)
    tukey: dict[str, stats.TukeyHSDResult] = {}
    for subtasks in groups.values():
        together = {key: matrix for subtask in subtasks for key, matrix in gathered[subtask].by_key.items()}
        tukey.update(stats.randomised_tukey_hsd(together, n_permutations=permutations, seed=seed))

    summaries: dict[str, dict[str, Any]] = {}
    pairwise: dict[str, bytes] = {}
    meta: dict[str, Any] = {}
    n_dialogues = 0
    for subtask, matrices in gathered.items():
        n_dialogues = max(n_dialogues, next(iter(matrices.by_key.values())).shape[0])
        for key, matrix in matrices.by_key.items():
            result = tukey[key]
            intervals = stats.bootstrap_confidence_intervals(matrix, n_resamples=resamples, seed=seed,
                                                             level=BOOTSTRAP_LEVEL)
            summaries[key] = {
                "run_ids": matrices.run_ids,
                "means": result.means.tolist(),
                "ci_low": intervals.lower.tolist(),
                "ci_high": intervals.upper.tolist(),
                "bootstrap": {"n_resamples": resamples, "seed": seed, "level": BOOTSTRAP_LEVEL},
                "top_group": [matrices.run_ids[i] for i in result.top_group(alpha=0.05)],
                "residual_variance": float(result.residual_variance),
                "effect_sizes_defined": bool(np.isfinite(result.effect_sizes).all()),
            }
            pairwise[key] = MeasureStatistics.pack(result.pvalues, permutations)
        results = {key: tukey[key] for key in matrices.by_key}
        meta[subtask] = _json_ready(stats.meta_evaluate(results, matrices.by_key, n_resamples=KENDALL_RESAMPLES,
                                                        seed=seed))
    if gathered:
        meta["bootstrap"] = {"n_resamples": resamples, "seed": seed, "level": BOOTSTRAP_LEVEL}
    labels = {str(row["id"]): f"{row['team']}/{row['name']}" for row in board.rows}
    with transaction.atomic():
        # The generation check and the write in one transaction, under the state row's lock: a
        # computation that finishes after a newer one never overwrites it.
        if not scheduling.may_store(claim):
            return f"not stored: a newer result was stored first (this was generation {claim.generation})"
        record, _ = TaskStatistics.objects.update_or_create(
            task=task, phase=phase,
            defaults={"gold_version_id": _gold_version_id(task, phase), "scope": board.scope,
                      "run_ids": [row["id"] for row in board.rows], "run_labels": labels,
                      "meta": meta, "permutations": permutations, "seed": seed,
                      "n_dialogues": n_dialogues, "seconds": time.perf_counter() - started,
                      "scores_as_of": task.scores_changed_at, "generation": claim.generation})
        record.measures.all().delete()
        MeasureStatistics.objects.bulk_create([
            MeasureStatistics(statistics=record, key=key, summary=summary, pairwise=pairwise[key])
            for key, summary in summaries.items()])
        scheduling.mark_stored(claim)
    compared = ", ".join(f"{len(gathered[subtask].run_ids)} runs on {subtask}" for subtask in gathered)
    return f"stored over {len(board.rows)} runs ({compared or 'too few runs or dialogues to compare'})"


def _gold_version_id(task: Task, phase: Phase | None) -> int:
    return phase.gold_version_id if phase else task.latest_gold().pk


def _json_ready(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(key): _json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(item) for item in value]
    if isinstance(value, np.ndarray):
        return _json_ready(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def compute_task_statistics(task_id: int) -> str:
    """Compute every board of the task now (commands, tests), through the same claim as the
    scheduled computations: a board another process is computing is left to it."""
    if not Task.objects.filter(pk=task_id).exists():
        return "no such task"
    boards = scheduling.compute_now(task_id)
    stored = StatisticsState.objects.filter(task_id=task_id, stored_generation__gt=0,
                                            stored_generation=F("completed")).count()
    return f"statistics of {boards} board(s) requested; {stored} board(s) hold the newest result"


def stored_statistics(task: Task, phase: Phase | None) -> TaskStatistics | None:
    return TaskStatistics.objects.filter(task=task, phase=phase).first()


def measure_summary(task: Task, phase_id: int | None, key: str) -> dict[str, Any] | None:
    """The stored summary of one measure of a board (one small query; no pairwise matrices),
    with ``computed_at``: when the board's statistics were computed."""
    row = (MeasureStatistics.objects.filter(statistics__task=task, statistics__phase_id=phase_id, key=key)
           .values_list("summary", "statistics__computed_at").first())
    if row is None:
        return None
    summary, computed_at = row
    return {**summary, "computed_at": computed_at}


def interval_chart(entry: dict[str, Any] | None, rows: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """Geometry of an SVG interval chart (mean and 95% interval per run, in the table's order)."""
    if entry is None:
        return None
    where = {run_id: i for i, run_id in enumerate(entry["run_ids"])}
    shown = [row for row in rows if row["id"] in where]
    if not shown:
        return None
    low = min(entry["ci_low"][where[row["id"]]] for row in shown)
    high = max(entry["ci_high"][where[row["id"]]] for row in shown)
    span = (high - low) or 1.0
    low, high = max(0.0, low - 0.05 * span), high + 0.05 * span
    left, right, step = 230, 760, 18
    top_group = set(entry["top_group"])

    def x(value: float) -> int:
        return round(left + (value - low) / (high - low) * (right - left))

    bars = []
    for number, row in enumerate(shown):
        i = where[row["id"]]
        bars.append({"label": f"{row['team']} / {row['name']}", "y": 14 + number * step,
                     "low": x(entry["ci_low"][i]), "high": x(entry["ci_high"][i]), "mean": x(entry["means"][i]),
                     "value": entry["means"][i], "value_low": entry["ci_low"][i], "value_high": entry["ci_high"][i],
                     "top": row["id"] in top_group, "baseline": row["is_baseline"]})
    axis_y = 14 + len(shown) * step
    ticks = [{"x": x(value), "label": f"{value:.3f}"} for value in np.linspace(low, high, 6)]
    return {"key": key, "title": key, "bars": bars, "ticks": ticks, "left": left, "right": right,
            "axis_y": axis_y, "width": right + 30, "height": axis_y + 24,
            # When and over which runs the statistics were computed, and how the intervals were drawn.
            "computed_at": entry.get("computed_at"), "n_runs": len(entry["run_ids"]),
            # How many of the runs the table shows now the statistics cover.
            "n_shown": len(shown), "n_rows": len(rows),
            "bootstrap": entry.get("bootstrap")}
