"""Reading and validating gold files and runs: the fast path, the careful validator, every error."""

from __future__ import annotations

import copy
import json
import random

import numpy as np
import pytest

from devtools import reference
from fixtures.synthetic import generate_gold, generate_run
from scoring.kinds.stc3 import careful as careful_path
from scoring.kinds.stc3 import fast as fast_path
from scoring.kinds.stc3 import formats
from scoring.kinds.stc3.config import STC3, TaskConfig
from scoring.kinds.stc3.evaluate import evaluate
from scoring.kinds.stc3.formats import Gold, Run, load_gold, load_run
from scoring.validation import MAX_ERRORS, ValidationFailed, parse_json


@pytest.fixture(autouse=True)
def _isolated_settings() -> None:
    """Replaces tests/conftest.py's Django settings fixture: the scoring core needs no Django,
    so these tests also run with ``-p no:django``."""


# A small hand-written gold: d1 = customer, helpdesk; d2 = customer, helpdesk, customer;
# d3 = customer only. Three annotators.
TINY_GOLD = [
    {"id": "d1", "turns": [{"sender": "customer", "utterances": ["hi"]}, {"sender": "helpdesk", "utterances": ["ok"]}],
     "annotations": [{"quality": {"A": 1, "S": 0, "E": 0}, "nugget": ["CNUG0", "HNUG"]},
                     {"quality": {"A": 1, "S": -1, "E": 0}, "nugget": ["CNUG0", "HNaN"]},
                     {"quality": {"A": 2, "S": 0, "E": 1}, "nugget": ["CNUG", "HNUG"]}]},
    {"id": "d2", "turns": [{"sender": "customer", "utterances": ["a"]}, {"sender": "helpdesk", "utterances": ["b"]},
                           {"sender": "customer", "utterances": ["c"]}],
     "annotations": [{"quality": {"A": 0, "S": 0, "E": -1}, "nugget": ["CNUG0", "HNUG*", "CNUG*"]},
                     {"quality": {"A": -1, "S": 0, "E": -1}, "nugget": ["CNUG0", "HNUG*", "CNaN"]},
                     {"quality": {"A": 0, "S": 1, "E": -2}, "nugget": ["CNUG", "HNUG", "CNUG*"]}]},
    {"id": "d3", "turns": [{"sender": "customer", "utterances": ["only me"]}],
     "annotations": [{"quality": {"A": -2, "S": -2, "E": -2}, "nugget": ["CNaN"]},
                     {"quality": {"A": -2, "S": -1, "E": -2}, "nugget": ["CNaN"]},
                     {"quality": {"A": -1, "S": -2, "E": -2}, "nugget": ["CNUG0"]}]},
]
UNIFORM_QUALITY = {"2": 0.2, "1": 0.2, "0": 0.2, "-1": 0.2, "-2": 0.2}
CUSTOMER_ESTIMATE = {"CNUG0": 0.4, "CNUG": 0.3, "CNUG*": 0.2, "CNaN": 0.1}
HELPDESK_ESTIMATE = {"HNUG": 0.5, "HNUG*": 0.3, "HNaN": 0.2}


def tiny_run() -> list[dict]:
    """A valid run for TINY_GOLD."""
    quality = {"A": dict(UNIFORM_QUALITY), "S": dict(UNIFORM_QUALITY), "E": dict(UNIFORM_QUALITY)}
    return [
        {"id": "d1", "quality": copy.deepcopy(quality), "nugget": [dict(CUSTOMER_ESTIMATE), dict(HELPDESK_ESTIMATE)]},
        {"id": "d2", "quality": copy.deepcopy(quality),
         "nugget": [dict(CUSTOMER_ESTIMATE), dict(HELPDESK_ESTIMATE), dict(CUSTOMER_ESTIMATE)]},
        {"id": "d3", "quality": copy.deepcopy(quality), "nugget": [dict(CUSTOMER_ESTIMATE)]},
    ]


@pytest.fixture(scope="module")
def tiny_gold() -> Gold:
    return load_gold(copy.deepcopy(TINY_GOLD), STC3)


def run_errors(document: bytes | str | list, gold: Gold, allow_missing: bool = False) -> list[str]:
    """Every problem reported for a run given as JSON text or as a parsed object."""
    with pytest.raises(ValidationFailed) as failure:
        data = parse_json(document, "run file") if isinstance(document, bytes | str) else document
        load_run(data, gold, allow_missing=allow_missing)
    return failure.value.errors


def gold_errors(data: object, config: TaskConfig = STC3) -> list[str]:
    with pytest.raises(ValidationFailed) as failure:
        load_gold(data, config)
    return failure.value.errors


def parse_errors(document: bytes | str) -> list[str]:
    with pytest.raises(ValidationFailed) as failure:
        parse_json(document, "run file")
    return failure.value.errors


# Fast path and careful validator agree -----------------------------------------------------


def assert_same_gold(fast: Gold, checked: Gold) -> None:
    assert fast.dialogue_ids == checked.dialogue_ids
    assert fast.warnings == checked.warnings
    for name in ("annotators", "turn_counts", "turn_is_customer", "customer_dialogue", "helpdesk_dialogue",
                 "customer_counts", "helpdesk_counts"):
        left, right = getattr(fast, name), getattr(checked, name)
        if left is None or right is None:
            assert left is None and right is None, name
        else:
            assert left.dtype == right.dtype and np.array_equal(left, right), name
    assert (fast.quality_counts is None) == (checked.quality_counts is None)
    if fast.quality_counts is not None:
        assert list(fast.quality_counts) == list(checked.quality_counts)
        for dim, counts in fast.quality_counts.items():
            assert counts.dtype == checked.quality_counts[dim].dtype
            assert np.array_equal(counts, checked.quality_counts[dim]), dim


