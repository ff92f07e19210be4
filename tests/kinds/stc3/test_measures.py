"""The measures in three layers: hand-computed values, agreement with independent
implementations, and properties of every registered measure."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.spatial.distance import jensenshannon

from devtools import reference
from scoring.kinds.stc3.evaluate import normalise
from scoring.kinds.stc3.measures import (
    MEASURES,
    VARIANTS,
    get_measure,
    jsd,
    nmd,
    nod,
    nvd,
    rnss,
    rsnod,
    snod,
)


@pytest.fixture(autouse=True)
def _isolated_settings() -> None:
    """Replaces tests/conftest.py's Django settings fixture: the scoring core needs no Django,
    so these tests also run with ``-p no:django``."""


THIRD = 1 / 3


def one(measure, estimate, gold, variant="paper") -> float:
    """A measure of one pair of distributions, through the vectorised function."""
    values = measure(np.array([estimate], dtype=np.float64), np.array([gold], dtype=np.float64), variant)
    assert values.shape == (1,)
    return float(values[0])


# 1. Hand-computed values ------------------------------------------------------------------
# TASK-SPEC.md, worked examples (seed 002, Figures 2 and 3), L = 3, printed to 4 decimals:
# estimate, NOD(p, p*), SNOD, NOD(p*, p), RNSS, JSD.

GOLD_ONE_HOT = (1.0, 0.0, 0.0)
TABLE_ONE_HOT = [
    ((0.0, 0.0, 1.0), 1.0, 1.0, 1.0, 1.0, 1.0),
    ((0.0, THIRD, 2 * THIRD), 0.5000, 0.6944, 0.8889, 0.8819, 1.0),
    ((0.0, 2 * THIRD, THIRD), 0.3333, 0.6111, 0.8889, 0.8819, 1.0),
    ((0.0, 1.0, 0.0), 0.5000, 0.5000, 0.5000, 1.0, 1.0),
]
GOLD_UNIFORM = (THIRD, THIRD, THIRD)
TABLE_UNIFORM = [
    ((1.0, 0.0, 0.0), 0.3148, 0.2407, 0.1667, 0.5774, 0.4591),
    # The paper prints 0.3148 / 0.2130 here; eq. 7 gives 0.2593 / 0.1852 (see TASK-SPEC.md).
    ((0.0, 1.0, 0.0), 0.2593, 0.1852, 0.1111, 0.5774, 0.4591),
    ((2 * THIRD, THIRD, 0.0), 0.1111, 0.1111, 0.1111, 0.3333, 0.2075),
    ((THIRD, 2 * THIRD, 0.0), 0.0926, 0.1019, 0.1111, 0.3333, 0.2075),
]
WORKED_EXAMPLES = [(GOLD_ONE_HOT, *row) for row in TABLE_ONE_HOT] + [(GOLD_UNIFORM, *row) for row in TABLE_UNIFORM]


@pytest.mark.parametrize(("gold", "estimate", "nod_forward", "snod_value", "nod_backward", "rnss_value", "jsd_value"),
                         WORKED_EXAMPLES)
def test_worked_examples_of_the_spec(gold, estimate, nod_forward, snod_value, nod_backward, rnss_value, jsd_value):
    assert round(one(nod, estimate, gold), 4) == nod_forward
    assert round(one(snod, estimate, gold), 4) == snod_value
    assert round(one(nod, gold, estimate), 4) == nod_backward
    assert round(one(rnss, estimate, gold), 4) == rnss_value
    assert round(one(jsd, estimate, gold), 4) == jsd_value
    # SNOD is the mean of the two directions, and RSNOD its square root.
    assert one(snod, estimate, gold) == pytest.approx((one(nod, estimate, gold) + one(nod, gold, estimate)) / 2)
    assert one(rsnod, estimate, gold) == pytest.approx(math.sqrt(one(snod, estimate, gold)))


def test_paper_misprint_for_0_1_0_against_uniform_gold_follows_eq_7():
    # B* = {0, 1, 2}; (p - p*)^2 = (1/9, 4/9, 1/9); DW = (6/9, 2/9, 6/9); OD = 14/27.
    assert one(nod, (0, 1, 0), GOLD_UNIFORM) == pytest.approx(14 / 27 / 2)  # 0.2593, not the printed 0.3148
    # Backwards B = {1}: OD = DW(1) = 2/9, so SNOD = (14/27 + 6/27) / 2 / 2 = 5/27.
    assert one(snod, (0, 1, 0), GOLD_UNIFORM) == pytest.approx(5 / 27)  # 0.1852, not the printed 0.2130


@pytest.mark.parametrize(("estimate", "gold", "expected"), [
    ((1, 0, 0), (0, 0, 1), 1.0),  # cumulative (1, 1, 1) vs (0, 0, 1): (1 + 1 + 0) / 2
    ((0.5, 0.5, 0), (0, 0.5, 0.5), 0.5),  # (0.5, 1, 1) vs (0, 0.5, 1): (0.5 + 0.5) / 2
    ((1, 0, 0), (THIRD, THIRD, THIRD), 0.5),  # (1, 1, 1) vs (1/3, 2/3, 1): (2/3 + 1/3) / 2
    ((0, 1, 0, 0, 0), (0, 0, 0, 1, 0), 0.5),  # (0, 1, 1, 1, 1) vs (0, 0, 0, 1, 1): 2 / 4
    ((0.2, 0.2, 0.2, 0.2, 0.2), (0.2, 0.2, 0.2, 0.2, 0.2), 0.0),
    ((1, 0, 0, 0, 0), (0, 0, 0, 0, 1), 1.0),  # 4 / 4: the maximum
    ((0.25, 0.75), (0.75, 0.25), 0.5),  # L = 2: |0.25 - 0.75| / 1
])
def test_nmd_hand_computed(estimate, gold, expected):
    assert one(nmd, estimate, gold) == pytest.approx(expected, abs=1e-15)
    assert one(nmd, gold, estimate) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(("estimate", "gold", "expected"), [
    ((1, 0, 0), (0, 0, 1), 1.0),
    ((0.5, 0.5, 0), (0.25, 0.25, 0.5), 0.5),  # (0.25 + 0.25 + 0.5) / 2
    ((0.2, 0.3, 0.5), (0.3, 0.3, 0.4), 0.1),  # (0.1 + 0 + 0.1) / 2
    ((0.7, 0.2, 0.0, 0.1), (0.7, 0.2, 0.0, 0.1), 0.0),
    ((1, 0, 0, 0), (0.25, 0.25, 0.25, 0.25), 0.75),  # (0.75 + 3 * 0.25) / 2
])
def test_nvd_hand_computed(estimate, gold, expected):
    assert one(nvd, estimate, gold) == pytest.approx(expected, abs=1e-15)


def test_variants_differ_when_the_gold_leaves_a_bin_empty():
    estimate, gold = (0, 1, 0), (1, 0, 0)
    # (p - p*)^2 = (1, 1, 0); DW(i) = sum_j |i - j| (p(j) - p*(j))^2 = (1, 1, 3).
    # paper: OD(p, p*) over B* = {0} = 1; OD(p*, p) over B = {1} = 1; SNOD = (1 + 1) / 2 / 2.
    assert one(snod, estimate, gold, "paper") == pytest.approx(0.5)
    assert one(rsnod, estimate, gold, "paper") == pytest.approx(math.sqrt(0.5))
    # stc3-2018: both ODs average DW over all 3 bins = 5/3; SNOD = (5/3 + 5/3) / 2 / 2 = 5/6.
    assert one(snod, estimate, gold, "stc3-2018") == pytest.approx(5 / 6)
    assert one(rsnod, estimate, gold, "stc3-2018") == pytest.approx(math.sqrt(5 / 6))
    assert one(nod, estimate, gold, "stc3-2018") == pytest.approx(5 / 6)


def test_variants_differ_with_19_annotators_leaving_bins_empty():
    # A typical STC-3 gold: 19 votes over two neighbouring bins of five.
    gold = (0, 12 / 19, 7 / 19, 0, 0)
    estimate = (0.1, 0.5, 0.3, 0.05, 0.05)
    squares = [(e - g) ** 2 for e, g in zip(estimate, gold)]
    dw = [sum(abs(i - j) * squares[j] for j in range(5)) for i in range(5)]
    paper = ((dw[1] + dw[2]) / 2 + sum(dw) / 5) / 2 / 4  # the estimate has no empty bin
    stc3_2018 = (sum(dw) / 5 + sum(dw) / 5) / 2 / 4
    assert one(snod, estimate, gold, "paper") == pytest.approx(paper, abs=1e-15)
    assert one(snod, estimate, gold, "stc3-2018") == pytest.approx(stc3_2018, abs=1e-15)
    assert abs(paper - stc3_2018) > 1e-3


def test_variants_agree_when_no_bin_is_empty():
    estimate, gold = (0.5, 0.25, 0.25), (THIRD, THIRD, THIRD)
    # (p - p*)^2 = (1/36, 1/144, 1/144); DW = (3/144, 5/144, 9/144); OD = 17/432 both ways.
    for variant in VARIANTS:
        assert one(snod, estimate, gold, variant) == pytest.approx(17 / 432 / 2, abs=1e-15)
        assert one(nod, estimate, gold, variant) == pytest.approx(17 / 432 / 2, abs=1e-15)
        assert one(rsnod, estimate, gold, variant) == pytest.approx(math.sqrt(17 / 864), abs=1e-15)


def test_variants_also_differ_in_snod_when_only_the_estimate_leaves_a_bin_empty():
    # OD(p*, p) averages over the estimate's support, so the gold alone does not decide:
    # gold uniform, estimate (1, 0, 0): paper SNOD 0.2407 (the table above); stc3-2018 averages
    # DW = (3/9, 5/9, 9/9) over all bins, 17/27, both ways: SNOD = 17/27 / 2.
    assert one(snod, (1, 0, 0), GOLD_UNIFORM, "paper") == pytest.approx(13 / 54)
    assert one(snod, (1, 0, 0), GOLD_UNIFORM, "stc3-2018") == pytest.approx(17 / 54)
    # NOD(p, p*) only looks at the gold's support: with a full gold the variants agree.
    assert one(nod, (1, 0, 0), GOLD_UNIFORM, "paper") == one(nod, (1, 0, 0), GOLD_UNIFORM, "stc3-2018")


@pytest.mark.parametrize("name", ["nvd", "rnss", "jsd", "nmd"])
def test_measures_other_than_od_ignore_the_variant(name):
    rng = np.random.default_rng(5)
    estimate, gold = rng.dirichlet(np.full(5, 0.3), size=50), rng.dirichlet(np.full(5, 0.3), size=50)
    assert np.array_equal(MEASURES[name](estimate, gold, "paper"), MEASURES[name](estimate, gold, "stc3-2018"))


def test_jsd_hand_computed():
    # p = (1/2, 1/2, 0), p* = (1, 0, 0), m = (3/4, 1/4, 0).
    expected = (0.5 * math.log2(0.5 / 0.75) + 0.5 * math.log2(0.5 / 0.25) + math.log2(1 / 0.75)) / 2
    assert one(jsd, (0.5, 0.5, 0), (1, 0, 0)) == pytest.approx(expected, abs=1e-15)


def test_integer_arrays_are_accepted():
    # One-hot distributions are naturally written as integers.
    for name, measure in MEASURES.items():
        assert measure(np.array([[0, 0, 1]]), np.array([[1, 0, 0]])).tolist() == [1.0], name


def test_bad_shapes_and_unknown_names_are_errors():
    with pytest.raises(ValueError, match="shape"):
        nvd(np.ones((2, 3)) / 3, np.ones((2, 4)) / 4)
    with pytest.raises(ValueError, match="at least 2 bins"):
        nvd(np.ones((2, 1)), np.ones((2, 1)))
    with pytest.raises(ValueError, match="unknown variant 'stc3-2019'; expected one of: paper, stc3-2018"):
        snod(np.ones((1, 3)) / 3, np.ones((1, 3)) / 3, "stc3-2019")
    with pytest.raises(ValueError) as error:
        get_measure("ndcg")
    # The message lists every registered measure, so it cannot drift from the registry.
    assert all(name in str(error.value) for name in MEASURES)


# 2. Agreement with independent implementations ---------------------------------------------


def random_pairs(seed: int, n_bins: int, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """Estimates and golds with many empty bins (gold from 19 annotators' votes)."""
    rng = np.random.default_rng(seed)
    estimate = rng.dirichlet(np.full(n_bins, 0.5), size=n)
    estimate[rng.random((n, n_bins)) < 0.2] = 0.0  # some estimates leave bins empty too
    estimate[estimate.sum(axis=1) == 0, 0] = 1.0
    votes = rng.dirichlet(np.full(n_bins, 0.3), size=n)
    gold = np.array([np.bincount(rng.choice(n_bins, size=19, p=row), minlength=n_bins) for row in votes], float)
    gold[:5] = estimate[:5] * 7  # identical after normalisation
    return normalise(estimate), normalise(gold)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("n_bins", [2, 3, 4, 5, 7])
@pytest.mark.parametrize("name", sorted(MEASURES))
def test_vectorised_measures_agree_with_plain_loops(name, n_bins, variant):
    estimate, gold = random_pairs(seed=n_bins, n_bins=n_bins)
    vectorised = MEASURES[name](estimate, gold, variant)
    plain = [reference.REFERENCE_MEASURES[name](p.tolist(), q.tolist(), variant) for p, q in zip(estimate, gold)]
    assert np.allclose(vectorised, plain, rtol=0, atol=1e-12)


@pytest.mark.parametrize("n_bins", [2, 3, 4, 7])
def test_jsd_agrees_with_scipy_jensenshannon_squared(n_bins):
    estimate, gold = random_pairs(seed=10 + n_bins, n_bins=n_bins)
    # scipy takes the sqrt of a round-off of -1e-17 for identical rows and returns nan: that is 0.
    with np.errstate(invalid="ignore"):
        expected = np.nan_to_num([jensenshannon(p, q, base=2) ** 2 for p, q in zip(estimate, gold)], nan=0.0)
    assert np.allclose(jsd(estimate, gold), expected, rtol=0, atol=1e-12)


def test_official_measures_agree_with_the_2018_script_functions():
    estimate, gold = random_pairs(seed=42, n_bins=5)
    for name, script in (("rsnod", reference.script_2018_rsnod), ("nmd", reference.script_2018_nmd),
                         ("jsd", reference.script_2018_jsd), ("rnss", reference.script_2018_rnss)):
        expected = [script(p, q) for p, q in zip(estimate, gold)]
        assert np.allclose(MEASURES[name](estimate, gold, "stc3-2018"), expected, rtol=0, atol=1e-12), name


# 3. Properties of every registered measure -------------------------------------------------
# Each measure must be classified here by hand; a new measure added to MEASURES without an
# entry makes test_every_measure_is_classified fail, so its properties get thought about.

EXPECTED_CLASSIFICATION = {
    # name: (bins, symmetric)
    "nvd": ("nominal", True),
    "rnss": ("nominal", True),
    "jsd": ("nominal", True),
    "nod": ("ordinal", False),
    "snod": ("ordinal", True),
    "rsnod": ("ordinal", True),
    "nmd": ("ordinal", True),
}
# For each asymmetric measure, a pair (p, q) with measure(p, q) != measure(q, p).
ASYMMETRY_EXAMPLES = {
    "nod": ((0.0, THIRD, 2 * THIRD), GOLD_ONE_HOT),  # 0.5 vs 0.8889 in the worked examples
}


def test_every_measure_is_classified():
    unclassified = sorted(set(MEASURES) - set(EXPECTED_CLASSIFICATION))
    assert not unclassified, f"classify {unclassified} in EXPECTED_CLASSIFICATION (and its properties)"
    assert sorted(EXPECTED_CLASSIFICATION) == sorted(MEASURES)
    assert sorted(reference.REFERENCE_MEASURES) == sorted(MEASURES)
    for name, (bins, symmetric) in EXPECTED_CLASSIFICATION.items():
        measure = MEASURES[name]
        assert (measure.bins, measure.symmetric) == (bins, symmetric), name
        assert measure.name == name
        assert measure.lower_is_better
        assert measure.value_range == (0.0, 1.0)
        assert measure.citation and measure.title


def test_every_asymmetric_measure_has_a_counter_example():
    for name, measure in MEASURES.items():
        if measure.symmetric:
            continue
        assert name in ASYMMETRY_EXAMPLES, f"give {name} a counter-example to symmetry"
        p, q = ASYMMETRY_EXAMPLES[name]
        # In the paper variant: stc3-2018 averages OD over all bins, which makes NOD symmetric.
        assert abs(one(measure, p, q) - one(measure, q, p)) > 0.1


def test_nod_is_symmetric_in_the_2018_variant():
    p, q = ASYMMETRY_EXAMPLES["nod"]
    # DW = ((1/9) + 2 (4/9), (1) + (4/9), 2 (1) + (1/9)) = (1, 13/9, 19/9); mean 41/27; NOD = 41/54.
    assert one(nod, p, q, "stc3-2018") == pytest.approx(41 / 54)
    assert one(nod, q, p, "stc3-2018") == pytest.approx(41 / 54)


@st.composite
def raw_batches(draw, counts: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """A batch of unnormalised (estimate, gold) rows with the same number of bins, often with zeros.

    ``counts``: annotator-count-like whole numbers; otherwise weights over a wide range of magnitudes.
    """
    n_bins = draw(st.integers(2, 7))
    n = draw(st.integers(1, 6))
    elements = (st.integers(0, 25).map(float) if counts
                else st.one_of(st.just(0.0), st.floats(1e-6, 1e6)))
    estimate, gold = (draw(hnp.arrays(np.float64, (n, n_bins), elements=elements)) for _ in range(2))
    for rows in (estimate, gold):
        rows[rows.sum(axis=1) == 0, draw(st.integers(0, n_bins - 1))] = 1.0  # a distribution needs mass
    return estimate, gold


# Each example checks every registered measure in both variants (one parametrised test per
# measure would multiply Hypothesis' per-example overhead by 14).
PROPERTY_SETTINGS = settings(max_examples=120, deadline=None, derandomize=True)
EVERY_MEASURE_AND_VARIANT = [(name, variant) for name in MEASURES for variant in VARIANTS]


@PROPERTY_SETTINGS
@given(pairs=st.one_of(raw_batches(), raw_batches(counts=True)))
def test_values_are_in_the_registered_range(pairs):
    estimate, gold = normalise(pairs[0]), normalise(pairs[1])
    for name, variant in EVERY_MEASURE_AND_VARIANT:
        low, high = MEASURES[name].value_range
        values = MEASURES[name](estimate, gold, variant)
        assert values.shape == (estimate.shape[0],), name
        # Normalised rows may sum to 1 +- a few ulps, hence the 1e-12.
        assert np.all(values >= low) and np.all(values <= high + 1e-12), (name, variant, values)


@PROPERTY_SETTINGS
@given(pairs=raw_batches())
def test_zero_on_identical_distributions(pairs):
    estimate = normalise(pairs[0])
    for name, variant in EVERY_MEASURE_AND_VARIANT:
        assert np.all(MEASURES[name](estimate, estimate.copy(), variant) == 0.0), (name, variant)


@PROPERTY_SETTINGS
@given(pairs=st.one_of(raw_batches(), raw_batches(counts=True)))
def test_symmetric_measures_are_symmetric(pairs):
    estimate, gold = normalise(pairs[0]), normalise(pairs[1])
    for name, variant in EVERY_MEASURE_AND_VARIANT:
        if MEASURES[name].symmetric:  # the others: test_every_asymmetric_measure_has_a_counter_example
            forward, backward = MEASURES[name](estimate, gold, variant), MEASURES[name](gold, estimate, variant)
            assert np.allclose(forward, backward, rtol=0, atol=1e-15), (name, variant)


@PROPERTY_SETTINGS
@given(counts=raw_batches(counts=True),
       run_factor=st.one_of(st.integers(2, 1000), st.floats(1e-3, 1e3)),
       gold_factor=st.one_of(st.integers(2, 1000), st.floats(1e-3, 1e3)))
def test_scaling_counts_does_not_change_the_values(counts, run_factor, gold_factor):
    estimate_counts, gold_counts = counts
    for name, variant in EVERY_MEASURE_AND_VARIANT:
        unscaled = MEASURES[name](normalise(estimate_counts), normalise(gold_counts), variant)
        scaled = MEASURES[name](normalise(run_factor * estimate_counts), normalise(gold_factor * gold_counts),
                                variant)
        assert np.allclose(scaled, unscaled, rtol=0, atol=1e-9), (name, variant)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", sorted(MEASURES))
def test_annotator_counts_and_probabilities_give_the_same_values(name, variant):
    gold_counts = np.array([[0, 12, 7, 0, 0], [19, 0, 0, 0, 0], [3, 4, 5, 6, 1]], dtype=np.float64)
    run_counts = np.array([[1, 10, 5, 2, 1], [0, 0, 19, 0, 0], [4, 4, 4, 4, 3]], dtype=np.float64)
    from_probabilities = MEASURES[name](run_counts / 19, gold_counts / 19, variant)
    from_counts = MEASURES[name](normalise(run_counts), normalise(gold_counts), variant)
    assert np.allclose(from_counts, from_probabilities, rtol=0, atol=1e-12)
