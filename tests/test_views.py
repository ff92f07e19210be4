"""HTML pages: the task leaderboard, the CSV, the upload form, a run's page, the team page, sign-in."""

from __future__ import annotations

import csv
import io

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from tasks.models import Run
from tests.conftest import World, committing, run_bytes


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def upload_form(client: Client, world: World, content: bytes, **fields: str):
    with committing():
        return client.post(f"/tasks/{world.task.slug}/upload/",
                           {"file": SimpleUploadedFile("my-run.json", content), "public": "on", **fields})


@pytest.mark.django_db
def test_task_page_shows_both_tabs_sorted_lower_first(world: World) -> None:
    client = signed_in(world.alice)
    upload_form(client, world, run_bytes(world.gold, 0.1), name="good-run")
    upload_form(client, world, run_bytes(world.gold, 0.9, seed=2), name="noisy-run")
    page = Client().get(f"/tasks/{world.task.slug}/?tab=quality&sort=quality.A.rsnod").content.decode()
    assert "lower is better" in page
    assert page.index("good-run") < page.index("noisy-run")
    assert "baseline-uniform-v1" in page and "baseline</span>" in page
    nugget = Client().get(f"/tasks/{world.task.slug}/?tab=nugget&sort=nugget.jsd").content.decode()
    assert ">JSD" in nugget and ">RNSS" in nugget and ">RSNOD" not in nugget
    # Sorting the other way round is not offered: every measure is a distance.
    worst_first = Client().get(f"/tasks/{world.task.slug}/?sort=quality.A.rsnod&order=desc").content.decode()
    assert worst_first.index("good-run") < worst_first.index("noisy-run")


@pytest.mark.django_db
def test_participant_text_is_escaped(world: World) -> None:
    client = signed_in(world.alice)
    upload_form(client, world, run_bytes(world.gold), name="<script>alert(1)</script>",
                description='<img src=x onerror="alert(2)">')
    page = Client().get(f"/tasks/{world.task.slug}/").content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page


@pytest.mark.django_db
def test_leaderboard_csv_has_every_run_and_measure(world: World) -> None:
    upload_form(signed_in(world.alice), world, run_bytes(world.gold), name="=cmd|evil")
    response = Client().get(f"/tasks/{world.task.slug}/leaderboard.csv")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 3
    names = {row["run"] for row in rows}
    assert "'=cmd|evil" in names  # a formula in a spreadsheet would run; it is quoted
    assert {"quality.A.rsnod", "quality.E.nmd", "nugget.jsd", "rank:nugget.rnss"} <= set(rows[0])
    api = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/").json()
    by_id = {str(run["id"]): run for run in api["runs"]}
    for row in rows:
        assert float(row["quality.S.rsnod"]) == by_id[row["run_id"]]["scores"]["measures"]["quality.S.rsnod"]


@pytest.mark.django_db
def test_upload_form_accepts_a_run_and_redirects_to_its_page(world: World) -> None:
    client = signed_in(world.alice)
    response = upload_form(client, world, run_bytes(world.gold), name="web-run")
    run = Run.objects.get(name="web-run")
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'data-status="done"' in page
    assert "RSNOD" in page and "Per-dialogue scores (30 dialogues" in page


@pytest.mark.django_db
def test_upload_form_lists_every_problem(world: World) -> None:
    client = signed_in(world.alice)
    before = Run.objects.count()
    # A run of this gold with two faults: an entry with an unknown id and one that is no object.
    entries = orjson.loads(run_bytes(world.gold))
    entries[1]["id"] = "x"
    response = upload_form(client, world, orjson.dumps([*entries, 5]), name="broken")
    assert response.status_code == 400
    page = response.content.decode()
    assert "nothing was stored" in page
    assert f"[{len(entries)}]: expected an object, got int" in page
    assert "[1].id: dialogue &quot;x&quot; is not in the gold data of this task" in page
    assert Run.objects.count() == before


@pytest.mark.django_db
def test_run_page_permissions(world: World) -> None:
    with committing():
        client = signed_in(world.alice)
        upload_form(client, world, run_bytes(world.gold), name="private", public="off")
    run = Run.objects.get(name="private")
    url = f"/runs/{run.pk}/"
    assert signed_in(world.alice).get(url).status_code == 200
    assert signed_in(world.bob).get(url).status_code == 404
    assert signed_in(world.organiser).get(url).status_code == 200
    # Hidden from the public board (the web form's box not ticked): no public page, the 404 of a
    # missing run; shown, its scores public (a task without phases), everybody reads it (issue 30).
    assert not run.is_public and Client().get(url).status_code == 404
    assert signed_in(world.alice).post(url).status_code == 405
    Run.objects.filter(pk=run.pk).update(is_public=True)
    assert Client().get(url).status_code == 200 and signed_in(world.bob).get(url).status_code == 200


@pytest.mark.django_db
def test_hidden_and_withdrawn_runs(world: World) -> None:
    client = signed_in(world.alice)
    upload_form(client, world, run_bytes(world.gold), name="shy-run")
    run = Run.objects.get(name="shy-run")
    assert signed_in(world.bob).post(f"/runs/{run.pk}/visibility/", {"action": "hide"}).status_code == 404
    client.post(f"/runs/{run.pk}/visibility/", {"action": "hide"})
    assert "shy-run" not in Client().get(f"/tasks/{world.task.slug}/").content.decode()
    assert "shy-run" in signed_in(world.organiser).get(f"/tasks/{world.task.slug}/").content.decode()
    client.post(f"/runs/{run.pk}/visibility/", {"action": "withdraw", "confirm": "yes"})
    run.refresh_from_db()
    assert run.is_withdrawn and Run.objects.filter(pk=run.pk).exists()
    assert "shy-run" not in signed_in(world.organiser).get(f"/tasks/{world.task.slug}/").content.decode()


