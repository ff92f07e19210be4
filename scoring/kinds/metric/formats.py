"""Gold and run files of the metrics track, read and validated into arrays (docs/metrics.md).

Gold (organiser, hidden): a JSON list of contexts, each with at least two responses::

    [{"id": "ctx-4", "responses": [
        {"id": "ctx-4/a", "human": 4.2, "system": "S1", "property": 0.31, "grades": [2, 0, 1]},
        {"id": "ctx-4/b", "human": 2.0, "system": "S2", "property": 0.12, "grades": [1, 1, 0]}]}]

``human`` (required): a finite number, higher is better. Optional, but then on every response
of the gold or on none: ``system`` (a non-empty string, at most once per context),
``property`` (the organiser's gold-standard property metric M*, a finite number),
``grades`` (per-turn relevance grades of a multi-turn session, a non-empty list of finite
numbers >= 0) and ``text`` (the response itself, a non-empty string). Response ids are unique
over the whole gold (a run names responses only).

Texts, optional, for participants and the reference metrics: a context may carry ``context``
(the dialogue so far, ``[{"sender": str, "text": str}, ...]``) and ``references`` (reference
responses ``[{"text": str, "weight": number in [-1, 1], 1 when left out}, ...]``, at least one
with a positive weight: RESPONSE-SPEC.md's rules). References are on every context or on none,
and need every response's ``text`` (the reference metrics score the texts). Other keys are
ignored.

Run (a metric): ``[{"id": "ctx-4/a", "score": 0.73}, ...]``, one finite score per gold
response, higher meaning better (negate a distance before submitting); other keys are ignored.

Every problem is reported with its JSON path, up to ``scoring.validation.MAX_ERRORS`` lines, and
``ValidationFailed`` is raised with all of them; nothing is compiled from a file with an
error. Ids follow ``scoring.validation.canonical_id`` (an integer id is its decimal string).
"""

from __future__ import annotations

import io
import json
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from scoring.kinds.metric.dimensions import DimensionData, DimensionReader, read_dimension_scores, uses_dimensions
from scoring.validation import (
    HugeInteger,
    Problems,
    UnsplitList,
    ValidationFailed,
    canonical_id,
    check_text,
    gc_paused,
    list_entries,
    list_entry_bounds,
    list_length,
    parse_json,
    quoted,
)

__all__ = ["MAX_CONTEXT_PAIRS", "MetricGold", "ValidationFailed", "load_metric_gold", "load_metric_run",
           "load_metric_run_file"]

# A response's text, as a response run's (scoring.kinds.response.formats.MAX_RESPONSE_CHARS, checked in the tests).
MAX_RESPONSE_CHARS = 10_000

# Within-context pairs are materialised as index arrays (24 bytes each, plus about as much again in the
# chunked figures computed from them); a gold needing more is refused rather than exhausting memory.
# 20,000 responses in 200 contexts of 100 make 990,000 pairs.
MAX_CONTEXT_PAIRS = 5_000_000


def _finite_number(value: object) -> bool:
    # bool is an int subclass; True must not pass for 1. An int beyond the largest double (10**400)
    # made math.isfinite raise OverflowError: an HTTP 500.
    if type(value) is float:
        return math.isfinite(value)
    return type(value) is int and -_LARGEST_DOUBLE <= value <= _LARGEST_DOUBLE


_LARGEST_DOUBLE = int(sys.float_info.max)


def _number_problem(value: object) -> str:
    if value is None:
        return "missing"
    if isinstance(value, bool):
        return f"must be a number, got the boolean {quoted(value)}"
    if type(value) is int or type(value) is HugeInteger:
        return f"is too large to be a number, got {quoted(value)}"
    if type(value) is float:
        return f"must be a finite number, got {quoted(value)}"
    return f"must be a number, got {quoted(value)}"


