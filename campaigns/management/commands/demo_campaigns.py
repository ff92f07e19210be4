"""``manage.py demo_campaigns``: annotation campaigns on the demo tasks (``manage.py demo`` first),
one of each kind, judged by four demo assessors, and one open for the demo organiser to try.

The demo assessors' answers are made from the demo's own data, as real assessors' would be related
to it: the DQ/ND dialogues' labels are those of four of the gold's annotators (so alpha is what
the gold's annotators agree, low as on STC-3); a reference's rating follows its weight, a response's
its system's quality or the metrics gold's human score, each with the noise of one person."""

from __future__ import annotations

import random
from typing import Any

import orjson
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from campaigns.assignment import close_campaign, open_campaign
from campaigns.building import Plan, create_campaign, gold_source
from campaigns.models import Campaign, Judgement
from tasks.models import Run, Task

ASSESSORS = ("assessor1", "assessor2", "assessor3", "assessor4")
INSTRUCTIONS = {
    "dialogues": "Read the whole dialogue between a customer and a helpdesk. Give each turn one nugget label "
                 "(does it help to solve the customer's problem?), then rate the dialogue on A, E and S.",
    "references": "Read the conversation, then the candidate reply. How appropriate would it be as the next turn?",
    "responses": "Read the conversation, then the system's reply. Rate it on each question.",
}
# What the demo's made-up systems are worth to a person (response-demo's strong, medium, weak).
SYSTEM_QUALITY = {"strong": 4.4, "medium": 3.0, "weak": 1.5}


def _clip(value: float, low: int, high: int) -> int:
    return max(low, min(high, round(value)))


def _answer(campaign: Campaign, item: Any, number: int, rng: random.Random, truth: dict[str, Any]) -> dict[str, Any]:
    """A demo assessor's answer on one item (``number``: which of the four)."""
    if campaign.kind == "dialogues":
        annotations = truth["annotations"][item.key]
        annotation = annotations[number % len(annotations)]
        return {"quality": dict(annotation["quality"]), "nugget": list(annotation["nugget"])}
    if campaign.kind == "references":
        return {"values": {"rating": _clip(3 + 2 * truth["weights"][item.key] + rng.gauss(0, 0.8), 1, 5)}}
    values = {}
    for dimension in campaign.dimensions:
        centre = truth["quality"](item)
        if dimension["max"] != 5:  # a shorter scale: the same judgement, rescaled
            centre = dimension["min"] + (centre - 1) / 4 * (dimension["max"] - dimension["min"])
        values[dimension["name"]] = _clip(centre + rng.gauss(0, 0.7), dimension["min"], dimension["max"])
    return {"values": values}


def _judge_all(campaign: Campaign, truth: dict[str, Any], seed: int, share: float = 1.0) -> int:
    """Every made-up assessor answers (``share`` of) their queue, each answer taking 6-40 seconds."""
    rng = random.Random(seed)
    rows = []
    made_up = campaign.assessors.filter(user__username__in=ASSESSORS).order_by("code")
    for number, assessor in enumerate(made_up):  # the demo organiser's queue is theirs to judge
        queue = list(assessor.assignments.select_related("item").order_by("position"))
        for assignment in queue[:round(len(queue) * share)]:
            item = assignment.item
            values = ({"quality": {k: v for k, v in item.check_answer.items() if k != "nugget"},
                       "nugget": item.check_answer["nugget"]} if item.is_check and campaign.kind == "dialogues"
                      else _answer(campaign, item, number, rng, truth))
            rows.append(Judgement(campaign=campaign, item=item, assessor=assessor, values=values,
                                  seconds=round(rng.uniform(6, 40), 1)))
    Judgement.objects.bulk_create(rows)
    return len(rows)


