"""The randomised Tukey HSD over score matrices (mean measures), and its literal reference loop."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from scoring.stats.anova import _pvalues_from_ranges, _tie_tolerance, _tukey_result
from scoring.stats.kernels import _ranges_numba, numba_available
from scoring.stats.recombined import _choose_method, _recombined_ranges, recombined_variance_inflation
from scoring.stats.results import TukeyHSDResult
from scoring.stats.stream import _ranges_numpy, _row_permutation
from scoring.stats.validation import (
    Backend,
    Method,
    _check_count,
    _check_matrices,
    _check_matrix,
    _check_seed,
)


def randomised_tukey_hsd(
    matrices: Mapping[str, np.ndarray],
    n_permutations: int = 10_000,
    seed: int = 0,
    chunk_size: int | None = None,
    *,
    backend: Backend = "auto",
    method: Method = "auto",
) -> dict[str, TukeyHSDResult]:
    """Randomised Tukey HSD for several measures over the same dialogues and runs.

    For b = 1..B (B = ``n_permutations``) every dialogue's row is permuted across runs, the
    same permutation for every measure, and ``range_b = max_j mean*_j - min_j mean*_j`` is
    recorded per measure. For runs (i, j)::

        p_ij = (#{b : range_b >= |mean_i - mean_j|} + 1) / (B + 1)

    (Carterette 2012, TOIS 30(1); Algorithm 1 of seed 003 section 4.1.1, which writes ``>``
    and ``count / B``. Counting ties and adding the observed data as one more arrangement
    gives a valid test at every B and never a p of 0: Phipson and Smyth 2010.) The
    comparison has a small tolerance so that round-off cannot break exact ties, see
    :func:`_tie_tolerance`.

    Rows are centred before permuting (subtracting a dialogue's mean changes no permuted
    range), which keeps the sums small. Steps are processed ``chunk_size`` at a time (default:
    1,024 with Numba, about 2^19 (step, dialogue, run) cells per array with NumPy), so memory
    does not grow with B beyond the B ranges per measure. The output depends only on the inputs, B and the seed:
    not on ``chunk_size``, the backend, or the number of threads. Reordering the runs gives
    p-values that agree within Monte Carlo error, not bit for bit: the permutations are
    drawn for column positions.

    ``backend``: "numba" (fused parallel kernel), "numpy", or "auto" (Numba when importable).
    ``method``: "exact" (every step drawn as above), "recombined" (every step an exact draw of
    the same test, made from pools of partial sums over groups of dialogues: about 1/16 of the
    work at 10,000 x 100, with a Monte Carlo variance within about 5% of the full test's; see
    :mod:`scoring.stats.recombined`), or "auto": recombined when ``B * n * k * measures`` reaches
    ``RECOMBINE_MIN_CELLS``, n ``RECOMBINE_MIN_DIALOGUES`` and the plan's pool divisor
    ``RECOMBINE_MIN_DIVISOR``, exact otherwise (every pinned and worked example). The method is a
    function of the inputs and B only, so the same inputs, B and seed still give the same numbers
    on every backend.
    Raises ValueError for NaN or infinite scores, fewer than 2 runs or dialogues, matrices of
    different shapes, B < 1, or a seed outside [0, 2**64).
    """
    checked = _check_matrices(matrices)
    n_permutations = _check_count(n_permutations, "n_permutations")
    seed = _check_seed(seed)
    if chunk_size is not None:
        chunk_size = _check_count(chunk_size, "chunk_size")
    if backend not in ("auto", "numba", "numpy"):
        raise ValueError(f"backend must be 'auto', 'numba' or 'numpy'; got {backend!r}")
    n = next(iter(checked.values())).shape[0]
    if n_permutations * n >= 1 << 63:
        raise ValueError("n_permutations * n_dialogues must be below 2**63")
    use_numba = backend == "numba" or (backend == "auto" and numba_available())
    if use_numba and not numba_available():
        raise ValueError("backend='numba' requested but numba cannot be imported")

    k = next(iter(checked.values())).shape[1]
    method = _choose_method(method, n, k, n_permutations, len(checked))

    if method == "recombined":
        # Centred straight into the (n, k, m) layout of the kernels, so that no second copy of
        # the scores is held beside the sums and pools (160 MiB at 10,000 x 100 x 21).
        stacked = np.empty((n, k, len(checked)))
        for m, x in enumerate(checked.values()):
            stacked[:, :, m] = x - x.mean(axis=1, keepdims=True)
        ranges = _recombined_ranges(stacked, seed, n_permutations, use_numba)
        del stacked
        inflation = recombined_variance_inflation(n, k, n_permutations)
    else:
        inflation = 1.0
        centred = [x - x.mean(axis=1, keepdims=True) for x in checked.values()]
        compute = _ranges_numba if use_numba else _ranges_numpy
        ranges = compute(centred, seed, n_permutations, chunk_size)

    results = {}
    for m, (name, x) in enumerate(checked.items()):
        means = x.mean(axis=0)
        pvalues = _pvalues_from_ranges(ranges[m], means[:, None] - means[None, :], _tie_tolerance(x))
        results[name] = _tukey_result(name, x, pvalues, n_permutations, seed, inflation)
    return results


def tukey_hsd_loop(
    matrix: np.ndarray, n_permutations: int = 1_000, seed: int = 0, *, measure: str = "measure"
) -> TukeyHSDResult:
    """Reference randomised Tukey HSD: Algorithm 1 of seed 003, literally, one row at a time.

    Plain Python loops over b, dialogues and run pairs, on the raw (uncentred) matrix; each
    row's permutation comes from :func:`_row_permutation`, the pure-Python form of the
    stream that :func:`randomised_tukey_hsd` uses. So with the same seed both give
    **identical** p-values: the ranges themselves may differ in the last bits, since sums
    are taken in another order, and the tie tolerance absorbs that (only a permuted range
    within about 1e-11 of an observed difference without being equal to it could still be
    counted differently). Counting rule and p as in
    :func:`randomised_tukey_hsd`. Slow (tens of microseconds per dialogue per b): for tests
    and for the benchmark's speed ratio.
    """
    x = _check_matrix(matrix, f"measure {measure!r}")
    n_permutations = _check_count(n_permutations, "n_permutations")
    seed = _check_seed(seed)
    n, k = x.shape
    means = x.mean(axis=0)
    tolerance = _tie_tolerance(x)
    counts = np.zeros((k, k), dtype=np.int64)
    permuted = np.empty_like(x)
    for b in range(n_permutations):
        for d in range(n):
            permuted[d, _row_permutation(seed, b, d, n, k)] = x[d]
        column_means = permuted.mean(axis=0)
        spread = column_means.max() - column_means.min()
        for i in range(k):
            for j in range(k):
                if spread >= abs(means[i] - means[j]) - tolerance:
                    counts[i, j] += 1
    pvalues = (counts + 1) / (n_permutations + 1)
    return _tukey_result(measure, x, pvalues, n_permutations, seed)
