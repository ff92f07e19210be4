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
from scoring.validation import parse_json
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


def gold_problems(task: Task, sha256: str) -> list[str]:
    """A data file whose bytes are a gold file (any version's upload or the source kept for the
    participants' data, of any task) would publish the annotations: the reason it is refused."""
    from django.db.models import Q

    found = GoldVersion.objects.filter(Q(sha256=sha256) | Q(source_sha256=sha256)).select_related("task").order_by(
        "task_id", "number")
    problems = []
    for version in found:
        which = (f"gold version {version.number}{f' ({version.label})' if version.label else ''} of this task"
                 if version.task_id == task.pk else "a gold version of another task")
        source = f", loaded from {version.source_name}" if version.source_name and version.task_id == task.pk else ""
        problems.append(f"file: these bytes are {which}{source} (SHA-256 {sha256[:12]}…): gold annotations are never "
                        "published as a data file. Participants get the items without annotations from the "
                        "participant-data.json the server makes for each phase.")
    return problems


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
    problems = gold_problems(task, sha)
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
