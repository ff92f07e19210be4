"""A real Celery worker process, over a real broker (Redis and RabbitMQ), against PostgreSQL.

The test process serves the site with pytest-django's ``live_server`` and publishes scoring jobs
to the broker instead of running them in-process; a ``celery worker`` subprocess reads the same
test database and upload folder and scores them. Every test starts its own worker on a queue
of its own, so other engineers' workers on the same broker can neither steal nor feed it jobs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

import numpy as np
import orjson
import pytest

from devtools.workers.brokers import database_url, reset_producers
from tests.conftest import World, require_postgres, require_service, run_bytes, stc3_server_summary

pytestmark = [pytest.mark.services, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
# Redis database 13 and unique queue names keep these tests away from anything else on the broker.
BROKERS = {
    "redis": ("Redis", 6379, "redis://127.0.0.1:6379/13"),
    "rabbitmq": ("RabbitMQ", 5672, "amqp://guest:guest@127.0.0.1:5672//"),
}
JOB_TIMEOUT = 60.0
WORKER_START_TIMEOUT = 30.0


# HTTP, as a participant's client would speak it ------------------------------------------------

def multipart(fields: dict[str, str], files: dict[str, tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = f"----evalserver-{uuid.uuid4().hex}"
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    for name, (filename, content) in files.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                     "Content-Type: application/json\r\n\r\n".encode() + content + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def http_json(url: str, token: str | None = None, data: bytes | None = None,
              content_type: str | None = None) -> tuple[int, Any]:
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Token {token}"
    if content_type:
        headers["Content-Type"] = content_type
    with urlopen(Request(url, data=data, headers=headers, method="POST" if data is not None else "GET"),
                 timeout=15) as response:
        return response.status, json.loads(response.read())


def upload_run(base_url: str, world: World, content: bytes, name: str) -> int:
    body, content_type = multipart({"name": name, "description": "gold mixed with noise"},
                                   {"file": (f"{name}.json", content)})
    status, data = http_json(f"{base_url}/api/v1/tasks/{world.task.slug}/runs/", world.alice_token, body,
                             content_type)
    assert status == 202, data
    assert data["status"] == "queued"
    return data["id"]


def run_status(base_url: str, world: World, run_id: int) -> dict[str, Any]:
    return http_json(f"{base_url}/api/v1/runs/{run_id}/", world.alice_token)[1]


def wait_until_finished(base_url: str, world: World, run_id: int, worker: Worker) -> dict[str, Any]:
    deadline = time.monotonic() + JOB_TIMEOUT
    while True:
        data = run_status(base_url, world, run_id)
        if data["status"] in ("done", "failed"):
            return data
        if time.monotonic() > deadline:
            pytest.fail(f"run {run_id} still {data['status']!r} after {JOB_TIMEOUT:.0f} s\n{worker.log_tail()}")
        if worker.process is not None and worker.process.poll() is not None:
            pytest.fail(f"the worker exited with {worker.process.returncode}\n{worker.log_tail()}")
        if "ERROR/" in worker.log():  # e.g. an unregistered task: the job is discarded, waiting is pointless
            pytest.fail(f"the worker logged an error while run {run_id} was {data['status']!r}\n{worker.log_tail()}")
        time.sleep(0.1)


# The broker and the worker ----------------------------------------------------------------------

@dataclass
class Broker:
    url: str
    queue: str

    def message_count(self) -> int:
        from kombu import Connection
        from kombu.exceptions import ChannelError

        with Connection(self.url, connect_timeout=5) as connection:
            try:
                return connection.default_channel.queue_declare(queue=self.queue, passive=True).message_count
            except ChannelError:  # no such queue (Redis deletes an emptied one): no messages
                return 0

    def remove_queue(self) -> None:
        from kombu import Connection
        from kombu.exceptions import ChannelError

        with Connection(self.url, connect_timeout=5) as connection:
            for name in (self.queue, f"{self.queue}-heavy"):  # and the heavy jobs' queue (evalserver.celery)
                channel = connection.channel()
                try:
                    channel.queue_purge(name)
                    channel.queue_delete(name)
                    channel.exchange_delete(name)  # Celery names the queue's exchange after it
                except ChannelError:  # never declared (RabbitMQ closes the channel for that)
                    pass
                finally:
                    channel.close()
        if self.url.startswith("redis://"):
            import redis

            client = redis.Redis.from_url(self.url)
            # kombu keeps bindings under keys of its own; database 13 is ours, so leave nothing.
            leftovers = list(client.scan_iter(match=f"*{self.queue}*"))
            if leftovers:
                client.delete(*leftovers)
            client.close()


@pytest.fixture(params=sorted(BROKERS))
def broker(request: pytest.FixtureRequest, settings: Any, live_server: Any) -> Iterator[Broker]:
    """Uploads publish their scoring job to a real broker instead of running it in-process.

    Depends on ``live_server`` (and through it on the committed test database) so that the
    world's baselines are already scored in-process when publishing starts.
    """
    name, port, url = BROKERS[request.param]
    require_postgres()
    require_service(name, port)
    from evalserver.celery import app

    broker = Broker(url=url, queue=f"evalserver-it-{uuid.uuid4().hex[:12]}")
    previous = {key: app.conf[key] for key in ("broker_url", "task_always_eager", "task_default_queue")}
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.update(broker_url=url, task_always_eager=False, task_default_queue=broker.queue)
    reset_producers(app)
    try:
        yield broker
    finally:
        app.conf.update(previous)
        reset_producers(app)
        broker.remove_queue()


@dataclass
class Worker:
    broker: Broker
    log_path: Path
    upload_dir: Path
    process: subprocess.Popen | None = None
    _log: Any = field(default=None, repr=False)

    def start(self) -> None:
        env = dict(os.environ, DATABASE_URL=database_url(), CELERY_BROKER_URL=self.broker.url,
                   EVALSERVER_UPLOAD_DIR=str(self.upload_dir), EVALSERVER_STATISTICS_MODE="off",
                   DJANGO_SETTINGS_MODULE="evalserver.settings")
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "evalserver.celery", "worker", "--pool=solo", "--concurrency=1",
             "-l", "info", "-Q", f"{self.broker.queue},{self.broker.queue}-heavy", "-n", f"{self.broker.queue}@%h",
             # Nothing to learn from other workers; these only slow the start down. (Not
             # --without-heartbeat: over RabbitMQ it makes the warm shutdown take 5-10 s.)
             "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + WORKER_START_TIMEOUT
        while " ready." not in self.log():
            if self.process.poll() is not None:
                pytest.fail(f"the worker exited with {self.process.returncode}\n{self.log_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"the worker was not ready after {WORKER_START_TIMEOUT:.0f} s\n{self.log_tail()}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # warm shutdown: finishes the job in hand
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        if self._log is not None:
            self._log.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 40) -> str:
        return "worker log:\n" + "\n".join(self.log().splitlines()[-lines:])


@pytest.fixture
def worker(broker: Broker, settings: Any, tmp_path: Path) -> Iterator[Worker]:
    """A worker for the broker's queue, not started yet; always stopped at the end."""
    worker = Worker(broker=broker, log_path=tmp_path / "worker.log", upload_dir=Path(settings.MEDIA_ROOT))
    try:
        yield worker
    finally:
        worker.stop()


