"""Metrics-track gold and run files: compiled arrays, and every validation problem named with its path.

Plain pytest, no Django.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from scoring.kinds.metric import formats
from scoring.kinds.metric.formats import MetricGold, load_metric_gold, load_metric_run
from scoring.validation import ValidationFailed, parse_json


def gold_data(**extra):
    """Two contexts, three systems; ``extra`` adds a field to every response."""
    data = [
        {"id": "c1", "responses": [
            {"id": "c1/a", "system": "S2", "human": 4.2, "property": 0.3, "grades": [2, 0]},
            {"id": "c1/b", "system": "S1", "human": 2, "property": 0.1, "grades": [1]},
            {"id": "c1/c", "system": "S3", "human": 2, "property": 0.2, "grades": [0, 0, 3]}]},
        {"id": 7, "responses": [
            {"id": 70, "system": "S1", "human": 1, "property": 0.0, "grades": [1, 1]},
            {"id": "7/b", "system": "S3", "human": 3.5, "property": 0.9, "grades": [2]}]},
    ]
    for context in data:
        for response in context["responses"]:
            response.update(extra)
    return data


def problems_of(function, *args) -> list[str]:
    with pytest.raises(ValidationFailed) as caught:
        function(*args)
    return caught.value.errors


def test_gold_compiles_to_arrays():
    gold = load_metric_gold(gold_data())
    assert gold.context_ids == ["c1", "7"]
    assert gold.response_ids == ["c1/a", "c1/b", "c1/c", "70", "7/b"]
    assert gold.context.tolist() == [0, 0, 0, 1, 1]
    assert gold.human.tolist() == [4.2, 2.0, 2.0, 1.0, 3.5]
    assert gold.system_names == ["S1", "S2", "S3"]
    assert gold.system.tolist() == [1, 0, 2, 0, 2]
    assert gold.property_metric.tolist() == [0.3, 0.1, 0.2, 0.0, 0.9]
    assert gold.grade_counts.tolist() == [2, 1, 3, 2, 1]
    assert gold.grades.tolist() == [2, 0, 1, 0, 0, 3, 1, 1, 2]
    # c1 lacks nothing of S1..S3; context 7 lacks S2: said in a warning.
    assert len(gold.warnings) == 1 and "1 of 2 context(s)" in gold.warnings[0]
    first, second, context = gold.pairs
    assert list(zip(first.tolist(), second.tolist(), context.tolist(), strict=True)) == [
        (0, 1, 0), (0, 2, 0), (1, 2, 0), (3, 4, 1)]


def test_gold_without_optional_fields():
    data = [{"id": "c", "responses": [{"id": "a", "human": 1}, {"id": "b", "human": 2}]}]
    gold = load_metric_gold(data)
    assert not gold.has_systems and gold.system.tolist() == [-1, -1]
    assert gold.property_metric is None and gold.grades is None and gold.grade_counts is None


def test_gold_bytes_round_trip():
    gold = load_metric_gold(gold_data())
    again = MetricGold.from_bytes(gold.to_bytes())
    for name in ("context_ids", "response_ids", "system_names", "warnings"):
        assert getattr(again, name) == getattr(gold, name)
    for name in ("context", "human", "system", "property_metric", "grades", "grade_counts"):
        assert np.array_equal(getattr(again, name), getattr(gold, name))
    bare = load_metric_gold([{"id": "c", "responses": [{"id": "a", "human": 1}, {"id": "b", "human": 2}]}])
    bare_again = MetricGold.from_bytes(bare.to_bytes())
    assert bare_again.property_metric is None and bare_again.grades is None
    with pytest.raises(ValueError, match="not a compiled metrics-track gold"):
        import io

        buffer = io.BytesIO()
        np.savez(buffer, format=np.array("other"))
        MetricGold.from_bytes(buffer.getvalue())


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"id": "c"}, ["$: expected a JSON list of contexts, got an object"]),
        ([], ["$: the list of contexts is empty"]),
    ],
)
def test_gold_top_level(data, expected):
    assert problems_of(load_metric_gold, data) == expected


def test_gold_every_problem_listed_with_its_path():
    data = gold_data()
    data.append("not a context")
    data.append({"id": "c1", "responses": [{"id": "x1", "human": 1, "system": "S1", "property": 1, "grades": [1]},
                                           {"id": "x2", "human": 2, "system": "S2", "property": 1, "grades": [1]}]})
    data.append({"responses": [{"id": "y1", "human": 1, "system": "S1", "property": 1, "grades": [1]},
                               {"id": "y2", "human": 2, "system": "S2", "property": 1, "grades": [1]}]})
    data.append({"id": "few", "responses": [{"id": "z1", "human": 1, "system": "S1", "property": 1, "grades": [1]}]})
    data.append({"id": "nolist", "responses": {"id": "q"}})
    bad = {"id": "bad", "responses": [
        {"id": "c1/a", "human": True, "system": "S1", "property": float("nan"), "grades": []},
        {"id": "", "human": "4", "system": "S1", "property": "x", "grades": [1, -1, True, float("inf")]},
        {"human": float("inf"), "grades": [1]},
        5,
        {"id": "ok", "human": 1e400, "system": 3, "property": 1, "grades": "12"},
    ]}
    data.append(bad)
    errors = problems_of(load_metric_gold, data)
    expected = [
        "[2]: expected an object, got str",
        "[3].id: duplicate context id \"c1\" (first at [0])",
        "[4].id: missing or not a non-empty string or integer",
        "[5].responses: has 1 response(s); a context needs at least 2 "
        "(predictive power compares responses to the same context)",
        "[6].responses: missing or not a list of responses",
        "[7].responses[0].id: duplicate response id \"c1/a\" (first at [0].responses[0].id)",
        "[7].responses[0].human: must be a number, got the boolean True",
        "[7].responses[0].property: must be a finite number, got nan",
        "[7].responses[0].grades: must be a non-empty list of grades",
        "[7].responses[1].id: must be a non-empty string (without NUL) or an integer, got \"\"",
        "[7].responses[1].human: must be a number, got \"4\"",
        "[7].responses[1].system: system \"S1\" already answered this context (responses[0])",
        "[7].responses[1].property: must be a number, got \"x\"",
        "[7].responses[1].grades[1]: must be >= 0, got -1",
        "[7].responses[1].grades[2]: must be a number, got the boolean True",
        "[7].responses[1].grades[3]: must be a finite number, got inf",
        "[7].responses[2].id: missing or not a non-empty string or integer",
        "[7].responses[2].human: must be a finite number, got inf",
        "[7].responses[2].system: missing: other responses of the gold name their system, so every one must",
        "[7].responses[2].property: missing: other responses of the gold carry the property metric, "
        "so every one must",
        "[7].responses[3]: expected an object, got int",
        "[7].responses[4].human: must be a finite number, got inf",
        "[7].responses[4].system: must be a non-empty string, got 3",
        "[7].responses[4].grades: must be a non-empty list of grades",
    ]
    assert errors == expected


def test_gold_nul_in_ids_and_systems():
    data = [{"id": "c\x00", "responses": [{"id": "a\x00", "human": 1, "system": "S\x00"},
                                           {"id": "b", "human": 2, "system": "S"}]}]
    errors = problems_of(load_metric_gold, data)
    assert [e.split(":")[0] for e in errors] == ["[0].id", "[0].responses[0].id", "[0].responses[0].system"]


def test_gold_without_any_preference_refused():
    data = [{"id": "c", "responses": [{"id": "a", "human": 3}, {"id": "b", "human": 3}]},
            {"id": "d", "responses": [{"id": "e", "human": 1}, {"id": "f", "human": 1}]}]
    assert problems_of(load_metric_gold, data) == [
        "$: no two responses to the same context have different human judgements: there is no preference to predict"]


def test_gold_pair_bound(monkeypatch):
    monkeypatch.setattr(formats, "MAX_CONTEXT_PAIRS", 3)
    data = [{"id": f"c{c}", "responses": [{"id": f"c{c}/{r}", "human": r} for r in range(3)]} for c in range(2)]
    errors = problems_of(load_metric_gold, data)
    assert errors == ["[1]: the contexts so far hold more than 3 pairs of responses; split large contexts"]


def test_gold_from_json_text_with_nan():
    text = '[{"id": "c", "responses": [{"id": "a", "human": NaN}, {"id": "b", "human": 2}]}]'
    errors = problems_of(load_metric_gold, parse_json(text))
    assert errors == ["[0].responses[0].human: must be a finite number, got nan"]


# --------------------------------------------------------------------------- runs


def test_run_aligned_to_gold_order():
    gold = load_metric_gold(gold_data())
    run = [{"id": "7/b", "score": 5}, {"id": 70, "score": -1.5}, {"id": "c1/c", "score": 0.25},
           {"id": "c1/a", "score": 1}, {"id": "c1/b", "score": 0}]
    scores = load_metric_run(run, gold)
    assert scores.dtype == np.float64
    assert scores.tolist() == [1.0, 0.0, 0.25, -1.5, 5.0]
    # The integer id 70 and the string "70" are the same response.
    run[1]["id"] = "70"
    assert load_metric_run(run, gold).tolist() == [1.0, 0.0, 0.25, -1.5, 5.0]


def test_run_every_problem_listed():
    gold = load_metric_gold(gold_data())
    run = [
        {"id": "c1/a", "score": True},
        {"id": "c1/a", "score": 1},
        {"id": "nope", "score": 1},
        {"score": 1},
        ["c1/b", 1],
    ]
    errors = problems_of(load_metric_run, run, gold)
    assert errors == [
        "[0].score: must be a number, got the boolean True",
        "[1].id: duplicate response id \"c1/a\" (first at [0])",
        "[2].id: unknown response id \"nope\" (not in the gold)",
        "[3].id: missing or not a non-empty string or integer",
        "[4]: expected an object, got list",
        "$: response \"c1/b\" has no score",
        "$: response \"c1/c\" has no score",
        "$: response \"70\" has no score",
        "$: response \"7/b\" has no score",
    ]


@pytest.mark.parametrize(
    ("score", "problem"),
    [
        (None, "missing"),
        ("0.5", "must be a number, got \"0.5\""),
        (float("nan"), "must be a finite number, got nan"),
        (float("-inf"), "must be a finite number, got -inf"),
        (False, "must be a number, got the boolean False"),
        ([1], "must be a number, got [1]"),
    ],
)
def test_run_bad_scores(score, problem):
    gold = load_metric_gold(gold_data())
    run = [{"id": rid, "score": 1.0} for rid in gold.response_ids]
    run[2]["score"] = score
    if score is None:
        del run[2]["score"]
    assert problems_of(load_metric_run, run, gold) == [f"[2].score: {problem}"]


def test_run_missing_responses_summarised():
    data = [{"id": f"c{c}", "responses": [{"id": f"c{c}/{r}", "human": r} for r in range(2)]} for c in range(30)]
    gold = load_metric_gold(data)
    errors = problems_of(load_metric_run, [{"id": "c0/0", "score": 1}], gold)
    assert len(errors) == 21
    assert errors[0] == "$: response \"c0/1\" has no score"
    assert errors[-1] == "$: ... 39 more response(s) have no score (59 of 60 in all)"


def test_run_bounded_before_entries_are_read():
    gold = load_metric_gold(gold_data())
    # Entries past the gold's size are refused before any entry is looked at (they are not even objects).
    run = [object()] * (gold.n_responses + 1)
    assert problems_of(load_metric_run, run, gold) == ["$: the run has 6 entries but the gold has 5 responses"]


LIST_EXPECTED = "$: expected a JSON list of {\"id\", \"score\"} objects, got "


@pytest.mark.parametrize(("data", "problem"), [({"id": 1}, LIST_EXPECTED + "an object"),
                                                ([], "$: the run is empty"), ("x", LIST_EXPECTED + "str")])
def test_run_top_level(data, problem):
    gold = load_metric_gold(gold_data())
    assert problems_of(load_metric_run, data, gold) == [problem]


def test_run_json_round_trip_with_parse():
    gold = load_metric_gold(gold_data())
    text = json.dumps([{"id": rid, "score": i / 3} for i, rid in enumerate(gold.response_ids)])
    scores = load_metric_run(parse_json(text.encode()), gold)
    assert all(math.isclose(s, i / 3) for i, s in enumerate(scores))


# --------------------------------------------------------------------------- runs read from their bytes
# Issue 28, item 4: the server reads a metric run's bytes a piece at a time
# (formats.load_metric_run_file); the scores and every problem are those of the examples above.

def file_problems(content: bytes, gold: MetricGold) -> list[str]:
    return problems_of(formats.load_metric_run_file, content, gold)


@pytest.fixture(params=[1, 24, 1 << 20], ids=["pieces of 1 byte", "pieces of 24 bytes", "one piece"])
def piece_bytes(request, monkeypatch):
    from scoring import validation

    monkeypatch.setattr(validation, "LIST_PIECE_BYTES", request.param)
    return request.param


def test_run_file_aligned_to_gold_order(piece_bytes):
    gold = load_metric_gold(gold_data())
    content = (b'[ {"id": "7/b", "score": 5}, {"score": -1.5, "id": 70},\n{"id": "c1/c", "score": 0.25, '
               b'"x": [1, "]"]}, {"id": "c1/a", "score": 1}, {"id": "c1/b", "score": 0, "score": 0}\n]\n')
    assert formats.load_metric_run_file(content, gold).tolist() == [1.0, 0.0, 0.25, -1.5, 5.0]


def test_run_file_every_problem_listed(piece_bytes):
    gold = load_metric_gold(gold_data())
    content = b'[{"id": "c1/a", "score": true}, {"id": "c1/a", "score": 1}, {"id": "nope", "score": 1}, ' \
              b'{"score": 1}, ["c1/b", 1]]'
    assert file_problems(content, gold) == [
        "[0].score: must be a number, got the boolean True",
        "[1].id: duplicate response id \"c1/a\" (first at [0])",
        "[2].id: unknown response id \"nope\" (not in the gold)",
        "[3].id: missing or not a non-empty string or integer",
        "[4]: expected an object, got list",
        "$: response \"c1/b\" has no score",
        "$: response \"c1/c\" has no score",
        "$: response \"70\" has no score",
        "$: response \"7/b\" has no score",
    ]


@pytest.mark.parametrize(("content", "problems"), [
    # Not JSON to orjson: the whole file goes to the parser that lets NaN and 1e400 through.
    (b'[{"id": "c1/a", "score": NaN}, {"id": "c1/b", "score": 1e400}, {"id": "c1/c", "score": 1}, '
     b'{"id": 70, "score": 1}, {"id": "7/b", "score": 1}]',
     ["[0].score: must be a finite number, got nan", "[1].score: must be a finite number, got inf"]),
    (b'[{"id": "c1/a", "score": 1},]', ["file is not valid JSON: Expecting value at line 1 column 29"]),
    (b'[{"id": "c1/a", "score": 1}', ["file is not valid JSON: Expecting ',' delimiter at line 1 column 28"]),
    (b'[{"id": "c1/a", "score": 1}] x', ["file is not valid JSON: Extra data at line 1 column 30"]),
    (b"[]", ["$: the run is empty"]),
    (b'{"id": "c1/a"}', ["$: expected a JSON list of {\"id\", \"score\"} objects, got an object"]),
    (b"[1, 2, 3, 4, 5, 6]", ["$: the run has 6 entries but the gold has 5 responses"]),
    (b"\xef\xbb\xbf[]", ["file starts with a UTF-8 byte-order mark; save it as UTF-8 without BOM"]),
])
def test_run_file_problems_of_the_whole_file(content, problems, piece_bytes):
    gold = load_metric_gold(gold_data())
    assert file_problems(content, gold) == problems


def test_run_file_holds_a_score_per_response_not_the_parsed_list():
    import tracemalloc

    data = [{"id": f"c{c}", "responses": [{"id": f"c{c}/{r}", "human": r} for r in range(10)]} for c in range(2000)]
    gold = load_metric_gold(data)
    content = json.dumps([{"id": rid, "score": i / 7} for i, rid in enumerate(gold.response_ids)]).encode()
    # Both paths once before measuring: a module either imports on first use would otherwise be
    # counted in the peak when this test is the first of its process to read a run file.
    small = json.dumps([{"id": rid, "score": 0.5} for rid in gold.response_ids[:10]]).encode()
    load_metric_run(parse_json(small), gold, allow_missing=True)
    formats.load_metric_run_file(small, gold, allow_missing=True)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        whole = load_metric_run(parse_json(content), gold)
        whole_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        pieces = formats.load_metric_run_file(content, gold)
        pieces_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert pieces.tolist() == whole.tolist() == [i / 7 for i in range(20_000)]
    # Measured on 906,070 bytes: the whole list 16.3-16.6 MB (18.0-18.4x the file); a piece at a
    # time 2.3-2.5 MB (2.5-2.7x: the scan's chunk arrays, the bounds, a piece of 64 KiB as dicts,
    # a score and a position per response).
    assert whole_peak > 10 * len(content)
    assert pieces_peak < 4 * len(content)
