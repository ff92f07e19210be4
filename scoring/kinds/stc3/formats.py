"""Reading and validating STC-3 gold files and runs into arrays ready for vectorised scoring.

Validation reports *every* problem with its JSON path (``[12].nugget[3]: ...``), up to
``MAX_ERRORS`` lines, and raises ``ValidationFailed`` carrying them all. Nothing is scored
from a file with any error.

Rules (also in docs/participants/runs.md):
- a run or gold file is a JSON list of objects, UTF-8 without a byte-order mark;
- dialogue ids are non-empty strings or integers (an integer is read as its decimal string, so
  ``17`` and ``"17"`` are the same dialogue), unique; a run's ids must all be in the gold, and a
  run must cover every gold dialogue unless ``allow_missing`` is given; keys other than those
  read (``id``, ``turns``, ``annotations``, ``quality``, ``nugget``, ``sender``) are ignored;
- run values are finite numbers >= 0 (not NaN, Infinity, strings, booleans or null); a label
  left out counts as 0; each distribution is normalised by its sum, so probabilities and
  annotator counts both work, but an all-zero distribution is an error;
- a distribution whose values are not whole numbers (so not counts) and whose sum is further
  than ``SUM_TOLERANCE`` from 1 (so not probabilities) is scored after normalisation but
  reported as a warning, because it usually means a bug in the participant's export;
- a gold annotates the subtasks that any of its annotations labels, and every annotation must
  label all of them;
- gold annotators may differ in number between dialogues (each dialogue is normalised on its
  own), and the gold then carries a warning saying how the counts vary.

Each rule about values is written once, in ``RULES`` (see "Validation rules" below): a fast path
for valid files and a careful path that words every problem both evaluate that table.
"""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np

from scoring.kinds.stc3.config import TaskConfig
from scoring.validation import (
    EXTRA_ENTRIES,
    MAX_ERRORS,
    VALUE_ALLOWANCE,
    HugeInteger,
    ValidationFailed,
    canonical_id,
    check_shape,
    gc_paused,
    quoted,
    refuse_other_encoding,
)

SUM_TOLERANCE = 0.01
CUSTOMER, HELPDESK = "customer", "helpdesk"
_SIDES = frozenset((CUSTOMER, HELPDESK))
_NUMBER_TYPES = (int, float)


def run_value_budget(gold: Gold) -> int:
    """How many containers and separators (``[``, ``{``, ``,``) a run of this gold may hold.

    A run needs about ``8 + dims * (scale + 1)`` per dialogue and ``labels + 2`` per turn;
    ``VALUE_ALLOWANCE`` times that leaves room for keys the scorer ignores.
    """
    config = gold.config
    labels = max(len(config.customer_nugget_types), len(config.helpdesk_nugget_types))
    needed = (gold.n_dialogues * (8 + len(config.quality_dimensions) * (len(config.quality_scale) + 1))
              + int(gold.turn_counts.sum()) * (labels + 2))
    return VALUE_ALLOWANCE * needed + 10_000


def check_run_shape(data: bytes, gold: Gold, what: str = "file") -> None:
    """Refuse, before it is parsed, a run file whose structure no run of ``gold`` can have.

    Raises ``ValidationFailed`` with one line saying which bound was passed and where; returns
    quietly otherwise (the parser and the validators then find every other problem). Time and
    memory are linear in the bytes read and stop at the first bound passed: the temporary
    arrays are those of one 1 MiB chunk.
    """
    refuse_other_encoding(data, what)  # its brackets would be counted, but its problem is its encoding
    check_shape(data, gold.n_dialogues + EXTRA_ENTRIES, run_value_budget(gold), what,
                gold_dialogues=gold.n_dialogues)


