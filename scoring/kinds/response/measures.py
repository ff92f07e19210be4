"""The response kind's measures: one registry, and the two calls a task-kind adapter makes.

``RESPONSE_MEASURES`` maps each key (``bleu``, ``delta_bleu``, ``posscore``, ``bertscore``) to its direction,
range, citation, official flag and headline aggregation: ``corpus`` (the formula over summed
per-item sufficient statistics, so any subset is exact) or ``mean`` (of the per-item scores).
Error messages about unknown keys are built from it.

    prepared = prepare_gold(gold)                 # once per gold version (tags and embeds references)
    scores = score_run(run, prepared)             # per-item scores, statistics, headlines, settings
    headline("bleu", scores, subset=rows)         # a live subset / resample, exactly
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from scoring.kinds.response import bertscore, bleu
from scoring.kinds.response.formats import ResponseGold, ResponseRun
from scoring.kinds.response.posscore import PosEncoder, PreparedReferences, score_rows
from scoring.kinds.response.posscore import prepare_references as prepare_pos_references


@dataclass(frozen=True)
class ResponseMeasure:
    key: str
    name: str
    citation: str
    value_range: tuple[float, float]
    official: bool
    headline: Literal["corpus", "mean"]
    higher_is_better: bool = True  # every response measure is a similarity
    bleu_config: bleu.BleuConfig | None = None


RESPONSE_MEASURES: dict[str, ResponseMeasure] = {
    "bleu": ResponseMeasure(
        "bleu", "BLEU-4", "Papineni et al. 2002; Tsuta et al. 2023, eq. 3 (sacrebleu tokens, closest reference length)",
        (0.0, 1.0), official=True, headline="corpus", bleu_config=bleu.BLEU,
    ),
    "delta_bleu": ResponseMeasure(
        "delta_bleu", "deltaBLEU-2", "Galley et al. 2015; Tsuta et al. 2023, eq. 1-4 (weighted references)",
        (0.0, 1.0), official=True, headline="corpus", bleu_config=bleu.DELTA_BLEU,
    ),
    "posscore": ResponseMeasure(
        "posscore", "POSSCORE", "Liu et al. 2021 (POSSCORE, CIKM), section 3.4, eq. 1-3 (maximum over references)",
        (-(float(np.e) + 1.0), float(np.e) + 1.0), official=True, headline="mean",
    ),
    # Rescaled F: 1 for identical texts, about 0 for texts as unrelated as random ones, below 0 only
    # for texts less alike than those (the range covers F >= 2b - 1, far below any baseline measured).
    "bertscore": ResponseMeasure(
        "bertscore", "BERTScore F (rescaled)",
        "Zhang et al. 2020; Tsuta et al. 2023, eq. 5-7 (maximum over references, baseline rescaling)",
        (-1.0, 1.0), official=False, headline="mean",
    ),
}


def measure(key: str) -> ResponseMeasure:
    try:
        return RESPONSE_MEASURES[key]
    except KeyError:
        raise ValueError(f"unknown response measure {key!r}; known: {', '.join(RESPONSE_MEASURES)}") from None


@dataclass
class PreparedGold:
    """What a gold version needs for scoring, built once: BLEU-family references and POSSCORE arrays."""

    bleu_references: dict[str, bleu.PreparedReferences]
    posscore_references: PreparedReferences | None
    encoder: PosEncoder | None
    settings: dict[str, object] = field(default_factory=dict)
    bert_references: bertscore.PreparedBertReferences | None = None
    bert_baseline: float = 0.0


def prepare_gold(
    gold: ResponseGold, keys: Sequence[str] = tuple(RESPONSE_MEASURES), encoder: PosEncoder | None = None,
    bleu_configs: dict[str, bleu.BleuConfig] | None = None,
) -> PreparedGold:
    """Prepare the references of ``gold`` for the measures ``keys`` (BLEU configs may be overridden per key)."""
    for key in keys:
        measure(key)
    bleu_references = {}
    settings: dict[str, object] = {}
    for key in keys:
        config = (bleu_configs or {}).get(key) or RESPONSE_MEASURES[key].bleu_config
        if config is not None:
            bleu_references[key] = bleu.prepare_references(gold.references, config)
            settings[key] = config.settings()
    posscore_references = None
    if "posscore" in keys:
        encoder = encoder or PosEncoder()
        posscore_references = prepare_pos_references(gold.references, encoder)
        settings["posscore"] = posscore_references.settings
    prepared = PreparedGold(bleu_references, posscore_references, encoder, settings)
    if "bertscore" in keys:
        from scoring.kinds.response.encoder import E5Encoder

        model = E5Encoder.default()
        prepared.bert_references = bertscore.references_from_texts(model, gold.references, None, weighted=False)
        first = [prepared.bert_references.vectors[prepared.bert_references.token_offsets[start]:
                                                  prepared.bert_references.token_offsets[start + 1]]
                 for start in prepared.bert_references.item_offsets[:-1]]
        prepared.bert_baseline, pairs = bertscore.baseline(first)
        settings["bertscore"] = {**model.info().settings(), "baseline": prepared.bert_baseline,
                                 "baseline_pairs": pairs, "references_used": "weight > 0, each with weight 1"}
    return prepared


@dataclass
class RunScores:
    per_item: dict[str, np.ndarray]  # key -> one score per gold item, in gold order
    statistics: dict[str, np.ndarray]  # corpus-headline keys -> items x S sufficient statistics
    headlines: dict[str, float]
    settings: dict[str, object]
    bleu_configs: dict[str, bleu.BleuConfig] = field(default_factory=dict)


def headline(key: str, scores: RunScores, subset: np.ndarray | Sequence[int] | None = None) -> float:
    """The headline of ``key`` over all items or a subset: corpus formula or mean of per-item scores."""
    spec = measure(key)
    rows = slice(None) if subset is None else np.asarray(subset, dtype=np.int64)
    if spec.headline == "corpus":
        config = scores.bleu_configs[key]
        return bleu.corpus_score(scores.statistics[key][rows], config.max_order, config.brevity)
    return float(np.mean(scores.per_item[key][rows]))


def score_run(run: ResponseRun, prepared: PreparedGold) -> RunScores:
    """Per-item scores of every prepared measure (responses tokenised once for the BLEU family)."""
    per_item: dict[str, np.ndarray] = {}
    statistics: dict[str, np.ndarray] = {}
    tokens_by_case: dict[tuple[bool, str], list[list[str]]] = {}
    for key, references in prepared.bleu_references.items():
        config = references.config
        how = (config.lowercase, config.tokenizer)
        if how not in tokens_by_case:
            tokens_by_case[how] = [bleu.tokenize(text, config.lowercase, config.tokenizer) for text in run.responses]
        stats = bleu.sufficient_statistics(tokens_by_case[how], references)
        statistics[key] = stats
        per_item[key] = bleu.item_scores(stats, config.max_order, config.brevity)
    if prepared.posscore_references is not None:
        per_item["posscore"] = score_rows(prepared.encoder.encode(run.responses), prepared.posscore_references)
    if prepared.bert_references is not None:
        from scoring.kinds.response.encoder import E5Encoder

        candidates = E5Encoder.default().encode(run.responses)
        _, _, f = bertscore.score_items(candidates, prepared.bert_references, run.items)
        per_item["bertscore"] = bertscore.rescale(f, prepared.bert_baseline)
    configs = {key: references.config for key, references in prepared.bleu_references.items()}
    scores = RunScores(per_item, statistics, {}, dict(prepared.settings), configs)
    scores.headlines = {key: headline(key, scores) for key in per_item}
    return scores
