"""One metric's figures through the task-kind interface (:meth:`MetricKind.score`): every figure on
the contexts the run scores, per dimension slice when the gold judges several (issue 39).

A slice (one dimension at one level in one language, :mod:`scoring.kinds.metric.dimensions`) is
whole contexts with that dimension as the human judgement, so each slice is scored exactly as a
one-dimension gold holding only its contexts (its bootstrap resamples its contexts) and its
figures take the keys ``<slice>.<measure>``. Per-context vectors stay aligned with every scored
context: a context outside a slice holds the no-information value (0.5 for predictive power, 0 for
a correlation) and all-zero statistics, so the corpus figure of any set of contexts is still exact
and equal to the headline. A one-slice gold keeps today's keys and numbers.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from scoring.kinds.base import MeasureSpec, Scored
from scoring.kinds.metric import meta
from scoring.kinds.metric.config import MetricConfig, MetricRun
from scoring.kinds.metric.dimensions import Slice
from scoring.kinds.metric.formats import MetricGold
from scoring.kinds.metric.measures import _NO_INFORMATION, _PREDICTIVE, _WITHIN, aggregate_key, measure_specs


def slice_gold(gold: MetricGold, chosen: Slice) -> tuple[MetricGold, np.ndarray]:
    """The gold of one slice (its contexts, that dimension as ``human``) and its response rows in
    ``gold``; the gold itself for a gold without dimension fields."""
    dims = gold.dims
    if dims is None:
        return gold, np.arange(gold.n_responses)
    rows = dims.slice_rows(chosen)
    contexts = np.unique(gold.context[rows])
    sub = gold if contexts.size == gold.n_contexts else gold.subset(contexts)
    # A slice is whole contexts (a context is of one level and language), so its rows are the subset's.
    return dataclasses.replace(sub, human=dims.values[rows, dims.column(chosen)], dims=None), rows


AGGREGATE_NOTE = ("no interval: the mean over dimension slices is not resampled as one figure; each slice's "
                  "figure has its own interval")


def scored_contexts(run: MetricRun, gold: MetricGold, items: np.ndarray | None) -> tuple[np.ndarray, int]:
    """The contexts to score (the run's complete ones, or those of ``items``) and how many of the
    wanted ones the run leaves out."""
    contexts, n_missing = run.contexts, run.n_missing
    if items is not None:
        wanted = np.asarray(items, dtype=np.int64)
        if wanted.ndim != 1 or (np.diff(wanted) <= 0).any() or (wanted.size and (
                wanted[0] < 0 or wanted[-1] >= gold.n_contexts)):
            raise ValueError(f"items must be ascending distinct context indices below {gold.n_contexts}")
        kept = np.isin(wanted, contexts)
        n_missing = int((~kept).sum())
        contexts = wanted[kept]
        if not contexts.size:
            raise ValueError("none of the chosen contexts is scored by this run")
    return contexts, n_missing


def slice_figures(gold: MetricGold, scores: np.ndarray, config: MetricConfig) -> dict[str, Any]:
    """Every figure of one metric on a one-dimension gold: headline, per-context vector and
    statistics per measure key (undefined ones left out), intervals and their labels."""
    figures = meta.evaluate_metrics(
        gold, {"metric": scores}, n_resamples=config.n_resamples, seed=config.seed, level=config.level,
        pooled_rank_resamples=config.n_resamples if config.rank_intervals else 0, tie_tolerance=config.tie_tolerance)
    entry = figures["metrics"]["metric"]
    counts, within = meta.per_context_values(gold, scores[:, None], tie_tolerance=config.tie_tolerance)
    statistics: dict[str, np.ndarray] = {}
    per_item: dict[str, np.ndarray] = {}
    pairs = counts.pairs.astype(np.float64)
    correct, ties = counts.correct[:, 0].astype(np.float64), counts.ties[:, 0].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        own = {"predictive_power": correct / pairs, "predictive_power_ties_half": (correct + 0.5 * ties) / pairs}
    for key in _PREDICTIVE:
        statistics[key] = np.column_stack([correct, ties, pairs])
        per_item[key] = np.where(pairs > 0, own[key], _NO_INFORMATION[key])
    for key in _WITHIN:
        values = within[key][:, 0]
        defined = ~np.isnan(values)
        statistics[key] = np.column_stack([np.where(defined, values, 0.0), defined.astype(np.float64)])
        per_item[key] = np.where(defined, values, _NO_INFORMATION[key])
    measures: dict[str, float | None] = {}
    headlines: dict[str, float] = {}
    for spec in measure_specs(None):
        key = spec.key
        value = spec.aggregate(per_item[key], statistics[key]) if spec.headline == "corpus" \
            else entry["measures"][key]
        if value is None or not math.isfinite(value):
            measures[key] = None
            per_item.pop(key, None)
            statistics.pop(key, None)
        else:
            measures[key] = headlines[key] = float(value)
    intervals = {key: entry["intervals"][key] if measures[key] is not None else None for key in measures}
    return {"measures": measures, "headlines": headlines, "per_item": per_item, "statistics": statistics,
            "intervals": intervals,
            "labels": {key: label for key, label in entry["interval_labels"].items() if intervals.get(key) is not None},
            "notes": dict(entry["interval_notes"]), "settings": dict(figures["settings"]),
            "n_pairs": figures["n_pairs"], "n_systems": figures["n_systems"],
            "n_contexts_defined": entry["n_contexts_defined"], "n_undefined": entry["n_undefined"]}


def score_metric(run: MetricRun, gold: MetricGold, config: MetricConfig, items: np.ndarray | None,
                 slices: list[Slice], specs: list[MeasureSpec]) -> Scored:
    """Every figure of one metric, per slice when there are several (module docstring)."""
    contexts, n_missing = scored_contexts(run, gold, items)
    if contexts.size == gold.n_contexts:
        base, scores = gold, run.scores
    else:
        base, scores = gold.subset(contexts), run.scores[np.isin(gold.context, contexts)]
    if len(slices) == 1 and not slices[0].prefix:
        scored_gold, rows = slice_gold(base, slices[0])
        column = scores[rows] if scores.ndim == 1 else scores[rows, base.dims.column(slices[0])]
        found = slice_figures(scored_gold, column, config)
        return Scored(
            item_ids=list(base.context_ids), per_item=found["per_item"], headlines=found["headlines"],
            settings=found["settings"], statistics=found["statistics"], warnings=list(run.warnings),
            n_missing=n_missing,
            details={"n_responses": base.n_responses, "n_systems": found["n_systems"],
                     "n_contexts_defined": found["n_contexts_defined"], "n_undefined": found["n_undefined"]},
            extra={"measures": found["measures"], "n_pairs": found["n_pairs"], "intervals": found["intervals"],
                   "interval_labels": found["labels"],
                   **({"interval_notes": found["notes"]} if found["notes"] else {})})

    per_item: dict[str, np.ndarray] = {}
    statistics: dict[str, np.ndarray] = {}
    measures: dict[str, float | None] = {}
    intervals: dict[str, list[float] | None] = {}
    labels: dict[str, str] = {}
    notes: dict[str, str] = {}
    details: dict[str, Any] = {"n_responses": base.n_responses, "n_contexts_defined": {}, "n_undefined": {}}
    described: list[dict[str, Any]] = []
    settings: dict[str, Any] = {}
    n_pairs = 0
    for chosen in slices:
        scored_gold, rows = slice_gold(base, chosen)
        info = {"key": chosen.prefix, "dimension": chosen.dimension, "level": chosen.level,
                "language": chosen.language, "title": chosen.title, "n_responses": int(rows.size),
                "n_contexts": scored_gold.n_contexts if rows.size else 0}
        described.append(info)
        if not rows.size:
            continue  # a live subset without this slice's contexts: its figures are undefined
        column = scores[rows] if scores.ndim == 1 else scores[rows, base.dims.column(chosen)]
        found = slice_figures(scored_gold, column, config)
        settings = found["settings"]
        info["n_pairs"] = found["n_pairs"]
        n_pairs += found["n_pairs"]
        # The slice's contexts among the scored ones (a slice is whole contexts).
        where = np.unique(base.context[rows])
        for key, value in found["measures"].items():
            full = f"{chosen.prefix}.{key}"
            measures[full] = value
            intervals[full] = found["intervals"][key]
            if key in found["labels"]:
                labels[full] = f"{found['labels'][key]} ({chosen.title})"
            if key in found["notes"]:
                notes[full] = found["notes"][key]
            if key in found["per_item"]:
                vector = np.full(base.n_contexts, _NO_INFORMATION[key])
                vector[where] = found["per_item"][key]
                per_item[full] = vector
                stats = np.zeros((base.n_contexts, found["statistics"][key].shape[1]))
                stats[where] = found["statistics"][key]
                statistics[full] = stats
        for key, value in found["n_contexts_defined"].items():
            details["n_contexts_defined"][f"{chosen.prefix}.{key}"] = value
        for key, value in found["n_undefined"].items():
            details["n_undefined"][f"{chosen.prefix}.{key}"] = value
    parts = [measures.get(f"{chosen.prefix}.{config.aggregate}") for chosen in slices]
    defined = [value for value in parts if value is not None]
    mean_key = aggregate_key(config.aggregate)
    measures[mean_key] = float(np.mean(defined)) if defined else None
    intervals[mean_key] = None
    notes[mean_key] = AGGREGATE_NOTE
    wanted = {spec.key for spec in specs}
    measures = {key: value for key, value in measures.items() if key in wanted}
    headlines = {key: value for key, value in measures.items() if value is not None}
    return Scored(
        item_ids=list(base.context_ids), per_item={k: v for k, v in per_item.items() if k in wanted},
        headlines=headlines, settings=settings or {"n_resamples": config.n_resamples, "seed": config.seed},
        statistics={k: v for k, v in statistics.items() if k in wanted}, warnings=list(run.warnings),
        n_missing=n_missing, details=details,
        extra={"measures": measures, "n_pairs": n_pairs, "intervals": {k: intervals.get(k) for k in measures},
               "interval_labels": labels, "interval_notes": notes, "dimensions": described,
               "aggregate": {"key": mean_key, "measure": config.aggregate, "n_slices": len(slices),
                             "n_defined": len(defined)}})
