"""A gold version's encoded references, kept between processes (issue 29: "encode each text once").

Encoding is BERTScore's cost: a vBLEU-extended gold of 10^4 items holds up to 1.5 * 10^5 distinct
reference texts, about 2.7 CPU hours at this machine's 15.5 texts per CPU second (docs/bertscore.md).
A worker keeps them in memory (``CompiledResponseGold.bert_references``); this module keeps them in a
store too (the server's blob store, folder ``encodings``), so that a restarted worker, or another
one, reads them instead of encoding them again.

**Key.** What the vectors depend on, and nothing else: the SHA-256 of the gold's distinct reference
texts in order (``texts_checksum``: the gold's content as BERTScore sees it), the model file's SHA-256,
the layer and the prefix. The file's name in the store is the SHA-256 of that key (``EncodingKey.name``),
and the key is written inside the file and compared on every read.

**File** (``.npys``): three arrays in numpy's own ``.npy`` format one after another, read with
``allow_pickle=False``: a JSON header as bytes (the key, the counts, the dtype and the SHA-256 of the
two arrays' data), the texts' row offsets (int64, texts + 1) and the token vectors of every text in
order (float16, rows x dimension: what a worker keeps in memory, so a score from the file is
bit-identical to one from a fresh encode). About 2 bytes per dimension per token: 384-d vectors of
2.2 * 10^5 tokens (10^4 references of about 22 tokens) take 169 MB.

**Memory.** Writing streams one text's rows at a time (two passes: the checksum, then the bytes);
reading checks the checksum in 4 MB chunks and then maps the vectors (``numpy.memmap``): each text's
rows are a view into the page cache, not a copy.

**Trust.** A file is used only if its header, shapes, dtype, offsets and checksum all agree with the
key asked for; anything else is ``EncodingsDamaged``, and the caller encodes the texts again and
replaces the file. Two workers encoding the same gold at once write the same content; the store
keeps the first (``EncodingStore.keep``) and the second adopts it, so every worker scores with the
same bits.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Protocol

import numpy as np

__all__ = ["FORMAT", "DirectoryEncodingStore", "EncodingKey", "EncodingStore", "EncodingsDamaged", "encoded_texts",
           "events", "read_encodings", "set_encoding_store", "texts_checksum", "write_encodings"]

FORMAT = "evalserver-bert-references/1"
DTYPE = np.dtype("<f2")
OFFSETS = np.dtype("<i8")
CHUNK = 1 << 22
MAX_HEADER = 1 << 16  # the JSON header is a few hundred bytes; a larger one is not ours
SUFFIX = ".npys"
logger = logging.getLogger(__name__)

# What happened to encoded references in this process: "encoded" (texts sent through the encoder
# because no usable file was there), "loaded" (files read), "stored" (files this process kept),
# "adopted" (another worker's file kept first, read instead of our own), "damaged" (files refused).
events: Counter[str] = Counter()
_EVENTS_LOCK = threading.Lock()


class EncodingsDamaged(ValueError):
    """A stored file that is not the encoded references asked for (truncated, altered, another key)."""


@dataclass(frozen=True)
class EncodingKey:
    """What a gold's encoded references depend on."""

    texts_sha256: str  # texts_checksum of the distinct texts, in order
    model_sha256: str
    layer: int
    prefix: str

    def as_dict(self) -> dict[str, object]:
        return {"format": FORMAT, **asdict(self)}

    def name(self) -> str:
        """The file's name in the store: the SHA-256 of the key (64 hex digits, like every blob's)."""
        return hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def texts_checksum(texts: Sequence[str]) -> str:
    """The SHA-256 of the texts in order (a JSON list: no two different lists give the same bytes)."""
    return hashlib.sha256(json.dumps(list(texts), ensure_ascii=False).encode()).hexdigest()


class EncodingStore(Protocol):
    """Where encoded references are kept: the server's blob store (``kinds.response.apps``) or a folder."""

    def path(self, name: str) -> Path:
        """A local file holding what is kept under ``name`` (fetched to this host if need be); it
        does not exist when nothing is kept under the name."""
        ...

    def staging(self) -> Path:
        """A folder for a file about to be kept (on the same disk as ``path``'s files)."""
        ...

    def keep(self, name: str, written: Path, *, replace: bool) -> bool:
        """Keep ``written`` under ``name`` unless a file is there already (``replace``: in its place);
        whether this file is the one kept. ``written`` is moved or removed either way."""
        ...


