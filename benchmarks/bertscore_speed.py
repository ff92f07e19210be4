"""What BERTScore / vBERTScore cost: encoder load, encoding, matching, memory; prints the figures.

    .venv/bin/python benchmarks/bertscore_speed.py                  # 300 texts, 2,000 items
    .venv/bin/python benchmarks/bertscore_speed.py --texts 1000 --items 5000

- encoder: load time (sha256 check and dequantising the 4-bit layers) and the process's peak RSS;
- encoding: texts per second over distinct agent replies and user utterances of ``devtools/dialogues.py``
  (the cost is per text: references once per gold version, responses once per run), and the same
  texts' forward passes in padded batches as before issue 37.12 (the cost of never padding);
- matching: items per second of eq. 11-12 over already-encoded texts (one candidate against three
  references, as a gold with weighted references has);
- a pool: encoding its utterances and responses (what retrieval by embeddings and a rater on encoder
  features need) at 10^4 and 10^5 pairs, extrapolated from the measured per-text rate (the cost is
  linear in the number of distinct texts), beside vBLEU's BM25 index build measured at the same sizes.

The machine is shared: compare figures of one run, not across runs. Each timing is printed as wall
time and as this process's CPU time (the forward pass runs on one BLAS thread, so texts per CPU
second is what an otherwise idle core would do; wall time depends on the other processes).
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np

from devtools.dialogues import dialogues, pool_pairs  # noqa: E402
from scoring.kinds.response import bertscore  # noqa: E402
from scoring.kinds.response import vbleu as vb  # noqa: E402
from scoring.kinds.response.encoder import DEFAULT_PREFIX, E5Encoder  # noqa: E402


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


PADDED_BATCH_TOKENS = 4096


def padded_batches_cpu(model: E5Encoder, texts: list[str]) -> float:
    """CPU seconds of the forward passes ``encode`` made before it stopped padding: texts sorted by
    length into padded batches of at most ``PADDED_BATCH_TOKENS`` tokens (the before of the ratio)."""
    sequences, _ = model._sequences(texts, DEFAULT_PREFIX)
    batches: list[list[list[int]]] = [[]]
    for sequence in sorted(sequences, key=len):
        if batches[-1] and len(sequence) * (len(batches[-1]) + 1) > PADDED_BATCH_TOKENS:
            batches.append([])
        batches[-1].append(sequence)
    started = time.process_time()
    for batch in batches:
        model.forward(batch)
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=300)
    parser.add_argument("--items", type=int, default=2000)
    options = parser.parse_args()
    before = peak_mb()
    started = time.perf_counter()
    model = E5Encoder.default()
    print(f"encoder load: {time.perf_counter() - started:.1f} s; peak RSS {before:.0f} MB before, "
          f"{peak_mb():.0f} MB after")
    pairs = pool_pairs(dialogues(20_000, seed=0))
    texts = list(dict.fromkeys(text for pair in pairs for text in (pair["utterance"], pair["response"])))
    texts = texts[:options.texts]
    tokens = [len(model.tokenizer(text)) for text in texts]
    started, cpu = time.perf_counter(), time.process_time()
    encoded = model.encode(texts)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    rate = len(texts) / cpu
    print(f"encoding: {len(texts)} distinct texts (mean {np.mean(tokens):.1f} tokens) in {seconds:.1f} s wall, "
          f"{cpu:.1f} s CPU = {len(texts) / seconds:.1f} texts/s wall, {rate:.1f} texts per CPU second; "
          f"peak RSS {peak_mb():.0f} MB")
    padded = padded_batches_cpu(model, texts)
    print(f"unpadded against padded batches: texts of one token count per pass (what encode does, batch-independent "
          f"bits) {cpu:.1f} s CPU; the same texts in padded batches of at most {PADDED_BATCH_TOKENS} tokens (how "
          f"they were encoded before issue 37.12) {padded:.1f} s CPU; ratio unpadded / padded {cpu / padded:.3f}")

    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(encoded), size=(options.items, 4))
    prepared = bertscore.prepare_references([encoded[k] for row in picks for k in row[1:]],
                                            list(rng.uniform(-1, 1, size=options.items * 3)), [3] * options.items)
    candidates = [encoded[row[0]] for row in picks]
    started, cpu = time.perf_counter(), time.process_time()
    bertscore.score_items(candidates, prepared, range(options.items))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"matching (eq. 11-12, 3 references per item): {options.items} items in {seconds:.2f} s wall, "
          f"{cpu:.2f} s CPU = {options.items / cpu:,.0f} items per CPU second")
    print(f"scoring a run of 10,000 responses (encoding dominates): about {10_000 / rate / 60:.0f} CPU min; "
          f"a gold of 10,000 items x 3 references: about {30_000 / rate / 60:.0f} CPU min (once per gold version)")

    for size in (10_000, 100_000):
        chosen = pool_pairs(dialogues(size, seed=1))[:size]
        data = "".join(json.dumps(pair) + "\n" for pair in chosen).encode()
        started = time.process_time()
        vb.build_index(vb.read_pool(data))
        bm25 = time.process_time() - started
        distinct = len({text for pair in chosen for text in (pair["utterance"], pair["response"])})
        print(f"pool of {len(chosen):,} pairs: BM25 index {bm25:.1f} CPU s (measured); encoding its {distinct:,} "
              f"distinct texts about {distinct / rate / 60:.1f} CPU min (extrapolated at {rate:.1f} texts/CPU s)")
    print(f"peak RSS {peak_mb():.0f} MB")


if __name__ == "__main__":
    main()
