"""Publication can never turn the test set into an oracle: every organiser action on a test
phase's results x every phase state (before, open, closed, published) x who can then see what.

The world: a test phase with a live subset of 10 of the 30 dialogues, one run of Aurora's in it.
After each action the walk asks, as the public, Aurora (the run's team), Borealis (another team)
and the organiser: which scope the board shows, how many dialogues the run's scores cover, and
whether its per-dialogue scores can be downloaded; then Borealis tries to submit a run and, if
the phase still accepts one, reads what the new run's scores cover.
"""

from __future__ import annotations

import html
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tasks import changes, organising
from tasks.models import AccessLog, Phase, Run
from tests.conftest import World, committing, make_world, run_bytes

STATES = ("before", "open", "closed", "published")
ACTIONS = ("publish", "close-and-publish", "unpublish", "flag ticked directly")
ROLES = ("anonymous", "alice", "bob", "organiser")


def windows(state: str) -> tuple[timedelta, timedelta]:
    return {"before": (timedelta(hours=1), timedelta(hours=2)), "open": (timedelta(hours=-1), timedelta(hours=1)),
            "closed": (timedelta(hours=-2), timedelta(minutes=-1)),
            "published": (timedelta(hours=-2), timedelta(minutes=-1))}[state]


def client_for(world: World, role: str) -> Client:
    client = Client(raise_request_exception=False)
    user = {"alice": world.alice, "bob": world.bob, "organiser": world.organiser}.get(role)
    if user is not None:
        client.force_login(user)
    return client


def build(state: str) -> tuple[World, Phase, Run]:
    world = make_world(n_dialogues=30, seed=9)
    now = timezone.now()
    phase = Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                                 starts_at=now - timedelta(hours=1), ends_at=now + timedelta(hours=1),
                                 live_subset_size=10, live_subset_seed=4)
    run = upload(world, world.alice_token, "aurora-1")
    assert run.status == Run.DONE
    start, end = windows(state)
    phase.starts_at, phase.ends_at = now + start, now + end
    phase.results_published = state == "published"
    with committing():
        phase.save()
    return world, phase, run


def upload(world: World, token: str, name: str) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    with committing():
        response = client.post(f"/api/v1/tasks/{world.task.slug}/runs/",
                               {"file": SimpleUploadedFile("run.json", run_bytes(world.gold, 0.25, 3)),
                                "name": name}, format="multipart")
    if response.status_code != 202:  # accepted, scored by the time the commit's callbacks ran
        return response
    return Run.objects.get(pk=response.json()["id"])


def act(world: World, phase: Phase, action: str) -> str:
    """Do the action as the organiser does it; the page's message."""
    if action == "flag ticked directly":
        # The organiser's slip outside the dashboard (a bulk edit, a script, a phase whose end was
        # moved later): the flag is set with no check at all.
        with committing():
            Phase.objects.filter(pk=phase.pk).update(results_published=True)
            changes.board_changed(world.task)
        return ""
    with committing():
        response = client_for(world, "organiser").post(
            f"/organiser/{world.task.slug}/", {"action": action, "phase": "test", "confirm": "yes"}, follow=True)
    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    return page[page.index('<ul class="messages">'):page.index("</ul>", page.index('<ul class="messages">'))] \
        if '<ul class="messages">' in page else ""


def expected_after(state: str, action: str) -> tuple[str, bool, str]:
    """(state by the clock afterwards, publication ticked afterwards, a phrase of the message)."""
    if action == "unpublish":
        return ("closed" if state == "published" else state), False, (
            "are now hidden again" if state == "published" else "are not published; nothing changed")
    if action == "flag ticked directly":
        return ("closed" if state == "published" else state), True, ""
    if state == "before":
        return "before", False, "has not started yet"
    if state == "open":
        if action == "publish":
            return "open", False, "cannot be published yet: the test phase is still open for submissions"
        return "closed", True, "Submissions to test are closed. The results of the test phase are now public"
    if state == "closed":
        return "closed", True, "The results of the test phase are now public"
    return "closed", True, "are already published; nothing changed"


