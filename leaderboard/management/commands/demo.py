"""``manage.py demo``: a demo task with generated gold, baselines, teams and scored runs."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import orjson
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from fixtures.synthetic import generate_gold, generate_run
from leaderboard.statistics import compute_task_statistics
from tasks.models import Task, Team
from tasks.organising import create_task, load_gold_version
from tasks.submissions import Submission, submit_run
from tasks.tokens import issue_token

DEMO_SLUG = "stc3-demo"


class Command(BaseCommand):
    help = "Create (once) a demo task with synthetic STC-3 gold, baselines, two teams and scored runs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dialogues", type=int, default=300)
        parser.add_argument("--seed", type=int, default=14)
        parser.add_argument("--password", default=None, help="password for the demo accounts (default: random)")

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model()
        logins = Path(settings.VAR_DIR) / "demo-logins.txt"
        if Task.objects.filter(slug=DEMO_SLUG).exists():
            self.stdout.write(f"demo task {DEMO_SLUG} exists already")
            if logins.exists():
                self.stdout.write(logins.read_text(), ending="")
            return
        password = options["password"] or secrets.token_urlsafe(9)
        gold = generate_gold(options["dialogues"], seed=options["seed"])
        with transaction.atomic():
            organiser = users.objects.create_user("organiser", password=password, is_staff=True, is_superuser=True)
            task = create_task(DEMO_SLUG, "stc3", "STC-3 style demo (synthetic data)",
                               "A demo of the DialEval server on synthetic customer-helpdesk dialogues: "
                               "300 dialogues, 19 annotators, both subtasks.")
            task.organisers.add(organiser)
            load_gold_version(task, orjson.dumps(gold), "demo-gold.json", organiser, "demo")
            participants, tokens = [], []
            for username, team_name, slug in (("alice", "Aurora", "aurora"), ("bob", "Borealis", "borealis")):
                user = users.objects.create_user(username, password=password)
                team = Team.objects.create(name=team_name, slug=slug)
                team.members.add(user)
                tokens.append(issue_token(user))
                participants.append(user)
        runs = [(participants[0], "aurora-run1", 0.15, ("quality", "nugget")),
                (participants[0], "aurora-run2", 0.35, ("quality", "nugget")),
                (participants[1], "borealis-dq", 0.25, ("quality",)),
                (participants[1], "borealis-nd", 0.5, ("nugget",))]
        for number, (user, name, noise, subtasks) in enumerate(runs):
            content = orjson.dumps(generate_run(gold, "noisy", noise=noise, seed=100 + number, subtasks=subtasks))
            submit_run(task, user, Submission(content=content, filename=f"{name}.json", name=name,
                                              description=f"Gold mixed with {noise:.0%} noise (demo)."))
        compute_task_statistics(task.pk)  # at once: a background thread would die with this command
        self.stdout.write(f"demo task {DEMO_SLUG}: {len(gold)} dialogues, 2 baselines, {len(runs)} runs")
        self._write_files(gold)
        text = (f"organiser login: organiser / {password}   (admin at /admin/)\n"
                f"participant login: alice / {password}   (team Aurora; bob / same password, team Borealis)\n"
                f"alice's API token: {tokens[0]}\n")
        logins.write_text(text)
        logins.chmod(0o600)
        self.stdout.write(text, ending="")

    def _write_files(self, gold: list[dict[str, Any]]) -> None:
        """Files to try the server with, in var/demo/ (never served): the test data as participants
        get it (no annotations), a run ready to upload, and the gold for the offline score command."""
        folder = Path(settings.VAR_DIR) / "demo"
        folder.mkdir(exist_ok=True)
        test_data = [{key: value for key, value in dialogue.items() if key != "annotations"} for dialogue in gold]
        (folder / "test-data.json").write_bytes(orjson.dumps(test_data))
        (folder / "sample-run.json").write_bytes(orjson.dumps(generate_run(gold, "noisy", noise=0.3, seed=999)))
        (folder / "gold.json").write_bytes(orjson.dumps(gold))
        self.stdout.write(f"files to try it with: {folder}/sample-run.json (upload it), test-data.json, gold.json")
