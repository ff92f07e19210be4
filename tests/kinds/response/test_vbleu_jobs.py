# ruff: noqa: F811
"""vBLEU from the web (issue 15): the organiser's form queues a background job, its page follows
the progress stage by stage, and the result is the same gold version ``manage.py build_vbleu``
makes from the same pool and settings (byte for byte). Bad input is named field by field before
anything starts, or line by line on the job's page, and nothing is stored; a job whose process
died is taken over, and one that keeps dying fails with a reason instead of running for ever.

The pool and task are test_vbleu_server's (a generated pool whose right answers are known).
"""

from __future__ import annotations

import hashlib
import re
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from tests.conftest import committing

# The fixtures are test_vbleu_server's, imported by name (pytest finds them here; ruff sees redefinitions).
from tests.kinds.response.test_vbleu_server import build, planted, task_with_runs  # noqa: F401

FORM = {"k": "15", "rating": "automatic", "seed": "3", "train_pairs": "2000", "held_out_pairs": "500",
        "parrot_weight": "", "label": "", "name": "", "pool": ""}


def organiser_client(context: dict[str, Any]) -> Client:
    client = Client()
    client.force_login(context["organiser"])
    return client


def post_form(client: Client, upload: bytes | None = None, **fields: Any) -> Any:
    data = {**FORM, "from_version": "1", **fields}
    if upload is not None:
        data["file"] = SimpleUploadedFile("pool.jsonl", upload)
    with committing():
        return client.post("/organiser/vbleu-task/vbleu/", data)


def uploads_folder(settings: Any) -> list[Path]:
    folder = Path(settings.MEDIA_ROOT) / "pool-uploads"
    return [path for path in folder.rglob("*") if path.is_file()] if folder.exists() else []


@pytest.mark.django_db
def test_the_web_form_builds_the_same_version_as_the_command_and_the_page_shows_every_stage(
        task_with_runs, planted, settings):
    from kinds.response.models import PoolJob, ReferencePool
    from tasks.models import GoldVersion

    client = organiser_client(task_with_runs)
    form = client.get("/organiser/vbleu-task/vbleu/")
    assert form.status_code == 200 and 'name="file"' in form.content.decode()
    answer = post_form(client, planted["bytes"])
    job = PoolJob.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/pool-jobs/{job.pk}/"
    assert job.status == PoolJob.DONE, job.errors
    # Every stage ran, in order, and was timed.
    assert [stage for stage, _ in job.stages_done] == ["pool", "index", "retrieve", "rater", "rate", "save"]
    assert all(seconds >= 0 for _, seconds in job.stages_done)
    web = GoldVersion.objects.get(task=task_with_runs["task"], number=2)
    pool = ReferencePool.objects.get()
    assert job.version == web and job.pool == pool
    assert pool.sha256 == hashlib.sha256(planted["bytes"]).hexdigest()
    # The two runs were re-scored on the new version (scored at once: the eager default).
    assert client.get(f"/pool-jobs/{job.pk}/status.json").json()["runs"] == {
        "queued": 0, "scoring": 0, "done": 2, "failed": 0}
    assert "Runs on version 2: 0 queued, 0 scoring, 2 done, 0 failed." in \
        client.get(f"/pool-jobs/{job.pk}/").content.decode()
    # The uploaded copy waiting for the job is gone; the pool is kept under pools/.
    assert uploads_folder(settings) == []
    # The command, same pool and settings, from the same version: the same extended gold, byte for byte.
    build(task_with_runs, "--from-version", "1")
    command = GoldVersion.objects.get(task=task_with_runs["task"], number=3)
    assert command.sha256 == web.sha256 and command.compiled == web.compiled
    assert web.provenance["vbleu"] == command.provenance["vbleu"]
    rater = web.provenance["vbleu"]["rater"]
    assert job.result == {"pool": pool.sha256, "n_pairs": pool.n_pairs, "stored_now": True, "version": 2,
                          "extends": 1, "references_added": web.provenance["vbleu"]["references_added"], "k": 15,
                          "rater": "automatic", "held_out_accuracy": rater["held_out_accuracy"], "seed": 3,
                          "phases": []}
    page = client.get(f"/pool-jobs/{job.pk}/").content.decode()
    for title in ("reading the pool", "indexing utterances", "retrieving references", "training the rater",
                  "rating references", "saving"):
        assert title in page
    assert page.count('class="stage done"') == 6
    assert (f"Gold version <strong>2</strong> extends version 1: {job.result['references_added']} references "
            f"added from pool <code>{pool.sha256[:12]}</code>") in page
    assert f"held-out accuracy {rater['held_out_accuracy']:.4f}, seed 3" in page
    status = client.get(f"/pool-jobs/{job.pk}/status.json").json()
    assert status["status"] == "done" and status["result"] == job.result
    assert [(stage["stage"], stage["state"]) for stage in status["stages"]] == [
        ("pool", "done"), ("index", "done"), ("retrieve", "done"), ("rater", "done"), ("rate", "done"),
        ("save", "done")]
    # The task's vBLEU page lists the job.
    assert f'href="/pool-jobs/{job.pk}/"' in client.get("/organiser/vbleu-task/vbleu/").content.decode()


