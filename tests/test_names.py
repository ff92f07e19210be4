"""Names that impersonate (issue 11, defect 6): invisible and control characters, Unicode
confusables (UTS #39 skeletons) and invalid UTF-8 in team, run and phase names, on every path
that creates or renames: sign-up form, web upload form, API, admin, management commands."""

from __future__ import annotations

import io
import re
import unicodedata

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from tasks.models import Phase, Run, Team
from tasks.names import character_problems, confusable_with, skeleton
from tests.conftest import World, committing, run_bytes

CYRILLIC_A = "\u0410"  # CYRILLIC CAPITAL LETTER A, drawn like Latin A

HOSTILE_NAMES = [
    # (name, the message the server must give)
    ("Aur\u202eora", "contains U+202E RIGHT-TO-LEFT OVERRIDE at position 4"),
    ("Aur\u200bora", "contains U+200B ZERO WIDTH SPACE at position 4"),
    ("\ufeffAurora", "contains U+FEFF ZERO WIDTH NO-BREAK SPACE at position 1"),
    ("Aurora\u2066x", "contains U+2066 LEFT-TO-RIGHT ISOLATE at position 7"),
    ("Au\x1b[31mrora", "contains U+001B ESCAPE at position 3"),
    ("Au\ue000rora", "contains U+E000 PRIVATE USE CHARACTER at position 3"),
    ("Au\u0378rora", "contains U+0378 UNASSIGNED CODE POINT at position 3"),
    ("Au\u3164rora", "contains U+3164 HANGUL FILLER at position 3"),
]


# Worked examples -----------------------------------------------------------------------------

def test_skeletons_follow_unicode_confusables() -> None:
    # confusables.txt: 0410 -> 0041 (Cyrillic А -> A), 0430 -> 0061, 006D <- "rn", 0049 -> 006C (I -> l),
    # 0030 -> 004F (digit zero -> O).
    assert skeleton(f"{CYRILLIC_A}urora") == "Aurora"
    assert skeleton("m") == skeleton("rn") == "rn"
    assert skeleton("Iris") == skeleton("lris") == "lris"
    assert skeleton("Team 01") == skeleton("Team O1")
    assert confusable_with(f"{CYRILLIC_A}urora", ["Borealis", "Aurora"]) == "Aurora"
    assert confusable_with("\u0430urora", ["Aurora"]) == "Aurora"  # small Cyrillic а, case folded
    assert confusable_with("Aurora Lab", ["Aurora", "Borealis"]) is None
    assert confusable_with("Aurora", ["Aurora"], identical_allowed=True) is None
    assert confusable_with("清华大学", ["北京大学"]) is None


@pytest.mark.parametrize("name, message", HOSTILE_NAMES)
def test_every_invisible_character_is_named_with_its_position(name: str, message: str) -> None:
    assert character_problems(name, "name") == [
        f"name: {message}; invisible and control characters are not allowed"]


def test_real_names_in_any_script_pass() -> None:
    for name in ("Aurora", "清华大学 NLP", "Ålborg-2", "Müller & Co.", "Ηλιος", "ΝTCIR run 3", "دانشگاه"):
        assert character_problems(unicodedata.normalize("NFC", name), "name") == [], name
    # Free text keeps line breaks and the joiners of emoji and Persian; names do not.
    assert character_problems("line one\nline two \u200c", "description", multi_line=True) == []
    assert character_problems("Au\u202erora\n", "description", multi_line=True)[0].startswith(
        "description: contains U+202E")


# Sign-up (urlencoded form) ---------------------------------------------------------------------

def _sign_up(team_name: str) -> tuple[int, str]:
    response = Client().post("/accounts/signup/", {
        "username": "dora", "email": "dora@example.org", "password1": "a-long-pass-123",
        "password2": "a-long-pass-123", "affiliation": "Kyoto University", "team_name": team_name})
    return response.status_code, response.content.decode().replace("&#x27;", "'")


@pytest.mark.django_db
@pytest.mark.parametrize("name, message", HOSTILE_NAMES)
def test_sign_up_refuses_invisible_characters(world: World, name: str, message: str) -> None:
    status, page = _sign_up(name)
    assert status == 400 and f"{message[0].upper()}{message[1:]}; invisible and control characters" in page
    assert not Team.objects.filter(members__username="dora").exists() and Team.objects.count() == 2


