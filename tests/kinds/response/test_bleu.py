"""BLEU and deltaBLEU: the spec's worked examples, sacrebleu's corpus BLEU, a plain-loop smoothing check."""

import math
from collections import Counter

import numpy as np
import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

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
    prepared = prepare_references([CHESS_REFERENCES, [("see you later", 1.0), ("bye", 0.2)]], DELTA_BLEU)
    stats = sufficient_statistics(["i love chess", "see you"], prepared)
    assert corpus_score(stats, 2, "average") == pytest.approx(0.8751733190, abs=1e-10)
    assert corpus_score(stats, 2, "average") == pytest.approx(math.exp(1 - (11 / 3 + 2) / 5), abs=1e-15)
    assert corpus_score(stats, 2, "closest") == 1.0


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


def _plain_item_bleu(hypothesis, references, order, brevity, lowercase=True):
    """Independent plain-loop per-item deltaBLEU with add-one smoothing for n >= 2."""
    hyp = (hypothesis.lower() if lowercase else hypothesis)
    hyp = sacrebleu.tokenizers.tokenizer_13a.Tokenizer13a()(hyp).split()
    refs = [((text.lower() if lowercase else text), weight) for text, weight in references]
    refs = [(sacrebleu.tokenizers.tokenizer_13a.Tokenizer13a()(text).split(), weight) for text, weight in refs]
    log_sum = 0.0
    for n in range(1, order + 1):
        hyp_counts = Counter(tuple(hyp[k : k + n]) for k in range(len(hyp) - n + 1))
        num = 0.0
        den = 0.0
        for gram, count in hyp_counts.items():
            best = None
            for tokens, weight in refs:
                held = sum(1 for k in range(len(tokens) - n + 1) if tuple(tokens[k : k + n]) == gram)
                if held:
                    value = weight * min(count, held)
                    best = value if best is None else max(best, value)
            num += best or 0.0
            den += max(weight * count for _, weight in refs)
        if n >= 2:
            num, den = num + 1, den + 1
        if num <= 0 or den <= 0:
            return 0.0
        log_sum += math.log(num / den)
    eta = len(hyp)
    if brevity == "average":
        rho = sum(len(tokens) for tokens, _ in refs) / len(refs)
    else:
        rho = sorted((abs(len(tokens) - eta), len(tokens)) for tokens, _ in refs)[0][1]
    if eta == 0:
        return 0.0
    penalty = 1.0 if eta > rho else math.exp(1 - rho / eta)
    return penalty * math.exp(log_sum / order)


weighted_corpus = st.lists(
    st.tuples(sentence, st.lists(st.tuples(sentence, st.sampled_from([1.0, 0.5, 0.2, -0.3, -1.0])), min_size=1,
                                 max_size=4).filter(lambda refs: any(w > 0 for _, w in refs))),
    min_size=1, max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(weighted_corpus, st.sampled_from([(2, "average"), (4, "closest"), (3, "average")]))
def test_per_item_smoothed_against_plain_loop(items, shape):
    order, brevity = shape
    config = BleuConfig(max_order=order, brevity=brevity, weighted=True, min_weight=None)
    prepared = prepare_references([refs for _, refs in items], config)
    stats = sufficient_statistics([hyp for hyp, _ in items], prepared)
    scores = item_scores(stats, order, brevity)
    for (hypothesis, refs), score in zip(items, scores):
        assert score == pytest.approx(_plain_item_bleu(hypothesis, refs, order, brevity), abs=1e-12)


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
