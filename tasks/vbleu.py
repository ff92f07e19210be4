"""vBLEU on the server (issue 15): dialogue pools stored once by checksum, and a response task's gold
extended from a pool (``scoring.response.vbleu``) loaded as a new gold version with its provenance.

The framework-free work (reading the pool, BM25, the rater, the new gold's JSON) is
``scoring.response.vbleu``'s; this module finds the version to extend, stores the pool file under
``MEDIA_ROOT/pools/<sha256[:2]>/<sha256>.jsonl`` (content-addressed like the run files) and loads
the result with ``tasks.organising.load_gold_version``, so runs are re-scored and earlier scores
stay tagged with their version. Nothing is stored when anything fails.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings
from django.db import transaction

from scoring import ValidationFailed, parse_json
from scoring.kinds.response import task_vectors
from scoring.response import vbleu
from tasks.errors import Rejected
from tasks.models import GoldVersion, ReferencePool, Task

__all__ = ["Built", "build_vbleu_version", "gold_to_extend", "pool_file_path", "read_stored_pool", "source_gold",
           "store_pool", "validate_pool"]

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def pool_file_path(sha256: str) -> Path:
    if not _SHA256.match(sha256):
        raise ValueError("not a SHA-256 hex digest")
    return Path(settings.MEDIA_ROOT) / "pools" / sha256[:2] / f"{sha256}.jsonl"


def validate_pool(source: str | os.PathLike | bytes | BinaryIO, progress: vbleu.Progress | None = None,
                  label: str = "pool") -> vbleu.Pool:
    """``vbleu.read_pool``; ``Rejected`` names every bad line (``pool: line 3: ...``)."""
    try:
        return vbleu.read_pool(source, progress)
    except ValidationFailed as error:
        raise Rejected([f"{label}: {line}" for line in error.errors]) from None


def _write_pool_file(source: str | os.PathLike | bytes | BinaryIO, sha256: str) -> bool:
    """Copy the pool's bytes under its checksum (atomically); whether this call wrote the file."""
    path = pool_file_path(sha256)
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
    try:
        with os.fdopen(handle, "wb") as output:
            if isinstance(source, bytes | bytearray | memoryview):
                output.write(source)
            elif isinstance(source, str | os.PathLike):
                with open(source, "rb") as stream:
                    shutil.copyfileobj(stream, output, 1 << 20)
            else:
                source.seek(0)
                shutil.copyfileobj(source, output, 1 << 20)
            output.flush()
            os.fsync(output.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True


def store_pool(source: str | os.PathLike | bytes | BinaryIO, pool: vbleu.Pool, name: str = "",
               user: Any = None) -> tuple[ReferencePool, bool]:
    """Keep a validated pool (``validate_pool``'s ``pool`` of the same ``source``) once by its
    checksum: the file and its row; whether this call wrote the file (so a failure after it can
    take the file back). A pool stored before is returned as it is."""
    created = _write_pool_file(source, pool.sha256)
    try:
        record, _ = ReferencePool.objects.get_or_create(sha256=pool.sha256, defaults={
            "name": name[:255], "n_pairs": len(pool), "size": pool.size,
            "created_by": user if user is not None and getattr(user, "is_authenticated", False) else None})
    except BaseException:
        if created:
            pool_file_path(pool.sha256).unlink(missing_ok=True)
        raise
    return record, created


def read_stored_pool(record: ReferencePool, progress: vbleu.Progress | None = None) -> vbleu.Pool:
    """A stored pool read back (and checked against its checksum)."""
    path = pool_file_path(record.sha256)
    if not path.exists():
        raise Rejected([f"the file of {record} is missing from {path.parent}; upload the pool again"])
    pool = validate_pool(path, progress, label=str(record))
    if pool.sha256 != record.sha256:
        raise Rejected([f"the file of {record} does not have the checksum its name says; upload the pool again"])
    return pool


def _is_extended(version: GoldVersion) -> bool:
    return bool(version.provenance.get("vbleu")) or bool(getattr(version.load(), "has_extended", False))


def gold_to_extend(task: Task, number: int | None = None) -> GoldVersion:
    """Version ``number``, or the latest version without vBLEU references (an extended gold is
    never extended again: extend the version it extends)."""
    if task.kind != "response":
        raise Rejected([f"{task.slug} is a {task.kind} task; vBLEU extends the references of response tasks"])
    if number is not None:
        version = task.gold_versions.filter(number=number).first()
        if version is None:
            known = ", ".join(str(n) for n in task.gold_versions.values_list("number", flat=True)) or "none"
            raise Rejected([f"--from-version: {task.slug} has no gold version {number} (its versions: {known})"])
        if _is_extended(version):
            base = version.provenance.get("extends")
            raise Rejected([f"--from-version: version {number} already holds vBLEU references"
                            + (f"; extend version {base}, the one it extends" if base else "")])
        return version
    for version in task.gold_versions.order_by("-number"):
        if not _is_extended(version):
            return version
    raise Rejected([f"{task.slug} has no gold version to extend; load one with load_gold"])


def source_gold(version: GoldVersion, content: bytes | None = None) -> tuple[list[dict], str]:
    """The gold JSON to extend and where it came from: ``content`` (the version's own file, checked
    by its sha256), or the version's compiled gold written back as JSON (ids, contexts, original
    references), which a gold with nugget alternatives cannot be (their acts are not compiled)."""
    if content is not None:
        if hashlib.sha256(content).hexdigest() != version.sha256:
            raise Rejected([f"--gold: the file is not the one loaded as version {version.number} (sha256 "
                            f"{version.sha256[:12]}…)"])
        try:
            return parse_json(content, "gold file"), f"gold file {version.source_name or version.sha256[:12]}"
        except ValidationFailed as error:
            raise Rejected(error.errors) from None
    compiled = version.load()
    if compiled.has_alternatives:
        raise Rejected([f"version {version.number} holds nugget alternatives, which its compiled form does not keep "
                        "whole: give its gold file with --gold"])
    return compiled.source_entries(), f"the compiled gold of version {version.number}"


@dataclass
class Built:
    version: GoldVersion
    extension: vbleu.Extension
    pool: ReferencePool
    pool_created: bool


def build_vbleu_version(
    task: Task,
    source: str | os.PathLike | bytes | BinaryIO | ReferencePool,
    *,
    from_version: int | None = None,
    gold_content: bytes | None = None,
    retrieval: vbleu.RetrievalSettings | None = None,
    rater: vbleu.RaterSettings | None = None,
    ratings: object = None,
    label: str = "",
    phases: Any = (),
    pool_name: str = "",
    user: Any = None,
    progress: vbleu.Progress | None = None,
) -> Built:
    """Extend a gold version's references from a pool and load the result as a new version.

    ``source``: the pool file (a path, bytes or a stream) or a stored ``ReferencePool``. The pool
    and the new version are stored together, after everything has succeeded; ``Rejected`` lists
    every problem otherwise (the pool's bad lines, the gold's, the ratings', the settings').
    """
    base = gold_to_extend(task, from_version)
    gold_data, origin = source_gold(base, gold_content)
    if isinstance(source, ReferencePool):
        pool = read_stored_pool(source, progress)
    else:
        pool = validate_pool(source, progress)
    vectors = None
    if ratings is None:
        vectors = task_vectors(task.kind_config)
    try:
        extension = vbleu.extend_gold(gold_data, pool, retrieval=retrieval,
                                      rater=None if ratings is not None else rater, ratings=ratings, vectors=vectors,
                                      progress=progress)
    except ValidationFailed as error:
        raise Rejected(error.errors) from None
    except ValueError as error:
        raise Rejected([str(error)]) from None
    provenance = {"extends": base.number, "source": origin, "vbleu": extension.provenance}
    from tasks.organising import load_gold_version

    if isinstance(source, ReferencePool):
        record, created = source, False
    else:
        record, created = store_pool(source, pool, pool_name, user)
    try:
        with transaction.atomic():
            version = load_gold_version(task, extension.gold_json(), source_name=f"vbleu-from-v{base.number}.json",
                                        user=user, label=label, phases=phases, provenance=provenance)
    except BaseException:
        if created:
            # Nothing half-stored: a pool this call added goes with the version it was for.
            ReferencePool.objects.filter(pk=record.pk).delete()
            pool_file_path(record.sha256).unlink(missing_ok=True)
        raise
    return Built(version, extension, record, created)
