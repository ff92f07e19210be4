"""A task's data section (issue 17, item 1): participants' data made from the gold by the kind,
never the gold; the run format; a sample run; organisers' files; who may download what.

The expectations are written here from the rules as the documentation states them (docs/participants/index.md,
"Data"; docs/organisers/index.md, "Data sections"), not read from
``tasks.access``: organisers always; the format and the task's own files for everyone who can see
the task; a phase's data (participants' data, sample run, the phase's files) from the phase's
start, and, for a phase "for registered teams only", to signed-in members of a team only.
"""

from __future__ import annotations

import hashlib
import io
from datetime import timedelta
from typing import Any

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from fixtures.synthetic import generate_gold
from tasks import blobs, datafiles
from tasks.errors import Rejected
from tasks.models import AccessLog, DataFile, GoldVersion, Phase, Task, TermsAcceptance
from tasks.organising import create_task, load_gold_version
from tests.conftest import World, committing

SECRET = "SECRET-7f3a"


def body(response: Any) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def keys_in(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {key for item in value.values() for key in keys_in(item)}
    if isinstance(value, list):
        return {key for item in value for key in keys_in(item)}
    return set()


def secret_gold(n: int = 12, seed: int = 3) -> list[dict[str, Any]]:
    """A DQ/ND gold whose organiser added notes the scorer ignores: none may be published."""
    gold = generate_gold(n, seed=seed)
    for index, dialogue in enumerate(gold):
        dialogue["organiser_note"] = f"{SECRET} dialogue {index}"
        for turn in dialogue["turns"]:
            turn["gold_comment"] = f"{SECRET} turn"
    return gold


def expected_stc3_participant_data(gold: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What participants of a DQ/ND task get, written out independently of the kind."""
    return [{"id": dialogue["id"], "turns": [{"sender": turn["sender"], "utterances": turn["utterances"]}
                                             for turn in dialogue["turns"]]} for dialogue in gold]


def load(task: Task, gold: list[dict[str, Any]], name: str = "gold.json") -> GoldVersion:
    with committing():
        return load_gold_version(task, orjson.dumps(gold), name)


# Never the gold ---------------------------------------------------------------------------------

@pytest.mark.django_db
def test_stc3_participants_data_is_the_gold_without_annotations_or_organiser_fields(world: World) -> None:
    gold = secret_gold()
    version = load(world.task, gold)
    client = Client()
    listing = client.get(f"/api/v1/tasks/{world.task.slug}/data/").json()
    assert listing["gold_version"] == version.number == 2
    names = [entry["name"] for entry in listing["files"]]
    assert names == ["participant-data.json", "format.json", "sample-run.json"]
    downloads = {}
    for entry in listing["files"]:
        response = client.get(f"/api/v1/tasks/{world.task.slug}/data/{entry['name']}")
        assert response.status_code == 200
        content = body(response)
        assert (len(content), hashlib.sha256(content).hexdigest()) == (entry["size"], entry["sha256"])
        assert SECRET.encode() not in content
        downloads[entry["name"]] = orjson.loads(content)
    data = downloads["participant-data.json"]
    assert data == expected_stc3_participant_data(gold)
    assert not keys_in(data) & {"annotations", "quality", "nugget", "organiser_note", "gold_comment"}
    # The sample run is the uniform run: every label of a scale equally likely, nothing from the gold.
    sample = downloads["sample-run.json"]
    assert [entry["id"] for entry in sample] == [dialogue["id"] for dialogue in gold]
    first = sample[0]
    assert first["quality"]["A"] == {label: 0.2 for label in ("2", "1", "0", "-1", "-2")}
    turns = gold[0]["turns"]
    for estimate, turn in zip(first["nugget"], turns, strict=True):
        labels = ("CNUG0", "CNUG", "CNUG*", "CNaN") if turn["sender"] == "customer" else ("HNUG", "HNUG*", "HNaN")
        assert estimate == {label: 1 / len(labels) for label in labels}
    assert downloads["format.json"]["run_format"]["fields"][0]["path"] == "[i].id"
    assert [measure["key"] for measure in downloads["format.json"]["measures"]][:2] == [
        "quality.A.rsnod", "quality.A.nmd"]


@pytest.mark.django_db
def test_metric_participants_data_has_no_judgement_system_property_or_grade() -> None:
    from fixtures.metric_demo import generate_gold as metric_gold

    gold = metric_gold(4, 3, seed=2, grades=True)
    for context in gold:
        for response in context["responses"]:
            response["system"] = f"{SECRET}-{response['system']}"
    task = create_task("metric-data", "metric-quick", "Metric data", kind="metric")
    for publish in (True, False):
        task.config = {**task.config, "baselines": [], "publish_references": publish}
        task.save()
        load(task, gold)
        content = body(Client().get(f"/tasks/{task.slug}/data/participant-data.json"))
        assert SECRET.encode() not in content
        data = orjson.loads(content)
        assert not keys_in(data) & {"human", "system", "property", "grades"}
        assert ("references" in keys_in(data)) is publish
        # Responses in id order, not in the file's (system) order; texts as in the gold.
        for published, context in zip(data, gold, strict=True):
            texts = {response["id"]: response["text"] for response in context["responses"]}
            assert [response["id"] for response in published["responses"]] == sorted(texts)
            assert {response["id"]: response["text"] for response in published["responses"]} == texts
            assert published["context"] == context["context"]
    # The pages of another kind: its format, its measures, its item noun.
    page = Client().get(f"/tasks/{task.slug}/data/").content.decode()
    assert "<code>[i].score</code>" in page and "The 4 contexts of gold version 2" in page
    assert "higher is better" in page
    sample = orjson.loads(body(Client().get(f"/tasks/{task.slug}/data/sample-run.json")))
    assert sorted(entry["id"] for entry in sample) == sorted(
        response["id"] for context in gold for response in context["responses"])
    assert Client().get(f"/tasks/{task.slug}/overview/").status_code == 200


@pytest.mark.django_db
def test_a_version_loaded_before_gold_files_were_kept_says_it_has_no_participants_data(world: World) -> None:
    GoldVersion.objects.filter(pk=world.gold_version.pk).update(source_sha256="")
    client = Client()
    listing = client.get(f"/api/v1/tasks/{world.task.slug}/data/").json()
    assert [entry["name"] for entry in listing["files"]] == ["format.json", "sample-run.json"]
    assert listing["notes"] == [
        "Gold version 1 was loaded before the server kept gold files, so its participants' data cannot be made "
        "here: ask the organisers, who can load the same file again to publish it."]
    assert client.get(f"/tasks/{world.task.slug}/data/participant-data.json").status_code == 404
    page = client.get(f"/tasks/{world.task.slug}/data/").content.decode()
    assert "was loaded before the server kept gold files" in page


@pytest.mark.django_db
def test_a_kept_gold_file_lost_from_storage_is_said_so(world: World) -> None:
    blobs.path("gold", world.gold_version.source_sha256).unlink()
    datafiles._participant_data.cache_clear()
    listing = Client().get(f"/api/v1/tasks/{world.task.slug}/data/").json()
    assert [entry["name"] for entry in listing["files"]] == ["format.json", "sample-run.json"]
    assert listing["notes"] == [
        "The file of gold version 1 is missing from the server's storage, so its participants' data cannot be made: "
        "the organisers have been told (loading the same file again restores it)."]


@pytest.mark.django_db
def test_the_kept_gold_file_is_the_upload_byte_for_byte_and_never_served(world: World) -> None:
    content = orjson.dumps(secret_gold(), option=orjson.OPT_INDENT_2)
    with committing():
        version = load_gold_version(world.task, content, "gold.json")
    assert version.source_sha256 == hashlib.sha256(content).hexdigest() == version.sha256
    assert blobs.path("gold", version.source_sha256).read_bytes() == content
    client = Client()
    client.force_login(world.organiser)
    for url in ("/tasks/demo-task/data/gold.json", f"/tasks/demo-task/data/{version.source_sha256}",
                "/api/v1/tasks/demo-task/data/gold.json"):
        assert client.get(url).status_code == 404


@pytest.mark.django_db
def test_a_task_without_gold_lists_the_format_only(db: Any) -> None:
    task = create_task("no-gold-yet", "stc3", "No gold yet")
    listing = Client().get(f"/api/v1/tasks/{task.slug}/data/").json()
    assert [entry["name"] for entry in listing["files"]] == ["format.json"]
    assert listing["gold_version"] is None
    assert listing["notes"] == ["The organisers have not loaded gold data yet: participants' data and a sample "
                                "run come with it."]


# Organisers' files ---------------------------------------------------------------------------

def add(task: Task, name: str, content: bytes, **options: Any) -> DataFile:
    with committing():
        return datafiles.add_data_file(task, name, io.BytesIO(content), **options)


@pytest.mark.django_db
def test_organisers_files_names_and_sizes_are_checked(world: World, settings: Any) -> None:
    task = world.task
    add(task, "guidelines.txt", b"read me")
    bad = {"../etc.txt": "is not a valid file name", ".hidden": "is not a valid file name",
           "a/b.txt": "is not a valid file name", "x" * 101: "is not a valid file name",
           "a..b": "no '..'", "ends.": "no '..' and no '.' at the end", "format.json": "a file the server makes",
           "Participant-Data.JSON": "a file the server makes", "GUIDELINES.TXT": "has a file named 'guidelines.txt'",
           "guidelines.txt": "pass replace", "tab\there": "is not a valid file name", "": "is not a valid file name",
           # Windows devices, whatever the extension (issue 24: the client accepted con.txt).
           "con.txt": "name: 'con.txt' is not a valid file name: Windows keeps 'con' for a device, whatever the "
                      "extension (participants could not save it)",
           "LPT1.tar.gz": "Windows keeps 'LPT1' for a device", "nul": "Windows keeps 'nul' for a device"}
    for name, problem in bad.items():
        with pytest.raises(Rejected) as refused:
            add(task, name, b"x")
        assert any(problem in line for line in refused.value.errors), (name, refused.value.errors)
    other = create_task("other-task", "stc3", "Other")
    with committing():
        other_phase = Phase.objects.create(task=other, name="dev", gold_version=world.gold_version,
                                           starts_at=timezone.now(), ends_at=timezone.now() + timedelta(days=1))
    with pytest.raises(Rejected) as refused:
        add(task, "ok.txt", b"x", phase=other_phase)
    assert refused.value.errors == ["phase: 'dev' is a phase of another task"]
    settings.EVALSERVER_DATA_FILE_MAX_BYTES = 10
    with pytest.raises(Rejected) as refused:
        add(task, "big.bin", b"x" * 11)
    assert refused.value.status == 413
    assert refused.value.errors == ["file: more than 10 bytes, the largest data file accepted "
                                    "(EVALSERVER_DATA_FILE_MAX_BYTES)"]
    assert add(task, "small.bin", b"x" * 10).size == 10
    assert sorted(DataFile.objects.values_list("name", flat=True)) == ["guidelines.txt", "small.bin"]
    leftovers = [path for path in (settings.MEDIA_ROOT / "data").rglob("*") if path.is_file()]
    assert sorted(path.name for path in leftovers) == sorted(
        hashlib.sha256(content).hexdigest() for content in (b"read me", b"x" * 10))


@pytest.mark.django_db
def test_replacing_and_deleting_a_file_keeps_only_the_stored_copies_in_use(world: World) -> None:
    first = add(world.task, "train.json", b"[1]")
    add(world.task, "copy.json", b"[1]")  # the same content under another name shares the stored copy
    second = add(world.task, "train.json", b"[2]", replace=True, description="corrected")
    assert (second.pk, second.sha256, second.description) == (first.pk, hashlib.sha256(b"[2]").hexdigest(),
                                                                "corrected")
    assert blobs.path("data", first.sha256).exists()  # copy.json still uses it
    with committing():
        DataFile.objects.get(name="copy.json").delete()
    assert not blobs.path("data", first.sha256).exists()
    assert body(Client().get("/tasks/demo-task/data/train.json")) == b"[2]"
    with committing():
        add(world.task, "same.json", b"[2]")
        DataFile.objects.get(name="train.json").delete()
    assert blobs.path("data", second.sha256).exists()  # same.json shares it


@pytest.mark.django_db
def test_add_data_file_command(world: World, tmp_path: Any) -> None:
    path = tmp_path / "Guide lines.pdf"
    path.write_bytes(b"%PDF-1.4 guide")
    out = io.StringIO()
    errors = io.StringIO()
    with pytest.raises(CommandError, match="1 problem"):
        call_command("add_data_file", world.task.slug, str(path), "--name", "../x.pdf", stderr=errors)
    assert errors.getvalue() == (f"{path}: name: '../x.pdf' is not a valid file name: use 1-100 letters, digits, "
                                 "'.', '-' and '_', starting with a letter or digit\n")
    call_command("add_data_file", world.task.slug, str(path), stdout=io.StringIO())
    assert Client().get("/tasks/demo-task/data/Guide_lines.pdf").status_code == 200
    call_command("add_data_file", world.task.slug, str(path), "--name", "guidelines.pdf", "--description",
                 "How to annotate", stdout=out)
    assert out.getvalue().startswith("demo-task: guidelines.pdf (14 bytes, sha256 ")
    assert out.getvalue().endswith("in the data section of the whole task\n")
    with pytest.raises(CommandError, match="no phase 'test' in demo-task"):
        call_command("add_data_file", world.task.slug, str(path), "--phase", "test")
    errors = io.StringIO()
    with pytest.raises(CommandError, match="nothing was stored"):
        call_command("add_data_file", world.task.slug, str(path), "--name", "guidelines.pdf", stderr=errors)
    assert "name: the task has a file named 'guidelines.pdf' already" in errors.getvalue()
    call_command("add_data_file", world.task.slug, str(path), "--name", "guidelines.pdf", "--replace",
                 stdout=io.StringIO())
    response = Client().get("/tasks/demo-task/data/guidelines.pdf")
    assert (response["Content-Type"], body(response)) == ("application/pdf", b"%PDF-1.4 guide")
    assert response["Content-Disposition"] == 'attachment; filename="demo-task-guidelines.pdf"'


@pytest.mark.django_db
def test_the_admin_adds_a_file_and_refuses_a_bad_name(world: World) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = Client()
    client.force_login(world.staff)
    refused = client.post("/admin/tasks/datafile/add/", {
        "task": world.task.pk, "file": SimpleUploadedFile("x.txt", b"x"), "name": "../x", "description": ""})
    assert refused.status_code == 200
    assert "is not a valid file name" in refused.content.decode()
    with committing():
        added = client.post("/admin/tasks/datafile/add/", {
            "task": world.task.pk, "file": SimpleUploadedFile("rules of the game.txt", b"be kind"),
            "name": "", "description": "the rules"})
    assert added.status_code == 302
    data_file = DataFile.objects.get()
    assert (data_file.name, data_file.size, data_file.uploaded_by) == ("rules_of_the_game.txt", 7, world.staff)
    assert body(Client().get("/tasks/demo-task/data/rules_of_the_game.txt")) == b"be kind"


# Who may download what: every URL x role x phase state -------------------------------------------

ROLES = ("anonymous", "team member", "no team", "organiser", "staff")
STATES = ("no phases", "before start", "open", "ended")
WINDOWS = {"before start": (1, 2), "open": (-1, 1), "ended": (-2, -1)}
FILES = ("participant-data.json", "sample-run.json", "format.json", "task-guide.txt", "phase-extra.txt")
PUBLIC_FILES = ("format.json", "task-guide.txt")


def expected_status(role: str, state: str, registered_only: bool, what: str, api: bool) -> int:
    """The README's rule, for one request (``what`` a file name, or "page" / "listing")."""
    if what in ("page", "listing") or role in ("organiser", "staff"):
        return 200
    if what in PUBLIC_FILES or state == "no phases":
        return 200
    if state == "before start":
        return 403
    if not registered_only or role == "team member":
        return 200
    if role == "anonymous":
        return 401 if api else 302
    return 403


def restricted(role: str, state: str, registered_only: bool, what: str) -> bool:
    """Whether a download is gold-derived data kept from the public, to be written to the access log."""
    return what not in PUBLIC_FILES + ("page", "listing") and state != "no phases" and (
        registered_only or state == "before start")


@pytest.fixture
def roles(world: World) -> dict[str, Client]:
    from django.contrib.auth import get_user_model

    nora = get_user_model().objects.create_user("nora", password="nora-pass-1")  # signed in, in no team
    clients = {"anonymous": Client()}
    for role, user in (("team member", world.alice), ("no team", nora), ("organiser", world.organiser),
                       ("staff", world.staff)):
        clients[role] = Client()
        clients[role].force_login(user)
    return clients


def set_state(world: World, state: str, registered_only: bool) -> Phase | None:
    Phase.objects.filter(task=world.task).delete()
    DataFile.objects.filter(task=world.task).delete()
    add(world.task, "task-guide.txt", b"for everyone")
    if state == "no phases":
        return None
    start, end = WINDOWS[state]
    now = timezone.now()
    with committing():
        phase = Phase.objects.create(task=world.task, name="round 1", gold_version=world.gold_version,
                                     starts_at=now + timedelta(days=start), ends_at=now + timedelta(days=end),
                                     data_registered_only=registered_only)
    add(world.task, "phase-extra.txt", b"for the phase", phase=phase)
    return phase


@pytest.mark.django_db
def test_access_matrix_of_every_data_url(world: World, roles: dict[str, Client]) -> None:
    slug = world.task.slug
    problems = []
    for state in STATES:
        for registered_only in ((False,) if state == "no phases" else (False, True)):
            phase = set_state(world, state, registered_only)
            query = "?phase=round%201" if phase is not None else ""
            for role, client in roles.items():
                logged = AccessLog.objects.count()
                expected_logs = 0
                requests = [("page", False, f"/tasks/{slug}/data/"), ("listing", True, f"/api/v1/tasks/{slug}/data/")]
                requests += [(name, False, f"/tasks/{slug}/data/{name}") for name in FILES]
                requests += [(name, True, f"/api/v1/tasks/{slug}/data/{name}") for name in FILES]
                for what, api, url in requests:
                    if what == "phase-extra.txt" and phase is None:
                        continue
                    for suffix in ("", query) if query else ("",):  # the default phase and the phase by name
                        response = client.get(url + suffix)
                        want = expected_status(role, state, registered_only, what, api)
                        where = f"{state}, registered only {registered_only}, {role}: GET {url + suffix}"
                        if response.status_code != want:
                            problems.append(f"{where}: {response.status_code}, expected {want}")
                        if want == 302 and not response["Location"].startswith("/accounts/login/"):
                            problems.append(f"{where}: redirected to {response['Location']}, not to sign in")
                        if want == 200 and restricted(role, state, registered_only, what):
                            expected_logs += 1
                        if what == "listing":
                            available = {entry["name"]: entry["available"] for entry in response.json()["files"]}
                            wanted = {name: expected_status(role, state, registered_only, name, True) == 200
                                      for name in FILES if name in available}
                            if available != wanted:
                                problems.append(f"{where}: available {available}, expected {wanted}")
                if AccessLog.objects.count() - logged != expected_logs:
                    problems.append(f"{state}, registered only {registered_only}, {role}: "
                                    f"{AccessLog.objects.count() - logged} access log lines, expected {expected_logs}")
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:40])


