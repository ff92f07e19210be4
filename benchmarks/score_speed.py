"""Speed of scoring one run (both subtasks, every reported measure), printed as a Markdown table.

    .venv/bin/python benchmarks/score_speed.py                  # 4,000 dialogues
    .venv/bin/python benchmarks/score_speed.py --dialogues 400  # quicker
    .venv/bin/python benchmarks/score_speed.py --check          # exit 1 if a target is missed

A seeded gold of ``--dialogues`` dialogues (STC-3 shape: 19 annotators, 2-7 turns) and a
noisy run are written to a temporary folder. Timed, each the median of ``--repeats`` calls:

* ``evaluate`` on an already loaded gold and run (no JSON, no validation);
* ``load_run + evaluate`` from the parsed run (validation of the run, then scoring);
* ``parse + load gold + load run + evaluate`` from the files' bytes (everything in-process);
* the whole ``manage.py score RUN GOLD`` command in a fresh process (interpreter start-up included).

For comparison, devtools/reference.py's plain-loop re-implementation of the 2018 STC-3 script
(one distribution at a time, scipy's entropy for JSD; it reports RSNOD and NMD for DQ, JSD and
RNSS for ND) is timed once on the same files, JSON parsing included.

Targets: <= 0.25 s without parsing, <= 1 s for the whole command (4,000 dialogues).
The machine may be shared: compare the median with the best if figures look noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_IN_PROCESS = 0.25
TARGET_COMMAND = 1.0


def timed(function: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median and best wall-clock seconds of ``repeats`` calls."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), min(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialogues", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    options = parser.parse_args(argv)
    from devtools.reference import stc3_2018_script
    from fixtures.synthetic import generate_gold, generate_run
    from scoring.kinds.stc3.config import STC3
    from scoring.kinds.stc3.evaluate import evaluate
    from scoring.kinds.stc3.formats import load_gold, load_run
    from scoring.validation import parse_json

    n = options.dialogues
    gold_data = generate_gold(n, seed=options.seed)
    run_data = generate_run(gold_data, "noisy", noise=0.5, seed=options.seed + 1)
    n_turns = sum(len(dialogue["turns"]) for dialogue in gold_data)

    with tempfile.TemporaryDirectory(prefix="score-speed-") as folder:
        gold_path, run_path = Path(folder, "gold.json"), Path(folder, "run.json")
        gold_path.write_text(json.dumps(gold_data, ensure_ascii=False), encoding="utf-8")
        run_path.write_text(json.dumps(run_data), encoding="utf-8")
        gold_bytes, run_bytes = gold_path.read_bytes(), run_path.read_bytes()

        gold = load_gold(gold_data, STC3)
        run = load_run(run_data, gold)
        evaluate(run, gold)  # warm-up: first calls pay for imports and caches

        def everything_in_process() -> object:
            parsed_gold = load_gold(parse_json(gold_path.read_bytes(), "gold file"), STC3)
            return evaluate(load_run(parse_json(run_path.read_bytes(), "run file"), parsed_gold), parsed_gold)

        command = [sys.executable, str(ROOT / "manage.py"), "score", str(run_path), str(gold_path)]

        def whole_command() -> None:
            subprocess.run(command, cwd=ROOT, check=True, capture_output=True)

        rows = [
            ("evaluate (loaded gold and run)", timed(lambda: evaluate(run, gold), options.repeats), TARGET_IN_PROCESS),
            ("load_run + evaluate (parsed run)",
             timed(lambda: evaluate(load_run(run_data, gold), gold), options.repeats), TARGET_IN_PROCESS),
            ("parse + load gold + load run + evaluate", timed(everything_in_process, options.repeats), None),
            ("`manage.py score` subprocess", timed(whole_command, options.repeats), TARGET_COMMAND),
        ]

        start = time.perf_counter()
        stc3_2018_script(json.loads(run_bytes), json.loads(gold_bytes))
        reference_seconds = time.perf_counter() - start

    scale = n / 4000  # targets are for 4,000 dialogues
    print(f"Scoring one run: {n:,} dialogues, {n_turns:,} turns, both subtasks "
          f"(DQ: 6 measures x 3 dimensions, ND: 3 measures); median and best of {options.repeats}; "
          f"Python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), load average "
          f"{', '.join(f'{load:.2f}' for load in os.getloadavg())}")
    print()
    print("| step | median s | best s | dialogues/s (median) | target | |")
    print("|---|---:|---:|---:|---:|---|")
    missed = False
    for label, (median, best), target in rows:
        verdict = ""
        if target is not None:
            ok = median <= target * scale
            missed |= not ok
            verdict = "ok" if ok else "MISSED"
        target_text = f"<= {target * scale:.2f} s" if target is not None else ""
        print(f"| {label} | {median:.3f} | {best:.3f} | {n / median:,.0f} | {target_text} | {verdict} |")
    in_process = rows[2][1][0]
    print(f"| plain-loop 2018 script (devtools/reference.py, once, parsing included; 4 measures) "
          f"| {reference_seconds:.3f} | | {n / reference_seconds:,.0f} | | |")
    print()
    print(f"Speed ratio, plain-loop 2018 script / parse + load + evaluate: {reference_seconds / in_process:,.0f}x; "
          f"/ evaluate alone: {reference_seconds / rows[0][1][0]:,.0f}x")
    return 1 if options.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
