"""Making a campaign: its items from a file of dialogues, a gold version or chosen runs (pooled),
its check items, its assessors; every problem named before anything is stored (``Rejected``)."""

from __future__ import annotations

import random
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.contrib.auth import get_user_model
from django.db import transaction

from campaigns.models import DIALOGUES, KINDS_FOR_TASK, REFERENCES, Assessor, Campaign, Item
from campaigns.schemes import NUGGET_LABELS, dimensions_for, scales
from scoring.validation import Problems, ValidationFailed, canonical_id, check_text, parse_json
from tasks import blobs
from tasks.errors import Rejected
from tasks.models import GoldVersion, Run, Task
from tasks.runfiles import read_run_file

MAX_ITEMS = 20_000
MAX_ASSESSORS = 500
SENDERS = tuple(NUGGET_LABELS)


@dataclass
class Plan:
    """What an organiser asks for (the dashboard form and ``manage.py create_campaign`` both fill it)."""

    name: str
    kind: str
    per_item: int = 3
    instructions: str = ""
    dimensions: str = ""  # the responses kind's lines (schemes.parse_dimensions)
    gold_version: GoldVersion | None = None
    dialogues: bytes | None = None  # a file of dialogues without annotations (dialogues kind)
    runs: list[Run] = field(default_factory=list)
    item_ids: list[str] = field(default_factory=list)  # empty: every item of the gold version
    checks: bytes | None = None
    assessors: list[str] = field(default_factory=list)  # usernames
    seed: int = 40


def normalised(text: str) -> str:
    """The text two responses are compared by when pooled: Unicode NFC, whitespace runs as one
    space, no leading or trailing space (issue 40.1: the same text is judged once)."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFC", text)).strip()


def _turns(value: Any, path: str, problems: Problems) -> list[dict[str, str]]:
    """STC-3 turns ``[{"sender", "utterances": [...]}]`` as ``[{"sender", "text"}]``."""
    if not isinstance(value, list) or not value:
        problems.add(path, "must be a non-empty list of turns")
        return []
    turns = []
    for index, turn in enumerate(value):
        where = f"{path}[{index}]"
        if not isinstance(turn, dict):
            problems.add(where, "must be an object with sender and utterances")
            continue
        sender = turn.get("sender")
        if sender not in SENDERS:
            problems.add(f"{where}.sender", f"must be one of {', '.join(SENDERS)}")
        utterances = turn.get("utterances")
        if not isinstance(utterances, list) or not utterances:
            problems.add(f"{where}.utterances", "must be a non-empty list of strings")
            continue
        texts = [check_text(text, f"{where}.utterances[{number}]", problems) for number, text in enumerate(utterances)]
        turns.append({"sender": sender, "text": "\n".join(text for text in texts if text), "utterances": utterances})
    return turns


def dialogue_items(data: Any, what: str) -> list[tuple[str, dict[str, Any]]]:
    """(id, content) of each dialogue of a STC-3 file (``[{"id", "turns"}]``; annotations, if any,
    are never read: an assessor sees the turns only)."""
    problems = Problems()
    if not isinstance(data, list) or not data:
        raise ValidationFailed([f"{what}: must be a non-empty JSON list of dialogues {{\"id\", \"turns\"}}"])
    found, seen = [], set()
    for index, entry in enumerate(data[:MAX_ITEMS + 1]):
        path = f"[{index}]"
        if not isinstance(entry, dict):
            problems.add(path, "must be an object with id and turns")
            continue
        key = canonical_id(entry.get("id"))
        if key is None:
            problems.add(f"{path}.id", "must be a non-empty string or whole number")
        elif key in seen:
            problems.add(f"{path}.id", f"{key!r} appears twice")
        seen.add(key)
        turns = _turns(entry.get("turns"), f"{path}.turns", problems)
        if key is not None:
            found.append((key, {"turns": turns}))
    for _, content in found:
        # What assessors see (sender, text); the utterances as given are kept for the gold (sources).
        content["original"] = [{"sender": turn["sender"], "utterances": turn.pop("utterances")}
                               for turn in content["turns"]]
    if len(data) > MAX_ITEMS:
        problems.add("", f"{len(data):,} dialogues; a campaign takes at most {MAX_ITEMS:,}")
    problems.raise_if_any()
    return found


def gold_source(version: GoldVersion) -> Any:
    """The gold file of a version as uploaded (kept by its SHA-256)."""
    if not version.source_sha256 or not blobs.exists("gold", version.source_sha256):
        raise Rejected([f"gold version {version.number}: its file was not kept (loaded before gold files were), "
                        "so its items cannot be judged; load it again"])
    return parse_json(blobs.read("gold", version.source_sha256), "gold file")


def _context(entry: dict[str, Any]) -> list[dict[str, str]]:
    return [{"sender": str(turn.get("sender", "")), "text": str(turn.get("text", ""))}
            for turn in entry.get("context") or [] if isinstance(turn, dict)]


def reference_items(gold: list[dict[str, Any]], chosen: set[str]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Each reference of each chosen gold item (all items when none is chosen); an extended gold
    version's vBLEU or vBERTScore candidates are references like the others."""
    found = []
    for entry in gold:
        if chosen and entry["id"] not in chosen:
            continue
        for index, reference in enumerate(entry.get("references") or []):
            found.append((f"{entry['id']}#{index}", {"context": _context(entry), "text": reference["text"]},
                          {"item": entry["id"], "reference": index}))
    return found


