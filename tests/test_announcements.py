"""Announcements and messages to every participant (issue 41, item 3): posted from the dashboard,
shown on the task's overview and in its Atom feed, e-mailed one per person with the exact text;
nobody sees another's address; every role and task state of the new URLs."""

from __future__ import annotations

from typing import Any
from xml.etree import ElementTree

import pytest
from django.core import mail
from django.test import Client

from notices import outbox
from notices.models import Announcement, Email
from tasks import submissions
from tasks.models import AccessLog, TermsAcceptance
from tests.conftest import World, committing, run_bytes

SITE = "https://eval.example.org"
ATOM = "{http://www.w3.org/2005/Atom}"


@pytest.fixture(autouse=True)
def _site(settings: Any) -> None:
    settings.EVALSERVER_SITE_URL = SITE
    settings.SITE_NAME = "DialEval server"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


@pytest.fixture
def round_world(world: World) -> World:
    """alice (Aurora) has a run; bob (Borealis) accepted the terms; dave has an account and nothing else."""
    users = type(world.alice)
    for user, address in ((world.alice, "alice@aurora.example"), (world.bob, "bob@borealis.example")):
        user.email = address
        user.save(update_fields=["email"])
    users.objects.create_user("dave", "dave@elsewhere.example", "dave-pass-1")
    with committing():
        submissions.submit_run(world.task, world.alice, submissions.Submission(
            content=run_bytes(world.gold), filename="r.json", name="a1"))
    TermsAcceptance.objects.create(task=world.task, user=world.bob, username="bob", terms="t", terms_sha256="0" * 64)
    Email.objects.all().delete()  # the run's own e-mail
    world.task.contact = "organisers@demo.example"
    world.task.save()
    return world


def as_user(user: Any) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


@pytest.mark.django_db
def test_an_announcement_is_on_the_overview_in_the_feed_and_e_mailed(round_world: World) -> None:
    world = round_world
    organiser = as_user(world.organiser)
    with committing():
        answer = organiser.post("/organiser/demo-task/announcements/", {
            "action": "post", "title": "Test data released", "email": "on",
            "body": "The test dialogues are on the data page.\r\nSubmit by Friday <b>noon</b>."})
    assert answer.status_code == 302 and answer["Location"] == "/organiser/demo-task/#announcements"
    item = Announcement.objects.get()
    assert (item.title, item.recipients, item.author) == ("Test data released", 2, world.organiser)
    assert item.body == "The test dialogues are on the data page.\nSubmit by Friday <b>noon</b>."
    assert AccessLog.objects.filter(task=world.task, what="posted the announcement 'Test data released'").exists()
    assert mail.outbox == []
    outbox.send_due()
    assert sorted(message.to[0] for message in mail.outbox) == ["alice@aurora.example", "bob@borealis.example"]
    message = next(message for message in mail.outbox if message.to == ["bob@borealis.example"])
    assert message.subject == "Demo task: Test data released"
    assert message.body == (
        "Hello bob,\n\n"
        f"The organisers of Demo task announced on {item.created_at:%Y-%m-%d} at {item.created_at:%H:%M} UTC:\n\n"
        "Test data released\n\n"
        "The test dialogues are on the data page.\nSubmit by Friday <b>noon</b>.\n\n"
        f"Every announcement: {SITE}/tasks/demo-task/overview/#announcements\n\n"
        "-- \nYou get this e-mail because you take part in Demo task on DialEval server. To stop e-mails the "
        "organisers' announcements of the tasks you take part in, untick them on your account page: "
        f"{SITE}/accounts/account/#notifications\n")
    page = Client().get("/tasks/demo-task/overview/").content.decode()
    assert "Test data released" in page and "Submit by Friday &lt;b&gt;noon&lt;/b&gt;." in page
    assert 'href="/tasks/demo-task/announcements.atom"' in page
    feed = Client().get("/tasks/demo-task/announcements.atom")
    assert feed.status_code == 200 and feed["Content-Type"].startswith("application/atom+xml")
    root = ElementTree.fromstring(feed.content)  # noqa: S314 - this server's own answer
    assert root.find(f"{ATOM}title").text == "Demo task: announcements"
    [entry] = root.findall(f"{ATOM}entry")
    assert entry.find(f"{ATOM}title").text == "Test data released"
    assert entry.find(f"{ATOM}link").get("href") == f"http://testserver/tasks/demo-task/overview/#announcement-{item.pk}"
    # The summary is HTML to a feed reader: the organisers' text arrives escaped, never as markup.
    assert entry.find(f"{ATOM}summary").text == (
        "<p>The test dialogues are on the data page.<br>Submit by Friday &lt;b&gt;noon&lt;/b&gt;.</p>")
    assert entry.find(f"{ATOM}updated").text == item.created_at.isoformat()


