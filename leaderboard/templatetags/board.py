"""Small template helpers for leaderboard tables."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import template

register = template.Library()


@register.filter
def get(mapping: dict | None, key: Any) -> Any:
    return (mapping or {}).get(key)


@register.filter
def has_subtask(board: Any, subtask: str) -> bool:
    return bool(board.columns_for(subtask))


@register.filter
def per_dimension(columns: list, dimension: str) -> int:
    return sum(1 for column in columns if column.dimension == dimension)


@register.filter
def first_measures(quality: dict) -> list[str]:
    return list(next(iter(quality.values()), {}))


@register.simple_tag
def qs(**params: Any) -> str:
    """A query string from the given parameters, leaving out empty ones (escaped by autoescape)."""
    return urlencode({key: value for key, value in params.items() if value not in (None, "")})