def _responses_of_runs(task: Task, runs: list[Run], gold: list[dict[str, Any]], chosen: set[str],
                       seed: int) -> list[tuple[str, dict[str, Any], dict[str, Any], list[int]]]:
    """The chosen runs' responses to the chosen items, pooled per item: a text equal after
    ``normalised`` to one already taken is the same item, and every run that gave it is among its
    sources. Keys are ``<item>/<n>`` with n in a seeded random order, so a key says nothing of a run."""
    contexts = {entry["id"]: _context(entry) for entry in gold}
    pools: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        for entry in orjson.loads(read_run_file(run)):
            item = canonical_id(entry.get("id"))
            if item not in contexts or (chosen and item not in chosen):
                continue
            text = str(entry.get("response", ""))
            pooled = pools.setdefault(item, {}).setdefault(normalised(text), {"text": text, "runs": [], "teams": set()})
            pooled["runs"].append(run.pk)
            if run.team_id:
                pooled["teams"].add(run.team_id)
    found = []
    shuffle = random.Random(seed)
    for item in sorted(pools):
        texts = sorted(pools[item])
        shuffle.shuffle(texts)
        for number, text in enumerate(texts, start=1):
            pooled = pools[item][text]
            found.append((f"{item}/{number}", {"context": contexts[item], "text": pooled["text"]},
                          {"item": item, "runs": sorted(pooled["runs"])}, sorted(pooled["teams"])))
    return found


def _responses_of_metric_gold(gold: list[dict[str, Any]], chosen: set[str]) -> list[
        tuple[str, dict[str, Any], dict[str, Any], list[int]]]:
    """A metrics-track gold's responses (its systems' names hidden), pooled per context like runs'
    responses; the sources keep every response id the judgements stand for."""
    found = []
    for entry in gold:
        if chosen and entry["id"] not in chosen:
            continue
        pooled: dict[str, dict[str, Any]] = {}
        for response in entry.get("responses") or []:
            text = str(response.get("text", ""))
            pooled.setdefault(normalised(text), {"text": text, "ids": []})["ids"].append(str(response["id"]))
        for value in pooled.values():
            key = value["ids"][0] if len(value["ids"]) == 1 else f"{entry['id']}/{'+'.join(value['ids'])}"[:300]
            found.append((key, {"context": _context(entry), "text": value["text"]},
                          {"item": entry["id"], "responses": value["ids"]}, []))
    return found