@pytest.mark.django_db
@pytest.mark.parametrize("name, existing", [
    (f"{CYRILLIC_A}urora", "Aurora"), ("\u0430urora", "Aurora"), ("B0realis", "Borealis"), ("B0REALIS", "Borealis"),
    ("Bore\u0430lis", "Borealis"), ("AURORA", "Aurora")])
def test_sign_up_refuses_a_team_name_confusable_with_another(world: World, name: str, existing: str) -> None:
    status, page = _sign_up(name)
    assert status == 400 and f"'{existing}'" in page
    assert not Team.objects.filter(name=name).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["baseline", "Baseline", "BASEL\u0406NE"])
def test_a_team_cannot_call_itself_baseline(world: World, name: str) -> None:
    status, page = _sign_up(name)
    assert status == 400 and "is reserved" in page


@pytest.mark.django_db
def test_sign_up_refuses_invalid_utf8_precisely(world: World) -> None:
    body = (b"username=dora&email=dora%40example.org&password1=a-long-pass-123&password2=a-long-pass-123"
            b"&team_name=Aur%FFora")
    response = Client().generic("POST", "/accounts/signup/", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert "Not valid UTF-8 at position 4" in response.content.decode()
    assert Team.objects.count() == 2 and not Team.objects.filter(name__contains="\ufffd").exists()


@pytest.mark.django_db
def test_a_new_team_with_a_distinct_name_is_created(world: World) -> None:
    status, _ = _sign_up("Aurora Lab")
    assert status == 302 and Team.objects.filter(name="Aurora Lab").exists()


# Run names: API (multipart) and the web form ------------------------------------------------------

def _api_upload(world: World, token: str | None = None, **fields: str):
    with committing():
        return APIClient(HTTP_AUTHORIZATION=f"Token {token or world.alice_token}").post(
            f"/api/v1/tasks/{world.task.slug}/runs/",
            {"file": SimpleUploadedFile("run.json", run_bytes(world.gold), "application/json"), **fields},
            format="multipart")


@pytest.mark.django_db
@pytest.mark.parametrize("name, message", HOSTILE_NAMES)
def test_api_refuses_invisible_characters_in_run_names(world: World, name: str, message: str) -> None:
    response = _api_upload(world, name=name)
    assert response.status_code == 400
    assert response.json()["errors"] == [f"name: {message}; invisible and control characters are not allowed"]
    assert not Run.objects.filter(team__name="Aurora").exists()


@pytest.mark.django_db
def test_api_refuses_invalid_utf8_in_a_multipart_name(world: World) -> None:
    boundary = "BoUnDaRy"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\n").encode() + b"run\xc3\x28x" + (
        f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"run.json\"\r\n"
        f"Content-Type: application/json\r\n\r\n").encode() + run_bytes(world.gold) + f"\r\n--{boundary}--\r\n".encode()
    with committing():
        response = APIClient(HTTP_AUTHORIZATION=f"Token {world.alice_token}").generic(
            "POST", f"/api/v1/tasks/{world.task.slug}/runs/", body,
            content_type=f"multipart/form-data; boundary={boundary}")
    assert response.status_code == 400
    assert response.json()["errors"][0].startswith("name: not valid UTF-8 at position 4")
    assert not Run.objects.filter(team__name="Aurora").exists()


@pytest.mark.django_db
def test_web_form_refuses_an_rlo_run_name(world: World) -> None:
    client = Client()
    client.force_login(world.alice)
    with committing():
        response = client.post(f"/tasks/{world.task.slug}/upload/", {
            "file": SimpleUploadedFile("run.json", run_bytes(world.gold)), "name": "my\u202erun", "public": "on"})
    assert response.status_code == 400
    assert "contains U+202E RIGHT-TO-LEFT OVERRIDE at position 3" in response.content.decode()
    assert not Run.objects.filter(team__name="Aurora").exists()


