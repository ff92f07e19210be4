"""Several quality dimensions, turn and dialogue level, several languages and annotators in a
metrics-track gold (METRICS-SPEC.md, "Dimensions, levels, languages"; issue 39).

A response's ``human`` is a number (one dimension, today's gold) or an object of dimensions
(``{"overall": 4.3, "engaging": 2.7}``), optionally with its annotators' ``judgements``
(``{"overall": [5, 4, 4]}``, one value per annotator in the same order on every item, ``null``
where an annotator gave none); an item's ``level`` is ``turn`` (the default) or ``dialogue`` (the
item is a whole dialogue); ``language`` is a BCP 47 code. The responses of one context share
their level and language (predictive power compares responses to one context), the items of a
level judge the same dimensions, and ``language`` and ``judgements`` are on every item or on none.

The meta-evaluation runs per *slice*: one dimension at one level in one language. A slice is
whole contexts, so it is :meth:`MetricGold.subset` of them with that dimension as ``human``, and
every existing figure, interval and test applies to it unchanged
(:func:`scoring.kinds.metric.sliced.slice_gold`).

This module reads and checks those fields (:class:`DimensionReader`, called by
:func:`scoring.kinds.metric.formats.load_metric_gold` on a gold that uses any of them), keeps
them compiled (:class:`DimensionData`), names the slices (:func:`make_slices`) and reads a run's
per-dimension ``scores`` (:func:`read_dimension_scores`).
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from scoring.validation import Problems, quoted

LEVELS: tuple[str, ...] = ("turn", "dialogue")
# A dimension name is part of a measure key, a URL and a CSV header: letters, digits, _ and -.
DIMENSION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,23}$")
# BCP 47's common shapes: a 2-3 letter language, then script, region or variant subtags.
LANGUAGE_TAG = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,2}$")
# The longest measure name (system_pearson_disattenuated, 28) plus a dot fits a 64-character key.
MAX_PREFIX = 64 - 29
_OPTIONAL_FIELDS = ("judgements", "level", "language")
# Titles speak the reader's language: the languages of the metric shared tasks by name, others by code.
LANGUAGE_NAMES = {"en": "English", "zh": "Chinese", "es": "Spanish", "ja": "Japanese", "de": "German",
                  "fr": "French", "ko": "Korean", "ar": "Arabic", "ru": "Russian", "pt": "Portuguese",
                  "it": "Italian", "nl": "Dutch", "hi": "Hindi", "id": "Indonesian", "vi": "Vietnamese"}


def language_name(code: str) -> str:
    """``zh`` -> ``Chinese``; ``zh-Hant`` -> ``Chinese (zh-Hant)``; an unlisted code as it is."""
    name = LANGUAGE_NAMES.get(code.split("-")[0].lower())
    return code if name is None else name if "-" not in code else f"{name} ({code})"
_LARGEST = sys.float_info.max


def _finite(value: object) -> bool:
    if type(value) is float:
        return math.isfinite(value)
    return type(value) is int and -_LARGEST <= value <= _LARGEST


def _number_problem(value: object) -> str:
    if value is None:
        return "missing"
    if isinstance(value, bool):
        return f"must be a number, got the boolean {quoted(value)}"
    return f"must be a finite number, got {quoted(value)}"


@dataclass(frozen=True)
class Slice:
    """One dimension at one level in one language: what every figure is computed on.

    ``prefix`` starts its measure keys (``engaging`` in ``engaging.spearman``; empty for the only
    slice of a gold, whose keys are today's); ``title`` says it in words."""

    dimension: str
    level: str
    language: str | None
    prefix: str
    title: str


def make_slices(dimensions: list[tuple[str, str]], languages: list[str]) -> list[Slice]:
    """The slices of ``dimensions`` ((name, level) in order) in every one of ``languages`` (none:
    one unnamed language). A key names the level only for a dimension judged at both levels, the
    language only when there are several."""
    both = {name for name, level in dimensions if (name, "turn") in dimensions and (name, "dialogue") in dimensions}
    several_levels = len({level for _, level in dimensions}) > 1
    found = []
    for name, level in dimensions:
        for language in languages or [None]:
            parts = [name] + ([level] if name in both else []) + ([language] if len(languages) > 1 else [])
            words = [f"{level} level"] if several_levels else []
            words += [language_name(language)] if language is not None and len(languages) > 1 else []
            title = name.replace("_", " ") + (f" ({', '.join(words)})" if words else "")
            found.append(Slice(name, level, language, ".".join(parts), title))
    if len(found) == 1:
        found[0] = dataclasses.replace(found[0], prefix="", title=found[0].dimension.replace("_", " "))
    return found


@dataclass
class DimensionData:
    """The compiled dimension fields, one row per response in the gold's order.

    * ``names``: the dimensions, in order of first appearance; ``levels[d]`` the level of
      dimension ``d`` (a name judged at both levels is two dimensions with the same name);
    * ``values[r, d]``: response r's judgement on dimension d, NaN where r's level lacks it;
    * ``level[r]``: index into :data:`LEVELS`;
    * ``languages`` (in order of first appearance) and ``language[r]`` (index, -1 without);
    * ``judgements[r, d, a]``: annotator a's judgement, NaN where none (None without judgements);
    * ``plain``: the gold's ``human`` was a number (one dimension named ``human``).
    """

    names: list[str]
    levels: list[str]
    values: np.ndarray
    level: np.ndarray
    languages: list[str]
    language: np.ndarray
    judgements: np.ndarray | None
    plain: bool = False

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return list(zip(self.names, self.levels, strict=True))

    def slices(self) -> list[Slice]:
        return make_slices(self.pairs, self.languages)

    def slice_rows(self, chosen: Slice) -> np.ndarray:
        """The responses of a slice (ascending): its level and language, judged on its dimension."""
        d = self.pairs.index((chosen.dimension, chosen.level))
        rows = ~np.isnan(self.values[:, d])
        if chosen.language is not None:
            rows &= self.language == self.languages.index(chosen.language)
        return np.flatnonzero(rows)

    def column(self, chosen: Slice) -> int:
        return self.pairs.index((chosen.dimension, chosen.level))

    def take(self, rows: np.ndarray) -> DimensionData:
        """The rows of some responses (a subset of contexts)."""
        return dataclasses.replace(
            self, values=self.values[rows], level=self.level[rows], language=self.language[rows],
            judgements=None if self.judgements is None else self.judgements[rows])

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = {"dim_names": np.array(self.names, dtype=np.str_), "dim_levels": np.array(self.levels, dtype=np.str_),
                  "dim_values": self.values, "dim_level": self.level,
                  "dim_languages": np.array(self.languages, dtype=np.str_), "dim_language": self.language,
                  "dim_plain": np.array(self.plain)}
        if self.judgements is not None:
            arrays["dim_judgements"] = self.judgements
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Any) -> DimensionData | None:
        if "dim_names" not in arrays:
            return None
        return cls(names=[str(x) for x in arrays["dim_names"]], levels=[str(x) for x in arrays["dim_levels"]],
                   values=arrays["dim_values"], level=arrays["dim_level"],
                   languages=[str(x) for x in arrays["dim_languages"]], language=arrays["dim_language"],
                   judgements=arrays["dim_judgements"] if "dim_judgements" in arrays else None,
                   plain=bool(arrays["dim_plain"]))


