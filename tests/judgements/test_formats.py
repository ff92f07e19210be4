"""Judgements files, items files and dimensions: what is accepted, and every problem named with
its JSON path, nothing returned from a file with an error."""

from __future__ import annotations

import pytest

from scoring.judgements.formats import (
    APPROPRIATENESS,
    REFERENCE_RATING,
    Dimension,
    load_dimensions,
    load_items,
    load_judgements,
)
from scoring.kinds.stc3.config import TaskConfig
from scoring.validation import ValidationFailed

DIALOGUES = [
    {"id": "d1", "turns": [{"sender": "customer", "utterances": ["My card is blocked."]},
                           {"sender": "helpdesk", "utterances": ["Please send your number."]},
                           {"sender": "customer", "utterances": ["Thanks."]}]},
    {"id": 42, "turns": [{"sender": "customer"}, {"sender": "helpdesk"}], "annotations": [{"quality": {}}]},
]


def good(**changes: object) -> dict:
    judgement = {"item": "d1", "assessor": "ann", "quality": {"A": 1, "E": 0, "S": -1},
                 "nugget": ["CNUG0", "HNUG", "CNUG*"], "seconds": 41.5}
    judgement.update(changes)
    return judgement


def errors(data: object, kind: str = "stc3", **options: object) -> list[str]:
    with pytest.raises(ValidationFailed) as caught:
        load_judgements(data, kind, **options)  # type: ignore[arg-type]
    return caught.value.errors


def test_a_valid_stc3_file() -> None:
    items = load_items(DIALOGUES, "stc3")
    assert items.ids == ["d1", "42"] and items.senders["42"] == ("customer", "helpdesk")
    found = load_judgements([good(), good(assessor=7, quality={"A": "2", "E": 2, "S": 0}, seconds=None),
                             good(item=42, nugget=["CNaN", "HNUG*"])], "stc3", items)
    assert [(j.item, j.assessor) for j in found.judgements] == [("d1", "ann"), ("d1", "7"), ("42", "ann")]
    assert found.judgements[1].values == {"A": 2, "E": 2, "S": 0}  # "2" is the point 2 of the scale
    assert found.judgements[0].seconds == 41.5 and found.judgements[1].seconds is None
    assert [d.name for d in found.dimensions] == ["A", "E", "S"] and found.dimensions[0].scale == (-2, -1, 0, 1, 2)
    assert found.has_nugget and found.assessors() == ["7", "ann"] and found.judged_items() == ["d1", "42"]


def test_every_stc3_problem_with_its_path() -> None:
    items = load_items(DIALOGUES, "stc3")
    data = [
        good(nugget=["HNUG", "HNUG", "CNUG"]),                  # 0: a helpdesk label on a customer turn
        good(assessor="b", quality={"A": 3, "E": 0, "S": 0}),   # 1: off the scale
        good(item="nope"),                                      # 2: unknown item
        good(assessor="c", nugget=["CNUG0", "HNUG"]),           # 3: two labels for three turns
        good(),                                                 # 4: ann judges d1 a second time
        good(assessor="d", quality={"A": 1, "E": 0}),           # 5: a dimension missing
        good(assessor="e", quality={"A": 1, "E": 0, "S": 0, "X": 1}),  # 6: an unknown dimension
        good(assessor="", seconds=-1),                          # 7: no assessor, negative seconds
        {"item": "d1", "assessor": "f", "nugget": ["CNUG0", "HNUG", "CNUG"]},  # 8: no quality
        "not an object",                                        # 9
        good(assessor="g", quality={"A": True, "E": 0, "S": 0}),  # 10: a boolean is not a point
    ]
    assert errors(data, items=items) == [
        '[9]: must be an object, not "not an object"',
        '[0].nugget[0]: label "HNUG" is not allowed on a customer turn (allowed: CNUG0, CNUG, CNUG*, CNaN)',
        '[1].quality.A: value 3 is off the scale (allowed: -2, -1, 0, 1, 2)',
        '[2].item: unknown item "nope" (not in the items file)',
        '[3].nugget: has 2 label(s) for a dialogue of 3 turn(s): one label per turn',
        '[4]: assessor "ann" judged item "d1" twice (first at [0])',
        '[5].quality: missing dimension "S"',
        '[6].quality: unknown dimension "X" (dimensions: A, E, S)',
        '[7].assessor: missing or not a non-empty string or integer',
        '[7].seconds: must be a finite number of seconds >= 0, not -1',
        '[8]: missing "quality" (other judgements of this file have it)',
        '[10].quality.A: value True is off the scale (allowed: -2, -1, 0, 1, 2)',
    ]


