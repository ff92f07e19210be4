"""Annotation campaigns (issue 40.1-2): items from dialogues, gold versions and pooled run
responses; balanced assignment; the judging page's saving (once, whole, idempotent, timed); the
command. Expected values are written out here from the rules, not taken from the code."""

from __future__ import annotations

import unicodedata
from collections import Counter
from io import StringIO
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from campaigns.assignment import close_campaign, open_campaign
from campaigns.building import Plan, create_campaign
from campaigns.models import Assessor, Assignment, Campaign, Item, Judgement
from tasks.errors import Rejected
from tasks.models import Team
from tests.campaign_world import dialogues, response_task, stc3_campaign, stored_run, user
from tests.conftest import World

pytestmark = pytest.mark.django_db


def answer_for(turns: list[dict[str, Any]], a: int = 1) -> dict[str, str]:
    data = {"A": str(a), "E": "0", "S": "-1"}
    for index, turn in enumerate(turns):
        data[f"nugget-{index}"] = "CNUG0" if turn["sender"] == "customer" else "HNUG"
    return data


def test_a_campaign_from_a_file_of_dialogues_has_their_turns_and_nothing_else(world: World) -> None:
    campaign = stc3_campaign(world, n=3)
    items = {item.key: item.content for item in campaign.items.all()}
    assert items["d1"] == {"turns": [{"sender": "customer", "text": "My order 1 has not arrived."},
                                     {"sender": "helpdesk", "text": "Sorry, let me check.\nIt ships tomorrow."},
                                     {"sender": "customer", "text": "Thanks!"}]}
    assert sorted(items) == ["d1", "d2", "d3"] and campaign.state == Campaign.DRAFT
    assert [assessor.code for assessor in campaign.assessors.all()] == ["a01", "a02", "a03"]
    assert [dimension["name"] for dimension in campaign.dimensions] == ["A", "E", "S", "nugget"]


def test_a_campaign_on_a_gold_version_never_copies_its_annotations(world: World) -> None:
    user("carol")
    campaign = create_campaign(world.task, Plan(name="gold", kind="dialogues", gold_version=world.gold_version,
                                                item_ids=[world.gold[0]["id"], world.gold[1]["id"]],
                                                assessors=["carol"], per_item=1))
    first = campaign.items.get(key=world.gold[0]["id"]).content
    expected = ["\n".join(turn["utterances"]) for turn in world.gold[0]["turns"]]
    assert [turn["text"] for turn in first["turns"]] == expected
    stored = orjson.dumps(list(campaign.items.values_list("content", flat=True))).decode()
    assert "annotations" not in stored and "CNUG" not in stored and "quality" not in stored


def test_every_problem_is_named_and_nothing_is_stored(world: World) -> None:
    bad = [{"id": "d1", "turns": [{"sender": "robot", "utterances": ["hi"]}]},
           {"id": "d1", "turns": []}, {"turns": [{"sender": "customer", "utterances": [""]}]}]
    with pytest.raises(Rejected) as refused:
        create_campaign(world.task, Plan(name="x", kind="dialogues", dialogues=orjson.dumps(bad),
                                         assessors=["nobody-here"]))
    assert refused.value.errors == ["assessors: no active account named 'nobody-here'", *[
        "[0].turns[0].sender: must be one of customer, helpdesk", "[1].id: 'd1' appears twice",
        "[1].turns: must be a non-empty list of turns", "[2].id: must be a non-empty string or whole number",
        "[2].turns[0].utterances[0]: must not be empty"]]
    user("carol")
    with pytest.raises(Rejected) as refused:
        create_campaign(world.task, Plan(name="x", kind="dialogues", dialogues=orjson.dumps(bad), assessors=["carol"]))
    assert refused.value.errors == [
        "[0].turns[0].sender: must be one of customer, helpdesk", "[1].id: 'd1' appears twice",
        "[1].turns: must be a non-empty list of turns", "[2].id: must be a non-empty string or whole number",
        "[2].turns[0].utterances[0]: must not be empty"]
    with pytest.raises(Rejected) as refused:
        create_campaign(world.task, Plan(name="x", kind="references", gold_version=world.gold_version))
    assert refused.value.errors == ["kind: a stc3 task's campaigns judge dialogues, not 'references'"]
    assert not Campaign.objects.exists() and not Item.objects.exists()


