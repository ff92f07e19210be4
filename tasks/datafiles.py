"""A task's data section: what participants download to take part, never the gold.

Per phase (or per task, without phases) the section holds

* ``participant-data.json``: the phase's gold with every annotation, reference, rating and
  judgement removed by the task's kind (``Kind.participant_data``), made from the gold file as it
  was uploaded, which ``load_gold_version`` keeps under its SHA-256 (versions loaded before that
  have none, and say so);
* ``format.json``: the run format generated from the task's configuration
  (``Kind.format_description``), with the measures a run is scored with;
* ``sample-run.json``: a valid run of the phase's gold (``Kind.sample_run``), made without the
  annotations (the DQ/ND kind's uniform baseline, the metric kind's random metric);
* the files the organisers add (``DataFile``): guidelines, training data, scripts; a file of a
  phase follows the phase's access rule, a file of the whole task is listed in every section.

Who may download what is decided in ``tasks.access`` (``data_access``); this module only builds
and stores. Files are stored unchanged under their SHA-256, written atomically, like run files.
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import orjson
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from scoring.kinds import get_kind
from scoring.validation import ValidationFailed, parse_json
from tasks import blobs
from tasks.errors import Rejected
from tasks.models import GENERATED_DATA_FILES, DataFile, GoldVersion, Phase, Task, validate_data_file_name

PARTICIPANT_DATA, FORMAT, SAMPLE_RUN = GENERATED_DATA_FILES
log = logging.getLogger(__name__)
CHUNK = 1024 * 1024


def store_gold_source(content: bytes) -> str:
    """Keep a gold file as uploaded; its SHA-256 (``GoldVersion.source_sha256``)."""
    return blobs.store("gold", content).sha256


def chunks_of(stream: IO[bytes]) -> Iterator[bytes]:
    while chunk := stream.read(CHUNK):
        yield chunk


# What a data section holds ------------------------------------------------------------------

@dataclass(frozen=True)
class DataItem:
    """One downloadable file of a data section."""

    name: str
    title: str
    description: str
    size: int
    sha256: str
    kind: str  # "participant-data", "format", "sample-run" or "organiser"
    gold_derived: bool  # follows the phase's access rule (else: everyone who can see the task)
    data_file: DataFile | None = None

    def public(self, url: str) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "description": self.description, "size": self.size,
                "sha256": self.sha256, "kind": self.kind, "url": url}


def section_gold(task: Task, phase: Phase | None) -> GoldVersion | None:
    """The gold version whose data a section shows: the phase's, or the task's latest."""
    return phase.gold_version if phase is not None else task.latest_gold()


@functools.lru_cache(maxsize=4)
def _participant_data(source_sha256: str, kind: str, config: bytes) -> bytes:
    # Cached per process: deriving a large gold takes a moment and some memory; the key is the
    # stored file itself (versions never change) and the task's configuration.
    content = blobs.read("gold", source_sha256)
    implementation = get_kind(kind)
    parsed = parse_json(content, "gold file")
    return orjson.dumps(implementation.participant_data(parsed, implementation.config(orjson.loads(config))))


def participant_data(task: Task, version: GoldVersion) -> bytes | None:
    """The participants' data of a gold version (the kind strips every annotation), or None for
    a version loaded before gold files were kept."""
    if not version.source_sha256 or not blobs.exists("gold", version.source_sha256):
        return None
    return _participant_data(version.source_sha256, task.kind, orjson.dumps(task.config, option=orjson.OPT_SORT_KEYS))


@functools.lru_cache(maxsize=8)
def _sample_run(pk: int, kind: str, config: bytes) -> bytes | None:
    version = GoldVersion.objects.select_related("task").get(pk=pk)
    implementation = get_kind(kind)
    try:
        content = implementation.sample_run(version.load(), implementation.config(orjson.loads(config)))
    except NotImplementedError:  # a kind without baselines and without its own sample run
        return None
    return orjson.dumps(content)


def sample_run(task: Task, version: GoldVersion) -> bytes | None:
    return _sample_run(version.pk, task.kind, orjson.dumps(task.config, option=orjson.OPT_SORT_KEYS))


def format_document(task: Task) -> bytes:
    """``format.json``: the run format the task's kind generates from its configuration, the
    measures runs are scored with (direction, range, whether official) and the configuration."""
    specs = task.measure_specs()
    document = {"task": task.slug, "title": task.title, "kind": task.kind, "kind_title": task.kind_impl.title,
                "item": task.item_noun, "run_format": task.kind_impl.format_description(task.kind_config),
                "measures": [spec.public() for spec in specs], "configuration": task.config}
    return orjson.dumps(document, option=orjson.OPT_INDENT_2)


def _item(name: str, title: str, description: str, content: bytes, kind: str, gold_derived: bool) -> DataItem:
    return DataItem(name, title, description, len(content), hashlib.sha256(content).hexdigest(), kind, gold_derived)


def section_items(task: Task, phase: Phase | None) -> tuple[list[DataItem], list[str]]:
    """Every file of the section and notes on what is missing (a gold version without its file,
    no gold yet). The caller decides who may download which (``tasks.access.data_access``)."""
    notes: list[str] = []
    items = [_item(FORMAT, "Run format", "What a run file of this task looks like, the fields, an example entry "
                                         "and the measures it is scored with, made from the task's configuration.",
                   format_document(task), "format", gold_derived=False)]
    version = section_gold(task, phase)
    if version is None:
        notes.append("The organisers have not loaded gold data yet: participants' data and a sample run come "
                     "with it.")
    else:
        data = participant_data(task, version)
        if data is None and version.source_sha256:
            notes.append(f"The file of gold version {version.number} is missing from the server's storage, so its "
                         "participants' data cannot be made: the organisers have been told (loading the same file "
                         "again restores it).")
            log.error("%s: the kept gold file %s of version %s is missing", task.slug, version.source_sha256,
                      version.number)
        elif data is None:
            notes.append(f"Gold version {version.number} was loaded before the server kept gold files, so its "
                         "participants' data cannot be made here: ask the organisers, who can load the same "
                         "file again to publish it.")
        else:
            items.insert(0, _item(PARTICIPANT_DATA, "Participants' data",
                                  f"The {task.items(version.n_items)} of gold version {version.number} as "
                                  f"participants get them: every annotation, reference and judgement removed.",
                                  data, "participant-data", gold_derived=True))
        sample = sample_run(task, version)
        if sample is not None:
            items.append(_item(SAMPLE_RUN, "Sample run", f"A valid run of these {task.item_noun}s made without the "
                                                         "annotations; upload it to try the server.",
                               sample, "sample-run", gold_derived=True))
    shown = Q(phase__isnull=True) | Q(phase=phase) if phase is not None else Q(phase__isnull=True)
    files = DataFile.objects.filter(shown, task=task).select_related("phase")
    for data_file in files.order_by(F("phase_id").asc(nulls_first=True), "name"):
        # Never the gold itself: add_data_file refuses a gold file's bytes (gold_problems).
        title = "Organisers' file" + (f" for the {data_file.phase.name} phase" if data_file.phase_id else "")
        items.append(DataItem(data_file.name, title, data_file.description, data_file.size,
                              data_file.sha256, "organiser", gold_derived=data_file.phase_id is not None,
                              data_file=data_file))
    return items, notes


def item_content(task: Task, phase: Phase | None, item: DataItem) -> bytes | IO[bytes]:
    """The bytes of a generated file, or an organiser's stored file open for reading (from the
    blob store, wherever it is: the response streams it)."""
    if item.data_file is not None:
        return blobs.open_stream("data", item.data_file.sha256)
    if item.kind == "format":
        return format_document(task)
    version = section_gold(task, phase)
    content = participant_data(task, version) if item.kind == "participant-data" else sample_run(task, version)
    if content is None:  # listed a moment ago; the file is gone since (a restore without uploads)
        raise FileNotFoundError(item.name)
    return content


# Organisers' files ------------------------------------------------------------------------

def default_data_file_name(filename: str) -> str:
    """The name a file gets when the organiser gives none: its own name without directories,
    every character a data file's name may not hold as ``_`` (``rules of the game.txt`` ->
    ``rules_of_the_game.txt``), no leading dots; ``validate_data_file_name`` still judges it."""
    base = re.split(r"[\\/]", filename or "")[-1]
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", base).lstrip("._-")
    return re.sub(r"\.{2,}", ".", cleaned)[:100]


def data_file_problems(task: Task, name: str, phase: Phase | None, description: str,
                       keep_pk: int | None = None) -> list[str]:
    """Why a file cannot be listed under ``name`` in the task's data section: a name that is not
    safe (``validate_data_file_name``) or taken by another file of the task, also when only the
    case differs (files are saved side by side, on systems that ignore case too); a phase of
    another task; a description too long. ``keep_pk``: the entry being edited or replaced."""
    problems = []
    try:
        validate_data_file_name(name)
    except ValidationError as error:
        problems += [f"name: {message}" for message in error.messages]
    if phase is not None and phase.task_id != task.pk:
        problems.append(f"phase: {phase.name!r} is a phase of another task")
    if "\x00" in description or len(description) > 2000:
        problems.append("description: at most 2,000 characters, without NUL characters")
    taken = [other.name for other in DataFile.objects.filter(task=task).exclude(pk=keep_pk)
             if other.name.lower() == name.lower()]
    if taken:
        problems.append(f"name: the task has a file named {taken[0]!r} already")
    return problems


# Gold annotations in a data file ------------------------------------------------------------
#
# A data file may not hold the annotations of any item of a gold version that is still secret
# (``tasks.access.gold_is_secret``), of this task or another: compared by content, through each
# kind's ``hidden_annotations``, so that the gold re-indented, with its keys in another order,
# compressed, inside a training file or cut down to one item is found as surely as its bytes.

# Archives inside archives are unpacked this deep; the members of all of them counted together.
ARCHIVE_DEPTH = 3
MAX_ARCHIVE_MEMBERS = 10_000
IDS_NAMED = 3


class Unreadable(Exception):
    """A data file the guard cannot read through (a bomb, a damaged or encrypted archive): refused,
    since what cannot be checked could hold the gold."""


@dataclass
class _Budget:
    left: int
    members: int = MAX_ARCHIVE_MEMBERS

    def take(self, stream: IO[bytes], what: str) -> bytes:
        # Never more than the budget plus one byte is decompressed: a bomb stops there.
        content = stream.read(self.left + 1)
        if len(content) > self.left:
            limit = settings.EVALSERVER_DATA_FILE_MAX_BYTES
            raise Unreadable(f"unpacked, {what} holds more than {limit:,} bytes, the largest data file accepted "
                             "(EVALSERVER_DATA_FILE_MAX_BYTES): the server reads every file it publishes for gold "
                             "annotations, so an archive may hold at most that much")
        self.left -= len(content)
        return content

    def member(self, what: str) -> None:
        self.members -= 1
        if self.members < 0:
            raise Unreadable(f"{what} holds more than {MAX_ARCHIVE_MEMBERS:,} files")


def _compression(content: bytes) -> str:
    if content[:2] == b"\x1f\x8b":
        return "gzip"
    if content[:3] == b"BZh":
        return "bzip2"
    if content[:6] == b"\xfd7zXZ\x00":
        return "xz"
    if content[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if content[257:262] == b"ustar":
        return "tar"
    return ""


def unpacked(name: str, content: bytes, budget: _Budget | None = None, depth: int = 0) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of every file a data file holds: itself, or what its gzip, bzip2, xz, zip
    or tar compression holds (archives in archives up to ``ARCHIVE_DEPTH``), at most
    ``EVALSERVER_DATA_FILE_MAX_BYTES`` unpacked in all; ``Unreadable`` otherwise."""
    import bz2
    import gzip
    import lzma
    import tarfile
    import zipfile

    budget = budget if budget is not None else _Budget(settings.EVALSERVER_DATA_FILE_MAX_BYTES)
    kind = _compression(content)
    if not kind or depth >= ARCHIVE_DEPTH:
        yield name, content
        return
    try:
        if kind in ("gzip", "bzip2", "xz"):
            raw = io.BytesIO(content)
            stream = (gzip.GzipFile(fileobj=raw) if kind == "gzip" else bz2.BZ2File(raw) if kind == "bzip2"
                      else lzma.LZMAFile(raw))
            with stream:
                inner = budget.take(stream, name)
            yield from unpacked(re.sub(r"\.(gz|bz2|xz|tgz)$", "", name) or name, inner, budget, depth + 1)
        elif kind == "zip":
            with zipfile.ZipFile(io.BytesIO(content)) as archive:
                for info in archive.infolist():
                    if info.is_dir():
                        continue
                    budget.member(name)
                    if info.flag_bits & 0x1:
                        raise Unreadable(f"{info.filename} in {name} is encrypted: the server cannot read it "
                                         "for gold annotations")
                    with archive.open(info) as stream:
                        inner = budget.take(stream, f"{info.filename} in {name}")
                    yield from unpacked(f"{name}/{info.filename}", inner, budget, depth + 1)
        else:
            with tarfile.open(fileobj=io.BytesIO(content), mode="r:") as archive:
                for member in archive:
                    if not member.isfile():
                        continue
                    budget.member(name)
                    stream = archive.extractfile(member)
                    inner = budget.take(stream, f"{member.name} in {name}") if stream is not None else b""
                    yield from unpacked(f"{name}/{member.name}", inner, budget, depth + 1)
    except Unreadable:
        raise
    except (OSError, EOFError, ValueError, lzma.LZMAError, zipfile.BadZipFile, tarfile.TarError,
            NotImplementedError, RuntimeError) as error:
        raise Unreadable(f"{name} looks like a {kind} file but cannot be unpacked ({error}): the server reads "
                         "every file it publishes for gold annotations and cannot read this one") from None