def test_file_level_problems() -> None:
    assert errors({"item": "d1"}) == ["judgements file: must be a JSON list of objects, not dict"]
    assert errors([]) == ["judgements file: the list is empty"]
    assert errors([{"item": "d1", "assessor": "a"}]) == ['no judgement has "quality" or "nugget": nothing was judged']
    assert errors([good()], kind="ratings") == ['kind: must be one of stc3, response, metric, not "ratings"']
    assert errors([good()], items=load_items(DIALOGUES, "stc3"), kind="metric") == [
        "items: read for the stc3 kind, not metric"]


def test_without_items_any_id_and_either_sides_labels_pass() -> None:
    found = load_judgements([good(item="anything", nugget=["HNUG", "CNUG"])], "stc3")
    assert found.judgements[0].nugget == ("HNUG", "CNUG")
    assert errors([good(), good(assessor="b", nugget=["CNUG0", "HNUG"])]) == [
        '[1].nugget: has 2 label(s) where [0].nugget, of the same dialogue, has 3: one label per turn']
    assert errors([good(nugget=["HNUG", "XNUG"])]) == [
        '[0].nugget[1]: unknown label "XNUG" (allowed: CNUG0, CNUG, CNUG*, CNaN, HNUG, HNUG*, HNaN)']


def test_a_task_of_other_labels_is_judged_on_its_own_scale() -> None:
    config = TaskConfig(quality_dimensions=("Q",), quality_scale=("high", "mid", "low"),
                        customer_nugget_types=("C1", "C0"), helpdesk_nugget_types=("H1", "H0"))
    found = load_judgements([{"item": "d1", "assessor": "a", "quality": {"Q": "mid"}}], "stc3", config=config)
    assert found.dimensions == (Dimension("Q", "ordinal", ("high", "mid", "low")),)
    assert errors([{"item": "d1", "assessor": "a", "quality": {"Q": "top"}}], config=config) == [
        '[0].quality.Q: value "top" is off the scale (allowed: high, mid, low)']


def test_items_files_of_every_kind_and_their_problems() -> None:
    with pytest.raises(ValidationFailed) as caught:
        load_items([{"id": "a", "turns": [{"sender": "agent"}]}, {"id": "a", "turns": [{"sender": "customer"}]},
                    {"turns": []}, 5], "stc3")
    assert caught.value.errors == ['[3]: must be an object, not 5', '[0].turns[0].sender: must be "customer" or '
                                   '"helpdesk", not "agent"', '[1].id: id "a" appears twice',
                                   '[2].id: missing or not a non-empty string or integer']
    metric = load_items([{"id": "c", "responses": [{"id": "c/a"}, {"id": 3}]}], "metric")
    assert metric.ids == ["c/a", "3"]
    with pytest.raises(ValidationFailed, match=r"\[0\].responses: missing or not a non-empty list"):
        load_items([{"id": "c"}], "metric")
    with pytest.raises(ValidationFailed, match=r"\[0\].references: missing or not a non-empty list"):
        load_items([{"id": "c", "references": []}], "response")


