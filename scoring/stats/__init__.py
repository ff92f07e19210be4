"""Significance tests and meta-evaluation of runs over a dialogue-by-run score matrix.

Framework-free: imports NumPy (and SciPy lazily, for Kendall's tau), never Django. Numba is
used when it can be imported and NumPy otherwise; both give the same p-values for the same
seed, because the permutations come from one counter-based stream defined in this module
(see "Permutation stream" below), not from a library's generator.

Input convention: a score matrix is a float64 array of shape ``(n_dialogues, k_runs)``;
entry ``[d, j]`` is run ``j``'s score on dialogue ``d`` for one measure. All measures of the
project are distances (lower is better); functions where "best" matters take
``lower_is_better``. ``SIGNIFICANCE_LEVEL`` is the one significance level of the project (top
groups, significance marks); ``REPORTED_LEVELS`` the levels meta-evaluation reports.

What is computed (docs/statistics.md has the full write-up and the benchmark figures):

* ``randomised_tukey_hsd``: the randomised Tukey HSD test (Carterette, "Multiple testing in
  statistical analysis of systems-based information retrieval experiments", ACM TOIS 30(1),
  2012; Algorithm 1 of seed 003, section 4.1.1). For b = 1..B every dialogue's row is
  permuted across runs and ``range_b = max_j mean*_j - min_j mean*_j`` is recorded; the
  p-value of runs (i, j) is ``(#{b : range_b >= |mean_i - mean_j|} + 1) / (B + 1)``.
  Several measures over the same dialogues and runs share the permutations.
* effect sizes ``(mean_i - mean_j) / sqrt(V_E)`` with ``V_E`` the residual variance of the
  two-way ANOVA without replication (Sakai, "Laboratory Experiments in Information
  Retrieval", Springer 2018, ch. 5);
* ``bootstrap_confidence_intervals``: percentile intervals of each run's mean from a
  dialogue bootstrap (Efron and Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13);
* meta-evaluation: discriminative power (Sakai, SIGIR 2006), delta required (Sakai, WWW 2012;
  Algorithm 2 of seed 003) and Kendall's tau-b between the run rankings of two measures
  with a dialogue-bootstrap interval.

Permutation stream. Step b (0-based) and dialogue d get their own SplitMix64 stream (Steele,
Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014), so any chunk
of steps can be computed on its own, in any order, on any number of threads, with the same
result::

    mix64(z)  = the SplitMix64 finaliser (xor-shift 30, * 0xBF58476D1CE4E5B9,
                xor-shift 27, * 0x94D049BB133111EB, xor-shift 31), all mod 2^64
    state     = mix64(seed + (b * n + d + 1) * G)        G = 0x9E3779B97F4A7C15
    z_t       = mix64(state + (t + 1) * G)               t = 0, 1, ...
    words     = low 32 bits of z_0, high 32 bits of z_0, low of z_1, high of z_1, ...

The inside-out Fisher-Yates shuffle (Durstenfeld 1964; Knuth, TAOCP vol. 2, 3.4.2) needs a
die ``j_i`` uniform on ``{0..i}`` for i = 1..k-1. Consecutive dice are batched so that the
product P of their sizes is at most 2^16 and drawn from one 32-bit word u by Lemire's
multiply-shift method with rejection (Lemire, ACM TOMACS 29(1), 2019; batched as in
Brackett-Rozinsky and Lemire, "Batched ranged random integer generation", 2024): reject u
while ``(u * P) mod 2^32 < 2^32 mod P`` (probability below P / 2^32 <= 2^-16), then peel the
dice off with ``p = r * (i + 1); j_i = p >> 32; r = p mod 2^32`` starting from r = u. This is
exact: every permutation has probability exactly 1/k!. The shuffle is
``pi[0] = 0; for i in 1..k-1: pi[i] = pi[j_i]; pi[j_i] = i``, and the permuted row is
``M*[d, pi[c]] = M[d, c]`` (the score in column c moves to column pi[c]).
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np

__all__ = [
    "REPORTED_LEVELS",
    "SIGNIFICANCE_LEVEL",
    "BootstrapResult",
    "CorpusMeasure",
    "KendallTauResult",
    "TukeyHSDResult",
    "alpha_suffix",
    "asl_curve",
    "bootstrap_confidence_intervals",
    "corpus_bootstrap_intervals",
    "corpus_bootstrap_replicates",
    "corpus_tukey_hsd",
    "delta_required",
    "discriminative_power",
    "holm",
    "kendall_tau_with_ci",
    "meta_evaluate",
    "numba_available",
    "randomised_tukey_hsd",
    "resample_counts",
    "residual_variance",
    "tukey_hsd_loop",
]

Backend = Literal["auto", "numba", "numpy"]
Method = Literal["auto", "exact", "recombined"]

_GAMMA = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1
# Dice are batched up to this product so that a rejection (probability < P / 2^32) is rare.
_BATCH_PRODUCT_LIMIT = 1 << 16
# Chunks of the NumPy path hold about this many (step, dialogue, run) cells per array.
_NUMPY_CELLS_PER_CHUNK = 1 << 19
_NUMBA_STEPS_PER_CHUNK = 1024
_BOOTSTRAP_CELLS_PER_CHUNK = 1 << 20

# The significance level of top groups and significance marks: the conventional 5% of the
# STC-3 and DialEval overviews. Results store the level they were computed at (the server's
# ``TaskStatistics.alpha``), so pages and exports read it back instead of assuming it.
SIGNIFICANCE_LEVEL: float = 0.05
# Discriminative power and delta required are reported at both conventional levels (Sakai,
# SIGIR 2006 reports 5% and 1%).
REPORTED_LEVELS: tuple[float, ...] = (SIGNIFICANCE_LEVEL, 0.01)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, eq=False)
class TukeyHSDResult:
    """Randomised Tukey HSD for one measure: p-values, differences and effect sizes of all run pairs.

    Arrays are read-only; ``(k, k)`` matrices are indexed ``[i, j]`` by run position.

    * ``means[j]``: run j's mean score over the dialogues.
    * ``differences[i, j] = means[i] - means[j]`` (antisymmetric).
    * ``pvalues[i, j]``: ``(#{b : range_b >= |differences[i, j]|} + 1) / (B + 1)``,
      symmetric, 1 on the diagonal. A multiple of 1 / (B + 1), never 0 (Phipson and Smyth,
      "Permutation p-values should never be zero", SAGMB 9(1), 2010).
    * ``effect_sizes[i, j] = differences[i, j] / sqrt(residual_variance)`` (Sakai 2018, ES_E);
      NaN everywhere when ``residual_variance`` is 0 up to round-off (scores exactly
      additive in dialogue and run effects), since the ratio is then undefined.
    * ``residual_variance``: V_E of the two-way ANOVA without replication, see
      :func:`residual_variance`.
    * ``mc_standard_errors[i, j] = sqrt(mc_variance_inflation p (1 - p) / B)``: Monte Carlo
      standard error of p.
    * ``mc_variance_inflation``: how much the Monte Carlo variance of p exceeds the binomial
      ``p (1 - p) / B`` of B independent steps. 1 for the full test; for the recombined method
      the inflation its plan was chosen under (see "recombined steps" below), a bound on what
      ``benchmarks/tukey_recombined.py --calibrate`` measured, so that the standard error printed
      is not smaller than the method's.
    """

    measure: str
    n_runs: int
    n_dialogues: int
    means: np.ndarray
    pvalues: np.ndarray
    differences: np.ndarray
    effect_sizes: np.ndarray
    residual_variance: float
    mc_standard_errors: np.ndarray
    n_permutations: int
    seed: int
    mc_variance_inflation: float = 1.0

    @classmethod
    def from_stored(cls, entry: Mapping[str, Any], *, permutations: int, seed: int, n_dialogues: int) -> TukeyHSDResult:
        """Rebuild a result from stored JSON numbers (e.g. to feed :mod:`scoring.exports`).

        ``entry`` holds lists (or arrays) under ``means``, ``pvalues``, ``differences``,
        ``effect_sizes`` (None read as NaN), ``mc_se`` and, optionally, ``residual_variance``,
        ``mc_variance_inflation`` and ``measure``;
        other keys are ignored. Only the stored numbers come back: nothing is recomputed.
        """

        def square(key: str) -> np.ndarray:
            stored = entry[key]
            if isinstance(stored, np.ndarray):  # binary storage: NaN is already NaN
                values = np.array(stored, dtype=np.float64)
            else:
                values = np.array([[np.nan if v is None else v for v in row] for row in stored], dtype=np.float64)
            if values.shape != (n_runs, n_runs):
                raise ValueError(f"stored {key!r} must be {n_runs} x {n_runs}; got shape {values.shape}")
            return values

        means = np.asarray(entry["means"], dtype=np.float64)
        n_runs = means.size
        pvalues, differences = square("pvalues"), square("differences")
        effect_sizes, mc_se = square("effect_sizes"), square("mc_se")
        _freeze(means, pvalues, differences, effect_sizes, mc_se)
        return cls(
            measure=str(entry.get("measure", "")),
            n_runs=n_runs,
            n_dialogues=int(n_dialogues),
            means=means,
            pvalues=pvalues,
            differences=differences,
            effect_sizes=effect_sizes,
            # None (stored JSON): a corpus-level measure, which has no per-item residual.
            residual_variance=float(np.nan if entry.get("residual_variance") is None else entry["residual_variance"]),
            mc_standard_errors=mc_se,
            n_permutations=int(permutations),
            seed=int(seed),
            mc_variance_inflation=_check_inflation(entry.get("mc_variance_inflation", 1.0)),
        )

    @classmethod
    def from_counts(
        cls,
        counts: np.ndarray,
        means: Sequence[float] | np.ndarray,
        *,
        residual_variance: float,
        effect_sizes_defined: bool,
        n_permutations: int,
        seed: int,
        n_dialogues: int,
        measure: str = "",
        mc_variance_inflation: float = 1.0,
    ) -> TukeyHSDResult:
        """Rebuild a full result from its sufficient numbers, bit for bit.

        ``counts`` are the exceedance counts ``#{b : range_b >= |differences[i, j]|}`` of the
        pairs i < j in row-major order (:meth:`exceedance_counts`); ``means``, ``residual_variance``
        ``effect_sizes_defined`` and ``mc_variance_inflation`` come from the original result. p-values, differences,
        effect sizes and Monte Carlo standard errors are recomputed with the formulas of
        :func:`randomised_tukey_hsd`, in the same order of operations, so every matrix equals the
        original exactly (k (k - 1) / 2 counts stand in for four k x k matrices in storage).
        """
        means = np.array(means, dtype=np.float64)
        k = means.size
        n_permutations = _check_count(n_permutations, "n_permutations")
        counts = np.asarray(counts, dtype=np.int64)
        upper = np.triu_indices(k, 1)
        if counts.shape != upper[0].shape:
            raise ValueError(f"{measure or 'measure'}: {counts.size} pair counts given, expected {upper[0].size} "
                             f"for {k} runs")
        if counts.size and (counts.min() < 0 or counts.max() > n_permutations):
            raise ValueError(f"{measure or 'measure'}: pair counts must lie in [0, {n_permutations}]")
        pvalues = np.ones((k, k))
        pvalues[upper] = (counts + 1) / (n_permutations + 1)
        pvalues[upper[1], upper[0]] = pvalues[upper]
        differences = means[:, None] - means[None, :]
        if effect_sizes_defined:
            effect_sizes = differences / math.sqrt(residual_variance)
        else:
            effect_sizes = np.full_like(differences, np.nan)
        inflation = _check_inflation(mc_variance_inflation)
        mc_se = _mc_standard_errors(pvalues, n_permutations, inflation)
        _freeze(means, pvalues, differences, effect_sizes, mc_se)
        return cls(
            measure=measure,
            n_runs=k,
            n_dialogues=int(n_dialogues),
            means=means,
            pvalues=pvalues,
            differences=differences,
            effect_sizes=effect_sizes,
            residual_variance=float(residual_variance),
            mc_standard_errors=mc_se,
            n_permutations=n_permutations,
            seed=int(seed),
            mc_variance_inflation=inflation,
        )

    def exceedance_counts(self) -> np.ndarray:
        """``#{b : range_b >= |differences[i, j]|}`` of the pairs i < j in row-major order (int64),
        read back from ``pvalues = (count + 1) / (B + 1)``; :meth:`from_counts` is the inverse."""
        upper = self.pvalues[np.triu_indices(self.n_runs, 1)]
        counts = np.rint(upper * (self.n_permutations + 1)).astype(np.int64) - 1
        if counts.size and (counts.min() < 0 or counts.max() > self.n_permutations):
            raise ValueError("p-values are not of the form (count + 1) / (B + 1)")
        return counts

    @property
    def effect_sizes_defined(self) -> bool:
        """False when V_E is round-off and every effect size is NaN (see :func:`residual_variance`)."""
        return bool(np.isfinite(self.effect_sizes).all())

    def pairs(self) -> Iterator[tuple[int, int, float, float]]:
        """Yield ``(i, j, means[i] - means[j], p)`` for every run pair with i < j."""
        for i, j in itertools.combinations(range(self.n_runs), 2):
            yield i, j, float(self.differences[i, j]), float(self.pvalues[i, j])

    def best_run(self, lower_is_better: bool = True) -> int:
        """Index of the run with the best mean (the first one on an exact tie)."""
        return int(np.argmin(self.means) if lower_is_better else np.argmax(self.means))

    def top_group(self, alpha: float = SIGNIFICANCE_LEVEL, lower_is_better: bool = True) -> tuple[int, ...]:
        """Runs not significantly different from the best run at ``alpha`` (best included).

        Run j is in the group when ``p[best, j] >= alpha``. Returned best first, then by mean
        (ties by index), so ``top_group()[0]`` is the best run.
        """
        _check_alpha(alpha)
        best = self.best_run(lower_is_better)
        members = [j for j in range(self.n_runs) if j == best or self.pvalues[best, j] >= alpha]
        sign = 1.0 if lower_is_better else -1.0
        members.sort(key=lambda j: (j != best, sign * self.means[j], j))
        return tuple(members)

    def significant_pairs(self, alpha: float = SIGNIFICANCE_LEVEL) -> list[tuple[int, int]]:
        """Run pairs (i < j) with ``p < alpha``."""
        _check_alpha(alpha)
        return [(i, j) for i, j, _, p in self.pairs() if p < alpha]


@dataclass(frozen=True, eq=False)
class BootstrapResult:
    """Per-run means with percentile bootstrap intervals (dialogues resampled, runs kept together).

    ``lower[j]`` and ``upper[j]`` are the ``(1 - level) / 2`` and ``(1 + level) / 2``
    quantiles of run j's mean over the resamples (NumPy's default linear interpolation);
    ``standard_errors[j]`` is the standard deviation of those resampled means.
    """

    means: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    standard_errors: np.ndarray
    level: float
    n_resamples: int
    seed: int
    n_dialogues: int
    n_runs: int


@dataclass(frozen=True)
class KendallTauResult:
    """Kendall's tau-b between two measures' run rankings, with a dialogue-bootstrap interval.

    ``n_undefined`` counts resamples where tau-b was undefined (every run mean tied under one
    measure); the interval is taken over the others.
    """

    tau: float
    lower: float
    upper: float
    level: float
    n_resamples: int
    seed: int
    n_undefined: int = 0


# --------------------------------------------------------------------------- validation


def _check_matrix(matrix: object, name: str = "score matrix") -> np.ndarray:
    """Return ``matrix`` as a C-contiguous float64 (n, k) array, or raise ValueError saying what is wrong."""
    try:
        array = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: cannot be read as an array of numbers ({exc})") from None
    if array.ndim != 2:
        raise ValueError(f"{name}: must be 2-dimensional (dialogues x runs); got shape {array.shape}")
    n_dialogues, n_runs = array.shape
    if n_runs < 2:
        raise ValueError(f"{name}: needs at least 2 runs to compare; got {n_runs}")
    if n_dialogues < 2:
        raise ValueError(f"{name}: needs at least 2 dialogues; got {n_dialogues}")
    finite = np.isfinite(array)
    if not finite.all():
        bad = np.argwhere(~finite)
        d, j = bad[0]
        raise ValueError(
            f"{name}: {len(bad)} value(s) are NaN or infinite (first at dialogue {d}, run {j}); "
            "every run needs a finite score on every dialogue"
        )
    return np.ascontiguousarray(array)


def _check_count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{what} must be a positive integer; got {value!r}")
    return int(value)


def _check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= _MASK64:
        raise ValueError(f"seed must be an integer in [0, 2**64); got {seed!r}")
    return int(seed)


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1; got {alpha!r}")


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be strictly between 0 and 1; got {level!r}")


def _check_matrices(matrices: Mapping[str, object]) -> dict[str, np.ndarray]:
    if not isinstance(matrices, Mapping) or not matrices:
        raise ValueError("matrices must be a non-empty mapping from measure name to score matrix")
    checked = {str(name): _check_matrix(m, f"measure {name!r}") for name, m in matrices.items()}
    shapes = {name: m.shape for name, m in checked.items()}
    if len(set(shapes.values())) > 1:
        listing = ", ".join(f"{name!r}: {shape}" for name, shape in shapes.items())
        raise ValueError(f"all score matrices must have the same shape (same dialogues and runs); got {listing}")
    return checked


# --------------------------------------------------------------------------- ANOVA and effect sizes


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


def _freeze(*arrays: np.ndarray) -> None:
    for array in arrays:
        array.setflags(write=False)


def _check_inflation(value: Any) -> float:
    inflation = float(value)
    if not (math.isfinite(inflation) and inflation >= 1.0):
        raise ValueError(f"mc_variance_inflation must be a finite number >= 1; got {value!r}")
    return inflation


def _mc_standard_errors(pvalues: np.ndarray, n_permutations: int, inflation: float) -> np.ndarray:
    """``sqrt(inflation p (1 - p) / B)``. Multiplying by an inflation of 1 is exact, so the full
    test's errors stay bit for bit the binomial ``sqrt(p (1 - p) / B)``."""
    return np.sqrt(inflation * (pvalues * (1.0 - pvalues)) / n_permutations)


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