@dataclass
class MetricGold:
    """A compiled gold: one row per response, in file order, grouped by context.

    * ``context[r]``: index of response r's context (non-decreasing: contexts are contiguous);
    * ``human[r]``: the human judgement;
    * ``system[r]``: index into ``system_names``, or -1 everywhere when the gold names no systems;
    * ``property_metric``: the gold-standard property metric per response, or None;
    * ``grade_counts[r]`` turns for response r, grades flat in ``grades`` (both None without grades);
    * ``texts[r]``: response r's text, or None when the gold has no texts;
    * ``references[c]``: context c's ``(text, weight)`` references, or None when it has none.
    """

    context_ids: list[str]
    response_ids: list[str]
    context: np.ndarray
    human: np.ndarray
    system: np.ndarray
    system_names: list[str]
    property_metric: np.ndarray | None = None
    grades: np.ndarray | None = None
    grade_counts: np.ndarray | None = None
    warnings: list[str] = field(default_factory=list)
    texts: list[str] | None = None
    references: list[list[tuple[str, float]]] | None = None
    # Dimensions, levels, languages and annotators (scoring.kinds.metric.dimensions), when the gold uses them.
    dims: DimensionData | None = None

    def __post_init__(self) -> None:
        self.index = {response_id: position for position, response_id in enumerate(self.response_ids)}

    @property
    def item_ids(self) -> list[str]:
        """The items of the task-kind interface are the contexts."""
        return self.context_ids

    @property
    def n_responses(self) -> int:
        return len(self.response_ids)

    @property
    def n_contexts(self) -> int:
        return len(self.context_ids)

    @property
    def has_systems(self) -> bool:
        return bool(self.system_names)

    @cached_property
    def context_sizes(self) -> np.ndarray:
        return np.bincount(self.context, minlength=self.n_contexts)

    @cached_property
    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every unordered pair of responses in the same context: ``(first, second, context)``.

        ``first < second``; pairs are ordered by context, then first, then second.
        """
        sizes = self.context_sizes
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        # For each size k, the (a, b) positions of its k(k-1)/2 pairs, built once per size.
        first_parts, second_parts, context_parts = [], [], []
        for size in np.unique(sizes).tolist():
            chosen = np.flatnonzero(sizes == size)
            a, b = np.triu_indices(size, 1)
            base = starts[chosen][:, None]
            first_parts.append((base + a[None, :]).reshape(-1))
            second_parts.append((base + b[None, :]).reshape(-1))
            context_parts.append(np.repeat(chosen, a.size))
        first = np.concatenate(first_parts)
        second = np.concatenate(second_parts)
        context = np.concatenate(context_parts)
        order = np.lexsort((second, first))  # first is grouped by context already
        return first[order], second[order], context[order]

    def to_bytes(self) -> bytes:
        """A compact binary form (NumPy .npz without pickles) for a database column."""
        arrays: dict[str, np.ndarray] = {
            "format": np.array("metric-gold/1"),
            "warnings": np.array(json.dumps(self.warnings)),
            "context_ids": np.array(self.context_ids, dtype=np.str_),
            "response_ids": np.array(self.response_ids, dtype=np.str_),
            "system_names": np.array(self.system_names, dtype=np.str_),
            "context": self.context,
            "human": self.human,
            "system": self.system,
        }
        if self.property_metric is not None:
            arrays["property"] = self.property_metric
        if self.grades is not None:
            arrays["grades"] = self.grades
            arrays["grade_counts"] = self.grade_counts
        # Texts as UTF-8 JSON bytes: a fixed-width NumPy string array would pad every text to the longest.
        if self.texts is not None:
            arrays["texts"] = np.frombuffer(json.dumps(self.texts).encode(), dtype=np.uint8)
        if self.references is not None:
            arrays["references"] = np.frombuffer(json.dumps(self.references).encode(), dtype=np.uint8)
        if self.dims is not None:
            arrays.update(self.dims.to_arrays())
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> MetricGold:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            if str(arrays["format"]) != "metric-gold/1":
                raise ValueError(f"not a compiled metrics-track gold (format {str(arrays['format'])!r})")
            return cls(
                context_ids=[str(x) for x in arrays["context_ids"]],
                response_ids=[str(x) for x in arrays["response_ids"]],
                context=arrays["context"],
                human=arrays["human"],
                system=arrays["system"],
                system_names=[str(x) for x in arrays["system_names"]],
                property_metric=arrays["property"] if "property" in arrays else None,
                grades=arrays["grades"] if "grades" in arrays else None,
                grade_counts=arrays["grade_counts"] if "grade_counts" in arrays else None,
                warnings=json.loads(str(arrays["warnings"])),
                texts=json.loads(arrays["texts"].tobytes()) if "texts" in arrays else None,
                references=[[(text, float(weight)) for text, weight in item]
                            for item in json.loads(arrays["references"].tobytes())]
                if "references" in arrays else None,
                dims=DimensionData.from_arrays(arrays),
            )

    def subset(self, contexts: np.ndarray | list[int]) -> MetricGold:
        """The gold of some contexts only (ascending indices), exactly as if compiled from a file
        holding just those contexts: systems are re-coded to those that answer one of them, and the
        missing-system warning is worded for them."""
        chosen = np.asarray(contexts, dtype=np.int64)
        if chosen.ndim != 1 or not chosen.size or (np.diff(chosen) <= 0).any() \
                or chosen[0] < 0 or chosen[-1] >= self.n_contexts:
            raise ValueError(f"contexts must be ascending distinct indices below {self.n_contexts}, at least one")
        position = np.full(self.n_contexts, -1, dtype=np.int64)
        position[chosen] = np.arange(chosen.size)
        rows = np.flatnonzero(position[self.context] >= 0)
        system = self.system[rows]
        system_names = self.system_names
        if self.has_systems:
            present = np.unique(system)
            recode = np.full(len(self.system_names), -1, dtype=np.int64)
            recode[present] = np.arange(present.size)
            system, system_names = recode[system], [self.system_names[s] for s in present.tolist()]
        grades = grade_counts = None
        if self.grades is not None:
            owner = np.repeat(np.arange(self.n_responses), self.grade_counts)
            grade_counts = self.grade_counts[rows]
            grades = self.grades[position[self.context[owner]] >= 0]
        return MetricGold(
            context_ids=[self.context_ids[c] for c in chosen.tolist()],
            response_ids=[self.response_ids[r] for r in rows.tolist()],
            context=position[self.context[rows]],
            human=self.human[rows],
            system=system,
            system_names=system_names,
            property_metric=None if self.property_metric is None else self.property_metric[rows],
            grades=grades,
            grade_counts=grade_counts,
            warnings=_system_warnings(position[self.context[rows]], system, len(system_names), chosen.size),
            texts=None if self.texts is None else [self.texts[r] for r in rows.tolist()],
            references=None if self.references is None else [self.references[c] for c in chosen.tolist()],
            dims=None if self.dims is None else self.dims.take(rows),
        )


def _system_warnings(context: np.ndarray, system: np.ndarray, n_systems: int, n_contexts: int) -> list[str]:
    if not n_systems:
        return []
    complete = np.bincount(context[system >= 0], minlength=n_contexts) == n_systems
    if complete.all():
        return []
    return [f"{int((~complete).sum())} of {n_contexts} context(s) lack a response from some of the {n_systems} "
            f"systems; discriminative power uses the {int(complete.sum())} complete one(s)"]


def _text_id(value: object) -> str | None:
    identifier = canonical_id(value)
    return None if identifier is None or "\x00" in identifier else identifier


_OPTIONAL = ("system", "property", "grades", "text")


def _references(value: object, path: str, problems: Problems) -> list[tuple[str, float]]:
    """A context's references (RESPONSE-SPEC.md: text, weight in [-1, 1], one weight positive)."""
    if not isinstance(value, list) or not value:
        problems.add(path, "missing: other contexts of the gold carry references, so every one must"
                     if value is None else "must be a non-empty list of {\"text\", \"weight\"} objects")
        return []
    found: list[tuple[str, float]] = []
    for k, reference in enumerate(value):
        where = f"{path}[{k}]"
        if not isinstance(reference, dict):
            problems.add(where, f"must be an object with text and weight, not {quoted(reference)}")
            continue
        text = check_text(reference.get("text"), f"{where}.text", problems)
        weight = reference.get("weight", 1.0)
        if not _finite_number(weight):
            problems.add(f"{where}.weight", _number_problem(weight))
        elif not -1.0 <= weight <= 1.0:
            problems.add(f"{where}.weight", f"must be in [-1, 1], got {quoted(weight)}")
        elif text is not None:
            found.append((text, float(weight)))
    if len(found) == len(value) and not any(weight > 0 for _, weight in found):
        problems.add(path, "no reference has a positive weight")
    return found


