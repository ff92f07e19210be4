"""Rules of a shared task checked end to end: who sees per-dialogue and whole-test-set scores,
quota and phase boundaries to the microsecond, NTCIR run priorities, the organiser's
publication button and team approval, and bad input that must never answer 500."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tasks import errors, organising
from tasks import submissions as phase_rules
from tasks.models import AccessLog, Phase, Run, Team, slug_validator
from tests.conftest import World, committing, run_bytes


def add_phase(world: World, name: str = "test", kind: str = Phase.TEST, start: timedelta = timedelta(hours=-1),
              end: timedelta = timedelta(hours=1), version=None, **fields) -> Phase:
    now = timezone.now()
    return Phase.objects.create(task=world.task, name=name, kind=kind, gold_version=version or world.gold_version,
                                starts_at=now + start, ends_at=now + end, **fields)


def api_for(token: str | None = None, user=None) -> APIClient:
    client = APIClient(raise_request_exception=False)
    if token:
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    if user is not None:
        client.force_authenticate(user)
    return client


def api_upload(world: World, content: bytes, token: str | None = None, **fields):
    with committing():
        return api_for(token or world.alice_token).post(
            f"/api/v1/tasks/{world.task.slug}/runs/", {"file": SimpleUploadedFile("run.json", content), **fields},
            format="multipart")


def signed_in(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def publish(world: World, phase: Phase, client: Client | None = None, action: str = "publish"):
    """The organiser's publication as the preview page sends it (its confirmation box ticked)."""
    with committing():
        return (client or signed_in(world.organiser)).post(f"/organiser/{world.task.slug}/",
                                                           {"action": action, "phase": phase.name, "confirm": "yes"})


# Privacy: per-dialogue and whole-set scores on test data ----------------------------------------

@pytest.mark.django_db
def test_per_dialogue_scores_of_a_test_phase_wait_for_the_final_publication(world: World) -> None:
    """The test phase's 'per-dialogue feedback' box is ticked (the model's default): on test data
    the owner still sees no per-dialogue scores until the final phase is published."""
    test = add_phase(world, "test")
    assert test.per_item_feedback
    run_id = api_upload(world, run_bytes(world.gold), description="m").json()["id"]
    alice, organiser = signed_in(world.alice), signed_in(world.organiser)
    assert "Per-dialogue scores" not in alice.get(f"/runs/{run_id}/").content.decode()
    assert "Per-dialogue scores (30 dialogues" in organiser.get(f"/runs/{run_id}/").content.decode()
    final = add_phase(world, "final", Phase.FINAL, start=timedelta(hours=1), end=timedelta(days=9))
    assert "Per-dialogue scores" not in alice.get(f"/runs/{run_id}/").content.decode()
    # While the test phase takes runs, publishing is refused (a new run would learn its test scores).
    assert publish(world, final).status_code == 302
    final.refresh_from_db()
    assert not final.results_published
    assert "Per-dialogue scores" not in alice.get(f"/runs/{run_id}/").content.decode()
    assert publish(world, final, action="close-and-publish").status_code == 302
    test.refresh_from_db()
    assert not test.is_open()
    assert "Per-dialogue scores (30 dialogues" in alice.get(f"/runs/{run_id}/").content.decode()
    # Published and shown on the public board: the run's public page has them for everybody (issue
    # 30); hidden by its team, the run has no public page.
    assert "Per-dialogue scores (30 dialogues" in signed_in(world.bob).get(f"/runs/{run_id}/").content.decode()
    Run.objects.filter(pk=run_id).update(is_public=False)
    assert signed_in(world.bob).get(f"/runs/{run_id}/").status_code == 404


@pytest.mark.django_db
def test_live_scores_turn_into_whole_set_scores_when_the_final_phase_is_published(world: World) -> None:
    test = add_phase(world, "test", live_subset_size=10, per_item_feedback=False)
    run_id = api_upload(world, run_bytes(world.gold)).json()["id"]
    owner = api_for(world.alice_token)
    assert owner.get(f"/api/v1/runs/{run_id}/").json()["scores"]["n_items"] == 10
    final = add_phase(world, "final", Phase.FINAL, start=timedelta(hours=1), end=timedelta(days=9))
    Phase.objects.filter(pk=test.pk).update(ends_at=timezone.now())
    publish(world, final)
    seen = owner.get(f"/api/v1/runs/{run_id}/").json()
    assert (seen["scores_scope"], seen["scores"]["n_items"]) == ("full", 30)
    assert owner.get(f"/api/v1/tasks/{world.task.slug}/my-runs/").json()["runs"][0]["scores"]["n_items"] == 30


