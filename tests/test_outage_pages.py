"""A database outage: HTML pages answer 503 with their own page, the API 503 JSON; never the 500 page."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import InterfaceError, OperationalError, connection
from django.test import Client
from rest_framework.test import APIClient

from tests.conftest import World

MESSAGE = "The database is unavailable for a moment"


@contextmanager
def database_down(error: type[Exception] = OperationalError) -> Iterator[None]:
    """Every query from here on fails as it does while PostgreSQL restarts."""

    def refuse(execute, sql, params, many, context):
        raise error("server closed the connection unexpectedly")

    with connection.execute_wrapper(refuse):
        yield


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/", "/tasks/demo-task/", "/team/"])
def test_a_page_answers_a_database_outage_with_503_and_retry_after(world: World, path: str, caplog) -> None:
    # Signed in: a page rendered with the request's context would need the session and the user,
    # i.e. the database, again; the 503 page must render without it.
    client = Client()
    client.force_login(world.alice)
    with caplog.at_level(logging.ERROR), database_down():
        response = client.get(path)
    assert response.status_code == 503
    assert response["Retry-After"] == "30"
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert MESSAGE in page
    assert "Nothing you uploaded was lost" in page and "try again in a minute" in page
    assert "Something went wrong" not in page  # not the 500 page
    # One plain line saying why, no traceback.
    ours = [record for record in caplog.records if record.name == "evalserver.middleware"]
    assert len(ours) == 1 and ours[0].exc_info is None
    assert f"database unavailable (GET {path}): OperationalError: server closed" in ours[0].getMessage()


@pytest.mark.django_db
def test_an_interface_error_is_an_outage_too(world: World) -> None:
    with database_down(InterfaceError):
        response = Client().get("/")
    assert response.status_code == 503 and MESSAGE in response.content.decode()


@pytest.mark.django_db
def test_the_home_page_query_failing_alone_is_enough(world: World, monkeypatch) -> None:
    from tasks.models import Task

    def refuse(*args, **kwargs):
        raise OperationalError("connection to server at 127.0.0.1, port 5432 failed: Connection refused")

    monkeypatch.setattr(Task.objects, "prefetch_related", refuse)
    response = Client().get("/")
    assert response.status_code == 503 and response["Retry-After"] == "30"
    assert MESSAGE in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/tasks/", "/api/v1/tasks/demo-task/my-runs/"])
def test_the_api_still_answers_503_json(world: World, path: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    with database_down():
        response = client.get(path)
    assert response.status_code == 503
    assert response["Retry-After"] == "30"
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"errors": ["the database is unavailable at the moment; please try again in a minute"]}


@pytest.mark.django_db
def test_other_errors_are_left_to_the_500_page(world: World, monkeypatch) -> None:
    from tasks.models import Task

    def broken(*args, **kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr(Task.objects, "prefetch_related", broken)
    client = Client(raise_request_exception=False)
    response = client.get("/")
    assert response.status_code == 500
    assert MESSAGE not in response.content.decode()
