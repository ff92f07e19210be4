"""What organisers do, as plain functions used by commands, the dashboard and the admin: create a
task, load a gold version (with its baselines), score runs again.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from scoring.kinds import KINDS
from scoring.validation import ValidationFailed, parse_json
from tasks import blobs, late
from tasks.changes import board_changed, boards_on_gold, touch_scores
from tasks.datafiles import store_gold_source
from tasks.errors import Rejected
from tasks.jobs import enqueue_scoring, send_scoring
from tasks.models import GoldVersion, Phase, Run, Task, publication_problem
from tasks.runfiles import store_run_file

log = logging.getLogger("evalserver.phases")


def phase_problems(phase: Phase) -> list[str]:
    """Every reason ``phase`` (new or edited, not saved) cannot be stored: what ``create_phase``
    and the dashboard's phase form check alike, beyond reading their input."""
    problems = []
    if phase.starts_at and phase.ends_at and phase.ends_at <= phase.starts_at:
        problems.append("ends: must be after the start")
    version = phase.gold_version if phase.gold_version_id else None
    if version is not None and phase.live_subset_size is not None and \
            not 1 <= phase.live_subset_size < version.n_items:
        problems.append(f"live subset: must be between 1 and {version.n_items - 1}")
    if min(phase.daily_quota, phase.total_quota) < 1:
        problems.append("quotas must be at least 1")
    try:
        phase.full_clean()
    except ValidationError as error:
        problems += [" ".join(messages) if field == "__all__" else f"{field}: {' '.join(messages)}"
                     for field, messages in error.message_dict.items()]
    return problems


def phase_overlaps(phase: Phase) -> list[str]:
    """Warnings for ``phase`` (new or edited): each other phase of the task that takes runs during
    part of the same time. Overlaps are allowed (a development phase may stay open beside the test
    phase), but while both are open an upload must name its phase (``phase_for_upload``), which
    participants must be told: what ``create_phase`` and the dashboard's phase form print."""
    if not phase.takes_runs or not (phase.task_id and phase.starts_at and phase.ends_at):
        return []
    others = (Phase.objects.filter(task_id=phase.task_id, starts_at__lt=phase.ends_at, ends_at__gt=phase.starts_at)
              .exclude(kind=Phase.FINAL).exclude(pk=phase.pk).order_by("starts_at"))
    return [f"the {phase.name} phase overlaps the {other.name} phase"
            f"{f' ({other.kind})' if other.name != other.kind else ''} from "
            f"{max(phase.starts_at, other.starts_at):%Y-%m-%d %H:%M} to "
            f"{min(phase.ends_at, other.ends_at):%Y-%m-%d %H:%M} UTC: while both are open, every upload must "
            "name its phase (the upload form's Phase choice, the API's phase field, the command-line client's "
            "--phase); one that names none is refused with the open phases listed. Tell participants, or let "
            "the phases follow one another"
            for other in others]


def close_submissions(phases: list[Phase], now: datetime | None = None) -> list[Phase]:
    """End these open phases now (their ``ends_at`` becomes the present moment), so that no run
    can arrive in them any more. Returns the phases that were open and are now closed.

    The end is recorded for the phase clock too (``clock_state``): the caller (``set_publication``)
    asks for the boards' statistics, and the clock's next look must not ask again for the same end."""
    now = now or timezone.now()
    closed = []
    for phase in phases:
        # Closing is for every team: the extensions given to some end too (tasks.late).
        extended = late.end_all_extensions(phase, now)
        if not phase.is_open(now):
            if extended:
                closed.append(phase)
            continue
        # A phase opened this very microsecond still ends after it starts (the database insists).
        phase.ends_at = max(now, phase.starts_at + timedelta(microseconds=1))
        phase.clock_state = "ended"
        phase.save(update_fields=["ends_at", "clock_state"])  # save(): the signals renew cached lookups and boards
        log.info("phase %s of %s closed for submissions at %s", phase.name, phase.task.slug, phase.ends_at)
        closed.append(phase)
    return closed


