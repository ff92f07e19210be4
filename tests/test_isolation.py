"""Tests write only in folders of their own (issue 37, item 2).

A running demo keeps everything in the checkout's var/: its database, uploads, cache, secret key
and ``demo-logins.txt``, whose alice token the README's upload reads. ``dev.py test`` used to
replace that token (a test user is also called alice), so the README's next upload answered 401.
The test settings now place every writable location in a temporary folder of the run's own, and
the suite refuses any write into the checkout's var/ (tests/conftest.py)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from tests.conftest import CHECKOUT_VAR

CHECKOUT = CHECKOUT_VAR.parent


def inside(path: Any, folder: Path) -> bool:
    return Path(os.path.abspath(path)).is_relative_to(folder)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by its SHA-256 (a running demo's database may change meanwhile:
    the files compared are the ones a test could replace, chosen by the caller)."""
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()} if folder.is_dir() else {}


def test_every_writable_location_of_the_test_settings_is_outside_the_checkout(settings: Any,
                                                                            django_db_setup: None) -> None:
    # django_db_setup: the test database's file is named when the process sets its database up,
    # which a test that ran first in this process may not have done (it was None then).
    from tasks import blobs

    database = settings.DATABASES["default"]
    places = {"VAR_DIR": settings.VAR_DIR, "MEDIA_ROOT": settings.MEDIA_ROOT, "STATIC_ROOT": settings.STATIC_ROOT,
              "EVALSERVER_BLOB_CACHE_DIR": settings.EVALSERVER_BLOB_CACHE_DIR,
              "NUMBA_CACHE_DIR": os.environ["NUMBA_CACHE_DIR"], "the blob store": blobs.storage().location}
    if database["ENGINE"].endswith("sqlite3"):
        places["the test database"] = database["TEST"]["NAME"]
    for cache in settings.CACHES.values():
        assert not cache["BACKEND"].endswith("FileBasedCache"), cache  # a file cache would need a folder too
    assert {name: str(path) for name, path in places.items() if inside(path, CHECKOUT)} == {}
    assert settings.STORAGES["blobs"]["BACKEND"] == "evalserver.storage.BlobFileSystemStorage"  # no shared bucket
    # The run's folder holds what the settings write at start (the secret key, the static root).
    assert Path(settings.VAR_DIR).name.startswith("evalserver-tests-") or "EVALSERVER_TEST_RUN_DIR" in os.environ
    assert (Path(settings.VAR_DIR) / "secret_key").is_file()


def test_replacing_alice_token_keeps_the_checkouts_demo_logins(world: Any, settings: Any) -> None:
    """The path that broke the README: alice replaces her token on My team, and the demo's logins
    file in VAR_DIR follows (tasks.tokens.follow_in_logins_file). Under the test settings that file
    is the run's own; the checkout's is untouched."""
    before = snapshot(CHECKOUT_VAR)
    ours = Path(settings.VAR_DIR) / "demo-logins.txt"
    assert not inside(ours, CHECKOUT)
    ours.write_text(f"alice's API token: {world.alice_token}\n")
    try:
        client = Client()
        client.force_login(world.alice)
        page = client.post("/team/token/regenerate/", {"confirm": "yes"}).content.decode()
        new_token = re.search(r'id="token">([0-9a-f]+)<', page).group(1)
        assert ours.read_text() == f"alice's API token: {new_token}\n"
    finally:
        ours.unlink()
    after = snapshot(CHECKOUT_VAR)
    assert {name: after.get(name) for name in before if name.endswith(("demo-logins.txt", "secret_key"))} == {
        name: digest for name, digest in before.items() if name.endswith(("demo-logins.txt", "secret_key"))}


def test_a_write_into_the_checkouts_var_fails_in_the_test_that_makes_it() -> None:
    probe = CHECKOUT_VAR / "isolation-probe.txt"
    try:
        with pytest.raises(PermissionError, match="never in the checkout's var/"):
            probe.write_text("written by a test")
        with pytest.raises(PermissionError):
            os.open(probe, os.O_WRONLY | os.O_CREAT)
        with pytest.raises(PermissionError):
            (CHECKOUT_VAR / "isolation-probe-folder").mkdir()
        import sqlite3

        with pytest.raises(PermissionError):
            sqlite3.connect(CHECKOUT_VAR / "db.sqlite3")
        assert not probe.exists() and not (CHECKOUT_VAR / "isolation-probe-folder").exists()
    finally:  # only reached with the guard missing: leave the checkout as it was
        if probe.exists():
            probe.unlink()
        if (CHECKOUT_VAR / "isolation-probe-folder").is_dir():
            (CHECKOUT_VAR / "isolation-probe-folder").rmdir()


def test_a_developers_folders_are_not_used_by_the_test_settings(tmp_path: Path) -> None:
    """A shell that names the server's folders (a real deployment's var/, uploads, an object store)
    does not lead the test settings there: a fresh process gets a temporary folder of its own,
    removed when it ends."""
    theirs = tmp_path / "their-var"
    theirs.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("EVALSERVER_", "DJANGO_"))}
    env.update(DJANGO_SETTINGS_MODULE="evalserver.settings_test", EVALSERVER_VAR_DIR=str(theirs),
               EVALSERVER_UPLOAD_DIR=str(theirs / "uploads"), STATIC_ROOT=str(theirs / "static"),
               EVALSERVER_BLOB_CACHE_DIR=str(theirs / "blob-cache"), NUMBA_CACHE_DIR=str(theirs / "numba"),
               EVALSERVER_STORAGE_URL="s3://their-bucket?endpoint_url=http://127.0.0.1:9")
    script = ("import json, os, django; django.setup(); from django.conf import settings as s; "
              "print(json.dumps({'var': str(s.VAR_DIR), 'media': str(s.MEDIA_ROOT), 'static': str(s.STATIC_ROOT), "
              "'blob_cache': str(s.EVALSERVER_BLOB_CACHE_DIR), 'numba': os.environ['NUMBA_CACHE_DIR'], "
              "'blobs': s.STORAGES['blobs']['BACKEND']}))")
    result = subprocess.run([sys.executable, "-c", script], cwd=CHECKOUT, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    places = json.loads(result.stdout)
    run_dir = Path(places["var"])
    assert run_dir.name.startswith("evalserver-tests-") and not inside(run_dir, CHECKOUT)
    assert {name: inside(places[name], run_dir) for name in ("media", "static", "blob_cache")} == {
        "media": True, "static": True, "blob_cache": True}
    assert not inside(places["numba"], theirs) and not inside(places["numba"], CHECKOUT)
    assert places["blobs"] == "evalserver.storage.BlobFileSystemStorage"
    assert list(theirs.iterdir()) == []  # nothing written in the folder the shell named
    assert not run_dir.exists()  # removed when the process ended
