"""The agreement report: alpha per dimension equals the specification's worked examples when the
judgements are those examples; each assessor's figures equal what is computed here by hand
(scipy's Spearman on means written out, majorities counted, medians and shares)."""

from __future__ import annotations

import json

import pytest
from scipy.stats import spearmanr

from scoring.judgements.formats import Dimension, load_items, load_judgements
from scoring.judgements.report import agreement_report, format_table, load_checks
from scoring.validation import ValidationFailed
from tests.judgements.test_alpha import CODERS

LIKERT = (Dimension("quality", "ordinal", (1, 2, 3, 4, 5)),)


def worked_judgements() -> list[dict]:
    """Krippendorff (2011)'s 4 coders x 12 units as a metric judgements file."""
    rows = []
    for coder, line in zip("ABCD", CODERS, strict=True):
        for unit, value in enumerate(line.split()):
            if value != ".":
                rows.append({"item": f"u{unit + 1}", "assessor": coder, "values": {"quality": int(value)}})
    return rows


def test_alpha_of_the_worked_example_at_each_level() -> None:
    judgements = load_judgements(worked_judgements(), "metric", dimensions=LIKERT)
    report = agreement_report(judgements, resamples=200, seed=3)
    row = report["dimensions"]["quality"]
    assert round(row["alpha"], 10) == 0.8153875038 and row["level"] == "ordinal"
    assert row["n_items"] == 12 and row["n_pairable_items"] == 11 and row["n_judgements"] == 41
    assert row["interval"][0] < row["alpha"] < row["interval"][1]
    assert report["bootstrap"] == {"resamples": 200, "seed": 3, "confidence": 0.95,
                                   "method": "percentile bootstrap over items"}
    assert round(agreement_report(judgements, "interval", 50)["dimensions"]["quality"]["alpha"], 10) == 0.8491071429
    assert round(agreement_report(judgements, "nominal", 50)["dimensions"]["quality"]["alpha"], 10) == 0.7434210526
    json.dumps(report, allow_nan=False)  # no NaN anywhere


def test_nugget_alpha_of_the_worked_example() -> None:
    dialogue = {"id": "d", "turns": [{"sender": s} for s in ("customer", "helpdesk", "customer", "helpdesk")]}
    labels = [("CNUG0", "CNUG0", "CNaN"), ("HNUG", "HNUG", "HNUG"), ("CNUG", "CNUG*", "CNUG"), ("HNaN", "HNUG", "HNaN")]
    rows = [{"item": "d", "assessor": who, "nugget": [turn[a] for turn in labels]} for a, who in enumerate("xyz")]
    judgements = load_judgements(rows, "stc3", load_items([dialogue], "stc3"))
    report = agreement_report(judgements, resamples=50)
    assert list(report["dimensions"]) == ["nugget"]
    row = report["dimensions"]["nugget"]
    assert round(row["alpha"], 10) == 0.4210526316 and row["level"] == "nominal" and row["unit"] == "turn"
    assert row["n_items"] == 4 and row["n_judgements"] == 12
    # x's labels against the majority of y and z: CNUG0 (y CNUG0, z CNaN: a tie, agreeing), HNUG (yes),
    # CNUG (y CNUG*, z CNUG: tie, yes), HNaN (y HNUG, z HNaN: tie, yes): 4/4. y: CNUG0 tie yes, HNUG yes,
    # CNUG* (x CNUG, z CNUG: no), HNUG (x HNaN, z HNaN: no): 2/4.
    assert report["assessors"]["x"]["agreement"]["nugget"]["value"] == 1.0
    assert report["assessors"]["y"]["agreement"]["nugget"]["value"] == 0.5
    # Straight-lining: y gave CNUG0, HNUG, CNUG*, HNUG: the most common value is 2 of 4.
    assert report["assessors"]["y"]["straight_lining"] == {"nugget": 0.5}


