"""Meta-evaluation of submitted metrics against hidden human judgements (seeds 003 and 000).

Framework-free: NumPy, SciPy (imported lazily) and :mod:`scoring.stats`, never Django. A
*metric* is a vector of scores, one per gold response, higher meaning better, aligned with a
:class:`~scoring.kinds.metric.formats.MetricGold` (``load_metric_run`` returns exactly that).
docs/metrics.md has the definitions, the choices and the benchmark figures.

Sufficient statistics. Everything drawn from a context bootstrap is a function of per-context
sums (sacrebleu's design): predictive power of correct and pair counts, Pearson of five
moment sums, within-context correlations of per-context values, system means of per-context,
per-system sums. A resample is a vector of context counts ``w`` (from
:func:`scoring.stats.resample_counts`, the same stream as the dialogue bootstrap), and the
statistic on it is computed exactly from ``w @ per_context_sums``: one count matrix
(B x contexts) serves every metric and every figure. Pooled Kendall and Spearman are the
exception (ranks are not sums), see :func:`evaluate_metrics`.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from scoring import stats
from scoring.kinds.metric.formats import MetricGold

__all__ = [
    "MEASURES",
    "ContextCounts",
    "MetricMeasure",
    "PairedBootstrapResult",
    "concordance_matrix",
    "context_counts",
    "discriminative_power_figures",
    "evaluate_metrics",
    "metric_report",
    "paired_bootstrap",
    "paired_t_tests",
    "per_context_values",
    "pooled_rank_replicates",
    "predictive_power",
    "score_matrix",
]

# Chunks of pair-by-metric arrays hold about this many cells.
_CELLS_PER_CHUNK = 1 << 22
# Differences of predictive power closer than this are ties (round-off of ratios of sums).
_TIE_TOLERANCE = 1e-12


def _one_blas_thread():
    """Run matrix products on one BLAS thread.

    A threaded BLAS splits a product's sums by thread count, so the last bits of a bootstrap
    figure would depend on the machine's cores; and these products are skinny (contexts x a
    few hundred columns), where threads cost more than they save, 10-50x on a busy machine.
    """
    return threadpool_limits(limits=1, user_api="blas")


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class MetricMeasure:
    """A figure the metrics track reports for every submitted metric (all higher is better)."""

    key: str
    label: str
    low: float
    high: float
    official: bool
    aggregation: str
    citation: str
    higher_is_better: bool = True


_SEED003 = "Liu, Zhou and Wilson, ACM TOIS 2021"
MEASURES: dict[str, MetricMeasure] = {
    m.key: m
    for m in (
        MetricMeasure("predictive_power", "Predictive power", 0.0, 1.0, True,
                      "sum of per-context correct / sum of per-context pairs",
                      f"{_SEED003}, Algorithm 3; Liu et al., POSSCORE, CIKM 2021, Algorithm 1"),
        MetricMeasure("predictive_power_ties_half", "Predictive power (metric ties count half)", 0.0, 1.0, False,
                      "(sum correct + sum ties / 2) / sum pairs", f"variant of {_SEED003}, Algorithm 3"),
        MetricMeasure("kendall_tau_b", "Kendall tau-b, responses pooled", -1.0, 1.0, False, "pooled responses",
                      "Kendall, Biometrika 1945 (tau-b)"),
        MetricMeasure("spearman", "Spearman, responses pooled", -1.0, 1.0, False, "pooled responses",
                      "Spearman 1904 (Pearson of mid-ranks)"),
        MetricMeasure("pearson", "Pearson, responses pooled", -1.0, 1.0, False, "pooled responses", "Pearson 1896"),
        MetricMeasure("kendall_tau_b_within", "Kendall tau-b within contexts", -1.0, 1.0, False,
                      "mean over contexts where defined", "Kendall 1945"),
        MetricMeasure("spearman_within", "Spearman within contexts", -1.0, 1.0, False,
                      "mean over contexts where defined", "Spearman 1904"),
        MetricMeasure("pearson_within", "Pearson within contexts", -1.0, 1.0, False,
                      "mean over contexts where defined", "Pearson 1896"),
        MetricMeasure("system_kendall_tau_b", "Kendall tau-b of system means", -1.0, 1.0, False,
                      "system means over all their responses", "Kendall 1945"),
        MetricMeasure("system_spearman", "Spearman of system means", -1.0, 1.0, False,
                      "system means over all their responses", "Spearman 1904"),
        MetricMeasure("system_pearson", "Pearson of system means", -1.0, 1.0, False,
                      "system means over all their responses", "Pearson 1896"),
        MetricMeasure("system_pearson_disattenuated", "Pearson of system means, corrected for context noise",
                      -1.0, 1.0, False,
                      "system means over all their responses; covariances less their context-sampling noise",
                      "Spearman 1904 (correction for attenuation)"),
    )
}
_SYSTEM_KEYS = ("system_kendall_tau_b", "system_spearman", "system_pearson", "system_pearson_disattenuated")
# The system-level figures whose percentile interval over contexts is calibrated in SIGNIFICANCE-SPEC's
# model (benchmarks/system_interval_coverage.py, 300 repetitions, docs/metrics.md): at 30, 60, 100 and 200
# contexts Kendall and Spearman of system means cover 0.97-1.00 for a nominal 0.95, the disattenuated
# Pearson 0.97-1.00 where it is defined (0.93 at 30 contexts counting the 7% where it is not as misses).
# The plain Pearson of system means is pulled away by what the context noise shares (people and metric
# err together on a response), so an interval around it misses the systems' true correlation: percentile
# 0.83-0.93, BCa 0.77-0.92 in the same runs; it is shown without one.
SYSTEM_INTERVAL_NOTE = ("no interval: context noise pulls this figure away from the correlation of the systems' true "
                        "means, so a bootstrap interval around it holds that correlation less often than it claims "
                        "(0.77-0.93 for a nominal 0.95 in a simulation); the corrected Pearson beside it has a "
                        "calibrated one")
# What each interval estimates, in words (the figure recomputed on contexts drawn again).
_INTERVAL_SUBJECTS = {
    "predictive_power": "predictive power",
    "predictive_power_ties_half": "the tie-aware predictive power",
    "kendall_tau_b": "Kendall's tau-b over the pooled responses",
    "spearman": "the Spearman correlation over the pooled responses",
    "pearson": "the Pearson correlation over the pooled responses",
    "kendall_tau_b_within": "the mean within-context Kendall tau-b",
    "spearman_within": "the mean within-context Spearman correlation",
    "pearson_within": "the mean within-context Pearson correlation",
    "system_kendall_tau_b": "the system-level Kendall tau-b",
    "system_spearman": "the system-level Spearman correlation",
    "system_pearson_disattenuated": "the correlation of the systems' true mean scores (Pearson of system means "
                                    "corrected for context noise)",
}


def interval_label(key: str, level: float) -> str:
    """What the interval of figure ``key`` estimates, in words, e.g. "95% interval for the
    system-level Spearman correlation if the contexts were drawn again"."""
    return f"{level:.0%} interval for {_INTERVAL_SUBJECTS[key]} if the contexts were drawn again"


