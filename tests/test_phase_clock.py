"""Phases that flip at their deadline on their own (issue 23, item 2): submissions close at the
second (a run one second before the end is accepted, one second after is refused), the end is
recorded once with its final statistics, and a publication scheduled for a time is shown from that
second and recorded by the clock; the dashboard says what happens when, the overview counts down."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from leaderboard.models import TaskStatistics
from tasks import phaseclock
from tasks.models import AccessLog, Phase, Run
from tests.conftest import World, committing, run_bytes


def upload(world: World) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    with committing():
        return client.post(f"/api/v1/tasks/{world.task.slug}/runs/",
                           {"file": SimpleUploadedFile("run.json", run_bytes(world.gold, 0.3, 2))}, format="multipart")


def text(response: Any) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.unescape(response.content.decode())))


def clock_log(world: World) -> list[str]:
    return list(AccessLog.objects.filter(task=world.task, user=None).order_by("pk").values_list("what", flat=True))


@pytest.fixture
def test_phase(world: World) -> Phase:
    now = timezone.now()
    return Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                                starts_at=now - timedelta(hours=1), ends_at=now + timedelta(hours=1),
                                live_subset_size=10)


@pytest.mark.django_db
@pytest.mark.parametrize("offset, accepted", [(1, True), (-1, False)])
def test_a_run_one_second_before_the_end_is_accepted_and_one_after_refused(
        world: World, test_phase: Phase, offset: int, accepted: bool) -> None:
    Phase.objects.filter(pk=test_phase.pk).update(ends_at=timezone.now() + timedelta(seconds=offset))
    response = upload(world)
    if accepted:
        assert response.status_code == 202 and response.json()["quota"]["phase"] == "test"
        assert Run.objects.get(pk=response.json()["id"]).phase == test_phase
    else:
        assert response.status_code == 403
        assert response.json()["errors"] == ["no phase of demo-task is open for submissions now; the submission "
                                             "period is over"]
        assert not Run.objects.filter(is_baseline=False).exists()


@pytest.mark.django_db
def test_the_end_is_recorded_once_with_its_final_statistics(world: World, test_phase: Phase, settings: Any) -> None:
    settings.EVALSERVER_STATISTICS_MODE = "sync"
    assert upload(world).status_code == 202
    assert phaseclock.advance() == []  # the first look records the state as it is, telling nothing
    test_phase.refresh_from_db()
    assert test_phase.clock_state == "open"
    end = timezone.now() + timedelta(seconds=30)
    Phase.objects.filter(pk=test_phase.pk).update(ends_at=end)
    TaskStatistics.objects.all().delete()
    assert phaseclock.advance(end - timedelta(seconds=1)) == []
    with committing():
        done = phaseclock.advance(end + timedelta(seconds=1))
    expected = (f"the test phase ended at {end:%Y-%m-%d %H:%M:%S} UTC: 1 run submitted, submissions closed; its "
                "final statistics are computed")
    assert done == [expected] and clock_log(world) == [expected]
    assert TaskStatistics.objects.filter(task=world.task, phase=test_phase).exists()
    with committing():
        assert phaseclock.advance(end + timedelta(seconds=2)) == []  # recorded once
    assert clock_log(world) == [expected]


@pytest.mark.django_db
def test_a_scheduled_publication_shows_from_its_second_and_is_recorded(world: World, test_phase: Phase) -> None:
    run_id = upload(world).json()["id"]
    alice = APIClient()
    alice.credentials(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    now = timezone.now()
    Phase.objects.filter(pk=test_phase.pk).update(ends_at=now - timedelta(minutes=1),
                                                  publish_at=now + timedelta(seconds=2))
    assert alice.get(f"/api/v1/runs/{run_id}/").json()["scores"]["n_items"] == 10  # not yet
    Phase.objects.filter(pk=test_phase.pk).update(publish_at=now - timedelta(seconds=1))
    # From its second, before any process has recorded it: the rule follows the clock.
    assert alice.get(f"/api/v1/runs/{run_id}/").json()["scores"]["n_items"] == 30
    assert Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=test").json()["scope"] == "full"
    with committing():
        done = phaseclock.advance()
    published = (f"published the results of the test phase as scheduled for "
                 f"{now - timedelta(seconds=1):%Y-%m-%d %H:%M:%S} UTC")
    assert published in done
    test_phase.refresh_from_db()
    assert test_phase.results_published


@pytest.mark.django_db
def test_a_scheduled_publication_waits_while_a_phase_takes_runs_on_its_gold(world: World, test_phase: Phase) -> None:
    now = timezone.now()
    final = Phase.objects.create(task=world.task, name="final", kind=Phase.FINAL, gold_version=world.gold_version,
                                 starts_at=now - timedelta(minutes=30), ends_at=now + timedelta(days=3),
                                 publish_at=now - timedelta(seconds=1))
    run_id = upload(world).json()["id"]
    alice = APIClient()
    alice.credentials(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    assert alice.get(f"/api/v1/runs/{run_id}/").json()["scores"]["n_items"] == 10
    with committing():
        done = phaseclock.advance()
    waits = ("the scheduled publication of the final phase waits: The results of the final phase cannot be "
             "published yet: the phase test (until "
             f"{test_phase.ends_at:%Y-%m-%d %H:%M} UTC) still accept runs on the same gold. Every run")
    assert [line for line in done if line.startswith("the scheduled")][0].startswith(waits[:120])
    with committing():
        assert phaseclock.advance() == []  # said once
    final.refresh_from_db()
    assert not final.results_published


@pytest.mark.django_db
def test_the_dashboard_schedules_with_every_problem_named(world: World, test_phase: Phase) -> None:
    organiser = Client()
    organiser.force_login(world.organiser)
    url = f"/organiser/{world.task.slug}/"
    dev = Phase.objects.create(task=world.task, name="dev", kind=Phase.DEVELOPMENT, gold_version=world.gold_version,
                               starts_at=test_phase.starts_at - timedelta(days=3),
                               ends_at=test_phase.starts_at - timedelta(days=1))
    before_end = test_phase.ends_at - timedelta(minutes=5)
    for data, message in (
            ({"action": "schedule", "phase": "test", "publish_at": "soon"},
             "Publication time: 'soon' is not a date and time; write it as YYYY-MM-DD HH:MM (UTC)."),
            ({"action": "schedule", "phase": "test", "publish_at": "2026-02-30T10:00"},
             "Publication time: '2026-02-30T10:00' is not a date and time"),
            ({"action": "schedule", "phase": "test", "publish_at": ""}, "Publication time: choose a date and time."),
            ({"action": "schedule", "phase": "test", "publish_at": f"{before_end:%Y-%m-%dT%H:%M}"},
             f"Publication time: the results can be published at {test_phase.ends_at:%Y-%m-%d %H:%M} UTC (the "
             "phase's end) at the earliest"),
            ({"action": "schedule", "phase": dev.name, "publish_at": "2031-01-01T00:00"},
             "Publication time: a development phase has no results to publish"),
            ({"action": "schedule", "phase": "nope", "publish_at": "2031-01-01T00:00"}, "No phase named 'nope'")):
        answer = text(organiser.post(url, data, follow=True))
        assert message in answer, (message, answer[:400])
        assert not Phase.objects.exclude(publish_at=None).exists()
    when = (test_phase.ends_at + timedelta(days=1)).replace(second=0, microsecond=0)
    answer = text(organiser.post(url, {"action": "schedule", "phase": "test", "publish_at": f"{when:%Y-%m-%dT%H:%M}"},
                                 follow=True))
    assert (f"The results of the test phase will be published on their own at {when:%Y-%m-%d %H:%M} UTC (once no "
            "phase takes runs on its gold).") in answer
    test_phase.refresh_from_db()
    assert test_phase.publish_at == when
    timeline = answer[answer.index("What happens when"):]
    assert f"{test_phase.ends_at:%Y-%m-%d %H:%M} (in " in timeline
    assert "test submissions close; the final statistics are computed." in timeline
    assert f"{when:%Y-%m-%d %H:%M} (in 1 day" in timeline and "test the results are published on their own." in timeline
    overview = text(Client().get(f"/tasks/{world.task.slug}/overview/"))
    assert "Submissions close in 59 minutes" in overview or "Submissions close in 1 hour" in overview
    assert f"Results published on their own at {when:%Y-%m-%d %H:%M} UTC (once submissions on this test set close)." \
        in overview
    organiser.post(url, {"action": "unschedule", "phase": "test"})
    test_phase.refresh_from_db()
    assert test_phase.publish_at is None
    assert list(AccessLog.objects.filter(user=world.organiser).order_by("pk").values_list("what", flat=True)) == [
        f"scheduled the publication of the test phase for {when:%Y-%m-%d %H:%M} UTC",
        "cancelled the scheduled publication of the test phase"]


@pytest.mark.django_db
def test_the_clock_wakes_at_the_next_boundary(world: World, test_phase: Phase) -> None:
    now = timezone.now()
    assert phaseclock.next_boundary(now) == test_phase.ends_at
    Phase.objects.filter(pk=test_phase.pk).update(publish_at=test_phase.ends_at + timedelta(hours=1))
    assert phaseclock.next_boundary(test_phase.ends_at) == test_phase.ends_at + timedelta(hours=1)
    assert phaseclock.next_boundary(test_phase.ends_at + timedelta(hours=2)) is None