@pytest.mark.django_db
def test_an_unknown_phase_is_a_404_on_every_data_url(world: World, roles: dict[str, Client]) -> None:
    set_state(world, "open", True)
    for client in roles.values():
        for url in ("/tasks/demo-task/data/", "/api/v1/tasks/demo-task/data/",
                    "/tasks/demo-task/data/format.json", "/api/v1/tasks/demo-task/data/sample-run.json"):
            assert client.get(url + "?phase=Round%201").status_code == 404
            assert client.get(url + "?phase=round%201").status_code in (200, 302, 401, 403)


@pytest.mark.django_db
def test_registered_only_needs_an_approved_team_and_the_accepted_terms(world: World, roles: dict[str, Client]) -> None:
    set_state(world, "open", True)
    alice = roles["team member"]
    url = "/api/v1/tasks/demo-task/data/participant-data.json"
    assert alice.get(url).status_code == 200
    world.task.requires_team_approval = True
    world.task.save()
    world.alice.teams.update(approved=False)
    refused = alice.get(url)
    assert refused.json() == {"errors": ["The data of the round 1 phase is for registered teams only, and your team "
                                         "'Aurora' is waiting for an organiser's approval."]}
    world.alice.teams.update(approved=True)
    assert alice.get(url).status_code == 200
    world.task.terms = "Use the data for research only."
    world.task.save()
    assert alice.get(url).json() == {"errors": ["The data of the round 1 phase is for registered teams only: accept "
                                                "the task's terms on its overview page first."]}
    with committing():
        alice.post("/tasks/demo-task/terms/", {"terms_sha256": world.task.terms_sha256, "accept": "on",
                                               "affiliation": "Tohoku University"})
    assert TermsAcceptance.objects.get().username == "alice"
    assert alice.get(url).status_code == 200


