"""Speed of the response kind's measures in a warm process, printed as a Markdown table.

    .venv/bin/python benchmarks/response_speed.py                 # 10,000 items, 3 references each
    .venv/bin/python benchmarks/response_speed.py --items 2000    # quicker
    .venv/bin/python benchmarks/response_speed.py --check         # exit 1 if a target is missed

Seeded synthetic items: responses and references of 20-40 tokens drawn from the words of the
seed papers, reference weights in [-1, 1] with at least one positive. The pipeline is loaded and
warmed up before timing. Timed:

* BLEU (N = 4, closest) and deltaBLEU (N = 2, average): references prepared once (reported
  apart), then per run the tokenisation (sacrebleu's cache cleared first), sufficient statistics,
  per-item scores and the corpus score, each measure on its own;
* POSSCORE with 1 and with ``--processes`` worker processes: references tagged and embedded once
  (reported apart), then per run the tagging of every response and the scores;
* nugget-level scores (issue 14): ``--nugget-responses`` responses x 4 nuggets x (1 deletion +
  8 n_diff + 7 n_same) variants, POSSCORE as the turn measure, everything in one pass.

Targets (2-core machine, both cores): POSSCORE >= 1,000 items/s, BLEU and deltaBLEU >= 5,000
items/s, the nugget benchmark <= 60 s. The machine may be shared with other work: the load
average is printed with the figures, and the CPU time each run took (this process and its
forked taggers), which other load changes far less than the wall-clock time.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a  # noqa: E402

from scoring.response import bleu  # noqa: E402
from scoring.response.nuggets import ACTS_SEED004, Nugget, PosscoreTurns, Turn, score_nuggets  # noqa: E402
from scoring.response.posscore import PosEncoder, prepare_references, score_rows  # noqa: E402

TARGET_POSSCORE = 1000.0
TARGET_BLEU = 5000.0
TARGET_NUGGETS_SECONDS = 60.0
SEEDS = Path("/work/shared/seeds") if Path("/work/shared/seeds").is_dir() else ROOT / "fixtures"


def _vocabulary() -> list[str]:
    words: list[str] = []
    for path in sorted(SEEDS.glob("00[014]_*.txt")):
        words += re.findall(r"[A-Za-z][a-z]{1,12}", path.read_text())
    if len(words) < 1000:  # no seeds on this machine: a fixed small vocabulary
        words = ("i you we it is are was the a an to of and in for on with that this chess tournament play "
                 "help sorry thanks printer restart try please would recommend think maybe later see good bad "
                 "really like love hate know understand answer question train focus national player").split()
    return words


def _sentence(rng: random.Random, words: list[str], low: int = 20, high: int = 40) -> str:
    n = rng.randint(low, high)
    tokens = [rng.choice(words) for _ in range(n - 2)]
    cut = rng.randint(3, max(4, len(tokens) - 3))
    return " ".join(tokens[:cut]).capitalize() + ", " + " ".join(tokens[cut:]) + "."


def make_items(n_items: int, seed: int) -> tuple[list[list[tuple[str, float]]], list[str]]:
    rng = random.Random(seed)
    words = _vocabulary()
    references = []
    for _ in range(n_items):
        weights = [1.0] + [round(rng.uniform(-1, 1), 2) for _ in range(2)]
        references.append([(_sentence(rng, words), weight) for weight in weights])
    responses = [_sentence(rng, words) for _ in range(n_items)]
    return references, responses


def _cpu_seconds() -> float:
    # This process and its finished children (the forked taggers): what the work cost in CPU,
    # which other load on a shared machine changes far less than the wall-clock time.
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


CPU_SPENT: list[float] = []


def timed(function):
    start_cpu = _cpu_seconds()
    start = time.perf_counter()
    result = function()
    seconds = time.perf_counter() - start
    CPU_SPENT.append(_cpu_seconds() - start_cpu)
    return result, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--nugget-responses", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args()

    references, responses = make_items(args.items, args.seed)
    rows_out = []
    missed = []

    for name, config in (("BLEU", bleu.BLEU), ("deltaBLEU", bleu.DELTA_BLEU)):
        prepared, prepare_seconds = timed(lambda config=config: bleu.prepare_references(references, config))

        # sacrebleu's 13a tokeniser memoises texts: start each timed run cold, as a new run's responses are.
        Tokenizer13a.__call__.cache_clear()

        def run(config=config, prepared=prepared):
            stats = bleu.sufficient_statistics(responses, prepared)
            bleu.item_scores(stats, config.max_order, config.brevity)
            return bleu.corpus_score(stats, config.max_order, config.brevity)

        _, seconds = timed(run)
        rate = args.items / seconds
        rows_out.append((name, prepare_seconds, seconds, CPU_SPENT[-1], rate, TARGET_BLEU))
        if rate < TARGET_BLEU:
            missed.append(name)

    for processes in sorted({1, args.processes}):
        encoder = PosEncoder(n_process=processes, batch_size=256)
        encoder.encode(["Warm up the pipeline, please.", "It is loaded once per process."])
        prepared, prepare_seconds = timed(lambda encoder=encoder: prepare_references(references, encoder))
        _, seconds = timed(lambda encoder=encoder, prepared=prepared: score_rows(encoder.encode(responses), prepared))
        rate = args.items / seconds
        rows_out.append((f"POSSCORE, {processes} process(es)", prepare_seconds, seconds, CPU_SPENT[-1], rate,
                         TARGET_POSSCORE))
        if processes == args.processes and rate < TARGET_POSSCORE:
            missed.append("POSSCORE")

    # Nuggets: 4 nuggets per response, 8 alternatives of other acts and 7 rewordings each.
    rng = random.Random(args.seed + 1)
    words = _vocabulary()
    n_turns = args.nugget_responses
    turns = []
    for index in range(n_turns):
        nuggets = []
        for _ in range(4):
            act = rng.choice(ACTS_SEED004)
            nuggets.append(Nugget(
                _sentence(rng, words, 5, 10), act,
                diff=tuple(_sentence(rng, words, 5, 10) for _ in range(8)),
                same=tuple(_sentence(rng, words, 5, 10) for _ in range(7)),
            ))
        turns.append(Turn(index % args.items, " ".join(n.text for n in nuggets), nuggets))
    encoder = PosEncoder(n_process=args.processes, batch_size=256)
    prepared = prepare_references(references, encoder)
    results, nugget_seconds = timed(lambda: score_nuggets(turns, PosscoreTurns(encoder, prepared)))
    assert sum(len(turn) for turn in results) == 4 * n_turns
    variants = n_turns * (1 + 4 * (1 + 8 + 7))
    if nugget_seconds > TARGET_NUGGETS_SECONDS * n_turns / 1000:
        missed.append("nuggets")

    load = os.getloadavg()
    print(f"{args.items:,} items x 3 references, responses of 20-40 tokens; load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores\n")
    print("| measure | references prepared once (s) | one run (s) | CPU for the run (s) | items/s | "
          "items per CPU-second | target items/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, prepare_seconds, seconds, cpu, rate, target in rows_out:
        print(f"| {name} | {prepare_seconds:.2f} | {seconds:.2f} | {cpu:.2f} | {rate:,.0f} | {args.items / cpu:,.0f} | "
              f"{target:,.0f} |")
    print(f"\nNuggets: {n_turns:,} responses x 4 nuggets x (1 + 8 + 7) variants = {variants:,} turns scored "
          f"(POSSCORE, {args.processes} process(es), tags per nugget): {nugget_seconds:.1f} s, "
          f"{CPU_SPENT[-1]:.1f} CPU-s "
          f"(target {TARGET_NUGGETS_SECONDS * n_turns / 1000:.0f} s)")
    if missed:
        print(f"\nMissed: {', '.join(missed)}")
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