@pytest.mark.django_db
def test_a_stored_pool_is_reused_and_phases_move_to_the_new_version(task_with_runs, planted):
    from kinds.response.models import PoolJob, ReferencePool
    from tasks.models import GoldVersion, Phase

    task = task_with_runs["task"]
    now = timezone.now()
    phase = Phase.objects.create(task=task, name="test", kind=Phase.TEST, gold_version=task.gold_versions.get(),
                                 starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=1))
    client = organiser_client(task_with_runs)
    assert post_form(client, planted["bytes"], k="5").status_code == 302
    pool = ReferencePool.objects.get()
    answer = post_form(client, pool=pool.sha256, k="4", rating="automatic", phases=[str(phase.pk)],
                       label="extended test gold")
    assert answer.status_code == 302
    job = PoolJob.objects.order_by("-pk").first()
    assert job.status == PoolJob.DONE and job.pool == pool and job.upload_sha256 == ""
    version = GoldVersion.objects.get(task=task, number=3)
    assert version.label == "extended test gold" and version.provenance["vbleu"]["retrieval"]["settings"]["k"] == 4
    phase.refresh_from_db()
    assert phase.gold_version == version and job.result["phases"] == ["test"]
    assert ReferencePool.objects.count() == 1


@pytest.mark.django_db
def test_a_bad_pool_fails_the_job_with_every_bad_line_and_stores_nothing(task_with_runs, planted, settings):
    from kinds.response.models import PoolJob, ReferencePool
    from tasks.models import GoldVersion

    bad = planted["bytes"].replace(b'"response"', b'"reply"', 2) + b"{not json\n"
    client = organiser_client(task_with_runs)
    answer = post_form(client, bad)
    assert answer.status_code == 302
    job = PoolJob.objects.get()
    n = bad.count(b"\n")
    assert job.status == PoolJob.FAILED
    assert job.errors[:2] == ["pool.jsonl: line 1: response is missing", "pool.jsonl: line 2: response is missing"]
    assert len(job.errors) == 3 and job.errors[2].startswith(f"pool.jsonl: line {n}: ")
    assert ReferencePool.objects.count() == 0 and GoldVersion.objects.filter(task=task_with_runs["task"]).count() == 1
    assert not (Path(settings.MEDIA_ROOT) / "pools").exists() and uploads_folder(settings) == []
    page = client.get(f"/pool-jobs/{job.pk}/").content.decode()
    assert "Nothing was stored; 3 problems:" in page
    # The stage that failed is marked so; the ones after it were not reached.
    assert '<li class="stage failed" data-stage="pool">' in page
    assert page.count('class="stage not-reached"') == 5 and 'class="stage done"' not in page
    assert "<li>pool.jsonl: line 1: response is missing</li>" in page and "Start again" in page
    assert client.get(f"/pool-jobs/{job.pk}/status.json").json()["errors"] == job.errors


