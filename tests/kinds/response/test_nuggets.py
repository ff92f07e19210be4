"""Nugget-level scores: the spec's worked example, plain cases, every fallback, one pass over all variants."""

import math

import numpy as np
import pytest

from scoring.kinds.response import bleu
from scoring.kinds.response.nuggets import (
    ACTS_SEED004,
    BleuTurns,
    Nugget,
    NuggetConfig,
    PosscoreTurns,
    Turn,
    act_means,
    nugget_score,
    score_nuggets,
)
from scoring.kinds.response.posscore import PosEncoder, prepare_references


def sigmoid(x):
    return 1 / (1 + math.exp(-x))


def test_worked_example_exactly():
    score = nugget_score(0.62, 0.55, [0.60, 0.66, 0.58, 0.70, 0.61, 0.50], [0.63, 0.60, 0.64, 0.59], NuggetConfig())
    assert score.d_phi == pytest.approx(0.07, abs=1e-12)
    assert score.md_diff == pytest.approx(-0.01, abs=1e-12)
    assert score.md_same == pytest.approx(-0.003333333333, abs=1e-12)
    assert score.ns == pytest.approx(0.6555065760, abs=1e-10)


def test_fewer_alternatives_than_k_and_l_use_all_there_are():
    score = nugget_score(0.5, 0.4, [0.7, 0.1], [0.45], NuggetConfig())
    assert score.md_diff == pytest.approx(((0.5 - 0.7) + (0.5 - 0.1)) / 2)
    assert score.md_same == pytest.approx(0.05)
    assert score.ns == pytest.approx(sigmoid(10 * 0.1 + 5 * 0.1 + 2 * 0.05))


def test_no_alternatives_leave_the_terms_out():
    score = nugget_score(0.5, 0.4, [], [], NuggetConfig())
    assert score.md_diff is None and score.md_same is None
    assert score.ns == pytest.approx(sigmoid(1.0))
    only_same = nugget_score(0.5, 0.4, [], [0.3], NuggetConfig(w_phi=1, w_same=3))
    assert only_same.md_diff is None
    assert only_same.ns == pytest.approx(sigmoid(0.1 + 3 * 0.2))


def test_configuration_is_checked():
    assert len(ACTS_SEED004) == 24 and "Non-Declarative Question" in ACTS_SEED004
    for bad in ({"k": 0}, {"l": 1.5}, {"w_phi": math.nan}, {"w_same": True}, {"acts": ()}, {"acts": ("A", "A")}):
        with pytest.raises(ValueError):
            NuggetConfig(**bad)


REFERENCES = [
    [("I am sorry, I cannot provide an answer for that question.", 1.0)],
    [("I would recommend the chess club near the station.", 1.0)],
]


@pytest.fixture(scope="module")
def posscore_measure():
    encoder = PosEncoder()
    return PosscoreTurns(encoder, prepare_references(REFERENCES, encoder))


def test_plain_cases_with_posscore(posscore_measure):
    turns = [Turn(1, "I would recommend the chess club. Bye", [Nugget("I would recommend the chess club.",
                                                                          "Recommendation"), Nugget("Bye", "Closing")])]
    recommendation, goodbye = score_nuggets(turns, posscore_measure)[0]
    # Deleting the recommendation leaves "Bye": the score plainly drops, so NS > 0.5 ...
    assert recommendation.d_phi > 1.0 and recommendation.ns > 0.99
    # ... deleting "Bye" leaves the reference's own words: the score plainly rises, so NS < 0.5.
    assert goodbye.d_phi < -0.1 and goodbye.ns < 0.2
    assert act_means([[recommendation, goodbye]]) == {"Closing": goodbye.ns, "Recommendation": recommendation.ns}


def test_agrees_with_whole_texts_scored_one_by_one_with_bleu():
    prepared = bleu.prepare_references(REFERENCES, bleu.DELTA_BLEU)
    nuggets = [Nugget("I am sorry,", "Apology", diff=("Thank you,",), same=("I apologise,", "Sorry,")),
               Nugget("I cannot provide an answer.", "Rejection"),
               Nugget("Purple elephants dance loudly.", "Opinion", diff=("I think so.", "For example, chess."))]
    turn = Turn(0, " ".join(n.text for n in nuggets), nuggets)
    results = score_nuggets([turn], BleuTurns(prepared))[0]

    def s(texts):
        stats = bleu.sufficient_statistics([" ".join(texts)], prepared, items=[0])
        return bleu.item_scores(stats, 2, "average")[0]

    texts = [n.text for n in nuggets]
    s_turn = s(texts)
    for position, (nugget, result) in enumerate(zip(nuggets, results)):
        deleted = s(texts[:position] + texts[position + 1 :])
        diff = [s(texts[:position] + [alt] + texts[position + 1 :]) for alt in nugget.diff]
        same = [s(texts[:position] + [alt] + texts[position + 1 :]) for alt in nugget.same]
        expected = nugget_score(s_turn, deleted, diff, same, NuggetConfig())
        assert result.d_phi == pytest.approx(expected.d_phi, abs=1e-12)
        assert result.ns == pytest.approx(expected.ns, abs=1e-12)
        assert (result.md_diff is None) == (not nugget.diff)
        assert (result.md_same is None) == (not nugget.same)
    # The irrelevant nugget: deleting it raises BLEU (brevity and precision), so NS < 0.5.
    assert results[2].d_phi < 0 and results[2].ns < 0.5
    assert results[1].ns > 0.5


