"""Who gets what, for every URL of the project; CSRF on every form; secure deployment settings.

The URL list comes from the URL configuration itself, so a new view without an entry in
``EXPECTED`` fails ``test_every_url_is_in_the_matrix``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tasks.models import Run
from tests.conftest import World, committing, run_bytes


@pytest.fixture(autouse=True)
def _one_rate_window(one_rate_window: None) -> None:
    """Every limit of this module counts in one window (tests.conftest.one_rate_window)."""


ROOT = Path(__file__).resolve().parent.parent
# "staff" is a superuser; "staff without permissions" has staff status (the admin opens) and no
# permission, no task and no team: staff status alone gives no organiser right (issue 24).
BARE_STAFF = "staff without permissions"
ROLES = ("anonymous", "owner", "rival", "organiser", "staff", BARE_STAFF)

# url name -> (method, {role: expected status}); "owner" is alice, whose team owns the run.
EXPECTED: dict[str, tuple[str, dict[str, int]]] = {
    "home": ("GET", dict.fromkeys(ROLES, 200)),
    "task-page": ("GET", dict.fromkeys(ROLES, 200)),
    "leaderboard-csv": ("GET", dict.fromkeys(ROLES, 200)),
    "statistics-page": ("GET", dict.fromkeys(ROLES, 200)),
    "pvalues-page": ("GET", dict.fromkeys(ROLES, 200)),
    "statistics-export": ("GET", dict.fromkeys(ROLES, 200)),
    "upload": ("GET", {"anonymous": 302, "owner": 200, "rival": 200, "organiser": 200, "staff": 200, BARE_STAFF: 200}),
    # The run is public and its scores are (a task without phases): its page, per-item scores and
    # details are everybody's (issue 30); tests/test_run_pages_matrix.py walks the hidden, withdrawn
    # and unpublished runs in every phase state.
    "run-page": ("GET", dict.fromkeys(ROLES, 200)),
    "run-items-csv": ("GET", dict.fromkeys(ROLES, 200)),
    "run-details": ("GET", dict.fromkeys(ROLES, 200)),
    # The file: the team and the organisers only; anybody else the 404 of a missing run.
    "run-file": ("GET", {"anonymous": 302, "owner": 200, "rival": 404, "organiser": 200, "staff": 200,
                         BARE_STAFF: 404}),
    # Its links: the team's members only (an empty form clears them: a redirect to the run).
    "run-links": ("POST", {"anonymous": 302, "owner": 302, "rival": 404, "organiser": 404, "staff": 404,
                           BARE_STAFF: 404}),
    "team-join": ("GET", {"anonymous": 302, "owner": 200, "rival": 200, "organiser": 200, "staff": 200,
                          BARE_STAFF: 200}),
    # Without a confirmation, team actions ask first or say why not (back to the team page).
    "team-leave": ("POST", {"anonymous": 302, "owner": 302, "rival": 302, "organiser": 302, "staff": 302,
                            BARE_STAFF: 302}),
    "team-remove-member": ("POST", {"anonymous": 302, "owner": 302, "rival": 302, "organiser": 302, "staff": 302,
                                    BARE_STAFF: 302}),
    # An empty new name is refused (400) for a team's owner; people without a team are sent back.
    "team-rename": ("POST", {"anonymous": 302, "owner": 400, "rival": 400, "organiser": 302, "staff": 302,
                             BARE_STAFF: 302}),
    "team-new-code": ("POST", {"anonymous": 302, "owner": 200, "rival": 200, "organiser": 302, "staff": 302,
                               BARE_STAFF: 302}),
    "account": ("GET", {"anonymous": 302, "owner": 200, "rival": 200, "organiser": 200, "staff": 200,
                        BARE_STAFF: 200}),
    # The comparison's chooser of a public run opens for everyone, as the run's page (main's "compare: any two
    # runs whose per-item scores the reader may see"); what it offers is tests/test_compare_runs.py's matrix.
    "run-compare": ("GET", dict.fromkeys(ROLES, 200)),
    "run-visibility": ("POST", {"anonymous": 302, "owner": 302, "rival": 404, "organiser": 403, "staff": 403,
                                BARE_STAFF: 404}),
    "team-page": ("GET", {"anonymous": 302, "owner": 200, "rival": 200, "organiser": 200, "staff": 200,
                          BARE_STAFF: 200}),
    "token-regenerate": ("POST", {"anonymous": 302, "owner": 200, "rival": 200, "organiser": 200, "staff": 200,
                                  BARE_STAFF: 200}),
    "token-revoke": ("POST", {"anonymous": 302, "owner": 302, "rival": 302, "organiser": 302, "staff": 302,
                              BARE_STAFF: 302}),
    "login": ("GET", dict.fromkeys(ROLES, 200)),
    "signup": ("GET", dict.fromkeys(ROLES, 200)),
    "logout": ("POST", dict.fromkeys(ROLES, 302)),
    "organiser-dashboard": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 200, "staff": 200,
                                    BARE_STAFF: 404}),
    # A GET shows what would be re-scored and the confirmation; only the confirmed POST re-scores.
    "organiser-rescore": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 200, "staff": 200,
                                  BARE_STAFF: 404}),
    "organiser-preview": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 200, "staff": 200,
                                  BARE_STAFF: 404}),
    "organiser-runs-zip": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 200, "staff": 200,
                                   BARE_STAFF: 404}),
    "organiser-results": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 200, "staff": 200,
                                  BARE_STAFF: 404}),
    "organiser-gold": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 200, "staff": 200,
                               BARE_STAFF: 404}),
    "organiser-phase": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 200, "staff": 200,
                                BARE_STAFF: 404}),
    "api-tasks": ("GET", dict.fromkeys(ROLES, 200)),
    "api-leaderboard": ("GET", dict.fromkeys(ROLES, 200)),
    "api-upload": ("GET", {"anonymous": 401, "owner": 405, "rival": 405, "organiser": 405, "staff": 405,
                           BARE_STAFF: 405}),
    "api-my-runs": ("GET", {"anonymous": 401, "owner": 200, "rival": 200, "organiser": 200, "staff": 200,
                            BARE_STAFF: 200}),
    "api-run": ("GET", {"anonymous": 401, "owner": 200, "rival": 404, "organiser": 200, "staff": 200, BARE_STAFF: 404}),
    "api-gold-versions": ("GET", {"anonymous": 401, "owner": 403, "rival": 403, "organiser": 200, "staff": 200,
                                  BARE_STAFF: 403}),
    "api-run-details": ("GET", {"anonymous": 401, "owner": 200, "rival": 404, "organiser": 200, "staff": 200,
                                BARE_STAFF: 404}),
    "api-schema": ("GET", dict.fromkeys(ROLES, 200)),
    "api-docs": ("GET", dict.fromkeys(ROLES, 200)),
    "api-redoc": ("GET", dict.fromkeys(ROLES, 200)),
    "api-not-found": ("GET", dict.fromkeys(ROLES, 404)),
    "client-download": ("GET", dict.fromkeys(ROLES, 200)),
    "healthz": ("GET", dict.fromkeys(ROLES, 200)),
    # Off without EVALSERVER_METRICS_TOKEN, whoever asks: a staff session is not the token.
    "metrics": ("GET", dict.fromkeys(ROLES, 403)),
    "task-overview": ("GET", dict.fromkeys(ROLES, 200)),
    "task-terms": ("POST", dict.fromkeys(ROLES, 302)),  # sign in first; a task without terms: back to its overview
    "task-data": ("GET", dict.fromkeys(ROLES, 200)),
    "task-data-file": ("GET", dict.fromkeys(ROLES, 200)),
    "api-task-data": ("GET", dict.fromkeys(ROLES, 200)),
    "api-task-data-file": ("GET", dict.fromkeys(ROLES, 200)),
    "password-reset": ("GET", dict.fromkeys(ROLES, 200)),
    "password-reset-sent": ("GET", dict.fromkeys(ROLES, 200)),
    "password-reset-confirm": ("GET", dict.fromkeys(ROLES, 200)),  # a link that does not work: says so
    "password-reset-complete": ("GET", dict.fromkeys(ROLES, 200)),
    "favicon": ("GET", dict.fromkeys(ROLES, 200)),
    # vBLEU extends response tasks: this world's task is a DQ/ND one (tests/kinds/response/test_vbleu_jobs.py walks a
    # response task's page and every job state); no job 1 exists here.
    "organiser-vbleu": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 404, "staff": 404,
                                BARE_STAFF: 404}),
    "pool-job": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 404, "staff": 404,
                         BARE_STAFF: 404}),
    "pool-job-status": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 404, "staff": 404,
                                BARE_STAFF: 404}),
    # A response task's encoder page: this world's task is a DQ/ND one (tests/kinds/response/test_encoder_store.py
    # walks a response task's page as every role).
    "organiser-encoder": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 404, "staff": 404,
                                  BARE_STAFF: 404}),
    "measures-page": ("GET", dict.fromkeys(ROLES, 200)),
    "organiser-settings": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 200, "staff": 200,
                                   BARE_STAFF: 404}),
    "organiser-data-file": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 200, "staff": 200,
                                    BARE_STAFF: 404}),
    # No run named: the organisers are sent back to the dashboard with the reason; nothing withdrawn.
    "organiser-withdraw": ("POST", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 302, "staff": 302,
                                    BARE_STAFF: 404}),
    # Late runs (tasks/organiser_late.py): an empty form sends the organisers back to the dashboard with the
    # reason; the form to upload on a team's behalf is theirs alone.
    "organiser-extensions": ("POST", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 302, "staff": 302,
                                      BARE_STAFF: 404}),
    "organiser-upload-for-team": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 200,
                                          "staff": 200, BARE_STAFF: 404}),
    # E-mail choices: anyone signed in saves their own (an empty form turns every one off) and is sent back
    # to the account page; the anonymous to the sign-in page.
    "notices-preferences": ("POST", dict.fromkeys(ROLES, 302)),
    # A public task's announcements are public (tests/test_announcements.py walks a hidden task's feed).
    "announcements-feed": ("GET", dict.fromkeys(ROLES, 200)),
    # An empty form: the organisers are sent back to the dashboard with what is missing; nothing posted or sent.
    "organiser-announce": ("POST", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 302, "staff": 302,
                                    BARE_STAFF: 404}),
    "organiser-message": ("POST", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 302, "staff": 302,
                                   BARE_STAFF: 404}),
    "statistics-status": ("GET", dict.fromkeys(ROLES, 200)),
    "organiser-status": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 200, "staff": 200,
                                 BARE_STAFF: 404}),
    # Issue 40: annotation campaigns. This world has none (campaign 1 does not exist): a 404 for all
    # who sign in; tests/test_campaign_matrix.py walks a real campaign's pages as every role x state.
    "campaign-list": ("GET", {"anonymous": 302, "owner": 404, "rival": 404, "organiser": 200, "staff": 200,
                              BARE_STAFF: 404}),
    "campaign-page": ("GET", {"anonymous": 302, **dict.fromkeys(ROLES[1:], 404)}),
    "campaign-export": ("GET", {"anonymous": 302, **dict.fromkeys(ROLES[1:], 404)}),
    "campaign-judge": ("GET", {"anonymous": 302, **dict.fromkeys(ROLES[1:], 404)}),
    "campaign-answer": ("POST", {"anonymous": 302, **dict.fromkeys(ROLES[1:], 404)}),
    "campaign-metrics-gold": ("GET", {"anonymous": 302, **dict.fromkeys(ROLES[1:], 404)}),
    "judging": ("GET", {"anonymous": 302, **dict.fromkeys(ROLES[1:], 200)}),
}
ADMIN_EXPECTED = {"anonymous": 302, "owner": 302, "rival": 302, "organiser": 302, "staff": 200, BARE_STAFF: 200}


def project_patterns() -> list[tuple[str, str]]:
    """(name, route) of every named URL outside the admin, walked from the root URL configuration."""
    found = []

    def walk(patterns: list, prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if getattr(pattern, "app_name", None) == "admin" or str(pattern.pattern).startswith("admin"):
                    continue
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                found.append((pattern.name, prefix + str(pattern.pattern)))

    walk(get_resolver().url_patterns, "")
    return found


def concrete(route: str, world: World, run: Run) -> str:
    values = {"<slug:slug>": world.task.slug, "<int:run_id>": str(run.pk), "<str:key>": "quality.A.rsnod",
              "<str:kind>": "pvalues.txt", "<str:fmt>": "csv", "<str:name>": "participant-data.json",
              "<uidb64>": "MQ", "<token>": "set-password", "<int:job_id>": "1",
              "<int:campaign_id>": "1", "<int:position>": "1"}
    path = route
    for placeholder, value in values.items():
        path = path.replace(placeholder, value)
    if path.startswith("^"):  # the API catch-all regex
        path = "api/v1/does-not-exist/"
    return "/" + path.replace("$", "")


def bare_staff() -> Any:
    from django.contrib.auth import get_user_model

    users = get_user_model()
    return users.objects.filter(username="vera").first() or users.objects.create_user(
        "vera", password="vera-pass-1", is_staff=True)


def client_as(role: str, world: World) -> Client:
    client = Client()
    user = {"owner": world.alice, "rival": world.bob, "organiser": world.organiser, "staff": world.staff,
            BARE_STAFF: bare_staff() if role == BARE_STAFF else None}.get(role)
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def scored(world: World, settings) -> tuple[World, Run]:
    settings.EVALSERVER_STATISTICS_MODE = "sync"
    client = client_as("owner", world)
    from django.core.files.uploadedfile import SimpleUploadedFile

    with committing():
        client.post(f"/tasks/{world.task.slug}/upload/", {"file": SimpleUploadedFile("r.json", run_bytes(world.gold)),
                                                          "name": "alice-run", "public": "on"})
    return world, Run.objects.get(name="alice-run")


@pytest.mark.django_db
def test_every_url_is_in_the_matrix() -> None:
    names = {name for name, _ in project_patterns()}
    assert None not in names, "every URL needs a name so the authorization matrix can list it"
    assert names == set(EXPECTED), f"new: {names - set(EXPECTED)}; gone: {set(EXPECTED) - names}"


@pytest.mark.django_db
@pytest.mark.parametrize("role", ROLES)
def test_authorization_matrix(scored: tuple[World, Run], role: str) -> None:
    world, run = scored
    outcomes = {}
    for name, route in project_patterns():
        method, expected = EXPECTED[name]
        client = client_as(role, world)
        url = concrete(route, world, run)
        with committing():
            response = client.post(url) if method == "POST" else client.get(url)
        outcomes[name] = (response.status_code, expected[role], url)
    wrong = {name: got for name, got in outcomes.items() if got[0] != got[1]}
    assert not wrong, f"{role}: (got, expected, url) {wrong}"
    admin = client_as(role, world).get("/admin/")
    assert admin.status_code == ADMIN_EXPECTED[role]


@pytest.mark.django_db
def test_every_form_needs_a_csrf_token(scored: tuple[World, Run]) -> None:
    world, run = scored
    posts = [concrete(route, world, run) for name, route in project_patterns() if EXPECTED[name][0] == "POST"]
    posts += [f"/tasks/{world.task.slug}/upload/", "/accounts/login/", "/accounts/signup/", "/accounts/password-reset/",
              f"/organiser/{world.task.slug}/",  # the dashboard's actions (publish, approve)
              f"/organiser/{world.task.slug}/rescore/",  # one run, or every run once confirmed
              f"/organiser/{world.task.slug}/vbleu/",  # starts a vBLEU job
              f"/organiser/{world.task.slug}/encoder/",  # sets the BERTScore encoder
              f"/organiser/{world.task.slug}/settings/",  # the task's settings and organisers
              f"/organiser/{world.task.slug}/data-files/"]  # adds a data file
    for url in posts:
        client = Client(enforce_csrf_checks=True)
        client.force_login(world.alice)
        assert client.post(url, {"action": "hide"}).status_code == 403, url
    # The API with a token needs no CSRF token (no cookie is involved)...
    from rest_framework.test import APIClient

    api = APIClient(enforce_csrf_checks=True)
    api.credentials(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    assert api.post(f"/api/v1/tasks/{world.task.slug}/runs/", {}, format="multipart").status_code == 400
    # ...but the same API through a browser session does.
    session = APIClient(enforce_csrf_checks=True)
    session.force_login(world.alice)
    assert session.post(f"/api/v1/tasks/{world.task.slug}/runs/", {}, format="multipart").status_code == 403


@pytest.mark.django_db
def test_gold_and_run_files_are_never_served(scored: tuple[World, Run], settings) -> None:
    """No public or participant URL returns annotations or another team's file; uploads live outside static."""
    world, run = scored
    annotation_marker = '"annotations"'
    for role in ("anonymous", "rival", "owner"):
        client = client_as(role, world)
        for name, route in project_patterns():
            method, _ = EXPECTED[name]
            if method != "GET":
                continue
            body = client.get(concrete(route, world, run)).content.decode(errors="replace")
            assert annotation_marker not in body, (role, name)
    stored = list(Path(settings.MEDIA_ROOT).rglob("*.json"))
    assert stored and all(path.name == f"{path.stem}.json" and len(path.stem) == 64 for path in stored)
    assert not str(Path(settings.MEDIA_ROOT)).startswith(str(settings.STATIC_ROOT))
    assert Client().get(f"/static/../uploads/runs/{run.file_sha256[:2]}/{run.file_sha256}.json").status_code == 404
    assert Client().get(f"/media/runs/{run.file_sha256[:2]}/{run.file_sha256}.json").status_code == 404