@pytest.mark.django_db
@pytest.mark.parametrize(("fields", "upload", "message"), [
    ({}, False, "upload a pool (JSONL) or choose one stored before"),
    ({"k": "0"}, True, "Ensure this value is greater than or equal to 1."),
    ({"k": "101"}, True, "Ensure this value is less than or equal to 100."),
    ({"k": "many"}, True, "Enter a whole number."),
    ({"seed": "-1"}, True, "Ensure this value is greater than or equal to 0."),
    ({"parrot_weight": "2"}, True, "a number in [-1, 1], or &#x27;rated&#x27;"),
    ({"parrot_weight": "nan"}, True, "a number in [-1, 1], or &#x27;rated&#x27;"),
    ({"train_pairs": "10"}, True, "Ensure this value is greater than or equal to 50."),
    ({"rating": "human"}, True, "human weights need their ratings file"),
    ({"rating": "human", "parrot_weight": "0.5",
      "ratings": SimpleUploadedFile("r.json", b"[]")}, True, "the parrot weight belongs to the automatic rater"),
    ({"ratings": SimpleUploadedFile("r.json", b"[]")}, True, "a ratings file is for human weights"),
    ({"from_version": "7"}, True, "Select a valid choice. 7 is not one of the available choices."),
    ({"pool": "0" * 64}, False, "Select a valid choice."),
    ({"phases": ["999999"]}, True, "Select a valid choice. 999999 is not one of the available choices."),
    ({"label": "x" * 101}, True, "Ensure this value has at most 100 characters (it has 101)."),
    ({"label": "bad\x00label"}, True, "Null characters are not allowed."),
])
def test_bad_fields_are_named_and_nothing_starts(task_with_runs, planted, settings, fields, upload, message):
    from kinds.response.models import PoolJob

    client = organiser_client(task_with_runs)
    answer = post_form(client, planted["bytes"] if upload else None, **fields)
    assert answer.status_code == 400
    assert message in answer.content.decode()
    assert "Nothing was started" in answer.content.decode()
    assert PoolJob.objects.count() == 0 and uploads_folder(settings) == []


@pytest.mark.django_db
def test_a_pool_over_the_size_limit_is_refused_and_nothing_is_kept(task_with_runs, planted, settings):
    from kinds.response.models import PoolJob

    size = len(planted["bytes"])
    client = organiser_client(task_with_runs)
    # A body far over the limit: refused before it is read (the middleware).
    settings.EVALSERVER_POOL_MAX_BYTES = 1024
    answer = post_form(client, planted["bytes"])
    assert answer.status_code == 413
    assert "a pool and its ratings may have at most 1,024 bytes each (EVALSERVER_POOL_MAX_BYTES)" in \
        answer.content.decode()
    # Within what the form may carry (a pool and ratings) but a pool over the limit: the upload
    # is read and refused while it is kept, and nothing stays.
    settings.EVALSERVER_POOL_MAX_BYTES = size - 1
    answer = post_form(client, planted["bytes"])
    assert answer.status_code == 413
    assert f"file: more than {size - 1:,} bytes, the largest pool accepted (EVALSERVER_POOL_MAX_BYTES)" in \
        answer.content.decode()
    assert PoolJob.objects.count() == 0 and uploads_folder(settings) == []
    # Nothing at all posted: every required field named.
    with committing():
        answer = client.post("/organiser/vbleu-task/vbleu/", {})
    assert answer.status_code == 400 and "This field is required." in answer.content.decode()


