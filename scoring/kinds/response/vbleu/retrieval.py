"""vBLEU's second stage: finding pool pairs for an item's last utterance, by BM25 (``PoolIndex``) or
by the cosine of sentence vectors (``EmbeddingIndex``, vBERTScore); ``build_index`` makes either."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from scoring.kinds.response.bleu import TOKENIZERS, tokenize
from scoring.kinds.response.vbleu.encodings import SentenceLookup
from scoring.kinds.response.vbleu.pool import Pool, Progress, _Reporter
from scoring.validation import quoted

BM25_METHODS = ("robertson", "lucene", "atire")  # bm25s's variants that need no extra parameter
# How pool pairs are found: BM25 over the utterances' tokens (vBLEU, the spec's default), or the
# cosine of the encoder's sentence vectors of the utterances (vBERTScore, Tsuta et al. 2023, section 4.3).
RETRIEVERS = ("bm25", "embedding")


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
