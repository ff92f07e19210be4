"""The scoring job: claiming, idempotence, failure reasons, re-scoring after a gold update, requeueing."""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest
from django.db import OperationalError
from django.test import Client
from django.utils import timezone

from fixtures.synthetic import generate_gold
from scoring.kinds.stc3 import STC3, evaluate, load_gold, load_run
from tasks import errors, jobs, organising, runfiles, submissions
from tasks.models import Run, Score, ScoreVector
from tests.conftest import World, committing, run_bytes, stc3_server_summary


def submit(world: World, content: bytes, user=None, name: str = "run") -> Run:
    with committing():
        return submissions.submit_run(world.task, user or world.alice,
                                      submissions.Submission(content=content, filename="r.json", name=name))


@pytest.mark.django_db
def test_scoring_twice_stores_one_score(world: World) -> None:
    run = submit(world, run_bytes(world.gold))
    assert Run.objects.get(pk=run.pk).status == Run.DONE
    assert jobs.score_run(run.pk).startswith("skipped")
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED)
    assert jobs.score_run(run.pk) == "done"
    assert Score.objects.filter(run=run).count() == 1
    assert ScoreVector.objects.filter(score__run=run).count() == 21


@pytest.mark.django_db
def test_a_run_held_by_a_live_worker_is_not_claimed_again(world: World) -> None:
    run = submit(world, run_bytes(world.gold))
    Run.objects.filter(pk=run.pk).update(status=Run.SCORING, started_at=timezone.now())
    assert jobs.score_run(run.pk).startswith("skipped")
    # Past the hard time limit the worker is presumed dead, and the run can be claimed.
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    assert jobs.score_run(run.pk) == "done"
    assert Run.objects.get(pk=run.pk).attempts == 2


@pytest.mark.django_db
def test_a_missing_file_fails_with_a_readable_server_side_reason(world: World) -> None:
    run = submit(world, run_bytes(world.gold))
    runfiles.run_file_path(run.file_sha256).unlink()
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED)
    assert jobs.score_run(run.pk) == "failed: internal error"
    run.refresh_from_db()
    assert run.status == Run.FAILED
    assert run.errors == ["internal error while scoring (FileNotFoundError); the organisers have been told and "
                          "can re-score the run"]


@pytest.mark.django_db
def test_new_gold_version_rescores_runs_and_keeps_old_scores(world: World) -> None:
    run = submit(world, run_bytes(world.gold, 0.3))
    first = Score.objects.get(run=run).summary
    changed = [dict(dialogue) for dialogue in world.gold]
    for dialogue in changed[:10]:  # ten dialogues get one more annotator who says "-2" everywhere
        extra = {"quality": {"A": -2, "S": -2, "E": -2},
                 "nugget": ["CNaN" if turn["sender"] == "customer" else "HNaN" for turn in dialogue["turns"]]}
        dialogue["annotations"] = [*dialogue["annotations"], extra]
    with committing():
        version = organising.load_gold_version(world.task, orjson.dumps(changed), "gold-v2.json")
    assert version.number == 2
    run.refresh_from_db()
    assert run.status == Run.DONE and run.gold_version_id == version.pk
    scores = {score.gold_version.number: score.summary for score in Score.objects.filter(run=run)}
    assert scores[1] == first
    gold = load_gold(changed, STC3)
    expected = evaluate(load_run(orjson.loads(run_bytes(world.gold, 0.3)), gold), gold).summary()
    assert scores[2] == orjson.loads(orjson.dumps(stc3_server_summary(expected)))
    assert scores[2]["measures"]["quality.A.rsnod"] != pytest.approx(first["measures"]["quality.A.rsnod"], abs=1e-6)
    # Baselines belong to their version: those of version 1 keep their scores on it (never
    # re-scored), version 2 has its own, and the board shows those of the version it shows.
    baselines = Run.objects.filter(task=world.task, is_baseline=True)
    assert sorted((b.name, b.gold_version.number, b.status) for b in baselines) == [
        ("baseline-popularity-v1", 1, Run.DONE), ("baseline-popularity-v2", 2, Run.DONE),
        ("baseline-uniform-v1", 1, Run.DONE), ("baseline-uniform-v2", 2, Run.DONE)]
    board = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/").json()
    assert board["gold_version"] == 2
    assert sorted(entry["name"] for entry in board["runs"] if entry["is_baseline"]) == [
        "baseline-popularity-v2", "baseline-uniform-v2"]


