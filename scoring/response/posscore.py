"""POSSCORE (seed 000, Section 3.4, eq. 1-3; RESPONSE-SPEC.md).

Each response is tagged (Universal POS, spaCy); punctuation and whitespace tokens are dropped.
POS words are those whose tag is in the task's set (default ADJ, ADV, VERB, NOUN, PROPN, the
seed's best setting). For a reference r and a candidate c::

    n_r = (#POS words of r) / (#tokens of r) ;  n_c likewise ;  w = exp(1 - n_r / n_c)      (eq. 3)
    POSSCORE(r, c) = w * S(r_pos, c_pos) + S(r_rest, c_rest)                               (eq. 1)
    S(x, y) = cosine of the mean word vectors of x and of y                                (eq. 2)

Tokens without a vector are skipped in the means; S is 0 when either side has no vector. Edge
cases of w: n_c = 0 gives w = 0, or w = 1 when n_r = 0 too; a text with no token left has n = 0.
With several references the item's score is the **maximum** over its references (those with a
weight above ``min_weight``, default 0: references rated inappropriate are not targets).
Range (-1, e + 1); higher is better.

A text is reduced to one additive row (``encode``): the sums of the POS words' vectors and of the
other words' vectors, how many of each had a vector, the number of POS words and of tokens. Sums
give the same cosines as means, and rows add up, so a turn put together from nuggets is the sum
of its nuggets' rows (nuggets.py). References are fixed per gold version: ``prepare_references``
tags and embeds them once into arrays (``PreparedReferences.to_arrays``, serialisable with
``numpy.savez``) that are loaded with the gold.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scoring.response.nlp import (
    DEFAULT_PIPELINE,
    PosMapper,
    VectorTable,
    load_pipeline,
    pipeline_provenance,
    pipeline_vectors,
)

DEFAULT_TAGS: tuple[str, ...] = ("ADJ", "ADV", "VERB", "NOUN", "PROPN")
# Universal POS tags spaCy assigns (spacy.parts_of_speech), for validating a task's tag set.
UNIVERSAL_TAGS: tuple[str, ...] = (
    "ADJ", "ADP", "ADV", "AUX", "CCONJ", "CONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN", "PUNCT",
    "SCONJ", "SYM", "VERB", "X", "SPACE",
)
_DROPPED_TAGS = ("PUNCT", "SPACE")


def _check_tags(tags: Sequence[str]) -> tuple[str, ...]:
    tags = tuple(tags)
    unknown = [tag for tag in tags if tag not in UNIVERSAL_TAGS or tag in _DROPPED_TAGS]
    if unknown or not tags:
        allowed = ", ".join(tag for tag in UNIVERSAL_TAGS if tag not in _DROPPED_TAGS)
        raise ValueError(
            f"POSSCORE tags must be a non-empty set of {allowed}; not {', '.join(map(repr, unknown)) or 'an empty set'}"
        )
    return tags


@dataclass
class PosEncoder:
    """Tags texts with the pipeline and reduces each to its additive POSSCORE row.

    ``n_process`` > 1 splits the texts between worker processes (forked, so each inherits the
    loaded pipeline) that return only the rows; ``batch_size`` is the ``nlp.pipe`` batch.
    """

    pipeline: str = DEFAULT_PIPELINE
    tags: tuple[str, ...] = DEFAULT_TAGS
    vectors: VectorTable | None = None  # None: the pipeline's own vectors
    lowercase: bool = True  # look the pipeline's own vectors up lower-cased (nlp.pipeline_vectors)
    batch_size: int = 256
    n_process: int = 1
    _state: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.tags = _check_tags(self.tags)
        if not isinstance(self.n_process, int) or self.n_process < 1:
            raise ValueError(f"n_process must be a positive integer, not {self.n_process!r}")

    def _ready(self) -> dict:
        if not self._state:
            from spacy.attrs import IDS
            from spacy.parts_of_speech import IDS as POS_IDS

            nlp = load_pipeline(self.pipeline)
            table = self.vectors if self.vectors is not None else pipeline_vectors(nlp, self.lowercase)
            mapper = PosMapper.from_pipeline(nlp)
            # With the mapper the ruler need not run; sentences are not needed here.
            skipped = ["sentencizer"] + (["attribute_ruler"] if mapper is not None else [])
            self._state.update(
                nlp=nlp,
                table=table,
                mapper=mapper,
                disabled=[name for name in skipped if name in nlp.pipe_names],
                pos_ids=np.array([POS_IDS[tag] for tag in self.tags], dtype=np.uint64),
                dropped_ids=np.array([POS_IDS[tag] for tag in _DROPPED_TAGS], dtype=np.uint64),
                attributes=[IDS[table.attribute], IDS["POS"], IDS["IS_PUNCT"], IDS["IS_SPACE"], IDS["TAG"],
                            IDS["LOWER"]],
            )
        return self._state

    @property
    def dimensions(self) -> int:
        return self._ready()["table"].shape[1]

    def settings(self) -> dict[str, object]:
        """Pipeline, vectors and tags, recorded with every POSSCORE."""
        state = self._ready()
        nlp, table = state["nlp"], state["table"]
        return {
            **pipeline_provenance(nlp),
            "vectors": table.provenance(),
            "tags": list(self.tags),
            "dropped": "punctuation and whitespace tokens",
            "pos_from": "attribute_ruler patterns, vectorised" if state["mapper"] is not None else "attribute_ruler",
            "references": "maximum over the references",
        }

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One additive row per text, float64 of shape (len(texts), 2 d + 4); see ``row_layout``."""
        texts = list(texts)
        self._ready()
        distinct = list(dict.fromkeys(texts))
        if len(distinct) < len(texts):
            # Runs repeat themselves (generic replies, echo baselines): tag each distinct text once.
            position = {text: row for row, text in enumerate(distinct)}
            return self.encode(distinct)[[position[text] for text in texts]]
        # A daemonic process (a Celery prefork worker) may not start children: it tags alone, and
        # the parallelism comes from running several workers.
        if self.n_process > 1 and len(texts) >= 2 * self.batch_size and not multiprocessing.current_process().daemon:
            return self._encode_parallel(texts)
        return self._encode_local(texts)

    def _encode_local(self, texts: list[str]) -> np.ndarray:
        state = self._ready()
        nlp = state["nlp"]
        with nlp.select_pipes(disable=state["disabled"]):
            arrays = [doc.to_array(state["attributes"]) for doc in nlp.pipe(texts, batch_size=self.batch_size)]
        return _rows_from_token_arrays(arrays, state["table"], state["pos_ids"], state["dropped_ids"], state["mapper"])

    def _encode_parallel(self, texts: list[str]) -> np.ndarray:
        # Forked workers inherit the loaded pipeline and vectors: nothing is pickled but texts and rows.
        context = multiprocessing.get_context("fork")
        chunk = max(self.batch_size, -(-len(texts) // (self.n_process * 4)))
        chunks = [texts[start : start + chunk] for start in range(0, len(texts), chunk)]
        global _FORK_ENCODER
        _FORK_ENCODER = self
        try:
            with context.Pool(self.n_process) as pool:
                parts = pool.map(_encode_in_worker, chunks)
        finally:
            _FORK_ENCODER = None
        return np.concatenate(parts) if parts else np.zeros((0, 2 * self.dimensions + 4))


_FORK_ENCODER: PosEncoder | None = None


def _encode_in_worker(texts: list[str]) -> np.ndarray:
    return _FORK_ENCODER._encode_local(texts)


def row_layout(dimensions: int) -> dict[str, slice | int]:
    """Where each quantity sits in an encoded row."""
    d = dimensions
    return {"pos_sum": slice(0, d), "rest_sum": slice(d, 2 * d), "pos_with_vector": 2 * d,
            "rest_with_vector": 2 * d + 1, "pos_words": 2 * d + 2, "tokens": 2 * d + 3}


def _rows_from_token_arrays(
    arrays: list[np.ndarray], table: VectorTable, pos_ids: np.ndarray, dropped_ids: np.ndarray,
    mapper: PosMapper | None = None,
) -> np.ndarray:
    """Vectorised over every token of the batch: group sums by text through one sparse product."""
    from scipy import sparse

    n_texts = len(arrays)
    d = table.shape[1]
    rows_out = np.zeros((n_texts, 2 * d + 4), dtype=np.float64)
    lengths = np.array([len(array) for array in arrays], dtype=np.int64)
    if n_texts == 0 or lengths.sum() == 0:
        return rows_out
    tokens = np.concatenate([array.reshape(-1, 6) for array in arrays if len(array)]).astype(np.uint64)
    owner = np.repeat(np.arange(n_texts), lengths)
    keys, pos, is_punct, is_space = tokens[:, 0], tokens[:, 1], tokens[:, 2], tokens[:, 3]
    if mapper is not None:
        pos = mapper({"TAG": tokens[:, 4], "LOWER": tokens[:, 5], "IS_SPACE": is_space})
    kept = ~np.isin(pos, dropped_ids) & (is_punct == 0) & (is_space == 0)
    is_pos = kept & np.isin(pos, pos_ids)
    vector_rows = table.rows(keys)
    has_vector = vector_rows >= 0
    data = table.data
    for selection, column, count_column in (
        (is_pos & has_vector, slice(0, d), 2 * d),
        (kept & ~is_pos & has_vector, slice(d, 2 * d), 2 * d + 1),
    ):
        chosen = np.flatnonzero(selection)
        if len(chosen):
            grouping = sparse.csr_matrix(
                (np.ones(len(chosen)), (owner[chosen], np.arange(len(chosen)))), shape=(n_texts, len(chosen))
            )
            rows_out[:, column] = grouping @ data[vector_rows[chosen]].astype(np.float64)
        rows_out[:, count_column] = np.bincount(owner[chosen], minlength=n_texts)
    rows_out[:, 2 * d + 2] = np.bincount(owner[is_pos], minlength=n_texts)
    rows_out[:, 2 * d + 3] = np.bincount(owner[kept], minlength=n_texts)
    return rows_out


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def _pos_ratio(rows: np.ndarray, d: int) -> np.ndarray:
    tokens = rows[:, 2 * d + 3]
    return np.divide(rows[:, 2 * d + 2], tokens, out=np.zeros(len(rows)), where=tokens > 0)


def pos_weight(n_r: np.ndarray | float, n_c: np.ndarray | float) -> np.ndarray:
    """w = exp(1 - n_r / n_c) (eq. 3); n_c = 0 gives 0, or 1 when n_r = 0 too."""
    n_r = np.asarray(n_r, dtype=np.float64)
    n_c = np.asarray(n_c, dtype=np.float64)
    safe = np.where(n_c > 0, n_c, 1.0)
    return np.where(n_c > 0, np.exp(1.0 - n_r / safe), np.where(n_r == 0, 1.0, 0.0))


@dataclass
class PreparedReferences:
    """Every item's references, tagged and embedded once: unit POS / rest vectors and n_r per reference.

    ``offsets[i]:offsets[i + 1]`` are the rows of item i's references.
    """

    pos_unit: np.ndarray
    rest_unit: np.ndarray
    pos_ratio: np.ndarray
    offsets: np.ndarray
    settings: dict[str, object] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays (``numpy.savez``-able); ``settings`` is stored beside them by the caller."""
        return {"pos_unit": self.pos_unit, "rest_unit": self.rest_unit, "pos_ratio": self.pos_ratio,
                "offsets": self.offsets}

    @classmethod
    def from_arrays(
        cls, arrays: dict[str, np.ndarray], settings: dict[str, object] | None = None
    ) -> PreparedReferences:
        prepared = cls(
            np.asarray(arrays["pos_unit"], dtype=np.float64), np.asarray(arrays["rest_unit"], dtype=np.float64),
            np.asarray(arrays["pos_ratio"], dtype=np.float64), np.asarray(arrays["offsets"], dtype=np.int64),
            dict(settings or {}),
        )
        counts = np.diff(prepared.offsets)
        if (counts < 1).any() or prepared.offsets[0] != 0 or prepared.offsets[-1] != len(prepared.pos_ratio):
            raise ValueError("prepared references are inconsistent: every item needs at least one reference")
        if prepared.pos_unit.shape != prepared.rest_unit.shape or len(prepared.pos_unit) != len(prepared.pos_ratio):
            raise ValueError("prepared references are inconsistent: arrays of different lengths")
        return prepared


def prepare_references(
    references: Sequence[Sequence[tuple[str, float]]], encoder: PosEncoder, min_weight: float | None = 0.0
) -> PreparedReferences:
    """Tag and embed every item's references once (``references[i]`` = ``[(text, weight), ...]``)."""
    texts: list[str] = []
    offsets = [0]
    for index, item_references in enumerate(references):
        used = [text for text, weight in item_references if min_weight is None or weight > min_weight]
        if not used:
            raise ValueError(f"item {index} has no reference with a weight above {min_weight}")
        texts.extend(used)
        offsets.append(len(texts))
    rows = encoder.encode(texts)
    d = encoder.dimensions
    return PreparedReferences(
        pos_unit=_unit(rows[:, :d]),
        rest_unit=_unit(rows[:, d : 2 * d]),
        pos_ratio=_pos_ratio(rows, d),
        offsets=np.array(offsets, dtype=np.int64),
        settings={**encoder.settings(), "min_weight": min_weight},
    )


def score_rows(rows: np.ndarray, prepared: PreparedReferences, items: Sequence[int] | np.ndarray | None = None
               ) -> np.ndarray:
    """POSSCORE of encoded candidates; ``items[k]`` is the item of row k (default: k). Max over references."""
    rows = np.atleast_2d(rows)
    d = prepared.pos_unit.shape[1]
    items = np.arange(len(rows)) if items is None else np.asarray(items, dtype=np.int64)
    if len(items) != len(rows):
        raise ValueError(f"{len(rows)} candidates but {len(items)} item indices")
    if len(rows) == 0:
        return np.zeros(0)
    starts = prepared.offsets[items]
    counts = prepared.offsets[items + 1] - starts
    candidate = np.repeat(np.arange(len(rows)), counts)
    # Index of each (candidate, reference) pair's reference row.
    reference = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(starts, counts)
    pos_unit = _unit(rows[:, :d])
    rest_unit = _unit(rows[:, d : 2 * d])
    similarity_pos = np.clip(np.einsum("ij,ij->i", prepared.pos_unit[reference], pos_unit[candidate]), -1.0, 1.0)
    similarity_rest = np.clip(np.einsum("ij,ij->i", prepared.rest_unit[reference], rest_unit[candidate]), -1.0, 1.0)
    weight = pos_weight(prepared.pos_ratio[reference], _pos_ratio(rows, d)[candidate])
    pair_scores = weight * similarity_pos + similarity_rest
    return np.maximum.reduceat(pair_scores, np.cumsum(counts) - counts)


def posscore(candidates: Sequence[str], prepared: PreparedReferences, encoder: PosEncoder,
             items: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """POSSCORE of each candidate text against its item's prepared references."""
    return score_rows(encoder.encode(candidates), prepared, items)
