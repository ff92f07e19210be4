"""Session measures of seed 003 section 3.3 and the random metric (scoring.kinds.metric.session).

Plain pytest, no Django.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from scoring.kinds.metric import meta, session
from scoring.kinds.metric.formats import load_metric_gold

# METRICS-SPEC.md, grades 2, 0, 1, 2 (computed there by an independent implementation).
SPEC_EXAMPLE = {
    "scg": 7.0,
    "sdcg": 5.9109487371,
    "sdcg_per_query": 1.4777371843,
    "decrease_weight": 1.96,
    "increase_weight": 1.8,
    "equal_weight": 1.75,
    "middle_high_weight": 1.3333333333,
    "middle_low_weight": 2.1666666667,
}


def test_spec_worked_example():
    # A measure added without a worked value or a citation fails here.
    assert set(session.SESSION_MEASURES) == set(SPEC_EXAMPLE) == set(session.SESSION_CITATIONS)
    for name, expected in SPEC_EXAMPLE.items():
        assert session.SESSION_MEASURES[name]([2, 0, 1, 2]) == pytest.approx(expected, abs=5e-11), name


def test_session_by_hand():
    # gains 3, 0, 1, 3; sDCG divides turn i by log_4(i + 3).
    expected = 3 + 0 + 1 / (math.log(6) / math.log(4)) + 3 / (math.log(7) / math.log(4))
    assert session.sdcg([2, 0, 1, 2]) == pytest.approx(expected, rel=1e-15)


def test_weights_for_odd_sessions():
    # N = 5: r <= 2.5 is the first half; the middle turn 3 is N + 1 - r = r either way.
    assert session.session_weights("middle_high", 5) * 9 == pytest.approx([1, 2, 3, 2, 1])
    assert session.session_weights("middle_low", 5) * (1 + 1 / 2 + 1 / 3 + 1 / 2 + 1) == pytest.approx(
        [1, 1 / 2, 1 / 3, 1 / 2, 1])
    assert session.session_weights("middle_high", 1).tolist() == [1.0]
    for kind in ("decrease", "increase", "equal", "middle_high", "middle_low"):
        for n in range(1, 8):
            assert session.session_weights(kind, n).sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown session weighting"):
        session.session_weights("sideways", 3)


def test_vectorised_scores_match_one_session_functions():
    rng = np.random.default_rng(0)
    sessions = [rng.integers(0, 4, size=rng.integers(1, 9)).astype(float).tolist() for _ in range(60)]
    flat = np.concatenate([np.array(s) for s in sessions])
    counts = np.array([len(s) for s in sessions])
    vectorised = session.session_scores(flat, counts)
    for name, function in session.SESSION_MEASURES.items():
        expected = [function(s) for s in sessions]
        assert vectorised[name] == pytest.approx(expected, rel=1e-13), name


def test_session_measure_properties():
    # Every registered measure: 0 when no turn is relevant, grows when a grade grows, and the
    # normalised ones (sDCG/q, the weighted means of gains) stay within [0, 2^max - 1].
    for name, function in session.SESSION_MEASURES.items():
        assert function([0, 0, 0]) == 0.0, name
        if name not in ("scg", "sdcg"):
            assert 0.0 <= function([3, 1, 2, 0, 3]) <= 7.0, name
        assert function([1, 2, 0]) < function([1, 2, 1]), name
        assert function([1, 2, 0]) < function([2, 2, 0]), name
    with pytest.raises(ValueError, match="grades must be"):
        session.scg([])
    with pytest.raises(ValueError, match="grades must be"):
        session.scg([1, -1])


def test_session_measures_as_baselines_on_a_gold():
    rng = np.random.default_rng(1)
    data = []
    for c in range(30):
        responses = []
        for r in range(4):
            grades = rng.integers(0, 3, size=5).tolist()
            responses.append({"id": f"{c}/{r}", "grades": grades, "human": sum(grades) + float(rng.normal())})
        data.append({"id": c, "responses": responses})
    gold = load_metric_gold(data)
    scores = session.session_scores(gold.grades, gold.grade_counts)
    counts = meta.context_counts(gold, scores)
    power = meta.predictive_power(counts)
    assert power["scg"] > 0.7  # the people judged by summed grades plus noise


def test_random_metric():
    a = session.random_scores(10, seed=3)
    assert np.array_equal(a, session.random_scores(10, seed=3))
    assert not np.array_equal(a, session.random_scores(10, seed=4))
    data = [{"id": c, "responses": [{"id": f"{c}/{r}", "human": r} for r in range(5)]} for c in range(2000)]
    gold = load_metric_gold(data)
    counts = meta.context_counts(gold, {"random": session.random_scores(gold.n_responses, seed=0)})
    # 20,000 pairs: the standard error of a fair coin's share is about 0.0035.
    assert meta.predictive_power(counts)["random"] == pytest.approx(0.5, abs=0.015)
    with pytest.raises(ValueError):
        session.random_scores(0, seed=1)
