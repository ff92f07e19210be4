"""One upload path: the web form and the API read a request with the same function
(``tasks.submissions.submission_from_request``) and judge its size with the same rule
(``upload_size_problem``); they differ only where ``UploadForm`` says (what an absent ``public``
means, how a missing file is told), and in how the answer is shown (HTML form or JSON)."""

from __future__ import annotations

import html

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from tasks.errors import Rejected
from tasks.models import Run
from tasks.submissions import API_FORM, FORM_ROOM, WEB_FORM, submission_from_request, upload_size_problem
from tests.conftest import World, committing, run_bytes


def request_with(fields: dict, file: bytes | None = b"[]", filename: str = "run.json"):
    data = dict(fields)
    if file is not None:
        data["file"] = SimpleUploadedFile(filename, file)
    return RequestFactory().post("/upload/", data)


@pytest.mark.parametrize("form", [WEB_FORM, API_FORM])
def test_the_fields_are_read_the_same_way(form) -> None:
    submission = submission_from_request(
        request_with({"name": "Aurora-1", "description": "BERT", "priority": " 2 ", "public": "no"},
                     file=b'[{"id": 1}]', filename="../my run.json"), form)
    assert (submission.content, submission.filename, submission.name, submission.description,
            submission.priority, submission.is_public) == (b'[{"id": 1}]', "my run.json", "Aurora-1", "BERT", 2,
                                                           False)


@pytest.mark.parametrize("value, public", [("on", True), ("true", True), ("1", True), ("yes", True),
                                           ("off", False), ("false", False), ("0", False), ("no", False)])
@pytest.mark.parametrize("form", [WEB_FORM, API_FORM])
def test_public_means_the_same_in_both(form, value: str, public: bool) -> None:
    assert submission_from_request(request_with({"public": value}), form).is_public is public


def test_only_an_absent_public_differs() -> None:
    """The web form's box is a checkbox: unticked, the browser sends nothing. The API's field
    defaults to public."""
    assert submission_from_request(request_with({}), WEB_FORM).is_public is False
    assert submission_from_request(request_with({}), API_FORM).is_public is True


@pytest.mark.parametrize("form", [WEB_FORM, API_FORM])
def test_every_problem_of_the_request_is_listed_at_once(form) -> None:
    with pytest.raises(Rejected) as refused:
        submission_from_request(request_with({"priority": "first", "public": "maybe"}, file=None), form)
    assert refused.value.status == 400
    assert refused.value.errors == ["priority: expected a whole number, got 'first'",
                                    "public: expected true or false", form.missing_file]


@pytest.mark.parametrize("form", [WEB_FORM, API_FORM])
def test_a_text_field_sent_as_a_file_is_refused_by_both(form) -> None:
    """The web form used to drop such a part silently; now both paths say so."""
    request = RequestFactory().post("/upload/", {"file": SimpleUploadedFile("run.json", b"[]"),
                                                 "name": SimpleUploadedFile("name.txt", b"Aurora")})
    with pytest.raises(Rejected) as refused:
        submission_from_request(request, form)
    assert refused.value.errors == ["name: expected a text field, got a file"]


def test_the_size_limit_is_one_rule(settings) -> None:
    settings.RUN_UPLOAD_MAX_BYTES = 2048
    assert upload_size_problem(2048) is None
    assert upload_size_problem(2049) == "file: 2049 bytes is over the limit of 2048 bytes"
    assert upload_size_problem(2048 + FORM_ROOM, whole_request=True) is None
    assert upload_size_problem(2049 + FORM_ROOM, whole_request=True) == (
        f"the request of {2049 + FORM_ROOM} bytes is over the upload limit of 2048 bytes for a run file")


@pytest.mark.django_db
def test_an_oversized_file_gets_the_same_sentence_from_the_form_and_the_api(world: World, settings) -> None:
    settings.RUN_UPLOAD_MAX_BYTES = 2048
    content = b"[" + b" " * 2048 + b"]"
    runs_before = Run.objects.count()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    web = Client()
    web.force_login(world.alice)
    with committing():
        by_api = api.post(f"/api/v1/tasks/{world.task.slug}/runs/",
                          {"file": SimpleUploadedFile("run.json", content)}, format="multipart")
        by_form = web.post(f"/tasks/{world.task.slug}/upload/", {"file": SimpleUploadedFile("run.json", content)})
    sentence = "file: 2050 bytes is over the limit of 2048 bytes"
    assert (by_api.status_code, by_api.json()) == (413, {"errors": [sentence]})
    assert by_form.status_code == 413 and sentence in html.unescape(by_form.content.decode())
    assert Run.objects.count() == runs_before


@pytest.mark.django_db
def test_the_form_and_the_api_accept_the_same_upload(world: World) -> None:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    web = Client()
    web.force_login(world.alice)
    fields = {"name": "same", "description": "one path", "priority": "1", "public": "on"}
    with committing():
        by_api = api.post(f"/api/v1/tasks/{world.task.slug}/runs/",
                          {**fields, "file": SimpleUploadedFile("a.json", run_bytes(world.gold))}, format="multipart")
        by_form = web.post(f"/tasks/{world.task.slug}/upload/",
                           {**fields, "priority": "2", "file": SimpleUploadedFile("b.json", run_bytes(world.gold))})
    assert by_api.status_code == 202 and by_form.status_code == 302
    runs = {run.priority: run for run in Run.objects.filter(team__members=world.alice)}
    assert {(run.name, run.description, run.is_public, run.original_filename) for run in runs.values()} == {
        ("same", "one path", True, "a.json"), ("same", "one path", True, "b.json")}
