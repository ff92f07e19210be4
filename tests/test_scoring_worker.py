"""The background scoring worker of the embedded default (issue 28): an upload is answered while
its run is still queued, the worker scores it from the database, and a claim whose worker died
is taken over once its heartbeat is old, never while it is fresh."""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import timedelta

import orjson
import pytest
from django.test import Client
from django.utils import timezone

from scoring.kinds.stc3 import STC3, evaluate, load_gold, load_run
from tasks import jobs, submissions
from tasks.models import Run, Score
from tasks.worker import Worker, next_run
from tests.conftest import World, committing, run_bytes, stc3_server_summary


@pytest.fixture
def worker_mode(settings) -> None:  # noqa: ANN001 - pytest-django's settings
    settings.EVALSERVER_SCORING_MODE = "worker"


def upload(world: World, content: bytes, name: str = "run") -> Run:
    with committing():
        return submissions.submit_run(world.task, world.alice,
                                      submissions.Submission(content=content, filename="r.json", name=name))


@pytest.mark.django_db
def test_an_api_upload_is_answered_queued_and_the_worker_scores_it_as_the_offline_scorer(
        world: World, worker_mode: None) -> None:
    content = run_bytes(world.gold, 0.3)
    with committing():
        reply = Client().post(f"/api/v1/tasks/{world.task.slug}/runs/", {"file": _file(content), "name": "bg"},
                              HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    assert reply.status_code == 202, reply.content
    run = Run.objects.get(pk=reply.json()["id"])
    assert (run.status, run.sends, Score.objects.filter(run=run).count()) == (Run.QUEUED, 1, 0)
    assert next_run() == (run.pk, 0, False)
    assert Worker().score(run.pk, 0, False) == "done"
    run.refresh_from_db()
    assert (run.status, run.attempts, run.interruptions) == (Run.DONE, 1, 0)
    gold = load_gold(world.gold, STC3)
    expected = evaluate(load_run(orjson.loads(content), gold), gold).summary()
    assert Score.objects.get(run=run).summary == orjson.loads(orjson.dumps(stc3_server_summary(expected)))
    assert next_run() is None


def _file(content: bytes):  # noqa: ANN202 - Django's uploaded file
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("run.json", content, content_type="application/json")


@pytest.mark.django_db
def test_the_oldest_queued_run_goes_first(world: World, worker_mode: None) -> None:
    first = upload(world, run_bytes(world.gold, 0.3, seed=1), "first")
    second = upload(world, run_bytes(world.gold, 0.3, seed=2), "second")
    Run.objects.filter(pk=second.pk).update(queued_at=timezone.now() - timedelta(minutes=1))
    assert next_run() == (second.pk, 0, False)
    assert Worker().score(second.pk, 0, False) == "done"
    assert next_run() == (first.pk, 0, False)


@pytest.mark.django_db
def test_a_claim_with_an_old_heartbeat_is_taken_over_and_a_fresh_one_is_not(world: World, worker_mode: None,
                                                                            settings) -> None:  # noqa: ANN001
    run = upload(world, run_bytes(world.gold, 0.3))
    now = timezone.now()
    lease = timedelta(seconds=settings.EVALSERVER_SCORING_LEASE_SECONDS)
    # A live worker: heartbeat within the lease.
    Run.objects.filter(pk=run.pk).update(status=Run.SCORING, attempts=1, started_at=now - lease * 2,
                                         heartbeat_at=now - lease / 2)
    assert next_run() is None
    assert jobs.score_run(run.pk).startswith("skipped")
    # A Celery worker's claim has no heartbeat: only the hard time limit makes it dead, as before.
    Run.objects.filter(pk=run.pk).update(heartbeat_at=None, started_at=now)
    assert next_run() is None
    # The worker died: its heartbeat stopped more than a lease ago.
    Run.objects.filter(pk=run.pk).update(heartbeat_at=now - lease * 2)
    assert next_run() == (run.pk, 1, True)
    assert Worker().score(run.pk, 1, True) == "done"
    run.refresh_from_db()
    assert (run.status, run.attempts, run.interruptions) == (Run.DONE, 2, 1)


@pytest.mark.django_db
def test_a_run_cut_off_too_often_fails_instead_of_being_taken_over_again(world: World, worker_mode: None) -> None:
    run = upload(world, run_bytes(world.gold, 0.3))
    Run.objects.filter(pk=run.pk).update(status=Run.SCORING, attempts=4, interruptions=jobs.MAX_INTERRUPTIONS,
                                         started_at=timezone.now(), heartbeat_at=timezone.now() - timedelta(hours=1))
    assert next_run() is None
    Worker().sweep()
    run.refresh_from_db()
    assert run.status == Run.FAILED
    assert run.errors == [f"scoring was cut off {jobs.MAX_INTERRUPTIONS + 1} times (time limit or worker failure); "
                          "the organisers have been told and can re-score the run"]


@pytest.mark.django_db(transaction=True)  # the heartbeat thread has its own connection: it sees committed rows
def test_the_heartbeat_is_written_while_the_run_is_scored(world: World, worker_mode: None, settings) -> None:  # noqa: ANN001
    run = upload(world, run_bytes(world.gold, 0.3))
    settings.EVALSERVER_SCORING_HEARTBEAT_SECONDS = 0.05
    seen = []
    original = jobs._compute

    def slow_compute(scored: Run):  # noqa: ANN202 - holds the job long enough for two heartbeats
        claimed = Run.objects.get(pk=scored.pk)
        seen.append((claimed.status, claimed.heartbeat_at))
        time.sleep(0.3)
        seen.append(Run.objects.get(pk=scored.pk).heartbeat_at)
        return original(scored)

    jobs._compute = slow_compute
    try:
        assert Worker().score(run.pk, 0, False) == "done"
    finally:
        jobs._compute = original
    assert seen[0][0] == Run.SCORING and seen[0][1] is not None
    assert seen[1] > seen[0][1]


@pytest.mark.django_db
def test_a_stop_signal_while_scoring_gives_the_run_back_queued(world: World, worker_mode: None) -> None:
    run = upload(world, run_bytes(world.gold, 0.3))
    worker = Worker()
    previous = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM)}
    worker.install_signal_handlers()
    original = jobs._compute

    def compute_until_signalled(scored: Run):  # noqa: ANN202 - the signal arrives mid-scoring
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGTERM)).start()
        time.sleep(5)
        raise AssertionError("the signal did not stop the scoring")

    jobs._compute = compute_until_signalled
    try:
        assert worker.score(run.pk, 0, False) == "stopped; given back"
    finally:
        jobs._compute = original
        for number, handler in previous.items():
            signal.signal(number, handler)
    run.refresh_from_db()
    assert (run.status, run.attempts, run.heartbeat_at) == (Run.QUEUED, 1, None)
    assert worker.stopping.is_set()
    assert next_run() == (run.pk, 1, False)