@pytest.mark.django_db
def test_path_traversal_in_the_upload_name_is_only_a_label(world: World, settings) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = client_as("owner", world)
    with committing():
        client.post(f"/tasks/{world.task.slug}/upload/",
                    {"file": SimpleUploadedFile("../../../etc/passwd.json", run_bytes(world.gold, seed=4))})
    run = Run.objects.get(original_filename="passwd.json")
    assert run.name == "passwd"
    assert not (Path(settings.MEDIA_ROOT).parent / "etc").exists()


def test_deploy_checks_are_clean_when_debug_is_off(tmp_path: Path) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalserver.settings", "DJANGO_DEBUG": "false",
           "DJANGO_SECRET_KEY": "k7#Qz" * 12, "EVALSERVER_VAR_DIR": str(tmp_path)}
    env.pop("DJANGO_SECURE", None)
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_a_short_secret_key_is_refused(tmp_path: Path) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalserver.settings", "DJANGO_SECRET_KEY": "short",
           "EVALSERVER_VAR_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be at least 50 characters" in result.stderr


# Brute force: every path that checks a password or a token, 125 wrong guesses from one address
# (as the red-team audit sent them), then the right secret. (path, how a guess is sent, what the
# wrong guesses get, what the right secret then gets.) Password forms share one limit per
# address (EVALSERVER_LOGIN_RATE, 10 a minute here): wrong guesses answer 200 (the form again)
# ten times, then 429, and the right password waits too. An API token is 256 random bits: no
# guess can succeed, so wrong tokens are each a 401 and never lock out the real one (one address
# may be a whole lab behind NAT).
SIGN_IN_PATHS = ("/accounts/login/", "/admin/login/")
GUESSES = 125


