"""Backups and restores (issue 41, item 1): ``manage.py backup DIR`` and ``manage.py restore DIR``.

The drill: an installation with every demo task (each kind, phases, baselines, statistics, two
published rounds) is backed up while uploads go on, and restored onto a new, empty installation
of the same database (SQLite or PostgreSQL, whichever the suite runs on), with its files on the
local disk or in an S3 bucket (moto's server). Every run's bytes (hashed by the probe, not read
from a stored checksum), scores, per-item vectors, statistics, boards and exports are then equal
to the original's; the uploads made during the backup are either in it, whole and scored, or not
at all. The refusals: a damaged backup (each kind of damage names the file), one from a newer
release, a non-empty installation, a folder in use; in none of them is anything written.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.management import CommandError, call_command

from devtools.workers import PYTHON, ROOT, ObjectStore
from devtools.workers.restore import BUSY, Installations, wait_for
from tasks import backup, blobs
from tasks.models import Run


def program(env: dict[str, str], name: str, spec: dict[str, Any], timeout: float = 900) -> dict[str, Any]:
    completed = subprocess.run([PYTHON, "-m", "devtools.workers", name, json.dumps(spec)], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=timeout)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture
def installations(tmp_path: Path) -> Iterator[Installations]:
    made = Installations(tmp_path)
    yield made
    if made.server:
        made.drop()


@pytest.fixture(scope="module")
def object_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    store = ObjectStore(tmp_path_factory.mktemp("s3") / "moto.log")
    store.client().create_bucket(Bucket="restored")
    yield store
    store.stop()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("where", ["local disk", "object storage"])
def test_restore_drill_gives_back_every_run_score_board_and_export(
        where: str, installations: Installations, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    stores: list[dict[str, str]] = [{}, {}]
    if where == "object storage":
        store = request.getfixturevalue("object_store")
        stores = [store.env(), {**store.env(), "EVALSERVER_STORAGE_URL": store.url.replace(store.bucket, "restored")}]
    original = installations.new("original", **stores[0])
    made = program(original, "restore-populate", {"dialogues": 10})

    # Uploads to a task of their own go on while the backup is written.
    stop, started = tmp_path / "stop", tmp_path / "started"
    traffic = subprocess.Popen([PYTHON, "-m", "devtools.workers", "restore-traffic", json.dumps(
        {"gold": made["gold"], "stop": str(stop), "started": str(started)})], cwd=ROOT, env=original,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(started, traffic)
        written = manage(original, "backup", str(tmp_path / "backup"))
    finally:
        stop.touch()
        out, err = traffic.communicate(timeout=300)
    assert written.returncode == 0, written.stderr
    assert traffic.returncode == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1])["uploaded"] >= 2
    assert written.stdout.startswith(f"backup written to {tmp_path / 'backup'}: the database (")
    before = program(original, "restore-probe", {})

    restored_env = installations.new("restored", **stores[1])
    assert manage(restored_env, "migrate", "-v0").returncode == 0  # an empty installation, as deploying makes it
    answer = manage(restored_env, "restore", str(tmp_path / "backup"))
    assert answer.returncode == 0, answer.stderr
    after = program(restored_env, "restore-probe", {})

    assert after["pages"] == before["pages"]
    assert after["statistics"] == before["statistics"]
    assert set(after["runs"]) <= set(before["runs"])
    assert {k: v for k, v in before["runs"].items() if v["task"] != BUSY} == {
        k: v for k, v in after["runs"].items() if v["task"] != BUSY}
    busy_before = {k: v for k, v in before["runs"].items() if v["task"] == BUSY}
    busy_after = {k: v for k, v in after["runs"].items() if v["task"] == BUSY}
    # The uploads the snapshot holds are the first ones, each with its bytes and, if it was scored
    # when the database was copied, its scores; one queued then is queued again, never half there.
    assert list(busy_after) == list(busy_before)[:len(busy_after)] and busy_after
    for key, run in busy_after.items():
        expected = dict(busy_before[key])
        if run["status"] != "done":
            assert run["status"] in ("queued", "scoring") and run["scores"] == [] and run["vectors"] == []
            expected.update(status=run["status"], scores=[], vectors=[])
        assert run == expected
    assert len({run["bytes_sha256"] for run in after["runs"].values()}) > 40  # every kind's runs, not a few
    # Every file the restored database names is in the restored store; the store holds nothing else
    # than the original's files.
    assert set(after["stored_files"]) <= set(before["stored_files"])
    assert {f"runs/{run['bytes_sha256'][:2]}/{run['bytes_sha256']}.json" for run in after["runs"].values()} <= set(
        after["stored_files"])
    assert manage(restored_env, "migrate", "--check").returncode == 0


@pytest.fixture
def written(world: Any, tmp_path: Path) -> Path:
    """A backup of the test database (the world: a task, gold, runs scored) and its store."""
    call_command("backup", str(tmp_path / "backup"), verbosity=0)
    return tmp_path / "backup"


def restore_refused(folder: Path) -> str:
    runs, stored = Run.objects.count(), sorted(blobs.stored_keys())
    with pytest.raises(CommandError) as refused:
        call_command("restore", str(folder), verbosity=0)
    assert Run.objects.count() == runs and sorted(blobs.stored_keys()) == stored  # nothing written
    return str(refused.value)


@pytest.mark.django_db(transaction=True)
def test_backup_manifest_lists_every_file_with_its_checksum_and_the_schema(written: Path) -> None:
    import hashlib

    from django.db import connection
    from django.db.migrations.recorder import MigrationRecorder

    manifest = orjson.loads((written / "manifest.json").read_bytes())
    on_disk = sorted(str(path.relative_to(written)) for path in written.rglob("*") if path.is_file())
    assert on_disk == sorted([*manifest["files"], "manifest.json"])
    for name, entry in manifest["files"].items():
        content = (written / name).read_bytes()
        assert entry == {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content)}
    run_files = {f"files/runs/{run.file_sha256[:2]}/{run.file_sha256}.json" for run in Run.objects.all()}
    assert run_files and run_files <= set(manifest["files"])
    assert manifest["schema"] == sorted(f"{app}.{name}" for app, name in
                                        MigrationRecorder(connection).applied_migrations())
    assert manifest["database"] == {"vendor": connection.vendor,
                                    "file": "database.sqlite3" if connection.vendor == "sqlite" else "database.pgdump"}
    assert "is whole" in _check(written)


def _check(folder: Path) -> str:
    from io import StringIO

    out = StringIO()
    call_command("restore", str(folder), "--check", stdout=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_a_damaged_backup_is_refused_naming_the_damage(written: Path) -> None:
    manifest = orjson.loads((written / "manifest.json").read_bytes())
    run_file = next(name for name in manifest["files"] if name.startswith("files/runs/"))
    content = bytearray((written / run_file).read_bytes())
    content[len(content) // 2] ^= 0x01
    (written / run_file).write_bytes(bytes(content))
    (written / "files" / "stray.txt").write_text("not the server's")
    database = written / manifest["database"]["file"]
    database.unlink()
    message = restore_refused(written)
    assert message.startswith("not restored: the backup is damaged (3 problem(s)): ")
    assert f"{manifest['database']['file']}: missing" in message
    assert f"{run_file}: {len(content):,} bytes with SHA-256 " in message
    assert "files/stray.txt: not in the manifest" in message
    with pytest.raises(CommandError, match="the backup is damaged"):
        call_command("restore", str(written), "--check")


@pytest.mark.django_db(transaction=True)
def test_a_backup_from_a_newer_release_is_refused(written: Path) -> None:
    manifest = orjson.loads((written / "manifest.json").read_bytes())
    manifest["schema"].append("tasks.9999_from_a_later_release")
    (written / "manifest.json").write_bytes(orjson.dumps(manifest))
    assert restore_refused(written) == (
        "not restored: the backup was made by a newer release: its database has 1 migration(s) this release does not "
        "know (tasks.9999_from_a_later_release); upgrade this installation first (docs: Upgrades), then restore; "
        "nothing was restored")
    manifest["format"] = backup.FORMAT + 1
    (written / "manifest.json").write_bytes(orjson.dumps(manifest))
    assert "the backup's format 2 is newer than this release reads (1)" in restore_refused(written)


@pytest.mark.django_db(transaction=True)
def test_restore_refuses_an_installation_that_holds_a_round_already(written: Path, world: Any) -> None:
    message = restore_refused(written)
    assert message.startswith("not restored: this installation is not empty (")
    assert f"{Run.objects.count()} runs" in message and "nothing was restored" in message


@pytest.mark.django_db(transaction=True)
def test_restore_refuses_what_is_not_a_backup(tmp_path: Path, world: Any) -> None:
    assert "has no manifest.json: it is not a backup, or an unfinished one" in restore_refused(tmp_path)
    (tmp_path / "manifest.json").write_text("{")
    assert "manifest.json is not valid JSON" in restore_refused(tmp_path)
    assert f"{tmp_path / 'nowhere'} is not a folder" in restore_refused(tmp_path / "nowhere")


@pytest.mark.django_db(transaction=True)
def test_backup_refuses_a_folder_in_use_and_leaves_no_partial_folder(world: Any, tmp_path: Path) -> None:
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("mine")
    with pytest.raises(CommandError, match="exists and is not an empty folder; name a new one"):
        call_command("backup", str(tmp_path / "used"))
    assert sorted(os.listdir(tmp_path)) == ["used"] and os.listdir(tmp_path / "used") == ["notes.txt"]


@pytest.mark.django_db(transaction=True)
def test_a_damaged_store_stops_the_backup(world: Any, tmp_path: Path) -> None:
    run = Run.objects.first()
    stored = blobs.path("runs", run.file_sha256)
    stored.write_bytes(stored.read_bytes() + b" ")
    with pytest.raises(CommandError, match=f"the stored file runs/{run.file_sha256[:2]}/{run.file_sha256}.json does "
                                           "not have the SHA-256 it is stored under"):
        call_command("backup", str(tmp_path / "backup"))
    assert not [name for name in os.listdir(tmp_path) if "backup" in name]  # no backup, no partial folder
