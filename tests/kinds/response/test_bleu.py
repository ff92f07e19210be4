"""BLEU and deltaBLEU: the spec's worked examples, sacrebleu's corpus BLEU, a plain-loop smoothing check."""

import math
from dataclasses import replace

import numpy as np
import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from devtools.dialogues import dialogues, response_items
from devtools.reference import plain_delta_bleu
from scoring.kinds.response.bleu import (
    BLEU,
    DELTA_BLEU,
    BleuConfig,
    corpus_score,
    item_scores,
    prepare_references,
    statistic_names,
    sufficient_statistics,
    tokenize,
)

CHESS_REFERENCES = [("i love chess", 1.0), ("chess tournaments are fun", 0.5), ("i hate chess tournaments", -0.5)]


def test_worked_example_one_item_statistics_and_score():
    prepared = prepare_references([CHESS_REFERENCES], DELTA_BLEU)
    stats = sufficient_statistics(["i love chess tournaments"], prepared)
    names = statistic_names(2)
    row = dict(zip(names, stats[0]))
    assert row["num_1"] == 3.5 and row["den_1"] == 4
    assert row["num_2"] == 2.5 and row["den_2"] == 3
    assert item_scores(stats, 2, "average")[0] == pytest.approx(0.875, abs=1e-12)


def test_worked_example_corpus_average_and_closest():
    """RESPONSE-SPEC.md: rho from the original positively rated references (2.75), or from all (2.8333)."""
    references = [CHESS_REFERENCES, [("see you later", 1.0), ("bye", 0.2)]]
    stats = sufficient_statistics(["i love chess", "see you"], prepare_references(references, DELTA_BLEU))
    assert corpus_score(stats, 2, "average") == pytest.approx(0.9048374180, abs=1e-10)
    assert corpus_score(stats, 2, "average") == pytest.approx(math.exp(1 - 2.75 / 2.5), abs=1e-15)
    assert corpus_score(stats, 2, "closest") == 1.0
    literal = replace(DELTA_BLEU, brevity_references="all")
    stats_all = sufficient_statistics(["i love chess", "see you"], prepare_references(references, literal))
    assert corpus_score(stats_all, 2, "average") == pytest.approx(0.8751733190, abs=1e-10)
    assert corpus_score(stats_all, 2, "average") == pytest.approx(math.exp(1 - (11 / 3 + 2) / 5), abs=1e-15)
    assert corpus_score(stats_all, 2, "closest") == 1.0


def test_worked_example_negative_reference_does_not_set_the_length():
    references = [[("thank you", 1.0), ("please call our hotline at any time for more help", -0.3)]]
    stats = sufficient_statistics(["thank you"], prepare_references(references, DELTA_BLEU))
    assert corpus_score(stats, 2, "average") == 1.0
    assert item_scores(stats, 2, "average")[0] == 1.0
    literal = replace(DELTA_BLEU, brevity_references="all")
    stats_all = sufficient_statistics(["thank you"], prepare_references(references, literal))
    assert corpus_score(stats_all, 2, "average") == pytest.approx(0.1353352832, abs=1e-10)
    assert item_scores(stats_all, 2, "average")[0] == pytest.approx(0.1353352832, abs=1e-10)


def test_worked_example_vbleu_references_do_not_set_the_length():
    original = [[("thank you very much", 1.0)]]
    added = [[("thanks", 0.9, "pool"), ("thank you", 0.95, "parrot")]]
    stats = sufficient_statistics(["thank you"], prepare_references(original, DELTA_BLEU, added=added))
    assert corpus_score(stats, 2, "average") == pytest.approx(0.3678794412, abs=1e-10)
    assert item_scores(stats, 2, "average")[0] == pytest.approx(0.3678794412, abs=1e-10)
    literal = replace(DELTA_BLEU, brevity_references="all")
    stats_all = sufficient_statistics(["thank you"], prepare_references(original, literal, added=added))
    assert corpus_score(stats_all, 2, "average") == pytest.approx(0.8464817249, abs=1e-10)