@pytest.mark.django_db
def test_a_private_task_has_no_data_for_anyone_but_its_organisers(world: World, roles: dict[str, Client]) -> None:
    world.task.is_public = False
    world.task.save()
    for role, client in roles.items():
        for url in ("/tasks/demo-task/data/", "/api/v1/tasks/demo-task/data/", "/tasks/demo-task/data/format.json",
                    "/api/v1/tasks/demo-task/data/participant-data.json"):
            assert client.get(url).status_code == (200 if role in ("organiser", "staff") else 404), (role, url)


@pytest.mark.django_db
def test_the_page_says_why_and_links_only_what_may_be_downloaded(world: World, roles: dict[str, Client]) -> None:
    set_state(world, "before start", False)
    page = roles["team member"].get("/tasks/demo-task/data/").content.decode()
    assert "The data of the round 1 phase is published when the phase opens, at" in page
    assert 'href="/tasks/demo-task/data/format.json?phase=round%201"' in page
    assert 'href="/tasks/demo-task/data/participant-data.json' not in page
    organiser = roles["organiser"].get("/tasks/demo-task/data/").content.decode()
    assert 'href="/tasks/demo-task/data/participant-data.json?phase=round%201"' in organiser
    assert "before the phase opens; every download is written to the access log" in organiser