@pytest.mark.django_db
def test_a_gold_update_that_drops_dialogues_fails_old_runs_with_a_reason(world: World) -> None:
    run = submit(world, run_bytes(world.gold))
    with committing():
        organising.load_gold_version(world.task, orjson.dumps(world.gold[:20]), "smaller.json")
    run.refresh_from_db()
    # Valid when uploaded: the gold changed, not the team's doing (issue 11: no quota used).
    assert run.status == Run.FAILED
    assert run.errors[1].endswith("is not in the gold data of this task")


@pytest.mark.django_db
def test_invalid_gold_stores_no_version(world: World) -> None:
    broken = [dict(dialogue) for dialogue in world.gold]
    broken[3] = {**broken[3], "annotations": [{"quality": {"A": 7, "S": 0, "E": 0}, "nugget": []}]}
    with pytest.raises(errors.Rejected) as rejected:
        organising.load_gold_version(world.task, orjson.dumps(broken), "bad.json")
    assert "[3].annotations[0].quality.A: unknown scale label 7 (allowed: 2, 1, 0, -1, -2)" in rejected.value.errors
    assert world.task.gold_versions.count() == 1


@pytest.mark.django_db
def test_requeue_sends_runs_whose_job_was_lost(world: World, monkeypatch) -> None:
    run = submit(world, run_bytes(world.gold))
    # Its job was lost: queued five minutes ago, last handed to the broker as long ago.
    long_ago = timezone.now() - timedelta(minutes=5)
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED, queued_at=long_ago, last_sent_at=long_ago)
    fresh = submit(world, run_bytes(world.gold, seed=8))
    Run.objects.filter(pk=fresh.pk).update(status=Run.QUEUED)
    assert jobs.requeue_stuck_runs() == [run.pk]
    # The embedded default runs the re-sent job at once.
    assert Run.objects.get(pk=run.pk).status == Run.DONE
    assert Run.objects.get(pk=fresh.pk).status == Run.QUEUED


@pytest.mark.django_db
def test_requeue_under_a_backlog_sends_each_run_again_only_once_its_last_send_is_stale(
        world: World, monkeypatch) -> None:
    """Issue 11, defect 5: with 8 runs waiting in the broker (a backlog, no worker free), celery
    beat's requeue_stuck every minute re-sent every queued run each time (8 runs became 49
    messages). A run is sent again only when its last send is older than the stale threshold."""
    messages: list[int] = []
    monkeypatch.setattr(jobs.score_run_task, "delay", messages.append)  # the broker holds them; nobody scores
    runs = [submit(world, run_bytes(world.gold, seed=seed), name=f"backlog-{seed}") for seed in range(8)]
    ids = sorted(run.pk for run in runs)
    assert sorted(messages) == ids
    assert list(Run.objects.filter(pk__in=ids).values_list("sends", flat=True)) == [1] * 8
    # Queued for three minutes already (past the two-minute "maybe on its way" window), sent as
    # long ago; beat calls requeue_stuck every minute, within the stale threshold (3.5 minutes).
    start = timezone.now()
    Run.objects.filter(pk__in=ids).update(queued_at=start - timedelta(minutes=3), last_sent_at=start)
    threshold = jobs.stale_after()
    assert threshold == timedelta(seconds=210)
    for minute in range(3):
        clock = start + timedelta(minutes=minute, seconds=30)
        monkeypatch.setattr(timezone, "now", lambda clock=clock: clock)
        assert jobs.requeue_stuck_runs() == []
    assert len(messages) == 8
    # Past the threshold: each run is sent once more, and the next call sends nothing again.
    later = start + threshold + timedelta(seconds=1)
    monkeypatch.setattr(timezone, "now", lambda: later)
    assert jobs.requeue_stuck_runs() == ids
    assert len(messages) == 16 and sorted(messages[8:]) == ids
    assert jobs.requeue_stuck_runs() == []
    later_still = later + timedelta(minutes=1)
    monkeypatch.setattr(timezone, "now", lambda: later_still)
    assert jobs.requeue_stuck_runs() == []
    assert len(messages) == 16
    assert set(Run.objects.filter(pk__in=ids).values_list("sends", "last_sent_at")) == {(2, later)}