def set_publication(phase: Phase, publish: bool, close_first: bool = False) -> list[Phase]:
    """Publish (or withdraw) a test or final phase's results. Publication is refused while a phase
    accepts runs on the phase's gold (the test set would answer every new run with its whole-set
    and per-item scores), with the reason as ``Rejected``; ``close_first`` closes those phases
    first, in the same transaction. Returns the phases it closed."""
    if phase.kind == Phase.DEVELOPMENT:
        raise Rejected([f"The {phase.name} phase is a development phase: it has no results to publish."])
    closed: list[Phase] = []
    with transaction.atomic():
        if publish:
            now = timezone.now()
            if phase.takes_runs and phase.starts_at > now:
                raise Rejected([f"The {phase.name} phase has not started yet (it opens at "
                                f"{phase.starts_at:%Y-%m-%d %H:%M} UTC): it has no results to publish."])
            blocking = phase.open_phases_on_gold(now)
            if blocking and close_first:
                closed = close_submissions(blocking, now)
                blocking = phase.open_phases_on_gold(now)
            problem = publication_problem(phase, blocking)
            if problem:
                raise Rejected([problem], status=409)
        if phase.results_published != publish:
            phase.results_published = publish
            # save(), not update(): the signals renew the cached task lookups and the statistics.
            phase.save(update_fields=["results_published"])
            log.info("results of phase %s of %s %s", phase.name, phase.task.slug,
                     "published" if publish else "withdrawn")
        elif closed:
            # Ticked already, waiting for submissions to close: closing them makes it count. (When
            # the flag changes, its signal asks for these boards; asking twice computed them twice.)
            board_changed(phase.task, phase_ids=boards_on_gold(phase))
    return closed


def create_task(slug: str, preset: str = "", title: str = "", description: str = "", kind: str = "stc3",
                **overview: str) -> Task:
    """A new task of ``kind`` configured by one of the kind's presets (its default when empty);
    ``overview``: ``rules``, ``contact``, ``citation`` and ``terms`` for its overview page."""
    if kind not in KINDS:
        raise Rejected([f"unknown task kind {kind!r}; known kinds: {', '.join(sorted(KINDS))}"])
    implementation = KINDS[kind]
    preset = preset or implementation.default_preset
    if preset not in implementation.presets:
        raise Rejected([f"unknown preset {preset!r} for the kind {kind!r}; its presets: "
                        f"{', '.join(sorted(implementation.presets)) or 'none'}"])
    unknown = sorted(set(overview) - {"rules", "contact", "citation", "terms"})
    if unknown:
        raise TypeError(f"create_task() got unexpected fields {unknown}")
    task = Task(slug=slug, title=title or slug, description=description, kind=kind,
                config=dict(implementation.presets[preset]), **overview)
    try:
        task.full_clean()
    except ValidationError as error:
        raise Rejected([f"{field}: {' '.join(messages)}" for field, messages in error.message_dict.items()]) from None
    task.save()
    return task


def load_gold_version(task: Task, content: bytes, source_name: str = "", user: Any = None,
                      label: str = "", phases: Any = (), provenance: dict[str, Any] | None = None) -> GoldVersion:
    """Validate a gold file, store it as a new version, add its baselines and re-score runs.

    Re-scored: runs outside phases, and the runs of ``phases``, which are moved to the new
    version (a corrected test gold, say); phases bound to other versions keep theirs. Old scores
    stay, tagged with their version. ``provenance``: how the file was made (``kinds.response.extension_jobs``), kept
    with the version.
    """
    if "\x00" in label or len(label) > 100:
        raise Rejected(["label: at most 100 characters, without NUL characters"])
    gold = validated_gold(task, content)
    foreign = [phase.name for phase in phases if phase.task_id != task.pk]
    if foreign:
        raise Rejected([f"phase {name!r} belongs to another task" for name in foreign])
    # The file as uploaded: the participants' data is made from it (tasks.datafiles).
    source_sha256 = store_gold_source(content)
    try:
        return _store_gold_version(task, content, gold, source_sha256, source_name, user, label, phases,
                                   provenance or {})
    except BaseException:
        # Nothing half-written: the kept file goes with the version that was not stored.
        if not GoldVersion.objects.filter(source_sha256=source_sha256).exists():
            blobs.forget("gold", source_sha256)
        raise


