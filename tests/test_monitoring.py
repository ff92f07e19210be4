"""Monitoring (issue 41, item 5): ``/metrics`` in Prometheus' text format behind a token, worker
heartbeats, and ``/healthz`` naming the dependency that failed.

The figures are checked against states the tests set (statuses, queue times, scoring times chosen
here), read back through prometheus_client's own parser of the text format, so a malformed line
fails too."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tasks import heartbeats
from tasks.heartbeats import WorkerHeartbeat
from tasks.models import Run

TOKEN = "t" * 20 + "0123456789abcdef"


@pytest.fixture
def token(settings: Any) -> str:
    settings.EVALSERVER_METRICS_TOKEN = TOKEN
    return TOKEN


def scrape(client: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert answer.status_code == 200, answer.content
    assert answer["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(answer.content.decode())
            for sample in family.samples}


@pytest.mark.django_db
def test_metrics_are_off_without_a_token_and_need_it_when_set(client: Client, settings: Any) -> None:
    settings.EVALSERVER_METRICS_TOKEN = ""
    off = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert (off.status_code, off.content) == (403, b"/metrics is off: set EVALSERVER_METRICS_TOKEN to turn it on\n")
    settings.EVALSERVER_METRICS_TOKEN = TOKEN
    for header in (None, "Bearer", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", f"Bearer {TOKEN}x"):
        answer = client.get("/metrics", **({"HTTP_AUTHORIZATION": header} if header else {}))
        assert answer.status_code == 401, header
        assert answer["WWW-Authenticate"] == 'Bearer realm="metrics"'
        assert b"Authorization: Bearer <EVALSERVER_METRICS_TOKEN>" in answer.content
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"bearer  {TOKEN}").status_code == 200


def test_a_short_metrics_token_stops_the_start() -> None:
    import subprocess
    import sys

    from devtools.workers import ROOT

    completed = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, capture_output=True,
                               text=True, env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "evalserver.settings",
                                               "EVALSERVER_METRICS_TOKEN": "short", "PYTHONPATH": str(ROOT)},
                               timeout=120)
    assert completed.returncode != 0
    assert "EVALSERVER_METRICS_TOKEN must be at least 32 characters" in completed.stderr


@pytest.mark.django_db
def test_metrics_count_runs_queue_age_statistics_and_scoring_seconds(world: Any, client: Client, token: str) -> None:
    from leaderboard.models import StatisticsState
    from tasks.submissions import Submission, submit_run
    from tests.conftest import run_bytes

    for seed in range(3):
        submit_run(world.task, world.alice, Submission(content=run_bytes(world.gold, seed=seed), name=f"run-{seed}"))
    now = timezone.now()
    runs = list(Run.objects.filter(task=world.task).order_by("pk"))
    assert len(runs) == 5
    # Five runs in chosen states; the others withdrawn (not counted).
    Run.objects.filter(pk__in=[run.pk for run in runs[5:]]).update(withdrawn_at=now)
    Run.objects.filter(pk=runs[0].pk).update(status=Run.QUEUED, queued_at=now - timedelta(seconds=90))
    Run.objects.filter(pk=runs[1].pk).update(status=Run.QUEUED, queued_at=now - timedelta(seconds=30))
    Run.objects.filter(pk=runs[2].pk).update(status=Run.SCORING, started_at=now, finished_at=None)
    Run.objects.filter(pk=runs[3].pk).update(status=Run.DONE, started_at=now - timedelta(seconds=3),
                                             finished_at=now - timedelta(seconds=2.6))
    Run.objects.filter(pk=runs[4].pk).update(status=Run.FAILED, started_at=now - timedelta(seconds=200),
                                             finished_at=now - timedelta(seconds=50))
    StatisticsState.objects.all().delete()
    StatisticsState.objects.create(task=world.task, phase=None, requested=3, completed=1)  # waiting
    figures = scrape(client)

    def runs_in(status: str) -> float:
        return figures[("evalserver_runs", (("kind", "stc3"), ("status", status)))]

    assert [runs_in(status) for status in ("queued", "scoring", "done", "failed")] == [2, 1, 1, 1]
    assert figures[("evalserver_runs", (("kind", "response"), ("status", "queued")))] == 0
    age = figures[("evalserver_oldest_queued_run_age_seconds", (("kind", "stc3"),))]
    assert 90 <= age < 150
    assert figures[("evalserver_oldest_queued_run_age_seconds", (("kind", "metric"),))] == 0
    assert figures[("evalserver_statistics_jobs_waiting", ())] == 1
    assert figures[("evalserver_statistics_jobs_running", ())] == 0
    # 0.4 s and 150 s: in the buckets from 0.5 and from 300 on.
    bucket = {bound: figures[("evalserver_scoring_seconds_bucket", (("kind", "stc3"), ("le", bound)))]
              for bound in ("0.25", "0.5", "120.0", "300.0", "+Inf")}
    assert bucket == {"0.25": 0, "0.5": 1, "120.0": 1, "300.0": 2, "+Inf": 2}
    assert figures[("evalserver_scoring_seconds_count", (("kind", "stc3"),))] == 2
    assert figures[("evalserver_scoring_seconds_sum", (("kind", "stc3"),))] == pytest.approx(150.4)


@pytest.mark.django_db(transaction=True)
def test_worker_heartbeats_show_who_is_alive(client: Client, token: str, settings: Any) -> None:
    settings.EVALSERVER_WORKER_HEARTBEAT_SECONDS = 0.2
    stopping = threading.Event()
    heartbeats.start("scoring", stopping)
    gone = WorkerHeartbeat.objects.create(name="statistics@elsewhere:12", role="statistics",
                                          started_at=timezone.now() - timedelta(hours=2),
                                          beat_at=timezone.now() - timedelta(seconds=61))
    try:
        first = WorkerHeartbeat.objects.get(role="scoring").beat_at
        deadline = timezone.now() + timedelta(seconds=10)
        while WorkerHeartbeat.objects.get(role="scoring").beat_at == first and timezone.now() < deadline:
            stopping.wait(0.05)
        assert WorkerHeartbeat.objects.get(role="scoring").beat_at > first  # beats from its thread, unasked
        figures = scrape(client)
    finally:
        stopping.set()
    mine = WorkerHeartbeat.objects.get(role="scoring").name
    assert figures[("evalserver_workers_alive", (("role", "scoring"),))] == 1
    assert figures[("evalserver_workers_alive", (("role", "statistics"),))] == 0
    assert figures[("evalserver_worker_heartbeat_age_seconds", (("role", "scoring"), ("worker", mine)))] < 1
    assert 61 <= figures[("evalserver_worker_heartbeat_age_seconds", (("role", "statistics"), ("worker", gone.name)))]
    with pytest.raises(ValueError, match="unknown worker role 'painter'"):
        heartbeats.start("painter")


@pytest.mark.django_db
def test_healthz_names_every_check_and_passes_when_all_do(client: Client) -> None:
    answer = client.get("/healthz")
    assert answer.status_code == 200
    # The test settings score in the request's process and have no broker.
    assert answer.json() == {"status": "ok", "database": "ok", "broker": "not used", "storage": "ok",
                             "workers": "not used"}
    assert client.get("/healthz", {"check": "database,storage"}).json() == {"status": "ok", "database": "ok",
                                                                           "storage": "ok"}
    unknown = client.get("/healthz", {"check": "database,disk"})
    assert unknown.status_code == 400
    assert unknown.json() == {"errors": ["unknown check 'disk'; the checks are database, broker, storage, workers"]}


@pytest.mark.django_db
def test_healthz_fails_with_503_naming_missing_workers(client: Client, settings: Any) -> None:
    settings.EVALSERVER_SCORING_MODE = "worker"
    settings.EVALSERVER_STATISTICS_MODE = "worker"
    settings.EVALSERVER_WORKER_HEARTBEAT_SECONDS = 10.0
    WorkerHeartbeat.objects.create(name="scoring@here:1", role="scoring", started_at=timezone.now(),
                                   beat_at=timezone.now())
    WorkerHeartbeat.objects.create(name="statistics@here:2", role="statistics", started_at=timezone.now(),
                                   beat_at=timezone.now() - timedelta(seconds=31))
    answer = client.get("/healthz")
    assert answer.status_code == 503
    assert answer.json() == {"status": "error", "failed": ["workers"], "database": "ok", "broker": "not used",
                             "storage": "ok",
                             "workers": "no statistics worker has sent a heartbeat in the last 30 s"}
    # A web process's own health does not depend on the workers.
    assert client.get("/healthz", {"check": "database,broker,storage"}).status_code == 200
    WorkerHeartbeat.objects.filter(role="statistics").update(beat_at=timezone.now())
    assert client.get("/healthz").json()["workers"] == "ok"


@pytest.mark.django_db
def test_healthz_names_a_storage_and_a_broker_that_fail(client: Client, settings: Any, tmp_path: Any) -> None:
    from evalserver.celery import app

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the store's folder should be")
    settings.MEDIA_ROOT = blocked
    answer = client.get("/healthz")
    assert answer.status_code == 503
    assert answer.json()["failed"] == ["storage"] and answer.json()["storage"] == "failed (FileExistsError)"

    settings.MEDIA_ROOT = tmp_path / "store"
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.EVALSERVER_SCORING_MODE = "inline"
    settings.EVALSERVER_STATISTICS_MODE = "sync"
    original = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:9/0"  # the discard port: nothing listens
    try:
        answer = client.get("/healthz")
    finally:
        app.conf.broker_url = original
    assert answer.status_code == 503
    body = answer.json()
    assert body["failed"] == ["broker"] and body["broker"].startswith("failed (") and "127.0.0.1" not in str(body)
