#!/usr/bin/env python3
"""A large board's statistics: time, CPU and peak memory of one computation, and where they go.

Seeds a board of ``--board`` DQ/ND runs over 300 dialogues (``devtools.workers seed``, the board of
``benchmarks/embedded_serve.py``) in a scratch SQLite folder, then computes its statistics
(``leaderboard.statistics.compute_now``: Tukey HSD and bootstrap intervals of 21 measures,
discriminative power, Kendall's tau with bootstrap intervals between every two measures of a
group) in a fresh process per variant, and prints each process's wall time, CPU time and peak
resident size (``ru_maxrss``), with the 1-minute load average:

* ``now``: what ships: Kendall's tau-b of the bootstrap rows by Knight's O(k log k) count in Numba.
* ``numpy``: the pairwise NumPy form in blocks of bounded size (``_TAU_BLOCK_CELLS``), what runs
  without Numba.
* ``before``: the pairwise NumPy form in blocks of 1,024 bootstrap rows, as before this benchmark
  (1 GiB an array at 503 runs).

Each variant also times the Kendall part alone: the tau of the first two measures' 1,000
bootstrap rows (``--tau-only`` skips the whole computations).

    .venv/bin/python benchmarks/board_statistics.py                     # 500 runs (503 on the board)
    .venv/bin/python benchmarks/board_statistics.py --board 100 --variants now,numpy

Measured 2026-11-27 (2 shared cores, 503 runs on the board, 300 dialogues, 200 permutations;
``benchmarks/board_statistics.py``, one run):

    variant   whole computation      CPU   peak RSS  tau, 1,000 x 503  load
    now                   7.4 s   16.1 s     645 MB           29.9 ms  1.39
    numpy               489.3 s  494.3 s     705 MB         3255.3 ms  1.13
    before             1089.3 s 1097.5 s    4413 MB        15509.0 ms  1.05

The Kendall part was nearly all of it: 147 times faster and 6.8 times less memory as shipped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python")

CHILD = r"""
import json, os, resource, sys, time
import django
django.setup()
import numpy as np
from scoring import stats
from scoring.stats import meta_evaluation  # the settings below are read there
variant, tau_only = sys.argv[1], sys.argv[2] == "1"
if variant != "now":
    meta_evaluation._tau_b_numba = lambda: None
if variant == "before":
    meta_evaluation._TAU_BLOCK_CELLS = 1 << 62  # one block of every row: 1,024 rows at most, as before
from tasks.models import Task
from leaderboard import statistics
task = Task.objects.get(slug="bench")
rng = np.random.default_rng(1)
a = rng.random((1000, 503))
b = a + rng.normal(scale=0.05, size=a.shape)
stats._tau_b_rows(a[:2], b[:2])  # compile (or load the cached kernel) outside the timing
start = time.perf_counter()
stats._tau_b_rows(a, b)
tau = time.perf_counter() - start
whole = None
if not tau_only:
    start = time.perf_counter()
    statistics.compute_now(task.pk)
    whole = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"tau": tau, "whole": whole, "cpu": usage.ru_utime + usage.ru_stime,
                  "rss_mb": usage.ru_maxrss / 1024}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", type=int, default=500, help="runs seeded on the board (plus the seed run and "
                                                                 "two baselines)")
    parser.add_argument("--variants", default="now,numpy,before")
    parser.add_argument("--tau-only", action="store_true", help="time the Kendall part alone")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - {"now", "numpy", "before"}
    if unknown:
        parser.error(f"unknown variants: {', '.join(sorted(unknown))} (now, numpy, before)")
    work = Path(tempfile.mkdtemp(prefix="board-statistics-"))
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("CELERY_", "EVALSERVER_", "DJANGO_", "CACHE_URL", "DATABASE_URL"))}
    # Statistics off while seeding (the seeding would compute them at every score); "sync" in the
    # measured processes, where compute_now computes them in the process itself.
    env.update(EVALSERVER_VAR_DIR=str(work / "var"), PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="evalserver.settings",
               EVALSERVER_STATISTICS_MODE="off")
    try:
        print(f"seeding a board of {args.board} runs in {work}/var (SQLite)", flush=True)
        spec = {"slug": "bench", "dialogues": 300, "board": args.board, "teams": 1}
        seeded = subprocess.run([PYTHON, "-m", "devtools.workers", "seed", json.dumps(spec)], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=1800)
        if seeded.returncode:
            print(seeded.stderr[-3000:], file=sys.stderr)
            return 2
        env["EVALSERVER_STATISTICS_MODE"] = "sync"
        print(f"{'variant':8s} {'whole computation':>18s} {'CPU':>8s} {'peak RSS':>10s} {'tau, 1,000 x 503':>17s}"
              "  load", flush=True)
        for variant in variants:
            measured = subprocess.run([PYTHON, "-c", CHILD, variant, "1" if args.tau_only else "0"], cwd=ROOT,
                                      env=env, capture_output=True, text=True, timeout=7200)
            if measured.returncode:
                print(measured.stderr[-3000:], file=sys.stderr)
                return 2
            figures = json.loads(measured.stdout.strip().splitlines()[-1])
            whole = "-" if figures["whole"] is None else f"{figures['whole']:.1f} s"
            print(f"{variant:8s} {whole:>18s} {figures['cpu']:>6.1f} s {figures['rss_mb']:>7.0f} MB "
                  f"{figures['tau'] * 1000:>14.1f} ms  {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
