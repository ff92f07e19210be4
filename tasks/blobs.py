"""The blob store: every file the server keeps, stored once under its SHA-256 and never changed.

Run files, gold files as uploaded, organisers' data files, uploaded pools and ratings waiting for
their job, stored vBLEU pools and word-vector tables all go through ``store``: the bytes are
hashed while they are written to a temporary file beside their place, flushed to the disk
(``fsync``) and renamed into place, so a file is whole and durable before any row names it and
before any job that reads it is queued. Identical files share one copy; a second store of the same
bytes writes nothing (``Stored.created`` says whether this call wrote the file, so a failed upload
takes back only a file it added).

Where each kind of file lives is ``FOLDERS``' business alone (``path``): ``MEDIA_ROOT/<folder>/``,
then the first two hex digits of the SHA-256 (a few thousand files per directory at most) except
for vector tables, which the scoring core finds by name in one directory
(``scoring.kinds.response.kind.vector_table_path``).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings

from tasks.errors import Rejected

# folder -> (file name suffix, whether files sit under a two-hex-digit subfolder)
FOLDERS: dict[str, tuple[str, bool]] = {
    "runs": (".json", True),
    "gold": ("", True),
    "data": ("", True),
    "pool-uploads": ("", True),
    "pools": (".jsonl", True),
    "vectors": (".txt", False),
}
CHUNK = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Stored:
    sha256: str
    size: int
    created: bool  # whether this call wrote the file (False: the same bytes were stored before)


def path(folder: str, sha256: str) -> Path:
    """Where the file with this SHA-256 lives (``ValueError`` for anything but a hex digest)."""
    suffix, fanned_out = FOLDERS[folder]
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise ValueError("not a SHA-256 hex digest")
    root = Path(settings.MEDIA_ROOT) / folder
    return (root / sha256[:2] if fanned_out else root) / f"{sha256}{suffix}"


def store(folder: str, source: bytes | Iterable[bytes] | IO[bytes] | os.PathLike | str, *,
          max_bytes: int | None = None, limit: tuple[str, str] = ("file", "")) -> Stored:
    """Keep the bytes of ``source`` (bytes, chunks, an open binary stream read from its start, or
    a local file) under their SHA-256. Past ``max_bytes``: ``Rejected`` (413) naming ``limit``
    (what the file is, the setting that bounds it), and nothing is kept."""
    root = Path(settings.MEDIA_ROOT) / folder
    root.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    handle, temporary = tempfile.mkstemp(dir=root, prefix=".upload-")
    try:
        with os.fdopen(handle, "wb") as stream:
            for chunk in _chunks(source):
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    setting = f" ({limit[1]})" if limit[1] else ""
                    raise Rejected([f"file: more than {max_bytes:,} bytes, the largest {limit[0]} accepted{setting}"],
                                   status=413)
                digest.update(chunk)
                stream.write(chunk)
            stream.flush()
            os.fsync(stream.fileno())
        sha = digest.hexdigest()
        target = path(folder, sha)
        target.parent.mkdir(parents=True, exist_ok=True)
        created = not target.exists()
        if created:
            os.replace(temporary, target)
            _fsync_directory(target.parent)  # the rename itself survives a power cut
        else:
            Path(temporary).unlink()
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return Stored(sha, size, created)


def read(folder: str, sha256: str) -> bytes:
    return path(folder, sha256).read_bytes()


def forget(folder: str, sha256: str) -> None:
    """Remove a stored file (the caller has checked that nothing refers to it any more)."""
    path(folder, sha256).unlink(missing_ok=True)


def _chunks(source: bytes | Iterable[bytes] | IO[bytes] | os.PathLike | str) -> Iterable[bytes]:
    if isinstance(source, bytes | bytearray | memoryview):
        yield bytes(source)
    elif isinstance(source, str | os.PathLike):
        with open(source, "rb") as stream:
            yield from iter(lambda: stream.read(CHUNK), b"")
    elif hasattr(source, "read"):
        if hasattr(source, "seek"):
            source.seek(0)
        yield from iter(lambda: source.read(CHUNK), b"")
    else:
        yield from source


def _fsync_directory(directory: Path) -> None:
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:  # a platform without directory handles (Windows): the rename is what it is
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


__all__ = ["CHUNK", "FOLDERS", "Stored", "forget", "path", "read", "store"]
