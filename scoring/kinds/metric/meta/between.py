"""Statistics between metrics: the paired bootstrap and paired t-tests of predictive power, the
concordance test against a gold-standard property metric, and discriminative power over the gold's
systems with the shared randomised Tukey HSD."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scoring import stats
from scoring.kinds.metric.formats import MetricGold
from scoring.kinds.metric.meta.inputs import (
    _CELLS_PER_CHUNK,
    _check_positive,
    _json_number,
    _one_blas_thread,
    score_matrix,
)
from scoring.kinds.metric.meta.predictive import ContextCounts

# Differences of predictive power closer than this are ties (round-off of ratios of sums).
_TIE_TOLERANCE = 1e-12


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