@pytest.mark.django_db
def test_a_run_from_before_the_phases_rescored_on_the_test_gold_shows_nothing_of_it(world: World) -> None:
    """A task accepts runs before it has phases; loading the test gold re-scores them against it.
    Their owners must not read test-set scores, per dialogue or on the whole set, from them."""
    run_id = api_upload(world, run_bytes(world.gold)).json()["id"]
    with committing():
        test_gold = organising.load_gold_version(world.task, orjson.dumps(world.gold), "test.json", label="test")
    assert Run.objects.get(pk=run_id).gold_version == test_gold
    add_phase(world, "test", version=test_gold, live_subset_size=10, start=timedelta(days=1), end=timedelta(days=2))
    owner = api_for(world.alice_token).get(f"/api/v1/runs/{run_id}/").json()
    assert owner["status"] == "done" and owner["scores"] is None
    page = signed_in(world.alice).get(f"/runs/{run_id}/").content.decode()
    assert "Per-dialogue scores" not in page and "RSNOD" not in page
    assert api_for(user=world.organiser).get(f"/api/v1/runs/{run_id}/").json()["scores"]["n_items"] == 30
    assert "Per-dialogue scores (30" in signed_in(world.organiser).get(f"/runs/{run_id}/").content.decode()


@pytest.mark.django_db
def test_a_development_phase_keeps_its_per_item_feedback(world: World) -> None:
    add_phase(world, "dev", Phase.DEVELOPMENT)
    run_id = api_upload(world, run_bytes(world.gold)).json()["id"]
    assert "Per-dialogue scores (30" in signed_in(world.alice).get(f"/runs/{run_id}/").content.decode()


# Quotas and phases at their boundaries ----------------------------------------------------------

@pytest.mark.django_db
def test_the_daily_quota_resets_exactly_at_midnight_utc(world: World, monkeypatch) -> None:
    midnight = datetime(2031, 3, 5, tzinfo=UTC)
    phase = Phase.objects.create(task=world.task, name="dev", kind=Phase.DEVELOPMENT, gold_version=world.gold_version,
                                 starts_at=midnight - timedelta(days=2), ends_at=midnight + timedelta(days=2),
                                 daily_quota=2, total_quota=10)
    team = Team.objects.get(name="Aurora")
    last_moment = midnight - timedelta(microseconds=1)
    for number in range(2):
        Run.objects.create(task=world.task, team=team, phase=phase, name=f"late-{number}", file_sha256="0" * 64,
                           file_size=1, status=Run.DONE, created_at=last_moment)
    before = phase_rules.quota_numbers(team, phase, at=last_moment)
    assert (before["daily_used"], before["daily_remaining"]) == (2, 0)
    assert before["daily_resets_at"] == "2031-03-05T00:00:00+00:00"
    after = phase_rules.quota_numbers(team, phase, at=midnight)
    assert (after["daily_used"], after["daily_remaining"], after["total_used"]) == (0, 2, 2)
    assert after["daily_resets_at"] == "2031-03-06T00:00:00+00:00"
    # A run made at midnight sharp belongs to the new day.
    Run.objects.create(task=world.task, team=team, phase=phase, name="midnight", file_sha256="0" * 64, file_size=1,
                       status=Run.DONE, created_at=midnight)
    assert phase_rules.quota_numbers(team, phase, at=midnight)["daily_used"] == 1
    assert phase_rules.quota_numbers(team, phase, at=last_moment)["daily_used"] == 2
    # The check that guards uploads uses the same clock.
    monkeypatch.setattr(phase_rules.timezone, "now", lambda: last_moment)
    with pytest.raises(errors.Rejected) as refused:
        phase_rules.check_quota(team, phase)
    assert refused.value.status == 429 and "resets at 2031-03-05T00:00:00+00:00" in refused.value.errors[0]
    monkeypatch.setattr(phase_rules.timezone, "now", lambda: midnight)
    phase_rules.check_quota(team, phase)  # one left today


