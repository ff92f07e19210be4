#!/usr/bin/env python3
"""The recombined Tukey HSD (scoring.stats, method="recombined") against the full randomised test
(method="exact", Algorithm 1 step by step): speed at full scale and agreement of the p-values.

    .venv/bin/python benchmarks/tukey_recombined.py --speed [--against REV]  # both sizes of issue 28
    .venv/bin/python benchmarks/tukey_recombined.py --validate               # spread of p over seeds
    .venv/bin/python benchmarks/tukey_recombined.py --calibrate              # the inflation constant C
    .venv/bin/python benchmarks/tukey_recombined.py --sequential             # would early stopping stop?
    .venv/bin/python benchmarks/tukey_recombined.py --null                   # the level under no effects

``--speed``: 10,000 items x 100 runs x 21 measures and 4,000 x 30 x 20 at B = 10,000 (the data of
benchmarks/tukey_speed.py), in one process after compiling: the full test, the recombined method
of this checkout and, with ``--against REV``, the recombined method of ``scoring.stats`` at git
revision REV (loaded as a separate module), each once per size. Prints wall seconds and CPU
seconds of the process (all threads: ``time.process_time``, less sensitive to other load than
wall time), the ratios, the load average, and how each recombined method's p-values differ
from the full test's relative to its Monte Carlo standard error sqrt(p (1 - p) / B) (two
independent estimates of one p differ by 2/sqrt(pi) = 1.13 of that on average) and how often they
disagree at alpha = 0.05. Targets: <= 10 s and <= 5 s for the recombined method.

``--validate``: the p-values of a ``--n`` x ``--k`` matrix (``--measures`` measures) at ``--b``
permutations for ``--seeds`` seeds with each method. Both are estimates of the same permutation
p-value; averaged over the pairs with 0.01 < p < 0.99 the script prints the standard deviation
over seeds against the binomial sqrt(p (1 - p) / B) that independent steps give, and how far the
two methods' means are apart in standard errors. A recombined spread within a few per cent of
the exact one's is "within Monte Carlo error of the full randomised test".

``--calibrate``: the variance inflation of the recombined estimate, var over seeds / binomial,
at forced pool divisors D (``--divisors``, up to B where it is large enough to measure well) and
groups G (``--groups``), for ``--k`` runs; prints C = (inflation - 1) G (k - 1) / D per setting,
the constant of the model 1 + C D / (G (k - 1)) that scoring.stats plans with. Only the
recombined method runs (the full test's steps are independent, so its variance is binomial).

``--sequential``: the full test's ranges at ``--n`` x ``--k`` x ``--measures`` and B = ``--b``;
at checkpoints b, the share of pairs whose decision at alpha = 0.05 is settled by the rule of
sequential stopping (the 99.9% normal interval p_b +- 3.29 sqrt(p_b (1 - p_b) / b) excludes alpha),
and the first b at which every pair is settled, if any.

``--null``: the level of the test where it matters, under the null: ``--datasets`` score matrices
``--n`` x ``--k`` of independent normal scores (no run effects), each tested with both methods at B =
``--b`` (seed = dataset number); prints the share of datasets where the smallest p (the largest
difference, the family-wise decision of Tukey HSD) is <= 0.01, 0.05 and 0.10. A valid test gives
those levels or less, within the binomial error sqrt(level (1 - level) / datasets).

Figures (2026-11-27, 2 shared vCPUs; all of them, with the calibration table, in docs/statistics.md,
"Recombined steps at full scale"):

* ``--speed --against 41344d2`` (the code before the plan of issue 28's second round), wall s / CPU s,
  two runs at load average 4.6-5.0 and 3.8-7.9: 10,000 x 100 x 21: full test 110.1 / 84.7 and
  183.7 / 88.5, recombined before 19.9 / 13.0 and 26.4 / 13.5, now 11.0 / 7.1 and 16.3 / 7.9
  (1.6-1.8x fewer seconds than before, 10-11x fewer than the full test); 4,000 x 30 x 20: full test
  12.9 / 8.4 and 16.9 / 9.1, before 2.5 / 1.7 and 3.4 / 1.7, now 2.4 / 1.6 and 3.4 / 1.7. Scaled by
  the quiet run of 01:10 UTC (full test 66.3 s, before 10.1 s and 1.0 s): about 5.6-6.3 s and 1.0 s.
  Against the full run: mean |p - p_exact| / SE 1.15 (before 1.16) and 1.33 (before 1.14; six seeds
  average 1.21, before 1.18, a D = 1 control 1.17: that full run's own error); decisions at 0.05
  differ for 172 of 103,950 and 18 of 8,700 pairs. Sequential stopping: 825 and 108 pairs are not
  settled at b = B.
* ``--validate --n 2000 --k K --b 2000 --measures 4 --seeds 40`` (shipped plan): variance over seeds
  / binomial, exact vs recombined: k = 12 1.013 vs 1.054, k = 30 0.980 vs 1.061, k = 100 1.065 vs
  1.029 (modelled 1.045-1.049); mean p apart by 0.77, 0.53, 0.89 standard errors.
* ``--null --n 2000 --k 30 --b 1000 --datasets 2000``: P(min p <= 0.01, 0.05, 0.10) = 0.0120, 0.0540,
  0.1020 recombined, 0.0110, 0.0545, 0.1020 full test (binomial errors 0.0022, 0.0049, 0.0067).
* ``--calibrate``: A(k) 0.46-0.49 (k = 5), 0.29-0.31 (12), 0.20-0.24 (30), 0.13-0.17 (100), 0.06
  (500); at the full sizes' plans (B = 10,000, 30 seeds) the inflation is 1.015 (4,000 x 30, D = 12)
  and 1.021 (10,000 x 100, D = 18).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
from benchmarks.tukey_speed import make_matrices  # noqa: E402
from scoring import stats  # noqa: E402
from scoring.stats import recombined as recombined_method  # noqa: E402  # use_plan patches its plan

SIZES = [(10_000, 100, 21, 10.0), (4_000, 30, 20, 5.0)]
B_FULL = 10_000
ALPHA = 0.05
Z_SETTLED = 3.29  # two-sided 99.9% normal quantile


def compare(exact: dict, other: dict, n_permutations: int) -> str:
    ratios, disagree, pairs = [], 0, 0
    for name, full in exact.items():
        p, q = full.pvalues, other[name].pvalues
        upper = np.triu_indices(p.shape[0], 1)
        p, q = p[upper], q[upper]
        se = np.sqrt(p * (1 - p) / n_permutations)
        inside = (p > 0.01) & (p < 0.99)
        ratios.append(np.abs(p - q)[inside] / se[inside])
        disagree += int(np.count_nonzero((p <= ALPHA) != (q <= ALPHA)))
        pairs += p.size
    ratio = np.concatenate(ratios)
    return (f"|p - p_exact| / SE(exact): mean {ratio.mean():.2f}, 95th percentile {np.quantile(ratio, 0.95):.2f}, "
            f"max {ratio.max():.2f} over {ratio.size} pairs with 0.01 < p < 0.99 (independent estimates: mean "
            f"{2 / np.sqrt(np.pi):.2f}); decisions at 0.05 differ for {disagree} of {pairs} pairs")


def load_revision(revision: str):
    """scoring.stats as it was at git revision ``revision``, as a module of its own: the single file
    scoring/stats.py, or, since issue 38, the package scoring/stats/ (its imports of ``scoring.stats``
    pointed at the copy)."""
    def show(path: str) -> str:
        return subprocess.run(["git", "show", f"{revision}:{path}"], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout

    folder = Path(tempfile.mkdtemp(prefix="tukey_old_"))
    if subprocess.run(["git", "cat-file", "-e", f"{revision}:scoring/stats.py"], cwd=ROOT,
                      capture_output=True).returncode == 0:
        path = folder / "stats_old.py"
        path.write_text(show("scoring/stats.py"))
        spec = importlib.util.spec_from_file_location("stats_old", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["stats_old"] = module
        spec.loader.exec_module(module)
        return module
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{revision}:scoring/stats/"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    (folder / "stats_old").mkdir()
    for name in names:
        if name.endswith(".py"):
            source = show(f"scoring/stats/{name}").replace("scoring.stats", "stats_old")
            (folder / "stats_old" / name).write_text(source)
    sys.path.insert(0, str(folder))
    return importlib.import_module("stats_old")


def timed(call):
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def speed(against: str | None) -> None:
    methods = {"recombined": lambda m: stats.randomised_tukey_hsd(m, B_FULL, seed=1, method="recombined"),
               "exact": lambda m: stats.randomised_tukey_hsd(m, B_FULL, seed=1, method="exact")}
    if against:
        old = load_revision(against)
        methods = {f"recombined@{against}": lambda m: old.randomised_tukey_hsd(m, B_FULL, seed=1,
                                                                                method="recombined"), **methods}
    small = make_matrices(600, 5, 2)
    for module in [stats] + ([old] if against else []):  # compile every kernel before timing
        module.randomised_tukey_hsd(small, 64, method="recombined")
        module.randomised_tukey_hsd(small, 64, method="exact")
    print(f"# B = {B_FULL:,}, numba, {len(os.sched_getaffinity(0))} CPUs, load average {os.getloadavg()[0]:.1f}")
    for n, k, m, target in SIZES:
        matrices = make_matrices(n, k, m)
        groups, divisor, pool = recombined_method._recombine_plan(n, k, B_FULL)
        print(f"{n:,} x {k} x {m} measures (recombined plan: G = {groups}, D = {divisor}, P = {pool})", flush=True)
        results: dict[str, tuple] = {}
        for name, call in methods.items():
            load = os.getloadavg()[0]
            result, wall, cpu = timed(lambda call=call, matrices=matrices: call(matrices))
            verdict = "" if name == "exact" else f"; target <= {target:g} s: {'met' if wall <= target else 'MISSED'}"
            print(f"  {name}: {wall:.1f} s wall, {cpu:.1f} CPU-s (load average before {load:.1f}){verdict}",
                  flush=True)
            results[name] = (result, wall, cpu)
        exact, exact_wall, exact_cpu = results.pop("exact")
        for name, (result, wall, cpu) in results.items():
            print(f"  exact / {name}: {exact_wall / wall:.1f}x wall, {exact_cpu / cpu:.1f}x CPU")
            print("    " + compare(exact, result, B_FULL), flush=True)
        if against:
            (_, old_wall, old_cpu), (_, new_wall, new_cpu) = results.values()
            print(f"  recombined@{against} / recombined: {old_wall / new_wall:.1f}x wall, {old_cpu / new_cpu:.1f}x CPU")
        sequential_report(exact, B_FULL)
        print(f"  load average now {os.getloadavg()[0]:.1f}", flush=True)


def sequential_report(results: dict, n_permutations: int) -> None:
    """How many pairs are still unsettled at b = B itself: if any, sequential stopping never stops early."""
    unsettled = total = 0
    for result in results.values():
        p = result.pvalues[np.triu_indices(result.n_runs, 1)]
        se = np.sqrt(p * (1 - p) / n_permutations)
        unsettled += int(np.count_nonzero(np.abs(p - ALPHA) <= Z_SETTLED * se))
        total += p.size
    print(f"  sequential stopping: {unsettled} of {total} pairs are not settled even at b = B "
          f"(|p - {ALPHA}| <= {Z_SETTLED} SE), so 'stop once every pair is settled' would run all B steps")


def model(k: int, groups: int, divisor: int) -> float:
    """The variance inflation scoring.stats plans with: 1 + INFLATION_SCALE D / (G (k - 1)^(1/3))."""
    return 1 + float(stats.INFLATION_SCALE) * divisor / (groups * (k - 1) ** (1 / 3))


def use_plan(groups: int | None, divisor: int | None) -> None:
    """Force the recombined plan (for measurement only)."""
    shipped = recombined_method._recombine_plan

    def plan(n_dialogues: int, n_runs: int, n_permutations: int) -> tuple[int, int, int]:
        g, d, _ = shipped(n_dialogues, n_runs, n_permutations)
        g, d = groups or g, divisor or d
        return g, d, max(1, -(-n_permutations // d))

    recombined_method._recombine_plan = plan


def spread(method: str, matrices: dict, n_permutations: int, seeds: int) -> np.ndarray:
    k = next(iter(matrices.values())).shape[1]
    upper = np.triu_indices(k, 1)
    draws = []
    for seed in range(seeds):
        result = stats.randomised_tukey_hsd(matrices, n_permutations, seed=1000 + seed, method=method)
        draws.append(np.concatenate([r.pvalues[upper] for r in result.values()]))
    return np.array(draws)


def validate(n: int, k: int, measures: int, n_permutations: int, seeds: int) -> None:
    matrices = make_matrices(n, k, measures, seed=5)
    exact, recombined = (spread(method, matrices, n_permutations, seeds) for method in ("exact", "recombined"))
    p = exact.mean(axis=0)
    inside = (p > 0.01) & (p < 0.99)
    binomial = p * (1 - p) / n_permutations
    var_exact, var_rec = exact.var(axis=0, ddof=1)[inside], recombined.var(axis=0, ddof=1)[inside]
    gap = np.abs(recombined.mean(axis=0) - p)[inside] / np.sqrt((var_exact + var_rec) / seeds)
    groups, divisor, pool = recombined_method._recombine_plan(n, k, n_permutations)
    print(f"# {n:,} x {k}, {measures} measures, B = {n_permutations:,}, {seeds} seeds per method; recombined: "
          f"G = {groups}, D = {divisor}, P = {pool}; {int(inside.sum())} pairs with 0.01 < mean p < 0.99")
    print(f"variance over seeds / binomial p(1-p)/B: exact {np.mean(var_exact / binomial[inside]):.3f}, recombined "
          f"{np.mean(var_rec / binomial[inside]):.3f} (sd ratio recombined/exact "
          f"{np.sqrt(np.mean(var_rec) / np.mean(var_exact)):.3f}; modelled inflation {model(k, groups, divisor):.3f})")
    print(f"|mean p recombined - mean p exact| / its standard error: mean {gap.mean():.2f}, max {gap.max():.2f} "
          f"(same expectation: mean ~0.8)", flush=True)


def calibrate(n: int, k: int, measures: int, n_permutations: int, seeds: int, divisors: list[int],
              groups: int) -> None:
    matrices = make_matrices(n, k, measures, seed=5)
    print(f"# {n:,} x {k}, {measures} measures, B = {n_permutations:,}, {seeds} seeds, G = {groups}")
    for divisor in divisors:
        use_plan(groups, divisor)
        draws = spread("recombined", matrices, n_permutations, seeds)
        p = draws.mean(axis=0)
        inside = (p > 0.01) & (p < 0.99)
        inflation = np.mean(draws.var(axis=0, ddof=1)[inside] / (p * (1 - p) / n_permutations)[inside])
        print(f"D = {divisor}: variance inflation {inflation:.3f} over {int(inside.sum())} pairs; "
              f"A(k) = (inflation - 1) G / D = {(inflation - 1) * groups / divisor:.3f} "
              f"(model {float(stats.INFLATION_SCALE) / (k - 1) ** (1 / 3):.3f})", flush=True)


def sequential(n: int, k: int, measures: int, n_permutations: int) -> None:
    matrices = make_matrices(n, k, measures)
    centred = [x - x.mean(axis=1, keepdims=True) for x in matrices.values()]
    ranges = stats._ranges_numba(centred, 1, n_permutations, None)
    observed = [np.abs(np.subtract.outer(x.mean(axis=0), x.mean(axis=0)))[np.triu_indices(k, 1)]
                for x in matrices.values()]
    print(f"# sequential stopping, {n:,} x {k} x {measures} measures, B = {n_permutations:,}")
    first_all = None
    for b in range(500, n_permutations + 1, 500):
        settled = total = 0
        for m, d in enumerate(observed):
            ordered = np.sort(ranges[m, :b])
            counts = b - np.searchsorted(ordered, d - stats._tie_tolerance(matrices[f"measure{m}"]), side="left")
            p = (counts + 1) / (b + 1)
            settled += int(np.count_nonzero(np.abs(p - ALPHA) > Z_SETTLED * np.sqrt(p * (1 - p) / b)))
            total += d.size
        if settled == total and first_all is None:
            first_all = b
        if b in (500, 1000, 2000, 5000, n_permutations):
            print(f"b = {b:,}: {settled} of {total} pairs settled ({settled / total:.1%})", flush=True)
    print(f"every pair settled first at b = {first_all}" if first_all else "never every pair settled")


def null(n: int, k: int, n_permutations: int, datasets: int) -> None:
    levels = (0.01, 0.05, 0.10)
    smallest: dict[str, list[float]] = {"exact": [], "recombined": []}
    for dataset in range(datasets):
        x = np.random.default_rng(dataset).normal(size=(n, k))
        for method, found in smallest.items():
            result = stats.randomised_tukey_hsd({"m": x}, n_permutations, seed=dataset, method=method)["m"]
            found.append(float(result.pvalues.min()))
    groups, divisor, pool = recombined_method._recombine_plan(n, k, n_permutations)
    print(f"# null: {datasets} datasets of {n:,} x {k} normal scores, B = {n_permutations:,}; recombined: "
          f"G = {groups}, D = {divisor}, P = {pool}")
    for method, found in smallest.items():
        shares = ", ".join(f"P(min p <= {level}) = {np.mean(np.asarray(found) <= level):.4f} "
                           f"(+-{np.sqrt(level * (1 - level) / datasets):.4f})" for level in levels)
        print(f"{method}: {shares}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--against", help="git revision whose recombined method --speed also times")
    parser.add_argument("--validate", action="store_true")
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--sequential", action="store_true")
    parser.add_argument("--null", action="store_true")
    parser.add_argument("--datasets", type=int, default=2_000)
    parser.add_argument("--n", type=int, default=2_000)
    parser.add_argument("--k", type=int, default=12)
    parser.add_argument("--measures", type=int, default=2)
    parser.add_argument("--b", type=int, default=2_000)
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--groups", type=int, default=None, help="force G (measurement only)")
    parser.add_argument("--divisor", type=int, default=None, help="force D (--validate)")
    parser.add_argument("--divisors", default="64,256,2000", help="D values of --calibrate")
    args = parser.parse_args()
    if args.calibrate:
        calibrate(args.n, args.k, args.measures, args.b, args.seeds, [int(d) for d in args.divisors.split(",")],
                  args.groups or stats.RECOMBINE_GROUPS)
    if args.validate:
        use_plan(args.groups, args.divisor)
        validate(args.n, args.k, args.measures, args.b, args.seeds)
    if args.sequential:
        sequential(args.n, args.k, args.measures, args.b)
    if args.null:
        null(args.n, args.k, args.b, args.datasets)
    if args.speed:
        speed(args.against)


if __name__ == "__main__":
    main()
