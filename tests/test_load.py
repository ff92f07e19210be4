"""Load through the HTTP API of a live server with a real worker: quotas near a deadline, a full board.

The figures that matter (gunicorn, 50 readers, a Redis cache) come from
``benchmarks/reliability_report.py``; here the load is lighter and the assertions are about
correctness: exact quotas, every accepted run scored once, a cached board that still shows a
new score at once. Timings are printed, and bounded only where a slow, busy machine cannot
reach the bound by being slow.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.utils import timezone

from devtools.workers import (
    BROKERS,
    call,
    fill_board,
    new_queue,
    publishing_to,
    read_load,
    remove_queue,
    scored_once,
    start_worker,
    upload,
    wait_until,
    worker_env,
)
from leaderboard.board import board_cache_key
from tasks.models import Phase, Run, Task, Team
from tasks.tokens import issue_token
from tests.conftest import make_world, require_postgres, require_service, run_bytes

pytestmark = [pytest.mark.services, pytest.mark.slow]

TEAMS, UPLOADS_PER_TEAM, DAILY_QUOTA = 20, 5, 3
BOARD_RUNS = 500


@pytest.fixture
def postgres(transactional_db: Any) -> None:
    require_postgres()


def figures(what: str, result: Any) -> str:
    return (f"{what}: {result.requests} requests, {result.throughput:.0f}/s, "
            f"p50 {result.percentile(0.5) * 1000:.0f} ms, "
            f"p95 {result.percentile(0.95) * 1000:.0f} ms")


def test_near_a_deadline_twenty_teams_uploading_five_runs_at_once_get_exactly_their_quota_and_a_full_board_holds(
        postgres: None, live_server: Any, settings: Any, tmp_path: Path) -> None:
    name, port, broker_url = BROKERS["redis"]
    require_service(name, port)
    world = make_world()
    now = timezone.now()
    phase = Phase.objects.create(task=world.task, name="test", gold_version=world.gold_version,
                                 starts_at=now - timedelta(days=1), ends_at=now + timedelta(minutes=10),
                                 daily_quota=DAILY_QUOTA, total_quota=50)
    tokens = {}
    for number in range(TEAMS):
        user = get_user_model().objects.create_user(f"load-{number:02d}", password="load-pass-1")
        Team.objects.create(name=f"Load {number:02d}", slug=f"load-{number:02d}").members.add(user)
        tokens[number] = issue_token(user)
    contents = {(team, k): run_bytes(world.gold, noise=0.1 + 0.15 * k, seed=100 * team + k)
                for team in range(TEAMS) for k in range(UPLOADS_PER_TEAM)}
    queue = new_queue("evalserver-load")
    worker = start_worker(worker_env(broker_url, Path(settings.MEDIA_ROOT)), queue, "load", tmp_path / "worker.log")
    try:
        worker.wait_for_log(" ready.")
        with publishing_to(broker_url, queue):
            # A team's five uploads are neighbours in the order, so they are in flight together;
            # the first wave leaves at once. (20 at a time: each request is a PostgreSQL connection.)
            gate = threading.Barrier(TEAMS)

            def send(key: tuple[int, int]) -> tuple[tuple[int, int], Any]:
                if key[0] < TEAMS // UPLOADS_PER_TEAM:
                    gate.wait(timeout=30)
                return key, upload(live_server.url, world.task.slug, tokens[key[0]], contents[key],
                                   f"load-{key[0]:02d}-{key[1]}")

            with ThreadPoolExecutor(max_workers=TEAMS) as pool:
                replies = dict(pool.map(send, sorted(contents)))

            statuses = Counter(reply.status for reply in replies.values())
            assert statuses == {202: TEAMS * DAILY_QUOTA, 429: TEAMS * (UPLOADS_PER_TEAM - DAILY_QUOTA)}, statuses
            for team in range(TEAMS):
                answers = [replies[(team, k)] for k in range(UPLOADS_PER_TEAM)]
                assert sum(reply.status == 202 for reply in answers) == DAILY_QUOTA
                for reply in answers:
                    if reply.status == 429:
                        assert "quota" in reply.json()["errors"][0], reply.body
            accepted = [reply.json()["id"] for reply in replies.values() if reply.status == 202]
            assert len(set(accepted)) == len(accepted)
            assert set(Run.objects.filter(phase=phase).values_list("pk", flat=True)) == set(accepted)
            quota = call(f"{live_server.url}/api/v1/tasks/{world.task.slug}/my-runs/", tokens[0]).json()["quota"]
            assert (quota["daily_used"], quota["daily_remaining"]) == (DAILY_QUOTA, 0)

            # Every accepted run is scored, once.
            wait_until("every accepted run to be scored",
                       lambda: not Run.objects.filter(pk__in=accepted).exclude(status=Run.DONE).exists(), 90, worker)
            assert [problem for run_id in accepted for problem in scored_once(run_id)] == []

            # A board of 500 runs under 20 concurrent readers (the report uses 50 and gunicorn).
            archive = [Team.objects.create(name=f"Archive {number}", slug=f"archive-{number}") for number in range(10)]
            # The phase's board also shows the two baselines of its gold version.
            fill_board(world.task, BOARD_RUNS - len(accepted) - 2, archive, phase)
            json_path = f"/api/v1/tasks/{world.task.slug}/leaderboard/"
            board = call(live_server.url + json_path).json()
            assert len(board["runs"]) == BOARD_RUNS
            task = Task.objects.get(pk=world.task.pk)
            assert cache.get("json:" + board_cache_key(task, phase, False) + ":identity") is not None  # cached
            readers = read_load(live_server.url, [json_path], readers=20, requests_per_reader=10)
            # The page renders 500 rows (about a second each): a few readers check it answers.
            pages = read_load(live_server.url, [f"/tasks/{world.task.slug}/"], readers=3, requests_per_reader=1)
            print("\n" + figures("leaderboard JSON, 500 runs, 20 readers", readers))
            print(figures("leaderboard page, 500 runs, 3 readers", pages))
            assert readers.statuses == {200: 200} and pages.statuses == {200: 3}, (readers.failures, pages.failures)
            # The cached JSON is one cache read: even a slow shared machine answers within seconds.
            assert readers.percentile(0.95) < 5.0

            # A new score shows at once: the cache key follows the task's scores_changed_at.
            reply = upload(live_server.url, world.task.slug, world.alice_token, run_bytes(world.gold, seed=77),
                           "after-the-rush")
            assert reply.status == 202, reply.body
            new_id = reply.json()["id"]
            wait_until("the new run to be scored", lambda: Run.objects.get(pk=new_id).status == Run.DONE, 30, worker)
            board = orjson.loads(call(live_server.url + json_path).body)
            assert len(board["runs"]) == BOARD_RUNS + 1
            entry = next(entry for entry in board["runs"] if entry["id"] == new_id)
            assert entry["team"] == "Aurora" and entry["scores"]["n_items"] == 30
    finally:
        worker.stop()
        remove_queue(broker_url, queue)