@pytest.mark.django_db
def test_a_phase_opens_at_its_start_and_closes_at_its_end_to_the_microsecond(world: World, monkeypatch) -> None:
    start = datetime(2031, 6, 1, 9, 0, tzinfo=UTC)
    phase = Phase.objects.create(task=world.task, name="dev", kind=Phase.DEVELOPMENT, gold_version=world.gold_version,
                                 starts_at=start, ends_at=start + timedelta(hours=1))
    assert phase_rules.open_phase(world.task, start - timedelta(microseconds=1)) is None
    assert phase_rules.open_phase(world.task, start) == phase
    assert phase_rules.open_phase(world.task, phase.ends_at - timedelta(microseconds=1)) == phase
    assert phase_rules.open_phase(world.task, phase.ends_at) is None
    clock = {"now": start}
    monkeypatch.setattr(phase_rules.timezone, "now", lambda: clock["now"])
    accepted = api_upload(world, run_bytes(world.gold))
    assert accepted.status_code == 202 and Run.objects.get(pk=accepted.json()["id"]).phase == phase
    clock["now"] = phase.ends_at
    refused = api_upload(world, run_bytes(world.gold, seed=2))
    assert refused.status_code == 403
    assert refused.json()["errors"] == ["no phase of demo-task is open for submissions now; the submission "
                                        "period is over"]


# Runs: priorities and descriptions --------------------------------------------------------------

@pytest.mark.django_db
def test_a_priority_is_held_by_one_run_of_a_team_in_a_phase(world: World) -> None:
    add_phase(world, "dev", Phase.DEVELOPMENT)
    first = api_upload(world, run_bytes(world.gold, seed=1), name="primary", priority="1")
    assert first.status_code == 202
    clash = api_upload(world, run_bytes(world.gold, seed=2), name="another", priority="1")
    assert clash.status_code == 409
    assert clash.json()["errors"] == [
        f"priority: your team's run 'primary' (#{first.json()['id']}) already has priority 1 in the dev phase; "
        "choose another number, or withdraw that run first"]
    assert not Run.objects.filter(name="another").exists()
    assert api_upload(world, run_bytes(world.gold, seed=3), name="second", priority="2").status_code == 202
    assert api_upload(world, run_bytes(world.gold, seed=4), token=world.bob_token, priority="1").status_code == 202
    # A failed run and a withdrawn run give their number back.
    Run.objects.filter(name="second").update(status=Run.FAILED)
    assert api_upload(world, run_bytes(world.gold, seed=5), name="second-again", priority="2").status_code == 202
    alice = signed_in(world.alice)
    alice.post(f"/runs/{first.json()['id']}/visibility/", {"action": "withdraw", "confirm": "yes"})
    with committing():
        web = alice.post(f"/tasks/{world.task.slug}/upload/", {
            "file": SimpleUploadedFile("r.json", run_bytes(world.gold, seed=6)), "name": "new-primary",
            "priority": "1", "public": "on"})
    assert web.status_code == 302
    assert Run.objects.get(name="new-primary").priority == 1
    assert "priority 1 (primary)" in alice.get(web["Location"]).content.decode()
    assert '<td data-label="Priority">1</td>' in alice.get("/team/").content.decode()


