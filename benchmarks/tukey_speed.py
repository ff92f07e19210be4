"""Speed and memory of the randomised Tukey HSD (scoring.stats), printed as a Markdown table.

    .venv/bin/python benchmarks/tukey_speed.py            # full run, a few minutes
    .venv/bin/python benchmarks/tukey_speed.py --quick    # smoke run, under a minute

For a 4,000 x 30 and a 300 x 10 score matrix at B = 10,000 it measures, per backend
(Numba when importable, and NumPy): seconds for one measure, seconds for 20 measures sharing
the permutations, and peak memory. Each configuration runs in a fresh child process so that
the resident-set figure is not inflated by earlier runs:

* ``tracemalloc peak``: the peak of memory traced by tracemalloc during one call, which
  includes NumPy's array buffers (NumPy reports them to tracemalloc) but not the few small
  scratch arrays the Numba kernel allocates per thread;
* ``maxrss delta``: growth of ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` across the
  timed calls (everything the process touched, native allocations included; 0 when the
  calls stayed below the peak the process had already reached, e.g. while importing);
* ``maxrss peak``: that peak at the end, for the whole child process (interpreter, NumPy,
  Numba, the input matrices and all).

Times are the best of ``--repeats`` calls (the machine is shared and noisy; the median is
printed too); Numba's one-off compilation is done before timing and reported separately.
The loop reference ``tukey_hsd_loop`` (Algorithm 1 with a Python loop per dialogue, same
permutation stream) and a naive loop drawing ``Generator.permutation`` per row are timed at
a small B and scaled linearly to B = 10,000 for the speed ratio.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SIZES = [(4000, 30), (300, 10)]
B_FULL = 10_000


def stats_module():
    from scoring import stats

    return stats


def make_matrices(n: int, k: int, count: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Distance-like scores in [0, 1] with a dialogue effect and small run effects."""
    rng = np.random.default_rng(seed)
    base = rng.random((n, 1))
    return {
        f"measure{m}": np.clip(0.6 * base + 0.4 * rng.random((n, k)) + np.linspace(0, 0.02, k), 0, 1)
        for m in range(count)
    }


def naive_loop(matrix: np.ndarray, n_permutations: int, seed: int) -> np.ndarray:
    """Algorithm 1 with ``Generator.permutation`` per row (a different stream); returns p-values."""
    rng = np.random.default_rng(seed)
    n, k = matrix.shape
    means = matrix.mean(axis=0)
    observed = np.abs(means[:, None] - means[None, :])
    counts = np.zeros((k, k))
    permuted = np.empty_like(matrix)
    for _ in range(n_permutations):
        for d in range(n):
            permuted[d, rng.permutation(k)] = matrix[d]
        column_means = permuted.mean(axis=0)
        counts += column_means.max() - column_means.min() >= observed
    return (counts + 1) / (n_permutations + 1)


def child(config: dict) -> dict:
    """Run one configuration in this (fresh) process and return its figures."""
    stats = stats_module()
    n, k, kind = config["n"], config["k"], config["kind"]
    if kind in ("loop", "naive"):
        (matrix,) = make_matrices(n, k, 1).values()
        start = time.perf_counter()
        if kind == "loop":
            stats.tukey_hsd_loop(matrix, config["B"], seed=1)
        else:
            naive_loop(matrix, config["B"], seed=1)
        return {"seconds": time.perf_counter() - start}

    backend = config["backend"]
    matrices = make_matrices(n, k, config["measures"])
    start = time.perf_counter()
    stats.randomised_tukey_hsd({"w": np.random.default_rng(1).random((5, k))}, 10, backend=backend)
    warmup = time.perf_counter() - start
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(config["repeats"]):
        start = time.perf_counter()
        stats.randomised_tukey_hsd(matrices, config["B"], seed=1, backend=backend, method="exact")
        times.append(time.perf_counter() - start)
    rss_delta_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    tracemalloc.start()
    stats.randomised_tukey_hsd(matrices, min(config["B"], 200), seed=1, backend=backend)
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "best": min(times),
        "median": statistics.median(times),
        "warmup": warmup,
        "traced_mib": traced_peak / 2**20,
        "rss_delta_mib": rss_delta_kib / 1024,
        "rss_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_child(config: dict) -> dict:
    output = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(config)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small B and one repeat: a smoke run")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per configuration (best is reported)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return

    stats = stats_module()
    backends = (["numba"] if stats.numba_available() else []) + ["numpy"]
    n_permutations = 500 if args.quick else B_FULL
    loop_b = 10 if args.quick else 200
    repeats = 1 if args.quick else args.repeats
    print(f"# randomised Tukey HSD benchmark: B = {n_permutations:,}, best of {repeats}")
    print(
        f"# Python {platform.python_version()}, NumPy {np.__version__}, {platform.machine()}, "
        f"{len(__import__('os').sched_getaffinity(0))} CPUs, numba available: {stats.numba_available()}"
    )
    print()
    print(
        "| matrix | backend | measures | seconds (best) | median | warm-up s | tracemalloc peak MiB | "
        "maxrss delta MiB | maxrss peak MiB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    one_measure: dict[tuple[int, int], float] = {}
    for n, k in SIZES:
        for backend in backends:
            for measures in (1, 20):
                # The NumPy path is several times slower; one call is enough to show it.
                reps = 1 if backend == "numpy" else repeats
                config = {
                    "kind": "tukey",
                    "n": n,
                    "k": k,
                    "backend": backend,
                    "measures": measures,
                    "B": n_permutations,
                    "repeats": reps,
                }
                figures = run_child(config)
                if measures == 1 and backend == backends[0]:
                    one_measure[(n, k)] = figures["best"]
                print(
                    f"| {n:,} x {k} | {backend} | {measures} | {figures['best']:.2f} | {figures['median']:.2f} | "
                    f"{figures['warmup']:.1f} | {figures['traced_mib']:.1f} | {figures['rss_delta_mib']:.1f} | "
                    f"{figures['rss_peak_mib']:.0f} |",
                    flush=True,
                )
    print()
    print(
        f"| matrix | loop | B measured | seconds | scaled to B = {n_permutations:,} | "
        f"ratio to {backends[0]} (1 measure) |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for n, k in SIZES:
        for kind, label in (("loop", "tukey_hsd_loop (same stream)"), ("naive", "naive, Generator.permutation")):
            seconds = run_child({"kind": kind, "n": n, "k": k, "B": loop_b})["seconds"]
            scaled = seconds * n_permutations / loop_b
            print(
                f"| {n:,} x {k} | {label} | {loop_b} | {seconds:.2f} | {scaled:.0f} | "
                f"{scaled / one_measure[(n, k)]:.0f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