def assert_same_run(fast: Run, checked: Run) -> None:
    assert np.array_equal(fast.dialogue_index, checked.dialogue_index)
    assert fast.n_missing == checked.n_missing
    assert fast.warnings == checked.warnings
    for name in ("customer", "helpdesk"):
        left, right = getattr(fast, name), getattr(checked, name)
        if left is None or right is None:
            assert left is None and right is None, name
        else:
            assert left.dtype == right.dtype and np.array_equal(left, right), name
    assert (fast.quality is None) == (checked.quality is None)
    if fast.quality is not None:
        assert list(fast.quality) == list(checked.quality)
        for dim, rows in fast.quality.items():
            assert np.array_equal(rows, checked.quality[dim]), dim


def to_counts(run: list[dict], annotators: int = 19) -> list[dict]:
    """The run with every distribution as whole annotator counts (at least one vote each)."""

    def counts(values: dict) -> dict:
        rounded = {label: int(round(value * annotators)) for label, value in values.items()}
        if not any(rounded.values()):
            rounded[max(values, key=values.get)] = 1
        return rounded

    converted = []
    for entry in run:
        new = {"id": entry["id"]}
        if "quality" in entry:
            new["quality"] = {dim: counts(values) for dim, values in entry["quality"].items()}
        if "nugget" in entry:
            new["nugget"] = [counts(values) for values in entry["nugget"]]
        converted.append(new)
    return converted


def without_zeros(run: list[dict]) -> list[dict]:
    """The run with labels of value 0 left out (they count as 0)."""
    return json.loads(json.dumps(run), object_hook=lambda values: {k: v for k, v in values.items() if v != 0})


def mixed_annotators(gold: list[dict]) -> list[dict]:
    gold = copy.deepcopy(gold)
    for number, dialogue in enumerate(gold):
        dialogue["annotations"] = dialogue["annotations"][: 19 - number % 3]
    return gold


def quality_only(gold: list[dict]) -> list[dict]:
    gold = copy.deepcopy(gold)
    for dialogue in gold:
        for annotation in dialogue["annotations"]:
            del annotation["nugget"]
    return gold


def nugget_only(gold: list[dict]) -> list[dict]:
    gold = copy.deepcopy(gold)
    for dialogue in gold:
        for annotation in dialogue["annotations"]:
            del annotation["quality"]
    return gold


def string_labels(gold: list[dict]) -> list[dict]:
    gold = copy.deepcopy(gold)
    for dialogue in gold:
        for annotation in dialogue["annotations"]:
            annotation["quality"] = {dim: str(label) for dim, label in annotation["quality"].items()}
    return gold


GOLD_VARIANTS = {
    "stc3-like": lambda: generate_gold(60, seed=11),
    "short-dialogues": lambda: generate_gold(40, seed=12, min_turns=1, max_turns=3, annotators=5),
    "annotators-vary": lambda: mixed_annotators(generate_gold(30, seed=13)),
    "string-scale-labels": lambda: string_labels(generate_gold(30, seed=14)),
    "quality-only": lambda: quality_only(generate_gold(30, seed=15)),
    "nugget-only": lambda: nugget_only(generate_gold(30, seed=16)),
    "tiny": lambda: copy.deepcopy(TINY_GOLD),
}


@pytest.mark.parametrize("variant", sorted(GOLD_VARIANTS))
def test_fast_and_checked_gold_give_identical_arrays(variant):
    data = GOLD_VARIANTS[variant]()
    fast = fast_path._load_gold_fast(copy.deepcopy(data), STC3)
    assert fast is not None, "valid gold should take the fast path"
    assert_same_gold(fast, careful_path._load_gold_checked(copy.deepcopy(data), STC3))


def test_string_and_integer_scale_labels_give_the_same_gold():
    data = generate_gold(30, seed=14)
    assert_same_gold(load_gold(data, STC3), load_gold(string_labels(data), STC3))


@pytest.fixture(scope="module")
def generated() -> tuple[list[dict], Gold]:
    gold_data = generate_gold(80, seed=21, min_turns=1, max_turns=7)
    return gold_data, load_gold(gold_data, STC3)


def odd_sums(run: list[dict]) -> list[dict]:
    """Scale a few distributions so they sum to neither 1 nor whole counts (a warning, not an error)."""
    run = copy.deepcopy(run)
    for entry in run[:7]:
        entry["quality"]["A"] = {label: value * 0.5 for label, value in entry["quality"]["A"].items()}
        entry["nugget"][0] = {label: value * 3.3 for label, value in entry["nugget"][0].items()}
    return run


RUN_VARIANTS = {
    "noisy": lambda gold: generate_run(gold, "noisy", noise=0.4, seed=1),
    "uniform": lambda gold: generate_run(gold, "uniform"),
    "popularity": lambda gold: generate_run(gold, "popularity"),
    "counts": lambda gold: to_counts(generate_run(gold, "noisy", noise=0.6, seed=2)),
    "labels-left-out": lambda gold: without_zeros(to_counts(generate_run(gold, "popularity"))),
    "quality-only": lambda gold: generate_run(gold, "noisy", seed=3, subtasks=("quality",)),
    "nugget-only": lambda gold: generate_run(gold, "noisy", seed=4, subtasks=("nugget",)),
    "shuffled": lambda gold: random.Random(5).sample(generate_run(gold, "noisy", seed=5), len(gold)),
    "odd-sums": lambda gold: odd_sums(generate_run(gold, "noisy", seed=6)),
}


