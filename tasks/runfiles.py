"""Run files: stored unchanged under their SHA-256 in the blob store (``tasks.blobs``), read back for
scoring and exports; and the file names people send or download, made safe in one place.

Identical files share one copy. Nothing here knows about runs' rules or scoring.
"""

from __future__ import annotations

import re
from pathlib import Path

from tasks import blobs
from tasks.models import Run
from tasks.names import character_problems


def run_file_path(sha256: str) -> Path:
    """A local file with the run's bytes (``tasks.blobs.path``: with object storage, this host's copy)."""
    return blobs.path("runs", sha256)


def forget_run_file(sha256: str) -> None:
    blobs.forget("runs", sha256)


def store_run_file(content: bytes) -> str:
    """Store the bytes unchanged under their SHA-256 (``tasks.blobs``: identical files share one copy)."""
    return store_new_run_file(content)[0]


def store_new_run_file(content: bytes) -> tuple[str, bool]:
    """``store_run_file``, and whether this call wrote the file (so that a failed upload can take
    back a file it added, and never one another run shares)."""
    stored = blobs.store("runs", content)
    return stored.sha256, stored.created


def read_run_file(run: Run) -> bytes:
    return blobs.read("runs", run.file_sha256)


def safe_filename(name: str | None) -> str:
    """The upload's own name, kept for display only: no directories, no control or invisible characters."""
    base = re.split(r"[\\/]", name or "")[-1]
    base = "".join(char for char in base if not character_problems(char, "file")).strip().lstrip(".")
    return base[:255]


def download_name(text: str, limit: int | None = None) -> str:
    """A part of a download's file name (a phase, team or run name, a measure key): letters,
    digits, ``-`` and ``_``, anything else ``_``, so that it needs no quoting in
    ``Content-Disposition`` or a zip archive; at most ``limit`` characters.

    Not ``safe_filename``: an upload's own name keeps its spaces and punctuation for display (and
    a run named after its file keeps them), which a header token must not hold.
    """
    return "".join(char if char.isalnum() or char in "-_" else "_" for char in text)[:limit]