@pytest.mark.django_db
def test_every_send_is_recorded_and_a_failed_send_is_not(world: World, monkeypatch) -> None:
    run = submit(world, run_bytes(world.gold))
    first = Run.objects.get(pk=run.pk)
    assert first.sends == 1 and first.last_sent_at is not None
    with committing():
        organising.rescore_runs(Run.objects.filter(pk=run.pk))
    assert Run.objects.get(pk=run.pk).sends == 2

    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(jobs.score_run_task, "delay", broker_down)
    with committing():
        organising.rescore_runs(Run.objects.filter(pk=run.pk))
    after = Run.objects.get(pk=run.pk)
    assert after.sends == 2 and after.status == Run.QUEUED  # not sent: requeue_stuck sends it after two minutes


@pytest.mark.django_db
def test_a_broker_failure_at_upload_keeps_the_run_queued(world: World, monkeypatch) -> None:
    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(jobs.score_run_task, "delay", broker_down)
    run = submit(world, run_bytes(world.gold))
    assert Run.objects.get(pk=run.pk).status == Run.QUEUED  # accepted, safe, and re-sent later
    monkeypatch.undo()
    Run.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(minutes=5))
    jobs.requeue_stuck_runs()
    assert Run.objects.get(pk=run.pk).status == Run.DONE


@pytest.mark.django_db
def test_baselines_match_the_scoring_core(world: World) -> None:
    gold = load_gold(world.gold, STC3)
    from fixtures.synthetic import generate_run
    from scoring.kinds.stc3.baselines import popularity_run, uniform_run

    # The server's popularity baseline equals the generator's, which is built from the JSON gold.
    assert orjson.loads(orjson.dumps(popularity_run(gold))) == generate_run(world.gold, "popularity")
    assert orjson.loads(orjson.dumps(uniform_run(gold))) == generate_run(world.gold, "uniform")
    stored = Run.objects.get(task=world.task, name="baseline-uniform-v1")
    expected = evaluate(load_run(uniform_run(gold), gold), gold).summary()
    assert Score.objects.get(run=stored).summary == orjson.loads(orjson.dumps(stc3_server_summary(expected)))


def test_generated_gold_has_the_stc3_shape() -> None:
    gold = generate_gold(200, seed=2)
    turns = [len(dialogue["turns"]) for dialogue in gold]
    assert min(turns) >= 2 and max(turns) <= 7
    assert all(d["turns"][0]["sender"] == "customer" for d in gold)
    assert all(len(d["annotations"]) == 19 for d in gold)
    counts = load_gold(gold, STC3).quality_counts["A"]
    assert (counts == 0).any(axis=1).mean() > 0.5  # skewed: most dialogues leave a bin empty


# A database connection cut after the claim -------------------------------------------------------------

def queued_run(world: World, phase=None, seed: int = 1) -> Run:
    """A run stored and queued, with no job sent for it (``attempts == 0``)."""
    content = run_bytes(world.gold, seed=seed)
    return Run.objects.create(task=world.task, team=world.alice.teams.get(), phase=phase, name=f"cut-{seed}",
                              file_sha256=runfiles.store_run_file(content), file_size=len(content),
                              parts=["nugget", "quality"], gold_version=world.gold_version)


def cut_on_call(monkeypatch, target, name: str, *calls: int) -> list[int]:
    """Make ``target.name`` raise OperationalError (a connection cut by a database restart) on the
    given calls (1 = the first); the other calls go through. Returns the call counter."""
    original = getattr(target, name)
    count = [0]

    def maybe_cut(*args, **kwargs):
        count[0] += 1
        if count[0] in calls:
            raise OperationalError("server closed the connection unexpectedly")
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, maybe_cut)
    return count


def state(run: Run) -> tuple[str, int]:
    run.refresh_from_db()
    return run.status, run.attempts


def scores_by_scope(run: Run) -> dict[str, int]:
    return {scope: Score.objects.filter(run=run, scope=scope).count()
            for scope in Score.objects.filter(run=run).values_list("scope", flat=True)}


def live_phase(world: World):
    from tasks.models import Phase

    now = timezone.now()
    return Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                                starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=1),
                                live_subset_size=10)


