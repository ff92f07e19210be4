"""Time and peak memory of a DSTC-sized metrics round judged on several dimensions (issue 39),
printed as a Markdown table.

    .venv/bin/python benchmarks/metric_dimensions.py            # 10,000 items x 8 dimensions x 30 metrics
    .venv/bin/python benchmarks/metric_dimensions.py --quick    # a tenth of the items

The round: 8,000 turn-level items (2,000 contexts of 4 systems' responses) judged on 4 turn
dimensions and 2,000 dialogue-level items (500 contexts of 4 dialogues) judged on 4 dialogue
dimensions (DSTC11 Track 4's eight), each judgement the mean of three annotators' 1-5 ratings
(the annotators' ratings are in the gold too); 30 metrics, each the item's latent quality plus
noise of its own size, submitted as one score per item and, for the per-dimension step, as
``scores`` per dimension. Through the task kind, as the server runs it:

* gold validation and compilation (with the annotators' judgements), and one run's validation;
* ``Kind.score`` of one run: every figure of every dimension with its interval at B = 1,000
  (what one scoring job does), with and without the pooled-rank intervals;
* the 30 runs one after the other (a round's scoring jobs);
* ``Kind.compare`` of the 30 runs (per dimension: paired bootstrap and t-tests of predictive power,
  discriminative power with the shared Tukey HSD, B = 1,000; the heat map; alpha and the
  leave-one-out human reference).

Each step is timed (best of ``--repeats``; wall and process CPU seconds) and then run once more
under ``tracemalloc`` for its peak of Python and NumPy allocations (NumPy reports its buffers to
``tracemalloc``); the process's maximum resident size is printed at the end.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
from scoring.kinds import get_kind  # noqa: E402
from scoring.kinds.metric.config import MetricConfig  # noqa: E402

TURN = ("appropriateness", "relevance", "content_richness", "grammatical_correctness")
DIALOGUE = ("coherence", "engageness", "informativeness", "overall")


def make_round(n_items: int, n_metrics: int, seed: int = 0) -> tuple[list, dict, dict, dict]:
    rng = np.random.default_rng(seed)
    gold, qualities = [], []
    n_turn_contexts, n_dialogue_contexts = (n_items * 4 // 5) // 4, (n_items // 5) // 4
    for c in range(n_turn_contexts + n_dialogue_contexts):
        level, names = ("turn", TURN) if c < n_turn_contexts else ("dialogue", DIALOGUE)
        responses = []
        for s in range(4):
            quality = rng.normal() + (1.5 - s) * 0.3
            ratings = np.clip(np.rint(3 + quality + rng.normal(scale=0.5, size=(len(names), 1))
                                      + rng.normal(scale=0.7, size=(len(names), 3))), 1, 5).astype(int)
            responses.append({"id": f"c{c}/s{s}", "system": f"S{s}", "level": level,
                              "human": {name: float(ratings[d].mean()) for d, name in enumerate(names)},
                              "judgements": {name: ratings[d].tolist() for d, name in enumerate(names)}})
            qualities.append(quality)
        gold.append({"id": f"c{c}", "responses": responses})
    quality = np.array(qualities)
    ids = [response["id"] for context in gold for response in context["responses"]]
    levels = [response["level"] for context in gold for response in context["responses"]]
    one, per_dimension = {}, {}
    for m in range(n_metrics):
        scores = quality + rng.normal(scale=0.3 + 0.1 * m, size=quality.size)
        one[f"m{m:02d}"] = [{"id": i, "score": float(v)} for i, v in zip(ids, scores.tolist(), strict=True)]
        per_dimension[f"m{m:02d}"] = [
            {"id": i, "scores": {name: float(v + 0.01 * d)
                                 for d, name in enumerate(TURN if lv == "turn" else DIALOGUE)}}
            for i, v, lv in zip(ids, scores.tolist(), levels, strict=True)] if m == 0 else []
    config = {"dimensions": [{"name": n, "level": "turn"} for n in TURN]
              + [{"name": n, "level": "dialogue"} for n in DIALOGUE]}
    return gold, one, per_dimension, config


def measure(label: str, call, repeats: int, note: str = "") -> tuple[str, float, float, float, float, str]:
    times, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    tracemalloc.start()
    call()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    best = min(range(repeats), key=times.__getitem__)
    return label, times[best], statistics.median(times), cpu[best], peak / 2**20, note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,000 items instead of 10,000")
    parser.add_argument("--metrics", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n_items = 1_000 if args.quick else 10_000
    kind = get_kind("metric")
    gold_data, one, per_dimension, dims = make_round(n_items, args.metrics)
    config = MetricConfig.from_dict({**dims, "n_resamples": 1_000})
    quick = MetricConfig.from_dict({**dims, "n_resamples": 1_000, "rank_intervals": False})
    per_config = MetricConfig.from_dict({**dims, "n_resamples": 1_000, "rank_intervals": False,
                                         "run_scores": "per-dimension"})
    gold = kind.compile_gold(gold_data, config)
    runs = {name: kind.parse_run(run, gold, quick) for name, run in one.items()}
    first = next(iter(runs.values()))
    kind.score(first, gold, config)  # imports, the rank kernel's compilation: not part of any step
    n_contexts = gold.n_contexts
    rows = [
        measure("validate + compile gold (with 3 annotators' judgements)", lambda: kind.compile_gold(gold_data, config),
                args.repeats, f"{gold.n_responses:,} items, {n_contexts:,} contexts"),
        measure("validate one run (one score per item)", lambda: kind.parse_run(one["m00"], gold, quick), args.repeats),
        measure("validate one run (scores per dimension)",
                lambda: kind.parse_run(per_dimension["m00"], gold, per_config), args.repeats),
        measure("Kind.score, one run, 8 dimensions, B = 1,000, no pooled-rank intervals",
                lambda: kind.score(first, gold, quick), args.repeats),
        measure("Kind.score, one run, 8 dimensions, B = 1,000, with pooled-rank intervals",
                lambda: kind.score(first, gold, config), 1),
        measure(f"Kind.score, all {args.metrics} runs one after the other (no pooled-rank intervals)",
                lambda: [kind.score(run, gold, quick) for run in runs.values()], 1),
        measure(f"Kind.compare, {args.metrics} runs, B = 1,000 (all parts, 8 dimensions)",
                lambda: kind.compare(runs, gold, quick, seed=1, resamples=1_000), 1),
    ]
    print(f"{gold.n_responses:,} items ({n_contexts:,} contexts) x 8 dimensions x {args.metrics} metrics\n")
    print("| step | best (s) | median (s) | CPU (s) | peak traced (MB) | note |")
    print("|---|---:|---:|---:|---:|---|")
    for label, best, median, cpu, peak, note in rows:
        print(f"| {label} | {best:.3f} | {median:.3f} | {cpu:.3f} | {peak:.1f} | {note} |")
    maximum = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nmaximum resident size of the process: {maximum:.0f} MB")


if __name__ == "__main__":
    main()