def check_items(kind: str, dimensions: list[dict[str, Any]], content: bytes) -> list[tuple[str, dict, dict]]:
    """Check items with a known answer: dialogues ``[{"id", "turns", "answer": {"quality", "nugget"}}]``,
    otherwise ``[{"id", "context": [{"sender", "text"}], "text", "answer": {dimension: value}}]``."""
    data = parse_json(content, "check items file")
    problems = Problems()
    if not isinstance(data, list) or not data:
        raise ValidationFailed(["check items file: must be a non-empty JSON list"])
    found = []
    for index, entry in enumerate(data[:1000]):
        path = f"[{index}]"
        if not isinstance(entry, dict):
            problems.add(path, "must be an object")
            continue
        key = canonical_id(entry.get("id"))
        if key is None:
            problems.add(f"{path}.id", "must be a non-empty string")
            continue
        answer = entry.get("answer")
        if not isinstance(answer, dict):
            problems.add(f"{path}.answer", "must be an object with the known answer")
            continue
        if kind == DIALOGUES:
            turns = _turns(entry.get("turns"), f"{path}.turns", problems)
            quality = answer.get("quality") if isinstance(answer.get("quality"), dict) else {}
            for dimension in scales(dimensions):
                if quality.get(dimension["name"]) not in range(dimension["min"], dimension["max"] + 1):
                    problems.add(f"{path}.answer.quality.{dimension['name']}", "must be a whole number from -2 to 2")
            nugget = answer.get("nugget")
            if not isinstance(nugget, list) or len(nugget) != len(turns) or any(
                    label not in [name for name, _ in NUGGET_LABELS.get(turn["sender"], [])]
                    for label, turn in zip(nugget, turns, strict=False)):
                problems.add(f"{path}.answer.nugget", "must give one label per turn, allowed for its sender")
            for turn in turns:
                turn.pop("utterances", None)
            found.append((f"check-{key}", {"turns": turns}, {**quality, "nugget": nugget}))
            continue
        text = check_text(entry.get("text"), f"{path}.text", problems)
        values = {}
        for dimension in scales(dimensions):
            value = answer.get(dimension["name"])
            if value is None:
                continue  # a check item may test some dimensions only
            if type(value) is not int or not dimension["min"] <= value <= dimension["max"]:
                problems.add(f"{path}.answer.{dimension['name']}",
                             f"must be a whole number from {dimension['min']} to {dimension['max']}")
            values[dimension["name"]] = value
        if not values:
            problems.add(f"{path}.answer", "must give the known value of at least one dimension")
        context = entry.get("context") if isinstance(entry.get("context"), list) else []
        found.append((f"check-{key}", {"context": _context({"context": context}), "text": text or ""}, values))
    problems.raise_if_any()
    return found


