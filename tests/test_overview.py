"""A task's overview page (issue 17, item 7): description, phases with their dates and what each
allows, rules, contact, how to cite; sign-up with affiliation and acceptance of the task's terms,
recorded; password reset by email (console by default, SMTP by settings)."""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core import mail
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from tasks.models import Phase, Profile, Task, TermsAcceptance
from tasks.overview import contact_link
from tests.conftest import World, committing, run_bytes

ROOT = Path(__file__).resolve().parent.parent
TERMS = "Use the test data for this task only.\nDo not share it."


def page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode().replace("&#x27;", "'")


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@pytest.mark.django_db
def test_the_overview_shows_phases_with_what_each_allows(world: World) -> None:
    task = world.task
    task.description = "Estimate how annotators judge customer-helpdesk dialogues."
    task.rules = "One team per lab.\n\nNo manual labelling of the test data."
    task.contact = "dialeval-organisers@example.org"
    task.citation = "@inproceedings{zeng2019overview, title={Overview of the NTCIR-14 STC-3 task}}"
    task.save()
    now = timezone.now().replace(microsecond=0)
    with committing():
        Phase.objects.create(task=task, name="dev", kind=Phase.DEVELOPMENT, gold_version=world.gold_version,
                             starts_at=now - timedelta(days=10), ends_at=now - timedelta(days=1), daily_quota=5,
                             total_quota=50, per_item_feedback=True)
        Phase.objects.create(task=task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                             starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=2), daily_quota=1,
                             total_quota=3, live_subset_size=12, requires_method_description=True,
                             data_registered_only=True)
        Phase.objects.create(task=task, name="final", kind=Phase.FINAL, gold_version=world.gold_version,
                             starts_at=now + timedelta(days=3), ends_at=now + timedelta(days=30))
    text = text_of(page(Client(), f"/tasks/{task.slug}/overview/"))
    start = f"{now - timedelta(hours=1):%Y-%m-%d %H:%M}"
    expected = [
        "Estimate how annotators judge customer-helpdesk dialogues.",
        "dev development ended",
        "Submissions: at most 5 runs a day (UTC) and 50 in all per team.",
        "Leaderboard on all 30 dialogues.",
        "Each team sees the per-dialogue scores of its own runs.",
        "test test open",
        f"{start} to {now + timedelta(days=2):%Y-%m-%d %H:%M} UTC · gold version 1",
        "Submissions: at most 1 run a day (UTC) and 3 in all per team; every run needs a description of the method.",
        "Live leaderboard on a fixed subset of 12 of the 30 dialogues; scores on the whole set once the results "
        "are published.",
        "Per-dialogue scores reach participants only once the results are published.",
        f"Open for submissions until {now + timedelta(days=2):%Y-%m-%d %H:%M} UTC; the results on the whole test "
        "set are published after it ends.",
        f"Data: for registered teams only, from {start} UTC.",
        "final final upcoming",
        "No submissions: this phase shows the test runs on the whole test set, with significance results, once "
        "the organisers publish the results.",
        "One team per lab.", "No manual labelling of the test data.",
        "dialeval-organisers@example.org",
        "@inproceedings{zeng2019overview, title={Overview of the NTCIR-14 STC-3 task}}",
    ]
    position = 0
    for sentence in expected:  # in this order on the page
        found = text.find(sentence, position)
        assert found >= 0, (sentence, text[position:position + 400])
        position = found + len(sentence)
    assert 'href="mailto:dialeval-organisers@example.org"' in page(Client(), f"/tasks/{task.slug}/overview/")


@pytest.mark.django_db
def test_an_overview_without_phases_or_texts_says_so(world: World) -> None:
    text = text_of(page(Client(), f"/tasks/{world.task.slug}/overview/"))
    for sentence in ("This task has no phases: it accepts runs at any time",
                     "The organisers have not written rules beyond the phases above.", "No contact given.",
                     "The organisers have not said how to cite this task yet."):
        assert sentence in text
    assert "Terms" not in text


def test_contact_links_only_for_email_addresses_and_web_addresses() -> None:
    assert contact_link(" org@example.org ") == "mailto:org@example.org"
    assert contact_link("https://dialeval.example.org/contact") == "https://dialeval.example.org/contact"
    for text in ("Ask on the mailing list", "javascript:alert(1)", "ftp://example.org/x", "mailto:x@y.org"):
        assert contact_link(text) == ""


# Sign-up with affiliation and the task's terms -----------------------------------------------

