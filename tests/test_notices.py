"""E-mail notifications through the outbox: each one's exact text in Django's outbox, recorded in
the transaction of its cause, never sent inside a request, retried and logged when the mail server
fails, never lost, and each one a participant may turn off (issue 41, item 2)."""

from __future__ import annotations

import logging
import smtplib
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.db import transaction
from django.test import Client
from django.utils import timezone

from notices import outbox
from notices.models import Email, Preference
from tasks import jobs, organising, phaseclock, submissions
from tasks.models import Phase, Run, TermsAcceptance
from tests.conftest import World, committing, run_bytes

SITE = "https://eval.example.org"
FOOTER_RUNS = ("-- \nYou get this e-mail because you take part in Demo task on DialEval server. To stop e-mails "
               "when a run of your team is scored or fails (with its first errors), untick them on your account "
               f"page: {SITE}/accounts/account/#notifications\n")


@pytest.fixture(autouse=True)
def _site(settings: Any) -> None:
    settings.EVALSERVER_SITE_URL = SITE
    settings.SITE_NAME = "DialEval server"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.DEFAULT_FROM_EMAIL = "DialEval server <noreply@eval.example.org>"


def with_addresses(world: World) -> None:
    for user, address in ((world.alice, "alice@aurora.example"), (world.bob, "bob@borealis.example")):
        user.email = address
        user.save(update_fields=["email"])


def submit(world: World, user: Any, content: bytes, name: str = "my-run", phase: Phase | None = None) -> Run:
    with committing():
        return submissions.submit_run(world.task, user, submissions.Submission(
            content=content, filename="r.json", name=name), phase=phase)


@pytest.mark.django_db
def test_a_scored_run_is_told_to_its_team_with_the_exact_text(world: World) -> None:
    with_addresses(world)
    world.alice.teams.first().members.add(carol := type(world.alice).objects.create_user(
        "carol", "carol@aurora.example", "carol-pass-1"))
    run = submit(world, world.alice, run_bytes(world.gold))
    assert Run.objects.get(pk=run.pk).status == Run.DONE
    assert mail.outbox == []  # recorded, not sent: only the background sender sends
    assert outbox.send_due() == {"sent": 2, "failed": 0, "gave_up": 0}
    by_address = {message.to[0]: message for message in mail.outbox}
    assert sorted(by_address) == ["alice@aurora.example", "carol@aurora.example"]  # not bob: another team
    message = by_address["carol@aurora.example"]
    assert message.to == ["carol@aurora.example"] and message.cc == [] and message.bcc == []
    assert message.from_email == "DialEval server <noreply@eval.example.org>"
    assert message.subject == "Demo task: run my-run is scored"
    assert message.body == (
        "Hello carol,\n\n"
        f'The run "my-run" (run {run.pk}) that Aurora submitted to Demo task is scored.\n\n'
        f"Its scores: {SITE}/runs/{run.pk}/\n\n" + FOOTER_RUNS)
    assert carol.pk  # the teammate who did not upload is told as well
    assert outbox.send_due() == {"sent": 0, "failed": 0, "gave_up": 0}  # each e-mail once
    assert len(mail.outbox) == 2


@pytest.mark.django_db
def test_a_failed_run_is_told_with_its_first_errors(world: World) -> None:
    with_addresses(world)
    run = submit(world, world.alice, run_bytes(world.gold))
    outbox.send_due()
    mail.outbox.clear()
    errors = [f"problem number {number}" for number in range(1, 8)]
    Run.objects.filter(pk=run.pk).update(status=Run.SCORING)
    run.refresh_from_db()
    with transaction.atomic():
        jobs._finish_failed(run, errors)
    outbox.send_due()
    [message] = mail.outbox
    assert message.subject == "Demo task: run my-run failed"
    assert message.body == (
        "Hello alice,\n\n"
        f'The run "my-run" (run {run.pk}) that Aurora submitted to Demo task could not be scored. The first errors:\n\n'
        "- problem number 1\n- problem number 2\n- problem number 3\n- problem number 4\n- problem number 5\n"
        "- and 2 more, on the run's page\n\n"
        f"The run's page: {SITE}/runs/{run.pk}/\n\n" + FOOTER_RUNS)


