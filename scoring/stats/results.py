"""What the tests return (Tukey HSD, bootstrap intervals, Kendall's tau) and the significance
levels they are read at; the results' shared helpers (read-only arrays, Monte Carlo errors)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scoring.stats.validation import _check_alpha, _check_count, _check_inflation

# The significance level of top groups and significance marks: the conventional 5% of the
# STC-3 and DialEval overviews. Results store the level they were computed at (the server's
# ``TaskStatistics.alpha``), so pages and exports read it back instead of assuming it.
SIGNIFICANCE_LEVEL: float = 0.05
# Discriminative power and delta required are reported at both conventional levels (Sakai,
# SIGIR 2006 reports 5% and 1%).
REPORTED_LEVELS: tuple[float, ...] = (SIGNIFICANCE_LEVEL, 0.01)


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
      the inflation its plan was chosen under (see :mod:`scoring.stats.recombined`), a bound on what
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


def _freeze(*arrays: np.ndarray) -> None:
    for array in arrays:
        array.setflags(write=False)


def _mc_standard_errors(pvalues: np.ndarray, n_permutations: int, inflation: float) -> np.ndarray:
    """``sqrt(inflation p (1 - p) / B)``. Multiplying by an inflation of 1 is exact, so the full
    test's errors stay bit for bit the binomial ``sqrt(p (1 - p) / B)``."""
    return np.sqrt(inflation * (pvalues * (1.0 - pvalues)) / n_permutations)