@pytest.mark.django_db
def test_a_job_cut_in_the_final_write_takes_its_own_claim_back_at_once(world: World, monkeypatch) -> None:
    run = queued_run(world, phase=live_phase(world))
    # The full-set scores are written, then the connection drops while the live scores are.
    cut_on_call(monkeypatch, ScoreVector.objects, "bulk_create", 2)
    with pytest.raises(jobs.ScoringInterrupted) as cut:
        jobs.score_run(run.pk)
    assert cut.value.attempt == 1
    assert isinstance(cut.value.__cause__, OperationalError)
    # The claim is kept (resetting it would need the database), the half-written scores are not.
    assert state(run) == (Run.SCORING, 1)
    assert not Score.objects.filter(run=run).exists()

    # Any other job, or one carrying another attempt number, still finds the run held ...
    assert jobs.score_run(run.pk).startswith("skipped")
    assert jobs.score_run(run.pk, reclaim_attempt=0).startswith("skipped")
    assert jobs.score_run(run.pk, reclaim_attempt=2).startswith("skipped")
    assert state(run) == (Run.SCORING, 1)
    # ... but the retry of the cut job takes it back without waiting for it to go stale.
    assert jobs.score_run(run.pk, reclaim_attempt=1) == "done"
    assert state(run) == (Run.DONE, 2)
    assert scores_by_scope(run) == {Score.FULL: 1, Score.LIVE: 1}
    assert ScoreVector.objects.filter(score__run=run).count() == 42
    # A late duplicate of that retry finds the run done.
    assert jobs.score_run(run.pk, reclaim_attempt=1).startswith("skipped")
    assert state(run) == (Run.DONE, 2)


@pytest.mark.django_db
def test_a_job_cut_while_computing_takes_its_own_claim_back(world: World, monkeypatch) -> None:
    run = queued_run(world)
    cut_on_call(monkeypatch, jobs, "_compute", 1)
    with pytest.raises(jobs.ScoringInterrupted) as cut:
        jobs.score_run(run.pk)
    assert cut.value.attempt == 1
    assert state(run) == (Run.SCORING, 1)  # not failed: the run is not at fault
    assert jobs.score_run(run.pk, reclaim_attempt=1) == "done"
    assert state(run) == (Run.DONE, 2)
    assert scores_by_scope(run) == {Score.FULL: 1}


@pytest.mark.django_db
def test_a_job_cut_while_locking_the_run_for_the_final_write_takes_its_claim_back(
        world: World, monkeypatch) -> None:
    from django.db.models import QuerySet

    run = queued_run(world)
    cut_on_call(monkeypatch, QuerySet, "select_for_update", 1)
    with pytest.raises(jobs.ScoringInterrupted) as cut:
        jobs.score_run(run.pk)
    assert state(run) == (Run.SCORING, cut.value.attempt) == (Run.SCORING, 1)
    assert jobs.score_run(run.pk, reclaim_attempt=1) == "done"
    assert state(run) == (Run.DONE, 2)
    assert scores_by_scope(run) == {Score.FULL: 1}


@pytest.mark.django_db
def test_a_stale_attempt_number_is_refused_once_another_attempt_holds_the_run(world: World, monkeypatch) -> None:
    run = queued_run(world)
    cut_on_call(monkeypatch, ScoreVector.objects, "bulk_create", 1, 2)
    with pytest.raises(jobs.ScoringInterrupted):
        jobs.score_run(run.pk)  # attempt 1, cut
    # Its retry came too late: the claim went stale and another job claimed the run (attempt 2),
    # which was cut in turn and now holds it.
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    with pytest.raises(jobs.ScoringInterrupted) as second:
        jobs.score_run(run.pk)
    assert second.value.attempt == 2 and state(run) == (Run.SCORING, 2)
    assert jobs.score_run(run.pk, reclaim_attempt=1).startswith("skipped")
    assert state(run) == (Run.SCORING, 2)
    assert jobs.score_run(run.pk, reclaim_attempt=2) == "done"
    assert state(run) == (Run.DONE, 3)
    assert scores_by_scope(run) == {Score.FULL: 1}


@pytest.mark.django_db
def test_a_database_error_before_the_claim_changes_nothing(world: World, monkeypatch) -> None:
    run = queued_run(world)
    cut_on_call(monkeypatch, Run.objects, "filter", 1)
    with pytest.raises(OperationalError):
        jobs.score_run(run.pk)
    assert state(run) == (Run.QUEUED, 0)
    assert jobs.score_run(run.pk) == "done"
    assert state(run) == (Run.DONE, 1)