def _store_gold_version(task: Task, content: bytes, gold: Any, source_sha256: str, source_name: str, user: Any,
                        label: str, phases: Any, provenance: dict[str, Any]) -> GoldVersion:
    with transaction.atomic():
        Task.objects.select_for_update().get(pk=task.pk)  # serialise version numbers per task
        number = (task.gold_versions.aggregate(Max("number"))["number__max"] or 0) + 1
        version = GoldVersion.objects.create(
            task=task, number=number, label=label, compiled=gold.to_bytes(),
            sha256=hashlib.sha256(content).hexdigest(), source_sha256=source_sha256, source_name=source_name[:255],
            n_items=len(gold.item_ids),
            measure_keys=[spec.key for spec in task.kind_impl.measures(task.kind_config, gold)],
            warnings=list(gold.warnings), created_by=user if user is not None and user.is_authenticated else None,
            provenance=provenance,
        )
        now = timezone.now()
        for phase in phases:
            previous = GoldVersion.objects.filter(pk=phase.gold_version_id).values_list("number", flat=True).first()
            rescored = Run.objects.filter(phase=phase, is_baseline=False).exclude(gold_version=version).count()
            phase.gold_version = version
            # Participants see the change (overview, run pages): their scores moved under them.
            phase.gold_changes = [*phase.gold_changes, {"from": previous, "to": number, "at": now.isoformat(),
                                                        "runs_rescored": rescored}]
            phase.save(update_fields=["gold_version", "gold_changes"])  # save(): the signals renew cached lookups
            log.info("phase %s of %s moved from gold v%s to v%s: %s run(s) scored again", phase.name, task.slug,
                     previous, number, rescored)
        create_baselines(task, version)
        rescore_task_runs(task, version)
        touch_scores(task)
        if phases:
            # Runs leave the boards of the version their phases left: every board's statistics are
            # asked for again (a scored run later asks only for the boards that show it now).
            board_changed(task)
    return version


def validated_gold(task: Task, content: bytes) -> Any:
    # What the configuration needs that this machine lacks (a spaCy pipeline, a vector table),
    # named before a gold is compiled with it or a run is scored against it.
    missing = task.kind_impl.check_resources(task.kind_config)
    if missing:
        raise Rejected(missing)
    try:
        return task.kind_impl.compile_gold(parse_json(content, "gold file"), task.kind_config)
    except ValidationFailed as error:
        raise Rejected(error.errors) from None


def create_baselines(task: Task, version: GoldVersion) -> list[Run]:
    """The baselines the task's kind builds from this gold version (DQ/ND: uniform and popularity).

    Baselines belong to their version (the popularity baseline is made from its labels): they are
    never re-scored against another one, and every board shows those of the version it shows, so
    a development board keeps its baselines when the test gold arrives.
    """
    runs = []
    for baseline in task.kind_impl.baselines(version.load(), task.kind_config):
        content = orjson.dumps(baseline.content)
        sha = store_run_file(content)
        runs.append(Run.objects.create(
            task=task, name=f"baseline-{baseline.name}-v{version.number}", description=baseline.description,
            is_baseline=True, file_sha256=sha, file_size=len(content),
            original_filename=f"baseline-{baseline.name}.json", gold_version=version,
        ))
    for run in runs:
        enqueue_scoring(run)
    return runs


def rescore_task_runs(task: Task, version: GoldVersion) -> int:
    """Queue every run of the task (outside phases bound to other versions) against ``version``;
    baselines stay with the version they were made from."""
    runs = (task.runs.filter(Q(phase__isnull=True) | Q(phase__gold_version=version), is_baseline=False)
            .exclude(gold_version=version))
    ids = list(runs.values_list("pk", flat=True))
    Run.objects.filter(pk__in=ids).update(status=Run.QUEUED, gold_version=version, errors=[], started_at=None,
                                          finished_at=None, queued_at=timezone.now())
    for run_id in ids:
        transaction.on_commit(lambda run_id=run_id: send_scoring(run_id))
    return len(ids)


def runs_to_rescore(task: Task, phase: Any = None) -> Any:
    """What "re-score every run" means, on the dashboard and in the admin alike: every run of the
    task (or of one phase) that is not withdrawn, baselines included (they are scored like runs)."""
    runs = Run.objects.filter(task=task, withdrawn_at__isnull=True)
    return runs.filter(phase=phase) if phase is not None else runs


def rescore_runs(runs: Any) -> int:
    """Score runs again against the gold version they refer to (organiser action)."""
    ids = list(runs.values_list("pk", flat=True))
    with transaction.atomic():
        Run.objects.filter(pk__in=ids).update(status=Run.QUEUED, errors=[], started_at=None, finished_at=None,
                                              queued_at=timezone.now())
        for run_id in ids:
            transaction.on_commit(lambda run_id=run_id: send_scoring(run_id))
    return len(ids)