def test_assignment_is_balanced_k_distinct_assessors_and_checks_go_to_everyone(world: World) -> None:
    checks = [{"id": "c1", "turns": [{"sender": "customer", "utterances": ["Where is my refund?"]},
                                     {"sender": "helpdesk", "utterances": ["Here it is."]}],
               "answer": {"quality": {"A": 2, "E": 2, "S": 2}, "nugget": ["CNUG0", "HNUG*"]}}]
    campaign = stc3_campaign(world, assessors=("carol", "dave", "erin", "finn"), per_item=3, n=7,
                             checks=orjson.dumps(checks))
    made = open_campaign(campaign)
    assert made == 7 * 3 + 4  # every item three times, the check item once per assessor
    rows = list(Assignment.objects.filter(assessor__campaign=campaign).select_related("item"))
    per_item = Counter(row.item.key for row in rows)
    assert per_item == {**{f"d{n}": 3 for n in range(1, 8)}, "check-c1": 4}
    loads = Counter(row.assessor_id for row in rows if not row.item.is_check)
    assert sorted(loads.values()) == [5, 5, 5, 6]  # 21 over 4: balanced to within one
    assert len({(row.assessor_id, row.item_id) for row in rows}) == len(rows)
    # Each assessor's positions are 1..n; the orders differ between assessors (random per assessor).
    orders = {}
    for assessor in campaign.assessors.all():
        positions = [row.position for row in rows if row.assessor_id == assessor.pk]
        assert sorted(positions) == list(range(1, len(positions) + 1))
        orders[assessor.code] = [row.item.key for row in sorted(rows, key=lambda r: r.position)
                                 if row.assessor_id == assessor.pk]
    assert len({tuple(order) for order in orders.values()}) > 1


def test_too_few_assessors_cannot_open_and_nothing_is_assigned(world: World) -> None:
    campaign = stc3_campaign(world, assessors=("carol", "dave"), per_item=3, n=2)
    with pytest.raises(Rejected) as refused:
        open_campaign(campaign)
    assert refused.value.errors[0] == "item d1: 2 eligible assessor(s), 3 needed" or \
        refused.value.errors[0] == "item d2: 2 eligible assessor(s), 3 needed"
    campaign.refresh_from_db()
    assert campaign.state == Campaign.DRAFT and not Assignment.objects.exists()


def _judge_page(client: Client, campaign: Campaign, at: int | None = None) -> Any:
    response = client.get(f"/campaigns/{campaign.pk}/judge/" + (f"?at={at}" if at else ""))
    assert response.status_code == 200, response.content[:500]
    return response


def test_an_answer_is_saved_once_whole_and_timed_and_can_be_changed(world: World) -> None:
    campaign = stc3_campaign(world, n=2, per_item=1, assessors=("carol",))
    open_campaign(campaign)
    client = Client()
    client.force_login(user("carol"))
    page = _judge_page(client, campaign)
    position, turns = page.context["position"], page.context["turns"]
    url = f"/campaigns/{campaign.pk}/judge/{position}/"
    # A label not allowed on a helpdesk turn, and a missing S: refused whole, nothing saved.
    bad = {**answer_for(turns), "nugget-1": "CNUG", "S": ""}
    refused = client.post(url, bad)
    assert refused.status_code == 400 and not Judgement.objects.exists()
    assert "turn 2 (helpdesk): choose one of HNUG, HNUG*, HNaN" in refused.content.decode()
    assert "S: choose one of -2 to 2" in refused.content.decode()
    shown = float(page.context["shown"]) - 7.5  # the page was shown 7.5 seconds before the answer
    data = {**answer_for(turns), "shown": f"{shown:.3f}"}
    first = client.post(url, data)
    again = client.post(url, data, HTTP_ACCEPT="application/json")  # a retry: the same answer, once
    assert first.status_code == 302 and again.status_code == 200 and again.json()["saved"] is True
    judgement = Judgement.objects.get()
    assert judgement.values == {"quality": {"A": 1, "E": 0, "S": -1},
                                "nugget": ["CNUG0" if t["sender"] == "customer" else "HNUG" for t in turns]}
    assert 7.5 <= judgement.seconds < 60
    # Back to the item: the answer is shown, and a changed answer replaces it.
    back = _judge_page(client, campaign, position)
    assert back.context["saved"] and 'value="1" checked' in back.content.decode()
    client.post(url, {**answer_for(turns, a=-2), "shown": back.context["shown"]})
    assert Judgement.objects.get().values["quality"]["A"] == -2 and Judgement.objects.count() == 1
    # Closed: answers are refused, the saved one is kept.
    close_campaign(campaign)
    closed = client.post(url, data, HTTP_ACCEPT="application/json")
    assert closed.status_code == 409 and Judgement.objects.get().values["quality"]["A"] == -2