# --------------------------------------------------------------------------- inputs


def _check_positive(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{what} must be a positive integer; got {value!r}")
    return int(value)


def score_matrix(gold: MetricGold, runs: Mapping[str, np.ndarray] | np.ndarray) -> tuple[list[str], np.ndarray]:
    """Names and an (n_responses, n_metrics) float64 matrix from metric vectors; ValueError if unusable."""
    if isinstance(runs, Mapping):
        names = [str(name) for name in runs]
        columns = [np.asarray(v, dtype=np.float64) for v in runs.values()]
        if not columns:
            raise ValueError("no metrics given")
        for name, column in zip(names, columns, strict=True):
            if column.shape != (gold.n_responses,):
                raise ValueError(f"metric {name!r}: expected {gold.n_responses} scores, got shape {column.shape}")
        matrix = np.stack(columns, axis=1)
    else:
        matrix = np.asarray(runs, dtype=np.float64)
        if matrix.ndim == 1:
            matrix = matrix[:, None]
        if matrix.ndim != 2 or matrix.shape[0] != gold.n_responses:
            raise ValueError(f"expected ({gold.n_responses}, n_metrics) scores, got shape {matrix.shape}")
        names = [str(j) for j in range(matrix.shape[1])]
    if not np.isfinite(matrix).all():
        raise ValueError("metric scores must be finite (validate runs with load_metric_run)")
    return names, np.ascontiguousarray(matrix)


# --------------------------------------------------------------------------- predictive power


@dataclass(frozen=True, eq=False)
class ContextCounts:
    """Per-context sufficient statistics of predictive power, stored like per-item scores.

    ``correct[c, m]``: pairs of context c (with different human judgements) that metric m
    orders as people do; ``ties[c, m]``: such pairs metric m scores equal; ``pairs[c]``: pairs
    with different human judgements (the same for every metric). Any subset of contexts or
    bootstrap resample is scored exactly from these, see :func:`predictive_power`.
    """

    names: tuple[str, ...]
    correct: np.ndarray
    ties: np.ndarray
    pairs: np.ndarray

    def column(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(correct, ties, pairs)`` per context of one metric."""
        m = self.names.index(name)
        return self.correct[:, m], self.ties[:, m], self.pairs

    def stored(self, name: str) -> dict[str, list[int]]:
        """One metric's per-context vectors, JSON-ready, to store with its run (keys as in :meth:`from_stored`)."""
        correct, ties, pairs = self.column(name)
        return {"correct": correct.tolist(), "ties": ties.tolist(), "pairs": pairs.tolist()}

    @classmethod
    def from_stored(cls, stored: Mapping[str, Mapping[str, Sequence[int]]]) -> ContextCounts:
        """Counts of several metrics from their stored vectors (``{name: {"correct", "ties", "pairs"}}``).

        Raises ValueError unless every metric was scored on the same contexts (same ``pairs``)
        and ``0 <= correct, ties``, ``correct + ties <= pairs``.
        """
        if not stored:
            raise ValueError("no metrics given")
        names = tuple(str(name) for name in stored)
        columns = [{key: np.asarray(entry[key], dtype=np.int64) for key in ("correct", "ties", "pairs")}
                   for entry in stored.values()]
        pairs = columns[0]["pairs"]
        for name, column in zip(names, columns, strict=True):
            if not np.array_equal(column["pairs"], pairs):
                raise ValueError(f"metric {name!r} was scored on other contexts (its pair counts differ)")
            if column["correct"].shape != pairs.shape or column["ties"].shape != pairs.shape:
                raise ValueError(f"metric {name!r}: correct and ties need one count per context")
            if (column["correct"] < 0).any() or (column["ties"] < 0).any() \
                    or (column["correct"] + column["ties"] > pairs).any():
                raise ValueError(f"metric {name!r}: counts must satisfy 0 <= correct, ties and correct + ties <= pairs")
        return cls(names=names, correct=np.stack([c["correct"] for c in columns], axis=1),
                   ties=np.stack([c["ties"] for c in columns], axis=1), pairs=pairs)

    def credit(self, ties_half: bool = False) -> np.ndarray:
        """Per-context credit: correct pairs, plus half the tied ones when ``ties_half``."""
        return self.correct + 0.5 * self.ties if ties_half else self.correct.astype(np.float64)


def _check_tolerance(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"tie_tolerance must be a finite number >= 0; got {value!r}")
    return float(value)


def context_counts(
    gold: MetricGold, runs: Mapping[str, np.ndarray] | np.ndarray, *, tie_tolerance: float = 0.0
) -> ContextCounts:
    """Correct, tied and total pairs per context for each metric (seed 003 Algorithm 3, per context).

    A pair (r1, r2) of responses to one context counts when its human judgements differ
    (pairs with equal judgements are dropped, as both seeds do); it is correct when
    ``(X(r1) - X(r2)) * (X*(r1) - X*(r2)) > 0`` and tied when ``X(r1) = X(r2)``. With a
    ``tie_tolerance`` t > 0, metric scores closer than t (``|X(r1) - X(r2)| <= t``) are a tie
    and a pair is correct when ``(X(r1) - X(r2)) * sign(X*(r1) - X*(r2)) > t``.
    """
    tolerance = _check_tolerance(tie_tolerance)
    names, x = score_matrix(gold, runs)
    first, second, context = gold.pairs
    human_sign = np.sign(gold.human[first] - gold.human[second])
    kept = human_sign != 0
    first, second, context, human_sign = first[kept], second[kept], context[kept], human_sign[kept]
    n_contexts, n_metrics = gold.n_contexts, x.shape[1]
    correct = np.empty((n_contexts, n_metrics), dtype=np.int64)
    ties = np.empty((n_contexts, n_metrics), dtype=np.int64)
    # One metric at a time over contiguous vectors: gathers from a column-major copy stay in cache.
    columns = np.asfortranarray(x)
    for m in range(n_metrics):
        column = columns[:, m]
        agreement = (column[first] - column[second]) * human_sign
        correct[:, m] = np.bincount(context, weights=agreement > tolerance, minlength=n_contexts)
        ties[:, m] = np.bincount(context, weights=np.abs(agreement) <= tolerance, minlength=n_contexts)
    pairs = np.bincount(context, minlength=n_contexts).astype(np.int64)
    return ContextCounts(names=tuple(names), correct=correct, ties=ties, pairs=pairs)


def predictive_power(
    counts: ContextCounts, ties_half: bool = False, contexts: np.ndarray | None = None
) -> dict[str, float]:
    """Predictive power per metric: ``sum correct / sum pairs`` over ``contexts`` (default all).

    ``ties_half`` gives the tie-aware variant ``(correct + ties / 2) / pairs``. Range [0, 1].
    """
    credit = counts.credit(ties_half)
    pairs = counts.pairs
    if contexts is not None:
        credit, pairs = credit[contexts], pairs[contexts]
    total = int(pairs.sum())
    if total == 0:
        raise ValueError("no pair with different human judgements among these contexts")
    values = credit.sum(axis=0) / total
    return {name: float(v) for name, v in zip(counts.names, values, strict=True)}


# --------------------------------------------------------------------------- correlations


def _segment_extremes(values: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-context min and max of an (n_responses, m) array; contexts are contiguous and non-empty."""
    return np.minimum.reduceat(values, starts, axis=0), np.maximum.reduceat(values, starts, axis=0)


def _pearson_from_sums(n, sx, sy, sxx, syy, sxy, floor_x, floor_y):
    """Pearson from moment sums; NaN where a variance is not clearly above round-off.

    ``vx = sxx - sx^2 / n`` cancels when the values sit far from the centre used for the sums
    (a resample's own mean is not the centre), leaving an error of about eps * sxx: a
    constant column then shows a tiny variance of either sign. Variances up to 64 eps * sxx,
    or up to ``floor`` (the residues ``n * (16 eps max|value|)^2`` of centring a constant by a
    float mean), count as zero.
    """
    eps = np.finfo(np.float64).eps
    vx = sxx - sx * sx / n
    vy = syy - sy * sy / n
    cov = sxy - sx * sy / n
    defined = (vx > np.maximum(64 * eps * sxx, floor_x)) & (vy > np.maximum(64 * eps * syy, floor_y))
    denominator = np.sqrt(np.where(defined, vx * vy, 1.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(defined, cov / denominator, np.nan)
    return np.clip(out, -1.0, 1.0)


def _within_ranks(gold: MetricGold, x: np.ndarray) -> np.ndarray:
    """Mid-ranks (1-based) of each column within each context, centred by (k_c + 1) / 2."""
    n, m = x.shape
    sizes = gold.context_sizes
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    out = np.empty_like(x)
    for j in range(m):
        order = np.lexsort((x[:, j], gold.context))
        values, context = x[order, j], gold.context[order]
        new_group = np.ones(n, dtype=bool)
        new_group[1:] = (values[1:] != values[:-1]) | (context[1:] != context[:-1])
        group_start = np.flatnonzero(new_group)
        group_size = np.diff(np.append(group_start, n))
        position = group_start - starts[context[group_start]]  # 0-based place in its context
        midrank = position + (group_size + 1) / 2.0
        ranks = np.repeat(midrank, group_size)
        out[order, j] = ranks - (sizes[context] + 1) / 2.0
    return out


def _within_correlations(gold: MetricGold, x: np.ndarray) -> dict[str, np.ndarray]:
    """Per-context Kendall tau-b, Spearman and Pearson of each metric with people: (n_contexts, m), NaN undefined.

    A context where the metric or the people give every response the same value has no
    defined correlation: NaN here, left out of the average.
    """
    n_contexts = gold.n_contexts
    sizes = gold.context_sizes
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    y = gold.human
    m = x.shape[1]
    lo, hi = _segment_extremes(x, starts)
    constant_x = lo == hi
    y_lo, y_hi = _segment_extremes(y[:, None], starts)
    constant = constant_x | (y_lo == y_hi)

    def per_context(values: np.ndarray) -> np.ndarray:
        return np.stack([np.bincount(gold.context, weights=values[:, j], minlength=n_contexts) for j in range(m)],
                        axis=1)

    def correlation(cx: np.ndarray, cy: np.ndarray) -> np.ndarray:
        sxy, sxx = per_context(cx * cy[:, None]), per_context(cx * cx)
        syy = np.bincount(gold.context, weights=cy * cy, minlength=n_contexts)[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            r = sxy / np.sqrt(sxx * syy)
        r = np.clip(r, -1.0, 1.0)
        r[constant] = np.nan
        return r

    mean_x = per_context(x) / sizes[:, None]
    mean_y = np.bincount(gold.context, weights=y, minlength=n_contexts) / sizes
    pearson = correlation(x - mean_x[gold.context], y - mean_y[gold.context])
    spearman = correlation(_within_ranks(gold, x), _within_ranks(gold, y[:, None])[:, 0])

    first, second, context = gold.pairs
    sy = np.sign(y[first] - y[second])
    ty = np.bincount(context, weights=sy != 0, minlength=n_contexts)
    kendall = np.empty((n_contexts, m))
    columns = np.asfortranarray(x)
    for j in range(m):
        column = columns[:, j]
        sx = np.sign(column[first] - column[second])
        s = np.bincount(context, weights=sx * sy, minlength=n_contexts)
        tx = np.bincount(context, weights=sx != 0, minlength=n_contexts)
        with np.errstate(invalid="ignore", divide="ignore"):
            kendall[:, j] = s / np.sqrt(tx * ty)
    kendall[constant] = np.nan
    return {"kendall_tau_b_within": kendall, "spearman_within": spearman, "pearson_within": pearson}


def per_context_values(
    gold: MetricGold, runs: Mapping[str, np.ndarray] | np.ndarray, *, tie_tolerance: float = 0.0
) -> tuple[ContextCounts, dict[str, np.ndarray]]:
    """What is stored per context for each metric: its predictive-power counts and its
    within-context Kendall tau-b, Spearman and Pearson (``(n_contexts, m)``, NaN where undefined),
    the values :func:`evaluate_metrics` averages."""
    names, x = score_matrix(gold, runs)
    counts = context_counts(gold, dict(zip(names, x.T, strict=True)), tie_tolerance=tie_tolerance)
    return counts, _within_correlations(gold, x)


def _rank_rows(values: np.ndarray) -> np.ndarray:
    """Mid-ranks along the last axis."""
    from scipy.stats import rankdata

    return rankdata(values, axis=-1)


def _pearson_rows(a: np.ndarray, b: np.ndarray, tolerance_a: np.ndarray | float = 0.0,
                  tolerance_b: np.ndarray | float = 0.0) -> np.ndarray:
    """Pearson along the last axis of two broadcastable arrays.

    NaN where one side is constant, i.e. its spread (max - min) is within its tolerance (of
    the shape of the other axes; 0 for exact data, a round-off bound for computed means).
    """
    ca = a - a.mean(axis=-1, keepdims=True)
    cb = b - b.mean(axis=-1, keepdims=True)
    denominator = np.sqrt((ca * ca).sum(axis=-1) * (cb * cb).sum(axis=-1))
    numerator = (ca * cb).sum(axis=-1)
    constant = (np.ptp(a, axis=-1) <= tolerance_a) | (np.ptp(b, axis=-1) <= tolerance_b)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.clip(numerator / denominator, -1.0, 1.0)
    out[np.broadcast_to(constant, out.shape)] = np.nan
    return out


def _tolerant_signs(values: np.ndarray, tolerance: np.ndarray) -> np.ndarray:
    """``sign(values[..., i] - values[..., j])`` for all i < j as float32, 0 within ``tolerance``.

    ``tolerance`` has shape ``values.shape[:-1]``. float32 holds -1, 0, 1 and their sums over
    fewer than 2^24 pairs exactly.
    """
    i, j = np.triu_indices(values.shape[-1], 1)
    difference = values[..., i] - values[..., j]
    tol = tolerance[..., None]
    return (difference > tol).astype(np.float32) - (difference < -tol).astype(np.float32)


def _tau_b_against(metric: np.ndarray, human: np.ndarray, tolerance_metric: np.ndarray,
                   tolerance_human: np.ndarray) -> np.ndarray:
    """Kendall tau-b of each metric's system means against the people's: (B, m, S), (B, S) -> (B, m).

    The sum of ``scoring.stats._tau_b_rows`` (scipy's tau-b), over all metrics at once, with
    differences within the tolerances counted as ties; NaN where one side is all tied.
    """
    n_rows, m, k = metric.shape
    out = np.empty((n_rows, m))
    # Blocks of rows keep the (rows, metrics, system pairs) sign array near 2^22 cells.
    step = max(1, _CELLS_PER_CHUNK // max(1, m * k * (k - 1) // 2))
    for lo in range(0, n_rows, step):
        rows = slice(lo, lo + step)
        sign_metric = _tolerant_signs(metric[rows], tolerance_metric[rows])  # (r, m, P)
        sign_human = _tolerant_signs(human[rows], tolerance_human[rows])  # (r, P), once for all metrics
        with _one_blas_thread():
            numerator = np.matmul(sign_metric, sign_human[:, :, None])[..., 0].astype(np.float64)
        ties_metric = np.square(sign_metric).sum(axis=-1, dtype=np.float64)
        ties_human = np.square(sign_human).sum(axis=-1, dtype=np.float64)[:, None]
        denominator = np.sqrt(ties_metric * ties_human)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[rows] = np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1.0), np.nan)
    return out


def _tolerant_ranks(values: np.ndarray, tolerance: np.ndarray) -> np.ndarray:
    """Mid-ranks (1-based) along the last axis; neighbours in sorted order within ``tolerance`` tie.

    Sorting keeps it O(S log S) per row. (A run of values each within tolerance of the next is
    one tie group; with tolerances of round-off size that only joins values equal in exact
    arithmetic.)
    """
    k = values.shape[-1]
    order = np.argsort(values, axis=-1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=-1)
    position = np.broadcast_to(np.arange(k), ordered.shape)
    starts = np.ones(ordered.shape, dtype=bool)
    starts[..., 1:] = np.diff(ordered, axis=-1) > tolerance[..., None]
    ends = np.ones(ordered.shape, dtype=bool)
    ends[..., :-1] = starts[..., 1:]
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=-1)
    last = np.flip(np.minimum.accumulate(np.flip(np.where(ends, position, k - 1), axis=-1), axis=-1), axis=-1)
    out = np.empty(values.shape)
    np.put_along_axis(out, order, (first + last) / 2.0 + 1.0, axis=-1)
    return out


def _mean_tolerance(means: np.ndarray, n_terms: int) -> np.ndarray:
    """Round-off bound for means of ``n_terms`` values: differences below it count as ties.

    System means are sums of many scores in an order that depends on the resample, so two
    means that are equal in exact arithmetic (e.g. scores on a 0.1 grid) can come out an ulp
    apart; without a tolerance that would turn a tie into an order at random. A naive n-term
    mean is off by at most ``n * eps * max|x|``; 16 times that covers both operands (as
    ``scoring.stats._tie_tolerance``).
    """
    scale = np.abs(means).max(axis=-1)
    return 16.0 * n_terms * np.finfo(np.float64).eps * np.maximum(scale, np.finfo(np.float64).tiny)


def _system_correlations(metric_means: np.ndarray, human_means: np.ndarray, n_terms: int) -> dict[str, np.ndarray]:
    """Kendall tau-b, Spearman and Pearson between system means: (B, m, S) against (B, S) -> (B, m)."""
    human = human_means[:, None, :]
    tolerance_metric = _mean_tolerance(metric_means, n_terms)
    tolerance_human = _mean_tolerance(human_means, n_terms)
    return {
        "system_kendall_tau_b": _tau_b_against(metric_means, human_means, tolerance_metric, tolerance_human),
        "system_spearman": _pearson_rows(_tolerant_ranks(metric_means, tolerance_metric),
                                         _tolerant_ranks(human_means, tolerance_human)[:, None, :]),
        "system_pearson": _pearson_rows(metric_means, human, tolerance_metric, tolerance_human[:, None]),
    }


def _disattenuated_pearson(t: Mapping[str, np.ndarray], w: np.ndarray, cells: Mapping[str, np.ndarray],
                           m: int, k: int) -> np.ndarray:
    """Pearson of system means with their context-sampling noise taken out: (B, m).

    A system's mean is a ratio of context sums (``H_s / N_s``), so contexts drawn again move it
    by about ``a[c, s] = (h[c, s] - mean_s n[c, s]) / N_s`` per context (the ratio's linearisation;
    ``h``, ``n``: a context's sum of scores and count of responses of system s). Over systems,
    the sample covariance of the means then exceeds that of the true means by the noise term
    ``W / (W - 1) * sum_c w_c sum_s (a - abar_c)(b - bbar_c) / (k - 1)`` (centred over systems
    within a context, so what a context does to every system alike, its difficulty, is not
    noise); the same holds for both variances. The correlation of the corrected covariance and
    variances is Spearman's (1904) correction for attenuation with the noise estimated from the
    contexts. With one response per system and context it is the two-way analysis of variance's
    residual (co)variance over the number of contexts. NaN where a corrected variance is not
    positive; clipped to [-1, 1]. ``t``: totals of ``cells``' columns under the weights ``w``
    (resamples x contexts); ``cells``: the per-context cell sums of centred scores."""
    eps = np.finfo(np.float64).eps
    count = t["system_count"]
    total = w.sum(axis=1)
    factor = total / (total - 1.0)
    human = t["system_hc"] / count
    alpha, beta = 1.0 / count, human / count
    with _one_blas_thread():
        spread_human = alpha @ cells["system_hc"].T - beta @ cells["system_count"].T  # (B, C): sum_s a[c, s]
    centred_human = human - human.mean(axis=1, keepdims=True)
    diag_hh = ((t["system_hh"] - 2 * human * t["system_hn"] + human * human * t["system_nn"]) * alpha * alpha).sum(1)
    noise_hh = factor * (diag_hh - (w * spread_human * spread_human).sum(axis=1) / k) / (k - 1)
    s_hh = (centred_human * centred_human).sum(axis=1) / (k - 1)
    var_human = s_hh - noise_hh
    out = np.empty((w.shape[0], m))
    for j in range(m):
        cols = slice(j * k, (j + 1) * k)
        metric = t["system_mc"][:, cols] / count
        gamma = metric / count
        with _one_blas_thread():
            spread_metric = alpha @ cells["system_mc"][:, cols].T - gamma @ cells["system_count"].T
        mm, hm, mn = t["system_mm"][:, cols], t["system_hm"][:, cols], t["system_mn"][:, cols]
        diag_mm = ((mm - 2 * metric * mn + metric * metric * t["system_nn"]) * alpha * alpha).sum(axis=1)
        diag_hm = ((hm - metric * t["system_hn"] - human * mn + human * metric * t["system_nn"])
                   * alpha * alpha).sum(axis=1)
        noise_mm = factor * (diag_mm - (w * spread_metric * spread_metric).sum(axis=1) / k) / (k - 1)
        noise_hm = factor * (diag_hm - (w * spread_human * spread_metric).sum(axis=1) / k) / (k - 1)
        centred_metric = metric - metric.mean(axis=1, keepdims=True)
        s_mm = (centred_metric * centred_metric).sum(axis=1) / (k - 1)
        var_metric = s_mm - noise_mm
        covariance = (centred_human * centred_metric).sum(axis=1) / (k - 1) - noise_hm
        defined = (var_human > 64 * eps * s_hh) & (var_metric > 64 * eps * s_mm)
        with np.errstate(invalid="ignore", divide="ignore"):
            value = covariance / np.sqrt(np.where(defined, var_human * var_metric, 1.0))
        out[:, j] = np.where(defined, np.clip(value, -1.0, 1.0), np.nan)
    return out


def _pooled_rank_correlations(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Kendall tau-b and Spearman of two vectors, NaN when one is constant."""
    from scipy.stats import kendalltau

    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan
    tau = float(kendalltau(x, y).statistic)
    rho = float(_pearson_rows(_rank_rows(x)[None, :], _rank_rows(y)[None, :])[0])
    return tau, rho


# --------------------------------------------------------------------------- pooled ranks on resamples
#
# A context resample repeats each drawn context's responses as often as it was drawn, so it is
# the responses with integer weights w_i = counts[context of i]. Kendall tau-b and Spearman of
# the repeated sample are then exact functions of the weights (copies of a response tie with
# each other on both sides):
#
#   W = sum w;  n0 = W(W - 1)/2;  n1, n2, n3 = sum over groups tied in x, in y, in both of
#   W_g(W_g - 1)/2;  D = sum of w_i w_j over pairs with x_i < x_j and y_i > y_j;
#   tau_b = (n0 - n1 - n2 + n3 - 2 D) / sqrt((n0 - n1)(n0 - n2))       (Knight 1966, weighted)
#   mid-rank of an x group = (weight before it) + (W_g + 1)/2; Spearman = weighted Pearson of
#   the mid-ranks around (W + 1)/2.
#
# D is counted with a Fenwick tree over the y ranks, x groups in ascending order: O(N log N) per
# resample with integer sums (exact), against the O(N log N) re-ranking of a rebuilt sample with
# its allocations. Numba when importable (a dependency), else the rebuilt samples.

_rank_kernel_cache = None


def _pooled_rank_kernel_body(counts, context, x_group, y_rank, xy_group, n_x, n_y, n_xy, out_tau, out_rho):
    n = context.shape[0]
    for b in _numba.prange(counts.shape[0]):
        w = np.empty(n, np.int64)
        wx = np.zeros(n_x, np.int64)
        wy = np.zeros(n_y, np.int64)
        wxy = np.zeros(n_xy, np.int64)
        total = 0
        for i in range(n):
            weight = counts[b, context[i]]
            w[i] = weight
            total += weight
            wx[x_group[i]] += weight
            wy[y_rank[i]] += weight
            wxy[xy_group[i]] += weight
        n0 = total * (total - 1) // 2
        n1 = 0
        for g in range(n_x):
            n1 += wx[g] * (wx[g] - 1) // 2
        n2 = 0
        for g in range(n_y):
            n2 += wy[g] * (wy[g] - 1) // 2
        n3 = 0
        for g in range(n_xy):
            n3 += wxy[g] * (wxy[g] - 1) // 2
        tree = np.zeros(n_y + 1, np.int64)
        processed = 0
        discordant = 0
        i = 0
        while i < n:
            j = i
            while j < n and x_group[j] == x_group[i]:
                if w[j] > 0:
                    k = y_rank[j] + 1
                    at_most = 0
                    while k > 0:
                        at_most += tree[k]
                        k -= k & -k
                    discordant += w[j] * (processed - at_most)
                j += 1
            for t in range(i, j):
                if w[t] > 0:
                    k = y_rank[t] + 1
                    while k <= n_y:
                        tree[k] += w[t]
                        k += k & -k
                    processed += w[t]
            i = j
        if n0 - n1 > 0 and n0 - n2 > 0:
            out_tau[b] = (n0 - n1 - n2 + n3 - 2 * discordant) / np.sqrt(float(n0 - n1) * float(n0 - n2))
        else:
            out_tau[b] = np.nan
        middle = (total + 1) / 2.0
        rank_x = np.empty(n_x)
        before = 0
        sxx = 0.0
        for g in range(n_x):
            rank_x[g] = before + (wx[g] + 1) / 2.0 - middle
            before += wx[g]
            sxx += wx[g] * rank_x[g] * rank_x[g]
        rank_y = np.empty(n_y)
        before = 0
        syy = 0.0
        for g in range(n_y):
            rank_y[g] = before + (wy[g] + 1) / 2.0 - middle
            before += wy[g]
            syy += wy[g] * rank_y[g] * rank_y[g]
        sxy = 0.0
        for t in range(n):
            sxy += w[t] * rank_x[x_group[t]] * rank_y[y_rank[t]]
        # Mid-ranks are multiples of 1/2, so a constant side gives exactly 0.
        out_rho[b] = sxy / np.sqrt(sxx * syy) if sxx > 0.0 and syy > 0.0 else np.nan


_numba = None


def _pooled_rank_kernel():
    """The jitted kernel, or None without Numba (compiled on first use, cached on disk when possible)."""
    global _rank_kernel_cache, _numba
    if _rank_kernel_cache is None:
        try:
            import numba
        except ImportError:
            return None
        _numba = numba
        try:
            _rank_kernel_cache = numba.njit(parallel=True, cache=True)(_pooled_rank_kernel_body)
        except RuntimeError:  # no writable cache directory
            _rank_kernel_cache = numba.njit(parallel=True, cache=False)(_pooled_rank_kernel_body)
    return _rank_kernel_cache


@dataclass(frozen=True)
class _RankLayout:
    """One metric's responses sorted by (metric, human) with their group codes, for the kernel."""

    context: np.ndarray
    x_group: np.ndarray
    y_rank: np.ndarray
    xy_group: np.ndarray

    @classmethod
    def of(cls, x: np.ndarray, y: np.ndarray, context: np.ndarray) -> _RankLayout:
        order = np.lexsort((y, x))
        xs, ys = x[order], y[order]
        new_x = np.concatenate(([False], xs[1:] != xs[:-1]))
        new_xy = new_x | np.concatenate(([False], ys[1:] != ys[:-1]))
        return cls(context=np.ascontiguousarray(context[order], dtype=np.int64),
                   x_group=np.cumsum(new_x, dtype=np.int64),
                   y_rank=np.unique(ys, return_inverse=True)[1].astype(np.int64),
                   xy_group=np.cumsum(new_xy, dtype=np.int64))


def pooled_rank_replicates(
    gold: MetricGold, scores: np.ndarray, counts: np.ndarray, layout: _RankLayout | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Pooled Kendall tau-b and Spearman of one metric on context resamples (``counts``: resamples
    x contexts, as :func:`scoring.stats.resample_counts` yields them): two arrays, NaN where the
    resampled metric or judgements are constant. Exact (see the comment above)."""
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    tau = np.empty(counts.shape[0])
    rho = np.empty(counts.shape[0])
    kernel = _pooled_rank_kernel()
    if kernel is None:
        for r in range(counts.shape[0]):
            rows = np.repeat(np.arange(gold.n_responses), counts[r][gold.context])
            tau[r], rho[r] = _pooled_rank_correlations(scores[rows], gold.human[rows])
        return tau, rho
    layout = layout or _RankLayout.of(scores, gold.human, gold.context)
    # Parallel kernels may not be launched from two threads at once (the DQ/ND kernel's lock).
    with stats._NUMBA_LOCK:
        kernel(counts, layout.context, layout.x_group, layout.y_rank, layout.xy_group,
               int(layout.x_group[-1]) + 1, int(layout.y_rank.max()) + 1, int(layout.xy_group[-1]) + 1, tau, rho)
    return tau, rho


def _interval(replicates: np.ndarray, level: float) -> tuple[list[float] | None, int]:
    defined = replicates[~np.isnan(replicates)]
    if not defined.size:
        return None, int(replicates.size)
    lower, upper = np.quantile(defined, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return [float(lower), float(upper)], int(replicates.size - defined.size)


def _json_number(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


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
    resample costs O(N log N) per metric (:func:`pooled_rank_replicates`, about 0.4 ms per
    resample at 20,000 responses), so their intervals are computed only for the first
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
    layouts = [_RankLayout.of(x[:, j], y, gold.context) if _pooled_rank_kernel() else None for j in range(m)]
    if _pooled_rank_kernel() is not None:
        # The point estimates are the kernel's replicate with every context once: the same exact
        # formulas as the resamples, and no import of scipy.stats (1.5 s, half of a metric
        # `score` command: issue 28) for scipy's kendalltau and rankdata.
        once = np.ones((1, n_contexts), dtype=np.int64)
        pooled = [tuple(float(value[0]) for value in pooled_rank_replicates(gold, x[:, j], once, layouts[j]))
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
            tau, rho = pooled_rank_replicates(gold, x[:, j], weights[:ranked], layouts[j])
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


# --------------------------------------------------------------------------- between metrics


@dataclass(frozen=True, eq=False)
class PairedBootstrapResult:
    """Paired bootstrap test of predictive power for every pair of metrics (contexts resampled).

    ``differences[a, b] = pp[a] - pp[b]``; ``pvalues[a, b]`` two-sided, symmetric, 1 on the
    diagonal; ``lower``/``upper``: percentile interval of the difference.
    """

    names: tuple[str, ...]
    predictive_power: np.ndarray
    differences: np.ndarray
    pvalues: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float
    ties_half: bool
    n_resamples: int
    n_undefined: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: settings and one entry per pair (a before b in input order)."""
        pairs = []
        for a, b in itertools.combinations(range(len(self.names)), 2):
            pairs.append({"a": self.names[a], "b": self.names[b], "difference": float(self.differences[a, b]),
                          "p": float(self.pvalues[a, b]), "low": float(self.lower[a, b]),
                          "high": float(self.upper[a, b])})
        for pair, adjusted in zip(pairs, stats.holm([pair["p"] for pair in pairs]), strict=True):
            pair["p_holm"] = adjusted
        return {"test": "paired bootstrap over contexts (shift method)", "n_resamples": self.n_resamples,
                "n_undefined": self.n_undefined, "seed": self.seed, "level": self.level,
                "ties_half": self.ties_half, "pairs": pairs,
                "adjustment": f"p unadjusted; p_holm adjusted by Holm's method over the {len(pairs)} pairs"}

    def against(self, baseline: str) -> dict[str, Any]:
        """The family of Liu, Zhou and Wilson (ACM TOIS 2021): every other metric against ``baseline``
        (M - 1 comparisons), the same tests as :meth:`to_dict` with Holm's adjustment over this family."""
        base = self.names.index(baseline)
        pairs = [{"a": self.names[a], "b": baseline, "difference": float(self.differences[a, base]),
                  "p": float(self.pvalues[a, base]), "low": float(self.lower[a, base]),
                  "high": float(self.upper[a, base])} for a in range(len(self.names)) if a != base]
        for pair, adjusted in zip(pairs, stats.holm([pair["p"] for pair in pairs]), strict=True):
            pair["p_holm"] = adjusted
        return {"test": "paired bootstrap over contexts (shift method)", "baseline": baseline,
                "n_resamples": self.n_resamples, "n_undefined": self.n_undefined, "seed": self.seed,
                "level": self.level, "ties_half": self.ties_half, "pairs": pairs,
                "adjustment": f"p unadjusted; p_holm adjusted by Holm's method over the {len(pairs)} comparisons "
                              "with the baseline"}


def paired_bootstrap(
    counts: ContextCounts,
    n_resamples: int = 10_000,
    seed: int = 0,
    *,
    ties_half: bool = False,
    level: float = 0.95,
) -> PairedBootstrapResult:
    """Paired bootstrap test of the difference in predictive power between every two metrics.

    Resample b draws the contexts with replacement (counts ``w_b`` from
    :func:`scoring.stats.resample_counts`, one matrix shared by every metric) and
    recomputes ``pp*_b[m] = w_b . credit[:, m] / w_b . pairs``. With ``d = pp[a] - pp[b]``
    and ``d*_b`` its replicate, the two-sided p-value is the shift-method ASL (Efron and
    Tibshirani 1993, section 16.4; Sakai, SIGIR 2006)::

        p = (#{b : |d*_b - d| >= |d|} + 1) / (B + 1)

    so identical metrics get p = 1 and p is never 0. Resamples where no drawn context has a
    pair with different human judgements are undefined for every metric alike, left out and
    counted. The interval is the percentile interval of ``d*``.
    """
    n_resamples = _check_positive(n_resamples, "n_resamples")
    stats._check_seed(seed)
    stats._check_level(level)
    names = counts.names
    m = len(names)
    if m < 2:
        raise ValueError("the paired bootstrap needs at least 2 metrics")
    credit = counts.credit(ties_half)
    pairs = counts.pairs.astype(np.float64)
    if pairs.sum() == 0:
        raise ValueError("no pair with different human judgements")
    observed = credit.sum(axis=0) / pairs.sum()
    table = np.concatenate([credit, pairs[:, None]], axis=1)
    boot = np.empty((n_resamples, m))
    for first, weights in stats.resample_counts(counts.pairs.size, n_resamples, seed):
        with _one_blas_thread():
            totals = weights.astype(np.float64) @ table
        with np.errstate(invalid="ignore", divide="ignore"):
            boot[first : first + weights.shape[0]] = totals[:, :m] / totals[:, m:]
    defined = ~np.isnan(boot[:, 0])
    boot = boot[defined]
    n_defined = boot.shape[0]
    if not n_defined:
        raise ValueError("every resample was undefined (no pair with different human judgements drawn)")

    pvalues = np.ones((m, m))
    lower = np.zeros((m, m))
    upper = np.zeros((m, m))
    a_index, b_index = np.triu_indices(m, 1)
    step = max(1, _CELLS_PER_CHUNK // n_defined)
    for lo in range(0, a_index.size, step):
        a, b = a_index[lo : lo + step], b_index[lo : lo + step]
        d = observed[a] - observed[b]
        d_star = boot[:, a] - boot[:, b]
        extreme = (np.abs(d_star - d) >= np.abs(d) - _TIE_TOLERANCE).sum(axis=0)
        p = (extreme + 1) / (n_defined + 1)
        q_lo, q_hi = np.quantile(d_star, [(1.0 - level) / 2.0, (1.0 + level) / 2.0], axis=0)
        pvalues[a, b] = pvalues[b, a] = p
        lower[a, b], upper[a, b] = q_lo, q_hi
        lower[b, a], upper[b, a] = -q_hi, -q_lo
    return PairedBootstrapResult(
        names=names, predictive_power=observed, differences=observed[:, None] - observed[None, :],
        pvalues=pvalues, lower=lower, upper=upper, level=level, ties_half=ties_half,
        n_resamples=n_resamples, n_undefined=int(n_resamples - n_defined), seed=int(seed),
    )


def paired_t_tests(
    counts: ContextCounts,
    baseline: str | None = None,
    *,
    ties_half: bool = False,
) -> dict[str, Any]:
    """Two-tailed paired t-tests of predictive power over contexts, Bonferroni-corrected.

    Seed 003 (Table 8) compares each metric with the random baseline by a two-tailed t-test
    with Bonferroni correction over the metrics compared. Here the paired observations are the
    contexts with at least one pair with different human judgements, and the difference in
    context c is ``credit_a[c] - credit_b[c]`` (correct pairs, plus half the ties when
    ``ties_half``): both metrics share the context's pairs, so a zero mean difference is
    exactly equal predictive power. t = mean / (sd / sqrt(n)), n - 1 degrees of freedom.

    With ``baseline`` the family is every other metric against it (Bonferroni factor M - 1,
    as in the seed); without, every pair of metrics (factor M(M - 1)/2).
    ``p_bonferroni = min(1, factor * p)``. All differences zero: t = 0, p = 1; constant
    non-zero differences: t infinite (reported as None), p = 0.
    """
    from scipy.stats import t as student_t

    names = counts.names
    if len(names) < 2:
        raise ValueError("t-tests need at least 2 metrics")
    if baseline is not None and baseline not in names:
        raise ValueError(f"unknown baseline {baseline!r} (metrics: {', '.join(names)})")
    credit = counts.credit(ties_half)[counts.pairs > 0]
    n = credit.shape[0]
    if n < 2:
        raise ValueError("the t-test needs at least 2 contexts with a pair of different human judgements")
    if baseline is None:
        comparisons = list(itertools.combinations(range(len(names)), 2))
    else:
        base = names.index(baseline)
        comparisons = [(a, base) for a in range(len(names)) if a != base]
    factor = len(comparisons)
    total_pairs = float(counts.pairs.sum())
    tests = []
    for a, b in comparisons:
        d = credit[:, a] - credit[:, b]
        mean, sd = float(d.mean()), float(d.std(ddof=1))
        if sd == 0.0:
            t_value, p = (0.0, 1.0) if mean == 0.0 else (None, 0.0)
        else:
            t_value = mean / (sd / math.sqrt(n))
            p = float(2.0 * student_t.sf(abs(t_value), n - 1))
        difference = float((credit[:, a].sum() - credit[:, b].sum()) / total_pairs)
        tests.append({"a": names[a], "b": names[b], "difference": difference,
                      "t": t_value, "df": n - 1, "p": p, "p_bonferroni": min(1.0, factor * p)})
    for test, adjusted in zip(tests, stats.holm([test["p"] for test in tests]), strict=True):
        test["p_holm"] = adjusted
    return {"test": "two-tailed paired t-test over contexts, Bonferroni", "baseline": baseline,
            "ties_half": ties_half, "n_contexts": n, "bonferroni_factor": factor, "tests": tests,
            "adjustment": f"p unadjusted; p_bonferroni and p_holm adjusted over the {factor} "
                          f"{'comparisons with the baseline' if baseline else 'pairs'}"}


@dataclass(frozen=True, eq=False)
class ConcordanceResult:
    """Concordance of every ordered pair of metrics with a gold-standard property metric M*.

    ``disagreements[a, b]`` (symmetric): pairs where a and b order the responses oppositely;
    ``concordant[a, b]`` = Conc_a: of those, pairs where a agrees with M*;
    ``concordance[a, b] = concordant[a, b] / disagreements[a, b]`` (NaN when no disagreement;
    the diagonal is NaN: a metric never disagrees with itself).
    """

    names: tuple[str, ...]
    disagreements: np.ndarray
    concordant: np.ndarray
    concordance: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        return {"names": list(self.names), "disagreements": self.disagreements.tolist(),
                "concordant": self.concordant.tolist(),
                "concordance": [[_json_number(v) for v in row] for row in self.concordance.tolist()]}


def concordance_matrix(
    gold: MetricGold, runs: Mapping[str, np.ndarray], property_scores: np.ndarray | None = None
) -> ConcordanceResult:
    """Concordance test of seed 003 Algorithm 4 for every pair of metrics, against M*.

    Over every pair of responses to the same context (for a gold of systems answering topics,
    every pair of runs on every topic, as in the algorithm; a context missing a system just
    has fewer pairs): metrics a and b disagree when ``dA * dB < 0``; a is concordant when
    also ``dA * dM* >= 0``. ``property_scores`` defaults to the gold's ``property_metric``.
    Vectorised as sign-indicator matrix products, so all pairs of metrics cost one pass.
    """
    names, x = score_matrix(gold, runs)
    star = gold.property_metric if property_scores is None else np.asarray(property_scores, dtype=np.float64)
    if star is None:
        raise ValueError("the gold has no property metric (M*) and none was given")
    if star.shape != (gold.n_responses,) or not np.isfinite(star).all():
        raise ValueError(f"property scores must be {gold.n_responses} finite numbers")
    first, second, _ = gold.pairs
    m = x.shape[1]
    disagreements = np.zeros((m, m), dtype=np.int64)
    concordant = np.zeros((m, m), dtype=np.int64)
    # float32 products of 0/1 indicators are exact while a chunk has fewer than 2^24 rows,
    # and several times faster than float64 here; totals are accumulated as integers.
    step = min(1 << 24, max(1, _CELLS_PER_CHUNK // m))
    for lo in range(0, first.size, step):
        f, s = first[lo : lo + step], second[lo : lo + step]
        difference = x[f] - x[s]
        star_difference = (star[f] - star[s])[:, None]
        up, down = difference > 0, difference < 0
        # a agrees with M* (dA * dM* >= 0): M* tied, or the same direction.
        up_ok = (up & (star_difference >= 0)).astype(np.float32)
        down_ok = (down & (star_difference <= 0)).astype(np.float32)
        up, down = up.astype(np.float32), down.astype(np.float32)
        del difference
        with _one_blas_thread():
            disagreements += np.rint(up.T @ down + down.T @ up).astype(np.int64)
            concordant += np.rint(up_ok.T @ down + down_ok.T @ up).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        concordance = np.where(disagreements > 0, concordant / np.where(disagreements > 0, disagreements, 1), np.nan)
    return ConcordanceResult(names=tuple(names), disagreements=disagreements, concordant=concordant,
                             concordance=concordance)


def system_matrix(gold: MetricGold, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Topic-by-system matrix of one metric over the contexts that every system answered.

    Returns ``(matrix (n_complete, S), complete context indices)``. Contexts lacking a system
    are left out (a randomised Tukey HSD permutes whole rows, so a row needs every system).
    """
    if not gold.has_systems:
        raise ValueError("the gold names no systems")
    k = len(gold.system_names)
    cell = gold.context * k + gold.system
    count = np.bincount(cell, minlength=gold.n_contexts * k).reshape(gold.n_contexts, k)
    complete = np.flatnonzero((count == 1).all(axis=1))
    full = np.zeros(gold.n_contexts * k)
    full[cell] = scores
    return full.reshape(gold.n_contexts, k)[complete], complete


def discriminative_power_figures(
    gold: MetricGold,
    runs: Mapping[str, np.ndarray],
    n_permutations: int = 1_000,
    seed: int = 0,
    alphas: Sequence[float] = stats.REPORTED_LEVELS,
    *,
    backend: stats.Backend = "auto",
) -> dict[str, Any]:
    """Discriminative power, delta required and ASL curve of each metric over the gold's systems.

    Each metric's topic(context)-by-system matrix (complete contexts only, see
    :func:`system_matrix`) goes through :func:`scoring.stats.randomised_tukey_hsd`, the code
    of the DQ/ND boards, all metrics sharing the permutations (seed 003 Algorithm 1; B = 1,000
    by default as in seed 003 footnote 4). Then, per metric and alpha,
    :func:`scoring.stats.discriminative_power` and :func:`scoring.stats.delta_required`
    (Algorithm 2); ``asl_curve`` is the p-values of all system pairs sorted ascending (seed
    003 Figure 5 plots these against the pair's rank).
    """
    names, x = score_matrix(gold, runs)
    k = len(gold.system_names)
    if k < 2:
        raise ValueError("discriminative power needs a gold naming at least 2 systems")
    matrices = {}
    complete = np.empty(0, dtype=np.int64)
    for j, name in enumerate(names):
        matrices[name], complete = system_matrix(gold, x[:, j])
    if complete.size < 2:
        raise ValueError(f"discriminative power needs at least 2 contexts answered by all {k} systems; "
                         f"the gold has {complete.size}")
    results = stats.randomised_tukey_hsd(matrices, n_permutations=n_permutations, seed=seed, backend=backend)
    out: dict[str, Any] = {}
    for name in names:
        result = results[name]
        entry: dict[str, Any] = {"n_system_pairs": k * (k - 1) // 2}
        for alpha in alphas:
            suffix = stats.alpha_suffix(alpha)
            entry[f"discriminative_power_{suffix}"] = stats.discriminative_power(result.pvalues, alpha)
            entry[f"delta_required_{suffix}"] = stats.delta_required(result.differences, result.pvalues, alpha)
        entry["asl_curve"] = np.sort(result.pvalues[np.triu_indices(k, 1)]).tolist()
        entry["means"] = dict(zip(gold.system_names, result.means.tolist(), strict=True))
        out[name] = entry
    return {"n_permutations": n_permutations, "seed": int(seed), "alphas": [float(a) for a in alphas],
            "systems": list(gold.system_names), "n_contexts_used": int(complete.size),
            "n_contexts": gold.n_contexts, "metrics": out}