def json_documents(content: bytes) -> Iterator[object]:
    """The JSON a file holds: the whole file as one document, or else each line of a JSON Lines
    file that is one; nothing for a file that is not JSON (a PDF, a script)."""
    content = content.removeprefix(b"\xef\xbb\xbf")
    if content.lstrip()[:1] not in (b"[", b"{"):
        return
    try:
        yield parse_json(content, "data file")
        return
    except ValidationFailed:
        pass
    for line in content.splitlines():
        if line.lstrip()[:1] in (b"[", b"{"):
            try:
                yield parse_json(line, "line")
            except ValidationFailed:
                continue


def _objects(document: object) -> Iterator[dict[str, Any]]:
    """Every object anywhere in a JSON document (without recursion: nesting is unbounded)."""
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            yield value
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


@functools.lru_cache(maxsize=16)
def _gold_records(source_sha256: str, kind: str, config: bytes) -> dict[str, str]:
    """Every hidden annotation of a kept gold file: record -> the id of the item it belongs to."""
    implementation = get_kind(kind)
    parsed = parse_json(blobs.read("gold", source_sha256), "gold file")
    task_config = implementation.config(orjson.loads(config))
    return {record: item_id for entry in (parsed if isinstance(parsed, list) else [])
            if isinstance(entry, dict) for item_id, record in implementation.hidden_annotations(entry, task_config)}


