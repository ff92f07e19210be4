"""Who reaches which campaign page (issue 40, done means): every campaign URL x role (an assessor
of this campaign, an assessor of another, a participant, the task's organiser, a superuser, staff
without permissions, anonymous) x campaign state (draft, open, closed), each answer written out
below from the rules: organisers (and superusers) run campaigns; an assessor judges only their
own queue, and only once the campaign is open (a closed one shows what was saved, takes nothing);
everybody else gets the 404 of a campaign that does not exist. What an assessor's page shows is
searched too: no other assessor's answers, no scores, no gold labels, no run names."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from campaigns.assignment import close_campaign, open_campaign
from campaigns.models import Campaign, Judgement
from tests.campaign_world import stc3_campaign, user
from tests.conftest import World

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "assessor", "other assessor", "participant", "organiser", "superuser", "bare staff")
STATES = (Campaign.DRAFT, Campaign.OPEN, Campaign.CLOSED)
ORGANISERS = ("organiser", "superuser")


def expected(url: str, role: str, state: str) -> int:
    """The status the rules give (written from the module's docstring, not read from the views)."""
    if role == "anonymous":
        return 302  # to sign in, whatever the campaign and its state
    if url == "metrics-gold":
        return 404  # organisers too: a dialogues campaign makes STC-3 gold, not a metrics-track one
    if url in ("list", "page", "page-post", "export-json", "export-csv"):
        if role in ORGANISERS:
            return 302 if url == "page-post" else 200
        return 404
    if url == "judging":
        return 200  # everyone's own list
    if role != "assessor" or state == Campaign.DRAFT:
        return 404
    if url == "answer":
        return 302 if state == Campaign.OPEN else 409
    return 200


def _world(world: World) -> dict[str, Any]:
    campaign = stc3_campaign(world, assessors=("carol", "dave"), per_item=2, n=3)
    other = stc3_campaign(world, assessors=("otto",), per_item=1, n=2, name="Another round")
    open_campaign(other)
    from django.contrib.auth import get_user_model

    bare = get_user_model().objects.create_user("vera", password="vera-pass-1", is_staff=True)
    return {"campaign": campaign, "users": {"assessor": user("carol"), "other assessor": user("otto"),
                                            "participant": world.alice, "organiser": world.organiser,
                                            "superuser": world.staff, "bare staff": bare}}


def _enter(campaign: Campaign, state: str) -> None:
    if state in (Campaign.OPEN, Campaign.CLOSED):
        open_campaign(campaign)
        # dave (the other assessor of this campaign) has answered every item of his queue.
        dave = campaign.assessors.get(user__username="dave")
        for assignment in dave.assignments.select_related("item"):
            labels = ["CNaN" if turn["sender"] == "customer" else "HNaN" for turn in assignment.item.content["turns"]]
            Judgement.objects.create(campaign=campaign, item=assignment.item, assessor=dave, seconds=2.0,
                                     values={"quality": {"A": -2, "E": -2, "S": -2}, "nugget": labels})
    if state == Campaign.CLOSED:
        close_campaign(campaign)


def _requests(campaign: Campaign, world: World) -> dict[str, tuple[str, str, dict[str, str]]]:
    answer = {"A": "1", "E": "1", "S": "1", **{f"nugget-{index}": label for index, label in
                                                  enumerate(("CNUG0", "HNUG", "CNUG*"))}}
    carol = campaign.assessors.get(user__username="carol")
    first = carol.assignments.select_related("item").order_by("position").first()
    position = first.position if first else 1  # a draft has no assignments yet
    if first is not None:
        turns = first.item.content["turns"]
        answer = {key: value for key, value in answer.items() if not key.startswith("nugget-")
                  or int(key.split("-")[1]) < len(turns)}
    return {"list": ("get", reverse("campaign-list", args=[world.task.slug]), {}),
            "page": ("get", reverse("campaign-page", args=[campaign.pk]), {}),
            "page-post": ("post", reverse("campaign-page", args=[campaign.pk]), {"action": "nothing-known"}),
            "export-json": ("get", reverse("campaign-export", args=[campaign.pk, "json"]), {}),
            "export-csv": ("get", reverse("campaign-export", args=[campaign.pk, "csv"]), {}),
            "judging": ("get", reverse("judging"), {}),
            "metrics-gold": ("get", reverse("campaign-metrics-gold", args=[campaign.pk]), {}),
            "judge": ("get", reverse("campaign-judge", args=[campaign.pk]), {}),
            "judge-at": ("get", reverse("campaign-judge", args=[campaign.pk]) + f"?at={position}", {}),
            "answer": ("post", reverse("campaign-answer", args=[campaign.pk, position]), answer)}


@pytest.mark.parametrize("state", STATES)
def test_every_campaign_url_as_every_role_in_every_state(world: World, state: str) -> None:
    made = _world(world)
    campaign = made["campaign"]
    _enter(campaign, state)
    requests = _requests(campaign, world)
    wrong = []
    for role in ROLES:
        for name, (method, url, data) in requests.items():
            client = Client()
            if role != "anonymous":
                client.force_login(made["users"][role])
            response = getattr(client, method)(url, data)
            want = expected(name.replace("judge-at", "judge"), role, state)
            if response.status_code != want:
                wrong.append((role, name, response.status_code, want))
            if role == "anonymous" and response.status_code == 302:
                assert response["Location"].startswith("/accounts/login/")
            if response.status_code == 200 and role not in ORGANISERS:
                body = response.content.decode()
                # Never another assessor's answer (dave's were all -2 and CNaN/HNaN), a score or a gold label.
                assert "checked" not in body or (role == "assessor" and name in ("judge", "judge-at")
                                                 and Judgement.objects.filter(assessor__user=made["users"][role])
                                                 .exists()), (role, name)
                assert "CNaN\" checked" not in body and "rsnod" not in body and "annotations" not in body
                listed = name == "judging" and campaign.name in body
                assert not listed or (role == "assessor" and state != Campaign.DRAFT), (role, name, state)
    assert not wrong, wrong


def test_an_organiser_of_another_task_gets_nothing(world: World) -> None:
    from tasks.organising import create_task

    made = _world(world)
    campaign = made["campaign"]
    open_campaign(campaign)
    stranger = user("stella")
    create_task("other-task", "stc3", "Other").organisers.add(stranger)
    client = Client()
    client.force_login(stranger)
    for name, (method, url, data) in _requests(campaign, world).items():
        status = getattr(client, method)(url, data).status_code
        assert status == (200 if name == "judging" else 404), (name, status)


def test_the_pages_of_a_responses_campaign_as_every_role(db: Any) -> None:
    """A response task's campaign: its metrics-track gold and its page (the ranking) for its
    organisers only; its assessor (a participant of Borealis) judges, never Aurora's responses."""
    from campaigns.building import Plan, create_campaign
    from tasks.models import Team
    from tests.campaign_world import response_task, stored_run

    task, version, gold = response_task()
    organiser = user("olivia")
    task.organisers.add(organiser)
    aurora = Team.objects.create(name="Aurora", slug="aurora")
    borealis = Team.objects.create(name="Borealis", slug="borealis")
    aurora.members.add(user("alice"))
    borealis.members.add(user("bob"))
    run = stored_run(task, aurora, "aurora-1", {entry["id"]: f"reply {entry['id']}" for entry in gold})
    campaign = create_campaign(task, Plan(name="replies", kind="responses", gold_version=version, runs=[run],
                                          per_item=1, assessors=["bob"]))
    open_campaign(campaign)
    urls = [reverse("campaign-page", args=[campaign.pk]), reverse("campaign-metrics-gold", args=[campaign.pk]),
            reverse("campaign-metrics-gold", args=[campaign.pk]) + "?part=provenance",
            reverse("campaign-export", args=[campaign.pk, "json"])]
    for who, status in (("olivia", 200), ("alice", 404), ("bob", 404)):
        client = Client()
        client.force_login(user(who))
        for url in urls:
            got = client.get(url).status_code
            # No judgement yet: the metrics-track gold says so (409) to the organisers.
            assert got == (409 if who == "olivia" and "metrics-gold" in url else status), (who, url, got)
    client = Client()
    client.force_login(user("bob"))
    page = client.get(reverse("campaign-judge", args=[campaign.pk]))
    assert page.status_code == 200 and "aurora" not in page.content.decode().lower()
