"""vBLEU on the server (issue 15): dialogue pools stored once by checksum, and a response task's gold
extended from a pool (``scoring.kinds.response.vbleu``) loaded as a new gold version with its provenance.

The framework-free work (reading the pool, BM25 or embeddings, the rater, the new gold's JSON) is
``scoring.kinds.response.vbleu``'s; this module finds the version to extend, stores the pool file under
``MEDIA_ROOT/pools/<sha256[:2]>/<sha256>.jsonl`` (content-addressed like the run files) and loads
the result with ``tasks.organising.load_gold_version``, so runs are re-scored and earlier scores
stay tagged with their version. Nothing is stored when anything fails.

vBERTScore's extension (``method="vbertscore"``) encodes every distinct pool text once; the
sentence vectors are kept in the blob store's ``encodings`` folder under the pool's sha256 and the
encoder's (``vbleu.encodings_key``), so a second build from the same pool reads them instead of
encoding again; a file that fails its checks is encoded again and replaced.

From the web this work is a background job (``PoolJob``): a Celery task, or a thread of the web
process without a broker, which writes its stage and counts for the job's page to follow.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, BinaryIO

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from kinds.response.models import PoolJob, ReferencePool
from scoring.kinds.response import vbleu
from scoring.kinds.response.bleu import TokenizerUnavailable
from scoring.kinds.response.kind import task_tokenizer, task_vectors
from scoring.validation import ValidationFailed, parse_json
from tasks import blobs, leases
from tasks.errors import TRANSIENT_DB_ERRORS, Rejected
from tasks.models import GoldVersion, Task

log = logging.getLogger(__name__)

__all__ = ["STAGES", "Built", "build_vbleu_version", "gold_to_extend", "is_extended", "job_options",
           "keep_encodings", "pool_file_path", "read_stored_pool", "run_pool_job", "source_gold", "start_pool_job",
           "store_pool", "stored_encodings", "submit_pool_job", "sweep_pool_jobs", "validate_pool"]

ENCODINGS = "encodings"  # the blob store's folder of files named by what they were made from (blobs.NAMED)

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def pool_file_path(sha256: str) -> Path:
    """A local file with the stored pool (with object storage, this host's checked copy)."""
    return blobs.path("pools", sha256)


def validate_pool(source: str | os.PathLike | bytes | BinaryIO, progress: vbleu.Progress | None = None,
                  label: str = "pool") -> vbleu.Pool:
    """``vbleu.read_pool``; ``Rejected`` names every bad line (``pool: line 3: ...``)."""
    try:
        return vbleu.read_pool(source, progress)
    except ValidationFailed as error:
        raise Rejected([f"{label}: {line}" for line in error.errors]) from None


def store_pool(source: str | os.PathLike | bytes | BinaryIO, pool: vbleu.Pool, name: str = "",
               user: Any = None) -> tuple[ReferencePool, bool]:
    """Keep a validated pool (``validate_pool``'s ``pool`` of the same ``source``) once by its
    checksum: the file and its row; whether this call wrote the file (so a failure after it can
    take the file back). A pool stored before is returned as it is."""
    stored = blobs.store("pools", source)
    if stored.sha256 != pool.sha256:  # the source changed between its validation and now
        if stored.created:
            blobs.forget("pools", stored.sha256)
        raise Rejected([f"the pool changed while it was stored (checksum {stored.sha256[:12]}, validated as "
                        f"{pool.sha256[:12]}); upload it again"])
    created = stored.created
    try:
        record, _ = ReferencePool.objects.get_or_create(sha256=pool.sha256, defaults={
            "name": name[:255], "n_pairs": len(pool), "size": pool.size,
            "created_by": user if user is not None and getattr(user, "is_authenticated", False) else None})
    except BaseException:
        if created:
            blobs.forget("pools", pool.sha256)
        raise
    return record, created


def read_stored_pool(record: ReferencePool, progress: vbleu.Progress | None = None) -> vbleu.Pool:
    """A stored pool read back (and checked against its checksum)."""
    path = pool_file_path(record.sha256)
    if not path.exists():
        raise Rejected([f"the file of {record} is missing from the server's storage; upload the pool again"])
    pool = validate_pool(path, progress, label=str(record))
    if pool.sha256 != record.sha256:
        raise Rejected([f"the file of {record} does not have the checksum its name says; upload the pool again"])
    return pool


def is_extended(version: GoldVersion) -> bool:
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
        if is_extended(version):
            base = version.provenance.get("extends")
            raise Rejected([f"--from-version: version {number} already holds vBLEU references"
                            + (f"; extend version {base}, the one it extends" if base else "")])
        return version
    for version in task.gold_versions.order_by("-number"):
        if not is_extended(version):
            return version
    raise Rejected([f"{task.slug} has no gold version to extend; load one with load_gold"])


def source_gold(version: GoldVersion, content: bytes | None = None) -> tuple[list[dict], str]:
    """The gold JSON to extend and where it came from: ``content`` (the version's own file, checked
    by its sha256), else the file kept when the version was loaded, else (a version loaded before
    gold files were kept) its compiled gold written back as JSON (ids, contexts, original
    references), which a gold with nugget alternatives cannot be (their acts are not compiled)."""
    if content is not None:
        if hashlib.sha256(content).hexdigest() != version.sha256:
            raise Rejected([f"--gold: the file is not the one loaded as version {version.number} (sha256 "
                            f"{version.sha256[:12]}…)"])
        try:
            return parse_json(content, "gold file"), f"gold file {version.source_name or version.sha256[:12]}"
        except ValidationFailed as error:
            raise Rejected(error.errors) from None
    if version.source_sha256 and blobs.exists("gold", version.source_sha256):
        # The file as it was loaded (tasks.datafiles keeps it): nugget alternatives and all.
        try:
            kept = blobs.read("gold", version.source_sha256)
            return parse_json(kept, "gold file"), f"gold file {version.source_name or version.sha256[:12]}"
        except ValidationFailed as error:
            raise Rejected(error.errors) from None
    compiled = version.load()
    if compiled.has_alternatives:
        raise Rejected([f"version {version.number} holds nugget alternatives, which its compiled form does not keep "
                        "whole: give its gold file with --gold"])
    return compiled.source_entries(), f"the compiled gold of version {version.number}"


def stored_encodings(pool: vbleu.Pool, encoder: vbleu.SentenceEncoder) -> tuple[vbleu.PoolEncodings | None, bool]:
    """The pool's sentence vectors kept by an earlier build with this encoder, checked before use
    (``PoolEncodings.from_bytes``), and whether a file was there but failed its checks (it is then
    encoded again and replaced, never trusted)."""
    description = encoder.describe(vbleu.SENTENCE_PREFIX)
    key = vbleu.encodings_key(pool.sha256, description)
    try:
        path = blobs.path(ENCODINGS, key)
        if not path.is_file():
            return None, False
        return vbleu.PoolEncodings.from_bytes(path, pool, description), False
    except (ValueError, OSError, blobs.BlobDamaged) as error:
        log.warning("the stored sentence vectors %s of pool %s are unusable (%s): encoding the pool again", key,
                    pool.sha256[:12], error)
        return None, True


def keep_encodings(encodings: vbleu.PoolEncodings, replace: bool = False) -> bool:
    """Keep a pool's sentence vectors under their key (``blobs.keep_named``): the first file kept
    stays (a second worker's has the same content); ``replace`` puts them in place of a damaged file.
    Written to a file in the store's staging folder first, never held twice in memory."""
    handle, temporary = tempfile.mkstemp(dir=blobs.staging(ENCODINGS), prefix=".pool-encodings-")
    try:
        with os.fdopen(handle, "wb") as stream:
            encodings.write(stream)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return blobs.keep_named(ENCODINGS, encodings.key, temporary, replace=replace)


@dataclass
class Built:
    version: GoldVersion
    extension: vbleu.Extension
    pool: ReferencePool
    pool_created: bool
    # The pool's sentence vectors (vBERTScore's extension): "stored" (read from an earlier build),
    # "encoded" (encoded now and kept), or "" (an extension that reads none).
    encodings: str = ""


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
    pool_label: str = "pool",
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
        pool = validate_pool(source, progress, label=pool_label)
    # The pool steps tokenise in the task's language, as its BLEU does (the one setting the caller
    # does not choose: 13a on Japanese made whole clauses single tokens).
    retrieval = replace(retrieval or vbleu.RetrievalSettings(), tokenizer=task_tokenizer(task.kind_config))
    rater = None if ratings is not None else rater or vbleu.RaterSettings()
    vectors = None
    if rater is not None and not rater.needs_encoder:
        vectors = task_vectors(task.kind_config)
    encoder = encodings = None
    damaged = False
    if retrieval.needs_encoder or (rater is not None and rater.needs_encoder):
        from scoring.kinds.response.encoder import EncoderUnavailable

        try:
            encoder = vbleu.default_sentence_encoder()
        except EncoderUnavailable as error:
            raise Rejected([str(error)]) from None
        encodings, damaged = stored_encodings(pool, encoder)
    try:
        extension = vbleu.extend_gold(gold_data, pool, retrieval=retrieval, rater=rater, ratings=ratings,
                                      vectors=vectors, progress=progress, encodings=encodings,
                                      sentence_encoder=encoder)
    except ValidationFailed as error:
        raise Rejected(error.errors) from None
    except (ValueError, TokenizerUnavailable) as error:  # RaterAtChance is a ValueError
        raise Rejected([str(error)]) from None
    provenance = {"extends": base.number, "source": origin, "vbleu": extension.provenance}
    if progress is not None:
        progress("save", 0, 0)
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
            blobs.forget("pools", record.sha256)
        raise
    kept = ""
    if extension.encodings is not None:
        kept = "stored" if encodings is not None else "encoded"
        if encodings is None:
            try:
                # After the version: a failed build keeps nothing. A cache: failing to keep it costs
                # the next build the encoding, never this one its version.
                keep_encodings(extension.encodings, replace=damaged)
            except Exception:
                log.exception("could not keep the sentence vectors of pool %s", record.sha256[:12])
    return Built(version, extension, record, created, kept)


# Background jobs ---------------------------------------------------------------------------------
# Storing a pool of 10^6 lines or extending a gold from it takes minutes: from the web it is a
# job (``PoolJob``) run by a Celery worker, or by a thread of the web process when there is no
# broker, and its page follows the progress the job writes here.

STAGES = {"pool": "reading the pool", "encode": "encoding texts (e5)", "index": "indexing utterances",
          "retrieve": "retrieving references", "rater": "training the rater", "rate": "rating references",
          "save": "saving"}
UPLOADS = "pool-uploads"  # uploaded pools and ratings wait here (by checksum) until their job ends
HEARTBEAT_SECONDS = 10.0
# A running job without a heartbeat for this long belongs to a dead process and is taken over.
LEASE_SECONDS = 120.0
# A job taken over this many times (its worker killed each time: out of memory, say) fails.
MAX_ATTEMPTS = 2
PROGRESS_SECONDS = 0.5


def stage_upload(upload: Any, what: str = "pool") -> str:
    """Keep an uploaded file (a Django ``UploadedFile``) for its job; its sha256. Over
    ``EVALSERVER_POOL_MAX_BYTES``: ``Rejected`` and nothing kept."""
    return blobs.store(UPLOADS, upload.chunks(), max_bytes=settings.EVALSERVER_POOL_MAX_BYTES,
                       limit=(what, "EVALSERVER_POOL_MAX_BYTES")).sha256


def submit_pool_job(*, user: Any, task: Task | None = None, upload: Any = None, pool: ReferencePool | None = None,
                    ratings: Any = None, options: dict[str, Any] | None = None) -> PoolJob:
    """Queue a pool job: store ``upload`` as a pool (no ``task``), or extend ``task``'s gold from
    ``upload`` or the stored ``pool``. ``options`` were checked by the caller (``job_options``)."""
    if (upload is None) == (pool is None):
        raise ValueError("a pool job reads either an upload or a stored pool")
    staged: list[str] = []
    try:
        upload_sha256 = stage_upload(upload) if upload is not None else ""
        staged.append(upload_sha256)
        ratings_sha256 = stage_upload(ratings, "ratings file") if ratings is not None else ""
        staged.append(ratings_sha256)
        with transaction.atomic():
            job = PoolJob.objects.create(
                task=task, pool=pool, upload_sha256=upload_sha256,
                upload_name=(getattr(upload, "name", "") or "").replace("\x00", "")[:255],
                ratings_sha256=ratings_sha256, options=options or {},
                created_by=user if user is not None and user.is_authenticated else None)
            transaction.on_commit(lambda: start_pool_job(job.pk))
    except BaseException:
        # Nothing half-written: staged files that no job waits for go.
        _forget_files(set(staged) - {""})
        raise
    return job


def job_options(*, k: int, seed: int, parrot_weight: float | None, train_pairs: int, held_out_pairs: int,
                from_version: int | None, label: str, phases: list[int], human_ratings: bool,
                name: str = "", method: str = "vbleu") -> dict[str, Any]:
    """The options a job records, checked the way ``build_vbleu`` checks them; ``Rejected`` names
    every bad one. ``method``: ``vbleu`` (BM25, word-vector rater) or ``vbertscore`` (retrieval by
    e5 sentence vectors, a rater on the encoder's features), ``vbleu.METHODS``."""
    problems: list[str] = []
    options: dict[str, Any] = {"from_version": from_version, "label": label, "phases": phases, "name": name}
    if method not in vbleu.METHODS:
        raise Rejected([f"method: one of {', '.join(vbleu.METHODS)}, not {method!r}"])
    retriever, features = vbleu.METHODS[method]
    try:
        options["retrieval"] = vbleu.RetrievalSettings(k=k, retriever=retriever).to_dict()
    except ValueError as error:
        problems.append(f"k: {error}")
    if human_ratings:
        options["rater"] = None
    else:
        try:
            options["rater"] = vbleu.RaterSettings(seed=seed, parrot_weight=parrot_weight, train_pairs=train_pairs,
                                                   held_out_pairs=held_out_pairs, features=features).to_dict()
        except ValueError as error:
            problems.append(f"rater: {error}")
    if problems:
        raise Rejected(problems)
    return options


def start_pool_job(job_id: int) -> None:
    """Hand the job to whoever runs it in this mode (``EVALSERVER_POOL_JOB_MODE``). Nothing is lost
    if that fails: the sweep (or the job's page, without a broker) starts it again."""
    mode = settings.EVALSERVER_POOL_JOB_MODE
    sent_at = timezone.now()
    if mode == "sync":
        PoolJob.objects.filter(pk=job_id).update(sent_at=sent_at)
        run_pool_job(job_id)
        return
    if mode == "thread":
        threading.Thread(target=_run_in_thread, args=(job_id,), name=f"pool-job-{job_id}", daemon=True).start()
    else:
        try:
            run_pool_job_task.apply_async((job_id,))
        except Exception:  # broker unreachable: the job is safe in the database
            log.exception("could not queue pool job %s; the sweep sends it again", job_id)
            return
    PoolJob.objects.filter(pk=job_id).update(sent_at=sent_at)


def _run_in_thread(job_id: int) -> None:
    try:
        run_pool_job(job_id)
    except Exception:  # the database unreachable: the job's page starts it again once it is back
        log.exception("pool job %s stopped", job_id)
    finally:
        connections.close_all()  # this thread's own connections; the thread ends here


def _stale() -> Any:
    return timezone.now() - timedelta(seconds=LEASE_SECONDS)


def run_pool_job(job_id: int) -> str:
    """Claim the job (queued, or running under a dead process) and do it, writing its progress;
    it ends done or failed with every reason, and a failed job has stored nothing."""
    token = uuid.uuid4().hex
    now = timezone.now()
    claimed = PoolJob.objects.filter(pk=job_id).filter(
        Q(status=PoolJob.QUEUED) | Q(status=PoolJob.RUNNING, heartbeat_at__lt=_stale())).update(
        status=PoolJob.RUNNING, claim_token=token, attempts=F("attempts") + 1, started_at=now, heartbeat_at=now,
        stage="", done=0, total=0, stages_done=[], errors=[])
    if not claimed:
        return "skipped: not queued (done, failed, or another process holds it)"
    job = PoolJob.objects.select_related("task", "pool", "created_by").get(pk=job_id)
    if job.attempts > MAX_ATTEMPTS:
        _finish(job, token, PoolJob.FAILED, errors=[
            f"the work stopped {MAX_ATTEMPTS} times before it finished (its process was killed or restarted, "
            "perhaps for lack of memory); nothing was stored. Start it again, or run manage.py build_vbleu"])
        return "failed: too many attempts"
    progress = _JobProgress(job.pk, token)
    try:
        with _heartbeat(job.pk, token):
            result = _do_pool_job(job, progress)
    except ClaimLost:
        log.warning("pool job %s: another process took it over; this attempt stopped", job_id)
        return "stopped: taken over by another process"
    except Rejected as error:
        _finish(job, token, PoolJob.FAILED, errors=error.errors, progress=progress)
        return "failed"
    except SoftTimeLimitExceeded:
        _finish(job, token, PoolJob.FAILED, progress=progress, errors=[
            f"the work took longer than {settings.EVALSERVER_POOL_JOB_TIME_LIMIT:,} s "
            "(EVALSERVER_POOL_JOB_TIME_LIMIT) and was stopped; nothing was stored"])
        return "failed: time limit"
    except TRANSIENT_DB_ERRORS:
        # The claim stays: once its heartbeat is old the sweep (or the page) starts the job again.
        log.exception("pool job %s lost the database", job_id)
        raise
    except Exception:
        log.exception("pool job %s failed", job_id)
        _finish(job, token, PoolJob.FAILED, progress=progress, errors=[
            "the server failed while doing this (an error on our side, logged for the administrators); "
            "nothing was stored"])
        return "failed: server error"
    _finish(job, token, PoolJob.DONE, result=result, progress=progress)
    return "done"


def _do_pool_job(job: PoolJob, progress: _JobProgress) -> dict[str, Any]:
    options = job.options
    upload = blobs.path(UPLOADS, job.upload_sha256) if job.upload_sha256 else None
    if upload is not None and not upload.exists():
        raise Rejected(["the uploaded pool is no longer on the server (its job was ended before); upload it again"])
    if job.task is None:
        pool = validate_pool(upload, progress, label=job.upload_name or "pool")
        progress("save", 0, 0)
        record, created = store_pool(upload, pool, options.get("name") or job.upload_name, job.created_by)
        PoolJob.objects.filter(pk=job.pk).update(pool=record)
        return {"pool": record.sha256, "n_pairs": record.n_pairs, "stored_now": created}
    task = job.task
    phases = list(task.phases.filter(pk__in=options.get("phases") or []))
    if len(phases) != len(options.get("phases") or []):
        raise Rejected(["a phase chosen for the new version no longer exists; start again"])
    ratings = None
    if job.ratings_sha256:
        if not blobs.exists(UPLOADS, job.ratings_sha256):
            raise Rejected(["the uploaded ratings are no longer on the server; upload them again"])
        try:
            ratings = parse_json(blobs.read(UPLOADS, job.ratings_sha256), "ratings file")
        except ValidationFailed as error:
            raise Rejected(error.errors) from None
    try:
        retrieval = vbleu.RetrievalSettings.from_dict(options.get("retrieval") or {})
        rater = vbleu.RaterSettings.from_dict(options["rater"]) if options.get("rater") else None
    except ValueError as error:
        raise Rejected([str(error)]) from None
    base = options.get("from_version")
    built = build_vbleu_version(
        task, job.pool if job.pool_id else upload, from_version=base, retrieval=retrieval, rater=rater,
        ratings=ratings, label=options.get("label") or f"vBLEU from v{base or 'latest'}", phases=phases,
        pool_name=options.get("name") or job.upload_name, pool_label=job.upload_name or "pool", user=job.created_by,
        progress=progress)
    PoolJob.objects.filter(pk=job.pk).update(pool=built.pool, version=built.version)
    report = built.extension.provenance["rater"]
    # The method and where the sentence vectors came from, only for an extension that read them
    # (a vBLEU job's result is what it always was).
    encoded = {"method": vbleu.method_of(retrieval, rater) or "mixed", "encodings": built.encodings
               } if built.encodings else {}
    return {"pool": built.pool.sha256, "n_pairs": built.pool.n_pairs, "stored_now": built.pool_created, **encoded,
            "version": built.version.number, "extends": built.version.provenance["extends"],
            "references_added": built.extension.provenance["references_added"], "k": retrieval.k,
            "rater": report["kind"], "held_out_accuracy": report.get("held_out_accuracy"),
            "seed": (report.get("settings") or {}).get("seed"), "phases": [phase.name for phase in phases]}


class ClaimLost(Exception):
    """The job's claim passed to another process; this one stops without storing anything."""


class _JobProgress:
    """``vbleu.Progress`` that writes the job's stage and counts (at every new stage, at the end of
    one, and otherwise at most every ``PROGRESS_SECONDS``) and times each finished stage."""

    def __init__(self, job_id: int, token: str) -> None:
        self.job_id, self.token = job_id, token
        self.stage, self.started, self.written = "", time.monotonic(), 0.0
        self.finished: list[list[Any]] = []

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        changed = stage != self.stage
        if changed:
            self._close(now)
            self.stage, self.started = stage, now
        if changed or now - self.written >= PROGRESS_SECONDS or (total and done >= total):
            self.written = now
            held = PoolJob.objects.filter(pk=self.job_id, claim_token=self.token).update(
                stage=stage, done=max(0, done), total=max(0, total), stages_done=self.finished,
                heartbeat_at=timezone.now())
            if not held:
                # Another process took the job over (this one's heartbeat stopped reaching the
                # database for a lease): stop before storing anything twice.
                raise ClaimLost(self.job_id)

    def _close(self, now: float) -> None:
        if self.stage:
            self.finished.append([self.stage, round(now - self.started, 1)])
            self.stage = ""

    def close(self) -> list[list[Any]]:
        self._close(time.monotonic())
        return self.finished


@contextmanager
def _heartbeat(job_id: int, token: str) -> Iterator[None]:
    """Keep the claim alive while the work runs, from a thread of its own: an index build or a
    training epoch reports no progress for a while, and a silent job would look dead."""
    if settings.EVALSERVER_POOL_JOB_MODE == "sync":
        yield  # in the request (tests): nobody else takes the job over
        return
    with leases.heartbeat(PoolJob.objects.filter(pk=job_id, claim_token=token), HEARTBEAT_SECONDS,
                          f"pool-job-{job_id}"):
        yield


def _finish(job: PoolJob, token: str, status: str, *, errors: list[str] | None = None,
            result: dict[str, Any] | None = None, progress: _JobProgress | None = None) -> None:
    fields: dict[str, Any] = {"status": status, "errors": errors or [], "result": result or {},
                              "finished_at": timezone.now(), "claim_token": "", "stage": "", "done": 0, "total": 0}
    if progress is not None and status == PoolJob.DONE:
        fields["stages_done"] = progress.close()
    elif progress is not None:
        # The stage under way failed: it stays named (its page marks it), not counted as done.
        fields.update(stages_done=progress.finished, stage=progress.stage)
    if PoolJob.objects.filter(pk=job.pk, claim_token=token).update(**fields):
        _forget_uploads(job)


def _forget_uploads(job: PoolJob) -> None:
    """The job's uploaded files go once no unfinished job needs them (stored pools are kept
    under ``pools/``; a failed upload leaves nothing)."""
    _forget_files({job.upload_sha256, job.ratings_sha256} - {""}, PoolJob.objects.exclude(pk=job.pk))


def _forget_files(hashes: set[str], jobs: Any = None) -> None:
    waiting = (PoolJob.objects if jobs is None else jobs).filter(status__in=[PoolJob.QUEUED, PoolJob.RUNNING])
    for sha256 in hashes:
        if not waiting.filter(Q(upload_sha256=sha256) | Q(ratings_sha256=sha256)).exists():
            blobs.forget(UPLOADS, sha256)


def sweep_pool_jobs(job_ids: list[int] | None = None) -> list[int]:
    """Jobs whose message never reached a worker (queued, not sent for a lease) or whose process
    died (running, heartbeat older than the lease): start them again; their claim decides who
    runs them, and a job taken over too often fails with a reason. ``job_ids``: only these."""
    stale = _stale()
    jobs = PoolJob.objects.filter(
        Q(status=PoolJob.QUEUED, sent_at__isnull=True, created_at__lt=stale)
        | Q(status=PoolJob.QUEUED, sent_at__lt=stale) | Q(status=PoolJob.RUNNING, heartbeat_at__lt=stale))
    if job_ids is not None:
        jobs = jobs.filter(pk__in=job_ids)
    found = list(jobs.values_list("pk", flat=True))
    for job_id in found:
        start_pool_job(job_id)
    return found


@shared_task(acks_late=True, soft_time_limit=settings.EVALSERVER_POOL_JOB_TIME_LIMIT,
          time_limit=settings.EVALSERVER_POOL_JOB_TIME_LIMIT + 60, heavy=True)  # its own queue (evalserver.celery)
def run_pool_job_task(job_id: int) -> str:
    return run_pool_job(job_id)


@shared_task(acks_late=True)
def sweep_pool_jobs_task() -> list[int]:
    return sweep_pool_jobs()