def _secret_versions() -> list[GoldVersion]:
    from tasks.access import gold_is_secret

    phases: dict[int, list[Phase]] = {}
    for phase in Phase.objects.all():
        phases.setdefault(phase.task_id, []).append(phase)
    now = timezone.now()
    return [version for version in GoldVersion.objects.select_related("task").order_by("task_id", "number")
            if gold_is_secret(phases.get(version.task_id, []), version.pk, now)]


def _which(task: Task, version: GoldVersion) -> str:
    if version.task_id != task.pk:
        return "a gold version of another task"
    label = f" ({version.label})" if version.label else ""
    source = f", loaded from {version.source_name}" if version.source_name else ""
    return f"gold version {version.number}{label} of this task{source}"


def gold_problems(task: Task, name: str, content: bytes) -> list[str]:
    """Why a data file may not be published: it holds the annotations of items of a gold version
    that is still secret (``tasks.access.gold_is_secret``) of this or another task (whatever its
    formatting, key order or compression, among other items or as a single one), or it cannot be
    read through (``Unreadable``). A version kept without its file (loaded before gold files were
    kept) is recognised by its bytes only."""
    sha256 = hashlib.sha256(content).hexdigest()
    secret = _secret_versions()
    problems = []
    for version in secret:
        if sha256 in (version.sha256, version.source_sha256):
            problems.append(f"file: these bytes are {_which(task, version)} (SHA-256 {sha256[:12]}…): {NEVER}")
    if problems:
        return problems
    try:
        files = list(unpacked(name, content))
    except Unreadable as error:
        return [f"file: {error}"]
    found_by_task: dict[int, set[str]] = {}
    for version in secret:
        if not version.source_sha256 or not blobs.exists("gold", version.source_sha256):
            continue
        if version.task_id not in found_by_task:
            kind, config = version.task.kind_impl, version.task.kind_config
            found_by_task[version.task_id] = {record for _, inner in files for document in json_documents(inner)
                                              for entry in _objects(document) if "id" in entry
                                              for _, record in kind.hidden_annotations(entry, config)}
        records = _gold_records(version.source_sha256, version.task.kind,
                                orjson.dumps(version.task.config, option=orjson.OPT_SORT_KEYS))
        leaked = sorted({records[record] for record in found_by_task[version.task_id] if record in records})
        if leaked:
            items = version.task.items(len(leaked))
            more = f" and {len(leaked) - IDS_NAMED:,} more" if len(leaked) > IDS_NAMED else ""
            # Another task's ids are its organisers' business: only how many.
            named = f" ({', '.join(leaked[:IDS_NAMED])}{more})" if version.task_id == task.pk else ""
            problems.append(f"file: holds the hidden annotations of {items}{named} of {_which(task, version)}: "
                            f"{NEVER} It may be published once every phase on that gold has ended with its results "
                            "published.")
    return problems


