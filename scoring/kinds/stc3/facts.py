"""Facts: what the DQ/ND validation rules see.

Each class wraps the values extracted from a gold file or run for one *subject* of
:data:`scoring.kinds.stc3.rules.RULES` (dialogue ids, distributions, senders, labels...),
with ``n_rows`` elements and the vectorised tests the rules call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cached_property

import numpy as np

from scoring.kinds.stc3.arrays import CUSTOMER, HELPDESK, Gold
from scoring.kinds.stc3.config import TaskConfig
from scoring.validation import (
    HugeInteger,
    canonical_id,
)

_SIDES = frozenset((CUSTOMER, HELPDESK))
_NUMBER_TYPES = (int, float)


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
