"""Seeding a site in a fresh database (``seed``, ``leak_site``), in a subprocess (``seed_site``),
and counting its rows; ``main`` is ``python -m devtools.workers``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterable
from typing import Any

from devtools.workers.data import big_gold, big_run, fill_board
from devtools.workers.leak import forbidden_test_numbers, leak_probe, leak_probe_paths, leak_probe_phase_values
from devtools.workers.processes import PYTHON, ROOT

# Seeding a site in a fresh database --------------------------------------------------------------------

def kind_gold(kind: str) -> list[dict[str, Any]]:
    """The gold of ``seed``'s response or metric task (the same as tests/test_hostile_uploads.py's)."""
    from fixtures import metric_demo, response_demo

    return response_demo.generate_gold(30, seed=3) if kind == "response" else metric_demo.generate_gold(6, 3, seed=1)


def seed(spec: dict[str, Any]) -> dict[str, Any]:
    """Migrate, then build one task: gold from ``big_gold``, teams with one member and a token each,
    an optional phase with quotas, an optional filled board. Runs inside Django (``python -m
    devtools.workers seed``); baselines are scored in-process when no broker is configured."""
    from datetime import timedelta

    import django
    import orjson

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from tasks import jobs, organising, submissions
    from tasks.models import Phase, Team
    from tasks.tokens import issue_token

    call_command("migrate", verbosity=0, interactive=False)
    users = get_user_model()
    if spec.get("kind") in ("response", "metric"):
        # A task of another kind on its demo gold (kind_gold), for the hostile corpus's KIND_CASES.
        task = organising.create_task(spec["slug"], title=spec.get("title", spec["slug"]), kind=spec["kind"])
        version = organising.load_gold_version(task, orjson.dumps(kind_gold(spec["kind"])), "gold.json")
        user = users.objects.get(username=spec["member"])
        return {"task": task.slug, "gold_version": version.number, "tokens": {}, "phase": None,
                "member": user.username}
    task = organising.create_task(spec["slug"], "stc3", spec.get("title", spec["slug"]))
    task.permutations = 200
    task.save()
    gold = big_gold(spec["dialogues"], seed=spec.get("seed", 7))
    version = organising.load_gold_version(task, orjson.dumps(gold), "gold.json")
    if spec.get("bare_staff"):
        # Staff status and nothing else: no permission, no team, organiser of nothing.
        users.objects.create_user(spec["bare_staff"]["username"], password=spec["bare_staff"]["password"],
                                  is_staff=True)
    if spec.get("superuser"):
        users.objects.create_user(spec["superuser"]["username"], password=spec["superuser"]["password"],
                                  is_staff=True, is_superuser=True)
    teams, tokens = [], {}
    for number in range(spec.get("teams", 1)):
        name = f"{spec.get('team_prefix', 'Team')} {number + 1:02d}"
        team = Team.objects.create(name=name, slug=f"{spec['slug']}-t{number + 1:02d}")
        user = users.objects.create_user(f"{spec['slug']}-u{number + 1:02d}", password=uuid.uuid4().hex)
        team.members.add(user)
        teams.append(team)
        tokens[name] = issue_token(user)
    phase = None
    if spec.get("phase"):
        now = timezone.now()
        phase = Phase.objects.create(task=task, name="test", kind=Phase.DEVELOPMENT, gold_version=version,
                                     starts_at=now - timedelta(days=3),
                                     ends_at=now + timedelta(seconds=spec["phase"].get("ends_in", 3600)),
                                     daily_quota=spec["phase"]["daily_quota"],
                                     total_quota=spec["phase"].get("total_quota", 200))
    board: list[int] = []
    if spec.get("board"):
        # Teams of their own, so that the board uses none of the participants' quotas.
        archive = [Team.objects.create(name=f"Archive {number:02d}", slug=f"{spec['slug']}-a{number:02d}")
                   for number in range(10)]
        archivist = users.objects.create_user(f"{spec['slug']}-archivist", password=uuid.uuid4().hex)
        archive[0].members.add(archivist)
        jobs.score_run(submissions.submit_run(task, archivist,
                                              submissions.Submission(content=big_run(gold, 0.4, seed=99),
                                                                     filename="seed.json", name="seed-run"),
                                              phase).pk)
        board = fill_board(task, spec["board"], archive, phase)
    return {"task": task.slug, "gold_version": version.number, "tokens": tokens, "board_runs": len(board),
            "phase": phase.name if phase else None}


def leak_site(spec: dict[str, Any]) -> dict[str, Any]:
    """Build a task with a development phase (its own gold, closed), an open test phase on the test
    gold with a live subset and an unpublished final phase on the same gold, runs of two teams
    (one hidden) and stored statistics; then ``leak_probe`` the live server at ``spec["base_url"]``
    for it. Runs inside Django (``python -m devtools.workers leak``), scoring in-process."""
    from datetime import timedelta

    import django
    import orjson

    django.setup()
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from fixtures.synthetic import generate_gold, generate_run
    from leaderboard.statistics import compute_task_statistics
    from tasks import jobs, organising, submissions
    from tasks.models import Phase, Team

    slug = spec["slug"]
    task = organising.create_task(slug, "stc3", "Leak probe")
    task.permutations = 200
    task.save()
    development = organising.load_gold_version(task, orjson.dumps(generate_gold(30, seed=3)), "dev.json")
    test_gold = generate_gold(40, seed=4)
    test = organising.load_gold_version(task, orjson.dumps(test_gold), "test.json", label="test")
    now = timezone.now()
    Phase.objects.create(task=task, name="development", kind=Phase.DEVELOPMENT, gold_version=development,
                         starts_at=now - timedelta(days=9), ends_at=now - timedelta(days=2))
    phase = Phase.objects.create(task=task, name="test", kind=Phase.TEST, gold_version=test,
                                 starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=1),
                                 live_subset_size=15, live_subset_seed=3)
    Phase.objects.create(task=task, name="final", kind=Phase.FINAL, gold_version=test,
                         starts_at=now + timedelta(days=2), ends_at=now + timedelta(days=9))
    users = get_user_model()
    for number, public in ((1, True), (2, True), (3, False)):
        team = Team.objects.create(name=f"Leak {number}", slug=f"{slug}-t{number}")
        user = users.objects.create_user(f"{slug}-u{number}", password=uuid.uuid4().hex)
        team.members.add(user)
        run = submissions.submit_run(task, user, submissions.Submission(
            content=orjson.dumps(generate_run(test_gold, "noisy", noise=0.2 + 0.1 * number, seed=number)),
            name=f"leak-run-{number}", description="method", is_public=public), phase)
        jobs.score_run(run.pk)
    compute_task_statistics(task.pk)
    forbidden, per_dialogue, allowed = forbidden_test_numbers(slug)
    problems = leak_probe(spec["base_url"], slug, ["development", "test", "final"], forbidden, allowed,
                          forbidden_exact=per_dialogue)
    requests = len(leak_probe_paths(slug)) * len(leak_probe_phase_values(["development", "test", "final"]))
    return {"problems": problems, "requests": requests, "forbidden": len(forbidden),
            "per_dialogue": len(per_dialogue)}


def seed_site(env: dict[str, str], spec: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
    """``seed`` in a subprocess with ``env`` (its DATABASE_URL is the site's database)."""
    env = {key: value for key, value in env.items() if key != "CELERY_BROKER_URL"}  # baselines in-process
    completed = subprocess.run([PYTHON, "-m", "devtools.workers", "seed", json.dumps(spec)], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=timeout)
    if completed.returncode:
        raise RuntimeError(f"seeding failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def count_rows(database_url: str, tables: Iterable[str] = ()) -> dict[str, int]:
    """Rows of every table of the public schema (or of ``tables``), straight from PostgreSQL."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(database_url, autocommit=True) as connection:
        names = list(tables) or [row[0] for row in connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")]
        return {name: connection.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(name)))
                .fetchone()[0] for name in names}


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "seed":
        print(json.dumps(seed(json.loads(argv[1]))))
        return 0
    if len(argv) == 2 and argv[0] == "leak":
        print(json.dumps(leak_site(json.loads(argv[1]))))
        return 0
    if len(argv) == 2 and argv[0] in ("restore-populate", "restore-traffic", "restore-probe"):
        from devtools.workers import restore

        program = {"restore-populate": restore.populate, "restore-traffic": restore.traffic,
                   "restore-probe": restore.probe}[argv[0]]
        print(json.dumps(program(json.loads(argv[1]))))
        return 0
    print("usage: python -m devtools.workers seed|leak|restore-populate|restore-traffic|restore-probe SPEC_JSON",
          file=sys.stderr)
    return 2
