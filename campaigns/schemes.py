"""What each kind of campaign asks of assessors: its dimensions, their scales or labels and what
each point means, and the shape of one answer. The dialogues and references schemes are fixed by
the papers; the responses scheme is the organiser's, read from a few lines of text."""

from __future__ import annotations

import re
from typing import Any

from campaigns.models import DIALOGUES, REFERENCES

# STC-3's scheme (Zeng et al. 2017; Sakai, EVIA 2017): A, E, S on -2..2 per dialogue and one
# nugget label per turn, the labels allowed depending on who wrote the turn.
QUALITY = (("A", "task accomplishment: was the customer's problem solved?"),
           ("E", "dialogue effectiveness: did the helpdesk handle it efficiently?"),
           ("S", "customer satisfaction: how satisfied would the customer be?"))
QUALITY_POINTS = {"-2": "very poor", "-1": "poor", "0": "neither", "1": "good", "2": "very good"}
NUGGET_LABELS = {
    "customer": [("CNUG0", "trigger: states the problem"), ("CNUG", "a regular nugget: helps solve it"),
                 ("CNUG*", "goal: the problem is solved or closed"), ("CNaN", "not a nugget")],
    "helpdesk": [("HNUG", "a regular nugget: helps solve it"), ("HNUG*", "goal: solves or closes it"),
                 ("HNaN", "not a nugget")],
}
# deltaBLEU's references are rated for appropriateness (Galley et al. 2015): five points, mapped
# linearly to a weight in [-1, 1] when the gold is built.
# The dimension is called "rating", as the judgements files name it (JUDGEMENTS-SPEC.md).
REFERENCE_RATING = {"name": "rating", "min": 1, "max": 5, "level": "ordinal",
                    "meaning": "how appropriate is this reply to the conversation?",
                    "points": {"1": "inappropriate", "2": "mostly inappropriate", "3": "neutral",
                               "4": "mostly appropriate", "5": "very appropriate"}}
DEFAULT_RESPONSE_DIMENSIONS = ("appropriateness 1-5: inappropriate or unrecognisable | mostly inappropriate | "
                               "neither | appropriate | very appropriate")
MAX_DIMENSIONS = 12
MAX_POINTS = 11


def dimensions_for(kind: str, text: str = "") -> list[dict[str, Any]]:
    """The dimensions of a campaign of this kind (``text``: the organiser's, for responses)."""
    if kind == DIALOGUES:
        return [{"name": name, "min": -2, "max": 2, "level": "ordinal", "meaning": meaning,
                 "points": dict(QUALITY_POINTS)} for name, meaning in QUALITY] + [
            {"name": "nugget", "level": "nominal", "labels": {sender: [label for label, _ in labels]
                                                                for sender, labels in NUGGET_LABELS.items()}}]
    if kind == REFERENCES:
        return [dict(REFERENCE_RATING)]
    return parse_dimensions(text or DEFAULT_RESPONSE_DIMENSIONS)


LINE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_-]{0,39})\s+(?P<min>-?\d+)\s*(?:-|\.\.|to)\s*(?P<max>-?\d+)"
                  r"(?:\s*\((?P<level>ordinal|interval)\))?\s*(?::\s*(?P<points>.*))?$")


def parse_dimensions(text: str) -> list[dict[str, Any]]:
    """Dimensions from lines ``NAME MIN-MAX [(interval)]: meaning of MIN | ... | meaning of MAX``
    (the meanings optional, one per point when given). ValueError lists every problem by line."""
    problems, found = [], []
    lines = [line.strip() for line in text.replace("\x00", "").splitlines() if line.strip()]
    if not lines:
        raise ValueError("dimensions: give at least one line, e.g. " + DEFAULT_RESPONSE_DIMENSIONS)
    for number, line in enumerate(lines, start=1):
        match = LINE.match(line)
        if match is None:
            problems.append(f"dimensions line {number}: {line[:80]!r} is not 'NAME MIN-MAX: meaning | ... | meaning' "
                            "(a name of letters, digits, _ or -, then two whole numbers)")
            continue
        low, high = int(match["min"]), int(match["max"])
        name = match["name"]
        if not low < high or high - low + 1 > MAX_POINTS:
            problems.append(f"dimensions line {number}: {name}'s scale {low}-{high} needs 2 to {MAX_POINTS} points, "
                            "the lower number first")
            continue
        meanings = [part.strip() for part in (match["points"] or "").split("|")] if match["points"] else []
        if meanings and len(meanings) != high - low + 1:
            problems.append(f"dimensions line {number}: {name} has {high - low + 1} points but {len(meanings)} "
                            "meanings (give one per point, separated by |, or none)")
            continue
        if any(dimension["name"] == name for dimension in found):
            problems.append(f"dimensions line {number}: {name} is named twice")
            continue
        found.append({"name": name, "min": low, "max": high, "level": match["level"] or "ordinal",
                      "points": {str(low + index): meaning[:200] for index, meaning in enumerate(meanings)}})
    if len(lines) > MAX_DIMENSIONS:
        problems.append(f"dimensions: at most {MAX_DIMENSIONS} (got {len(lines)})")
    if problems:
        raise ValueError("; ".join(problems))
    return found


def dimensions_text(dimensions: list[dict[str, Any]]) -> str:
    """The lines ``parse_dimensions`` reads back (to show a campaign's scheme in its own form)."""
    lines = []
    for dimension in dimensions:
        if "labels" in dimension:
            continue
        level = " (interval)" if dimension.get("level") == "interval" else ""
        points = dimension.get("points") or {}
        meanings = " | ".join(points.get(str(value), "") for value in range(dimension["min"], dimension["max"] + 1))
        lines.append(f"{dimension['name']} {dimension['min']}-{dimension['max']}{level}"
                     + (f": {meanings}" if points else ""))
    return "\n".join(lines)


def scales(dimensions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The scale dimensions (not the nugget labels)."""
    return [dimension for dimension in dimensions if "labels" not in dimension]


def answer_from_form(kind: str, dimensions: list[dict[str, Any]], data: Any, senders: list[str]) -> tuple[
        dict[str, Any], list[str]]:
    """One answer from the judging form: (values in the judgements file's shape, problems). Every
    field is required and must be one of its points or labels: an answer is saved whole or not."""
    problems: list[str] = []
    values: dict[str, Any] = {}
    for dimension in scales(dimensions):
        raw = str(data.get(dimension["name"], "")).strip()
        try:
            value = int(raw)
        except ValueError:
            value = None
        if value is None or not dimension["min"] <= value <= dimension["max"]:
            problems.append(f"{dimension['name']}: choose one of {dimension['min']} to {dimension['max']}")
        else:
            values[dimension["name"]] = value
    if kind != DIALOGUES:
        return {"values": values}, problems
    nuggets = []
    for index, sender in enumerate(senders):
        allowed = [label for label, _ in NUGGET_LABELS[sender]]
        label = str(data.get(f"nugget-{index}", ""))
        if label not in allowed:
            problems.append(f"turn {index + 1} ({sender}): choose one of {', '.join(allowed)}")
        nuggets.append(label)
    return {"quality": values, "nugget": nuggets}, problems


def answer_fields(kind: str, values: dict[str, Any] | None) -> dict[str, Any]:
    """A saved answer as the form's field values (to show it again on going back)."""
    if not values:
        return {}
    if kind == DIALOGUES:
        fields = {name: str(value) for name, value in (values.get("quality") or {}).items()}
        fields.update({f"nugget-{index}": label for index, label in enumerate(values.get("nugget") or [])})
        return fields
    return {name: str(value) for name, value in (values.get("values") or {}).items()}