def test_values_files_for_references_and_responses() -> None:
    items = load_items([{"id": "c1", "references": [{"text": "a"}, {"text": "b"}]}], "response")
    found = load_judgements([{"item": "c1#1", "assessor": "a", "values": {"rating": 4}}], "response", items)
    assert found.dimensions == (REFERENCE_RATING,) and found.judgements[0].values == {"rating": 4}
    assert errors([{"item": "c1#2", "assessor": "a", "values": {"rating": 5}}], "response", items=items) == [
        '[0].item: unknown item "c1#2" (not in the items file)']
    assert errors([{"item": "c1#0", "assessor": "a", "values": {"rating": 6}}, {"item": "c1#0", "assessor": "b"}],
                  "response", items=items) == ['[0].values.rating: value 6 is off the scale (allowed: 1, 2, 3, 4, 5)',
                                               '[1].values: is missing']
    found = load_judgements([{"item": "r", "assessor": "a", "values": {"appropriateness": 5}}], "metric")
    assert found.dimensions == (APPROPRIATENESS,)


def test_dimensions_file() -> None:
    dims = load_dimensions([{"name": "relevance", "scale": [1, 2, 3]},
                            {"name": "verdict", "scale": ["bad", "ok", "good"], "level": "nominal",
                             "meanings": ["off topic", "fine", "excellent"]}])
    assert dims[0] == Dimension("relevance", "ordinal", (1, 2, 3)) and dims[0].numeric
    assert dims[1].meanings == ("off topic", "fine", "excellent") and not dims[1].numeric
    with pytest.raises(ValidationFailed) as caught:
        load_dimensions([{"name": "a", "scale": [3, 2, 1]}, {"name": "a", "scale": [1, 2]},
                         {"name": "b", "scale": ["x", "y"], "level": "interval"},
                         {"name": "c", "scale": [1], "level": "ratio"},
                         {"name": "d", "scale": [1, 1.0]}, {"name": "e", "scale": [1, 2], "meanings": ["one"]},
                         {"name": "f", "scale": [1, None]}, 3, {"name": "two words", "scale": [1, 2]}])
    assert caught.value.errors == [
        "[0].scale: must list its numbers from lowest to highest", '[1].name: "a" is already a dimension',
        "[2].scale: the interval level needs numbers", '[3].level: must be one of nominal, ordinal, interval, '
        'not "ratio"', "[3].scale: must be a list of 2 to 101 points, lowest first", "[4].scale: lists a point twice",
        "[5].meanings: must be a list of texts, one per point of the scale",
        "[6].scale[1]: must be a finite number or a non-empty label, not None",
        "[7]: must be an object with \"name\" and \"scale\", not 3",
        '[8].name: "two words": must start with a letter and hold only letters, digits, _ and -, at most 24 '
        'characters (it becomes part of measure keys and URLs)']
    with pytest.raises(ValidationFailed, match="must be a non-empty JSON list"):
        load_dimensions({})
    found = load_judgements([{"item": "r", "assessor": "a", "values": {"relevance": 2, "verdict": "ok"}}],
                            "metric", dimensions=dims)
    assert found.judgements[0].values == {"relevance": 2, "verdict": "ok"}


def test_check_items_marked_in_the_file() -> None:
    rows = [{"item": "r1", "assessor": "a", "values": {"appropriateness": 1}, "check": True},
            {"item": "r1", "assessor": "b", "values": {"appropriateness": 2}, "check": True},
            {"item": "r2", "assessor": "a", "values": {"appropriateness": 5}, "check": False},
            {"item": "r3", "assessor": "a", "values": {"appropriateness": 5}}]
    found = load_judgements(rows, "metric")
    assert found.check_items == {"r1"}
    assert [j.item for j in found.without_checks().judgements] == ["r2", "r3"]
    assert [j.item for j in found.without_checks({"r3"}).judgements] == ["r2"]
    rows += [{"item": "r2", "assessor": "b", "values": {"appropriateness": 4}, "check": True},
             {"item": "r4", "assessor": "b", "values": {"appropriateness": 4}, "check": "yes"}]
    assert errors(rows, "metric") == [
        '[4].check: item "r2" is not a check item at [2]: every judgement of an item says the same',
        '[5].check: must be true (a check item) or false, not "yes"']