class DirectoryEncodingStore:
    """Encoded references in one folder of this machine, ``<folder>/<name>.npys`` (offline use, tests)."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)

    def path(self, name: str) -> Path:
        return self.folder / f"{name}{SUFFIX}"

    def staging(self) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder

    def keep(self, name: str, written: Path, *, replace: bool) -> bool:
        target = self.path(name)
        try:
            if replace:
                os.replace(written, target)
                return True
            try:
                os.link(written, target)  # refuses to replace: the first writer's file stays
            except FileExistsError:
                return False
            return True
        finally:
            Path(written).unlink(missing_ok=True)


_STORE: EncodingStore | Callable[[], EncodingStore | None] | None = None


def set_encoding_store(store: EncodingStore | Callable[[], EncodingStore | None] | None) -> None:
    """Where this process keeps and finds encoded references (or a function naming it when asked);
    None: nowhere (each process encodes its golds' references once, in memory)."""
    global _STORE
    _STORE = store


def _store() -> EncodingStore | None:
    if _STORE is None or hasattr(_STORE, "keep"):
        return _STORE  # type: ignore[return-value]
    return _STORE()  # type: ignore[operator]


def _count(event: str, n: int = 1) -> None:
    with _EVENTS_LOCK:
        events[event] += n


def _header(key: EncodingKey, offsets: np.ndarray, dimension: int, content_sha256: str) -> dict[str, object]:
    return {**key.as_dict(), "texts": len(offsets) - 1, "rows": int(offsets[-1]), "dimension": dimension,
            "dtype": DTYPE.str, "content_sha256": content_sha256}


def write_encodings(stream: IO[bytes], key: EncodingKey, vectors: Sequence[np.ndarray], dimension: int) -> None:
    """Write the texts' token vectors (in the key's text order) to ``stream``, one text at a time."""
    lengths = np.array([len(rows) for rows in vectors], dtype=OFFSETS)
    if np.any(lengths < 1) or any(rows.ndim != 2 or rows.shape[1] != dimension for rows in vectors):
        raise ValueError(f"every text needs at least one row of {dimension} numbers")
    offsets = np.concatenate([np.zeros(1, OFFSETS), np.cumsum(lengths, dtype=OFFSETS)])
    digest = hashlib.sha256(offsets.tobytes())
    for rows in vectors:
        digest.update(np.ascontiguousarray(rows, dtype=DTYPE).tobytes())
    header = json.dumps(_header(key, offsets, dimension, digest.hexdigest()), sort_keys=True).encode()
    np.lib.format.write_array(stream, np.frombuffer(header, np.uint8), allow_pickle=False)
    np.lib.format.write_array(stream, offsets, allow_pickle=False)
    np.lib.format.write_array_header_1_0(stream, {"descr": DTYPE.str, "fortran_order": False,
                                                  "shape": (int(offsets[-1]), dimension)})
    for rows in vectors:
        stream.write(np.ascontiguousarray(rows, dtype=DTYPE).tobytes())


def _array_header(stream: IO[bytes], what: str) -> tuple[tuple[int, ...], np.dtype]:
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream, max_header_size=MAX_HEADER)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream, max_header_size=MAX_HEADER)
        else:
            raise EncodingsDamaged(f"{what}: .npy version {version}")
    except (ValueError, OSError, SyntaxError) as error:
        raise EncodingsDamaged(f"{what}: not a .npy array header ({error})") from None
    if fortran:
        raise EncodingsDamaged(f"{what}: Fortran order")
    return shape, dtype


