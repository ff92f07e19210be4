"""The DQ/ND validation rules, each written once, and the machinery that evaluates them.

``RULES`` is the table both validation paths read: the fast path asks ``_passes``, the careful
path ``_report``, which words every refused element at its JSON path (``_OrderedProblems``
keeps them in file order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np

from scoring.kinds.stc3.arrays import CUSTOMER, HELPDESK
from scoring.kinds.stc3.config import TaskConfig
from scoring.kinds.stc3.facts import _Coverage, _Distributions
from scoring.validation import (
    MAX_ERRORS,
    ValidationFailed,
    quoted,
)

# Validation rules: each written once -------------------------------------------------------
# A gold file or run is read in two steps. *Extraction* walks the JSON structure (a list of
# objects, keys present, lists where lists belong) and gathers the values the scorer reads into
# flat lists: the fast path with comprehensions that raise or give up at the first surprise,
# the careful path object by object, wording every structural problem with its JSON path.
# Every rule about those values (finite, >= 0, a number and not a boolean, labels allowed, no
# all-zero row, turn counts, senders, duplicate or unknown ids, coverage, ...) is a ``Rule``
# below: one vectorised test over a *facts* object built from the extracted lists. The fast
# path asks ``_passes`` (any refusal hands the file to the careful path); the careful path asks
# ``_report``, which words each refused element at its JSON path. A rule added to ``RULES``
# is therefore enforced by both paths, and the arrays of a valid file are built from the same
# facts by both (``_distribution_rows``, ``_gold_from_codes``), so they are identical.


@dataclass(frozen=True)
class Rule:
    """One validation rule over the elements of a *subject* (dialogue ids, distributions, senders...).

    ``refuses(facts)`` returns a boolean mask, one entry per element (per row; per row and
    label when ``per_cell``); ``problems(facts, row, column)`` words one refused element as
    ``(path suffix, message)`` lines. An element refused by a rule is not checked by the later
    rules of its subject (a string is not also "not finite"), and a row rule skips rows with a
    refused cell (an all-zero check means nothing for a row with a bad value), unless
    ``sees_refused``.
    """

    subject: str
    name: str
    refuses: Callable[[Any], np.ndarray]
    problems: Callable[[Any, int, int], list[tuple[str, str]]]
    per_cell: bool = False
    sees_refused: bool = False


def _refusals(subject: str, facts: Any) -> Iterator[tuple[int, Rule, np.ndarray]]:
    """Each rule of ``subject`` in table order, with the mask of the elements it is the first to refuse."""
    rows_refused = np.zeros(facts.n_rows, dtype=bool)
    cells_refused = None
    for number, rule in enumerate(RULES[subject]):
        mask = np.array(rule.refuses(facts), dtype=bool)  # a copy: the facts' own arrays stay as they are
        if rule.per_cell:
            if cells_refused is None:
                cells_refused = np.zeros(mask.shape, dtype=bool)
            if not rule.sees_refused:
                mask &= ~cells_refused
            cells_refused |= mask
            if mask.size:
                rows_refused |= mask.any(axis=1)
        else:
            if not rule.sees_refused:
                mask &= ~rows_refused
            rows_refused |= mask
        yield number, rule, mask


def _passes(subject: str, facts: Any) -> bool:
    """True when no rule of ``subject`` refuses any element (the fast path's whole verdict)."""
    return not any(rule.refuses(facts).any() for rule in RULES[subject])


def _report(subject: str, facts: Any, place: Callable[[int], tuple[tuple[int, ...], str]],
            problems: _OrderedProblems) -> np.ndarray:
    """Word every element the rules of ``subject`` refuse; ``place(row)`` gives the row's sort key and
    JSON path. Returns the mask of refused rows."""
    rows_refused = np.zeros(facts.n_rows, dtype=bool)
    for number, rule, mask in _refusals(subject, facts):
        if rule.per_cell:
            refused = zip(*(axis.tolist() for axis in np.nonzero(mask)), strict=True)
        else:
            refused = ((row, -1) for row in np.flatnonzero(mask).tolist())
        for row, column in refused:
            rows_refused[row] = True
            key, path = place(row)
            for suffix, message in rule.problems(facts, row, column):
                problems.add(key + (number, column), path + suffix, message)
    return rows_refused


class _OrderedProblems:
    """Problems found in any order, reported in the order of the file.

    Each problem carries a sort key (its place in a walk of the file): the bulk rule checks find
    problems subject by subject, but a participant reads them top to bottom. Only the
    ``MAX_ERRORS`` first are kept, the rest counted, so a hostile file cannot flood memory.
    """

    def __init__(self) -> None:
        self._found: list[tuple[tuple[int, ...], int, str]] = []
        self.dropped = 0

    def add(self, key: tuple[int, ...], path: str, problem: str) -> None:
        self._found.append((key, len(self._found) + self.dropped, f"{path}: {problem}" if path else problem))
        if len(self._found) >= 4 * MAX_ERRORS:
            self._trim()

    def _trim(self) -> None:
        self._found.sort(key=itemgetter(0, 1))
        self.dropped += max(0, len(self._found) - MAX_ERRORS)
        del self._found[MAX_ERRORS:]

    def __bool__(self) -> bool:
        return bool(self._found)

    def raise_if_any(self) -> None:
        if self._found:
            self._trim()
            lines = [line for _, _, line in self._found]
            if self.dropped:
                lines.append(f"... and {self.dropped} more problem(s) not listed")
            raise ValidationFailed(lines)


# The rules --------------------------------------------------------------------------------


def _not_a_number(facts: _Distributions, row: int, column: int) -> list[tuple[str, str]]:
    value = facts.value(row, column)
    kind = "a boolean" if isinstance(value, bool) else "null" if value is None else f"a {type(value).__name__}"
    return [(f'["{facts.labels[column]}"]', f"value {quoted(value)} is {kind}, not a number")]


def _value_problem(text: str) -> Callable[[_Distributions, int, int], list[tuple[str, str]]]:
    return lambda facts, row, column: [(f'["{facts.labels[column]}"]',
                                        text.format(value=quoted(facts.value(row, column))))]


def _missing_dialogues(facts: _Coverage, row: int, column: int) -> list[tuple[str, str]]:
    missing, gold = facts.missing, facts.gold
    shown = ", ".join(quoted(gold.dialogue_ids[i]) for i in missing[:10])
    more = f" and {missing.size - 10} more" if missing.size > 10 else ""
    return [("", f"the run misses {missing.size} of the {gold.n_dialogues} gold dialogue(s): {shown}{more} "
                 "(official scoring needs every dialogue)")]


def _one(flag: bool) -> np.ndarray:
    return np.array([flag], dtype=bool)


RULES: dict[str, list[Rule]] = {}


def _add_rules(*rules: Rule) -> None:
    for rule in rules:
        RULES.setdefault(rule.subject, []).append(rule)


_add_rules(
    # Dialogue ids, in gold files and runs.
    Rule("dialogue id", "a non-empty string or an integer", lambda facts: facts.unusable(),
         lambda facts, row, column: [(".id", "missing or not a non-empty string or integer"
                                      if facts.raw[row] is None else
                                      f"must be a non-empty string or an integer, got {quoted(facts.raw[row])}")]),
    Rule("dialogue id", "unique", lambda facts: facts.duplicate(),
         lambda facts, row, column: [(".id", f"duplicate dialogue id {quoted(facts.ids[row])} "
                                             f"(first at [{facts.first_position(facts.ids[row])}])")]),
    # Runs: what they estimate and which dialogues they cover.
    Rule("run subtasks", "something to score",
         lambda facts: _one(facts.any_entries and not (facts.has_quality or facts.has_nugget)),
         lambda facts, row, column: [("", "no dialogue has 'quality' or 'nugget': nothing to score")]),
    Rule("run subtasks", "quality needs a quality gold", lambda facts: _one(facts.has_quality
                                                                            and not facts.gold.has_quality),
         lambda facts, row, column: [("", "the run has 'quality' estimates but the gold has no quality annotations")],
         sees_refused=True),
    Rule("run subtasks", "nugget needs a nugget gold", lambda facts: _one(facts.has_nugget
                                                                          and not facts.gold.has_nugget),
         lambda facts, row, column: [("", "the run has 'nugget' estimates but the gold has no nugget annotations")],
         sees_refused=True),
    Rule("run dialogue", "in the gold", lambda facts: facts.index < 0,
         lambda facts, row, column: [(".id", f"dialogue {quoted(facts.ids[row])} is not in the gold data of "
                                             "this task")]),
    Rule("run coverage", "every gold dialogue",
         lambda facts: _one(bool(facts.missing.size) and facts.any_entries and not facts.allow_missing),
         _missing_dialogues),
    Rule("run coverage", "some gold dialogue", lambda facts: _one(facts.any_entries and not facts.covered.any()),
         lambda facts, row, column: [("", "no dialogue of the run is in the gold data of this task")],
         sees_refused=True),
    Rule("run turn estimates", "one per turn", lambda facts: facts.lengths != facts.turns,
         lambda facts, row, column: [(".nugget", f"has {facts.lengths[row]} entries but dialogue "
                                                 f"{quoted(facts.ids[row])} has {facts.turns[row]} turns")]),
    # Run distributions: every value of every {label: number} object.
    Rule("distribution", "labels allowed",
         lambda facts: ~np.fromiter(map(set(facts.labels).issuperset, facts.objects), dtype=bool,
                                    count=facts.n_rows),
         lambda facts, row, column: [("", facts.label_problem(label)) for label in facts.objects[row]
                                     if label not in facts.labels]),
    Rule("distribution", "a number", lambda facts: facts.not_numbers(), _not_a_number, per_cell=True),
    Rule("distribution", "within a double", lambda facts: facts.too_large,
         _value_problem("value is too large to be a number"), per_cell=True),
    Rule("distribution", "finite", lambda facts: ~np.isfinite(facts.numbers),
         _value_problem("value {value} is not a finite number"), per_cell=True),
    Rule("distribution", "not negative", lambda facts: facts.numbers < 0,
         _value_problem("value {value} is negative"), per_cell=True),
    # The largest value, unlike the sum, cannot overflow: rows of values near 1.8e308 pass.
    Rule("distribution", "a positive total", lambda facts: ~(facts.numbers > 0).any(axis=1),
         lambda facts, row, column: [("", "all values are 0: a distribution needs a positive total")]),
    # Gold files.
    Rule("gold turns", "a non-empty list", lambda facts: facts.counts <= 0,
         lambda facts, row, column: [(".turns", "missing or not a non-empty list of turns")]),
    Rule("gold annotations", "a non-empty list", lambda facts: facts.counts <= 0,
         lambda facts, row, column: [(".annotations", "missing or not a non-empty list of annotations")]),
    Rule("sender", "customer or helpdesk", lambda facts: facts.unknown(),
         lambda facts, row, column: [("", f"expected 'customer' or 'helpdesk', got {quoted(facts.senders[row])}")]),
    Rule("scale label", "on the scale", lambda facts: facts.bins < 0,
         lambda facts, row, column: [("", "missing" if facts.labels[row] is None else
                                      f"unknown scale label {quoted(facts.labels[row])} "
                                      f"(allowed: {', '.join(facts.config.quality_scale)})")]),
    Rule("nugget labels", "one per turn", lambda facts: facts.lengths != facts.turns,
         lambda facts, row, column: [("", f"has {facts.lengths[row]} labels but the dialogue has "
                                          f"{facts.turns[row]} turns")]),
    Rule("nugget label", "allowed on its turn's side", lambda facts: (facts.sides >= 0) & (facts.bins < 0),
         lambda facts, row, column: [("", _nugget_label_problem(
             facts.labels[row], CUSTOMER if facts.sides[row] == 1 else HELPDESK, facts.side_index))]),
)


def _nugget_label_problem(label: object, sender: str, side_index: dict[str, dict[str, int]]) -> str:
    allowed = ", ".join(side_index[sender])
    other = HELPDESK if sender == CUSTOMER else CUSTOMER
    if isinstance(label, str) and label in side_index[other]:
        return f"label {quoted(label)} is not allowed on a {sender} turn (allowed: {allowed})"
    return f"unknown nugget type {quoted(label)} (allowed on a {sender} turn: {allowed})"


def _label_problems(config: TaskConfig) -> dict[str, Callable[[object], str]]:
    """How an unknown label of a quality or nugget distribution is worded."""
    side_index = {CUSTOMER: {label: i for i, label in enumerate(config.customer_nugget_types)},
                  HELPDESK: {label: i for i, label in enumerate(config.helpdesk_nugget_types)}}
    scale = ", ".join(config.quality_scale)
    return {
        "quality": lambda label: f"unknown label {quoted(label)} (allowed: {scale})",
        CUSTOMER: lambda label: _nugget_label_problem(label, CUSTOMER, side_index),
        HELPDESK: lambda label: _nugget_label_problem(label, HELPDESK, side_index),
    }
