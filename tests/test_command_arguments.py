"""Management commands given arguments they cannot use: exit code 2, a message naming the
argument, and nothing stored (found by driving every command with hostile arguments)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from tasks.models import Task, Team


def refused(*args: str) -> str:
    with pytest.raises(CommandError) as caught:
        call_command(*args, stdout=io.StringIO(), stderr=io.StringIO())
    assert caught.value.returncode == 2
    return str(caught.value)


@pytest.mark.django_db
def test_create_participant_refuses_a_username_or_email_longer_than_their_columns() -> None:
    users = get_user_model()
    assert refused("create_participant", "u" * 151, "--team", "Team X") == (
        f"username {'u' * 151!r}: Ensure this value has at most 150 characters (it has 151).")
    # A well-formed address of 259 characters: valid for the email validator, longer than the column.
    email = "a" * 64 + "@" + "b" * 63 + "." + "c" * 63 + "." + "d" * 62 + ".com"
    assert len(email) == 254 + 5
    assert refused("create_participant", "u1", "--team", "Team X", "--email", email) == (
        f"--email {email!r}: Ensure this value has at most 254 characters (it has 259).")
    assert not users.objects.exists() and not Team.objects.exists()
    # At the limits, both are taken.
    out = io.StringIO()
    call_command("create_participant", "u" * 150, "--team", "Team X", "--email", email[5:], stdout=out)
    assert users.objects.get().username == "u" * 150


@pytest.mark.django_db
@pytest.mark.parametrize("args, message", [
    (["--dialogues", "0"], "--dialogues must be between 1 and 10,000 (got 0); nothing was created"),
    (["--dialogues", "-1"], "--dialogues must be between 1 and 10,000 (got -1); nothing was created"),
    (["--dialogues", "99999999999"], "--dialogues must be between 1 and 10,000 (got 99999999999); nothing was created"),
    (["--seed", "-1"], "--seed must be 0 or more (got -1); nothing was created"),
    (["--dialogues", "0", "--seed", "-2"], "--dialogues must be between 1 and 10,000 (got 0); --seed must be 0 or "
                                           "more (got -2); nothing was created"),
])
def test_demo_refuses_sizes_and_seeds_it_cannot_generate(settings: Any, tmp_path: Path, args: list[str],
                                                         message: str) -> None:
    settings.VAR_DIR = tmp_path
    assert refused("demo", *args) == message
    # Before, the accounts were committed and the generator failed after them: every later run
    # then stopped on the existing accounts.
    assert not get_user_model().objects.exists() and not Task.objects.exists()
    assert not (tmp_path / "demo-logins.txt").exists()


@pytest.mark.django_db
def test_demo_names_the_accounts_and_teams_that_exist_already(settings: Any, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path
    get_user_model().objects.create_user("bob", password="bob-pass-1")
    Team.objects.create(name="Aurora", slug="aurora")
    assert refused("demo") == ("the demo creates the accounts organiser, alice, bob, and bob exist(s) already: run it "
                               "on a fresh database; the demo creates the teams Aurora and Borealis, and Aurora "
                               "exist(s) already: run it on a fresh database; nothing was created")
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["bob"]
    assert not Task.objects.exists()
