"""The dialogue bootstrap: resamples of the items as count matrices (one stream for every
consumer) and percentile intervals of each run's mean."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from scoring.stats.results import BootstrapResult, _freeze
from scoring.stats.validation import _check_count, _check_level, _check_matrix, _check_seed

_BOOTSTRAP_CELLS_PER_CHUNK = 1 << 20


def _bootstrap_means(matrices: Sequence[np.ndarray], n_resamples: int, seed: int) -> list[np.ndarray]:
    """Column means of every matrix under the same B dialogue resamples: list of (B, k) arrays.

    Resample b draws n dialogue indices uniformly with replacement from
    ``numpy.random.default_rng(seed)``; the chunking depends on n only, so the resamples of a
    seed are the same whatever matrices are passed together.
    """
    n = matrices[0].shape[0]
    stacked = np.concatenate(matrices, axis=1)
    widths = np.cumsum([0] + [m.shape[1] for m in matrices])
    out = np.empty((n_resamples, stacked.shape[1]))
    for first, weights in resample_counts(n, n_resamples, seed):
        # The resampled mean is a weighted mean of the rows.
        out[first : first + weights.shape[0]] = weights.astype(np.float64) @ stacked / n
    return [out[:, widths[i] : widths[i + 1]] for i in range(len(matrices))]


def resample_counts(n_items: int, n_resamples: int, seed: int) -> Iterator[tuple[int, np.ndarray]]:
    """The bootstrap resamples of n items as count matrices, in chunks: yields ``(first, counts)``.

    ``counts[r, i]`` (int64, shape ``(chunk, n_items)``) is how many times resample
    ``first + r`` drew item i. Resample b draws n items uniformly with replacement from
    ``numpy.random.default_rng(seed)``; chunks hold about 2^20 cells and depend on n only, so
    the resamples of a seed are the same whoever consumes them (the dialogue bootstrap here,
    the context bootstrap of :mod:`scoring.kinds.metric.meta`). Any statistic that is a function of
    per-item sums is then scored exactly on resample b from ``counts[b] @ per_item_values``.
    """
    n_items = _check_count(n_items, "n_items")
    n_resamples = _check_count(n_resamples, "n_resamples")
    seed = _check_seed(seed)
    rng = np.random.default_rng(seed)
    steps = max(1, _BOOTSTRAP_CELLS_PER_CHUNK // n_items)
    for first in range(0, n_resamples, steps):
        count = min(steps, n_resamples - first)
        picks = rng.integers(0, n_items, size=(count, n_items))
        # Times each item was drawn.
        counts = np.bincount((picks + (np.arange(count) * n_items)[:, None]).reshape(-1), minlength=count * n_items)
        del picks
        yield first, counts.reshape(count, n_items)


def bootstrap_confidence_intervals(
    matrix: np.ndarray, n_resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> BootstrapResult:
    """Percentile bootstrap interval of each run's mean, resampling dialogues.

    Each resample draws n dialogues with replacement and recomputes every run's mean on the
    same draw (runs stay paired). The interval is
    ``[q_{(1-level)/2}, q_{(1+level)/2}]`` of the B resampled means (Efron and Tibshirani
    1993, section 13.3). Resamples are processed in chunks. Same seed, same output (on the
    same NumPy/BLAS build: the weighted means go through a matrix product).
    """
    x = _check_matrix(matrix)
    n_resamples = _check_count(n_resamples, "n_resamples")
    seed = _check_seed(seed)
    _check_level(level)
    (boot,) = _bootstrap_means([x], n_resamples, seed)
    lower, upper = np.quantile(boot, [(1.0 - level) / 2.0, (1.0 + level) / 2.0], axis=0)
    means = x.mean(axis=0)
    standard_errors = boot.std(axis=0, ddof=1) if n_resamples > 1 else np.zeros_like(means)
    _freeze(means, lower, upper, standard_errors)
    return BootstrapResult(
        means=means,
        lower=lower,
        upper=upper,
        standard_errors=standard_errors,
        level=level,
        n_resamples=n_resamples,
        seed=seed,
        n_dialogues=x.shape[0],
        n_runs=x.shape[1],
    )