def stored_file_problems(data_file: DataFile) -> list[str]:
    """``gold_problems`` of a file already in a data section (added before the guard compared
    content, or before a gold version that it holds was loaded): what the organisers' dashboard
    and ``check_data_files`` show. Kept in the cache until the file or the secret gold changes."""
    from django.core.cache import cache

    secret = _secret_versions()
    state = orjson.dumps([[version.pk, version.source_sha256, version.task.config] for version in secret],
                         option=orjson.OPT_SORT_KEYS)
    key = f"data-file-gold:{data_file.task_id}:{data_file.sha256}:{hashlib.sha256(state).hexdigest()[:32]}"
    problems = cache.get(key)
    if problems is None:
        try:
            content = blobs.read("data", data_file.sha256)
        except FileNotFoundError:
            return []  # nothing left to publish; the data page says the file is missing
        problems = gold_problems(data_file.task, data_file.name, content)
        cache.set(key, problems, timeout=None)
    return problems


def remove_data_file(data_file: DataFile) -> None:
    """Take a file out of the task's data section: its stored copy goes once no entry shares it
    (``tasks.signals``); the caller records who removed it (``tasks.access.log_access``)."""
    with transaction.atomic():
        data_file.delete()


NEVER = ("gold annotations are never published as a data file. Participants get the items without annotations "
         "from the participant-data.json the server makes for each phase.")


