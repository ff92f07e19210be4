"""pandas against the project's own CSV writer (issue 38, item 4), printed as Markdown.

    .venv/bin/python benchmarks/csv_writers.py            # 1,500 items x 60 runs, 2,000 result rows
    .venv/bin/python benchmarks/csv_writers.py --quick    # smoke run

The exports with the most cells are written twice: the item-by-run score matrix
(``scoring.exports.matrix_csv``, the statistics pages' CSV) and the organisers' results rows
(``tasks.organiser``'s results.csv: text, booleans, integers, floats, empty cells), once by
``scoring.exports.csv_text`` (the csv module, one ``csv_cell`` per cell) and once by
``pandas.DataFrame.to_csv`` made to give the same bytes (the formula guard on text cells, booleans
as 1/0, floats in their shortest round-trip form); the bytes are compared. Times are the best of
``--repeats`` (the machine is shared: compare the ratio within one run); pandas' import time and
memory are measured in fresh processes, since a web or worker process pays them once each.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from scoring import exports


def best(function: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def matrix_by_pandas(ids: list[str], names: list[str], matrix: np.ndarray) -> str:
    import pandas as pd

    guard = exports.csv_cell  # the formula guard on text, as every export applies it
    frame = pd.DataFrame(matrix, columns=[guard(name) for name in names])
    frame.insert(0, "dialogue_id", [guard(item) for item in ids])
    return frame.to_csv(index=False, lineterminator="\n")


def rows_by_pandas(rows: list[dict[str, Any]]) -> str:
    import pandas as pd

    frame = pd.DataFrame.from_records(rows)
    for column in frame.columns:  # per column type: what csv_cell does per cell
        values = frame[column]
        if values.dtype == bool:
            frame[column] = values.astype(int)
        elif not pd.api.types.is_numeric_dtype(values):  # text (pandas 3's str dtype) and mixed columns
            frame[column] = values.map(lambda value: None if value is None else exports.csv_cell(value))
    return frame.to_csv(index=False, lineterminator="\n")


def result_rows(count: int, measures: int, rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    for k in range(count):
        row: dict[str, Any] = {"run_id": 1000 + k, "team": rng.choice(["NTT", "=cmd|' /C calc'!A0", "Team, Inc.",
                                                                      "\u6e05\u534e", "say \"hi\""]),
                               "run": f"run-{k}", "baseline": k % 40 == 0, "public": k % 3 != 0,
                               "withdrawn": False, "phase": "test", "priority": 1 + k % 3, "gold_version": 2,
                               "scope": "all", "submitted_at": f"2026-11-{1 + k % 28:02d}T10:00:00+00:00"}
        row.update({f"m{j}": rng.random() * 10 ** rng.randint(-6, 2) for j in range(measures)})
        row["setting:variant"] = "jsd"
        rows.append(row)
    return rows


def import_cost() -> tuple[float, float]:
    """Seconds and MB of RSS that ``import pandas`` adds to a process that has NumPy already."""
    code = ("import resource, time, numpy; before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
            "start = time.perf_counter(); import pandas; seconds = time.perf_counter() - start; "
            "print(seconds, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
            for _ in range(3)]
    return min(float(seconds) for seconds, _ in runs), min(float(mb) for _, mb in runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    items, runs, count = (100, 10, 100) if args.quick else (1500, 60, 2000)
    rng = np.random.default_rng(0)
    ids = [f"dialogue-{k}" for k in range(items)]
    names = [f"=run {k}" if k % 7 == 0 else f"run {k}" for k in range(runs)]
    matrix = rng.random((items, runs)) ** 3
    rows = result_rows(count, 30, random.Random(0))
    seconds, megabytes = import_cost()
    print(f"`import pandas`: {seconds * 1000:.0f} ms and {megabytes:.0f} MB more RSS in a fresh process "
          f"(NumPy already loaded)\n")
    print("| export | cells | csv module (ms) | pandas (ms) | same bytes |")
    print("|---|---:|---:|---:|---|")
    ours, text = best(lambda: exports.matrix_csv(ids, names, matrix), args.repeats)
    theirs, other = best(lambda: matrix_by_pandas(ids, names, matrix), args.repeats)
    print(f"| score matrix, {items:,} items x {runs} runs | {items * runs:,} | {ours * 1000:.1f} | "
          f"{theirs * 1000:.1f} | {'yes' if text == other else 'no'} |")
    header = list(dict.fromkeys(key for row in rows for key in row))
    ours, text = best(lambda: exports.csv_text([header, *([row.get(c) for c in header] for row in rows)]),
                      args.repeats)
    theirs, other = best(lambda: rows_by_pandas(rows), args.repeats)
    print(f"| results rows, {count:,} runs x {len(header)} columns | {count * len(header):,} | {ours * 1000:.1f} | "
          f"{theirs * 1000:.1f} | {'yes' if text == other else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