@pytest.mark.django_db
def test_the_web_form_answers_with_the_run_page_showing_the_wait_until_the_worker_is_done(
        world: World, worker_mode: None) -> None:
    client = Client()
    client.force_login(world.alice)
    with committing():
        reply = client.post(f"/tasks/{world.task.slug}/upload/", {"file": _file(run_bytes(world.gold, 0.3)),
                                                                    "name": "web"}, follow=True)
    assert reply.status_code == 200
    run = Run.objects.get(name="web")
    page = reply.content.decode()
    assert "Run &#x27;web&#x27; was accepted and queued for scoring." in page
    assert '<strong id="run-status" data-status="queued">queued</strong>' in page
    assert 'id="run-script"' in page  # static/js/run.js follows the status until done, then shows the scores
    Worker().score(run.pk, 0, False)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<strong id="run-status" data-status="done">done</strong>' in page
    assert 'id="run-script"' not in page  # no more polling once it is done


@pytest.mark.django_db
def test_the_worker_lowers_its_cpu_priority_before_loading_anything(monkeypatch, settings) -> None:  # noqa: ANN001
    # Issue 28: loading spaCy and GiNZA at the worker's start took the CPU from the first readers;
    # the worker yields it to the web processes (EVALSERVER_SCORING_WORKER_NICE) before it loads.
    import io

    from django.core.management import call_command

    from tasks.management.commands import scoring_worker

    steps: list[tuple] = []
    monkeypatch.setattr(os, "nice", lambda increment: steps.append(("nice", increment)) or increment)
    monkeypatch.setattr(scoring_worker, "warm_up", lambda: steps.append(("warm_up",)) or [])
    monkeypatch.setattr(Worker, "install_signal_handlers", lambda self: None)  # pytest keeps its own
    monkeypatch.setattr(Worker, "run", lambda self: steps.append(("run",)))
    settings.EVALSERVER_SCORING_WORKER_NICE = 7
    call_command("scoring_worker", parent_pid=os.getpid(), stdout=io.StringIO())
    assert steps == [("nice", 7), ("warm_up",), ("run",)]


