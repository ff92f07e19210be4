"""The blob store: every file the server keeps, stored once under its SHA-256 and never changed.

Run files, gold files as uploaded, organisers' data files, uploaded pools and ratings waiting for
their job, stored vBLEU pools, word-vector tables and encoder models all go through ``store``, on Django's storage
API (``STORAGES["blobs"]``) with one of two backends (``EVALSERVER_STORAGE_URL``):

- **the local filesystem** (the embedded default, ``MEDIA_ROOT``): the bytes are hashed while they
  are written to a temporary file beside their place, flushed to the disk (``fsync``) and renamed
  into place, so a file is whole and durable before any row names it and before any job that reads
  it is queued;
- **a private S3-compatible bucket** (hosts that share no disk): the bytes are hashed into a local
  temporary file, then sent with one PUT (multipart for large files) that has completed before
  ``store`` returns, so every worker on every host can read the file before its job is queued.

Identical files share one copy; a second store of the same bytes writes nothing (``Stored.created``
says whether this call wrote the file, so a failed upload takes back only a file it added).

Reading: ``read`` gives the bytes (checked against the checksum when they come over the network);
``path`` gives a local file, for the readers that need one (pools, vector tables): on the
filesystem the stored file itself, with object storage a copy in ``EVALSERVER_BLOB_CACHE_DIR``
fetched once per host and checked against its checksum before a process first uses it. No
backend makes URLs (``evalserver.storage.NoURLs``): files are served only by the server's views.

Where each kind of file lives is ``FOLDERS``' business alone (``key``): ``<folder>/``, then the
first two hex digits of the SHA-256 (a few thousand files per directory at most) except for vector
tables and encoder models, which the scoring core finds by name in one directory
(``scoring.kinds.response.kind.resource_path``). The keys are the same on both backends, so
``MEDIA_ROOT`` copied into a bucket as it is (``aws s3 sync``) is a working store.

One folder, ``encodings`` (the encoded references of a gold version, ``NAMED``), holds files named
by a key their writer derives (a SHA-256 of what they were made from) rather than by their bytes:
a worker computes them, so two workers may make the same file; ``keep_named`` keeps the first and
tells the second (whose file has the same content) that it lost. Their reader checks them (a
checksum and the key inside each file, ``scoring.kinds.response.encodings``), so the store checks
only that a copy arrived whole.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings
from django.core.files import File
from django.core.files.storage import Storage, storages

from tasks.errors import Rejected

# folder -> (file name suffix, whether files sit under a two-hex-digit subfolder)
FOLDERS: dict[str, tuple[str, bool]] = {
    "runs": (".json", True),
    "gold": ("", True),
    "data": ("", True),
    "pool-uploads": ("", True),
    "pools": (".jsonl", True),
    "vectors": (".txt", False),
    "encoders": (".bin", False),
    "encodings": (".npys", True),
}
# Folders whose files are named by a key, not by their SHA-256 (``keep_named``).
NAMED: frozenset[str] = frozenset({"encodings"})
CHUNK = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")
# Cached copies checked in this process: path -> (size, mtime_ns) when checked.
_VERIFIED: dict[str, tuple[int, int]] = {}
_CACHE_LOCK = threading.Lock()


class BlobDamaged(RuntimeError):
    """Stored bytes that do not have the SHA-256 they are stored under."""


@dataclass(frozen=True)
class Stored:
    sha256: str
    size: int
    created: bool  # whether this call wrote the file (False: the same bytes were stored before)


def storage() -> Storage:
    return storages["blobs"]


def is_local() -> bool:
    """Whether the store is a folder of this machine (the filesystem backend) rather than a bucket."""
    try:
        storage().path("")
    except NotImplementedError:
        return False
    return True


def key(folder: str, sha256: str) -> str:
    """The file's name in the store (``ValueError`` for anything but a hex digest)."""
    suffix, fanned_out = FOLDERS[folder]
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise ValueError("not a SHA-256 hex digest")
    return f"{folder}/{sha256[:2]}/{sha256}{suffix}" if fanned_out else f"{folder}/{sha256}{suffix}"


def parse_key(name: str) -> tuple[str, str] | None:
    """The folder and the SHA-256 (or, in a ``NAMED`` folder, the name) of a key ``key`` makes;
    None for anything else (a temporary file, a stranger's file)."""
    folder, _, rest = name.partition("/")
    if folder not in FOLDERS:
        return None
    suffix, fanned_out = FOLDERS[folder]
    if fanned_out:
        prefix, _, rest = rest.partition("/")
        if len(prefix) != 2:
            return None
    if not rest.endswith(suffix):
        return None
    sha = rest[:len(rest) - len(suffix)] if suffix else rest
    if not _SHA256.fullmatch(sha) or (fanned_out and sha[:2] != prefix):
        return None
    return folder, sha


