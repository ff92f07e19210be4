"""The task-kind interface: what the server needs from a kind of shared task, and nothing else.

A *kind* (DQ/ND ``stc3``, ``response``, ``metric``, ...) owns everything about its files and
its numbers: its configuration and presets, how a gold file is validated and compiled, how a run
is validated against a compiled gold, which measures it reports (with their direction, range,
citation, whether they are official and how a run's headline figure is aggregated) and the
per-item score vectors behind them, its baselines, and how an item is described on a run page.

The server, the offline ``score`` command, the statistics and the exports only talk to this
interface and to measure keys and item ids: none of them names a kind's labels. This follows
sacrebleu's ``metrics/base.py`` (per-segment sufficient statistics, one function from summed
statistics to a score) and ir_measures' providers (a registry of named implementations).
"""

from __future__ import annotations

import json
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from scoring.validation import (
    EXTRA_ENTRIES,
    VALUE_ALLOWANCE,
    ValidationFailed,
    canonical_id,
    check_shape,
    parse_json,
    quoted,
)

__all__ = ["Baseline", "Kind", "MeasureGroup", "MeasureSpec", "Scored", "ValidationFailed", "canonical_record",
           "describe_value", "grouped", "measure_key"]

# How a run's headline figure is made from its items: the mean of the per-item scores; a
# ``corpus`` formula over summed per-item sufficient statistics (BLEU); or ``run``: the kind
# computes it from the whole run (a correlation over all responses) and computes a subset's by
# scoring that subset (``Kind.score(items=...)``).
Headline = Literal["mean", "corpus", "run"]

# A measure key names one per-item score vector of a run: ``quality.A.rsnod``, ``nugget.jsd``,
# ``bleu``. Dots separate a kind's own levels; the key is also a URL path part and a CSV header.
_KEY = re.compile(r"^[A-Za-z0-9_*-]+(\.[A-Za-z0-9_*-]+)*$")


def measure_key(*parts: str) -> str:
    """The one place a measure key is put together (``measure_key("quality", "A", "rsnod")``)."""
    key = ".".join(parts)
    if not _KEY.match(key) or len(key) > 64:
        raise ValueError(f"not a valid measure key: {key!r}")
    return key


def canonical_record(what: str, item: object, value: object) -> str | None:
    """One hidden annotation as the text it is compared by (``Kind.hidden_annotations``): what it
    is, the id it belongs to (``canonical_id``: ``17`` and ``"17"`` are one id) and its value as
    JSON with sorted keys, numbers as floats (``4`` and ``4.0`` are one judgement) and texts with
    their whitespace collapsed; None when ``item`` cannot be an id."""
    item_id = canonical_id(item)
    if item_id is None:
        return None
    return f"{what}\x00{item_id}\x00{json.dumps(_canonical_value(value), sort_keys=True, ensure_ascii=False)}"


def _canonical_value(value: object) -> object:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond any double is compared as written
            return str(value)
        return number if math.isfinite(number) else str(number)
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, Mapping):
        return {str(key): _canonical_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical_value(item) for item in value]
    return str(value)


