"""A metrics task's configuration (:class:`MetricConfig`, validated with every problem named), the
baselines it may build, and a parsed run (:class:`MetricRun`)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from scoring.kinds.metric import session
from scoring.kinds.metric.dimensions import DIMENSION_NAME, LANGUAGE_TAG, LEVELS
from scoring.kinds.metric.meta.registry import MEASURES

# Reference metrics the kind can place on the board, in board order: (name, what the gold needs).
REFERENCE_BASELINES: tuple[str, ...] = ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "delta-bleu", "posscore")
SESSION_BASELINES: tuple[str, ...] = tuple(name.replace("_", "-") for name in session.SESSION_MEASURES)
BASELINES: tuple[str, ...] = ("random", *REFERENCE_BASELINES, *SESSION_BASELINES)

# Bounds that keep one scoring job's work and memory reasonable (per-run intervals).
MAX_RESAMPLES = 100_000
RUN_SCORES = ("one", "per-dimension")
AGREEMENT_LEVELS = ("interval", "ordinal", "nominal")


@dataclass(frozen=True)
class MetricConfig:
    """How a metrics task computes its figures (every field is recorded in the scores' settings).

    ``n_resamples``, ``seed``, ``level``: the percentile bootstrap over contexts behind each
    figure's interval (B, its seed, the interval level). ``rank_intervals``: whether the pooled
    Kendall tau-b and Spearman get intervals too (an exact O(N log N) re-ranking per resample,
    about 0.4 s per run at 20,000 responses and B = 1,000; false leaves them None, see
    docs/metrics.md). ``tie_tolerance``:
    metric scores of two responses closer than this are a tie in predictive power (0: exact
    equality, the seeds' ``dX * dX* > 0``). ``publish_references``: whether the participants'
    data carries the contexts' references (reference-based metrics need them).
    ``baselines``: which of :data:`BASELINES` to build where the gold allows.

    Several dimensions (METRICS-SPEC.md, "Dimensions, levels, languages"): ``dimensions``, the
    ``(name, level)`` pairs the gold judges, and ``languages``, its language codes, name the
    board's columns before any gold exists (a gold must then judge exactly those); empty for a
    one-dimension task. ``run_scores``: ``one`` score per item held against every dimension, or
    ``per-dimension`` scores. ``aggregate``: the measure whose mean over the dimension slices is
    the board's default sort (DSTC's mean Spearman). ``agreement_level``: Krippendorff's alpha
    of the annotators' judgements at this level of measurement. ``from_gold`` (set by the offline
    command only, never from a file): take the dimensions from the gold instead.
    """

    n_resamples: int = 1_000
    seed: int = 0
    level: float = 0.95
    rank_intervals: bool = True
    tie_tolerance: float = 0.0
    publish_references: bool = True
    baselines: tuple[str, ...] = BASELINES
    dimensions: tuple[tuple[str, str], ...] = ()
    languages: tuple[str, ...] = ()
    run_scores: str = "one"
    aggregate: str = "spearman"
    agreement_level: str = "interval"
    from_gold: bool = field(default=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("from_gold")
        data["baselines"] = list(self.baselines)
        data["dimensions"] = [{"name": name, "level": level} for name, level in self.dimensions]
        data["languages"] = list(self.languages)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricConfig:
        """A validated configuration; ``ValueError`` naming every problem (defaults fill the rest)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"invalid task configuration: expected an object, got {type(data).__name__}")
        problems: list[str] = []
        known = set(cls.__dataclass_fields__) - {"from_gold"}
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            problems.append(f"unknown keys {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        values = {key: data[key] for key in known if key in data}

        def integer(key: str, low: int, high: int) -> None:
            value = values.get(key, getattr(cls, key))
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
                problems.append(f"{key}: must be an integer from {low:,} to {high:,}, got {value!r}")

        integer("n_resamples", 1, MAX_RESAMPLES)
        integer("seed", 0, 2**64 - 1)
        level = values.get("level", cls.level)
        if isinstance(level, bool) or not isinstance(level, numbers.Real) or not 0.0 < level < 1.0:
            problems.append(f"level: must be a number strictly between 0 and 1, got {level!r}")
        tolerance = values.get("tie_tolerance", cls.tie_tolerance)
        if isinstance(tolerance, bool) or not isinstance(tolerance, numbers.Real) \
                or not math.isfinite(tolerance) or tolerance < 0:
            problems.append(f"tie_tolerance: must be a finite number >= 0, got {tolerance!r}")
        for key in ("rank_intervals", "publish_references"):
            if not isinstance(values.get(key, True), bool):
                problems.append(f"{key}: must be true or false, got {values[key]!r}")
        chosen = values.get("baselines", list(BASELINES))
        if not isinstance(chosen, list | tuple) or not all(isinstance(name, str) for name in chosen):
            problems.append(f"baselines: must be a list of names from {', '.join(BASELINES)}")
        else:
            strange = [name for name in chosen if name not in BASELINES]
            if strange:
                problems.append(f"baselines: unknown {', '.join(map(repr, strange))} "
                                f"(known: {', '.join(BASELINES)})")
            if len(set(chosen)) != len(chosen):
                problems.append("baselines: a name is listed twice")
            values["baselines"] = tuple(chosen)
        _dimension_settings(values, problems)
        if problems:
            raise ValueError("invalid task configuration: " + "; ".join(problems))
        if "level" in values:
            values["level"] = float(values["level"])
        if "tie_tolerance" in values:
            values["tie_tolerance"] = float(values["tie_tolerance"])
        return cls(**values)


def _dimension_settings(values: dict[str, Any], problems: list[str]) -> None:
    """Check (and normalise in ``values``) the keys of several dimensions."""
    dimensions = values.get("dimensions", [])
    pairs: list[tuple[str, str]] = []
    if not isinstance(dimensions, list | tuple):
        problems.append("dimensions: must be a list of {\"name\", \"level\"} objects")
    for k, entry in enumerate(dimensions if isinstance(dimensions, list | tuple) else []):
        name = entry.get("name") if isinstance(entry, Mapping) else None
        level = entry.get("level", "turn") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not DIMENSION_NAME.match(name):
            problems.append(f"dimensions[{k}].name: must start with a letter and hold only letters, digits, _ and -, "
                            f"at most 24 characters, got {name!r}")
        elif level not in LEVELS:
            problems.append(f"dimensions[{k}].level: must be \"turn\" or \"dialogue\", got {level!r}")
        elif (name, level) in pairs:
            problems.append(f"dimensions[{k}]: {name} at the {level} level is listed twice")
        else:
            pairs.append((name, level))
        extra = sorted(map(str, set(entry) - {"name", "level"})) if isinstance(entry, Mapping) else []
        if extra:
            problems.append(f"dimensions[{k}]: unknown keys {', '.join(extra)} (known: name, level)")
    values["dimensions"] = tuple(pairs)
    languages = values.get("languages", [])
    if not isinstance(languages, list | tuple) or not all(
            isinstance(code, str) and LANGUAGE_TAG.match(code) for code in languages):
        problems.append(f"languages: must be a list of BCP 47 codes such as \"en\", \"zh\", got {languages!r}")
    elif len(set(languages)) != len(languages):
        problems.append("languages: a code is listed twice")
    else:
        values["languages"] = tuple(languages)
    for key, allowed in (("run_scores", RUN_SCORES), ("agreement_level", AGREEMENT_LEVELS),
                         ("aggregate", tuple(MEASURES))):
        if key in values and values[key] not in allowed:
            problems.append(f"{key}: must be one of {', '.join(allowed)}, got {values[key]!r}")
    if values.get("run_scores") == "per-dimension" and not pairs:
        problems.append("run_scores: per-dimension scores need the task's dimensions (dimensions)")


@dataclass
class MetricRun:
    """A parsed run: one score per gold response (NaN for a response a partial run left out),
    the contexts it scores completely (ascending), and how many contexts it leaves out."""

    scores: np.ndarray
    contexts: np.ndarray
    n_missing: int = 0
    warnings: list[str] = field(default_factory=list)
