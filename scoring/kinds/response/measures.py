"""The response kind's measures: one registry entry each, read by the configuration, the titles and
the scoring alike.

An entry (``ResponseMeasure``) says everything the kind knows of a measure: its key, short title,
citation, range and headline aggregation (``corpus``: the formula over summed per-item sufficient
statistics, so any subset is exact; ``mean``: of the per-item scores), its title and description
under a task's configuration, the configuration sections it reads, the resources the machine
must have for it (``pipeline``, ``vectors``, ``encoder``), the languages it may be used in, and its
scorer. ``parse_config`` accepts in ``measures`` exactly the configurable entries and refuses one
in a language it does not list; ``ResponseKind.measures`` builds every board column from an entry
(``measure_specs``); ``ResponseKind.score`` scores every measure through its entry's scorer
(``score_measures``). ``register`` refuses an entry that lacks any of these, at import, so a
measure cannot be accepted by a task and titled on a board yet fail at scoring.

A scorer scores a family of measures that share work (the BLEU family tokenises each block of
responses once; BERTScore and vBERTScore share the responses' token vectors). It is a generator:
it starts what may run in the background (POSSCORE's taggers), yields once, then finishes. Every
scorer starts, in the order of first registration, before any finishes, so BLEU is computed while
the first block of responses is tagged.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import numpy as np

from scoring.kinds.base import MeasureSpec
from scoring.kinds.response import bertscore as bertscore_module
from scoring.kinds.response import bleu as bleu_module
from scoring.kinds.response.languages import vectors_words
from scoring.kinds.response.posscore import score_rows

# Not configurable: a gold with references vBLEU added brings it (and vBERTScore to a task that
# reports BERTScore).
VBLEU = "vbleu"
VBERTSCORE = "vbertscore"
# The configuration's sections a measure may read (``ResponseConfig``'s parser reads each one).
CONFIG_SECTIONS: tuple[str, ...] = ("bleu", "delta_bleu", "posscore", "bertscore", "pipeline", "vectors")
# What a measure may need of the machine: a spaCy pipeline, a word-vector table, the BERTScore encoder.
RESOURCES: tuple[str, ...] = ("pipeline", "vectors", "encoder")

# Characters of responses scored at a time: their tokens and n-gram lookups stay near 60 MB
# however large the run.
TEXT_BLOCK_CHARS = 2_000_000


def text_blocks(texts: Sequence[str], chars: int | None = None) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of consecutive runs of ``texts`` of about ``chars`` characters each
    (default ``TEXT_BLOCK_CHARS``; at least one text each), covering every text in order."""
    chars = TEXT_BLOCK_CHARS if chars is None else chars
    start, size = 0, 0
    for index, text in enumerate(texts):
        size += len(text)
        if size >= chars:
            yield start, index + 1
            start, size = index + 1, 0
    if start < len(texts):
        yield start, len(texts)


@dataclass
class ScoringJob:
    """One run's scoring, as the kind hands it to the scorers, and what they write back.

    ``gold``, ``run`` and ``config`` are the kind's ``CompiledResponseGold``, ``ParsedResponseRun``
    and ``ResponseConfig``; they are typed loosely because those modules read this registry (the
    configuration validates against it), and the machine's resources come in as values and
    functions (``posscore``, ``encoder``) for the same reason."""

    run: Any
    gold: Any
    config: Any
    gold_items: np.ndarray  # the gold indices scored, ascending
    positions: np.ndarray  # their positions in the run
    responses: list[str]  # the run's responses to those items
    sacrebleu: str = ""  # sacreBLEU's version, recorded with the BLEU family's settings
    # POSSCORE's encoder, prepared references and how they were tagged (resources.py), or None.
    posscore: tuple[Any, Any, dict[str, Any]] | None = None
    encoder: Callable[[], Any] | None = None  # the task's BERTScore encoder, loaded on first use
    references_from: str = ""  # vBERTScore: how the added references were retrieved, in words
    per_item: dict[str, np.ndarray] = field(default_factory=dict)
    headlines: dict[str, float] = field(default_factory=dict)
    statistics: dict[str, np.ndarray] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


Scorer = Callable[[ScoringJob, list["ResponseMeasure"]], Iterator[None]]


