"""What ``my-runs`` says about submitting now (issue 17, item 9: the client said "no submission
phase is open" to a team whose runs were accepted): a task without phases accepts runs at any
time with no quota; every other case names the reason."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from tasks.models import Phase
from tasks.organising import create_task
from tests.conftest import World


def status_of(user: Any, slug: str = "demo-task") -> dict[str, Any]:
    client = Client()
    client.force_login(user)
    data = client.get(f"/api/v1/tasks/{slug}/my-runs/").json()
    return {"submissions": data["submissions"], "quota": data["quota"]}


@pytest.mark.django_db
def test_submission_status_in_every_case(world: World) -> None:
    assert status_of(world.alice) == {"quota": None, "submissions": {
        "open": True, "phase": None, "reason": "this task has no phases: it accepts runs at any time, with no quota"}}
    loner = get_user_model().objects.create_user("lone", password="lone-pass-1")
    assert status_of(loner)["submissions"] == {
        "open": False, "phase": None, "reason": (
        "you are not a member of any team; join one with the join code a member sees on its team page (on the web: "
        "Join a team, /team/join/), or ask an organiser to add you to one")}
    world.task.requires_team_approval = True
    world.task.save()
    world.alice.teams.update(approved=False)
    assert status_of(world.alice)["submissions"]["reason"] == "team 'Aurora' is waiting for an organiser's approval"
    world.alice.teams.update(approved=True)
    world.task.terms = "Be kind."
    world.task.save()
    assert status_of(world.alice)["submissions"]["reason"] == ("accept the terms of demo-task first, on its "
                                                               "overview page")
    world.task.terms = ""
    world.task.save()
    now = timezone.now()
    phase = Phase.objects.create(task=world.task, name="dev", gold_version=world.gold_version,
                                 starts_at=now - timedelta(days=2), ends_at=now - timedelta(days=1))
    assert status_of(world.alice) == {"quota": None, "submissions": {
        "open": False, "phase": None,
        "reason": "no phase of demo-task is open for submissions now; the submission period is over"}}
    Phase.objects.filter(pk=phase.pk).update(ends_at=now + timedelta(days=1))
    result = status_of(world.alice)
    assert result["submissions"] == {"open": True, "phase": "dev", "reason": ""}
    assert (result["quota"]["phase"], result["quota"]["daily_remaining"]) == ("dev", 20)
    create_task("no-gold", "stc3", "No gold")
    assert status_of(world.alice, "no-gold")["submissions"]["reason"] == ("this task has no gold data yet; runs cannot "
                                                                          "be scored")