@pytest.mark.django_db
def test_an_organiser_chooses_only_their_own_pools_and_this_tasks(task_with_runs, planted):
    from django.contrib.auth import get_user_model

    from kinds.response.extension_jobs import store_pool, validate_pool
    from kinds.response.models import ReferencePool

    other = get_user_model().objects.create_user("oscar", password="oscar-pass-1")
    theirs, _ = store_pool(planted["bytes"], validate_pool(planted["bytes"]), "someone else's", other)
    client = organiser_client(task_with_runs)
    page = client.get("/organiser/vbleu-task/vbleu/").content.decode()
    assert theirs.sha256 not in page
    answer = post_form(client, pool=theirs.sha256)
    assert answer.status_code == 400 and "Select a valid choice." in answer.content.decode()
    staff = Client()
    staff.force_login(get_user_model().objects.create_user("root", password="root-pass-1", is_staff=True,
                                                           is_superuser=True))
    assert theirs.sha256 in staff.get("/organiser/vbleu-task/vbleu/").content.decode()
    # Staff status alone is no organiser right: such an account gets what a participant gets.
    bare = Client()
    bare.force_login(get_user_model().objects.create_user("vera", password="vera-pass-1", is_staff=True))
    assert bare.get("/organiser/vbleu-task/vbleu/").status_code == 404
    assert ReferencePool.objects.count() == 1
    # Once this task has used it (a job of the task's, say staff's), its organisers may choose it.
    from kinds.response.models import PoolJob

    PoolJob.objects.create(task=task_with_runs["task"], pool=theirs, status=PoolJob.DONE)
    # (the job list shows 12 characters of a checksum; the whole one is the pool choice's value)
    assert f'<option value="{theirs.sha256}">' in client.get("/organiser/vbleu-task/vbleu/").content.decode()


@pytest.mark.django_db
def test_a_job_whose_process_died_is_taken_over_and_one_that_keeps_dying_fails(task_with_runs, planted):
    from kinds.response.extension_jobs import LEASE_SECONDS, MAX_ATTEMPTS, stage_upload, sweep_pool_jobs
    from kinds.response.models import PoolJob

    sha = stage_upload(SimpleUploadedFile("pool.jsonl", planted["bytes"]))
    long_ago = timezone.now() - timedelta(seconds=LEASE_SECONDS + 5)
    # Running under a process that stopped beating: the page starts it again, and it finishes.
    dead = PoolJob.objects.create(upload_sha256=sha, upload_name="pool.jsonl", status=PoolJob.RUNNING,
                                  attempts=1, heartbeat_at=long_ago, created_at=long_ago, stage="index")
    staff = Client()
    from django.contrib.auth import get_user_model

    staff.force_login(get_user_model().objects.create_user("root", password="root-pass-1", is_staff=True,
                                                           is_superuser=True))
    assert staff.get(f"/pool-jobs/{dead.pk}/status.json").json()["status"] == "done"
    dead.refresh_from_db()
    assert dead.attempts == 2 and dead.pool is not None
    # Its upload went with it (stored under pools/ now): the next jobs get theirs.
    sha = stage_upload(SimpleUploadedFile("pool.jsonl", planted["bytes"]))
    # A running job whose heartbeat is fresh is left alone.
    alive = PoolJob.objects.create(upload_sha256=sha, status=PoolJob.RUNNING, attempts=1,
                                   heartbeat_at=timezone.now(), created_at=long_ago)
    assert sweep_pool_jobs() == [] and staff.get(f"/pool-jobs/{alive.pk}/status.json").json()["status"] == "running"
    # Taken over MAX_ATTEMPTS times already: it fails with the reason, and its upload goes.
    doomed = PoolJob.objects.create(upload_sha256=sha, status=PoolJob.RUNNING, attempts=MAX_ATTEMPTS,
                                    heartbeat_at=long_ago, created_at=long_ago)
    # A queued job whose message never reached a worker is sent again by the sweep.
    lost = PoolJob.objects.create(upload_sha256=sha, upload_name="pool.jsonl", created_at=long_ago)
    assert sorted(sweep_pool_jobs()) == sorted([doomed.pk, lost.pk])
    doomed.refresh_from_db()
    lost.refresh_from_db()
    assert doomed.status == PoolJob.FAILED and doomed.errors == [
        f"the work stopped {MAX_ATTEMPTS} times before it finished (its process was killed or restarted, perhaps for "
        "lack of memory); nothing was stored. Start it again, or run manage.py build_vbleu"]
    assert lost.status == PoolJob.DONE


