"""Scoring never waits behind statistics in a documented production shape (issue 43, item 3).

The Celery workers are started with the commands the operators' page (``docs/operators/
deployment.md``, "Without Docker") and ``docker-compose.yml`` give, read from those files, so a
document that goes back to one worker for both queues fails here. Only what keeps the test apart
from other processes on the broker is changed: the queue names (``celery`` becomes a queue of the
test's own, through ``EVALSERVER_QUEUE`` and the same substitution in ``-Q``), a node name, and
``-l info`` where no level is given (the test waits for the worker's "ready" line).

The statistics jobs are planted slow: the workers' settings module adds a ``task_prerun`` handler
that holds every ``compute_statistics_task`` for ``HOLD_SECONDS`` before it runs, so a job holds a
worker slot as the audit's 62-106 s statistics did. The first of them comes through the real path
(a scored run asks for its board's statistics, ``leaderboard.jobs``); more are published as the
server publishes them, one per core, so that even a worker for both queues with a slot per core
has every slot taken. An upload must then be scored within ``SCORED_WITHIN`` seconds while a
statistics job still holds its slot. With one worker for both queues (the shape of the page before
this test) it waited the whole hold.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.workers import compose_workers, deployment_page_workers, documented_worker_argv, remove_queue
from devtools.workers.brokers import database_url, reset_producers
from tests.conftest import World, require_postgres, require_service, run_bytes
from tests.test_integration_celery import run_status, upload_run

pytestmark = [pytest.mark.services, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
BROKER_URL = "redis://127.0.0.1:6379/13"  # the compose file's broker; database 13 is the tests'
HOLD_SECONDS = 45.0
SCORED_WITHIN = 10.0
STATISTICS_TASK = "leaderboard.jobs.compute_statistics_task"

PLANTED_SETTINGS = f'''
import os
import time
from pathlib import Path

from celery.signals import task_postrun, task_prerun

from evalserver.settings import *  # noqa: F403

_MARKS = Path(os.environ["PLANTED_MARKS"])


@task_prerun.connect
def _hold(sender=None, task_id=None, **_):
    if sender.name == "{STATISTICS_TASK}":
        (_MARKS / f"started-{{task_id}}").touch()
        time.sleep({HOLD_SECONDS})


@task_postrun.connect
def _ended(sender=None, task_id=None, **_):
    if sender.name == "{STATISTICS_TASK}":
        (_MARKS / f"ended-{{task_id}}").touch()
'''


# The documented commands -------------------------------------------------------------------------

def test_the_documents_start_separate_workers_for_scoring_and_statistics() -> None:
    # What the live test below starts, read as it reads it (no services needed).
    page = deployment_page_workers((ROOT / "docs/operators/deployment.md").read_text())
    compose = compose_workers((ROOT / "docker-compose.yml").read_text())
    assert page == ["celery -A evalserver.celery worker -Q celery --concurrency=2",
                    "celery -A evalserver.celery worker -Q celery-heavy --concurrency=1"]
    assert compose == ["celery -A evalserver.celery worker -Q celery --loglevel=info --concurrency=2",
                       "celery -A evalserver.celery worker -Q celery-heavy --loglevel=info --concurrency=1"]


# The live shape ------------------------------------------------------------------------------------

@pytest.fixture
def queue(settings: Any, live_server: Any) -> Iterator[str]:
    """Uploads publish to a queue of the test's own on Redis (after the world's baselines were
    scored in-process: ``live_server`` commits the test database first)."""
    require_postgres()
    require_service("Redis", 6379)
    from evalserver.celery import app

    name = f"evalserver-nqw-{uuid.uuid4().hex[:10]}"
    previous = {key: app.conf[key] for key in ("broker_url", "task_always_eager", "task_default_queue")}
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.update(broker_url=BROKER_URL, task_always_eager=False, task_default_queue=name)
    reset_producers(app)
    try:
        yield name
    finally:
        app.conf.update(previous)
        reset_producers(app)
        remove_queue(BROKER_URL, name)


def marks(folder: Path, kind: str) -> set[str]:
    return {path.name.split("-", 1)[1] for path in folder.glob(f"{kind}-*")}


@pytest.mark.parametrize("source", ["docs/operators/deployment.md", "docker-compose.yml"])
def test_an_upload_is_scored_in_seconds_while_statistics_hold_the_documented_workers(
        source: str, world: World, live_server: Any, queue: str, settings: Any, tmp_path: Path) -> None:
    from leaderboard.jobs import compute_statistics_task

    text = (ROOT / source).read_text()
    commands = deployment_page_workers(text) if source.endswith(".md") else compose_workers(text)
    assert commands, f"no Celery worker command in {source}"
    (tmp_path / "planted_settings.py").write_text(PLANTED_SETTINGS)
    planted = tmp_path / "marks"
    planted.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("CELERY_", "EVALSERVER_"))}
    env.update(DATABASE_URL=database_url(), CELERY_BROKER_URL=BROKER_URL, EVALSERVER_QUEUE=queue,
               EVALSERVER_UPLOAD_DIR=str(settings.MEDIA_ROOT), EVALSERVER_VAR_DIR=str(tmp_path / "var"),
               EVALSERVER_STATISTICS_MODE="celery", EVALSERVER_STATISTICS_DEBOUNCE_SECONDS="0",
               DJANGO_SETTINGS_MODULE="planted_settings", PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}",
               PLANTED_MARKS=str(planted))
    workers: list[tuple[subprocess.Popen, Path]] = []
    try:
        for number, command in enumerate(commands):
            log_path = tmp_path / f"worker-{number}.log"
            with log_path.open("wb") as log:
                workers.append((subprocess.Popen(documented_worker_argv(command, queue, f"{queue}-{number}"), cwd=ROOT,
                                                 env=env, stdout=log, stderr=subprocess.STDOUT,
                                                 start_new_session=True), log_path))

        def logs() -> str:
            return "\n".join(f"--- {' '.join(process.args[3:])}\n{path.read_text(errors='replace')[-3000:]}"
                             for process, path in workers)

        def wait(what: str, condition: Any, timeout: float) -> None:
            deadline = time.monotonic() + timeout
            while not condition():
                if time.monotonic() > deadline or any(process.poll() is not None for process, _ in workers):
                    pytest.fail(f"{what}: not after {timeout:.0f} s (or a worker exited)\n{logs()}")
                time.sleep(0.1)

        wait("the workers to be ready", lambda: all(" ready." in path.read_text(errors="replace")
                                                    for _, path in workers), 90)
        # A scored run asks for its board's statistics through the real path; the worker that
        # takes them holds them. More, one per core, fill every slot a worker for both queues has.
        first = upload_run(live_server.url, world, run_bytes(world.gold, noise=0.2, seed=1), "aurora-first")
        wait("the first run to be scored", lambda: run_status(live_server.url, world, first)["status"] == "done", 60)
        wait("its statistics to be taken", lambda: marks(planted, "started"), 30)
        for _ in range(os.cpu_count() or 1):
            compute_statistics_task.apply_async((world.task.pk,))
        time.sleep(1.0)  # a worker with free slots takes the extra jobs now, before the upload

        uploaded = time.monotonic()
        probe = upload_run(live_server.url, world, run_bytes(world.gold, noise=0.3, seed=2), "aurora-probe")
        while run_status(live_server.url, world, probe)["status"] not in ("done", "failed"):
            if time.monotonic() - uploaded > SCORED_WITHIN:
                pytest.fail(f"{source}: the run uploaded while statistics were computing was not scored within "
                            f"{SCORED_WITHIN:.0f} s (statistics jobs holding a slot: "
                            f"{len(marks(planted, 'started') - marks(planted, 'ended'))})\n{logs()}")
            time.sleep(0.05)
        seconds = time.monotonic() - uploaded

        holding = marks(planted, "started") - marks(planted, "ended")
        assert holding, f"no statistics job was still computing when the run was scored\n{logs()}"
        assert run_status(live_server.url, world, probe)["status"] == "done"
        assert seconds < SCORED_WITHIN
    finally:
        for process, _ in workers:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # a held statistics job would delay a warm stop
            except ProcessLookupError:
                pass
            process.wait(timeout=10)