def store_data_content(stream: IO[bytes]) -> tuple[str, int]:
    """Store an organiser's file (at most ``EVALSERVER_DATA_FILE_MAX_BYTES``); (sha256, size)."""
    stored = blobs.store("data", chunks_of(stream), max_bytes=settings.EVALSERVER_DATA_FILE_MAX_BYTES,
                         limit=("data file", "EVALSERVER_DATA_FILE_MAX_BYTES"))
    return stored.sha256, stored.size


def add_data_file(task: Task, name: str, stream: IO[bytes], phase: Phase | None = None, description: str = "",
                  user: Any = None, replace: bool = False) -> DataFile:
    """Store an organiser's file in the task's data section (of ``phase``, or of the whole task),
    or ``Rejected`` naming every problem (``data_file_problems``; a file over the size limit).
    With ``replace``, a file of exactly that name is replaced (content, phase and description)."""
    replaced = DataFile.objects.filter(task=task, name=name).first() if replace else None
    problems = data_file_problems(task, name, phase, description, replaced.pk if replaced is not None else None)
    if problems:
        if not replace and any(problem.startswith("name: the task has a file named") for problem in problems):
            problems.append("name: pass replace (--replace) to put the new file in the place of the old one")
        raise Rejected(problems)
    sha, size = store_data_content(stream)
    problems = gold_problems(task, name, blobs.read("data", sha))
    if problems:
        forget_unused_blob(sha)
        raise Rejected(problems)
    uploader = user if user is not None and user.is_authenticated else None
    try:
        with transaction.atomic():
            if replaced is not None:
                old_sha = replaced.sha256
                for field, value in (("phase", phase), ("description", description), ("sha256", sha),
                                     ("size", size), ("uploaded_by", uploader), ("uploaded_at", timezone.now())):
                    setattr(replaced, field, value)
                replaced.save()
                transaction.on_commit(lambda: forget_unused_blob(old_sha))
                return replaced
            return DataFile.objects.create(task=task, phase=phase, name=name, description=description,
                                           sha256=sha, size=size, uploaded_by=uploader)
    except IntegrityError:  # the same name, added a moment ago by someone else
        forget_unused_blob(sha)
        raise Rejected([f"name: the task has a file named {name!r} already"], status=409) from None


def forget_unused_blob(sha256: str) -> None:
    """Remove a stored organiser's file that no ``DataFile`` refers to any more."""
    if not DataFile.objects.filter(sha256=sha256).exists():
        blobs.forget("data", sha256)
