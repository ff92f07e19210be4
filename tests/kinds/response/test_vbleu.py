"""vBLEU (issue 15): pool reading, BM25 retrieval, the automatic rater, the extended gold and its provenance.

Everything runs on a generated pool whose right answers are known: topics of made-up words with a
generated word2vec table in which a topic's words lie close together (so true pairs, same topic,
are separable from random ones); items whose last utterance holds a word only a few planted pool
utterances hold (so those must be retrieved first). BM25 is checked against a plain-loop
implementation of its formulas, vBLEU against a plain-loop deltaBLEU over the extended references.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from devtools.reference import plain_delta_bleu
from scoring.kinds.response import bleu
from scoring.kinds.response import vbleu as vb
from scoring.kinds.response.formats import load_response_gold
from scoring.kinds.response.nlp import parse_word2vec
from scoring.kinds.response.vbleu import rater as vb_rater
from scoring.validation import ValidationFailed

TOPICS, WORDS, DIMENSIONS = 16, 24, 16
POOL_PAIRS = 3000
PLANTED_ITEMS, PLANTED_PER_ITEM = 8, 3
FAST_RATER = vb.RaterSettings(train_pairs=2000, held_out_pairs=500, seed=3)


def topic_words(topic: int) -> list[str]:
    return [f"t{topic}w{j}" for j in range(WORDS)]


# The words of the gold's positive reference (make_gold), which no pool text holds: a gold whose
# reference tokens mostly lack a vector is refused (RESPONSE-SPEC.md, "Languages").
REFERENCE_WORDS = ("i", "have", "no", "idea")


def vector_table_text(seed: int = 0) -> str:
    """word2vec text: every topic's words around their own random centre, the reference's words
    apart; function words have no vector."""
    rng = np.random.default_rng(seed)
    lines = [f"{TOPICS * WORDS + len(REFERENCE_WORDS)} {DIMENSIONS}"]
    for topic in range(TOPICS):
        centre = rng.normal(size=DIMENSIONS)
        for word in topic_words(topic):
            vector = centre + 0.4 * rng.normal(size=DIMENSIONS)
            lines.append(word + " " + " ".join(f"{value:.5f}" for value in vector))
    for word in REFERENCE_WORDS:  # drawn after the topics': the topic vectors are as they were
        lines.append(word + " " + " ".join(f"{value:.5f}" for value in rng.normal(size=DIMENSIONS)))
    return "\n".join(lines) + "\n"


def sentence(rng: random.Random, topic: int, n: int, end: str) -> str:
    return "So " + " ".join(rng.sample(topic_words(topic), n)) + f" {end}"


def make_pool(seed: int = 0) -> tuple[list[dict], dict[int, list[int]], list[str]]:
    """Pool lines, the planted pool lines of every planted item (1-based line numbers), the items' utterances.

    Pairs: utterance and response drawn from one topic's words. Planted pairs of item I: an
    utterance holding ``plantedI`` (a word no other pool utterance holds) and every topic word of
    item I's utterance, and a response of that topic.
    """
    rng = random.Random(seed)
    lines = []
    for _ in range(POOL_PAIRS):
        topic = rng.randrange(TOPICS)
        lines.append({"utterance": sentence(rng, topic, 5, "?"), "response": sentence(rng, topic, 6, ".")})
    planted: dict[int, list[int]] = {}
    utterances = []
    positions = rng.sample(range(POOL_PAIRS), PLANTED_ITEMS * PLANTED_PER_ITEM)
    for item in range(PLANTED_ITEMS):
        topic = item % TOPICS
        words = rng.sample(topic_words(topic), 4)
        utterances.append(f"planted{item} So " + " ".join(words) + " ?")
        planted[item] = []
        for position in positions[item * PLANTED_PER_ITEM : (item + 1) * PLANTED_PER_ITEM]:
            extra = rng.choice([word for word in topic_words(topic) if word not in words])
            lines[position] = {"utterance": f"So {' '.join(rng.sample(words, 4))} {extra} planted{item} ?",
                               "response": sentence(rng, topic, 6, ".")}
            planted[item].append(position + 1)
    return lines, planted, utterances


def jsonl(lines: list[dict]) -> bytes:
    return ("\n".join(json.dumps(line) for line in lines) + "\n").encode("utf-8")


def make_gold(utterances: list[str]) -> list[dict]:
    return [{"id": f"c{item}", "context": [{"sender": "user", "text": "Hello"}, {"sender": "bot", "text": "Hi"},
                                           {"sender": "user", "text": utterance}],
             "references": [{"text": "I have no idea .", "weight": 1.0}, {"text": "So what ?", "weight": -0.5}]}
            for item, utterance in enumerate(utterances)]


@pytest.fixture(scope="module")
def planted():
    lines, planted_lines, utterances = make_pool()
    data = jsonl(lines)
    return {"lines": lines, "bytes": data, "pool": vb.read_pool(data), "planted": planted_lines,
            "utterances": utterances, "gold": make_gold(utterances)}


@pytest.fixture(scope="module")
def vectors():
    return parse_word2vec(vector_table_text(), name="planted topics")


@pytest.fixture(scope="module")
def index(planted):
    return vb.build_index(planted["pool"])


@pytest.fixture(scope="module")
def extension(planted, vectors, index):
    return vb.extend_gold(planted["gold"], planted["pool"], rater=FAST_RATER, vectors=vectors, index=index)


# ---------------------------------------------------------------------------------------------- pool


def test_pool_pairs_lines_and_checksum_from_bytes_path_and_stream(tmp_path):
    data = (b'{"utterance": "Hi there", "response": "Hello !", "id": 7}\n'
            b"\n"
            b'{"response": "Fine , thanks .", "utterance": "How are you ?"}\r\n'
            b'{"utterance": "Bye", "response": "See you"}')  # no newline at the end
    path = tmp_path / "pool.jsonl"
    path.write_bytes(data)

    class LinesOnly:  # a stream offering nothing but bounded readline: the pool is never read whole
        def __init__(self, data: bytes) -> None:
            self.buffer = io.BytesIO(data)

        def readline(self, limit: int) -> bytes:
            assert 0 < limit <= vb.MAX_LINE_BYTES + 1
            return self.buffer.readline(limit)

    for source in (data, path, str(path), LinesOnly(data)):
        pool = vb.read_pool(source)
        assert pool.utterances == ["Hi there", "How are you ?", "Bye"]
        assert pool.responses == ["Hello !", "Fine , thanks .", "See you"]
        assert pool.lines.tolist() == [1, 3, 4]
        assert pool.sha256 == hashlib.sha256(data).hexdigest()
        assert pool.provenance() == {"sha256": hashlib.sha256(data).hexdigest(), "pairs": 3, "bytes": len(data)}


def test_pool_names_every_bad_line_and_returns_nothing():
    data = b"\n".join([
        b'\xef\xbb\xbf{"utterance": "a", "response": "b"}',
        b'{"utterance": "fine", "response": "fine"}',
        b'{"utterance": "a", "response": 3}',
        b'["utterance", "response"]',
        b'{"utterance": "a"',
        b'{"utterance": "caf\xe9", "response": "b"}',
        b'{"response": "   "}',
        b'{"utterance": "a\\u0000b", "response": "b"}',
        b'{"utterance": "' + b"x" * 10_001 + b'", "response": "b"}',
        b"",
        b'{"utterance": "fine again", "response": "fine"}',
    ]) + b"\n"
    with pytest.raises(ValidationFailed) as failure:
        vb.read_pool(data)
    assert failure.value.errors == [
        "line 1: starts with a UTF-8 byte-order mark; save the pool as UTF-8 without BOM",
        "line 3: response must be a string, not 3",
        'line 4: must be a JSON object with "utterance" and "response", not [\'utterance\', \'response\']',
        "line 5: is not valid JSON: unexpected end of data at column 18",
        "line 6: is not valid UTF-8 (byte 19 of the line)",
        "line 7: utterance is missing",
        "line 7: response must not be empty",
        "line 8: utterance must not contain NUL characters",
        "line 9: utterance is 10001 characters long; at most 10000 are allowed",
    ]


def test_pool_problem_list_is_capped_and_says_how_many_more():
    data = b"\n".join([b'{"utterance": 1, "response": "b"}'] * 1005)
    with pytest.raises(ValidationFailed) as failure:
        vb.read_pool(data)
    errors = failure.value.errors
    assert len(errors) == 1001
    assert errors[0] == "line 1: utterance must be a string, not 1"
    assert errors[999] == "line 1000: utterance must be a string, not 1"
    assert errors[-1] == "... and 5 more problem(s) not listed"


def test_pool_overlong_line_is_named_and_the_lines_after_it_still_counted():
    good = b'{"utterance": "a", "response": "b"}'
    data = b"\n".join([good, b"y" * (vb.MAX_LINE_BYTES + 10), b'{"utterance": "a"}', good]) + b"\n"
    with pytest.raises(ValidationFailed) as failure:
        vb.read_pool(data)
    assert failure.value.errors == [f"line 2: is longer than {vb.MAX_LINE_BYTES} bytes", "line 3: response is missing"]


def test_pool_size_limits():
    line = b'{"utterance": "a", "response": "b"}\n'
    with pytest.raises(ValidationFailed) as failure:
        vb.read_pool(line * 5, max_pairs=3)
    assert failure.value.errors == ["the pool has 5 pairs; at most 3 are allowed"]
    with pytest.raises(ValidationFailed) as failure:
        vb.read_pool(b"\n \n")
    assert failure.value.errors == ["the pool has no utterance-response pairs"]
    assert vb.MAX_POOL_PAIRS == 1_000_000


def test_pool_progress_reports_bytes():
    calls = []
    line = b'{"utterance": "a", "response": "b"}\n'
    data = line * 300
    vb.read_pool(data, progress=lambda stage, done, total: calls.append((stage, done, total)))
    assert calls[-1] == ("pool", len(data), len(data))
    assert all(stage == "pool" and total == len(data) for stage, _, total in calls)
    assert [done for _, done, _ in calls] == sorted(done for _, done, _ in calls)
    assert 2 <= len(calls) <= 102
    calls.clear()  # a bare stream has no size: a call every MiB, then the end
    vb.read_pool(io.BytesIO(data * 100), progress=lambda stage, done, total: calls.append((stage, done, total)))
    first_line_past_a_mib = -(-(1 << 20) // len(line)) * len(line)
    assert calls == [("pool", first_line_past_a_mib, 0), ("pool", 100 * len(data), 100 * len(data))]


# ----------------------------------------------------------------------------------------- retrieval


def plain_bm25(documents: list[list[str]], query: list[str], method: str, k1: float, b: float) -> list[float]:
    """BM25 by its formulas, one document at a time (Kamphuis et al. 2020, the variants bm25s names)."""
    n = len(documents)
    average = sum(len(document) for document in documents) / n
    df = Counter(token for document in documents for token in set(document))
    scores = []
    for document in documents:
        tf = Counter(document)
        norm = k1 * (1 - b + b * len(document) / average)
        score = 0.0
        for token in query:
            if token not in tf:
                continue
            if method == "lucene":
                idf = math.log(1 + (n - df[token] + 0.5) / (df[token] + 0.5))
                score += idf * tf[token] / (tf[token] + norm)
            elif method == "robertson":
                idf = math.log(max(1.0, (n - df[token] + 0.5) / (df[token] + 0.5)))
                score += idf * tf[token] / (tf[token] + norm)
            else:  # atire
                score += math.log(n / df[token]) * tf[token] * (k1 + 1) / (tf[token] + norm)
        scores.append(score)
    return scores


@pytest.mark.parametrize("method, k1, b", [("lucene", 1.5, 0.75), ("robertson", 1.2, 0.5), ("atire", 0.9, 1.0)])
def test_bm25_scores_match_the_formulas(planted, method, k1, b):
    pool = vb.Pool(planted["pool"].utterances[:400], planted["pool"].responses[:400], planted["pool"].lines[:400],
                   "x", 0)
    index = vb.build_index(pool, vb.RetrievalSettings(method=method, k1=k1, b=b))
    documents = [bleu.tokenize(text) for text in pool.utterances]
    for query in [planted["utterances"][0], "So t3w1 t3w1 t5w2 ?", "nothing in common"]:
        expected = plain_bm25(documents, bleu.tokenize(query), method, k1, b)
        assert index.scores(query) == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_retrieval_finds_the_planted_pairs_first(planted, index):
    for item, utterance in enumerate(planted["utterances"]):
        found = index.retrieve(utterance, ["I have no idea ."])
        assert len(found) == 16
        assert [candidate.origin for candidate in found] == ["pool"] * 15 + ["parrot"]
        assert found[-1] == vb.Candidate(utterance, "parrot")
        assert sorted(candidate.pool_line for candidate in found[:3]) == sorted(planted["planted"][item])
        assert found[2].bm25 > found[3].bm25
        scores = [candidate.bm25 for candidate in found[:15]]
        assert scores == sorted(scores, reverse=True)
        lines = planted["lines"]
        assert all(candidate.text == lines[candidate.pool_line - 1]["response"] for candidate in found[:15])


def test_top_is_score_order_then_pool_order():
    rng = np.random.default_rng(5)
    for positive_share in (0.0, 0.001, 0.3, 0.9, 1.0):
        scores = np.where(rng.random(20_000) < positive_share, rng.integers(1, 6, 20_000), 0).astype(np.float32)
        rows = np.flatnonzero(scores > 0)
        expected = sorted(rows.tolist(), key=lambda row: (-scores[row], row))[:40]
        assert vb.PoolIndex._top(scores, 40).tolist() == expected


def test_retrieval_ties_dedupe_and_no_zero_scores():
    lines = [{"utterance": "chess today ?", "response": "Sure ."},           # 1
             {"utterance": "chess today ?", "response": "sure ."},           # 2: same tokens as 1 (lower-cased)
             {"utterance": "chess today ?", "response": "I have no idea ."},  # 3: one of the item's references
             {"utterance": "chess today ?", "response": "Maybe later ."},    # 4
             {"utterance": "football ?", "response": "No ."},                # 5: shares only "?"
             {"utterance": "weather", "response": "Rain ."}]                 # 6: shares nothing
    pool = vb.read_pool(jsonl(lines))
    index = vb.build_index(pool, vb.RetrievalSettings(k=10))
    found = index.retrieve("Chess today ?", ["I have no idea ."])
    assert [(c.origin, c.pool_line) for c in found] == [("pool", 1), ("pool", 4), ("pool", 5), ("parrot", None)]
    loose = vb.build_index(pool, vb.RetrievalSettings(k=10, dedupe=False, parrot=False))
    assert [c.pool_line for c in loose.retrieve("Chess today ?", ["I have no idea ."])] == [1, 2, 3, 4, 5]
    assert [c.origin for c in index.retrieve("Nothing shared", [])] == ["parrot"]
    # The parrot is left out when it repeats a reference.
    assert [c.origin for c in index.retrieve("No .", ["no ."])] == []
    two = vb.build_index(pool, vb.RetrievalSettings(k=2))
    assert [c.pool_line for c in two.retrieve("Chess today ?", [])] == [1, 3, None]


def test_retrieval_settings_are_checked():
    with pytest.raises(ValueError) as failure:
        vb.RetrievalSettings(k=0, method="bm26", b=2)
    assert str(failure.value) == ("k must be an integer from 1 to 100, not 0; b must be a number in [0, 1], not 2; "
                                  "method must be one of robertson, lucene, atire, not 'bm26'")
    with pytest.raises(ValueError, match="unknown retrieval setting"):
        vb.RetrievalSettings.from_dict({"k": 3, "top": 5})
    with pytest.raises(ValueError, match="seed must be an integer"):
        vb.RaterSettings(seed=-1)
    with pytest.raises(ValueError, match="parrot_weight must be null or a number in"):
        vb.RaterSettings(parrot_weight=1.5)


# -------------------------------------------------------------------------------------------- rater


def test_rater_separates_true_from_random_pairs(planted, vectors):
    rater = vb.train_rater(planted["pool"], vectors, FAST_RATER)
    # Chance is 0.5; a random response is from the same topic one time in 16, so at most ~0.97.
    assert rater.report["held_out_accuracy"] >= 0.9
    assert rater.report["seed"] == 3
    assert rater.report["pairs"] == {"train": 2000, "validation": 200, "held_out": 500}
    # New pairs, never seen: same topic against another topic.
    rng = random.Random(99)
    utterances, same, other = [], [], []
    for _ in range(300):
        topic = rng.randrange(TOPICS)
        utterances.append(sentence(rng, topic, 5, "?"))
        same.append(sentence(rng, topic, 6, "."))
        other.append(sentence(rng, (topic + rng.randrange(1, TOPICS)) % TOPICS, 6, "."))
    true_weights = rater.weights(utterances, same)
    random_weights = rater.weights(utterances, other)
    assert np.all((-1 <= true_weights) & (true_weights <= 1))
    assert np.mean(true_weights > 0) >= 0.9 and np.mean(random_weights < 0) >= 0.9
    assert true_weights.mean() > 0.5 > -0.5 > random_weights.mean()


def test_rater_is_reproducible_from_its_seed(planted, vectors):
    first = vb.train_rater(planted["pool"], vectors, FAST_RATER)
    again = vb.train_rater(planted["pool"], vectors, FAST_RATER)
    other = vb.train_rater(planted["pool"], vectors, vb.RaterSettings(train_pairs=2000, held_out_pairs=500, seed=4))
    utterances = planted["pool"].utterances[:200]
    responses = planted["pool"].responses[100:300]
    assert np.array_equal(first.probabilities(utterances, responses), again.probabilities(utterances, responses))
    assert first.report == again.report
    assert not np.array_equal(first.probabilities(utterances, responses), other.probabilities(utterances, responses))


def test_weight_is_two_p_minus_one_or_the_seeds_mapping():
    p = np.array([0.0, 0.25, 0.5, 0.9, 1.0, 0.1234567])
    assert vb.weights_from_probabilities(p).tolist() == [-1.0, -0.5, 0.0, 0.8, 1.0, -0.753087]
    assert math.copysign(1, vb.weights_from_probabilities(np.array([0.4999999999]))[0]) == 1  # no -0.0
    # Seed 001 section 4.2: the larger class probability, times -1 when classified negative.
    assert vb.weights_from_probabilities(p, "seed001").tolist() == [-1.0, -0.75, 0.5, 0.9, 1.0, -0.876543]
    with pytest.raises(ValueError, match="mapping must be one of linear, seed001"):
        vb.RaterSettings(mapping="sigmoid")


def test_principal_axes_match_an_svd_of_the_centred_rows():
    rng = np.random.default_rng(8)
    first = (rng.normal(size=(700, 12)) @ rng.normal(size=(12, 12))).astype(np.float32)
    second = (rng.normal(size=(300, 12)) + 2).astype(np.float32)
    mean, axes = vb_rater._principal_axes([first, second], 4)
    rows = np.vstack([first, second]).astype(np.float64)
    _, _, right = np.linalg.svd(rows - rows.mean(axis=0), full_matrices=False)
    assert np.allclose(mean, rows.mean(axis=0), atol=1e-5)
    # Same axes up to sign; the sign makes each axis's largest entry positive.
    assert np.allclose(np.abs(np.sum(axes * right[:4], axis=1)), 1, atol=1e-4)
    assert np.all(axes[np.arange(4), np.argmax(np.abs(axes), axis=1)] > 0)


def test_rater_needs_a_pool_to_learn_from(vectors):
    pool = vb.read_pool(jsonl([{"utterance": "a", "response": "b"}] * 99))
    with pytest.raises(ValueError, match="at least 100 pairs; this one has 99"):
        vb.train_rater(pool, vectors)


# ---------------------------------------------------------------------------------------- extension


def test_extended_gold_is_a_valid_gold_with_original_references_first(planted, extension):
    gold = json.loads(extension.gold_json())
    loaded = load_response_gold(gold)
    assert loaded.ids == [f"c{item}" for item in range(PLANTED_ITEMS)]
    for item, entry in enumerate(gold):
        original = planted["gold"][item]
        assert entry["context"] == original["context"]
        assert entry["references"][:2] == original["references"]
        added = entry["references"][2:]
        assert len(added) == 16
        assert [reference["origin"] for reference in added] == ["pool"] * 15 + ["parrot"]
        assert {reference["pool_line"] for reference in added[:3]} == set(planted["planted"][item])
        # The parrot's weight is fixed at -1 by default (issue 27): no rater probability.
        assert added[-1]["weight"] == -1.0 and "p" not in added[-1]
        for reference in added[:-1]:
            # p is written with 6 decimals, as the weight is: 2p - 1 agrees to 3e-6.
            assert abs(reference["weight"] - (2 * reference["p"] - 1)) <= 3e-6
            assert -1 <= reference["weight"] <= 1
        # The planted pairs are of the item's topic: the rater judges them appropriate.
        assert all(reference["weight"] > 0 for reference in added[:3])


def test_provenance_records_pool_settings_accuracy_and_seed(planted, extension):
    provenance = extension.provenance
    assert provenance["pool"] == planted["pool"].provenance()
    assert provenance["pool"]["sha256"] == hashlib.sha256(planted["bytes"]).hexdigest()
    assert provenance["source_gold_sha256"] == vb.canonical_sha256(planted["gold"])
    assert provenance["items"] == PLANTED_ITEMS and provenance["references_added"] == 16 * PLANTED_ITEMS
    assert provenance["retrieval"]["settings"] == vb.RetrievalSettings().to_dict()
    rater = provenance["rater"]
    assert rater["kind"] == "automatic" and rater["seed"] == 3 and rater["settings"] == FAST_RATER.to_dict()
    assert rater["held_out_accuracy"] >= 0.9
    assert rater["vectors"]["name"] == "planted topics" and len(rater["vectors"]["sha256"]) == 64
    assert set(provenance["versions"]) == {"bm25s", "scikit-learn", "numpy", "scipy", "sacrebleu"}
    assert json.loads(extension.provenance_json()) == provenance
    assert set(extension.timings) == {"retrieve", "rater", "rate", "total"}


def test_whole_pipeline_reproduces_from_recorded_settings(planted, vectors, extension):
    settings = vb.RetrievalSettings(k=5, k1=1.2, b=0.6, method="atire")
    rater = vb.RaterSettings(train_pairs=1500, held_out_pairs=300, seed=11, hidden=32, dimensions=8, mapping="seed001",
                             parrot_weight=-1.0)
    first = vb.extend_gold(planted["gold"], planted["pool"], retrieval=settings, rater=rater, vectors=vectors)
    recorded = json.loads(first.provenance_json())  # as stored beside the gold version
    added = [reference for entry in first.gold for reference in entry["references"][2:]]
    assert len(added) == 6 * PLANTED_ITEMS and all(abs(reference["weight"]) >= 0.5 for reference in added)
    parrots = [reference for reference in added if reference["origin"] == "parrot"]
    assert len(parrots) == PLANTED_ITEMS and all(r["weight"] == -1.0 and "p" not in r for r in parrots)
    assert all("p" in reference for reference in added if reference["origin"] == "pool")
    assert recorded["rater"]["weight"].startswith("max(P, 1 - P)")
    assert vb.settings_from_provenance(recorded) == (settings, rater)
    pool_again = vb.read_pool(io.BytesIO(planted["bytes"]))
    again = vb.reproduce(json.dumps(planted["gold"]).encode(), pool_again, recorded, vectors=vectors)
    assert again.gold_json() == first.gold_json()
    assert again.provenance_json() == first.provenance_json()
    assert first.gold_json() != extension.gold_json()
    other_pool = vb.read_pool(planted["bytes"] + b'{"utterance": "one more", "response": "pair"}\n')
    with pytest.raises(ValueError, match="the pool is not the one used"):
        vb.reproduce(planted["gold"], other_pool, recorded, vectors=vectors)
    with pytest.raises(ValueError, match="the word vectors are not the ones used"):
        vb.reproduce(planted["gold"], planted["pool"], recorded, vectors=parse_word2vec(vector_table_text(seed=1)))
    with pytest.raises(ValueError, match="the gold is not the one extended"):
        vb.reproduce(planted["gold"][:-1], planted["pool"], recorded, vectors=vectors)
    with pytest.raises(ValueError, match="not a vBLEU provenance"):
        vb.reproduce(planted["gold"], planted["pool"], {"retrieval": {}}, vectors=vectors)


def test_another_process_with_other_hash_seeds_writes_the_same_bytes(extension):
    # Set orders change with PYTHONHASHSEED, threads with the BLAS settings: neither may reach the output.
    root = Path(__file__).resolve().parents[3]
    script = (
        "import hashlib, sys; sys.path.insert(0, 'tests/kinds/response'); import test_vbleu as t\n"
        "from scoring.kinds.response import vbleu as vb\n"
        "from scoring.kinds.response.nlp import parse_word2vec\n"
        "lines, planted, utterances = t.make_pool()\n"
        "pool = vb.read_pool(t.jsonl(lines))\n"
        "extension = vb.extend_gold(t.make_gold(utterances), pool, rater=t.FAST_RATER,\n"
        "                           vectors=parse_word2vec(t.vector_table_text(), name='planted topics'))\n"
        "for data in (extension.gold_json(), extension.provenance_json()):\n"
        "    print(hashlib.sha256(data).hexdigest())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "OPENBLAS_NUM_THREADS": "2", "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300, check=True)
    assert done.stdout.split() == [hashlib.sha256(extension.gold_json()).hexdigest(),
                                   hashlib.sha256(extension.provenance_json()).hexdigest()]


def plain_corpus_delta_bleu(hypotheses: list[str], references: list[list[tuple]]) -> float:
    """Seed 001 eq. 4, N = 2, average brevity penalty, rho from the original positively rated
    references, written out with loops (devtools/reference.py); added references carry their origin."""
    return plain_delta_bleu(hypotheses, references, 2, "average", "positive")


def test_vbleu_is_delta_bleu_over_the_extended_gold(planted, extension):
    extended = load_response_gold(json.loads(extension.gold_json()))
    original = load_response_gold(planted["gold"])
    # Half the runs answer with a planted pool response (retrieved, rated appropriate), half off-topic.
    rng = random.Random(4)
    hypotheses = [entry["references"][2]["text"] if item % 2 == 0 else sentence(rng, (item + 5) % TOPICS, 6, ".")
                  for item, entry in enumerate(extension.gold)]
    # The loaded gold keeps the added references apart (``references`` are the original ones).
    assert extended.references == original.references
    prepared = bleu.prepare_references(extended.references, bleu.DELTA_BLEU, added=extended.extended)
    stats = bleu.sufficient_statistics(hypotheses, prepared)
    vbleu_score = bleu.corpus_score(stats, 2, "average")
    assert vbleu_score == pytest.approx(plain_corpus_delta_bleu(hypotheses, extended.all_references()), abs=1e-12)
    plain_delta = bleu.corpus_score(
        bleu.sufficient_statistics(hypotheses, bleu.prepare_references(original.references, bleu.DELTA_BLEU)), 2,
        "average")
    assert plain_delta == pytest.approx(plain_corpus_delta_bleu(hypotheses, original.references), abs=1e-12)
    assert vbleu_score > 0.3 > plain_delta


def test_human_ratings_replace_the_rater(planted, index):
    candidates = vb.list_candidates(planted["gold"], planted["pool"], index=index)
    assert [entry["id"] for entry in candidates] == [f"c{item}" for item in range(PLANTED_ITEMS)]
    assert candidates[0]["utterance"] == planted["utterances"][0]
    assert all(reference["weight"] is None for entry in candidates for reference in entry["references"])
    for entry in candidates:
        for k, reference in enumerate(entry["references"]):
            reference["weight"] = round(0.9 - 0.1 * k, 2)
    extension = vb.extend_gold(planted["gold"], planted["pool"], ratings=candidates, index=index)
    added = extension.gold[0]["references"][2:]
    assert [reference["weight"] for reference in added] == [round(0.9 - 0.1 * k, 2) for k in range(16)]
    assert all("p" not in reference for reference in added)
    assert added[0]["pool_line"] == candidates[0]["references"][0]["pool_line"]
    assert extension.provenance["rater"] == {"kind": "human", "ratings_sha256": vb.canonical_sha256(candidates)}
    assert "rater" not in extension.timings
    again = vb.reproduce(planted["gold"], planted["pool"], extension.provenance, ratings=candidates, index=index)
    assert again.gold_json() == extension.gold_json()


def test_bad_human_ratings_are_all_named(planted, index):
    candidates = vb.list_candidates(planted["gold"], planted["pool"], index=index)
    for entry in candidates:
        for reference in entry["references"]:
            reference["weight"] = 0.5
    ratings = json.loads(json.dumps(candidates))
    ratings[0]["references"][1]["weight"] = 1.5
    ratings[0]["references"][2]["weight"] = "high"
    ratings[1]["references"][0]["text"] = "not retrieved"
    ratings[2]["references"].append(dict(ratings[2]["references"][0]))
    del ratings[3]["references"][4:]
    ratings.append({"id": "nope", "references": []})
    del ratings[5]
    texts = [[json.dumps(reference["text"]) for reference in entry["references"]] for entry in candidates]
    with pytest.raises(ValidationFailed) as failure:
        vb.extend_gold(planted["gold"], planted["pool"], ratings=ratings, index=index)
    assert failure.value.errors == [
        "[0].references[1].weight: 1.5 is outside [-1, 1]",
        '[0].references[2].weight: must be a finite number, not "high"',
        '[1].references[0].text: "not retrieved" is not a reference vBLEU retrieved for this item '
        "(with these retrieval settings and this pool)",
        "[2].references[16].text: repeats an earlier reference of this item",
        '[7].id: "nope" is not an item of the gold',
        f"[0].references: 2 retrieved reference(s) have no rating: {texts[0][1]}, {texts[0][2]}",
        f"[1].references: 1 retrieved reference(s) have no rating: {texts[1][0]}",
        f"[3].references: 12 retrieved reference(s) have no rating: {texts[3][4]}, {texts[3][5]}, {texts[3][6]}",
        'item "c5" has no ratings',
    ]
    with pytest.raises(ValueError, match="either human ratings or automatic rater settings"):
        vb.extend_gold(planted["gold"], planted["pool"], ratings=candidates, rater=FAST_RATER, index=index)


def test_gold_needs_contexts_and_must_not_be_extended_twice(planted, extension, index):
    gold = json.loads(json.dumps(planted["gold"]))
    del gold[1]["context"]
    gold[2]["context"] = []
    with pytest.raises(ValidationFailed) as failure:
        vb.list_candidates(gold, planted["pool"], index=index)
    assert failure.value.errors == [
        "[1].context: vBLEU retrieves by the item's last context utterance; this item has none",
        "[2].context: vBLEU retrieves by the item's last context utterance; this item has none",
    ]
    with pytest.raises(ValidationFailed) as failure:
        vb.list_candidates(extension.gold_json(), planted["pool"], index=index)
    assert failure.value.errors[0] == ("[0].references[2]: was added by vBLEU (origin 'pool'); extend the original "
                                       "gold")
    assert len(failure.value.errors) == 16 * PLANTED_ITEMS
    odd = json.loads(json.dumps(planted["gold"]))
    odd[3]["note"] = float("nan")
    with pytest.raises(ValidationFailed) as failure:
        vb.list_candidates(odd, planted["pool"], index=index)
    assert failure.value.errors == ["the gold holds NaN or Infinity in a field that is not validated; the new gold "
                                    "could not be written as JSON"]
    bad = json.loads(json.dumps(planted["gold"]))
    bad[0]["references"][0]["weight"] = 2
    with pytest.raises(ValidationFailed, match=r"\[0\]\.references\[0\]\.weight: 2 is outside"):
        vb.extend_gold(bad, planted["pool"], index=index)


def test_an_index_of_another_pool_or_settings_is_refused(planted, index):
    with pytest.raises(ValueError, match="another pool or with other retrieval settings"):
        vb.list_candidates(planted["gold"], planted["pool"], vb.RetrievalSettings(k=3), index=index)


def test_progress_stages_end_with_done_equal_total(planted, vectors):
    calls = []
    vb.extend_gold(planted["gold"], planted["pool"], rater=vb.RaterSettings(train_pairs=500, held_out_pairs=100),
                   vectors=vectors, progress=lambda stage, done, total: calls.append((stage, done, total)))
    stages = list(dict.fromkeys(stage for stage, _, _ in calls))
    assert stages == ["index", "retrieve", "rater", "rate"]
    last = {stage: (done, total) for stage, done, total in calls}
    assert last["index"] == (POOL_PAIRS, POOL_PAIRS)
    assert last["retrieve"] == (PLANTED_ITEMS, PLANTED_ITEMS)
    assert last["rate"] == (16 * PLANTED_ITEMS, 16 * PLANTED_ITEMS)
    assert last["rater"][0] == last["rater"][1] <= 30
    for stage in stages:
        done = [d for s, d, _ in calls if s == stage]
        assert done == sorted(done) and len(done) <= 102
