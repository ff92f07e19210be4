"""The blob store (tasks.blobs): every kept file under its SHA-256, whole, once."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tasks import blobs
from tasks.errors import Rejected


def test_every_kind_of_file_is_stored_once_under_its_sha256_where_its_readers_look(tmp_path: Path) -> None:
    content = b'[{"id": "1"}]'
    digest = hashlib.sha256(content).hexdigest()
    media = Path(settings.MEDIA_ROOT)
    expected = {"runs": media / "runs" / digest[:2] / f"{digest}.json",
                "gold": media / "gold" / digest[:2] / digest,
                "data": media / "data" / digest[:2] / digest,
                "pool-uploads": media / "pool-uploads" / digest[:2] / digest,
                "pools": media / "pools" / digest[:2] / f"{digest}.jsonl",
                "vectors": media / "vectors" / f"{digest}.txt",
                "encoders": media / "encoders" / f"{digest}.bin",
                "encodings": media / "encodings" / digest[:2] / f"{digest}.npys"}
    assert set(expected) == set(blobs.FOLDERS)
    source = tmp_path / "source.json"
    source.write_bytes(content)
    for folder, place in expected.items():
        first = blobs.store(folder, content)
        assert (first.sha256, first.size, first.created) == (digest, len(content), True)
        assert blobs.path(folder, digest) == place and place.read_bytes() == content
        # The same bytes from chunks, a stream or a file: nothing written again.
        for again in ([content[:5], content[5:]], io.BytesIO(content), source):
            assert blobs.store(folder, again) == blobs.Stored(digest, len(content), False)
        assert blobs.read(folder, digest) == content
        blobs.forget(folder, digest)
        assert not place.exists()
    # No temporary file is left behind anywhere.
    assert not [path for path in media.rglob(".upload-*")]


def test_a_file_over_its_limit_is_refused_and_nothing_is_kept() -> None:
    with pytest.raises(Rejected) as refused:
        blobs.store("data", [b"x" * 6, b"y" * 6], max_bytes=10, limit=("data file", "EVALSERVER_DATA_FILE_MAX_BYTES"))
    assert refused.value.status == 413
    assert refused.value.errors == ["file: more than 10 bytes, the largest data file accepted "
                                    "(EVALSERVER_DATA_FILE_MAX_BYTES)"]
    assert not [path for path in (Path(settings.MEDIA_ROOT) / "data").rglob("*") if path.is_file()]


@pytest.mark.parametrize("bad", ["", "A" * 64, "a" * 63, "../" + "a" * 61, "a" * 64 + "/x"])
def test_only_a_sha256_names_a_file(bad: Any) -> None:
    with pytest.raises(ValueError, match="not a SHA-256 hex digest"):
        blobs.path("runs", bad)


def test_a_failed_write_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> Any:
        yield b"half"
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        blobs.store("runs", broken())
    assert not [path for path in (Path(settings.MEDIA_ROOT) / "runs").rglob("*") if path.is_file()]


def test_the_local_store_follows_media_root_and_makes_no_urls() -> None:
    # The embedded default: Django's storage API over MEDIA_ROOT as it is now (tests change it).
    assert blobs.is_local()
    digest = blobs.store("data", b"notes").sha256
    assert blobs.storage().path(blobs.key("data", digest)) == str(
        Path(settings.MEDIA_ROOT).resolve() / "data" / digest[:2] / digest)
    with pytest.raises(NotImplementedError, match="only through the server's views"):
        blobs.storage().url(blobs.key("data", digest))


def test_a_named_file_is_kept_once_by_its_first_writer_and_replaced_only_when_asked() -> None:
    # The encoded references of a gold version: named by a key, not by their bytes; two workers that
    # encoded the same gold at once offer the same file and the second one learns that it lost.
    name = hashlib.sha256(b"a key").hexdigest()
    place = Path(settings.MEDIA_ROOT) / "encodings" / name[:2] / f"{name}.npys"
    for content, replace, kept in [(b"first", False, True), (b"second", False, False), (b"third", True, True)]:
        written = blobs.staging("encodings") / f".written-{content.decode()}"
        written.write_bytes(content)
        assert blobs.keep_named("encodings", name, written, replace=replace) is kept
        assert not written.exists()
    assert blobs.path("encodings", name) == place and place.read_bytes() == b"third"
    with pytest.raises(ValueError, match="named by content"):
        blobs.keep_named("runs", name, place)
