"""Worker memory and time of scoring one hostile response run's nugget variants (issue 24, item 1).

Each case runs in a fresh process (``--case NAME``): the demo gold (``fixtures.response_demo``,
60 items), then one run whose first response is the hostile part, validated and scored as the
worker does (``kind.parse_run`` then ``kind.score`` with nugget scores on). Printed: the peak
resident memory the scoring added, the seconds, the run's and the gold's file sizes, and whether
the run was refused at validation (with the first problem).

    python benchmarks/nugget_memory.py            # every case, one process each
    python benchmarks/nugget_memory.py --case one-char-nuggets-2000 --measure bleu
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def hostile_run(gold: list[dict], case: str) -> list[dict]:
    """The demo's strong run with its first response replaced by the case's hostile one."""
    name, _, size = case.rpartition("-")
    count = int(size)
    run = [{"id": entry["id"], "response": "A fine reply.", "nuggets": [{"text": "A fine reply.", "act": "Opinion"}]}
           for entry in gold]
    if name == "one-char-nuggets":
        run[0] = {"id": gold[0]["id"], "response": "a" * count,
                  "nuggets": [{"text": "a", "act": "Opinion"} for _ in range(count)]}
    elif name == "alternatives":
        run[0] = {"id": gold[0]["id"], "response": "I am sorry. Try again.",
                  "nuggets": [{"text": "I am sorry.", "act": "Apology",
                               "same": [f"Sorry number {k}, " + "x" * 900 for k in range(count)]},
                              {"text": "Try again.", "act": "Recommendation"}]}
    elif name == "largest-accepted":
        # The costliest single response the limits accept: 100 nuggets of 99 characters, 48
        # one-word alternatives each: 4,901 variants of 9,900 characters, 48.5 million (the run's
        # budget is 50 million).
        nuggets = [{"text": f"{k:02d}" + "b" * 97, "act": "Opinion", "same": [f"w{k}x{j}" for j in range(48)]}
                   for k in range(100)]
        run[0] = {"id": gold[0]["id"], "response": "".join(n["text"] for n in nuggets), "nuggets": nuggets}
        del run[1:count]
    elif name == "sentences":
        run[0] = {"id": gold[0]["id"], "response": "a. " * count}
    else:
        raise SystemExit(f"unknown case {case}")
    return run


def one_case(case: str, measure: str, unchecked: bool = False) -> dict[str, object]:

    from fixtures.response_demo import write_demo
    from scoring.kinds import get_kind
    from scoring.validation import ValidationFailed

    folder = Path(tempfile.mkdtemp())
    paths = write_demo(folder)
    gold_bytes = paths["gold"].read_bytes()
    gold_data = json.loads(gold_bytes)
    run_data = hostile_run(gold_data, case)
    run_bytes = json.dumps(run_data).encode()
    if unchecked:
        # Scoring alone, as if validation had let the run through (what the worker did before).
        import scoring.kinds.response.formats as formats

        formats.MAX_NUGGETS_PER_RESPONSE = formats.MAX_ALTERNATIVES_PER_NUGGET = formats.MAX_NUGGET_WORK = 10**12
    kind = get_kind("response")
    config = kind.config({"measures": [measure], "official": [measure],
                          "nuggets": {"score": "always", "measure": measure}})
    gold = kind.compile_gold(gold_data, config)
    # Warm: the pipeline (its sentencizer too) and the gold's prepared references, as in a worker
    # that scored before.
    warm = hostile_run(gold_data, "alternatives-1")
    warm[1].pop("nuggets")
    kind.score(kind.parse_run(warm, gold, config), gold, config)
    before = _peak_mb()
    start = time.perf_counter()
    refused = None
    try:
        parsed = kind.parse_run(json.loads(run_bytes), gold, config)
        kind.score(parsed, gold, config)
    except ValidationFailed as error:
        refused = error.errors[0]
    return {"case": case, "measure": measure, "unchecked": unchecked, "run_bytes": len(run_bytes),
            "gold_bytes": len(gold_bytes),
            "seconds": round(time.perf_counter() - start, 2), "baseline_mb": round(before),
            "added_mb": round(_peak_mb() - before), "refused": refused}


CASES = ("largest-accepted-1", "one-char-nuggets-1000", "one-char-nuggets-2000", "one-char-nuggets-7500",
         "alternatives-6000", "sentences-3000")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help="one case, in this process (NAME-COUNT, e.g. one-char-nuggets-4000)")
    parser.add_argument("--measure", default="posscore", choices=("posscore", "bleu", "delta_bleu"))
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    parser.add_argument("--unchecked", action="store_true", help="score without the upload's limits")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(one_case(args.case, args.measure, args.unchecked)))
        return 0
    for case in args.cases:
        result = subprocess.run([sys.executable, __file__, "--case", case, "--measure", args.measure,
                                 *(["--unchecked"] if args.unchecked else [])],
                                capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
        print(result.stdout.strip() or result.stderr.strip()[-500:], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