def _items(task: Task, plan: Plan, dimensions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    chosen = {item.strip() for item in plan.item_ids if item.strip()}
    if plan.kind == DIALOGUES:
        if plan.dialogues is not None:
            made = dialogue_items(parse_json(plan.dialogues, "dialogues file"), "dialogues file")
        elif plan.gold_version is not None:
            made = dialogue_items(gold_source(plan.gold_version), "gold file")
        else:
            raise Rejected(["dialogues: upload a file of dialogues or choose a gold version"])
        made = [(key, content) for key, content in made if not chosen or key in chosen]
        return [{"key": key, "content": {"turns": content["turns"]},
                 "sources": {"item": key, "turns": content["original"]}} for key, content in made]
    if plan.gold_version is None:
        raise Rejected([f"{plan.kind}: choose the gold version whose items are judged"])
    gold = gold_source(plan.gold_version)
    if plan.kind == REFERENCES:
        return [{"key": key, "content": content, "sources": sources}
                for key, content, sources in reference_items(gold, chosen)]
    if task.kind == "metric":
        made = _responses_of_metric_gold(gold, chosen)
    else:
        if not plan.runs:
            raise Rejected(["responses: choose at least one scored run whose responses are judged"])
        made = _responses_of_runs(task, plan.runs, gold, chosen, plan.seed)
    return [{"key": key, "content": content, "sources": sources, "team_ids": teams}
            for key, content, sources, teams in made]


def assessor_users(usernames: list[str]) -> tuple[list[Any], list[str]]:
    """The accounts named (one per line or comma), and a problem for each name without one."""
    names = sorted({name.strip() for name in usernames if name.strip()})
    users = {user.username: user for user in get_user_model().objects.filter(username__in=names, is_active=True)}
    return [users[name] for name in names if name in users], [
        f"assessors: no active account named {name!r}" for name in names if name not in users]


def create_campaign(task: Task, plan: Plan, user: Any = None) -> Campaign:
    """A draft campaign with its items and assessors, or ``Rejected`` with every problem (nothing stored)."""
    problems: list[str] = []
    if plan.kind not in KINDS_FOR_TASK.get(task.kind, ()):
        allowed = ", ".join(KINDS_FOR_TASK.get(task.kind, ())) or "none"
        raise Rejected([f"kind: a {task.kind} task's campaigns judge {allowed}, not {plan.kind!r}"])
    if not plan.name.strip() or "\x00" in plan.name or len(plan.name) > 200:
        problems.append("name: give the campaign a name (up to 200 characters)")
    if not 1 <= plan.per_item <= 50:
        problems.append(f"judgements per item: from 1 to 50 (got {plan.per_item})")
    if plan.gold_version is not None and plan.gold_version.task_id != task.pk:
        problems.append("gold version: not one of this task's")
    if any(run.task_id != task.pk or run.status != Run.DONE for run in plan.runs):
        problems.append("runs: only this task's scored runs can be judged")
    try:
        dimensions = dimensions_for(plan.kind, plan.dimensions)
    except ValueError as error:
        problems.append(str(error))
        dimensions = []
    users, missing = assessor_users(plan.assessors)
    problems += missing
    if len(users) > MAX_ASSESSORS:
        problems.append(f"assessors: at most {MAX_ASSESSORS}")
    items: list[dict[str, Any]] = []
    checks: list[tuple[str, dict, dict]] = []
    # The files are read whatever else is wrong: every problem is named at once.
    if dimensions and not any(problem.startswith(("gold version", "runs")) for problem in problems):
        try:
            items = _items(task, plan, dimensions)
            checks = check_items(plan.kind, dimensions, plan.checks) if plan.checks else []
        except ValidationFailed as failed:
            problems += failed.errors
        except Rejected as rejected:
            problems += rejected.errors
    if not items and not any(problem.startswith(("items", "[", "dialogues", "gold", "responses", "check"))
                             for problem in problems):
        problems.append("items: nothing to judge (no item matched the chosen ids)")
    if len(items) > MAX_ITEMS:
        problems.append(f"items: {len(items):,}; a campaign takes at most {MAX_ITEMS:,}")
    clash = {key for key, _, _ in checks} & {item["key"] for item in items}
    if clash:
        problems.append(f"check items: ids {sorted(clash)[:5]} are also items")
    if problems:
        raise Rejected(problems)
    with transaction.atomic():
        campaign = Campaign.objects.create(task=task, name=plan.name.strip(), kind=plan.kind, per_item=plan.per_item,
                                           instructions=plan.instructions.replace("\x00", ""), dimensions=dimensions,
                                           gold_version=plan.gold_version, seed=plan.seed, created_by=user)
        campaign.runs.set(plan.runs)
        Item.objects.bulk_create([Item(campaign=campaign, key=item["key"], content=item["content"],
                                       sources=item["sources"], team_ids=item.get("team_ids", []))
                                  for item in items]
                                 + [Item(campaign=campaign, key=key, content=content, is_check=True,
                                         check_answer=answer) for key, content, answer in checks])
        add_assessors(campaign, users)
    return campaign


def add_assessors(campaign: Campaign, users: list[Any]) -> list[Assessor]:
    """Give users the assessor role in a campaign under the next free pseudonyms (a01, a02, ...)."""
    taken = set(campaign.assessors.values_list("code", flat=True))
    present = set(campaign.assessors.values_list("user_id", flat=True))
    added, number = [], 1
    for user in users:
        if user.pk in present:
            continue
        while f"a{number:02d}" in taken:
            number += 1
        taken.add(f"a{number:02d}")
        added.append(Assessor.objects.create(campaign=campaign, user=user, code=f"a{number:02d}"))
    return added

