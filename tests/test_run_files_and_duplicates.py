"""A team's run file back, its links, and identical files submitted twice (issue 30, items 1 and 7).

The identity of two files is checked here with hashlib on the bytes sent, not with the server's
stored digests; quota figures are counted by hand from the runs created."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from tasks.models import Phase, Run
from tasks.submissions import quota_numbers
from tests.conftest import World, committing, run_bytes
from tests.test_privacy_and_rules import add_phase, api_upload, signed_in


@pytest.mark.django_db
def test_a_team_downloads_its_run_file_byte_for_byte_with_safe_headers(world: World) -> None:
    content = run_bytes(world.gold, seed=4)
    run_id = api_upload(world, content, name="mine").json()["id"]
    response = signed_in(world.alice).get(f"/runs/{run_id}/file")
    assert response.status_code == 200
    assert hashlib.sha256(response.content).hexdigest() == hashlib.sha256(content).hexdigest()
    assert response["Content-Disposition"] == f'attachment; filename="demo-task-run{run_id}-mine.json"'
    assert response["Content-Type"] == "application/octet-stream"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]
    # The organisers read it too, and the access log says who did; the team's own download is not logged.
    from tasks.models import AccessLog

    assert not AccessLog.objects.exists()
    assert signed_in(world.organiser).get(f"/runs/{run_id}/file").content == content
    assert AccessLog.objects.get().what.startswith(f"run file of run #{run_id}")
    assert signed_in(world.bob).get(f"/runs/{run_id}/file").status_code == 404
    assert Client().get(f"/runs/{run_id}/file").status_code == 302  # to sign in, as for any id


@pytest.mark.django_db
@pytest.mark.parametrize(("paper", "message"), [
    ("javascript:alert(1)", "Enter a web address that starts with http:// or https://"),
    ("ftp://example.org/paper.pdf", "Enter a web address that starts with http:// or https://"),
    ("example.org/paper", "Start the address with https:// or http://: did you mean https://example.org/paper?"),
    ("not an address", "Enter a web address that starts with http:// or https://"),
    ("https://" + "a" * 495 + ".org", "Ensure this value has at most 500 characters (it has 507)."),
])
def test_a_link_that_is_no_web_address_is_refused_saying_why(world: World, paper: str, message: str) -> None:
    run_id = api_upload(world, run_bytes(world.gold)).json()["id"]
    response = signed_in(world.alice).post(f"/runs/{run_id}/links/", {"paper_url": paper,
                                                                     "code_url": "https://example.org/c"})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert Run.objects.filter(pk=run_id, paper_url="", code_url="").exists()  # nothing half-saved


@pytest.mark.django_db
def test_links_are_saved_shown_and_cleared(world: World) -> None:
    run_id = api_upload(world, run_bytes(world.gold)).json()["id"]
    alice = signed_in(world.alice)
    assert alice.post(f"/runs/{run_id}/links/", {"paper_url": " https://example.org/p ",
                                                 "code_url": "http://example.org/c"}).status_code == 302
    assert Run.objects.filter(pk=run_id, paper_url="https://example.org/p", code_url="http://example.org/c").exists()
    page = alice.get(f"/runs/{run_id}/").content.decode()
    assert 'href="https://example.org/p" rel="nofollow noopener noreferrer"' in page
    assert alice.post(f"/runs/{run_id}/links/", {"paper_url": "", "code_url": ""}).status_code == 302
    assert Run.objects.filter(pk=run_id, paper_url="", code_url="").exists()
    # The links form needs the CSRF token like every form.
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(world.alice)
    assert strict.post(f"/runs/{run_id}/links/", {"paper_url": "https://evil.example/"}).status_code == 403


@pytest.mark.django_db
def test_an_identical_file_is_named_at_upload_within_the_team_only(world: World) -> None:
    content = run_bytes(world.gold, seed=9)
    first = api_upload(world, content, name="first").json()
    assert first["identical_to"] == [] and first["identical_note"] == ""
    # Another team sends the very same bytes: it is told nothing about Aurora's run.
    rival = api_upload(world, content, token=world.bob_token, name="same-bytes").json()
    assert rival["identical_to"] == [] and rival["identical_note"] == ""
    second = api_upload(world, content, name="second").json()
    submitted = Run.objects.get(pk=first["id"]).created_at
    assert second["identical_to"] == [{"id": first["id"], "name": "first", "phase": None,
                                       "submitted_at": submitted.isoformat(), "withdrawn": False}]
    assert second["identical_note"] == (f"This file is identical to run #{first['id']} 'first' submitted at "
                                        f"{submitted:%Y-%m-%d %H:%M:%S} UTC.")
    # The web form says it after the upload, and the run page of either copy lists the other.
    alice = signed_in(world.alice)
    with committing():
        response = alice.post(f"/tasks/{world.task.slug}/upload/", {
            "file": SimpleUploadedFile("again.json", content), "name": "third"}, follow=True)
    page = response.content.decode()
    assert f"This file is identical to run #{first['id']} &#x27;first&#x27; submitted at" in page
    assert f"run #{second['id']} &#x27;second&#x27;" in page
    first_page = alice.get(f"/runs/{first['id']}/").content.decode()
    assert "The file of this run is identical (the same SHA-256) to 2 other runs of the same team" in first_page
    assert f"run #{rival['id']}" not in first_page


@pytest.mark.django_db
def test_withdrawing_the_later_copy_gives_its_quota_slot_back_and_only_that(world: World) -> None:
    """The rule (README, tasks.submissions.counted_runs): a withdrawn run keeps counting, except a
    withdrawn copy of an earlier run of the same phase; failed runs never count."""
    phase = add_phase(world, "dev", Phase.DEVELOPMENT, start=timedelta(hours=-1), end=timedelta(days=3),
                      daily_quota=5, total_quota=5)
    content = run_bytes(world.gold, seed=2)
    ids = [api_upload(world, content, name=f"copy-{i}").json()["id"] for i in range(3)]
    other = api_upload(world, run_bytes(world.gold, seed=3), name="other").json()["id"]
    team = world.alice.teams.get()
    assert quota_numbers(team, phase)["total_used"] == 4
    alice = signed_in(world.alice)
    confirm = alice.post(f"/runs/{ids[2]}/visibility/", {"action": "withdraw"}).content.decode()
    assert f"identical to the earlier run #{ids[0]} &#x27;copy-0&#x27; of this phase, so withdrawing it gives " \
           "its quota slot back" in confirm
    alice.post(f"/runs/{ids[2]}/visibility/", {"action": "withdraw", "confirm": "yes"})
    assert quota_numbers(team, phase)["total_used"] == 3
    # The original withdrawn: it was the first of its file, so it keeps counting.
    confirm = alice.post(f"/runs/{ids[0]}/visibility/", {"action": "withdraw"}).content.decode()
    assert "It keeps counting against your quota." in confirm
    alice.post(f"/runs/{ids[0]}/visibility/", {"action": "withdraw", "confirm": "yes"})
    assert quota_numbers(team, phase)["total_used"] == 3
    Run.objects.filter(pk=other).update(withdrawn_at=timezone.now())
    assert quota_numbers(team, phase)["total_used"] == 3  # a withdrawn run of its own file counts
    # The freed slot takes a new upload up to the total of 5, then the quota refuses.
    assert api_upload(world, run_bytes(world.gold, seed=5)).status_code == 202
    assert api_upload(world, run_bytes(world.gold, seed=6)).status_code == 202
    refused = api_upload(world, run_bytes(world.gold, seed=7))
    assert refused.status_code == 429 and "has used all 5 runs of the dev phase" in refused.json()["errors"][0]


@pytest.mark.django_db
def test_an_identical_file_in_another_phase_is_named_but_keeps_its_slot(world: World, settings: Any) -> None:
    dev = add_phase(world, "dev", Phase.DEVELOPMENT, start=timedelta(days=-3), end=timedelta(days=-2))
    content = run_bytes(world.gold, seed=2)
    with committing():
        from tasks import submissions

        early = submissions.submit_run(world.task, world.alice, submissions.Submission(content=content, name="d"),
                                       dev)
    add_phase(world, "test", Phase.TEST, start=timedelta(hours=-1), end=timedelta(days=1))
    answer = api_upload(world, content, name="t", description="m").json()
    assert answer["identical_to"][0]["id"] == early.pk and answer["identical_to"][0]["phase"] == "dev"
    assert answer["identical_note"].endswith("in another phase: here it is scored on this phase's data.")