@pytest.mark.django_db
def test_an_announcement_not_e_mailed_and_one_taken_down(round_world: World) -> None:
    organiser = as_user(round_world.organiser)
    with committing():
        organiser.post("/organiser/demo-task/announcements/", {"action": "post", "title": "Quiet",
                                                               "body": "Only here."})
    item = Announcement.objects.get()
    assert item.recipients == 0 and Email.objects.count() == 0
    organiser.post("/organiser/demo-task/announcements/", {"action": "delete", "id": str(item.pk)})
    assert Announcement.objects.filter(pk=item.pk).exists()  # not confirmed
    organiser.post("/organiser/demo-task/announcements/", {"action": "delete", "id": str(item.pk), "confirm": "yes"})
    assert not Announcement.objects.exists()
    assert "Quiet" not in Client().get("/tasks/demo-task/announcements.atom").content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(("form", "said"), [
    ({"action": "post", "title": "", "body": "text"}, "Title: This field is required."),
    ({"action": "post", "title": "t", "body": "   "}, "Announcement: This field is required."),
    ({"action": "post", "title": "x" * 201, "body": "b"}, "Title: Ensure this value has at most 200 characters"),
    ({"action": "delete", "id": "99999999999999999999"}, "No such announcement of this task."),
])
def test_a_bad_announcement_says_what_is_wrong_and_stores_nothing(round_world: World, form: dict, said: str) -> None:
    organiser = as_user(round_world.organiser)
    page = organiser.post("/organiser/demo-task/announcements/", form, follow=True).content.decode()
    assert said in page.replace("&#x27;", "'")
    assert not Announcement.objects.exists() and not Email.objects.exists()


@pytest.mark.django_db
def test_a_message_goes_to_every_participant_one_e_mail_each(round_world: World) -> None:
    world = round_world
    organiser = as_user(world.organiser)
    refused = organiser.post("/organiser/demo-task/message/", {"subject": "Deadline moved", "body": "To Monday."},
                             follow=True).content.decode()
    assert "Nothing was sent." in refused and Email.objects.count() == 0  # the confirmation box unticked
    with committing():
        organiser.post("/organiser/demo-task/message/", {"subject": "Deadline moved", "confirm": "on",
                                                         "body": "The test phase now ends on Monday."})
    outbox.send_due()
    assert len(mail.outbox) == 2
    addresses = ["alice@aurora.example", "bob@borealis.example", "dave@elsewhere.example"]
    for message in mail.outbox:
        # One recipient per e-mail, no copies: nobody learns another participant's address.
        assert len(message.to) == 1 and message.cc == [] and message.bcc == []
        assert [address for address in addresses if address in str(message.message())] == message.to
    message = next(message for message in mail.outbox if message.to == ["alice@aurora.example"])
    assert message.subject == "Demo task: Deadline moved"
    assert message.body == (
        "Hello alice,\n\nolivia, an organiser of Demo task, wrote to every participant:\n\n"
        "The test phase now ends on Monday.\n\n"
        f"The task's overview: {SITE}/tasks/demo-task/overview/\n"
        "Write to the organisers at organisers@demo.example.\n\n"
        "-- \nYou get this e-mail because you take part in Demo task on DialEval server; messages the organisers "
        "write to every participant cannot be turned off.\n")
    assert AccessLog.objects.filter(what="wrote to 2 participants: 'Deadline moved'").exists()