@pytest.mark.django_db
def test_team_page_and_tokens(world: World) -> None:
    import re

    from knox.models import AuthToken

    client = signed_in(world.alice)
    page = client.get("/team/").content.decode()
    assert "Team Aurora" in page and world.alice_token not in page  # never shown after creation
    # Replacing a token is asked first: the old one would die at once.
    asked = client.post("/team/token/regenerate/")
    assert asked.status_code == 200 and "Replace your API token?" in asked.content.decode()
    assert APIClient(HTTP_AUTHORIZATION=f"Token {world.alice_token}").get(
        f"/api/v1/tasks/{world.task.slug}/my-runs/").status_code == 200  # still alive
    response = client.post("/team/token/regenerate/", {"confirm": "yes"})
    # The one page that shows the token is stored by no cache (issue 24).
    assert set(response["Cache-Control"].split(", ")) == {"max-age=0", "no-cache", "no-store", "must-revalidate",
                                                         "private"}
    new_key = re.search(r'id="token">([0-9a-f]+)<', response.content.decode()).group(1)
    assert new_key != world.alice_token and len(new_key) == 64
    assert [token.token_key for token in AuthToken.objects.filter(user=world.alice)] == [new_key[:15]]
    api = APIClient(HTTP_AUTHORIZATION=f"Token {new_key}")
    assert api.get(f"/api/v1/tasks/{world.task.slug}/my-runs/").status_code == 200
    assert APIClient(HTTP_AUTHORIZATION=f"Token {world.alice_token}").get(
        f"/api/v1/tasks/{world.task.slug}/my-runs/").status_code == 401  # the old one no longer works
    client.post("/team/token/revoke/")
    assert not AuthToken.objects.filter(user=world.alice).exists()
    assert Client().get("/team/").status_code == 302
    assert client.get("/team/token/revoke/").status_code == 405


@pytest.mark.django_db
def test_sign_in_is_rate_limited(world: World) -> None:
    client = Client()
    statuses = [client.post("/accounts/login/", {"username": "alice", "password": "wrong"}).status_code
                for _ in range(12)]
    assert statuses[:10] == [200] * 10
    assert statuses[-1] == 429
    # Even the right password waits once the limit is reached.
    assert client.post("/accounts/login/", {"username": "alice", "password": "alice-pass-1"}).status_code == 429


@pytest.mark.django_db
def test_sign_in_works(world: World) -> None:
    client = Client()
    response = client.post("/accounts/login/", {"username": "alice", "password": "alice-pass-1"})
    assert response.status_code == 302
    assert client.get("/team/").status_code == 200


@pytest.mark.django_db
def test_home_lists_public_tasks_only(world: World) -> None:
    from tasks.organising import create_task

    secret = create_task("secret-task", "stc3", "Secret")
    secret.is_public = False
    secret.save()
    page = Client().get("/").content.decode()
    assert "demo-task" in page and "secret-task" not in page
    assert Client().get("/tasks/secret-task/").status_code == 404
    assert signed_in(world.staff).get("/tasks/secret-task/").status_code == 200


@pytest.mark.django_db
def test_admin_is_for_staff_only(world: World) -> None:
    assert signed_in(world.alice).get("/admin/").status_code == 302
    assert signed_in(world.organiser).get("/admin/").status_code == 302
    assert signed_in(world.staff).get("/admin/tasks/run/").status_code == 200
    assert signed_in(world.staff).get("/admin/tasks/goldversion/add/").status_code == 200


@pytest.mark.django_db
def test_admin_gold_upload_creates_a_version(world: World) -> None:
    import orjson

    client = signed_in(world.staff)
    with committing():
        response = client.post("/admin/tasks/goldversion/add/", {
            "task": world.task.pk, "label": "test",
            "file": SimpleUploadedFile("gold2.json", orjson.dumps(world.gold))})
    assert response.status_code == 302
    assert world.task.gold_versions.filter(number=2, label="test").exists()
    bad = client.post("/admin/tasks/goldversion/add/", {
        "task": world.task.pk, "label": "bad", "file": SimpleUploadedFile("gold3.json", b"[{}]")})
    assert bad.status_code == 200 and "[0].id: missing or not a non-empty string" in bad.content.decode()
    assert not world.task.gold_versions.filter(number=3).exists()


@pytest.mark.django_db
def test_the_sign_in_page_is_titled_with_the_site_name_not_the_host(client, settings) -> None:
    settings.SITE_NAME = "DialEval server"
    page = client.get("/accounts/login/").content.decode()
    assert "<title>Sign in · DialEval server</title>" in page


def test_the_in_process_broker_url_names_its_host(settings, caplog) -> None:
    """Without a broker the embedded default runs jobs in-process over kombu's memory transport;
    with the bare "memory://" kombu logged "No hostname was supplied" whenever the connection was
    described (at every job in the demo's log)."""
    import logging

    import kombu

    from evalserver import settings as production

    with caplog.at_level(logging.WARNING, logger="kombu.connection"):
        kombu.Connection(production.IN_PROCESS_BROKER_URL).clone()
    assert not [record for record in caplog.records if "No hostname" in record.getMessage()]
