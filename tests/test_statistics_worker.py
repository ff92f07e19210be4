"""The background statistics worker of the embedded default (issue 28, item 2): scores only record
the request, a process of its own computes the boards once they are due, a stop signal gives the
claim back, and gunicorn starts and stops it beside the scoring worker.

Why it exists: computed in a thread of the scoring worker, statistics shared its interpreter lock
and a 1,500-item response run uploaded meanwhile took 2.95 s on the board instead of 1.43 s."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from leaderboard import jobs as statistics_jobs
from leaderboard import scheduling
from leaderboard.models import StatisticsState, TaskStatistics
from leaderboard.worker import StatisticsWorker
from tasks import submissions
from tasks.models import Run
from tests.conftest import World, committing, run_bytes


def submit(world: World, user: Any, seed: int, name: str) -> Run:
    with committing():
        return submissions.submit_run(world.task, user,
                                      submissions.Submission(content=run_bytes(world.gold, 0.3, seed), name=name))


def board_run_ids(world: World) -> set[int]:
    from leaderboard.board import build_board

    return {row["id"] for row in build_board(world.task, None, organiser=False).rows}


@pytest.fixture
def due_board(world: World, settings) -> World:  # noqa: ANN001 - pytest-django's settings
    """Two runs scored in the worker mode with no debounce: the board's statistics are due now."""
    settings.EVALSERVER_STATISTICS_MODE = "worker"
    settings.EVALSERVER_STATISTICS_DEBOUNCE_SECONDS = 0.0
    submit(world, world.alice, 1, "one")
    submit(world, world.bob, 2, "two")
    return world


@pytest.mark.django_db
def test_in_the_worker_mode_a_score_records_the_request_and_the_worker_computes_it_once_due(
        world: World, settings) -> None:  # noqa: ANN001 - pytest-django's settings
    settings.EVALSERVER_STATISTICS_MODE = "worker"
    settings.EVALSERVER_STATISTICS_DEBOUNCE_SECONDS = 0.4
    submit(world, world.alice, 1, "one")
    submit(world, world.bob, 2, "two")
    # Nothing computed where the runs were scored, and no timer armed in this process.
    assert not statistics_jobs._timers
    assert not TaskStatistics.objects.filter(task=world.task).exists()
    state = StatisticsState.objects.get(task=world.task)
    assert state.requested > state.completed and not state.claim_token
    assert scheduling.pending_task_ids() == [world.task.pk]

    worker = StatisticsWorker(poll=0.5)
    # Before the debounce: nothing, and the next look is planned for when it ends.
    StatisticsState.objects.filter(pk=state.pk).update(requested_at=timezone.now() - timedelta(seconds=0.1))
    wait = worker.look()
    assert 0.2 < wait <= 0.3 + 0.05
    assert not TaskStatistics.objects.filter(task=world.task).exists()
    # Once it has ended: the board's statistics, over every run on it (two runs, two baselines).
    StatisticsState.objects.filter(pk=state.pk).update(requested_at=timezone.now() - timedelta(seconds=1))
    assert worker.look() == 0.5
    record = TaskStatistics.objects.get(task=world.task)
    assert set(record.run_ids) == board_run_ids(world) and len(record.run_ids) == 4
    state.refresh_from_db()
    assert (state.requested, state.claim_token, state.computations) == (state.completed, "", 1)
    assert scheduling.pending_task_ids() == []
    assert worker.look() == 0.5  # nothing left: the idle poll


@pytest.mark.django_db
def test_a_failing_task_does_not_keep_the_others_from_their_statistics(due_board: World, monkeypatch) -> None:  # noqa: ANN001
    from leaderboard import statistics

    world = due_board

    real = statistics.run_due
    looked: list[int] = []

    def run_due(task_id: int, force: bool = False) -> float | None:
        looked.append(task_id)
        raise RuntimeError("a broken task")

    monkeypatch.setattr(statistics, "run_due", run_due)
    assert StatisticsWorker(poll=0.5).look() == 0.5  # logged, not raised: the loop goes on
    assert looked == [world.task.pk]
    monkeypatch.setattr(statistics, "run_due", real)
    StatisticsWorker(poll=0.5).look()
    assert len(TaskStatistics.objects.get(task=world.task).run_ids) == 4


