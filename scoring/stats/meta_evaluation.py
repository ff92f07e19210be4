"""Meta-evaluation of measures from their Tukey HSD results: discriminative power, ASL curves,
delta required, Holm's adjustment, and Kendall's tau-b between measures' run rankings with a
dialogue-bootstrap interval."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from scoring.stats.bootstrap import _bootstrap_means
from scoring.stats.corpus import CorpusMeasure, corpus_bootstrap_replicates
from scoring.stats.kernels import _NUMBA_LOCK, _tau_b_numba
from scoring.stats.results import REPORTED_LEVELS, SIGNIFICANCE_LEVEL, KendallTauResult, TukeyHSDResult
from scoring.stats.validation import (
    _check_alpha,
    _check_count,
    _check_level,
    _check_matrices,
    _check_matrix,
    _check_seed,
)


def _upper_triangle(pvalues: np.ndarray, name: str = "pvalues") -> np.ndarray:
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != p.shape[1] or p.shape[0] < 2:
        raise ValueError(f"{name} must be a square (k, k) matrix with k >= 2; got shape {p.shape}")
    upper = p[np.triu_indices(p.shape[0], 1)]
    if not np.all((upper >= 0.0) & (upper <= 1.0)):
        raise ValueError(f"{name} must lie in [0, 1] (NaN is not allowed)")
    return upper


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (Holm, "A simple sequentially rejective
    multiple test procedure", Scand. J. Statist. 6(2), 1979), in the input order: with the m
    p-values sorted ascending, ``p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``. Controls the
    family-wise error rate like Bonferroni and rejects at least as much."""
    values = [float(p) for p in pvalues]
    if any(not 0.0 <= p <= 1.0 for p in values):
        raise ValueError("p-values must lie in [0, 1] (NaN is not allowed)")
    m = len(values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: values[i])):
        running = max(running, min(1.0, (m - rank) * values[index]))
        adjusted[index] = running
    return adjusted


def discriminative_power(pvalues: np.ndarray, alpha: float = SIGNIFICANCE_LEVEL) -> float:
    """Share of run pairs (i < j) with ``p_ij < alpha`` (Sakai, SIGIR 2006; seed 003 section 4.1).

    Range [0, 1]; reads the upper triangle of the (k, k) p-value matrix.
    """
    _check_alpha(alpha)
    upper = _upper_triangle(pvalues)
    return float(np.count_nonzero(upper < alpha) / upper.size)


def asl_curve(pvalues: np.ndarray) -> np.ndarray:
    """The achieved significance levels of every run pair (i < j), smallest first: the ASL curve
    of a measure (Sakai, SIGIR 2006; seed 003 Figure 5: y the ASL, x the run pairs sorted by it).
    A curve closer to the origin belongs to a more discriminative measure."""
    return np.sort(_upper_triangle(pvalues))


