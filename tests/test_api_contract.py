"""The API keeps its contract (issue 41, item 7): every status and content type a client can get
is in the OpenAPI schema, every /api/ path answers JSON, unknown upload fields are named.

The proof is schemathesis (an independent reader of the schema): requests generated from the live
schema, sent to a live server with a participant's token, every answer checked with ``--checks
all`` (server errors, undocumented statuses and content types, bodies against their schemas,
schema-valid requests refused, invalid ones accepted, ...), finding nothing. One setting is ours,
said here: no schema can say which file is a run of a task's gold, so a schema-valid upload may
still be refused with 400 (its file), 409 (its priority taken) or 413, and the
positive-data check expects those for the upload operation.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from tasks.models import Run
from tests.conftest import run_bytes

ST = Path(sys.executable).parent / "st"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_schemathesis_finds_nothing_with_a_participants_token(world: Any, live_server: Any, tmp_path: Path,
                                                              settings: Any) -> None:
    settings.EVALSERVER_UPLOAD_RATE = "100000/min"
    run = Run.objects.filter(task=world.task).order_by("pk").first()
    # Some operations get identifiers that exist (a random slug or id reaches only the 404 answer);
    # the others are left to random values, which is how a slug with a newline was found.
    config = tmp_path / "schemathesis.toml"
    config.write_text(f'''
[[operations]]
include-path = "/api/v1/tasks/{{slug}}/runs/"
parameters = {{ slug = "{world.task.slug}" }}
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "413", "429"]

[[operations]]
include-path = "/api/v1/tasks/{{slug}}/my-runs/"
parameters = {{ slug = "{world.task.slug}" }}

[[operations]]
include-path-regex = "^/api/v1/runs/"
parameters = {{ run_id = {run.pk} }}
''')
    completed = subprocess.run(
        [str(ST), "--config-file", str(config), "run", f"{live_server.url}/api/v1/schema/", "--checks", "all",
         "-H", f"Authorization: Token {world.alice_token}", "--max-examples", "12", "--seed", "41",
         "--continue-on-failure", "--no-color", f"--report-dir={tmp_path / 'reports'}"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-6000:]
    assert " passed" in output and "failure" not in output.split("SUMMARY")[-1], output[-3000:]


@pytest.mark.django_db
def test_an_unknown_upload_field_is_named_and_nothing_is_stored(world: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    before = Run.objects.count()
    api = Client(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    answer = api.post(f"/api/v1/tasks/{world.task.slug}/runs/", {
        "file": SimpleUploadedFile("run.json", run_bytes(world.gold)), "name": "with-a-paper",
        "paper_url": "https://example.org/paper.pdf", "Priority": "1"})
    assert answer.status_code == 400
    assert answer.json() == {"errors": [
        "'Priority': unknown field; an upload takes file, priority, public, name, description, phase, team",
        "'paper_url': unknown field; an upload takes file, priority, public, name, description, phase, team"]}
    assert Run.objects.count() == before
    # The web form's own fields (its CSRF token, its buttons) are not the API's business.
    accepted = api.post(f"/api/v1/tasks/{world.task.slug}/runs/", {
        "file": SimpleUploadedFile("run.json", run_bytes(world.gold)), "name": "plain"})
    assert accepted.status_code == 202, accepted.content


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/tasks/a%0Ab/runs/", "/api/v1/tasks/%0A/", "/api/v2/", "/api/",
                                  "/api/v1/tasks/x/leaderboard", "/api/v1/runs/0/"])
def test_every_api_path_answers_json(world: Any, path: str) -> None:
    api = Client(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    for method in ("get", "post"):
        answer = getattr(api, method)(path)
        assert answer.status_code in (404, 405), (method, path, answer.status_code)
        assert answer["Content-Type"] == "application/json", (method, path)
        assert set(answer.json()) == {"errors"}


@pytest.mark.django_db
def test_a_page_that_does_not_exist_is_still_the_sites_page(client: Client) -> None:
    answer = client.get("/no-such-page/")
    assert answer.status_code == 404 and answer["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_the_schema_documents_every_answer(client: Client) -> None:
    schema = json.loads(client.get("/api/v1/schema/", {"format": "json"}).content)
    board = schema["paths"]["/api/v1/tasks/{slug}/leaderboard/"]["get"]["responses"]
    assert {"200", "304", "404", "500", "503"} <= set(board)
    assert board["404"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Errors"}
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            assert {"500", "503"} <= set(operation["responses"]), (path, method)
            assert "Retry-After" in operation["responses"]["503"]["headers"]
    upload = schema["paths"]["/api/v1/tasks/{slug}/runs/"]["post"]
    body = upload["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert body["additionalProperties"] is False and body["required"] == ["file"]
    assert set(body["properties"]) == {"file", "name", "description", "priority", "public", "phase", "team"}
    assert (body["properties"]["priority"]["minimum"], body["properties"]["priority"]["maximum"]) == (1, 99)
    assert {"202", "400", "401", "403", "404", "409", "411", "413", "415", "429", "503"} <= set(upload["responses"])
