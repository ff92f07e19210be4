"""Correlations of a metric with people: within each context (Kendall tau-b, Spearman, Pearson and
the values stored per context), of system means (with tolerances for round-off, on many resamples
at once), the disattenuated Pearson of system means, and the pooled rank correlations of one
sample."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from scoring.kinds.metric.formats import MetricGold
from scoring.kinds.metric.meta.inputs import _CELLS_PER_CHUNK, _one_blas_thread, score_matrix
from scoring.kinds.metric.meta.predictive import ContextCounts, context_counts


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
