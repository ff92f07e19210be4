"""A task that looks like a real one, for the browser walk and for screenshots of the pages.

An STC-3 task with a development phase (over, per-item feedback), a test phase (open, a live
subset) and a final phase (open after the test, unpublished); four teams, one with a CJK name
(LaTeX and pdflatex), several runs per team and phase, one of them hidden by its team; statistics
computed for every board. Runs are gold mixed with noise (``fixtures.synthetic``), so the better
runs are known in advance.

Used by ``tests/test_browser_boards.py``; ``python manage.py shell -c "from tests.ux_world
import build; build()"`` fills a development database for looking at the pages by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import orjson
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from fixtures.synthetic import generate_gold, generate_run
from leaderboard.statistics import compute_task_statistics
from tasks.models import Phase, Run, Task, Team
from tasks.organising import create_task, load_gold_version
from tasks.submissions import Submission, submit_run

SLUG = "ux-stc3"
PASSWORD = "ux-pass-1234"
# (username, team name, team slug)
TEAMS = (("alice", "Aurora", "aurora"), ("bob", "Borealis", "borealis"), ("chen", "清华对话组", "tsinghua"),
         ("dana", "Équipe Δ", "equipe"))
# (user, run name, noise, public) per phase; lower noise is a better run.
DEV_RUNS = (("alice", "aurora-bert", 0.10, True), ("alice", "aurora-lstm", 0.30, True),
            ("alice", "aurora-private", 0.20, False), ("bob", "borealis-svm", 0.45, True),
            ("bob", "borealis-ens", 0.25, True), ("chen", "thu-roberta", 0.15, True),
            ("dana", "delta-crf", 0.60, True))
TEST_RUNS = (("alice", "aurora-bert-test", 0.12, True), ("alice", "aurora-lstm-test", 0.32, True),
             ("bob", "borealis-ens-test", 0.27, True), ("chen", "thu-roberta-test", 0.14, True),
             ("dana", "delta-crf-test", 0.55, True))


@dataclass
class UxWorld:
    task: Task
    users: dict[str, Any]
    phases: dict[str, Phase]
    runs: dict[str, Run] = field(default_factory=dict)
    organiser: Any = None


def _atomic() -> Any:
    """Inside a test's wrapping transaction the on-commit callbacks (the scoring jobs) must be run
    by hand; outside one, a real commit runs them."""
    from django.db import connection

    if connection.in_atomic_block:
        from django.test import TestCase

        return TestCase.captureOnCommitCallbacks(execute=True)
    return transaction.atomic()


def build(dev_dialogues: int = 120, test_dialogues: int = 240, live_subset: int = 60, seed: int = 31,
          permutations: int = 500) -> UxWorld:
    users_model = get_user_model()
    now = timezone.now()
    task = create_task(SLUG, "stc3", "Dialogue quality and nugget detection (UX walk)",
                       "Estimate the distribution of annotators' quality labels (A, S, E) and nugget types of "
                       "customer-helpdesk dialogues.")
    task.permutations = permutations
    task.save()
    organiser = users_model.objects.create_user("olga", password=PASSWORD)
    task.organisers.add(organiser)
    dev_gold = generate_gold(dev_dialogues, seed=seed)
    test_gold = generate_gold(test_dialogues, seed=seed + 1)
    with _atomic():
        dev_version = load_gold_version(task, orjson.dumps(dev_gold), "dev.json", organiser, "development")
    with _atomic():
        test_version = load_gold_version(task, orjson.dumps(test_gold), "test.json", organiser, "test")
    users = {}
    for username, team_name, team_slug in TEAMS:
        user = users_model.objects.create_user(username, password=PASSWORD)
        Team.objects.create(name=team_name, slug=team_slug).members.add(user)
        users[username] = user
    phases = {}
    with _atomic():
        phases["dev"] = Phase.objects.create(task=task, name="dev", kind=Phase.DEVELOPMENT, gold_version=dev_version,
                                             starts_at=now - timedelta(days=30), ends_at=now + timedelta(days=5))
    world = UxWorld(task, users, phases, organiser=organiser)
    for number, (username, name, noise, public) in enumerate(DEV_RUNS):
        world.runs[name] = _submit(task, users[username], dev_gold, name, noise, public, seed + number, phases["dev"])
    # The test and final phases start once the development runs are in (a run goes to the open phase).
    with _atomic():
        phases["test"] = Phase.objects.create(task=task, name="test", kind=Phase.TEST, gold_version=test_version,
                                              starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=2),
                                              live_subset_size=live_subset, live_subset_seed=7)
        phases["final"] = Phase.objects.create(task=task, name="final", kind=Phase.FINAL, gold_version=test_version,
                                               starts_at=now + timedelta(days=2), ends_at=now + timedelta(days=60))
        Phase.objects.filter(pk=phases["dev"].pk).update(ends_at=now - timedelta(days=1))
        phases["dev"].refresh_from_db()
        phases["dev"].save()  # save(): the signals renew cached lookups
    for number, (username, name, noise, public) in enumerate(TEST_RUNS):
        world.runs[name] = _submit(task, users[username], test_gold, name, noise, public, seed + 50 + number,
                                   phases["test"])
    compute_task_statistics(task.pk)
    return world


def _submit(task: Task, user: Any, gold: list, name: str, noise: float, public: bool, seed: int,
            phase: Phase) -> Run:
    content = orjson.dumps(generate_run(gold, "noisy", noise=noise, seed=seed))
    with _atomic():
        run = submit_run(task, user, Submission(content=content, filename=f"{name}.json", name=name,
                                                description=f"Gold mixed with {noise:.0%} noise.", is_public=public),
                         phase)
    run.refresh_from_db()
    if run.status != Run.DONE:
        raise RuntimeError(f"run {name} was not scored: {run.status} {run.errors}")
    return run