@pytest.mark.django_db
def test_a_participant_who_turned_run_e_mails_off_gets_none(world: World) -> None:
    with_addresses(world)
    client = Client()
    client.force_login(world.alice)
    page = client.get("/accounts/account/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="notification-choices"' in text and 'name="run_results" id="id_run_results" checked' in text
    # Every box but the runs' ticked: the unticked one is off.
    answer = client.post("/accounts/notifications/", {"phase_reminders": "on", "publications": "on",
                                                      "announcements": "on"})
    assert answer.status_code == 302 and answer["Location"] == "/accounts/account/#notifications"
    choice = Preference.objects.get(user=world.alice)
    assert (choice.run_results, choice.phase_reminders, choice.publications, choice.announcements) == (
        False, True, True, True)
    assert 'name="run_results" id="id_run_results">' in client.get("/accounts/account/").content.decode()
    submit(world, world.alice, run_bytes(world.gold))
    assert Email.objects.count() == 0
    assert Client().post("/accounts/notifications/", {}).status_code == 302  # signed out: to the sign-in page
    assert Preference.objects.count() == 1


@pytest.mark.django_db
def test_phase_reminders_24_and_1_hour_before_opening_and_closing_once_each(world: World) -> None:
    with_addresses(world)
    TermsAcceptance.objects.create(task=world.task, user=world.bob, username="bob", terms="t", terms_sha256="0" * 64)
    submit(world, world.alice, run_bytes(world.gold))  # alice takes part by her run, bob by the terms
    outbox.send_due()
    mail.outbox.clear()
    start = timezone.now().replace(microsecond=0) + timedelta(days=3)
    phase = Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                                 starts_at=start, ends_at=start + timedelta(days=2))
    phaseclock.advance(start - timedelta(days=2))  # the clock's first look: nothing due
    assert Email.objects.filter(topic="phase_reminders").count() == 0
    at = start - timedelta(hours=24)
    phaseclock.advance(at)
    phaseclock.advance(at + timedelta(seconds=15))  # the next tick records nothing again
    phaseclock.advance(start - timedelta(hours=1, minutes=30))
    assert Email.objects.filter(topic="phase_reminders").count() == 2
    outbox.send_due()
    message = next(message for message in mail.outbox if message.to == ["bob@borealis.example"])
    assert message.subject == "Demo task: the test phase opens in 24 hours"
    assert message.body == (
        "Hello bob,\n\n"
        f"The test phase of Demo task opens for submissions on {start:%Y-%m-%d} at {start:%H:%M} UTC "
        "(in 24 hours).\n\n"
        f"The task's overview: {SITE}/tasks/demo-task/overview/\n\n"
        "-- \nYou get this e-mail because you take part in Demo task on DialEval server. To stop e-mails 24 hours "
        "and 1 hour before a phase of a task you take part in opens or closes, untick them on your account page: "
        f"{SITE}/accounts/account/#notifications\n")
    mail.outbox.clear()
    phaseclock.advance(start - timedelta(minutes=59, seconds=30))
    phaseclock.advance(start + timedelta(days=2) - timedelta(hours=1))
    outbox.send_due()
    assert sorted(message.subject for message in mail.outbox) == [
        "Demo task: the test phase closes in 1 hour", "Demo task: the test phase closes in 1 hour",
        "Demo task: the test phase opens in 59 minutes", "Demo task: the test phase opens in 59 minutes"]
    end = phase.ends_at
    assert any(message.body.startswith(
        "Hello alice,\n\nThe test phase of Demo task closes for submissions on "
        f"{end:%Y-%m-%d} at {end:%H:%M} UTC; runs uploaded later are refused (in 1 hour).") for message in mail.outbox)
    # The closing reminder 24 hours before was skipped: the clock looked first within the hour.
    assert Email.objects.filter(topic="phase_reminders", subject__contains="24 hours").count() == 2
    # A phase moved later is reminded of again at its new time.
    Phase.objects.filter(pk=phase.pk).update(ends_at=end + timedelta(days=1))
    phaseclock.advance(end + timedelta(days=1) - timedelta(hours=23))
    moved = Email.objects.filter(topic="phase_reminders", subject="Demo task: the test phase closes in 23 hours")
    assert moved.count() == 2


