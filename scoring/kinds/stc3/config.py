"""Task configuration: what a task's labels are and how its scores are aggregated.

Nothing about STC-3 is hard-wired in the measures; the STC-3 values are the preset ``STC3``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from scoring.kinds.stc3.measures import NUGGET_MEASURES, QUALITY_MEASURES, VARIANTS, get_measure

AVERAGINGS: tuple[str, ...] = ("macro", "micro")


@dataclass(frozen=True)
class TaskConfig:
    """Labels and aggregation rules of one shared task.

    ``quality_scale`` is ordered: ordinal measures treat neighbouring labels as one step apart.
    ``alpha`` weighs the customer block against the helpdesk block in ND (eq. 12).
    ``averaging``: ``macro`` gives every dialogue the same weight (eq. 13); ``micro`` pools
    the turns of each side over the whole run, so every customer turn counts the same and
    every helpdesk turn counts the same, and then applies alpha to the two pooled means.
    """

    quality_dimensions: tuple[str, ...]
    quality_scale: tuple[str, ...]
    customer_nugget_types: tuple[str, ...]
    helpdesk_nugget_types: tuple[str, ...]
    alpha: float = 0.5
    averaging: str = "macro"
    variant: str = "paper"
    quality_measures: tuple[str, ...] = field(default=QUALITY_MEASURES)
    nugget_measures: tuple[str, ...] = field(default=NUGGET_MEASURES)

    def __post_init__(self) -> None:
        problems = []
        for name in ("quality_dimensions", "quality_scale", "customer_nugget_types", "helpdesk_nugget_types"):
            labels = getattr(self, name)
            if any(not isinstance(label, str) or not label for label in labels):
                problems.append(f"{name}: every label must be a non-empty string")
            elif len(set(labels)) != len(labels):
                problems.append(f"{name}: labels must be unique")
        for name in ("quality_scale", "customer_nugget_types", "helpdesk_nugget_types"):
            if len(getattr(self, name)) < 2:
                problems.append(f"{name}: needs at least 2 labels")
        if not self.quality_dimensions:
            problems.append("quality_dimensions: needs at least one dimension")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, int | float) or not (
            math.isfinite(self.alpha) and 0.0 <= self.alpha <= 1.0
        ):
            problems.append(f"alpha: must be a number in [0, 1], got {self.alpha!r}")
        if self.averaging not in AVERAGINGS:
            problems.append(f"averaging: must be one of {', '.join(AVERAGINGS)}, got {self.averaging!r}")
        if self.variant not in VARIANTS:
            problems.append(f"variant: must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        for name in self.quality_measures:
            try:
                get_measure(name)
            except ValueError as error:
                problems.append(f"quality_measures: {error}")
        for name in self.nugget_measures:
            try:
                measure = get_measure(name)
            except ValueError as error:
                problems.append(f"nugget_measures: {error}")
                continue
            if measure.bins == "ordinal":
                problems.append(f"nugget_measures: {name} needs ordered bins, but nugget types are nominal")
        if problems:
            raise ValueError("invalid task configuration: " + "; ".join(problems))

    def with_options(self, **changes: Any) -> TaskConfig:
        """A copy with some fields changed (and validated again); None values are ignored."""
        return replace(self, **{key: value for key, value in changes.items() if value is not None})

    def to_dict(self) -> dict[str, Any]:
        return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskConfig:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"invalid task configuration: unknown keys {', '.join(unknown)}")
        values = {key: tuple(value) if isinstance(value, list) else value for key, value in data.items()}
        return cls(**values)


STC3 = TaskConfig(
    quality_dimensions=("A", "S", "E"),
    quality_scale=("2", "1", "0", "-1", "-2"),
    customer_nugget_types=("CNUG0", "CNUG", "CNUG*", "CNaN"),
    helpdesk_nugget_types=("HNUG", "HNUG*", "HNaN"),
)

PRESETS: dict[str, TaskConfig] = {"stc3": STC3}