def read_encodings(path: Path, key: EncodingKey, texts: int, dimension: int) -> list[np.ndarray]:
    """Each text's token vectors from the file at ``path`` (views of one read-only memory map), after
    checking that the file is the one ``key`` names, for ``texts`` texts of ``dimension`` numbers per
    token, and that its checksum holds. ``EncodingsDamaged`` says what does not."""
    size = path.stat().st_size
    with path.open("rb") as stream:
        shape, dtype = _array_header(stream, "the header")
        if dtype != np.uint8 or len(shape) != 1 or shape[0] > MAX_HEADER:
            raise EncodingsDamaged(f"the header is {dtype} of shape {shape}, not JSON bytes")
        try:
            header = json.loads(stream.read(shape[0]).decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise EncodingsDamaged(f"the header is not JSON ({error})") from None
        if not isinstance(header, dict):
            raise EncodingsDamaged("the header is not a JSON object")
        wrong = {name: (header.get(name), value) for name, value in
                 {**key.as_dict(), "texts": texts, "dimension": dimension, "dtype": DTYPE.str}.items()
                 if header.get(name) != value}
        if wrong:
            raise EncodingsDamaged("the file is not for these texts, this model, layer and prefix: " + "; ".join(
                f"{name} {got!r}, expected {want!r}" for name, (got, want) in wrong.items()))
        rows = header.get("rows")
        shape, dtype = _array_header(stream, "the offsets")
        if dtype != OFFSETS or shape != (texts + 1,):
            raise EncodingsDamaged(f"the offsets are {dtype} of shape {shape}, not int64 of ({texts + 1},)")
        raw = stream.read(OFFSETS.itemsize * (texts + 1))
        if len(raw) != OFFSETS.itemsize * (texts + 1):
            raise EncodingsDamaged("truncated in the offsets")
        offsets = np.frombuffer(raw, dtype=OFFSETS)
        if offsets[0] != 0 or np.any(np.diff(offsets) < 1) or offsets[-1] != rows:
            raise EncodingsDamaged(f"the offsets do not run from 0 up to the {rows} rows, every text at least one")
        shape, dtype = _array_header(stream, "the vectors")
        if dtype != DTYPE or shape != (rows, dimension):
            raise EncodingsDamaged(f"the vectors are {dtype} of shape {shape}, not float16 of ({rows}, {dimension})")
        start = stream.tell()
        if size != start + int(rows) * dimension * DTYPE.itemsize:
            raise EncodingsDamaged(f"{size:,} bytes, not the {start + int(rows) * dimension * DTYPE.itemsize:,} "
                                   "the shapes need (truncated or extended)")
        digest = hashlib.sha256(raw)
        for chunk in iter(lambda: stream.read(CHUNK), b""):
            digest.update(chunk)
        if digest.hexdigest() != header.get("content_sha256"):
            raise EncodingsDamaged("the arrays do not have the checksum the header records")
    vectors = np.memmap(path, dtype=DTYPE, mode="r", offset=start, shape=(int(rows), dimension))
    return [vectors[offsets[i]:offsets[i + 1]] for i in range(texts)]


def encoded_texts(texts: Sequence[str], model_sha256: str, layer: int, prefix: str, dimension: int,
                  encode: Callable[[list[str]], list[np.ndarray]]) -> list[np.ndarray]:
    """The token vectors (float16) of ``texts`` (distinct, in order): from the store when a file for
    exactly these texts, model, layer and prefix is there and sound; otherwise ``encode(texts)``,
    kept in the store for the next process (a damaged file replaced). Without a store: encoded."""
    store = _store()
    texts = list(texts)
    key = EncodingKey(texts_checksum(texts), model_sha256, layer, prefix)
    damaged = False
    if store is not None:
        found = _read(store, key, len(texts), dimension)
        if found is not None:
            return found
        damaged = store.path(key.name()).exists()
    vectors = [np.asarray(rows, dtype=np.float16) for rows in encode(texts)]
    _count("encoded", len(texts))
    if store is None or not texts:
        return vectors
    temporary = None
    try:
        handle, temporary = tempfile.mkstemp(dir=store.staging(), prefix=".encoding-", suffix=SUFFIX)
        with os.fdopen(handle, "wb") as stream:
            write_encodings(stream, key, vectors, dimension)
        kept = store.keep(key.name(), Path(temporary), replace=damaged)
    except Exception:  # a full disk, an unreachable bucket: the scores need only the vectors in hand
        logger.exception("encoded references %s not kept; the next process encodes them again", key.name()[:12])
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        return vectors
    if kept:
        _count("stored")
        return vectors
    # Another worker kept its file first: the same texts through the same model, so the same content
    # on the same kind of machine; read it anyway, so that every worker scores with the same bits.
    adopted = _read(store, key, len(texts), dimension)
    if adopted is None:
        return vectors
    _count("adopted")
    return adopted


def _read(store: EncodingStore, key: EncodingKey, texts: int, dimension: int) -> list[np.ndarray] | None:
    path = store.path(key.name())
    if not path.is_file():
        return None
    try:
        vectors = read_encodings(path, key, texts, dimension)
    except EncodingsDamaged as error:
        _count("damaged")
        logger.warning("encoded references %s refused, encoding again: %s", key.name()[:12], error)
        return None
    _count("loaded")
    return vectors