@pytest.mark.django_db
def test_a_publication_is_told_to_the_participants(world: World) -> None:
    with_addresses(world)
    submit(world, world.bob, run_bytes(world.gold, seed=2), name="b1")
    now = timezone.now()
    phase = Phase.objects.create(task=world.task, name="test phase", kind=Phase.TEST, gold_version=world.gold_version,
                                 starts_at=now - timedelta(days=3), ends_at=now - timedelta(days=1))
    outbox.send_due()
    mail.outbox.clear()
    with committing():
        organising.set_publication(phase, True)
    outbox.send_due()
    [message] = mail.outbox
    assert message.to == ["bob@borealis.example"]
    assert message.subject == "Demo task: the results of the test phase phase are published"
    assert message.body == (
        "Hello bob,\n\nThe organisers of Demo task published the results of the test phase phase: its leaderboard "
        "now shows the scores on the whole test set and which differences between runs are significant.\n\n"
        f"The leaderboard: {SITE}/tasks/demo-task/?phase=test%20phase\n\n"
        "-- \nYou get this e-mail because you take part in Demo task on DialEval server. To stop e-mails when the "
        "results of a phase of a task you take part in are published, untick them on your account page: "
        f"{SITE}/accounts/account/#notifications\n")
    mail.outbox.clear()
    with committing():
        organising.set_publication(phase, False)  # a withdrawal is not e-mailed
    outbox.send_due()
    assert mail.outbox == []


class FlakyBackend:
    """A mail server that refuses the first ``failures`` sends."""

    failures = 0
    sent: list[Any] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def send_messages(self, messages: list[Any]) -> int:
        if FlakyBackend.failures > 0:
            FlakyBackend.failures -= 1
            raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed")
        FlakyBackend.sent.extend(messages)
        return len(messages)


@pytest.mark.django_db
def test_a_failed_send_is_logged_retried_later_and_never_lost(world: World, settings: Any, caplog: Any) -> None:
    with_addresses(world)
    settings.EMAIL_BACKEND = "tests.test_notices.FlakyBackend"
    FlakyBackend.failures, FlakyBackend.sent = 2, []
    run = submit(world, world.alice, run_bytes(world.gold))
    assert Run.objects.get(pk=run.pk).status == Run.DONE  # scoring never waits for the mail server
    now = timezone.now()
    with caplog.at_level(logging.WARNING, logger="evalserver.notices"):
        assert outbox.send_due(now=now) == {"sent": 0, "failed": 1, "gave_up": 0}
    assert "attempt 1; next in 0:01:00" in caplog.text and "SMTPServerDisconnected" in caplog.text
    email = Email.objects.get()
    assert email.attempts == 1 and email.sent_at is None and "Connection unexpectedly closed" in email.last_error
    assert outbox.send_due(now=now + timedelta(seconds=30)) == {"sent": 0, "failed": 0, "gave_up": 0}  # not yet
    later = email.next_attempt_at + timedelta(seconds=1)
    assert outbox.send_due(now=later) == {"sent": 0, "failed": 1, "gave_up": 0}
    email.refresh_from_db()
    assert email.attempts == 2 and email.next_attempt_at - timezone.now() > timedelta(seconds=100)  # 2 minutes
    assert outbox.send_due(now=email.next_attempt_at + timedelta(seconds=1)) == {"sent": 1, "failed": 0, "gave_up": 0}
    assert [message.subject for message in FlakyBackend.sent] == ["Demo task: run my-run is scored"]
    email.refresh_from_db()
    assert email.sent_at is not None and email.attempts == 3 and email.last_error == ""
    assert [outbox.retry_wait(n).total_seconds() for n in (1, 2, 3, 9, 10, 12)] == [60, 120, 240, 15360, 21600, 21600]