def _history(value: object, path: str, problems: Problems) -> None:
    """A context's dialogue so far: a list of {"sender", "text"} (checked: it is published)."""
    if not isinstance(value, list):
        problems.add(path, f"must be a list of sender and text objects, not {quoted(value)}")
        return
    for k, utterance in enumerate(value):
        where = f"{path}[{k}]"
        if not isinstance(utterance, dict):
            problems.add(where, f"must be an object with sender and text, not {quoted(utterance)}")
            continue
        check_text(utterance.get("sender"), f"{where}.sender", problems)
        check_text(utterance.get("text"), f"{where}.text", problems)


def load_metric_gold(data: object) -> MetricGold:
    """Validate a parsed gold file and compile it; raise ``ValidationFailed`` listing every problem."""
    with gc_paused():
        return _load_gold(data)


def _load_gold(data: object) -> MetricGold:
    problems = Problems()
    if not isinstance(data, list):
        kind = "an object" if isinstance(data, dict) else type(data).__name__
        problems.add("$", f"expected a JSON list of contexts, got {kind}")
        problems.raise_if_any()
    if not data:
        problems.add("$", "the list of contexts is empty")
        problems.raise_if_any()

    # Optional fields are all-or-none: find which ones any response carries.
    present = dict.fromkeys(_OPTIONAL, 0)
    n_seen = 0
    for context in data:
        responses = context.get("responses") if isinstance(context, dict) else None
        if isinstance(responses, list):
            for response in responses:
                if isinstance(response, dict):
                    n_seen += 1
                    for key in _OPTIONAL:
                        present[key] += response.get(key) is not None
    wanted = {key for key, count in present.items() if count}
    with_references = any(isinstance(context, dict) and context.get("references") is not None for context in data)
    dims = DimensionReader(data) if uses_dimensions(data) else None

    context_ids: list[str] = []
    response_ids: list[str] = []
    context_of: list[int] = []
    human: list[float] = []
    system_of: list[str] = []
    prop: list[float] = []
    grades: list[float] = []
    grade_counts: list[int] = []
    texts: list[str] = []
    references: list[list[tuple[str, float]]] = []
    first_context: dict[str, int] = {}
    first_response: dict[str, str] = {}
    n_pairs = 0
    for position, context in enumerate(data):
        path = f"[{position}]"
        if not isinstance(context, dict):
            problems.add(path, f"expected an object, got {type(context).__name__}")
            continue
        context_id = _text_id(context.get("id"))
        if context_id is None:
            raw = context.get("id")
            problems.add(f"{path}.id", "missing or not a non-empty string or integer" if raw is None
                         else f"must be a non-empty string (without NUL) or an integer, got {quoted(raw)}")
        elif context_id in first_context:
            problems.add(f"{path}.id",
                         f"duplicate context id {quoted(context_id)} (first at [{first_context[context_id]}])")
            context_id = None
        else:
            first_context[context_id] = position
        start = len(problems.lines) + problems.dropped
        context_references = _references(context.get("references"), f"{path}.references", problems) \
            if with_references else []
        if context.get("context") is not None:
            _history(context["context"], f"{path}.context", problems)
        responses = context.get("responses")
        if not isinstance(responses, list):
            problems.add(f"{path}.responses", "missing or not a list of responses")
            continue
        if len(responses) < 2:
            problems.add(f"{path}.responses", f"has {len(responses)} response(s); a context needs at least 2 "
                                              "(predictive power compares responses to the same context)")
        rows: list[tuple] = []
        systems_here: dict[str, int] = {}
        for number, response in enumerate(responses):
            r_path = f"{path}.responses[{number}]"
            if not isinstance(response, dict):
                problems.add(r_path, f"expected an object, got {type(response).__name__}")
                continue
            response_id = _text_id(response.get("id"))
            if response_id is None:
                raw = response.get("id")
                problems.add(f"{r_path}.id", "missing or not a non-empty string or integer" if raw is None
                             else f"must be a non-empty string (without NUL) or an integer, got {quoted(raw)}")
            elif response_id in first_response:
                problems.add(f"{r_path}.id", f"duplicate response id {quoted(response_id)} "
                                             f"(first at {first_response[response_id]})")
            else:
                first_response[response_id] = f"{r_path}.id"
            value, item = dims.read(response, r_path, problems) if dims is not None else (response.get("human"), None)
            if dims is None and not _finite_number(value):
                problems.add(f"{r_path}.human", _number_problem(value))
            system = response.get("system")
            if "system" in wanted:
                if not isinstance(system, str) or not system or "\x00" in system:
                    problems.add(f"{r_path}.system",
                                 "missing: other responses of the gold name their system, so every one must"
                                 if system is None else f"must be a non-empty string, got {quoted(system)}")
                elif system in systems_here:
                    problems.add(f"{r_path}.system", f"system {quoted(system)} already answered this context "
                                                     f"(responses[{systems_here[system]}])")
                else:
                    systems_here[system] = number
            property_value = response.get("property")
            if "property" in wanted and not _finite_number(property_value):
                problems.add(f"{r_path}.property",
                             "missing: other responses of the gold carry the property metric, so every one must"
                             if property_value is None else _number_problem(property_value))
            turn_grades = response.get("grades")
            if "grades" in wanted:
                if not isinstance(turn_grades, list) or not turn_grades:
                    problems.add(f"{r_path}.grades",
                                 "missing: other responses of the gold carry per-turn grades, so every one must"
                                 if turn_grades is None else "must be a non-empty list of grades")
                else:
                    for turn, grade in enumerate(turn_grades):
                        if not _finite_number(grade) or grade < 0:
                            problems.add(f"{r_path}.grades[{turn}]", _number_problem(grade)
                                         if not _finite_number(grade) else f"must be >= 0, got {quoted(grade)}")
            text = response.get("text")
            if "text" in wanted or with_references:
                if text is None:
                    problems.add(f"{r_path}.text", "missing: the contexts carry references, which score the "
                                                   "responses' texts, so every response needs one" if with_references
                                 else "missing: other responses of the gold carry their text, so every one must")
                else:
                    text = check_text(text, f"{r_path}.text", problems, MAX_RESPONSE_CHARS)
            rows.append((response_id, value, system, property_value, turn_grades, text, item))
        if dims is not None:
            dims.check_context([row[-1] for row in rows], path, problems)
        if context_id is None or len(problems.lines) + problems.dropped > start or len(rows) < 2:
            continue
        n_pairs += len(rows) * (len(rows) - 1) // 2
        if n_pairs > MAX_CONTEXT_PAIRS:
            problems.add(path, f"the contexts so far hold more than {MAX_CONTEXT_PAIRS:,} pairs of responses; "
                               "split large contexts")
            problems.raise_if_any()
        number = len(context_ids)
        context_ids.append(context_id)
        references.append(context_references)
        for response_id, value, system, property_value, turn_grades, text, item in rows:
            if dims is not None:
                dims.keep(item)
            response_ids.append(response_id)
            context_of.append(number)
            human.append(float(value))
            if "system" in wanted:
                system_of.append(system)
            if "property" in wanted:
                prop.append(float(property_value))
            if "grades" in wanted:
                grades.extend(float(g) for g in turn_grades)
                grade_counts.append(len(turn_grades))
            if "text" in wanted or with_references:
                texts.append(text)
    problems.raise_if_any()

    human_array = np.asarray(human, dtype=np.float64)
    context_array = np.asarray(context_of, dtype=np.int64)
    # A gold where no two responses to one context differ gives predictive power 0 / 0 (with
    # dimensions: checked per dimension, level and language).
    dim_data = dims.finish(context_array, problems) if dims is not None else None
    problems.raise_if_any()
    ordered = np.lexsort((human_array, context_array))
    same = (np.diff(context_array[ordered]) == 0) & (np.diff(human_array[ordered]) != 0)
    if dims is None and not same.any():
        problems.add("$", "no two responses to the same context have different human judgements: "
                          "there is no preference to predict")
        problems.raise_if_any()

    system_names = sorted(set(system_of))
    codes = {name: code for code, name in enumerate(system_names)}
    system_array = (np.array([codes[name] for name in system_of], dtype=np.int64) if system_of
                    else np.full(len(response_ids), -1, dtype=np.int64))
    warnings = _system_warnings(context_array, system_array, len(system_names), len(context_ids))
    return MetricGold(
        context_ids=context_ids,
        response_ids=response_ids,
        context=context_array,
        human=human_array,
        system=system_array,
        system_names=system_names,
        property_metric=np.asarray(prop, dtype=np.float64) if "property" in wanted else None,
        grades=np.asarray(grades, dtype=np.float64) if "grades" in wanted else None,
        grade_counts=np.asarray(grade_counts, dtype=np.int64) if "grades" in wanted else None,
        warnings=warnings,
        texts=texts if "text" in wanted or with_references else None,
        references=references if with_references else None,
        dims=dim_data,
    )