@dataclass(frozen=True)
class ResponseMeasure:
    key: str
    short_title: str
    citation: str
    value_range: tuple[float, float]
    headline: Literal["corpus", "mean"]
    title: Callable[[Any], str]  # the board's title under a task's configuration
    description: Callable[[Any], str]  # what the number is made of, in a reader's words
    scorer: Scorer
    config_keys: tuple[str, ...] = ()  # the configuration sections it reads
    resources: tuple[str, ...] = ()  # what the machine must have (RESOURCES)
    languages: tuple[str, ...] | None = None  # the task languages it is valid in; None: every one
    configurable: bool = True  # named in a task's "measures"; False: brought by the gold
    extended_gold: bool = False  # scored only on a gold holding references vBLEU added, against them
    requires: str | None = None  # brought only to a task that reports this configurable measure
    official_with: str | None = None  # a measure the gold brings is official when this one is
    nugget_turns: bool = False  # nugget scores NS may be built on it (nuggets.py has its per-turn scorer)
    bleu_options: Callable[[Any], bleu_module.BleuConfig] | None = None  # corpus headlines: the options
    higher_is_better: bool = True  # every response measure is a similarity


RESPONSE_MEASURES: dict[str, ResponseMeasure] = {}
_SCORERS: list[Scorer] = []  # distinct scorers, in the order their first measure was registered


def register(entry: ResponseMeasure) -> ResponseMeasure:
    """Add a measure; refuses, naming every gap, one the configuration, a board or the scoring
    could not use."""
    problems = []
    if not inspect.isgeneratorfunction(entry.scorer):
        problems.append("no scorer (a generator function: it starts, yields once, finishes)")
    if not callable(entry.title) or not callable(entry.description):
        problems.append("no title or description")
    if entry.headline not in ("corpus", "mean"):
        problems.append(f"headline {entry.headline!r} is neither corpus nor mean")
    if entry.headline == "corpus" and entry.bleu_options is None:
        problems.append("a corpus headline without its BLEU options")
    if not entry.citation or not entry.short_title:
        problems.append("no citation or short title")
    if unknown := [key for key in entry.config_keys if key not in CONFIG_SECTIONS]:
        problems.append(f"reads configuration section(s) {', '.join(unknown)} the configuration does not have")
    if unknown := [name for name in entry.resources if name not in RESOURCES]:
        problems.append(f"needs unknown resource(s) {', '.join(unknown)} (known: {', '.join(RESOURCES)})")
    for name in (entry.requires, entry.official_with):
        if name is not None and (name not in RESPONSE_MEASURES or not RESPONSE_MEASURES[name].configurable):
            problems.append(f"follows {name!r}, which is not a configurable measure registered before it")
    if entry.configurable and (entry.extended_gold or entry.requires or entry.official_with):
        problems.append("a configurable measure is not brought by the gold")
    if entry.key in RESPONSE_MEASURES:
        problems.append("registered twice")
    if problems:
        raise ValueError(f"response measure {entry.key!r} cannot be registered: {'; '.join(problems)}")
    RESPONSE_MEASURES[entry.key] = entry
    if entry.scorer not in _SCORERS:
        _SCORERS.append(entry.scorer)
    return entry


def measure(key: str) -> ResponseMeasure:
    try:
        return RESPONSE_MEASURES[key]
    except KeyError:
        raise ValueError(f"unknown response measure {key!r}; known: {', '.join(RESPONSE_MEASURES)}") from None


def configurable() -> tuple[str, ...]:
    """The measures a task's configuration may name, in registry order."""
    return tuple(key for key, entry in RESPONSE_MEASURES.items() if entry.configurable)


def needs(keys: Sequence[str], resource: str) -> bool:
    """Whether any of the measures ``keys`` needs ``resource`` of the machine."""
    return any(resource in RESPONSE_MEASURES[key].resources for key in keys)


def present(config: Any, extended: bool | None) -> list[str]:
    """The measures a run is scored with under ``config``: the configured ones in their order,
    then those the gold brings (``extended``: whether it holds references vBLEU added; None, no
    gold yet: every measure a version of the task may have)."""
    keys = list(config.measures)
    for key, entry in RESPONSE_MEASURES.items():
        if entry.configurable or (entry.extended_gold and extended is False):
            continue
        if entry.requires is None or entry.requires in config.measures:
            keys.append(key)
    return keys