def sign_up(client: Client, task: Task | None = None, meta: dict[str, str] | None = None, **fields: str) -> Any:
    data = {"username": "dora", "email": "dora@example.org", "password1": "a-long-pass-123",
            "password2": "a-long-pass-123", "team_name": "Dolphins", "affiliation": "Kyoto University"}
    if task is not None:
        data.update(task=task.slug, terms_sha256=task.terms_sha256, accept_terms="on")
    data.update(fields)
    return client.post("/accounts/signup/", {key: value for key, value in data.items() if value is not None},
                       **(meta or {}))


@pytest.mark.django_db
def test_sign_up_records_the_affiliation(world: World) -> None:
    assert sign_up(Client()).status_code == 302
    assert Profile.objects.get(user__username="dora").affiliation == "Kyoto University"
    assert not TermsAcceptance.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("affiliation, message", [
    (None, "This field is required."),
    ("   ", "This field is required."),
    ("Kyoto\u202eUniversity", "Contains U+202E RIGHT-TO-LEFT OVERRIDE at position 6; invisible and control "
                              "characters are not allowed."),
])
def test_sign_up_refuses_a_missing_or_hidden_affiliation(world: World, affiliation: str | None, message: str) -> None:
    response = sign_up(Client(), affiliation=affiliation)
    assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "'")
    assert not Profile.objects.exists()


@pytest.mark.django_db
def test_signing_up_from_a_task_accepts_its_terms_and_records_them(world: World) -> None:
    task = world.task
    task.terms = TERMS
    task.save()
    signup_page = page(Client(), f"/accounts/signup/?task={task.slug}")
    assert "Use the test data for this task only." in signup_page
    assert f'name="terms_sha256" value="{task.terms_sha256}"' in signup_page
    refused = sign_up(Client(), task, accept_terms=None)
    assert refused.status_code == 400 and "This field is required." in refused.content.decode()
    changed = sign_up(Client(), task, terms_sha256="0" * 64)
    assert changed.status_code == 400
    assert "The terms changed while you were reading them: read them again." in changed.content.decode()
    client = Client()
    before = timezone.now()
    response = sign_up(client, task, meta={"REMOTE_ADDR": "203.0.113.9"})
    assert (response.status_code, response["Location"]) == (302, f"/tasks/{task.slug}/overview/")
    acceptance = TermsAcceptance.objects.get()
    assert (acceptance.task, acceptance.user.username, acceptance.username, acceptance.affiliation,
            acceptance.terms, acceptance.terms_sha256, acceptance.ip_address) == (
        task, "dora", "dora", "Kyoto University", TERMS, hashlib.sha256(TERMS.encode()).hexdigest(), "203.0.113.9")
    assert before <= acceptance.accepted_at <= timezone.now()
    assert "You accepted these terms on" in page(client, f"/tasks/{task.slug}/overview/")


@pytest.mark.django_db
def test_uploads_need_the_current_terms_accepted(world: World) -> None:
    task = world.task
    task.terms = TERMS
    task.save()
    client = Client()
    client.force_login(world.alice)

    def upload(name: str) -> Any:
        with committing():
            return client.post(f"/api/v1/tasks/{task.slug}/runs/", {
                "file": SimpleUploadedFile("run.json", run_bytes(world.gold)), "name": name},
                HTTP_AUTHORIZATION=f"Token {world.alice_token}")

    refused = upload("first")
    assert refused.status_code == 403
    assert refused.json() == {"errors": [
        f"terms: accept the terms of {task.slug} first, on its overview page (/tasks/{task.slug}/overview/); every "
        "member who submits accepts them"]}
    assert "Accept the terms of this task on its" in page(client, f"/tasks/{task.slug}/upload/")
    overview = page(client, f"/tasks/{task.slug}/overview/")
    assert 'name="affiliation"' in overview  # alice was made without one: the form asks for it
    missing = client.post(f"/tasks/{task.slug}/terms/", {"terms_sha256": task.terms_sha256, "accept": "on"})
    assert missing.status_code == 302 and not TermsAcceptance.objects.exists()
    stale = client.post(f"/tasks/{task.slug}/terms/", {"terms_sha256": "f" * 64, "accept": "on",
                                                       "affiliation": "NTT"})
    assert stale.status_code == 302 and not TermsAcceptance.objects.exists()
    client.post(f"/tasks/{task.slug}/terms/", {"terms_sha256": task.terms_sha256, "accept": "on",
                                               "affiliation": "NTT"})
    assert upload("first").status_code == 202
    # New terms: a new version, accepted again; both acceptances stay on record.
    task.terms = TERMS + "\nCite the overview paper."
    task.save()
    assert upload("second").status_code == 403
    client.post(f"/tasks/{task.slug}/terms/", {"terms_sha256": task.terms_sha256, "accept": "on"})
    assert upload("second").status_code == 202
    assert list(TermsAcceptance.objects.order_by("accepted_at").values_list("terms", "affiliation")) == [
        (TERMS, "NTT"), (TERMS + "\nCite the overview paper.", "NTT")]


