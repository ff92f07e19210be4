"""The scoring job: claiming, idempotence, failure reasons, re-scoring after a gold update, requeueing."""

from __future__ import annotations

from datetime import timedelta

import orjson
import pytest
from django.utils import timezone

from fixtures.synthetic import generate_gold
from scoring import STC3, evaluate, load_gold, load_run
from tasks import services
from tasks.models import Run, Score, ScoreVector
from tests.conftest import World, committing, run_bytes


def submit(world: World, content: bytes, user=None, name: str = "run") -> Run:
    with committing():
        return services.submit_run(world.task, user or world.alice,
                                   services.Submission(content=content, filename="r.json", name=name))


@pytest.mark.django_db
def test_scoring_twice_stores_one_score(world: World) -> None:
    run = submit(world, run_bytes(world.gold))
    assert Run.objects.get(pk=run.pk).status == Run.DONE
    assert services.score_run(run.pk).startswith("skipped")
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED)
    assert services.score_run(run.pk) == "done"
    assert Score.objects.filter(run=run).count() == 1
    assert ScoreVector.objects.filter(score__run=run).count() == 21


@pytest.mark.django_db
def test_a_run_held_by_a_live_worker_is_not_claimed_again(world: World) -> None:
    run = submit(world, run_bytes(world.gold))
    Run.objects.filter(pk=run.pk).update(status=Run.SCORING, started_at=timezone.now())
    assert services.score_run(run.pk).startswith("skipped")
    # Past the hard time limit the worker is presumed dead, and the run can be claimed.
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=1))
    assert services.score_run(run.pk) == "done"
    assert Run.objects.get(pk=run.pk).attempts == 2


@pytest.mark.django_db
def test_a_missing_file_fails_with_a_readable_server_side_reason(world: World) -> None:
    run = submit(world, run_bytes(world.gold))
    services.run_file_path(run.file_sha256).unlink()
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED)
    assert services.score_run(run.pk) == "failed: internal error"
    run.refresh_from_db()
    assert run.status == Run.FAILED
    assert run.failure_is_server_side
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
        version = services.load_gold_version(world.task, orjson.dumps(changed), "gold-v2.json")
    assert version.number == 2
    run.refresh_from_db()
    assert run.status == Run.DONE and run.gold_version_id == version.pk
    scores = {score.gold_version.number: score.summary for score in Score.objects.filter(run=run)}
    assert scores[1] == first
    gold = load_gold(changed, STC3)
    expected = evaluate(load_run(orjson.loads(run_bytes(world.gold, 0.3)), gold), gold).summary()
    assert scores[2]["quality"]["A"]["rsnod"] == pytest.approx(expected["quality"]["A"]["rsnod"], abs=1e-12)
    assert scores[2]["quality"]["A"]["rsnod"] != pytest.approx(first["quality"]["A"]["rsnod"], abs=1e-6)
    # Baselines of version 1 are withdrawn (kept), version 2 has its own.
    baselines = Run.objects.filter(task=world.task, is_baseline=True)
    assert sorted((b.name, b.is_withdrawn) for b in baselines) == [
        ("baseline-popularity-v1", True), ("baseline-popularity-v2", False),
        ("baseline-uniform-v1", True), ("baseline-uniform-v2", False)]


@pytest.mark.django_db
def test_a_gold_update_that_drops_dialogues_fails_old_runs_with_a_reason(world: World) -> None:
    run = submit(world, run_bytes(world.gold))
    with committing():
        services.load_gold_version(world.task, orjson.dumps(world.gold[:20]), "smaller.json")
    run.refresh_from_db()
    assert run.status == Run.FAILED and not run.failure_is_server_side
    assert run.errors[0].endswith("is not in the gold data of this task")


@pytest.mark.django_db
def test_invalid_gold_stores_no_version(world: World) -> None:
    broken = [dict(dialogue) for dialogue in world.gold]
    broken[3] = {**broken[3], "annotations": [{"quality": {"A": 7, "S": 0, "E": 0}, "nugget": []}]}
    with pytest.raises(services.Rejected) as rejected:
        services.load_gold_version(world.task, orjson.dumps(broken), "bad.json")
    assert "[3].annotations[0].quality.A: unknown scale label 7 (allowed: 2, 1, 0, -1, -2)" in rejected.value.errors
    assert world.task.gold_versions.count() == 1


@pytest.mark.django_db
def test_requeue_sends_runs_whose_job_was_lost(world: World, monkeypatch) -> None:
    run = submit(world, run_bytes(world.gold))
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED, queued_at=timezone.now() - timedelta(minutes=5))
    fresh = submit(world, run_bytes(world.gold, seed=8))
    Run.objects.filter(pk=fresh.pk).update(status=Run.QUEUED)
    assert services.requeue_stuck_runs() == [run.pk]
    # The embedded default runs the re-sent job at once.
    assert Run.objects.get(pk=run.pk).status == Run.DONE
    assert Run.objects.get(pk=fresh.pk).status == Run.QUEUED


@pytest.mark.django_db
def test_a_broker_failure_at_upload_keeps_the_run_queued(world: World, monkeypatch) -> None:
    from tasks import jobs

    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(jobs.score_run_task, "delay", broker_down)
    run = submit(world, run_bytes(world.gold))
    assert Run.objects.get(pk=run.pk).status == Run.QUEUED  # accepted, safe, and re-sent later
    monkeypatch.undo()
    Run.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(minutes=5))
    services.requeue_stuck_runs()
    assert Run.objects.get(pk=run.pk).status == Run.DONE


@pytest.mark.django_db
def test_baselines_match_the_scoring_core(world: World) -> None:
    gold = load_gold(world.gold, STC3)
    from fixtures.synthetic import generate_run
    from scoring.baselines import popularity_run, uniform_run

    # The server's popularity baseline equals the generator's, which is built from the JSON gold.
    assert orjson.loads(orjson.dumps(popularity_run(gold))) == generate_run(world.gold, "popularity")
    assert orjson.loads(orjson.dumps(uniform_run(gold))) == generate_run(world.gold, "uniform")
    stored = Run.objects.get(task=world.task, name="baseline-uniform-v1")
    expected = evaluate(load_run(uniform_run(gold), gold), gold).summary()
    assert Score.objects.get(run=stored).summary == orjson.loads(orjson.dumps(expected))


def test_generated_gold_has_the_stc3_shape() -> None:
    gold = generate_gold(200, seed=2)
    turns = [len(dialogue["turns"]) for dialogue in gold]
    assert min(turns) >= 2 and max(turns) <= 7
    assert all(d["turns"][0]["sender"] == "customer" for d in gold)
    assert all(len(d["annotations"]) == 19 for d in gold)
    counts = load_gold(gold, STC3).quality_counts["A"]
    assert (counts == 0).any(axis=1).mean() > 0.5  # skewed: most dialogues leave a bin empty