@pytest.mark.parametrize("allow_missing", [False, True])
@pytest.mark.parametrize("variant", sorted(RUN_VARIANTS))
def test_fast_and_checked_run_give_identical_arrays(generated, variant, allow_missing):
    gold_data, gold = generated
    run = RUN_VARIANTS[variant](gold_data)
    if allow_missing:
        run = run[::2]  # every other gold dialogue is missing
    fast = fast_path._load_run_fast(copy.deepcopy(run), gold, allow_missing)
    assert fast is not None, "a valid run should take the fast path"
    assert_same_run(fast, careful_path._load_run_checked(copy.deepcopy(run), gold, allow_missing))
    assert fast.n_missing == (gold.n_dialogues - len(run))


def test_counts_and_probabilities_in_a_run_give_the_same_scores(generated):
    gold_data, gold = generated
    probabilities = generate_run(gold_data, "popularity")
    # Popularity splits ties equally, so 60 annotators' counts are whole numbers.
    counts = to_counts(probabilities, annotators=60)
    from_probabilities = evaluate(load_run(probabilities, gold), gold)
    from_counts = evaluate(load_run(counts, gold), gold)
    assert from_counts.nugget_means == pytest.approx(from_probabilities.nugget_means, abs=1e-12)
    for dim in STC3.quality_dimensions:
        assert from_counts.quality_means[dim] == pytest.approx(from_probabilities.quality_means[dim], abs=1e-12)


def test_checked_validator_takes_over_when_the_fast_path_bails_out():
    # Nugget types shared by both sides are a valid configuration the fast gold path does not handle.
    config = TaskConfig(quality_dimensions=("A",), quality_scale=("good", "fair", "bad"),
                        customer_nugget_types=("NUG", "NaN"), helpdesk_nugget_types=("NUG", "NaN"))
    gold_data = generate_gold(25, seed=31, config=config, min_turns=1, max_turns=4)
    assert fast_path._load_gold_fast(gold_data, config) is None
    gold = load_gold(gold_data, config)
    run = generate_run(gold_data, "noisy", noise=0.5, seed=32, config=config)
    result = evaluate(load_run(run, gold), gold, config)
    expected = reference.evaluate_reference(run, gold_data, config)
    assert result.quality_means["A"] == pytest.approx(expected["quality"]["A"], abs=1e-12)
    assert result.nugget_means == pytest.approx(expected["nugget"], abs=1e-12)


@pytest.mark.parametrize("what", ["gold", "run"])
def test_load_uses_the_checked_validator_with_the_same_scores_when_fast_path_returns_none(
        generated, monkeypatch, what):
    gold_data, gold = generated
    run = generate_run(gold_data, "noisy", noise=0.3, seed=41)
    expected = evaluate(load_run(run, gold), gold)
    calls = []
    checked_name = "_load_gold_checked" if what == "gold" else "_load_run_checked"
    checked = getattr(formats, checked_name)
    monkeypatch.setattr(formats, "_load_gold_fast" if what == "gold" else "_load_run_fast", lambda *args: None)
    monkeypatch.setattr(formats, checked_name, lambda *args: calls.append(what) or checked(*args))
    slow_gold = load_gold(gold_data, STC3)
    result = evaluate(load_run(run, slow_gold), slow_gold)
    assert calls == [what]
    for dim in STC3.quality_dimensions:
        for name, values in expected.quality[dim].items():
            assert np.array_equal(result.quality[dim][name], values), (dim, name)
    for name, values in expected.nugget.items():
        assert np.array_equal(result.nugget[name], values), name


def test_invalid_run_goes_to_the_checked_validator(tiny_gold, monkeypatch):
    calls = []
    checked = formats._load_run_checked
    monkeypatch.setattr(formats, "_load_run_checked", lambda *args: calls.append(1) or checked(*args))
    run = tiny_run()
    run[1]["quality"]["A"]["2"] = -1
    assert run_errors(run, tiny_gold) == ['[1].quality.A["2"]: value -1 is negative']
    assert calls == [1]


def test_random_corruptions_give_validation_errors_and_never_crash(generated):
    """Seeded corruption of valid files: every outcome is a clean ValidationFailed or a valid load,
    and wherever the fast path accepts a file the careful validator gives identical arrays."""
    rng = random.Random(7)
    junk = [None, True, 0, -1, 1.5, float("nan"), float("inf"), 10**400, "", "2", "CNUG", "HNUG", "customer",
            [], {}, [1], {"2": 1}, ["customer"], [[[]]]]
    gold_data = generate_gold(4, seed=8, min_turns=1, max_turns=3, annotators=3)
    gold = load_gold(gold_data, STC3)
    runs = [generate_run(gold_data, seed=9), to_counts(generate_run(gold_data, "popularity")),
            generate_run(gold_data, seed=10, subtasks=("nugget",))]

    def corrupt(document):
        document = copy.deepcopy(document)
        for _ in range(rng.randint(1, 3)):
            parent, key = document, None
            while True:  # walk down to a random node
                keys = list(parent) if isinstance(parent, dict) else list(range(len(parent)))
                if not keys:
                    break
                key = rng.choice(keys)
                if not isinstance(parent[key], dict | list) or rng.random() < 0.3:
                    break
                parent, key = parent[key], None
            if key is None:
                continue
            if rng.random() < 0.8:
                parent[key] = copy.deepcopy(rng.choice(junk))
            else:
                del parent[key]
        return document

    for attempt in range(400):
        if attempt % 2:
            data = corrupt(gold_data)
            try:
                loaded = load_gold(copy.deepcopy(data), STC3)
            except ValidationFailed as failure:
                assert failure.errors and all(isinstance(line, str) for line in failure.errors)
                continue
            fast = fast_path._load_gold_fast(copy.deepcopy(data), STC3)
            if fast is not None:
                assert_same_gold(fast, careful_path._load_gold_checked(copy.deepcopy(data), STC3))
            assert_same_gold(loaded, careful_path._load_gold_checked(data, STC3))
        else:
            data = corrupt(rng.choice(runs))
            try:
                run = load_run(copy.deepcopy(data), gold)
            except ValidationFailed as failure:
                assert failure.errors and all(isinstance(line, str) for line in failure.errors)
                continue
            assert_same_run(run, careful_path._load_run_checked(data, gold))
            result = evaluate(run, gold)
            assert all(np.isfinite(value) for value in (result.nugget_means or {}).values())


# Parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("document", "expected"), [
    (b"", "run file is empty"),
    (b" \n\t ", "run file is empty"),
    (b'\xef\xbb\xbf[{"id": "d1"}]', "run file starts with a UTF-8 byte-order mark; save it as UTF-8 without BOM"),
    (b'[{"id": "d\xe9"}]', "run file is not valid UTF-8 (byte 10: invalid continuation byte)"),
    (b'[{"id": "d1"},]', "run file is not valid JSON: Expecting value at line 1 column 15"),
    (b'[{"id": "d1"}\n{"id": "d2"}]', "run file is not valid JSON: Expecting ',' delimiter at line 2 column 1"),
    (b"[" * 100_000 + b"]" * 100_000, "run file is nested too deeply to be a run or gold file"),
    (b"[" * 100_000, "run file is nested too deeply to be a run or gold file"),
])
def test_unreadable_documents_give_one_clean_error(document, expected):
    assert parse_errors(document) == [expected]


def test_parse_keeps_nan_infinity_and_huge_numbers_for_validation_to_name():
    data = parse_json(b'[NaN, Infinity, -Infinity, 1e400, 1' + b"0" * 400 + b"]")
    assert np.isnan(data[0]) and data[1:4] == [float("inf"), float("-inf"), float("inf")]
    assert data[4] == 10**400


def test_parse_accepts_text_and_bytes():
    assert parse_json('[{"id": "d\u00e9"}]') == parse_json('[{"id": "d\u00e9"}]'.encode()) == [{"id": "d\u00e9"}]


# Run validation: every error with its JSON path --------------------------------------------


def test_run_not_a_json_list(tiny_gold):
    assert run_errors(b'{"id": "d1"}', tiny_gold) == ["$: expected a JSON list of dialogues, got an object"]
    assert run_errors(b'"d1"', tiny_gold) == ["$: expected a JSON list of dialogues, got str"]
    assert run_errors(b"[]", tiny_gold) == ["$: the list of dialogues is empty"]


def test_run_entries_that_are_not_objects(tiny_gold):
    run = tiny_run()
    document = json.dumps([run[0], 7, "d2", None, run[1], [run[2]]])
    errors = run_errors(document.encode(), tiny_gold)
    assert errors[:4] == ["[1]: expected an object, got int", "[2]: expected an object, got str",
                          "[3]: expected an object, got NoneType", "[5]: expected an object, got list"]
    # ... and d3 (only inside the list at [5]) is missing, reported in the same pass.
    assert errors[4].startswith('$: the run misses 1 of the 3 gold dialogue(s): "d3"')
    assert len(errors) == 5


def test_run_dialogue_ids_duplicate_unknown_missing_and_bad(tiny_gold):
    run = tiny_run()
    entries = [run[0], run[1], copy.deepcopy(run[0]), {**copy.deepcopy(run[1]), "id": "d9"},
               {**copy.deepcopy(run[1]), "id": 17.0}, {k: v for k, v in run[1].items() if k != "id"},
               {**copy.deepcopy(run[1]), "id": True}, {**copy.deepcopy(run[1]), "id": ""},
               {**copy.deepcopy(run[1]), "id": None}, {**copy.deepcopy(run[1]), "id": ["d2"]},
               {**copy.deepcopy(run[1]), "id": 17}]
    errors = run_errors(entries, tiny_gold)
    assert errors == [
        '[2].id: duplicate dialogue id "d1" (first at [0])',
        "[4].id: must be a non-empty string or an integer, got 17.0",
        "[5].id: missing or not a non-empty string or integer",
        "[6].id: must be a non-empty string or an integer, got True",
        '[7].id: must be a non-empty string or an integer, got ""',
        "[8].id: missing or not a non-empty string or integer",
        "[9].id: must be a non-empty string or an integer, got ['d2']",
        '[3].id: dialogue "d9" is not in the gold data of this task',
        '[10].id: dialogue "17" is not in the gold data of this task',  # an integer id is read as "17"
        '$: the run misses 1 of the 3 gold dialogue(s): "d3" (official scoring needs every dialogue)',
    ]


def integer_ids(document: list[dict]) -> list[dict]:
    document = copy.deepcopy(document)
    for entry in document:
        entry["id"] = int(entry["id"])
    return document


