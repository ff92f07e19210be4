"""One home for every validation rule: the fast path and the careful path read the same ``RULES``.

Two kinds of evidence:

* adding a rule to ``scoring.kinds.stc3.rules.RULES`` (monkeypatched here) makes *both* paths refuse a file
  that breaks it: the fast path hands the file over, the careful path words the problem at its
  JSON path, and ``load_gold``/``load_run`` raise it;
* a property test (hypothesis) over random valid files and mutations of them (wrong types,
  NaN/Infinity/1e400/10**400, negatives, booleans, unknown labels, missing and extra turns,
  duplicate, unknown and missing ids, all-zero rows, sums overflowing past 1e308, deep nesting,
  deleted keys...) shows the two paths agree: where the fast path accepts a file the careful
  path accepts it too with bit-identical arrays, and the verdict of ``load_gold``/``load_run``
  is the careful path's (the same arrays, or the same list of problems).
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.synthetic import generate_gold, generate_run
from scoring.kinds.stc3 import careful as careful_path
from scoring.kinds.stc3 import fast as fast_path
from scoring.kinds.stc3 import rules as rule_table
from scoring.kinds.stc3.config import STC3
from scoring.kinds.stc3.evaluate import evaluate
from scoring.kinds.stc3.formats import Gold, Rule, Run, load_gold, load_run
from scoring.validation import ValidationFailed


@pytest.fixture(autouse=True)
def _isolated_settings() -> None:
    """The scoring core needs no Django (replaces tests/conftest.py's settings fixture)."""


def same_array(left: np.ndarray | None, right: np.ndarray | None) -> bool:
    """Bit-identical: same dtype, shape and bytes (np.array_equal would let -0.0 pass for 0.0)."""
    if left is None or right is None:
        return left is None and right is None
    return left.dtype == right.dtype and left.shape == right.shape and left.tobytes() == right.tobytes()


def assert_identical_gold(left: Gold, right: Gold) -> None:
    assert left.dialogue_ids == right.dialogue_ids and left.warnings == right.warnings
    for name in ("annotators", "turn_counts", "turn_is_customer", "customer_dialogue", "helpdesk_dialogue",
                 "customer_counts", "helpdesk_counts"):
        assert same_array(getattr(left, name), getattr(right, name)), name
    assert (left.quality_counts is None) == (right.quality_counts is None)
    for dim in left.quality_counts or {}:
        assert same_array(left.quality_counts[dim], right.quality_counts[dim]), dim
    assert list(left.quality_counts or {}) == list(right.quality_counts or {})


def assert_identical_run(left: Run, right: Run) -> None:
    assert same_array(left.dialogue_index, right.dialogue_index)
    assert left.n_missing == right.n_missing and left.warnings == right.warnings
    assert same_array(left.customer, right.customer) and same_array(left.helpdesk, right.helpdesk)
    assert (left.quality is None) == (right.quality is None)
    assert list(left.quality or {}) == list(right.quality or {})
    for dim in left.quality or {}:
        assert same_array(left.quality[dim], right.quality[dim]), dim


def careful_verdict(load, data, *args):
    """The careful path's result: ``(loaded, None)`` or ``(None, its problems)``."""
    try:
        return load(copy.deepcopy(data), *args), None
    except ValidationFailed as failure:
        return None, failure.errors


def assert_paths_agree_on_gold(data: object) -> Gold | None:
    fast = fast_path._load_gold_fast(copy.deepcopy(data), STC3)
    careful, errors = careful_verdict(careful_path._load_gold_checked, data, STC3)
    if fast is not None:
        assert careful is not None, f"the fast path accepted a gold the careful path refuses: {errors}"
        assert_identical_gold(fast, careful)
    loaded, load_errors = careful_verdict(load_gold, data, STC3)
    assert load_errors == errors
    if careful is not None:
        assert_identical_gold(loaded, careful)
    return careful


def assert_paths_agree_on_run(data: object, gold: Gold, allow_missing: bool) -> Run | None:
    fast = fast_path._load_run_fast(copy.deepcopy(data), gold, allow_missing)
    careful, errors = careful_verdict(careful_path._load_run_checked, data, gold, allow_missing)
    if fast is not None:
        assert careful is not None, f"the fast path accepted a run the careful path refuses: {errors}"
        assert_identical_run(fast, careful)
    loaded, load_errors = careful_verdict(load_run, data, gold, allow_missing)
    assert load_errors == errors
    if careful is not None:
        assert_identical_run(loaded, careful)
    return careful


# Adding a rule in one place makes both paths enforce it ------------------------------------


def tiny_gold_data() -> list[dict]:
    return generate_gold(6, seed=5, min_turns=1, max_turns=4, annotators=3)


def extra_rule(monkeypatch: pytest.MonkeyPatch, rule: Rule) -> None:
    monkeypatch.setitem(rule_table.RULES, rule.subject, [*rule_table.RULES[rule.subject], rule])


def test_a_distribution_rule_added_to_the_table_is_enforced_by_both_run_paths(monkeypatch):
    gold_data = tiny_gold_data()
    gold = load_gold(gold_data, STC3)
    run = generate_run(gold_data, "uniform")  # no value above 1/3 but the one set here
    run[3]["nugget"][0] = {STC3.customer_nugget_types[1]: 0.95, STC3.customer_nugget_types[2]: 0.05}
    assert fast_path._load_run_fast(copy.deepcopy(run), gold, False) is not None  # valid without the new rule
    extra_rule(monkeypatch, Rule("distribution", "at most 0.9", lambda facts: facts.numbers > 0.9,
                                 lambda facts, row, column: [(f'["{facts.labels[column]}"]', "above 0.9")],
                                 per_cell=True))
    assert fast_path._load_run_fast(copy.deepcopy(run), gold, False) is None
    expected = [f'[3].nugget[0]["{STC3.customer_nugget_types[1]}"]: above 0.9']
    for load in (careful_path._load_run_checked, load_run):
        with pytest.raises(ValidationFailed) as failure:
            load(copy.deepcopy(run), gold)
        assert failure.value.errors == expected


def test_a_gold_label_rule_added_to_the_table_is_enforced_by_both_gold_paths(monkeypatch):
    gold_data = tiny_gold_data()
    for dialogue in gold_data:
        for annotation in dialogue["annotations"]:
            for dim, label in annotation["quality"].items():
                annotation["quality"][dim] = 0 if label == 2 else label
    gold_data[4]["annotations"][2]["quality"]["S"] = 2
    assert fast_path._load_gold_fast(copy.deepcopy(gold_data), STC3) is not None
    extra_rule(monkeypatch, Rule("scale label", "not the top bin", lambda facts: facts.bins == 0,
                                 lambda facts, row, column: [("", "the top bin is closed")]))
    assert fast_path._load_gold_fast(copy.deepcopy(gold_data), STC3) is None
    for load in (careful_path._load_gold_checked, load_gold):
        with pytest.raises(ValidationFailed) as failure:
            load(copy.deepcopy(gold_data), STC3)
        assert failure.value.errors == ["[4].annotations[2].quality.S: the top bin is closed"]


def test_an_id_rule_added_to_the_table_applies_to_gold_and_runs_on_both_paths(monkeypatch):
    gold_data = tiny_gold_data()
    gold = load_gold(gold_data, STC3)
    run = generate_run(gold_data, "uniform")
    extra_rule(monkeypatch, Rule("dialogue id", "at most 15 characters",
                                 lambda facts: np.array([len(i or "") > 15 for i in facts.ids], dtype=bool),
                                 lambda facts, row, column: [(".id", "longer than 15 characters")]))
    assert fast_path._load_gold_fast(copy.deepcopy(gold_data), STC3) is None
    assert fast_path._load_run_fast(copy.deepcopy(run), gold, False) is None
    expected = [f"[{i}].id: longer than 15 characters" for i in range(6)]
    assert careful_verdict(load_gold, gold_data, STC3)[1] == expected
    # No entry of the run is left to be checked further, nor to be called missing.
    assert careful_verdict(load_run, run, gold)[1] == expected


def test_every_rule_names_a_subject_the_paths_check():
    subjects = {"dialogue id", "run subtasks", "run dialogue", "run coverage", "run turn estimates", "distribution",
                "gold turns", "gold annotations", "sender", "scale label", "nugget labels", "nugget label"}
    assert set(rule_table.RULES) == subjects
    for subject, rules in rule_table.RULES.items():
        assert all(rule.subject == subject for rule in rules)
        assert len({rule.name for rule in rules}) == len(rules), subject


# Property test: random valid files and mutations of them -----------------------------------

DEEP = 0.5
for _ in range(200):
    DEEP = [DEEP]
JUNK = [None, True, False, 0, -1, -0.25, 0.5, 1, 2, 3, 2.0, float("nan"), float("inf"), float("-inf"), 10**400,
        10**308, 1e308, 1.7976931348623157e308, -1e308, "", "0.5", "2", "17", "d1", "CNUG", "CNUG0", "HNUG",
        "customer", "helpdesk", [], {}, [0.5], {"2": 1}, {"CNUG": 1}, {"HNUG": 0.5}, ["CNUG0"], DEEP]


def node_paths(document: object) -> list[tuple]:
    """Every place in a document (key paths), the document itself excluded."""
    found: list[tuple] = []
    stack: list[tuple[tuple, object]] = [((), document)]
    while stack:
        path, node = stack.pop()
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in children:
            if child is DEEP:
                continue
            found.append((*path, key))
            stack.append(((*path, key), child))
    return sorted(found, key=repr)


def parent_of(document: object, path: tuple) -> object:
    for key in path[:-1]:
        document = document[key]
    return document


def mutate(draw: Choices, document: object, labels: list[str]) -> object:
    """One random change to a copy of ``document``."""
    document = copy.deepcopy(document, {id(DEEP): DEEP})  # DEEP stays one object: node_paths skips it
    paths = node_paths(document)
    if not paths:
        return document
    path = paths[draw.integer(0, len(paths) - 1)]
    parent, key = parent_of(document, path), path[-1]
    node = parent[key]
    operation = draw.pick(["junk", "junk", "delete", "duplicate", "extra key", "all zero",
                                      "overflow", "scale", "scale", "id as int", "swap label",
                                      "drop", "ids only"])
    if operation == "ids only" and isinstance(document, list):  # every entry keeps its id and nothing else
        return [{"id": entry.get("id")} if isinstance(entry, dict) else entry for entry in document]
    if operation == "junk":
        parent[key] = junk(draw)
    elif operation == "delete":
        del parent[key]
    elif operation == "duplicate" and isinstance(parent, list):
        parent.insert(key, copy.deepcopy(node))  # a duplicate dialogue, turn, annotation or label
    elif operation == "drop" and isinstance(parent, list):
        parent.pop(key)
    elif operation == "extra key" and isinstance(node, dict):
        node[draw.pick([*labels, "X", "2", "id", "note"])] = junk(draw)
    elif operation == "all zero" and isinstance(node, dict):
        for label in node:
            node[label] = 0
    elif operation == "overflow" and isinstance(node, dict):
        for label in node:
            node[label] = draw.pick([1e308, 10**308, 1.7976931348623157e308])
    elif operation == "scale" and isinstance(node, int | float) and not isinstance(node, bool):
        parent[key] = draw.pick([node * 0.5, node * 3.3, -node, node * 1e300, 0.0, 10**400,
                                            float("nan"), float("inf"), True])
    elif operation == "id as int" and key == "id" and isinstance(node, str) and node.isdigit():
        parent[key] = int(node)
    elif operation == "swap label" and isinstance(node, str):
        parent[key] = draw.pick(labels)
    else:
        parent[key] = junk(draw)
    return document


def junk(draw: Choices) -> object:
    value = draw.pick(JUNK)
    return value if value is DEEP else copy.deepcopy(value)


LABELS = [*STC3.customer_nugget_types, *STC3.helpdesk_nugget_types, *STC3.quality_scale, "customer", "helpdesk"]
HYPOTHESIS = settings(max_examples=250, deadline=None, derandomize=True, database=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class Choices:
    """The random choices of a generated or mutated file: drawn by hypothesis, or by a seeded
    ``random.Random`` (for the coverage check, which must not depend on what hypothesis explores)."""

    def __init__(self, data: st.DataObject | None = None, seed: int | None = None) -> None:
        self.data, self.rng = data, random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self.data.draw(st.integers(low, high)) if self.data else self.rng.randint(low, high)

    def pick(self, options: Sequence) -> object:
        return self.data.draw(st.sampled_from(options)) if self.data else self.rng.choice(list(options))


def gold_document(draw: Choices) -> list[dict]:
    """A valid gold file of 1-4 dialogues, its senders in any order (not only alternating)."""
    gold = generate_gold(draw.integer(1, 4), seed=draw.integer(0, 10**6), min_turns=1,
                         max_turns=draw.integer(1, 4), annotators=draw.integer(1, 3))
    for dialogue in gold:
        for turn_no, turn in enumerate(dialogue["turns"]):
            if draw.pick((False, True)):
                continue
            turn["sender"] = "helpdesk" if turn["sender"] == "customer" else "customer"
            types = STC3.customer_nugget_types if turn["sender"] == "customer" else STC3.helpdesk_nugget_types
            for annotation in dialogue["annotations"]:
                annotation["nugget"][turn_no] = draw.pick(types)
    return gold


def run_document(draw: Choices, gold_data: list[dict]) -> list[dict]:
    """A valid run of the gold: probabilities or counts, one subtask or both."""
    subtasks = draw.pick([("quality", "nugget"), ("quality",), ("nugget",)])
    kind = draw.pick(["noisy", "uniform", "popularity"])
    run = generate_run(gold_data, kind, noise=0.5, seed=draw.integer(0, 10**6), subtasks=subtasks)
    if draw.pick((False, True)):  # counts instead of probabilities
        run = [{**entry, **{key: _as_counts(value) for key, value in entry.items() if key != "id"}} for entry in run]
    return run


LABELS = [*STC3.customer_nugget_types, *STC3.helpdesk_nugget_types, *STC3.quality_scale, "customer", "helpdesk"]
HYPOTHESIS = settings(max_examples=250, deadline=None, derandomize=True, database=None,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@HYPOTHESIS
@given(st.data())
def test_both_gold_paths_agree_on_random_valid_and_mutated_files(data):
    draw = Choices(data)
    gold = gold_document(draw)
    assert fast_path._load_gold_fast(copy.deepcopy(gold), STC3) is not None, "a valid gold takes the fast path"
    assert_paths_agree_on_gold(gold)
    for _ in range(draw.integer(1, 3)):
        gold = mutate(draw, gold, LABELS)
    assert_paths_agree_on_gold(gold)


@HYPOTHESIS
@given(st.data())
def test_both_run_paths_agree_on_random_valid_and_mutated_files(data):
    draw = Choices(data)
    gold_data = gold_document(draw)
    gold = load_gold(gold_data, STC3)
    run = run_document(draw, gold_data)
    allow_missing = draw.pick((False, True))
    assert fast_path._load_run_fast(copy.deepcopy(run), gold, allow_missing) is not None, \
        "a valid run takes the fast path"
    assert_paths_agree_on_run(run, gold, allow_missing)
    for _ in range(draw.integer(1, 3)):
        run = mutate(draw, run, LABELS)
    loaded = assert_paths_agree_on_run(run, gold, allow_missing)
    if loaded is not None:  # whatever is accepted scores to finite numbers
        result = evaluate(loaded, gold)
        for means in [*(result.quality_means or {}).values(), result.nugget_means or {}]:
            assert all(math.isfinite(value) for value in means.values())


def _as_counts(value: object) -> object:
    if isinstance(value, dict):
        if all(isinstance(number, float) for number in value.values()):
            counts = {label: round(number * 19) for label, number in value.items()}
            return counts if any(counts.values()) else {label: 1 for label in value}
        return {label: _as_counts(inner) for label, inner in value.items()}
    if isinstance(value, list):
        return [_as_counts(inner) for inner in value]
    return value


def test_mutations_cover_every_rule(monkeypatch):
    """The mutations reach every rule: each is the one refusing some mutated file (else the
    agreement shown above would say nothing about it). Seeded, so it does not depend on what
    hypothesis happens to explore."""
    seen: set[tuple[str, str]] = set()
    original = careful_path._report

    def recording(subject, facts, place, problems):
        for _, rule, mask in rule_table._refusals(subject, facts):
            if mask.any():
                seen.add((subject, rule.name))
        return original(subject, facts, place, problems)

    monkeypatch.setattr(careful_path, "_report", recording)
    for seed in range(600):
        draw = Choices(seed=seed)
        gold_data = gold_document(draw)
        gold = load_gold(gold_data, STC3)
        mutated = gold_data
        for _ in range(draw.integer(1, 3)):
            mutated = mutate(draw, mutated, LABELS)
        careful_verdict(careful_path._load_gold_checked, mutated, STC3)
        run = run_document(draw, gold_data)
        for _ in range(draw.integer(1, 3)):
            run = mutate(draw, run, LABELS)
        careful_verdict(careful_path._load_run_checked, run, gold, draw.pick((False, True)))
    every = {(subject, rule.name) for subject, rules in rule_table.RULES.items() for rule in rules}
    # Reached only from outside a mutation of one valid file: a run of a gold without quality or nugget
    # annotations (tests/kinds/stc3/test_formats.py::test_run_subtasks_must_be_consistent covers them).
    unreachable = {("run subtasks", "quality needs a quality gold"), ("run subtasks", "nugget needs a nugget gold")}
    assert every - unreachable - seen == set()
