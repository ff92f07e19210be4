"""Phases, quotas, the live subset of a test phase, and who sees which scores."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tasks import changes, errors, submissions
from tasks.models import Phase, Run, Score
from tests.conftest import (
    World,
    committing,
    make_world,
    require_service,
    run_bytes,
    stc3_server_summary,
    using_postgres,
)

ROOT = Path(__file__).resolve().parent.parent


def add_phase(world: World, name: str = "test", kind: str = Phase.TEST, start: timedelta = timedelta(hours=-1),
              end: timedelta = timedelta(hours=1), **fields) -> Phase:
    now = timezone.now()
    return Phase.objects.create(task=world.task, name=name, kind=kind, gold_version=world.gold_version,
                                starts_at=now + start, ends_at=now + end, **fields)


def api_upload(world: World, content: bytes, token: str | None = None, **fields):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token or world.alice_token}")
    with committing():
        return client.post(f"/api/v1/tasks/{world.task.slug}/runs/",
                           {"file": SimpleUploadedFile("run.json", content), **fields}, format="multipart")


@pytest.mark.django_db
def test_uploads_are_refused_outside_every_phase(world: World) -> None:
    add_phase(world, "dev", Phase.DEVELOPMENT, start=timedelta(days=-10), end=timedelta(days=-5))
    add_phase(world, "test", Phase.TEST, start=timedelta(days=1), end=timedelta(days=2))
    response = api_upload(world, run_bytes(world.gold))
    assert response.status_code == 403
    assert response.json()["errors"][0].startswith("no phase of demo-task is open for submissions now; "
                                                   "the next phase, test, opens at ")


@pytest.mark.django_db
def test_phase_boundaries_are_exact(world: World) -> None:
    phase = add_phase(world, "dev", Phase.DEVELOPMENT)
    assert phase.is_open(phase.starts_at)
    assert not phase.is_open(phase.ends_at)  # the end is exclusive
    assert not phase.is_open(phase.starts_at - timedelta(microseconds=1))
    accepted = api_upload(world, run_bytes(world.gold))
    assert accepted.status_code == 202
    assert Run.objects.get(pk=accepted.json()["id"]).phase == phase
    phase.ends_at = timezone.now() - timedelta(seconds=1)  # as an organiser would, in the admin
    phase.save()
    assert api_upload(world, run_bytes(world.gold, seed=2)).status_code == 403


@pytest.mark.django_db
def test_daily_and_total_quotas_and_what_counts(world: World) -> None:
    phase = add_phase(world, "dev", Phase.DEVELOPMENT, daily_quota=2, total_quota=3)
    assert api_upload(world, run_bytes(world.gold, seed=1)).status_code == 202
    assert api_upload(world, b"not json").status_code == 400  # rejected by validation: uses no quota
    assert api_upload(world, run_bytes(world.gold, seed=2)).status_code == 202
    refused = api_upload(world, run_bytes(world.gold, seed=3))
    assert refused.status_code == 429
    assert "has used its 2 runs for today (UTC); the count resets at " in refused.json()["errors"][0]
    # A run that failed (never the team's doing: invalid files are refused at upload) gives its quota back.
    failed = Run.objects.filter(phase=phase).order_by("pk").last()
    Run.objects.filter(pk=failed.pk).update(status=Run.FAILED)
    assert api_upload(world, run_bytes(world.gold, seed=4)).status_code == 202
    # Yesterday's runs count towards the total but not today's quota.
    Run.objects.filter(phase=phase).update(created_at=timezone.now() - timedelta(days=1))
    assert api_upload(world, run_bytes(world.gold, seed=5)).status_code == 202
    total = api_upload(world, run_bytes(world.gold, seed=6))
    assert total.status_code == 429 and "used all 3 runs of the dev phase" in total.json()["errors"][0]
    # The other team has its own quota.
    assert api_upload(world, run_bytes(world.gold, seed=7), token=world.bob_token).status_code == 202
    quota = APIClient()
    quota.credentials(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    numbers = quota.get(f"/api/v1/tasks/{world.task.slug}/my-runs/").json()["quota"]
    assert numbers["total_used"] == 3 and numbers["total_remaining"] == 0
    assert numbers["daily_used"] == 1 and numbers["daily_remaining"] == 1
    assert numbers["daily_resets_at"].endswith("T00:00:00+00:00")


@pytest.mark.django_db
def test_the_test_phase_requires_a_method_description(world: World) -> None:
    add_phase(world, requires_method_description=True)
    response = api_upload(world, run_bytes(world.gold))
    assert response.status_code == 400
    assert response.json()["errors"] == ["description: the test phase requires a description of the method"]
    assert api_upload(world, run_bytes(world.gold), description="BERT, fine-tuned").status_code == 202


@pytest.mark.django_db
def test_live_score_is_the_score_command_on_exactly_the_subset(world: World, tmp_path: Path) -> None:
    phase = add_phase(world, live_subset_size=12, live_subset_seed=7, per_item_feedback=False)
    content = run_bytes(world.gold, 0.35, seed=11)
    run_id = api_upload(world, content).json()["id"]
    subset = phase.live_subset()
    assert len(subset) == 12 and list(subset) == sorted(set(subset.tolist()))
    live = Score.objects.get(run_id=run_id, scope=Score.LIVE).summary
    full = Score.objects.get(run_id=run_id, scope=Score.FULL).summary
    chosen = {world.gold[i]["id"] for i in subset}
    (tmp_path / "gold-subset.json").write_bytes(orjson.dumps([d for d in world.gold if d["id"] in chosen]))
    (tmp_path / "run-subset.json").write_bytes(orjson.dumps([e for e in orjson.loads(content) if e["id"] in chosen]))
    (tmp_path / "gold.json").write_bytes(orjson.dumps(world.gold))
    (tmp_path / "run.json").write_bytes(content)

    def score(run: str, gold: str) -> dict:
        return json.loads(subprocess.run([sys.executable, "manage.py", "score", str(tmp_path / run),
                                          str(tmp_path / gold)], cwd=ROOT, check=True, capture_output=True,
                                         text=True).stdout)

    expected_live, expected_full = score("run-subset.json", "gold-subset.json"), score("run.json", "gold.json")
    assert live["n_items"] == 12 and full["n_items"] == 30
    for expected, got in ((expected_live, live), (expected_full, full)):
        assert got == stc3_server_summary(expected)


@pytest.mark.django_db
def test_scores_on_test_data_stay_with_organisers_until_published(world: World) -> None:
    phase = add_phase(world, live_subset_size=10, per_item_feedback=False)
    run_id = api_upload(world, run_bytes(world.gold)).json()["id"]
    owner = APIClient()
    owner.credentials(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    seen = owner.get(f"/api/v1/runs/{run_id}/").json()
    assert seen["scores_scope"] == "live" and seen["scores"]["n_items"] == 10
    organiser = APIClient()
    organiser.force_authenticate(world.organiser)
    assert organiser.get(f"/api/v1/runs/{run_id}/").json()["scores"]["n_items"] == 30
    board = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/").json()
    assert board["scope"] == "live"
    assert all(run["scores"]["n_items"] == 10 for run in board["runs"])
    alice = Client()
    alice.force_login(world.alice)
    page = alice.get(f"/runs/{run_id}/").content.decode()
    assert "Per-dialogue scores" not in page and "on the live subset" in page
    # A publication ticked while the phase still takes runs (the admin, say) changes nothing yet:
    # a run submitted meanwhile would learn its whole-set scores.
    Phase.objects.filter(pk=phase.pk).update(results_published=True)
    changes.board_changed(world.task)
    assert owner.get(f"/api/v1/runs/{run_id}/").json()["scores"]["n_items"] == 10
    assert Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/").json()["scope"] == "live"
    # Once the phase has ended, publication opens the full scores and the per-dialogue feedback.
    phase.ends_at, phase.results_published = timezone.now(), True
    phase.save()
    assert owner.get(f"/api/v1/runs/{run_id}/").json()["scores"]["n_items"] == 30
    assert "Per-dialogue scores (30 dialogues" in alice.get(f"/runs/{run_id}/").content.decode()
    board = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/").json()
    assert board["scope"] == "full"


@pytest.mark.django_db
@pytest.mark.parametrize("lookups_cached", [False, True])
def test_final_board_is_hidden_until_published(world: World, settings, lookups_cached: bool) -> None:
    settings.EVALSERVER_CACHE_TASK_LOOKUPS = lookups_cached
    test = add_phase(world, "test", live_subset_size=10)
    api_upload(world, run_bytes(world.gold), description="m")
    test.starts_at, test.ends_at = timezone.now() - timedelta(hours=2), timezone.now() - timedelta(minutes=1)
    test.save()
    final = add_phase(world, "final", Phase.FINAL, start=timedelta(seconds=-30), end=timedelta(days=30))
    public = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=final").json()
    assert public["runs"] == [] and "not published" in public["note"]
    organiser = APIClient()
    organiser.force_authenticate(world.organiser)
    assert len(organiser.get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=final").json()["runs"]) == 1
    final.results_published = True  # ticked in the admin: the cached boards follow at once
    final.save()
    published = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=final").json()
    assert [run["scores"]["n_items"] for run in published["runs"]] == [30]


@pytest.mark.django_db
def test_organiser_dashboard_and_exports(world: World) -> None:
    import io
    import zipfile

    from tasks.models import AccessLog

    add_phase(world, "dev", Phase.DEVELOPMENT)
    api_upload(world, run_bytes(world.gold), name="r1")
    api_upload(world, b"[]", name="bad")  # rejected: not on the dashboard
    organiser = Client()
    organiser.force_login(world.organiser)
    page = organiser.get(f"/organiser/{world.task.slug}/?q=r1").content.decode()
    assert "r1" in page and "Aurora" in page
    download = organiser.get(f"/organiser/{world.task.slug}/runs.zip?phase=dev")
    assert download["Content-Disposition"] == 'attachment; filename="demo-task-dev-runs.zip"'
    archive = zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content)))
    manifest = json.loads(archive.read("manifest.json"))
    assert [entry["name"] for entry in manifest] == ["r1"]
    assert archive.read(manifest[0]["file"]) == run_bytes(world.gold)
    results = organiser.get(f"/organiser/{world.task.slug}/results.json").json()["results"]
    assert {row["run"] for row in results} == {"r1", "baseline-uniform-v1", "baseline-popularity-v1"}
    csv_text = organiser.get(f"/organiser/{world.task.slug}/results.csv").content.decode()
    assert csv_text.splitlines()[0].startswith("run_id,team,run,")
    assert AccessLog.objects.filter(task=world.task, user=world.organiser).count() == 3
    for user in (world.alice, world.bob):
        other = Client()
        other.force_login(user)
        for url in (f"/organiser/{world.task.slug}/", f"/organiser/{world.task.slug}/runs.zip",
                    f"/organiser/{world.task.slug}/results.csv"):
            assert other.get(url).status_code == 404
    assert Client().get(f"/organiser/{world.task.slug}/").status_code == 302
    with committing():
        response = organiser.post(f"/organiser/{world.task.slug}/rescore/", {"confirm": "yes"})
    assert response.status_code == 302
    assert set(Run.objects.filter(task=world.task).values_list("status", flat=True)) == {Run.DONE}


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_concurrent_uploads_never_exceed_the_quota() -> None:
    """Twelve simultaneous uploads from one team against a daily quota of 4, on PostgreSQL."""
    require_service("PostgreSQL", 5432)
    if not using_postgres():
        pytest.skip("row locks are only meaningful on PostgreSQL; the suite runs on SQLite here")
    world = make_world()
    phase = add_phase(world, "dev", Phase.DEVELOPMENT, daily_quota=4, total_quota=50)
    contents = [run_bytes(world.gold, seed=seed) for seed in range(12)]
    barrier = threading.Barrier(len(contents))
    outcomes: list[str] = []

    def upload(content: bytes) -> None:
        barrier.wait()
        try:
            submissions.submit_run(world.task, world.alice, submissions.Submission(content=content), phase)
            outcomes.append("accepted")
        except errors.Rejected as rejected:
            outcomes.append(f"{rejected.status}")
        finally:
            connection.close()

    threads = [threading.Thread(target=upload, args=(content,)) for content in contents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["429"] * 8 + ["accepted"] * 4
    assert Run.objects.filter(phase=phase).count() == 4


def overlapping_phases(world: World) -> tuple[Phase, Phase, list]:
    """Issue 43's situation: the development phase (gold version 1) still open when the test phase
    (gold version 2, other dialogues) opens."""
    from tasks.organising import load_gold_version

    test_gold = [{**dialogue, "id": f"test-{dialogue['id']}"} for dialogue in world.gold[:12]]
    with committing():
        version = load_gold_version(world.task, orjson.dumps(test_gold), "test-gold.json", world.organiser)
    now = timezone.now()
    development = Phase.objects.create(task=world.task, name="development", kind=Phase.DEVELOPMENT,
                                       gold_version=world.gold_version, starts_at=now - timedelta(days=30),
                                       ends_at=now + timedelta(days=2))
    test = Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=version,
                                starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=5))
    return development, test, test_gold


@pytest.mark.django_db
def test_an_upload_naming_no_phase_while_two_are_open_is_refused_with_both_listed(world: World) -> None:
    development, test, test_gold = overlapping_phases(world)
    response = api_upload(world, run_bytes(test_gold))
    assert response.status_code == 400
    assert response.json()["errors"] == [
        f"phase: 2 phases of demo-task are open: development (development, gold version 1, until "
        f"{development.ends_at:%Y-%m-%d %H:%M} UTC); test (test, gold version 2, until {test.ends_at:%Y-%m-%d %H:%M} "
        "UTC). Nothing was stored: name one with the upload's phase field (the form's Phase choice, the API's "
        "'phase' field, the command-line client's --phase)"]
    assert not Run.objects.filter(team__isnull=False).exists()
    # The API's task status says so too, and lists the choices.
    status = APIClient(HTTP_AUTHORIZATION=f"Token {world.alice_token}").get(
        f"/api/v1/tasks/{world.task.slug}/my-runs/").json()
    assert status["submissions"]["open"] is True and status["submissions"]["phases"] == ["development", "test"]


@pytest.mark.django_db
def test_an_upload_naming_its_phase_goes_there_and_is_scored_on_its_gold(world: World) -> None:
    _, test, test_gold = overlapping_phases(world)
    response = api_upload(world, run_bytes(test_gold), description="a method", phase="test")
    assert response.status_code == 202, response.json()
    run = Run.objects.get(team__isnull=False)
    assert (run.phase, run.gold_version.number, run.status) == (test, 2, Run.DONE)
    assert response.json()["phase"] == "test"
    assert (response.json()["quota"]["phase"], response.json()["quota"]["total_remaining"]) == ("test", 199)
    # The development phase takes development runs as before, when named.
    response = api_upload(world, run_bytes(world.gold), phase="development")
    assert response.status_code == 202 and response.json()["phase"] == "development"


@pytest.mark.django_db
def test_a_run_sent_to_the_wrong_phase_is_told_which_phase_and_gold_it_was_read_against(world: World) -> None:
    _, _, test_gold = overlapping_phases(world)
    errors = api_upload(world, run_bytes(test_gold), phase="development").json()["errors"]
    assert errors[0] == (
        f"$: none of the {len(test_gold)} ids in this file is an id of this task's gold data (the file's first is "
        f'"{test_gold[0]["id"]}"); it looks like a run of this kind (it has \'quality\' and \'nugget\'), for other '
        "gold data")
    assert errors[-1] == (
        "the file was checked against gold version 1 of demo-task, the gold of its development phase (development); "
        "also open: test (gold version 2); to send the run there, name one with the upload's phase field (the "
        "form's Phase choice, the API's 'phase' field, the command-line client's --phase)")
    assert not Run.objects.filter(team__isnull=False).exists()


@pytest.mark.django_db
def test_a_phase_that_does_not_exist_or_is_not_open_is_refused_by_name(world: World) -> None:
    development, test, test_gold = overlapping_phases(world)
    final = Phase.objects.create(task=world.task, name="final", kind=Phase.FINAL, gold_version=test.gold_version,
                                 starts_at=test.starts_at, ends_at=test.ends_at)
    response = api_upload(world, run_bytes(test_gold), phase="Test")  # names are exact
    assert (response.status_code, response.json()["errors"]) == (
        400, ["phase: demo-task has no phase named 'Test'; its phases are development, test, final"])
    response = api_upload(world, run_bytes(test_gold), phase=final.name)
    assert (response.status_code, response.json()["errors"]) == (
        403, ["phase: the final phase of demo-task is not open for submissions (a final phase takes no runs); "
              "open now: development, test"])
    Phase.objects.filter(pk=development.pk).update(ends_at=timezone.now() - timedelta(minutes=1))
    ended = Phase.objects.get(pk=development.pk).ends_at
    response = api_upload(world, run_bytes(world.gold), phase="development")
    assert (response.status_code, response.json()["errors"]) == (
        403, [f"phase: the development phase of demo-task is not open for submissions (it ended at "
              f"{ended:%Y-%m-%d %H:%M} UTC); open now: test"])
    # With one phase open, naming none goes there, as before.
    assert api_upload(world, run_bytes(test_gold), description="m").json()["phase"] == "test"


@pytest.mark.django_db
def test_the_upload_form_asks_for_the_phase_while_several_are_open(world: World) -> None:
    development, test, test_gold = overlapping_phases(world)
    client = Client()
    client.force_login(world.alice)
    page = client.get(f"/tasks/{world.task.slug}/upload/").content.decode()
    assert '<select name="phase" id="id_phase" required>' in page
    assert (f'<option value="test">test (test phase, gold version 2, open until {test.ends_at:%Y-%m-%d %H:%M} UTC)'
            '</option>') in page
    assert "2 phases are open now. Choose the one this run is for" in page
    refused = client.post(f"/tasks/{world.task.slug}/upload/",
                          {"file": SimpleUploadedFile("run.json", run_bytes(test_gold))})
    assert refused.status_code == 400 and "phase: 2 phases of demo-task are open" in refused.content.decode()
    with committing():
        client.post(f"/tasks/{world.task.slug}/upload/", {"file": SimpleUploadedFile("run.json", run_bytes(test_gold)),
                                                          "phase": "test", "description": "m"})
    assert Run.objects.get(team__isnull=False).phase == test


@pytest.mark.django_db
def test_organisers_are_warned_when_phases_overlap(world: World) -> None:
    import io

    from django.core.management import call_command

    err = io.StringIO()
    call_command("create_phase", world.task.slug, "development", "--starts", "2030-01-01T00:00",
                 "--ends", "2030-03-01T00:00", stdout=io.StringIO(), stderr=err)
    assert err.getvalue() == ""  # alone: nothing to say
    call_command("create_phase", world.task.slug, "final", "--kind", "final", "--starts", "2030-02-01T00:00",
                 "--ends", "2030-04-01T00:00", stdout=io.StringIO(), stderr=err)
    assert err.getvalue() == ""  # a final phase takes no runs: no upload has to choose
    call_command("create_phase", world.task.slug, "test", "--kind", "test", "--starts", "2030-02-15T00:00",
                 "--ends", "2030-03-15T00:00", stdout=io.StringIO(), stderr=err)
    assert err.getvalue() == (
        "warning: the test phase overlaps the development phase from 2030-02-15 00:00 to 2030-03-01 "
        "00:00 UTC: while both are open, every upload must name its phase (the upload form's Phase choice, the "
        "API's phase field, the command-line client's --phase); one that names none is refused with the open "
        "phases listed. Tell participants, or let the phases follow one another\n")
    # The dashboard's phase form says the same when a phase is edited into an overlap.
    client = Client()
    client.force_login(world.organiser)
    answer = client.post(f"/organiser/{world.task.slug}/phase/?phase=development", {
        "name": "development", "kind": "development", "gold_version": world.gold_version.number,
        "starts_at": "2030-01-01T00:00", "ends_at": "2030-03-01T00:00", "daily_quota": 20, "total_quota": 200,
        "live_subset_seed": 0},
        follow=True)
    page = answer.content.decode()
    assert answer.status_code == 200, page
    assert ("The development phase overlaps the test phase from 2030-02-15 00:00 to 2030-03-01 00:00 UTC: "
            "while both are open") in page


@pytest.mark.django_db
def test_a_run_failed_by_a_gold_change_names_its_phase_and_gold_version(world: World) -> None:
    from tasks.organising import load_gold_version

    add_phase(world, "development", Phase.DEVELOPMENT)
    response = api_upload(world, run_bytes(world.gold))
    assert response.status_code == 202
    phase = Phase.objects.get(name="development")
    with committing():
        load_gold_version(world.task, orjson.dumps(world.gold[:20]), "smaller.json", phases=[phase])
    run = Run.objects.get(team__isnull=False)
    assert run.status == Run.FAILED
    assert run.errors[0] == ("the run does not validate against gold version 2 of the development phase (the "
                             "organisers changed the gold); it does not count against your quota:")