def test_integer_ids_are_read_as_their_decimal_strings(generated):
    # STC-3 files write ids as strings; one written as a number is the same dialogue, in the
    # gold, in the run or in both, and the scores and per-dialogue keys do not change.
    gold_data, gold = generated
    run = generate_run(gold_data, "noisy", noise=0.5, seed=71)
    expected = evaluate(load_run(run, gold), gold).to_dict(per_dialogue=True)
    numbered_gold = load_gold(integer_ids(gold_data), STC3)
    assert numbered_gold.dialogue_ids == gold.dialogue_ids
    assert fast_path._load_gold_fast(integer_ids(gold_data), STC3) is not None, "valid gold takes the fast path"
    assert_same_gold(numbered_gold, careful_path._load_gold_checked(integer_ids(gold_data), STC3))
    for run_ids, against in ((integer_ids(run), gold), (run, numbered_gold), (integer_ids(run), numbered_gold)):
        assert fast_path._load_run_fast(copy.deepcopy(run_ids), against, False) is not None
        assert_same_run(load_run(run_ids, against), careful_path._load_run_checked(copy.deepcopy(run_ids), against))
        assert evaluate(load_run(run_ids, against), against).to_dict(per_dialogue=True) == expected
    # A mix of both spellings in one run works too, and "17" and 17 are one id, so a duplicate.
    mixed = copy.deepcopy(run)
    mixed[1]["id"] = int(mixed[1]["id"])
    assert evaluate(load_run(mixed, gold), gold).to_dict(per_dialogue=True) == expected
    mixed.append({**copy.deepcopy(run[1])})
    assert run_errors(mixed, gold) == [f'[{len(run)}].id: duplicate dialogue id "{run[1]["id"]}" (first at [1])']


def test_missing_dialogues_list_ten_and_count_the_rest():
    gold_data = generate_gold(15, seed=51)
    gold = load_gold(gold_data, STC3)
    errors = run_errors(generate_run(gold_data, seed=52)[:2], gold)
    assert len(errors) == 1
    missing = [f'"{dialogue["id"]}"' for dialogue in gold_data[2:12]]
    assert errors[0] == (f"$: the run misses 13 of the 15 gold dialogue(s): {', '.join(missing)} and 3 more "
                         "(official scoring needs every dialogue)")


def test_allow_missing_scores_the_rest_and_says_how_many(tiny_gold):
    run = tiny_run()[:2]
    loaded = load_run(run, tiny_gold, allow_missing=True)
    assert loaded.n_missing == 1
    assert loaded.warnings == ["1 of the 3 gold dialogue(s) are missing from the run; scored on the 2 it contains"]
    result = evaluate(loaded, tiny_gold)
    assert result.dialogue_ids == ["d1", "d2"]
    assert result.summary()["n_missing"] == 1
    expected = reference.evaluate_reference(run, TINY_GOLD, STC3)  # d1 and d2 only
    assert result.nugget_means == pytest.approx(expected["nugget"], abs=1e-12)
    for dim in STC3.quality_dimensions:
        assert result.quality_means[dim] == pytest.approx(expected["quality"][dim], abs=1e-12)
    # The run still may not contain dialogues outside the gold, even with allow_missing.
    assert run_errors(run + [{**run[0], "id": "zz"}], tiny_gold, allow_missing=True) == [
        '[2].id: dialogue "zz" is not in the gold data of this task']


def test_allow_missing_with_no_known_dialogue_is_an_error(tiny_gold):
    run = [{**tiny_run()[0], "id": "elsewhere"}]
    assert run_errors(run, tiny_gold, allow_missing=True) == [
        '[0].id: dialogue "elsewhere" is not in the gold data of this task',
        "$: no dialogue of the run is in the gold data of this task",
    ]


def test_run_nugget_list_length_differs_from_turns(tiny_gold):
    run = tiny_run()
    run[0]["nugget"] = run[0]["nugget"][:1]
    run[2]["nugget"].append(dict(HELPDESK_ESTIMATE))
    run[1]["nugget"] = {"0": CUSTOMER_ESTIMATE}
    assert run_errors(run, tiny_gold) == [
        '[0].nugget: has 1 entries but dialogue "d1" has 2 turns',
        "[1].nugget: expected a list with one object per turn, got dict",
        '[2].nugget: has 2 entries but dialogue "d3" has 1 turns',
    ]


def test_run_nugget_labels_of_the_wrong_sender_or_unknown(tiny_gold):
    run = tiny_run()
    run[0]["nugget"][1] = {"CNUG": 0.5, "HNUG": 0.5}  # a customer label on a helpdesk turn
    run[1]["nugget"][2] = {"HNaN": 1}  # a helpdesk label on a customer turn
    run[2]["nugget"][0] = {"CNUG1": 1, "CNUG0": 1}
    run[1]["nugget"][0] = "CNUG0"
    assert run_errors(run, tiny_gold) == [
        '[0].nugget[1]: label "CNUG" is not allowed on a helpdesk turn (allowed: HNUG, HNUG*, HNaN)',
        "[1].nugget[0]: expected an object of label: value, got str",
        '[1].nugget[2]: label "HNaN" is not allowed on a customer turn (allowed: CNUG0, CNUG, CNUG*, CNaN)',
        '[2].nugget[0]: unknown nugget type "CNUG1" (allowed on a customer turn: CNUG0, CNUG, CNUG*, CNaN)',
    ]


def test_run_quality_unknown_scale_label_and_dimension(tiny_gold):
    run = tiny_run()
    run[0]["quality"]["A"]["3"] = 0.1
    run[0]["quality"]["A"]["+2"] = 0.1
    run[1]["quality"]["X"] = dict(UNIFORM_QUALITY)
    del run[2]["quality"]["E"]
    run[2]["quality"]["S"] = [0.2, 0.2, 0.2, 0.2, 0.2]
    errors = run_errors(run, tiny_gold)
    assert errors == [
        '[0].quality.A: unknown label "3" (allowed: 2, 1, 0, -1, -2)',
        '[0].quality.A: unknown label "+2" (allowed: 2, 1, 0, -1, -2)',
        '[1].quality: unknown dimension "X" (allowed: A, S, E)',
        "[2].quality.S: expected an object of label: value, got list",
        '[2].quality: missing dimension "E"',
    ]


