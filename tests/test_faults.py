"""Faults injected into real processes: no accepted run is ever lost or scored twice.

- a Celery worker killed with SIGKILL in the middle of scoring, over RabbitMQ (which redelivers
  the job at once) and Redis (whose job only comes back after the visibility timeout, so the
  run is recovered by ``requeue_stuck`` once its attempt is stale);
- the broker unreachable while a participant uploads;
- a worker hung (SIGSTOP) holding a run past the time limit, which ``requeue_stuck`` hands to
  another worker, and whose late result is then refused;
- PostgreSQL restarted under load, on a private cluster started for the test.

Workers run with a 4 s hard time limit and 1 s of grace (``FAULT_LIMITS``), in this process's
settings too, so that a dead attempt is stale after 5 s instead of 3.5 minutes.
"""

from __future__ import annotations

import io
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.management import call_command
from django.utils import timezone

from devtools.workers import (
    BROKERS,
    FAULT_LIMITS,
    Process,
    big_gold,
    big_run,
    free_port,
    new_queue,
    postgres_bin,
    postgres_restart_drill,
    publishing_to,
    queue_length,
    remove_queue,
    run_state,
    scored_once,
    start_worker,
    upload,
    wait_for_status,
    wait_until,
    worker_env,
)
from tasks import jobs, organising, runfiles, submissions
from tasks.models import Run, Score
from tests.conftest import IN_CI, make_world, require_postgres, require_service, run_bytes

pytestmark = [pytest.mark.services, pytest.mark.slow]

BIG_DIALOGUES = 20_000
RECOVERY_TIMEOUT = 40.0


def unavailable(message: str) -> None:
    if IN_CI:
        pytest.fail(message + ", and CI=true forbids skipping")
    pytest.skip(message)


@pytest.fixture
def postgres(transactional_db: Any, settings: Any) -> None:
    """Committed data in the PostgreSQL test database, which worker processes can read; the
    scoring limits of ``FAULT_LIMITS`` in this process too (``requeue_stuck`` reads them)."""
    require_postgres()
    settings.CELERY_TASK_SOFT_TIME_LIMIT = int(FAULT_LIMITS["EVALSERVER_SCORING_SOFT_TIME_LIMIT"])
    settings.CELERY_TASK_TIME_LIMIT = int(FAULT_LIMITS["EVALSERVER_SCORING_TIME_LIMIT"])
    settings.EVALSERVER_STALE_GRACE_SECONDS = int(FAULT_LIMITS["EVALSERVER_STALE_GRACE_SECONDS"])


class Workers:
    """Workers of one test on one queue; all stopped, and the queue removed, at the end."""

    def __init__(self, broker_url: str, queue: str, upload_dir: Path, log_dir: Path) -> None:
        self.broker_url, self.queue, self.log_dir = broker_url, queue, log_dir
        self.env = worker_env(broker_url, upload_dir, **FAULT_LIMITS)
        self.started: list[Process] = []

    def start(self, node: str) -> Process:
        worker = start_worker(self.env, self.queue, node, self.log_dir / f"{node}.log")
        self.started.append(worker)
        worker.wait_for_log(" ready.")
        return worker

    def logs(self) -> str:
        return "\n".join(worker.tail() for worker in self.started)

    def close(self) -> None:
        for worker in self.started:
            worker.stop()
        remove_queue(self.broker_url, self.queue)


@pytest.fixture
def workers_for(settings: Any, tmp_path: Path) -> Any:
    made: list[Workers] = []

    def make(broker: str) -> Workers:
        name, port, url = BROKERS[broker]
        require_service(name, port)
        made.append(Workers(url, new_queue(), Path(settings.MEDIA_ROOT), tmp_path))
        return made[-1]

    yield make
    for workers in made:
        workers.close()


