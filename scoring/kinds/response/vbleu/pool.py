"""vBLEU's first stage: reading a dialogue pool (``read_pool``), with the progress reporting,
package versions and canonical checksums every stage shares."""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import orjson

from scoring.validation import MAX_TEXT_CHARS, Problems, quoted

MAX_POOL_PAIRS = 1_000_000
# A pool line holds two texts of at most MAX_TEXT_CHARS characters; written with JSON escapes
# (six bytes a character at worst) that is 120,000 bytes, so 256 KiB refuses only hostile lines.
MAX_LINE_BYTES = 256 * 1024
POOL_KEYS = ("utterance", "response")

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: stages ``pool`` (bytes read; total 0 when the size is unknown,
then a call every MiB),
``encode`` (distinct pool texts encoded, retrieval by embeddings or the encoder rater only),
``index`` (utterances tokenised), ``retrieve`` (items), ``rater`` (epochs; total = the most epochs),
``rate`` (references rated). Called at most about 100 times a stage, and once when a stage ends,
with ``done == total``."""


def _versions() -> dict[str, str]:
    names = ("bm25s", "scikit-learn", "numpy", "scipy", "sacrebleu")
    return {name: importlib.metadata.version(name) for name in names}


class _Reporter:
    """Calls ``progress`` about every 1% of a stage (every ``unknown_step`` while the total is unknown),
    and at its end."""

    def __init__(self, progress: Progress | None, stage: str, total: int, unknown_step: int = 1 << 20) -> None:
        self.progress, self.stage, self.total = progress, stage, total
        self.step = max(1, total // 100) if total else unknown_step
        self.next = self.step

    def __call__(self, done: int) -> None:
        if self.progress is not None and done >= self.next:
            self.next = done + self.step
            self.progress(self.stage, done, self.total)

    def end(self, done: int) -> None:
        # done = total at the end: a bar fills even when training stops early or the size was unknown.
        if self.progress is not None:
            self.progress(self.stage, done, done)


def canonical_sha256(data: object) -> str:
    """sha256 of a JSON value written canonically (sorted keys, no spaces, UTF-8)."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(eq=False)
class Pool:
    """A validated pool: utterances and responses in file order, the file line of each pair, the checksum."""

    utterances: list[str]
    responses: list[str]
    lines: np.ndarray
    sha256: str
    size: int

    def __len__(self) -> int:
        return len(self.utterances)

    def provenance(self) -> dict[str, object]:
        return {"sha256": self.sha256, "pairs": len(self), "bytes": self.size}


@contextmanager
def _binary(source: str | os.PathLike | bytes | BinaryIO) -> Iterator[tuple[BinaryIO, int]]:
    """The source as a binary stream and its size in bytes (0 when unknown)."""
    if isinstance(source, bytes | bytearray | memoryview):
        yield io.BytesIO(bytes(source)), len(source)
    elif isinstance(source, str | os.PathLike):
        path = Path(source)
        with path.open("rb") as stream:
            yield stream, path.stat().st_size
    else:
        size = getattr(source, "size", None)  # Django's UploadedFile
        yield source, size if isinstance(size, int) else 0


def _pool_text(entry: dict, key: str, where: str, problems: Problems) -> str | None:
    if key not in entry:
        problems.add(where, f"{key} is missing")
        return None
    value = entry[key]
    if not isinstance(value, str):
        problems.add(where, f"{key} must be a string, not {quoted(value)}")
    elif not value.strip():
        problems.add(where, f"{key} must not be empty")
    elif "\x00" in value:
        problems.add(where, f"{key} must not contain NUL characters")
    elif len(value) > MAX_TEXT_CHARS:
        problems.add(where, f"{key} is {len(value)} characters long; at most {MAX_TEXT_CHARS} are allowed")
    else:
        return value
    return None


def read_pool(
    source: str | os.PathLike | bytes | BinaryIO, progress: Progress | None = None, max_pairs: int = MAX_POOL_PAIRS
) -> Pool:
    """Read and validate a JSONL pool of ``{"utterance": str, "response": str}`` lines.

    ``source``: a path, the bytes, or a binary stream (read line by line, never whole). Blank
    lines are skipped; other keys are ignored. Every bad line is named (``line 12: response must
    be a string, not 3``; up to 1,000, then how many more); a line longer than ``MAX_LINE_BYTES``,
    a byte-order mark, invalid UTF-8 or JSON, a text that is not a non-empty string without NUL of
    at most ``MAX_TEXT_CHARS`` characters, more than ``max_pairs`` pairs, or none, is a problem.
    Raises ``ValidationFailed``; returns nothing from a pool with any problem.
    """
    problems = Problems()
    hasher = hashlib.sha256()
    utterances: list[str] = []
    responses: list[str] = []
    lines: list[int] = []
    pairs = 0
    read = 0
    number = 0
    with _binary(source) as (stream, size):
        report = _Reporter(progress, "pool", size)
        while True:
            line = stream.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            number += 1
            hasher.update(line)
            read += len(line)
            report(read)
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                # Skip (and hash) the rest of the line without holding it.
                while not line.endswith(b"\n"):
                    line = stream.readline(1 << 20)
                    if not line:
                        break
                    hasher.update(line)
                    read += len(line)
                pairs += 1
                problems.add(f"line {number}", f"is longer than {MAX_LINE_BYTES} bytes")
                continue
            body = line.rstrip(b"\n").rstrip(b"\r")
            if number == 1 and body.startswith(b"\xef\xbb\xbf"):
                problems.add("line 1", "starts with a UTF-8 byte-order mark; save the pool as UTF-8 without BOM")
                body = body[3:]
            if not body.strip():
                continue
            pairs += 1
            where = f"line {number}"
            try:
                entry = orjson.loads(body)
            except orjson.JSONDecodeError as error:
                try:
                    body.decode("utf-8")
                except UnicodeDecodeError as bad:
                    problems.add(where, f"is not valid UTF-8 (byte {bad.start + 1} of the line)")
                else:
                    problems.add(where, f"is not valid JSON: {error.msg} at column {error.colno}")
                continue
            if not isinstance(entry, dict):
                problems.add(where, f"must be a JSON object with \"utterance\" and \"response\", not {quoted(entry)}")
                continue
            utterance = _pool_text(entry, "utterance", where, problems)
            response = _pool_text(entry, "response", where, problems)
            # Once the pool has failed, nothing more is kept: it will not be returned.
            if utterance is not None and response is not None and not problems and pairs <= max_pairs:
                utterances.append(utterance)
                responses.append(response)
                lines.append(number)
    report.end(read)
    if pairs > max_pairs:
        problems.add("", f"the pool has {pairs} pairs; at most {max_pairs} are allowed")
    elif pairs == 0:
        problems.add("", "the pool has no utterance-response pairs")
    problems.raise_if_any()
    return Pool(utterances, responses, np.array(lines, dtype=np.int64), hasher.hexdigest(), read)