@pytest.mark.parametrize(("value", "problem"), [
    ("NaN", "value nan is not a finite number"),
    ("Infinity", "value inf is not a finite number"),
    ("-Infinity", "value -inf is not a finite number"),
    ("1e400", "value inf is not a finite number"),
    ("1" + "0" * 400, "value is too large to be a number"),
    ("-0.25", "value -0.25 is negative"),
    ("-3", "value -3 is negative"),
    ('"0.5"', 'value "0.5" is a str, not a number'),
    ("true", "value True is a boolean, not a number"),
    ("false", "value False is a boolean, not a number"),
    ("null", "value None is null, not a number"),
    ("[0.5]", "value [0.5] is a list, not a number"),
    ('{"p": 0.5}', "value {'p': 0.5} is a dict, not a number"),
])
def test_run_bad_values(tiny_gold, value, problem):
    text = json.dumps(tiny_run()).replace('"HNUG*": 0.3', f'"HNUG*": {value}', 1)
    assert run_errors(text.encode(), tiny_gold) == [f'[0].nugget[1]["HNUG*"]: {problem}']


def test_value_nested_as_deeply_as_the_fast_parser_allows_gives_a_clean_error(tiny_gold):
    # orjson accepts about 1,000 levels, which is more than repr() can show in a message.
    nested = "[" * 1000 + "]" * 1000
    text = json.dumps(tiny_run()).replace('"-2": 0.2', f'"-2": {nested}', 1)
    assert run_errors(text.encode(), tiny_gold) == ['[0].quality.A["-2"]: value <a list nested too deeply to show> '
                                                    "is a list, not a number"]


def test_run_all_zero_distributions(tiny_gold):
    run = tiny_run()
    run[0]["quality"]["S"] = {"2": 0, "1": 0.0}
    run[2]["nugget"][0] = {}
    assert run_errors(run, tiny_gold) == [
        "[0].quality.S: all values are 0: a distribution needs a positive total",
        "[2].nugget[0]: all values are 0: a distribution needs a positive total",
    ]


def test_run_reports_every_problem_of_the_file_at_once(tiny_gold):
    text = json.dumps(tiny_run()[:2] + [{"id": "d2"}, {"id": "d7", "quality": {}}])
    text = text.replace('"2": 0.2', '"2": NaN', 1)  # [0].quality.A
    text = text.replace('"HNUG": 0.5', '"HNUG": -1', 1)  # [0].nugget[1]
    text = text.replace('"CNUG*": 0.2', '"CNUG*": "x"', 2)  # [0].nugget[0] and [1].nugget[0]
    data = parse_json(text.encode())
    data[1]["quality"]["E"] = {"0": 0}
    data[1]["nugget"][1] = {"CNaN": 1}
    errors = run_errors(data, tiny_gold)
    assert errors == [
        '[2].id: duplicate dialogue id "d2" (first at [1])',  # found first, by the pass over the ids
        '[0].quality.A["2"]: value nan is not a finite number',
        '[0].nugget[0]["CNUG*"]: value "x" is a str, not a number',
        '[0].nugget[1]["HNUG"]: value -1 is negative',
        "[1].quality.E: all values are 0: a distribution needs a positive total",
        '[1].nugget[0]["CNUG*"]: value "x" is a str, not a number',
        '[1].nugget[1]: label "CNaN" is not allowed on a helpdesk turn (allowed: HNUG, HNUG*, HNaN)',
        '[3].id: dialogue "d7" is not in the gold data of this task',
        '$: the run misses 1 of the 3 gold dialogue(s): "d3" (official scoring needs every dialogue)',
    ]


def test_run_subtasks_must_be_consistent(tiny_gold):
    run = tiny_run()
    del run[1]["quality"]
    del run[2]["nugget"]
    assert run_errors(run, tiny_gold) == ["[1]: missing 'quality' (other dialogues of this run have it)",
                                          "[2]: missing 'nugget' (other dialogues of this run have it)"]
    assert run_errors([{"id": d} for d in ("d1", "d2", "d3")], tiny_gold) == [
        "$: no dialogue has 'quality' or 'nugget': nothing to score"]
    nugget_gold = load_gold(nugget_only(TINY_GOLD), STC3)
    assert run_errors(tiny_run(), nugget_gold) == [
        "$: the run has 'quality' estimates but the gold has no quality annotations"]


def test_run_with_one_subtask_only(tiny_gold):
    run = [{"id": entry["id"], "nugget": entry["nugget"]} for entry in tiny_run()]
    loaded = load_run(run, tiny_gold)
    assert loaded.quality is None and loaded.has_nugget and not loaded.has_quality
    result = evaluate(loaded, tiny_gold)
    assert result.quality is None and result.quality_means is None and "quality" not in result.summary()


def test_too_many_problems_are_capped():
    gold_data = generate_gold(400, seed=61, min_turns=2, max_turns=2)
    gold = load_gold(gold_data, STC3)
    run = generate_run(gold_data, "uniform")
    for entry in run:
        for dim in ("A", "S", "E"):
            entry["quality"][dim]["0"] = -1  # 1,200 problems
    errors = run_errors(run, gold)
    assert len(errors) == MAX_ERRORS + 1
    assert errors[-1] == f"... and {1200 - MAX_ERRORS} more problem(s) not listed"


