"""vBLEU on real-looking helpdesk dialogues (issue 27): does it reward parrots, does the rater beat uniform weights?

    .venv/bin/python benchmarks/vbleu_realistic.py                   # 3,000 dialogues, 300 items
    .venv/bin/python benchmarks/vbleu_realistic.py --dialogues 6000 --items 500

The pool is every (user utterance, agent reply) pair of ``--dialogues`` dialogues written by
``devtools/dialogues.py`` (ten intents, many wordings, slots filled in, follow-ups, thanks); the items
are ``--items`` further dialogues, each with its true reply as the only original reference (as in
the real helpdesk check of RESPONSE-SPEC.md). The rater is trained on the pool with the default
settings and the default pipeline's vectors; vBLEU (deltaBLEU-2 over the extended gold, rho from
the original positive references) is computed for four systems: the true reply, its first half,
another dialogue's reply and an echo of the user's utterance. Printed for the parrot at its
default weight (-1) and rated by the rater (the old default), and, for the retrieved references,
with the rater's weights and with one uniform weight (1: every retrieved reply counts fully).
Also: the rater's held-out accuracy here and on the demo's pool (fixtures/response_demo.py), and
how often per-item vBLEU puts another agent's reply to the same intent (a good reply that is not the
reference) above another dialogue's reply (ties count half).
"""

from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np

from devtools.dialogues import dialogues, other_wording, pool_pairs, response_items  # noqa: E402
from scoring.kinds.response import bleu  # noqa: E402
from scoring.kinds.response import vbleu as vb  # noqa: E402
from scoring.kinds.response.formats import load_response_gold  # noqa: E402
from scoring.kinds.response.nlp import load_pipeline, pipeline_vectors  # noqa: E402


def systems(items: list[dict], held_out: list, seed: int) -> dict[str, list[str]]:
    true = [item["references"][0]["text"] for item in items]
    rng = random.Random(seed)
    return {
        "true reply": true,
        "another wording (same intent)": [other_wording(dialogue, rng) for dialogue in held_out],
        "its first half": [" ".join(text.split()[: max(1, len(text.split()) // 2)]) for text in true],
        "another dialogue's reply": true[7:] + true[:7],
        "echo of the utterance": [item["context"][-1]["text"] for item in items],
    }


def scores(gold: list[dict], hypotheses: list[str]) -> tuple[float, np.ndarray]:
    loaded = load_response_gold(gold)
    prepared = bleu.prepare_references(loaded.references, bleu.DELTA_BLEU, added=loaded.extended)
    stats = bleu.sufficient_statistics(hypotheses, prepared)
    return bleu.corpus_score(stats, 2, "average"), bleu.item_scores(stats, 2, "average")


def reweighted(gold: list[dict], pool_weight: float | None, parrot_weight: float | None) -> list[dict]:
    """The extended gold with the retrieved references' weights (and the parrot's) replaced."""
    out = []
    for entry in gold:
        references = []
        for reference in entry["references"]:
            reference = dict(reference)
            if reference.get("origin") == "pool" and pool_weight is not None:
                reference["weight"] = pool_weight
            if reference.get("origin") == "parrot" and parrot_weight is not None:
                reference["weight"] = parrot_weight
            references.append(reference)
        out.append({**entry, "references": references})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialogues", type=int, default=3000)
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    pool_dialogues = dialogues(args.dialogues, seed=args.seed)
    held_out = dialogues(args.items, seed=args.seed + 1000)
    pairs = pool_pairs(pool_dialogues)
    items = response_items(held_out, seed=args.seed, alternatives=False)
    pool = vb.read_pool("".join(json.dumps(pair) + "\n" for pair in pairs).encode())
    vectors = pipeline_vectors(load_pipeline())
    started = time.perf_counter()
    rated = vb.extend_gold(items, pool, rater=vb.RaterSettings(seed=args.seed, parrot_weight=None), vectors=vectors)
    elapsed = time.perf_counter() - started
    report = rated.provenance["rater"]
    parrots = [reference["weight"] for entry in rated.gold for reference in entry["references"]
               if reference.get("origin") == "parrot"]
    pool_weights = [reference["weight"] for entry in rated.gold for reference in entry["references"]
                    if reference.get("origin") == "pool"]
    print(f"pool: {len(pool):,} pairs from {args.dialogues:,} dialogues; items: {len(items)}; "
          f"extension with the rater {elapsed:.1f} s")
    print(f"rater: held-out accuracy {report['held_out_accuracy']:.3f} on {report['pairs']['held_out']:,} true + "
          f"as many random pairs it never trained on; parrots rated {np.mean(parrots):+.3f} on average "
          f"(min {min(parrots):+.3f}); retrieved references rated {np.mean(pool_weights):+.3f} on average")
    from fixtures.response_demo import generate_pool

    demo_pool = vb.read_pool("".join(json.dumps(pair) + "\n" for pair in generate_pool()).encode())
    demo = vb.train_rater(demo_pool, vectors, vb.RaterSettings(seed=args.seed))
    print(f"rater on the demo's pool ({len(demo_pool):,} pairs): held-out accuracy "
          f"{demo.report['held_out_accuracy']:.3f}")
    print()
    variants = {
        "parrot -1 (default), rated pool weights": reweighted(rated.gold, None, -1.0),
        "parrot rated (old default), rated pool weights": rated.gold,
        "parrot -1, uniform pool weights 1": reweighted(rated.gold, 1.0, -1.0),
        "parrot -1, uniform pool weights 0.5": reweighted(rated.gold, 0.5, -1.0),
    }
    outputs = systems(items, held_out, args.seed)
    print("| weights | " + " | ".join(outputs) + " | same intent > other intent, per item |")
    print("|---|" + "---|" * (len(outputs) + 1))
    for name, gold in variants.items():
        per_system = {system: scores(gold, hypotheses) for system, hypotheses in outputs.items()}
        # A good reply that is not the reference against a bad one: what the retrieved references are for.
        good_items = per_system["another wording (same intent)"][1]
        other_items = per_system["another dialogue's reply"][1]
        wins = float(np.mean(good_items > other_items) + 0.5 * np.mean(good_items == other_items))
        cells = [f"{corpus:.3f} (items {items_.mean():.3f})" for corpus, items_ in per_system.values()]
        print(f"| {name} | " + " | ".join(cells) + f" | {wins:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
