"""Managing a team and an account (issue 30, item 6): joining with a code from an existing account
(rate-limited), leaving, the owner removing a member, renaming, renewing the join code, the
per-task team size limit, the account page, and the home page's task list with its counts."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from tasks.models import Phase, Run, Team
from tests.conftest import World, committing, run_bytes
from tests.test_privacy_and_rules import add_phase, api_upload, signed_in
from tests.test_teams import sign_up


def _newcomer(name: str = "dora") -> Any:
    return get_user_model().objects.create_user(name, email=f"{name}@example.org", password="dora-pass-123")


@pytest.mark.django_db
def test_an_account_without_a_team_joins_one_with_its_code(world: World) -> None:
    dora = _newcomer()
    client = signed_in(dora)
    aurora = Team.objects.get(name="Aurora")
    assert '<a href="/team/join/">Join one with its join code</a>' in client.get("/team/").content.decode()
    wrong = client.post("/team/join/", {"join_code": "not-the-code"})
    assert wrong.status_code == 400 and "No team has this join code." in wrong.content.decode()
    empty = client.post("/team/join/", {"join_code": "  "})
    assert empty.status_code == 400 and "This field is required." in empty.content.decode()
    assert client.post("/team/join/", {"join_code": aurora.join_code}).status_code == 302
    assert sorted(aurora.members.values_list("username", flat=True)) == ["alice", "dora"]
    # In a team now: joining another is refused, saying to leave first.
    again = client.post("/team/join/", {"join_code": Team.objects.get(name="Borealis").join_code})
    assert again.status_code == 409 and "leave it on your team page" in again.content.decode()
    assert not Team.objects.get(name="Borealis").members.filter(pk=dora.pk).exists()


@pytest.mark.django_db
def test_guessing_join_codes_is_limited_per_account_and_per_address(world: World, settings: Any,
                                                                     one_rate_window: None) -> None:
    settings.EVALSERVER_JOIN_RATE = "3/h"
    client = signed_in(_newcomer())
    answers = [client.post("/team/join/", {"join_code": f"guess-{i}"}).status_code for i in range(4)]
    assert answers == [400, 400, 400, 429]
    # Past the limit even the right code is not tried (a guesser learns nothing from the answer).
    limited = client.post("/team/join/", {"join_code": Team.objects.get(name="Aurora").join_code})
    assert limited.status_code == 429 and "Too many join codes tried" in limited.content.decode()
    assert not Team.objects.get(name="Aurora").members.filter(username="dora").exists()
    # Another account from the same address is limited too.
    other = signed_in(_newcomer("eve"))
    assert other.post("/team/join/", {"join_code": "guess"}).status_code == 429


@pytest.mark.django_db
def test_the_team_size_limit_of_a_task_is_enforced_on_joining_and_at_upload(world: World) -> None:
    world.task.max_team_size = 2
    world.task.save()
    aurora = Team.objects.get(name="Aurora")
    # No run in the task yet: the team does not take part, nothing limits it.
    assert signed_in(_newcomer("dora")).post("/team/join/", {"join_code": aurora.join_code}).status_code == 302
    assert api_upload(world, run_bytes(world.gold)).status_code == 202
    refused = signed_in(_newcomer("eve")).post("/team/join/", {"join_code": aurora.join_code})
    assert refused.status_code == 409
    assert ("Team Aurora has 2 members and takes part in Demo task, which allows at most 2 per team: nobody more "
            "can join it.") in refused.content.decode()
    signup = sign_up(Client(), username="fay", join_code=aurora.join_code)
    assert signup.status_code == 400 and "which allows at most 2 per team" in signup.content.decode()
    assert not get_user_model().objects.filter(username="fay").exists()  # nothing half-made
    # A team already too large (the limit lowered later) cannot upload until a member leaves.
    world.task.max_team_size = 1
    world.task.save()
    answer = api_upload(world, run_bytes(world.gold, seed=2))
    assert answer.status_code == 403
    assert answer.json()["errors"] == ["team: Demo task allows at most 1 members per team and team 'Aurora' has 2; "
                                       "a member leaves the team (on its team page) before it submits"]


@pytest.mark.django_db
def test_leaving_removing_renaming_and_a_new_code(world: World) -> None:
    aurora = Team.objects.get(name="Aurora")
    alice = signed_in(world.alice)
    # The last member cannot leave (the team keeps its runs and needs somebody to manage them).
    alice.post("/team/leave/", {"confirm": "yes"})
    assert aurora.members.filter(pk=world.alice.pk).exists()
    dora = _newcomer()
    aurora.members.add(dora)
    # Alice was first: she owns the team; Dora may not remove, rename or renew.
    dora_client = signed_in(dora)
    dora_client.post("/team/remove-member/", {"username": "alice", "confirm": "yes"})
    dora_client.post("/team/rename/", {"name": "Dawn"})
    old_code = aurora.join_code
    dora_client.post("/team/new-code/", {"confirm": "yes"})
    aurora.refresh_from_db()
    assert aurora.name == "Aurora" and aurora.join_code == old_code and aurora.members.count() == 2
    # Renaming: a confusable name is refused, saying which; a good one shows on the board.
    confusable = alice.post("/team/rename/", {"name": "Вorealis"})  # Cyrillic В
    assert confusable.status_code == 400
    assert "can be mistaken for the existing team &#x27;Borealis&#x27;" in confusable.content.decode()
    api_upload(world, run_bytes(world.gold))
    assert alice.post("/team/rename/", {"name": "Aurora Lab"}).status_code == 302
    assert "Aurora Lab" in Client().get(f"/tasks/{world.task.slug}/").content.decode()
    # A new join code: the old one stops working.
    assert "Renew the join code?" in alice.post("/team/new-code/").content.decode()
    alice.post("/team/new-code/", {"confirm": "yes"})
    aurora.refresh_from_db()
    assert aurora.join_code != old_code
    late = signed_in(_newcomer("eve")).post("/team/join/", {"join_code": old_code})
    assert late.status_code == 400
    # The owner removes Dora (asked first); Dora no longer sees the team's hidden runs.
    hidden = api_upload(world, run_bytes(world.gold, seed=3), public="false").json()["id"]
    assert dora_client.get(f"/runs/{hidden}/").status_code == 200
    assert "Remove dora from Aurora Lab?" in alice.post("/team/remove-member/", {"username": "dora"}).content.decode()
    alice.post("/team/remove-member/", {"username": "dora", "confirm": "yes"})
    assert not aurora.members.filter(pk=dora.pk).exists()
    assert dora_client.get(f"/runs/{hidden}/").status_code == 404
    # Leaving works for a member who is not the last.
    aurora.members.add(dora)
    assert "Leave team Aurora Lab?" in dora_client.post("/team/leave/").content.decode()
    dora_client.post("/team/leave/", {"confirm": "yes"})
    assert list(aurora.members.values_list("username", flat=True)) == ["alice"]
    # Every one of these forms needs the CSRF token.
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(world.alice)
    for path in ("/team/leave/", "/team/remove-member/", "/team/rename/", "/team/new-code/", "/team/join/"):
        assert strict.post(path, {"confirm": "yes"}).status_code == 403, path


@pytest.mark.django_db
def test_the_account_page_changes_the_password_and_the_email(world: World, one_rate_window: None) -> None:
    alice = signed_in(world.alice)
    assert "Change your password" in alice.get("/accounts/account/").content.decode()
    wrong = alice.post("/accounts/account/", {"form": "password", "old_password": "nope",
                                              "new_password1": "a-new-pass-456", "new_password2": "a-new-pass-456"})
    assert wrong.status_code == 400
    assert "Your old password was entered incorrectly. Please enter it again." in wrong.content.decode()
    mismatch = alice.post("/accounts/account/", {"form": "password", "old_password": "alice-pass-1",
                                                 "new_password1": "a-new-pass-456", "new_password2": "other-456"})
    assert mismatch.status_code == 400 and "The two password fields didn’t match." in mismatch.content.decode()
    assert alice.post("/accounts/account/", {"form": "password", "old_password": "alice-pass-1",
                                             "new_password1": "a-new-pass-456",
                                             "new_password2": "a-new-pass-456"}).status_code == 302
    world.alice.refresh_from_db()
    assert world.alice.check_password("a-new-pass-456")
    assert alice.get("/accounts/account/").status_code == 200  # still signed in here
    bad = alice.post("/accounts/account/", {"form": "email", "email": "not-an-address", "password": "a-new-pass-456"})
    assert bad.status_code == 400 and "Enter a valid email address." in bad.content.decode()
    no_password = alice.post("/accounts/account/", {"form": "email", "email": "a@example.org", "password": "x"})
    assert "Your current password was entered incorrectly." in no_password.content.decode()
    assert alice.post("/accounts/account/", {"form": "email", "email": "a@example.org",
                                             "password": "a-new-pass-456"}).status_code == 302
    world.alice.refresh_from_db()
    assert world.alice.email == "a@example.org"
    assert Client().get("/accounts/account/").status_code == 302  # sign in first


@pytest.mark.django_db
def test_the_home_page_lists_status_deadline_and_counts_that_hide_nothing(world: World) -> None:
    now = timezone.now()
    dev = add_phase(world, "dev", Phase.DEVELOPMENT, start=timedelta(days=-3), end=timedelta(days=-1))
    test = add_phase(world, "test", Phase.TEST, start=timedelta(days=-1), end=timedelta(days=2))
    from tasks import submissions

    def upload(user: Any, phase: Phase, seed: int, public: bool = True) -> Run:
        with committing():
            return submissions.submit_run(world.task, user, submissions.Submission(
                content=run_bytes(world.gold, seed=seed), name=f"r{seed}", description="m", is_public=public), phase)

    Phase.objects.filter(pk=dev.pk).update(ends_at=now + timedelta(days=1))
    upload(world.alice, dev, 1)
    upload(world.alice, dev, 2, public=False)  # hidden: not counted
    withdrawn = upload(world.bob, dev, 3)
    Run.objects.filter(pk=withdrawn.pk).update(withdrawn_at=now)  # withdrawn: not counted
    upload(world.bob, dev, 4)
    Phase.objects.filter(pk=dev.pk).update(ends_at=now - timedelta(days=1))
    upload(world.alice, test, 5)  # a test board without a live subset shows whole-set scores: counted

    def counts() -> tuple[str, str]:
        page = Client().get("/").content.decode()
        assert f"test phase, deadline {test.ends_at:%Y-%m-%d %H:%M} UTC" in page
        return (re.search(r'data-label="Teams">(\d+)<', page).group(1), re.search(r'data-label="Runs">(\d+)<',
                                                                                  page).group(1))

    assert counts() == ("2", "3")
    # With a live subset on the test board, the development board on the same gold shows no run (its
    # whole-set scores would give the live subset away): its runs leave the counts.
    Phase.objects.filter(pk=test.pk).update(live_subset_size=10)
    assert counts() == ("1", "1")