@pytest.mark.parametrize(("values", "sum_shown"), [
    ({"2": 0.2, "1": 0.2, "0": 0.2, "-1": 0.2, "-2": 0.2}, None),
    ({"2": 0.2018, "1": 0.2018, "0": 0.2018, "-1": 0.2018, "-2": 0.2018}, None),  # 1.009: within SUM_TOLERANCE
    ({"2": 4, "1": 4, "0": 4, "-1": 4, "-2": 3}, None),  # whole counts
    ({"1": 2.0, "0": 1.0}, None),  # whole counts written as floats
    ({"2": 0.1, "1": 0.1, "0": 0.1, "-1": 0.1, "-2": 0.1}, "0.5"),
    ({"2": 0.204, "1": 0.204, "0": 0.204, "-1": 0.204, "-2": 0.204}, "1.02"),
    ({"1": 2.5, "0": 1.0}, "3.5"),  # neither counts nor probabilities
])
def test_sums_neither_one_nor_whole_counts_are_warnings(tiny_gold, values, sum_shown):
    run = tiny_run()
    run[1]["quality"]["S"] = values
    loaded = load_run(run, tiny_gold)
    if sum_shown is None:
        assert loaded.warnings == []
    else:
        assert loaded.warnings == ["1 distribution(s) sum to neither 1 (probabilities) nor whole counts; they were "
                                   "normalised by their sums, which may hide a mistake: "
                                   f"[1].quality.S (sum {sum_shown})"]


def test_odd_sum_warnings_name_up_to_five_places_and_count_all(generated):
    gold_data, gold = generated
    loaded = load_run(odd_sums(generate_run(gold_data, "noisy", seed=6)), gold)
    assert len(loaded.warnings) == 1
    assert loaded.warnings[0].startswith("14 distribution(s) sum to neither 1")
    assert loaded.warnings[0].count("(sum ") == 5 and loaded.warnings[0].endswith(" ...")
    assert "[0].quality.A (sum 0.5)" in loaded.warnings[0]


# Gold validation ---------------------------------------------------------------------------


def test_gold_structure_errors():
    assert gold_errors({"id": "d1"}) == ["$: expected a JSON list of dialogues, got an object"]
    assert gold_errors([]) == ["$: the list of dialogues is empty"]
    gold = copy.deepcopy(TINY_GOLD)
    gold.append(copy.deepcopy(gold[0]))
    gold.append("d4")
    assert gold_errors(gold) == ['[3].id: duplicate dialogue id "d1" (first at [0])',
                                 "[4]: expected an object, got str"]


def test_gold_errors_all_reported_with_their_paths():
    gold = copy.deepcopy(TINY_GOLD)
    gold[0]["annotations"][1]["nugget"] = ["CNUG0"]  # one label for two turns
    gold[0]["annotations"][2]["quality"]["A"] = 3  # not on the scale
    gold[1]["turns"][1]["sender"] = "agent"
    gold[1]["annotations"][0]["quality"]["S"] = True
    gold[2]["annotations"][1]["nugget"] = ["HNUG"]  # a helpdesk type on a customer turn
    gold[2]["annotations"][2]["nugget"] = ["CNUG9"]
    del gold[2]["annotations"][0]["quality"]["E"]
    gold[2]["annotations"][0]["quality"]["Z"] = 1
    gold.append({"id": "d4", "turns": gold[0]["turns"]})
    gold.append({"id": "d5", "turns": gold[0]["turns"], "annotations": []})
    gold.append({"id": "d6", "turns": [], "annotations": gold[2]["annotations"][1:]})
    gold.append({"id": "d7", "turns": gold[0]["turns"], "annotations": [[], {"quality": {"A": 0, "S": 0, "E": 0}}]})
    assert gold_errors(gold) == [
        "[0].annotations[1].nugget: has 1 labels but the dialogue has 2 turns",
        "[0].annotations[2].quality.A: unknown scale label 3 (allowed: 2, 1, 0, -1, -2)",
        "[1].turns[1].sender: expected 'customer' or 'helpdesk', got \"agent\"",
        "[1].annotations[0].quality.S: unknown scale label True (allowed: 2, 1, 0, -1, -2)",
        '[2].annotations[0].quality: unknown dimension "Z" (allowed: A, S, E)',
        "[2].annotations[0].quality.E: missing",
        '[2].annotations[1].nugget[0]: label "HNUG" is not allowed on a customer turn '
        "(allowed: CNUG0, CNUG, CNUG*, CNaN)",
        '[2].annotations[2].nugget[0]: unknown nugget type "CNUG9" (allowed on a customer turn: '
        "CNUG0, CNUG, CNUG*, CNaN)",
        "[3].annotations: missing or not a non-empty list of annotations",
        "[4].annotations: missing or not a non-empty list of annotations",
        "[5].turns: missing or not a non-empty list of turns",
        "[5].annotations[0].nugget: has 1 labels but the dialogue has 0 turns",
        "[5].annotations[1].nugget: has 1 labels but the dialogue has 0 turns",
        "[6].annotations[0]: expected an object, got list",
        "[6].annotations[1].nugget: missing or not a list",
    ]


def test_gold_annotations_must_all_label_the_same_subtasks():
    # Whichever annotation lacks a subtask that others label is the one reported, even the
    # very first (it used to decide alone, so a gold whose first annotation had no nugget
    # labels was silently read as quality-only and the other annotators' labels dropped).
    gold = copy.deepcopy(TINY_GOLD)
    del gold[0]["annotations"][0]["nugget"]
    del gold[2]["annotations"][1]["quality"]
    assert gold_errors(gold) == ["[0].annotations[0].nugget: missing or not a list",
                                 "[2].annotations[1].quality: missing or not an object"]
    gold = copy.deepcopy(TINY_GOLD)
    for dialogue in gold:
        for annotation in dialogue["annotations"]:
            annotation.pop("quality")
            annotation.pop("nugget")
    assert gold_errors(gold) == ["$: no annotation has 'quality' or 'nugget': nothing to score against"]


