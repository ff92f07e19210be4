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
  (``scoring.kinds.response.vbleu.extend_gold``); such references are kept apart (``extended``): BLEU,
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
  alternatives, which are used instead of the gold's for that nugget;
- at most ``MAX_NUGGETS_PER_RESPONSE`` (100) nuggets per response or gold item and
  ``MAX_ALTERNATIVES_PER_NUGGET`` (50, ``diff`` and ``same`` together) per nugget; the kind also
  budgets a run's nugget work (``check_nugget_work``) before accepting it.

Texts may not contain NUL characters (PostgreSQL cannot store them) nor unpaired surrogates
(``"\\ud800"``: not a character; they cannot be encoded). Keys not read are ignored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from scoring.kinds.response.nuggets import ACTS_SEED004, MAX_SENTENCE_NUGGETS, Nugget, Turn, variant_count
from scoring.validation import Problems, ValidationFailed, canonical_id, check_text, quoted

MAX_RESPONSE_CHARS = 10_000
# Nugget scores score every variant of a turn (without each nugget, with each alternative), each
# as long as the turn: the work grows with nuggets x alternatives x length, so each is bounded.
MAX_NUGGETS_PER_RESPONSE = MAX_SENTENCE_NUGGETS
MAX_ALTERNATIVES_PER_NUGGET = 50  # diff and same together
# The characters of all variant turns a run's nugget scores cover (see ``nugget_work``):
# a 1,000-response run with 4 nuggets and 15 alternatives each, 600 characters per response, is 39 million.
MAX_NUGGET_WORK = 50_000_000
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


def _entries(data: object, what: str, problems: Problems) -> list[tuple[int, str, dict]]:
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
            problems.add(path, f"must be an object, not {quoted(entry)}")
            continue
        if "id" not in entry:
            problems.add(path, "has no id")
            continue
        item_id = canonical_id(entry["id"])
        if item_id is None:
            problems.add(f"{path}.id", f"must be a non-empty string or an integer, not {quoted(entry['id'])}")
            continue
        if item_id in first_seen:
            problems.add(f"{path}.id", f"{quoted(item_id)} repeats the id of [{first_seen[item_id]}]")
            continue
        first_seen[item_id] = position
        entries.append((position, item_id, entry))
    return entries


def _act(value: object, path: str, acts: Sequence[str], problems: Problems) -> str | None:
    if not isinstance(value, str):
        problems.add(path, f"must be a dialogue act (a string), not {quoted(value)}")
        return None
    if value not in acts:
        problems.add(path, f"{quoted(value)} is not an act of this task's taxonomy ({', '.join(acts)})")
        return None
    return value


