"""Small campaigns for the tests: a DQ/ND task's dialogues and a response task's pooled responses,
with assessors (tests.conftest's world: alice of Aurora, bob of Borealis, olivia the organiser)."""

from __future__ import annotations

from typing import Any

import orjson
from django.contrib.auth import get_user_model

from campaigns.building import Plan, create_campaign
from tests.conftest import World


def user(name: str) -> Any:
    users = get_user_model()
    return users.objects.filter(username=name).first() or users.objects.create_user(name, password=f"{name}-pass-1")


def dialogues(n: int = 4) -> list[dict[str, Any]]:
    """Dialogues without annotations, as a new round starts from (two or three turns each)."""
    return [{"id": f"d{number}", "turns": [
        {"sender": "customer", "utterances": [f"My order {number} has not arrived."]},
        {"sender": "helpdesk", "utterances": ["Sorry, let me check.", "It ships tomorrow."]},
        *([{"sender": "customer", "utterances": ["Thanks!"]}] if number % 2 else [])]} for number in range(1, n + 1)]


def stc3_campaign(world: World, assessors: tuple[str, ...] = ("carol", "dave", "erin"), per_item: int = 2,
                  n: int = 4, name: str = "Round 2 dialogues", **extra: Any) -> Any:
    for name in assessors:
        user(name)
    plan = Plan(name=name, kind="dialogues", per_item=per_item,
                dialogues=orjson.dumps(dialogues(n)), assessors=list(assessors), **extra)
    return create_campaign(world.task, plan, world.organiser)


def response_task(with_gold: bool = True, n: int = 4) -> tuple[Any, Any, list[dict[str, Any]]]:
    """A response task with a small gold (no scoring: its runs are stored as scored runs directly)."""
    from fixtures import response_demo
    from tasks.organising import create_task, load_gold_version

    task = create_task("response-task", "response", "Responses", kind="response")
    gold = response_demo.generate_gold(n, seed=3)
    version = load_gold_version(task, orjson.dumps(gold), "gold.json") if with_gold else None
    return task, version, gold


def stored_run(task: Any, team: Any, name: str, responses: dict[str, str]) -> Any:
    """A run of the team with these responses, stored as the upload path stores it, marked scored."""
    from tasks.models import Run
    from tasks.runfiles import store_run_file

    content = orjson.dumps([{"id": item, "response": text} for item, text in responses.items()])
    return Run.objects.create(task=task, team=team, name=name, file_sha256=store_run_file(content),
                              file_size=len(content), status=Run.DONE, gold_version=task.latest_gold())
