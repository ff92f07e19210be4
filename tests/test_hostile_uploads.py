"""Every file of the hostile corpus gets a precise 4xx, stores nothing, uses no quota, changes no row."""

from __future__ import annotations

import html
import json
import resource
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart
from django.utils import timezone
from rest_framework.test import APIClient

from devtools.hostile_corpus import CASES, CORPUS_MAX_BYTES, KIND_CASES, Case, KindCase
from tasks.models import Phase
from tests.conftest import World, committing


def all_row_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_upload_is_refused_cleanly(world: World, settings, case) -> None:
    settings.RUN_UPLOAD_MAX_BYTES = CORPUS_MAX_BYTES
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = CORPUS_MAX_BYTES
    now = timezone.now()
    phase = Phase.objects.create(task=world.task, name="dev", gold_version=world.gold_version,
                                 starts_at=now - timedelta(hours=1), ends_at=now + timedelta(hours=1),
                                 daily_quota=5, total_quota=5)
    content = case.build(world.gold)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    before, files_before = all_row_counts(), sorted(Path(settings.MEDIA_ROOT).rglob("*"))
    started = time.perf_counter()
    with committing():
        response = send(client, f"/api/v1/tasks/{world.task.slug}/runs/", case, content)
    elapsed = time.perf_counter() - started
    assert response.status_code == case.status, response.content[:500]
    assert response["Content-Type"] == "application/json"
    errors = response.json()["errors"]
    assert len(errors) >= case.min_errors
    for fragment in case.expect:
        assert any(fragment in line for line in errors), (fragment, errors[:5])
    assert all(len(line) < 400 for line in errors), "error lines stay short, whatever the input"
    assert all_row_counts() == before
    assert sorted(Path(settings.MEDIA_ROOT).rglob("*")) == files_before
    quota = client.get(f"/api/v1/tasks/{world.task.slug}/my-runs/").json()["quota"]
    assert quota["total_used"] == 0 and quota["phase"] == phase.name
    assert elapsed < 10, f"{case.name} took {elapsed:.1f} s"
    assert not Path("/tmp/evil.json").exists()


def send(client: Client, url: str, case: Case, content: bytes):
    """Post the case's content to ``url`` the way the case says (see ``Case.transport``)."""
    data: dict = {"file": SimpleUploadedFile(case.filename, content), **case.fields}
    if case.transport == "json":
        return client.generic("POST", url, content, content_type="application/json")
    if case.transport == "no-file":
        data.pop("file")
    if case.transport == "many-files":
        data["extra"] = [SimpleUploadedFile(f"x{i}.json", b"[]") for i in range(120)]
    if case.transport == "chunked":
        body = encode_multipart(BOUNDARY, data)
        return client.generic("POST", url, body, content_type=MULTIPART_CONTENT, HTTP_TRANSFER_ENCODING="chunked",
                              CONTENT_LENGTH="")
    return client.post(url, data, format="multipart") if isinstance(client, APIClient) else client.post(url, data)


WEB_CASES = [case for case in CASES if case.web_expect != "skip"]


@pytest.mark.django_db
@pytest.mark.parametrize("case", WEB_CASES, ids=[case.name for case in WEB_CASES])
def test_the_web_form_gives_the_same_precise_messages(world: World, settings, case) -> None:
    """The same corpus through the upload page: the same sentences, in HTML, and nothing stored."""
    settings.RUN_UPLOAD_MAX_BYTES = CORPUS_MAX_BYTES
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = CORPUS_MAX_BYTES
    client = Client()
    client.force_login(world.alice)
    content = case.build(world.gold)
    before = all_row_counts()
    with committing():
        response = send(client, f"/tasks/{world.task.slug}/upload/", case, content)
    assert response.status_code == (case.web_status or case.status), response.content[:500]
    assert response["Content-Type"].startswith("text/html")
    page = html.unescape(response.content.decode())
    for fragment in case.web_expect or case.expect:
        assert fragment in page, (fragment, page[:2000])
    assert all_row_counts() == before


