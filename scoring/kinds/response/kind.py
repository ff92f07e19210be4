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

Every measure is one entry of ``scoring.kinds.response.measures`` (title, description, the
configuration sections it reads, resources, languages, scorer): ``measures`` builds the board's
columns from the entries and ``score`` scores through their scorers, the only path there is.
The configuration is described in ``scoring.kinds.response.config``; what the server must do (vector
tables, encoder models, tagging processes) in ``scoring.kinds.response.resources``; the compiled gold in
``scoring.kinds.response.compiled``; the "Scored with" lines and vBLEU provenance in
``scoring.kinds.response.describe``. Their public names are importable from here too.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from scoring.kinds.base import Baseline, Kind, MeasureSpec, Scored, canonical_record
from scoring.kinds.response import availability, describe
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
    PACKAGE_MODEL,
    ConfigInvalid,
    ResponseConfig,
    nugget_reasons,
    parse_config,
)
from scoring.kinds.response.encoder import EncoderUnavailable
from scoring.kinds.response.formats import check_nugget_work, load_response_gold, load_response_run
from scoring.kinds.response.languages import language_support
from scoring.kinds.response.languages import presets as language_presets
from scoring.kinds.response.measures import (
    ScoringJob,
    bleu_references,
    measure_specs,
    present,
    score_measures,
)
from scoring.kinds.response.nlp import NlpUnavailable, load_pipeline
from scoring.kinds.response.nuggets import BleuTurns, PosscoreTurns, TurnMeasure, act_means, score_nuggets
from scoring.kinds.response.posscore import PosEncoder, PreparedReferences
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
from scoring.kinds.response.config import (  # noqa: E402, F401
    BLEU_KEYS,
    LANGUAGES,
    MAX_ACT_CHARS,
    MAX_ACTS,
    NUGGET_MEASURES,
    NUGGET_MODES,
    VBERTSCORE,
    VBERTSCORE_CITATION,
    VBLEU,
    VBLEU_CITATION,
)
from scoring.kinds.response.measures import TEXT_BLOCK_CHARS, text_blocks  # noqa: E402, F401
from scoring.kinds.response.posscore import rows_from_tagged  # noqa: E402, F401
from scoring.kinds.response.resources import RESOURCE_SUFFIXES  # noqa: E402, F401

# A fixed generic reply, the classic dull response of open-domain dialogue systems: a baseline.
GENERIC_REPLY = "I don't know what you mean."

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
        # Without a gold: every measure a version of the task may have (a task's columns); with
        # one: vBLEU and vBERTScore only when the gold holds references vBLEU added.
        return measure_specs(config, None if gold is None else gold.has_extended)

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

    def score(self, run: ParsedResponseRun, gold: CompiledResponseGold, config: ResponseConfig,
              items: np.ndarray | None = None) -> Scored:
        gold_items, positions, n_missing = self._scored_items(run, gold, items)
        job = ScoringJob(run=run, gold=gold, config=config, gold_items=gold_items, positions=positions,
                         responses=[run.run.responses[position] for position in positions],
                         sacrebleu=_sacrebleu_version(), encoder=partial(task_encoder, config),
                         references_from=EXTENSIONS[gold.retrieval or "bm25"] if gold.has_extended else "",
                         settings={"measures": list(config.measures), "language": config.language})
        warnings = list(run.warnings)
        if config.needs_posscore:
            # POSSCORE's or the nugget scores' references (a warning when they had to be tagged now).
            encoder, prepared, tagging, tagging_warnings = self._posscore(gold, config)
            job.posscore = (encoder, prepared, tagging)
            warnings += tagging_warnings
        keys = present(config, gold.has_extended)
        score_measures(job, keys)
        nuggets_on = self._nuggets_on(run, gold, config, positions, gold_items)
        job.settings["nuggets"] = {"scored": nuggets_on, "score": config.nugget_mode,
                                   "measure": config.nugget_measure,
                                   **{name: value for name, value in config.nuggets.settings().items()
                                      if name != "acts"}, "tags": "per nugget"}
        details = self.nugget_details(run, gold, config, items) if nuggets_on else {}
        return Scored(item_ids=[gold.item_ids[item] for item in gold_items],
                      per_item={key: job.per_item[key] for key in keys},
                      headlines={key: job.headlines[key] for key in keys}, settings=job.settings,
                      statistics=job.statistics, warnings=warnings, n_missing=n_missing, details=details)

    @staticmethod
    def _nuggets_on(run: ParsedResponseRun, gold: CompiledResponseGold, config: ResponseConfig,
                    positions: np.ndarray, gold_items: np.ndarray) -> bool:
        if config.nugget_mode != "auto":
            return config.nugget_mode == "always"
        # Decided on the scored items alone, so scoring a subset is scoring the restricted files.
        return any(run.run.nuggets[position] is not None for position in positions) or any(
            gold.gold.alternatives[item] for item in gold_items)

    def prepare_gold(self, gold: CompiledResponseGold, config: ResponseConfig) -> None:
        """The BLEU family's n-gram tables and POSSCORE's reference vectors from the stored tags
        (about a second for 1,500 items with 3 references each): what the first run against a gold
        version prepares. BERTScore's reference encodings are left to the first run that needs
        them: encoding a large gold's references can take minutes, and a worker that spent them
        at its start would keep every queued run waiting."""
        bleu_references(gold, config, present(config, gold.has_extended))
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
