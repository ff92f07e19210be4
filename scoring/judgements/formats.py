"""Judgements files, the items they judge and the dimensions they judge on, read and validated
(the judgements specification, "Judgements files"; docs/organisers/judgements.md).

A judgements file is a JSON list, one object per judgement of one item by one assessor:

* ``stc3`` (dialogues): an STC-3 annotation object with its item and assessor,
  ``{"item": "<dialogue id>", "assessor": "<id>", "quality": {"A": 1, "E": 0, "S": 1},
  "nugget": ["CNUG0", "HNUG", ...]}``; quality labels on the task's scale, one nugget label per
  turn, allowed on that turn's sender (the task configuration's labels, ``scoring.kinds.stc3``);
  every judgement of a file labels the same subtasks (quality, nugget or both), as a gold's
  annotations must;
* ``response`` (references rated for deltaBLEU): ``{"item": "<gold item id>#<k>", "assessor":
  "<id>", "values": {"rating": 1..5}}``, ``k`` the reference's 0-based position in the gold item's
  ``references`` (so ``"c17#0"`` is ``[c17].references[0]``, whatever ``#`` the id itself holds);
* ``metric`` (responses judged on the organiser's dimensions): ``{"item": "<response id>",
  "assessor": "<id>", "values": {"<dimension>": <value on its scale>, ...}}``, every dimension.

Optional in every kind: ``"seconds"``, the time the assessor took (a finite number >= 0), and
``"check": true`` on the judgements of a check item (as a campaign's export marks them).
Ids are strings or integers (``scoring.validation.canonical_id``). Every problem is reported
with its JSON path (unknown item, a label not allowed on the turn's sender, a wrong number of
nugget labels, a value off the scale, an assessor judging an item twice) and ``ValidationFailed``
raised with all of them: nothing is returned from a file with an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from scoring.judgements.alpha import LEVELS
from scoring.kinds.stc3.arrays import CUSTOMER, HELPDESK
from scoring.kinds.stc3.config import STC3, TaskConfig
from scoring.validation import Problems, ValidationFailed, canonical_id, quoted

KINDS: tuple[str, ...] = ("stc3", "response", "metric")
# The metrics track's rule for a dimension's name (a part of measure keys, URLs and CSV headers), so
# that every scheme defined here gives a gold the metric kind reads.
DIMENSION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,23}$")
MAX_DIMENSIONS = 50
MAX_SCALE_POINTS = 101


@dataclass(frozen=True)
class Dimension:
    """What assessors judge: a name, its level of measurement and its scale from lowest to
    highest (numbers or labels); ``meanings`` says in words what each point means."""

    name: str
    level: str
    scale: tuple
    meanings: tuple[str, ...] = ()

    @property
    def numeric(self) -> bool:
        """Whether every point is a number, so that means and z-scores exist."""
        return all(_is_number(value) for value in self.scale)

    def to_dict(self) -> dict:
        out: dict = {"name": self.name, "level": self.level, "scale": list(self.scale)}
        if self.meanings:
            out["meanings"] = list(self.meanings)
        return out


# deltaBLEU's references are rated on five points, mapped to weights (mean - 3) / 2 (Galley et al.
# 2015, as Tsuta et al. 2023 section 3.2 restate it).
REFERENCE_RATING = Dimension("rating", "ordinal", (1, 2, 3, 4, 5), (
    "inappropriate as a response to the utterance", "mostly inappropriate", "neutral", "mostly appropriate",
    "very appropriate"))
# Tsuta et al. 2023 section 5: appropriateness on a 5-point Likert scale, the default for responses.
APPROPRIATENESS = Dimension("appropriateness", "ordinal", (1, 2, 3, 4, 5), (
    "inappropriate or unrecognisable", "mostly inappropriate", "neutral", "mostly appropriate", "very appropriate"))


@dataclass(frozen=True)
class Judgement:
    """One item judged by one assessor: ``values`` by dimension (stc3: the quality labels, as
    numbers where the scale's labels are numbers), ``nugget`` the stc3 per-turn labels."""

    item: str
    assessor: str
    values: Mapping[str, Hashable]
    nugget: tuple[str, ...] | None = None
    seconds: float | None = None


@dataclass
class Items:
    """What can be judged: item ids in file order; stc3 dialogues' senders; for references, the
    gold item and position each id names."""

    kind: str
    ids: list[str]
    senders: dict[str, tuple[str, ...]] = field(default_factory=dict)
    references: dict[str, tuple[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {item: position for position, item in enumerate(self.ids)}

    def __contains__(self, item: str) -> bool:
        return item in self.index


@dataclass
class JudgementSet:
    """A validated judgements file: its kind, dimensions and judgements in file order, and the
    stc3 configuration (labels) and items (senders) when known."""

    kind: str
    dimensions: tuple[Dimension, ...]
    judgements: list[Judgement]
    items: Items | None = None
    config: TaskConfig | None = None
    has_nugget: bool = False
    # Items marked ``"check": true`` in the file (a campaign's export marks its check items so).
    check_items: frozenset[str] = frozenset()

    def without_checks(self, answered: Iterable[str] = ()) -> JudgementSet:
        """The judgements of every item but the check items (those marked, and ``answered``):
        check items test assessors and never go into alpha or a gold."""
        left_out = self.check_items | set(answered)
        if not left_out:
            return self
        return replace(self, judgements=[j for j in self.judgements if j.item not in left_out],
                       check_items=frozenset())

    def assessors(self) -> list[str]:
        return sorted({judgement.assessor for judgement in self.judgements})

    def judged_items(self) -> list[str]:
        """Items with at least one judgement, in the items file's order (else first judged first)."""
        seen = dict.fromkeys(judgement.item for judgement in self.judgements)
        if self.items is not None:
            return [item for item in self.items.ids if item in seen]
        return list(seen)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def stc3_dimensions(config: TaskConfig = STC3) -> tuple[Dimension, ...]:
    """The task's quality dimensions (A, E, S for STC-3), ordinal on its scale from lowest to
    highest; labels that are integers (``"2"``) are numbers, as STC-3 files write them."""
    scale = tuple(_scale_value(label) for label in config.quality_scale)
    if all(_is_number(value) for value in scale):
        scale = tuple(sorted(scale))
    return tuple(Dimension(name, "ordinal", scale) for name in sorted(config.quality_dimensions))


def _scale_value(label: str) -> Hashable:
    try:
        return int(label)
    except ValueError:
        return label


def load_dimensions(data: object) -> tuple[Dimension, ...]:
    """A dimensions file: ``[{"name": "appropriateness", "scale": [1, 2, 3, 4, 5], "level":
    "ordinal", "meanings": ["...", ...]}, ...]``. ``level`` defaults to ordinal (interval needs
    numbers, nominal takes labels); ``meanings``, optional, one per point."""
    problems = Problems()
    if not isinstance(data, list) or not data:
        raise ValidationFailed(["dimensions: must be a non-empty JSON list of {\"name\", \"scale\"} objects"])
    if len(data) > MAX_DIMENSIONS:
        raise ValidationFailed([f"dimensions: at most {MAX_DIMENSIONS}, got {len(data)}"])
    found: list[Dimension] = []
    names: set[str] = set()
    for position, entry in enumerate(data):
        path = f"[{position}]"
        if not isinstance(entry, dict):
            problems.add(path, f"must be an object with \"name\" and \"scale\", not {quoted(entry)}")
            continue
        name, scale, level = entry.get("name"), entry.get("scale"), entry.get("level", "ordinal")
        ok = True
        if not isinstance(name, str) or not DIMENSION_NAME.match(name):
            problems.add(f"{path}.name", f"{quoted(name)}: must start with a letter and hold only letters, digits, _ "
                                         "and -, at most 24 characters (it becomes part of measure keys and URLs)")
            ok = False
        elif name in names:
            problems.add(f"{path}.name", f"{quoted(name)} is already a dimension")
            ok = False
        else:
            names.add(name)
        if level not in LEVELS:
            problems.add(f"{path}.level", f"must be one of {', '.join(LEVELS)}, not {quoted(level)}")
            ok = False
        if not isinstance(scale, list) or not 2 <= len(scale) <= MAX_SCALE_POINTS:
            problems.add(f"{path}.scale", f"must be a list of 2 to {MAX_SCALE_POINTS} points, lowest first")
            ok = False
        else:
            for k, point in enumerate(scale):
                if not (_is_number(point) or (isinstance(point, str) and point.strip())):
                    problems.add(f"{path}.scale[{k}]",
                                 f"must be a finite number or a non-empty label, not {quoted(point)}")
                    ok = False
            if ok and len(set(scale)) != len(scale):
                problems.add(f"{path}.scale", "lists a point twice")
                ok = False
            if ok and level == "interval" and not all(_is_number(point) for point in scale):
                problems.add(f"{path}.scale", "the interval level needs numbers")
                ok = False
            if ok and all(_is_number(point) for point in scale) and level != "nominal" and list(scale) != sorted(scale):
                problems.add(f"{path}.scale", "must list its numbers from lowest to highest")
                ok = False
        meanings = entry.get("meanings", [])
        if not isinstance(meanings, list) or not all(isinstance(m, str) for m in meanings) or (
                meanings and isinstance(scale, list) and len(meanings) != len(scale)):
            problems.add(f"{path}.meanings", "must be a list of texts, one per point of the scale")
            ok = False
        if ok:
            found.append(Dimension(name, level, tuple(scale), tuple(meanings)))
    problems.raise_if_any()
    return tuple(found)


def _entries(data: object, what: str, problems: Problems) -> list[tuple[int, dict]]:
    if not isinstance(data, list):
        raise ValidationFailed([f"{what}: must be a JSON list of objects, not {type(data).__name__}"])
    if not data:
        raise ValidationFailed([f"{what}: the list is empty"])
    out = []
    for position, entry in enumerate(data):
        if isinstance(entry, dict):
            out.append((position, entry))
        else:
            problems.add(f"[{position}]", f"must be an object, not {quoted(entry)}")
    return out


def load_items(data: object, kind: str) -> Items:
    """The items a judgements file may name, from the file the judging started from:

    * stc3: dialogues ``[{"id", "turns": [{"sender": "customer" | "helpdesk", ...}]}]`` (STC-3's
      test files, or a gold: its annotations are ignored);
    * response: a response gold (``scoring.kinds.response.formats``); items ``"<id>#<k>"``, one per
      reference;
    * metric: a metrics-track gold's contexts ``[{"id", "responses": [{"id", ...}]}]``, human
      judgements not needed; items are the response ids.
    """
    if kind not in KINDS:
        raise ValidationFailed([f"kind: must be one of {', '.join(KINDS)}, not {quoted(kind)}"])
    problems = Problems()
    entries = _entries(data, "items file", problems)
    ids: list[str] = []
    senders: dict[str, tuple[str, ...]] = {}
    named: dict[str, tuple[str, int]] = {}
    seen: set[str] = set()

    def add(item: str, path: str) -> None:
        if item in seen:
            problems.add(path, f"id {quoted(item)} appears twice")
        seen.add(item)
        ids.append(item)

    for position, entry in entries:
        path = f"[{position}]"
        item_id = canonical_id(entry.get("id"))
        if item_id is None:
            problems.add(f"{path}.id", "missing or not a non-empty string or integer")
            continue
        if kind == "stc3":
            turns = entry.get("turns")
            if not isinstance(turns, list) or not turns:
                problems.add(f"{path}.turns", "missing or not a non-empty list of turns")
                continue
            turn_senders = []
            for t, turn in enumerate(turns):
                sender = turn.get("sender") if isinstance(turn, dict) else None
                if sender not in (CUSTOMER, HELPDESK):
                    problems.add(f"{path}.turns[{t}].sender", f"must be \"{CUSTOMER}\" or \"{HELPDESK}\", "
                                 f"not {quoted(sender)}")
                turn_senders.append(sender)
            add(item_id, f"{path}.id")
            senders[item_id] = tuple(turn_senders)
        elif kind == "response":
            references = entry.get("references")
            if not isinstance(references, list) or not references:
                problems.add(f"{path}.references", "missing or not a non-empty list of references")
                continue
            for k in range(len(references)):
                add(f"{item_id}#{k}", f"{path}.references[{k}]")
                named[f"{item_id}#{k}"] = (item_id, k)
        else:
            responses = entry.get("responses")
            if not isinstance(responses, list) or not responses:
                problems.add(f"{path}.responses", "missing or not a non-empty list of responses")
                continue
            for r, response in enumerate(responses):
                response_id = canonical_id(response.get("id")) if isinstance(response, dict) else None
                if response_id is None:
                    problems.add(f"{path}.responses[{r}].id", "missing or not a non-empty string or integer")
                else:
                    add(response_id, f"{path}.responses[{r}].id")
    problems.raise_if_any()
    return Items(kind, ids, senders, named)


def _common(entry: dict, path: str, items: Items | None,
            problems: Problems) -> tuple[str | None, str | None, float | None]:
    item = canonical_id(entry.get("item"))
    if item is None:
        problems.add(f"{path}.item", "missing or not a non-empty string or integer")
    elif items is not None and item not in items:
        problems.add(f"{path}.item", f"unknown item {quoted(item)} (not in the items file)")
        item = None
    assessor = canonical_id(entry.get("assessor"))
    if assessor is None:
        problems.add(f"{path}.assessor", "missing or not a non-empty string or integer")
    seconds = entry.get("seconds")
    if seconds is not None and not (_is_number(seconds) and seconds >= 0):
        problems.add(f"{path}.seconds", f"must be a finite number of seconds >= 0, not {quoted(seconds)}")
        seconds = None
    return item, assessor, (float(seconds) if seconds is not None else None)


def _on_scale(value: object, dimension: Dimension) -> Hashable | None:
    """The point of the scale ``value`` names (``"2"`` names 2 on a numeric scale), or None."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    for point in dimension.scale:
        if value == point and not isinstance(point, bool):
            return point
        if isinstance(value, str) and _is_number(point) and value.strip() == str(point):
            return point
    return None


def _values(raw: object, path: str, dimensions: Sequence[Dimension], problems: Problems) -> dict[str, Hashable] | None:
    if not isinstance(raw, dict):
        problems.add(path, f"must be an object of values by dimension, not {quoted(raw)}")
        return None
    names = {dimension.name for dimension in dimensions}
    ok = True
    for key in raw:
        if key not in names:
            problems.add(path, f"unknown dimension {quoted(key)} (dimensions: {', '.join(sorted(names))})")
            ok = False
    values: dict[str, Hashable] = {}
    for dimension in dimensions:
        if dimension.name not in raw:
            problems.add(path, f"missing dimension {quoted(dimension.name)}")
            ok = False
            continue
        point = _on_scale(raw[dimension.name], dimension)
        if point is None:
            problems.add(f"{path}.{dimension.name}", f"value {quoted(raw[dimension.name])} is off the scale "
                         f"(allowed: {', '.join(str(p) for p in dimension.scale)})")
            ok = False
        else:
            values[dimension.name] = point
    return values if ok else None


def _nugget(raw: object, path: str, senders: tuple[str, ...] | None, config: TaskConfig,
            problems: Problems) -> tuple[str, ...] | None:
    if not isinstance(raw, list):
        problems.add(path, f"must be a list of nugget labels, one per turn, not {quoted(raw)}")
        return None
    if senders is not None and len(raw) != len(senders):
        problems.add(path, f"has {len(raw)} label(s) for a dialogue of {len(senders)} turn(s): one label per turn")
        return None
    ok = True
    allowed_by = {CUSTOMER: config.customer_nugget_types, HELPDESK: config.helpdesk_nugget_types}
    for t, label in enumerate(raw):
        if senders is None:
            allowed = config.customer_nugget_types + config.helpdesk_nugget_types
            if label not in allowed:
                problems.add(f"{path}[{t}]", f"unknown label {quoted(label)} (allowed: {', '.join(allowed)})")
                ok = False
        elif not isinstance(label, str) or label not in allowed_by[senders[t]]:
            problems.add(f"{path}[{t}]", f"label {quoted(label)} is not allowed on a {senders[t]} turn "
                         f"(allowed: {', '.join(allowed_by[senders[t]])})")
            ok = False
    return tuple(raw) if ok else None


def load_judgements(data: object, kind: str, items: Items | None = None,
                    dimensions: Sequence[Dimension] | None = None, config: TaskConfig = STC3) -> JudgementSet:
    """Validate a parsed judgements file (``scoring.validation.parse_json``'s output).

    ``items``: what may be judged (``load_items``); without it, any id is accepted and stc3
    nugget labels are checked against both sides' labels only. ``dimensions``: the metric kind's
    (default: appropriateness on 1-5, Tsuta et al. 2023); the stc3 kind's come from ``config``, the
    response kind's are the 5-point rating. Raises ``ValidationFailed`` with every problem.
    """
    if kind not in KINDS:
        raise ValidationFailed([f"kind: must be one of {', '.join(KINDS)}, not {quoted(kind)}"])
    if items is not None and items.kind != kind:
        raise ValidationFailed([f"items: read for the {items.kind} kind, not {kind}"])
    if kind == "stc3":
        dims = stc3_dimensions(config)
    elif kind == "response":
        dims = (REFERENCE_RATING,)
    else:
        dims = tuple(dimensions) if dimensions else (APPROPRIATENESS,)
    problems = Problems()
    entries = _entries(data, "judgements file", problems)
    judgements: list[Judgement] = []
    first_seen: dict[tuple[str, str], int] = {}
    turns_seen: dict[str, tuple[int, int]] = {}
    check_seen: dict[str, tuple[bool, int]] = {}
    checked: set[str] = set()
    has_quality = kind == "stc3" and any(entry.get("quality") is not None for _, entry in entries)
    has_nugget = kind == "stc3" and any(entry.get("nugget") is not None for _, entry in entries)
    if kind == "stc3" and entries and not (has_quality or has_nugget):
        problems.add("", "no judgement has \"quality\" or \"nugget\": nothing was judged")
    for position, entry in entries:
        path = f"[{position}]"
        item, assessor, seconds = _common(entry, path, items, problems)
        check = entry.get("check", False)
        if not isinstance(check, bool):
            problems.add(f"{path}.check", f"must be true (a check item) or false, not {quoted(check)}")
        elif item is not None:
            marked, where = check_seen.setdefault(item, (check, position))
            if marked != check:
                problems.add(f"{path}.check", f"item {quoted(item)} is {'' if marked else 'not '}a check item at "
                             f"[{where}]: every judgement of an item says the same")
            elif check:
                checked.add(item)
        values: dict[str, Hashable] | None = {}
        nugget = None
        if kind == "stc3":
            if has_quality:
                if entry.get("quality") is None:
                    problems.add(path, "missing \"quality\" (other judgements of this file have it)")
                    values = None
                else:
                    values = _values(entry["quality"], f"{path}.quality", dims, problems)
            if has_nugget:
                if entry.get("nugget") is None:
                    problems.add(path, "missing \"nugget\" (other judgements of this file have it)")
                    values = None
                else:
                    senders = items.senders.get(item) if items is not None and item is not None else None
                    nugget = _nugget(entry["nugget"], f"{path}.nugget", senders, config, problems)
                    if nugget is None:
                        values = None
                    elif senders is None and item is not None:
                        # Without the dialogues, the judgements of one dialogue must at least agree on its turns.
                        length, where = turns_seen.setdefault(item, (len(nugget), position))
                        if length != len(nugget):
                            problems.add(f"{path}.nugget", f"has {len(nugget)} label(s) where [{where}].nugget, of the "
                                         f"same dialogue, has {length}: one label per turn")
                            values = None
        else:
            values = _values(entry.get("values"), f"{path}.values", dims, problems) if "values" in entry else None
            if "values" not in entry:
                problems.add(f"{path}.values", "is missing")
        if item is None or assessor is None:
            continue
        earlier = first_seen.setdefault((item, assessor), position)
        if earlier != position:
            problems.add(path, f"assessor {quoted(assessor)} judged item {quoted(item)} twice (first at [{earlier}])")
            continue
        if values is not None:
            judgements.append(Judgement(item, assessor, values, nugget, seconds))
    problems.raise_if_any()
    return JudgementSet(kind, dims if kind != "stc3" or has_quality else (), judgements, items,
                        config if kind == "stc3" else None, has_nugget, frozenset(checked))
