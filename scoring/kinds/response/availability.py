"""What a response configuration can compute on this machine (issue 42, item 3).

The offline commands (``score``, ``compare``) score with every measure the installation can
compute: a measure that needs something missing (the spaCy pipeline or word vectors of POSSCORE,
the encoder of BERTScore) is left out with one sentence naming what is missing, never the whole
run refused. The server does not use this: a task's organisers are told what is missing when they
configure it (``ResponseKind.check_resources``), since a board must not change its measures with
the machine that scores it.
"""

from __future__ import annotations

from dataclasses import replace

from scoring.kinds.response.config import ResponseConfig
from scoring.kinds.response.encoder import EncoderUnavailable
from scoring.kinds.response.nlp import NlpUnavailable, load_pipeline
from scoring.kinds.response.resources import _vector_table, task_encoder


def _posscore_missing(config: ResponseConfig) -> str | None:
    try:
        load_pipeline(config.pipeline)
        _vector_table(config)
    except NlpUnavailable as error:
        return str(error)
    return None


def computable(config: ResponseConfig) -> tuple[ResponseConfig, list[str]]:
    """``config`` without the measures this machine cannot compute, and one sentence per measure
    left out. When no measure would be left, ``config`` unchanged (``check_resources`` then says why)."""
    left_out: list[str] = []
    drop: set[str] = set()
    if config.needs_posscore:
        missing = _posscore_missing(config)
        if missing:
            drop.add("posscore")
            left_out.append(f"POSSCORE left out: {missing}")
    if config.needs_encoder:
        try:
            task_encoder(config)
        except EncoderUnavailable as error:
            drop.add("bertscore")
            left_out.append(f"BERTScore left out: {error}")
    measures = tuple(name for name in config.measures if name not in drop)
    if not measures:
        return config, []
    changed = replace(config, measures=measures, official=tuple(name for name in config.official if name not in drop))
    if changed.nugget_mode != "never":
        try:
            load_pipeline(changed.pipeline)  # the sentence fallback splits with it
        except NlpUnavailable as error:
            changed = replace(changed, nugget_mode="never")
            left_out.append(f"nugget-level scores left out: {error}")
        else:
            if "posscore" in drop and changed.nugget_measure == "posscore":
                changed = replace(changed, nugget_measure="delta_bleu")
                left_out.append("nugget-level scores are built on deltaBLEU instead of POSSCORE")
    return changed, left_out