def stored_keys() -> Iterator[str]:
    """Every file of the store by its key, on either backend (Django's ``listdir``), folder by
    folder; temporary files (names starting with a dot) and anything ``parse_key`` does not read
    are left out. Files stored while this runs may or may not be listed."""
    for folder in FOLDERS:
        yield from _walk(folder)


def _walk(prefix: str) -> Iterator[str]:
    try:
        folders, files = storage().listdir(prefix)
    except FileNotFoundError:  # the filesystem backend, a folder nothing was stored in yet
        return
    for name in sorted(files):
        if not name.startswith(".") and parse_key(f"{prefix}/{name}"):
            yield f"{prefix}/{name}"
    for name in sorted(folders):
        if not name.startswith("."):
            yield from _walk(f"{prefix}/{name}")


def path(folder: str, sha256: str) -> Path:
    """A local file with the bytes stored under this SHA-256: the stored file itself on the
    filesystem; with object storage a checked copy in ``EVALSERVER_BLOB_CACHE_DIR``, fetched if this
    host has none. Either way the path does not exist when nothing is stored under the SHA-256.
    Read it, never change or remove it (``forget`` removes)."""
    name = key(folder, sha256)
    if is_local():
        return Path(storage().path(name))
    return _cached_copy(name, sha256, check=folder not in NAMED)


def exists(folder: str, sha256: str) -> bool:
    name = key(folder, sha256)
    return storage().exists(name)


def store(folder: str, source: bytes | Iterable[bytes] | IO[bytes] | os.PathLike | str, *,
          max_bytes: int | None = None, limit: tuple[str, str] = ("file", "")) -> Stored:
    """Keep the bytes of ``source`` (bytes, chunks, an open binary stream read from its start, or
    a local file) under their SHA-256. Past ``max_bytes``: ``Rejected`` (413) naming ``limit``
    (what the file is, the setting that bounds it), and nothing is kept. Returns once the file is
    durable and readable by every process that shares the store."""
    FOLDERS[folder]  # noqa: B018 -- an unknown folder is a KeyError before anything is written
    local = is_local()
    # The temporary file sits beside its place on the filesystem (the rename is atomic there);
    # for object storage it is only a staging copy on this host.
    staging = Path(storage().path(folder)) if local else Path(settings.EVALSERVER_BLOB_CACHE_DIR) / ".staging"
    staging.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    handle, temporary = tempfile.mkstemp(dir=staging, prefix=".upload-")
    try:
        with os.fdopen(handle, "w+b") as stream:
            for chunk in _chunks(source):
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    setting = f" ({limit[1]})" if limit[1] else ""
                    raise Rejected([f"file: more than {max_bytes:,} bytes, the largest {limit[0]} accepted{setting}"],
                                   status=413)
                digest.update(chunk)
                stream.write(chunk)
            stream.flush()
            sha = digest.hexdigest()
            name = key(folder, sha)
            if local:
                os.fsync(stream.fileno())
                target = Path(storage().path(name))
                target.parent.mkdir(parents=True, exist_ok=True)
                created = not target.exists()
                if created:
                    os.replace(temporary, target)
                    _fsync_directory(target.parent)  # the rename itself survives a power cut
            else:
                created = not storage().exists(name)
                if created:
                    stream.seek(0)
                    # One PUT (multipart past boto3's threshold), complete when save returns.
                    storage().save(name, File(stream, name=name))
        Path(temporary).unlink(missing_ok=True)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return Stored(sha, size, created)


def staging(folder: str) -> Path:
    """A folder for a file about to be kept with ``keep_named``: beside its place on the filesystem
    (so keeping it is a rename), this host's cache otherwise."""
    place = Path(storage().path(folder)) if is_local() else _cache_root() / folder
    place.mkdir(parents=True, exist_ok=True)
    return place


