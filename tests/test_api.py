"""The participant API: uploading runs, following them, and the public leaderboard JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tasks.models import Run, Score, ScoreVector
from tests.conftest import World, committing, run_bytes, stc3_measures

ROOT = Path(__file__).resolve().parent.parent


def client_for(token: str | None = None) -> APIClient:
    client = APIClient()
    if token:
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def upload(world: World, content: bytes, token: str | None = None, **fields: str):
    with committing():
        return client_for(token or world.alice_token).post(
            f"/api/v1/tasks/{world.task.slug}/runs/",
            {"file": SimpleUploadedFile("run.json", content, "application/json"), **fields}, format="multipart")


def row_counts() -> tuple[int, int, int]:
    return Run.objects.count(), Score.objects.count(), ScoreVector.objects.count()


def stored_files(settings) -> list[Path]:
    return sorted(Path(settings.MEDIA_ROOT).rglob("*.json"))


@pytest.mark.django_db
def test_it_accepts_a_valid_run_and_scores_it(world: World) -> None:
    response = upload(world, run_bytes(world.gold, 0.2), name="aurora-1", description="mixes gold and noise")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued"
    assert body["url"] == f"/api/v1/runs/{body['id']}/"
    status = client_for(world.alice_token).get(body["url"]).json()
    # Without a broker the job ran in-process right after the upload committed.
    assert status["status"] == "done"
    assert status["errors"] == []
    measures = status["scores"]["measures"]
    assert {key.split(".")[1] for key in measures if key.startswith("quality.")} == {"A", "S", "E"}
    assert {key for key in measures if key.startswith("nugget.")} == {"nugget.jsd", "nugget.rnss", "nugget.nvd"}
    assert status["scores"]["n_items"] == 30
    run = Run.objects.get(pk=body["id"])
    assert (run.team.name, run.name, run.description) == ("Aurora", "aurora-1", "mixes gold and noise")


@pytest.mark.django_db
def test_leaderboard_numbers_equal_the_score_command(world: World, tmp_path: Path) -> None:
    content = run_bytes(world.gold, 0.4, seed=9)
    run_id = upload(world, content, name="compare").json()["id"]
    (tmp_path / "run.json").write_bytes(content)
    (tmp_path / "gold.json").write_bytes(orjson.dumps(world.gold))
    printed = subprocess.run([sys.executable, "manage.py", "score", str(tmp_path / "run.json"),
                              str(tmp_path / "gold.json"), "--format", "json"], cwd=ROOT, capture_output=True,
                             check=True, text=True).stdout
    expected = json.loads(printed)
    board = client_for().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/").json()
    entry = next(run for run in board["runs"] if run["id"] == run_id)
    assert entry["team"] == "Aurora" and entry["is_baseline"] is False
    # Bit for bit: the server and the offline scorer run the same code on the same files.
    assert entry["scores"]["measures"] == stc3_measures(expected)
    assert len(expected["quality"]) == 3 and len(expected["nugget"]) == 3
    # The per-dialogue vectors behind it average to the same means.
    vectors = {v.key: v.array() for v in ScoreVector.objects.filter(score__run_id=run_id)}
    assert len(vectors) == 3 * 6 + 3
    assert vectors["quality.A.rsnod"].shape == (30,)
    assert vectors["quality.A.rsnod"].mean() == expected["quality"]["A"]["rsnod"]
    assert vectors["nugget.jsd"].mean() == pytest.approx(expected["nugget"]["jsd"], abs=1e-12)


@pytest.mark.django_db
def test_baselines_are_on_the_board_and_marked(world: World) -> None:
    board = client_for().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/").json()
    baselines = [run for run in board["runs"] if run["is_baseline"]]
    assert sorted(run["name"] for run in baselines) == ["baseline-popularity-v1", "baseline-uniform-v1"]
    uniform = next(run for run in baselines if "uniform" in run["name"])
    # A uniform estimate has a known NVD against any gold: mean over dialogues of sum|1/L - p*|/2 > 0.
    assert 0 < uniform["scores"]["measures"]["quality.A.nvd"] < 1
    # Every DQ/ND measure is a distance, and the board says so per measure.
    assert board["kind"] == "stc3" and len(board["measures"]) == 3 * 6 + 3
    assert all(measure["higher_is_better"] is False for measure in board["measures"])
    assert {m["key"] for m in board["measures"] if m["official"]} == {
        "quality.A.rsnod", "quality.A.nmd", "quality.S.rsnod", "quality.S.nmd", "quality.E.rsnod", "quality.E.nmd",
        "nugget.jsd", "nugget.rnss"}


@pytest.mark.django_db
def test_an_invalid_run_lists_every_problem_and_stores_nothing(world: World, settings) -> None:
    entries = orjson.loads(run_bytes(world.gold, 0.2))
    entries[0]["quality"]["A"]["2"] = float("nan")
    entries[1]["nugget"][0] = {"HNUG": 1.0}
    entries[2]["id"] = "not-a-dialogue"
    before, files_before = row_counts(), stored_files(settings)
    response = upload(world, json.dumps(entries).encode())
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert '[0].quality.A["2"]: value nan is not a finite number' in errors
    assert any(line.startswith("[1].nugget[0]: label \"HNUG\" is not allowed on a customer turn") for line in errors)
    assert '[2].id: dialogue "not-a-dialogue" is not in the gold data of this task' in errors
    assert any(line.startswith("$: the run misses 1 of the 30 gold dialogue(s)") for line in errors)
    assert row_counts() == before
    assert stored_files(settings) == files_before


@pytest.mark.django_db
@pytest.mark.parametrize("content, fragment", [
    (b"", "file is empty"),
    (b"\xef\xbb\xbf[]", "byte-order mark"),
    (b"\xff\xfe[1]", "not UTF-8 (looks like UTF-16, little-endian, with a byte-order mark)"),
    (b'{"id": 1}', "expected a JSON list of dialogues, got an object"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b"[1, 2", "not valid JSON"),
])
def test_malformed_files_get_a_clear_400(world: World, content: bytes, fragment: str) -> None:
    before = row_counts()
    response = upload(world, content)
    assert response.status_code == 400
    assert any(fragment in line for line in response.json()["errors"]), response.json()
    assert row_counts() == before


@pytest.mark.django_db
def test_a_file_over_the_limit_is_refused_with_413(world: World, settings) -> None:
    settings.RUN_UPLOAD_MAX_BYTES = 2048
    response = upload(world, b"[" + b" " * 4096 + b"]")
    assert response.status_code == 413
    assert "over the limit of 2048 bytes" in response.json()["errors"][0]


@pytest.mark.django_db
def test_upload_needs_a_file_and_a_token(world: World) -> None:
    missing = client_for(world.alice_token).post(f"/api/v1/tasks/{world.task.slug}/runs/", {}, format="multipart")
    assert missing.status_code == 400
    assert missing.json() == {"errors": ["file: missing; send the run as a multipart field named 'file'"]}
    anonymous = client_for().post(f"/api/v1/tasks/{world.task.slug}/runs/",
                                  {"file": SimpleUploadedFile("r.json", b"[]")}, format="multipart")
    assert anonymous.status_code == 401
    wrong = client_for("0" * 40).get("/api/v1/runs/1/")
    assert wrong.status_code == 401
    assert wrong.json() == {"errors": ["Invalid token."]}


@pytest.mark.django_db
def test_upload_to_an_unknown_task_is_404(world: World) -> None:
    response = client_for(world.alice_token).post("/api/v1/tasks/nope/runs/",
                                                  {"file": SimpleUploadedFile("r.json", b"[]")}, format="multipart")
    assert response.status_code == 404


@pytest.mark.django_db
def test_a_user_without_team_cannot_upload(world: World) -> None:
    from django.contrib.auth import get_user_model

    from tasks.tokens import issue_token

    loner = get_user_model().objects.create_user("loner", password="loner-pass-1")
    response = upload(world, run_bytes(world.gold), token=issue_token(loner))
    assert response.status_code == 403
    assert "not a member of any team" in response.json()["errors"][0]


@pytest.mark.django_db
def test_run_status_is_for_the_owning_team_and_organisers_only(world: World) -> None:
    run_id = upload(world, run_bytes(world.gold)).json()["id"]
    url = f"/api/v1/runs/{run_id}/"
    assert client_for(world.alice_token).get(url).status_code == 200
    assert client_for(world.bob_token).get(url).status_code == 404  # another team: not even its existence
    assert client_for().get(url).status_code == 401
    organiser = APIClient()
    organiser.force_authenticate(world.organiser)
    assert organiser.get(url).json()["team"] == "Aurora"
    assert client_for(world.alice_token).post(url).status_code == 405


@pytest.mark.django_db
def test_rejected_text_fields(world: World) -> None:
    response = upload(world, run_bytes(world.gold), name="bad\x00name", description="x" * 5001, priority="one")
    assert response.status_code == 400
    assert response.json()["errors"] == ["priority: expected a whole number, got 'one'"]
    response = upload(world, run_bytes(world.gold), name="bad\x07name", description="x" * 5001)
    assert response.json()["errors"] == [
        "name: contains U+0007 BELL at position 4; invisible and control characters are not allowed",
        "description: at most 5000 characters (got 5001)"]


@pytest.mark.django_db
def test_one_subtask_runs_appear_on_their_tab_only(world: World) -> None:
    upload(world, run_bytes(world.gold, subtasks=("quality",)), name="dq-only")
    upload(world, run_bytes(world.gold, subtasks=("nugget",)), token=world.bob_token, name="nd-only")
    board = client_for().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/").json()
    by_name = {run["name"]: run for run in board["runs"]}
    dq, nd = by_name["dq-only"]["scores"]["measures"], by_name["nd-only"]["scores"]["measures"]
    assert dq and all(key.startswith("quality.") for key in dq)
    assert nd and all(key.startswith("nugget.") for key in nd)


@pytest.mark.django_db
def test_ranks_share_ties_and_follow_lower_is_better(world: World) -> None:
    content = run_bytes(world.gold, 0.1, seed=3)
    upload(world, content, name="first")
    upload(world, content, token=world.bob_token, name="same-file")
    upload(world, run_bytes(world.gold, 0.9, seed=4), name="worse")
    board = client_for().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/").json()
    ranks = {run["name"]: run["ranks"]["quality.A.rsnod"] for run in board["runs"]}
    values = {run["name"]: run["scores"]["measures"]["quality.A.rsnod"] for run in board["runs"]}
    assert ranks["first"] == ranks["same-file"] == 1
    assert ranks["worse"] == 1 + sum(value < values["worse"] for value in values.values())
    assert np.isclose(values["first"], values["same-file"])


@pytest.mark.django_db
def test_openapi_schema_lists_the_endpoints(client) -> None:
    response = client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    assert {"/api/v1/tasks/{slug}/runs/", "/api/v1/runs/{run_id}/",
            "/api/v1/tasks/{slug}/leaderboard/"} <= set(schema["paths"])
    assert client.get("/api/v1/docs/").status_code == 200


@pytest.mark.django_db
def test_uploads_are_rate_limited_per_user(world: World, settings) -> None:
    settings.EVALSERVER_UPLOAD_RATE = "3/min"
    responses = [upload(world, b"[]") for _ in range(4)]
    other_team = upload(world, b"[]", token=world.bob_token)
    assert [response.status_code for response in responses] == [400, 400, 400, 429]
    assert responses[-1].json()["errors"][0].startswith("Request was throttled")
    assert other_team.status_code == 400  # every user has a budget of their own
