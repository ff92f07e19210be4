"""What organisers and participants do, as plain functions used by commands, views, the API and the admin.

Django never computes a number here: scoring goes through the framework-free ``scoring`` package.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import threading
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from scoring import PRESETS, ValidationFailed, evaluate, load_gold, load_run, parse_json
from scoring.baselines import popularity_run, uniform_run
from scoring.evaluate import Result
from scoring.formats import check_run_shape, restrict
from scoring.kinds import measure_key
from tasks.models import GoldVersion, Phase, Run, Score, ScoreVector, Task, Team
from tasks.names import character_problems, confusable_with
from tasks.phases import check_quota

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 100
MAX_DESCRIPTION_LENGTH = 5000
TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)


class Rejected(Exception):
    """A request that cannot be carried out; ``errors`` says every reason, ``status`` the HTTP code,
    ``retry_after`` (seconds) when trying again later will do."""

    def __init__(self, errors: list[str], status: int = 400, retry_after: int | None = None) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors
        self.status = status
        self.retry_after = retry_after


# One semaphore per configured size, so that a test (or a settings change) gets its own.
_validation_slots: dict[int, threading.BoundedSemaphore] = {}
_validation_slots_lock = threading.Lock()
_slot_holder = threading.local()


# A body larger than this takes seconds to arrive and be parsed: such an upload that finds every
# slot taken is answered at once rather than waiting, because a waiting upload holds a thread that
# readers need (measured in benchmarks/upload_memory.py). Django keeps bodies up to this size in memory.
LARGE_UPLOAD_BYTES = 4 * 1024 * 1024


@contextmanager
def validation_slot(size_bytes: int = 0) -> Iterator[None]:
    """Hold one of the process's ``EVALSERVER_VALIDATION_SLOTS`` while a run upload is validated
    (re-entrant within a thread; ``RequestBodyMiddleware`` takes it before a large body is read).

    Receiving and validating a large file takes a core for a while and a few times its size in
    memory; a burst of uploads must not add up to more than the slots allow, nor take every
    thread from the readers of the same process. An upload of at most ``LARGE_UPLOAD_BYTES``
    waits up to ``EVALSERVER_VALIDATION_WAIT_SECONDS`` for a slot (a deadline burst of ordinary
    runs is served in turn), a larger one does not wait; refused, it gets 503 with
    ``Retry-After``, and nothing is stored, no quota is used.
    """
    if getattr(_slot_holder, "held", False):
        yield  # this thread holds a slot already
        return
    size = settings.EVALSERVER_VALIDATION_SLOTS
    with _validation_slots_lock:
        slots = _validation_slots.setdefault(size, threading.BoundedSemaphore(size))
    wait = settings.EVALSERVER_VALIDATION_WAIT_SECONDS if size_bytes <= LARGE_UPLOAD_BYTES else 0.0
    if not slots.acquire(timeout=wait):
        retry = max(5, int(wait))
        waited = f" and waited {wait:g} s for one to finish" if wait else ""
        raise Rejected([f"the server is validating {size} other upload(s){waited}; nothing was stored and no "
                        f"quota was used: please send the file again in {retry} s"], status=503, retry_after=retry)
    _slot_holder.held = True
    try:
        yield
    finally:
        _slot_holder.held = False
        slots.release()


# Tasks and gold ---------------------------------------------------------------------------

def create_task(slug: str, preset: str = "stc3", title: str = "", description: str = "") -> Task:
    if preset not in PRESETS:
        raise Rejected([f"unknown preset {preset!r}; known presets: {', '.join(sorted(PRESETS))}"])
    task = Task(slug=slug, title=title or slug, description=description, config=PRESETS[preset].to_dict())
    from django.core.exceptions import ValidationError

    try:
        task.full_clean()
    except ValidationError as error:
        raise Rejected([f"{field}: {' '.join(messages)}" for field, messages in error.message_dict.items()]) from None
    task.save()
    return task


def load_gold_version(task: Task, content: bytes, source_name: str = "", user: Any = None,
                      label: str = "", phases: Any = ()) -> GoldVersion:
    """Validate a gold file, store it as a new version, add its baselines and re-score runs.

    Re-scored: runs outside phases, and the runs of ``phases``, which are moved to the new
    version (a corrected test gold, say); phases bound to other versions keep theirs. Old scores
    stay, tagged with their version.
    """
    if "\x00" in label or len(label) > 100:
        raise Rejected(["label: at most 100 characters, without NUL characters"])
    gold = _validated_gold(task, content)
    foreign = [phase.name for phase in phases if phase.task_id != task.pk]
    if foreign:
        raise Rejected([f"phase {name!r} belongs to another task" for name in foreign])
    with transaction.atomic():
        Task.objects.select_for_update().get(pk=task.pk)  # serialise version numbers per task
        number = (task.gold_versions.aggregate(Max("number"))["number__max"] or 0) + 1
        version = GoldVersion.objects.create(
            task=task, number=number, label=label, compiled=gold.to_bytes(),
            sha256=hashlib.sha256(content).hexdigest(), source_name=source_name[:255],
            n_dialogues=gold.n_dialogues, has_quality=gold.has_quality, has_nugget=gold.has_nugget,
            warnings=gold.warnings, created_by=user if user is not None and user.is_authenticated else None,
        )
        for phase in phases:
            phase.gold_version = version
            phase.save(update_fields=["gold_version"])  # save(): the signals renew cached lookups
        create_baselines(task, version)
        rescore_task_runs(task, version)
        task.touch_scores()
    return version


def _validated_gold(task: Task, content: bytes) -> Any:
    try:
        return load_gold(parse_json(content, "gold file"), task.scoring_config)
    except ValidationFailed as error:
        raise Rejected(error.errors) from None


def create_baselines(task: Task, version: GoldVersion) -> list[Run]:
    """The uniform and popularity baselines of this gold version.

    Baselines belong to their version (the popularity baseline is made from its labels): they are
    never re-scored against another one, and every board shows those of the version it shows, so
    a development board keeps its baselines when the test gold arrives.
    """
    gold = version.load()
    runs = []
    for name, builder, description in (
        ("uniform", uniform_run, "Baseline: the same probability for every label."),
        ("popularity", popularity_run,
         "Baseline: all probability on the most frequent gold label per quality dimension and per "
         "sender (ties split equally); uses no per-dialogue knowledge."),
    ):
        content = orjson.dumps(builder(gold))
        sha = store_run_file(content)
        runs.append(Run.objects.create(
            task=task, name=f"baseline-{name}-v{version.number}", description=description, is_baseline=True,
            file_sha256=sha, file_size=len(content), original_filename=f"baseline-{name}.json",
            has_quality=gold.has_quality, has_nugget=gold.has_nugget, gold_version=version,
        ))
    for run in runs:
        enqueue_scoring(run)
    return runs


def current_gold_for(task: Task, phase: Phase | None) -> GoldVersion | None:
    return phase.gold_version if phase is not None else task.latest_gold()


def rescore_task_runs(task: Task, version: GoldVersion) -> int:
    """Queue every run of the task (outside phases bound to other versions) against ``version``;
    baselines stay with the version they were made from."""
    runs = (task.runs.filter(Q(phase__isnull=True) | Q(phase__gold_version=version), is_baseline=False)
            .exclude(gold_version=version))
    ids = list(runs.values_list("pk", flat=True))
    Run.objects.filter(pk__in=ids).update(status=Run.QUEUED, gold_version=version, errors=[], started_at=None,
                                          finished_at=None, failure_is_server_side=False, queued_at=timezone.now())
    for run_id in ids:
        transaction.on_commit(lambda run_id=run_id: _send(run_id))
    return len(ids)


def rescore_runs(runs: Any) -> int:
    """Score runs again against the gold version they refer to (organiser action)."""
    ids = list(runs.values_list("pk", flat=True))
    with transaction.atomic():
        Run.objects.filter(pk__in=ids).update(status=Run.QUEUED, errors=[], started_at=None, finished_at=None,
                                              failure_is_server_side=False, queued_at=timezone.now())
        for run_id in ids:
            transaction.on_commit(lambda run_id=run_id: _send(run_id))
    return len(ids)


# Run files ----------------------------------------------------------------------------------

def run_file_path(sha256: str) -> Path:
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise ValueError("not a SHA-256 hex digest")
    return Path(settings.MEDIA_ROOT) / "runs" / sha256[:2] / f"{sha256}.json"


def store_run_file(content: bytes) -> str:
    """Store the bytes unchanged under their SHA-256 (written atomically; identical files share one copy)."""
    return _store_run_file(content)[0]


def _store_run_file(content: bytes) -> tuple[str, bool]:
    sha = hashlib.sha256(content).hexdigest()
    path = run_file_path(sha)
    created = not path.exists()
    if created:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(content)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    return sha, created


def read_run_file(run: Run) -> bytes:
    return run_file_path(run.file_sha256).read_bytes()


# Submissions ------------------------------------------------------------------------------

def clean_text(value: str | None, field: str, max_length: int, errors: list[str], single_line: bool) -> str:
    """Normalise participant text; control, invisible and undecodable characters and over-long
    values are errors (each named with its position), not silently cut (``tasks.names``)."""
    text = unicodedata.normalize("NFC", (value or "").strip())
    errors.extend(character_problems(text, field, multi_line=not single_line))
    if len(text) > max_length:
        errors.append(f"{field}: at most {max_length} characters (got {len(text)})")
    return text


def safe_filename(name: str | None) -> str:
    """The upload's own name, kept for display only: no directories, no control or invisible characters."""
    base = re.split(r"[\\/]", name or "")[-1]
    base = "".join(char for char in base if not character_problems(char, "file")).strip().lstrip(".")
    return base[:255]


