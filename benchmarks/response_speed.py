"""Speed of the response kind, through the task-kind interface, printed as Markdown tables.

    .venv/bin/python benchmarks/response_speed.py                 # 10,000 items, 3 references each
    .venv/bin/python benchmarks/response_speed.py --items 2000    # quicker
    .venv/bin/python benchmarks/response_speed.py --check         # exit 1 if a target is missed
    .venv/bin/python benchmarks/response_speed.py --blis-anchor   # POSSCORE also as before issue 28 (BLIS)

Seeded synthetic items: responses and references of 20-40 tokens drawn from the words of the
seed papers, reference weights in [-1, 1] with at least one positive. Everything goes through
``scoring.kinds.get_kind("response")``, as the server and the offline command do:

* the gold version: ``compile_gold`` (validation and tagging every reference once), its bytes;
* per measure, a configuration with that measure alone: a *cold* worker (``gold_from_bytes``
  then the first ``score``, which prepares the references: BLEU n-gram tables, POSSCORE vectors
  from the stored tags) and a *warm* one (the next run: tokenisation with sacrebleu's cache
  cleared, or tagging, sufficient statistics and scores), POSSCORE with 1 and with
  ``--processes`` tagging processes;
* with ``--blis-anchor``, POSSCORE again with the models' matrix products in thinc's bundled
  BLIS, as before issue 28 (``scoring.kinds.response.nlp.load_pipeline`` builds them on NumPy's
  BLAS: benchmarks/tagging_ops.py), in the same run;
* the scoring part of an upload: parsing the run's JSON, ``parse_run`` and ``score`` with all
  three measures, in a warm worker;
* nugget-level scores (issue 14): ``--nugget-responses`` responses x 4 nuggets x (1 deletion +
  8 n_diff + 7 n_same) variants, POSSCORE as the turn measure, one ``score`` call; the run's own
  POSSCORE is timed apart and subtracted.

Targets (2-core machine, both cores): POSSCORE >= 1,000 items/s, BLEU and deltaBLEU >= 5,000
items/s, the nugget benchmark <= 60 s. The machine may be shared with other work: the load
average is printed with the figures, and the CPU time of each step (this process and its
forked taggers), which other load changes far less than the wall-clock time.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
import orjson  # noqa: E402
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a  # noqa: E402

from scoring.kinds import get_kind  # noqa: E402
from scoring.kinds.response.kind import CompiledResponseGold, set_tagging_processes  # noqa: E402
from scoring.kinds.response.nuggets import ACTS_SEED004  # noqa: E402
from scoring.validation import parse_json  # noqa: E402

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


def make_files(n_items: int, seed: int) -> tuple[list[dict], list[dict]]:
    """A gold file (3 references per item, one weight 1, two in [-1, 1]) and a run."""
    rng = random.Random(seed)
    words = _vocabulary()
    gold = []
    for index in range(n_items):
        weights = [1.0] + [round(rng.uniform(-1, 1), 2) for _ in range(2)]
        gold.append({"id": f"c{index}", "context": [{"sender": "user", "text": _sentence(rng, words, 5, 15)}],
                     "references": [{"text": _sentence(rng, words), "weight": weight} for weight in weights]})
    run = [{"id": f"c{index}", "response": _sentence(rng, words)} for index in range(n_items)]
    return gold, run


def make_nugget_run(gold: list[dict], n_turns: int, seed: int) -> list[dict]:
    """Responses of 4 nuggets, each with 8 alternatives of other acts and 7 rewordings."""
    rng = random.Random(seed)
    words = _vocabulary()
    run = []
    for index in range(n_turns):
        nuggets = []
        for _ in range(4):
            act = rng.choice(ACTS_SEED004)
            others = rng.sample([other for other in ACTS_SEED004 if other != act], 8)
            nuggets.append({"text": _sentence(rng, words, 5, 10), "act": act,
                            "diff": [{"text": _sentence(rng, words, 5, 10), "act": other} for other in others],
                            "same": [_sentence(rng, words, 5, 10) for _ in range(7)]})
        run.append({"id": gold[index]["id"], "response": " ".join(n["text"] for n in nuggets), "nuggets": nuggets})
    return run


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


def _use_blis(on: bool) -> None:
    """The loaded pipeline's models multiply with thinc's bundled BLIS (``on``) or, as shipped,
    with NumPy's BLAS."""
    from thinc.api import NumpyOps

    from scoring.kinds.response.nlp import load_pipeline

    ops = NumpyOps(use_blis=on)
    for _, component in load_pipeline().pipeline:
        for layer in component.model.walk() if hasattr(component, "model") else ():
            layer.ops = ops


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--nugget-responses", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--blis-anchor", action="store_true",
                        help="also POSSCORE with thinc's bundled BLIS, as before issue 28 (not judged)")
    args = parser.parse_args()

    kind = get_kind("response")
    gold_data, run_data = make_files(args.items, args.seed)
    run_bytes = orjson.dumps(run_data)
    missed = []

    set_tagging_processes(args.processes)
    everything = kind.config({})
    compiled, compile_seconds = timed(lambda: kind.compile_gold(gold_data, everything))
    compile_cpu = CPU_SPENT[-1]
    blob, bytes_seconds = timed(compiled.to_bytes)

    rows_out = []
    anchors = [(f"POSSCORE, {args.processes} processes, BLIS (before issue 28)", "posscore", args.processes, None),
               ("POSSCORE, 1 process, BLIS (before issue 28)", "posscore", 1, None)] if args.blis_anchor else []
    for label, key, processes, target in (
        ("BLEU (N = 4, closest)", "bleu", 1, TARGET_BLEU),
        ("deltaBLEU (N = 2, average)", "delta_bleu", 1, TARGET_BLEU),
        ("POSSCORE, 1 process", "posscore", 1, TARGET_POSSCORE),
        (f"POSSCORE, {args.processes} processes", "posscore", args.processes, TARGET_POSSCORE),
        *anchors,
    ):
        if label == "POSSCORE, 1 process" and args.processes == 1:
            continue  # the next row is the same configuration (skipping both left POSSCORE out)
        if target is None:  # an anchor: forked taggers inherit the models as they are at the fork
            _use_blis(True)
        set_tagging_processes(processes)
        config = kind.config({"measures": [key], "official": [key], "nuggets": {"score": "never"}})
        # A cold worker: the gold from its bytes (not the process's cache), the first run prepares it.
        gold, load_seconds = timed(lambda: CompiledResponseGold.from_bytes(blob))
        run = kind.parse_run(run_data, gold, config)
        Tokenizer13a.__call__.cache_clear()
        _, first_seconds = timed(lambda config=config, gold=gold, run=run: kind.score(run, gold, config))
        # sacrebleu's 13a tokeniser memoises texts: a new run's responses are new texts.
        Tokenizer13a.__call__.cache_clear()
        _, seconds = timed(lambda config=config, gold=gold, run=run: kind.score(run, gold, config))
        rate = args.items / seconds
        if target is None:
            _use_blis(False)
        rows_out.append((label, load_seconds + first_seconds, seconds, CPU_SPENT[-1], rate, target))
        if target is not None and processes == args.processes and rate < target:
            missed.append(label)

    # The scoring part of an upload in a warm worker: JSON, validation, all three measures.
    set_tagging_processes(args.processes)
    gold = kind.gold_from_bytes(blob)
    kind.score(kind.parse_run(run_data, gold, everything), gold, everything)  # prepares the gold once
    Tokenizer13a.__call__.cache_clear()
    scored, upload_seconds = timed(lambda: kind.score(kind.parse_run(parse_json(run_bytes, "run file"), gold,
                                                                     everything), gold, everything))
    upload_cpu = CPU_SPENT[-1]
    assert scored.n_items == args.items

    # Nuggets: 4 nuggets per response, 8 alternatives of other acts and 7 rewordings each.
    n_turns = min(args.nugget_responses, args.items)
    nugget_run = kind.parse_run(make_nugget_run(gold_data, n_turns, args.seed + 1), gold, everything,
                                allow_missing=True)
    plain = kind.config({"measures": ["posscore"], "official": ["posscore"], "nuggets": {"score": "never"}})
    with_nuggets = kind.config({"measures": ["posscore"], "official": ["posscore"], "nuggets": {"score": "always"}})
    _, posscore_only = timed(lambda: kind.score(nugget_run, gold, plain))
    result, nugget_total = timed(lambda: kind.score(nugget_run, gold, with_nuggets))
    nugget_cpu = CPU_SPENT[-1]
    assert sum(len(nuggets) for nuggets in result.details["nuggets"].values()) == 4 * n_turns
    nugget_seconds = nugget_total - posscore_only
    variants = n_turns * (1 + 4 * (1 + 8 + 7))
    if nugget_total > TARGET_NUGGETS_SECONDS * n_turns / 1000:
        missed.append("nuggets")

    load = os.getloadavg()
    print(f"{args.items:,} items x 3 references, responses of 20-40 tokens; load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores\n")
    print(f"Gold version: compile_gold (validation, tagging {3 * args.items:,} references with "
          f"{args.processes} processes) {compile_seconds:.1f} s ({compile_cpu:.1f} CPU-s); to_bytes "
          f"{bytes_seconds:.2f} s, {len(blob) / 1e6:.1f} MB\n")
    print("| measure (one configuration each) | cold worker: gold from bytes + first run (s) | warm run (s) | "
          "CPU for the warm run (s) | items/s | items per CPU-second | target items/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, cold_seconds, seconds, cpu, rate, target in rows_out:
        print(f"| {name} | {cold_seconds:.2f} | {seconds:.2f} | {cpu:.2f} | {rate:,.0f} | {args.items / cpu:,.0f} | "
              f"{f'{target:,.0f}' if target else '(anchor)'} |")
    print(f"\nUpload, scoring part (parse the run's JSON, parse_run, score with all three measures, warm worker, "
          f"{args.processes} processes): {upload_seconds:.1f} s, {upload_cpu:.1f} CPU-s, "
          f"{args.items / upload_seconds:,.0f} items/s")
    print(f"\nNuggets: {n_turns:,} responses x 4 nuggets x (1 + 8 + 7) variants = {variants:,} turns scored "
          f"(POSSCORE, {args.processes} processes, tags per nugget): {nugget_total:.1f} s for the whole score call "
          f"({nugget_cpu:.1f} CPU-s), of which {nugget_seconds:.1f} s nugget scores and {posscore_only:.1f} s the "
          f"run's own POSSCORE (target {TARGET_NUGGETS_SECONDS * n_turns / 1000:.0f} s)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nPeak resident memory of this process: {peak:,.0f} MB (the pipeline, the gold with what it prepared, "
          "the runs)")
    if missed:
        print(f"\nMissed: {', '.join(missed)}")
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
