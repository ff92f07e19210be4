"""Pooled Kendall tau-b and Spearman of one metric on context resamples, exact and without rebuilding
the resampled data: a Numba kernel over integer weights (and the rebuilt samples without Numba).

This module is the one home of the lazily imported numba module (``_numba``) and of the compiled
kernel (``_rank_kernel_cache``); a test that turns the kernel off patches ``_pooled_rank_kernel``
here, where :func:`pooled_rank_replicates` and :func:`~scoring.kinds.metric.meta.evaluation.evaluate_metrics`
read it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scoring import stats
from scoring.kinds.metric.formats import MetricGold
from scoring.kinds.metric.meta.correlations import _pooled_rank_correlations

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
