"""The templates' ``floatformat`` (evalserver/numbers.py) writes exactly what Django's filter
writes: on random floats, on the decimal ties where half-up and half-even rounding part, on
whole numbers, negative zero, huge and tiny values, and for every argument the templates use."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest
from django.template import Context, Template, defaultfilters
from django.utils import translation
from hypothesis import given, settings
from hypothesis import strategies as st

from evalserver.numbers import floatformat

ROOT = Path(__file__).resolve().parent.parent
# Every argument the project's templates give floatformat, and a few more.
USED = sorted({match.strip('"') for path in ROOT.rglob("*.html") if ".venv" not in path.parts
               for match in re.findall(r"floatformat:(\"?-?\d+\"?)", path.read_text(encoding="utf-8"))})
ARGUMENTS: list[Any] = [*USED, -1, 0, 1, 2, 3, 4, 6, -4, "4", "-3", "2g", "3u", "x", None]
SPECIAL = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.125, 0.12345, -0.12345, 0.00005, -0.00005, 0.99995, 9.99995,
           1e-9, -1e-9, 1e16, 1.2345e20, 123456789.123456, float("inf"), float("-inf"), float("nan"),
           0, 7, -7, 10**20, True, False, "0.12345", "abc", None]


def test_the_arguments_the_templates_use_were_found() -> None:
    assert {"4", "3", "-3", "2", "0"} <= set(USED)


@pytest.mark.parametrize("argument", ARGUMENTS, ids=repr)
def test_the_same_text_as_djangos_filter(argument: Any) -> None:
    generator = random.Random(7)
    values = SPECIAL + [generator.uniform(-3, 3) for _ in range(3000)] + \
        [round(generator.uniform(-3, 3), generator.randint(1, 7)) for _ in range(3000)] + \
        [generator.randint(-10**6, 10**6) / 10**generator.randint(0, 6) for _ in range(3000)]
    for value in values:
        if argument is None:
            assert floatformat(value) == defaultfilters.floatformat(value), value
        else:
            assert floatformat(value, argument) == defaultfilters.floatformat(value, argument), (value, argument)


@settings(max_examples=3000, deadline=None)
@given(value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers()),
       places=st.integers(min_value=-8, max_value=8))
def test_any_number_and_any_whole_argument(value: float, places: int) -> None:
    assert floatformat(value, places) == defaultfilters.floatformat(value, places)


def test_a_language_with_another_decimal_mark_gets_djangos_own(settings: Any) -> None:
    settings.USE_I18N = True
    with translation.override("de"):
        assert floatformat(0.12345, 4) == defaultfilters.floatformat(0.12345, 4) == "0,1235"
    settings.USE_THOUSAND_SEPARATOR = True
    assert floatformat(12345.5, 1) == defaultfilters.floatformat(12345.5, 1) == "12,345.5"


def test_templates_use_it() -> None:
    """The built-in library is what a template's ``floatformat`` finds (the settings' TEMPLATES)."""
    rendered = Template("{{ a|floatformat:4 }} {{ b|floatformat:'-3' }}").render(Context({"a": 0.12345, "b": 2.0}))
    assert rendered == "0.1235 2"
    from django.template import engines

    assert engines["django"].engine.template_builtins[-1].filters["floatformat"] is floatformat
