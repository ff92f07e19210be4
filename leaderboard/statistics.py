"""Significance statistics of leaderboards: computed in Celery, stored, and read by the pages.

The numbers come from the framework-free ``scoring.stats``; this module only gathers the
dialogue-by-run matrices (one query per board), calls it and stores the results with the
significance level they were drawn at. When a computation runs is ``leaderboard.scheduling``'s
concern; how the stored numbers are drawn on a page is ``leaderboard.charts``'.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from leaderboard import scheduling
from leaderboard.board import Board, build_board
from leaderboard.models import MeasureStatistics, StatisticsState, TaskStatistics
from leaderboard.scheduling import Claim
from scoring import significance, stats
from scoring.kinds import Kind, MeasureSpec
from tasks.models import GoldVersion, Phase, Run, ScoreVector, Task
from tasks.runfiles import read_run_file

log = logging.getLogger(__name__)

@dataclass
class Matrices:
    """Per measure key, a (dialogues x runs) matrix; runs in ``run_ids`` order. ``statistics``:
    per corpus-level measure key, its (dialogues x runs x S) sufficient statistics."""

    run_ids: list[int]
    by_key: dict[str, np.ndarray]
    statistics: dict[str, np.ndarray] = field(default_factory=dict)


def gather_matrices(board: Board, group: str, corpus_keys: frozenset[str] = frozenset()) -> Matrices:
    """Every per-item vector of the board's runs for one measure group, in one query, with the
    stored sufficient statistics of the measures in ``corpus_keys``."""
    run_ids = [row["id"] for row in board.rows if group in row["groups"]]
    keys = [column.key for column in board.columns_for(group)]
    if len(run_ids) < 2 or not keys:
        return Matrices(run_ids, {})
    column = {run_id: position for position, run_id in enumerate(run_ids)}
    vectors = ScoreVector.objects.filter(
        score__run_id__in=run_ids, score__gold_version__number=board.gold_version,
        score__gold_version__task_id=board.task_id, score__scope=board.scope, key__in=keys,
    ).values_list("score__run_id", "key", "values", "n_statistics")
    by_key: dict[str, np.ndarray] = {}
    widths: dict[str, set[int]] = {}
    for run_id, key, values, width in vectors:
        array = np.frombuffer(bytes(values), dtype=np.float64)
        if key not in by_key:
            by_key[key] = np.full((array.size, len(run_ids)), np.nan)
        by_key[key][:, column[run_id]] = array
        widths.setdefault(key, set()).add(width)
    # In the board's column order, so statistics and their pages list measures the same way each time.
    complete = {key: by_key[key] for key in keys if key in by_key and not np.isnan(by_key[key]).any()}
    statistics: dict[str, np.ndarray] = {}
    wanted = [key for key in complete if key in corpus_keys]
    if wanted:
        rows = ScoreVector.objects.filter(
            score__run_id__in=run_ids, score__gold_version__number=board.gold_version,
            score__gold_version__task_id=board.task_id, score__scope=board.scope, key__in=wanted,
            n_statistics__gt=0).values_list("score__run_id", "key", "statistics", "n_statistics")
        for run_id, key, blob, width in rows:
            if widths[key] != {width}:
                continue  # some runs lack them (stored before issue 26): scored again below
            array = ScoreVector.statistics_array(blob, width)
            if key not in statistics:
                statistics[key] = np.full((array.shape[0], len(run_ids), width), np.nan)
            statistics[key][:, column[run_id], :] = array
        statistics = {key: value for key, value in statistics.items() if not np.isnan(value).any()}
    return Matrices(run_ids, complete, statistics)


def rescored_statistics(task: Task, board: Board, matrices: Matrices, keys: list[str]) -> dict[str, np.ndarray]:
    """The sufficient statistics of corpus measures ``keys`` for every run of ``matrices``, by
    scoring the runs' files again: for scores stored before statistics were kept beside them
    (their tests must still be about the corpus figure). Items as the board's scope."""
    kind, config = task.kind_impl, task.kind_config
    gold = GoldVersion.objects.get(pk=board.gold_version_id).load()
    items = None
    if board.scope == "live":
        phase = Phase.objects.filter(pk=board.phase_id).select_related("gold_version").first()
        items = phase.live_subset() if phase is not None else None
    runs = Run.objects.in_bulk(matrices.run_ids)
    columns: dict[str, list[np.ndarray]] = {key: [] for key in keys}
    for run_id in matrices.run_ids:
        parsed = kind.parse_run_file(read_run_file(runs[run_id]), gold, config, allow_missing=True)
        scored = kind.score(parsed, gold, config, items=items)
        for key in keys:
            columns[key].append(np.asarray(scored.statistics[key], dtype=np.float64))
    return {key: np.stack(values, axis=1) for key, values in columns.items()}