@pytest.mark.django_db
def test_a_stop_signal_while_computing_gives_the_claim_back_and_the_next_worker_computes_at_once(
        due_board: World, monkeypatch) -> None:  # noqa: ANN001
    import leaderboard.statistics as module

    world = due_board

    real = module.compute_board_statistics
    seen: list[str] = []

    def computed_until_signalled(task: Any, phase: Any, claim: scheduling.Claim) -> str:
        seen.append(StatisticsState.objects.get(pk=claim.state_id).claim_token)
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGTERM)).start()
        time.sleep(5)
        raise AssertionError("the signal did not stop the computation")

    monkeypatch.setattr(module, "compute_board_statistics", computed_until_signalled)
    worker = StatisticsWorker(poll=0.5)
    previous = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    worker.install_signal_handlers()
    started = time.monotonic()
    try:
        worker.run()  # returns: the signal stopped it
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    assert time.monotonic() - started < 4 and worker.stopping.is_set() and seen and seen[0]
    state = StatisticsState.objects.get(task=world.task)
    # Given back: no claim, the request still pending and due now, nothing stored.
    assert (state.claim_token, state.computing, state.heartbeat_at) == ("", None, None)
    assert state.requested > state.completed and scheduling.seconds_until_due(state) == 0.0
    assert not TaskStatistics.objects.filter(task=world.task).exists()
    monkeypatch.setattr(module, "compute_board_statistics", real)
    StatisticsWorker(poll=0.5).look()
    assert set(TaskStatistics.objects.get(task=world.task).run_ids) == board_run_ids(world)


def test_the_command_refuses_to_run_in_another_mode(settings) -> None:  # noqa: ANN001
    from django.core.management import CommandError, call_command

    settings.EVALSERVER_STATISTICS_MODE = "thread"
    with pytest.raises(CommandError, match="EVALSERVER_STATISTICS_MODE is 'thread'; this worker serves the mode"):
        call_command("statistics_worker")


def _nice(pid: int) -> int:
    # /proc/<pid>/stat: the 19th field is the nice value (after the command name in parentheses).
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def test_gunicorn_without_a_broker_runs_both_workers_which_score_then_compute_and_stop_with_it(
        tmp_path: Path) -> None:
    """The embedded default as ``dev.py serve`` starts it: two uploads are scored by the scoring
    worker and their board's statistics computed by the statistics worker (at nice 19); SIGTERM to
    gunicorn's master stops both workers."""
    from devtools.workers import (
        ROOT,
        big_gold,
        big_run,
        call,
        free_port,
        process_alive,
        seed_site,
        start_gunicorn,
        upload,
        wait_until,
    )

    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("CELERY_", "EVALSERVER_", "DJANGO_", "CACHE_URL", "DATABASE_URL"))}
    env.update(EVALSERVER_VAR_DIR=str(tmp_path / "var"), DJANGO_SECURE="false", PYTHONPATH=str(ROOT),
               DJANGO_SETTINGS_MODULE="evalserver.settings", EVALSERVER_STATISTICS_DEBOUNCE_SECONDS="0.5")
    tokens = list(seed_site(env, {"slug": "swk", "dialogues": 40, "teams": 2})["tokens"].values())
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    web = start_gunicorn(env, port, tmp_path / "gunicorn.log", workers=1, threads=2)
    try:
        wait_until("gunicorn to answer", lambda: call(f"{base}/healthz").status == 200, 120, web)
        wait_until("both workers to be ready", lambda: "statistics worker ready" in web.log()
                   and "scoring worker ready" in web.log(), 60, web)
        pids = {name: int(re.search(rf"Started the {name} worker \(pid: (\d+)\)", web.log()).group(1))
                for name in ("scoring", "statistics")}
        assert _nice(pids["statistics"]) == 19
        gold = big_gold(40)
        runs = []
        for number, token in enumerate(tokens):
            reply = upload(base, "swk", token, big_run(gold, 0.3, seed=number + 1), f"run-{number}")
            assert reply.status == 202, reply.body[:500]
            runs.append((reply.json()["id"], token))
        wait_until("both runs scored", lambda: all(call(f"{base}/api/v1/runs/{run_id}/", token).json()["status"]
                                                   == "done" for run_id, token in runs), 120, web)

        def stored() -> bool:
            status = call(f"{base}/tasks/swk/statistics/status.json").json()
            return status["finished_at"] is not None and not status["waiting"]

        # The console says how long each run took to score.
        # The worker writes its console line just after it stores the run's status, which the API
        # may answer first: the line is waited for, not read at once.
        wait_until("both console lines", lambda: len(re.findall(r"tasks\.worker: run \d+: done in \d+\.\d\d s",
                                                                web.log())) == 2, 30, web)
        wait_until("the statistics worker to compute the board", stored, 120, web)
        page = call(f"{base}/tasks/swk/statistics/", accept="text/html").body.decode()
        assert "run-0" in page and "run-1" in page
        os.kill(web.pid, signal.SIGTERM)  # the master alone, as a service manager would
        web.process.wait(timeout=40)
        wait_until("both workers to stop", lambda: not any(process_alive(pid) for pid in pids.values()), 20, web)
        assert "statistics worker stopped" in web.log()
    finally:
        web.stop()