def load_metric_run(data: object, gold: MetricGold, *, allow_missing: bool = False,
                    per_dimension: bool = False) -> np.ndarray:
    """Validate a parsed run against the gold; return its scores in the gold's response order.

    A run must score every gold response exactly once (a metric is judged on all of them,
    never on a subset it chose). Raises ``ValidationFailed`` listing every problem. With
    ``allow_missing`` (the offline command's ``--allow-missing``) missing responses are not a
    problem: their scores are NaN, and the caller leaves out the contexts they belong to. With
    ``per_dimension``, entries hold ``scores`` per dimension and the result is responses x dimensions.
    """
    problems = Problems()
    if not isinstance(data, list):
        kind = "an object" if isinstance(data, dict) else type(data).__name__
        problems.add("$", f"expected a JSON list of {{\"id\", \"score\"}} objects, got {kind}")
        problems.raise_if_any()
    if not data:
        problems.add("$", "the run is empty")
        problems.raise_if_any()
    if len(data) > gold.n_responses:
        # Checked before any per-entry work, so a huge upload costs nothing to refuse.
        problems.add("$", f"the run has {len(data):,} entries but the gold has {gold.n_responses:,} responses")
        problems.raise_if_any()
    return _read_run_entries(data, gold, problems, allow_missing, per_dimension)