def measure_specs(config: Any, extended: bool | None) -> list[MeasureSpec]:
    """The board's columns: one ``MeasureSpec`` per measure ``present`` gives, from its entry."""
    specs = []
    for key in present(config, extended):
        entry = RESPONSE_MEASURES[key]
        corpus: dict[str, Any] = {}
        if entry.headline == "corpus":
            options = entry.bleu_options(config)  # type: ignore[misc]
            corpus = {"corpus": partial(bleu_module.corpus_score, max_order=options.max_order,
                                        brevity=options.brevity),
                      "corpus_many": partial(bleu_module.corpus_scores, max_order=options.max_order,
                                             brevity=options.brevity)}
        specs.append(MeasureSpec(
            key=key, name=key, title=entry.title(config), short_title=entry.short_title,
            higher_is_better=entry.higher_is_better, value_range=entry.value_range, citation=entry.citation,
            official=(entry.official_with or key) in config.official, group="response",
            group_title="Response quality", headline=entry.headline, description=entry.description(config),
            **corpus))
    return specs


def score_measures(job: ScoringJob, keys: Sequence[str]) -> None:
    """Score the measures ``keys`` into ``job``: each family's scorer once, with its measures in the
    order of ``keys``; every scorer starts before any finishes (see the module's docstring)."""
    chosen = [RESPONSE_MEASURES[key] for key in keys]
    with ExitStack() as cleanup:
        running = []
        for scorer in _SCORERS:
            family = [entry for entry in chosen if entry.scorer is scorer]
            if family:
                started = scorer(job, family)
                # Closing a scorer left waiting (another failed to start) ends its background work.
                cleanup.callback(started.close)
                next(started, None)
                running.append(started)
        for started in running:
            for _ in started:
                raise RuntimeError("a response scorer yields once, between starting and finishing")


# The scorers ------------------------------------------------------------------------------------------

def _references_used(job: ScoringJob, entry: ResponseMeasure) -> dict[str, str]:
    if entry.extended_gold:
        return {"references": "original and added by vBLEU (origin pool or parrot)"}
    return {"references": "original only"} if job.gold.has_extended else {}


def bleu_references(gold: Any, config: Any, keys: Sequence[str]) -> dict[str, Any]:
    """The prepared references of the BLEU-family measures among ``keys`` (vBLEU's: the original
    and the added ones), kept with the gold version after the first call."""
    references = {}
    for key in keys:
        entry = RESPONSE_MEASURES[key]
        if entry.scorer is score_bleu_family:
            options = entry.bleu_options(config)  # type: ignore[misc]
            references[key] = gold.vbleu_references(options) if entry.extended_gold else gold.bleu_references(options)
    return references


def score_bleu_family(job: ScoringJob, family: list[ResponseMeasure]) -> Iterator[None]:
    """BLEU, deltaBLEU and vBLEU: per-item sufficient statistics, the smoothed per-item scores and
    the corpus headline; responses tokenised a block at a time, once per case and tokeniser."""
    options = {entry.key: entry.bleu_options(job.config) for entry in family}  # type: ignore[misc]
    references = bleu_references(job.gold, job.config, list(options))
    yield
    blocks: dict[str, list[np.ndarray]] = {entry.key: [] for entry in family}
    for start, stop in text_blocks(job.responses):
        # The tokens of a whole 30 MB run held 350 MB (issue 28).
        tokens: dict[tuple[bool, str], list[list[str]]] = {}
        for entry in family:
            how = (options[entry.key].lowercase, options[entry.key].tokenizer)
            if how not in tokens:
                tokens[how] = [bleu_module.tokenize(text, how[0], how[1], memo=False)
                               for text in job.responses[start:stop]]
            blocks[entry.key].append(bleu_module.sufficient_statistics(tokens[how], references[entry.key],
                                                                       job.gold_items[start:stop]))
    for entry in family:
        stats, chosen = np.concatenate(blocks.pop(entry.key)), options[entry.key]
        job.statistics[entry.key] = stats
        job.per_item[entry.key] = bleu_module.item_scores(stats, chosen.max_order, chosen.brevity)
        job.headlines[entry.key] = bleu_module.corpus_score(stats, chosen.max_order, chosen.brevity)
        job.settings[entry.key] = {**chosen.settings(), "sacrebleu": job.sacrebleu, **_references_used(job, entry)}


