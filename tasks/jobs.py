"""The scoring pipeline and its Celery tasks: queue a run, claim it, score it, store its scores;
send again the jobs that were lost.

The tasks are thin: they receive a run id and call ``score_run`` or ``requeue_stuck_runs``, ordinary
functions that tests call directly. Django never computes a number here: scoring goes through
the framework-free ``scoring`` package.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import numpy as np
from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from scoring.kinds import MeasureSpec, Scored
from scoring.validation import ValidationFailed
from tasks.changes import board_changed, run_finished
from tasks.errors import TRANSIENT_DB_ERRORS
from tasks.leases import heartbeat
from tasks.models import Phase, Run, Score, ScoreVector
from tasks.runfiles import read_run_file

log = logging.getLogger(__name__)

# A database restart or a cut connection: retry after 1, 2, 4, ... s, at most a minute apart,
# for about two minutes in all.
DB_RETRIES = 7
DB_RETRY_BACKOFF_MAX = 60


def db_retry_countdown(retries: int) -> int:
    """Seconds before the next retry after a transient database error: exponential, capped."""
    return min(DB_RETRY_BACKOFF_MAX, 2 ** retries)


def enqueue_scoring(run: Run) -> None:
    """Queue the scoring job once the surrounding transaction commits (never before: the worker
    would not see the run). If the broker is down the run stays queued and ``requeue_stuck_runs``
    sends it again."""
    transaction.on_commit(lambda: send_scoring(run.pk))


def send_scoring(run_id: int) -> None:
    """Hand the run's scoring job to the broker and record the send (``last_sent_at``, ``sends``):
    ``requeue_stuck_runs`` re-sends a run only once its last send is older than the stale threshold."""
    sent_at = timezone.now()
    if settings.EVALSERVER_SCORING_MODE == "worker":
        # The database is the queue: the background worker (tasks.worker) takes queued runs from it
        # within a fraction of a second, and again after a restart. Nothing to hand over.
        Run.objects.filter(pk=run_id).update(last_sent_at=sent_at, sends=F("sends") + 1)
        return
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


def heartbeat_dead_before() -> Any:
    """A claim whose heartbeat is older than this belongs to a background worker that died."""
    return timezone.now() - timedelta(seconds=settings.EVALSERVER_SCORING_LEASE_SECONDS)


def score_run(run_id: int, reclaim_attempt: int | None = None, heartbeat_every: float | None = None) -> str:
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

    ``heartbeat_every`` (the background worker, ``tasks.worker``): keep the claim alive by writing
    ``heartbeat_at`` that often from a thread, so that a claim whose worker died is taken over
    once its heartbeat is older than ``EVALSERVER_SCORING_LEASE_SECONDS``, not after the time limit.
    """
    attempt = _claim(run_id, reclaim_attempt, heartbeat=heartbeat_every is not None)
    if attempt is None:
        return "skipped: not queued (already scored, or another worker holds it)"
    try:
        if heartbeat_every is None:
            return _score_claimed(run_id, attempt)
        claim = Run.objects.filter(pk=run_id, status=Run.SCORING, attempts=attempt)
        with heartbeat(claim, heartbeat_every, f"run-{run_id}"):
            return _score_claimed(run_id, attempt)
    except TRANSIENT_DB_ERRORS as error:
        raise ScoringInterrupted(run_id, attempt, f"{type(error).__name__}: {str(error).strip()[:300]}") from error


def _claim(run_id: int, reclaim_attempt: int | None, heartbeat: bool = False) -> int | None:
    """Claim the run for a new attempt and return its number, or None if it is not claimable.

    ``attempts`` is read first and the UPDATE requires it unchanged (compare-and-set), so the
    job knows its own attempt number without another read after the claim.
    """
    held = Run.objects.filter(pk=run_id).values_list("attempts", flat=True).first()
    if held is None:
        return None
    claimable = (Q(status=Run.QUEUED) | Q(status=Run.SCORING, started_at__lt=stale_before())
                 # A background worker's claim without a recent heartbeat (null under Celery: never).
                 | Q(status=Run.SCORING, heartbeat_at__lt=heartbeat_dead_before()))
    if reclaim_attempt is not None:
        claimable |= Q(status=Run.SCORING, attempts=reclaim_attempt)
    now = timezone.now()
    claimed = Run.objects.filter(claimable, pk=run_id, attempts=held).update(
        status=Run.SCORING, started_at=now, attempts=held + 1, heartbeat_at=now if heartbeat else None)
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
        parts = _parts(run, result)
    except ValidationFailed as error:
        # The file passed validation at upload: failing now means the gold it is scored against
        # changed, which is not the team's doing.
        version = run.gold_version.number if run.gold_version_id else "?"
        whose = f" of the {run.phase.name} phase" if run.phase_id else ""
        _finish_failed(run, [f"the run does not validate against gold version {version}{whose} (the organisers "
                             "changed the gold); it does not count against your quota:", *error.errors])
        return "failed: invalid against the gold"
    except NonFiniteScore as error:
        log.error("run %s: %s", run.pk, error)
        _finish_failed(run, [f"{error}; the organisers have been told and can re-score the run"])
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
                parts=parts)
            board_changed(run.task, [run.pk])  # only the boards that show this run
            run_finished.send(sender=Run, run_id=run.pk, status=Run.DONE)
    except IntegrityError:
        return "skipped: scores were stored by another attempt"
    except TRANSIENT_DB_ERRORS:
        raise
    except Exception as error:  # DataError (a value the database refuses) and the like: it would recur
        return _fail_deterministic(run, error)
    return "done"