BOOTSTRAP_LEVEL = 0.95
KENDALL_RESAMPLES = 1000
# Kendall's tau between every pair of a group's measures grows with the square of their number: a
# group of more measures than this that comes in subgroups (the metrics track's dimensions: 16
# slices x 3 correlations) is compared within each subgroup (one dimension's measures), which is
# what its heat map can show; all pairs of 48 measures took 85 s of a 128 s computation. DQ's 18
# measures (A/E/S) stay compared across subgroups, as before.
MAX_TAU_MEASURES = 24


def _measure_agreement(board: Board, tested: Mapping[str, Any], matrices: Matrices,
                        specs: Mapping[str, MeasureSpec], seed: int,
                        lower_is_better: Mapping[str, bool]) -> dict[str, Any]:
    """``stats.meta_evaluate`` of a group's measures: all pairs, or within each subgroup for a
    large group of subgroups (``MAX_TAU_MEASURES``; then ``by_subgroup`` is true)."""
    keys = list(matrices.by_key)
    subgroup = {column.key: column.subgroup for column in board.columns}
    sets = [keys]
    if len(keys) > MAX_TAU_MEASURES and all(subgroup.get(key) for key in keys):
        sets = [[key for key in keys if subgroup[key] == name] for name in dict.fromkeys(subgroup[k] for k in keys)]
    merged: dict[str, Any] = {}
    for chosen in sets:
        results = {key: tested[key].tukey for key in chosen}
        by_key = {key: matrices.by_key[key] for key in chosen}
        corpus = significance.corpus_measures(specs, matrices.statistics, chosen)
        part = stats.meta_evaluate(results, by_key, n_resamples=KENDALL_RESAMPLES, seed=seed,
                                   lower_is_better=lower_is_better, corpus=corpus)
        if not merged:
            merged = part
        else:
            merged["measures"].update(part["measures"])
            merged["kendall_tau"].extend(part["kendall_tau"])
    merged["by_subgroup"] = len(sets) > 1
    return _json_ready(merged)