def parse_priority(raw: Any, errors: list[str]) -> int | None:
    """The NTCIR run number of a form field: empty means none; anything else must be a whole number."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        errors.append(f"priority: expected a whole number, got {str(raw)[:20]!r}")
        return None


@dataclass
class Submission:
    content: bytes
    filename: str = ""
    name: str = ""
    description: str = ""
    is_public: bool = True
    priority: int | None = None


def submit_run(task: Task, user: Any, submission: Submission, phase: Phase | None = None) -> Run:
    """Validate an upload completely, store it, create the run and queue its scoring after commit.

    Raises ``Rejected`` (with every problem) before anything is stored.
    """
    errors: list[str] = []
    team = participant_team(user)
    if team is None:
        raise Rejected(["you are not a member of any team; ask an organiser to add you to one"], status=403)
    if not team.approved and task.requires_team_approval:
        raise Rejected([f"team {team.name!r} is waiting for an organiser's approval"], status=403)
    name = clean_text(submission.name, "name", MAX_NAME_LENGTH, errors, single_line=True)
    description = clean_text(submission.description, "description", MAX_DESCRIPTION_LENGTH, errors,
                             single_line=False)
    if submission.priority is not None and not 1 <= submission.priority <= 99:
        errors.append("priority: must be a whole number from 1 (primary run) to 99")
    if len(submission.content) > settings.RUN_UPLOAD_MAX_BYTES:
        raise Rejected([f"file: {len(submission.content)} bytes is over the limit of "
                        f"{settings.RUN_UPLOAD_MAX_BYTES} bytes"], status=413)
    version = current_gold_for(task, phase)
    if version is None:
        raise Rejected(["this task has no gold data yet; runs cannot be scored"], status=409)
    if phase is not None and phase.requires_method_description and not description:
        errors.append(f"description: the {phase.name} phase requires a description of the method")
    try:
        with validation_slot(len(submission.content)):
            gold = version.load()
            # The file's shape is checked against the gold before the parser builds anything:
            # 31 MB of empty objects would otherwise take a gigabyte (issue 11).
            check_run_shape(submission.content, gold)
            parsed = load_run(parse_json(submission.content, "file"), gold)
    except ValidationFailed as error:
        errors.extend(error.errors)
        parsed = None
    if errors:
        raise Rejected(errors)
    filename = safe_filename(submission.filename)
    created_file = False
    try:
        with transaction.atomic():
            Team.objects.select_for_update().get(pk=team.pk)  # serialise this team's uploads
            if phase is not None:
                check_quota(team, phase)
            if submission.priority is not None:
                check_priority_free(task, team, phase, submission.priority)
            sha, created_file = _store_run_file(submission.content)
            default_name = name or _filename_run_name(filename)
            check_run_name_free(task, team, default_name)
            run = Run.objects.create(
                task=task, team=team, phase=phase, submitted_by=user, name=default_name, description=description,
                priority=submission.priority, is_public=submission.is_public, file_sha256=sha,
                file_size=len(submission.content), original_filename=filename, has_quality=parsed.has_quality,
                has_nugget=parsed.has_nugget, gold_version=version, warnings=parsed.warnings,
            )
            enqueue_scoring(run)
    except BaseException:
        # Nothing half-written: a file this request added goes if its run was not committed.
        if created_file and not Run.objects.filter(file_sha256=sha).exists():
            run_file_path(sha).unlink(missing_ok=True)
        raise
    return run


def _filename_run_name(filename: str) -> str:
    """A run without a name is called after its file, less the characters a name may not hold."""
    stem = filename.rsplit(".", 1)[0]
    cleaned = "".join(char for char in stem if not character_problems(char, "name"))
    return cleaned.strip()[:MAX_NAME_LENGTH] or "run"


def check_run_name_free(task: Task, team: Team, name: str) -> None:
    """A run name must not be confusable with another name of the team's runs of the task
    (``Аurora-1`` with a Cyrillic А next to ``Aurora-1``); the same name again is allowed (a
    team's repeated submissions, told apart by their ids). Runs are shown as "team: run" on
    the task's boards, so only the team's own runs of that task can be mistaken for each other;
    team names are kept apart site-wide. Call under the team's row lock, like the quota."""
    names = Run.objects.filter(task=task, team=team).values_list("name", flat=True).distinct()
    other = confusable_with(name, names, identical_allowed=True)
    if other is not None:
        raise Rejected([f"name: {name!r} can be mistaken for your team's run {other!r} (Unicode confusables); "
                        "choose a name that looks different"], status=409)


def check_priority_free(task: Task, team: Team, phase: Phase | None, priority: int) -> None:
    """NTCIR run numbers are unique per team (and phase): two "primary" runs would leave the
    organisers guessing. Withdrawn and failed runs give their number back. Call under the team's
    row lock, like the quota."""
    holder = (Run.objects.filter(task=task, team=team, phase=phase, priority=priority, withdrawn_at__isnull=True)
              .exclude(status=Run.FAILED).order_by("pk").first())
    if holder is not None:
        where = f" in the {phase.name} phase" if phase is not None else ""
        raise Rejected([f"priority: your team's run {holder.name!r} (#{holder.pk}) already has priority {priority}"
                        f"{where}; choose another number, or withdraw that run first"], status=409)


def participant_team(user: Any) -> Team | None:
    if not user.is_authenticated:
        return None
    return user.teams.order_by("pk").first()


# Scoring ------------------------------------------------------------------------------------

def enqueue_scoring(run: Run) -> None:
    """Queue the scoring job once the surrounding transaction commits (never before: the worker
    would not see the run). If the broker is down the run stays queued and ``requeue_stuck_runs``
    sends it again."""
    transaction.on_commit(lambda: _send(run.pk))


def _send(run_id: int) -> None:
    """Hand the run's scoring job to the broker and record the send (``last_sent_at``, ``sends``):
    ``requeue_stuck_runs`` re-sends a run only once its last send is older than the stale threshold."""
    from tasks.jobs import score_run_task

    sent_at = timezone.now()
    try:
        score_run_task.delay(run_id)
    except Exception:  # broker unreachable: the run is safe in the database and will be re-sent
        log.exception("could not queue run %s; requeue_stuck_runs will send it again", run_id)
        return
    # The time the job was handed over, not after: in the embedded default delay() scores the run
    # in-process first, and the send is what the threshold is measured from.
    Run.objects.filter(pk=run_id).update(last_sent_at=sent_at, sends=F("sends") + 1)


def stale_after() -> timedelta:
    """How long a run may stay in ``scoring``: past the hard time limit its worker is dead."""
    return timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + settings.EVALSERVER_STALE_GRACE_SECONDS)