def describe_value(value: Any) -> str:
    """A setting's value as text: ``true``/``false`` as in JSON, numbers as Python prints them,
    lists joined by commas, anything else as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ", ".join(describe_value(item) for item in value)
    if value is None:
        return "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class MeasureSpec:
    """One number a kind reports per item and per run, with what every page and export needs.

    ``headline`` says how a run's figure is made from its items: ``mean`` of the per-item
    scores, or ``corpus``: ``corpus(statistics summed over the items)`` (BLEU), where each item
    stores its sufficient statistics so that the figure of any subset of items (a live subset,
    a bootstrap resample) is computed exactly.
    """

    key: str
    name: str
    title: str
    short_title: str
    higher_is_better: bool
    value_range: tuple[float, float]
    citation: str
    official: bool = False
    group: str = ""
    group_title: str = ""
    # Within a group, measures may come per subgroup (DQ: one RSNOD and one NMD per dimension);
    # boards and run pages then show the group as subgroups x measure names.
    subgroup: str = ""
    subgroup_title: str = ""
    headline: Headline = "mean"
    corpus: Callable[[np.ndarray], float] | None = field(default=None, compare=False, repr=False)
    # The same corpus function vectorised over leading axes (summed statistics (..., S) ->
    # figures (...)): the significance tests apply it to k runs x B steps at once. Optional: without
    # it ``corpus_figures`` calls ``corpus`` once per vector.
    corpus_many: Callable[[np.ndarray], np.ndarray] | None = field(default=None, compare=False, repr=False)
    # Whether the kind's own headline is exactly ``corpus`` of the summed statistics, to the last
    # bit (then a subset's figure can be taken from stored statistics instead of scoring again);
    # False where the kind sums in another order (DQ/ND's micro averaging pools turns).
    corpus_exact: bool = True
    description: str = ""

    def __post_init__(self) -> None:
        if not _KEY.match(self.key):
            raise ValueError(f"not a valid measure key: {self.key!r}")
        if self.headline == "corpus" and self.corpus is None:
            raise ValueError(f"{self.key}: a corpus-level headline needs its corpus function")

    def __getstate__(self) -> dict[str, Any]:
        # Boards are cached (pickled) with their measures; a corpus function is often a closure,
        # which pickle refuses. A spec read back from a cache describes the measure but cannot
        # aggregate: pages never aggregate, the kind's own spec does.
        return {**self.__dict__, "corpus": None, "corpus_many": None}

    @property
    def direction(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"

    @property
    def column_title(self) -> str:
        """The column heading on a board: the short title, prefixed by the subgroup if any."""
        return f"{self.subgroup} {self.short_title}" if self.subgroup else self.short_title

    def public(self) -> dict[str, Any]:
        """What the API and exports say about the measure beside its numbers."""
        return {"key": self.key, "title": self.title, "short_title": self.column_title, "group": self.group,
                "higher_is_better": self.higher_is_better, "official": self.official,
                "value_range": list(self.value_range), "headline": self.headline, "citation": self.citation}

    def better(self, a: float, b: float) -> bool:
        """Whether ``a`` is strictly better than ``b`` on this measure."""
        return a > b if self.higher_is_better else a < b

    def corpus_figures(self, totals: np.ndarray) -> np.ndarray:
        """The corpus function on summed statistics of shape (..., S): figures of shape (...).
        What the corpus-level tests and intervals apply to every run of every step or resample."""
        if self.corpus is None:
            raise ValueError(f"{self.key}: not a corpus-level measure")
        totals = np.asarray(totals, dtype=np.float64)
        if self.corpus_many is not None:
            return np.asarray(self.corpus_many(totals), dtype=np.float64)
        flat = totals.reshape(-1, totals.shape[-1])
        figures = np.fromiter((self.corpus(row) for row in flat), dtype=np.float64, count=flat.shape[0])
        return figures.reshape(totals.shape[:-1])

    def aggregate(self, per_item: np.ndarray, statistics: np.ndarray | None = None) -> float:
        """The run's headline figure over the given items."""
        if self.headline == "run":
            raise ValueError(f"{self.key}: the kind computes this figure from the run; use Kind.score(items=...)")
        if self.headline == "corpus":
            if statistics is None:
                raise ValueError(f"{self.key}: corpus-level figures need the items' sufficient statistics")
            return float(self.corpus(np.asarray(statistics, dtype=np.float64).sum(axis=0)))
        return float(np.asarray(per_item, dtype=np.float64).mean())


@dataclass
class MeasureGroup:
    """Measures shown together (a board tab, a table on a run page), in the kind's order."""

    name: str
    title: str
    measures: list[MeasureSpec]

    @property
    def subgroups(self) -> list[tuple[str, str]]:
        """(subgroup, its title) in order of first appearance; empty when the group has none."""
        seen = dict.fromkeys((spec.subgroup, spec.subgroup_title) for spec in self.measures if spec.subgroup)
        return list(seen)

    @property
    def names(self) -> list[MeasureSpec]:
        """One measure per distinct name (the columns of a subgroups x names table)."""
        return list({spec.name: spec for spec in reversed(self.measures)}.values())[::-1]