def test_a_save_is_one_read_and_one_write_and_points_at_the_next_item(world: World) -> None:
    """Every assessor sends this request for every item, often many at once (issue 40's judging
    benchmark): besides the session and the user, one read and one INSERT, and on a second save of
    the same item one read and one UPDATE; the reply names the next position, then the end."""
    campaign = stc3_campaign(world, n=2, per_item=1, assessors=("carol",))
    open_campaign(campaign)
    client = Client()
    client.force_login(user("carol"))
    positions = sorted(Assessor.objects.get(campaign=campaign).assignments.values_list("position", flat=True))

    def statements(position: int) -> tuple[list[str], dict[str, Any]]:
        turns = _judge_page(client, campaign, position).context["turns"]
        with CaptureQueriesContext(connection) as queries:
            reply = client.post(f"/campaigns/{campaign.pk}/judge/{position}/", answer_for(turns),
                                HTTP_ACCEPT="application/json")
        assert reply.status_code == 200, reply.content
        control = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK")
        return [query["sql"].split()[0] for query in queries.captured_queries
                if not query["sql"].startswith(control)], reply.json()

    first, reply = statements(positions[0])
    assert first == ["SELECT", "SELECT", "SELECT", "INSERT"]
    assert reply == {"saved": True, "next": f"/campaigns/{campaign.pk}/judge/?at={positions[1]}"}
    again, _ = statements(positions[0])  # the same answer again (a retry): the insert is refused, nothing changes
    assert again == ["SELECT", "SELECT", "SELECT", "INSERT", "SELECT"] and Judgement.objects.count() == 1
    _, last = statements(positions[1])
    assert last == {"saved": True, "next": f"/campaigns/{campaign.pk}/judge/?at=end"}


def test_an_assessor_reaches_only_their_own_queue(world: World) -> None:
    campaign = stc3_campaign(world, n=4, per_item=1, assessors=("carol", "dave"))
    open_campaign(campaign)
    carol = Assessor.objects.get(campaign=campaign, user__username="carol")
    dave_items = set(Assignment.objects.filter(assessor__user__username="dave").values_list("item__key", flat=True))
    client = Client()
    client.force_login(user("carol"))
    positions = list(carol.assignments.values_list("position", flat=True))
    beyond = max(positions) + 1
    assert client.get(f"/campaigns/{campaign.pk}/judge/?at={beyond}").context["position"] == min(positions)
    assert client.post(f"/campaigns/{campaign.pk}/judge/{beyond}/", {}).status_code == 404
    for position in positions:
        page = _judge_page(client, campaign, position).content.decode()
        assert not any(f"My order {key[1:]} has" in page for key in dave_items)


def _responses_campaign(**extra: Any) -> tuple[Campaign, dict[str, Any]]:
    task, version, gold = response_task()
    aurora, borealis = Team.objects.create(name="Aurora", slug="aurora"), Team.objects.create(name="Borealis",
                                                                                              slug="borealis")
    alice, bob = user("alice"), user("bob")
    aurora.members.add(alice)
    borealis.members.add(bob)
    ids = [entry["id"] for entry in gold]
    # The same reply twice, once decomposed (e + combining acute) and with other spaces: one item.
    run_a = stored_run(task, aurora, "aurora-1", {ids[0]: "Café is open.", ids[1]: "Sorry about that.",
                                                    ids[2]: "A", ids[3]: "B"})
    run_b = stored_run(task, borealis, "borealis-1", {ids[0]: "Cafe\u0301  is\nopen. ", ids[1]: "Let me check.",
                                                        ids[2]: "C", ids[3]: "D"})
    for name in ("carol", "dave", "erin"):
        user(name)
    plan = Plan(name="Responses", kind="responses", gold_version=version, runs=[run_a, run_b], per_item=2,
                assessors=["alice", "bob", "carol", "dave", "erin"],
                dimensions="appropriateness 1-5\ninformativeness 1-3: none | some | much", **extra)
    return create_campaign(task, plan), {"gold": gold, "runs": (run_a, run_b), "ids": ids}


def test_responses_are_pooled_after_nfc_and_whitespace_and_run_names_stay_hidden(db: Any) -> None:
    campaign, made = _responses_campaign()
    ids = made["ids"]
    items = list(campaign.items.all())
    assert unicodedata.normalize("NFC", "Cafe\u0301") == "Café"
    assert len(items) == 7  # 8 responses, two of them the same text
    pooled = [item for item in items if item.sources["item"] == ids[0]]
    assert len(pooled) == 1 and sorted(pooled[0].sources["runs"]) == sorted(run.pk for run in made["runs"])
    for item in items:
        assert item.key.startswith(item.sources["item"] + "/")
        assert "aurora" not in orjson.dumps(item.content).decode().lower()
        assert "borealis" not in orjson.dumps(item.content).decode().lower()
    open_campaign(campaign)
    # A participant never judges a response of their own team's runs.
    for row in Assignment.objects.filter(assessor__campaign=campaign).select_related("assessor__user", "item"):
        teams = set(row.assessor.user.teams.values_list("pk", flat=True))
        assert not teams & set(row.item.team_ids)
    client = Client()
    client.force_login(user("carol"))
    page = client.get(f"/campaigns/{campaign.pk}/judge/").content.decode()
    assert "aurora-1" not in page and "borealis-1" not in page and "Aurora" not in page
    assert "informativeness" in page and "much" in page