def score_posscore(job: ScoringJob, family: list[ResponseMeasure]) -> Iterator[None]:
    """POSSCORE, a block of responses at a time: a response's row (2 d + 4 numbers, 4.8 KB at 300
    dimensions) is needed only until it is scored. The first block's tagging starts before the
    yield, in the forked taggers where they are used, so the BLEU family is computed meanwhile."""
    if job.posscore is None:
        raise ValueError("POSSCORE is scored with the gold's prepared references; the kind prepares them")
    encoder, prepared, tagging = job.posscore
    blocks = list(text_blocks(job.responses))
    with ExitStack() as started:
        first = started.enter_context(encoder.encode_started(job.responses[slice(*blocks[0])])) if blocks else None
        yield
        rows = [score_rows(first.rows(), prepared, job.gold_items[slice(*blocks[0])])] if first else []
        rows += [score_rows(encoder.encode(job.responses[start:stop]), prepared, job.gold_items[start:stop])
                 for start, stop in blocks[1:]]
    for entry in family:
        job.per_item[entry.key] = np.concatenate(rows)
        job.headlines[entry.key] = float(job.per_item[entry.key].mean())
        job.settings[entry.key] = {**encoder.settings(), "references_used": "weight > 0",
                                   "references_tagged_by": {name: tagging.get(name) for name in
                                                            ("pipeline", "pipeline_version", "spacy_version")}}


def score_bertscore(job: ScoringJob, family: list[ResponseMeasure]) -> Iterator[None]:
    """BERTScore F rescaled, and vBERTScore over the references vBLEU added with their weights: the
    responses' token vectors are computed once for both. Settings only: they are the same for
    every run of a gold version (a board says so)."""
    yield
    config, gold = job.config, job.gold
    encoder = job.encoder()  # type: ignore[misc]
    layer = config.bertscore_layer
    plain, b, pairs = gold.bert_references(encoder, layer, weighted=False)
    candidates = job.run.token_vectors(encoder, layer, job.positions, known=gold.bert_vectors(encoder, layer))
    for entry in family:
        if entry.extended_gold:
            references = gold.bert_references(encoder, layer, weighted=True)[0]
            used = "original and added by vBLEU (origin pool or parrot), with their weights"
        else:
            references, used = plain, "original rated above 0, each with weight 1"
        _, _, f = bertscore_module.score_items(candidates, references, job.gold_items)
        job.per_item[entry.key] = bertscore_module.rescale(f, b)
        job.headlines[entry.key] = float(job.per_item[entry.key].mean())
        job.settings[entry.key] = {**encoder.info(layer).settings(), "baseline": b, "baseline_pairs": pairs,
                                   "references_used": used}
        if entry.extended_gold:
            job.settings[entry.key]["references_from"] = job.references_from


# The entries ---------------------------------------------------------------------------------------------

def _bleu_options(config: Any, key: str) -> bleu_module.BleuConfig:
    return config.bleu_options(key)


def _bleu_title(config: Any, key: str) -> str:
    options = config.bleu_options(key)
    return (f"{RESPONSE_MEASURES[key].short_title}-{options.max_order} (corpus, {options.brevity} reference "
            f"length{', weighted references' if options.weighted else ''})")


def _bleu_description(config: Any, key: str) -> str:
    options = config.bleu_options(key)
    return (f"n-grams up to {options.max_order}, sacrebleu {options.tokenizer} tokens"
            f"{', lower-cased' if options.lowercase else ''}; the run's figure is the corpus score, per-context "
            "scores use add-one smoothing for n >= 2")


register(ResponseMeasure(
    "bleu", "BLEU", "Papineni et al. 2002; Tsuta et al. 2023, eq. 3 (sacrebleu tokens, closest reference length)",
    (0.0, 1.0), "corpus", title=partial(_bleu_title, key="bleu"),
    description=partial(_bleu_description, key="bleu"), scorer=score_bleu_family, config_keys=("bleu",),
    nugget_turns=True, bleu_options=partial(_bleu_options, key="bleu")))

