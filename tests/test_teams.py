"""Sign-up, joining a team, organiser approval, and the create_phase command."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from tasks.models import Phase, Team
from tests.conftest import World, run_bytes


def sign_up(client: Client, **fields: str):
    data = {"username": "dora", "email": "dora@example.org", "password1": "a-long-pass-123",
            "password2": "a-long-pass-123", "affiliation": "Kyoto University", **fields}
    return client.post("/accounts/signup/", data)


@pytest.mark.django_db
def test_sign_up_creates_a_team_and_signs_in(world: World) -> None:
    client = Client()
    response = sign_up(client, team_name="Dolphins")
    assert response.status_code == 302 and response["Location"] == "/team/"
    team = Team.objects.get(name="Dolphins")
    assert [user.username for user in team.members.all()] == ["dora"]
    page = client.get("/team/").content.decode()
    assert "Team Dolphins" in page and team.join_code in page


@pytest.mark.django_db
def test_sign_up_joins_a_team_with_its_code(world: World) -> None:
    aurora = Team.objects.get(name="Aurora")
    assert sign_up(Client(), join_code=aurora.join_code).status_code == 302
    assert sorted(user.username for user in aurora.members.all()) == ["alice", "dora"]


@pytest.mark.django_db
@pytest.mark.parametrize("fields, message", [
    ({}, "Give either the name of a new team or the join code"),
    ({"team_name": "X", "join_code": "abc"}, "Give either the name of a new team or the join code"),
    ({"join_code": "no-such-code"}, "No team has this join code."),
    ({"team_name": "aurora"}, "A team named 'Aurora' exists already"),
    ({"team_name": "!!"}, "A team name needs at least 2 letters or digits."),
    ({"team_name": "x-"}, "A team name needs at least 2 letters or digits."),
    ({"team_name": "Eels", "password2": "different-123"}, "password fields didn"),
])
def test_sign_up_says_what_is_wrong(world: World, fields: dict, message: str) -> None:
    response = sign_up(Client(), **fields)
    assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "'")
    assert not Team.objects.filter(members__username="dora").exists()


@pytest.mark.django_db
def test_sign_up_can_be_closed(world: World, settings) -> None:
    settings.EVALSERVER_SIGNUP_OPEN = False
    assert Client().get("/accounts/signup/").status_code == 404


@pytest.mark.django_db
def test_tasks_requiring_approval_wait_for_the_organiser(world: World, settings) -> None:
    from rest_framework.test import APIClient

    from tasks.tokens import issue_token

    settings.EVALSERVER_TEAMS_NEED_APPROVAL = True
    world.task.requires_team_approval = True
    world.task.save()
    sign_up(Client(), team_name="Newcomers")
    team = Team.objects.get(name="Newcomers")
    assert team.approved is False
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(team.members.get())}")
    from django.core.files.uploadedfile import SimpleUploadedFile

    def upload():
        return api.post(f"/api/v1/tasks/{world.task.slug}/runs/",
                        {"file": SimpleUploadedFile("r.json", run_bytes(world.gold))}, format="multipart")

    refused = upload()
    assert refused.status_code == 403
    assert refused.json() == {"errors": ["team 'Newcomers' is waiting for an organiser's approval"]}
    Team.objects.filter(pk=team.pk).update(approved=True)
    assert upload().status_code == 202


@pytest.mark.django_db
def test_create_phase_command(world: World) -> None:
    out = io.StringIO()
    call_command("create_phase", world.task.slug, "test", "--kind", "test", "--starts", "2026-12-01T00:00",
                 "--ends", "2026-12-15T00:00", "--daily-quota", "5", "--total-quota", "50", "--live-subset", "12",
                 "--subset-seed", "3", "--no-per-dialogue-feedback", "--require-description", stdout=out)
    phase = Phase.objects.get(task=world.task, name="test")
    assert (phase.kind, phase.daily_quota, phase.total_quota, phase.live_subset_size) == ("test", 5, 50, 12)
    assert phase.starts_at.isoformat() == "2026-12-01T00:00:00+00:00"
    assert not phase.per_item_feedback and phase.requires_method_description
    assert "phase test (test) on gold v1" in out.getvalue()
    with pytest.raises(CommandError, match="--ends must be after --starts"):
        call_command("create_phase", world.task.slug, "bad", "--starts", "2026-12-02", "--ends", "2026-12-01")
    with pytest.raises(CommandError, match="--live-subset must be between 1 and 29"):
        call_command("create_phase", world.task.slug, "bad", "--starts", "2026-12-01", "--ends", "2026-12-02",
                     "--live-subset", "30")
    with pytest.raises(CommandError, match="not an ISO date"):
        call_command("create_phase", world.task.slug, "bad", "--starts", "tomorrow", "--ends", "2026-12-02")
    with pytest.raises(CommandError, match="Phase with this Task and Name already exists"):
        call_command("create_phase", world.task.slug, "test", "--starts", "2026-12-01", "--ends", "2026-12-02")
