"""Speed of the metrics-track meta-evaluation (scoring.kinds.metric), printed as a Markdown table.

    .venv/bin/python benchmarks/metric_speed.py            # 20,000 responses, 2,000 contexts, 40 metrics
    .venv/bin/python benchmarks/metric_speed.py --quick    # a tenth of that

A synthetic round: contexts of 10 responses, one from each of 10 systems; human judgements are
means of three 1-5 ratings of a latent quality (so there are ties), and each metric is the
latent quality plus noise of its own size, rounded for a few metrics (so metrics tie too).
Timed (best of ``--repeats`` calls; the machine is shared and noisy, so the median is printed
too, and the CPU seconds of the process, which a busy machine inflates much less than wall
time; the Tukey HSD's Numba threads add up in CPU time):

* gold and run validation (parse excluded) of the whole round;
* ``context_counts`` alone (per-context correct / ties / pairs, what gets stored);
* ``evaluate_metrics``: every per-metric figure with its bootstrap interval at B = 1,000
  (the issue's "all per-metric figures": target <= 2 s);
* ``paired_bootstrap`` over all 780 metric pairs at B = 10,000 (target <= 20 s), plus the
  Bonferroni t-tests and the concordance matrix;
* the same with the pooled Kendall / Spearman intervals, which need an exact O(N log N)
  re-ranking per resample and metric (``pooled_rank_replicates``; off by default in
  ``evaluate_metrics``, on in the kind);
* discriminative power of all metrics (randomised Tukey HSD, B = 1,000).

Then the other end of the spec's scale, 20,000 responses in 200 contexts of 100 (no systems:
990,000 within-context pairs), for the steps whose cost grows with the pairs.

Last, the same round through the task kind (``scoring.kinds.metric.kind``), as the server runs it:
``Kind.score`` of each run (all its figures with intervals at B = 1,000, what one scoring job
does), and ``Kind.compare`` of all 40 runs at B = 10,000 (paired bootstrap, t-tests,
concordance and discriminative power with 10,000 permutations of the shared Tukey HSD).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
from scoring.kinds import get_kind  # noqa: E402
from scoring.kinds.metric import meta  # noqa: E402
from scoring.kinds.metric.formats import load_metric_gold, load_metric_run  # noqa: E402


def make_round(n_contexts: int, n_systems: int, n_metrics: int, seed: int = 0, name_systems: bool = True):
    rng = np.random.default_rng(seed)
    quality = rng.normal(size=(n_contexts, n_systems)) + rng.normal(scale=0.3, size=n_systems)
    ratings = np.clip(np.rint(3 + quality[..., None] + rng.normal(scale=0.7, size=(n_contexts, n_systems, 3))), 1, 5)
    human = ratings.mean(axis=2)
    gold_data = [
        {"id": f"c{c}", "responses": [{"id": f"c{c}/s{s}", "human": float(human[c, s]),
                                       "property": float(quality[c, s] + rng.normal())}
                                      for s in range(n_systems)]}
        for c in range(n_contexts)
    ]
    if name_systems:
        for context in gold_data:
            for s, response in enumerate(context["responses"]):
                response["system"] = f"S{s:02d}"
    runs = {}
    for m in range(n_metrics):
        scores = quality + rng.normal(scale=0.3 + 0.05 * m, size=quality.shape)
        if m % 8 == 0:
            scores = np.round(scores, 1)
        runs[f"metric{m:02d}"] = [{"id": f"c{c}/s{s}", "score": float(scores[c, s])}
                                  for c in range(n_contexts) for s in range(n_systems)]
    return gold_data, runs


CPU_TIMES: list[float] = []


def timed(repeats: int, function, *args, **kwargs):
    """Best and median wall seconds; the best CPU seconds of the process go to CPU_TIMES."""
    times, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        value = function(*args, **kwargs)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    CPU_TIMES.append(min(cpu))
    return value, min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n_contexts = 200 if args.quick else 2_000
    n_systems, n_metrics = 10, 40
    gold_data, run_data = make_round(n_contexts, n_systems, n_metrics)

    rows = []
    CPU_TIMES.clear()
    gold, best, median = timed(args.repeats, load_metric_gold, gold_data)
    rows.append(("validate + compile gold", best, median, ""))
    first_run = next(iter(run_data.values()))
    _, best, median = timed(args.repeats, load_metric_run, first_run, gold)
    rows.append(("validate one run", best, median, f"x {n_metrics} runs"))
    runs = {name: load_metric_run(data, gold) for name, data in run_data.items()}

    counts, best, median = timed(args.repeats, meta.context_counts, gold, runs)
    rows.append(("context_counts (all metrics)", best, median, f"{int(counts.pairs.sum()):,} pairs"))
    figures, best, median = timed(args.repeats, meta.evaluate_metrics, gold, runs, n_resamples=1_000, seed=1)
    rows.append(("evaluate_metrics, B = 1,000 (all per-metric figures)", best, median, "target <= 2 s"))
    boot, best, median = timed(args.repeats, meta.paired_bootstrap, counts, 10_000, 1)
    rows.append((f"paired_bootstrap, {n_metrics * (n_metrics - 1) // 2} pairs, B = 10,000", best, median,
                 "target <= 20 s"))
    _, best, median = timed(args.repeats, meta.paired_t_tests, counts)
    rows.append(("paired_t_tests, all pairs", best, median, ""))
    _, best, median = timed(args.repeats, meta.concordance_matrix, gold, runs)
    rows.append(("concordance_matrix, all pairs", best, median, ""))
    meta.pooled_rank_replicates(gold, runs["metric00"], np.ones((1, gold.n_contexts), dtype=np.int64))  # compile
    _, best, median = timed(1, meta.evaluate_metrics, gold, runs, n_resamples=1_000, seed=1,
                            pooled_rank_resamples=1_000)
    rows.append(("evaluate_metrics, B = 1,000, with pooled Kendall + Spearman intervals", best, median,
                 f"{best / n_metrics:.2f} s per metric"))
    _, best, median = timed(1, meta.discriminative_power_figures, gold, runs, 1_000, 1)
    rows.append((f"discriminative_power_figures, {n_systems} systems, B = 1,000", best, median, ""))

    print(f"{gold.n_responses:,} responses in {gold.n_contexts:,} contexts, {n_systems} systems, "
          f"{n_metrics} metrics\n")
    print("| step | best (s) | median (s) | CPU (s) | note |")
    print("|---|---:|---:|---:|---|")
    for (step, best, median, note), cpu in zip(rows, CPU_TIMES, strict=True):
        print(f"| {step} | {best:.3f} | {median:.3f} | {cpu:.3f} | {note} |")
    if not args.quick:
        wide_gold_data, wide_run_data = make_round(200, 100, n_metrics, name_systems=False)
        wide = load_metric_gold(wide_gold_data)
        wide_runs = {name: load_metric_run(data, wide) for name, data in wide_run_data.items()}
        wide_rows = []
        CPU_TIMES.clear()
        wide_counts, best, median = timed(args.repeats, meta.context_counts, wide, wide_runs)
        wide_rows.append(("context_counts", best, median, f"{int(wide_counts.pairs.sum()):,} pairs"))
        _, best, median = timed(args.repeats, meta.evaluate_metrics, wide, wide_runs, n_resamples=1_000, seed=1)
        wide_rows.append(("evaluate_metrics, B = 1,000", best, median, ""))
        _, best, median = timed(args.repeats, meta.paired_bootstrap, wide_counts, 10_000, 1)
        wide_rows.append(("paired_bootstrap, B = 10,000", best, median, ""))
        _, best, median = timed(args.repeats, meta.concordance_matrix, wide, wide_runs)
        wide_rows.append(("concordance_matrix", best, median, ""))
        print(f"\n{wide.n_responses:,} responses in {wide.n_contexts:,} contexts of 100, no systems, "
              f"{n_metrics} metrics\n")
        print("| step | best (s) | median (s) | CPU (s) | note |")
        print("|---|---:|---:|---:|---|")
        for (step, best, median, note), cpu in zip(wide_rows, CPU_TIMES, strict=True):
            print(f"| {step} | {best:.3f} | {median:.3f} | {cpu:.3f} | {note} |")
    kind_table(gold_data, run_data, args.repeats)
    sample = figures["metrics"]["metric00"]["measures"]
    print("\nmetric00:", {k: (round(v, 4) if v is not None else None) for k, v in sample.items()})
    print("smallest paired-bootstrap p:", float(boot.pvalues.min()))


def kind_table(gold_data, run_data, repeats: int) -> None:
    """The round through the task-kind interface, as a scoring job and a statistics job run it."""
    kind = get_kind("metric")
    config = kind.config({"n_resamples": 1_000, "seed": 1})  # every figure with its interval
    rows = []
    CPU_TIMES.clear()
    gold, best, median = timed(repeats, kind.compile_gold, gold_data, config)
    rows.append(("Kind.compile_gold", best, median, ""))
    runs = {name: kind.parse_run(data, gold, config) for name, data in run_data.items()}
    first = next(iter(runs.values()))
    _, best, median = timed(repeats, kind.score, first, gold, config)
    rows.append(("Kind.score, one run (all its figures and intervals, B = 1,000)", best, median,
                 "target <= 2 s"))

    def score_all():
        return [kind.score(run, gold, config) for run in runs.values()]

    _, best, median = timed(1, score_all)
    rows.append((f"Kind.score, all {len(runs)} runs one after the other", best, median, ""))
    _, best, median = timed(1, kind.score, first, gold, config, np.arange(0, gold.n_contexts, 2))
    rows.append(("Kind.score, half the contexts (a live subset)", best, median, ""))
    pairs = len(runs) * (len(runs) - 1) // 2
    counts = meta.context_counts(gold, {name: run.scores for name, run in runs.items()})
    _, best, median = timed(repeats, meta.paired_bootstrap, counts, 10_000, 1)
    rows.append((f"paired bootstrap inside compare, {pairs} pairs, B = 10,000", best, median, "target <= 20 s"))
    result, best, median = timed(1, kind.compare, runs, gold, config, seed=1, resamples=10_000)
    rows.append((f"Kind.compare, {len(runs)} runs, B = 10,000 (all parts)", best, median,
                 f"{len(json.dumps(result)) / 1e6:.1f} MB of JSON"))
    print(f"\nThrough the task kind, {gold.n_responses:,} responses in {gold.n_contexts:,} contexts, "
          f"{len(runs)} metrics\n")
    print("| step | best (s) | median (s) | CPU (s) | note |")
    print("|---|---:|---:|---:|---|")
    for (step, best, median, note), cpu in zip(rows, CPU_TIMES, strict=True):
        print(f"| {step} | {best:.3f} | {median:.3f} | {cpu:.3f} | {note} |")


if __name__ == "__main__":
    main()