@pytest.mark.django_db
def test_the_worker_prepares_the_gold_versions_uploads_are_scored_against_when_it_starts(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """warm_up loads each response task's pipeline and prepares the gold versions runs are scored
    against now (an open phase's, or the latest without phases): the first run after a start
    prepares nothing, and its scores are those of a worker that prepared nothing before it."""
    from collections import OrderedDict

    from fixtures import response_demo
    from scoring.kinds import get_kind
    from scoring.kinds.response import bleu as bleu_module
    from scoring.kinds.response import compiled as response_compiled
    from scoring.kinds.response import kind as response_kind
    from scoring.kinds.response import resources as response_resources
    from tasks import organising, worker
    from tasks.models import Phase, _compiled_gold

    task = organising.create_task("warm-response", "response", "Warm responses", kind="response")
    gold = response_demo.generate_gold(12, seed=3)
    with committing():
        first = organising.load_gold_version(task, orjson.dumps(gold), "v1.json")
        latest = organising.load_gold_version(task, orjson.dumps(response_demo.generate_gold(12, seed=4)), "v2.json")
    # No phases: the latest version. An open development phase on version 1: version 1 alone; a
    # final phase (never takes runs) and an ended phase add nothing.
    assert worker.scored_against_now(task) == [latest]
    now = timezone.now()
    Phase.objects.create(task=task, name="dev", kind=Phase.DEVELOPMENT, gold_version=first,
                         starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=1))
    Phase.objects.create(task=task, name="old", kind=Phase.DEVELOPMENT, gold_version=latest,
                         starts_at=now - timedelta(days=9), ends_at=now - timedelta(days=2))
    Phase.objects.create(task=task, name="final", kind=Phase.FINAL, gold_version=latest,
                         starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=1))
    assert worker.scored_against_now(task) == [first]
    assert worker.scored_against_now(world.task) == [world.task.latest_gold()]  # the DQ/ND task: no phases

    def forget() -> None:
        """What a new worker process holds: no compiled gold, nothing shared by content."""
        _compiled_gold.cache_clear()
        monkeypatch.setattr(response_kind, "_GOLDS", OrderedDict())
        monkeypatch.setattr(response_resources, "_SHARED", OrderedDict())

    forget()
    prepared: list[str] = []
    real_bleu, real_rows = bleu_module.prepare_references, response_compiled.rows_from_tagged
    monkeypatch.setattr(bleu_module, "prepare_references",
                        lambda *args, **kwargs: prepared.append("bleu") or real_bleu(*args, **kwargs))
    monkeypatch.setattr(response_compiled, "rows_from_tagged",
                        lambda *args, **kwargs: prepared.append("posscore") or real_rows(*args, **kwargs))
    loaded = worker.warm_up()
    assert f"gold version 1 ({task.slug})" in loaded and f"gold version 2 ({task.slug})" not in loaded
    # BLEU's and deltaBLEU's n-gram tables and POSSCORE's reference rows of version 1.
    assert sorted(prepared) == ["bleu", "bleu", "posscore"]
    kind, config = get_kind("response"), task.kind_config
    content = response_demo.generate_runs(gold, seed=5)["strong"]
    warm = kind.score(kind.parse_run(content, first.load(), config), first.load(), config)
    assert sorted(prepared) == ["bleu", "bleu", "posscore"]  # the first run prepared nothing more
    forget()
    cold = kind.score(kind.parse_run(content, first.load(), config), first.load(), config)
    assert sorted(prepared) == ["bleu"] * 4 + ["posscore"] * 2  # a worker that prepared nothing before
    assert warm.headlines == cold.headlines
    for key, values in cold.per_item.items():
        assert (warm.per_item[key] == values).all(), key
    # Past the versions a process keeps, the most recently active tasks first: this task's versions
    # were loaded after the DQ/ND task's, which has no run.
    monkeypatch.setattr(worker, "PREPARED_VERSIONS", 1)
    forget()
    loaded = worker.warm_up()
    assert [what for what in loaded if what.startswith("gold version")] == [f"gold version 1 ({task.slug})"]
    upload(world, run_bytes(world.gold, 0.3))  # a run received: the DQ/ND task is now the most recent
    forget()
    loaded = worker.warm_up()
    assert [what for what in loaded if what.startswith("gold version")] == [f"gold version 1 ({world.task.slug})"]