@pytest.mark.django_db(transaction=True)
def test_in_the_thread_mode_the_request_returns_at_once_and_the_progress_is_followed(planted, settings,
                                                                                     monkeypatch):
    """Without a broker (the quickstart) the job runs in a thread of the web process: the POST
    answers before the work is done, and the status shows it running with its counts, then done.

    The job is held at its first progress write until the test has looked (a gate around the real
    progress writer), so what is seen does not depend on how fast the machine reads the pool."""
    import threading

    from django.contrib.auth import get_user_model

    from kinds.response import extension_jobs as server
    from kinds.response.models import PoolJob

    reached, gate = threading.Event(), threading.Event()
    real = server._JobProgress.__call__

    def gated(self, stage, done, total):
        real(self, stage, done, total)
        if stage == "pool" and not gate.is_set():
            reached.set()
            gate.wait(60)

    monkeypatch.setattr(server._JobProgress, "__call__", gated)
    settings.EVALSERVER_POOL_JOB_MODE = "thread"
    staff = Client()
    staff.force_login(get_user_model().objects.create_user("root", password="root-pass-1", is_staff=True,
                                                           is_superuser=True))
    big = planted["bytes"] * 40
    try:
        answer = staff.post("/admin/response/referencepool/add/",
                            {"name": "big", "file": SimpleUploadedFile("big.jsonl", big)})
        job = PoolJob.objects.get()
        assert answer.status_code == 302 and answer["Location"] == f"/pool-jobs/{job.pk}/"
        assert reached.wait(60), "the job never started"
        state = staff.get(f"/pool-jobs/{job.pk}/status.json").json()
        # The request came back while the job is still reading the pool.
        assert state["status"] == "running"
        running = [stage for stage in state["stages"] if stage["state"] == "running"]
        assert [stage["stage"] for stage in running] == ["pool"]
        # Counts in words: the pool's bytes as sizes.
        assert 10**6 <= len(big) < 10**9
        assert re.fullmatch(rf"[0-9.,]+ (bytes|KB|MB) of {len(big) / 10**6:.1f} MB", running[0]["text"]), running
        assert [stage["state"] for stage in state["stages"]] == ["running", "waiting"]
        page = staff.get(f"/pool-jobs/{job.pk}/").content.decode()
        assert '<li class="stage running" data-stage="pool">' in page and "<progress" in page
        assert 'src="/static/js/pool_job.js"' in page
    finally:
        gate.set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = staff.get(f"/pool-jobs/{job.pk}/status.json").json()
        if state["status"] in ("done", "failed"):
            break
        time.sleep(0.05)
    assert state["status"] == "done", state
    assert [(stage["stage"], stage["state"]) for stage in state["stages"]] == [("pool", "done"), ("save", "done")]
    job.refresh_from_db()
    assert job.result["n_pairs"] == 40 * len(planted["lines"]) and job.pool.name == "big"
    # A finished job's page no longer polls.
    assert "pool_job.js" not in staff.get(f"/pool-jobs/{job.pk}/").content.decode()