def test_the_command_makes_and_opens_a_campaign_or_says_every_problem(world: World, tmp_path: Path) -> None:
    for name in ("carol", "dave"):
        user(name)
    path = tmp_path / "dialogues.json"
    path.write_bytes(orjson.dumps(dialogues(3)))
    out = StringIO()
    call_command("create_campaign", world.task.slug, "Round 2", "--kind", "dialogues", "--dialogues", str(path),
                 "-k", "2", "--assessor", "carol", "--assessor", "dave", "--open", stdout=out)
    campaign = Campaign.objects.get()
    assert out.getvalue().strip() == (f"campaign {campaign.pk} on {world.task.slug}: 3 items, 2 assessors, "
                                      "open (6 assignments)")
    with pytest.raises(CommandError) as failed:
        call_command("create_campaign", world.task.slug, "Round 3", "--kind", "dialogues", "--dialogues",
                     str(path), "-k", "3", "--assessor", "carol", "--open")
    assert failed.value.returncode == 2 and "1 eligible assessor(s), 3 needed" in str(failed.value)
    with pytest.raises(CommandError) as failed:
        call_command("create_campaign", world.task.slug, "Round 3", "--kind", "dialogues", "--dialogues",
                     str(tmp_path / "missing.json"))
    assert failed.value.returncode == 2 and "No such file" in str(failed.value)
    assert Campaign.objects.count() == 1


def test_exports_hold_every_judgement_in_the_judgements_file_format(world: World) -> None:
    campaign = stc3_campaign(world, n=1, per_item=2, assessors=("carol", "dave"))
    open_campaign(campaign)
    for name, a in (("carol", 2), ("dave", -1)):
        client = Client()
        client.force_login(user(name))
        page = _judge_page(client, campaign)
        client.post(f"/campaigns/{campaign.pk}/judge/{page.context['position']}/",
                    {**answer_for(page.context["turns"], a), "shown": page.context["shown"]})
    organiser = Client()
    organiser.force_login(world.organiser)
    records = orjson.loads(organiser.get(f"/campaigns/{campaign.pk}/judgements.json").content)
    for record in records:
        assert record.pop("seconds") >= 0
    assert records == [
        {"item": "d1", "assessor": "a01", "quality": {"A": 2, "E": 0, "S": -1}, "nugget": ["CNUG0", "HNUG", "CNUG0"]},
        {"item": "d1", "assessor": "a02", "quality": {"A": -1, "E": 0, "S": -1}, "nugget": ["CNUG0", "HNUG", "CNUG0"]}]
    lines = organiser.get(f"/campaigns/{campaign.pk}/judgements.csv").content.decode().splitlines()
    assert lines[0] == "item,assessor,check,seconds,A,E,S,nugget"
    assert [line.split(",")[:3] + line.split(",")[4:] for line in lines[1:]] == [
        ["d1", "a01", "no", "2", "0", "-1", "CNUG0 HNUG CNUG0"],
        ["d1", "a02", "no", "-1", "0", "-1", "CNUG0 HNUG CNUG0"]]


def test_the_dashboard_links_to_the_campaigns_and_the_form_makes_a_draft(world: World) -> None:
    client = Client()
    client.force_login(world.organiser)
    dashboard = client.get(f"/organiser/{world.task.slug}/").content.decode()
    assert f'href="/organiser/{world.task.slug}/campaigns/"' in dashboard
    user("carol")
    from django.core.files.uploadedfile import SimpleUploadedFile

    answer = client.post(f"/organiser/{world.task.slug}/campaigns/", {
        "name": "From the form", "kind": "dialogues", "gold_version": "", "per_item": "1", "seed": "7",
        "assessors": "carol", "dialogues": SimpleUploadedFile("d.json", orjson.dumps(dialogues(2)))})
    campaign = Campaign.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/campaigns/{campaign.pk}/"
    assert (campaign.state, campaign.items.count(), campaign.seed) == (Campaign.DRAFT, 2, 7)
    refused = client.post(f"/organiser/{world.task.slug}/campaigns/", {
        "name": "Bad", "kind": "dialogues", "gold_version": "", "per_item": "1", "seed": "7", "assessors": "zed"})
    assert refused.status_code == 400 and Campaign.objects.count() == 1
    page = refused.content.decode()
    assert "assessors: no active account named &#x27;zed&#x27;" in page
    assert "dialogues: upload a file of dialogues or choose a gold version" in page
