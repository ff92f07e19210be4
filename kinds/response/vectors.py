"""Word-vector tables organisers upload for a response task's POSSCORE (``load_vectors``): kept by
checksum under ``MEDIA_ROOT/vectors`` (``scoring.kinds.response.kind.store_vector_table``)."""

from __future__ import annotations

from django.db import transaction

from scoring.kinds.response.kind import store_vector_table
from scoring.kinds.response.nlp import VectorTableError
from tasks.errors import Rejected
from tasks.models import Task
from tasks.organising import rescore_runs

KIND = "response"


def set_vector_table(task: Task, content: bytes, name: str = "") -> str:
    """Keep an uploaded word2vec text table (``scoring.kinds.response.store_vector_table``: every
    bad line named, never half-written), point the task's configuration at it and score every
    run again (POSSCORE and the nugget scores change with the vectors). Returns its sha256."""
    if task.kind != KIND:
        raise Rejected([f"{task.slug} is a {task.kind} task; only response tasks use vector tables"])
    try:
        digest, _ = store_vector_table(content, name=name or "uploaded")
    except VectorTableError as error:
        raise Rejected(getattr(error, "problems", None) or [str(error)]) from None
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
