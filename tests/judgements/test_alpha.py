"""Krippendorff's alpha against the specification's worked examples (Krippendorff 2011), an
implementation written here from the coincidence-matrix definition (plain loops, nothing shared
with the code under test), the ``krippendorff`` package, and the real STC-3 annotations
(19 annotators per dialogue)."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from functools import cache
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scoring.judgements.alpha as alpha_module
from scoring.judgements.alpha import alpha_interval, krippendorff_alpha

HERE = Path(__file__).resolve().parent

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4 coders x 12 units example.
CODERS = (
    "1 2 3 3 2 1 4 1 2 . . .",
    "1 2 3 3 2 2 4 1 2 5 . 3",
    ". 3 3 3 2 3 4 2 2 5 1 .",
    "1 2 3 3 2 4 4 1 2 5 1 .",
)
WORKED_UNITS = [[int(v) for v in column if v != "."] for column in zip(*(row.split() for row in CODERS))]
NUGGET_UNITS = [["CNUG0", "CNUG0", "CNaN"], ["HNUG", "HNUG", "HNUG"], ["CNUG", "CNUG*", "CNUG"],
                ["HNaN", "HNUG", "HNaN"]]


def reference_alpha(units: list[list], level: str, order: list | None = None) -> float | None:
    """Krippendorff 2011 section by section: pairable units, coincidences o_ck summed over the
    ordered pairs of different judgements within a unit divided by m_u - 1, marginals, then
    alpha = 1 - (n - 1) sum o_ck d_ck / sum n_c n_k d_ck."""
    pairable = [unit for unit in units if len(unit) >= 2]
    values = list(order) if order is not None else sorted({v for unit in pairable for v in unit}, key=str) \
        if level == "nominal" else sorted({v for unit in pairable for v in unit})
    o: dict[tuple, float] = {(c, k): 0.0 for c in values for k in values}
    for unit in pairable:
        m = len(unit)
        for i in range(m):
            for j in range(m):
                if i != j:
                    o[unit[i], unit[j]] += 1.0 / (m - 1)
    n_c = {c: sum(o[c, k] for k in values) for c in values}
    n = sum(n_c.values())

    def delta(c: object, k: object) -> float:
        if level == "nominal":
            return 0.0 if c == k else 1.0
        if level == "interval":
            return float(c - k) ** 2  # type: ignore[operator]
        lo, hi = sorted((values.index(c), values.index(k)))
        between = sum(n_c[values[g]] for g in range(lo, hi + 1))
        return (between - (n_c[c] + n_c[k]) / 2.0) ** 2

    observed = sum(o[c, k] * delta(c, k) for c in values for k in values)
    expected = sum(n_c[c] * n_c[k] * delta(c, k) for c in values for k in values)
    if n < 2 or expected == 0:
        return None
    return 1.0 - (n - 1) * observed / expected


def package_alpha(units: list[list[float]], level: str, domain: list | None = None) -> float:
    """The ``krippendorff`` package (Castro), which wants coders x units with NaN for a hole:
    a unit's values go to the first coders (alpha does not depend on who gave which value)."""
    rows = max(len(unit) for unit in units)
    data = np.full((rows, len(units)), np.nan)
    for u, unit in enumerate(units):
        data[: len(unit), u] = unit
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=domain))


@cache
def real_stc3() -> list[dict]:
    """NTCIR-14 STC-3 English training dialogues (Zeng et al. 2017): ids, senders and the 19
    annotators' labels (annotations under CC BY 4.0; see README.md beside this file)."""
    with gzip.open(HERE / "stc3_real_en.json.gz", "rt", encoding="utf-8") as handle:
        return json.load(handle)


def test_worked_example_of_krippendorff_2011_at_each_level() -> None:
    assert round(krippendorff_alpha(WORKED_UNITS, "nominal"), 10) == 0.7434210526
    assert round(krippendorff_alpha(WORKED_UNITS, "ordinal"), 10) == 0.8153875038
    assert round(krippendorff_alpha(WORKED_UNITS, "interval"), 10) == 0.8491071429
    # Unit 12 has one value: leaving it out changes nothing.
    assert krippendorff_alpha(WORKED_UNITS[:11], "ordinal") == krippendorff_alpha(WORKED_UNITS, "ordinal")


def test_worked_example_of_nugget_labels() -> None:
    assert round(krippendorff_alpha(NUGGET_UNITS, "nominal"), 10) == 0.4210526316
    # The value order of a nominal scale does not matter, nor the order of units or of values.
    shuffled = [list(reversed(unit)) for unit in reversed(NUGGET_UNITS)]
    assert krippendorff_alpha(shuffled, "nominal") == pytest.approx(0.4210526315789474, abs=1e-15)


