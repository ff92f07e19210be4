"""vBLEU at pool scale (issue 15): pool reading, BM25 index, retrieval per item, rater training; a Markdown table.

    .venv/bin/python benchmarks/vbleu_speed.py                      # 10^6 pairs, 1,000 items
    .venv/bin/python benchmarks/vbleu_speed.py --pairs 100000       # quicker
    .venv/bin/python benchmarks/vbleu_speed.py --check              # exit 1 if a target is missed

A seeded synthetic pool is written to a temporary JSONL file first (not timed): utterances of
4-15 and responses of 3-19 tokens, half of them words of one topic (200 topics grouping the words
of the seed papers that have a vector in the default pipeline, each word with its nearest of 200
random centre words, so a topic is coherent in the vector space) and half frequent function words
drawn by a Zipf law (so some posting lists hold most of the pool, as in real logs). Items are
new utterances made the same way. Timed, one after the other in one process:

* ``read_pool``: stream, validate and hash the file;
* ``build_index``: 13a tokens of every utterance and bm25s's sparse index; the process's peak
  RSS after it (it holds the pool too);
* retrieval: ``PoolIndex.retrieve`` per item (k = 15, dedupe, parrot): mean, median, 95th
  percentile and slowest;
* ``train_rater`` with the default settings (200,000 true + 200,000 random training pairs,
  one BLAS thread), its held-out accuracy, and rating the retrieved references of every item.

Targets (issue 15): index build <= 120 s and <= 4 GB peak RSS, retrieval <= 20 ms per item (mean),
rater training <= 120 s. The load average and the CPU time of each step are printed with the
figures: the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parent.parent
from scoring.kinds.response import vbleu  # noqa: E402
from scoring.kinds.response.nlp import VectorTable, load_pipeline, pipeline_vectors  # noqa: E402

TARGET_INDEX_SECONDS = 120.0
TARGET_INDEX_GB = 4.0
TARGET_RETRIEVAL_MS = 20.0
TARGET_RATER_SECONDS = 120.0
TOPICS = 200
SEEDS = Path("/work/shared/seeds") if Path("/work/shared/seeds").is_dir() else ROOT / "fixtures"
FUNCTION_WORDS = ("i you the a is do what how to it that and of in my your we have be not for this are can just so "
                  "like know think really was there with me at but about when why would").split()


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # Linux: kilobytes


def current_rss_gb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024**3


def topic_vocabulary(vectors: VectorTable, rng: np.random.Generator) -> tuple[list[str], list[np.ndarray]]:
    """Words of the seed papers with a vector, and each topic's word indices (nearest random centre word)."""
    from spacy.strings import get_string_id

    text = " ".join(path.read_text() for path in sorted(SEEDS.glob("00*.txt")))
    candidates = sorted({word.lower() for word in re.findall(r"[A-Za-z]{3,14}", text)} - set(FUNCTION_WORDS))
    rows = vectors.rows(np.array([get_string_id(word) for word in candidates], dtype=np.uint64))
    words = [word for word, row in zip(candidates, rows) if row >= 0]
    matrix = vectors.data[rows[rows >= 0]].astype(np.float64)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    centres = matrix[rng.choice(len(words), TOPICS, replace=False)]
    nearest = np.argmax(matrix @ centres.T, axis=1)
    return words, [np.flatnonzero(nearest == topic) for topic in range(TOPICS)]