def stale_before() -> Any:
    return timezone.now() - stale_after()


def seconds_until_claimable(run_id: int) -> float | None:
    """For a run another attempt holds: seconds until that attempt counts as dead; else None."""
    started = Run.objects.filter(pk=run_id, status=Run.SCORING).values_list("started_at", flat=True).first()
    if started is None:
        return None
    return max(0.0, (started + stale_after() - timezone.now()).total_seconds())


class ScoringInterrupted(Exception):
    """A transient database error cut a scoring job after it had claimed its run.

    The claim is left in place: resetting it would need the database that just failed. The run
    stays ``scoring`` under ``attempt``, and a retry that passes ``reclaim_attempt=attempt`` to
    ``score_run`` takes it back at once, instead of finding it held and waiting for
    ``requeue_stuck`` to see the claim go stale (hard time limit + grace, 3.5 minutes by default).
    """

    def __init__(self, run_id: int, attempt: int, reason: str) -> None:
        super().__init__(run_id, attempt, reason)  # every argument in args: it pickles (Celery needs that)
        self.run_id, self.attempt, self.reason = run_id, attempt, reason

    def __str__(self) -> str:
        return f"run {self.run_id}, attempt {self.attempt}: {self.reason}"


def score_run(run_id: int, reclaim_attempt: int | None = None) -> str:
    """Score one run: claim it, compute every measure, store means and per-dialogue scores.

    Safe to run twice or concurrently: the claim is a conditional UPDATE, and the final write
    only happens if this attempt still holds the claim (status ``scoring``, ``attempts`` unchanged).

    ``reclaim_attempt`` is for the retry of a job that a database error cut after its claim
    (``ScoringInterrupted.attempt``): the run may then also be claimed while it is ``scoring``
    under exactly that attempt number. Every claim adds one to ``attempts``, so that is only
    true if no other attempt claimed the run since; a late or duplicate job is still refused.

    A transient database error before the claim propagates as it is (nothing was changed, the
    job retries with the ``reclaim_attempt`` it had); after the claim it becomes
    ``ScoringInterrupted``. Any other error fails the run with a reason.
    """
    attempt = _claim(run_id, reclaim_attempt)
    if attempt is None:
        return "skipped: not queued (already scored, or another worker holds it)"
    try:
        return _score_claimed(run_id, attempt)
    except TRANSIENT_DB_ERRORS as error:
        raise ScoringInterrupted(run_id, attempt, f"{type(error).__name__}: {str(error).strip()[:300]}") from error