def uses_dimensions(data: list) -> bool:
    """Whether any response of a parsed gold uses the fields of this module (else the gold is
    compiled exactly as before them)."""
    for context in data:
        responses = context.get("responses") if isinstance(context, dict) else None
        if isinstance(responses, list):
            for response in responses:
                if isinstance(response, dict) and (isinstance(response.get("human"), dict) or any(
                        response.get(key) is not None for key in _OPTIONAL_FIELDS)):
                    return True
    return False


@dataclass
class _Item:
    values: dict[str, float]
    level: str
    language: str | None
    judgements: dict[str, list[float]]


class DimensionReader:
    """Reads the dimension fields of each response (problems with their paths), checks each
    context, and compiles the kept responses (``keep``) into :class:`DimensionData`."""

    def __init__(self, data: list) -> None:
        responses = [response for context in data if isinstance(context, dict)
                     and isinstance(context.get("responses"), list)
                     for response in context["responses"] if isinstance(response, dict)]
        self.objects = any(isinstance(response.get("human"), dict) for response in responses)
        self.with_language = any(response.get("language") is not None for response in responses)
        self.with_judgements = any(response.get("judgements") is not None for response in responses)
        self.kept: list[_Item] = []
        # Per level: the dimensions its first item named (and where), which every other item must name.
        self.level_dimensions: dict[str, tuple[list[str], str]] = {}
        # Per (dimension, level): annotators per item, from the first item that has judgements.
        self.annotators: dict[tuple[str, str], tuple[int, str]] = {}

    def read(self, response: dict, path: str, problems: Problems) -> tuple[float | None, _Item]:
        """The response's first dimension (the compiled gold's ``human``; None after a problem,
        added with its path) and its fields (for the context's checks even after a problem)."""
        start = len(problems.lines) + problems.dropped
        level = response.get("level", "turn")
        if level not in LEVELS:
            problems.add(f"{path}.level", f"must be \"turn\" or \"dialogue\", got {quoted(level)}")
            level = "turn"
        language = response.get("language")
        if self.with_language:
            if language is None:
                problems.add(f"{path}.language", "missing: other items of the gold name their language, so every "
                                                 "one must")
            elif not isinstance(language, str) or not LANGUAGE_TAG.match(language):
                problems.add(f"{path}.language", f"must be a BCP 47 language code such as \"en\", \"zh\" or "
                                                 f"\"es\", got {quoted(language)}")
        values = self._values(response.get("human"), level, f"{path}.human", problems, response.get("judgements"))
        judgements = self._judgements(response.get("judgements"), values, level, f"{path}.judgements", problems)
        item = _Item(values or {}, level, language, judgements)
        if len(problems.lines) + problems.dropped > start or values is None:
            return None, item
        return next(iter(values.values())), item

    def _values(self, human: object, level: str, path: str, problems: Problems,
                judgements: object = None) -> dict[str, float] | None:
        if not self.objects:
            if not _finite(human):
                problems.add(path, _number_problem(human))
                return None
            # One dimension as a number, its judgements named by the dimension (what the
            # judgements-to-gold command writes): the judgements' name is the dimension's.
            name = next(iter(judgements)) if isinstance(judgements, dict) and len(judgements) == 1 else "human"
            first = self.level_dimensions.setdefault(level, ([name], path))
            if first[0] != [name] and DIMENSION_NAME.match(name):
                problems.add(f"{path[: -len('.human')]}.judgements", f"names the dimension {quoted(name)} but the "
                             f"item at {first[1]} names {quoted(first[0][0])}")
            return {name: float(human)}
        if not isinstance(human, dict) or not human:
            problems.add(path, "must be an object of dimensions ({\"overall\": 4.3, ...}) like the gold's other "
                               f"items, got {quoted(human)}")
            return None
        values: dict[str, float] = {}
        for name, value in human.items():
            if not DIMENSION_NAME.match(name):
                problems.add(path, f"dimension name {quoted(name)}: must start with a letter and hold only letters, "
                                   "digits, _ and -, at most 24 characters")
            elif not _finite(value):
                problems.add(f"{path}.{name}", _number_problem(value))
            else:
                values[name] = float(value)
        first = self.level_dimensions.setdefault(level, (list(human), path))
        if set(first[0]) != set(human):
            problems.add(path, f"judges {', '.join(map(quoted, human))} but the {level}-level item at {first[1]} "
                               f"judges {', '.join(map(quoted, first[0]))}: every item of a level judges the same "
                               "dimensions")
        return values if len(values) == len(human) else None

    def _judgements(self, value: object, values: dict[str, float] | None, level: str, path: str,
                    problems: Problems) -> dict[str, list[float]]:
        if not self.with_judgements:
            return {}
        if not isinstance(value, dict):
            problems.add(path, "missing: other items of the gold carry their annotators' judgements, so every one "
                               "must" if value is None else "must be an object {dimension: [one value per annotator]}")
            return {}
        names = set(values or {})
        found: dict[str, list[float]] = {}
        for name in sorted(names - set(value)):
            problems.add(path, f"has no judgements for dimension {quoted(name)}")
        for name, given in value.items():
            where = f"{path}.{name}"
            if values is not None and name not in names:
                problems.add(where, f"is not a dimension of this item's human judgement ({', '.join(sorted(names))})")
                continue
            if not isinstance(given, list) or not given:
                problems.add(where, "must be a non-empty list of judgements, one per annotator (null for a missing "
                                    f"one), got {quoted(given)}")
                continue
            bad = [k for k, v in enumerate(given) if v is not None and not _finite(v)]
            for k in bad:
                problems.add(f"{where}[{k}]", _number_problem(given[k]))
            if sum(v is not None for v in given) < 1:
                problems.add(where, "has no judgement at all (every entry null)")
            # Slot k is each item's k-th judgement: annotator k when every item lists the same
            # annotators in one order (null where one gave none); items may have more or fewer.
            width = self.annotators.get((name, level), (0, where))[0]
            self.annotators[name, level] = (max(width, len(given)), where)
            if not bad:
                found[name] = [math.nan if v is None else float(v) for v in given]
        return found

    def check_context(self, items: list[_Item], path: str, problems: Problems) -> None:
        """The responses of one context share their level and language."""
        known = [item for item in items if item is not None]  # None: not an object (reported already)
        if len({item.level for item in known}) > 1:
            problems.add(f"{path}.responses", "mixes turn-level and dialogue-level items: the items compared in one "
                                              "context must be of one level")
        if len({item.language for item in known}) > 1:
            problems.add(f"{path}.responses", "mixes languages: the items compared in one context must be in one "
                                              "language")

    def keep(self, item: _Item) -> None:
        self.kept.append(item)

    def finish(self, context: np.ndarray, problems: Problems) -> DimensionData | None:
        """The compiled fields of the kept responses; every slice must vary (else there is nothing to
        correlate), and a key must fit. None after a problem."""
        if problems:
            return None
        pairs = list(dict.fromkeys((name, item.level) for item in self.kept for name in item.values))
        pairs.sort(key=lambda pair: LEVELS.index(pair[1]))  # turn-level dimensions first, else in file order
        languages = list(dict.fromkeys(item.language for item in self.kept if item.language is not None))
        n = len(self.kept)
        values = np.full((n, len(pairs)), np.nan)
        width = max((count for count, _ in self.annotators.values()), default=0)
        judgements = np.full((n, len(pairs), width), np.nan) if self.with_judgements else None
        column = {pair: d for d, pair in enumerate(pairs)}
        for r, item in enumerate(self.kept):
            for name, value in item.values.items():
                values[r, column[name, item.level]] = value
                if judgements is not None:
                    given = item.judgements[name]
                    judgements[r, column[name, item.level], : len(given)] = given
        data = DimensionData(
            names=[name for name, _ in pairs], levels=[level for _, level in pairs], values=values,
            level=np.array([LEVELS.index(item.level) for item in self.kept], dtype=np.int8),
            languages=languages,
            language=np.array([languages.index(item.language) if item.language is not None else -1
                               for item in self.kept], dtype=np.int64),
            judgements=judgements, plain=not self.objects and [name for name, _ in pairs] == ["human"])
        for chosen in data.slices():
            if len(chosen.prefix) > MAX_PREFIX:
                problems.add("$", f"dimension {quoted(chosen.dimension)}: with its level and language its measure "
                                  f"keys would exceed 64 characters; use a shorter name")
                continue
            rows = data.slice_rows(chosen)
            column_values = data.values[rows, data.column(chosen)]
            if not rows.size:
                problems.add("$", f"no item judges {chosen.title}: every dimension of a level is judged in every "
                                  "language of the gold")
            elif np.all(column_values == column_values[0]):
                problems.add("$", f"every item has the same human judgement on {chosen.title}: there is nothing "
                                  "to correlate with")
            elif not _varies_within_contexts(context[rows], column_values):
                problems.add("$", f"no two responses to the same context differ on {chosen.title}: there is no "
                                  "preference to predict")
        return None if problems else data