def _fail_deterministic(run: Run, error: Exception) -> str:
    if isinstance(error, SoftTimeLimitExceeded):
        _finish_failed(run, ["scoring took longer than the time limit; the organisers can re-score it"])
        return "failed: time limit"
    log.exception("scoring run %s failed", run.pk)
    _finish_failed(run, [f"internal error while scoring ({type(error).__name__}); the organisers "
                         "have been told and can re-score the run"])
    return "failed: internal error"


class NonFiniteScore(Exception):
    """Scoring produced NaN or an infinity: never stored, shown or served."""


def _check_finite(*results: Scored | None) -> None:
    for result in results:
        bad = result.non_finite() if result is not None else []
        if bad:
            raise NonFiniteScore(f"scoring produced scores that are not finite numbers (NaN or infinity) for "
                                 f"{', '.join(bad)}; nothing was stored")


def _compute(run: Run) -> tuple[Scored, Scored | None]:
    """The run's scores on its gold version, and on the live subset of the phase that shows it."""
    kind, config = run.task.kind_impl, run.task.kind_config
    gold = run.gold_version.load()
    parsed = kind.parse_run_file(read_run_file(run), gold, config)
    result = kind.score(parsed, gold, config)
    live = None
    phase = run.phase if run.phase_id and run.phase.gold_version_id == run.gold_version_id else None
    if run.is_baseline:  # baselines have no phase, but a test board with a live subset shows them too
        phase = live_phase(run.task_id, run.gold_version_id)
    subset = phase.live_subset() if phase is not None else None
    if subset is not None:
        live = subset_scores(run.task.measure_specs(), result, subset)
        if live is None:
            live = kind.score(parsed, gold, config, items=subset)
        elif result.details:
            live.details = kind.subset_details(result.details, live.item_ids)
    return result, live


def subset_scores(specs: list[MeasureSpec], result: Scored, subset: np.ndarray) -> Scored | None:
    """A live subset's scores taken from the whole set's, without scoring again: every item's
    scores and sufficient statistics are the same in both, and each measure says how its figure
    is made from its items (``MeasureSpec.aggregate``). None when a measure's figure needs the
    kind (``run`` headlines: a correlation over all responses), which then scores the subset."""
    if any(spec.headline == "run" for spec in specs if spec.key in result.per_item):
        return None
    if set(result.headlines) != set(result.per_item):
        return None
    per_item = {key: values[subset] for key, values in result.per_item.items()}
    statistics = {key: values[subset] for key, values in result.statistics.items()}
    by_key = {spec.key: spec for spec in specs}
    headlines = {}
    for key, values in per_item.items():
        spec = by_key.get(key)
        if spec is None or (spec.headline == "corpus" and (key not in statistics or not spec.corpus_exact)):
            return None
        headlines[key] = spec.aggregate(values, statistics.get(key))
    return Scored(item_ids=[result.item_ids[i] for i in subset], per_item=per_item, headlines=headlines,
                  settings=dict(result.settings), statistics=statistics, warnings=[], n_missing=0)


def _parts(run: Run, result: Scored) -> list[str]:
    """The measure groups the run has scores in (a DQ-only run takes no part in the ND board)."""
    groups = {spec.key: spec.group for spec in run.task.measure_specs()}
    return sorted({groups.get(key, "") for key in result.per_item} - {""})


def live_phase(task_id: int, gold_version_id: int | None) -> Phase | None:
    """The phase whose live subset the runs scored against this gold version are shown on."""
    return (Phase.objects.filter(task_id=task_id, gold_version_id=gold_version_id, live_subset_size__gt=0)
            .select_related("gold_version").order_by("starts_at").first())


def _store(run: Run, result: Scored, scope: str) -> None:
    """The run's figures (``Scored.summary()``, the structure of ``score --format json``), its
    per-item details, and one vector per measure whose ``mean`` is the measure's headline figure
    (a mean of items, or a corpus-level figure), exactly as the kind computed it."""
    score = Score.objects.create(run=run, gold_version=run.gold_version, scope=scope, summary=result.summary(),
                                 details=result.details)
    ScoreVector.objects.bulk_create([
        ScoreVector(score=score, key=key, mean=result.headlines[key],
                    values=np.ascontiguousarray(values, dtype=np.float64).tobytes(),
                    **_statistics_fields(result.statistics.get(key)))
        for key, values in result.per_item.items()])