def _claim(run_id: int, reclaim_attempt: int | None) -> int | None:
    """Claim the run for a new attempt and return its number, or None if it is not claimable.

    ``attempts`` is read first and the UPDATE requires it unchanged (compare-and-set), so the
    job knows its own attempt number without another read after the claim.
    """
    held = Run.objects.filter(pk=run_id).values_list("attempts", flat=True).first()
    if held is None:
        return None
    claimable = Q(status=Run.QUEUED) | Q(status=Run.SCORING, started_at__lt=stale_before())
    if reclaim_attempt is not None:
        claimable |= Q(status=Run.SCORING, attempts=reclaim_attempt)
    claimed = Run.objects.filter(claimable, pk=run_id, attempts=held).update(
        status=Run.SCORING, started_at=timezone.now(), attempts=held + 1)
    return held + 1 if claimed else None


def _score_claimed(run_id: int, attempt: int) -> str:
    """Compute and store the run's scores under this attempt's claim.

    Only a transient database error (``TRANSIENT_DB_ERRORS``) leaves the claim for a retry.
    Anything else would fail the same way again (an invalid file, a non-finite score, a value
    the database refuses, a bug): the run ends ``failed`` at once with a server-side reason,
    which gives the team its quota back, and is never retried or left ``scoring``.
    """
    run = Run.objects.select_related("task", "phase", "gold_version").get(pk=run_id)
    if run.status != Run.SCORING or run.attempts != attempt:
        return "skipped: another attempt took the run over"
    try:
        result, live = _compute(run)
        _check_finite(result, live)
    except ValidationFailed as error:
        # The file passed validation at upload: failing now means the gold it is scored against
        # changed, which is not the team's doing.
        version = run.gold_version.number if run.gold_version_id else "?"
        _finish_failed(run, [f"the run does not validate against gold version {version} (the organisers "
                             "changed the gold); it does not count against your quota:", *error.errors],
                       server_side=True)
        return "failed: invalid against the gold"
    except NonFiniteScore as error:
        log.error("run %s: %s", run.pk, error)
        _finish_failed(run, [f"{error}; the organisers have been told and can re-score the run"], server_side=True)
        return "failed: non-finite score"
    except TRANSIENT_DB_ERRORS:
        raise  # not the run's fault: score_run keeps the claim for the retry
    except Exception as error:
        return _fail_deterministic(run, error)
    try:
        with transaction.atomic():
            current = Run.objects.select_for_update().get(pk=run.pk)
            if current.status != Run.SCORING or current.attempts != attempt:
                return "skipped: another attempt took the run over"
            Score.objects.filter(run=run, gold_version=run.gold_version).delete()
            _store(run, result, Score.FULL)
            if live is not None:
                _store(run, live, Score.LIVE)
            Run.objects.filter(pk=run.pk).update(
                status=Run.DONE, finished_at=timezone.now(), errors=[], warnings=result.warnings,
                failure_is_server_side=False, has_quality=result.quality is not None,
                has_nugget=result.nugget is not None)
            board_changed(run.task)
    except IntegrityError:
        return "skipped: scores were stored by another attempt"
    except TRANSIENT_DB_ERRORS:
        raise
    except Exception as error:  # DataError (a value the database refuses) and the like: it would recur
        return _fail_deterministic(run, error)
    return "done"