def test_gold_with_extra_keys_and_labels_of_real_stc3_files_is_accepted():
    # What real STC-3 / DialEval files may hold beyond what the scorer reads: extra keys per
    # dialogue, turn and annotation, and quality labels as integers or strings (integer ids:
    # test_integer_ids_are_read_as_their_decimal_strings). None of it changes the counts.
    plain = load_gold(copy.deepcopy(TINY_GOLD), STC3)
    gold = copy.deepcopy(TINY_GOLD)
    for dialogue in gold:
        dialogue["language"], dialogue["split"] = "zh", "train"
        for turn in dialogue["turns"]:
            turn["time"] = "2015-01-01T00:00:00"
        for annotator, annotation in enumerate(dialogue["annotations"]):
            annotation["annotator"] = f"w{annotator}"
            if annotator % 2:
                annotation["quality"] = {dim: str(label) for dim, label in annotation["quality"].items()}
    assert fast_path._load_gold_fast(copy.deepcopy(gold), STC3) is not None
    assert_same_gold(load_gold(gold, STC3), plain)
    assert_same_gold(careful_path._load_gold_checked(copy.deepcopy(gold), STC3), plain)


def test_organisers_uniform_run_that_does_not_sum_to_one_is_scored_with_a_warning(tiny_gold):
    # The DialEval-2 organisers' own uniform baseline wrote 0.2 for each of the four customer
    # types (sum 0.8) and 0.25 for each of the three helpdesk types (sum 0.75). Their script
    # normalised it; so do we, with a warning rather than an error.
    run = tiny_run()
    for entry in run:
        entry["nugget"] = [{label: 0.2 for label in STC3.customer_nugget_types} if "CNUG" in estimate
                           else {label: 0.25 for label in STC3.helpdesk_nugget_types} for estimate in entry["nugget"]]
    loaded = load_run(run, tiny_gold)
    assert len(loaded.warnings) == 1
    assert loaded.warnings[0].startswith("6 distribution(s) sum to neither 1 (probabilities) nor whole counts")
    assert "[0].nugget[0] (sum 0.8)" in loaded.warnings[0] and "[0].nugget[1] (sum 0.75)" in loaded.warnings[0]
    expected = reference.evaluate_reference(run, TINY_GOLD, STC3)
    assert evaluate(loaded, tiny_gold).nugget_means == pytest.approx(expected["nugget"], abs=1e-12)


def test_gold_values_of_the_wrong_type_are_errors_not_crashes():
    gold = copy.deepcopy(TINY_GOLD)
    gold[0]["annotations"][0]["quality"]["A"] = [1]
    gold[0]["annotations"][1]["quality"]["S"] = {"1": 1}
    gold[1]["turns"][0]["sender"] = ["customer"]
    gold[2]["turns"][0] = "customer"
    gold[2]["annotations"][0]["nugget"] = [["CNaN"]]
    assert gold_errors(gold) == [
        "[0].annotations[0].quality.A: unknown scale label [1] (allowed: 2, 1, 0, -1, -2)",
        "[0].annotations[1].quality.S: unknown scale label {'1': 1} (allowed: 2, 1, 0, -1, -2)",
        "[1].turns[0].sender: expected 'customer' or 'helpdesk', got ['customer']",
        "[2].turns[0].sender: expected 'customer' or 'helpdesk', got None",
    ]


def test_gold_annotator_count_varies_warning():
    gold = copy.deepcopy(TINY_GOLD)
    gold[1]["annotations"].append(copy.deepcopy(gold[1]["annotations"][0]))
    gold[2]["annotations"] = gold[2]["annotations"][:1]
    loaded = load_gold(gold, STC3)
    assert loaded.warnings == ["annotator counts differ between dialogues (3 annotators in 1 dialogue(s), "
                               "4 annotators in 1 dialogue(s), 1 annotators in 1 dialogue(s)); each dialogue's "
                               "labels are normalised by its own count"]
    assert loaded.annotators.tolist() == [3, 4, 1]
    # d2's A labels are now 0, -1, 0, 0: counts over (2, 1, 0, -1, -2).
    assert loaded.quality_counts["A"][1].tolist() == [0, 0, 3, 1, 0]
    assert load_gold(copy.deepcopy(TINY_GOLD), STC3).warnings == []


def test_tiny_gold_counts_by_hand(tiny_gold):
    assert tiny_gold.dialogue_ids == ["d1", "d2", "d3"]
    assert tiny_gold.turn_counts.tolist() == [2, 3, 1]
    assert tiny_gold.quality_counts["A"].tolist() == [[1, 2, 0, 0, 0], [0, 0, 2, 1, 0], [0, 0, 0, 1, 2]]
    # Customer turns in file order: d1 t0, d2 t0, d2 t2, d3 t0; columns CNUG0, CNUG, CNUG*, CNaN.
    assert tiny_gold.customer_counts.tolist() == [[2, 1, 0, 0], [2, 1, 0, 0], [0, 0, 2, 1], [1, 0, 0, 2]]
    assert tiny_gold.customer_dialogue.tolist() == [0, 1, 1, 2]
    # Helpdesk turns: d1 t1, d2 t1; columns HNUG, HNUG*, HNaN.
    assert tiny_gold.helpdesk_counts.tolist() == [[2, 0, 1], [1, 2, 0]]
    assert tiny_gold.helpdesk_dialogue.tolist() == [0, 1]


def test_gold_survives_a_round_trip_through_bytes(generated):
    _, gold = generated
    assert_same_gold(Gold.from_bytes(gold.to_bytes()), gold)