def test_settings_record_which_references_set_rho():
    assert DELTA_BLEU.settings()["brevity_references"] == "positive"
    assert replace(DELTA_BLEU, brevity_references="all").settings()["brevity_references"] == "all"
    with pytest.raises(ValueError, match="brevity_references must be one of positive, all"):
        BleuConfig(brevity_references="negative")
    with pytest.raises(ValueError, match="no positively rated original reference"):
        prepare_references([[("a b", 0.0)]], DELTA_BLEU, added=[[("a b", 1.0, "pool")]])
    with pytest.raises(ValueError, match="1 lists of added references for 2 items"):
        prepare_references([[("a", 1.0)], [("b", 1.0)]], DELTA_BLEU, added=[[]])


def test_negative_only_ngram_contributes_negatively():
    prepared = prepare_references([[("good answer", 1.0), ("bad reply", -1.0)]], DELTA_BLEU)
    stats = sufficient_statistics(["good reply"], prepared)
    # "good": +1 from the first reference; "reply": only in the negative one, -1.
    assert stats[0, 0] == 0.0 and stats[0, 2] == 2.0
    assert item_scores(stats, 2, "average")[0] == 0.0  # p_1 <= 0 gives 0


WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "Fast", "home", ",", ".", "it's", "3.5", "don't"]
sentence = st.lists(st.sampled_from(WORDS), min_size=0, max_size=14).map(" ".join)
corpus = st.integers(1, 6).flatmap(
    lambda n_refs: st.lists(
        st.tuples(sentence, st.lists(sentence, min_size=n_refs, max_size=n_refs)), min_size=1, max_size=12
    )
)


