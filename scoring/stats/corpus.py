"""Tests of corpus-level measures (a figure computed from summed sufficient statistics, such as
BLEU): the randomised Tukey HSD and bootstrap intervals on rows of statistics."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from scoring.stats.anova import _pvalues_from_ranges
from scoring.stats.bootstrap import resample_counts
from scoring.stats.kernels import _NUMBA_LOCK, _numba_threads, _recombine_kernels, numba_available
from scoring.stats.recombined import (
    _choose_method,
    _kernel_tables,
    _pool_numpy,
    _recombined_sums,
    recombined_variance_inflation,
)
from scoring.stats.results import BootstrapResult, TukeyHSDResult, _freeze, _mc_standard_errors
from scoring.stats.validation import Backend, Method, _check_count, _check_level, _check_seed

# A corpus measure's run figure is C(sum over items of the item's sufficient statistics) (BLEU:
# clipped n-gram counts and lengths). Its tests work on rows of statistics (docs/statistics.md,
# "Corpus-level measures"): a Tukey HSD step moves each item's whole row of statistics to the
# run the stream's permutation names, sums each run's rows and applies C; a bootstrap resample
# sums each run's rows with the resample's counts and applies C (Koehn 2004). The permuted
# sums come from the same stream and kernels as the mean measures' (the pool kernel with one
# group and B entries is exactly Algorithm 1's sums), so the corpus figure is the only new work:
# one C per run per step, vectorised over steps.

# A corpus function vectorised over leading axes: statistics (..., S) summed over items -> figures (...).
CorpusFunction = Callable[[np.ndarray], np.ndarray]
# Floating-point ties between a permuted range and an observed difference (the spec's 1e-12).
CORPUS_TIE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class CorpusMeasure:
    """One corpus measure's input to the tests: ``statistics[d, j, :]`` is run j's row of sufficient
    statistics on item d (shape ``(n, k, S)``), ``corpus`` the vectorised corpus function."""

    statistics: np.ndarray
    corpus: CorpusFunction


def _check_corpus(name: str, measure: CorpusMeasure) -> tuple[np.ndarray, np.ndarray]:
    """The checked (n, k, S) statistics and the observed figures (k,), or ValueError naming the problem."""
    try:
        x = np.ascontiguousarray(np.asarray(measure.statistics, dtype=np.float64))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"measure {name!r}: statistics cannot be read as numbers ({exc})") from None
    if x.ndim != 3:
        raise ValueError(f"measure {name!r}: statistics must be items x runs x statistics; got shape {x.shape}")
    n, k, width = x.shape
    if k < 2:
        raise ValueError(f"measure {name!r}: needs at least 2 runs to compare; got {k}")
    if n < 2:
        raise ValueError(f"measure {name!r}: needs at least 2 items; got {n}")
    if width < 1:
        raise ValueError(f"measure {name!r}: no sufficient statistics")
    if not np.isfinite(x).all():
        d, j, _ = np.argwhere(~np.isfinite(x))[0]
        raise ValueError(f"measure {name!r}: statistics that are not finite numbers (first at item {d}, run {j})")
    figures = np.asarray(measure.corpus(x.sum(axis=0)), dtype=np.float64)
    if figures.shape != (k,):
        raise ValueError(f"measure {name!r}: the corpus function gave shape {figures.shape} for {k} runs")
    if not np.isfinite(figures).all():
        raise ValueError(f"measure {name!r}: the corpus figure of run {int(np.argmin(np.isfinite(figures)))} "
                         "is not a finite number")
    return x, figures


def _permuted_sums(x: np.ndarray, seed: int, n_permutations: int, use_numba: bool, recombine: bool) -> np.ndarray:
    """Each run's summed rows under the B steps of the stream, (B, k, m) (raw sums, not centred:
    integer statistics then sum exactly)."""
    n, k, m = x.shape
    if recombine:
        out = np.empty((n_permutations, k, m))
        for first, sums in _recombined_sums(x, seed, n_permutations, use_numba):
            out[first : first + sums.shape[0]] = sums
        return out
    if not use_numba:
        return _pool_numpy(x, seed, 0, n, n, n_permutations)
    pool_kernel, _ = _recombine_kernels()
    firsts, stops, products, thresholds = _kernel_tables(k)
    out = np.empty((n_permutations, k, m))
    tile = max(1, min(32, n_permutations // (4 * _numba_threads())))
    with _NUMBA_LOCK:
        pool_kernel(x, np.uint64(seed), 0, n, n, n_permutations, tile, firsts, stops, products, thresholds, out)
    return out


def corpus_tukey_hsd(
    measures: Mapping[str, CorpusMeasure],
    n_permutations: int = 10_000,
    seed: int = 0,
    *,
    backend: Backend = "auto",
    method: Method = "auto",
) -> dict[str, TukeyHSDResult]:
    """Randomised Tukey HSD on corpus measures (SIGNIFICANCE-SPEC, "Randomised Tukey HSD on corpus measures").

    Observed ``D(r, r') = |C(sum_d s[d, r]) - C(sum_d s[d, r'])|``. Each of B steps permutes,
    independently per item, which run each row of statistics belongs to (the permutation
    stream of :mod:`scoring.stats.stream`, step b and item d), recomputes C for every run and records
    the range; ``p = (#{b : range_b >= D - 1e-12} + 1) / (B + 1)``. ``means`` of the results are
    the corpus figures; effect sizes are undefined (NaN: there is no per-item residual) and
    ``residual_variance`` is NaN. Measures over the same items and runs share the steps.
    ``method``: as :func:`randomised_tukey_hsd` ("auto" recombines at ``B n k S >=
    RECOMBINE_MIN_CELLS`` with S the statistics per row, summed over the measures).
    """
    if not isinstance(measures, Mapping) or not measures:
        raise ValueError("measures must be a non-empty mapping from measure name to CorpusMeasure")
    checked = {str(name): _check_corpus(str(name), measure) for name, measure in measures.items()}
    shapes = {name: x.shape[:2] for name, (x, _) in checked.items()}
    if len(set(shapes.values())) > 1:
        raise ValueError("all measures must have the same items and runs; got " +
                         ", ".join(f"{name!r}: {shape}" for name, shape in shapes.items()))
    n_permutations = _check_count(n_permutations, "n_permutations")
    seed = _check_seed(seed)
    if backend not in ("auto", "numba", "numpy"):
        raise ValueError(f"backend must be 'auto', 'numba' or 'numpy'; got {backend!r}")
    use_numba = backend == "numba" or (backend == "auto" and numba_available())
    if use_numba and not numba_available():
        raise ValueError("backend='numba' requested but numba cannot be imported")
    n, k = next(iter(shapes.values()))
    if n_permutations * n >= 1 << 63:
        raise ValueError("n_permutations * n_items must be below 2**63")
    stacked = np.ascontiguousarray(np.concatenate([x for x, _ in checked.values()], axis=2))
    method = _choose_method(method, n, k, n_permutations, stacked.shape[2])
    sums = _permuted_sums(stacked, seed, n_permutations, use_numba, method == "recombined")
    inflation = recombined_variance_inflation(n, k, n_permutations) if method == "recombined" else 1.0
    results = {}
    first = 0
    for name, (x, figures) in checked.items():
        width = x.shape[2]
        permuted = np.asarray(measures[name].corpus(sums[:, :, first : first + width]), dtype=np.float64)
        first += width
        ranges = permuted.max(axis=1) - permuted.min(axis=1)
        # A step whose figure is undefined (NaN: a corpus function with nothing to divide by)
        # cannot reach any difference: it counts as a range of 0.
        ranges = np.where(np.isfinite(ranges), ranges, 0.0)
        differences = figures[:, None] - figures[None, :]
        pvalues = _pvalues_from_ranges(ranges, differences, CORPUS_TIE_TOLERANCE)
        mc_se = _mc_standard_errors(pvalues, n_permutations, inflation)
        undefined = np.full_like(differences, np.nan)
        _freeze(figures, pvalues, differences, undefined, mc_se)
        results[name] = TukeyHSDResult(measure=name, n_runs=k, n_dialogues=n, means=figures, pvalues=pvalues,
                                       differences=differences, effect_sizes=undefined, residual_variance=math.nan,
                                       mc_standard_errors=mc_se, n_permutations=n_permutations, seed=seed,
                                       mc_variance_inflation=inflation)
    return results


def corpus_bootstrap_replicates(measure: CorpusMeasure, n_resamples: int, seed: int) -> np.ndarray:
    """Each run's corpus figure on each bootstrap resample of the items, (R, k): every run's rows
    resampled together (Koehn 2004), the resamples of :func:`resample_counts` (the same items as
    the mean measures' bootstrap with the same seed). NaN where a resample leaves C undefined."""
    x = np.asarray(measure.statistics, dtype=np.float64)
    n, k, width = x.shape
    flat = x.reshape(n, k * width)
    out = np.empty((n_resamples, k))
    for first, counts in resample_counts(n, n_resamples, seed):
        totals = (counts.astype(np.float64) @ flat).reshape(-1, k, width)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[first : first + counts.shape[0]] = measure.corpus(totals)
    return out


def corpus_bootstrap_intervals(
    measure: CorpusMeasure, n_resamples: int = 1_000, seed: int = 0, level: float = 0.95
) -> BootstrapResult:
    """Percentile bootstrap interval of each run's corpus figure, resampling items (Koehn 2004):
    ``[q_{(1-level)/2}, q_{(1+level)/2}]`` of the R replicates; ``means`` are the corpus figures.
    Replicates where C is undefined are left out of the quantiles (none, unless a resample can
    hold nothing to divide by)."""
    x, figures = _check_corpus("measure", measure)
    n_resamples = _check_count(n_resamples, "n_resamples")
    seed = _check_seed(seed)
    _check_level(level)
    boot = corpus_bootstrap_replicates(CorpusMeasure(x, measure.corpus), n_resamples, seed)
    defined = np.isfinite(boot).all(axis=1)
    if not defined.any():
        raise ValueError("no bootstrap resample has a defined corpus figure for every run")
    boot = boot[defined]
    lower, upper = np.quantile(boot, [(1.0 - level) / 2.0, (1.0 + level) / 2.0], axis=0)
    standard_errors = boot.std(axis=0, ddof=1) if boot.shape[0] > 1 else np.zeros_like(figures)
    _freeze(figures, lower, upper, standard_errors)
    return BootstrapResult(means=figures, lower=lower, upper=upper, standard_errors=standard_errors, level=level,
                           n_resamples=n_resamples, seed=seed, n_dialogues=x.shape[0], n_runs=x.shape[1])
