"""Every figure of every metric with its percentile bootstrap interval over contexts
(:func:`evaluate_metrics`), computed exactly on each resample from per-context sums, and one
metric's report in the shape of the ``score`` command's JSON."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from scoring import stats
from scoring.kinds.metric.formats import MetricGold
from scoring.kinds.metric.meta import ranks
from scoring.kinds.metric.meta.correlations import (
    _disattenuated_pearson,
    _pearson_from_sums,
    _pooled_rank_correlations,
    _system_correlations,
    _within_correlations,
)
from scoring.kinds.metric.meta.inputs import _check_positive, _json_number, _one_blas_thread, score_matrix
from scoring.kinds.metric.meta.predictive import context_counts
from scoring.kinds.metric.meta.registry import _SYSTEM_KEYS, MEASURES, SYSTEM_INTERVAL_NOTE, interval_label


def _interval(replicates: np.ndarray, level: float) -> tuple[list[float] | None, int]:
    defined = replicates[~np.isnan(replicates)]
    if not defined.size:
        return None, int(replicates.size)
    lower, upper = np.quantile(defined, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return [float(lower), float(upper)], int(replicates.size - defined.size)


def evaluate_metrics(
    gold: MetricGold,
    runs: Mapping[str, np.ndarray],
    *,
    n_resamples: int = 1_000,
    seed: int = 0,
    level: float = 0.95,
    pooled_rank_resamples: int = 0,
    tie_tolerance: float = 0.0,
) -> dict[str, Any]:
    """Every per-metric figure with a percentile bootstrap interval over contexts.

    For each metric (a vector of scores aligned with ``gold``): ``predictive_power`` and
    ``predictive_power_ties_half``; ``kendall_tau_b``, ``spearman`` and ``pearson`` over the
    pooled responses; the same three computed within each context and averaged over the
    contexts where defined (``*_within``; a context where the metric or the people are
    constant is left out, and ``n_contexts_defined`` says how many were averaged); and
    ``system_kendall_tau_b``, ``system_spearman``, ``system_pearson`` between system means
    (a system's mean over all its responses) and ``system_pearson_disattenuated`` (the Pearson
    of system means with their context-sampling noise taken out: :func:`_disattenuated_pearson`)
    when the gold names systems, else None.

    Intervals: B = ``n_resamples`` context resamples from :func:`scoring.stats.resample_counts`
    (``seed``); each statistic is recomputed exactly on each resample from per-context sums
    and the interval is the ``(1 - level)/2``, ``(1 + level)/2`` quantiles of its defined
    replicates (``n_undefined`` counts the others, e.g. a resample where a system is absent).
    The plain Pearson of system means gets no interval (None, and ``interval_notes`` says why:
    :data:`SYSTEM_INTERVAL_NOTE`); ``interval_labels`` says in words what every other interval
    estimates (:func:`interval_label`).
    Pooled Kendall and Spearman depend on ranks across contexts, which are not sums: an exact
    resample costs O(N log N) per metric (:func:`~scoring.kinds.metric.meta.ranks.pooled_rank_replicates`,
    about 0.4 ms per resample at 20,000 responses), so their intervals are computed only for the first
    ``pooled_rank_resamples`` resamples (0, the default, leaves them None) and say how many.
    ``tie_tolerance`` is that of :func:`context_counts` (predictive power only).
    Same inputs and seed, same output. Returns JSON-ready data (None for undefined values)::

        {"n_items": N, "n_contexts": C, "n_pairs": P, "settings": {...},
         "metrics": {name: {"measures": {key: value}, "intervals": {key: [low, high] | None},
                            "interval_labels": {key: what the interval estimates},
                            "n_contexts_defined": {...}, "n_undefined": {...},
                            "interval_notes": {"system_pearson": why there is no interval}}}}
    """
    names, x = score_matrix(gold, runs)
    n_resamples = _check_positive(n_resamples, "n_resamples")
    stats._check_seed(seed)
    stats._check_level(level)
    if isinstance(pooled_rank_resamples, bool) or not isinstance(pooled_rank_resamples, numbers.Integral) \
            or not 0 <= pooled_rank_resamples <= n_resamples:
        raise ValueError(f"pooled_rank_resamples must be an integer in [0, n_resamples]; got {pooled_rank_resamples!r}")
    n, m = x.shape
    n_contexts = gold.n_contexts
    y = gold.human

    counts = context_counts(gold, dict(zip(names, x.T, strict=True)), tie_tolerance=tie_tolerance)
    within = _within_correlations(gold, x)

    # Per-context sums, one block of columns per statistic; every resample is w @ sums.
    mean_x, mean_y = x.mean(axis=0), y.mean()
    cx, cy = x - mean_x, y - mean_y  # centred once: moment sums stay well conditioned
    eps = np.finfo(np.float64).eps
    floor_x = np.square(16 * eps * np.abs(x).max(axis=0))  # per response; see _pearson_from_sums
    floor_y = np.square(16 * eps * np.abs(y).max())
    sums = {
        "correct": counts.correct.astype(np.float64),
        "half": counts.credit(True),
        "pairs": counts.pairs[:, None].astype(np.float64),
        "size": gold.context_sizes[:, None].astype(np.float64),
        "sx": _context_sums(gold, cx),
        "sxx": _context_sums(gold, cx * cx),
        "sxy": _context_sums(gold, cx * cy[:, None]),
        "sy": _context_sums(gold, cy[:, None]),
        "syy": _context_sums(gold, (cy * cy)[:, None]),
    }
    for key, values in within.items():
        sums[key] = np.nan_to_num(values, nan=0.0)
        sums[key + "_defined"] = (~np.isnan(values)).astype(np.float64)
    n_systems = len(gold.system_names) if gold.has_systems else 0
    if n_systems:
        cell = gold.context * n_systems + gold.system
        sums["system_count"] = np.bincount(cell, minlength=n_contexts * n_systems).reshape(n_contexts, n_systems)
        sums["system_human"] = np.bincount(cell, weights=y, minlength=n_contexts * n_systems).reshape(
            n_contexts, n_systems)
        sums["system_metric"] = np.stack(
            [np.bincount(cell, weights=x[:, j], minlength=n_contexts * n_systems).reshape(n_contexts, n_systems)
             for j in range(m)], axis=1).reshape(n_contexts, m * n_systems)
        # Cell sums of centred scores (a shift changes no correlation and keeps the noise
        # estimate's sums of squares well conditioned) and their products, per context.
        def cell_sums(values: np.ndarray) -> np.ndarray:
            return np.bincount(cell, weights=values, minlength=n_contexts * n_systems).reshape(n_contexts, n_systems)

        human_cells = cell_sums(cy)
        metric_cells = np.concatenate([cell_sums(cx[:, j]) for j in range(m)], axis=1)  # metric j: columns j*k..
        count_cells = sums["system_count"].astype(np.float64)
        repeated_human, repeated_count = np.tile(human_cells, m), np.tile(count_cells, m)
        cells = {"system_count": count_cells, "system_hc": human_cells, "system_mc": metric_cells}
        sums.update(system_hc=human_cells, system_mc=metric_cells, system_hh=human_cells * human_cells,
                    system_hn=human_cells * count_cells, system_nn=count_cells * count_cells,
                    system_mm=metric_cells * metric_cells, system_hm=repeated_human * metric_cells,
                    system_mn=metric_cells * repeated_count)
    keys = list(sums)
    widths = np.cumsum([0] + [sums[k].shape[1] for k in keys])
    table = np.concatenate([sums[k].astype(np.float64) for k in keys], axis=1)
    block = {k: slice(widths[i], widths[i + 1]) for i, k in enumerate(keys)}

    def figures(totals: np.ndarray, w: np.ndarray) -> dict[str, np.ndarray]:
        """Every sum-based figure of every metric from context-weighted totals (rows: resamples;
        ``w``: their context weights)."""
        t = {k: totals[:, s] for k, s in block.items()}
        out: dict[str, np.ndarray] = {}
        with np.errstate(invalid="ignore", divide="ignore"):
            out["predictive_power"] = t["correct"] / t["pairs"]
            out["predictive_power_ties_half"] = t["half"] / t["pairs"]
            out["pearson"] = _pearson_from_sums(t["size"], t["sx"], t["sy"], t["sxx"], t["syy"], t["sxy"],
                                                t["size"] * floor_x, t["size"] * floor_y)
            for key in within:
                out[key] = t[key] / t[key + "_defined"]
            if n_systems:
                human_means = t["system_human"] / t["system_count"]
                metric_means = t["system_metric"].reshape(-1, m, n_systems) / t["system_count"][:, None, :]
                out.update(_system_correlations(metric_means, human_means, n))
                corrected = _disattenuated_pearson(t, w, cells, m, n_systems)
                # Constant system means (within round-off) have no correlation, corrected or not.
                corrected[np.isnan(out["system_pearson"])] = np.nan
                out["system_pearson_disattenuated"] = corrected
                missing = (t["system_count"] == 0).any(axis=1)  # a system absent: means undefined
                for key in _SYSTEM_KEYS:
                    out[key][missing] = np.nan
        return out

    point = figures(table.sum(axis=0, keepdims=True), np.ones((1, n_contexts)))
    # Exact constant checks: moment sums of a constant column leave round-off, not 0.
    constant_metric = np.ptp(x, axis=0) == 0
    if np.ptp(y) == 0:
        constant_metric[:] = True
    point["pearson"][0, constant_metric] = np.nan
    layouts = [ranks._RankLayout.of(x[:, j], y, gold.context) if ranks._pooled_rank_kernel() else None
               for j in range(m)]
    if ranks._pooled_rank_kernel() is not None:
        # The point estimates are the kernel's replicate with every context once: the same exact
        # formulas as the resamples, and no import of scipy.stats (1.5 s, half of a metric
        # `score` command: issue 28) for scipy's kendalltau and rankdata.
        once = np.ones((1, n_contexts), dtype=np.int64)
        pooled = [tuple(float(value[0]) for value in ranks.pooled_rank_replicates(gold, x[:, j], once, layouts[j]))
                  for j in range(m)]
    else:
        pooled = [_pooled_rank_correlations(x[:, j], y) for j in range(m)]
    point["kendall_tau_b"] = np.array([[tau for tau, _ in pooled]])
    point["spearman"] = np.array([[rho for _, rho in pooled]])

    replicates: dict[str, np.ndarray] = {key: np.empty((n_resamples, m)) for key in point}
    for key in ("kendall_tau_b", "spearman"):
        replicates[key] = np.full((pooled_rank_resamples, m), np.nan)
    for first, weights in stats.resample_counts(n_contexts, n_resamples, seed):
        w = weights.astype(np.float64)
        with _one_blas_thread():
            totals = w @ table
        chunk = figures(totals, w)
        for key, values in chunk.items():
            replicates[key][first : first + values.shape[0]] = values
        ranked = min(weights.shape[0], pooled_rank_resamples - first)
        for j in range(m if ranked > 0 else 0):
            tau, rho = ranks.pooled_rank_replicates(gold, x[:, j], weights[:ranked], layouts[j])
            replicates["kendall_tau_b"][first : first + ranked, j] = tau
            replicates["spearman"][first : first + ranked, j] = rho

    order = list(MEASURES)
    metrics: dict[str, Any] = {}
    for j, name in enumerate(names):
        measures: dict[str, float | None] = {}
        intervals: dict[str, list[float] | None] = {}
        undefined: dict[str, int] = {}
        for key in order:
            if key in _SYSTEM_KEYS and not n_systems:
                measures[key], intervals[key] = None, None
                continue
            measures[key] = _json_number(float(point[key][0, j]))
            interval, n_undefined = _interval(replicates[key][:, j], level)
            intervals[key] = interval if measures[key] is not None and key != "system_pearson" else None
            undefined[key] = n_undefined
        metrics[name] = {
            "measures": measures,
            "intervals": intervals,
            "interval_labels": {key: interval_label(key, level) for key, value in intervals.items()
                                if value is not None},
            "n_undefined": undefined,
            "n_contexts_defined": {key: int((~np.isnan(within[key][:, j])).sum()) for key in within},
            "interval_notes": {"system_pearson": SYSTEM_INTERVAL_NOTE} if measures["system_pearson"] is not None
            else {},
        }
    return {
        "n_items": n,
        "n_contexts": n_contexts,
        "n_pairs": int(counts.pairs.sum()),
        "n_systems": n_systems,
        "settings": {"n_resamples": n_resamples, "seed": int(seed), "level": level,
                     "pooled_rank_resamples": int(pooled_rank_resamples), "resampling": "contexts",
                     "tie_tolerance": float(tie_tolerance)},
        "metrics": metrics,
    }


def metric_report(
    gold: MetricGold, scores: np.ndarray, *, n_resamples: int = 1_000, seed: int = 0, level: float = 0.95,
    pooled_rank_resamples: int = 0,
) -> dict[str, Any]:
    """One metric's figures in the shape of issue 16's ``score --kind metric --format json``::

        {"measures": {"predictive_power": x, ..., "system_pearson": x | None},
         "intervals": {key: [low, high] | None}, "n_items": N, "n_pairs": P, "settings": {...}}
    """
    figures = evaluate_metrics(gold, {"metric": scores}, n_resamples=n_resamples, seed=seed, level=level,
                               pooled_rank_resamples=pooled_rank_resamples)
    entry = figures["metrics"]["metric"]
    return {"measures": entry["measures"], "intervals": entry["intervals"], "n_items": figures["n_items"],
            "n_pairs": figures["n_pairs"], "settings": figures["settings"]}


def _context_sums(gold: MetricGold, values: np.ndarray) -> np.ndarray:
    return np.stack([np.bincount(gold.context, weights=values[:, j], minlength=gold.n_contexts)
                     for j in range(values.shape[1])], axis=1)