class RetrySpy:
    """Records every ``self.retry(...)`` of the scoring job (its kwargs), then lets Celery retry."""

    def __init__(self, monkeypatch) -> None:
        from celery import Task

        from evalserver.celery import app

        self.calls: list[dict] = []
        task_class = type(app.tasks["tasks.jobs.score_run_task"])

        def retry(task, *args, **kwargs):
            self.calls.append(kwargs)
            return Task.retry(task, *args, **kwargs)

        monkeypatch.setattr(task_class, "retry", retry)


@pytest.mark.django_db
def test_the_job_retries_a_cut_with_its_attempt_number(world: World, monkeypatch) -> None:
    run = queued_run(world)
    cut_on_call(monkeypatch, ScoreVector.objects, "bulk_create", 1)
    retries = RetrySpy(monkeypatch)
    # apply() runs the job as Celery's eager mode does: the retry it schedules runs at once.
    result = jobs.score_run_task.apply(args=(run.pk,))
    assert result.successful() and result.get() == "done"
    assert len(retries.calls) == 1
    assert retries.calls[0]["args"] == (run.pk,)
    assert retries.calls[0]["kwargs"] == {"reclaim_attempt": 1}
    assert retries.calls[0]["countdown"] == 1 and retries.calls[0]["max_retries"] == jobs.DB_RETRIES
    assert isinstance(retries.calls[0]["exc"], jobs.ScoringInterrupted)
    assert state(run) == (Run.DONE, 2)
    assert scores_by_scope(run) == {Score.FULL: 1}


@pytest.mark.django_db
def test_the_job_retries_an_error_before_the_claim_with_the_attempt_it_had(world: World, monkeypatch) -> None:
    run = queued_run(world)
    cut_on_call(monkeypatch, Run.objects, "filter", 1)
    retries = RetrySpy(monkeypatch)
    result = jobs.score_run_task.apply(args=(run.pk,), kwargs={"reclaim_attempt": None})
    assert result.get() == "done"
    assert [call["kwargs"] for call in retries.calls] == [{"reclaim_attempt": None}]
    assert isinstance(retries.calls[0]["exc"], OperationalError)
    assert state(run) == (Run.DONE, 1)


@pytest.mark.django_db
def test_the_job_backs_off_and_gives_up_leaving_the_run_to_requeue_stuck(world: World, monkeypatch) -> None:
    run = queued_run(world)
    cut_on_call(monkeypatch, ScoreVector.objects, "bulk_create", *range(1, 100))
    retries = RetrySpy(monkeypatch)
    result = jobs.score_run_task.apply(args=(run.pk,))
    assert result.failed() and isinstance(result.result, jobs.ScoringInterrupted)
    # Each retry took back the claim of the one before: 1 s, 2 s, 4 s ... apart, at most a minute.
    assert [call["countdown"] for call in retries.calls] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert [call["kwargs"]["reclaim_attempt"] for call in retries.calls] == list(range(1, 9))
    assert state(run) == (Run.SCORING, jobs.DB_RETRIES + 1)
    assert not Score.objects.filter(run=run).exists()
    # requeue_stuck hands it on once the claim is stale.
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    monkeypatch.undo()
    assert jobs.requeue_stuck_runs() == [run.pk]
    assert state(run) == (Run.DONE, jobs.DB_RETRIES + 2)


@pytest.mark.django_db
def test_the_job_does_not_retry_other_errors(world: World, monkeypatch) -> None:
    run = queued_run(world)
    runfiles.run_file_path(run.file_sha256).unlink()
    retries = RetrySpy(monkeypatch)
    assert jobs.score_run_task.apply(args=(run.pk,)).get() == "failed: internal error"
    assert retries.calls == []
    assert state(run) == (Run.FAILED, 1)


def test_the_interruption_survives_pickling() -> None:
    from celery.utils.serialization import get_pickleable_exception

    # Celery stores a failed job's exception; one it cannot pickle becomes an opaque wrapper.
    interrupted = jobs.ScoringInterrupted(7, 2, "OperationalError: gone")
    assert get_pickleable_exception(interrupted) is interrupted
    assert str(interrupted) == "run 7, attempt 2: OperationalError: gone"