def grouped(specs: list[MeasureSpec]) -> list[MeasureGroup]:
    """The measures by group, groups in order of their first measure."""
    groups: dict[str, MeasureGroup] = {}
    for spec in specs:
        group = groups.setdefault(spec.group, MeasureGroup(spec.group, spec.group_title or spec.group, []))
        group.measures.append(spec)
    return list(groups.values())


@dataclass
class Scored:
    """A run's scores on one gold: per-item vectors keyed by measure key, aligned with ``item_ids``.

    ``headlines`` holds each measure's run figure as the kind computes it (for the DQ/ND kind the
    exact numbers of the 2018-2024 scripts); ``statistics`` the per-item sufficient statistics
    of corpus-level measures (items x statistics). ``settings`` is everything needed to say how
    the numbers were made (variant, averaging, tokeniser, pipeline versions, ...).
    """

    item_ids: list[str]
    per_item: dict[str, np.ndarray]
    headlines: dict[str, float]
    settings: dict[str, Any] = field(default_factory=dict)
    statistics: dict[str, np.ndarray] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    n_missing: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    # Run-level figures beside the headlines that a kind reports in ``score --format json``
    # (``n_pairs``, ``intervals``): merged into ``summary()``, stored with the score.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    def non_finite(self) -> list[str]:
        """The measure keys with a NaN or an infinity, per item or as the run's figure, in order.
        The one check the scoring job, the offline command and the kinds use: no such score may
        reach storage, a page, an export or the terminal."""
        bad = [key for key, values in self.per_item.items() if not np.isfinite(values).all()]
        return bad + [key for key, value in self.headlines.items() if not math.isfinite(value) and key not in bad]

    def check_finite(self) -> None:
        """Refuse NaN and infinities, named (``ValueError``)."""
        bad = self.non_finite()
        if bad:
            raise ValueError("scores that are not finite numbers: " + ", ".join(sorted(bad)))

    def summary(self) -> dict[str, Any]:
        """The ``score --format json`` object without per-item scores."""
        data: dict[str, Any] = {"measures": dict(self.headlines), "n_items": self.n_items,
                                "settings": dict(self.settings)}
        if self.n_missing:
            data["n_missing"] = self.n_missing
        data.update(self.extra)
        return data


@dataclass(frozen=True)
class Baseline:
    """A run the server builds from a gold and shows on every board of that gold version."""

    name: str
    description: str
    content: Any  # the run file's JSON value