class Command(BaseCommand):
    help = ("Create (once) annotation campaigns on the demo tasks: dialogues, references and responses judged by "
            "four demo assessors, and an open one for the demo organiser to try on the judging page.")

    def handle(self, *args: Any, **options: Any) -> None:
        tasks = {task.slug: task for task in Task.objects.filter(slug__in=("stc3-demo", "response-demo",
                                                                            "metric-demo"))}
        if "stc3-demo" not in tasks:
            raise CommandError("run manage.py demo first: the campaigns judge the demo tasks' items", returncode=2)
        if Campaign.objects.filter(task__in=tasks.values()).exists():
            self.stdout.write("demo campaigns exist already")
            return
        users = get_user_model()
        with transaction.atomic():
            for name in ASSESSORS:
                person = users.objects.filter(username=name).first() or users(username=name)
                person.set_unusable_password()  # made-up people: their answers are made, never signed in
                person.save()
            made = [self._dialogues(tasks["stc3-demo"])]
            if "response-demo" in tasks:
                made += [self._references(tasks["response-demo"]), self._responses(tasks["response-demo"])]
            if "metric-demo" in tasks:
                made.append(self._metric(tasks["metric-demo"]))
            made.append(self._to_try(tasks["stc3-demo"]))
        for line in made:
            self.stdout.write(line)

    def _dialogues(self, task: Task) -> str:
        version = task.gold_versions.order_by("-number").first()
        gold = gold_source(version)[:24]
        campaign = create_campaign(task, Plan(
            name="Annotating new dialogues (demo)", kind="dialogues", gold_version=version, per_item=3,
            item_ids=[entry["id"] for entry in gold], assessors=list(ASSESSORS), instructions=INSTRUCTIONS["dialogues"],
            checks=orjson.dumps([{"id": "refund", "turns": [
                {"sender": "customer", "utterances": ["I was charged twice for my order. Please refund one."]},
                {"sender": "helpdesk", "utterances": ["Sorry! I have refunded the second charge just now."]},
                {"sender": "customer", "utterances": ["Great, thank you!"]}],
                "answer": {"quality": {"A": 2, "E": 2, "S": 2}, "nugget": ["CNUG0", "HNUG*", "CNUG*"]}}])))
        open_campaign(campaign)
        truth = {"annotations": {entry["id"]: entry["annotations"] for entry in gold}}
        count = _judge_all(campaign, truth, seed=1)
        close_campaign(campaign)
        return f"demo campaign {campaign.pk} on {task.slug}: dialogues, {count} judgements, closed"

    def _references(self, task: Task) -> str:
        version = task.gold_versions.order_by("-number").first()
        gold = gold_source(version)[:10]
        campaign = create_campaign(task, Plan(
            name="Rating references for deltaBLEU (demo)", kind="references", gold_version=version, per_item=3,
            item_ids=[entry["id"] for entry in gold], assessors=list(ASSESSORS),
            instructions=INSTRUCTIONS["references"]))
        open_campaign(campaign)
        weights = {f"{entry['id']}#{k}": float(reference.get("weight", 1.0))
                   for entry in gold for k, reference in enumerate(entry["references"])}
        count = _judge_all(campaign, {"weights": weights}, seed=2)
        close_campaign(campaign)
        return f"demo campaign {campaign.pk} on {task.slug}: references, {count} judgements, closed"

    def _responses(self, task: Task) -> str:
        test = task.phases.filter(name="test").first()
        runs = list(Run.objects.filter(task=task, phase=test, status=Run.DONE, is_baseline=False).order_by("pk"))
        campaign = create_campaign(task, Plan(
            name="Judging the systems' responses (demo)", kind="responses", gold_version=test.gold_version,
            runs=runs, per_item=3, assessors=[*ASSESSORS, "organiser"], instructions=INSTRUCTIONS["responses"],
            dimensions="appropriateness 1-5: inappropriate or unrecognisable | mostly inappropriate | neither | "
                       "appropriate | very appropriate\n"
                       "informativeness 1-3: says nothing new | says something | says much that helps"))
        open_campaign(campaign)
        systems = {run.pk: next((value for key, value in SYSTEM_QUALITY.items() if run.name.endswith(key)), 3.0)
                   for run in runs}
        count = _judge_all(campaign, {"quality": lambda item: max(systems[run] for run in item.sources["runs"])},
                           seed=3)
        return (f"demo campaign {campaign.pk} on {task.slug}: pooled responses of {len(runs)} runs, {count} "
                "judgements, open (the organiser's share is theirs to judge)")

    def _metric(self, task: Task) -> str:
        version = task.gold_versions.order_by("-number").first()
        gold = gold_source(version)[:6]
        human = {str(response["id"]): float(response["human"]) for entry in gold for response in entry["responses"]
                 if isinstance(response.get("human"), int | float)}
        campaign = create_campaign(task, Plan(
            name="Human scores for the metrics track (demo)", kind="responses", gold_version=version, per_item=3,
            item_ids=[entry["id"] for entry in gold], assessors=list(ASSESSORS),
            instructions=INSTRUCTIONS["responses"]))
        open_campaign(campaign)
        count = _judge_all(campaign, {"quality": lambda item: sum(human.get(rid, 3.0) for rid in item.sources[
            "responses"]) / len(item.sources["responses"])}, seed=4)
        close_campaign(campaign)
        return f"demo campaign {campaign.pk} on {task.slug}: responses, {count} judgements, closed"

    def _to_try(self, task: Task) -> str:
        """Open, with the demo organiser and alice among its assessors: the judging page to try."""
        version = task.gold_versions.order_by("number").first()
        gold = gold_source(version)[:8]
        campaign = create_campaign(task, Plan(
            name="Try judging: eight dialogues (demo)", kind="dialogues", gold_version=version, per_item=1,
            item_ids=[entry["id"] for entry in gold], assessors=["organiser", "alice"],
            instructions=INSTRUCTIONS["dialogues"]))
        open_campaign(campaign)
        return (f"demo campaign {campaign.pk} on {task.slug}: open; sign in as organiser or alice and choose "
                f"Judging (/campaigns/{campaign.pk}/judge/)")