def load_metric_run_file(content: bytes, gold: MetricGold, *, allow_missing: bool = False,
                         what: str = "file", per_dimension: bool = False) -> np.ndarray:
    """``load_metric_run(parse_json(content, what), gold)``, the same scores and the same problems,
    without ever holding the parsed list: the entries are parsed a piece of the file at a time
    (``scoring.validation.list_entries``) and only a score and a position per gold response are
    kept. The list of dicts took 270 bytes per 35-byte entry, 11x the file (issue 28, item 4).
    Whatever the pieces cannot decide alone (not a list, an empty list or one longer than the
    gold, invalid JSON) goes through the whole-document path, whose messages come first there."""
    bounds = list_entry_bounds(content)
    if bounds is not None and 0 < list_length(content, bounds) <= gold.n_responses:
        try:
            return _read_run_entries(list_entries(content, bounds), gold, Problems(), allow_missing, per_dimension)
        except UnsplitList:
            pass  # not valid JSON: the parser of the whole file says where
    return load_metric_run(parse_json(content, what), gold, allow_missing=allow_missing, per_dimension=per_dimension)


def _read_run_entries(entries: Iterable[object], gold: MetricGold, problems: Problems,
                      allow_missing: bool, per_dimension: bool = False) -> np.ndarray:
    """Every entry's checks, in file order; the scores in the gold's response order."""
    scores = np.full((gold.n_responses, len(gold.dims.names)) if per_dimension and gold.dims else gold.n_responses,
                     np.nan)
    # The position of the entry that named each response, -1 for none yet: an array, not a dict
    # (a dict of 200,000 ints took 3x the file on its own).
    seen_at = np.full(gold.n_responses, -1, dtype=np.int64)
    with gc_paused():
        for position, entry in enumerate(entries):
            path = f"[{position}]"
            if not isinstance(entry, dict):
                problems.add(path, f"expected an object, got {type(entry).__name__}")
                continue
            raw = entry.get("id")
            response_id = canonical_id(raw)
            row = gold.index.get(response_id) if response_id is not None else None
            if response_id is None:
                problems.add(f"{path}.id", "missing or not a non-empty string or integer" if raw is None
                             else f"must be a non-empty string or an integer, got {quoted(raw)}")
            elif row is None:
                problems.add(f"{path}.id", f"unknown response id {quoted(response_id)} (not in the gold)")
            elif seen_at[row] >= 0:
                problems.add(f"{path}.id", f"duplicate response id {quoted(response_id)} (first at [{seen_at[row]}])")
                row = None
            else:
                seen_at[row] = position
            score = entry.get("score")
            if per_dimension and gold.dims is not None:
                read_dimension_scores(entry, path, row, gold.dims, scores, problems)
            elif not _finite_number(score):
                problems.add(f"{path}.score", _number_problem(score))
            elif row is not None:
                scores[row] = float(score)
    named = seen_at >= 0
    if not named.all() and not allow_missing:
        # Responses no entry names: one whose entry has a bad score is reported at that entry.
        missing = np.flatnonzero(~named)
        for row in missing[:20].tolist():
            problems.add("$", f"response {quoted(gold.response_ids[row])} has no score")
        if missing.size > 20:
            problems.add("$", f"... {missing.size - 20} more response(s) have no score "
                              f"({missing.size} of {gold.n_responses} in all)")
    problems.raise_if_any()
    return scores