@dataclass
class Gold:
    """Gold annotations as label-count arrays, one row per dialogue or per turn.

    Turns are stored per side: ``customer_counts[t]`` is the annotators' label counts for the
    t-th customer turn of the whole file, ``customer_dialogue[t]`` the index of its dialogue.
    """

    config: TaskConfig
    dialogue_ids: list[str]
    annotators: np.ndarray
    turn_counts: np.ndarray
    turn_is_customer: np.ndarray
    quality_counts: dict[str, np.ndarray] | None
    customer_dialogue: np.ndarray
    customer_counts: np.ndarray | None
    helpdesk_dialogue: np.ndarray
    helpdesk_counts: np.ndarray | None
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.index = {dialogue_id: position for position, dialogue_id in enumerate(self.dialogue_ids)}

    @property
    def turn_dialogue(self) -> np.ndarray:
        """The dialogue index of every turn, in file order."""
        return np.repeat(np.arange(self.n_dialogues), self.turn_counts)

    def side_turn_numbers(self, side: str) -> np.ndarray:
        """For each turn of one side, its position among all turns of its dialogue."""
        offsets = np.concatenate(([0], np.cumsum(self.turn_counts)[:-1]))
        is_side = self.turn_is_customer if side == CUSTOMER else ~self.turn_is_customer
        return np.flatnonzero(is_side) - offsets[self.turn_dialogue[is_side]]

    @property
    def n_dialogues(self) -> int:
        return len(self.dialogue_ids)

    @property
    def item_ids(self) -> list[str]:
        """The kind interface's name for the dialogue ids (``scoring.kinds``)."""
        return self.dialogue_ids

    @property
    def has_quality(self) -> bool:
        return self.quality_counts is not None

    @property
    def has_nugget(self) -> bool:
        return self.customer_counts is not None

    def subset(self, dialogue_index: np.ndarray) -> Gold:
        """The gold restricted to some dialogues (indices in ascending order), turns kept in order."""
        dialogue_index = np.asarray(dialogue_index, dtype=np.int64)
        if dialogue_index.size and np.any(np.diff(dialogue_index) <= 0):
            raise ValueError("dialogue_index must be strictly increasing")
        renumber = np.full(self.n_dialogues, -1, dtype=np.int64)
        renumber[dialogue_index] = np.arange(dialogue_index.size)
        keep_customer = renumber[self.customer_dialogue] >= 0
        keep_helpdesk = renumber[self.helpdesk_dialogue] >= 0
        keep_turn = renumber[self.turn_dialogue] >= 0
        return Gold(
            config=self.config,
            dialogue_ids=[self.dialogue_ids[i] for i in dialogue_index],
            annotators=self.annotators[dialogue_index],
            turn_counts=self.turn_counts[dialogue_index],
            turn_is_customer=self.turn_is_customer[keep_turn],
            quality_counts=None if self.quality_counts is None
            else {dim: counts[dialogue_index] for dim, counts in self.quality_counts.items()},
            customer_dialogue=renumber[self.customer_dialogue[keep_customer]],
            customer_counts=None if self.customer_counts is None else self.customer_counts[keep_customer],
            helpdesk_dialogue=renumber[self.helpdesk_dialogue[keep_helpdesk]],
            helpdesk_counts=None if self.helpdesk_counts is None else self.helpdesk_counts[keep_helpdesk],
            warnings=list(self.warnings),
        )

    def to_bytes(self) -> bytes:
        """A compact binary form (NumPy .npz) for storing in a database column."""
        arrays: dict[str, np.ndarray] = {
            "config": np.array(json.dumps(self.config.to_dict())),
            "warnings": np.array(json.dumps(self.warnings)),
            "dialogue_ids": np.array(self.dialogue_ids, dtype=np.str_),
            "annotators": self.annotators,
            "turn_counts": self.turn_counts,
            "turn_is_customer": self.turn_is_customer,
            "customer_dialogue": self.customer_dialogue,
            "helpdesk_dialogue": self.helpdesk_dialogue,
        }
        if self.quality_counts is not None:
            for dim_index, dim in enumerate(self.config.quality_dimensions):
                arrays[f"quality_{dim_index}"] = self.quality_counts[dim]
        if self.customer_counts is not None:
            arrays["customer_counts"] = self.customer_counts
            arrays["helpdesk_counts"] = self.helpdesk_counts
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Gold:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            config = TaskConfig.from_dict(json.loads(str(arrays["config"])))
            quality = None
            if "quality_0" in arrays:
                quality = {dim: arrays[f"quality_{i}"] for i, dim in enumerate(config.quality_dimensions)}
            return cls(
                config=config,
                dialogue_ids=[str(x) for x in arrays["dialogue_ids"]],
                annotators=arrays["annotators"],
                turn_counts=arrays["turn_counts"],
                turn_is_customer=arrays["turn_is_customer"],
                quality_counts=quality,
                customer_dialogue=arrays["customer_dialogue"],
                customer_counts=arrays["customer_counts"] if "customer_counts" in arrays else None,
                helpdesk_dialogue=arrays["helpdesk_dialogue"],
                helpdesk_counts=arrays["helpdesk_counts"] if "helpdesk_counts" in arrays else None,
                warnings=json.loads(str(arrays["warnings"])),
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


# Facts: what the rules see -------------------------------------------------------------------


class _DialogueIds:
    """The ids of a file's entries (objects), as written and as compared (``canonical_id``)."""

    def __init__(self, raw: list, positions: Sequence[int]) -> None:
        self.raw, self.positions = raw, positions
        self.n_rows = len(raw)
        kinds = set(map(type, raw))
        self.ids: list[str | None] = list(raw) if kinds == {str} and all(raw) else list(map(canonical_id, raw))

    def unusable(self) -> np.ndarray:
        if None not in self.ids:
            return np.zeros(self.n_rows, dtype=bool)
        return np.array([dialogue_id is None for dialogue_id in self.ids], dtype=bool)

    def duplicate(self) -> np.ndarray:
        usable = [dialogue_id for dialogue_id in self.ids if dialogue_id is not None]
        if len(set(usable)) == len(usable):
            return np.zeros(self.n_rows, dtype=bool)
        seen: set[str] = set()
        mask = np.zeros(self.n_rows, dtype=bool)
        for row, dialogue_id in enumerate(self.ids):
            if dialogue_id is not None:
                mask[row] = dialogue_id in seen
                seen.add(dialogue_id)
        return mask

    def first_position(self, dialogue_id: str) -> int:
        return self.positions[self.ids.index(dialogue_id)]


class _RunDialogues:
    """Where each of a run's (usable, unique) ids is in the gold: -1 for an id the gold lacks."""

    def __init__(self, ids: list[str], gold: Gold) -> None:
        self.ids = ids
        self.n_rows = len(ids)
        found = list(map(gold.index.get, ids))
        if None in found:
            found = [-1 if position is None else position for position in found]
        self.index = np.array(found, dtype=np.int64)


class _RunSubtasks:
    """Which subtasks a run estimates, against what its gold annotates (one element: the file)."""

    n_rows = 1

    def __init__(self, has_quality: bool, has_nugget: bool, gold: Gold, any_entries: bool) -> None:
        self.has_quality, self.has_nugget, self.gold, self.any_entries = has_quality, has_nugget, gold, any_entries


class _Coverage:
    """Which gold dialogues a run covers (one element: the file)."""

    n_rows = 1

    def __init__(self, covered: np.ndarray, gold: Gold, allow_missing: bool, any_entries: bool) -> None:
        self.covered, self.gold, self.allow_missing, self.any_entries = covered, gold, allow_missing, any_entries
        self.missing = np.flatnonzero(~covered)


class _TurnLists:
    """Lengths of per-turn lists (a run's estimates, a gold annotation's labels) and the turns they need."""

    def __init__(self, lengths: np.ndarray, turns: np.ndarray, ids: Sequence[str] | None = None) -> None:
        self.lengths, self.turns, self.ids = lengths, turns, ids
        self.n_rows = len(lengths)


class _Counts:
    """How many turns or annotations each gold dialogue has (-1: not a list)."""

    def __init__(self, counts: np.ndarray) -> None:
        self.counts = counts
        self.n_rows = len(counts)


class _Distributions:
    """``{label: number}`` objects (each a dict) over one set of labels, as rows of cells.

    ``cells`` holds every row's value of every allowed label in ``labels`` order, a label left
    out counting as 0; labels outside ``labels`` are seen by the unknown-label rule only.
    """

    def __init__(self, objects: list[dict], labels: tuple[str, ...], label_problem: Callable[[object], str]) -> None:
        self.objects, self.labels, self.label_problem = objects, labels, label_problem
        self.n_rows, self.width = len(objects), len(labels)
        self.cells = [values.get(label, 0) for values in objects for label in labels]
        self.all_numbers = not set(map(type, self.cells)) - {float, int}

    def value(self, row: int, column: int) -> object:
        return self.cells[row * self.width + column]

    @cached_property
    def _converted(self) -> tuple[np.ndarray, np.ndarray]:
        shape = (self.n_rows, self.width)
        if self.all_numbers:
            try:
                return np.array(self.cells, dtype=np.float64).reshape(shape), np.zeros(shape, dtype=bool)
            except OverflowError:  # an integer beyond the largest double: found one by one below
                pass
        numbers = np.full(len(self.cells), np.nan)
        too_large = np.zeros(len(self.cells), dtype=bool)
        for position, value in enumerate(self.cells):
            if type(value) in _NUMBER_TYPES:
                try:
                    numbers[position] = float(value)
                except OverflowError:
                    too_large[position] = True
            elif type(value) is HugeInteger:
                too_large[position] = True
        return numbers.reshape(shape), too_large.reshape(shape)

    @property
    def numbers(self) -> np.ndarray:
        """The cells as doubles (NaN where a cell is not a number); the rows of a valid block."""
        return self._converted[0]

    @property
    def too_large(self) -> np.ndarray:
        return self._converted[1]

    def not_numbers(self) -> np.ndarray:
        if self.all_numbers:
            return np.zeros((self.n_rows, self.width), dtype=bool)
        return np.array([type(value) not in _NUMBER_TYPES and type(value) is not HugeInteger for value in self.cells],
                        dtype=bool).reshape(self.n_rows, self.width)


class _Senders:
    """The sender of every gold turn (None where a turn is not an object)."""

    def __init__(self, senders: list) -> None:
        self.senders = senders
        self.n_rows = len(senders)

    def unknown(self) -> np.ndarray:
        try:
            if set(self.senders) <= _SIDES:
                return np.zeros(self.n_rows, dtype=bool)
        except TypeError:  # a list or an object where a sender belongs
            pass
        return np.array([not (isinstance(sender, str) and sender in _SIDES) for sender in self.senders], dtype=bool)


class _ScaleLabels:
    """One quality dimension's labels in every gold annotation, and their bins on the scale."""

    def __init__(self, labels: list, config: TaskConfig) -> None:
        self.labels, self.config = labels, config
        self.n_rows = len(labels)

    @cached_property
    def bins(self) -> np.ndarray:
        """Each label's bin, -1 where it is not on the scale (booleans never are: True == 1)."""
        lookup = _scale_lookup(self.config.quality_scale)
        try:
            if bool not in set(map(type, self.labels)):
                found = list(map(lookup.get, self.labels))
                if None not in found:
                    return np.array(found, dtype=np.int64)
        except TypeError:  # an unhashable label (a list or an object)
            pass
        return np.array([lookup.get(label, -1) if isinstance(label, str | int | float) and not isinstance(label, bool)
                         else -1 for label in self.labels], dtype=np.int64)


class _NuggetLabels:
    """Every nugget label of the gold annotations with the side of the turn it labels
    (1 customer, 0 helpdesk, -1 a turn whose sender is itself wrong)."""

    def __init__(self, labels: list, sides: np.ndarray, config: TaskConfig) -> None:
        self.labels, self.sides, self.config = labels, sides, config
        self.n_rows = len(labels)
        self.side_index = {CUSTOMER: {label: i for i, label in enumerate(config.customer_nugget_types)},
                           HELPDESK: {label: i for i, label in enumerate(config.helpdesk_nugget_types)}}

    @cached_property
    def bins(self) -> np.ndarray:
        """Each label's column among its side's nugget types, -1 where the side does not allow it."""
        customer_types, helpdesk_types = self.config.customer_nugget_types, self.config.helpdesk_nugget_types
        if not set(customer_types) & set(helpdesk_types):
            # Types of the two sides differ, so one lookup tells a label's side too.
            combined = {label: i for i, label in enumerate(customer_types + helpdesk_types)}
            try:
                found = list(map(combined.get, self.labels))
            except TypeError:
                found = [None]
            if None not in found:
                codes = np.array(found, dtype=np.int64)
                on_customer = codes < len(customer_types)
                local = np.where(on_customer, codes, codes - len(customer_types))
                return np.where(on_customer == (self.sides == 1), local, -1)
        lookups = (self.side_index[HELPDESK], self.side_index[CUSTOMER])
        return np.array([lookups[side].get(label, -1) if side >= 0 and isinstance(label, str) else -1
                         for label, side in zip(self.labels, self.sides.tolist(), strict=True)], dtype=np.int64)


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


def _scale_lookup(scale: Iterable[str]) -> dict[object, int]:
    """Map each scale label to its bin; gold files write ``2`` or ``"2"``, so accept both."""
    lookup: dict[object, int] = {}
    for position, label in enumerate(scale):
        lookup[label] = position
        try:
            lookup[int(label)] = position
        except ValueError:
            pass
    return lookup


def _entries(data: object, problems: _OrderedProblems) -> list[tuple[int, str, dict]]:
    """Top-level checks shared by gold and runs: a list of objects with unique ids.

    Returns ``(position in the file, canonical id, entry)`` for every usable entry. Problems
    found here come first (sort key ``(0, ...)``).
    """
    if not isinstance(data, list):
        kind = "an object" if isinstance(data, dict) else type(data).__name__
        problems.add((0,), "$", f"expected a JSON list of dialogues, got {kind}")
        return []
    if not data:
        problems.add((0,), "$", "the list of dialogues is empty")
    objects, positions = [], []
    for position, entry in enumerate(data):
        if not isinstance(entry, dict):
            problems.add((0, position), f"[{position}]", f"expected an object, got {type(entry).__name__}")
            continue
        objects.append(entry)
        positions.append(position)
    ids = _DialogueIds([entry.get("id") for entry in objects], positions)
    refused = _report("dialogue id", ids, lambda row: ((0, positions[row]), f"[{positions[row]}]"), problems)
    return [(positions[row], ids.ids[row], objects[row]) for row in np.flatnonzero(~refused).tolist()]


def load_gold(data: object, config: TaskConfig) -> Gold:
    """Validate a parsed gold file and count the annotators' labels; raise ``ValidationFailed``."""
    with gc_paused():
        fast = _load_gold_fast(data, config)
    return fast if fast is not None else _load_gold_checked(data, config)


def _load_gold_checked(data: object, config: TaskConfig) -> Gold:
    """The careful extraction: every structural problem worded, every value checked by ``RULES``."""
    problems = _OrderedProblems()
    entries = _entries(data, problems)
    dims = config.quality_dimensions

    # Which subtasks does this gold annotate? Those that any annotation labels; every annotation
    # must then label them all (as for runs, where one dialogue's subtask binds all).
    annotation_objects = [annotation for _, _, entry in entries if isinstance(entry.get("annotations"), list)
                          for annotation in entry["annotations"] if isinstance(annotation, dict)]
    if annotation_objects:
        has_quality = any(annotation.get("quality") is not None for annotation in annotation_objects)
        has_nugget = any(annotation.get("nugget") is not None for annotation in annotation_objects)
        if not (has_quality or has_nugget):
            problems.add((1,), "$", "no annotation has 'quality' or 'nugget': nothing to score against")
    else:
        has_quality = has_nugget = True  # nothing to go by: the missing annotations are reported below

    # Sort keys: (2, position, 0) turns, (2, position, 1, turn) senders, (2, position, 2) annotations,
    # (2, position, 3, annotation, 1 quality | 2 nugget, ...) inside an annotation. Places are kept as
    # (position, number) pairs and spelled out only for a problem: a valid gold has 10^5-10^6 labels.
    turn_counts, annotator_counts, positions = [], [], []
    senders, sender_places = [], []
    quality_labels: dict[str, list] = {dim: [] for dim in dims}
    quality_places: list[tuple[int, int]] = []
    quality_dialogue: list[int] = []
    nugget_lists, nugget_places, nugget_turns, nugget_first_turn = [], [], [], []
    turn_offset = 0
    for dialogue_no, (position, _, entry) in enumerate(entries):
        positions.append(position)
        turns = entry.get("turns")
        dialogue_senders = [turn.get("sender") if isinstance(turn, dict) else None
                            for turn in (turns if isinstance(turns, list) else ())]
        turn_counts.append(len(turns) if isinstance(turns, list) else -1)
        senders.extend(dialogue_senders)
        sender_places.extend((position, turn_no) for turn_no in range(len(dialogue_senders)))
        annotations = entry.get("annotations")
        annotator_counts.append(len(annotations) if isinstance(annotations, list) else -1)
        for ann_no, annotation in enumerate(annotations if isinstance(annotations, list) else ()):
            if not isinstance(annotation, dict):
                problems.add((2, position, 3, ann_no, 0), f"[{position}].annotations[{ann_no}]",
                             f"expected an object, got {type(annotation).__name__}")
                continue
            if has_quality:
                quality = annotation.get("quality")
                if not isinstance(quality, dict):
                    problems.add((2, position, 3, ann_no, 1, 0), f"[{position}].annotations[{ann_no}].quality",
                                 "missing or not an object")
                else:
                    for dim in quality.keys() - set(dims):
                        problems.add((2, position, 3, ann_no, 1, 0), f"[{position}].annotations[{ann_no}].quality",
                                     f"unknown dimension {quoted(dim)} (allowed: {', '.join(dims)})")
                    for dim in dims:
                        quality_labels[dim].append(quality.get(dim))
                    quality_places.append((position, ann_no))
                    quality_dialogue.append(dialogue_no)
            if has_nugget:
                nugget = annotation.get("nugget")
                if not isinstance(nugget, list):
                    problems.add((2, position, 3, ann_no, 2, 0), f"[{position}].annotations[{ann_no}].nugget",
                                 "missing or not a list")
                else:
                    nugget_lists.append(nugget)
                    nugget_places.append((position, ann_no))
                    nugget_turns.append(len(dialogue_senders))
                    nugget_first_turn.append(turn_offset)
        turn_offset += len(dialogue_senders)

    def sender_place(row: int) -> tuple[tuple[int, ...], str]:
        position, turn_no = sender_places[row]
        return (2, position, 1, turn_no), f"[{position}].turns[{turn_no}].sender"

    def nugget_place(row: int) -> tuple[tuple[int, ...], str]:
        position, ann_no = nugget_places[row]
        return (2, position, 3, ann_no, 2), f"[{position}].annotations[{ann_no}].nugget"

    _report("gold turns", _Counts(np.array(turn_counts, dtype=np.int64)),
            lambda row: ((2, positions[row], 0), f"[{positions[row]}]"), problems)
    _report("gold annotations", _Counts(np.array(annotator_counts, dtype=np.int64)),
            lambda row: ((2, positions[row], 2), f"[{positions[row]}]"), problems)
    _report("sender", _Senders(senders), sender_place, problems)
    # 1 customer, 0 helpdesk, -1 a sender reported above (a list compares unequal, never raises)
    sides = np.array([1 if sender == CUSTOMER else 0 if sender == HELPDESK else -1 for sender in senders],
                     dtype=np.int64)
    quality_bins: dict[str, np.ndarray] = {}
    for dim_no, dim in enumerate(dims if has_quality else ()):
        labels = _ScaleLabels(quality_labels[dim], config)
        _report("scale label", labels, lambda row, dim_no=dim_no, dim=dim: (
            (2, quality_places[row][0], 3, quality_places[row][1], 1, 1 + dim_no),
            f"[{quality_places[row][0]}].annotations[{quality_places[row][1]}].quality.{dim}"), problems)
        quality_bins[dim] = labels.bins
    label_bins = label_turn = None
    if has_nugget:
        lengths = np.array([len(labels) for labels in nugget_lists], dtype=np.int64)
        counted = _TurnLists(lengths, np.array(nugget_turns, dtype=np.int64))
        refused = _report("nugget labels", counted, nugget_place, problems)
        kept = np.flatnonzero(~refused)
        labels = list(chain.from_iterable(nugget_lists[row] for row in kept.tolist()))
        kept_lengths = lengths[kept]
        list_of_label = np.repeat(kept, kept_lengths)
        turn_of_label = np.arange(int(kept_lengths.sum())) - np.repeat(np.cumsum(kept_lengths) - kept_lengths,
                                                                       kept_lengths)
        label_turn = np.array(nugget_first_turn, dtype=np.int64)[list_of_label] + turn_of_label

        def label_place(row: int) -> tuple[tuple[int, ...], str]:
            key, path = nugget_place(int(list_of_label[row]))
            return key + (1 + int(turn_of_label[row]),), f"{path}[{turn_of_label[row]}]"

        nugget_labels = _NuggetLabels(labels, sides[label_turn], config)
        _report("nugget label", nugget_labels, label_place, problems)
        label_bins = nugget_labels.bins
    problems.raise_if_any()

    annotators = np.array(annotator_counts, dtype=np.int64)
    return _gold_from_codes(
        config, [dialogue_id for _, dialogue_id, _ in entries], annotators, np.array(turn_counts, dtype=np.int64),
        sides == 1, quality_bins if has_quality else None, np.array(quality_dialogue, dtype=np.int64),
        label_bins, label_turn)


def _gold_from_codes(config: TaskConfig, ids: list[str], annotators: np.ndarray, turn_counts: np.ndarray,
                     is_customer: np.ndarray, quality_bins: dict[str, np.ndarray] | None,
                     quality_dialogue: np.ndarray, label_bins: np.ndarray | None,
                     label_turn: np.ndarray | None) -> Gold:
    """Count a valid gold's labels: both paths end here, so their arrays are the same.

    ``quality_bins[dim][k]`` is annotation k's bin (``quality_dialogue[k]`` its dialogue);
    ``label_bins[j]`` a nugget label's column on its side, ``label_turn[j]`` its turn in file order.
    """
    n = len(ids)
    quality_counts = None
    if quality_bins is not None:
        n_scale = len(config.quality_scale)
        quality_counts = {dim: np.bincount(quality_dialogue * n_scale + bins, minlength=n * n_scale)
                          .reshape(n, n_scale).astype(np.float64) for dim, bins in quality_bins.items()}
    customer_counts = helpdesk_counts = None
    if label_bins is not None:
        side_row = np.where(is_customer, np.cumsum(is_customer) - 1, np.cumsum(~is_customer) - 1)
        label_is_customer = is_customer[label_turn]
        counts = []
        for on_side, width, rows in ((label_is_customer, len(config.customer_nugget_types), int(is_customer.sum())),
                                     (~label_is_customer, len(config.helpdesk_nugget_types),
                                      int((~is_customer).sum()))):
            counts.append(np.bincount(side_row[label_turn[on_side]] * width + label_bins[on_side],
                                      minlength=rows * width).reshape(rows, width).astype(np.float64))
        customer_counts, helpdesk_counts = counts
    turn_dialogue = np.repeat(np.arange(n), turn_counts)
    return Gold(
        config=config,
        dialogue_ids=ids,
        annotators=annotators,
        turn_counts=turn_counts,
        turn_is_customer=is_customer,
        quality_counts=quality_counts,
        customer_dialogue=turn_dialogue[is_customer],
        customer_counts=customer_counts,
        helpdesk_dialogue=turn_dialogue[~is_customer],
        helpdesk_counts=helpdesk_counts,
        warnings=_annotator_warnings(annotators),
    )


def _annotator_warnings(annotators: np.ndarray) -> list[str]:
    if not annotators.size or annotators.min() == annotators.max():
        return []
    spread = Counter(annotators.tolist()).most_common()
    return ["annotator counts differ between dialogues ("
            + ", ".join(f"{count} annotators in {dialogues} dialogue(s)" for count, dialogues in spread)
            + "); each dialogue's labels are normalised by its own count"]


@dataclass
class Run:
    """A validated run, aligned with the gold.

    ``dialogue_index`` lists the gold dialogues the run covers, ascending. ``quality[dim]`` has
    one row per covered dialogue; ``customer``/``helpdesk`` one row per turn of the covered
    dialogues, in the gold's order. Rows are the run's raw values (normalised when scored).
    """

    dialogue_index: np.ndarray
    quality: dict[str, np.ndarray] | None
    customer: np.ndarray | None
    helpdesk: np.ndarray | None
    n_missing: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def has_quality(self) -> bool:
        return self.quality is not None

    @property
    def has_nugget(self) -> bool:
        return self.customer is not None


def load_run(data: object, gold: Gold, allow_missing: bool = False) -> Run:
    """Validate a parsed run against the gold; raise ``ValidationFailed`` listing every problem."""
    with gc_paused():
        fast = _load_run_fast(data, gold, allow_missing)
    return fast if fast is not None else _load_run_checked(data, gold, allow_missing)


def _side_row(gold: Gold) -> np.ndarray:
    """For every gold turn, its row among the turns of its side."""
    is_customer = gold.turn_is_customer
    return np.where(is_customer, np.cumsum(is_customer) - 1, np.cumsum(~is_customer) - 1)


def _load_run_checked(data: object, gold: Gold, allow_missing: bool = False) -> Run:
    """The careful extraction: every structural problem worded, every value checked by ``RULES``.

    Sort keys: (0, ...) entries and ids, (1, ...) the file's subtasks, (2, position, 0) the
    dialogue, (2, position, 1, ...) its quality, (2, position, 2, ...) its nugget estimates,
    (3, ...) coverage.
    """
    config = gold.config
    problems = _OrderedProblems()
    entries = _entries(data, problems)
    dims = config.quality_dimensions
    side_types = {CUSTOMER: config.customer_nugget_types, HELPDESK: config.helpdesk_nugget_types}
    label_problems = _label_problems(config)

    has_quality = any(entry.get("quality") is not None for _, _, entry in entries)
    has_nugget = any(entry.get("nugget") is not None for _, _, entry in entries)
    _report("run subtasks", _RunSubtasks(has_quality, has_nugget, gold, bool(entries)),
            lambda row: ((1,), "$"), problems)
    has_quality = has_quality and gold.has_quality
    has_nugget = has_nugget and gold.has_nugget

    dialogues = _RunDialogues([dialogue_id for _, dialogue_id, _ in entries], gold)
    _report("run dialogue", dialogues, lambda row: ((2, entries[row][0], 0), f"[{entries[row][0]}]"), problems)
    n = gold.n_dialogues
    covered = np.zeros(n, dtype=bool)
    position_of = np.full(n, -1, dtype=np.int64)
    in_gold = [(position, dialogue_id, entry, dialogue_no) for (position, dialogue_id, entry), dialogue_no
               in zip(entries, dialogues.index.tolist(), strict=True) if dialogue_no >= 0]
    for position, _, _, dialogue_no in in_gold:
        covered[dialogue_no] = True
        position_of[dialogue_no] = position

    # Each block of distributions: the objects, the row each fills, and its sort key and path.
    blocks: dict[tuple[str, str], tuple[list, list[int], list[tuple[tuple[int, ...], str]]]] = {}
    if has_quality:
        for dim in dims:
            blocks["quality", dim] = ([], [], [])
        for position, _, entry, dialogue_no in in_gold:
            path, key = f"[{position}]", (2, position, 1)
            estimate = entry.get("quality")
            if estimate is None:
                problems.add(key, path, "missing 'quality' (other dialogues of this run have it)")
            elif not isinstance(estimate, dict):
                problems.add(key, f"{path}.quality", f"expected an object of dimensions, got "
                                                     f"{type(estimate).__name__}")
            else:
                for dim in estimate.keys() - set(dims):
                    problems.add(key + (0,), f"{path}.quality",
                                 f"unknown dimension {quoted(dim)} (allowed: {', '.join(dims)})")
                for dim_no, dim in enumerate(dims):
                    place = (key + (1 + dim_no,), f"{path}.quality.{dim}")
                    if dim not in estimate:
                        problems.add(place[0], f"{path}.quality", f"missing dimension {quoted(dim)}")
                    elif not isinstance(estimate[dim], dict):
                        problems.add(place[0], place[1], f"expected an object of label: value, got "
                                                         f"{type(estimate[dim]).__name__}")
                    else:
                        objects, targets, places = blocks["quality", dim]
                        objects.append(estimate[dim])
                        targets.append(dialogue_no)
                        places.append(place)

    if has_nugget:
        blocks["nugget", CUSTOMER], blocks["nugget", HELPDESK] = ([], [], []), ([], [], [])
        lists = []
        for position, dialogue_id, entry, dialogue_no in in_gold:
            path, key = f"[{position}]", (2, position, 2)
            estimate = entry.get("nugget")
            if estimate is None:
                problems.add(key, path, "missing 'nugget' (other dialogues of this run have it)")
            elif not isinstance(estimate, list):
                problems.add(key, f"{path}.nugget", f"expected a list with one object per turn, got "
                                                    f"{type(estimate).__name__}")
            else:
                lists.append((position, dialogue_id, estimate, dialogue_no))
        counted = _TurnLists(np.array([len(estimate) for _, _, estimate, _ in lists], dtype=np.int64),
                             gold.turn_counts[np.array([dialogue_no for *_, dialogue_no in lists], dtype=np.int64)],
                             [dialogue_id for _, dialogue_id, _, _ in lists])
        refused = _report("run turn estimates", counted,
                          lambda row: ((2, lists[row][0], 2, 0), f"[{lists[row][0]}]"), problems)
        turn_start = np.concatenate(([0], np.cumsum(gold.turn_counts)[:-1])).tolist()
        side_row = _side_row(gold).tolist()
        is_customer = gold.turn_is_customer.tolist()
        for row in np.flatnonzero(~refused).tolist():
            position, _, estimate, dialogue_no = lists[row]
            for turn_no, turn_estimate in enumerate(estimate):
                gold_turn = turn_start[dialogue_no] + turn_no
                side = CUSTOMER if is_customer[gold_turn] else HELPDESK
                place = ((2, position, 2, 1 + turn_no), f"[{position}].nugget[{turn_no}]")
                if not isinstance(turn_estimate, dict):
                    problems.add(place[0], place[1], f"expected an object of label: value, got "
                                                     f"{type(turn_estimate).__name__}")
                    continue
                objects, targets, places = blocks["nugget", side]
                objects.append(turn_estimate)
                targets.append(side_row[gold_turn])
                places.append(place)

    rows: dict[tuple[str, str], np.ndarray] = {}
    for (subtask, name), (objects, _, places) in blocks.items():
        labels = config.quality_scale if subtask == "quality" else side_types[name]
        facts = _Distributions(objects, labels, label_problems["quality" if subtask == "quality" else name])
        _report("distribution", facts, places.__getitem__, problems)
        rows[subtask, name] = facts.numbers
    _report("run coverage", _Coverage(covered, gold, allow_missing, bool(entries)), lambda row: ((3,), "$"),
            problems)
    problems.raise_if_any()

    quality = None
    if has_quality:
        quality = {}
        for dim in dims:
            quality[dim] = np.zeros((n, len(config.quality_scale)))
            quality[dim][blocks["quality", dim][1]] = rows["quality", dim]
    side_rows = {CUSTOMER: np.zeros((len(gold.customer_dialogue), len(side_types[CUSTOMER]))),
                 HELPDESK: np.zeros((len(gold.helpdesk_dialogue), len(side_types[HELPDESK])))}
    if has_nugget:
        for side in side_types:
            side_rows[side][blocks["nugget", side][1]] = rows["nugget", side]
    return _finish_run(gold, quality, side_rows, covered, position_of, has_nugget)


def _finish_run(
    gold: Gold, quality: dict[str, np.ndarray] | None, side_rows: dict[str, np.ndarray], covered: np.ndarray,
    position_of: np.ndarray, has_nugget: bool,
) -> Run:
    """The rows of the covered dialogues of a valid run, and its warnings (sums, missing dialogues)."""
    n = gold.n_dialogues
    dims = gold.config.quality_dimensions
    missing = np.flatnonzero(~covered)
    dialogue_index = np.flatnonzero(covered)
    keep = {CUSTOMER: covered[gold.customer_dialogue], HELPDESK: covered[gold.helpdesk_dialogue]}
    # Where each row came from in the file, so sum warnings can name a JSON path.
    blocks: list[tuple[np.ndarray, Callable[[int], str]]] = []
    if quality is not None:
        for dim in dims:
            quality[dim] = quality[dim][dialogue_index]
            blocks.append((quality[dim],
                           lambda row, dim=dim: f"[{position_of[dialogue_index[row]]}].quality.{dim}"))
    if has_nugget:
        for side, dialogue_of_row in ((CUSTOMER, gold.customer_dialogue), (HELPDESK, gold.helpdesk_dialogue)):
            side_rows[side] = side_rows[side][keep[side]]
            turn_numbers = gold.side_turn_numbers(side)[keep[side]]
            rows_dialogue = dialogue_of_row[keep[side]]
            blocks.append((side_rows[side], lambda row, rows_dialogue=rows_dialogue, turn_numbers=turn_numbers:
                           f"[{position_of[rows_dialogue[row]]}].nugget[{turn_numbers[row]}]"))
    warnings = _sum_warnings(blocks)
    if missing.size:
        warnings.insert(0, f"{missing.size} of the {n} gold dialogue(s) are missing from the run; "
                           f"scored on the {dialogue_index.size} it contains")
    return Run(
        dialogue_index=dialogue_index,
        quality=quality,
        customer=side_rows[CUSTOMER] if has_nugget else None,
        helpdesk=side_rows[HELPDESK] if has_nugget else None,
        n_missing=int(missing.size),
        warnings=warnings,
    )


def _sum_warnings(blocks: list[tuple[np.ndarray, Callable[[int], str]]]) -> list[str]:
    """Sums that are neither ~1 nor whole-number counts are warnings (all-zero rows are refused by a rule)."""
    suspicious: list[str] = []
    n_suspicious = 0
    for rows, path_of in blocks:
        if not rows.size:
            continue
        with np.errstate(over="ignore"):  # two values of 1e308: the sum is infinite, the row is fine
            sums = rows.sum(axis=1)
        counts = np.all(rows == np.floor(rows), axis=1)
        odd = np.flatnonzero(~counts & (np.abs(sums - 1.0) > SUM_TOLERANCE) & (sums > 0))
        n_suspicious += odd.size
        suspicious.extend(f"{path_of(row)} (sum {_sum_label(sums[row])})"
                          for row in odd[: max(0, 5 - len(suspicious))])
    if not n_suspicious:
        return []
    return [f"{n_suspicious} distribution(s) sum to neither 1 (probabilities) nor whole counts; they were "
            f"normalised by their sums, which may hide a mistake: " + ", ".join(suspicious)
            + (" ..." if n_suspicious > len(suspicious) else "")]


def _sum_label(total: float) -> str:
    """A row's sum for a message: an overflowed sum is said in words, never as ``inf``."""
    return f"{total:.6g}" if math.isfinite(total) else "over 1.8e308"


# Fast paths ---------------------------------------------------------------------------------
# Valid files are the common case, and going through them label by label in Python costs
# most of the scoring time. The fast paths pull every label or value out with flat
# comprehensions under structural assumptions (a list of objects, keys present, lists where
# lists belong); a broken assumption raises or returns None. They check no value themselves:
# the facts they extract go to ``_passes`` with the same ``RULES`` the careful path words, and
# any refusal returns None, so the careful path runs and words every problem.

_FAST_PATH_MISS = (KeyError, TypeError, AttributeError, IndexError, ValueError, OverflowError)


def _load_gold_fast(data: object, config: TaskConfig) -> Gold | None:
    try:
        return _gold_fast(data, config)
    except _FAST_PATH_MISS:
        return None


def _gold_fast(data: object, config: TaskConfig) -> Gold | None:
    if not isinstance(data, list) or not data or set(map(type, data)) != {dict}:
        return None
    customer_types, helpdesk_types = config.customer_nugget_types, config.helpdesk_nugget_types
    if set(customer_types) & set(helpdesk_types):
        return None  # a label would not tell its side; the careful path handles such a configuration
    ids = _DialogueIds(list(map(itemgetter("id"), data)), range(len(data)))
    if not _passes("dialogue id", ids):
        return None
    turn_lists = list(map(itemgetter("turns"), data))
    annotations = list(map(itemgetter("annotations"), data))
    if set(map(type, turn_lists)) != {list} or set(map(type, annotations)) != {list}:
        return None
    turn_counts = np.array(list(map(len, turn_lists)), dtype=np.int64)
    annotators = np.array(list(map(len, annotations)), dtype=np.int64)
    if not (_passes("gold turns", _Counts(turn_counts)) and _passes("gold annotations", _Counts(annotators))):
        return None
    flat_senders = [turn["sender"] for turns in turn_lists for turn in turns]
    if not _passes("sender", _Senders(flat_senders)):
        return None
    everyone = list(chain.from_iterable(annotations))
    if set(map(type, everyone)) != {dict}:
        return None
    has_quality = everyone[0].get("quality") is not None
    has_nugget = everyone[0].get("nugget") is not None
    if not (has_quality or has_nugget):
        return None
    n = len(ids.ids)
    annotation_dialogue = np.repeat(np.arange(n), annotators)

    quality_bins = None
    if has_quality:
        dims = config.quality_dimensions
        qualities = list(map(itemgetter("quality"), everyone))
        if set(map(type, qualities)) != {dict} or set(map(len, qualities)) != {len(dims)}:
            return None
        quality_bins = {}
        for dim in dims:
            labels = _ScaleLabels(list(map(itemgetter(dim), qualities)), config)
            if not _passes("scale label", labels):
                return None
            quality_bins[dim] = labels.bins
    elif any(annotation.get("quality") is not None for annotation in everyone):
        return None

    is_customer = np.array([sender == CUSTOMER for sender in flat_senders], dtype=bool)
    label_bins = label_turn = None
    if has_nugget:
        nuggets = list(map(itemgetter("nugget"), everyone))
        if set(map(type, nuggets)) != {list}:
            return None
        lengths = np.array(list(map(len, nuggets)), dtype=np.int64)
        if not _passes("nugget labels", _TurnLists(lengths, turn_counts[annotation_dialogue])):
            return None
        # The gold turn each label belongs to: annotation k of dialogue d labels turns
        # turn_start[d] .. turn_start[d] + turns[d] - 1, in order.
        turn_start = np.concatenate(([0], np.cumsum(turn_counts)[:-1]))
        label_start = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        within = np.arange(int(lengths.sum())) - np.repeat(label_start, lengths)
        label_turn = np.repeat(turn_start[annotation_dialogue], lengths) + within
        labels = _NuggetLabels(list(chain.from_iterable(nuggets)), is_customer[label_turn].astype(np.int64), config)
        if not _passes("nugget label", labels):
            return None
        label_bins = labels.bins
    elif any(annotation.get("nugget") is not None for annotation in everyone):
        return None
    return _gold_from_codes(config, ids.ids, annotators, turn_counts, is_customer, quality_bins,
                            annotation_dialogue, label_bins, label_turn)


def _load_run_fast(data: object, gold: Gold, allow_missing: bool) -> Run | None:
    try:
        return _run_fast(data, gold, allow_missing)
    except _FAST_PATH_MISS:
        return None


def _run_fast(data: object, gold: Gold, allow_missing: bool) -> Run | None:
    if not isinstance(data, list) or not data or set(map(type, data)) != {dict}:
        return None
    config = gold.config
    n = gold.n_dialogues
    ids = _DialogueIds(list(map(itemgetter("id"), data)), range(len(data)))
    if not _passes("dialogue id", ids):
        return None
    dialogues = _RunDialogues(ids.ids, gold)
    if not _passes("run dialogue", dialogues):
        return None
    index = dialogues.index
    has_quality = data[0].get("quality") is not None
    has_nugget = data[0].get("nugget") is not None
    if not _passes("run subtasks", _RunSubtasks(has_quality, has_nugget, gold, True)):
        return None
    covered = np.zeros(n, dtype=bool)
    covered[index] = True
    if not _passes("run coverage", _Coverage(covered, gold, allow_missing, True)):
        return None
    position_of = np.full(n, -1, dtype=np.int64)
    position_of[index] = np.arange(index.size)
    label_problems = _label_problems(config)

    quality = None
    if has_quality:
        dims = config.quality_dimensions
        estimates = list(map(itemgetter("quality"), data))
        if set(map(type, estimates)) != {dict} or set(map(len, estimates)) != {len(dims)}:
            return None
        quality = {}
        for dim in dims:
            objects = list(map(itemgetter(dim), estimates))
            if set(map(type, objects)) != {dict}:
                return None
            facts = _Distributions(objects, config.quality_scale, label_problems["quality"])
            if not _passes("distribution", facts):
                return None
            quality[dim] = np.zeros((n, facts.width))
            quality[dim][index] = facts.numbers
    elif any(entry.get("quality") is not None for entry in data):
        return None

    side_types = {CUSTOMER: config.customer_nugget_types, HELPDESK: config.helpdesk_nugget_types}
    side_rows = {CUSTOMER: np.zeros((len(gold.customer_dialogue), len(side_types[CUSTOMER]))),
                 HELPDESK: np.zeros((len(gold.helpdesk_dialogue), len(side_types[HELPDESK])))}
    if has_nugget:
        estimates = list(map(itemgetter("nugget"), data))
        if set(map(type, estimates)) != {list}:
            return None
        lengths = np.array(list(map(len, estimates)), dtype=np.int64)
        if not _passes("run turn estimates", _TurnLists(lengths, gold.turn_counts[index], ids.ids)):
            return None
        # Gold turn of every estimate, in the run's order.
        turn_start = np.concatenate(([0], np.cumsum(gold.turn_counts)[:-1]))
        estimate_start = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        gold_turn = (np.repeat(turn_start[index], lengths) + np.arange(lengths.sum())
                     - np.repeat(estimate_start, lengths))
        turn_estimates = list(chain.from_iterable(estimates))
        is_customer = gold.turn_is_customer
        side_row = _side_row(gold)
        for side, on_side in ((CUSTOMER, is_customer[gold_turn]), (HELPDESK, ~is_customer[gold_turn])):
            positions = np.flatnonzero(on_side)
            objects = [turn_estimates[i] for i in positions.tolist()]
            if set(map(type, objects)) - {dict}:
                return None
            facts = _Distributions(objects, side_types[side], label_problems[side])
            if not _passes("distribution", facts):
                return None
            side_rows[side][side_row[gold_turn[positions]]] = facts.numbers
    elif any(entry.get("nugget") is not None for entry in data):
        return None
    return _finish_run(gold, quality, side_rows, covered, position_of, has_nugget)


def restrict(run: Run, gold: Gold, dialogue_index: np.ndarray) -> tuple[Run, Gold]:
    """A run and its gold cut down to some gold dialogues (ascending indices into ``gold``).

    Used for the live leaderboard of a test phase, which scores a fixed subset of the test
    dialogues; the run must cover all of them.
    """
    dialogue_index = np.asarray(dialogue_index, dtype=np.int64)
    position = np.full(gold.n_dialogues, -1, dtype=np.int64)
    position[run.dialogue_index] = np.arange(run.dialogue_index.size)
    rows = position[dialogue_index]
    if (rows < 0).any():
        raise ValueError("the run does not cover every dialogue of the subset")
    covered_gold = gold.subset(run.dialogue_index) if run.n_missing else gold
    keep = np.zeros(covered_gold.n_dialogues, dtype=bool)
    keep[rows] = True
    subset = Run(
        dialogue_index=np.arange(dialogue_index.size),
        quality=None if run.quality is None else {dim: values[rows] for dim, values in run.quality.items()},
        customer=None if run.customer is None else run.customer[keep[covered_gold.customer_dialogue]],
        helpdesk=None if run.helpdesk is None else run.helpdesk[keep[covered_gold.helpdesk_dialogue]],
        warnings=list(run.warnings),
    )
    return subset, covered_gold.subset(rows)