@pytest.mark.django_db
def test_after_the_last_attempt_the_email_is_kept_as_given_up(world: World, settings: Any, caplog: Any) -> None:
    with_addresses(world)
    settings.EMAIL_BACKEND = "tests.test_notices.FlakyBackend"
    FlakyBackend.failures = 100
    submit(world, world.alice, run_bytes(world.gold))
    Email.objects.update(attempts=outbox.MAX_ATTEMPTS - 1)
    with caplog.at_level(logging.ERROR, logger="evalserver.notices"):
        assert outbox.send_due() == {"sent": 0, "failed": 0, "gave_up": 1}
    assert "gave up sending e-mail" in caplog.text and "after 12 attempts" in caplog.text
    email = Email.objects.get()
    assert email.gave_up_at is not None and email.sent_at is None
    assert outbox.send_due(now=timezone.now() + timedelta(days=30)) == {"sent": 0, "failed": 0, "gave_up": 0}
    FlakyBackend.failures = 0


@pytest.mark.django_db
def test_an_e_mail_claimed_by_another_sender_is_not_sent_twice(world: World) -> None:
    with_addresses(world)
    submit(world, world.alice, run_bytes(world.gold))
    Email.objects.update(claimed_until=timezone.now() + timedelta(minutes=5))
    assert outbox.send_due() == {"sent": 0, "failed": 0, "gave_up": 0}
    # A sender that died holding its claim: the e-mail is sent once the claim runs out.
    assert outbox.send_due(now=timezone.now() + timedelta(minutes=6))["sent"] == 1


@pytest.mark.django_db
def test_an_event_rolled_back_records_no_e_mail(world: World) -> None:
    with_addresses(world)
    run = submit(world, world.alice, run_bytes(world.gold))
    Email.objects.all().delete()
    Run.objects.filter(pk=run.pk).update(status=Run.SCORING)
    run.refresh_from_db()
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs._finish_failed(run, ["a reason"])
        raise RuntimeError("the transaction that failed the run is rolled back")
    assert Email.objects.count() == 0 and Run.objects.get(pk=run.pk).status == Run.SCORING


@pytest.mark.django_db
def test_an_account_without_an_address_is_skipped_and_nobody_else_is_written_to(world: World) -> None:
    submit(world, world.alice, run_bytes(world.gold))  # alice has no address yet
    assert Email.objects.count() == 0


@pytest.mark.django_db
def test_send_notices_sends_what_is_due_and_says_how_many(world: World) -> None:
    import io

    from django.core.management import call_command

    with_addresses(world)
    submit(world, world.alice, run_bytes(world.gold))
    submit(world, world.bob, run_bytes(world.gold, seed=3), name="b1")
    out = io.StringIO()
    call_command("send_notices", stdout=out)
    assert out.getvalue() == "2 e-mails sent, 0 failed (tried again later), 0 given up\n"
    assert sorted(message.to[0] for message in mail.outbox) == ["alice@aurora.example", "bob@borealis.example"]


@pytest.mark.django_db
def test_with_a_broker_the_sending_job_goes_to_the_heavy_queue_once_recorded(world: World, settings: Any,
                                                                              monkeypatch: Any) -> None:
    from celery import current_app

    settings.EVALSERVER_NOTICE_MODE = "celery"
    with_addresses(world)
    queued = []
    monkeypatch.setattr(current_app, "send_task", lambda name, **options: queued.append((name, options)))
    submit(world, world.alice, run_bytes(world.gold))  # committed (its scoring, then its e-mail's job)
    assert queued == [("notices.jobs.send_notices_task", {"queue": "celery-heavy"})]
    assert mail.outbox == []  # the worker sends; the upload's request did not


@pytest.mark.django_db
def test_the_account_page_says_where_e_mails_go(world: World) -> None:
    client = Client()
    client.force_login(world.alice)
    text = client.get("/accounts/account/").content.decode()
    assert "your e-mail address, once you give one above (until then nothing is sent)" in text
    with_addresses(world)
    assert "Sent to <strong>alice@aurora.example</strong>" in client.get("/accounts/account/").content.decode()


@pytest.mark.django_db
def test_an_unreachable_smtp_server_leaves_the_e_mail_for_later(world: World, settings: Any) -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", port, 2
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    with_addresses(world)
    submit(world, world.alice, run_bytes(world.gold))
    assert outbox.send_due() == {"sent": 0, "failed": 1, "gave_up": 0}
    email = Email.objects.get()
    assert email.sent_at is None and email.attempts == 1 and "ConnectionRefusedError" in email.last_error