@pytest.mark.django_db
def test_the_upload_page_takes_a_priority_and_says_what_is_wrong_with_it(world: World) -> None:
    alice = signed_in(world.alice)
    form = alice.get(f"/tasks/{world.task.slug}/upload/").content.decode()
    assert 'name="priority"' in form
    response = alice.post(f"/tasks/{world.task.slug}/upload/", {
        "file": SimpleUploadedFile("r.json", run_bytes(world.gold)), "priority": "first", "name": "kept"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "priority: expected a whole number, got &#x27;first&#x27;" in page
    assert 'value="kept"' in page and 'id="id_public" checked' not in page  # the choices are kept
    assert not Run.objects.filter(name="kept").exists()


@pytest.mark.django_db
def test_a_missing_description_is_listed_with_the_other_problems(world: World) -> None:
    add_phase(world, requires_method_description=True)
    response = api_upload(world, b'[{"id": "x"}]')
    errors = response.json()["errors"]
    assert errors[0] == "description: the test phase requires a description of the method"
    assert errors[1:] == ["$: none of the 1 ids in this file is an id of this task's gold data (the file's first is "
                          '"x"): is it a run of this task?',
                          "the file was checked against gold version 1 of demo-task, the gold of its test phase (test)"]
    page = signed_in(world.alice).get(f"/tasks/{world.task.slug}/upload/").content.decode()
    assert "(required in the test phase)" in page


@pytest.mark.django_db
def test_create_phase_requires_descriptions_in_a_test_phase_by_default(world: World) -> None:
    dates = ["--starts", "2031-01-01", "--ends", "2031-01-02"]
    call_command("create_phase", world.task.slug, "t1", "--kind", "test", *dates, stdout=io.StringIO())
    call_command("create_phase", world.task.slug, "t2", "--kind", "test", "--no-require-description", *dates,
                 stdout=io.StringIO())
    call_command("create_phase", world.task.slug, "d1", *dates, stdout=io.StringIO())
    call_command("create_phase", world.task.slug, "d2", "--require-description", *dates, stdout=io.StringIO())
    required = dict(Phase.objects.filter(task=world.task).values_list("name", "requires_method_description"))
    assert required == {"t1": True, "t2": False, "d1": False, "d2": True}


@pytest.mark.django_db
def test_a_withdrawn_run_cannot_be_shown_before_its_withdrawal_is_undone(world: World) -> None:
    run_id = api_upload(world, run_bytes(world.gold), public="false").json()["id"]
    alice = signed_in(world.alice)
    alice.post(f"/runs/{run_id}/visibility/", {"action": "withdraw", "confirm": "yes"})
    response = alice.post(f"/runs/{run_id}/visibility/", {"action": "show"}, follow=True)
    assert "undo the withdrawal first to show or hide it" in response.content.decode()
    run = Run.objects.get(pk=run_id)
    assert run.is_withdrawn and not run.is_public
    assert 'value="withdraw"' not in alice.get(f"/runs/{run_id}/").content.decode()


# Statistics follow visibility and publication ------------------------------------------------------

@pytest.mark.django_db
def test_a_hidden_run_leaves_the_public_statistics(world: World, settings) -> None:
    from leaderboard.models import TaskStatistics

    settings.EVALSERVER_STATISTICS_MODE = "sync"
    api_upload(world, run_bytes(world.gold, 0.2, 1), name="shy-run")
    api_upload(world, run_bytes(world.gold, 0.4, 2), token=world.bob_token, name="bold-run")
    labels = TaskStatistics.objects.get(task=world.task).run_labels.values()
    assert "Aurora/shy-run" in labels
    run = Run.objects.get(name="shy-run")
    with committing():
        signed_in(world.alice).post(f"/runs/{run.pk}/visibility/", {"action": "hide"})
    assert "Aurora/shy-run" not in TaskStatistics.objects.get(task=world.task).run_labels.values()
    assert "shy-run" not in Client().get(f"/tasks/{world.task.slug}/statistics/").content.decode()


@pytest.mark.django_db
def test_publishing_the_final_phase_computes_its_statistics_and_withdrawing_removes_them(
        world: World, settings) -> None:
    from leaderboard.models import TaskStatistics

    settings.EVALSERVER_STATISTICS_MODE = "sync"
    test = add_phase(world, "test", live_subset_size=10)
    api_upload(world, run_bytes(world.gold, 0.2, 1), description="a")
    api_upload(world, run_bytes(world.gold, 0.5, 2), token=world.bob_token, description="b")
    Phase.objects.filter(pk=test.pk).update(ends_at=timezone.now())
    final = add_phase(world, "final", Phase.FINAL, start=timedelta(seconds=-1), end=timedelta(days=9))
    assert TaskStatistics.objects.filter(phase=test).exists()
    assert not TaskStatistics.objects.filter(phase=final).exists()
    publish(world, final)
    record = TaskStatistics.objects.get(phase=final)
    assert record.scope == "full" and record.n_items == 30
    assert "Aurora/" in Client().get(f"/tasks/{world.task.slug}/statistics/?phase=final").content.decode()
    publish(world, final, action="unpublish")
    assert not TaskStatistics.objects.filter(phase=final).exists()
    assert "Aurora/" not in Client().get(f"/tasks/{world.task.slug}/statistics/?phase=final").content.decode()


# The organiser dashboard -----------------------------------------------------------------------

@pytest.mark.django_db
def test_organisers_publish_and_withdraw_results_from_the_dashboard(world: World) -> None:
    test = add_phase(world, "test", live_subset_size=10)
    api_upload(world, run_bytes(world.gold), description="m")
    Phase.objects.filter(pk=test.pk).update(ends_at=timezone.now())
    final = add_phase(world, "final", Phase.FINAL, start=timedelta(seconds=-1), end=timedelta(days=9))
    board = f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=final"
    assert Client().get(board).json()["runs"] == []
    organiser = signed_in(world.organiser)
    page = organiser.get(f"/organiser/{world.task.slug}/").content.decode()
    assert f'href="/organiser/{world.task.slug}/preview/?phase=final">Preview and publish' in page
    # Only the task's organisers, and only with the form's CSRF token.
    for user in (world.alice, world.bob):
        assert publish(world, final, signed_in(user)).status_code == 404
    anonymous = publish(world, final, Client())
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(world.organiser)
    assert publish(world, final, forged).status_code == 403
    final.refresh_from_db()
    assert not final.results_published
    response = publish(world, final, organiser)
    assert response.status_code == 302 and response["Location"] == f"/organiser/{world.task.slug}/"
    final.refresh_from_db()
    assert final.results_published
    assert [run["scores"]["n_items"] for run in Client().get(board).json()["runs"]] == [30]
    assert AccessLog.objects.filter(task=world.task, what="published the results of the final phase").exists()
    assert "now public" in organiser.get(f"/organiser/{world.task.slug}/").content.decode()
    publish(world, final, action="unpublish")
    assert Client().get(board).json()["runs"] == []
    # Precise refusals, nothing changed.
    dev = add_phase(world, "dev", Phase.DEVELOPMENT)
    for data, message in (({"action": "publish", "phase": dev.name}, "development phase"),
                          ({"action": "publish", "phase": "nope"}, "No phase named &#x27;nope&#x27;"),
                          ({"action": "publish"}, "Choose a phase."),
                          ({"action": "explode"}, "Unknown action")):
        followed = organiser.post(f"/organiser/{world.task.slug}/", data, follow=True)
        assert followed.status_code == 200 and message in followed.content.decode(), message
    assert not Phase.objects.filter(results_published=True).exists()


@pytest.mark.django_db
def test_organisers_approve_waiting_teams_from_the_dashboard(world: World) -> None:
    waiting = Team.objects.create(name="Newcomers", slug="newcomers", approved=False)
    organiser = signed_in(world.organiser)
    assert "Newcomers" not in organiser.get(f"/organiser/{world.task.slug}/").content.decode()
    world.task.requires_team_approval = True
    world.task.save()
    assert "Newcomers" in organiser.get(f"/organiser/{world.task.slug}/").content.decode()
    url = f"/organiser/{world.task.slug}/"
    assert signed_in(world.alice).post(url, {"action": "approve", "team": waiting.pk}).status_code == 404
    followed = organiser.post(url, {"action": "approve", "team": "x1"}, follow=True)
    assert "No such team." in followed.content.decode()
    organiser.post(url, {"action": "approve", "team": waiting.pk})
    waiting.refresh_from_db()
    assert waiting.approved


@pytest.mark.django_db
def test_dashboard_pages_keep_their_filters(world: World) -> None:
    team = Team.objects.get(name="Aurora")
    Run.objects.bulk_create([Run(task=world.task, team=team, name=f"bulk-{i}", file_sha256="0" * 64, file_size=1,
                                 status=Run.QUEUED) for i in range(105)])
    page = signed_in(world.organiser).get(f"/organiser/{world.task.slug}/?status=queued&q=bulk").content.decode()
    assert 'href="?q=bulk&amp;status=queued&amp;page=2">next</a>' in page


# Bad input never answers 500 -------------------------------------------------------------------

@pytest.mark.django_db
def test_odd_requests_get_a_precise_answer_not_500(world: World) -> None:
    slug = world.task.slug
    api = api_for(world.alice_token)
    bad_length = api.post(f"/api/v1/tasks/{slug}/runs/", {"file": SimpleUploadedFile("r.json", b"[]")},
                          format="multipart", CONTENT_LENGTH="abc")
    assert bad_length.status_code == 400
    assert bad_length.json() == {"errors": ["Content-Length: not a number of bytes"]}
    for field in ("name", "description"):
        response = api.post(f"/api/v1/tasks/{slug}/runs/", {"file": SimpleUploadedFile("r.json", run_bytes(world.gold)),
                                                            field: SimpleUploadedFile("n.txt", b"x")},
                            format="multipart")
        assert response.status_code == 400
        assert response.json() == {"errors": [f"{field}: expected a text field, got a file"]}
    organiser = signed_in(world.organiser)
    assert organiser.get(f"/organiser/{slug}/?q=a%00b&status=%00&page=-1").status_code == 200
    # A phase filter that names no phase is a 404, like every ?phase= (tasks.access.named_phase).
    assert organiser.get(f"/organiser/{slug}/?q=a%00b&phase=%00&status=%00&page=-1").status_code == 404
    assert organiser.get(f"/organiser/{slug}/runs.zip?phase=de%00v").status_code == 404
    assert organiser.get(f"/organiser/{slug}/results.csv?phase=%00x").status_code == 404
    assert organiser.post(f"/organiser/{slug}/rescore/", {"run": "\u0661"}).status_code == 404  # Arabic-Indic 1
    assert organiser.post(f"/organiser/{slug}/rescore/", {"run": "9" * 30}).status_code == 404
    assert organiser.post(f"/organiser/{slug}/", {"action": "approve", "team": "9" * 30}).status_code == 302
    before = AccessLog.objects.count()
    assert organiser.get(f"/organiser/{slug}/results.xml").status_code == 404
    assert AccessLog.objects.count() == before  # nothing was downloaded


# Teams ------------------------------------------------------------------------------------------

def sign_up(team_name: str, username: str = "lee"):
    return Client(raise_request_exception=False).post("/accounts/signup/", {
        "username": username, "email": f"{username}@example.org", "password1": "a-long-pass-123",
        "password2": "a-long-pass-123", "affiliation": "Kyoto University", "team_name": team_name})


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["清华大学", "北大", "NTT", "東京 NLP Lab", "a_b_c"])
def test_teams_can_have_names_in_any_script(world: World, name: str) -> None:
    response = sign_up(name)
    assert response.status_code == 302, response.content.decode()[-2000:]
    team = Team.objects.get(name=name)
    slug_validator(team.slug)
    assert sign_up(name, username="lee2").status_code == 400  # taken now


@pytest.mark.django_db
def test_create_participant_explains_a_clashing_team_and_creates_nothing() -> None:
    from django.contrib.auth import get_user_model

    call_command("create_participant", "wang", "--team", "清华大学", stdout=io.StringIO())
    assert Team.objects.get(name="清华大学").members.get().username == "wang"
    call_command("create_participant", "carol", "--team", "Team Carol", stdout=io.StringIO())
    with pytest.raises(CommandError, match="exists already; nothing was created"):
        call_command("create_participant", "dave", "--team", "team carol", stdout=io.StringIO())
    assert not get_user_model().objects.filter(username="dave").exists()
    with pytest.raises(CommandError, match="at least 2 letters or digits"):
        call_command("create_participant", "erin", "--team=-!-", stdout=io.StringIO())


@pytest.mark.django_db
def test_organisers_reading_unpublished_per_dialogue_test_scores_are_in_the_access_log(world: World) -> None:
    add_phase(world, "test", live_subset_size=10)
    run_id = api_upload(world, run_bytes(world.gold)).json()["id"]
    assert "Per-dialogue scores (30" in signed_in(world.organiser).get(f"/runs/{run_id}/").content.decode()
    entry = AccessLog.objects.get(task=world.task)
    assert entry.user == world.organiser and entry.what.startswith(f"per-item scores of run #{run_id} ")
    signed_in(world.alice).get(f"/runs/{run_id}/")  # sees no per-dialogue scores: nothing to log
    assert AccessLog.objects.count() == 1


@pytest.mark.django_db
def test_a_phase_with_runs_keeps_its_gold_and_live_subset_in_the_admin(world: World) -> None:
    phase = add_phase(world, "test", live_subset_size=10)
    staff = signed_in(world.staff)
    assert 'name="live_subset_seed"' in staff.get(f"/admin/tasks/phase/{phase.pk}/change/").content.decode()
    api_upload(world, run_bytes(world.gold))
    page = staff.get(f"/admin/tasks/phase/{phase.pk}/change/").content.decode()
    assert 'name="live_subset_seed"' not in page and 'name="gold_version"' not in page
    assert 'name="results_published"' in page and "never show per-dialogue scores to participants" in page


@pytest.mark.django_db
def test_commands_check_what_they_are_given(world: World) -> None:
    with pytest.raises(CommandError, match="username 'bad name!': Enter a valid username"):
        call_command("create_participant", "bad name!", "--team", "Good Team", stdout=io.StringIO())
    with pytest.raises(CommandError, match="--email 'nope': Enter a valid email address"):
        call_command("create_participant", "fine", "--team", "Good Team", "--email", "nope", stdout=io.StringIO())
    assert not Team.objects.filter(name="Good Team").exists()
    with pytest.raises(CommandError, match="no such gold version"):
        call_command("create_phase", world.task.slug, "p", "--gold-version", "0", "--starts", "2031-01-01",
                     "--ends", "2031-01-02", stdout=io.StringIO())