def _statistics_fields(statistics: np.ndarray | None) -> dict[str, object]:
    """A corpus measure's per-item sufficient statistics as stored beside its scores (the
    significance tests of its corpus figure need them); nothing for a mean measure."""
    if statistics is None:
        return {}
    array = np.ascontiguousarray(statistics, dtype=np.float64)
    return {"statistics": array.tobytes(), "n_statistics": array.shape[1]}


def _finish_failed(run: Run, errors: list[str]) -> None:
    with transaction.atomic():
        if Run.objects.filter(pk=run.pk, status=Run.SCORING, attempts=run.attempts).update(
                status=Run.FAILED, errors=errors, finished_at=timezone.now()):
            run_finished.send(sender=Run, run_id=run.pk, status=Run.FAILED)


MAX_INTERRUPTIONS = 3


def dead_claims() -> Q:
    """Runs ``scoring`` under a dead claim: past the hard time limit (a Celery worker killed), or
    with a background worker's heartbeat older than the lease (``heartbeat_at`` is null under
    Celery, so that condition never holds there)."""
    return Q(status=Run.SCORING) & (Q(started_at__lt=stale_before()) | Q(heartbeat_at__lt=heartbeat_dead_before()))


def fail_runs_cut_too_often() -> int:
    """A job that died MAX_INTERRUPTIONS times (hard time limit, a worker killed by the kernel for
    its memory) would die again: end the run instead of sending it for ever."""
    with transaction.atomic():
        ended = list(Run.objects.select_for_update().filter(dead_claims(), interruptions__gte=MAX_INTERRUPTIONS)
                     .values_list("pk", flat=True))
        if not ended:
            return 0
        count = Run.objects.filter(pk__in=ended).update(
            status=Run.FAILED, finished_at=timezone.now(),
            errors=[f"scoring was cut off {MAX_INTERRUPTIONS + 1} times (time limit or worker failure); the "
                    "organisers have been told and can re-score the run"])
        for run_id in ended:
            run_finished.send(sender=Run, run_id=run_id, status=Run.FAILED)
    return count


def requeue_stuck_runs(queued_for: timedelta = timedelta(minutes=2)) -> list[int]:
    """Send again runs whose job was lost: queued too long (broker down at upload time), or
    scoring past the hard time limit (worker killed). The claim makes duplicates harmless.

    A run whose job was handed to the broker is sent again only when that last send is older
    than the stale threshold (``stale_after``): under a backlog its message is still waiting in
    the queue, and re-sending every queued run at each call (celery beat: every minute) would
    multiply the backlog. A run never sent (broker down at upload) goes after ``queued_for``.
    """
    now = timezone.now()
    dead = dead_claims()
    fail_runs_cut_too_often()
    not_sent_lately = Q(last_sent_at__isnull=True) | Q(last_sent_at__lt=now - stale_after())
    stuck = Run.objects.filter(not_sent_lately, Q(status=Run.QUEUED, queued_at__lt=now - queued_for) | dead)
    ids = list(stuck.order_by("pk").values_list("pk", flat=True))
    Run.objects.filter(dead, pk__in=ids).update(interruptions=F("interruptions") + 1)
    for run_id in ids:
        send_scoring(run_id)
    return ids


# Celery tasks ---------------------------------------------------------------------------------

@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def score_run_task(self, run_id: int, reclaim_attempt: int | None = None) -> str:
    """Score a run; retry transient database errors only, taking back this job's own claim.

    Not ``autoretry_for``: a retry must carry the attempt number that the cut job claimed
    (``reclaim_attempt``), or it would find the run ``scoring`` under its own earlier attempt,
    answer "skipped" and leave the run to ``requeue_stuck`` until the claim is stale. Once
    ``DB_RETRIES`` are spent the error is raised and ``requeue_stuck`` re-sends the run later.
    """
    retry = {"countdown": db_retry_countdown(self.request.retries), "max_retries": DB_RETRIES}
    try:
        outcome = score_run(run_id, reclaim_attempt=reclaim_attempt)
    except ScoringInterrupted as interrupted:
        raise self.retry(args=(run_id,), kwargs={"reclaim_attempt": interrupted.attempt}, exc=interrupted,
                         **retry) from interrupted
    except TRANSIENT_DB_ERRORS as error:
        # Before any claim (the claim itself failed, or the run could not be read): nothing
        # changed; keep whatever attempt this job was allowed to take back.
        raise self.retry(args=(run_id,), kwargs={"reclaim_attempt": reclaim_attempt}, exc=error, **retry) from error
    if outcome.startswith("skipped") and (self.request.delivery_info or {}).get("redelivered"):
        # The broker redelivered this job because the worker that had it died (acks_late): the run
        # still says "scoring" under the dead attempt. Try again once that attempt is stale.
        wait = seconds_until_claimable(run_id)
        if wait is not None:
            raise self.retry(countdown=wait + 1, max_retries=3)
    return outcome


@shared_task(acks_late=True)
def requeue_stuck_runs_task() -> list[int]:
    return requeue_stuck_runs()

