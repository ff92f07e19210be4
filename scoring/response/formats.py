"""Reading and validating response gold files and runs (RESPONSE-SPEC.md, "The task").

Every problem is reported with its JSON path (``[3].references[1].weight: ...``), up to 1,000
lines, and ``ValidationFailed`` (the DQ/ND kind's exception) carries them all; nothing is
returned from a file with any problem.

Gold, a JSON list of items::

    {"id": "c17", "context": [{"sender": "user", "text": "..."}],
     "references": [{"text": "...", "weight": 1.0}, ...],
     "nuggets": [{"text": "...", "act": "Apology",
                  "diff": [{"text": "...", "act": "Thanking"}], "same": ["...", ...]}, ...]}

- ids: non-empty strings or integers (an integer is read as its decimal string), unique;
- ``references``: a non-empty list; ``text`` a non-empty string; ``weight`` a finite number in
  [-1, 1], 1 when left out (unrated); at least one reference with a positive weight;
  ``origin`` (optional): ``"pool"`` or ``"parrot"`` marks a reference vBLEU added
  (``scoring.response.vbleu.extend_gold``); such references are kept apart (``extended``): BLEU,
  deltaBLEU and POSSCORE use the original references only, vBLEU all of them; at least one
  *original* reference must have a positive weight;
- ``context`` (optional): a list of ``{"sender": str, "text": str}``;
- ``nuggets`` (optional): alternatives the organisers wrote for nuggets they expect in runs, keyed by
  the nugget's act and text (whitespace-insensitive): ``diff`` alternatives have other acts of the
  taxonomy, one per act; ``same`` alternatives are rewordings (same act).

Run, a JSON list with one entry per gold item::

    {"id": "c17", "response": "...", "nuggets": [{"text": "...", "act": "Recommendation",
                                                   "diff": [...], "same": [...]}, ...]}

- every id in the gold, every gold item present (unless read with ``allow_missing``: then at
  least one), none twice; a run with more entries than the gold has items is refused before any
  entry is read;
- ``response``: a non-empty string of at most ``MAX_RESPONSE_CHARS`` characters;
- ``nuggets`` (optional): a non-empty list whose texts concatenate, whitespace aside, to the
  response; acts from the task's taxonomy; a run may bring its own ``diff``/``same``
  alternatives, which are used instead of the gold's for that nugget.

Texts may not contain NUL characters (PostgreSQL cannot store them). Keys not read are ignored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from scoring.formats import ValidationFailed, _label, _Problems, canonical_id
from scoring.response.nuggets import ACTS_SEED004, Nugget, Turn

MAX_RESPONSE_CHARS = 10_000
MAX_TEXT_CHARS = 10_000
ORIGINS = ("pool", "parrot")  # the "origin" of a reference vBLEU added
__all__ = ["ResponseGold", "ResponseRun", "ValidationFailed", "load_response_gold", "load_response_run"]


def _squash(text: str) -> str:
    return "".join(text.split())


@dataclass
class ResponseGold:
    """Validated gold: items in file order with their weighted references and nugget alternatives."""

    ids: list[str]
    references: list[list[tuple[str, float]]]
    contexts: list[list[dict[str, str]]]
    alternatives: list[dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]]]
    acts: tuple[str, ...]
    index: dict[str, int] = field(default_factory=dict)
    # The references vBLEU added, (text, weight, origin) per item, in file order; empty (not a list
    # of empty lists) for a gold without any, so such a gold is exactly what it was before vBLEU.
    extended: list[list[tuple[str, float, str]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.index = {item_id: position for position, item_id in enumerate(self.ids)}

    @property
    def has_extended(self) -> bool:
        return bool(self.extended)

    def all_references(self) -> list[list[tuple]]:
        """Every item's original references ``(text, weight)``, then those vBLEU added ``(text, weight,
        origin)``: vBLEU's reference set (the origin says which may set rho)."""
        if not self.extended:
            return self.references
        return [list(original) + list(added) for original, added in zip(self.references, self.extended)]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class ResponseRun:
    """Validated run, in the gold's item order: ``responses[k]`` answers gold item ``items[k]``
    (every item, unless the run was read with ``allow_missing``)."""

    responses: list[str]
    nuggets: list[list[Nugget] | None]
    items: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.items:
            self.items = list(range(len(self.responses)))

    def turns(self, gold: ResponseGold) -> list[Turn]:
        """The run as turns for ``nuggets.score_nuggets``: a nugget without alternatives of its own
        takes those the gold holds for the same act and text."""
        turns = []
        for item, response, nuggets in zip(self.items, self.responses, self.nuggets):
            if nuggets is not None:
                merged = []
                for nugget in nuggets:
                    if not nugget.diff and not nugget.same:
                        diff, same = gold.alternatives[item].get((nugget.act, _squash(nugget.text)), ((), ()))
                        nugget = Nugget(nugget.text, nugget.act, diff, same)
                    merged.append(nugget)
                nuggets = merged
            turns.append(Turn(item, response, nuggets))
        return turns