def _alternatives(
    nugget: dict, path: str, act: str | None, acts: Sequence[str], problems: Problems
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    diff: list[str] = []
    same: list[str] = []
    given = sum(len(nugget[key]) for key in ("diff", "same") if isinstance(nugget.get(key), list))
    if given > MAX_ALTERNATIVES_PER_NUGGET:
        problems.add(path, f"has {given} alternatives (diff and same together); at most "
                           f"{MAX_ALTERNATIVES_PER_NUGGET} are allowed")
        return (), ()
    if "diff" in nugget:
        if not isinstance(nugget["diff"], list):
            problems.add(f"{path}.diff", f"must be a list, not {quoted(nugget['diff'])}")
        else:
            seen_acts: dict[str, int] = {}
            for k, alternative in enumerate(nugget["diff"]):
                where = f"{path}.diff[{k}]"
                if not isinstance(alternative, dict):
                    problems.add(where, f"must be an object with text and act, not {quoted(alternative)}")
                    continue
                text = check_text(alternative.get("text"), f"{where}.text", problems)
                other = _act(alternative.get("act"), f"{where}.act", acts, problems)
                if other is not None and act is not None and other == act:
                    problems.add(f"{where}.act", f"must differ from the nugget's act {quoted(act)}")
                    other = None
                elif other is not None and other in seen_acts:
                    problems.add(f"{where}.act", f"{quoted(other)} repeats the act of diff[{seen_acts[other]}] "
                                                 "(one alternative per other act)")
                    other = None
                if other is not None:
                    seen_acts[other] = k
                if text is not None and other is not None:
                    diff.append(text)
    if "same" in nugget:
        if not isinstance(nugget["same"], list):
            problems.add(f"{path}.same", f"must be a list of texts, not {quoted(nugget['same'])}")
        else:
            for k, alternative in enumerate(nugget["same"]):
                text = check_text(alternative, f"{path}.same[{k}]", problems)
                if text is not None:
                    same.append(text)
    return tuple(diff), tuple(same)


def load_response_gold(data: object, acts: Sequence[str] = ACTS_SEED004) -> ResponseGold:
    """Validate a parsed gold file (``parse_json``'s output); raise ``ValidationFailed`` listing every problem."""
    problems = Problems()
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
                    problems.add(where, f"must be an object with text and weight, not {quoted(reference)}")
                    continue
                text = check_text(reference.get("text"), f"{where}.text", problems)
                weight = reference.get("weight", 1.0)
                if type(weight) is int and not -1 <= weight <= 1:
                    # Checked as an int: math.isfinite(10**400) raises OverflowError.
                    problems.add(f"{where}.weight", f"{quoted(weight)} is outside [-1, 1]")
                    continue
                if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
                    problems.add(f"{where}.weight", f"must be a finite number, not {quoted(weight)}")
                    continue
                if not -1.0 <= weight <= 1.0:
                    problems.add(f"{where}.weight", f"{weight} is outside [-1, 1]")
                    continue
                origin = reference.get("origin")
                if origin is not None and origin not in ORIGINS:
                    problems.add(f"{where}.origin", f"must be \"pool\" or \"parrot\" (a reference vBLEU added), "
                                                    f"or left out, not {quoted(origin)}")
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
            problems.add(f"{path}.context", f"must be a list of sender and text objects, not {quoted(context)}")
        else:
            for k, utterance in enumerate(context):
                where = f"{path}.context[{k}]"
                if not isinstance(utterance, dict):
                    problems.add(where, f"must be an object with sender and text, not {quoted(utterance)}")
                    continue
                sender = check_text(utterance.get("sender"), f"{where}.sender", problems)
                text = check_text(utterance.get("text"), f"{where}.text", problems)
                if sender is not None and text is not None:
                    item_context.append({"sender": sender, "text": text})
        item_alternatives: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {}
        nuggets = entry.get("nuggets", [])
        if not isinstance(nuggets, list):
            problems.add(f"{path}.nuggets", f"must be a list, not {quoted(nuggets)}")
        elif len(nuggets) > MAX_NUGGETS_PER_RESPONSE:
            problems.add(f"{path}.nuggets", f"has {len(nuggets)} nuggets; at most {MAX_NUGGETS_PER_RESPONSE} "
                                            "are allowed per item")
        else:
            for k, nugget in enumerate(nuggets):
                where = f"{path}.nuggets[{k}]"
                if not isinstance(nugget, dict):
                    problems.add(where, f"must be an object with text and act, not {quoted(nugget)}")
                    continue
                text = check_text(nugget.get("text"), f"{where}.text", problems)
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
    problems = Problems()
    responses: list[str | None] = [None] * len(gold)
    nuggets_by_item: list[list[Nugget] | None] = [None] * len(gold)
    for position, item_id, entry in _entries(data, "run", problems):
        path = f"[{position}]"
        item = gold.index.get(item_id)
        if item is None:
            problems.add(f"{path}.id", f"{quoted(item_id)} is not an item of the gold")
            continue
        if "response" not in entry:
            problems.add(f"{path}.response", "is missing")
            continue
        response = check_text(entry["response"], f"{path}.response", problems, MAX_RESPONSE_CHARS)
        if response is None:
            continue
        responses[item] = response
        if "nuggets" not in entry:
            continue
        nuggets = entry["nuggets"]
        if not isinstance(nuggets, list) or not nuggets:
            problems.add(f"{path}.nuggets", f"must be a non-empty list of {{\"text\", \"act\"}} objects, "
                                            f"not {quoted(nuggets)}")
            continue
        if len(nuggets) > MAX_NUGGETS_PER_RESPONSE:
            problems.add(f"{path}.nuggets", f"has {len(nuggets)} nuggets; at most {MAX_NUGGETS_PER_RESPONSE} "
                                            "are allowed per response")
            continue
        parsed: list[Nugget] = []
        complete = True
        for k, nugget in enumerate(nuggets):
            where = f"{path}.nuggets[{k}]"
            if not isinstance(nugget, dict):
                problems.add(where, f"must be an object with text and act, not {quoted(nugget)}")
                complete = False
                continue
            text = check_text(nugget.get("text"), f"{where}.text", problems, MAX_RESPONSE_CHARS)
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
            shown = ", ".join(quoted(item_id) for item_id in missing[:20])
            more = f" and {len(missing) - 20} more" if len(missing) > 20 else ""
            problems.add("", f"{len(missing)} gold item(s) have no response: {shown}{more}")
    problems.raise_if_any()
    present = [item for item, response in enumerate(responses) if response is not None]
    if not present:
        raise ValidationFailed(["the run has no response to any gold item"])
    return ResponseRun([responses[item] for item in present], [nuggets_by_item[item] for item in present], present)


def _sentence_bound(text: str) -> int:
    """At least as many sentences as the sentencizer can find: it ends one only after punctuation."""
    import unicodedata

    marks = sum(1 for character in text if unicodedata.category(character).startswith("P"))
    return min(MAX_SENTENCE_NUGGETS, marks + 1)


def nugget_work(run: ResponseRun, gold: ResponseGold) -> tuple[int, int]:
    """The characters of every variant turn scoring this run's nuggets covers, and the item (gold
    row) of the costliest response: a response's length times its variants (the turn, then per
    nugget the turn without it and one per alternative). A response without nuggets is counted
    with as many sentences as it could be split into."""
    total = 0
    costliest, worst = -1, -1
    for turn in run.turns(gold):
        if turn.nuggets is not None:
            variants = variant_count(turn.nuggets)
        else:
            variants = 1 + _sentence_bound(turn.response)
        work = variants * len(turn.response)
        total += work
        if work > worst:
            costliest, worst = turn.item, work
    return total, costliest


def check_nugget_work(run: ResponseRun, gold: ResponseGold, data: object) -> None:
    """Refuse a run whose nugget scores would cover more than ``MAX_NUGGET_WORK`` characters,
    naming the entry that costs most."""
    total, item = nugget_work(run, gold)
    if total <= MAX_NUGGET_WORK:
        return
    position = next((k for k, entry in enumerate(data) if isinstance(entry, dict)
                     and canonical_id(entry.get("id")) == gold.ids[item]), None) if isinstance(data, list) else None
    where = f"; the costliest response is [{position}]" if position is not None else ""
    raise ValidationFailed([
        f"nugget scores of this run would cover {total:,} characters of variant responses (per response: its "
        f"length times 1 + per nugget 1 + its alternatives); at most {MAX_NUGGET_WORK:,} are allowed{where}"])