def _varies_within_contexts(context: np.ndarray, values: np.ndarray) -> bool:
    order = np.lexsort((values, context))
    return bool(((np.diff(context[order]) == 0) & (np.diff(values[order]) != 0)).any())


def read_dimension_scores(entry: dict, path: str, row: int | None, dims: DimensionData, scores: np.ndarray,
                          problems: Problems) -> None:
    """A run entry's ``scores``: one finite number per dimension of the item's level, into
    ``scores[row]`` (columns as ``dims``)."""
    given = entry.get("scores")
    if not isinstance(given, dict):
        problems.add(f"{path}.scores", "missing: this task takes one score per dimension, "
                                       "{\"scores\": {\"<dimension>\": number, ...}}" if given is None
                     else f"must be an object of one score per dimension, got {quoted(given)}")
        return
    if row is None:
        for name, value in given.items():
            if not _finite(value):
                problems.add(f"{path}.scores.{name}", _number_problem(value))
        return
    level = LEVELS[int(dims.level[row])]
    wanted = {name: d for d, (name, own) in enumerate(dims.pairs) if own == level}
    for name, value in given.items():
        if name not in wanted:
            problems.add(f"{path}.scores", f"unknown dimension {quoted(name)} (this {level}-level item's "
                                           f"dimensions: {', '.join(wanted)})")
        elif not _finite(value):
            problems.add(f"{path}.scores.{name}", _number_problem(value))
        else:
            scores[row, wanted[name]] = float(value)
    for name in wanted:
        if name not in given:
            problems.add(f"{path}.scores", f"has no score for dimension {quoted(name)}")