def big_task() -> tuple[Any, list, Any]:
    """A task whose gold has 20,000 dialogues (scoring one run takes a worker about 2 s), and a
    participant; the baselines are scored here, before any worker starts."""
    from django.contrib.auth import get_user_model

    from tasks.models import Team

    task = organising.create_task("fault-task", "stc3", "Faults")
    gold = big_gold(BIG_DIALOGUES)
    organising.load_gold_version(task, orjson.dumps(gold), "gold.json")
    user = get_user_model().objects.create_user("carol", password="carol-pass-1")
    Team.objects.create(name="Cassiopeia", slug="cassiopeia").members.add(user)
    return task, gold, user


def submit(task: Any, user: Any, content: bytes, name: str) -> int:
    return submissions.submit_run(task, user, submissions.Submission(content=content, filename=f"{name}.json",
                                                                     name=name)).pk


def requeue_stuck() -> str:
    out = io.StringIO()
    call_command("requeue_stuck", stdout=out)
    return out.getvalue().strip()


def caught_mid_scoring(task: Any, user: Any, gold: list, worker: Process, act: Any) -> int:
    """Upload a big run and call ``act`` the moment its status says "scoring" (polled every
    2 ms); return the run's id. The status must still say "scoring" afterwards, or the act came
    too late (the run was done already) and another run is tried."""
    for attempt in range(3):
        run_id = submit(task, user, big_run(gold, noise=0.2 + 0.1 * attempt, seed=attempt), f"big-{attempt}")
        wait_for_status(run_id, {Run.SCORING, Run.DONE, Run.FAILED}, 30, worker, interval=0.002)
        act()
        if run_state(run_id)[0] == Run.SCORING and not Score.objects.filter(run_id=run_id).exists():
            return run_id
    pytest.fail("three times the act came after the end of scoring")


# Worker killed ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("broker", ["rabbitmq", "redis"])
def test_a_worker_killed_mid_scoring_leaves_its_run_scored_exactly_once(
        broker: str, postgres: None, workers_for: Any) -> None:
    task, gold, user = big_task()
    workers = workers_for(broker)
    with publishing_to(workers.broker_url, workers.queue):
        first = workers.start("first")
        run_id = caught_mid_scoring(task, user, gold, first, first.kill)
        assert first.process.returncode == -9
        # The dead attempt still holds the run: not stale yet, so requeue_stuck leaves it alone.
        assert requeue_stuck() == "re-sent 0 run(s)"
        second = workers.start("second")
        if broker == "redis":
            # Redis keeps the unacknowledged job for the visibility timeout (an hour): the run is
            # recovered by requeue_stuck (celery beat's job) once the dead attempt is stale.
            started = Run.objects.get(pk=run_id).started_at
            wait_until("the dead attempt to become stale", lambda: started < jobs.stale_before(), 15, second)
            assert requeue_stuck() == f"re-sent 1 run(s): {run_id}"
        status = wait_for_status(run_id, {Run.DONE, Run.FAILED}, RECOVERY_TIMEOUT, second)

        assert status == Run.DONE, workers.logs()
        assert scored_once(run_id) == [], workers.logs()
        assert run_state(run_id)[1] == 2  # the killed attempt and the one that finished
        if broker == "rabbitmq":
            # RabbitMQ gave the job back at once; the new worker waited for the dead attempt to go stale.
            assert "Retry in" in second.log(), workers.logs()
        wait_until("the queue to empty", lambda: queue_length(workers.broker_url, workers.queue) == 0, 10)


# Broker down at upload time ----------------------------------------------------------------------------