def test_a_full_scale_order_changes_nothing_when_unused_values_have_no_count() -> None:
    scale = [0, 1, 2, 3, 4, 5, 6]
    for level in ("nominal", "ordinal", "interval"):
        assert krippendorff_alpha(WORKED_UNITS, level, order=scale) == pytest.approx(
            krippendorff_alpha(WORKED_UNITS, level), abs=1e-14)


def test_ordinal_labels_follow_the_order_given() -> None:
    names = {1: "poor", 2: "fair", 3: "good", 4: "very good", 5: "excellent"}
    labelled = [[names[v] for v in unit] for unit in WORKED_UNITS]
    order = ["poor", "fair", "good", "very good", "excellent"]
    assert round(krippendorff_alpha(labelled, "ordinal", order=order), 10) == 0.8153875038
    with pytest.raises(ValueError, match="give `order`"):
        krippendorff_alpha([["a", 1], ["b", 2]], "ordinal")


units_strategy = st.lists(st.lists(st.integers(-2, 2), min_size=0, max_size=6), min_size=1, max_size=14)


@settings(max_examples=150, deadline=None)
@given(units=units_strategy)
def test_equals_the_definition_written_out_on_random_units(units: list[list[int]]) -> None:
    for level in ("nominal", "ordinal", "interval"):
        expected = reference_alpha(units, level)
        got = krippendorff_alpha(units, level)
        if expected is None:
            assert got is None
        else:
            assert got is not None and math.isfinite(got)
            assert got == pytest.approx(expected, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(units=st.lists(st.lists(st.integers(1, 5), min_size=2, max_size=5), min_size=2, max_size=12))
def test_equals_the_krippendorff_package_on_random_units(units: list[list[int]]) -> None:
    if len({v for unit in units for v in unit}) < 2:
        assert krippendorff_alpha(units, "ordinal") is None
        return
    for level in ("nominal", "ordinal", "interval"):
        assert krippendorff_alpha(units, level) == pytest.approx(package_alpha(units, level), abs=1e-9)


def test_real_stc3_annotations_agree_with_the_definition_and_the_package() -> None:
    dialogues = real_stc3()
    assert len(dialogues) == 1672 and {len(d["annotations"]) for d in dialogues} == {19}
    found = {}
    for dim in "AES":
        units = [[a["quality"][dim] for a in d["annotations"]] for d in dialogues]
        ours = krippendorff_alpha(units, "ordinal", order=[-2, -1, 0, 1, 2])
        assert ours == pytest.approx(reference_alpha(units, "ordinal", [-2, -1, 0, 1, 2]), abs=1e-10)
        assert ours == pytest.approx(package_alpha(units, "ordinal", [-2, -1, 0, 1, 2]), abs=1e-10)
        interval_level = krippendorff_alpha(units, "interval")
        assert interval_level == pytest.approx(package_alpha(units, "interval"), abs=1e-10)
        found[dim] = ours
    # The measured figures: the labels are subjective, alpha 0.20-0.30 for A, E and S.
    assert all(0.20 <= found[dim] <= 0.30 for dim in "AES"), found
    assert [round(found[dim], 4) for dim in "AES"] == [0.2611, 0.2047, 0.2904]
    turns = [[a["nugget"][t] for a in d["annotations"]] for d in dialogues for t in range(len(d["turns"]))]
    nugget = krippendorff_alpha(turns, "nominal")
    codes = {label: i for i, label in enumerate(sorted({v for unit in turns for v in unit}))}
    coded = [[codes[v] for v in unit] for unit in turns]
    assert nugget == pytest.approx(package_alpha(coded, "nominal"), abs=1e-10)
    assert nugget == pytest.approx(reference_alpha(turns, "nominal"), abs=1e-10)
    assert round(nugget, 4) == 0.4894


def test_undefined_alpha_is_none_never_nan() -> None:
    assert krippendorff_alpha([], "nominal") is None
    assert krippendorff_alpha([[1], [2], [3]], "interval") is None  # nothing pairable
    assert krippendorff_alpha([[2, 2], [2, 2, 2]], "ordinal") is None  # no variation
    assert alpha_interval([[2, 2], [2, 2, 2]], "ordinal") is None
    assert alpha_interval([[1], [2]], "nominal") is None
    # Perfect agreement with variation is 1; systematic disagreement goes below 0.
    assert krippendorff_alpha([[1, 1], [2, 2]], "nominal") == 1.0
    # o_12 = o_21 = 2, n_1 = n_2 = 2, n = 4: 1 - 3 * 4 / (2 * 2 * 2) = -0.5.
    assert krippendorff_alpha([[1, 2], [1, 2]], "nominal") == pytest.approx(-0.5, abs=1e-15)


@pytest.mark.parametrize(("units", "level", "order", "message"), [
    ([[1, None]], "nominal", None, "unit 0: a missing value must be left out"),
    ([[1, 2], [1.0, float("nan")]], "interval", None, "unit 1: a missing value must be left out"),
    ([[1, "x"]], "interval", None, "unit 0: the interval level needs finite numbers"),
    ([[1, True]], "interval", None, "unit 0: the interval level needs finite numbers"),
    ([[1, 7]], "ordinal", [1, 2, 3], "unit 0: value 7 is not on the scale"),
    ([[1, 2]], "ordinal", [1, 2, 2], "every value of the scale must be listed once"),
    ([[1, 2]], "ratio", None, "level must be one of nominal, ordinal, interval"),
    ([1, 2], "nominal", None, "unit 0: must be the list of values"),
    ("12", "nominal", None, "units must be a list of units"),
    ([[[1], [1]]], "nominal", None, "unit 0: a value must be a label or a number"),
])
def test_bad_input_is_refused_naming_what_is_wrong(units: object, level: str, order: list | None,
                                                   message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        krippendorff_alpha(units, level, order)  # type: ignore[arg-type]


def test_interval_equals_a_bootstrap_written_out_over_the_same_draws() -> None:
    """The same stream as the server's bootstrap (n draws with replacement per resample from
    numpy's default_rng(seed)), alpha recomputed from the definition on each resample."""
    pairable = [unit for unit in WORKED_UNITS if len(unit) >= 2]
    for level in ("nominal", "ordinal", "interval"):
        rng = np.random.default_rng(7)
        picks = rng.integers(0, len(pairable), size=(200, len(pairable)))
        replicates = [reference_alpha([pairable[i] for i in row], level) for row in picks]
        defined = [value for value in replicates if value is not None]
        lower, upper = np.quantile(defined, [0.025, 0.975])
        got = alpha_interval(WORKED_UNITS, level, resamples=200, seed=7)
        assert got == pytest.approx((lower, upper), abs=1e-12), level
        assert alpha_interval(WORKED_UNITS, level, resamples=200, seed=7) == got
        assert alpha_interval(WORKED_UNITS, level, resamples=200, seed=8) != got


def test_interval_on_the_real_annotations_brackets_alpha() -> None:
    dialogues = real_stc3()
    units = [[a["quality"]["A"] for a in d["annotations"]] for d in dialogues]
    alpha = krippendorff_alpha(units, "ordinal")
    lower, upper = alpha_interval(units, "ordinal", resamples=300, seed=0)
    assert lower < alpha < upper and upper - lower < 0.05
    turns = [[a["nugget"][t] for a in d["annotations"]] for d in dialogues for t in range(len(d["turns"]))]
    lower, upper = alpha_interval(turns, "nominal", resamples=100, seed=0)
    assert lower < krippendorff_alpha(turns, "nominal") < upper


def test_many_distinct_values_take_the_bounded_ordinal_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over 2^22 cells (units x values^2) each resample's coincidences are built on their own:
    the same interval as the definition on the same draws."""
    rng = np.random.default_rng(3)
    units = [list(rng.integers(0, 300, size=3)) for _ in range(60)]
    units = [[int(v) for v in unit] for unit in units]
    picks = np.random.default_rng(5).integers(0, 60, size=(20, 60))
    expected = np.quantile([reference_alpha([units[i] for i in row], "ordinal") for row in picks], [0.025, 0.975])
    assert alpha_interval(units, "ordinal", resamples=20, seed=5) == pytest.approx(tuple(expected), abs=1e-12)
    # The threshold is lowered instead of building a 2^22-cell input: which path is taken is the point.
    monkeypatch.setattr(alpha_module, "_FLAT_CELLS", 10)
    assert alpha_interval(units, "ordinal", resamples=20, seed=5) == pytest.approx(tuple(expected), abs=1e-12)


def test_counter_of_labels_is_unchanged_by_alpha() -> None:
    """The caller's lists are read, never reordered or emptied."""
    units = [list(unit) for unit in NUGGET_UNITS]
    before = [Counter(unit) for unit in units]
    krippendorff_alpha(units, "nominal")
    alpha_interval(units, "nominal", resamples=10)
    assert [Counter(unit) for unit in units] == before and units == NUGGET_UNITS