@pytest.mark.django_db
def test_run_names_confusable_within_the_team_and_task_are_refused(world: World) -> None:
    assert _api_upload(world, name="Aurora-1").status_code == 202
    response = _api_upload(world, name=f"{CYRILLIC_A}urora-1")
    assert response.status_code == 409
    assert response.json()["errors"] == [
        f"name: '{CYRILLIC_A}urora-1' can be mistaken for your team's run 'Aurora-1' (Unicode confusables); "
        "choose a name that looks different"]
    assert _api_upload(world, name="Aurora-I").status_code == 409  # I looks like 1? no: I -> l, 1 -> l
    assert _api_upload(world, name="Aurora-1").status_code == 202  # the same name again: the team's own
    # Another team's board label differs by team name: its runs are not impersonations of these.
    assert _api_upload(world, token=world.bob_token, name=f"{CYRILLIC_A}urora-1").status_code == 202
    assert sorted(Run.objects.filter(is_baseline=False).values_list("name", flat=True)) == [
        "Aurora-1", "Aurora-1", f"{CYRILLIC_A}urora-1"]


@pytest.mark.django_db
def test_a_filename_used_as_run_name_loses_invisible_characters(world: World) -> None:
    with committing():
        response = APIClient(HTTP_AUTHORIZATION=f"Token {world.alice_token}").post(
            f"/api/v1/tasks/{world.task.slug}/runs/",
            {"file": SimpleUploadedFile("my\u202erun\u200b.json", run_bytes(world.gold))}, format="multipart")
    assert response.status_code == 202
    run = Run.objects.get(pk=response.json()["id"])
    assert (run.name, run.original_filename) == ("myrun", "myrun.json")


# Admin and management commands -----------------------------------------------------------------

@pytest.mark.django_db
@pytest.mark.parametrize("name, message", [
    (f"{CYRILLIC_A}urora", "can be mistaken for the existing team 'Aurora'"),
    ("Bore\u202ealis", "contains U+202E RIGHT-TO-LEFT OVERRIDE at position 5"),
])
def test_admin_refuses_renaming_a_team_to_a_hostile_name(world: World, name: str, message: str) -> None:
    client = Client()
    client.force_login(world.staff)
    borealis = Team.objects.get(name="Borealis")
    response = client.post(f"/admin/tasks/team/{borealis.pk}/change/", {
        "name": name, "slug": "borealis", "members": [world.bob.pk], "approved": "on",
        "join_code": borealis.join_code})
    assert response.status_code == 200 and message in response.content.decode().replace("&#x27;", "'")
    borealis.refresh_from_db()
    assert borealis.name == "Borealis"
    # Renaming to itself (or a distinct name) still works.
    response = client.post(f"/admin/tasks/team/{borealis.pk}/change/", {
        "name": "Borealis Lab", "slug": "borealis", "members": [world.bob.pk], "approved": "on",
        "join_code": borealis.join_code})
    assert response.status_code == 302 and Team.objects.filter(name="Borealis Lab").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("team, message", [
    (f"{CYRILLIC_A}urora", "can be mistaken for the existing team 'Aurora'"),
    ("Bo\u200breal", "contains U+200B ZERO WIDTH SPACE at position 3"),
])
def test_create_participant_refuses_hostile_team_names(world: World, team: str, message: str) -> None:
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("create_participant", "carol", "--team", team, stdout=io.StringIO())
    assert not Team.objects.filter(name=team).exists()
    assert not Team.objects.filter(members__username="carol").exists()


@pytest.mark.django_db
def test_create_phase_refuses_invisible_characters(world: World) -> None:
    with pytest.raises(CommandError, match="contains U\\+202E RIGHT-TO-LEFT OVERRIDE at position 5"):
        call_command("create_phase", world.task.slug, "test\u202elav", "--starts", "2030-01-01",
                     "--ends", "2030-02-01", stdout=io.StringIO())
    assert not Phase.objects.exists()


@pytest.mark.django_db
def test_create_participant_refuses_an_overlong_team_name(world: World) -> None:
    with pytest.raises(CommandError, match=r"team: at most 100 characters \(got 101\)"):
        call_command("create_participant", "carol", "--team", "T" * 101, stdout=io.StringIO())
    assert not Team.objects.filter(members__username="carol").exists()
