"""The two-way ANOVA residual and effect sizes, the exceedance count that makes p-values from
permuted ranges, and the Tukey HSD result assembled from them."""

from __future__ import annotations

import math

import numpy as np

from scoring.stats.results import TukeyHSDResult, _freeze, _mc_standard_errors
from scoring.stats.validation import _check_matrix


def residual_variance(matrix: np.ndarray) -> float:
    """Residual variance V_E of the two-way ANOVA without replication (runs x dialogues).

    ``V_E = sum_{d,j} (x_dj - xbar_d. - xbar_.j + xbar_..)^2 / ((n - 1)(k - 1))``
    (Sakai 2018, "Laboratory Experiments in Information Retrieval", section 5.2; the
    denominator of ES_E). 0 when every score is a dialogue effect plus a run effect.
    """
    x = _check_matrix(matrix)
    n, k = x.shape
    residual = x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + x.mean()
    return float(np.square(residual).sum() / ((n - 1) * (k - 1)))


def _pair_summaries(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Means, difference matrix, effect-size matrix and V_E of one checked matrix."""
    means = x.mean(axis=0)
    differences = means[:, None] - means[None, :]
    v_e = residual_variance(x)
    # Exactly additive scores leave residuals of round-off size (~eps * max|x|), not 0; an
    # effect size over that would be a huge meaningless number, so call it undefined.
    if math.sqrt(v_e) > 64 * np.finfo(np.float64).eps * float(np.abs(x).max()):
        effect_sizes = differences / math.sqrt(v_e)
    else:
        effect_sizes = np.full_like(differences, np.nan)
    return means, differences, effect_sizes, v_e


def _tie_tolerance(x: np.ndarray) -> float:
    """Tolerance for ``range_b >= |observed difference|`` in mean units.

    A permuted range that equals an observed difference mathematically (e.g. the identity
    permutation, or discrete scores such as 0.1 and 0.3) can come out one ulp short because
    sums are taken in a different order; without slack such a tie would flip the count
    depending on the backend. A naive n-term mean of values bounded by ``max|x|`` is off by
    at most ``n * eps * max|x|``; 16 times that covers both operands and the path through
    row-centred values, and is still far below any difference that matters
    (about 1e-11 for n = 4,000 scores in [0, 1]).
    """
    n = x.shape[0]
    return 16.0 * n * np.finfo(np.float64).eps * max(float(np.abs(x).max()), np.finfo(np.float64).tiny)


def _pvalues_from_ranges(ranges: np.ndarray, differences: np.ndarray, tolerance: float) -> np.ndarray:
    """``(#{b : ranges[b] >= |differences| - tolerance} + 1) / (B + 1)`` for every cell, exactly."""
    n_perm = ranges.shape[0]
    ordered = np.sort(ranges)
    below = np.searchsorted(ordered, np.abs(differences) - tolerance, side="left")
    pvalues = (n_perm - below + 1) / (n_perm + 1)
    # The diagonal is a difference of 0 and so always counts every b; make it exact anyway.
    np.fill_diagonal(pvalues, 1.0)
    return pvalues


def _tukey_result(name: str, x: np.ndarray, pvalues: np.ndarray, n_permutations: int, seed: int,
                  inflation: float = 1.0) -> TukeyHSDResult:
    means, differences, effect_sizes, v_e = _pair_summaries(x)
    mc_se = _mc_standard_errors(pvalues, n_permutations, inflation)
    _freeze(means, pvalues, differences, effect_sizes, mc_se)
    return TukeyHSDResult(
        measure=name,
        n_runs=x.shape[1],
        n_dialogues=x.shape[0],
        means=means,
        pvalues=pvalues,
        differences=differences,
        effect_sizes=effect_sizes,
        residual_variance=v_e,
        mc_standard_errors=mc_se,
        n_permutations=n_permutations,
        seed=seed,
        mc_variance_inflation=inflation,
    )