def mean_ranks(matrix: np.ndarray, lower_is_better: bool = True) -> np.ndarray:
    """Each run's mean rank over the items: on every item (row) the runs are ranked 1 (best, in
    the measure's direction) to k, tied runs sharing the mean of the ranks they span (as
    ``scipy.stats.rankdata`` averages them), and each run's ranks averaged over the rows.
    Ties are exact equality, as the means' order on the board."""
    values = np.asarray(matrix, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] == 0 or values.shape[1] == 0:
        raise ValueError(f"matrix must be 2-dimensional (items x runs) and non-empty; got shape {values.shape}")
    if np.isnan(values).any():
        raise ValueError("matrix has missing scores (NaN): ranks need every run's score on every item")
    oriented = values if lower_is_better else -values
    n, k = oriented.shape
    order = np.argsort(oriented, axis=1, kind="stable")
    ordered = np.take_along_axis(oriented, order, axis=1)
    # Tie groups numbered across the flattened rows (every row starts a group), so one bincount
    # averages the ordinal ranks of every group of every row at once.
    starts = np.ones((n, k), dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    group = np.cumsum(starts.ravel()) - 1
    ordinal = np.tile(np.arange(1, k + 1, dtype=np.float64), n)
    average = np.bincount(group, weights=ordinal) / np.bincount(group)
    ranks = np.empty((n, k))
    np.put_along_axis(ranks, order, average[group].reshape(n, k), axis=1)
    return ranks.mean(axis=0)


def delta_required(differences: np.ndarray, pvalues: np.ndarray, alpha: float = SIGNIFICANCE_LEVEL) -> float | None:
    """Smallest ``|mean_i - mean_j|`` among pairs with ``p_ij < alpha``; None when none is significant.

    Algorithm 2 of seed 003 (after Sakai, WWW 2012): the mean difference a measure needs, on
    this dialogue set, to reach significance.
    """
    _check_alpha(alpha)
    upper_p = _upper_triangle(pvalues)
    diffs = np.asarray(differences, dtype=np.float64)
    if diffs.shape != np.shape(pvalues):
        raise ValueError(f"differences and pvalues must have the same shape; got {diffs.shape} and {np.shape(pvalues)}")
    upper_d = np.abs(diffs[np.triu_indices(diffs.shape[0], 1)])
    significant = upper_p < alpha
    return float(upper_d[significant].min()) if significant.any() else None


def _tau_b_rows(means_a: np.ndarray, means_b: np.ndarray) -> np.ndarray:
    """Kendall's tau-b for every row pair of two (B, k) arrays.

    ``tau_b = sum s_a s_b / sqrt(sum s_a^2 * sum s_b^2)`` over run pairs, with
    ``s = sign(mean_i - mean_j)``: the same as scipy.stats.kendalltau's tau-b. NaN where one
    ranking is all ties, or where a row holds NaN. With Numba, Knight's O(k log k) count
    (:func:`_tau_b_kernel`); without, the pairs themselves in blocks of bounded size
    (:func:`_tau_b_rows_numpy`). Both give every number bit for bit (tested): numerator and
    denominators are whole numbers of pairs, exact in float64 up to k of about 9,000 runs.
    """
    a = np.ascontiguousarray(means_a, dtype=np.float64)
    b = np.ascontiguousarray(means_b, dtype=np.float64)
    kernel = _tau_b_numba()
    if kernel is None:
        return _tau_b_rows_numpy(a, b)
    out = np.empty(a.shape[0])
    with _NUMBA_LOCK:
        kernel(a, b, out)
    return out


# Cells of the (rows, pairs) blocks of the NumPy tau-b: 32 MiB an array. A whole block of 1,024
# bootstrap rows at 503 runs was 1 GiB an array, 3.9 GB at its peak for one pair of measures.
_TAU_BLOCK_CELLS = 1 << 22


def _tau_b_rows_numpy(means_a: np.ndarray, means_b: np.ndarray) -> np.ndarray:
    """:func:`_tau_b_rows` from the signs of every run pair, a block of rows at a time."""
    i, j = np.triu_indices(means_a.shape[1], 1)
    out = np.empty(means_a.shape[0])
    rows = max(1, _TAU_BLOCK_CELLS // max(1, i.size))
    for first in range(0, means_a.shape[0], rows):
        block = slice(first, first + rows)
        with np.errstate(invalid="ignore"):  # inf - inf: NaN, and the row's tau with it
            sign_a = np.sign(means_a[block, i] - means_a[block, j])
            sign_b = np.sign(means_b[block, i] - means_b[block, j])
        numerator = (sign_a * sign_b).sum(axis=1)
        denominator = np.sqrt(np.square(sign_a).sum(axis=1) * np.square(sign_b).sum(axis=1))
        out[block] = np.divide(numerator, denominator, out=np.full(numerator.shape, np.nan), where=denominator > 0)
    return out


def _kendall_from_means(
    means_a: np.ndarray, means_b: np.ndarray, boot_a: np.ndarray, boot_b: np.ndarray, n_resamples: int, seed: int,
    level: float
) -> KendallTauResult:
    from scipy.stats import kendalltau  # imported here: scipy.stats takes seconds to import

    tau = float(kendalltau(means_a, means_b).statistic)
    replicates = _tau_b_rows(boot_a, boot_b)
    defined = replicates[~np.isnan(replicates)]
    if defined.size:
        lower, upper = np.quantile(defined, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    else:
        lower = upper = math.nan
    return KendallTauResult(
        tau=tau,
        lower=float(lower),
        upper=float(upper),
        level=level,
        n_resamples=n_resamples,
        seed=seed,
        n_undefined=int(replicates.size - defined.size),
    )


def kendall_tau_with_ci(
    matrix_a: np.ndarray, matrix_b: np.ndarray, n_resamples: int = 1_000, seed: int = 0, level: float = 0.95
) -> KendallTauResult:
    """Kendall's tau-b between the run rankings of two measures, with a dialogue-bootstrap interval.

    The point estimate is ``scipy.stats.kendalltau`` (tau-b) between the two vectors of run
    means. The interval is a percentile bootstrap over dialogues: each resample draws n
    dialogues with replacement, recomputes both measures' run means on that draw and their
    tau-b; the interval is the ``(1-level)/2`` and ``(1+level)/2`` quantiles. Choice: the
    runs are a fixed set, not a sample, so the uncertainty worth reporting is that of the
    dialogue sample; resampling dialogues keeps each dialogue's scores under both measures
    together. Caveat: tau's bootstrap distribution is discrete and piles up near +-1, so the
    interval is conservative at the extremes and, in principle, may exclude the estimate.

    Both measures must share a direction (all measures here are distances); negate one
    matrix otherwise.
    """
    x_a = _check_matrix(matrix_a, "matrix_a")
    x_b = _check_matrix(matrix_b, "matrix_b")
    if x_a.shape != x_b.shape:
        raise ValueError(f"matrix_a and matrix_b must have the same shape; got {x_a.shape} and {x_b.shape}")
    n_resamples = _check_count(n_resamples, "n_resamples")
    seed = _check_seed(seed)
    _check_level(level)
    boot_a, boot_b = _bootstrap_means([x_a, x_b], n_resamples, seed)
    return _kendall_from_means(x_a.mean(axis=0), x_b.mean(axis=0), boot_a, boot_b, n_resamples, seed, level)


def alpha_suffix(alpha: float) -> str:
    """``0.05 -> "05"``, ``0.01 -> "01"``, ``0.001 -> "001"``: alpha in a template-friendly key."""
    return f"{alpha:g}".removeprefix("0.").replace(".", "_")


def meta_evaluate(
    results: Mapping[str, TukeyHSDResult],
    matrices: Mapping[str, np.ndarray],
    alphas: Sequence[float] = REPORTED_LEVELS,
    n_resamples: int = 1_000,
    seed: int = 0,
    level: float = 0.95,
    lower_is_better: bool | Mapping[str, bool] = True,
    corpus: Mapping[str, CorpusMeasure] | None = None,
) -> dict[str, Any]:
    """Discriminative power and delta required per measure, and Kendall's tau for every measure pair.

    ``results`` come from :func:`randomised_tukey_hsd` on ``matrices`` (same keys, same
    shapes). Returns plain JSON-ready data (string keys, floats, None; a NaN tau stays NaN),
    alpha written into the key as in ``0.05 -> "05"``::

        {"alphas": [0.05, 0.01], "n_resamples": B, "seed": seed, "level": level,
         "measures": {name: {"n_pairs": int,
                             "discriminative_power_05": float, "delta_required_05": float | None,
                             "discriminative_power_01": ..., "delta_required_01": ...}},
         "kendall_tau": [{"a": name, "b": name, "tau": float, "low": float, "high": float,
                          "level": level, "n_resamples": B, "seed": seed, "n_undefined": int}, ...]}

    ``kendall_tau`` compares the run rankings best first, so a measure where higher is better
    (``lower_is_better`` False, or False for its name in a mapping) is negated for tau only; two
    measures that agree on which runs are better get a positive tau whatever their directions.
    ``kendall_tau`` lists every pair (a before b in input order). All pairs use the same
    dialogue resamples, so each entry equals :func:`kendall_tau_with_ci` on that pair with the
    same ``n_resamples``, ``seed`` and ``level``.

    ``corpus`` names the measures whose figure is a corpus figure (their results come from
    :func:`corpus_tukey_hsd`): their rankings are those of the corpus figures, on the original
    items and on each resample (the same resamples), recomputed from their statistics.
    """
    checked = _check_matrices(matrices)
    if set(results) != set(checked):
        raise ValueError(
            f"results and matrices must cover the same measures; got {sorted(results)} and {sorted(checked)}"
        )
    for name, result in results.items():
        if (result.n_dialogues, result.n_runs) != checked[name].shape:
            raise ValueError(
                f"measure {name!r}: result is for {result.n_dialogues} x {result.n_runs} "
                f"but the matrix has shape {checked[name].shape}"
            )
    alphas = [float(alpha) for alpha in alphas]
    for alpha in alphas:
        _check_alpha(alpha)
    n_resamples = _check_count(n_resamples, "n_resamples")
    seed = _check_seed(seed)
    _check_level(level)

    measures: dict[str, dict[str, Any]] = {}
    for name in checked:
        result = results[name]
        entry: dict[str, Any] = {"n_pairs": result.n_runs * (result.n_runs - 1) // 2}
        for alpha in alphas:
            suffix = alpha_suffix(alpha)
            entry[f"discriminative_power_{suffix}"] = discriminative_power(result.pvalues, alpha)
            entry[f"delta_required_{suffix}"] = delta_required(result.differences, result.pvalues, alpha)
        measures[name] = entry
    names = list(checked)
    if not isinstance(lower_is_better, bool) and set(names) - set(lower_is_better):
        raise ValueError(f"lower_is_better names no direction for {sorted(set(names) - set(lower_is_better))}")
    # Negation is exact, so measures where lower is better keep their numbers bit for bit.
    oriented = {name: checked[name] if (lower_is_better if isinstance(lower_is_better, bool)
                                        else lower_is_better[name]) else -checked[name] for name in names}
    kendall = []
    corpus = corpus or {}
    if len(names) > 1:
        boots = dict(zip(names, _bootstrap_means([oriented[n] for n in names], n_resamples, seed)))
        points = {name: oriented[name].mean(axis=0) for name in names}
        for name, measure in corpus.items():
            if name not in boots:
                continue
            sign = 1.0 if (lower_is_better if isinstance(lower_is_better, bool) else lower_is_better[name]) else -1.0
            boots[name] = sign * corpus_bootstrap_replicates(measure, n_resamples, seed)
            points[name] = sign * np.asarray(results[name].means)
        for a, b in itertools.combinations(names, 2):
            tau = _kendall_from_means(points[a], points[b], boots[a], boots[b], n_resamples, seed, level)
            kendall.append(
                {
                    "a": a,
                    "b": b,
                    "tau": tau.tau,
                    "low": tau.lower,
                    "high": tau.upper,
                    "level": level,
                    "n_resamples": n_resamples,
                    "seed": seed,
                    "n_undefined": tau.n_undefined,
                }
            )
    return {
        "alphas": alphas,
        "n_resamples": n_resamples,
        "seed": seed,
        "level": level,
        "measures": measures,
        "kendall_tau": kendall,
    }
