"""What linking board rows to run pages (issue 30) costs the board's table, printed as Markdown.

    .venv/bin/python benchmarks/board_links.py            # 20, 100 and 500 rows, 30 repeats
    .venv/bin/python benchmarks/board_links.py --quick    # smoke run

``leaderboard.tables.board_table`` renders the same synthetic rows (a DQ board's 6 official
columns) with every row linked and with none linked; the table is rendered once per board, tab
and sort and then served from the cache, so this is the cost of a cache miss. Times are the best
of ``--repeats`` renders (the machine is shared and noisy: compare the ratio, measured in the same
run, not the seconds across machines). No database is touched: the linking decision is one call
per board (``tasks.access.scores_public``), not per row; ``tests/test_board_cache.py`` asserts that
a board's queries do not grow with its rows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalserver.settings")


def rows(count: int, linked: bool, keys: list[str]) -> list[dict]:
    return [{"id": 1000 + k, "team": f"Team {k % 17}", "name": f"run-{k}", "description": "a method " * 5,
             "is_baseline": k % 50 == 0, "is_public": True, "priority": 1 + k % 3, "linked": linked,
             "ranks": {key: 1 + k for key in keys}, "values": {key: 0.01 * (k % 97) + 0.001 for key in keys}}
            for k in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    import django

    django.setup()
    from leaderboard.tables import board_table
    from scoring.kinds import get_kind
    from tasks.models import Task

    stc3 = get_kind("stc3")
    task = Task(kind="stc3", config=dict(stc3.presets[stc3.default_preset]))
    specs = [spec for spec in task.measure_specs() if spec.official and spec.group == "quality"]
    keys = [spec.key for spec in specs]
    repeats = 3 if args.quick else args.repeats
    print("| rows | without links (ms) | with links (ms) | ratio |")
    print("|---:|---:|---:|---:|")
    for count in ((20,) if args.quick else (20, 100, 500)):
        best = {}
        for linked in (False, True):
            data = rows(count, linked, keys)
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                board_table(data, specs, keys[0], "quality", "dev", [], None)
                times.append(time.perf_counter() - start)
            best[linked] = (min(times), statistics.median(times))
        print(f"| {count} | {best[False][0] * 1000:.2f} | {best[True][0] * 1000:.2f} | "
              f"{best[True][0] / best[False][0]:.2f} |")


if __name__ == "__main__":
    main()