def _text(value: object, path: str, problems: _Problems, limit: int = MAX_TEXT_CHARS) -> str | None:
    """A non-empty string without NUL, or None after recording why not."""
    if not isinstance(value, str):
        problems.add(path, f"must be a string, not {_label(value)}")
        return None
    if not value.strip():
        problems.add(path, "must not be empty")
        return None
    if "\x00" in value:
        problems.add(path, "must not contain NUL characters")
        return None
    if len(value) > limit:
        problems.add(path, f"is {len(value)} characters long; at most {limit} are allowed")
        return None
    return value


def _entries(data: object, what: str, problems: _Problems) -> list[tuple[int, str, dict]]:
    """(position, id, entry) for every well-formed entry; problems for the others and for repeated ids."""
    if not isinstance(data, list):
        problems.add("", f"the {what} must be a JSON list of objects, not {type(data).__name__}")
        return []
    if not data:
        problems.add("", f"the {what} is an empty list")
        return []
    entries = []
    first_seen: dict[str, int] = {}
    for position, entry in enumerate(data):
        path = f"[{position}]"
        if not isinstance(entry, dict):
            problems.add(path, f"must be an object, not {_label(entry)}")
            continue
        if "id" not in entry:
            problems.add(path, "has no id")
            continue
        item_id = canonical_id(entry["id"])
        if item_id is None:
            problems.add(f"{path}.id", f"must be a non-empty string or an integer, not {_label(entry['id'])}")
            continue
        if item_id in first_seen:
            problems.add(f"{path}.id", f"{_label(item_id)} repeats the id of [{first_seen[item_id]}]")
            continue
        first_seen[item_id] = position
        entries.append((position, item_id, entry))
    return entries


def _act(value: object, path: str, acts: Sequence[str], problems: _Problems) -> str | None:
    if not isinstance(value, str):
        problems.add(path, f"must be a dialogue act (a string), not {_label(value)}")
        return None
    if value not in acts:
        problems.add(path, f"{_label(value)} is not an act of this task's taxonomy ({', '.join(acts)})")
        return None
    return value