# A gold file is never a data file (issue 23, item 3) ----------------------------------------------

def stored_data_blobs() -> list[str]:
    from django.conf import settings

    folder = settings.MEDIA_ROOT / "data"
    return sorted(path.name for path in folder.rglob("*") if path.is_file()) if folder.exists() else []


@pytest.mark.django_db
def test_the_command_refuses_any_gold_file_and_stores_nothing(world: World, tmp_path: Any) -> None:
    """The README's old example (the demo's gold as train-with-annotations.json) and its like: the
    bytes of any gold version of this or another task are refused, naming what they are."""
    test_gold = orjson.dumps(secret_gold(12, seed=4))
    version = load(world.task, secret_gold(12, seed=4), "test-gold.json")
    version.label = "test"
    version.save()
    other = create_task("other-task", "stc3", "Other")
    other_gold = orjson.dumps(secret_gold(8, seed=5))
    with committing():
        load_gold_version(other, other_gold, "theirs.json")
    first_gold = GoldVersion.objects.get(task=world.task, number=1)
    for content, what in (
            (test_gold, f"gold version {version.number} (test) of this task, loaded from test-gold.json"),
            (orjson.dumps(world.gold), f"gold version 1 of this task, loaded from {first_gold.source_name}"),
            (other_gold, "a gold version of another task")):
        path = tmp_path / "gold.json"
        path.write_bytes(content)
        errors = io.StringIO()
        with pytest.raises(CommandError, match=r"^1 problem\(s\); nothing was stored$"):
            call_command("add_data_file", world.task.slug, str(path), "--name", "train-with-annotations.json",
                         "--description", "training dialogues with their annotations", stderr=errors)
        digest = hashlib.sha256(content).hexdigest()
        assert errors.getvalue() == (
            f"{path}: file: these bytes are {what} (SHA-256 {digest[:12]}…): gold annotations are never published "
            "as a data file. Participants get the items without annotations from the participant-data.json the "
            "server makes for each phase.\n")
        assert not DataFile.objects.exists() and stored_data_blobs() == []
        assert Client().get("/api/v1/tasks/demo-task/data/train-with-annotations.json").status_code == 404
    # The same name with the dialogues without their annotations is fine (issue 43: a byte more used to
    # pass the guard, annotations and all; test_gold_guard.py checks the content).
    path.write_bytes(orjson.dumps([{"id": d["id"], "turns": d["turns"]} for d in secret_gold(12, seed=4)]))
    call_command("add_data_file", world.task.slug, str(path), "--name", "train-with-annotations.json",
                 stdout=io.StringIO())
    assert DataFile.objects.count() == 1