@settings(max_examples=150, deadline=None)
@given(corpus, st.booleans())
def test_all_weights_one_closest_equals_sacrebleu_corpus_bleu(items, lowercase):
    hypotheses = [hypothesis for hypothesis, _ in items]
    references = [[(text, 1.0) for text in refs] for _, refs in items]
    for order in (2, 4):
        config = BleuConfig(max_order=order, brevity="closest", lowercase=lowercase, weighted=True, min_weight=None)
        stats = sufficient_statistics(hypotheses, prepare_references(references, config))
        n_refs = len(items[0][1])
        reference_streams = [[refs[j] for _, refs in items] for j in range(n_refs)]
        expected = sacrebleu.corpus_bleu(
            hypotheses, reference_streams, smooth_method="none", tokenize="13a", lowercase=lowercase,
            force=True,
        )
        if order != 4:
            metric = sacrebleu.BLEU(smooth_method="none", tokenize="13a", lowercase=lowercase, max_ngram_order=order)
            expected = metric.corpus_score(hypotheses, reference_streams)
        assert corpus_score(stats, order, "closest") == pytest.approx(expected.score / 100, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(corpus, st.data())
def test_subset_corpus_score_from_summed_statistics(items, data):
    hypotheses = [hypothesis for hypothesis, _ in items]
    references = [[(text, 1.0) for text in refs] for _, refs in items]
    prepared = prepare_references(references, DELTA_BLEU)
    stats = sufficient_statistics(hypotheses, prepared)
    subset = data.draw(st.lists(st.integers(0, len(items) - 1), min_size=1, unique=True))
    alone = sufficient_statistics([hypotheses[k] for k in subset], prepare_references([references[k] for k in subset],
                                                                                      DELTA_BLEU))
    assert corpus_score(stats[subset], 2, "average") == corpus_score(alone, 2, "average")


weighted_corpus = st.lists(
    st.tuples(sentence, st.lists(st.tuples(sentence, st.sampled_from([1.0, 0.5, 0.2, -0.3, -1.0])), min_size=1,
                                 max_size=4).filter(lambda refs: any(w > 0 for _, w in refs))),
    min_size=1, max_size=8,
)


origins = st.sampled_from(["original", "original", "pool", "parrot"])
extended_corpus = st.lists(
    st.tuples(sentence, st.lists(st.tuples(sentence, st.sampled_from([1.0, 0.5, 0.2, -0.3, -1.0]), origins),
                                 min_size=1, max_size=5)
              .filter(lambda refs: any(w > 0 and origin == "original" for _, w, origin in refs))),
    min_size=1, max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(extended_corpus, st.sampled_from([(2, "average"), (4, "closest"), (3, "average"), (2, "closest")]),
       st.sampled_from(["positive", "all"]))
def test_item_and_corpus_scores_against_plain_loop(items, shape, lengths):
    """Original and vBLEU-added references, either rule for rho: per item (smoothed) and corpus."""
    order, brevity = shape
    config = BleuConfig(max_order=order, brevity=brevity, weighted=True, min_weight=None, brevity_references=lengths)
    original = [[(text, w) for text, w, origin in refs if origin == "original"] for _, refs in items]
    added = [[(text, w, origin) for text, w, origin in refs if origin != "original"] for _, refs in items]
    stats = sufficient_statistics([hyp for hyp, _ in items], prepare_references(original, config, added=added))
    hypotheses = [hyp for hyp, _ in items]
    everything = [list(o) + list(a) for o, a in zip(original, added)]
    expected = plain_delta_bleu(hypotheses, everything, order, brevity, lengths, per_item=True)
    assert item_scores(stats, order, brevity) == pytest.approx(expected, abs=1e-12)
    assert corpus_score(stats, order, brevity) == pytest.approx(
        plain_delta_bleu(hypotheses, everything, order, brevity, lengths), abs=1e-12)


def test_plain_bleu_ignores_weights_and_leaves_out_non_positive_references():
    prepared = prepare_references([[("a b c d", 0.3), ("a b x y", -1.0)]], BLEU)
    assert prepared.lengths[0].tolist() == [4.0]
    stats = sufficient_statistics(["a b c d"], prepared)
    assert item_scores(stats, 4, "closest")[0] == 1.0
    assert corpus_score(stats, 4, "closest") == 1.0


def test_tokenisation_is_13a_lowercased_by_default():
    assert tokenize("Hello, World!") == ["hello", ",", "world", "!"]
    assert tokenize("Hello, World!", lowercase=False) == ["Hello", ",", "World", "!"]


def test_empty_hypothesis_scores_zero_and_statistics_add_up():
    prepared = prepare_references([[("a b", 1.0)], [("c d", 1.0)]], DELTA_BLEU)
    stats = sufficient_statistics(["", "c d"], prepared)
    assert item_scores(stats, 2, "average").tolist() == [0.0, 1.0]
    assert np.isfinite(corpus_score(stats, 2, "average"))


def test_bad_configuration_is_refused():
    with pytest.raises(ValueError, match="brevity"):
        BleuConfig(brevity="longest")
    with pytest.raises(ValueError, match="no reference usable"):
        prepare_references([[("a", -0.5)]], BLEU)
    with pytest.raises(ValueError, match="columns"):
        corpus_score(np.zeros((1, 5)), 2, "average")


def test_realistic_dialogues_against_plain_loop_and_perfect_replies_score_one():
    """Real-looking helpdesk text (devtools/dialogues.py): the vectorised code equals the plain loop for
    both rules of rho, and a reply identical to its only positive reference scores 1.0 per item only
    when rho comes from the positive references (read literally, a longer negative one drags it down)."""
    conversations = dialogues(120, seed=3)
    items = response_items(conversations, seed=3)
    references = [[(ref["text"], ref["weight"]) for ref in item["references"]] for item in items]
    true = [refs[0][0] for refs in references]
    half = [" ".join(text.split()[: max(1, len(text.split()) // 2)]) for text in true]
    other = true[1:] + true[:1]
    echo = [item["context"][-1]["text"] for item in items]
    for lengths in ("positive", "all"):
        config = replace(DELTA_BLEU, brevity_references=lengths)
        prepared = prepare_references(references, config)
        for hypotheses in (true, half, other, echo):
            stats = sufficient_statistics(hypotheses, prepared)
            assert item_scores(stats, 2, "average") == pytest.approx(
                plain_delta_bleu(hypotheses, references, 2, "average", lengths, per_item=True), abs=1e-12)
            assert corpus_score(stats, 2, "average") == pytest.approx(
                plain_delta_bleu(hypotheses, references, 2, "average", lengths), abs=1e-12)
    only_positive = [[ref for ref in refs if ref[1] < 0 or ref is refs[0]] for refs in references]
    perfect = item_scores(sufficient_statistics(true, prepare_references(only_positive, DELTA_BLEU)), 2, "average")
    assert perfect.tolist() == [1.0] * len(items)
    literal = replace(DELTA_BLEU, brevity_references="all")
    dragged = item_scores(sufficient_statistics(true, prepare_references(only_positive, literal)), 2, "average")
    assert (dragged < 1.0).sum() > len(items) // 4
    expected = plain_delta_bleu(true, only_positive, 2, "average", "all", per_item=True)
    assert dragged == pytest.approx(expected, abs=1e-12)


def _long_replies(conversations: list, items: list, per_reply: int) -> list[str]:
    """Long responses made of other dialogues' replies (issue 28's 30 MB runs had 3,000-character ones)."""
    texts = [item["references"][0]["text"] for item in items]
    return [" ".join(texts[(index + k) % len(texts)] for k in range(per_reply)) for index in range(len(items))]


@pytest.mark.parametrize("config", [BLEU, DELTA_BLEU, replace(DELTA_BLEU, brevity="closest", max_order=4)])
def test_statistics_in_blocks_are_the_statistics_of_one_pass(monkeypatch, config):
    """Hypotheses are looked up a block at a time (``BLOCK_NGRAMS``): with blocks of a few hypotheses
    the statistics are bit for bit those of one block, and equal the plain loop's scores."""
    import scoring.kinds.response.bleu as bleu

    conversations = dialogues(60, seed=11)
    items = response_items(conversations, seed=11)
    references = [[(ref["text"], ref["weight"]) for ref in item["references"]] for item in items]
    hypotheses = _long_replies(conversations, items, 12)
    prepared = prepare_references(references, config)
    monkeypatch.setattr(bleu, "BLOCK_NGRAMS", 10**12)
    whole = sufficient_statistics(hypotheses, prepared)
    for block in (1, 300, 2_000):  # every hypothesis alone, a few together, many together
        monkeypatch.setattr(bleu, "BLOCK_NGRAMS", block)
        blocked = sufficient_statistics(hypotheses, prepared)
        assert blocked.tobytes() == whole.tobytes()
    if config.weighted:
        assert corpus_score(whole, config.max_order, config.brevity) == pytest.approx(
            plain_delta_bleu(hypotheses, references, config.max_order, config.brevity), abs=1e-12)


def test_long_responses_in_many_blocks_equal_sacrebleu():
    """A run of long responses spread over many blocks: corpus BLEU equals sacrebleu's."""
    conversations = dialogues(400, seed=5)
    items = response_items(conversations, seed=5)
    hypotheses = _long_replies(conversations, items, 40)
    references = [[(ref["text"], 1.0) for ref in item["references"][:2]] for item in items]
    config = BleuConfig(max_order=4, brevity="closest", weighted=True, min_weight=None)
    prepared = prepare_references(references, config)
    n_grams = sum(4 * len(tokenize(text)) for text in hypotheses)
    from scoring.kinds.response.bleu import BLOCK_NGRAMS

    assert n_grams > 2 * BLOCK_NGRAMS  # several blocks
    stats = sufficient_statistics(hypotheses, prepared)
    streams = [[refs[j][0] for refs in references] for j in range(2)]
    expected = sacrebleu.corpus_bleu(hypotheses, streams, smooth_method="none", tokenize="13a", lowercase=True)
    assert corpus_score(stats, 4, "closest") == pytest.approx(expected.score / 100, abs=1e-12)


def test_responses_are_tokenised_without_keeping_a_memo_of_them():
    """sacrebleu memoises its last 65,536 texts per tokeniser; with ``memo=False`` (a run's
    responses) nothing is kept (a worker scoring many long runs held them all), and the tokens
    are sacrebleu's."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
    from sacrebleu.tokenizers.tokenizer_re import TokenizerRegexp

    Tokenizer13a.__call__.cache_clear()
    TokenizerRegexp.__call__.cache_clear()
    texts = [f"Reply number {k}: the printer (model X-{k}) &amp; its driver didn't restart." for k in range(50)]
    ours = [tokenize(text, memo=False) for text in texts]
    assert Tokenizer13a.__call__.cache_info().currsize == 0
    assert TokenizerRegexp.__call__.cache_info().currsize == 0
    assert ours == [Tokenizer13a()(text.lower()).split() for text in texts] == [tokenize(text) for text in texts]