@pytest.mark.django_db
def test_a_run_whose_job_dies_again_and_again_ends_failed_not_resent_for_ever(world: World, monkeypatch) -> None:
    """A job killed by the hard time limit leaves its run ``scoring``; requeue_stuck sent it again
    at every stale claim, for ever. After MAX_INTERRUPTIONS re-sends the run ends failed, server-side
    (no quota used), and is no longer sent."""
    messages: list[int] = []
    monkeypatch.setattr(jobs.score_run_task, "delay", messages.append)
    dying, retried = (submit(world, run_bytes(world.gold, seed=seed), name=f"dies-{seed}") for seed in (1, 2))
    messages.clear()
    long_ago = timezone.now() - jobs.stale_after() - timedelta(seconds=5)
    Run.objects.filter(pk=dying.pk).update(status=Run.SCORING, started_at=long_ago, last_sent_at=long_ago,
                                           interruptions=jobs.MAX_INTERRUPTIONS)
    Run.objects.filter(pk=retried.pk).update(status=Run.SCORING, started_at=long_ago, last_sent_at=long_ago,
                                             interruptions=jobs.MAX_INTERRUPTIONS - 1)
    assert jobs.requeue_stuck_runs() == [retried.pk]
    assert messages == [retried.pk]
    dead = Run.objects.get(pk=dying.pk)
    assert dead.status == Run.FAILED
    assert Run.objects.get(pk=retried.pk).interruptions == jobs.MAX_INTERRUPTIONS
    assert dead.errors == [f"scoring was cut off {jobs.MAX_INTERRUPTIONS + 1} times (time limit or worker "
                           "failure); the organisers have been told and can re-score the run"]
    assert jobs.requeue_stuck_runs() == [] and messages == [retried.pk]


@pytest.mark.django_db
def test_an_attempt_overtaken_by_a_rescore_stores_nothing_and_the_new_attempt_scores_the_new_gold(
        world: World, monkeypatch) -> None:
    """An organiser loads a corrected gold while a worker is still computing the run against the old
    one; the re-score's job claims the run before the old attempt reaches its final write. The old
    attempt must store nothing (it still holds a run object that names the old version), and the new
    attempt's scores are the ones the board shows."""
    run = submit(world, run_bytes(world.gold, 0.3))
    changed = [dict(dialogue) for dialogue in world.gold]
    for dialogue in changed[:10]:
        extra = {"quality": {"A": -2, "S": -2, "E": -2},
                 "nugget": ["CNaN" if turn["sender"] == "customer" else "HNaN" for turn in dialogue["turns"]]}
        dialogue["annotations"] = [*dialogue["annotations"], extra]
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED)
    real_compute = jobs._compute
    overtaken: dict[str, int] = {}

    def compute_then_be_overtaken(stale_run: Run):
        result = real_compute(stale_run)  # against version 1
        if not overtaken:
            # The organiser's corrected gold: re-scoring queues the run against version 2 (its
            # on-commit send, and the new baselines', are held back), and the re-score's job claims it.
            overtaken["busy"] = 1
            monkeypatch.setattr(jobs, "send_scoring", lambda run_id: None)
            monkeypatch.setattr(organising, "send_scoring", lambda run_id: None)
            with committing():
                version = organising.load_gold_version(world.task, orjson.dumps(changed), "gold-v2.json")
            overtaken["version"] = version.pk
            overtaken["attempt"] = jobs._claim(stale_run.pk, None)
        return result

    monkeypatch.setattr(jobs, "_compute", compute_then_be_overtaken)
    assert jobs.score_run(run.pk) == "skipped: another attempt took the run over"
    current = Run.objects.get(pk=run.pk)
    assert (current.status, current.attempts, current.gold_version_id) == (
        Run.SCORING, overtaken["attempt"], overtaken["version"])
    assert not Score.objects.filter(run=run, gold_version_id=overtaken["version"]).exists()
    assert jobs._score_claimed(run.pk, overtaken["attempt"]) == "done"
    gold = load_gold(changed, STC3)
    expected = evaluate(load_run(orjson.loads(run_bytes(world.gold, 0.3)), gold), gold).summary()
    stored = Score.objects.get(run=run, gold_version_id=overtaken["version"], scope=Score.FULL).summary
    assert stored == orjson.loads(orjson.dumps(stc3_server_summary(expected)))