def _alternatives(
    nugget: dict, path: str, act: str | None, acts: Sequence[str], problems: _Problems
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    diff: list[str] = []
    same: list[str] = []
    if "diff" in nugget:
        if not isinstance(nugget["diff"], list):
            problems.add(f"{path}.diff", f"must be a list, not {_label(nugget['diff'])}")
        else:
            seen_acts: dict[str, int] = {}
            for k, alternative in enumerate(nugget["diff"]):
                where = f"{path}.diff[{k}]"
                if not isinstance(alternative, dict):
                    problems.add(where, f"must be an object with text and act, not {_label(alternative)}")
                    continue
                text = _text(alternative.get("text"), f"{where}.text", problems)
                other = _act(alternative.get("act"), f"{where}.act", acts, problems)
                if other is not None and act is not None and other == act:
                    problems.add(f"{where}.act", f"must differ from the nugget's act {_label(act)}")
                    other = None
                elif other is not None and other in seen_acts:
                    problems.add(f"{where}.act", f"{_label(other)} repeats the act of diff[{seen_acts[other]}] "
                                                 "(one alternative per other act)")
                    other = None
                if other is not None:
                    seen_acts[other] = k
                if text is not None and other is not None:
                    diff.append(text)
    if "same" in nugget:
        if not isinstance(nugget["same"], list):
            problems.add(f"{path}.same", f"must be a list of texts, not {_label(nugget['same'])}")
        else:
            for k, alternative in enumerate(nugget["same"]):
                text = _text(alternative, f"{path}.same[{k}]", problems)
                if text is not None:
                    same.append(text)
    return tuple(diff), tuple(same)


def load_response_gold(data: object, acts: Sequence[str] = ACTS_SEED004) -> ResponseGold:
    """Validate a parsed gold file (``parse_json``'s output); raise ``ValidationFailed`` listing every problem."""
    problems = _Problems()
    ids: list[str] = []
    all_references: list[list[tuple[str, float]]] = []
    all_extended: list[list[tuple[str, float, str]]] = []
    contexts: list[list[dict[str, str]]] = []
    alternatives: list[dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]]] = []
    for position, item_id, entry in _entries(data, "gold", problems):
        path = f"[{position}]"
        references = entry.get("references")
        item_references: list[tuple[str, float]] = []
        item_extended: list[tuple[str, float, str]] = []
        if not isinstance(references, list) or not references:
            problems.add(f"{path}.references", "must be a non-empty list of {\"text\", \"weight\"} objects"
                         if references is not None else "is missing")
        else:
            for k, reference in enumerate(references):
                where = f"{path}.references[{k}]"
                if not isinstance(reference, dict):
                    problems.add(where, f"must be an object with text and weight, not {_label(reference)}")
                    continue
                text = _text(reference.get("text"), f"{where}.text", problems)
                weight = reference.get("weight", 1.0)
                if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
                    problems.add(f"{where}.weight", f"must be a finite number, not {_label(weight)}")
                    continue
                if not -1.0 <= weight <= 1.0:
                    problems.add(f"{where}.weight", f"{weight} is outside [-1, 1]")
                    continue
                origin = reference.get("origin")
                if origin is not None and origin not in ORIGINS:
                    problems.add(f"{where}.origin", f"must be \"pool\" or \"parrot\" (a reference vBLEU added), "
                                                    f"or left out, not {_label(origin)}")
                    continue
                if text is not None and origin is None:
                    item_references.append((text, float(weight)))
                elif text is not None:
                    item_extended.append((text, float(weight), origin))
            if len(item_references) + len(item_extended) == len(references) and \
                    not any(w > 0 for _, w in item_references):
                problems.add(f"{path}.references", "no original reference has a positive weight" if item_extended
                             else "no reference has a positive weight")
        context = entry.get("context", [])
        item_context: list[dict[str, str]] = []
        if not isinstance(context, list):
            problems.add(f"{path}.context", f"must be a list of sender and text objects, not {_label(context)}")
        else:
            for k, utterance in enumerate(context):
                where = f"{path}.context[{k}]"
                if not isinstance(utterance, dict):
                    problems.add(where, f"must be an object with sender and text, not {_label(utterance)}")
                    continue
                sender = _text(utterance.get("sender"), f"{where}.sender", problems)
                text = _text(utterance.get("text"), f"{where}.text", problems)
                if sender is not None and text is not None:
                    item_context.append({"sender": sender, "text": text})
        item_alternatives: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {}
        nuggets = entry.get("nuggets", [])
        if not isinstance(nuggets, list):
            problems.add(f"{path}.nuggets", f"must be a list, not {_label(nuggets)}")
        else:
            for k, nugget in enumerate(nuggets):
                where = f"{path}.nuggets[{k}]"
                if not isinstance(nugget, dict):
                    problems.add(where, f"must be an object with text and act, not {_label(nugget)}")
                    continue
                text = _text(nugget.get("text"), f"{where}.text", problems)
                act = _act(nugget.get("act"), f"{where}.act", acts, problems)
                found = _alternatives(nugget, where, act, acts, problems)
                if text is not None and act is not None:
                    key = (act, _squash(text))
                    if key in item_alternatives:
                        problems.add(where, "repeats the act and text of an earlier nugget of this item")
                    item_alternatives[key] = found
        ids.append(item_id)
        all_references.append(item_references)
        all_extended.append(item_extended)
        contexts.append(item_context)
        alternatives.append(item_alternatives)
    problems.raise_if_any()
    extended = all_extended if any(all_extended) else []
    return ResponseGold(ids, all_references, contexts, alternatives, tuple(acts), extended=extended)