# What the numbers must be ---------------------------------------------------------------------

def offline_scores(tmp_path: Path, world: World, content: bytes, *extra: str) -> dict[str, Any]:
    """What ``manage.py score RUN GOLD --format json`` prints for the same two files."""
    run_path, gold_path = tmp_path / "run.json", tmp_path / "gold.json"
    run_path.write_bytes(content)
    gold_path.write_bytes(orjson.dumps(world.gold))
    completed = subprocess.run([sys.executable, "manage.py", "score", str(run_path), str(gold_path),
                                "--format", "json", *extra], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def assert_same_numbers(served: Any, offline: Any, where: str = "scores") -> None:
    if isinstance(offline, dict):
        assert isinstance(served, dict) and set(served) == set(offline), f"{where}: {served!r} != {offline!r}"
        for key, value in offline.items():
            assert_same_numbers(served[key], value, f"{where}.{key}")
    elif isinstance(offline, float):
        assert abs(served - offline) <= 1e-12, f"{where}: served {served!r}, offline {offline!r}"
    else:
        assert served == offline, f"{where}: served {served!r}, offline {offline!r}"


def assert_stored_scores_match(run_id: int, world: World, offline: dict[str, Any],
                               per_dialogue: dict[str, Any]) -> None:
    """Exactly one Score row; one vector per measure, each the offline per-dialogue scores in the
    gold's dialogue order, whose mean is the leaderboard's number."""
    from tasks.models import Score

    scores = list(Score.objects.filter(run_id=run_id))
    assert len(scores) == 1
    assert scores[0].scope == Score.FULL
    assert scores[0].gold_version_id == world.gold_version.pk
    ids = world.gold_version.load().dialogue_ids
    assert list(ids) == [dialogue["id"] for dialogue in world.gold]
    expected: dict[str, tuple[float, list[float]]] = {}
    for dim, measures in offline["quality"].items():
        for name, mean in measures.items():
            values = per_dialogue["quality"][dim][name]
            expected[f"quality.{dim}.{name}"] = (mean, [values[i] for i in ids])
    for name, mean in offline["nugget"].items():
        expected[f"nugget.{name}"] = (mean, [per_dialogue["nugget"][name][i] for i in ids])
    vectors = {vector.key: vector for vector in scores[0].vectors.all()}
    assert set(vectors) == set(expected)
    for key, (mean, values) in expected.items():
        stored = vectors[key].array()
        assert stored.shape == (len(world.gold),)
        np.testing.assert_allclose(stored, values, rtol=0, atol=1e-12, err_msg=key)
        assert abs(float(stored.mean()) - mean) <= 1e-12, key
        assert abs(vectors[key].mean - mean) <= 1e-12, key


def leaderboard_entry(base_url: str, world: World, run_id: int) -> dict[str, Any]:
    status, board = http_json(f"{base_url}/api/v1/tasks/{world.task.slug}/leaderboard/")
    assert status == 200
    entries = [entry for entry in board["runs"] if entry["id"] == run_id]
    assert len(entries) == 1, board["runs"]
    return entries[0]


# Tests ----------------------------------------------------------------------------------------------

def test_it_scores_an_uploaded_run_in_the_worker_as_the_offline_scorer_does(
        world: World, live_server: Any, worker: Worker, tmp_path: Path) -> None:
    from tasks.models import Run

    worker.start()
    worker.wait_ready()
    content = run_bytes(world.gold, noise=0.25, seed=11)
    run_id = upload_run(live_server.url, world, content, "aurora-celery")

    data = wait_until_finished(live_server.url, world, run_id, worker)

    assert data["status"] == "done", worker.log_tail()
    assert data["errors"] == []
    # The job went through the broker to the worker process, not through an in-process call.
    assert "Task tasks.jobs.score_run_task[" in worker.log() and "succeeded" in worker.log(), worker.log_tail()
    assert Run.objects.get(pk=run_id).attempts == 1
    offline = offline_scores(tmp_path, world, content)
    entry = leaderboard_entry(live_server.url, world, run_id)
    assert (entry["team"], entry["name"]) == ("Aurora", "aurora-celery")
    assert entry["scores"]["n_items"] == len(world.gold) == 30
    assert_same_numbers(entry["scores"], stc3_server_summary(offline))
    assert_same_numbers(data["scores"], stc3_server_summary(offline))
    per_dialogue = offline_scores(tmp_path, world, content, "--per-dialogue")["per_dialogue"]
    assert_stored_scores_match(run_id, world, offline, per_dialogue)


def test_it_keeps_a_run_uploaded_before_the_worker_starts_and_scores_it_once(
        world: World, live_server: Any, broker: Broker, worker: Worker, tmp_path: Path) -> None:
    from tasks.models import Run, Score

    content = run_bytes(world.gold, noise=0.4, seed=12)
    run_id = upload_run(live_server.url, world, content, "aurora-early")

    # No worker yet: the job waits on the broker and the run stays queued.
    deadline = time.monotonic() + 5
    while broker.message_count() != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert broker.message_count() == 1
    time.sleep(0.5)
    assert run_status(live_server.url, world, run_id)["status"] == "queued"
    assert Run.objects.get(pk=run_id).attempts == 0

    worker.start()
    data = wait_until_finished(live_server.url, world, run_id, worker)

    assert data["status"] == "done", worker.log_tail()
    assert Run.objects.get(pk=run_id).attempts == 1
    assert Score.objects.filter(run_id=run_id).count() == 1
    assert broker.message_count() == 0
    offline = offline_scores(tmp_path, world, content)
    assert_same_numbers(leaderboard_entry(live_server.url, world, run_id)["scores"], stc3_server_summary(offline))


def test_a_pool_job_runs_in_the_worker_and_a_bad_pool_fails_there_with_its_lines(
        broker: Broker, worker: Worker, settings: Any) -> None:
    """The background job behind the vBLEU pages (kinds.response.extension_jobs) goes through the broker too: the
    worker reads and stores a good pool, and fails a bad one naming its lines, storing nothing."""
    import hashlib

    from django.core.files.uploadedfile import SimpleUploadedFile

    from kinds.response.extension_jobs import pool_file_path, submit_pool_job
    from kinds.response.models import PoolJob, ReferencePool

    settings.EVALSERVER_POOL_JOB_MODE = "celery"
    good = b"".join(orjson.dumps({"utterance": f"how is item {n} ?", "response": f"item {n} is fine ."}) + b"\n"
                    for n in range(500))
    bad = good.replace(b'"response"', b'"reply"', 1)
    worker.start()
    worker.wait_ready()
    jobs = [submit_pool_job(user=None, upload=SimpleUploadedFile(name, content), options={"name": name})
            for name, content in (("good.jsonl", good), ("bad.jsonl", bad))]
    deadline = time.monotonic() + JOB_TIMEOUT
    while PoolJob.objects.filter(status__in=[PoolJob.QUEUED, PoolJob.RUNNING]).exists():
        assert time.monotonic() < deadline, worker.log_tail()
        time.sleep(0.2)
    done, failed = (PoolJob.objects.get(pk=job.pk) for job in jobs)
    assert "Task kinds.response.extension_jobs.run_pool_job_task[" in worker.log(), worker.log_tail()
    assert done.status == PoolJob.DONE, (done.errors, worker.log_tail())
    pool = ReferencePool.objects.get()
    assert pool.sha256 == hashlib.sha256(good).hexdigest() and pool.n_pairs == 500 and done.pool == pool
    assert pool_file_path(pool.sha256).read_bytes() == good
    assert failed.status == PoolJob.FAILED and failed.errors == ["bad.jsonl: line 1: response is missing"]
