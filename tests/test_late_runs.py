"""Issue 43, item 4: late runs. A published phase is not reopened (the refusal says to withdraw the
publication first); one team gets an extension instead (dashboard and command), its runs after the
end are marked late wherever they are shown, and organisers upload runs on a team's behalf (web,
API, command-line client), recorded and shown to the team and the organisers. Every refusal is a
sentence naming what is wrong, and nothing is stored."""

from __future__ import annotations

import csv
import html
import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from leaderboard.statistics import compute_task_statistics
from tasks import access, organising
from tasks.errors import Rejected
from tasks.extensions import Extension
from tasks.models import AccessLog, Phase, Run
from tasks.tokens import issue_token
from tests.conftest import World, committing, make_world, run_bytes


@pytest.fixture
def late_world(db: Any) -> dict[str, Any]:
    """A development phase and a test phase that ended an hour ago, on the task's one gold."""
    world = make_world(n_dialogues=20, seed=7, permutations=50)
    now = timezone.now()
    with committing():
        dev = Phase.objects.create(task=world.task, name="dev", kind=Phase.DEVELOPMENT,
                                   gold_version=world.gold_version, starts_at=now - timedelta(days=3),
                                   ends_at=now - timedelta(days=2))
        test = Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                                    starts_at=now - timedelta(days=1), ends_at=now - timedelta(hours=1))
    return {"world": world, "dev": dev, "test": test}


MEASURE = "quality.A.rsnod"