def test_parsing_a_deep_or_huge_file_stays_bounded() -> None:
    """The JSON parser's time and memory stay bounded on the worst inputs of the corpus."""
    from scoring.validation import ValidationFailed, parse_json

    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for payload in (b"[" * 1_000_000 + b"]" * 1_000_000, b'{"a":' * 200_000 + b"1" + b"}" * 200_000):
        started = time.perf_counter()
        with pytest.raises(ValidationFailed, match="nested too deeply"):
            parse_json(payload)
        assert time.perf_counter() - started < 5
    growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    assert growth_mb < 200, f"parser grew the peak memory by {growth_mb:.0f} MB"


@pytest.mark.django_db(transaction=True)
def test_a_real_chunked_upload_gets_411_json(live_server) -> None:
    """Over a socket, as curl -H 'Transfer-Encoding: chunked' sends it: no Content-Length at all."""
    import http.client
    from urllib.parse import urlsplit

    from tests.conftest import make_world

    world = make_world()
    body, _ = multipart_body(b"[]")
    address = urlsplit(live_server.url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
    connection.putrequest("POST", f"/api/v1/tasks/{world.task.slug}/runs/")
    connection.putheader("Authorization", f"Token {world.alice_token}")
    connection.putheader("Content-Type", MULTIPART_CONTENT)
    connection.putheader("Transfer-Encoding", "chunked")
    connection.endheaders()
    connection.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    response = connection.getresponse()
    assert response.status == 411
    assert response.getheader("Content-Type") == "application/json"
    assert json.loads(response.read())["errors"][0].startswith("the request has no Content-Length (it was sent "
                                                                "with Transfer-Encoding: chunked)")
    connection.close()


def multipart_body(content: bytes) -> tuple[bytes, str]:
    return encode_multipart(BOUNDARY, {"file": SimpleUploadedFile("run.json", content)}), MULTIPART_CONTENT


def kind_task(kind: str, world: World) -> tuple[str, list]:
    """A task of ``kind`` with a small gold, and that gold (the stc3 one is the world's)."""
    import orjson

    from fixtures import metric_demo, response_demo
    from tasks.models import Team
    from tasks.organising import create_task, load_gold_version

    if kind == "stc3":
        return world.task.slug, world.gold
    gold = response_demo.generate_gold(30, seed=3) if kind == "response" else metric_demo.generate_gold(6, 3, seed=1)
    task = create_task(f"{kind}-corpus", title=f"{kind} corpus", kind=kind)
    with committing():
        load_gold_version(task, orjson.dumps(gold), "gold.json")
    assert Team.objects.filter(members=world.alice).exists()
    return task.slug, gold


@pytest.mark.django_db
@pytest.mark.parametrize("case", KIND_CASES, ids=[f"{case.kind}: {case.name}" for case in KIND_CASES])
def test_hostile_uploads_of_every_kind_are_refused_with_the_path(world: World, settings, case: KindCase) -> None:
    """Through the API and the web form: the exact sentences, a 400, nothing stored, no quota used."""
    settings.RUN_UPLOAD_MAX_BYTES = CORPUS_MAX_BYTES
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = CORPUS_MAX_BYTES
    slug, gold = kind_task(case.kind, world)
    content = case.build(gold)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    web = Client()
    web.force_login(world.alice)
    before, files_before = all_row_counts(), sorted(Path(settings.MEDIA_ROOT).rglob("*"))
    with committing():
        answer = api.post(f"/api/v1/tasks/{slug}/runs/", {"file": SimpleUploadedFile("run.json", content)},
                          format="multipart")
    assert answer.status_code == case.status, answer.content[:500]
    errors = answer.json()["errors"]
    for fragment in case.expect:
        assert any(fragment in line for line in errors), (fragment, errors[:5])
    with committing():
        page = web.post(f"/tasks/{slug}/upload/", {"file": SimpleUploadedFile("run.json", content)})
    assert page.status_code == case.status
    text = html.unescape(page.content.decode())
    for fragment in case.expect:
        assert fragment in text, (fragment, text[:2000])
    assert "try again in a minute" not in text
    assert all_row_counts() == before
    assert sorted(Path(settings.MEDIA_ROOT).rglob("*")) == files_before