class Generator:
    def __init__(self, vectors: VectorTable, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.words, members = topic_vocabulary(vectors, self.rng)
        members = [m for m in members if len(m)]
        self.sizes = np.array([len(m) for m in members])
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
        self.flat_members = np.concatenate(members)
        self.function_ids = np.arange(len(FUNCTION_WORDS)) + len(self.words)
        self.vocabulary = self.words + FUNCTION_WORDS
        zipf = 1.0 / np.arange(1, len(FUNCTION_WORDS) + 1)
        self.function_p = zipf / zipf.sum()

    def sentences(self, topics: np.ndarray, low: int, high: int, question: float) -> list[str]:
        rng = self.rng
        lengths = rng.integers(low, high + 1, size=len(topics))
        owner = np.repeat(np.arange(len(topics)), lengths)
        topic_word = self.flat_members[self.offsets[topics[owner]] +
                                       (rng.random(len(owner)) * self.sizes[topics[owner]]).astype(np.int64)]
        function_word = rng.choice(self.function_ids, size=len(owner), p=self.function_p)
        ids = np.where(rng.random(len(owner)) < 0.5, topic_word, function_word).tolist()
        ends = np.where(rng.random(len(topics)) < question, "?", ".").tolist()
        vocabulary = self.vocabulary
        out = []
        start = 0
        for length, end in zip(lengths.tolist(), ends):
            out.append(" ".join([vocabulary[i] for i in ids[start : start + length]]).capitalize() + " " + end)
            start += length
        return out

    def pairs(self, count: int) -> tuple[list[str], list[str]]:
        topics = self.rng.integers(0, len(self.sizes), size=count)
        return self.sentences(topics, 4, 15, 0.6), self.sentences(topics, 3, 19, 0.2)


def write_pool(path: Path, generator: Generator, pairs: int, chunk: int = 100_000) -> None:
    with path.open("wb") as out:
        for start in range(0, pairs, chunk):
            utterances, responses = generator.pairs(min(chunk, pairs - start))
            out.write(b"".join(orjson.dumps({"utterance": u, "response": r}) + b"\n"
                               for u, r in zip(utterances, responses)))


def timed(function):
    wall, cpu = time.perf_counter(), time.process_time()
    result = function()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args()

    vectors = pipeline_vectors(load_pipeline())
    generator = Generator(vectors, args.seed)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "pool.jsonl"
        _, generate_seconds, _ = timed(lambda: write_pool(path, generator, args.pairs))
        size_mb = path.stat().st_size / 1024**2
        rss_start = current_rss_gb()
        pool, read_seconds, read_cpu = timed(lambda: vbleu.read_pool(path))
    rss_pool = current_rss_gb()
    index, index_seconds, index_cpu = timed(lambda: vbleu.build_index(pool))
    rss_index, peak_index = current_rss_gb(), peak_rss_gb()

    queries, _ = generator.pairs(args.items)
    references = ["I do not know ."]
    index.retrieve(queries[0], references)  # warm up (first calls allocate)
    per_item = []
    found = []
    cpu = time.process_time()
    for query in queries:
        start = time.perf_counter()
        found.append(index.retrieve(query, references))
        per_item.append(time.perf_counter() - start)
    retrieve_cpu = time.process_time() - cpu
    per_item_ms = np.array(per_item) * 1000

    rater, rater_seconds, rater_cpu = timed(lambda: vbleu.train_rater(pool, vectors))
    flat_u = [query for query, candidates in zip(queries, found) for _ in candidates]
    flat_r = [candidate.text for candidates in found for candidate in candidates]
    weights, rate_seconds, _ = timed(lambda: rater.weights(flat_u, flat_r))
    peak_all = peak_rss_gb()

    load = os.getloadavg()
    print(f"Pool of {len(pool):,} pairs ({size_mb:,.0f} MB of JSONL, written in {generate_seconds:.0f} s), "
          f"{args.items:,} items; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores\n")
    print("| step | wall (s) | CPU (s) | figure | target |")
    print("|---|---:|---:|---|---|")
    print(f"| read_pool (stream, validate, sha256) | {read_seconds:.1f} | {read_cpu:.1f} | "
          f"{len(pool) / read_seconds:,.0f} lines/s; RSS {rss_start:.2f} -> {rss_pool:.2f} GB | |")
    print(f"| build_index (13a tokens + bm25s) | {index_seconds:.1f} | {index_cpu:.1f} | peak RSS {peak_index:.2f} "
          f"GB (RSS {rss_pool:.2f} -> {rss_index:.2f} GB) | <= {TARGET_INDEX_SECONDS:.0f} s, "
          f"<= {TARGET_INDEX_GB:.0f} GB |")
    print(f"| retrieve, per item (k = 15) | {per_item_ms.mean() / 1000:.4f} | {retrieve_cpu / args.items:.4f} | "
          f"mean {per_item_ms.mean():.1f} ms, median {np.median(per_item_ms):.1f}, "
          f"p95 {np.percentile(per_item_ms, 95):.1f}, max {per_item_ms.max():.1f} | <= {TARGET_RETRIEVAL_MS:.0f} ms |")
    report = rater.report
    print(f"| train_rater (default settings) | {rater_seconds:.1f} | {rater_cpu:.1f} | held-out accuracy "
          f"{report['held_out_accuracy']:.3f} on {report['examples']['held_out']:,} examples (true + random), "
          f"{report['examples']['train']:,} trained on, epochs {report['epochs_run']} (best {report['best_epoch']}), "
          f"seed {report['seed']} | <= {TARGET_RATER_SECONDS:.0f} s |")
    parrot = np.array([candidate.origin == "parrot" for candidates in found for candidate in candidates])
    print(f"| rate the retrieved references | {rate_seconds:.1f} | | {len(flat_r):,} references; mean weight "
          f"{weights[~parrot].mean():+.3f} (pool), {weights[parrot].mean():+.3f} (parrots) | |")
    print(f"\nPeak RSS of the whole run: {peak_all:.2f} GB.")
    missed = []
    if index_seconds > TARGET_INDEX_SECONDS or peak_index > TARGET_INDEX_GB:
        missed.append("index build")
    if per_item_ms.mean() > TARGET_RETRIEVAL_MS:
        missed.append("retrieval per item")
    if rater_seconds > TARGET_RATER_SECONDS:
        missed.append("rater training")
    if missed:
        print(f"\nMissed: {', '.join(missed)}")
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