# --------------------------------------------------------------------------- permutation stream


@functools.cache
def _dice_batches(n_runs: int) -> tuple[tuple[int, int, int, int], ...]:
    """Batches ``(first_i, stop_i, product, threshold)`` of the shuffle's dice for k runs.

    Die i (for i = 1..k-1) is uniform on {0..i}; consecutive dice are grouped while the
    product of their sizes stays <= 2^16 (a die larger than that gets a batch of its own).
    ``threshold = 2^32 mod product``: words u with ``(u * product) mod 2^32 < threshold``
    are rejected, which makes the batch exactly uniform (Lemire 2019).
    """
    batches = []
    i = 1
    while i < n_runs:
        first, product = i, 1
        while i < n_runs and (i == first or product * (i + 1) <= _BATCH_PRODUCT_LIMIT):
            product *= i + 1
            i += 1
        batches.append((first, i, product, (1 << 32) % product))
    return tuple(batches)


def _mix64(z: int) -> int:
    """SplitMix64 finaliser on a Python int (the reference the vectorised versions must match)."""
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK64
    return z ^ (z >> 31)


def _row_permutation(seed: int, step: int, dialogue: int, n_dialogues: int, n_runs: int) -> list[int]:
    """The permutation ``pi`` of (step, dialogue), in pure Python: see the module docstring."""
    state = _mix64((seed + (step * n_dialogues + dialogue + 1) * _GAMMA) & _MASK64)
    word_index = 0

    def next_word() -> int:
        nonlocal word_index
        z = _mix64((state + (word_index // 2 + 1) * _GAMMA) & _MASK64)
        word = z & _MASK32 if word_index % 2 == 0 else z >> 32
        word_index += 1
        return word

    dice = [0] * n_runs
    for first, stop, product, threshold in _dice_batches(n_runs):
        word = next_word()
        while (word * product) & _MASK32 < threshold:
            word = next_word()
        for i in range(first, stop):
            word *= i + 1
            dice[i] = word >> 32
            word &= _MASK32
    perm = [0] * n_runs
    for i in range(1, n_runs):
        j = dice[i]
        perm[i] = perm[j]
        perm[j] = i
    return perm


def _mix64_array(z: np.ndarray) -> np.ndarray:
    # uint64 array arithmetic wraps modulo 2^64 silently, which is what SplitMix64 wants.
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return z ^ (z >> np.uint64(31))


def _words_at(states: np.ndarray, index: np.ndarray) -> np.ndarray:
    """32-bit word number ``index`` of each row stream, as uint64."""
    index = index.astype(np.uint64)
    z = _mix64_array(states + (index // np.uint64(2) + np.uint64(1)) * np.uint64(_GAMMA))
    return np.where(index % np.uint64(2) == 0, z & np.uint64(_MASK32), z >> np.uint64(32))


def _permutations_numpy(seed: int, first_step: int, n_steps: int, n_dialogues: int, n_runs: int) -> np.ndarray:
    """Permutations of steps ``first_step ..`` as an array ``perm[s * n + d, c]``.

    Vectorised over rows; identical to :func:`_row_permutation` row by row.
    """
    n_rows = n_steps * n_dialogues
    row_ids = np.arange(first_step * n_dialogues, first_step * n_dialogues + n_rows, dtype=np.uint64)
    return _permutations_for_rows(seed, row_ids, n_runs)


def _permutations_for_rows(seed: int, row_ids: np.ndarray, n_runs: int) -> np.ndarray:
    """The permutations of the stream's rows ``row_ids`` (``b * n + d``) as ``perm[row, c]``."""
    n_rows = row_ids.shape[0]
    states = _mix64_array(np.uint64(seed) + (row_ids + np.uint64(1)) * np.uint64(_GAMMA))
    batches = _dice_batches(n_runs)
    n_words = len(batches)
    # The words each row needs when nothing is rejected; rejected rows fetch theirs on demand.
    z = _mix64_array(
        states[:, None] + np.arange(1, (n_words + 1) // 2 + 1, dtype=np.uint64)[None, :] * np.uint64(_GAMMA)
    )
    planned = np.empty((n_rows, 2 * z.shape[1]), dtype=np.uint64)
    planned[:, 0::2] = z & np.uint64(_MASK32)
    planned[:, 1::2] = z >> np.uint64(32)
    skipped = np.zeros(n_rows, dtype=np.int64)  # words rejected so far, per row
    perm = np.empty((n_rows, n_runs), dtype=np.intp)
    flat = perm.reshape(-1)
    perm[:, 0] = 0
    # Row-major, so that each row's reads and writes stay within its own cache lines.
    row_starts = np.arange(0, n_rows * n_runs, n_runs, dtype=np.uint64)
    mask32 = np.uint64(_MASK32)
    target = np.empty(n_rows, dtype=np.uint64)
    # Dice are below 2^32 and targets below 2^63, so the uint64 buffer reads as intp unchanged.
    target_index = target.view(np.intp)
    for q, (first, stop, product, threshold) in enumerate(batches):
        words = planned[:, q].copy()
        shifted = np.flatnonzero(skipped)
        if shifted.size:
            words[shifted] = _words_at(states[shifted], q + skipped[shifted])
        rejected = np.flatnonzero((words * np.uint64(product)) & mask32 < np.uint64(threshold))
        while rejected.size:
            skipped[rejected] += 1
            words[rejected] = _words_at(states[rejected], q + skipped[rejected])
            still = (words[rejected] * np.uint64(product)) & mask32 < np.uint64(threshold)
            rejected = rejected[still]
        for i in range(first, stop):
            np.multiply(words, np.uint64(i + 1), out=words)
            np.right_shift(words, np.uint64(32), out=target)  # the die j_i
            np.bitwise_and(words, mask32, out=words)
            np.add(target, row_starts, out=target)
            perm[:, i] = np.take(flat, target_index, mode="clip")
            # An np.intp scalar, not a Python int: NumPy's scatter is ~5x slower with the latter.
            flat[target_index] = np.intp(i)
    return perm


def _ranges_numpy(centred: list[np.ndarray], seed: int, n_permutations: int, chunk_size: int | None) -> np.ndarray:
    """Permuted ranges of column means, shape (measures, B), with the NumPy backend."""
    n, k = centred[0].shape
    steps = chunk_size or max(1, _NUMPY_CELLS_PER_CHUNK // (n * k))
    ranges = np.empty((len(centred), n_permutations))
    for first in range(0, n_permutations, steps):
        count = min(steps, n_permutations - first)
        perm = _permutations_numpy(seed, first, count, n, k)
        # Column pi[c] of step s collects the score that sat in column c: a scatter-add.
        perm += (np.arange(count, dtype=np.intp) * k).repeat(n)[:, None]
        bins = perm.reshape(-1)
        for m, x in enumerate(centred):
            weights = np.tile(x, (count, 1)).reshape(-1)
            sums = np.bincount(bins, weights=weights, minlength=count * k).reshape(count, k)
            ranges[m, first : first + count] = (sums.max(axis=1) - sums.min(axis=1)) / n
            del weights, sums
        # Free this chunk before the next one is drawn, so that at most one chunk is held.
        del perm, bins
    return ranges


# --------------------------------------------------------------------------- numba backend

# The workqueue threading layer aborts the process when two threads launch parallel kernels
# at once (e.g. a threaded web worker), so kernel launches are serialised.
_NUMBA_LOCK = threading.Lock()


# Set to the numba module by _numba_kernel(); the kernel below reads _numba.prange from it.
# Importing numba lazily keeps `import scoring.stats` fast for processes that never test.
_numba = None


def _ranges_kernel(x, seed, first_step, n_steps, tile, firsts, stops, products, thresholds, out):
    """Fused Numba kernel: permute, scatter-add and take ranges for a chunk of steps.

    x: centred scores (n, k, m); out: (m, n_steps) ranges of permuted column means. The
    permutation stream is the module docstring's, written out with SplitMix64 inlined
    twice: a module-level function (not a closure over a jitted helper) is what lets Numba
    reuse its on-disk cache across processes.
    """
    n, k, m = x.shape
    n_batches = products.shape[0]
    gamma = np.uint64(_GAMMA)
    mix1 = np.uint64(_MIX1)
    mix2 = np.uint64(_MIX2)
    mask32 = np.uint64(_MASK32)
    n_u = np.uint64(n)
    n_tiles = (n_steps + tile - 1) // tile
    for t in _numba.prange(n_tiles):
        s_lo = t * tile
        s_count = min(n_steps, s_lo + tile) - s_lo
        sums = np.zeros((s_count, k, m))
        perm = np.empty(k, np.uint64)
        # Dialogue-major inside a tile, so each dialogue's scores are read from memory once
        # per tile rather than once per step.
        for d in range(n):
            xd = x[d]
            for sl in range(s_count):
                step = np.uint64(first_step + s_lo + sl)
                z = seed + (step * n_u + np.uint64(d) + np.uint64(1)) * gamma
                z = (z ^ (z >> np.uint64(30))) * mix1
                z = (z ^ (z >> np.uint64(27))) * mix2
                state = z ^ (z >> np.uint64(31))
                w = 0
                perm[0] = np.uint64(0)
                for q in range(n_batches):
                    product = products[q]
                    while True:
                        if w % 2 == 0:
                            z = state + np.uint64(w // 2 + 1) * gamma
                            z = (z ^ (z >> np.uint64(30))) * mix1
                            z = (z ^ (z >> np.uint64(27))) * mix2
                            z = z ^ (z >> np.uint64(31))
                            u = z & mask32
                        else:
                            u = z >> np.uint64(32)
                        w += 1
                        if (u * product) & mask32 >= thresholds[q]:
                            break
                    # Each die feeds the inside-out shuffle at once (both run over i upwards).
                    for i in range(firsts[q], stops[q]):
                        u = u * np.uint64(i + 1)
                        j = u >> np.uint64(32)
                        u = u & mask32
                        perm[i] = perm[j]
                        perm[j] = np.uint64(i)
                acc = sums[sl]
                if m == 1:
                    for c in range(k):
                        acc[perm[c], 0] += xd[c, 0]
                else:
                    for c in range(k):
                        row = acc[perm[c]]
                        xc = xd[c]
                        for mm in range(m):
                            row[mm] += xc[mm]
        for sl in range(s_count):
            for mm in range(m):
                lo = sums[sl, 0, mm]
                hi = lo
                for j in range(1, k):
                    v = sums[sl, j, mm]
                    lo = min(lo, v)
                    hi = max(hi, v)
                out[mm, s_lo + sl] = (hi - lo) / n


@functools.cache
def _numba_kernel():
    """The jitted kernel (compiled on first call, cached on disk when possible), or None without Numba."""
    global _numba
    try:
        import numba
    except ImportError:
        return None
    _numba = numba
    try:
        return numba.njit(parallel=True, cache=True)(_ranges_kernel)
    except RuntimeError:  # no writable cache directory: compile in each process instead
        return numba.njit(parallel=True, cache=False)(_ranges_kernel)


def _numba_threads() -> int:
    import numba

    return int(numba.get_num_threads())


def numba_available() -> bool:
    """True when the Numba backend can be used (Numba importable; compiles on first use)."""
    return _numba_kernel() is not None


def _ranges_numba(centred: list[np.ndarray], seed: int, n_permutations: int, chunk_size: int | None) -> np.ndarray:
    kernel = _numba_kernel()
    n, k = centred[0].shape
    x = np.ascontiguousarray(np.stack(centred, axis=-1))  # (n, k, m): one dialogue's scores together
    batches = _dice_batches(k)
    firsts = np.array([b[0] for b in batches], dtype=np.int64)
    stops = np.array([b[1] for b in batches], dtype=np.int64)
    products = np.array([b[2] for b in batches], dtype=np.uint64)
    thresholds = np.array([b[3] for b in batches], dtype=np.uint64)
    steps = chunk_size or _NUMBA_STEPS_PER_CHUNK
    ranges = np.empty((len(centred), n_permutations))
    threads = _numba_threads()
    for first in range(0, n_permutations, steps):
        count = min(steps, n_permutations - first)
        # Tiles of up to 32 steps share each dialogue's cache lines; keep >= 4 tiles per thread.
        tile = max(1, min(32, count // (4 * threads)))
        out = np.empty((len(centred), count))
        with _NUMBA_LOCK:
            kernel(x, np.uint64(seed), first, count, tile, firsts, stops, products, thresholds, out)
        ranges[:, first : first + count] = out
    return ranges


# --------------------------------------------------------------------------- recombined steps
#
# At full scale (10,000 dialogues x 100 runs x 21 measures x B = 10,000: 2.1e11 cell updates)
# Algorithm 1 costs a minute on two cores. The "recombined" method draws the same kind of step
# with a fraction of the work (issue 28):
#
# * the dialogues are cut into G consecutive groups; for each group g a pool of P partial sums
#   T[g, r] = sum over d in g of M*[d] with the row permutations of steps r = 0..P-1 of the
#   stream above (P = ceil(B / D), D the pool divisor of the plan below);
# * step b takes, for every group, an entry r(b, g) of its pool and a uniform permutation
#   sigma(b, g) of the runs, and adds sigma(b, g) applied to T[g, r(b, g)].
#
# Every step is an exact draw of Algorithm 1: within a step each dialogue's row is permuted by
# sigma(b, g) o pi(r, d), and for any fixed sigma the pi(r, d) of distinct dialogues are
# independent and uniform, so these compositions are too. Each share of steps whose range
# reaches a difference, count / B, is therefore an unbiased estimate of the permutation p-value
# p, as in the full test. What is shared is work between steps, and with it a little
# dependence: given the pools the steps are independent, so the variance of count / B is the
# binomial p (1 - p) / B plus (1 - 1/B) times the variance, over the pools, of the exceedance
# probability given the pools. That probability depends on the pools through
# averages over each group's P entries, so its variance is of order 1 / (G P), and the variance
# of the estimate is p (1 - p) / B times an inflation 1 + A(k) D / G. The inflation was measured
# with benchmarks/tukey_recombined.py --calibrate (variance over 40 seeds against the binomial,
# at pool divisors large enough to measure it; docs/statistics.md has the figures): A(k) fell
# from 0.46-0.49 at k = 5 to 0.29-0.31 at 12, 0.20-0.24 at 30, 0.13-0.17 at 100 and about 0.06
# at 500, which A(k) = INFLATION_SCALE / (k - 1)^(1/3) meets or exceeds (0.50, 0.36, 0.26, 0.17,
# 0.10) within the noise of the measurement (but for 0.31 at k = 30 with pools of 2 entries,
# far from the hundreds the plan makes). The plan takes the largest D (at most
# MAX_POOL_DIVISOR) whose modelled inflation stays within 1 + INFLATION_BUDGET: Monte Carlo
# standard errors within 2.5% of the full test's (as if B were 5% smaller). Cost: P n k m for
# the pools plus B G k m for the steps, instead of B n k m. Below RECOMBINE_MIN_DIVISOR the
# pools would save too little to be worth the dependence, and "auto" keeps the full test.
#
# The steps are made in chunks, each step adding its G pool entries to 0 in group order (steps
# outer, groups inner), so the order of additions, and with it every bit of the sums, is the
# same on both backends and for any chunk size. Up to _RECOMBINE_POOL_BYTES of pools only a
# chunk's sums are held; beyond that (10,000 x 100 x 21 at B = 10,000: 598 MB of pools) the
# groups are taken in blocks whose entries are added to the held B k m sums, which keeps that
# order.
#
# sigma(b, g) is the stream's permutation of row (b, g) of a G-dialogue stream under a seed
# derived from ``seed``, r(b, g) the high bits of a SplitMix64 word under another one.

RECOMBINE_MIN_CELLS = 4_000_000_000  # B n k m above which "auto" recombines (the full test: > ~1 s)
RECOMBINE_GROUPS = 64
RECOMBINE_MIN_DIALOGUES = 512  # "auto" recombines only with >= 32 groups of >= 16 dialogues
# The inflation model 1 + INFLATION_SCALE D / (G (k - 1)^(1/3)) and its budget, as exact
# fractions so that the plan (and with it every p-value) is the same on every platform.
INFLATION_SCALE = Fraction(4, 5)
INFLATION_BUDGET = Fraction(1, 20)
MAX_POOL_DIVISOR = 64
RECOMBINE_MIN_DIVISOR = 4
_RECOMBINE_CELLS_PER_CHUNK = 1 << 21  # (step, run, measure) sums per chunk of steps: 16 MiB
# Pools of all groups are held at once up to this size; above it (they take G / D times the
# B k m sums, 3.6 times at k = 100, whatever B), blocks of groups are added to the held
# sums instead, which bounds the memory by B k m + this.
_RECOMBINE_POOL_BYTES = 1 << 27
_SIGMA_SALT = 0x243F6A8885A308D3  # digits of pi: seeds of the sigma and pick streams
_PICK_SALT = 0x13198A2E03707344


def _recombine_plan(n_dialogues: int, n_runs: int, n_permutations: int) -> tuple[int, int, int]:
    """(groups G, pool divisor D, pool entries per group P) of the recombined method: the largest
    D <= MAX_POOL_DIVISOR with ``INFLATION_SCALE D / (G (k - 1)^(1/3)) <= INFLATION_BUDGET``,
    i.e. ``(INFLATION_SCALE D)^3 <= (k - 1) (INFLATION_BUDGET G)^3``, decided in exact arithmetic."""
    groups = max(1, min(RECOMBINE_GROUPS, n_dialogues // 16))
    bound = (n_runs - 1) * (INFLATION_BUDGET * groups) ** 3
    divisor = 1
    while divisor < MAX_POOL_DIVISOR and (INFLATION_SCALE * (divisor + 1)) ** 3 <= bound:
        divisor += 1
    return groups, divisor, max(1, -(-n_permutations // divisor))


def recombined_variance_inflation(n_dialogues: int, n_runs: int, n_permutations: int) -> float:
    """The modelled inflation ``1 + INFLATION_SCALE D / (G (k - 1)^(1/3))`` of the Monte Carlo
    variance of a recombined p-value over the binomial, with the G and D of the plan: what the
    recombined results report (``TukeyHSDResult.mc_variance_inflation``). The model meets or
    exceeds the measured inflation (see above), so the standard error it gives errs on the large
    side; it is at most ``1 + INFLATION_BUDGET`` whenever the plan could honour the budget."""
    groups, divisor, _ = _recombine_plan(n_dialogues, n_runs, n_permutations)
    return 1.0 + float(INFLATION_SCALE) * divisor / (groups * max(1, n_runs - 1) ** (1.0 / 3.0))


def _group_bounds(n_dialogues: int, groups: int) -> list[tuple[int, int]]:
    edges = [n_dialogues * g // groups for g in range(groups + 1)]
    return list(itertools.pairwise(edges))


def _derived_seeds(seed: int) -> tuple[int, int]:
    return _mix64(seed ^ _SIGMA_SALT), _mix64(seed ^ _PICK_SALT)


def _picks(pick_seed: int, steps: np.ndarray, group: int, groups: int, pool: int) -> np.ndarray:
    """r(b, g) for the steps ``steps`` of group ``group``: the high 32 bits of a word times P."""
    rows = steps.astype(np.uint64) * np.uint64(groups) + np.uint64(group)
    z = _mix64_array(np.uint64(pick_seed) + (rows + np.uint64(1)) * np.uint64(_GAMMA))
    return ((z >> np.uint64(32)) * np.uint64(pool) >> np.uint64(32)).astype(np.intp)


def _pool_numpy(x: np.ndarray, seed: int, lo: int, hi: int, n_dialogues: int, pool: int) -> np.ndarray:
    """T[r] = sum over dialogues lo..hi-1 of their rows permuted as in step r: (pool, k, m)."""
    size, k, m = hi - lo, x.shape[1], x.shape[2]
    out = np.empty((pool, k, m))
    steps = max(1, _NUMPY_CELLS_PER_CHUNK // (size * k))
    local = np.arange(lo, hi, dtype=np.uint64)
    for first in range(0, pool, steps):
        count = min(steps, pool - first)
        rows = (np.arange(first, first + count, dtype=np.uint64)[:, None] * np.uint64(n_dialogues)
                + local[None, :]).reshape(-1)
        perm = _permutations_for_rows(seed, rows, k)
        perm += (np.arange(count, dtype=np.intp) * k).repeat(size)[:, None]
        bins = perm.reshape(-1)
        for mm in range(m):
            weights = np.tile(x[lo:hi, :, mm], (count, 1)).reshape(-1)
            out[first : first + count, :, mm] = np.bincount(bins, weights=weights,
                                                            minlength=count * k).reshape(count, k)
    return out


def _pool_kernel(x, seed, lo, hi, n, pool, tile, firsts, stops, products, thresholds, out):
    """Numba: out[r] = sum over dialogues lo..hi-1 of x[d] permuted as in step r (stream above).

    Tiles of ``tile`` pool entries, dialogue-major inside a tile (as ``_ranges_kernel``): each
    dialogue's scores are read once per tile, not once per entry."""
    k, m = x.shape[1], x.shape[2]
    n_batches = products.shape[0]
    gamma = np.uint64(_GAMMA)
    mix1 = np.uint64(_MIX1)
    mix2 = np.uint64(_MIX2)
    mask32 = np.uint64(_MASK32)
    n_u = np.uint64(n)
    n_tiles = (pool + tile - 1) // tile
    for t in _numba.prange(n_tiles):
        r_lo = t * tile
        r_count = min(pool, r_lo + tile) - r_lo
        for rr in range(r_count):
            out[r_lo + rr, :, :] = 0.0
        perm = np.empty(k, np.uint64)
        for d in range(lo, hi):
            xd = x[d]
            for rr in range(r_count):
                z = seed + (np.uint64(r_lo + rr) * n_u + np.uint64(d) + np.uint64(1)) * gamma
                z = (z ^ (z >> np.uint64(30))) * mix1
                z = (z ^ (z >> np.uint64(27))) * mix2
                state = z ^ (z >> np.uint64(31))
                w = 0
                perm[0] = np.uint64(0)
                for q in range(n_batches):
                    product = products[q]
                    while True:
                        if w % 2 == 0:
                            z = state + np.uint64(w // 2 + 1) * gamma
                            z = (z ^ (z >> np.uint64(30))) * mix1
                            z = (z ^ (z >> np.uint64(27))) * mix2
                            z = z ^ (z >> np.uint64(31))
                            u = z & mask32
                        else:
                            u = z >> np.uint64(32)
                        w += 1
                        if (u * product) & mask32 >= thresholds[q]:
                            break
                    for i in range(firsts[q], stops[q]):
                        u = u * np.uint64(i + 1)
                        j = u >> np.uint64(32)
                        u = u & mask32
                        perm[i] = perm[j]
                        perm[j] = np.uint64(i)
                acc = out[r_lo + rr]
                for c in range(k):
                    row = acc[perm[c]]
                    xc = xd[c]
                    for mm in range(m):
                        row[mm] += xc[mm]


def _recombine_kernel(pools, first_group, groups, sigma_seed, pick_seed, first_step, firsts, stops, products,
                      thresholds, sums):
    """Numba: sums[s] += pools[i, r(b, g)] with its columns moved by sigma(b, g), for the groups
    g = first_group + i in order and the steps b = first_step + s of one chunk (G = ``groups``)."""
    block, pool, k, m = pools.shape
    n_steps = sums.shape[0]
    n_batches = products.shape[0]
    gamma = np.uint64(_GAMMA)
    mix1 = np.uint64(_MIX1)
    mix2 = np.uint64(_MIX2)
    mask32 = np.uint64(_MASK32)
    groups_u = np.uint64(groups)
    for s in _numba.prange(n_steps):
        acc = sums[s]
        perm = np.empty(k, np.uint64)
        for i_group in range(block):
            row_id = np.uint64(first_step + s) * groups_u + np.uint64(first_group + i_group) + np.uint64(1)
            z = pick_seed + row_id * gamma
            z = (z ^ (z >> np.uint64(30))) * mix1
            z = (z ^ (z >> np.uint64(27))) * mix2
            z = z ^ (z >> np.uint64(31))
            r = ((z >> np.uint64(32)) * np.uint64(pool)) >> np.uint64(32)
            z = sigma_seed + row_id * gamma
            z = (z ^ (z >> np.uint64(30))) * mix1
            z = (z ^ (z >> np.uint64(27))) * mix2
            state = z ^ (z >> np.uint64(31))
            w = 0
            perm[0] = np.uint64(0)
            for q in range(n_batches):
                product = products[q]
                while True:
                    if w % 2 == 0:
                        z = state + np.uint64(w // 2 + 1) * gamma
                        z = (z ^ (z >> np.uint64(30))) * mix1
                        z = (z ^ (z >> np.uint64(27))) * mix2
                        z = z ^ (z >> np.uint64(31))
                        u = z & mask32
                    else:
                        u = z >> np.uint64(32)
                    w += 1
                    if (u * product) & mask32 >= thresholds[q]:
                        break
                for i in range(firsts[q], stops[q]):
                    u = u * np.uint64(i + 1)
                    j = u >> np.uint64(32)
                    u = u & mask32
                    perm[i] = perm[j]
                    perm[j] = np.uint64(i)
            entry = pools[i_group, r]
            for c in range(k):
                row = acc[perm[c]]
                src = entry[c]
                for mm in range(m):
                    row[mm] += src[mm]


@functools.cache
def _recombine_kernels():
    """The two jitted kernels of the recombined method (cached on disk when possible)."""
    if _numba_kernel() is None:
        return None
    try:
        return (_numba.njit(parallel=True, cache=True)(_pool_kernel),
                _numba.njit(parallel=True, cache=True)(_recombine_kernel))
    except RuntimeError:
        return (_numba.njit(parallel=True, cache=False)(_pool_kernel),
                _numba.njit(parallel=True, cache=False)(_recombine_kernel))


def _kernel_tables(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The dice batches of k runs as the kernels' arrays (firsts, stops, products, thresholds)."""
    batches = _dice_batches(k)
    return (np.array([b[0] for b in batches], dtype=np.int64), np.array([b[1] for b in batches], dtype=np.int64),
            np.array([b[2] for b in batches], dtype=np.uint64), np.array([b[3] for b in batches], dtype=np.uint64))


def _pools(x: np.ndarray, seed: int, bounds: list[tuple[int, int]], pool: int, use_numba: bool) -> np.ndarray:
    """The pools T[g, r] of the groups with dialogues ``bounds`` (lo, hi), (groups, P, k, m)."""
    n, k, m = x.shape
    pools = np.empty((len(bounds), pool, k, m))
    if not use_numba:
        for g, (lo, hi) in enumerate(bounds):
            pools[g] = _pool_numpy(x, seed, lo, hi, n, pool)
        return pools
    pool_kernel, _ = _recombine_kernels()
    firsts, stops, products, thresholds = _kernel_tables(k)
    tile = max(1, min(32, pool // (4 * _numba_threads())))
    for g, (lo, hi) in enumerate(bounds):
        with _NUMBA_LOCK:
            pool_kernel(x, np.uint64(seed), lo, hi, n, pool, tile, firsts, stops, products, thresholds, pools[g])
    return pools


def _recombine_numpy(pools: np.ndarray, first_group: int, groups: int, sigma_seed: int, pick_seed: int, first: int,
                     sums: np.ndarray) -> None:
    """The NumPy form of ``_recombine_kernel``: adds the block's groups to the sums of steps first.."""
    block, pool, k, _ = pools.shape
    count = sums.shape[0]
    steps = np.arange(first, first + count)
    for i in range(block):
        g = first_group + i
        rows = steps.astype(np.uint64) * np.uint64(groups) + np.uint64(g)
        sigma = _permutations_for_rows(sigma_seed, rows, k)
        # Column c of the pool entry moves to column sigma[c]; a permutation has no repeated
        # column, so the fancy-indexed += adds each value once.
        sums[np.arange(count)[:, None], sigma] += pools[i, _picks(pick_seed, steps, g, groups, pool)]


def _recombined_sums(
    x: np.ndarray, seed: int, n_permutations: int, use_numba: bool
) -> Iterator[tuple[int, np.ndarray]]:
    """The permuted column sums of the recombined steps in chunks: yields ``(first, sums)`` with
    ``sums[s]`` (k, m) the sums of step ``first + s``. Identical on both backends, for any chunk
    and block sizes: every step adds its groups' entries to 0 in group order."""
    n, k, m = x.shape
    groups, _, pool = _recombine_plan(n, k, n_permutations)
    sigma_seed, pick_seed = _derived_seeds(seed)
    bounds = _group_bounds(n, groups)
    chunk = max(1, _RECOMBINE_CELLS_PER_CHUNK // (k * m))
    per_block = max(1, _RECOMBINE_POOL_BYTES // (pool * k * m * 8))
    if use_numba:
        _, kernel = _recombine_kernels()
        tables = _kernel_tables(k)

    def add(pools: np.ndarray, first_group: int, first: int, sums: np.ndarray) -> None:
        if use_numba:
            with _NUMBA_LOCK:
                kernel(pools, first_group, groups, np.uint64(sigma_seed), np.uint64(pick_seed), first, *tables, sums)
        else:
            _recombine_numpy(pools, first_group, groups, sigma_seed, pick_seed, first, sums)

    if per_block >= groups:
        # Every pool fits the byte cap: the steps are made chunk by chunk, and only a chunk's sums are held.
        pools = _pools(x, seed, bounds, pool, use_numba)
        for first in range(0, n_permutations, chunk):
            sums = np.zeros((min(chunk, n_permutations - first), k, m))
            add(pools, 0, first, sums)
            yield first, sums
        return
    # Otherwise blocks of groups, each added to the held sums of every step (B k m, as large B needs).
    sums = np.zeros((n_permutations, k, m))
    for first_group in range(0, groups, per_block):
        pools = _pools(x, seed, bounds[first_group : first_group + per_block], pool, use_numba)
        for first in range(0, n_permutations, chunk):
            add(pools, first_group, first, sums[first : first + chunk])
        del pools
    for first in range(0, n_permutations, chunk):
        yield first, sums[first : first + chunk]


def _recombined_ranges(x: np.ndarray, seed: int, n_permutations: int, use_numba: bool) -> np.ndarray:
    """Permuted ranges of column means of the recombined steps, shape (measures, B); ``x`` is the
    (n, k, m) array of row-centred scores."""
    ranges = np.empty((x.shape[2], n_permutations))
    for first, sums in _recombined_sums(x, seed, n_permutations, use_numba):
        ranges[:, first : first + sums.shape[0]] = ((sums.max(axis=1) - sums.min(axis=1)) / x.shape[0]).T
    return ranges


def _choose_method(method: Method, n_dialogues: int, n_runs: int, n_permutations: int, columns: int) -> str:
    """The method "auto" stands for: recombined at ``B n k columns >= RECOMBINE_MIN_CELLS`` when the
    plan has at least RECOMBINE_MIN_DIALOGUES dialogues and a pool divisor of RECOMBINE_MIN_DIVISOR
    or more; the full test otherwise (every pinned and worked example)."""
    if method not in ("auto", "exact", "recombined"):
        raise ValueError(f"method must be 'auto', 'exact' or 'recombined'; got {method!r}")
    if method != "auto":
        return method
    cells = n_permutations * n_dialogues * n_runs * columns
    _, divisor, _ = _recombine_plan(n_dialogues, n_runs, n_permutations)
    large = cells >= RECOMBINE_MIN_CELLS and n_dialogues >= RECOMBINE_MIN_DIALOGUES
    return "recombined" if large and divisor >= RECOMBINE_MIN_DIVISOR else "exact"


# --------------------------------------------------------------------------- Tukey HSD


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
    "recombined steps" above), or "auto": recombined when ``B * n * k * measures`` reaches
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


# --------------------------------------------------------------------------- corpus-level measures
#
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
    stream of the module docstring, step b and item d), recomputes C for every run and records
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


# --------------------------------------------------------------------------- bootstrap


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


# --------------------------------------------------------------------------- meta-evaluation


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


def _tau_b_kernel(a, b, out):
    """Kendall's tau-b of ``a[r]`` against ``b[r]`` for every row r, into ``out[r]`` (Numba).

    Knight's algorithm (Knight 1966, JASA 61(314)): order the runs by (a, b) with stable sorts;
    n1 counts the pairs tied in a and n3 those tied in both. In that order a pair
    is discordant exactly when its b values are strictly inverted (within a tie in a, b
    ascends), so a second merge sort of b counts the discordant pairs D as it merges; n2
    counts the pairs tied in b. With n0 = k (k - 1) / 2 pairs, the numerator sum s_a s_b is
    n0 - n1 - n2 + n3 - 2 D and the denominator sqrt((n0 - n1) (n0 - n2)): the whole numbers
    the pairwise sum adds up, so the result is the same float. A row is NaN where the pairwise
    form would be: a NaN in it, or one infinity twice (inf - inf is NaN).
    """
    rows, k = a.shape
    for r in _numba.prange(rows):
        x = a[r]
        y = b[r]
        undefined = False
        for values in (x, y):
            up = 0
            down = 0
            for t in range(k):
                v = values[t]
                if v != v:
                    undefined = True
                elif v == np.inf:
                    up += 1
                elif v == -np.inf:
                    down += 1
            if up > 1 or down > 1:
                undefined = True
        if undefined or k < 2:
            out[r] = np.nan
            continue
        # By (a, b): a stable sort by a of the runs sorted by b.
        by_b = np.argsort(y, kind="mergesort")
        order = by_b[np.argsort(x[by_b], kind="mergesort")]
        tied_a = 0
        tied_both = 0
        run_a = 1
        run_both = 1
        for t in range(1, k):
            p = order[t - 1]
            q = order[t]
            if x[q] == x[p]:
                run_a += 1
                if y[q] == y[p]:
                    run_both += 1
                else:
                    tied_both += run_both * (run_both - 1) // 2
                    run_both = 1
            else:
                tied_a += run_a * (run_a - 1) // 2
                tied_both += run_both * (run_both - 1) // 2
                run_a = 1
                run_both = 1
        tied_a += run_a * (run_a - 1) // 2
        tied_both += run_both * (run_both - 1) // 2
        ys = y[order]
        other = np.empty(k)
        discordant = 0
        width = 1
        while width < k:
            lo = 0
            while lo < k:
                mid = min(lo + width, k)
                hi = min(lo + 2 * width, k)
                i = lo
                j = mid
                t = lo
                while i < mid and j < hi:
                    if ys[j] < ys[i]:
                        other[t] = ys[j]
                        discordant += mid - i
                        j += 1
                    else:
                        other[t] = ys[i]
                        i += 1
                    t += 1
                while i < mid:
                    other[t] = ys[i]
                    i += 1
                    t += 1
                while j < hi:
                    other[t] = ys[j]
                    j += 1
                    t += 1
                lo += 2 * width
            ys, other = other, ys
            width *= 2
        tied_b = 0
        run_b = 1
        for t in range(1, k):
            if ys[t] == ys[t - 1]:
                run_b += 1
            else:
                tied_b += run_b * (run_b - 1) // 2
                run_b = 1
        tied_b += run_b * (run_b - 1) // 2
        pairs = k * (k - 1) // 2
        untied_a = pairs - tied_a
        untied_b = pairs - tied_b
        if untied_a > 0 and untied_b > 0:
            numerator = pairs - tied_a - tied_b + tied_both - 2 * discordant
            out[r] = numerator / np.sqrt(float(untied_a) * float(untied_b))
        else:
            out[r] = np.nan


@functools.cache
def _tau_b_numba():
    """The jitted :func:`_tau_b_kernel` (cached on disk when possible), or None without Numba."""
    if _numba_kernel() is None:
        return None
    try:
        return _numba.njit(parallel=True, cache=True)(_tau_b_kernel)
    except RuntimeError:
        return _numba.njit(parallel=True, cache=False)(_tau_b_kernel)


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