# Password reset ------------------------------------------------------------------------------

@pytest.mark.django_db
def test_password_reset_by_email(world: World) -> None:
    world.alice.email = "alice@example.org"
    world.alice.save()
    client = Client()
    assert "Forgot your password?" in page(client, "/accounts/login/")
    sent = client.post("/accounts/password-reset/", {"email": "alice@example.org"})
    assert (sent.status_code, sent["Location"]) == (302, "/accounts/password-reset/sent/")
    unknown = client.post("/accounts/password-reset/", {"email": "nobody@example.org"})
    assert (unknown.status_code, unknown["Location"]) == (302, "/accounts/password-reset/sent/")  # the same answer
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert (message.to, message.subject) == (["alice@example.org"], "Reset your password on DialEval server")
    link = re.search(r"http://testserver(/accounts/password-reset/[^/]+/[^/]+/)", message.body).group(1)
    assert "the account alice on DialEval server (testserver)" in message.body
    form = client.get(link, follow=True)
    assert "Choose a new password" in form.content.decode()
    changed = client.post(form.redirect_chain[-1][0], {"new_password1": "a-new-long-pass-7",
                                                       "new_password2": "a-new-long-pass-7"})
    assert (changed.status_code, changed["Location"]) == (302, "/accounts/password-reset/done/")
    assert Client().login(username="alice", password="a-new-long-pass-7")
    assert "This link does not work" in client.get(link, follow=True).content.decode()  # used once only


@pytest.mark.django_db
def test_password_resets_are_limited_per_address(world: World, settings: Any) -> None:
    settings.EVALSERVER_PASSWORD_RESET_RATE = "2/h"
    statuses = [Client().post("/accounts/password-reset/", {"email": f"x{n}@example.org"},
                              REMOTE_ADDR="198.51.100.7").status_code for n in range(3)]
    assert statuses == [302, 302, 429]