def test_each_assessors_figures_by_hand() -> None:
    ratings = {  # item -> assessor -> (value, seconds)
        "r1": {"p": (5, 10.0), "q": (4, 20.0), "s": (1, 3.0)},
        "r2": {"p": (3, 30.0), "q": (2, 10.0), "s": (1, 2.0)},
        "r3": {"p": (1, 50.0), "q": (1, 40.0), "s": (1, 4.0)},
        "r4": {"p": (4, 12.0), "q": (5, 16.0), "s": (1, 1.0)},
        "r5": {"p": (2, 14.0), "s": (2, 9.0)},
        "check": {"p": (1, 5.0), "q": (1, 5.0), "s": (5, 5.0)},
    }
    rows = [{"item": item, "assessor": who, "values": {"quality": value}, "seconds": seconds}
            for item, given in ratings.items() for who, (value, seconds) in given.items()]
    judgements = load_judgements(rows, "metric", dimensions=LIKERT)
    checks = load_checks({"check": {"quality": 1}}, judgements)
    report = agreement_report(judgements, resamples=50, checks=checks)
    assert report["n_items"] == 5 and report["n_check_items"] == 1 and report["n_judgements"] == 17
    # Alpha leaves the check item out: the same as without it.
    without = load_judgements([row for row in rows if row["item"] != "check"], "metric", dimensions=LIKERT)
    assert report["dimensions"] == agreement_report(without, resamples=50)["dimensions"]
    items = ["r1", "r2", "r3", "r4", "r5"]
    for who in "pqs":
        own, others = [], []
        for item in items:
            if who in ratings[item] and len(ratings[item]) > 1:
                own.append(ratings[item][who][0])
                rest = [value for other, (value, _) in ratings[item].items() if other != who]
                others.append(sum(rest) / len(rest))
        row = report["assessors"][who]
        if len(set(own)) > 1:
            assert row["agreement"]["quality"]["value"] == pytest.approx(spearmanr(own, others).statistic, abs=1e-12)
        else:
            assert row["agreement"]["quality"]["value"] is None  # s gave 1 four times of five: see below
        assert row["agreement"]["quality"]["n_items"] == len(own)
    assert report["assessors"]["s"]["agreement"]["quality"]["value"] == pytest.approx(
        spearmanr([1, 1, 1, 1, 2], [4.5, 2.5, 1, 4.5, 2]).statistic, abs=1e-12)
    assert report["assessors"]["p"]["median_seconds"] == 13.0  # 5, 10, 12, 14, 30, 50
    assert report["assessors"]["q"]["median_seconds"] == 16.0  # 5, 10, 16, 20, 40
    assert report["assessors"]["s"]["straight_lining"] == {"quality": 4 / 6}  # 1 on r1-r4, 2, 5
    assert report["assessors"]["p"]["check_accuracy"] == 1.0 and report["assessors"]["s"]["check_accuracy"] == 0.0
    assert report["assessors"]["s"]["n_check_answers"] == 1
    json.dumps(report, allow_nan=False)
    table = format_table(report)
    assert "quality          ordinal" in table and "1 check items left out of alpha" in table


def test_undefined_figures_are_none_with_a_note() -> None:
    rows = [{"item": "r1", "assessor": "p", "values": {"quality": 3}},
            {"item": "r1", "assessor": "q", "values": {"quality": 3}}]
    report = agreement_report(load_judgements(rows, "metric", dimensions=LIKERT), resamples=20)
    row = report["dimensions"]["quality"]
    assert row["alpha"] is None and row["interval"] is None and "not defined" in row["note"]
    assert report["assessors"]["p"]["agreement"]["quality"]["value"] is None
    assert report["assessors"]["p"]["median_seconds"] is None and report["assessors"]["p"]["check_accuracy"] is None
    assert "n/a" in format_table(report)
    json.dumps(report, allow_nan=False)


def test_bad_levels_and_checks_are_refused() -> None:
    labelled = (Dimension("verdict", "nominal", ("bad", "good")),)
    judgements = load_judgements([{"item": "r", "assessor": "p", "values": {"verdict": "bad"}}], "metric",
                                 dimensions=labelled)
    with pytest.raises(ValueError, match="the interval level needs numbers, but verdict has labels"):
        agreement_report(judgements, "interval")
    with pytest.raises(ValueError, match="level must be one of nominal, ordinal, interval"):
        agreement_report(judgements, "ratio")
    with pytest.raises(ValidationFailed) as caught:
        load_checks({"r": {"verdict": "fine", "other": 1}}, judgements)
    assert caught.value.errors == ['["r"].verdict: value "fine" is off the scale',
                                   '["r"].other: unknown dimension (dimensions: verdict)']


def test_items_marked_check_in_the_file_are_left_out_of_alpha_and_gold() -> None:
    marked = [dict(row, check=True) if row["item"] == "u3" else row for row in worked_judgements()]
    plain = [row for row in worked_judgements() if row["item"] != "u3"]
    judgements = load_judgements(marked, "metric", dimensions=LIKERT)
    report = agreement_report(judgements, resamples=30)
    assert report["n_check_items"] == 1 and report["n_items"] == 11
    assert report["dimensions"] == agreement_report(load_judgements(plain, "metric", dimensions=LIKERT),
                                                    resamples=30)["dimensions"]
    # No answer known for u3: nobody's accuracy can be measured.
    assert report["assessors"]["A"]["check_accuracy"] is None
    answered = agreement_report(judgements, resamples=30, checks=load_checks({"u3": {"quality": 3}}, judgements))
    assert answered["assessors"]["C"]["check_accuracy"] == 1.0 and answered["n_check_items"] == 1
