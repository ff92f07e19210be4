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
Range (-(e + 1), e + 1): w in (0, e) and each S in [-1, 1]; higher is better.

A text is reduced to one additive row (``encode``): the sums of the POS words' vectors and of the
other words' vectors, how many of each had a vector, the number of POS words and of tokens. Sums
give the same cosines as means, and rows add up, so a turn put together from nuggets is the sum
of its nuggets' rows (nuggets.py). References are fixed per gold version: ``prepare_references``
tags and embeds them once into arrays (``PreparedReferences.to_arrays``, serialisable with
``numpy.savez``) that are loaded with the gold.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from threadpoolctl import threadpool_limits

from scoring.kinds.response.nlp import (
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
SCORE_CHUNK = 8192  # candidates scored at once by score_rows


def _check_tags(tags: Sequence[str]) -> tuple[str, ...]:
    tags = tuple(tags)
    unknown = [tag for tag in tags if tag not in UNIVERSAL_TAGS or tag in _DROPPED_TAGS]
    if unknown or not tags:
        allowed = ", ".join(tag for tag in UNIVERSAL_TAGS if tag not in _DROPPED_TAGS)
        raise ValueError(
            f"POSSCORE tags must be a non-empty set of {allowed}; not {', '.join(map(repr, unknown)) or 'an empty set'}"
        )
    return tags


# Characters of texts tagged and reduced to rows at a time (``PosEncoder.encode``).
ENCODE_BLOCK_CHARS = 1_000_000
# Characters of texts in one batch of spaCy's pipe (``PosEncoder._token_arrays``).
TAG_BATCH_CHARS = 40_000


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
        with self.encode_started(texts) as started:
            return started.rows()

    def encode_started(self, texts: Sequence[str]) -> Started:
        """``encode``, begun now: where ``encode`` tags in forked processes, they start at once and
        the caller may do other work in this process meanwhile (the response kind computes BLEU
        while they tag: 0.35 s of a 1,500-response run that this process spent waiting); ``rows()``
        waits for them. Anywhere else the rows are made when ``rows()`` is called. Use it as a
        context manager, so that the processes end even if ``rows()`` is never called."""
        texts = list(texts)
        self._ready()
        distinct = list(dict.fromkeys(texts))
        # Runs repeat themselves (generic replies, echo baselines): tag each distinct text once.
        order = None if len(distinct) == len(texts) else [dict(zip(distinct, range(len(distinct))))[text]
                                                         for text in texts]
        # A daemonic process (a Celery prefork worker) may not start children: it tags alone, and
        # the parallelism comes from running several workers.
        if self.n_process > 1 and len(distinct) >= 2 * self.batch_size and \
                not multiprocessing.current_process().daemon:
            return Started(self._in_workers_started("_encode_local", distinct), order, self._empty_rows())
        return Started(None, order, self._empty_rows(), lambda: self._encode_local(distinct))

    def _empty_rows(self) -> np.ndarray:
        return np.zeros((0, 2 * self.dimensions + 4))

    def _token_arrays(self, texts: list[str], first: str) -> list[np.ndarray]:
        """One array per text: columns ``first`` (the lookup attribute or ORTH), POS, IS_PUNCT,
        IS_SPACE, TAG, LOWER, from one ``nlp.pipe`` pass with only the tagging components."""
        from spacy.attrs import IDS

        state = self._ready()
        nlp = state["nlp"]
        attributes = [IDS[first]] + state["attributes"][1:]
        # spaCy's batch is a number of texts, and its memory follows their length: 256 responses
        # of 3,000 characters took 2.2 GB, 4 took 80 MB (about 3 KB a character while tagging).
        # A batch of at most TAG_BATCH_CHARS characters (texts of average length) keeps 256
        # texts of 30 tokens together and tags long ones a few at a time.
        mean_length = max(1, sum(len(text) for text in texts) // max(1, len(texts)))
        batch_size = max(1, min(self.batch_size, TAG_BATCH_CHARS // mean_length))
        # One BLAS thread (the models multiply with NumPy's BLAS, nlp.load_pipeline): a threaded
        # BLAS in each of n_process taggers would put more threads than cores on the machine.
        with nlp.select_pipes(disable=state["disabled"]), threadpool_limits(limits=1, user_api="blas"):
            return [doc.to_array(attributes) for doc in nlp.pipe(texts, batch_size=batch_size)]

    def _encode_local(self, texts: list[str]) -> np.ndarray:
        state = self._ready()
        parts = []
        # A block of texts at a time: the token columns take about 150 bytes a token while rows
        # are made, 1.2 GB for a 30 MB run at once (issue 28); a text's row depends on its own
        # tokens only, so the blocks give the same rows.
        start, size = 0, 0
        for index, text in enumerate(texts):
            size += len(text)
            if size >= ENCODE_BLOCK_CHARS or index == len(texts) - 1:
                arrays = self._token_arrays(texts[start : index + 1], state["table"].attribute)
                parts.append(_rows_from_token_arrays(arrays, state["table"], state["pos_ids"], state["dropped_ids"],
                                                     state["mapper"]))
                start, size = index + 1, 0
        return np.concatenate(parts) if parts else np.zeros((0, 2 * self.dimensions + 4))

    def _in_workers(self, method: str, texts: list[str]) -> list:
        pending = self._in_workers_started(method, texts)
        try:
            return pending.get()
        finally:
            pending.close()

    def _in_workers_started(self, method: str, texts: list[str]) -> _InWorkers:
        # Forked workers inherit the loaded pipeline and vectors: nothing is pickled but texts and
        # results. They are forked when the pool is made, so the module globals they read may be
        # cleared as soon as it exists.
        context = multiprocessing.get_context("fork")
        chunk = max(self.batch_size, -(-len(texts) // (self.n_process * 4)))
        chunks = [texts[start : start + chunk] for start in range(0, len(texts), chunk)]
        global _FORK_ENCODER, _FORK_METHOD
        _FORK_ENCODER, _FORK_METHOD = self, method
        try:
            pool = context.Pool(self.n_process, initializer=_default_signals)
        finally:
            _FORK_ENCODER = None
        return _InWorkers(pool, pool.map_async(_run_in_worker, chunks))

    def tag(self, texts: Sequence[str]) -> TaggedTexts:
        """The kept tokens of every text (punctuation and whitespace dropped) with their Universal
        POS tags, independent of any vector table, tag set or lookup case: what a gold version
        stores of its references, so they are tagged once and embedded with whatever vectors the
        task names (``rows_from_tagged``). Splits the work like ``encode``."""
        texts = list(texts)
        self._ready()
        if self.n_process > 1 and len(texts) >= 2 * self.batch_size and not multiprocessing.current_process().daemon:
            return TaggedTexts.concatenate(self._in_workers("_tag_local", texts))
        return self._tag_local(texts)

    def _tag_local(self, texts: list[str]) -> TaggedTexts:
        state = self._ready()
        arrays = self._token_arrays(texts, "ORTH")
        owner, tokens, pos, kept = _kept_tokens(arrays, state["dropped_ids"], state["mapper"])
        strings = state["nlp"].vocab.strings
        orth = tokens[kept, 0]
        distinct, word = np.unique(orth, return_inverse=True)
        pos_kept = pos[kept]
        tag_ids, tag = np.unique(pos_kept, return_inverse=True)
        return TaggedTexts(
            words=[strings[int(key)] for key in distinct],
            word=word.astype(np.int32).reshape(-1),
            tag_names=[_pos_names()[int(pos_id)] for pos_id in tag_ids],
            tag=tag.astype(np.uint8).reshape(-1),
            offsets=np.concatenate([[0], np.cumsum(np.bincount(owner[kept], minlength=len(texts)))]).astype(np.int64),
        )


_FORK_ENCODER: PosEncoder | None = None
_FORK_METHOD = "_encode_local"


class _InWorkers:
    """Chunks handed to forked tagging processes: ``get`` waits for their results in order;
    ``close`` ends the processes (as leaving ``with Pool()`` does), whether or not they finished."""

    def __init__(self, pool: object, pending: object) -> None:
        self.pool, self.pending = pool, pending

    def get(self) -> list:
        return self.pending.get()

    def close(self) -> None:
        self.pool.terminate()
        self.pool.join()


class Started:
    """An ``encode`` begun by ``PosEncoder.encode_started``."""

    def __init__(self, workers: _InWorkers | None, order: list[int] | None, empty: np.ndarray,
                 local: Callable[[], np.ndarray] | None = None) -> None:
        self.workers, self.order, self.empty, self.local = workers, order, empty, local

    def rows(self) -> np.ndarray:
        if self.workers is not None:
            parts = self.workers.get()
            self.close()
            rows = np.concatenate(parts) if parts else self.empty
        else:
            rows = self.local()
        return rows if self.order is None else rows[self.order]

    def close(self) -> None:
        if self.workers is not None:
            self.workers.close()
            self.workers, self.local = None, lambda: self.empty

    def __enter__(self) -> Started:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _default_signals() -> None:
    # A forked tagger inherits its parent's signal handlers: the background scoring worker's raise
    # to give a run back, and printed a traceback from every tagger when the pool ended them with
    # SIGTERM after each large run. A tagger just ends on SIGTERM; Ctrl-C is its parent's to handle.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_in_worker(texts: list[str]) -> object:
    return getattr(_FORK_ENCODER, _FORK_METHOD)(texts)


@lru_cache(maxsize=1)
def _pos_names() -> dict[int, str]:
    from spacy.parts_of_speech import IDS as POS_IDS

    return {int(pos_id): name for name, pos_id in POS_IDS.items()}




@dataclass
class TaggedTexts:
    """Texts reduced to their kept tokens: text k's tokens are ``offsets[k]:offsets[k + 1]``;
    token t is the word ``words[word[t]]`` (as written) with the tag ``tag_names[tag[t]]``."""

    words: list[str]
    word: np.ndarray
    tag_names: list[str]
    tag: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @classmethod
    def concatenate(cls, parts: Sequence[TaggedTexts]) -> TaggedTexts:
        words: dict[str, int] = {}
        tag_names: dict[str, int] = {}
        word_parts, tag_parts, lengths = [], [], []
        for part in parts:
            word_map = np.array([words.setdefault(text, len(words)) for text in part.words], dtype=np.int32)
            tag_map = np.array([tag_names.setdefault(name, len(tag_names)) for name in part.tag_names], dtype=np.uint8)
            word_parts.append(word_map[part.word] if len(part.word) else part.word)
            tag_parts.append(tag_map[part.tag] if len(part.tag) else part.tag)
            lengths.append(np.diff(part.offsets))
        counts = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
        return cls(list(words), np.concatenate(word_parts).astype(np.int32) if word_parts else np.zeros(0, np.int32),
                   list(tag_names), np.concatenate(tag_parts).astype(np.uint8) if tag_parts else np.zeros(0, np.uint8),
                   np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))


def rows_from_tagged(tagged: TaggedTexts, table: VectorTable, tags: Sequence[str] = DEFAULT_TAGS) -> np.ndarray:
    """The rows ``PosEncoder(tags=tags, vectors=table).encode`` gives the same texts, from their
    stored tags: only the vector look-up is done again (the table's ``attribute`` decides the case)."""
    tags = _check_tags(tags)
    n_texts = len(tagged)
    lengths = np.diff(tagged.offsets)
    owner = np.repeat(np.arange(n_texts), lengths)
    word_rows, data = table.lookup_words(tagged.words)
    vector_rows = word_rows[tagged.word] if len(tagged.word) else np.zeros(0, dtype=np.int64)
    chosen_tags = [index for index, name in enumerate(tagged.tag_names) if name in tags]
    is_pos = np.isin(tagged.tag, np.array(chosen_tags, dtype=np.uint8))
    kept = np.ones(len(tagged.word), dtype=bool)
    return _group_rows(n_texts, owner, vector_rows, kept, is_pos, data)


def row_layout(dimensions: int) -> dict[str, slice | int]:
    """Where each quantity sits in an encoded row."""
    d = dimensions
    return {"pos_sum": slice(0, d), "rest_sum": slice(d, 2 * d), "pos_with_vector": 2 * d,
            "rest_with_vector": 2 * d + 1, "pos_words": 2 * d + 2, "tokens": 2 * d + 3}


def _kept_tokens(
    arrays: list[np.ndarray], dropped_ids: np.ndarray, mapper: PosMapper | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every token of the batch: its text's index, its columns, its POS id and whether it is kept
    (not punctuation or whitespace)."""
    lengths = np.array([len(array) for array in arrays], dtype=np.int64)
    if lengths.sum() == 0:
        empty = np.zeros(0, dtype=np.uint64)
        return np.zeros(0, dtype=np.int64), np.zeros((0, 6), dtype=np.uint64), empty, np.zeros(0, dtype=bool)
    tokens = np.concatenate([array.reshape(-1, 6) for array in arrays if len(array)]).astype(np.uint64)
    owner = np.repeat(np.arange(len(arrays)), lengths)
    pos, is_punct, is_space = tokens[:, 1], tokens[:, 2], tokens[:, 3]
    if mapper is not None:
        pos = mapper({"TAG": tokens[:, 4], "LOWER": tokens[:, 5], "IS_SPACE": is_space})
    kept = ~np.isin(pos, dropped_ids) & (is_punct == 0) & (is_space == 0)
    return owner, tokens, pos, kept


def _rows_from_token_arrays(
    arrays: list[np.ndarray], table: VectorTable, pos_ids: np.ndarray, dropped_ids: np.ndarray,
    mapper: PosMapper | None = None,
) -> np.ndarray:
    """Vectorised over every token of the batch: group sums by text through one sparse product."""
    owner, tokens, pos, kept = _kept_tokens(arrays, dropped_ids, mapper)
    if len(tokens) == 0:
        return np.zeros((len(arrays), 2 * table.shape[1] + 4), dtype=np.float64)
    is_pos = kept & np.isin(pos, pos_ids)
    vector_rows, data = table.lookup(tokens[:, 0])
    return _group_rows(len(arrays), owner, vector_rows, kept, is_pos, data)


def _group_rows(n_texts: int, owner: np.ndarray, vector_rows: np.ndarray, kept: np.ndarray, is_pos: np.ndarray,
                data: np.ndarray) -> np.ndarray:
    """Each text's row from its tokens: the vector sums of its POS words and of its other kept
    words, how many of each had a vector, its POS words and its kept tokens."""
    from scipy import sparse

    d = data.shape[1]
    rows_out = np.zeros((n_texts, 2 * d + 4), dtype=np.float64)
    if n_texts == 0 or len(owner) == 0:
        return rows_out
    has_vector = vector_rows >= 0
    for selection, column, count_column in (
        (is_pos & has_vector, slice(0, d), 2 * d),
        (kept & ~is_pos & has_vector, slice(d, 2 * d), 2 * d + 1),
    ):
        chosen = np.flatnonzero(selection)
        if len(chosen):
            # How often each text holds each row of the table, times the table: never a
            # tokens x dimensions copy (1.4 GB for 600,000 tokens at 300 dimensions).
            grouping = sparse.csr_matrix(
                (np.ones(len(chosen)), (owner[chosen], vector_rows[chosen])), shape=(n_texts, len(data))
            )
            rows_out[:, column] = grouping @ data
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
    def from_rows(cls, rows: np.ndarray, offsets: np.ndarray, settings: dict[str, object] | None = None
                  ) -> PreparedReferences:
        """From the encoded rows of every reference; ``offsets[i]:offsets[i + 1]`` are item i's."""
        d = (rows.shape[1] - 4) // 2
        return cls(pos_unit=_unit(rows[:, :d]), rest_unit=_unit(rows[:, d : 2 * d]), pos_ratio=_pos_ratio(rows, d),
                   offsets=np.asarray(offsets, dtype=np.int64), settings=dict(settings or {}))

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
    return PreparedReferences.from_rows(rows, np.array(offsets, dtype=np.int64),
                                        {**encoder.settings(), "min_weight": min_weight})


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
    if len(rows) > SCORE_CHUNK:
        # Each (candidate, reference) pair gathers two vectors: bound the memory of a large batch
        # (the nugget variants of a run) by scoring it in chunks; every row's score is the same.
        return np.concatenate([score_rows(rows[start : start + SCORE_CHUNK], prepared,
                                          items[start : start + SCORE_CHUNK])
                               for start in range(0, len(rows), SCORE_CHUNK)])
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