def _fail_deterministic(run: Run, error: Exception) -> str:
    from celery.exceptions import SoftTimeLimitExceeded

    if isinstance(error, SoftTimeLimitExceeded):
        _finish_failed(run, ["scoring took longer than the time limit; the organisers can re-score it"],
                       server_side=True)
        return "failed: time limit"
    log.exception("scoring run %s failed", run.pk)
    _finish_failed(run, [f"internal error while scoring ({type(error).__name__}); the organisers "
                         "have been told and can re-score the run"], server_side=True)
    return "failed: internal error"


class NonFiniteScore(Exception):
    """Scoring produced NaN or an infinity: never stored, shown or served."""


def _check_finite(*results: Result | None) -> None:
    for result in results:
        if result is None:
            continue
        for key, values in result_vectors(result):
            if not np.isfinite(values).all():
                bad = int(np.count_nonzero(~np.isfinite(values)))
                raise NonFiniteScore(f"scoring produced {bad} score(s) that are not finite numbers (NaN or "
                                     f"infinity) for {key}; nothing was stored")
        means = [value for dims in (result.quality_means or {}).values() for value in dims.values()]
        means += list((result.nugget_means or {}).values())
        if not all(np.isfinite(means)):
            raise NonFiniteScore("scoring produced a mean that is not a finite number (NaN or infinity); "
                                 "nothing was stored")


