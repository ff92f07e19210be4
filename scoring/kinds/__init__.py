"""Registry of task kinds: a kind's name maps to the one object that implements it.

Error messages about unknown kinds are built from the registry, so they cannot drift from it.
"""

from __future__ import annotations

from scoring.kinds.base import (
    Baseline,
    Kind,
    MeasureGroup,
    MeasureSpec,
    Scored,
    ValidationFailed,
    describe_value,
    grouped,
    measure_key,
)
from scoring.kinds.metric import MetricKind
from scoring.kinds.response import ResponseKind
from scoring.kinds.stc3 import Stc3Kind

KINDS: dict[str, Kind] = {}


def register(kind: Kind) -> Kind:
    """Add a kind to the registry (tests register toy kinds; a name is taken once)."""
    if kind.name in KINDS and type(KINDS[kind.name]) is not type(kind):
        raise ValueError(f"a different kind is registered as {kind.name!r} already")
    KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown task kind {name!r}; known kinds: {', '.join(sorted(KINDS))}") from None


register(Stc3Kind())
register(MetricKind())
register(ResponseKind())

__all__ = ["KINDS", "Baseline", "Kind", "MeasureGroup", "MeasureSpec", "Scored", "ValidationFailed", "describe_value",
           "get_kind", "grouped", "measure_key", "register"]
