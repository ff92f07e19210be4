"""Every upload control names the phase it uploads to (issue 23, item 4): the task page's box on
any board tab, the upload page; no quota is shown that the team cannot use."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tasks.models import Phase
from tests.conftest import World


def text(response) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.unescape(response.content.decode())))


def box(response) -> str:
    page = response.content.decode()
    if 'id="upload-box"' not in page:
        return ""
    start = page.index(">", page.index('id="upload-box"')) + 1
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.unescape(page[start:page.index("</section>", start)])))


@pytest.fixture
def phases(world: World) -> dict[str, Phase]:
    now = timezone.now()
    return {
        "development": Phase.objects.create(task=world.task, name="development", kind=Phase.DEVELOPMENT,
                                            gold_version=world.gold_version, starts_at=now - timedelta(days=9),
                                            ends_at=now - timedelta(days=1), daily_quota=20, total_quota=200),
        "test": Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                                     starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=5),
                                     daily_quota=5, total_quota=50),
    }


@pytest.mark.django_db
def test_the_box_on_a_finished_phases_tab_names_the_phase_runs_go_to(world: World, phases: dict) -> None:
    alice = Client()
    alice.force_login(world.alice)
    resets = f"{(timezone.now() + timedelta(days=1)):%Y-%m-%d} 00:00"
    on_dev = box(alice.get(f"/tasks/{world.task.slug}/?phase=development"))
    assert on_dev == (f" Team Aurora : Upload a run to test In the test phase: 5 of 5 runs left today (resets "
                      f"{resets} UTC), 50 of 50 in all. · or from a terminal with the command-line client . This "
                      "board is the development phase, which has ended: runs go to test. ")
    on_test = box(alice.get(f"/tasks/{world.task.slug}/?phase=test"))
    assert "Upload a run to test" in on_test and "This board is" not in on_test
    page = text(alice.get(f"/tasks/{world.task.slug}/upload/"))
    assert "Upload a run to Demo task: test phase" in page
    assert ("Runs uploaded now go to the test phase (open until "
            f"{phases['test'].ends_at:%Y-%m-%d %H:%M} UTC) and are scored against its gold.") in page
    assert "Upload to test" in page
    # Nobody outside a team sees the box; a visitor neither.
    assert box(Client().get(f"/tasks/{world.task.slug}/")) == ""


@pytest.mark.django_db
def test_no_button_and_no_quota_when_nothing_can_be_uploaded(world: World, phases: dict) -> None:
    alice = Client()
    alice.force_login(world.alice)
    Phase.objects.filter(name="test").update(ends_at=timezone.now() - timedelta(seconds=1))
    closed = box(alice.get(f"/tasks/{world.task.slug}/?phase=test"))
    assert closed == (" Team Aurora : No upload now: no phase of demo-task is open for submissions now; the "
                      "submission period is over. ")
    Phase.objects.filter(name="test").update(ends_at=timezone.now() + timedelta(days=1))
    world.task.terms = "Be fair."
    world.task.save()
    terms = box(alice.get(f"/tasks/{world.task.slug}/?phase=development"))
    assert terms == " Team Aurora : No upload now: accept the terms of demo-task first, on its overview page. "
    assert "runs left" not in text(alice.get(f"/tasks/{world.task.slug}/upload/"))


@pytest.mark.django_db
def test_someone_without_a_team_is_shown_the_way_to_join_one_instead_of_the_form(world: World) -> None:
    """Issue 37, item 9: "Ask an organiser" above a full form, though Join a team exists."""
    from django.contrib.auth import get_user_model

    loner = Client()
    loner.force_login(get_user_model().objects.create_user("lone", password="lone-pass-1"))
    response = loner.get(f"/tasks/{world.task.slug}/upload/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="upload-form"' not in page and 'name="file"' not in page
    assert '<a href="/team/join/">Join a team</a> with the join code one of its members sees on their team page' in page
    from django.core.files.uploadedfile import SimpleUploadedFile

    refused = loner.post(f"/tasks/{world.task.slug}/upload/", {"file": SimpleUploadedFile("run.json", b"[]")})
    assert refused.status_code == 403
    assert '<a href="/team/join/">Join a team</a>' in refused.content.decode()
    assert 'id="upload-form"' not in refused.content.decode()
    # A member sees the form.
    alice = Client()
    alice.force_login(world.alice)
    assert 'id="upload-form"' in alice.get(f"/tasks/{world.task.slug}/upload/").content.decode()