def _compute(run: Run) -> tuple[Result, Result | None]:
    gold = run.gold_version.load()
    parsed = load_run(parse_json(read_run_file(run), "file"), gold)
    config = run.task.scoring_config
    result = evaluate(parsed, gold, config)
    live = None
    phase = run.phase if run.phase_id and run.phase.gold_version_id == run.gold_version_id else None
    if run.is_baseline:  # baselines have no phase, but a test board with a live subset shows them too
        phase = live_phase(run.task_id, run.gold_version_id)
    subset = phase.live_subset() if phase is not None else None
    if subset is not None:
        live = evaluate(*restrict(parsed, gold, subset), config)
    return result, live


def live_phase(task_id: int, gold_version_id: int | None) -> Phase | None:
    """The phase whose live subset the runs scored against this gold version are shown on."""
    return (Phase.objects.filter(task_id=task_id, gold_version_id=gold_version_id, live_subset_size__gt=0)
            .select_related("gold_version").order_by("starts_at").first())


def _store(run: Run, result: Result, scope: str) -> None:
    score = Score.objects.create(run=run, gold_version=run.gold_version, scope=scope, summary=result.summary())
    vectors = [ScoreVector(score=score, key=key, mean=float(values.mean()) if key.startswith("quality")
                           else result.nugget_means[key.split(".")[1]],
                           values=np.ascontiguousarray(values, dtype=np.float64).tobytes())
               for key, values in result_vectors(result)]
    ScoreVector.objects.bulk_create(vectors)


