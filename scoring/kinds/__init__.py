"""The task kinds: a registry from a kind's name to the one object that implements it.

Each kind is a package of its own under ``scoring/kinds/<name>/`` with the same file names
(``kind.py`` its adapter over ``base.Kind``, ``formats.py`` its files, ...). The registry holds
dotted paths and imports a kind on first use (as healthchecks' ``TRANSPORTS``): asking for one
kind never loads another's libraries (the response kind brings spaCy and sacrebleu). Error
messages about unknown kinds are built from the registry, so they cannot drift from it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module
from types import ModuleType

from scoring.kinds.base import (
    Baseline,
    Kind,
    MeasureGroup,
    MeasureSpec,
    Scored,
    describe_value,
    grouped,
    measure_key,
)
from scoring.validation import ValidationFailed

# name -> "module:class" of the kinds the project ships.
BUILT_IN = {
    "stc3": "scoring.kinds.stc3.kind:Stc3Kind",
    "metric": "scoring.kinds.metric.kind:MetricKind",
    "response": "scoring.kinds.response.kind:ResponseKind",
}


# The kind the offline commands score when none is named (the server always names one).
DEFAULT_KIND = "stc3"

# name -> module of a kind's part of the offline ``score`` command: ``OPTIONS`` (the options it
# owns, refused with another kind), ``add_arguments(parser)``, and either ``run(options, stdout,
# stderr)`` (a path of its own) or ``configure(options, config)`` (applied before scoring through
# the kind interface). Strings, so that the generic command imports no kind.
OFFLINE = {
    "stc3": "scoring.kinds.stc3.offline",
    "response": "scoring.kinds.response.offline",
    "metric": "scoring.kinds.metric.offline",
}


def offline_hooks() -> dict[str, ModuleType]:
    """Every kind's offline module, by kind name (imported here, each light: none loads its kind's
    libraries before it is used)."""
    return {name: import_module(path) for name, path in OFFLINE.items()}


class Registry(Mapping[str, Kind]):
    """Kinds by name, each made once, on first use; tests ``register`` toy kinds and ``pop`` them."""

    def __init__(self, paths: dict[str, str]) -> None:
        self._paths = dict(paths)
        self._made: dict[str, Kind] = {}

    def __getitem__(self, name: str) -> Kind:
        if name not in self._made:
            module, _, attribute = self._paths[name].partition(":")  # KeyError for an unknown name
            self._made[name] = getattr(import_module(module), attribute)()
        return self._made[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def __contains__(self, name: object) -> bool:
        return name in self._paths

    def add(self, kind: Kind) -> None:
        self._paths[kind.name] = f"{type(kind).__module__}:{type(kind).__qualname__}"
        self._made[kind.name] = kind

    def pop(self, name: str, default: Kind | None = None) -> Kind | None:
        if name in BUILT_IN:
            raise ValueError(f"the built-in kind {name!r} cannot be removed")
        self._paths.pop(name, None)
        return self._made.pop(name, default)


KINDS = Registry(BUILT_IN)


def register(kind: Kind) -> Kind:
    """Add a kind to the registry (tests register toy kinds; a name is taken once)."""
    if kind.name in KINDS and type(KINDS[kind.name]) is not type(kind):
        raise ValueError(f"a different kind is registered as {kind.name!r} already")
    KINDS.add(kind)
    return kind


def get_kind(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown task kind {name!r}; known kinds: {', '.join(sorted(KINDS))}") from None


__all__ = ["BUILT_IN", "DEFAULT_KIND", "KINDS", "OFFLINE", "Baseline", "Kind", "MeasureGroup", "MeasureSpec",
           "Registry", "Scored", "ValidationFailed", "describe_value", "get_kind", "grouped", "measure_key",
           "offline_hooks", "register"]