register(ResponseMeasure(
    "delta_bleu", "deltaBLEU", "Galley et al. 2015; Tsuta et al. 2023, eq. 1-4 (weighted references)",
    (0.0, 1.0), "corpus", title=partial(_bleu_title, key="delta_bleu"),
    description=partial(_bleu_description, key="delta_bleu"), scorer=score_bleu_family,
    config_keys=("delta_bleu",), nugget_turns=True, bleu_options=partial(_bleu_options, key="delta_bleu")))

register(ResponseMeasure(
    "posscore", "POSSCORE", "Liu et al. 2021 (POSSCORE, CIKM), section 3.4, eq. 1-3 (maximum over references)",
    (-(float(np.e) + 1.0), float(np.e) + 1.0), "mean",
    title=lambda config: "POSSCORE (mean over contexts, maximum over references)",
    description=lambda config: (f"{config.language_name}; POS words: {', '.join(config.tags)}; spaCy pipeline "
                                f"{config.pipeline}; vectors: "
                                f"{vectors_words(config.pipeline, config.vectors, config.vectors_name)}; range "
                                "-(e + 1) to e + 1"),
    scorer=score_posscore, config_keys=("posscore", "pipeline", "vectors"), resources=("pipeline", "vectors"),
    nugget_turns=True))

# Rescaled F: 1 for identical texts, about 0 for texts as unrelated as random ones, below 0 only
# for texts less alike than those (the range covers F >= 2b - 1, far below any baseline measured).
register(ResponseMeasure(
    "bertscore", "BERTScore",
    "Zhang et al. 2020; Tsuta et al. 2023, eq. 5-7 (maximum over references, baseline rescaling)",
    (-1.0, 1.0), "mean",
    title=lambda config: "BERTScore F, rescaled (mean over contexts, maximum over references)",
    description=lambda config: (f"{config.language_name}; token vectors of {config.encoder_label}, layer "
                                f"{config.bertscore_layer}; F rescaled as (F - b) / (1 - b) with b the mean F of "
                                "shuffled pairs of the gold's references: 1 for the reference itself, about 0 for "
                                "an unrelated text; not comparable with published BERTScore figures (another "
                                "encoder)"),
    scorer=score_bertscore, config_keys=("bertscore",), resources=("encoder",)))

register(ResponseMeasure(
    VBLEU, "vBLEU",
    "Tsuta et al. 2023, section 4 (deltaBLEU, eq. 4, over references retrieved from a pool and rated automatically)",
    (0.0, 1.0), "corpus",
    title=lambda config: (f"vBLEU: deltaBLEU-{config.delta_bleu.max_order} over the original and the retrieved, "
                          f"automatically rated references (corpus, {config.delta_bleu.brevity} reference length)"),
    description=lambda config: (f"n-grams up to {config.delta_bleu.max_order}, sacrebleu {config.delta_bleu.tokenizer}"
                                f" tokens{', lower-cased' if config.delta_bleu.lowercase else ''}; references: the "
                                "gold's own and those retrieved from a dialogue pool (BM25) with their rater's "
                                "weights; the run's figure is the corpus score, per-context scores use add-one "
                                "smoothing for n >= 2"),
    scorer=score_bleu_family, config_keys=("delta_bleu",), configurable=False, extended_gold=True,
    official_with="delta_bleu", bleu_options=lambda config: config.delta_bleu))

register(ResponseMeasure(
    VBERTSCORE, "vBERTScore",
    "Tsuta et al. 2023, section 4.3, eq. 11-12 (BERTScore over the original and the retrieved, rated references, "
    "each reference's matches multiplied by its weight)",
    (-1.0, 1.0), "mean",
    title=lambda config: ("vBERTScore F, rescaled: BERTScore over the original and the retrieved, automatically "
                          "rated references, each weighted by its rating (mean over contexts, maximum over "
                          "references)"),
    description=lambda config: (f"{config.encoder_label}, layer {config.bertscore_layer}; references: the gold's own "
                                "with their weights and those vBLEU retrieved with their rater's weights (a "
                                "negative weight makes a reference count against a response like it); rescaled "
                                "with the same b as BERTScore"),
    scorer=score_bertscore, config_keys=("bertscore",), resources=("encoder",), configurable=False,
    extended_gold=True, requires="bertscore", official_with="bertscore"))
