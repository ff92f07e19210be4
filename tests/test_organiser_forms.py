"""The organiser's essentials on the dashboard (issue 23, item 5): loading a gold version and
creating or editing a phase, scoped to the task, checked as the commands check them (every
problem named, nothing stored on failure); a phase moved to a new gold while open shows the
change to its participants and re-scores its runs."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from fixtures.synthetic import generate_gold
from tasks import submissions
from tasks.models import AccessLog, GoldVersion, Phase, Run
from tasks.organising import create_task, load_gold_version
from tests.conftest import World, committing, run_bytes


def signed_in(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def text(response: Any) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.unescape(response.content.decode())))


def errors(response: Any) -> list[str]:
    page = html.unescape(response.content.decode())
    block = page[page.index('id="errors"'):page.index("</div>", page.index('id="errors"'))]
    return re.findall(r"<li><code>(.*?)</code></li>", block, re.S)


@pytest.mark.django_db
def test_only_the_tasks_organisers_reach_the_forms(world: World) -> None:
    other = create_task("other-task", "stc3", "Other")
    for path in ("gold/", "phase/"):
        assert signed_in(world.organiser).get(f"/organiser/{world.task.slug}/{path}").status_code == 200
        assert signed_in(world.organiser).get(f"/organiser/{other.slug}/{path}").status_code == 404
        assert signed_in(world.alice).get(f"/organiser/{world.task.slug}/{path}").status_code == 404
        assert Client().get(f"/organiser/{world.task.slug}/{path}").status_code == 302


@pytest.mark.django_db
def test_a_bad_gold_file_names_every_problem_and_stores_nothing(world: World) -> None:
    bad = [{"id": "d1"}, {"id": "d1"}]
    response = signed_in(world.organiser).post(f"/organiser/{world.task.slug}/gold/", {
        "gold": SimpleUploadedFile("bad.json", orjson.dumps(bad)), "label": "x"})
    assert response.status_code == 400
    problems = errors(response)
    assert len(problems) >= 2 and any("d1" in problem for problem in problems)
    assert GoldVersion.objects.filter(task=world.task).count() == 1
    missing = signed_in(world.organiser).post(f"/organiser/{world.task.slug}/gold/", {"phase": "nope"})
    assert errors(missing) == ["phase: no phase named 'nope' in this task", "gold file: choose the file to load"]


@pytest.mark.django_db
def test_moving_an_open_phase_to_a_new_gold_rescores_and_tells_its_participants(world: World) -> None:
    now = timezone.now()
    phase = Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                                 starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=1))
    with committing():
        run = submissions.submit_run(world.task, world.alice, submissions.Submission(
            content=run_bytes(world.gold, 0.3, 1), name="aurora-1"), phase)
    corrected = [dict(dialogue) for dialogue in world.gold]
    with committing():
        response = signed_in(world.organiser).post(f"/organiser/{world.task.slug}/gold/", {
            "gold": SimpleUploadedFile("corrected.json", orjson.dumps(corrected) + b"\n"), "label": "test, corrected",
            "phase": "test"}, follow=True)
    assert "Gold version 2 is stored (30 dialogues); test now use it and their runs are being scored again." in \
        text(response)
    phase.refresh_from_db()
    run.refresh_from_db()
    assert phase.gold_version.number == 2 and run.gold_version.number == 2 and run.status == Run.DONE
    change = phase.gold_changes[0]
    assert (change["from"], change["to"], change["runs_rescored"]) == (1, 2, 1)
    at = timezone.datetime.fromisoformat(change["at"])
    note = (f"On {at:%Y-%m-%d %H:%M} UTC the organisers moved the test phase from gold version 1 to version 2; 1 run "
            "submitted before then was scored again against it.")
    assert note in text(Client().get(f"/tasks/{world.task.slug}/overview/"))
    assert note + " The scores below are against version 2." in text(signed_in(world.alice).get(f"/runs/{run.pk}/"))
    assert AccessLog.objects.filter(what="loaded gold version 2 from corrected.json; moved test to it").exists()


@pytest.mark.django_db
def test_the_phase_form_checks_as_create_phase_does_and_stores_nothing_on_failure(world: World) -> None:
    organiser = signed_in(world.organiser)
    url = f"/organiser/{world.task.slug}/phase/"
    good = {"name": "test", "kind": "test", "gold_version": "1", "starts_at": "2031-01-01T00:00",
            "ends_at": "2031-01-15T00:00", "daily_quota": "5", "total_quota": "50", "live_subset_size": "12",
            "live_subset_seed": "7", "requires_method_description": "on"}
    response = organiser.post(url, {**good, "kind": "exam", "gold_version": "9", "starts_at": "soon",
                                    "daily_quota": "-1", "live_subset_seed": "x"})
    assert response.status_code == 400
    assert errors(response) == ["kind: choose development, test or final (got 'exam')",
                                "gold version: '9' is not a gold version of this task",
                                "starts: 'soon' is not a date and time; write it as YYYY-MM-DD HH:MM (UTC)",
                                "daily quota: a whole number of 0 or more (got '-1')",
                                "live subset seed: a whole number of 0 or more (got 'x')"]
    response = organiser.post(url, {**good, "ends_at": "2030-12-01T00:00", "live_subset_size": "30",
                                    "total_quota": "0"})
    problems = errors(response)
    assert problems[:3] == ["ends: must be after the start", "live subset: must be between 1 and 29",
                            "quotas must be at least 1"]
    assert not Phase.objects.exists()
    with committing():
        created = organiser.post(url, good, follow=True)
    assert ("The test phase is created: 2031-01-01 00:00 to 2031-01-15 00:00 UTC, gold version 1." in text(created))
    phase = Phase.objects.get()
    assert (phase.kind, phase.live_subset_size, phase.live_subset_seed, phase.daily_quota,
            phase.requires_method_description, phase.per_item_feedback) == ("test", 12, 7, 5, True, False)
    # The same name again is refused by the model's own rule.
    again = organiser.post(url, good)
    assert any("already exists" in problem for problem in errors(again))
    # Editing: the page is filled in; a change is stored; gold and live subset are fixed once runs exist.
    page = organiser.get(f"{url}?phase=test").content.decode()
    assert 'value="2031-01-01T00:00"' in page and 'value="12"' in page
    assert organiser.get(f"{url}?phase=nope").status_code == 404
    with committing():
        organiser.post(f"{url}?phase=test", {**good, "ends_at": "2031-01-20T00:00"})
    phase.refresh_from_db()
    assert f"{phase.ends_at:%Y-%m-%d %H:%M}" == "2031-01-20 00:00"
    Phase.objects.filter(pk=phase.pk).update(starts_at=timezone.now() - timedelta(hours=1))
    with committing():
        submissions.submit_run(world.task, world.alice, submissions.Submission(
            content=run_bytes(world.gold, 0.3, 1), name="aurora-1", description="m"), Phase.objects.get())
    with committing():
        load_gold_version(world.task, orjson.dumps(generate_gold(30, seed=77)), "v2.json")
    refused = organiser.post(f"{url}?phase=test", {**good, "starts_at": f"{timezone.now():%Y-%m-%dT%H:%M}",
                                                  "gold_version": "2"})
    assert errors(refused)[-1] == ("gold version and live subset: the phase has runs scored with them; to correct "
                                   "its gold, load a new gold version and tick this phase there (its runs are "
                                   "scored again)")
    assert Phase.objects.get().gold_version.number == 1
    # A published phase cannot be reopened by moving its end: the refusal says to withdraw the
    # publication first (issue 43, item 4; tests/test_late_runs.py walks the rest).
    Phase.objects.filter(pk=phase.pk).update(ends_at=timezone.now() - timedelta(minutes=1), results_published=True)
    started = Phase.objects.get().starts_at
    reopened = organiser.post(f"{url}?phase=test", {**good, "starts_at": f"{started:%Y-%m-%dT%H:%M}",
                                                   "ends_at": "2031-02-01T00:00"})
    assert any(problem.startswith("results_published: The test phase has ended and its results are published: it "
                                  "cannot be reopened while they are. Withdraw the publication first")
               for problem in errors(reopened))
    assert Phase.objects.get().ends_at < timezone.now()
