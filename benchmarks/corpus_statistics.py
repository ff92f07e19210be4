#!/usr/bin/env python3
"""Speed of the corpus-level tests (issue 26, SIGNIFICANCE-SPEC "Speed"), printed as figures.

1. One corpus measure (BLEU-4: 11 sufficient statistics per row), 20 runs x 10,000 items,
   B = 10,000: ``scoring.stats.corpus_tukey_hsd`` (budget: <= 10 s on 2 cores), and the
   1,000-resample interval (``corpus_bootstrap_intervals``).
2. A response board's statistics (BLEU-4, deltaBLEU-2 and vBLEU as corpus measures, POSSCORE as a
   mean measure; default 13 runs x 1,500 items, B = 10,000, R = 10,000 as the server draws them,
   and meta-evaluation with 1,000 resamples): before issue 26 every measure went through the mean
   path (``randomised_tukey_hsd`` over the four per-item matrices together, a bootstrap per
   measure, ``meta_evaluate``); now ``scoring.significance.measure_tests`` and ``meta_evaluate``
   with the corpus measures. The ratio of the two, measured in one run, is the figure (the rest of
   a burst of uploads, scoring and storing, is unchanged).

    .venv/bin/python benchmarks/corpus_statistics.py
    .venv/bin/python benchmarks/corpus_statistics.py --quick     # smaller, under a minute
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import numpy as np

from scoring import significance, stats  # noqa: E402
from scoring.kinds.base import MeasureSpec  # noqa: E402
from scoring.kinds.response import bleu  # noqa: E402


def bleu_rows(rng: np.random.Generator, n: int, k: int, order: int) -> np.ndarray:
    """Realistic-looking BLEU statistics: (n, k, 2 order + 3), numerators below denominators."""
    length = rng.integers(5, 25, size=(n, k)).astype(float)
    skill = np.linspace(0.25, 0.45, k)
    out = np.empty((n, k, 2 * order + 3))
    for m in range(order):
        den = np.maximum(length - m, 0.0)
        out[:, :, order + m] = den
        out[:, :, m] = rng.binomial(den.astype(int), skill ** (m + 1) + 0.02)
    reference = np.maximum(length + rng.integers(-3, 4, size=(n, k)), 1.0)
    out[:, :, 2 * order] = length
    out[:, :, 2 * order + 1] = reference
    out[:, :, 2 * order + 2] = reference
    return out


def spec(key: str, order: int) -> MeasureSpec:
    return MeasureSpec(key, key, key, key, True, (0.0, 1.0), "benchmark", headline="corpus",
                       corpus=partial(bleu.corpus_score, max_order=order, brevity="closest"),
                       corpus_many=partial(bleu.corpus_scores, max_order=order, brevity="closest"))


def timed(function, *args, **kwargs) -> tuple[float, object]:
    started = time.perf_counter()
    value = function(*args, **kwargs)
    return time.perf_counter() - started, value


def one_measure(n: int, k: int, permutations: int) -> None:
    rng = np.random.default_rng(1)
    rows = bleu_rows(rng, n, k, 4)
    measure = stats.CorpusMeasure(rows, partial(bleu.corpus_scores, max_order=4, brevity="closest"))
    stats.corpus_tukey_hsd({"warm-up": stats.CorpusMeasure(rows[:600, :3], measure.corpus)}, n_permutations=50)
    seconds, result = timed(stats.corpus_tukey_hsd, {"bleu": measure}, n_permutations=permutations, seed=0)
    interval_seconds, intervals = timed(stats.corpus_bootstrap_intervals, measure, n_resamples=1000, seed=0)
    inside = int(((intervals.lower <= intervals.means) & (intervals.means <= intervals.upper)).sum())
    # The machine is shared: a mean measure's test of the same size, timed in the same run, says
    # how loaded it was (the budget's 10 s assume 2 free cores).
    sentence = np.ascontiguousarray(bleu.item_scores(rows.reshape(n * k, -1), 4, "closest").reshape(n, k))
    mean_seconds, _ = timed(stats.randomised_tukey_hsd, {"sentence-bleu": sentence}, n_permutations=permutations,
                            seed=0)
    print(f"one corpus measure (BLEU-4, {rows.shape[2]} statistics a row), {k} runs x {n:,} items, "
          f"B = {permutations:,}: Tukey HSD {seconds:.2f} s (budget 10 s); interval, R = 1,000: "
          f"{interval_seconds:.2f} s; headline inside its interval for {inside} of {k} runs; "
          f"numba: {stats.numba_available()}; for comparison, a mean measure's Tukey HSD of the same size "
          f"(today's path): {mean_seconds:.2f} s")
    del result


def board(n: int, k: int, permutations: int) -> None:
    rng = np.random.default_rng(2)
    specs = {"bleu": spec("bleu", 4), "delta_bleu": spec("delta_bleu", 2), "vbleu": spec("vbleu", 2),
             "posscore": MeasureSpec("posscore", "posscore", "POSSCORE", "POSSCORE", True, (-4.0, 4.0), "benchmark")}
    statistics = {"bleu": bleu_rows(rng, n, k, 4), "delta_bleu": bleu_rows(rng, n, k, 2),
                  "vbleu": bleu_rows(rng, n, k, 2)}
    matrices = {key: np.stack([bleu.item_scores(statistics[key][:, j], 4 if key == "bleu" else 2, "closest")
                               for j in range(k)], axis=1) for key in statistics}
    matrices["posscore"] = rng.normal(0.5, 1.0, size=(n, k)) + np.linspace(0, 0.2, k)
    resamples = min(permutations, 10_000)
    lower = dict.fromkeys(specs, False)

    def before() -> None:
        tukey = stats.randomised_tukey_hsd(matrices, n_permutations=permutations, seed=0)
        for key in matrices:
            stats.bootstrap_confidence_intervals(matrices[key], n_resamples=resamples, seed=0)
        stats.meta_evaluate(tukey, matrices, n_resamples=1000, seed=0, lower_is_better=lower)

    def after() -> None:
        tested = significance.measure_tests(specs, matrices, statistics, permutations=permutations, seed=0,
                                            resamples=resamples, level=0.95)
        results = {key: value.tukey for key, value in tested.items()}
        stats.meta_evaluate(results, matrices, n_resamples=1000, seed=0, lower_is_better=lower,
                            corpus=significance.corpus_measures(specs, statistics, list(matrices)))

    # Compile every kernel first (numba), so that neither side pays for it.
    stats.randomised_tukey_hsd({"warm-up": matrices["posscore"][:50]}, n_permutations=20)
    stats.corpus_tukey_hsd({"warm-up": significance.corpus_measure(specs["bleu"], statistics["bleu"][:50])},
                           n_permutations=20)
    old, _ = timed(before)
    new, _ = timed(after)
    print(f"response board ({k} runs x {n:,} items, 3 corpus measures + POSSCORE, B = {permutations:,}, "
          f"R = {resamples:,}): mean path for every measure (before) {old:.2f} s; corpus path (now) {new:.2f} s; "
          f"ratio {new / old:.2f} (budget 2)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    if options.quick:
        one_measure(2_000, 20, 2_000)
        board(500, 13, 2_000)
    else:
        one_measure(10_000, 20, 10_000)
        board(1_500, 13, 10_000)


if __name__ == "__main__":
    main()
