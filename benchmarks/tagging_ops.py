"""Tagging with the models' matrix products in thinc's bundled BLIS or in NumPy's BLAS: the same tags? how fast?

    .venv/bin/python benchmarks/tagging_ops.py                       # 6,000 generated responses and the seed papers
    .venv/bin/python benchmarks/tagging_ops.py --texts 30000         # more tokens compared
    .venv/bin/python benchmarks/tagging_ops.py --pipeline ja_ginza   # another pipeline (its own texts: the seeds)

POSSCORE tags every response with spaCy (tok2vec, tagger); three quarters of that time is matrix
products (thinc's ``gemm``). thinc multiplies with its bundled BLIS by default, and that BLIS does
not recognise AMD family 25 processors (Zen 3 and 4: ``BLIS_ARCH_DEBUG=1`` prints "selecting
sub-configuration 'generic'"), whose portable kernel ran at 17 GFLOPS a core here against
OpenBLAS's 47 (NumPy's BLAS). ``scoring.kinds.response.nlp.load_pipeline`` therefore builds the
models with ``NumpyOps(use_blis=False)``, and ``PosEncoder`` tags on one BLAS thread.

The same texts are tagged three times in this process, on one BLAS thread each time: BLIS,
NumPy, BLIS again (the second BLIS pass shows how much the figures move by themselves); the fine
tags and the Universal POS the models give (``TAG``, ``POS``: the morphologizer's, for GiNZA) are
compared token by token, and the wall-clock and
CPU seconds of each pass printed with the load average (other work on the machine inflates
both; compare the passes of one run).

    Measured 2026-11-27, 2 shared cores, load average 4-5 (``--texts 20000``): 668,145 tokens, 0
    tagged differently; BLIS 30.90 CPU-s, NumPy 15.82, BLIS again 30.95 (NumPy 1.95x faster).
    ``--pipeline ja_ginza``: 75,177 tokens, 0 tagged differently; BLIS 34.69 CPU-s, NumPy 14.43,
    BLIS again 32.45 (2.40x; 2.24x in a second run).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

SEEDS = Path("/work/shared/seeds") if Path("/work/shared/seeds").is_dir() else ROOT / "fixtures"


def seed_texts() -> list[str]:
    """The seed papers cut into pieces of 30 words (real English prose, tables and formulas)."""
    texts = []
    for path in sorted(SEEDS.glob("*.txt")):
        words = re.split(r"\s+", path.read_text(errors="replace"))
        texts += [" ".join(words[start:start + 30]) for start in range(0, len(words), 30)]
    return [text for text in texts if text.strip()]


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    from response_speed import make_files
    from spacy.attrs import IDS
    from thinc.api import NumpyOps
    from threadpoolctl import threadpool_limits

    from scoring.kinds.response.nlp import DEFAULT_PIPELINE, load_pipeline

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=6000, help="generated responses (English pipeline only)")
    parser.add_argument("--pipeline", default=DEFAULT_PIPELINE)
    args = parser.parse_args(argv)
    nlp = load_pipeline(args.pipeline)
    texts = seed_texts()
    if args.pipeline == DEFAULT_PIPELINE:
        texts = [entry["response"] for entry in make_files(args.texts, seed=5)[1]] + texts
    layers = [layer for _, component in nlp.pipeline if hasattr(component, "model") for layer in component.model.walk()]
    skipped = [name for name in ("attribute_ruler", "sentencizer") if name in nlp.pipe_names]

    def tag(ops: NumpyOps) -> tuple[np.ndarray, float, float]:
        for layer in layers:
            layer.ops = ops
        before, started = os.times(), time.perf_counter()
        with nlp.select_pipes(disable=skipped), threadpool_limits(limits=1, user_api="blas"):
            tags = np.concatenate([doc.to_array([IDS["TAG"], IDS["POS"]]).reshape(-1, 2)
                                   for doc in nlp.pipe(texts, batch_size=256)])
        after = os.times()
        return tags, time.perf_counter() - started, (after.user + after.system) - (before.user + before.system)

    shipped = [layer.ops for layer in layers]
    try:
        passes = [("BLIS", *tag(NumpyOps(use_blis=True))), ("NumPy", *tag(NumpyOps(use_blis=False))),
                  ("BLIS again", *tag(NumpyOps(use_blis=True)))]
    finally:
        for layer, ops in zip(layers, shipped, strict=True):
            layer.ops = ops
    load = os.getloadavg()
    blis, numpy_tags, again = (tags for _, tags, _, _ in passes)
    print(f"{args.pipeline}: {len(texts):,} texts, {len(blis):,} tokens; tokens tagged differently (fine tag or "
          f"Universal POS): NumPy against BLIS {int((blis != numpy_tags).any(axis=1).sum())}, BLIS against BLIS "
          f"{int((blis != again).any(axis=1).sum())}")
    for name, _, seconds, cpu in passes:
        print(f"  {name:10s} {seconds:6.2f} s, {cpu:6.2f} CPU-s")
    print(f"  NumPy {passes[0][3] / passes[1][3]:.2f}x faster than BLIS in CPU time; load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores")
    return 0 if (blis == numpy_tags).all() else 1


if __name__ == "__main__":
    raise SystemExit(main())