def _password_guess(client: Client, path: str, password: str) -> Any:
    return client.post(path, {"username": "sam", "password": password, "next": "/admin/"})


@pytest.mark.django_db
@pytest.mark.parametrize("path", SIGN_IN_PATHS)
def test_brute_force_on_every_sign_in_path_is_limited(world: World, path: str) -> None:
    client = Client()
    statuses = [_password_guess(client, path, f"guess-{k}").status_code for k in range(GUESSES)]
    assert statuses[:10] == [200] * 10
    assert statuses[10:] == [429] * (GUESSES - 10)
    limited = _password_guess(client, path, "staff-pass-1")
    assert limited.status_code == 429
    assert "Too many sign-in attempts from your address. Wait a minute and try again." in limited.content.decode()
    assert client.get("/admin/").status_code == 302, "the right password is not checked while limited"
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_the_sign_in_paths_share_one_limit(world: World) -> None:
    """Ten guesses on the participants' form leave none for the admin's."""
    client = Client()
    assert [_password_guess(client, "/accounts/login/", "wrong").status_code for _ in range(10)] == [200] * 10
    assert _password_guess(client, "/admin/login/", "staff-pass-1").status_code == 429
    other_address = Client(REMOTE_ADDR="192.0.2.7")
    assert _password_guess(other_address, "/admin/login/", "staff-pass-1").status_code == 302


@pytest.mark.django_db
def test_brute_force_on_the_api_token_gets_401s_and_no_lockout(world: World) -> None:
    from rest_framework.test import APIClient

    url = f"/api/v1/tasks/{world.task.slug}/my-runs/"
    statuses = {APIClient(HTTP_AUTHORIZATION=f"Token {k:064x}").get(url).status_code for k in range(GUESSES)}
    assert statuses == {401}
    assert APIClient(HTTP_AUTHORIZATION=f"Token {world.alice_token}").get(url).status_code == 200


@pytest.mark.django_db
def test_brute_force_on_password_reset_is_limited(world: World) -> None:
    """The form that sends a reset link: 5 an hour from one address; its links cannot be guessed."""
    client = Client()
    resets = [client.post("/accounts/password-reset/", {"email": f"x{k}@example.org"}).status_code
              for k in range(7)]
    assert resets[:5] == [302] * 5 and resets[5:] == [429, 429]
    links = {client.get(f"/accounts/password-reset/MQ/guess-{k}/").status_code for k in range(GUESSES)}
    assert links == {200}  # a wrong link is a page saying so; the token is an HMAC, nothing to guess