@pytest.mark.django_db
def test_the_admin_refuses_a_gold_file_and_stores_nothing(world: World) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = Client()
    client.force_login(world.staff)
    content = orjson.dumps(world.gold)
    refused = client.post("/admin/tasks/datafile/add/", {
        "task": world.task.pk, "file": SimpleUploadedFile("gold.json", content), "name": "train.json",
        "description": ""})
    assert refused.status_code == 200
    page = refused.content.decode().replace("&#x27;", "'")
    assert (f"these bytes are gold version 1 of this task, loaded from gold.json (SHA-256 "
            f"{hashlib.sha256(content).hexdigest()[:12]}…): gold annotations are never published as a data file."
            in page)
    assert not DataFile.objects.exists() and stored_data_blobs() == []


@pytest.mark.django_db
def test_the_data_page_says_what_each_file_is_and_who_can_get_it(world: World) -> None:
    import html
    import re

    world.task.terms = "Be fair."
    world.task.requires_team_approval = True
    world.task.save()
    now = timezone.now()
    with committing():
        phase = Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                                     starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=1),
                                     data_registered_only=True)
    add(world.task, "task-guide.txt", b"guide", description="how to annotate")
    add(world.task, "phase-extra.txt", b"extra", phase=phase, description="more dialogues")
    page = html.unescape(Client().get("/tasks/demo-task/data/?phase=test").content.decode())
    rows = {match[0]: re.sub(r"<[^>]+>", "", match[1]).split("\n")
            for match in re.findall(r'<tr id="file-([a-z0-9-]+)">(.*?)</tr>', page, re.S)}
    who = {name: next(cell.strip() for cell in cells if "only" in cell or "Everyone" in cell)
           for name, cells in rows.items()}
    registered = ("Registered teams only (signed in as a member of a team, the team approved by an organiser, "
                  "the task's terms accepted); the organisers always.")
    assert who == {"participant-datajson": registered, "formatjson": "Everyone who can see this task.",
                   "sample-runjson": registered, "task-guidetxt": "Everyone who can see this task.",
                   "phase-extratxt": registered}
    assert "Organisers' file for the test phase: more dialogues" in re.sub(r"<[^>]+>", "", page)
    assert "Organisers' file: how to annotate" in re.sub(r"<[^>]+>", "", page)
