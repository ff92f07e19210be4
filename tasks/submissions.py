"""Submission rules: which phase an upload belongs to, quotas, run numbers (priorities), team
approval, names and descriptions, the size limit, the validation slots, and ``submit_run``, which
validates an upload completely before anything is stored. ``submission_from_request`` is the one
reading of an upload request, for the web form and the API alike.
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.urls import reverse
from django.utils import timezone

from scoring.validation import ValidationFailed
from tasks import late
from tasks.errors import Rejected
from tasks.jobs import enqueue_scoring
from tasks.models import GoldVersion, Phase, Run, Task, Team
from tasks.names import character_problems, confusable_with
from tasks.runfiles import forget_run_file, safe_filename, store_new_run_file

MAX_NAME_LENGTH = 100
MAX_DESCRIPTION_LENGTH = 5000

# Room for the other form fields and the multipart framing around the run file.
FORM_ROOM = 64 * 1024

# The web's upload page shows the join form's link in its place (templates/tasks/upload.html).
NO_TEAM = ("you are not a member of any team; join one with the join code a member sees on its team page "
           "(on the web: Join a team, /team/join/), or ask an organiser to add you to one")


def upload_size_problem(size: int, whole_request: bool = False) -> str | None:
    """The one size limit of a run upload, ``RUN_UPLOAD_MAX_BYTES``: what is wrong with a file
    of ``size`` bytes, or with a whole request of that size (the file plus ``FORM_ROOM``, checked
    by ``RequestBodyMiddleware`` before the body is read); None within the limit."""
    limit = settings.RUN_UPLOAD_MAX_BYTES
    if whole_request:
        if size > limit + FORM_ROOM:
            return f"the request of {size} bytes is over the upload limit of {limit} bytes for a run file"
        return None
    return f"file: {size} bytes is over the limit of {limit} bytes" if size > limit else None


# One semaphore per configured size, so that a test (or a settings change) gets its own.
_validation_slots: dict[int, threading.BoundedSemaphore] = {}
_validation_slots_lock = threading.Lock()
_slot_holder = threading.local()


# A body larger than this takes seconds to arrive and be parsed: such an upload that finds every
# slot taken is answered at once rather than waiting, because a waiting upload holds a thread that
# readers need (measured in benchmarks/upload_memory.py). Django keeps bodies up to this size in memory.
LARGE_UPLOAD_BYTES = 4 * 1024 * 1024


@contextmanager
def validation_slot(size_bytes: int = 0) -> Iterator[None]:
    """Hold one of the process's ``EVALSERVER_VALIDATION_SLOTS`` while a run upload is validated
    (re-entrant within a thread; ``RequestBodyMiddleware`` takes it before a large body is read).

    Receiving and validating a large file takes a core for a while and a few times its size in
    memory; a burst of uploads must not add up to more than the slots allow, nor take every
    thread from the readers of the same process. An upload of at most ``LARGE_UPLOAD_BYTES``
    waits up to ``EVALSERVER_VALIDATION_WAIT_SECONDS`` for a slot (a deadline burst of ordinary
    runs is served in turn), a larger one does not wait; refused, it gets 503 with
    ``Retry-After``, and nothing is stored, no quota is used.
    """
    if getattr(_slot_holder, "held", False):
        yield  # this thread holds a slot already
        return
    size = settings.EVALSERVER_VALIDATION_SLOTS
    with _validation_slots_lock:
        slots = _validation_slots.setdefault(size, threading.BoundedSemaphore(size))
    wait = settings.EVALSERVER_VALIDATION_WAIT_SECONDS if size_bytes <= LARGE_UPLOAD_BYTES else 0.0
    if not slots.acquire(timeout=wait):
        retry = max(5, int(wait))
        waited = f" and waited {wait:g} s for one to finish" if wait else ""
        raise Rejected([f"the server is validating {size} other upload(s){waited}; nothing was stored and no "
                        f"quota was used: please send the file again in {retry} s"], status=503, retry_after=retry)
    _slot_holder.held = True
    try:
        yield
    finally:
        _slot_holder.held = False
        slots.release()


# Phases and quotas ------------------------------------------------------------------------

def phases_of(task: Task) -> tuple[Phase, ...]:
    """Every phase of ``task`` with its gold version, earliest start first: one query, read once
    per request (``upload_context``) and filtered in Python after (a task has a handful)."""
    return tuple(task.phases.select_related("gold_version").order_by("starts_at", "pk"))


def taking_runs(phases: tuple[Phase, ...] | list[Phase], at: datetime,
                extensions: dict[int, datetime] | None = None) -> list[Phase]:
    """Those of ``phases`` (in their order) that take runs at ``at``: started, not ended, not final;
    ``extensions`` (phase id -> until, one team's: ``tasks.late``) keeps an ended phase open for that team."""
    extensions = extensions or {}
    return [phase for phase in phases if phase.takes_runs and phase.starts_at <= at
            and (at < phase.ends_at or at < extensions.get(phase.pk, at))]


def open_phases(task: Task, at: datetime | None = None) -> list[Phase]:
    """The phases of ``task`` that take runs at ``at`` (now), earliest start first."""
    return taking_runs(phases_of(task), at or timezone.now())


@dataclass(frozen=True)
class UploadContext:
    """What an upload request (and the pages and answers around it) needs to know about its
    user and task, resolved once by ``upload_context``: the user's team, the task's phases and
    those open at ``at``, and whether the user accepted the task's current terms. An upload asked
    for these piece by piece (the team and the terms three times each, the phases four times by
    the web form and six by the API: issue 38). The quota is not held here: it is counted under
    the team's lock when a run is created (``check_quota``) and again for the answer, after the
    new run (``quota_status``)."""

    task: Task
    user: Any
    team: Team | None
    phases: tuple[Phase, ...]
    terms_accepted: bool
    at: datetime
    # The team's running extensions (phase id -> until: tasks.late), and whether an organiser
    # uploads for the team (the run records it).
    extensions: dict[int, datetime] = field(default_factory=dict)
    on_behalf: bool = False

    @property
    def open_phases(self) -> list[Phase]:
        """The phases taking this team's runs now: the open ones and those its extensions keep open."""
        return taking_runs(self.phases, self.at, self.extensions)

    @property
    def waiting_for_approval(self) -> bool:
        return self.team is not None and self.task.requires_team_approval and not self.team.approved


def upload_context(task: Task, user: Any, at: datetime | None = None) -> UploadContext:
    """The context of one request of ``user`` about uploads to ``task``: three queries (team,
    phases, terms; none for the terms of a task without terms or an anonymous user's team)."""
    at = at or timezone.now()
    team, phases = participant_team(user), phases_of(task)
    return UploadContext(task, user, team, phases, task.terms_accepted_by(user), at,
                         late.active_extensions(team, phases, at))


def upload_context_for_team(task: Task, organiser: Any, team_name: str, at: datetime | None = None) -> UploadContext:
    """The context of an organiser's upload on behalf of the team ``team_name`` (its slug or
    name): the team's phases, extensions and quota; the terms are the members' to accept, not the
    organiser's. ``Rejected`` (403) for anybody who does not organise the task."""
    late.check_organiser(task, organiser)
    team = late.find_team(team_name)
    at = at or timezone.now()
    phases = phases_of(task)
    return UploadContext(task, organiser, team, phases, True, at, late.active_extensions(team, phases, at),
                         on_behalf=True)


def open_phase(task: Task, at: datetime | None = None) -> Phase | None:
    """The phase an upload that names none goes to: the only open one (None when none is open, or
    when several are, where the upload has to name one: ``phase_for_upload``)."""
    found = open_phases(task, at)
    return found[0] if len(found) == 1 else None


# How each way of uploading names a phase, for the refusals that ask for one.
PHASE_FIELD_HINT = ("name one with the upload's phase field (the form's Phase choice, the API's 'phase' field, "
                    "the command-line client's --phase)")


def phase_for_upload(context: UploadContext, requested: str | None = None) -> Phase | None:
    """The phase an upload goes to: the one it names (``requested``, exactly a phase's name), else
    the only open one. An upload that names no phase while several are open is refused, listing
    them: sent to either silently, a test-set run scored on the development gold failed with
    "not in the gold data" and cost a slot of the wrong quota (issue 43). None for a task without
    phases, which accepts runs at any time."""
    task, phases, now = context.task, context.phases, context.at
    requested = (requested or "").strip()
    if not phases:
        if requested:
            raise Rejected([f"phase: {task.slug} has no phases (it accepts runs at any time); leave the phase "
                            f"empty, not {requested!r}"])
        return None
    taking = context.open_phases
    if requested:
        phase = next((phase for phase in phases if phase.name == requested), None)
        if phase is None:
            names = ", ".join(phase.name for phase in phases)
            raise Rejected([f"phase: {task.slug} has no phase named {requested!r}; its phases are {names}"])
        if phase not in taking:
            reason = ("a final phase takes no runs" if not phase.takes_runs
                      else f"it opens at {phase.starts_at:%Y-%m-%d %H:%M} UTC" if phase.starts_at > now
                      else f"it ended at {phase.ends_at:%Y-%m-%d %H:%M} UTC")
            open_now = (f"; open now: {', '.join(other.name for other in taking)}" if taking
                        else "; no phase is open now")
            raise Rejected([f"phase: the {phase.name} phase of {task.slug} is not open for submissions ({reason})"
                            f"{open_now}"], status=403)
        return phase
    if len(taking) > 1:
        listed = "; ".join(f"{phase.name} ({phase.kind}, gold version {phase.gold_version.number}, until "
                           f"{phase.ends_at:%Y-%m-%d %H:%M} UTC)" for phase in taking)
        raise Rejected([f"phase: {len(taking)} phases of {task.slug} are open: {listed}. Nothing was stored: "
                        f"{PHASE_FIELD_HINT}"])
    if not taking:
        upcoming = next((phase for phase in phases if phase.starts_at > now), None)
        hint = (f"; the next phase, {upcoming.name}, opens at {upcoming.starts_at:%Y-%m-%d %H:%M} UTC"
                if upcoming else "; the submission period is over")
        raise Rejected([f"no phase of {task.slug} is open for submissions now{hint}"], status=403)
    return taking[0]


def day_start(at: datetime) -> datetime:
    """Midnight UTC of the day ``at`` falls in: quotas reset at the same moment for everyone."""
    return at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def counted_runs(team: Team, phase: Phase) -> Any:
    """Runs that use quota: every run created in the phase except failed ones, and except a
    withdrawn run whose file is identical to an earlier counted run of the team in the phase. A file
    that fails validation never becomes a run, so a run fails only for a reason that is not the
    team's (a changed gold, a time limit, a worker lost, a bug) and gives its slot back. Any other
    withdrawn run keeps counting (its scores were seen); an identical file sent again told the team
    nothing new, so withdrawing the later copy gives its slot back."""
    runs = Run.objects.filter(team=team, phase=phase).exclude(status=Run.FAILED)
    earlier_copy = Run.objects.filter(team=team, phase=phase, file_sha256=OuterRef("file_sha256"),
                                      pk__lt=OuterRef("pk")).exclude(status=Run.FAILED)
    return runs.exclude(Q(withdrawn_at__isnull=False) & Exists(earlier_copy))


def identical_runs(run: Run) -> list[Run]:
    """The other runs of the run's team in the same task whose file is byte for byte the same
    (the same SHA-256), oldest first. Only the team's own: other teams' files are never compared
    in anything a participant reads."""
    if run.team_id is None:
        return []
    return list(Run.objects.filter(task_id=run.task_id, team_id=run.team_id, file_sha256=run.file_sha256)
                .exclude(pk=run.pk).select_related("phase").order_by("created_at", "pk")[:20])


def identical_note(run: Run, copies: list[Run]) -> str:
    """What the team reads at upload about earlier runs with the same file: which, when, and what
    withdrawing this one does; empty when there is none."""
    earlier = [copy for copy in copies if copy.pk < run.pk]
    if not earlier:
        return ""
    named = "; ".join(f"run #{copy.pk} {copy.name!r} submitted at {copy.created_at:%Y-%m-%d %H:%M:%S} UTC"
                      f"{' (withdrawn)' if copy.is_withdrawn else ''}" for copy in earlier[:5])
    more = f" and {len(earlier) - 5} more" if len(earlier) > 5 else ""
    same_phase = any(copy.phase_id == run.phase_id and copy.status != Run.FAILED for copy in earlier)
    if run.phase_id is None:
        return f"This file is identical to {named}{more}."
    if not same_phase:
        return f"This file is identical to {named}{more}, in another phase: here it is scored on this phase's data."
    return (f"This file is identical to {named}{more}: it gets the same scores. If you did not mean to send it "
            f"again, withdraw run #{run.pk} from its page: a withdrawn copy of an earlier run of the same phase "
            "gives its quota slot back.")


def quota_numbers(team: Team, phase: Phase, at: datetime | None = None) -> dict[str, Any]:
    at = at or timezone.now()
    start = day_start(at)
    # One query for both counts: this runs under the team's lock on every upload.
    used = counted_runs(team, phase).aggregate(total=Count("pk"), daily=Count("pk", filter=Q(
        created_at__gte=start, created_at__lt=start + timedelta(days=1))))
    daily_used, total_used = used["daily"], used["total"]
    return {
        "phase": phase.name,
        "daily_limit": phase.daily_quota,
        "daily_used": daily_used,
        "daily_remaining": max(0, phase.daily_quota - daily_used),
        "total_limit": phase.total_quota,
        "total_used": total_used,
        "total_remaining": max(0, phase.total_quota - total_used),
        "daily_resets_at": (start + timedelta(days=1)).isoformat(),
        "phase_ends_at": phase.ends_at.isoformat(),
    }


def quota_status(context: UploadContext, phase: Phase | None = None) -> dict[str, Any] | None:
    """The team's quota in ``phase`` (default: the only open phase; none while several are open,
    as no upload goes to a phase it does not name then), counted now."""
    taking = context.open_phases
    phase = phase or (taking[0] if len(taking) == 1 else None)
    if context.team is None or phase is None:
        return None
    # Runs the team cannot submit yet (not approved, terms not accepted) are not "runs left":
    # submission_status says why instead.
    if context.waiting_for_approval or not context.terms_accepted:
        return None
    return quota_numbers(context.team, phase)


def submission_status(context: UploadContext) -> dict[str, Any]:
    """Whether ``user`` can submit to the task now and, if not, why: what the API's ``my-runs``
    and the upload's answer say beside the quota. A task without phases accepts runs at any time
    with no quota (``quota`` is then null, which is not "closed")."""
    task, team = context.task, context.team
    reason = ""
    if team is None:
        reason = NO_TEAM
    elif context.waiting_for_approval:
        reason = f"team {team.name!r} is waiting for an organiser's approval"
    elif not context.terms_accepted:
        reason = f"accept the terms of {task.slug} first, on its overview page"
    elif task.latest_gold() is None:
        reason = "this task has no gold data yet; runs cannot be scored"
    if reason:
        return {"open": False, "phase": None, "reason": reason}
    if not context.phases:
        return {"open": True, "phase": None, "reason": "this task has no phases: it accepts runs at any time, "
                                                       "with no quota"}
    taking = context.open_phases
    notes = late.extension_notes(team, task, context.at) if context.extensions else []
    if notes:
        # The team's extensions (tasks.late), in words: what its members read on the upload page.
        return {**_submission_status_open(context, taking), "extensions": notes}
    return _submission_status_open(context, taking)


def _submission_status_open(context: UploadContext, taking: list[Phase]) -> dict[str, Any]:
    if len(taking) > 1:
        # Open, but an upload names its phase (phase_for_upload): "phases" lists the choices.
        return {"open": True, "phase": None, "phases": [phase.name for phase in taking],
                "reason": f"{len(taking)} phases are open; {PHASE_FIELD_HINT}"}
    try:
        phase = phase_for_upload(context)
    except Rejected as rejected:
        return {"open": False, "phase": None, "reason": rejected.errors[0]}
    return {"open": True, "phase": phase.name if phase else None, "reason": ""}


def check_quota(team: Team, phase: Phase) -> None:
    """Refuse an upload past the daily or total quota. Call inside the transaction that creates the
    run, after locking the team row, so concurrent uploads are counted one after another."""
    numbers = quota_numbers(team, phase)
    if numbers["total_remaining"] <= 0:
        raise Rejected([f"quota: team {team.name!r} has used all {phase.total_quota} runs of the "
                        f"{phase.name} phase"], status=429)
    if numbers["daily_remaining"] <= 0:
        raise Rejected([f"quota: team {team.name!r} has used its {phase.daily_quota} runs for today "
                        f"(UTC); the count resets at {numbers['daily_resets_at']}"], status=429)


# Uploads ----------------------------------------------------------------------------------

def current_gold_for(task: Task, phase: Phase | None) -> GoldVersion | None:
    return phase.gold_version if phase is not None else task.latest_gold()


@dataclass(frozen=True)
class UploadForm:
    """What differs between the two ways of uploading. The web form's ``public`` is a checkbox,
    sent only when ticked; the API's is a field that defaults to public. A person at the form is
    told to choose a file, an API client which field to send it in."""

    public_when_absent: bool
    missing_file: str
    # Whether a field the upload does not take is refused by name: a script's misspelt or invented
    # field (``paper_url``) must not be dropped without a word. The web form sends our own form's
    # fields (its CSRF token, the page's buttons), so only the API checks.
    refuse_unknown: bool = False


WEB_FORM = UploadForm(public_when_absent=False, missing_file="file: choose a run file to upload")
API_FORM = UploadForm(public_when_absent=True,
                      missing_file="file: missing; send the run as a multipart field named 'file'",
                      refuse_unknown=True)

TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")
TEXT_FIELDS = ("priority", "public", "name", "description", "phase", "team")


def submission_from_request(request: Any, form: UploadForm) -> Submission:
    """The run upload a multipart request carries (a Django or a DRF request: both have ``POST``
    and ``FILES``), or ``Rejected`` listing every problem of its fields. The file's content and
    size are ``submit_run``'s to judge."""
    fields, files = request.POST, request.FILES
    errors = [f"{field}: expected a text field, got a file" for field in TEXT_FIELDS if field in files]
    if form.refuse_unknown:
        unknown = sorted({*fields.keys(), *files.keys()} - {"file", *TEXT_FIELDS})
        errors += [f"{name[:40]!r}: unknown field; an upload takes file, {', '.join(TEXT_FIELDS)}"
                   for name in unknown[:5]]
        if len(unknown) > 5:
            errors.append(f"and {len(unknown) - 5} more unknown fields")
    priority = parse_priority(fields.get("priority"), errors)
    public = str(fields.get("public", "on" if form.public_when_absent else "off")).strip().lower()
    if public not in TRUE_WORDS + FALSE_WORDS:
        errors.append("public: expected true or false")
    upload = files.get("file")
    if upload is None:
        errors.append(form.missing_file)
    if errors:
        raise Rejected(errors)
    return Submission(content=upload.read(), filename=upload.name, name=fields.get("name", ""),
                      description=fields.get("description", ""), is_public=public in TRUE_WORDS, priority=priority,
                      phase=str(fields.get("phase", "")))


def clean_text(value: str | None, field: str, max_length: int, errors: list[str], single_line: bool) -> str:
    """Normalise participant text; control, invisible and undecodable characters and over-long
    values are errors (each named with its position), not silently cut (``tasks.names``)."""
    text = unicodedata.normalize("NFC", (value or "").strip())
    errors.extend(character_problems(text, field, multi_line=not single_line))
    if len(text) > max_length:
        errors.append(f"{field}: at most {max_length} characters (got {len(text)})")
    return text


def parse_priority(raw: Any, errors: list[str]) -> int | None:
    """The NTCIR run number of a form field: empty means none; anything else must be a whole number."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    try:
        return int(raw)
    except (TypeError, ValueError):
        errors.append(f"priority: expected a whole number, got {str(raw)[:20]!r}")
        return None


@dataclass
class Submission:
    content: bytes
    filename: str = ""
    name: str = ""
    description: str = ""
    is_public: bool = True
    priority: int | None = None
    phase: str = ""  # the phase's name, or empty: the only open phase (phase_for_upload)


def submit_run(task: Task, user: Any, submission: Submission, phase: Phase | None = None,
               context: UploadContext | None = None) -> Run:
    """Validate an upload completely, store it, create the run and queue its scoring after commit.
    ``context``: the request's ``upload_context`` (resolved here when not given).

    Raises ``Rejected`` (with every problem) before anything is stored.
    """
    context = context or upload_context(task, user)
    errors: list[str] = []
    team = context.team
    if team is None:
        raise Rejected([NO_TEAM], status=403)
    if context.waiting_for_approval:
        raise Rejected([f"team {team.name!r} is waiting for an organiser's approval"], status=403)
    if task.max_team_size is not None and team.members.count() > task.max_team_size:
        raise Rejected([f"team: {task.title} allows at most {task.max_team_size} members per team and team "
                        f"{team.name!r} has {team.members.count()}; a member leaves the team (on its team page) "
                        "before it submits"], status=403)
    if not context.terms_accepted:
        raise Rejected([f"terms: accept the terms of {task.slug} first, on its overview page "
                        f"({reverse('task-overview', args=[task.slug])}); every member who submits accepts them"],
                       status=403)
    name = clean_text(submission.name, "name", MAX_NAME_LENGTH, errors, single_line=True)
    description = clean_text(submission.description, "description", MAX_DESCRIPTION_LENGTH, errors,
                             single_line=False)
    if submission.priority is not None and not 1 <= submission.priority <= 99:
        errors.append("priority: must be a whole number from 1 (primary run) to 99")
    too_large = upload_size_problem(len(submission.content))
    if too_large:
        raise Rejected([too_large], status=413)
    version = current_gold_for(task, phase)
    if version is None:
        raise Rejected(["this task has no gold data yet; runs cannot be scored"], status=409)
    if phase is not None and phase.requires_method_description and not description:
        errors.append(f"description: the {phase.name} phase requires a description of the method")
    try:
        with validation_slot(len(submission.content)):
            gold = version.load()
            # The file's shape is checked against the gold before the parser builds anything
            # (31 MB of empty objects would otherwise take a gigabyte, issue 11), and a file of
            # another kind is named as such.
            parsed = task.kind_impl.read_run_file(submission.content, gold, task.kind_config)
    except ValidationFailed as error:
        errors.extend(error.errors)
        errors.append(checked_against(context, phase, version))
        parsed = None
    if errors:
        raise Rejected(errors)
    filename = safe_filename(submission.filename)
    created_file = False
    try:
        with transaction.atomic():
            Team.objects.select_for_update().get(pk=team.pk)  # serialise this team's uploads
            if phase is not None:
                check_quota(team, phase)
            if submission.priority is not None:
                check_priority_free(task, team, phase, submission.priority)
            sha, created_file = store_new_run_file(submission.content)
            default_name = name or _filename_run_name(filename)
            check_run_name_free(task, team, default_name)
            run = Run.objects.create(
                task=task, team=team, phase=phase, submitted_by=user, name=default_name, description=description,
                priority=submission.priority, is_public=submission.is_public, file_sha256=sha,
                file_size=len(submission.content), original_filename=filename,
                parts=task.kind_impl.run_parts(parsed), gold_version=version,
                warnings=list(getattr(parsed, "warnings", [])), on_behalf=context.on_behalf,
                # After the phase's end a run arrives only under its team's extension: marked late.
                late=phase is not None and phase.ends_at <= context.at,
            )
            enqueue_scoring(run)
    except BaseException:
        # Nothing half-written: a file this request added goes if its run was not committed.
        if created_file and not Run.objects.filter(file_sha256=sha).exists():
            forget_run_file(sha)
        raise
    return run


def checked_against(context: UploadContext, phase: Phase | None, version: GoldVersion) -> str:
    """The last line of a refusal of the file's content: which gold (version, phase) it was read
    against, and the other open phases, so that a run sent to the wrong phase says so."""
    task = context.task
    if phase is None:
        return f"the file was checked against gold version {version.number} of {task.slug} (its latest)"
    others = [other for other in context.open_phases if other.pk != phase.pk]
    line = (f"the file was checked against gold version {version.number} of {task.slug}, the gold of its "
            f"{phase.name} phase ({phase.kind})")
    if others:
        listed = ", ".join(f"{other.name} (gold version {other.gold_version.number})" for other in others)
        line += f"; also open: {listed}; to send the run there, {PHASE_FIELD_HINT}"
    return line


def _filename_run_name(filename: str) -> str:
    """A run without a name is called after its file, less the characters a name may not hold."""
    stem = filename.rsplit(".", 1)[0]
    cleaned = "".join(char for char in stem if not character_problems(char, "name"))
    return cleaned.strip()[:MAX_NAME_LENGTH] or "run"


def check_run_name_free(task: Task, team: Team, name: str) -> None:
    """A run name must not be confusable with another name of the team's runs of the task
    (``Аurora-1`` with a Cyrillic А next to ``Aurora-1``); the same name again is allowed (a
    team's repeated submissions, told apart by their ids). Runs are shown as "team: run" on
    the task's boards, so only the team's own runs of that task can be mistaken for each other;
    team names are kept apart site-wide. Call under the team's row lock, like the quota."""
    names = Run.objects.filter(task=task, team=team).values_list("name", flat=True).distinct()
    other = confusable_with(name, names, identical_allowed=True)
    if other is not None:
        raise Rejected([f"name: {name!r} can be mistaken for your team's run {other!r} (Unicode confusables); "
                        "choose a name that looks different"], status=409)


def check_priority_free(task: Task, team: Team, phase: Phase | None, priority: int) -> None:
    """NTCIR run numbers are unique per team (and phase): two "primary" runs would leave the
    organisers guessing. Withdrawn and failed runs give their number back. Call under the team's
    row lock, like the quota."""
    holder = (Run.objects.filter(task=task, team=team, phase=phase, priority=priority, withdrawn_at__isnull=True)
              .exclude(status=Run.FAILED).order_by("pk").first())
    if holder is not None:
        where = f" in the {phase.name} phase" if phase is not None else ""
        raise Rejected([f"priority: your team's run {holder.name!r} (#{holder.pk}) already has priority {priority}"
                        f"{where}; choose another number, or withdraw that run first"], status=409)


def participant_team(user: Any) -> Team | None:
    if not user.is_authenticated:
        return None
    return user.teams.order_by("pk").first()