def settings_of(**env: str) -> subprocess.CompletedProcess[str]:
    """Read the email settings in a fresh process with these variables (and no others of ours)."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith(("EVALSERVER_", "DJANGO_"))}
    clean.update(DJANGO_SETTINGS_MODULE="evalserver.settings", DJANGO_SECRET_KEY="k7#Qz" * 12, **env)
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "print(s.EMAIL_BACKEND, s.EMAIL_HOST, s.EMAIL_PORT, s.EMAIL_USE_TLS, s.EMAIL_USE_SSL, "
            "s.DEFAULT_FROM_EMAIL)")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean, capture_output=True, text=True,
                          check=False)


def test_email_goes_to_the_console_unless_an_smtp_server_is_named(tmp_path: Path) -> None:
    var = {"EVALSERVER_VAR_DIR": str(tmp_path)}
    assert settings_of(**var).stdout.split()[:5] == [
        "django.core.mail.backends.console.EmailBackend", "587", "True", "False", "DialEval"]
    smtp = settings_of(**var, EVALSERVER_EMAIL_HOST="smtp.example.org", EVALSERVER_EMAIL_FROM="tasks@example.org")
    assert smtp.stdout.split() == ["django.core.mail.backends.smtp.EmailBackend", "smtp.example.org", "587", "True",
                                   "False", "tasks@example.org"]
    ssl = settings_of(**var, EVALSERVER_EMAIL_HOST="smtp.example.org", EVALSERVER_EMAIL_PORT="465",
                      EVALSERVER_EMAIL_SSL="true")
    assert ssl.stdout.split()[2:5] == ["465", "False", "True"]
    both = settings_of(**var, EVALSERVER_EMAIL_STARTTLS="yes", EVALSERVER_EMAIL_SSL="true")
    assert both.returncode != 0
    assert "EVALSERVER_EMAIL_STARTTLS and EVALSERVER_EMAIL_SSL are both true" in both.stderr
    port = settings_of(**var, EVALSERVER_EMAIL_PORT="0")
    assert "EVALSERVER_EMAIL_PORT='0' is out of range" in port.stderr


# Commands -------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_create_task_takes_the_overview_texts_and_create_phase_the_data_rule(world: World, tmp_path: Path) -> None:
    rules, citation, terms = tmp_path / "rules.txt", tmp_path / "cite.bib", tmp_path / "terms.txt"
    rules.write_text("Be fair.\n", encoding="utf-8")
    citation.write_text("\ufeff@misc{x, title={Y}}\n", encoding="utf-8")
    terms.write_text(TERMS, encoding="utf-8")
    call_command("create_task", "overview-task", "--contact", "org@example.org", "--rules-file", str(rules),
                 "--citation-file", str(citation), "--terms-file", str(terms), stdout=io.StringIO())
    task = Task.objects.get(slug="overview-task")
    assert (task.contact, task.rules, task.citation, task.terms) == (
        "org@example.org", "Be fair.", "@misc{x, title={Y}}", TERMS)
    call_command("create_phase", world.task.slug, "test", "--kind", "test", "--starts", "2026-12-01T00:00",
                 "--ends", "2026-12-15T00:00", "--data-registered-only", stdout=io.StringIO())
    phase = Phase.objects.get(task=world.task, name="test")
    assert (phase.data_registered_only, phase.starts_at) == (True, datetime(2026, 12, 1, tzinfo=UTC))


@pytest.mark.django_db
def test_create_participant_records_the_affiliation(world: World) -> None:
    out = io.StringIO()
    call_command("create_participant", "carol", "--team", "Cygnus", "--affiliation", "Kyoto University", stdout=out)
    assert Profile.objects.get(user__username="carol").affiliation == "Kyoto University"
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match=r"--affiliation: contains U\+202E RIGHT-TO-LEFT OVERRIDE at position 3"):
        call_command("create_participant", "dave", "--team", "Cygnus", "--affiliation", "Ky\u202eoto")


ROLES = ("anonymous", "team member", "no team", "organiser", "staff")
STATES = {"no phases": None, "before start": (1, 2), "open": (-1, 1), "ended": (-2, -1)}


@pytest.mark.django_db
def test_overview_and_terms_access_matrix(world: World) -> None:
    """Every role x phase state x public or private task: the overview is for everyone who can
    see the task (404 otherwise, as the task's other pages); accepting terms needs a signed-in
    user who can see the task, whatever the phases."""
    from django.contrib.auth import get_user_model

    nora = get_user_model().objects.create_user("nora", password="nora-pass-1")
    users = {"anonymous": None, "team member": world.alice, "no team": nora, "organiser": world.organiser,
             "staff": world.staff}
    world.task.terms = TERMS
    world.task.save()
    problems = []
    for state, window in STATES.items():
        for registered_only in ((False,) if window is None else (False, True)):
            Phase.objects.filter(task=world.task).delete()
            if window is not None:
                now = timezone.now()
                with committing():
                    Phase.objects.create(task=world.task, name="p", gold_version=world.gold_version,
                                         data_registered_only=registered_only,
                                         starts_at=now + timedelta(days=window[0]),
                                         ends_at=now + timedelta(days=window[1]))
            for public in (True, False):
                Task.objects.filter(pk=world.task.pk).update(is_public=public)
                TermsAcceptance.objects.all().delete()
                for role, user in users.items():
                    client = Client()
                    if user is not None:
                        client.force_login(user)
                    sees = public or role in ("organiser", "staff")
                    where = f"{state}, registered only {registered_only}, public {public}, {role}"
                    got = client.get(f"/tasks/{world.task.slug}/overview/").status_code
                    if got != (200 if sees else 404):
                        problems.append(f"{where}: overview {got}")
                    answer = client.post(f"/tasks/{world.task.slug}/terms/", {
                        "terms_sha256": world.task.terms_sha256, "accept": "on", "affiliation": "Osaka University"})
                    wanted = 302 if user is None or sees else 404
                    if answer.status_code != wanted:
                        problems.append(f"{where}: terms {answer.status_code}, expected {wanted}")
                    if user is None and not answer["Location"].startswith("/accounts/login/"):
                        problems.append(f"{where}: terms sent to {answer['Location']}, not to sign in")
                    recorded = TermsAcceptance.objects.filter(user=user).exists() if user is not None else False
                    if recorded != (user is not None and sees):
                        problems.append(f"{where}: acceptance recorded {recorded}")
    assert not problems, "\n".join(problems[:30])