@pytest.mark.django_db
@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("state", STATES)
def test_every_action_in_every_state_and_who_then_sees_what(state: str, action: str) -> None:
    world, phase, run = build(state)
    message = act(world, phase, action)
    clock, ticked, phrase = expected_after(state, action)
    assert phrase in message, (phrase, message)
    phase.refresh_from_db()
    assert phase.results_published is ticked
    now = timezone.now()
    assert {"before": phase.starts_at > now, "open": phase.is_open(now),
            "closed": phase.ends_at <= now}[clock] is True
    # Shown only once ticked and closed: never while a run can still arrive.
    public = ticked and clock == "closed"
    for role in ROLES:
        client = client_for(world, role)
        board = client.get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=test").json()
        assert board["scope"] == ("full" if public else "live"), role
        covered = {row["id"]: row["scores"]["n_items"] for row in board["runs"] if not row["is_baseline"]}
        assert covered == {run.pk: 30 if public else 10}, role
        api = client.get(f"/api/v1/runs/{run.pk}/")
        items = client.get(f"/runs/{run.pk}/items.csv")
        # Others' per-dialogue scores: a run's public page (issue 30) gives them to everyone
        # once its scores are public, and only then; the API's run answer stays its team's.
        if role == "anonymous":
            assert api.status_code in (401, 403) and items.status_code == (200 if public else 404), (state, action)
        elif role == "bob":
            assert api.status_code == 404 and items.status_code == (200 if public else 404), (state, action)
        elif role == "organiser":
            assert api.json()["scores"]["n_items"] == 30 and items.status_code == 200
        else:
            assert api.json()["scores"]["n_items"] == (30 if public else 10), (state, action)
            assert items.status_code == (200 if public else 404), (state, action)
    # A run arriving now: accepted only while the phase is open, and never given whole-set scores.
    late = upload(world, world.bob_token, "borealis-late")
    if clock != "open":
        assert late.status_code == 403
        assert "no phase of demo-task is open for submissions now" in late.json()["errors"][0]
        return
    assert isinstance(late, Run) and late.status == Run.DONE
    bob = client_for(world, "bob")
    assert bob.get(f"/api/v1/runs/{late.pk}/").json()["scores"]["n_items"] == 10
    assert bob.get(f"/runs/{late.pk}/items.csv").status_code == 404
    assert "Per-dialogue scores" not in bob.get(f"/runs/{late.pk}/").content.decode()


@pytest.mark.django_db
def test_a_later_phase_on_the_same_test_gold_hides_a_publication_while_it_takes_runs(world: World) -> None:
    """Published, closed, then a post-evaluation phase opens on the same gold: a run submitted to
    it would get whole-set scores from the old publication, so that publication waits again."""
    now = timezone.now()
    test = Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                                starts_at=now - timedelta(hours=3), ends_at=now + timedelta(hours=1),
                                live_subset_size=10)
    first = upload(world, world.alice_token, "aurora-1")
    with committing():
        assert organising.set_publication(test, True, close_first=True) == [test]
    alice = client_for(world, "alice")
    assert alice.get(f"/api/v1/runs/{first.pk}/").json()["scores"]["n_items"] == 30
    with committing():
        post = Phase.objects.create(task=world.task, name="post", kind=Phase.TEST, gold_version=world.gold_version,
                                    starts_at=timezone.now(), ends_at=timezone.now() + timedelta(days=1),
                                    live_subset_size=10)
    late = upload(world, world.bob_token, "borealis-post")
    assert late.phase == post
    bob = client_for(world, "bob")
    assert bob.get(f"/api/v1/runs/{late.pk}/").json()["scores"]["n_items"] == 10
    assert bob.get(f"/runs/{late.pk}/items.csv").status_code == 404
    assert alice.get(f"/runs/{first.pk}/items.csv").status_code == 404
    assert Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=test").json()["scope"] == "live"
    overview = html.unescape(Client().get(f"/tasks/{world.task.slug}/overview/").content.decode())
    assert f"Results published once submissions on this test set close (post ends at {post.ends_at:%Y-%m-%d %H:%M} " \
           "UTC)." in overview


@pytest.mark.django_db
def test_the_admin_refuses_to_tick_publication_on_an_open_phase(world: World) -> None:
    now = timezone.now()
    phase = Phase(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                  starts_at=now - timedelta(hours=1), ends_at=now + timedelta(hours=1), results_published=True)
    with pytest.raises(ValidationError) as refused:
        phase.full_clean()
    assert refused.value.message_dict["results_published"] == [
        f"The results of the test phase cannot be published yet: the test phase is still open for submissions "
        f"until {phase.ends_at:%Y-%m-%d %H:%M} UTC. Every run submitted after publication would get its scores on "
        "the whole test set and per item, which would turn the test set into an answer key. Close submissions "
        "first (or wait until the phase ends), then publish."]
    phase.ends_at = now - timedelta(seconds=1)
    phase.full_clean()  # closed: fine


@pytest.mark.django_db
def test_the_dashboard_and_overview_say_the_phase_is_open(world: World) -> None:
    now = timezone.now().replace(microsecond=0)
    with committing():
        Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                             starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=14))
    dashboard = html.unescape(client_for(world, "organiser").get(f"/organiser/{world.task.slug}/").content.decode())
    assert "open for submissions" in dashboard
    assert "not published; test is open for submissions, so publishing first closes it." in dashboard
    overview = html.unescape(Client().get(f"/tasks/{world.task.slug}/overview/").content.decode())
    assert "Results published" not in overview
    assert (f"Open for submissions until {now + timedelta(days=14):%Y-%m-%d %H:%M} UTC; the results on the whole "
            "test set are published after it ends.") in overview
    assert not AccessLog.objects.exists()