class Kind(ABC):
    """A kind of shared task. Subclasses are registered in ``scoring.kinds.KINDS`` by ``name``."""

    name: ClassVar[str]
    title: ClassVar[str]
    item_noun: ClassVar[str] = "item"
    presets: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    default_preset: ClassVar[str] = ""

    # Configuration -------------------------------------------------------------------------
    @abstractmethod
    def config(self, data: Mapping[str, Any]) -> Any:
        """The validated configuration object of a task (``ValueError`` naming every problem)."""

    def check_resources(self, config: Any) -> list[str]:
        """What a task with this configuration needs that this machine lacks (a spaCy pipeline, an
        uploaded vector table), one sentence each; empty when scoring can run. The server asks when
        a task is configured and the offline command before reading files, so a missing resource
        is named up front instead of failing a scoring job."""
        return []

    def language_support(self) -> list[dict[str, Any]]:
        """Per language (or group of languages) a task of the kind may declare, which measures are valid
        and which are refused, with why: ``[{"languages", "measures": [{"measure", "valid", "why"}]}]``
        (the measures page).
        Empty for a kind whose measures do not depend on a language."""
        return []

    def computable(self, config: Any) -> tuple[Any, list[str]]:
        """For the offline commands: ``config`` without the measures this machine cannot compute, and
        one sentence per measure left out (default: unchanged; ``check_resources`` names what is
        missing). A kind whose measures need separate resources leaves out only those."""
        return config, []

    def preset(self, name: str) -> Any:
        if name not in self.presets:
            raise ValueError(f"unknown preset {name!r} for kind {self.name!r}; known presets: "
                             f"{', '.join(sorted(self.presets)) or 'none'}")
        return self.config(self.presets[name])

    # Gold ----------------------------------------------------------------------------------
    @abstractmethod
    def compile_gold(self, data: object, config: Any) -> Any:
        """Validate a parsed gold file (``ValidationFailed`` listing every problem) and compile it.

        The compiled gold has ``item_ids`` (list of str), ``warnings`` and ``to_bytes()``."""

    @abstractmethod
    def gold_from_bytes(self, blob: bytes) -> Any:
        """A compiled gold back from ``to_bytes()``."""

    # Runs ----------------------------------------------------------------------------------
    @abstractmethod
    def parse_run(self, data: object, gold: Any, config: Any, *, allow_missing: bool = False) -> Any:
        """Validate a parsed run against a compiled gold (``ValidationFailed``, every problem with
        its JSON path) and return what ``score`` needs (with ``warnings`` and ``n_missing``)."""

    def parse_run_file(self, content: bytes, gold: Any, config: Any, *, allow_missing: bool = False,
                       what: str = "file") -> Any:
        """``parse_run`` of a run file's bytes (``what`` names the file in a JSON problem): what
        the upload, the scoring job and the statistics call. By default the whole document is
        parsed first; a kind whose runs are many small entries may read them a piece at a time
        instead (the metric kind), with the same result and the same problems."""
        return self.parse_run(parse_json(content, what), gold, config, allow_missing=allow_missing)

    # The keys beside "id" that mark an entry of this kind's runs, and the kind in a few words: a
    # file of another kind is named as such (``read_run_file``), not answered entry by entry.
    run_entry_keys: ClassVar[tuple[str, ...]] = ()
    short_title: ClassVar[str] = ""

    def run_ids(self, gold: Any) -> Collection[str]:
        """The ids a run's entries carry: the gold's items (the metric kind's runs name responses)."""
        return gold.item_ids

    def read_run_file(self, content: bytes, gold: Any, config: Any, *, allow_missing: bool = False,
                      what: str = "file") -> Any:
        """A run file checked (``check_run_file``) and parsed (``parse_run_file``) as an upload is,
        for every kind: when no entry's id is an id of the gold, one problem saying so and naming
        the kind the file looks like, in place of one per entry (141 to 303 lines before)."""
        self.check_run_file(content, gold)
        try:
            return self.parse_run_file(content, gold, config, allow_missing=allow_missing, what=what)
        except ValidationFailed as error:
            foreign = self.foreign_run(content, gold)
            if foreign:
                raise ValidationFailed([foreign]) from error
            raise

    def foreign_run(self, content: bytes, gold: Any) -> str | None:
        """Why a run file is no run of this gold at all, if none of its entries' ids is one of the
        gold's; None if some is (its problems are then the file's own, entry by entry)."""
        from scoring.kinds import KINDS  # the registry imports this module

        try:
            data = parse_json(content, "file")
        except ValidationFailed:
            return None
        entries = [entry for entry in data if isinstance(entry, dict)] if isinstance(data, list) else []
        ids = [canonical_id(entry.get("id")) for entry in entries]
        ids = [item for item in ids if item is not None]
        known = set(self.run_ids(gold))
        if not ids or any(item in known for item in ids):
            return None
        found = f"none of the {len(ids)} ids in this file is an id of this task's gold data (the file's first is " \
                f"{quoted(ids[0])})"
        # The kind whose run entries' keys the file's entries carry most often.
        counts = [(sum(any(key in entry for key in kind.run_entry_keys) for entry in entries), kind)
                  for kind in (KINDS[name] for name in KINDS)]
        count, kind = max(counts, key=lambda pair: pair[0])
        if not count:
            return f"$: {found}: is it a run of this task?"
        keys = " and ".join(repr(key) for key in kind.run_entry_keys if any(key in entry for entry in entries))
        if kind.name == self.name:
            return f"$: {found}; it looks like a run of this kind (it has {keys}), for other gold data"
        return (f"$: {found}; the file looks like a run of the {kind.short_title or kind.title} kind (it has "
                f"{keys}), and this task is of the {self.short_title or self.title} kind")

    # Containers and commas a run may hold per gold item before it is refused unparsed.
    run_values_per_item: ClassVar[int] = 64

    def check_run_file(self, content: bytes, gold: Any) -> None:
        """Refuse, before parsing, a run file no run of ``gold`` can be (``ValidationFailed``, one
        line): parsing 30 MB of empty objects would take gigabytes. By default at most one entry
        per item (plus a margin) and ``run_values_per_item`` containers and commas per item."""
        n = len(gold.item_ids)
        check_shape(content, n + EXTRA_ENTRIES, VALUE_ALLOWANCE * self.run_values_per_item * n + 10_000,
                    gold_dialogues=n)

    @abstractmethod
    def measures(self, config: Any, gold: Any | None = None) -> list[MeasureSpec]:
        """Every measure a run of this task is scored with, in display order (official first)."""

    @abstractmethod
    def score(self, run: Any, gold: Any, config: Any, items: np.ndarray | None = None) -> Scored:
        """Score a parsed run; ``items`` (ascending gold item indices) scores a subset only."""

    def run_parts(self, run: Any) -> list[str]:
        """The measure groups a parsed run takes part in (a DQ-only run has no ND scores)."""
        return []

    # Baselines and display -----------------------------------------------------------------
    def baselines(self, gold: Any, config: Any) -> list[Baseline]:
        return []

    def describe_item(self, gold: Any, index: int) -> str:
        """A short text a run page shows for one item."""
        return str(gold.item_ids[index])

    def describe_settings(self, settings: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(label, value) of each scoring setting a board, export or run page names beside the
        numbers (``Scored.settings`` as stored with the scores): by default each key and its value
        in key order (stored JSON may come back in another order); a kind may give human labels
        and say what a value means (the DQ/ND kind: the variant and the ND aggregation)."""
        return [(str(key), describe_value(settings[key])) for key in sorted(settings)]

    def describe_versions(self, settings: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(label, value) of the software versions and checksums behind the scores (``Scored.settings``),
        for whoever checks them: pages show them in a fold-out beside ``describe_settings``'s line."""
        return []

    def warm_up(self, config: Any) -> str:
        """Load now what scoring a run of this configuration will need (a background worker calls
        it when it starts, so the first upload waits no longer than the next); what was loaded, in
        a few words, or "" when the kind needs nothing."""
        return ""

    def prepare_gold(self, gold: Any, config: Any) -> None:
        """Prepare now, and keep with the compiled ``gold``, what scoring a run against it will
        prepare the first time (a background worker calls it when it starts, for the gold versions
        uploads are scored against, so that the first upload after a start waits no longer than the
        next). By default nothing: a kind whose compiled gold is all it needs."""
        return None

    def provenance_summary(self, provenance: Mapping[str, Any]) -> dict[str, Any] | None:
        """The few figures of a gold version's provenance (``GoldVersion.provenance``: how a version
        was made when not uploaded as it is) that a list of versions and the API show, or None.
        The response kind: a vBLEU extension's pool, k, rater and held-out accuracy."""
        return None

    def describe_provenance(self, provenance: Mapping[str, Any]) -> str:
        """The same in a reader's words, for the organiser's list of versions ("" when none)."""
        return ""

    # What participants get -------------------------------------------------------------------
    @abstractmethod
    def participant_data(self, data: object, config: Any) -> object:
        """The participants' data made from a parsed (valid) gold file: the same items with every
        annotation, reference, rating or judgement removed, so it can be published safely."""

    @abstractmethod
    def hidden_annotations(self, entry: Mapping[str, Any], config: Any) -> Iterator[tuple[str, str]]:
        """The annotations participants must not see that one JSON object holds, if it is shaped
        like one of this kind's gold items (or a part of one the kind can name): ``(item id,
        record)`` pairs, a record being one annotation (an annotator's labels, a reference, a
        judgement) as a canonical text that names the item or response it belongs to, so that
        the same annotation compares equal whatever the file's indentation, key order, escapes or
        number spelling (``canonical_record``). Nothing for an object without annotations: the
        participants' data has none. The server compares an organiser's data file with the
        still-secret gold through it (``tasks.datafiles.gold_problems``): called on each entry of
        a gold file, and on every object anywhere in a data file."""

    @abstractmethod
    def format_description(self, config: Any) -> dict[str, Any]:
        """The run format of a task with this configuration, for the task's data section and the
        API: ``{"summary": str, "fields": [{"path", "type", "meaning"}], "example": <one run entry>,
        "notes": [str]}``, generated from the configuration (labels, measures), never hand-written."""

    # Between runs ----------------------------------------------------------------------------
    def compare(self, runs: Mapping[str, Any], gold: Any, config: Any, *, seed: int, resamples: int) -> dict[str, Any]:
        """Statistics between the runs of one board that only this kind knows how to compute.

        ``runs`` maps a name the server chooses (a run id or label) to a parsed run (what
        ``parse_run`` returned) on ``gold``; ``seed`` and ``resamples`` are the board's recorded
        statistics seed and B. Returns JSON-ready data (no NaN: None where undefined) that the
        server stores as it is and the kind's pages render; the structure is the kind's own,
        documented in its docstring. The default, for kinds whose boards need nothing beyond
        the per-item statistics, is ``{}``.
        """
        return {}

    # A run-level breakdown the kind puts in its details (``details[key]``: {label: value}), shown
    # on run pages and across a board's runs: (key, title, what the values mean). None: no breakdown.
    detail_breakdown: ClassVar[tuple[str, str, str] | None] = None

    def item_segments(self, details: Mapping[str, Any], item_id: str) -> list[dict[str, Any]]:
        """One item's details as shaded text segments for its run page: ``[{"text", "value" (in
        [0, 1]), "label", "title", "reasons"}]`` (the response kind: each nugget with its NS, its act
        and, in ``reasons``, the parts of its score in words, shown on the page, not only in a tooltip)."""
        return []

    def item_context(self, gold: Any, index: int, references: bool) -> list[tuple[str, str]]:
        """(label, text) lines a run page shows beside an item's segments so that a reader sees
        why they scored as they did: what the item answers and, when ``references`` (the reader
        may see the gold), what it was scored against. Empty by default."""
        return []

    def subset_details(self, details: Mapping[str, Any], item_ids: list[str]) -> dict[str, Any]:
        """``Scored.details`` of a subset of the items, from the whole set's: what ``score(items=)``
        would report, without scoring again (a live board must not show whole-set figures)."""
        return {}

    def compare_tables(self, data: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``compare()``'s data as tables for the statistics page, so that the server renders any
        kind's comparisons with one template: ``[{"title": str, "note": str, "headers": [str],
        "rows": [[cell]], "shade": bool}]``, a cell a string or a number (None: undefined);
        ``shade`` asks for the numbers of the table to be shaded like a heat map; a table may carry
        ``"curves": [(label, [p-values ascending])]`` instead of (or beside) rows, drawn as ASL
        curves (seed 003 Figure 5)."""
        return []

    def sample_run(self, gold: Any, config: Any) -> object:
        """A valid run file participants can look at and upload (by default the first baseline)."""
        baselines = self.baselines(gold, config)
        if not baselines:
            raise NotImplementedError(f"kind {self.name!r} has no baseline to make a sample run from")
        return baselines[0].content