@pytest.mark.django_db
def test_messages_reach_participants_who_turned_every_notification_off(round_world: World) -> None:
    as_user(round_world.bob).post("/accounts/notifications/", {})
    with committing():
        as_user(round_world.organiser).post("/organiser/demo-task/message/", {
            "subject": "s", "body": "b", "confirm": "on"})
        as_user(round_world.organiser).post("/organiser/demo-task/announcements/", {
            "action": "post", "title": "t", "body": "b", "email": "on"})
    assert sorted(Email.objects.values_list("address", "topic")) == [
        ("alice@aurora.example", "announcements"), ("alice@aurora.example", "message"),
        ("bob@borealis.example", "message")]


ROLES = ("anonymous", "participant", "other", "organiser", "staff-only", "superuser")


def client_for(role: str, world: World) -> Client:
    users = type(world.alice)
    user = {"participant": world.alice, "other": world.bob, "organiser": world.organiser, "superuser": world.staff,
            "staff-only": users.objects.get_or_create(username="vera", defaults={"is_staff": True})[0]}.get(role)
    return as_user(user)


@pytest.mark.django_db
@pytest.mark.parametrize("public", [True, False], ids=["public task", "hidden task"])
def test_every_new_url_for_every_role_and_task_state(round_world: World, public: bool) -> None:
    world = round_world
    Announcement.objects.create(task=world.task, title="Secret plan", body="Hidden words.")
    world.task.is_public = public
    world.task.save()
    seen = {}
    for role in ROLES:
        client = client_for(role, world)
        feed = client.get("/tasks/demo-task/announcements.atom")
        overview = client.get("/tasks/demo-task/overview/")
        dashboard = client.get("/organiser/demo-task/")
        with committing():
            announce = client.post("/organiser/demo-task/announcements/", {"action": "post", "title": f"by {role}",
                                                                           "body": "b"})
            message = client.post("/organiser/demo-task/message/", {"subject": f"by {role}", "body": "b",
                                                                    "confirm": "on"})
        seen[role] = (feed.status_code, overview.status_code, dashboard.status_code, announce.status_code,
                      message.status_code, "Secret plan" in feed.content.decode(),
                      "Secret plan" in overview.content.decode())
    may_organise = (200, 200, 200, 302, 302, True, True)
    if public:
        reader = (200, 200, 404, 404, 404, True, True)
        expected = {"anonymous": (200, 200, 302, 302, 302, True, True), "participant": reader, "other": reader,
                    "staff-only": reader, "organiser": may_organise, "superuser": may_organise}
    else:
        outsider = (404, 404, 404, 404, 404, False, False)
        expected = {"anonymous": (404, 404, 302, 302, 302, False, False), "participant": outsider, "other": outsider,
                    "staff-only": outsider, "organiser": may_organise, "superuser": may_organise}
    assert seen == expected
    assert sorted(Announcement.objects.values_list("title", flat=True)) == ["Secret plan", "by organiser",
                                                                            "by superuser"]
    assert sorted(set(Email.objects.filter(topic="message").values_list("subject", flat=True))) == [
        "Demo task: by organiser", "Demo task: by superuser"]


@pytest.mark.django_db
def test_the_dashboard_shows_the_forms_and_what_the_outbox_did(round_world: World) -> None:
    with committing():
        as_user(round_world.organiser).post("/organiser/demo-task/message/", {"subject": "s", "body": "b",
                                                                              "confirm": "on"})
    Email.objects.filter(address="bob@borealis.example").update(attempts=1, last_error="SMTPServerDisconnected")
    page = as_user(round_world.organiser).get("/organiser/demo-task/").content.decode()
    assert 'id="announcement-form"' in page and 'id="message-form"' in page
    assert "its terms: 2 now, 2 of them with an e-mail address" in page
    assert ("E-mails of this task: 0 sent, 2 waiting (1 after a failed attempt: they are tried again, at most 6 "
            "hours apart).") in page
    outbox.send_due()
    page = as_user(round_world.organiser).get("/organiser/demo-task/").content.decode()
    assert "E-mails of this task: 2 sent, 0 waiting." in page
