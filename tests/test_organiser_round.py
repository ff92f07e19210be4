"""A round without the Django admin (issue 41, item 4): the task's settings, co-organisers, who
accepted the terms, adding data files and withdrawing a run, from the dashboard's pages; every bad
input named, nothing stored then; every change in the access log."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tasks import submissions
from tasks.models import AccessLog, DataFile, Run, Task, TermsAcceptance
from tests.conftest import World, committing, run_bytes


def organiser_client(world: World) -> Client:
    client = Client()
    client.force_login(world.organiser)
    return client


def settings_form(task: Task, **changes: Any) -> dict[str, Any]:
    form = {"form": "settings", "title": task.title, "description": task.description, "rules": task.rules,
            "terms": task.terms, "contact": task.contact, "citation": task.citation,
            "max_team_size": "", "permutations": str(task.permutations)}
    if task.is_public:
        form["is_public"] = "on"
    form.update(changes)
    return {name: value for name, value in form.items() if value is not None}


def logged(world: World) -> list[str]:
    return list(AccessLog.objects.filter(task=world.task).order_by("pk").values_list("what", flat=True))


@pytest.mark.django_db
def test_the_settings_page_changes_texts_terms_and_visibility(world: World) -> None:
    client = organiser_client(world)
    page = client.get("/organiser/demo-task/settings/")
    assert page.status_code == 200 and 'id="settings-form"' in page.content.decode()
    answer = client.post("/organiser/demo-task/settings/", settings_form(
        world.task, title="DialEval-5 English", rules="One run a day.\r\nNo manual labels.",
        terms="Use the data for research only.", contact="dialeval@example.org", is_public=None,
        requires_team_approval="on", max_team_size="4", permutations="5000"), follow=True)
    text = answer.content.decode()
    assert "The settings of DialEval-5 English are saved. The terms changed" in text
    task = Task.objects.get(pk=world.task.pk)
    assert (task.title, task.rules, task.terms, task.contact, task.is_public, task.requires_team_approval,
            task.max_team_size, task.permutations) == (
        "DialEval-5 English", "One run a day.\nNo manual labels.", "Use the data for research only.",
        "dialeval@example.org", False, True, 4, 5000)
    assert logged(world)[-1] == ("changed the task's settings: title, rules, terms, contact, is public, "
                                 "requires team approval, max team size, permutations")
    # The public no longer sees a hidden task; its organisers still do.
    assert Client().get("/tasks/demo-task/overview/").status_code == 404
    assert "One run a day." in client.get("/tasks/demo-task/overview/").content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(("change", "said"), [
    ({"title": ""}, "This field is required."),
    ({"permutations": "50"}, "Ensure this value is greater than or equal to 100."),
    ({"max_team_size": "0"}, "Ensure this value is greater than or equal to 1."),
    ({"title": "bad\x00title"}, "Null characters are not allowed."),
])
def test_bad_settings_are_named_and_nothing_is_stored(world: World, change: dict, said: str) -> None:
    before = Task.objects.filter(pk=world.task.pk).values().get()
    answer = organiser_client(world).post("/organiser/demo-task/settings/", settings_form(world.task, **change))
    assert answer.status_code == 400
    text = answer.content.decode()
    assert "Nothing was stored." in text and said in text
    assert Task.objects.filter(pk=world.task.pk).values().get() == before


@pytest.mark.django_db
def test_co_organisers_are_added_and_removed_never_the_last(world: World) -> None:
    users = type(world.alice)
    carol = users.objects.create_user("carol", "Carol@Uni.example", "carol-pass-1")
    client = organiser_client(world)
    for who, said in (("", "give the username or e-mail address"), ("nobody", "no active account has"),
                      ("carol@uni.example", "carol now organises Demo task")):
        text = client.post("/organiser/demo-task/settings/", {"form": "add-organiser", "who": who},
                           follow=True).content.decode()
        assert said in text, who
    assert set(world.task.organisers.values_list("username", flat=True)) == {"olivia", "carol"}
    carol_client = Client()
    carol_client.force_login(carol)
    assert carol_client.get("/organiser/demo-task/").status_code == 200
    client.post("/organiser/demo-task/settings/", {"form": "remove-organiser", "user": str(world.organiser.pk)})
    assert list(world.task.organisers.values_list("username", flat=True)) == ["carol"]
    assert client.get("/organiser/demo-task/").status_code == 404  # olivia removed herself
    text = carol_client.post("/organiser/demo-task/settings/", {"form": "remove-organiser", "user": str(carol.pk)},
                             follow=True).content.decode()
    assert "carol is the task&#x27;s only organiser: add another one first." in text
    assert list(world.task.organisers.values_list("username", flat=True)) == ["carol"]
    assert logged(world) == ["added carol as an organiser", "removed olivia from the organisers"]
    # Another task's organiser, or a participant, cannot reach the form.
    assert Client().post("/organiser/demo-task/settings/", {"form": "add-organiser", "who": "alice"}).status_code == 302
    participant = Client()
    participant.force_login(world.alice)
    assert participant.post("/organiser/demo-task/settings/", {"form": "add-organiser",
                                                               "who": "alice"}).status_code == 404
    assert not world.task.organisers.filter(username="alice").exists()


@pytest.mark.django_db
def test_the_settings_page_lists_who_accepted_which_terms(world: World) -> None:
    world.task.terms = "Version two."
    world.task.save()
    TermsAcceptance.objects.create(task=world.task, user=world.alice, username="alice", affiliation="Aurora Uni",
                                   terms="Version one.", terms_sha256="a" * 64)
    TermsAcceptance.objects.create(task=world.task, user=world.bob, username="bob", affiliation="Borealis Lab",
                                   terms="Version two.", terms_sha256=world.task.terms_sha256)
    text = organiser_client(world).get("/organiser/demo-task/settings/").content.decode()
    assert "Aurora Uni" in text and "aaaaaaaaaaaa (an earlier text)" in text
    assert f"{world.task.terms_sha256[:12]} (current)" in text and "Borealis" in text


@pytest.mark.django_db
def test_a_data_file_is_added_from_the_dashboard_and_gold_is_refused(world: World) -> None:
    client = organiser_client(world)
    assert client.get("/organiser/demo-task/data-files/").status_code == 200
    answer = client.post("/organiser/demo-task/data-files/", {
        "file": SimpleUploadedFile("Annotation guide.pdf", b"%PDF-1.4 guide"), "description": "How we annotate"})
    assert answer.status_code == 302 and answer["Location"] == "/organiser/demo-task/#data-files"
    added = DataFile.objects.get()
    assert (added.name, added.size, added.description, added.phase) == ("Annotation_guide.pdf", 14,
                                                                         "How we annotate", None)
    assert Client().get("/tasks/demo-task/data/Annotation_guide.pdf").status_code == 200
    assert logged(world)[-1].startswith("added the data file Annotation_guide.pdf to the whole task's section")
    for form, said in (
            ({"file": SimpleUploadedFile("x.pdf", b"x"), "name": "../x.pdf"}, "is not a valid file name"),
            ({"file": SimpleUploadedFile("Annotation guide.pdf", b"new")}, "the task has a file named"),
            ({"file": SimpleUploadedFile("train.json", orjson.dumps(world.gold))}, "gold version 1 of this task"),
            ({"name": "a.txt"}, "File: This field is required."),
            ({"file": SimpleUploadedFile("a.txt", b"a"), "phase": "nope"}, "Select a valid choice.")):
        answer = client.post("/organiser/demo-task/data-files/", form)
        text = answer.content.decode().replace("&#x27;", "'")
        assert answer.status_code == 400 and "Nothing was stored." in text and said in text, said
    assert DataFile.objects.count() == 1
    client.post("/organiser/demo-task/data-files/", {
        "file": SimpleUploadedFile("Annotation guide.pdf", b"%PDF-1.5 new"), "replace": "on"})
    assert DataFile.objects.get().size == 12


@pytest.mark.django_db
def test_an_organiser_withdraws_a_run_after_confirming(world: World) -> None:
    with committing():
        run = submissions.submit_run(world.task, world.alice, submissions.Submission(
            content=run_bytes(world.gold), filename="r.json", name="cheat"))
    client = organiser_client(world)
    assert "withdraw…" in client.get("/organiser/demo-task/").content.decode()
    client.post("/organiser/demo-task/withdraw/", {"run": str(run.pk)})
    assert Run.objects.get(pk=run.pk).withdrawn_at is None
    assert "cheat" in Client().get("/tasks/demo-task/").content.decode()
    text = client.post("/organiser/demo-task/withdraw/", {"run": str(run.pk), "confirm": "yes"},
                       follow=True).content.decode()
    assert f"Run {run.pk} (cheat) is withdrawn" in text
    assert Run.objects.get(pk=run.pk).withdrawn_at is not None
    assert "cheat" not in Client().get("/tasks/demo-task/").content.decode()
    assert logged(world)[-1] == f"withdrew run {run.pk} (cheat of Aurora)"
    other = Task.objects.create(slug="other", title="Other", config=world.task.config)
    other.organisers.add(world.organiser)
    text = client.post("/organiser/other/withdraw/", {"run": str(run.pk), "confirm": "yes"},
                       follow=True).content.decode()
    assert "No such run of this task." in text  # a run of another task is not reached through this one
