"""The first hour on the embedded default (issue 30): every wait is visible and follows itself, a
board nobody changed keeps its statistics, the console carries what a person needs to read, and the
README's first curl works after *Regenerate token*.

Expected values are the worked examples of each rule (which board a run is on, what a wait says),
not the code's own output read back."""

from __future__ import annotations

import io
import logging
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from leaderboard import jobs as statistics_jobs
from leaderboard.models import StatisticsState
from tasks import submissions
from tasks.models import Phase, Run
from tests.conftest import World, committing, run_bytes


def two_phases(world: World) -> tuple[Phase, Phase]:
    """A development phase that is over and a test phase open now, on the world's gold (as the demo)."""
    now = timezone.now()
    development = Phase.objects.create(task=world.task, name="development", gold_version=world.gold_version,
                                       starts_at=now - timedelta(days=30), ends_at=now - timedelta(days=2))
    test = Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                                starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=9))
    return development, test


def upload(world: World, user: Any, seed: int, name: str, phase: Phase | None = None) -> Run:
    with committing():
        return submissions.submit_run(world.task, user, submissions.Submission(
            content=run_bytes(world.gold, 0.3, seed), name=name, description="a test run"), phase)


def pending(world: World) -> dict[str, bool]:
    """Per board (phase name), whether a computation is requested that none has served."""
    return {state.phase.name: state.requested > state.completed
            for state in StatisticsState.objects.filter(task=world.task).select_related("phase")}


@pytest.mark.django_db
def test_a_test_phase_upload_asks_for_the_test_boards_statistics_only(world: World, settings, monkeypatch) -> None:
    settings.EVALSERVER_STATISTICS_MODE = "celery"
    sent: list[Any] = []
    monkeypatch.setattr(statistics_jobs.compute_statistics_task, "apply_async",
                        lambda args, countdown: sent.append((args, countdown)))
    development, test = two_phases(world)
    # The baselines (every board of their gold shows them) were scored before the phases existed.
    StatisticsState.objects.filter(task=world.task).update(completed=1, requested=1)
    upload(world, world.alice, 1, "alice-test-1", test)
    assert pending(world).get("test") is True
    # The development board shows nothing new: no request (a 16.6 s computation in the issue).
    assert pending(world).get("development", False) is False
    # Hiding the run changes the test board only, too.
    run = Run.objects.get(name="alice-test-1")
    StatisticsState.objects.filter(task=world.task).update(completed=10, requested=10)
    alice = Client()
    alice.force_login(world.alice)
    with committing():
        assert alice.post(f"/runs/{run.pk}/visibility/", {"action": "hide"}).status_code == 302
    assert pending(world)["test"] is True and pending(world).get("development", False) is False


@pytest.mark.django_db
def test_boards_showing_a_run_follow_the_boards_rules(world: World) -> None:
    from leaderboard.board import boards_showing
    from tasks.organising import load_gold_version

    # No phases: the one board of the task.
    baseline = Run.objects.filter(task=world.task, is_baseline=True).first()
    assert boards_showing(world.task.pk, [baseline.pk]) == [None]
    assert boards_showing(world.task.pk, []) == []
    development, test = two_phases(world)
    final = Phase.objects.create(task=world.task, name="final", kind=Phase.FINAL, gold_version=world.gold_version,
                                 starts_at=timezone.now() + timedelta(days=10),
                                 ends_at=timezone.now() + timedelta(days=11))
    test_run = upload(world, world.alice, 2, "on-test", test)
    development_run = Run.objects.create(task=world.task, team=test_run.team, phase=development, name="on-dev",
                                         gold_version=world.gold_version, status=Run.DONE, file_sha256="0" * 64,
                                         file_size=1)
    # A test run is on its phase's board and on the final board of the same gold; a development
    # run on its own only; a baseline on every board of its gold version.
    assert boards_showing(world.task.pk, [test_run.pk]) == sorted([test.pk, final.pk])
    assert boards_showing(world.task.pk, [development_run.pk]) == [development.pk]
    assert boards_showing(world.task.pk, [baseline.pk]) == sorted([development.pk, test.pk, final.pk])
    # A baseline of another gold version is on no board of these phases.
    with committing():
        other = load_gold_version(world.task, orjson_dumps(world.gold), "other.json", world.organiser)
    other_baseline = Run.objects.filter(task=world.task, is_baseline=True, gold_version=other).first()
    assert boards_showing(world.task.pk, [other_baseline.pk]) == []


