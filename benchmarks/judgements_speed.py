"""What the judgements library costs on campaign-sized inputs; prints the figures.

    .venv/bin/python benchmarks/judgements_speed.py                 # the real STC-3 annotations, x1 and x4
    .venv/bin/python benchmarks/judgements_speed.py --copies 10 --resamples 1000

Inputs: the 1,672 English STC-3 training dialogues with their 19 annotators' labels
(tests/judgements/stc3_real_en.json.gz), as a judgements file of 31,768 judgements, then the same
dialogues copied ``--copies`` times under new ids (a round of ~17,000 dialogues at 10); and a
metrics-track campaign of synthetic 1-5 ratings, 20,000 responses x 3 assessors. For each: reading
and validating the file, Krippendorff's alpha alone, its bootstrap interval, the whole agreement
report (every dimension's alpha and interval, every assessor's figures) and the gold. The machine is
shared: compare figures of one run, not across runs; each is wall time and this process's CPU time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import time
from pathlib import Path

import numpy as np

from scoring.judgements.alpha import alpha_interval, krippendorff_alpha
from scoring.judgements.formats import load_items, load_judgements
from scoring.judgements.gold import metric_gold, stc3_gold
from scoring.judgements.report import agreement_report

DATA = Path(__file__).resolve().parent.parent / "tests" / "judgements" / "stc3_real_en.json.gz"


def timed(label: str, work, *args, **kwargs):
    wall, cpu = time.perf_counter(), time.process_time()
    result = work(*args, **kwargs)
    print(f"  {label:<44} {time.perf_counter() - wall:7.2f} s wall {time.process_time() - cpu:7.2f} s CPU")
    return result


def stc3(copies: int, resamples: int) -> None:
    with gzip.open(DATA, "rt", encoding="utf-8") as handle:
        dialogues = json.load(handle)
    dialogues = [{**d, "id": f"{d['id']}-{c}"} for c in range(copies) for d in dialogues]
    rows = [{"item": d["id"], "assessor": f"a{k:02d}", **a} for d in dialogues for k, a in enumerate(d["annotations"])]
    dialogue_items = [{"id": d["id"], "turns": d["turns"]} for d in dialogues]
    print(f"STC-3: {len(dialogues):,} dialogues, {len(rows):,} judgements, "
          f"{sum(len(d['turns']) for d in dialogues) * 19:,} nugget labels")
    items = timed("items file", load_items, dialogue_items, "stc3")
    judged = timed("judgements file (validated)", load_judgements, rows, "stc3", items)
    units = [[a["quality"]["A"] for a in d["annotations"]] for d in dialogues]
    turns = [[a["nugget"][t] for a in d["annotations"]] for d in dialogues for t in range(len(d["turns"]))]
    alpha = timed("alpha of A (ordinal)", krippendorff_alpha, units, "ordinal")
    interval = timed(f"its interval, R = {resamples:,}", alpha_interval, units, "ordinal", resamples)
    print(f"    A: alpha {alpha:.4f}, interval [{interval[0]:.4f}, {interval[1]:.4f}]")
    nugget = timed("alpha of nugget labels (nominal, per turn)", krippendorff_alpha, turns, "nominal")
    timed(f"its interval, R = {resamples:,}", alpha_interval, turns, "nominal", resamples)
    print(f"    nugget: alpha {nugget:.4f}")
    timed(f"agreement report (4 dimensions, R = {resamples:,})", agreement_report, judged, None, resamples)
    timed("gold (validated by the stc3 reader)", stc3_gold, judged, dialogue_items)


def metric(responses: int, resamples: int) -> None:
    rng = np.random.default_rng(0)
    quality = rng.integers(1, 6, size=responses)
    contexts = [{"id": f"c{c}", "responses": [{"id": f"r{c}-{k}", "text": f"reply {c} {k}"} for k in range(10)]}
                for c in range(responses // 10)]
    rows = [{"item": f"r{c}-{k}", "assessor": f"h{a}", "values": {"appropriateness": int(np.clip(
        quality[c * 10 + k] + rng.integers(-1, 2), 1, 5))}, "seconds": float(rng.gamma(4, 5))}
        for c in range(responses // 10) for k in range(10) for a in range(3)]
    print(f"metrics track: {responses:,} responses x 3 assessors = {len(rows):,} judgements")
    items = timed("items file", load_items, contexts, "metric")
    judged = timed("judgements file (validated)", load_judgements, rows, "metric", items)
    report = timed(f"agreement report (R = {resamples:,})", agreement_report, judged, None, resamples)
    print(f"    alpha {report['dimensions']['appropriateness']['alpha']:.4f}")
    timed("gold, raw means (validated by the metric reader)", metric_gold, judged, contexts)
    timed("gold, per-assessor z-scores", metric_gold, judged, contexts, "z-score")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=4, help="the STC-3 dialogues copied this many times (default 4)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1,000)")
    parser.add_argument("--responses", type=int, default=20_000, help="metrics-track responses (default 20,000)")
    options = parser.parse_args()
    for copies in sorted({1, options.copies}):
        stc3(copies, options.resamples)
    metric(options.responses, options.resamples)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    main()