def compute_board_statistics(task: Task, phase: Phase | None, claim: Claim) -> str:
    """Compute the statistics of the public board of a task (or phase) and store them if no newer
    result exists (``claim`` is this computation's claim on the board, ``leaderboard.scheduling``);
    returns what happened, for the board's state and its pages.

    Every number is drawn with the task's B and seed, the ones the record keeps: every measure
    group uses the same seed, so each measure's p-values and intervals can be reproduced from the
    recorded B, the recorded seed and the exported matrix. Groups over the same runs and the same
    number of items are tested in one call, so that the permutations are drawn once for all
    their measures (with the same seed they would be the same permutations anyway).
    """
    started = time.perf_counter()
    board = build_board(task, phase, organiser=False)
    if board.hidden_reason:
        return f"nothing stored: {board.hidden_reason}"
    if board.gold_version is None:
        return "nothing stored: the board has no gold version"
    seed, permutations = task.statistics_seed, task.permutations
    alpha = stats.SIGNIFICANCE_LEVEL
    # "Best" (and so the top group) depends on the measure's direction, which its kind declares.
    lower_is_better = {column.key: not column.higher_is_better for column in board.columns}
    resamples = min(permutations, 10_000)
    # The kind's own measures: a board's columns may come from a cache, without corpus functions.
    specs = {spec.key: spec for spec in task.measure_specs()}
    corpus_keys = frozenset(key for key, spec in specs.items() if significance.is_corpus(spec))
    gathered: dict[str, Matrices] = {}
    for measure_group in board.groups():
        matrices = gather_matrices(board, measure_group.name, corpus_keys)
        # Each group on its own: one with a single item is skipped, not the whole board.
        if matrices.by_key and next(iter(matrices.by_key.values())).shape[0] >= 2:
            lacking = [key for key in matrices.by_key if key in corpus_keys and key not in matrices.statistics]
            if lacking:
                matrices.statistics.update(rescored_statistics(task, board, matrices, lacking))
            gathered[measure_group.name] = matrices
    together_groups: dict[tuple[tuple[int, ...], int], list[str]] = {}
    for group, matrices in gathered.items():
        shape_key = (tuple(matrices.run_ids), next(iter(matrices.by_key.values())).shape[0])
        together_groups.setdefault(shape_key, []).append(group)
    tested: dict[str, significance.MeasureTests] = {}
    for names in together_groups.values():
        together = {key: matrix for group in names for key, matrix in gathered[group].by_key.items()}
        statistics = {key: value for group in names for key, value in gathered[group].statistics.items()}
        tested.update(significance.measure_tests(specs, together, statistics, permutations=permutations, seed=seed,
                                                 resamples=resamples, level=BOOTSTRAP_LEVEL))

    summaries: dict[str, dict[str, Any]] = {}
    pairwise: dict[str, bytes] = {}
    meta: dict[str, Any] = {}
    n_items = 0
    for group, matrices in gathered.items():
        n_items = max(n_items, next(iter(matrices.by_key.values())).shape[0])
        for key in matrices.by_key:
            result, intervals = tested[key].tukey, tested[key].intervals
            summaries[key] = {
                "run_ids": matrices.run_ids,
                "means": result.means.tolist(),
                "headline": tested[key].headline,
                "ci_low": intervals.lower.tolist(),
                "ci_high": intervals.upper.tolist(),
                "bootstrap": {"n_resamples": resamples, "seed": seed, "level": BOOTSTRAP_LEVEL},
                "top_group": [matrices.run_ids[i] for i in
                              result.top_group(alpha=alpha, lower_is_better=lower_is_better[key])],
                # None for corpus measures: no per-item residual, no effect sizes.
                "residual_variance": _json_ready(float(result.residual_variance)),
                "effect_sizes_defined": result.effect_sizes_defined,
                # Above 1 when the recombined method computed the p-values: its Monte Carlo
                # standard errors are wider than the binomial's (scoring.stats).
                "mc_variance_inflation": result.mc_variance_inflation,
            }
            pairwise[key] = MeasureStatistics.pack(result)
        meta[group] = _measure_agreement(board, tested, matrices, specs, seed, lower_is_better)
    if gathered:
        meta["bootstrap"] = {"n_resamples": resamples, "seed": seed, "level": BOOTSTRAP_LEVEL}
    labels = {str(run_id): label for run_id, label in board.labels().items()}
    kind_meta = kind_comparisons(task, board, labels, seed, permutations)
    if kind_meta:
        meta["kind"] = kind_meta
    with transaction.atomic():
        # The generation check and the write in one transaction, under the state row's lock: a
        # computation that finishes after a newer one never overwrites it.
        if not scheduling.may_store(claim):
            return f"not stored: a newer result was stored first (this was generation {claim.generation})"
        record, _ = TaskStatistics.objects.update_or_create(
            task=task, phase=phase,
            defaults={"gold_version_id": _gold_version_id(task, phase), "scope": board.scope,
                      "run_ids": [row["id"] for row in board.rows], "run_labels": labels,
                      "meta": meta, "permutations": permutations, "seed": seed, "alpha": alpha,
                      "n_items": n_items, "seconds": time.perf_counter() - started,
                      "scores_as_of": task.scores_changed_at, "generation": claim.generation})
        record.measures.all().delete()
        MeasureStatistics.objects.bulk_create([
            MeasureStatistics(statistics=record, key=key, summary=summary, pairwise=pairwise[key])
            for key, summary in summaries.items()])
        scheduling.mark_stored(claim)
    compared = ", ".join(f"{len(gathered[group].run_ids)} runs on {group}" for group in gathered)
    return f"stored over {len(board.rows)} runs ({compared or f'too few runs or {board.item_noun}s to compare'})"


def kind_comparisons(task: Task, board: Board, labels: dict[str, str], seed: int,
                     resamples: int) -> dict[str, Any]:
    """What the task's kind compares between the board's runs beyond the per-item statistics
    (``Kind.compare``: the metrics track's paired tests, concordance, discriminative power), with
    runs named by their labels; ``{}`` for kinds that compare nothing more.

    Only on boards that show whole-set scores: the kind compares runs on the whole gold, which a
    live board (a test phase's subset) must not reveal. A problem the kind reports (a run it
    cannot compare) is stored as the reason, not raised: the per-item statistics still stand.
    """
    kind = task.kind_impl
    if type(kind).compare is Kind.compare or len(board.rows) < 2:
        return {}
    if board.scope != "full":
        return {"unavailable": "computed on whole-set scores only; this board shows the live subset"}
    gold = GoldVersion.objects.get(pk=board.gold_version_id).load()
    config = task.kind_config
    runs = Run.objects.in_bulk([row["id"] for row in board.rows])
    try:
        parsed = {labels[str(row["id"])]: kind.parse_run_file(read_run_file(runs[row["id"]]), gold, config)
                  for row in board.rows}
        return _json_ready(kind.compare(parsed, gold, config, seed=seed, resamples=resamples))
    except ValueError as error:  # ValidationFailed included: the gold changed under a run
        return {"unavailable": str(error)}


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
    boards = compute_now(task_id)
    stored = StatisticsState.objects.filter(task_id=task_id, stored_generation__gt=0,
                                            stored_generation=F("completed")).count()
    return f"statistics of {boards} board(s) requested; {stored} board(s) hold the newest result"