def orjson_dumps(value: Any) -> bytes:
    import orjson

    return orjson.dumps(value)


@pytest.mark.django_db
def test_every_wait_is_said_and_followed(world: World, settings) -> None:
    """A queued run says how many wait before it and follows itself (script, or a refresh without
    one); a board whose statistics are queued says so on its pages, which poll a status answer."""
    from tasks import runfiles

    settings.EVALSERVER_STATISTICS_MODE = "celery"
    settings.EVALSERVER_SCORING_MODE = "worker"  # the database is the queue: nothing scores them here
    first = upload(world, world.bob, 3, "bob-first")
    mine = upload(world, world.alice, 4, "alice-waiting")
    assert Run.objects.get(pk=first.pk).status == Run.QUEUED and runfiles  # both wait for the worker
    alice = Client()
    alice.force_login(world.alice)
    page = alice.get(f"/runs/{mine.pk}/").content.decode()
    assert "Queued for scoring behind 1 other run." in page
    assert '<noscript><meta http-equiv="refresh" content="5"></noscript>' in page
    assert 'id="run-script"' in page and 'id="run-wait"' in page
    Run.objects.filter(pk=first.pk).update(status=Run.SCORING, started_at=timezone.now())
    assert "Queued for scoring." in alice.get(f"/runs/{mine.pk}/").content.decode()
    Run.objects.filter(pk=mine.pk).update(status=Run.SCORING, started_at=timezone.now())
    page = alice.get(f"/runs/{mine.pk}/").content.decode()
    assert "Being scored since" in page and "This page updates itself once the scores are stored" in page

    # The board's statistics: requested, not yet computed.
    from leaderboard import scheduling

    scheduling.request(world.task.pk)
    answer = Client().get(f"/tasks/{world.task.slug}/statistics/status.json").json()
    assert answer["waiting"] is True and answer["message"].startswith(
        "The significance statistics of this board are queued: they are computed once its scores have been "
        "unchanged for 5 s")
    statistics = Client().get(f"/tasks/{world.task.slug}/statistics/").content.decode()
    assert 'id="wait-script"' in statistics and f"/tasks/{world.task.slug}/statistics/status.json" in statistics
    assert '<noscript><meta http-equiv="refresh" content="10"></noscript>' in statistics
    StatisticsState.objects.filter(task=world.task).update(completed=9, requested=9)
    answer = Client().get(f"/tasks/{world.task.slug}/statistics/status.json").json()
    assert answer == {"waiting": False, "message": "", "finished_at": None}

    # The organiser's dashboard counts the participants' runs that wait, and follows them.
    organiser = Client()
    organiser.force_login(world.organiser)
    status = organiser.get(f"/organiser/{world.task.slug}/status.json").json()
    assert status["counts"]["queued"] == 0 and status["counts"]["scoring"] == 2
    assert status["message"] == ("0 participants' runs queued and 2 being scored; this page updates itself as "
                                 "they are stored.")
    dashboard = organiser.get(f"/organiser/{world.task.slug}/").content.decode()
    assert 'id="dashboard-wait"' in dashboard and 'id="wait-script"' in dashboard


@pytest.mark.django_db
def test_rescoring_every_run_answers_at_once_with_what_it_queued(world: World, settings) -> None:
    settings.EVALSERVER_SCORING_MODE = "worker"
    upload(world, world.alice, 5, "a")
    upload(world, world.bob, 6, "b")
    organiser = Client()
    organiser.force_login(world.organiser)
    baselines = Run.objects.filter(task=world.task, is_baseline=True).count()
    with committing():
        answer = organiser.post(f"/organiser/{world.task.slug}/rescore/", {"confirm": "yes"}, follow=True)
    text = answer.content.decode().replace("&#x27;", "'")
    assert (f"Queued for re-scoring: 2 participants' runs and {baselines} baselines. They are scored one after "
            "another in the background") in text
    assert set(Run.objects.filter(task=world.task).values_list("status", flat=True)) == {Run.QUEUED}


