"""A toy task kind, defined outside the server, to show that a kind plugs in with a few lines.

Items are numbers; a run guesses them. Two measures: absolute error (mean of items, lower is
better, official) and the ratio of summed guesses to summed values (a corpus-level figure,
higher is better). Tests register it, create a task of this kind and send it through uploads,
scoring, boards, statistics and exports without any change to ``tasks/`` or ``leaderboard/``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from scoring.kinds import Baseline, Kind, MeasureSpec, Scored, ValidationFailed
from scoring.kinds.base import canonical_record


@dataclass(frozen=True)
class ToyConfig:
    scale: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"scale": self.scale}


@dataclass
class ToyGold:
    item_ids: list[str]
    values: np.ndarray
    warnings: list[str]

    def to_bytes(self) -> bytes:
        return np.asarray(self.values, dtype=np.float64).tobytes() + b"|" + ",".join(self.item_ids).encode()


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class ToyKind(Kind):
    name = "toy"
    title = "Guess the number"
    presets = {"toy": {"scale": 1.0}}
    default_preset = "toy"

    def config(self, data: Any) -> ToyConfig:
        unknown = set(data) - {"scale"}
        if unknown or not _number(data.get("scale", 1.0)):
            raise ValueError("invalid task configuration: only 'scale', a finite number")
        return ToyConfig(**data)

    def compile_gold(self, data: object, config: ToyConfig) -> ToyGold:
        if not isinstance(data, list) or not data:
            raise ValidationFailed(["$: expected a non-empty list of objects"])
        problems = [f"$[{i}]: expected {{\"id\": ..., \"value\": number}}" for i, entry in enumerate(data)
                    if not isinstance(entry, dict) or "id" not in entry or not _number(entry.get("value"))]
        if problems:
            raise ValidationFailed(problems)
        return ToyGold([str(entry["id"]) for entry in data], np.array([entry["value"] for entry in data], float), [])

    def gold_from_bytes(self, blob: bytes) -> ToyGold:
        values, ids = blob.rsplit(b"|", 1)
        return ToyGold(ids.decode().split(","), np.frombuffer(values), [])

    def parse_run(self, data: object, gold: ToyGold, config: ToyConfig, *, allow_missing: bool = False) -> Any:
        if not isinstance(data, list):
            raise ValidationFailed(["$: expected a list of {\"id\": ..., \"guess\": number}"])
        guesses: dict[str, float] = {}
        problems = []
        for i, entry in enumerate(data):
            if not isinstance(entry, dict) or not _number(entry.get("guess")):
                problems.append(f"$[{i}].guess: expected a finite number")
            else:
                guesses[str(entry.get("id"))] = float(entry["guess"])
        problems += [f"$: missing id {item!r}" for item in gold.item_ids if item not in guesses]
        problems += [f"$: id {item!r} is not in the gold" for item in guesses if item not in set(gold.item_ids)]
        if problems:
            raise ValidationFailed(problems)
        return np.array([guesses[item] for item in gold.item_ids], float)

    def measures(self, config: ToyConfig, gold: Any = None) -> list[MeasureSpec]:
        return [MeasureSpec("error", "error", "Absolute error", "ERR", False, (0.0, math.inf), "toy", official=True,
                            group="toy", group_title="Toy numbers"),
                MeasureSpec("ratio", "ratio", "Sum of guesses / sum of values", "RATIO", True, (0.0, math.inf), "toy",
                            group="toy", group_title="Toy numbers",
                            headline="corpus", corpus=lambda totals: float(totals[0] / totals[1]))]

    def score(self, run: np.ndarray, gold: ToyGold, config: ToyConfig, items: np.ndarray | None = None) -> Scored:
        index = np.arange(len(gold.item_ids)) if items is None else np.asarray(items)
        error = np.abs(run[index] - gold.values[index]) * config.scale
        statistics = np.column_stack([run[index], gold.values[index]])
        return Scored([gold.item_ids[i] for i in index], {"error": error, "ratio": run[index] / gold.values[index]},
                      {"error": float(error.mean()), "ratio": float(statistics[:, 0].sum() / statistics[:, 1].sum())},
                      settings={"scale": config.scale}, statistics={"ratio": statistics})

    def baselines(self, gold: ToyGold, config: ToyConfig) -> list[Baseline]:
        return [Baseline("one", "Baseline: guesses 1 everywhere.", [{"id": i, "guess": 1.0} for i in gold.item_ids])]

    def hidden_annotations(self, entry: Any, config: ToyConfig) -> Any:
        if "value" in entry and entry.get("id") is not None:
            yield str(entry["id"]), canonical_record("value", entry["id"], entry["value"])

    def participant_data(self, data: object, config: ToyConfig) -> list[dict[str, Any]]:
        return [{"id": entry["id"]} for entry in data]  # type: ignore[union-attr]

    def format_description(self, config: ToyConfig) -> dict[str, Any]:
        return {"summary": "A JSON list: one guess per item.",
                "fields": [{"path": "[i].id", "type": "string", "meaning": "the item's id"},
                           {"path": "[i].guess", "type": "number", "meaning": "your guess of its value"}],
                "example": {"id": "<item id>", "guess": 1.5}, "notes": []}