def result_vectors(result: Result) -> list[tuple[str, np.ndarray]]:
    """Every per-dialogue score array of a result with its key (``quality.A.rsnod``, ``nugget.jsd``)."""
    pairs = []
    for dim, measures in (result.quality or {}).items():
        pairs += [(measure_key("quality", dim, name), values) for name, values in measures.items()]
    pairs += [(measure_key("nugget", name), values) for name, values in (result.nugget or {}).items()]
    return pairs


def _finish_failed(run: Run, errors: list[str], server_side: bool) -> None:
    Run.objects.filter(pk=run.pk, status=Run.SCORING, attempts=run.attempts).update(
        status=Run.FAILED, errors=errors, finished_at=timezone.now(), failure_is_server_side=server_side)


MAX_INTERRUPTIONS = 3


def requeue_stuck_runs(queued_for: timedelta = timedelta(minutes=2)) -> list[int]:
    """Send again runs whose job was lost: queued too long (broker down at upload time), or
    scoring past the hard time limit (worker killed). The claim makes duplicates harmless.

    A run whose job was handed to the broker is sent again only when that last send is older
    than the stale threshold (``stale_after``): under a backlog its message is still waiting in
    the queue, and re-sending every queued run at each call (celery beat: every minute) would
    multiply the backlog. A run never sent (broker down at upload) goes after ``queued_for``.
    """
    now = timezone.now()
    # A job that died MAX_INTERRUPTIONS times (hard time limit, a worker killed by the kernel for
    # its memory) would die again: end the run instead of sending it for ever.
    dead = Q(status=Run.SCORING, started_at__lt=stale_before())
    Run.objects.filter(dead, interruptions__gte=MAX_INTERRUPTIONS).update(
        status=Run.FAILED, finished_at=now, failure_is_server_side=True,
        errors=[f"scoring was cut off {MAX_INTERRUPTIONS + 1} times (time limit or worker failure); the "
                "organisers have been told and can re-score the run"])
    not_sent_lately = Q(last_sent_at__isnull=True) | Q(last_sent_at__lt=now - stale_after())
    stuck = Run.objects.filter(not_sent_lately, Q(status=Run.QUEUED, queued_at__lt=now - queued_for)
                               | Q(status=Run.SCORING, started_at__lt=stale_before()))
    ids = list(stuck.order_by("pk").values_list("pk", flat=True))
    Run.objects.filter(dead, pk__in=ids).update(interruptions=F("interruptions") + 1)
    for run_id in ids:
        _send(run_id)
    return ids


def board_changed(task: Task) -> None:
    """Something the task's boards show changed (scores, a run's visibility, a team's name, a
    publication): new board cache keys at once, and the significance statistics, which name the
    runs they compare, computed again once the change commits (debounced)."""
    task.touch_scores()
    task_id = task.pk
    transaction.on_commit(lambda: statistics_changed(task_id))


def statistics_changed(task_id: int) -> None:
    """Scores changed: recompute the task's significance statistics (debounced)."""
    from tasks.jobs import schedule_statistics

    schedule_statistics(task_id)
