"""Issue 38, item 2: a request's context is resolved once and passed on. An upload reads its
team, phases and terms once (``tasks.submissions.upload_context``), a run page its reader's
rights once (``tasks.access.read_run_page``). The counts pin the SQL queries of each request, so
that a lookup repeated again fails here; the counts by table say which lookup it was.

Before (main at 6566212), the same requests took: upload form 11 queries, web-form upload 24
(the team and the terms read three times each, the phases four), API upload 27 (phases six times),
run page 30 for its owner (whether the reader organises the task asked eight times, team membership
four), 17 for another participant, 28 for an organiser, 13 for an anonymous reader."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from tasks import submissions
from tasks.models import Phase, Run, TermsAcceptance
from tests.conftest import World, committing, make_world, run_bytes

TERMS = "Runs are for research use only."

# Queries that look up one thing the request's context holds: the reader's teams, the terms they
# accepted, whether they organise the task, the task's phases.
LOOKUPS = {
    "team": re.compile(r'FROM "tasks_team" INNER JOIN "tasks_team_members"'),
    "terms": re.compile(r'FROM "tasks_termsacceptance"'),
    "organiser": re.compile(r'INNER JOIN "tasks_task_organisers"'),
    "membership": re.compile(r'FROM "auth_user" INNER JOIN "tasks_team_members"'),
    "phases": re.compile(r'FROM "tasks_phase".* WHERE .*"tasks_phase"."task_id" = '),
}


@pytest.fixture
def ready(db: Any) -> World:
    """A task with terms (accepted by alice and bob) and one open development phase with a quota."""
    world = make_world()
    world.task.terms = TERMS
    world.task.save()
    for user in (world.alice, world.bob):
        TermsAcceptance.objects.create(task=world.task, user=user, username=user.username,
                                       terms_sha256=world.task.terms_sha256, terms=TERMS)
    now = timezone.now()
    Phase.objects.create(task=world.task, name="dev", kind=Phase.DEVELOPMENT, gold_version=world.gold_version,
                         starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=5), daily_quota=5,
                         total_quota=50, per_item_feedback=True)
    return world


def counted(call: Any) -> tuple[Any, int, dict[str, int]]:
    """The call's answer, its number of queries and how many of them looked up each of ``LOOKUPS``."""
    with CaptureQueriesContext(connection) as queries:
        result = call()
    sql = [query["sql"] for query in queries.captured_queries]
    return result, len(sql), {name: sum(1 for text in sql if pattern.search(text)) for name, pattern in LOOKUPS.items()}


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    client.get("/")  # the session's first reading out of the way
    return client


def test_a_web_form_upload_resolves_its_context_once(ready: World) -> None:
    web = signed_in(ready.alice)
    response, queries, lookups = counted(lambda: web.get(f"/tasks/{ready.task.slug}/upload/"))
    assert response.status_code == 200
    quota = response.context["quota"]
    assert (quota["phase"], quota["daily_remaining"], quota["total_remaining"]) == ("dev", 5, 50)
    # 7 + 1: every signed-in page asks once whether its reader judges in an open campaign (the
    # header's Judging link, campaigns.context); nothing of the upload's context is asked twice.
    assert (queries, lookups) == (8, {"team": 1, "terms": 1, "organiser": 0, "membership": 0, "phases": 1})
    response, queries, lookups = counted(lambda: web.post(f"/tasks/{ready.task.slug}/upload/", {
        "name": "by-form", "file": SimpleUploadedFile("a.json", run_bytes(ready.gold, seed=1))}))
    assert response.status_code == 302
    assert (queries, lookups) == (14, {"team": 1, "terms": 1, "organiser": 0, "membership": 0, "phases": 1})


def test_an_api_upload_resolves_its_context_once(ready: World) -> None:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {ready.alice_token}")
    response, queries, lookups = counted(lambda: api.post(f"/api/v1/tasks/{ready.task.slug}/runs/", {
        "name": "by-api", "file": SimpleUploadedFile("b.json", run_bytes(ready.gold, seed=2))}, format="multipart"))
    assert response.status_code == 202, response.content
    # The answer still counts the quota after the new run, and says the phase is open.
    body = response.json()
    assert (body["quota"]["total_used"], body["quota"]["total_remaining"], body["quota"]["daily_used"]) == (1, 49, 1)
    assert body["submissions"] == {"open": True, "phase": "dev", "reason": ""}
    assert (queries, lookups) == (16, {"team": 1, "terms": 1, "organiser": 0, "membership": 0, "phases": 1})


# Signed-in readers: one query more for the header's Judging link (campaigns.context).
@pytest.mark.parametrize(("reader", "expected"), [
    ("alice", (20, {"team": 1, "terms": 0, "organiser": 1, "membership": 0, "phases": 1})),
    # A public page offers a comparison with the runs whose per-item scores its reader sees (issue
    # 37, item 6): one query for them, the reader resolved once as before.
    ("bob", (17, {"team": 1, "terms": 0, "organiser": 1, "membership": 0, "phases": 1})),
    ("organiser", (20, {"team": 1, "terms": 0, "organiser": 1, "membership": 0, "phases": 1})),
    (None, (12, {"team": 0, "terms": 0, "organiser": 0, "membership": 0, "phases": 1})),
])
def test_a_run_page_resolves_its_reader_once(ready: World, reader: str | None, expected: tuple) -> None:
    with committing():
        run = submissions.submit_run(ready.task, ready.alice, submissions.Submission(
            content=run_bytes(ready.gold, seed=3), name="scored"), ready.task.phases.get())
    run.refresh_from_db()
    assert run.status == Run.DONE and run.is_public
    client = signed_in(getattr(ready, reader)) if reader else Client()
    if reader is None:
        client.get("/")
    response, queries, lookups = counted(lambda: client.get(f"/runs/{run.pk}/"))
    assert response.status_code == 200
    # The owner and the organiser read the whole page (the file to download), the others the public one.
    assert ('id="run-file-link"' in response.content.decode()) == (reader in ("alice", "organiser"))
    assert (queries, lookups) == expected