@pytest.mark.django_db
def test_admin_pool_upload_is_a_job_that_names_every_bad_line_and_stores_a_good_pool_once(planted, settings):
    from django.contrib.auth import get_user_model

    from kinds.response.extension_jobs import pool_file_path
    from kinds.response.models import PoolJob, ReferencePool

    staff = get_user_model().objects.create_user("root", password="root-pass-1", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    bad = planted["bytes"].replace(b'"response"', b'"reply"', 2)
    with committing():
        answer = client.post("/admin/response/referencepool/add/", {"name": "", "file": SimpleUploadedFile("bad.jsonl",
                                                                                                          bad)})
    job = PoolJob.objects.get()
    assert answer["Location"] == f"/pool-jobs/{job.pk}/"
    page = client.get(answer["Location"]).content.decode()
    assert "<li>bad.jsonl: line 1: response is missing</li>" in page
    assert "<li>bad.jsonl: line 2: response is missing</li>" in page
    assert ReferencePool.objects.count() == 0 and not (Path(settings.MEDIA_ROOT) / "pools").exists()
    for _ in range(2):
        with committing():
            answer = client.post("/admin/response/referencepool/add/", {
                "name": "planted", "file": SimpleUploadedFile("pool.jsonl", planted["bytes"])})
        assert answer.status_code == 302
    pool = ReferencePool.objects.get()
    assert (pool.name, pool.n_pairs, pool.size, pool.created_by) == ("planted", len(planted["lines"]),
                                                                     len(planted["bytes"]), staff)
    assert pool_file_path(pool.sha256).read_bytes() == planted["bytes"]
    first, second = PoolJob.objects.filter(status=PoolJob.DONE).order_by("pk")
    assert (first.result["stored_now"], second.result["stored_now"]) == (True, False)
    assert "stored before (the same file)" in client.get(f"/pool-jobs/{second.pk}/").content.decode()
    # Without a file: the admin's own form error, and no job.
    answer = client.post("/admin/response/referencepool/add/", {"name": "x"})
    assert answer.status_code == 200 and "This field is required." in answer.content.decode()
    assert PoolJob.objects.count() == 3
    # Over the size limit: refused before the body is read.
    settings.EVALSERVER_POOL_MAX_BYTES = 1024
    answer = client.post("/admin/response/referencepool/add/", {"name": "x", "file": SimpleUploadedFile(
        "pool.jsonl", planted["bytes"])})
    assert answer.status_code == 413 and "a pool may have at most 1,024 bytes each" in answer.content.decode()
    assert PoolJob.objects.count() == 3


# "staff" is a superuser; "staff without permissions" has staff status and nothing else (issue 24).
ROLES = ("anonymous", "participant", "other-organiser", "organiser", "staff", "staff without permissions")


@pytest.mark.django_db
def test_access_matrix_of_the_vbleu_pages(task_with_runs, planted):
    """Every vBLEU URL x every role x every job state and kind x every class of id, and the form
    page x every role x task kind: only the task's organisers and staff see a task's job, only
    staff a pool upload's; everybody else gets what a missing job gets."""
    from django.contrib.auth import get_user_model

    from kinds.response.models import PoolJob
    from tasks.models import Team
    from tasks.organising import create_task

    users = get_user_model()
    task = task_with_runs["task"]
    other_task = create_task("other-task", "response", "Other responses", kind="response")
    stc3 = create_task("dq-task", "stc3", "DQ/ND")
    other_organiser = users.objects.create_user("otto", password="otto-pass-1")
    other_task.organisers.add(other_organiser)
    stc3.organisers.add(task_with_runs["organiser"])
    participant = users.objects.get(username="alice")
    assert Team.objects.filter(members=participant).exists()
    staff = users.objects.create_user("root", password="root-pass-1", is_staff=True, is_superuser=True)
    bare = users.objects.create_user("vera", password="vera-pass-1", is_staff=True)
    people = {"participant": participant, "other-organiser": other_organiser,
              "organiser": task_with_runs["organiser"], "staff": staff, "staff without permissions": bare}
    clients = {"anonymous": Client()}
    for role, user in people.items():
        clients[role] = Client()
        clients[role].force_login(user)
    now = timezone.now()
    jobs = {}
    for state in (PoolJob.QUEUED, PoolJob.RUNNING, PoolJob.DONE, PoolJob.FAILED):
        for kind, owner in (("task", task), ("pool", None)):
            # Fresh claims and sends: looking at them starts nothing.
            jobs[(state, kind)] = PoolJob.objects.create(task=owner, status=state, sent_at=now, heartbeat_at=now,
                                                         created_by=task_with_runs["organiser"],
                                                         errors=["pool.jsonl: line 1: response is missing"]
                                                         if state == PoolJob.FAILED else [])
    wrong = []
    for (state, kind), job in jobs.items():
        for suffix in ("", "status.json"):
            url = f"/pool-jobs/{job.pk}/{suffix}"
            for role, client in clients.items():
                allowed = role == "staff" or (role == "organiser" and kind == "task")
                expected = 302 if role == "anonymous" else 200 if allowed else 404
                got = client.get(url).status_code
                if got != expected:
                    wrong.append((state, kind, url, role, got, expected))
                if role == "organiser" and client.post(url).status_code != 405:
                    wrong.append((state, kind, url, role, "POST", 405))
    missing = max(job.pk for job in jobs.values()) + 1
    for job_id in (missing, 2**31, 2**63 - 1, 2**63, 10**30):
        for suffix in ("", "status.json"):
            for role, client in clients.items():
                got = client.get(f"/pool-jobs/{job_id}/{suffix}").status_code
                if got != (302 if role == "anonymous" else 404):
                    wrong.append(("missing", job_id, suffix, role, got))
    for slug, organisers_see in (("vbleu-task", True), ("other-task", False), ("dq-task", False), ("nope", False)):
        for role, client in clients.items():
            allowed = (role == "staff" and slug in ("vbleu-task", "other-task")) or (
                role == "organiser" and organisers_see) or (role == "other-organiser" and slug == "other-task")
            expected = 302 if role == "anonymous" else 200 if allowed else 404
            got = client.get(f"/organiser/{slug}/vbleu/").status_code
            if got != expected:
                wrong.append(("form", slug, role, got, expected))
    assert not wrong, wrong
    # Nobody who may not follow a job could start one either.
    with committing():
        answer = clients["participant"].post("/organiser/vbleu-task/vbleu/", {
            **FORM, "from_version": "1", "file": SimpleUploadedFile("pool.jsonl", planted["bytes"])})
    assert answer.status_code == 404 and PoolJob.objects.count() == len(jobs)


@pytest.mark.django_db
def test_an_attempt_that_lost_its_claim_stops_before_storing_anything(task_with_runs, planted, monkeypatch):
    """A process whose heartbeat stopped reaching the database for a lease loses the job to
    another; when it comes back it must not store a second version: its next progress write
    finds the claim gone and it stops."""
    from kinds.response import extension_jobs as server
    from kinds.response.models import PoolJob, ReferencePool
    from tasks.models import GoldVersion

    real = server._JobProgress.__call__

    def taken_over_when_indexing(self, stage, done, total):
        if stage == "index":
            PoolJob.objects.filter(pk=self.job_id).update(claim_token="someone-else")
        return real(self, stage, done, total)

    monkeypatch.setattr(server._JobProgress, "__call__", taken_over_when_indexing)
    post_form(organiser_client(task_with_runs), planted["bytes"])
    job = PoolJob.objects.get()
    assert (job.status, job.claim_token, job.finished_at) == (PoolJob.RUNNING, "someone-else", None)
    assert GoldVersion.objects.filter(task=task_with_runs["task"]).count() == 1
    assert ReferencePool.objects.count() == 0


@pytest.mark.django_db
def test_a_rater_no_better_than_chance_fails_the_job_with_the_reason_on_its_page(task_with_runs, settings, tmp_path):
    # Issue 37: a Japanese pool for this English task; its 13a tokens and English vectors tell the
    # rater nothing, and the job says so instead of storing a version weighted by noise.
    from fixtures import response_demo_ja
    from kinds.response.models import PoolJob, ReferencePool
    from tasks.models import GoldVersion

    pool = response_demo_ja.write_pool(tmp_path / "pool.jsonl").read_bytes()
    client = organiser_client(task_with_runs)
    assert post_form(client, pool).status_code == 302
    job = PoolJob.objects.get()
    assert job.status == PoolJob.FAILED and len(job.errors) == 1
    assert job.errors[0].startswith("the automatic rater is no better than chance")
    assert ReferencePool.objects.count() == 0 and GoldVersion.objects.filter(task=task_with_runs["task"]).count() == 1
    page = client.get(f"/pool-jobs/{job.pk}/").content.decode()
    assert "Nothing was stored:" in page and "one-sided binomial test against 0.5" in page
    assert '<li class="stage failed" data-stage="rater">' in page