def stored_statistics(task: Task, phase: Phase | None) -> TaskStatistics | None:
    return TaskStatistics.objects.filter(task=task, phase=phase).first()


def measure_summary(task: Task, phase_id: int | None, key: str) -> dict[str, Any] | None:
    """The stored summary of one measure of a board (one small query; no pairwise matrices),
    with ``computed_at`` (when the board's statistics were computed) and ``alpha`` (the
    significance level of its top group)."""
    row = (MeasureStatistics.objects.filter(statistics__task=task, statistics__phase_id=phase_id, key=key)
           .values_list("summary", "statistics__computed_at", "statistics__alpha").first())
    if row is None:
        return None
    summary, computed_at, alpha = row
    return {**summary, "computed_at": computed_at, "alpha": alpha}


# Running claimed boards -----------------------------------------------------------------------
# The claim and lease bookkeeping is leaderboard.scheduling; computing a claimed board lives here,
# beside the computation, so that scheduling never imports the statistics.

def compute_claimed(task: Task, claim: Claim) -> bool:
    """Compute, store (if still the newest) and release one claimed board. True if dirty."""
    phase = Phase.objects.filter(pk=claim.phase_id).first() if claim.phase_id else None
    board = f"{task.slug}/{phase.name if phase else '-'}"
    log.debug("statistics of %s: generation %s started", board, claim.generation)
    try:
        with scheduling.heartbeat(claim):
            outcome = compute_board_statistics(task, phase, claim)
    except Exception as error:  # the board must not stay claimed, whatever went wrong (time limit included)
        log.exception("statistics of %s could not be computed", board)
        outcome = f"failed: {type(error).__name__}: {str(error).strip()[:200]}"
    except BaseException:
        # Told to stop (the statistics worker's SIGTERM, Ctrl-C in a command): nothing failed, the
        # request stays pending and the next process computes it at once, not after the lease.
        scheduling.give_back(claim)
        raise
    dirty = scheduling.finish(claim, outcome)
    log.info("statistics of %s: generation %s finished in %.2f s: %s%s", board, claim.generation,
             time.monotonic() - claim.started, outcome, " (dirty: one follow-up)" if dirty else "")
    return dirty


def run_due(task_id: int, force: bool = False) -> float | None:
    """Compute each board of the task whose request is due (every pending one when ``force``).

    Returns the seconds after which to call again (a board waiting for its debounce, a dirty
    board's follow-up, a board another process holds), or None when nothing is pending.
    """
    task = Task.objects.filter(pk=task_id).first()
    if task is None:
        return None
    again: float | None = None

    def later(seconds: float | None) -> None:
        nonlocal again
        if seconds is not None:
            again = seconds if again is None else min(again, seconds)

    for state in StatisticsState.objects.filter(scheduling.board_filter(task_id)).order_by("pk"):
        for _ in range(1 + (scheduling.FORCED_FOLLOW_UPS if force else 0)):
            until = scheduling.seconds_until_due(state)
            if until is None:
                break
            if until > 0 and not force:
                later(until)
                break
            won = scheduling.claim(state.pk)
            if won is None:
                state.refresh_from_db()
                if state.pending and scheduling.lease_is_live(state):
                    # Its holder schedules the follow-up when it finishes; look again when the
                    # lease could have lapsed, in case the holder dies.
                    lapses = state.heartbeat_at + timedelta(seconds=scheduling.LEASE_SECONDS)
                    later((lapses - timezone.now()).total_seconds() + 1.0)
                break
            dirty = compute_claimed(task, won)
            state.refresh_from_db()
            if not dirty:
                break
            if not force:
                later(scheduling.seconds_until_due(state))
                break
    return again


def compute_now(task_id: int, wait: float = 2 * scheduling.LEASE_SECONDS) -> int:
    """Request and compute every board of the task at once (commands, tests), still through the
    claim: a board another process (or a timer thread of this one, which would die with a
    command) is computing is waited for, and computed again if the request is newer than what
    that computation served. Returns the number of boards."""
    boards = scheduling.request(task_id)
    deadline = time.monotonic() + wait
    while True:
        run_due(task_id, force=True)
        pending = StatisticsState.objects.filter(scheduling.board_filter(task_id),
                                                 requested__gt=F("completed")).exists()
        if not pending or time.monotonic() > deadline:
            return boards
        time.sleep(0.5)