@pytest.mark.django_db
def test_after_regenerate_token_the_readmes_first_curl_still_works(world: World, settings, tmp_path: Path) -> None:
    from tasks.tokens import LOGINS_FILE

    settings.VAR_DIR = tmp_path
    logins = tmp_path / LOGINS_FILE
    logins.write_text("organiser login: organiser / x\nparticipant login: alice / x\n"
                      f"alice's API token: {world.alice_token}\n")
    logins.chmod(0o600)

    def readme_token() -> str:
        # The README's: TOKEN=$(sed -n "s/^alice's API token: //p" var/demo-logins.txt)
        return "".join(re.findall(r"^alice's API token: (.*)$", logins.read_text(), flags=re.M))

    alice = Client()
    alice.force_login(world.alice)
    page = alice.post("/team/token/regenerate/", {"confirm": "yes"}).content.decode()
    new = re.search(r'<pre class="token" id="token">([^<]+)</pre>', page).group(1)
    assert 'id="logins-file"' in page
    assert readme_token() == new != world.alice_token
    assert oct(logins.stat().st_mode & 0o777) == "0o600"
    assert APIClient(HTTP_AUTHORIZATION=f"Token {readme_token()}").get(
        f"/api/v1/tasks/{world.task.slug}/my-runs/").status_code == 200
    # The other lines are untouched; a user the file does not name changes nothing.
    assert logins.read_text().startswith("organiser login: organiser / x\nparticipant login: alice / x\n")
    bob = Client()
    bob.force_login(world.bob)
    before = logins.read_text()
    assert 'id="logins-file"' not in bob.post("/team/token/regenerate/", {"confirm": "yes"}).content.decode()
    assert logins.read_text() == before
    # Revoked: the file says so instead of keeping a token that answers 401.
    alice.post("/team/token/revoke/")
    assert readme_token() == ("(none: the token this file held was replaced or revoked; sign in as alice and "
                              "create one on My team)")


def test_build_vbleu_writes_plain_periodic_lines_where_no_terminal_reads(monkeypatch) -> None:
    from django.core.management.base import OutputWrapper

    from kinds.response.management.commands import build_vbleu

    now = [0.0]
    monkeypatch.setattr(build_vbleu.time, "monotonic", lambda: now[0])
    log = io.StringIO()
    bar = build_vbleu.ProgressBar(OutputWrapper(log), every=10.0)  # a StringIO is no terminal
    for done in range(0, 101):  # one call a second
        now[0] = float(done)
        bar("index", done, 100)
    text = log.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    # The first call, then every 10 s (at 10, 20, ... 90 s), and the end: 11 lines, not 101 redraws.
    assert len(lines) == 11 and lines[-1].endswith("100/100 (100%), 100.0 s")
    assert lines[1].endswith("10/100 (10%), 10.0 s")
    terminal = io.StringIO()
    bar = build_vbleu.ProgressBar(OutputWrapper(terminal), terminal=True)
    bar("index", 1, 2)
    assert terminal.getvalue().startswith("\r")
    assert build_vbleu._is_terminal(io.StringIO()) is False


@pytest.mark.django_db
def test_the_embedded_console_has_no_celery_job_lines(world: World, caplog) -> None:
    """Without a broker a job runs where it is sent; Celery logged each at INFO ("Task ...
    succeeded in 0.4s: 'skipped: not queued ...'"). A job's failure still reaches the console."""
    from django.conf import settings

    assert settings.CELERY_TASK_ALWAYS_EAGER
    assert logging.getLogger("celery.app.trace").getEffectiveLevel() == logging.WARNING
    with caplog.at_level(logging.DEBUG, logger="tasks"):
        upload(world, world.alice, 7, "logged")
    assert not [record for record in caplog.records if record.name.startswith("celery")
                and record.levelno < logging.WARNING]
    assert Run.objects.get(name="logged").status == Run.DONE