def load_response_run(data: object, gold: ResponseGold, allow_missing: bool = False) -> ResponseRun:
    """Validate a parsed run against its gold; raise ``ValidationFailed`` listing every problem.

    ``allow_missing``: gold items without a response are not a problem; the run holds the others."""
    # Bound the work before looking at any entry: a run cannot have more entries than the gold has items.
    if isinstance(data, list) and len(data) > len(gold):
        raise ValidationFailed([f"the run has {len(data)} entries but the gold has {len(gold)} items"])
    problems = _Problems()
    responses: list[str | None] = [None] * len(gold)
    nuggets_by_item: list[list[Nugget] | None] = [None] * len(gold)
    for position, item_id, entry in _entries(data, "run", problems):
        path = f"[{position}]"
        item = gold.index.get(item_id)
        if item is None:
            problems.add(f"{path}.id", f"{_label(item_id)} is not an item of the gold")
            continue
        if "response" not in entry:
            problems.add(f"{path}.response", "is missing")
            continue
        response = _text(entry["response"], f"{path}.response", problems, MAX_RESPONSE_CHARS)
        if response is None:
            continue
        responses[item] = response
        if "nuggets" not in entry:
            continue
        nuggets = entry["nuggets"]
        if not isinstance(nuggets, list) or not nuggets:
            problems.add(f"{path}.nuggets", f"must be a non-empty list of {{\"text\", \"act\"}} objects, "
                                            f"not {_label(nuggets)}")
            continue
        parsed: list[Nugget] = []
        complete = True
        for k, nugget in enumerate(nuggets):
            where = f"{path}.nuggets[{k}]"
            if not isinstance(nugget, dict):
                problems.add(where, f"must be an object with text and act, not {_label(nugget)}")
                complete = False
                continue
            text = _text(nugget.get("text"), f"{where}.text", problems, MAX_RESPONSE_CHARS)
            act = _act(nugget.get("act"), f"{where}.act", gold.acts, problems)
            diff, same = _alternatives(nugget, where, act, gold.acts, problems)
            if text is None or act is None:
                complete = False
                continue
            parsed.append(Nugget(text, act, diff, same))
        if complete and _squash("".join(n.text for n in parsed)) != _squash(response):
            problems.add(f"{path}.nuggets", "the nugget texts put together (whitespace aside) are not the response")
        nuggets_by_item[item] = parsed
    if isinstance(data, list) and not allow_missing:
        missing = [gold.ids[item] for item, response in enumerate(responses) if response is None]
        answered_wrongly = {canonical_id(e.get("id")) for e in data if isinstance(e, dict)}
        missing = [item_id for item_id in missing if item_id not in answered_wrongly]
        if missing:
            shown = ", ".join(_label(item_id) for item_id in missing[:20])
            more = f" and {len(missing) - 20} more" if len(missing) > 20 else ""
            problems.add("", f"{len(missing)} gold item(s) have no response: {shown}{more}")
    problems.raise_if_any()
    present = [item for item, response in enumerate(responses) if response is not None]
    if not present:
        raise ValidationFailed(["the run has no response to any gold item"])
    return ResponseRun([responses[item] for item in present], [nuggets_by_item[item] for item in present], present)
