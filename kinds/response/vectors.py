"""Word-vector tables organisers upload for a response task's POSSCORE (``load_vectors``): checked
by the scoring core (``parse_word2vec``: every bad line named) and kept in the blob store
(``tasks.blobs``, folder ``vectors``), where the scoring core finds them by checksum
(``scoring.kinds.response.kind.vector_table_path``)."""

from __future__ import annotations

from django.db import transaction

from scoring.kinds.response.nlp import VectorTableError, parse_word2vec
from tasks import blobs
from tasks.errors import Rejected
from tasks.models import Task
from tasks.organising import rescore_runs

KIND = "response"


def set_vector_table(task: Task, content: bytes, name: str = "") -> str:
    """Keep an uploaded word2vec text table (every bad line named; stored whole and durable before
    any configuration names it), point the task's configuration at it and score every run again
    (POSSCORE and the nugget scores change with the vectors). Returns its sha256."""
    if task.kind != KIND:
        raise Rejected([f"{task.slug} is a {task.kind} task; only response tasks use vector tables"])
    try:
        table = parse_word2vec(content, name=name or "uploaded")
    except VectorTableError as error:
        raise Rejected(getattr(error, "problems", None) or [str(error)]) from None
    digest = blobs.store("vectors", content).sha256
    if digest != table.file_checksum:  # both are the SHA-256 of the bytes: a mismatch is a bug
        raise Rejected([f"the vector table's checksum came out as {digest[:12]} and {table.file_checksum[:12]}"])
    config = {**task.config, "vectors": {"sha256": digest, "name": name[:100]}}
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
    return digest
