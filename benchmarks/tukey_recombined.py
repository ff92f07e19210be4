#!/usr/bin/env python3
"""The recombined Tukey HSD (scoring.stats, method="recombined") against the full randomised test
(method="exact", Algorithm 1 step by step): speed at full scale and agreement of the p-values.

    .venv/bin/python benchmarks/tukey_recombined.py --speed       # both sizes of issue 28, both methods
    .venv/bin/python benchmarks/tukey_recombined.py --validate    # spread of p over seeds, both methods

``--speed``: 10,000 items x 100 runs x 21 measures and 4,000 x 30 x 20 at B = 10,000 (the data of
benchmarks/tukey_speed.py), each method once, in one process after compiling; prints seconds,
the ratio, and how the two methods' p-values differ relative to the Monte Carlo standard error
of the full test, sqrt(p (1 - p) / B) (two independent estimates of the same p differ by
sqrt(2) of that on average, in standard deviations), and how often they disagree at alpha = 0.05.
Targets: <= 10 s and <= 5 s for the recombined method.

``--validate``: the p-values of a ``--n`` x ``--k`` matrix (2 measures) at ``--b`` permutations
for ``--seeds`` seeds with each method. Both are estimates of the same permutation p-value; per
pair the script prints, averaged over the pairs with 0.01 < p < 0.99, the mean over seeds (they
must agree within their standard errors) and the standard deviation over seeds, with the binomial
sqrt(p (1 - p) / B) that independent steps give. A recombined spread no larger than the exact
one's (ratio ~1) is "within Monte Carlo error of the full randomised test".
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.tukey_speed import make_matrices  # noqa: E402
from scoring import stats  # noqa: E402

SIZES = [(10_000, 100, 21, 10.0), (4_000, 30, 20, 5.0)]
B_FULL = 10_000


def compare(exact: dict, recombined: dict, n_permutations: int) -> str:
    ratios, disagree, pairs = [], 0, 0
    for name, full in exact.items():
        p, q = full.pvalues, recombined[name].pvalues
        upper = np.triu_indices(p.shape[0], 1)
        p, q = p[upper], q[upper]
        se = np.sqrt(p * (1 - p) / n_permutations)
        inside = (p > 0.01) & (p < 0.99)
        ratios.append(np.abs(p - q)[inside] / se[inside])
        disagree += int(np.count_nonzero((p <= 0.05) != (q <= 0.05)))
        pairs += p.size
    ratio = np.concatenate(ratios)
    return (f"|p_rec - p_exact| / SE(exact): mean {ratio.mean():.2f}, 95th percentile {np.quantile(ratio, 0.95):.2f}, "
            f"max {ratio.max():.2f} over {ratio.size} pairs with 0.01 < p < 0.99 (independent estimates: mean "
            f"{2 / np.sqrt(np.pi):.2f}); decisions at 0.05 differ for {disagree} of {pairs} pairs")


def speed() -> None:
    stats.randomised_tukey_hsd(make_matrices(64, 5, 2), 64, method="recombined")  # compile both
    stats.randomised_tukey_hsd(make_matrices(64, 5, 2), 64, method="exact")
    print(f"# B = {B_FULL:,}, numba, {len(os.sched_getaffinity(0))} CPUs, load average {os.getloadavg()[0]:.1f}")
    for n, k, m, target in SIZES:
        matrices = make_matrices(n, k, m)
        timings, results = {}, {}
        for method in ("recombined", "exact"):
            started = time.perf_counter()
            results[method] = stats.randomised_tukey_hsd(matrices, B_FULL, seed=1, method=method)
            timings[method] = time.perf_counter() - started
        verdict = "met" if timings["recombined"] <= target else "MISSED"
        print(f"{n:,} x {k} x {m} measures: exact {timings['exact']:.1f} s, recombined {timings['recombined']:.1f} s "
              f"({timings['exact'] / timings['recombined']:.1f}x fewer seconds; target <= {target:g} s: {verdict}); "
              f"load average now {os.getloadavg()[0]:.1f}", flush=True)
        print("  " + compare(results["exact"], results["recombined"], B_FULL), flush=True)


def validate(n: int, k: int, n_permutations: int, seeds: int) -> None:
    matrices = make_matrices(n, k, 2, seed=5)
    upper = np.triu_indices(k, 1)
    draws: dict[str, list[np.ndarray]] = {"exact": [], "recombined": []}
    for seed in range(seeds):
        for method in draws:
            result = stats.randomised_tukey_hsd(matrices, n_permutations, seed=seed, method=method)
            draws[method].append(np.concatenate([r.pvalues[upper] for r in result.values()]))
    exact, recombined = np.array(draws["exact"]), np.array(draws["recombined"])
    p = exact.mean(axis=0)
    inside = (p > 0.01) & (p < 0.99)
    binomial = np.sqrt(p * (1 - p) / n_permutations)[inside]
    sd_exact, sd_rec = exact.std(axis=0, ddof=1)[inside], recombined.std(axis=0, ddof=1)[inside]
    gap = np.abs(recombined.mean(axis=0) - p)[inside] / np.sqrt((sd_exact**2 + sd_rec**2) / seeds)
    groups, pool = stats._recombine_plan(n, n_permutations)
    print(f"# {n:,} x {k}, 2 measures, B = {n_permutations:,}, {seeds} seeds per method; recombined: {groups} groups, "
          f"pools of {pool}; {int(inside.sum())} pairs with 0.01 < mean p < 0.99")
    print(f"sd over seeds / binomial sqrt(p(1-p)/B): exact {np.mean(sd_exact / binomial):.2f}, recombined "
          f"{np.mean(sd_rec / binomial):.2f} (ratio recombined/exact {np.mean(sd_rec) / np.mean(sd_exact):.2f})")
    print(f"|mean p recombined - mean p exact| / its standard error: mean {gap.mean():.2f}, max {gap.max():.2f} "
          f"(same expectation: mean ~0.8, max ~3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--validate", action="store_true")
    parser.add_argument("--n", type=int, default=2_000)
    parser.add_argument("--k", type=int, default=12)
    parser.add_argument("--b", type=int, default=2_000)
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--pool-divisor", type=int, default=stats.POOL_DIVISOR,
                        help="P = B / this (to measure other settings than the shipped one)")
    args = parser.parse_args()
    stats.POOL_DIVISOR = args.pool_divisor
    if args.validate:
        validate(args.n, args.k, args.b, args.seeds)
    if args.speed:
        speed()


if __name__ == "__main__":
    main()
