"""Irreversible one-click actions (issue 23, item 6): withdrawing a run is asked first and can be
undone by its team until its phase ends (tested at the second); replacing a token is asked first;
the demo's logins file never prints a token that no longer works."""

from __future__ import annotations

import html
import io
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from tasks import submissions
from tasks.models import Phase, Run
from tests.conftest import World, committing, run_bytes


def signed_in(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def submitted(world: World, user: Any, name: str, phase: Phase, priority: int | None = None) -> Run:
    with committing():
        return submissions.submit_run(world.task, user, submissions.Submission(
            content=run_bytes(world.gold, 0.3, 1), name=name, priority=priority), phase)


def text(response: Any) -> str:
    import re

    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.unescape(response.content.decode())))


@pytest.fixture
def phase(world: World) -> Phase:
    now = timezone.now()
    return Phase.objects.create(task=world.task, name="dev", kind=Phase.DEVELOPMENT, gold_version=world.gold_version,
                                starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=2))


@pytest.mark.django_db
def test_withdraw_is_asked_first_and_undone_by_the_team(world: World, phase: Phase) -> None:
    run = submitted(world, world.alice, "aurora-1", phase, priority=1)
    alice = signed_in(world.alice)
    url = f"/runs/{run.pk}/visibility/"
    asked = alice.post(url, {"action": "withdraw"})
    assert asked.status_code == 200
    page = text(asked)
    assert "Withdraw the run aurora-1?" in page
    assert (f"Your team can undo the withdrawal from the run's page until the dev phase ends, at "
            f"{phase.ends_at:%Y-%m-%d %H:%M} UTC; after that it is final.") in page
    run.refresh_from_db()
    assert not run.is_withdrawn
    with committing():
        alice.post(url, {"action": "withdraw", "confirm": "yes"})
    run.refresh_from_db()
    assert run.is_withdrawn
    board = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=dev").json()
    assert run.pk not in [row["id"] for row in board["runs"]]
    assert 'id="restore-form"' in alice.get(f"/runs/{run.pk}/").content.decode()
    # Another team's member cannot undo it; the team can.
    assert signed_in(world.bob).post(url, {"action": "restore"}).status_code == 404
    with committing():
        undone = alice.post(url, {"action": "restore"}, follow=True)
    assert "The withdrawal is undone: the run is back on the public leaderboard." in text(undone)
    run.refresh_from_db()
    assert not run.is_withdrawn
    board = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=dev").json()
    assert run.pk in [row["id"] for row in board["runs"]]


@pytest.mark.django_db
def test_undo_refused_when_the_number_was_given_to_another_run(world: World, phase: Phase) -> None:
    first = submitted(world, world.alice, "aurora-1", phase, priority=1)
    alice = signed_in(world.alice)
    alice.post(f"/runs/{first.pk}/visibility/", {"action": "withdraw", "confirm": "yes"})
    second = submitted(world, world.alice, "aurora-2", phase, priority=1)
    refused = alice.post(f"/runs/{first.pk}/visibility/", {"action": "restore"}, follow=True)
    assert (f"The withdrawal was not undone: priority: your team's run 'aurora-2' (#{second.pk}) already has "
            "priority 1 in the dev phase; choose another number, or withdraw that run first") in text(refused)
    first.refresh_from_db()
    assert first.is_withdrawn


@pytest.mark.django_db
@pytest.mark.parametrize("offset, undone", [(-1, True), (1, False)])
def test_undo_until_the_second_the_phase_ends(world: World, phase: Phase, offset: int, undone: bool) -> None:
    """One second before the end the team can undo; one second after, the withdrawal is final."""
    run = submitted(world, world.alice, "aurora-1", phase)
    alice = signed_in(world.alice)
    alice.post(f"/runs/{run.pk}/visibility/", {"action": "withdraw", "confirm": "yes"})
    ends = timezone.now() - timedelta(seconds=offset)
    Phase.objects.filter(pk=phase.pk).update(ends_at=ends)
    page = alice.get(f"/runs/{run.pk}/").content.decode()
    assert ('id="restore-form"' in page) is undone and ('id="withdrawn-final"' in page) is not undone
    answer = text(alice.post(f"/runs/{run.pk}/visibility/", {"action": "restore"}, follow=True))
    run.refresh_from_db()
    assert run.is_withdrawn is not undone
    if not undone:
        assert (f"The dev phase ended at {ends:%Y-%m-%d %H:%M} UTC: its runs are final, and the withdrawal can no "
                "longer be undone.") in answer


@pytest.mark.django_db
def test_the_demo_logins_never_print_a_dead_token(tmp_path: Path, settings: Any) -> None:
    from tasks.tokens import issue_token

    settings.VAR_DIR = tmp_path
    call_command("demo", "--dialogues", "20", "--password", "demo-pass-123", stdout=io.StringIO())
    logins = tmp_path / "demo-logins.txt"
    token = next(line.split(": ", 1)[1] for line in logins.read_text().splitlines()
                 if line.startswith("alice's API token: "))
    again = io.StringIO()
    call_command("demo", stdout=again)
    assert f"alice's API token: {token}\n" in again.getvalue()  # still alive: printed as it is
    from django.contrib.auth import get_user_model

    issue_token(get_user_model().objects.get(username="alice"))  # alice regenerated it on My team
    again = io.StringIO()
    call_command("demo", stdout=again)
    assert token not in again.getvalue() and token not in logins.read_text()
    assert ("alice's API token: (none: the token this file held was replaced or revoked; sign in as alice and "
            "create one on My team)\n") in again.getvalue()