def signed_in(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def api(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def api_upload(world: World, token: str, seed: int = 1, **fields: Any) -> Any:
    with committing():
        return api(token).post(f"/api/v1/tasks/{world.task.slug}/runs/",
                               {"file": SimpleUploadedFile("run.json", run_bytes(world.gold, seed=seed)), **fields},
                               format="multipart")


def give(world: World, client: Client, **fields: str) -> list[str]:
    """Post the dashboard's extension form; the messages shown back on the dashboard."""
    with committing():
        response = client.post(f"/organiser/{world.task.slug}/extensions/", fields, follow=True)
    return [str(message) for message in response.context["messages"]] if response.context else []


# Reopening ----------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_a_published_phase_is_not_reopened_and_the_refusal_says_to_withdraw_the_publication(late_world) -> None:
    world, test = late_world["world"], late_world["test"]
    Phase.objects.filter(pk=test.pk).update(results_published=True)
    organiser = signed_in(world.organiser)
    form = {"name": "test", "kind": "test", "gold_version": "1", "starts_at": f"{test.starts_at:%Y-%m-%dT%H:%M}",
            "ends_at": f"{timezone.now() + timedelta(days=2):%Y-%m-%dT%H:%M}", "daily_quota": "20",
            "total_quota": "200", "live_subset_seed": "0"}
    page = html.unescape(organiser.post(f"/organiser/{world.task.slug}/phase/?phase=test", form).content.decode())
    assert ("results_published: The test phase has ended and its results are published: it cannot be reopened "
            "while they are. Withdraw the publication first (the dashboard's Withdraw publication button), then "
            "move its end. A reopened phase takes runs from every team; to let one team submit late, give that team an "
            "extension instead.") in page
    assert Phase.objects.get(pk=test.pk).ends_at < timezone.now()
    # Withdrawn, the phase reopens, for every team.
    Phase.objects.filter(pk=test.pk).update(results_published=False)
    with committing():
        assert organiser.post(f"/organiser/{world.task.slug}/phase/?phase=test", form).status_code == 302
    assert Phase.objects.get(pk=test.pk).is_open()
    assert api_upload(world, world.bob_token).status_code == 202


# Extensions ---------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_an_extension_lets_one_team_submit_late_and_marks_its_runs(late_world) -> None:
    world, test = late_world["world"], late_world["test"]
    until = timezone.now() + timedelta(hours=5)
    shown = give(world, signed_in(world.organiser), action="extend", team="aurora", phase="test",
                 until=f"{until:%Y-%m-%d %H:%M}", note="power cut in the lab")
    assert shown == [f"Team 'Aurora' may submit to the test phase until {until:%Y-%m-%d %H:%M} UTC; its runs after "
                     "the end are marked late. Its members read this on their upload page."]
    extension = Extension.objects.get()
    assert (extension.team.name, extension.phase.name, extension.granted_by) == ("Aurora", "test", world.organiser)
    assert AccessLog.objects.filter(what__startswith="gave team Aurora an extension of the test phase").exists()
    # The team reads it before it uploads (web page and API).
    page = html.unescape(signed_in(world.alice).get(f"/tasks/{world.task.slug}/upload/").content.decode())
    assert (f"The organisers gave your team an extension of the test phase until {until:%Y-%m-%d %H:%M} UTC "
            f"(power cut in the lab): it ended for other teams at {test.ends_at:%Y-%m-%d %H:%M} UTC") in page
    assert f"open for your team until {until:%Y-%m-%d %H:%M} UTC" in page
    status = api(world.alice_token).get(f"/api/v1/tasks/{world.task.slug}/my-runs/").json()["submissions"]
    assert status["open"] and status["phase"] == "test" and len(status["extensions"]) == 1
    # Alice's team submits late; Bob's team is refused, nothing stored.
    answer = api_upload(world, world.alice_token)
    assert answer.status_code == 202 and answer.json()["phase"] == "test"
    run = Run.objects.get(pk=answer.json()["id"])
    assert run.late and run.status == Run.DONE and not run.on_behalf
    refused = api_upload(world, world.bob_token)
    assert refused.status_code == 403
    assert refused.json()["errors"][0].startswith(f"no phase of {world.task.slug} is open for submissions now")
    assert Run.objects.filter(team__name="Borealis").count() == 0
    # The mark in words: the run's API answer and its page.
    data = api(world.alice_token).get(f"/api/v1/runs/{run.pk}/").json()
    expected = (f"Late run: submitted at {run.created_at:%Y-%m-%d %H:%M} UTC, after the test phase ended at "
                f"{test.ends_at:%Y-%m-%d %H:%M} UTC, under an extension the organisers gave Aurora.")
    assert data["late"] is True and data["late_note"] == expected
    assert expected in html.unescape(signed_in(world.alice).get(f"/runs/{run.pk}/").content.decode())
    # While the extension runs the phase still takes runs: its results cannot be published.
    with pytest.raises(Rejected, match="under an extension given to a team"):
        organising.set_publication(Phase.objects.get(pk=test.pk), True)
    Phase.objects.filter(pk=test.pk).update(results_published=True)  # ticked behind the rules' back
    phases = access.task_phases(world.task.pk)
    assert not access.publication_counts(phases, next(phase for phase in phases if phase.name == "test"))
    # The organiser ends it; the team is refused like the others from then on.
    Phase.objects.filter(pk=test.pk).update(results_published=False)
    assert give(world, signed_in(world.organiser), action="end", team="aurora", phase="test") == [
        "The extension of team 'Aurora' in the test phase has ended."]
    assert api_upload(world, world.alice_token, seed=2).status_code == 403
    assert Phase.objects.get(pk=test.pk).closes_at <= timezone.now()


@pytest.mark.django_db
def test_the_late_mark_is_on_boards_exports_and_public_pages(late_world) -> None:
    world, test = late_world["world"], late_world["test"]
    organising_until = timezone.now() + timedelta(hours=2)
    from tasks.late import grant_extension

    grant_extension(test, world.alice.teams.get(), organising_until)
    late_run = Run.objects.get(pk=api_upload(world, world.alice_token).json()["id"])
    # Closing submissions ends the extension too, and the results can be published.
    with committing():
        closed = organising.set_publication(Phase.objects.get(pk=test.pk), True, close_first=True)
    assert [phase.name for phase in closed] == ["test"]
    assert Extension.objects.get().until <= timezone.now()
    board = html.unescape(Client().get(f"/tasks/{world.task.slug}/?phase=test").content.decode())
    assert '<span class="tag late" title="submitted after its phase had ended, under an extension the organisers ' \
           'gave its team">late</span>' in board
    assert "late: submitted after its phase had ended, under an extension the organisers gave its team." in \
        board.replace('<span class="tag late">late</span>', "late")
    rows = list(csv.DictReader(io.StringIO(Client().get(
        f"/tasks/{world.task.slug}/leaderboard.csv?phase=test").content.decode())))
    assert {row["run_id"]: row["late"] for row in rows} == {
        str(run.pk): "1" if run.pk == late_run.pk else "0"
        for run in Run.objects.filter(status=Run.DONE, gold_version=world.gold_version)}
    runs = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=test").json()["runs"]
    assert {run["id"]: run["late"] for run in runs if run["late"]} == {late_run.pk: True}
    results = signed_in(world.organiser).get(f"/organiser/{world.task.slug}/results.json").json()["results"]
    assert {row["run_id"]: row["late"] for row in results if row["run_id"] == late_run.pk} == {late_run.pk: True}
    public = html.unescape(Client().get(f"/runs/{late_run.pk}/").content.decode())
    assert "Late run: submitted at" in public and "under an extension the organisers gave Aurora" in public
    # The statistics' files name runs by their labels only: the late run's says so in each.
    compute_task_statistics(world.task.pk)
    label = f"Aurora/{late_run.name} (late)"
    base = f"/tasks/{world.task.slug}/statistics"
    exported = {kind: html.unescape(Client().get(f"{base}/{key}/{kind}?phase=test").content.decode())
                for key, kind in (("all", "means.tex"), (MEASURE, "pvalues.csv"), (MEASURE, "pvalues.txt"),
                                  (MEASURE, "runs.txt"), (MEASURE, "matrix.csv"))}
    assert label in exported["means.tex"] and label in exported["pvalues.csv"]
    assert label in exported["matrix.csv"].splitlines()[0]
    spaceless = label.replace(" ", "_")  # Discpower's files separate fields by whitespace
    assert spaceless in exported["runs.txt"].split() and spaceless in exported["pvalues.txt"]
    assert sum(text.count("(late)") for text in exported["runs.txt"].split()) == 1
    pvalues = html.unescape(Client().get(f"{base}/{MEASURE}/pvalues/?phase=test").content.decode())
    assert label in pvalues


@pytest.mark.django_db
def test_every_extension_refusal_is_a_sentence_and_changes_nothing(late_world) -> None:
    world, test, dev = late_world["world"], late_world["test"], late_world["dev"]
    organiser = signed_in(world.organiser)
    before = f"{test.ends_at - timedelta(minutes=5):%Y-%m-%d %H:%M}"
    cases = [
        ({"team": "aurora", "phase": "test", "until": before},
         f"until: {before} UTC is not after the end of the test phase ({test.ends_at:%Y-%m-%d %H:%M} UTC): an "
         "extension gives time after the end"),
        ({"team": "aurora", "phase": "dev", "until": f"{dev.ends_at + timedelta(hours=1):%Y-%m-%d %H:%M}"},
         f"until: {dev.ends_at + timedelta(hours=1):%Y-%m-%d %H:%M} UTC has passed already; choose a later time"),
        ({"team": "nobody", "phase": "test", "until": "2099-01-01 00:00"},
         "team: no team called 'nobody'; give a team's name or its short name (slug)"),
        ({"team": "aurora", "phase": "nope", "until": "2099-01-01 00:00"},
         f"phase: {world.task.slug} has no phase named 'nope'; its phases are dev, test"),
        ({"team": "aurora", "phase": "test", "until": "soon"},
         "until: 'soon' is not a date and time; write it as YYYY-MM-DD HH:MM (UTC)"),
        ({"team": "aurora", "phase": "test", "until": "2099-01-01 00:00", "note": "bell\x07"},
         "note: "),
    ]
    for fields, sentence in cases:
        shown = give(world, organiser, action="extend", **fields)
        assert len(shown) == 1 and shown[0].startswith("Nothing was changed: " + sentence), (fields, shown)
    Phase.objects.filter(pk=test.pk).update(results_published=True)
    shown = give(world, organiser, action="extend", team="aurora", phase="test", until="2099-01-01 00:00")
    assert "the results of the test phase are published: withdraw the publication first" in shown[0]
    assert give(world, organiser, action="end", team="aurora", phase="test") == [
        "Nothing was changed: team 'Aurora' has no running extension of the test phase."]
    assert not Extension.objects.exists() and Phase.objects.get(pk=test.pk).late_until is None


@pytest.mark.django_db
def test_a_participant_gives_nobody_an_extension_and_uploads_for_no_other_team(late_world) -> None:
    world = late_world["world"]
    alice = signed_in(world.alice)
    fields = {"action": "extend", "team": "aurora", "phase": "test", "until": "2099-01-01 00:00"}
    assert alice.post(f"/organiser/{world.task.slug}/extensions/", fields).status_code == 404
    anonymous = Client().post(f"/organiser/{world.task.slug}/extensions/", fields)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    assert alice.get(f"/organiser/{world.task.slug}/upload/").status_code == 404
    with pytest.raises(CommandError):  # the command is the server's operator's, and checks its input
        call_command("extension", world.task.slug, "test", "aurora", stdout=io.StringIO())
    # The API: a participant naming a team is refused before the file is read, its own team included.
    for team in ("borealis", "aurora"):
        answer = api_upload(world, world.alice_token, team=team)
        assert answer.status_code == 403
        assert answer.json()["errors"] == [
            "team: only the task's organisers upload a run on a team's behalf; leave the team out to upload for "
            "your own team"]
    assert not Extension.objects.exists() and not Run.objects.filter(is_baseline=False).exists()


# Uploads on a team's behalf ------------------------------------------------------------------------

@pytest.mark.django_db
def test_an_organiser_uploads_for_a_team_and_the_run_says_who(late_world) -> None:
    world, test = late_world["world"], late_world["test"]
    token = issue_token(world.organiser)
    # After the end without an extension: refused like the team's own upload.
    refused = api_upload(world, token, team="Borealis", phase="test")
    assert refused.status_code == 403 and refused.json()["errors"][0].startswith(
        f"phase: the test phase of {world.task.slug} is not open for submissions (it ended at ")
    assert api_upload(world, token, team="Nobody").json()["errors"] == [
        "team: no team called 'Nobody'; give a team's name or its short name (slug)"]
    # A NUL byte (PostgreSQL cannot compare a text holding one) is named, not looked up: no 500.
    nul = api_upload(world, token, team="Bor\x00ealis")
    assert (nul.status_code, nul.json()["errors"]) == (400, [
        "team: contains U+0000 NULL at position 4; invisible and control characters are not allowed"])
    call_command("extension", world.task.slug, "test", "borealis", "--until",
                 f"{timezone.now() + timedelta(hours=3):%Y-%m-%dT%H:%M}", "--note", "mail", stdout=io.StringIO())
    answer = api_upload(world, token, team="Borealis", name="emailed")
    assert answer.status_code == 202
    run = Run.objects.get(pk=answer.json()["id"])
    assert (run.team.name, run.submitted_by, run.on_behalf, run.late) == ("Borealis", world.organiser, True, True)
    sentence = (f"Uploaded on the team's behalf by olivia, an organiser of the task, at "
                f"{run.created_at:%Y-%m-%d %H:%M} UTC.")
    for reader in (world.bob, world.organiser):
        assert sentence in html.unescape(signed_in(reader).get(f"/runs/{run.pk}/").content.decode())
    assert api(world.bob_token).get(f"/api/v1/runs/{run.pk}/").json()["uploaded_on_behalf"] == sentence
    dashboard = signed_in(world.organiser).get(f"/organiser/{world.task.slug}/").content.decode()
    assert "uploaded by olivia</span>" in dashboard and 'id="extension-list"' in dashboard
    # The web form, for the same team, and the command's listing of the extension.
    with committing():
        response = signed_in(world.organiser).post(f"/organiser/{world.task.slug}/upload/", {
            "team": "borealis", "phase": "test", "name": "second", "public": "on",
            "file": SimpleUploadedFile("run.json", run_bytes(world.gold, seed=5))})
    second = Run.objects.get(name="second")
    assert response.status_code == 302 and (second.on_behalf, second.late, second.is_public) == (True, True, True)
    listing = io.StringIO()
    call_command("extension", world.task.slug, stdout=listing)
    assert listing.getvalue().startswith("test\tBorealis\tuntil ") and "\trunning\t2 late run(s)\tmail" in \
        listing.getvalue()
    assert Phase.objects.get(pk=test.pk).late_until == Extension.objects.get().until


@pytest.mark.django_db
def test_the_references_wait_for_the_last_extension(late_world) -> None:
    """While a team may still submit, the gold's references stay off every run page of the phase."""
    import orjson

    from fixtures.synthetic import generate_gold
    from tasks.late import grant_extension

    world = late_world["world"]
    gold = generate_gold(16, seed=11)
    with committing():
        version = organising.load_gold_version(world.task, orjson.dumps(gold), "dev2.json")
        practice = Phase.objects.create(task=world.task, name="practice", kind=Phase.DEVELOPMENT, gold_version=version,
                                        starts_at=timezone.now() - timedelta(days=1),
                                        ends_at=timezone.now() + timedelta(hours=1))
    with committing():
        answer = api(world.bob_token).post(f"/api/v1/tasks/{world.task.slug}/runs/", {
            "file": SimpleUploadedFile("run.json", run_bytes(gold, seed=3)), "phase": "practice"}, format="multipart")
    run_id = answer.json()["id"]
    Phase.objects.filter(pk=practice.pk).update(ends_at=timezone.now() - timedelta(minutes=1))
    assert access.may_see_references(Run.objects.select_related("phase").get(pk=run_id), world.bob)
    grant_extension(Phase.objects.get(pk=practice.pk), world.alice.teams.get(), timezone.now() + timedelta(hours=1))
    assert not access.may_see_references(Run.objects.select_related("phase").get(pk=run_id), world.bob)
