"""The response-generation kind (RESPONSE-SPEC.md; issues 13 and 14) behind the task-kind interface.

Items are dialogue *contexts*; a run gives one response per context; the gold holds weighted
references per context (and, optionally, alternatives for the nuggets runs are expected to
contain). Files: ``scoring.kinds.response.formats``. Measures, all similarities (**higher is better**):
``bleu`` (BLEU-4, corpus headline from summed sufficient statistics), ``delta_bleu`` (deltaBLEU-2,
corpus headline) and ``posscore`` (mean over contexts); per-item scores are stored for each,
and the per-item BLEU statistics in ``Scored.statistics`` give the corpus figure of any subset
exactly. A gold holding references vBLEU added (``scoring.kinds.response.vbleu.extend_gold``:
``"origin": "pool" | "parrot"``) adds ``vbleu``: deltaBLEU (the task's ``delta_bleu`` options) over
the original and the added references with their weights (RESPONSE-SPEC.md, "vBLEU"); every other
measure keeps using the original references only, so a board shows BLEU on the original
references beside vBLEU on the extended ones. ``bertscore`` (opt-in: presets ``*-bertscore``) is
BERTScore F, rescaled, over multilingual-e5-small's token vectors (``scoring.kinds.response.bertscore``,
docs/bertscore.md); with it, a vBLEU-extended gold adds ``vbertscore`` (Tsuta et al. 2023, eq. 11-12:
every reference's matches multiplied by its weight). Nugget-level scores NS(T, n) (seed 004) go to ``Scored.details``:
``{"nuggets": {item id: [{"text", "act", "D_phi", "MD_diff", "MD_same", "NS"}, ...]},
"acts": {act: mean NS}}`` (a component a fallback leaves out is None).

The configuration is described in ``scoring.kinds.response.config``; what the server must do (vector
tables, encoder models, tagging processes) in ``scoring.kinds.response.resources``; the compiled gold in
``scoring.kinds.response.compiled``; the "Scored with" lines and vBLEU provenance in
``scoring.kinds.response.describe``. Their public names are importable from here too.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from scoring.kinds.base import Baseline, Kind, MeasureSpec, Scored, canonical_record
from scoring.kinds.response import availability, describe
from scoring.kinds.response import bertscore as bertscore_module
from scoring.kinds.response import bleu as bleu_module
from scoring.kinds.response.compiled import (
    EXTENSIONS,
    CompiledResponseGold,
    ParsedResponseRun,
    _coverage_problems,
    _retrieval_of,
    _script_problems,
    _single_token_problems,
)
from scoring.kinds.response.config import (
    BLEU_KEYS,
    LANGUAGES,
    PACKAGE_MODEL,
    VBERTSCORE,
    VBERTSCORE_CITATION,
    VBLEU,
    VBLEU_CITATION,
    ConfigInvalid,
    ResponseConfig,
    nugget_reasons,
    parse_config,
)
from scoring.kinds.response.encoder import EncoderUnavailable
from scoring.kinds.response.formats import check_nugget_work, load_response_gold, load_response_run
from scoring.kinds.response.languages import language_support, vectors_words
from scoring.kinds.response.languages import presets as language_presets
from scoring.kinds.response.measures import RESPONSE_MEASURES
from scoring.kinds.response.nlp import NlpUnavailable, load_pipeline
from scoring.kinds.response.nuggets import BleuTurns, PosscoreTurns, TurnMeasure, act_means, score_nuggets
from scoring.kinds.response.posscore import PosEncoder, PreparedReferences, score_rows
from scoring.kinds.response.resources import (
    _STATE_LOCK,
    _encoder,
    _sacrebleu_version,
    _vector_table,
    encoder_model_path,
    resource_path,
    set_resource_locator,
    set_tagging_processes,
    set_vector_directory,
    store_vector_table,
    task_encoder,
    task_tokenizer,
    task_vectors,
    vector_table_path,
    warm_up,
)
from scoring.validation import ValidationFailed, canonical_id

__all__ = ["GENERIC_REPLY", "PACKAGE_MODEL", "CompiledResponseGold", "ConfigInvalid", "ParsedResponseRun",
           "ResponseConfig", "ResponseKind", "encoder_model_path", "resource_path", "set_resource_locator",
           "set_tagging_processes", "set_vector_directory", "store_vector_table", "task_encoder", "task_tokenizer",
           "task_vectors", "vector_table_path"]

# Imported from here before the split (tests, commands): their homes are the siblings.
from scoring.kinds.response.compiled import (  # noqa: E402, F401
    CJK_TEXT_SHARE,
    FOREIGN_REFUSE_SHARE,
    FOREIGN_WARN_SHARE,
    GOLD_FORMAT,
    KANA_TEXT_SHARE,
    MAX_SINGLE_TOKEN_SHARE,
    MIN_VECTOR_COVERAGE,
    TOKEN_DTYPE,
    text_language,
)
from scoring.kinds.response.config import MAX_ACT_CHARS, MAX_ACTS, NUGGET_MEASURES, NUGGET_MODES  # noqa: E402, F401
from scoring.kinds.response.posscore import rows_from_tagged  # noqa: E402, F401
from scoring.kinds.response.resources import RESOURCE_SUFFIXES  # noqa: E402, F401

# A fixed generic reply, the classic dull response of open-domain dialogue systems: a baseline.
GENERIC_REPLY = "I don't know what you mean."

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


_GOLDS: OrderedDict[str, CompiledResponseGold] = OrderedDict()
_KEPT_GOLDS = 2


# The kind ---------------------------------------------------------------------------------------------

class ResponseKind(Kind):
    name = "response"
    title = "Response generation (BLEU, deltaBLEU, POSSCORE; nugget-level scores)"
    short_title = "response-evaluation"
    run_entry_keys = ("response", "nuggets")
    item_noun = "context"
    # Per language (languages.presets): response (English), response-zh, response-ja with their
    # default measures (BERTScore on for Chinese and Japanese), and each *-bertscore; bleu-only
    # never loads spaCy.
    presets: Mapping[str, Mapping[str, Any]] = {
        **language_presets(ResponseConfig().to_dict()),
        "bleu-only": {**ResponseConfig().to_dict(), "measures": ["bleu", "delta_bleu"],
                      "official": ["bleu", "delta_bleu"],
                      "nuggets": {**ResponseConfig().to_dict()["nuggets"], "score": "never", "measure": "delta_bleu"}},
    }
    default_preset = "response"

    def config(self, data: Mapping[str, Any]) -> ResponseConfig:
        return parse_config(data)

    def check_resources(self, config: ResponseConfig) -> list[str]:
        problems: list[str] = []
        if config.needs_pipeline:
            try:
                load_pipeline(config.pipeline)
            except NlpUnavailable as error:
                return [str(error)]
        if config.needs_posscore:
            try:
                _vector_table(config)
            except NlpUnavailable as error:
                problems.append(str(error))
        if config.needs_encoder:
            try:
                model = task_encoder(config)
            except EncoderUnavailable as error:
                problems.append(str(error))
            else:
                if config.bertscore_layer > model.num_layers:
                    problems.append(f"bertscore.layer: {config.bertscore_layer}, but the encoder "
                                    f"{config.encoder_label} has {model.num_layers} layers")
        return problems

    def computable(self, config: ResponseConfig) -> tuple[ResponseConfig, list[str]]:
        return availability.computable(config)

    def language_support(self) -> list[dict[str, Any]]:
        return language_support()

    # Gold ------------------------------------------------------------------------------------------
    def compile_gold(self, data: object, config: ResponseConfig) -> CompiledResponseGold:
        gold = load_response_gold(data, config.acts)
        warnings = []
        without_context = sum(1 for context in gold.contexts if not context)
        if without_context:
            warnings.append(f"{without_context} of the {len(gold)} context(s) have no utterances: the echo "
                            "baseline answers them with the generic reply")
        # The script says which language the gold is in; the token count still catches a language
        # written without spaces that none of the scripts above covers (Thai under 13a).
        problems, script_warnings = _script_problems(gold, config)
        warnings += script_warnings
        problems = problems or _single_token_problems(gold, config)
        compiled = CompiledResponseGold(gold, warnings=warnings,
                                        retrieval=_retrieval_of(data) if gold.extended else None)
        if config.needs_posscore and not problems:
            # The slow part of a gold version, done once: its bytes keep the tags.
            table = _vector_table(config)
            compiled.tag(_encoder(config, table), config.pipeline)
            problems += _coverage_problems(compiled, config, table)
        if problems:
            raise ValidationFailed(problems)
        return compiled

    def gold_from_bytes(self, blob: bytes) -> CompiledResponseGold:
        digest = hashlib.sha256(blob).hexdigest()
        with _STATE_LOCK:
            if digest in _GOLDS:
                _GOLDS.move_to_end(digest)
                return _GOLDS[digest]
        compiled = CompiledResponseGold.from_bytes(blob)
        compiled.share_tags()
        with _STATE_LOCK:
            _GOLDS[digest] = compiled
            while len(_GOLDS) > _KEPT_GOLDS:
                _GOLDS.popitem(last=False)
        return compiled

    # Runs ------------------------------------------------------------------------------------------
    def parse_run(self, data: object, gold: CompiledResponseGold, config: ResponseConfig, *,
                  allow_missing: bool = False) -> ParsedResponseRun:
        # Runs are checked against the task's current taxonomy.
        reference = gold.gold if gold.gold.acts == config.acts else replace(gold.gold, acts=config.acts)
        run = load_response_run(data, reference, allow_missing=allow_missing)
        if config.nugget_mode == "always" or (config.nugget_mode == "auto" and (
                any(nuggets is not None for nuggets in run.nuggets)
                or any(gold.gold.alternatives[item] for item in run.items))):
            # Budgeted before the run is accepted: the worker's time and memory follow this figure.
            check_nugget_work(run, reference, data)
        n_missing = len(gold) - len(run.items)
        warnings = []
        if n_missing:
            warnings.append(f"{n_missing} of the {len(gold)} gold context(s) are missing from the run; "
                            f"scored on the {len(run.items)} it contains")
        with_nuggets = sum(1 for nuggets in run.nuggets if nuggets is not None)
        if config.nugget_mode != "never" and 0 < with_nuggets < len(run.items):
            warnings.append(f"{with_nuggets} of the {len(run.items)} responses are split into nuggets; the others "
                            "are split into sentences for nugget-level scores (each scored by how much deleting "
                            "it changes the response's score; no act)")
        return ParsedResponseRun(run, warnings, n_missing)

    def measures(self, config: ResponseConfig, gold: CompiledResponseGold | None = None) -> list[MeasureSpec]:
        specs = []
        for key in config.measures:
            registered = RESPONSE_MEASURES[key]
            common = {"key": key, "name": key, "higher_is_better": True, "value_range": registered.value_range,
                      "citation": registered.citation, "official": key in config.official, "group": "response",
                      "group_title": "Response quality"}
            if key in BLEU_KEYS:
                options = config.bleu_options(key)
                label = "BLEU" if key == "bleu" else "deltaBLEU"
                specs.append(MeasureSpec(
                    **common, title=f"{label}-{options.max_order} (corpus, {options.brevity} reference length"
                                    f"{', weighted references' if options.weighted else ''})",
                    short_title=label, headline="corpus",
                    corpus=partial(bleu_module.corpus_score, max_order=options.max_order, brevity=options.brevity),
                    corpus_many=partial(bleu_module.corpus_scores, max_order=options.max_order,
                                        brevity=options.brevity),
                    description=(f"n-grams up to {options.max_order}, sacrebleu {options.tokenizer} tokens"
                                 f"{', lower-cased' if options.lowercase else ''}; the run's figure is the corpus "
                                 "score, per-context scores use add-one smoothing for n >= 2")))
            elif key == "bertscore":
                specs.append(MeasureSpec(
                    **common, title="BERTScore F, rescaled (mean over contexts, maximum over references)",
                    short_title="BERTScore", headline="mean",
                    description=(f"{LANGUAGES[config.language]['name']}; token vectors of {config.encoder_label}, "
                                 f"layer {config.bertscore_layer}; F rescaled as (F - b) / "
                                 "(1 - b) with b the mean F of shuffled pairs of the gold's references: 1 for the "
                                 "reference itself, about 0 for an unrelated text; not comparable with published "
                                 "BERTScore figures (another encoder)")))
            else:
                specs.append(MeasureSpec(
                    **common, title="POSSCORE (mean over contexts, maximum over references)", short_title="POSSCORE",
                    headline="mean", description=f"{LANGUAGES[config.language]['name']}; POS words: "
                                                 f"{', '.join(config.tags)}; spaCy pipeline {config.pipeline}; "
                                                 "vectors: " + vectors_words(config.pipeline, config.vectors,
                                                                             config.vectors_name)
                                                 + "; range -(e + 1) to e + 1"))
        # Without a gold: every measure a version of the task may have (a task's columns); with
        # one: vBLEU only when the gold holds references vBLEU added.
        if gold is None or gold.has_extended:
            options = config.delta_bleu
            specs.append(MeasureSpec(
                key=VBLEU, name=VBLEU, higher_is_better=True, value_range=(0.0, 1.0), citation=VBLEU_CITATION,
                official="delta_bleu" in config.official, group="response", group_title="Response quality",
                title=f"vBLEU: deltaBLEU-{options.max_order} over the original and the retrieved, automatically "
                      f"rated references (corpus, {options.brevity} reference length)",
                short_title="vBLEU", headline="corpus",
                corpus=partial(bleu_module.corpus_score, max_order=options.max_order, brevity=options.brevity),
                corpus_many=partial(bleu_module.corpus_scores, max_order=options.max_order, brevity=options.brevity),
                description=(f"n-grams up to {options.max_order}, sacrebleu {options.tokenizer} tokens"
                             f"{', lower-cased' if options.lowercase else ''}; references: the gold's own and those "
                             "retrieved from a dialogue pool (BM25) with their rater's weights; the run's figure is "
                             "the corpus score, per-context scores use add-one smoothing for n >= 2")))
        if "bertscore" in config.measures and (gold is None or gold.has_extended):
            specs.append(MeasureSpec(
                key=VBERTSCORE, name=VBERTSCORE, higher_is_better=True, value_range=(-1.0, 1.0),
                citation=VBERTSCORE_CITATION, official="bertscore" in config.official, group="response",
                group_title="Response quality",
                title="vBERTScore F, rescaled: BERTScore over the original and the retrieved, automatically rated "
                      "references, each weighted by its rating (mean over contexts, maximum over references)",
                short_title="vBERTScore", headline="mean",
                description=(f"{config.encoder_label}, layer {config.bertscore_layer}; references: the "
                             "gold's own with their weights and those vBLEU retrieved with their rater's weights "
                             "(a negative weight makes a reference count against a response like it); rescaled "
                             "with the same b as BERTScore")))
        return specs

    @staticmethod
    def _scored_items(run: ParsedResponseRun, gold: CompiledResponseGold, items: np.ndarray | None
                      ) -> tuple[np.ndarray, np.ndarray, int]:
        """The gold indices to score, their positions in the run, and how many of ``items`` it lacks."""
        answered = run.items
        n_missing = run.n_missing
        if items is None:
            gold_items = answered
        else:
            items = np.asarray(items, dtype=np.int64)
            if items.ndim != 1 or (len(items) and (items.min() < 0 or items.max() >= len(gold))) or \
                    np.any(np.diff(items) <= 0):
                raise ValueError("items must be ascending, distinct gold item indices")
            present = np.isin(items, answered)
            gold_items = items[present]
            n_missing = int((~present).sum())
        if len(gold_items) == 0:
            raise ValueError("no context of the run is among the items to score")
        return gold_items, np.searchsorted(answered, gold_items), n_missing

    @staticmethod
    def _bleu_family(families: list[tuple[str, Any, dict[str, str]]], references: dict[str, Any],
                     responses: list[str], gold_items: np.ndarray, config: ResponseConfig,
                     per_item: dict[str, np.ndarray], headlines: dict[str, float],
                     statistics: dict[str, np.ndarray], settings: dict[str, Any]) -> None:
        """BLEU, deltaBLEU and vBLEU of the responses, into the score's dictionaries."""
        blocks: dict[str, list[np.ndarray]] = {key: [] for key, _, _ in families}
        for start, stop in text_blocks(responses) if families else ():
            # A block of responses at a time, tokenised once per case and tokeniser for every
            # BLEU-family measure: the tokens of a whole 30 MB run held 350 MB (issue 28).
            tokens: dict[tuple[bool, str], list[list[str]]] = {}
            for key, options, _ in families:
                how = (options.lowercase, options.tokenizer)
                if how not in tokens:
                    tokens[how] = [bleu_module.tokenize(text, options.lowercase, options.tokenizer, memo=False)
                                   for text in responses[start:stop]]
                blocks[key].append(bleu_module.sufficient_statistics(tokens[how], references[key],
                                                                     gold_items[start:stop]))
        for key, options, extra in families:
            stats = np.concatenate(blocks.pop(key))
            statistics[key] = stats
            per_item[key] = bleu_module.item_scores(stats, options.max_order, options.brevity)
            headlines[key] = bleu_module.corpus_score(stats, options.max_order, options.brevity)
            settings[key] = {**options.settings(), "sacrebleu": _sacrebleu_version(), **extra}

    def score(self, run: ParsedResponseRun, gold: CompiledResponseGold, config: ResponseConfig,
              items: np.ndarray | None = None) -> Scored:
        gold_items, positions, n_missing = self._scored_items(run, gold, items)
        responses = [run.run.responses[position] for position in positions]
        per_item: dict[str, np.ndarray] = {}
        headlines: dict[str, float] = {}
        statistics: dict[str, np.ndarray] = {}
        settings: dict[str, Any] = {"measures": list(config.measures), "language": config.language}
        warnings = list(run.warnings)
        families, references = self._bleu_references(gold, config)
        with ExitStack() as cleanup:
            posscore_blocks: list[Any] = []
            if config.needs_posscore:
                encoder, prepared, tagging, tagging_warnings = self._posscore(gold, config)
                warnings += tagging_warnings
                if "posscore" in config.measures:
                    # Tagged and scored a block of responses at a time, like BLEU: a response's row
                    # (2 d + 4 numbers, 4.8 KB at 300 dimensions) is needed only until it is scored.
                    # The first block's tagging starts now, in the forked taggers where they are
                    # used, and BLEU below is computed here meanwhile instead of after it.
                    posscore_blocks = list(text_blocks(responses))
                    first = cleanup.enter_context(encoder.encode_started(responses[slice(*posscore_blocks[0])])) \
                        if posscore_blocks else None
            self._bleu_family(families, references, responses, gold_items, config, per_item, headlines,
                              statistics, settings)
            if posscore_blocks:
                rows = [score_rows(first.rows(), prepared, gold_items[slice(*posscore_blocks[0])])]
                rows += [score_rows(encoder.encode(responses[start:stop]), prepared, gold_items[start:stop])
                         for start, stop in posscore_blocks[1:]]
                per_item["posscore"] = np.concatenate(rows)
                headlines["posscore"] = float(per_item["posscore"].mean())
                settings["posscore"] = {**encoder.settings(), "references_used": "weight > 0",
                                        "references_tagged_by": {name: tagging.get(name) for name in
                                                                 ("pipeline", "pipeline_version", "spacy_version")}}
        if config.needs_encoder:
            encoder = task_encoder(config)
            plain, b, pairs = gold.bert_references(encoder, config.bertscore_layer, weighted=False)
            candidates = run.token_vectors(encoder, config.bertscore_layer, positions,
                                           known=gold.bert_vectors(encoder, config.bertscore_layer))
            variants = [("bertscore", plain, "original rated above 0, each with weight 1")]
            if gold.has_extended:
                variants.append((VBERTSCORE, gold.bert_references(encoder, config.bertscore_layer, weighted=True)[0],
                                 "original and added by vBLEU (origin pool or parrot), with their weights"))
            for key, references, used in variants:
                # Settings only: they are the same for every run of a gold version (a board says so).
                _, _, f = bertscore_module.score_items(candidates, references, gold_items)
                per_item[key] = bertscore_module.rescale(f, b)
                headlines[key] = float(per_item[key].mean())
                settings[key] = {**encoder.info(config.bertscore_layer).settings(), "baseline": b,
                                 "baseline_pairs": pairs, "references_used": used}
                if key == VBERTSCORE:
                    settings[key]["references_from"] = EXTENSIONS[gold.retrieval or "bm25"]
        keys = [*config.measures, *([VBLEU] if gold.has_extended else []),
                *([VBERTSCORE] if gold.has_extended and config.needs_encoder else [])]
        ordered = {key: per_item[key] for key in keys}
        details: dict[str, Any] = {}
        nuggets_on = self._nuggets_on(run, gold, config, positions, gold_items)
        settings["nuggets"] = {"scored": nuggets_on, "score": config.nugget_mode, "measure": config.nugget_measure,
                               **{name: value for name, value in config.nuggets.settings().items() if name != "acts"},
                               "tags": "per nugget"}
        if nuggets_on:
            details = self.nugget_details(run, gold, config, items)
        return Scored(item_ids=[gold.item_ids[item] for item in gold_items], per_item=ordered,
                      headlines={key: headlines[key] for key in keys}, settings=settings,
                      statistics=statistics, warnings=warnings, n_missing=n_missing, details=details)

    @staticmethod
    def _nuggets_on(run: ParsedResponseRun, gold: CompiledResponseGold, config: ResponseConfig,
                    positions: np.ndarray, gold_items: np.ndarray) -> bool:
        if config.nugget_mode != "auto":
            return config.nugget_mode == "always"
        # Decided on the scored items alone, so scoring a subset is scoring the restricted files.
        return any(run.run.nuggets[position] is not None for position in positions) or any(
            gold.gold.alternatives[item] for item in gold_items)

    @staticmethod
    def _bleu_references(gold: CompiledResponseGold, config: ResponseConfig
                         ) -> tuple[list[tuple[str, Any, dict[str, str]]], dict[str, Any]]:
        """The BLEU-family measures a run against ``gold`` gets (with vBLEU on a gold vBLEU
        extended) and their prepared references, kept with the gold after the first call."""
        families = [(key, config.bleu_options(key), {"references": "original only"} if gold.has_extended else {})
                    for key in config.measures if key in BLEU_KEYS]
        if gold.has_extended:
            families.append((VBLEU, config.delta_bleu, {"references": "original and added by vBLEU (origin pool or "
                                                                      "parrot)"}))
        references = {key: gold.vbleu_references(options) if key == VBLEU else gold.bleu_references(options)
                      for key, options, _ in families}
        return families, references

    def prepare_gold(self, gold: CompiledResponseGold, config: ResponseConfig) -> None:
        """The BLEU family's n-gram tables and POSSCORE's reference vectors from the stored tags
        (about a second for 1,500 items with 3 references each): what the first run against a gold
        version prepares. BERTScore's reference encodings are left to the first run that needs
        them: encoding a large gold's references can take minutes, and a worker that spent them
        at its start would keep every queued run waiting."""
        self._bleu_references(gold, config)
        if config.needs_posscore:
            self._posscore(gold, config)

    @staticmethod
    def _posscore(gold: CompiledResponseGold, config: ResponseConfig
                  ) -> tuple[PosEncoder, PreparedReferences, dict[str, Any], list[str]]:
        table = _vector_table(config)
        encoder = _encoder(config, table)
        prepared, tagging, warnings = gold.posscore_references(config, encoder, table)
        return encoder, prepared, tagging, warnings

    def describe_settings(self, settings: Mapping[str, Any]) -> list[tuple[str, str]]:
        return describe.describe_settings(settings)

    def describe_versions(self, settings: Mapping[str, Any]) -> list[tuple[str, str]]:
        return describe.describe_versions(settings)

    detail_breakdown = ("acts", "Mean nugget score (NS) per dialogue act",
                        "The nugget score NS (Takehi, Watanabe and Sakai, SIGIR-AP 2023) says how much a nugget "
                        "helps its response: it weighs how the response's score changes when the nugget is deleted "
                        "and when it is replaced by other nuggets of a different or the same act; above 0.5 the "
                        "nugget helps, below 0.5 it hurts. Here: the mean over the run's nuggets of each act")

    def warm_up(self, config: ResponseConfig) -> str:
        warm_up(config)
        return config.pipeline if config.needs_pipeline else "sacrebleu"

    def provenance_summary(self, provenance: Mapping[str, Any]) -> dict[str, Any] | None:
        return describe.provenance_summary(provenance)

    def describe_provenance(self, provenance: Mapping[str, Any]) -> str:
        return describe.describe_provenance(provenance)

    def item_segments(self, details: Mapping[str, Any], item_id: str) -> list[dict[str, Any]]:
        segments = []
        for nugget in (details.get("nuggets") or {}).get(item_id, []):
            act = nugget.get("act") or "sentence (no act given)"
            why = nugget_reasons(nugget)
            title = f"{act}: nugget score {nugget['NS']:.4f}" + (f"; {'; '.join(why)}" if why else "")
            segments.append({"text": nugget["text"], "value": nugget["NS"], "label": act, "reasons": why,
                             "title": title})
        return segments

    def item_context(self, gold: CompiledResponseGold, index: int, references: bool) -> list[tuple[str, str]]:
        """The dialogue context a response answers, and (when the reader may see the gold) the
        references it was scored against with their weights, so that a low nugget score can be
        read against what the references say."""
        lines = [(str(utterance.get("sender", "")), str(utterance.get("text", "")))
                 for utterance in gold.gold.contexts[index]]
        if references:
            lines += [(f"reference (weight {weight:g})", text) for text, weight in gold.gold.references[index]]
            if gold.has_extended:
                lines += [(f"vBLEU reference (weight {entry[1]:g})", entry[0]) for entry in gold.gold.extended[index]]
        return lines

    def subset_details(self, details: Mapping[str, Any], item_ids: list[str]) -> dict[str, Any]:
        """The nugget details of the given items, and their acts' mean NS over those items only,
        summed in the same order as ``act_means`` (items in gold order, nuggets in turn order)."""
        nuggets = details.get("nuggets")
        if not nuggets:
            return {}
        kept = {item: nuggets[item] for item in item_ids if item in nuggets}
        totals: dict[str, list[float]] = {}
        for turn in kept.values():
            for nugget in turn:
                if nugget.get("act") is not None:
                    totals.setdefault(nugget["act"], []).append(nugget["NS"])
        return {"nuggets": kept, "acts": {act: sum(values) / len(values) for act, values in sorted(totals.items())}}

    def nugget_details(self, run: ParsedResponseRun, gold: CompiledResponseGold, config: ResponseConfig,
                       items: np.ndarray | None = None) -> dict[str, Any]:
        """``Scored.details`` of the run (or of ``items``): ``{"nuggets": {id: [...]}, "acts": {act: mean
        NS}}``, or ``{}`` when the configuration's ``nuggets.score`` leaves them out. ``score`` calls
        it; a server that shows scores first can score with ``nugget_mode="never"`` and call this in a
        later job (it is the expensive part: every variant of every turn)."""
        gold_items, positions, _ = self._scored_items(run, gold, items)
        if not self._nuggets_on(run, gold, config, positions, gold_items):
            return {}
        turns = run.run.turns(gold.gold)
        chosen = [turns[position] for position in positions]
        measure: TurnMeasure
        if config.nugget_measure == "posscore":
            encoder, prepared, _, _ = self._posscore(gold, config)
            measure = PosscoreTurns(encoder, prepared)
        else:
            measure = BleuTurns(gold.bleu_references(config.bleu_options(config.nugget_measure)))
        # spaCy is needed only to split responses that came without nuggets.
        nlp = load_pipeline(config.pipeline) if any(turn.nuggets is None for turn in chosen) else None
        results = score_nuggets(chosen, measure, config.nuggets, nlp=nlp)
        return {"nuggets": {gold.item_ids[turn.item]: [nugget.as_dict() for nugget in scored]
                            for turn, scored in zip(chosen, results)},
                "acts": act_means(results)}

    # Baselines and display ----------------------------------------------------------------------------
    def baselines(self, gold: CompiledResponseGold, config: ResponseConfig) -> list[Baseline]:
        echo = [{"id": item_id, "response": context[-1]["text"] if context else GENERIC_REPLY}
                for item_id, context in zip(gold.item_ids, gold.gold.contexts)]
        generic = [{"id": item_id, "response": GENERIC_REPLY} for item_id in gold.item_ids]
        return [
            Baseline("echo", "Baseline: repeats the last utterance of the context (a parrot; contexts without "
                             "utterances get the generic reply).", echo),
            Baseline("generic", f"Baseline: the same generic reply everywhere ({GENERIC_REPLY!r}).", generic),
        ]

    def describe_item(self, gold: CompiledResponseGold, index: int) -> str:
        context = gold.gold.contexts[index]
        references = len(gold.gold.references[index])
        counted = f"{references} reference{'s' if references != 1 else ''}"
        if gold.has_extended:
            counted += f" + {len(gold.gold.extended[index])} for vBLEU"
        if not context:
            return f"context {gold.item_ids[index]} ({counted})"
        last = " ".join(context[-1]["text"].split())
        last = last if len(last) <= 80 else last[:77] + "..."
        return f"context {gold.item_ids[index]}: {context[-1]['sender']}: \u201c{last}\u201d ({counted})"

    # What participants get --------------------------------------------------------------------------------
    def participant_data(self, data: object, config: ResponseConfig) -> list[dict[str, Any]]:
        # Only the keys participants need are copied: references, their ratings and the organisers'
        # nugget alternatives stay private, and so does any key an organiser adds.
        return [{"id": entry["id"],
                 "context": [{"sender": utterance["sender"], "text": utterance["text"]}
                             for utterance in entry.get("context", [])]}
                for entry in data]  # type: ignore[union-attr]

    def hidden_annotations(self, entry: Mapping[str, Any], config: ResponseConfig) -> Iterator[tuple[str, str]]:
        # Each reference text of an item (the ones vBLEU added too), one record each; the weight
        # is left out so that a reference copied with another rating is still found.
        references, item_id = entry.get("references"), canonical_id(entry.get("id"))
        if not isinstance(references, list) or item_id is None:
            return
        for reference in references:
            text = reference.get("text") if isinstance(reference, Mapping) else reference
            if isinstance(text, str) and text.strip():
                record = canonical_record("reference", item_id, text)
                if record is not None:
                    yield item_id, record

    def format_description(self, config: ResponseConfig) -> dict[str, Any]:
        return describe.format_description(config, {spec.key: spec.title for spec in self.measures(config)})