def test_no_nuggets_split_into_sentences_d_phi_alone(posscore_measure):
    response = "I would recommend the chess club. It is near the station! Bye"
    results = score_nuggets([Turn(1, response, None)], posscore_measure)[0]
    assert [r.text for r in results] == ["I would recommend the chess club.", "It is near the station!", "Bye"]
    assert all(r.act is None and r.md_diff is None and r.md_same is None for r in results)
    encoder, prepared = posscore_measure.encoder, posscore_measure.prepared
    rows = encoder.encode([r.text for r in results])
    whole = rows.sum(axis=0, keepdims=True)
    from scoring.kinds.response.posscore import score_rows

    s_turn = score_rows(whole, prepared, [1])[0]
    for k, result in enumerate(results):
        s_deleted = score_rows(whole - rows[k], prepared, [1])[0]
        assert result.d_phi == pytest.approx(s_turn - s_deleted, abs=1e-12)
        assert result.ns == pytest.approx(sigmoid(10 * (s_turn - s_deleted)), abs=1e-12)
    assert act_means([results]) == {}


class CountingMeasure:
    """Wraps a measure and counts encode and score calls."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = []

    def encode(self, texts):
        self.calls.append(("encode", len(texts)))
        return self.inner.encode(texts)

    def score(self, encoded, items, turns):
        self.calls.append(("score", len(turns)))
        return self.inner.score(encoded, items, turns)


def test_all_variants_in_one_pass_with_each_text_encoded_once(posscore_measure):
    alternatives = {"diff": ("Thank you,", "Hello,"), "same": ("I apologise,", "Sorry about that,", "Sorry,")}
    turns = [
        Turn(0, "I am sorry, I cannot answer.", [Nugget("I am sorry,", "Apology", **alternatives),
                                                 Nugget("I cannot answer.", "Rejection")]),
        Turn(0, "I am sorry, no.", [Nugget("I am sorry,", "Apology", **alternatives), Nugget("no.", "No Answer")]),
        Turn(1, "Try the chess club.", [Nugget("Try the chess club.", "Recommendation")]),
    ]
    counting = CountingMeasure(posscore_measure)
    results = score_nuggets(turns, counting)
    # 9 distinct texts: 5 nuggets ("I am sorry," twice) + 5 alternatives - the repeated nugget.
    assert counting.calls == [("encode", 9), ("score", (1 + 1 + 5 + 1) * 2 + 0 + 1 + 1)]
    assert [len(r) for r in results] == [2, 2, 1]
    assert results[0][0].md_diff is not None and results[0][1].md_diff is None


def test_empty_batch():
    assert score_nuggets([], CountingMeasure(None)) == []
    assert np.isfinite(sigmoid(0))


def test_batches_and_groups_change_no_score(posscore_measure, monkeypatch):
    """Scored a few variants and texts at a time, every score is bit-identical to one pass (demo data)."""
    from fixtures import response_demo
    from scoring.kinds.response import nuggets as nuggets_module
    from scoring.kinds.response.formats import load_response_gold, load_response_run

    gold_data = response_demo.generate_gold(20, seed=3)
    gold = load_response_gold(gold_data)
    runs = response_demo.generate_runs(gold_data, seed=5)
    turns = [turn for name in ("strong", "medium", "weak") for turn in load_response_run(runs[name], gold).turns(gold)]
    bleu_measure = BleuTurns(bleu.prepare_references(gold.references, bleu.DELTA_BLEU))
    measures = {"bleu": bleu_measure, "posscore": PosscoreTurns(posscore_measure.encoder,
                                                                prepare_references(gold.references,
                                                                                   posscore_measure.encoder))}
    for name, measure in measures.items():
        whole = CountingMeasure(measure)
        expected = score_nuggets(turns, whole)
        assert [call[0] for call in whole.calls] == ["encode", "score"], name
        monkeypatch.setattr(nuggets_module, "BATCH_PIECES", 7)
        monkeypatch.setattr(nuggets_module, "BATCH_CHARACTERS", 200)
        monkeypatch.setattr(nuggets_module, "GROUP_TEXTS", 5)
        pieces = CountingMeasure(measure)
        assert score_nuggets(turns, pieces) == expected, name
        assert sum(call[0] == "encode" for call in pieces.calls) > 10 and len(pieces.calls) > 100
        monkeypatch.undo()
        assert sum(len(turn) for turn in expected) > 100


def test_memory_stays_bounded_with_thousands_of_nuggets(tmp_path):
    """Issue 24: 2,000 one-character nuggets are 4 million pieces of variants; scored in batches,
    a fresh process grows by a few MB (it grew by 73 MB with BLEU, 2.8 GB for 7,500 with POSSCORE)."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "many.py"
    script.write_text(
        "import resource, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})\n"
        "from scoring.kinds.response import bleu\n"
        "from scoring.kinds.response.nuggets import BleuTurns, Nugget, Turn, score_nuggets\n"
        "measure = BleuTurns(bleu.prepare_references([[('a b c a', 1.0)]], bleu.BLEU))\n"
        "score_nuggets([Turn(0, 'a b', [Nugget('a', 'Opinion'), Nugget('b', 'Opinion')])], measure)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "result = score_nuggets([Turn(0, 'a' * 2000, [Nugget('a', 'Opinion')] * 2000)], measure)\n"
        "assert len(result[0]) == 2000\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)\n")
    grown_mb = float(subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                                    check=True).stdout)
    assert grown_mb < 20, f"scoring 2,000 nuggets grew the process by {grown_mb:.0f} MB"


def test_a_response_without_nuggets_is_split_into_at_most_100_pieces(posscore_measure):
    response = " ".join(f"Sentence {k}." for k in range(150))
    results = score_nuggets([Turn(1, response, None)], posscore_measure)[0]
    assert len(results) == 100
    assert results[98].text == "Sentence 98."
    assert results[99].text == " ".join(f"Sentence {k}." for k in range(99, 150))