@pytest.mark.parametrize("broker", ["rabbitmq", "redis"])
def test_an_upload_while_the_broker_is_down_is_accepted_kept_and_scored_once_it_is_back(
        broker: str, postgres: None, live_server: Any, workers_for: Any) -> None:
    world = make_world()
    workers = workers_for(broker)
    scheme = "amqp://guest:guest@127.0.0.1:{}//" if broker == "rabbitmq" else "redis://127.0.0.1:{}/13"
    dead = scheme.format(free_port())
    with publishing_to(dead, workers.queue):
        started = time.monotonic()
        reply = upload(live_server.url, world.task.slug, world.alice_token, run_bytes(world.gold, seed=21),
                       "while-broker-down")
        took = time.monotonic() - started

    # Accepted: the run is in the database, queued, and its file stored; the job was not sent.
    assert reply.status == 202, reply.body[:500]
    run_id = reply.json()["id"]
    assert run_state(run_id) == (Run.QUEUED, 0)
    assert runfiles.run_file_path(Run.objects.get(pk=run_id).file_sha256).exists()
    assert took < 15, f"the upload waited {took:.1f} s for the dead broker"
    with publishing_to(workers.broker_url, workers.queue):
        worker = workers.start("after")
        assert queue_length(workers.broker_url, workers.queue) == 0
        assert run_state(run_id) == (Run.QUEUED, 0)
        assert requeue_stuck() == "re-sent 0 run(s)"  # queued for less than two minutes: maybe still on its way
        # Two minutes later (celery beat runs requeue_stuck every minute) it is sent again.
        Run.objects.filter(pk=run_id).update(queued_at=timezone.now() - timedelta(minutes=3))
        assert requeue_stuck() == f"re-sent 1 run(s): {run_id}"
        assert wait_for_status(run_id, {Run.DONE, Run.FAILED}, RECOVERY_TIMEOUT, worker) == Run.DONE
    assert scored_once(run_id) == []
    assert run_state(run_id)[1] == 1


# A run stuck in scoring --------------------------------------------------------------------------------

def test_a_run_held_by_a_hung_worker_past_its_time_limit_is_requeued_and_its_late_result_refused(
        postgres: None, workers_for: Any) -> None:
    task, gold, user = big_task()
    workers = workers_for("redis")
    with publishing_to(workers.broker_url, workers.queue):
        hung = workers.start("hung")
        run_id = caught_mid_scoring(task, user, gold, hung, hung.pause)
        second = workers.start("second")
        assert requeue_stuck() == "re-sent 0 run(s)"
        started = Run.objects.get(pk=run_id).started_at
        wait_until("the hung attempt to pass its time limit", lambda: started < jobs.stale_before(), 15)
        assert run_state(run_id) == (Run.SCORING, 1)
        assert requeue_stuck() == f"re-sent 1 run(s): {run_id}"
        assert wait_for_status(run_id, {Run.DONE, Run.FAILED}, RECOVERY_TIMEOUT, second) == Run.DONE
        finished = Run.objects.get(pk=run_id).finished_at

        # The hung worker wakes up, finishes its computation and finds the run taken over.
        hung.resume()
        hung.wait_for_log("skipped: another attempt took the run over", timeout=30)

    assert scored_once(run_id) == [], workers.logs()
    assert run_state(run_id) == (Run.DONE, 2)
    assert Run.objects.get(pk=run_id).finished_at == finished  # the late attempt wrote nothing


# PostgreSQL restarted under load --------------------------------------------------------------------------

def test_the_site_rides_out_a_postgresql_restart_without_being_restarted(tmp_path: Path) -> None:
    name, port, broker_url = BROKERS["redis"]
    require_service(name, port)
    if postgres_bin() is None:
        unavailable("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")

    drill = postgres_restart_drill(tmp_path, broker_url, new_queue(), outage=3.0)

    # Before: everything answers. During the outage: clean refusals only (5xx pages, JSON errors
    # from the API, never a traceback or a dropped connection). After: everything answers again,
    # with the same gunicorn workers and the same Celery worker.
    assert set(status for _, status in drill.before) <= {200, 202}, drill.before
    assert any(status not in (200, 202) for _, status, _ in drill.during), drill.during
    assert drill.unclean == 0, (drill.refusals, drill.during)
    assert drill.after and drill.failed_after == 0, drill.after
    assert drill.processes_kept
    # Every upload accepted before, during or after the outage is scored; none lost.
    assert drill.accepted and drill.lost == 0, drill.final_statuses