def keep_named(folder: str, name: str, written: os.PathLike | str, *, replace: bool = False) -> bool:
    """Keep the local file ``written`` (made in ``staging(folder)``) under ``name`` in a ``NAMED``
    folder, durable and readable by every process before this returns. The first file kept under a
    name stays: a second writer (another worker that made the same file at the same time) gets
    False and its file is dropped. ``replace=True`` puts this file in place of a damaged one.
    Returns whether this call's file is the one kept. ``written`` is moved or removed either way."""
    if folder not in NAMED:
        raise ValueError(f"{folder!r} is named by content: use store")
    written = Path(written)
    target_key = key(folder, name)
    try:
        with written.open("rb+") as stream:
            os.fsync(stream.fileno())
        if is_local():
            target = Path(storage().path(target_key))
            target.parent.mkdir(parents=True, exist_ok=True)
            if replace:
                os.replace(written, target)
            else:
                try:
                    os.link(written, target)  # fails if a file is there: the first writer's stays
                except FileExistsError:
                    return False
            _fsync_directory(target.parent)
            return True
        if not replace and storage().exists(target_key):
            return False
        with written.open("rb") as stream:
            storage().save(target_key, File(stream, name=target_key))  # one PUT, complete on return
        cached = _cache_root() / target_key
        cached.parent.mkdir(parents=True, exist_ok=True)
        os.replace(written, cached)  # this host's copy is the file it wrote
        stat = cached.stat()
        with _CACHE_LOCK:
            _VERIFIED[str(cached)] = (stat.st_size, stat.st_mtime_ns)
        return True
    finally:
        written.unlink(missing_ok=True)


def read(folder: str, sha256: str) -> bytes:
    """The stored bytes (``FileNotFoundError`` when nothing is stored under the SHA-256)."""
    name = key(folder, sha256)
    if is_local():
        return Path(storage().path(name)).read_bytes()
    with storage().open(name, "rb") as stream:
        content = stream.read()
    if hashlib.sha256(content).hexdigest() != sha256:
        raise BlobDamaged(f"{name}: the stored bytes do not have their SHA-256")
    return content


def open_stream(folder: str, sha256: str) -> IO[bytes]:
    """The stored file open for reading (a download streams it; ``FileNotFoundError`` if absent)."""
    if is_local():
        return path(folder, sha256).open("rb")
    return _cached_copy(key(folder, sha256), sha256, must_exist=True).open("rb")


def forget(folder: str, sha256: str) -> None:
    """Remove a stored file (the caller has checked that nothing refers to it any more), and this
    host's cached copy of it."""
    name = key(folder, sha256)
    storage().delete(name)
    if not is_local():
        cached = _cache_root() / name
        with _CACHE_LOCK:
            _VERIFIED.pop(str(cached), None)
        cached.unlink(missing_ok=True)


def _cache_root() -> Path:
    return Path(settings.EVALSERVER_BLOB_CACHE_DIR)


def _cached_copy(name: str, sha256: str, must_exist: bool = False, check: bool = True) -> Path:
    """This host's copy of an object, fetched if missing and checked against its SHA-256 the first
    time this process uses it (and again whenever its size or time changes): a copy damaged on this
    disk is fetched again rather than read. ``check=False`` (a ``NAMED`` folder): only the size of
    the download is checked; the file's reader checks its content."""
    cached = _cache_root() / name
    with _CACHE_LOCK:
        if (_checked(cached, sha256) if check else cached.is_file()):
            return cached
        cached.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=cached.parent, prefix=".fetch-")
        try:
            digest = hashlib.sha256()
            with os.fdopen(handle, "wb") as output:
                try:
                    source = storage().open(name, "rb")
                except FileNotFoundError:
                    if must_exist:
                        raise
                    Path(temporary).unlink(missing_ok=True)
                    return cached  # not stored: the caller sees a path that does not exist
                with source:
                    expected_size, size = source.size, 0
                    for chunk in iter(lambda: source.read(CHUNK), b""):
                        digest.update(chunk)
                        output.write(chunk)
                        size += len(chunk)
            if check and digest.hexdigest() != sha256:
                raise BlobDamaged(f"{name}: the stored bytes do not have their SHA-256")
            if size != expected_size:
                raise BlobDamaged(f"{name}: {size:,} bytes arrived of {expected_size:,}")
            os.replace(temporary, cached)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        stat = cached.stat()
        _VERIFIED[str(cached)] = (stat.st_size, stat.st_mtime_ns)
        return cached


def _checked(cached: Path, sha256: str) -> bool:
    try:
        stat = cached.stat()
    except FileNotFoundError:
        return False
    if _VERIFIED.get(str(cached)) == (stat.st_size, stat.st_mtime_ns):
        return True
    digest = hashlib.sha256()
    with cached.open("rb") as stream:
        for chunk in iter(lambda: stream.read(CHUNK), b""):
            digest.update(chunk)
    if digest.hexdigest() != sha256:
        cached.unlink(missing_ok=True)
        return False
    _VERIFIED[str(cached)] = (stat.st_size, stat.st_mtime_ns)
    return True


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


__all__ = ["CHUNK", "FOLDERS", "NAMED", "BlobDamaged", "Stored", "exists", "forget", "is_local", "keep_named", "key",
           "open_stream", "parse_key", "path", "read", "staging", "storage", "store", "stored_keys"]
