"""Who may see what: one place for the rules every view and API endpoint follows.

Boards: every path that builds or serves a board or anything derived from one (task page,
leaderboard JSON and CSV, statistics and their exports, run pages, the participant API, the
organiser exports) resolves the request with ``board_access`` (user, task, ``?phase=``) and
builds with ``board_rule`` (which scope a board shows, and whether it is hidden); a run's own
scores follow the same rule (``visible_score``).

Run pages (the page, its CSV and details, its file and links) resolve their reader once with
``read_run_page`` and pass the ``Reader`` on in place of the user.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.http import Http404, HttpRequest
from django.utils import timezone

from evalserver.clientip import client_ip
from tasks.models import AccessLog, Phase, Run, Score, Task

TEST_KINDS = (Phase.TEST, Phase.FINAL)


@dataclass(frozen=True)
class Reader:
    """Who reads one task's runs in one request, resolved once (``reader_of``): whether they
    organise the task, which teams they belong to, the task's phases, and how they read the run a
    page shows (``OWN`` or ``PUBLIC``; empty elsewhere). Every function here that takes a ``user``
    takes a Reader as well and answers from it: a run page asked the database whether its reader
    organises the task eight times and whether they are of the run's team four times (issue 38)."""

    user: Any
    task_id: int
    organiser: bool
    team_ids: frozenset[int]
    phases: list[Phase]
    role: str = ""
    # A PUBLIC page's reader reads as anybody; ``real`` keeps who they are, resolved once, for what
    # the page offers beside the run (a comparison with their own team's runs).
    real: Reader | None = None


def reader_of(user: Any, task: Task, phases: list[Phase] | None = None, role: str = "") -> Reader:
    """The reader ``user`` of ``task``'s runs: three queries at most (organisers, teams, phases)."""
    team_ids = frozenset(user.teams.values_list("pk", flat=True)) if user.is_authenticated else frozenset()
    return Reader(user, task.pk, task.is_organiser(user), team_ids,
                  task_phases(task.pk) if phases is None else phases, role)


def is_organiser(user: Any, task: Task) -> bool:
    if isinstance(user, Reader):
        return user.organiser if user.task_id == task.pk else task.is_organiser(user.user)
    return task.is_organiser(user)


def is_member(user: Any, run: Run) -> bool:
    if isinstance(user, Reader):
        return bool(run.team_id) and run.team_id in user.team_ids
    return bool(user.is_authenticated and run.team_id and run.team.members.filter(pk=user.pk).exists())


def get_run_for_user(user: Any, run_id: int) -> Run:
    """The run if the user's team owns it or the user organises its task; 404 otherwise (even for
    runs that exist, so nobody learns which ids belong to other teams)."""
    run = Run.objects.select_related("task", "team", "phase", "gold_version").filter(pk=run_id).first()
    if run is None or not (is_member(user, run) or is_organiser(user, run.task)):
        raise Http404("no such run")
    return run


def get_task_for_user(user: Any, slug: str) -> Task:
    # A slug from a query or form (not the URL's slug converter) may hold a NUL, which
    # PostgreSQL refuses in a query: no task has one.
    task = None if "\x00" in slug else Task.objects.filter(slug=slug).first()
    if task is None or not (task.is_public or is_organiser(user, task)):
        raise Http404("no such task")
    return task


def task_phases(task_id: int) -> list[Phase]:
    """Every phase of a task (a handful); callers that look at many runs of one task pass the
    list on to ``visible_score`` and ``may_see_per_item`` so that it is read once."""
    return list(Phase.objects.filter(task_id=task_id))


def test_phases_on(phases: list[Phase], gold_version_id: int | None) -> list[Phase]:
    """The test and final phases that use this gold version: scores on it are scores on *test data*."""
    return [phase for phase in phases if phase.kind in TEST_KINDS and gold_version_id is not None
            and phase.gold_version_id == gold_version_id]


def accepting_runs_on(phases: list[Phase], gold_version_id: int | None, now: datetime | None = None) -> list[Phase]:
    """The phases that accept runs now and are scored against this gold version."""
    now = now or timezone.now()
    return [phase for phase in phases if phase.takes_runs and gold_version_id is not None
            and phase.gold_version_id == gold_version_id and phase.starts_at <= now < phase.closes_at]


def publication_counts(phases: list[Phase], phase: Phase, now: datetime | None = None) -> bool:
    """Whether a phase's published results are shown: ticked, and no phase accepts runs on its
    gold now. A publication ticked while runs can still arrive (in the admin, or a phase whose
    end was moved later) would answer every new run with its whole-test-set and per-item scores,
    so it waits until submissions on that gold have closed."""
    now = now or timezone.now()
    if phase.takes_runs and phase.closes_at > now:
        # A test phase's results are its runs' once it has ended (a team's extension included: tasks.late).
        return False
    return phase.published_at(now) and not accepting_runs_on(phases, phase.gold_version_id, now)


def test_results_hidden(phases: list[Phase], gold_version_id: int | None) -> bool:
    """Whether scores on this gold version are test data whose results are not published yet
    (by any test or final phase that uses it, while no phase accepts runs on it)."""
    tests = test_phases_on(phases, gold_version_id)
    return bool(tests) and not any(publication_counts(phases, phase) for phase in tests)


def gold_is_secret(phases: list[Phase], gold_version_id: int, now: datetime | None = None) -> bool:
    """Whether a gold version's annotations are still hidden, so that no data file may hold them
    (``tasks.datafiles.gold_problems``): until every phase on it has ended with its results
    published (``publication_counts``; a development phase's box ticked by the organisers, their
    deliberate release of a development gold). A version no phase uses stays hidden (a test gold
    loaded before its phase is made; a version a phase has moved away from)."""
    now = now or timezone.now()
    on = [phase for phase in phases if phase.gold_version_id == gold_version_id]
    return not on or not all(phase.closes_at <= now and publication_counts(phases, phase, now) for phase in on)


def _test_phases(run: Run, phases: list[Phase] | None) -> list[Phase]:
    """The test and final phases whose gold the run is scored against, and the run's own phase
    if it is one: the run's scores are then scores on *test data*."""
    if phases is None:
        phases = task_phases(run.task_id)
    found = test_phases_on(phases, run.gold_version_id)
    if run.phase_id and run.phase.kind in TEST_KINDS and all(phase.pk != run.phase_id for phase in found):
        found.append(run.phase)
    return found


def on_test_data(run: Run, phases: list[Phase] | None = None) -> bool:
    return bool(_test_phases(run, phases))


def test_results_published(run: Run, phases: list[Phase] | None = None) -> bool:
    """Whether the organisers have published the results on the test data the run is scored
    against: ticked on its test phase, or on a final phase over the same gold, and no phase
    accepts runs on that gold any more (``publication_counts``)."""
    if phases is None:
        phases = task_phases(run.task_id)
    return any(publication_counts(phases, phase) for phase in _test_phases(run, phases))


def visible_score(run: Run, user: Any, phases: list[Phase] | None = None) -> Score | None:
    """The score a user may see for a run. Organisers see the score on the whole set; everybody
    else the scope the run's board shows (``board_rule``): on test data whose results are not
    published, the live-subset score of a test phase that has one, and nothing for a run scored
    against such a gold outside that phase (a run from before the phases, re-scored when the test
    gold was loaded)."""
    scope = visible_scope(run, user, phases)
    if scope is None:
        return None
    # Per-item details (nugget scores: megabytes for a large run) are read only where shown.
    return run.scores.filter(gold_version_id=run.gold_version_id, scope=scope).defer("details").first()


def visible_scope(run: Run, user: Any, phases: list[Phase] | None = None) -> str | None:
    """Which of a run's scores ``visible_score`` shows this user (``Score.FULL`` or ``Score.LIVE``),
    without reading a score: None where it shows none. Lists of runs (a comparison's chooser) ask
    it of each run without a query per run."""
    if run.status != Run.DONE or run.gold_version_id is None:
        return None
    if is_organiser(user, run.task):
        return Score.FULL
    if phases is None:
        phases = task_phases(run.task_id)
    own = run.phase if run.phase_id and run.phase.gold_version_id == run.gold_version_id else None
    if own is not None:
        scope, hidden = board_rule(phases, own, organiser=False)
        return None if hidden else scope
    return shown_scope(phases, run.gold_version_id, live_subset=False)


# Run pages --------------------------------------------------------------------------------------

OWN, PUBLIC = "own", "public"


def scores_public(phases: list[Phase], phase: Phase | None, gold_version_id: int | None) -> bool:
    """Whether runs of ``phase`` (None: outside phases, or a baseline) scored against this gold
    version may have public pages: the gold is no test data (no test or final phase uses it, and
    the phase is not a test phase), or the results on it are published and count
    (``publication_counts``: no phase accepts runs on that gold any more). A board and a single
    run ask the same question here, so a board row links to a run page exactly when it opens."""
    if gold_version_id is None:
        return False
    tests = test_phases_on(phases, gold_version_id)
    if phase is not None and phase.kind in TEST_KINDS and all(test.pk != phase.pk for test in tests):
        tests.append(phase)
    return not tests or any(publication_counts(phases, test) for test in tests)


def run_is_public(run: Run, phases: list[Phase] | None = None) -> bool:
    """Whether anybody, signed in or not, may open the run's page: a scored run of a public task
    shown on its public board (not hidden by its team, not withdrawn), whose scores are public
    (``scores_public``). Before that only its team and the task's organisers may."""
    if not run.task.is_public or run.status != Run.DONE or run.is_withdrawn:
        return False
    if not (run.is_public or run.is_baseline):
        return False
    if phases is None:
        phases = task_phases(run.task_id)
    return scores_public(phases, run.phase if run.phase_id else None, run.gold_version_id)


def read_run_page(user: Any, run_id: int) -> tuple[Run, Reader]:
    """The run and its reader: ``OWN`` for its team's members and the task's organisers
    (everything, as before publication), ``PUBLIC`` for anybody else once ``run_is_public``; 404
    otherwise, the same answer as for an id that does not exist (a withdrawn, hidden or unpublished
    run does not tell that it exists). A ``PUBLIC`` reader reads as anybody does, signed in or not:
    the page is the same for every reader who is not of the team."""
    run = Run.objects.select_related("task", "team", "phase", "gold_version").filter(pk=run_id).first()
    if run is None:
        raise Http404("no such run")
    reader = reader_of(user, run.task)
    if is_member(reader, run) or reader.organiser:
        return run, replace(reader, role=OWN)
    if run_is_public(run, reader.phases):
        return run, Reader(AnonymousUser(), run.task_id, False, frozenset(), reader.phases, PUBLIC, real=reader)
    raise Http404("no such run")


def public_per_item_score(run: Run, phases: list[Phase]) -> Score | None:
    """The score whose per-item values a public run page shows: where the run's team sees them
    (``may_see_per_item``: on test data once published, in a development phase if it gives
    per-item feedback), for a run that is public (``run_is_public``)."""
    if not public_per_item_allowed(run, phases):
        return None
    return run.scores.filter(gold_version_id=run.gold_version_id, scope=Score.FULL).select_related(
        "gold_version").first()


def public_per_item_allowed(run: Run, phases: list[Phase]) -> bool:
    """``public_per_item_score``'s rule without reading the score."""
    if not run_is_public(run, phases):
        return False
    if not on_test_data(run, phases) and run.phase_id and not (run.phase.per_item_feedback
                                                               or run.phase.results_published):
        return False
    return matrices_allowed(phases, run.gold_version_id, organiser=False)


def readable_per_item(run: Run, user: Any, role: str, phases: list[Phase]) -> Score | None:
    """The per-item score a run page, its CSV and its details show to this reader."""
    if role == OWN:
        return per_item_score(run, user, phases)
    return public_per_item_score(run, phases)


def run_role(reader: Reader, run: Run) -> str:
    """How ``reader`` reads ``run``: ``OWN`` (its team, the task's organisers), ``PUBLIC`` (anybody
    else, where ``run_is_public``) or "" (not at all): ``read_run_page``'s rule for a run of a
    list, from a Reader resolved once."""
    if is_member(reader, run) or reader.organiser:
        return OWN
    return PUBLIC if run_is_public(run, reader.phases) else ""


def readable_per_item_scope(run: Run, reader: Reader, phases: list[Phase]) -> str | None:
    """The scope of the score ``readable_per_item`` gives this reader for ``run`` (None: none), without
    reading it: the same rules (``may_see_per_item`` and ``visible_scope`` for the run's team and the
    organisers, ``public_per_item_allowed`` for anybody else)."""
    role = run_role(reader, run)
    if role == OWN:
        if run.status != Run.DONE or not may_see_per_item(run, reader, phases):
            return None
        return visible_scope(run, reader, phases)
    if role == PUBLIC and public_per_item_allowed(run, phases):
        return Score.FULL
    return None


def log_access(request: HttpRequest, task: Task, what: str) -> None:
    """Record who read gold-derived data (exports, matrices, per-item test scores before
    publication) or changed what the public sees: the organisers' access log."""
    AccessLog.objects.create(user=request.user if request.user.is_authenticated else None, task=task,
                             what=what[:200], ip_address=client_ip(request))


def may_see_per_item(run: Run, user: Any, phases: list[Phase] | None = None) -> bool:
    """Organisers always; otherwise only the run's own team, and on test data only once the
    results are published (whatever a test phase's per-item feedback box says); in a
    development phase, if the phase gives per-item feedback."""
    if is_organiser(user, run.task):
        return True
    if not is_member(user, run):
        return False
    if on_test_data(run, phases):
        return test_results_published(run, phases)
    phase = run.phase
    return phase is None or phase.per_item_feedback or phase.results_published


def may_see_references(run: Run, user: Any, phases: list[Phase] | None = None) -> bool:
    """Whether a run page may show, beside the per-item feedback, the gold's references each item
    was scored against: organisers always; the run's team where it may see per-item scores and
    the run's phase has ended (while a phase takes runs, its references would let a team fit its
    runs to the gold). Outside phases the gold stays with the organisers."""
    if is_organiser(user, run.task):
        return True
    if run.phase is None or not may_see_per_item(run, user, phases):
        return False
    return run.phase.closes_at <= timezone.now()  # a team's extension keeps the references back too


def references_rule(run: Run, user: Any, role: str, phases: list[Phase] | None = None) -> tuple[bool, str]:
    """Whether a run page shows this reader the references each item was scored against and, if
    not, who sees them, in words for the reader: ``may_see_references`` for the run's team and
    the organisers (``OWN``), never on a public page (the gold's text stays off it)."""
    if role == OWN and may_see_references(run, user, phases):
        return True, ""
    phase = run.phase if run.phase_id else None
    if phase is None:
        return False, ("the references it was scored against stay with the task's organisers: this run belongs "
                       "to no phase")
    ends = f"the {phase.name} phase ends, at {phase.closes_at:%Y-%m-%d %H:%M} UTC"
    ended = phase.closes_at <= timezone.now()
    if role != OWN:
        who = ("the run's team and the task's organisers" if ended
               else f"the task's organisers and, once {ends}, to the run's team")
        return False, f"the references it was scored against are shown to {who}, not on this public page"
    if not ended:
        return False, (f"the references it was scored against are shown to your team once {ends}; until then "
                       "only to the task's organisers")
    # The phase has ended, yet the team may not see per-item scores (test data not published yet).
    return False, (f"the references it was scored against are shown to your team once the results of the "
                   f"{phase.name} phase are published")


def per_item_score(run: Run, user: Any, phases: list[Phase] | None = None) -> Score | None:
    """The score whose per-item values a user may see for a run (its run page's per-item table and
    CSV, a comparison with another run): ``may_see_per_item`` and then ``visible_score``."""
    if run.status != Run.DONE or not may_see_per_item(run, user, phases):
        return None
    return visible_score(run, user, phases)


def per_item_is_logged(run: Run, phases: list[Phase] | None = None) -> bool:
    """Whether reading a run's per-item scores goes to the access log: gold-derived data of test
    data whose results are not published (only organisers may read them then)."""
    return on_test_data(run, phases) and not test_results_published(run, phases)


# Boards --------------------------------------------------------------------------------------

FINAL_HIDDEN = "The organisers have not published the final results yet."
FINAL_WAITING = ("The organisers have published the final results, but a phase still accepts runs on the same "
                 "test set: they are shown once its submissions close.")
TEST_DATA_HIDDEN = ("This board's gold is test data whose results are not published yet: its runs' scores "
                    "stay with the organisers until then.")


def shown_scope(phases: list[Phase], gold_version_id: int | None, live_subset: bool) -> str | None:
    """Which scores on this gold version a participant or the public may see: the whole set,
    unless it is test data whose results are not published; then the live subset where the board
    has one, nothing where another board on the same gold has one (its whole-set scores would give
    the live subset away), and the whole set where no board on that gold has a live subset."""
    if not test_results_hidden(phases, gold_version_id):
        return Score.FULL
    if live_subset:
        return Score.LIVE
    if any(phase.live_subset_size for phase in test_phases_on(phases, gold_version_id)):
        return None
    return Score.FULL


def not_started_reason(phases: list[Phase], now: datetime | None = None) -> str:
    upcoming = min((phase for phase in phases if phase.starts_at > (now or timezone.now())),
                   key=lambda phase: phase.starts_at, default=None)
    when = f": the first, {upcoming.name}, opens at {upcoming.starts_at:%Y-%m-%d %H:%M} UTC" if upcoming else ""
    return f"No phase of this task has started yet{when}. Its leaderboard appears then."


def board_rule(phases: list[Phase], phase: Phase | None, organiser: bool) -> tuple[str, str]:
    """The scope (``Score.FULL`` or ``Score.LIVE``) a board shows and, if it shows no run, why.

    ``phase`` None is the phase-less board of a task without phases. A task with phases never
    shows it, to anybody: it would list every run on the latest gold, scored on the whole set
    (on a test gold, the very scores a test phase keeps back). Organisers see the final board
    before publication, and any board whose scores are kept from the public; otherwise they see
    the scope the public sees (a test board's live subset), with the hidden runs.
    """
    if phase is None:
        return Score.FULL, (not_started_reason(phases) if phases else "")
    if phase.kind == Phase.FINAL:
        if not publication_counts(phases, phase) and not organiser:
            return Score.FULL, (FINAL_WAITING if phase.published_at() else FINAL_HIDDEN)
        return Score.FULL, ""  # the final board is the whole test set (only organisers see it early)
    scope = shown_scope(phases, phase.gold_version_id, bool(phase.live_subset_size))
    if scope is None:
        return Score.FULL, ("" if organiser else TEST_DATA_HIDDEN)
    return scope, ""


PREVIEW_DEVELOPMENT = "A development phase has no final results: its board is public already."


def preview_phase(phases: list[Phase]) -> Phase | None:
    """The phase a preview of final results shows without ``?phase=``: the latest final phase,
    else the latest test phase; None if the task has neither."""
    for kinds in ((Phase.FINAL,), (Phase.TEST,)):
        found = [phase for phase in phases if phase.kind in kinds]
        if found:
            return max(found, key=lambda phase: phase.starts_at)
    return None


def preview_rule(phase: Phase | None) -> tuple[str, str]:
    """The scope of an organiser's preview of a phase's results and, if it shows none, why: the
    whole test set of a test or final phase, as the public sees it once the results are published
    (whether they are yet or not). Only organisers may see a preview (``get_preview``)."""
    if phase is None:
        return Score.FULL, "This task has no test or final phase: there are no final results to preview."
    if phase.kind not in TEST_KINDS:
        return Score.FULL, PREVIEW_DEVELOPMENT
    return Score.FULL, ""


def matrices_allowed(phases: list[Phase], gold_version_id: int | None, organiser: bool) -> bool:
    """Per-dialogue matrices (and so every per-dialogue score) of a board's gold: organisers, or
    anyone once that gold is not test data with unpublished results (whichever board shows it)."""
    return organiser or not test_results_hidden(phases, gold_version_id)


def default_phase(phases: list[Phase], now: datetime | None = None) -> Phase | None:
    """The phase a board shows without ``?phase=``: the open one (the earliest started if several),
    else the latest that started; None if none has started."""
    now = now or timezone.now()
    started = [phase for phase in phases if phase.starts_at <= now]
    open_now = [phase for phase in started if phase.ends_at > now]
    if open_now:
        return min(open_now, key=lambda phase: phase.starts_at)
    return max(started, key=lambda phase: phase.starts_at, default=None)


def named_phase(phases: list[Phase], value: str | None) -> Phase | None:
    """The phase a ``?phase=`` value names: exactly a phase's name (no case folding, trimming or
    normalisation), else 404. No value, or an empty one, names none (the caller's default)."""
    if not value:
        return None
    found = next((phase for phase in phases if phase.name == value), None)
    if found is None:
        raise Http404("no such phase in this task")
    return found


@dataclass(frozen=True)
class BoardAccess:
    """The board one user may see: its phase, whether the user organises the task, the scope it
    shows and, if the user sees no run on it, why."""

    task: Task
    phases: list[Phase]
    phase: Phase | None
    organiser: bool
    scope: str
    hidden_reason: str


def board_access(user: Any, task: Task, phase_value: str | None, phases: list[Phase] | None = None,
                 organiser: bool | None = None) -> BoardAccess:
    """Resolve a request for a board: 404 for a ``?phase=`` that is not exactly one of the task's
    phase names; the default board (``default_phase``) without one or with an empty one."""
    if phases is None:
        phases = task_phases(task.pk)
    if organiser is None:
        organiser = is_organiser(user, task)
    phase = named_phase(phases, phase_value) or default_phase(phases)
    scope, hidden_reason = board_rule(phases, phase, organiser)
    return BoardAccess(task, phases, phase, organiser, scope, hidden_reason)


# Data sections ------------------------------------------------------------------------------

@dataclass(frozen=True)
class DataAccess:
    """One user's view of a task's data section for one phase (None: a task without phases).

    ``allowed``: whether the user may download the phase's gold-derived files (participants' data,
    sample run) and the organisers' files of the phase; if not, ``reason`` says why and
    ``sign_in`` whether signing in could help. ``restricted``: downloads are gold-derived data
    kept from the public (a phase for registered teams, or one not open yet, which only
    organisers read), so each is written to the access log. The format description and the
    task-wide files are for everyone who can see the task.
    """

    task: Task
    phases: list[Phase]
    phase: Phase | None
    organiser: bool
    allowed: bool
    reason: str
    sign_in: bool
    restricted: bool


def data_phase(phases: list[Phase], value: str | None, now: datetime | None = None) -> Phase | None:
    """The phase a data section shows: the one ``?phase=`` names exactly (404 otherwise), else
    the open or latest started phase (``default_phase``), else the first to open."""
    return (named_phase(phases, value) or default_phase(phases, now)
            or min(phases, key=lambda phase: phase.starts_at, default=None))


def data_rule(user: Any, task: Task, phase: Phase | None, organiser: bool,
              now: datetime | None = None) -> tuple[bool, str, bool]:
    """(allowed, why not, whether signing in could help) for a phase's data.

    Organisers always. Otherwise (the task is public, or the caller has answered 404): a task
    without phases has its data open; a phase's data opens when the phase starts; a phase for
    registered teams only also needs a signed-in member of a team, approved where the task
    requires approval, who accepted the task's current terms where it has terms.
    """
    if organiser or phase is None:
        return True, "", False
    if phase.starts_at > (now or timezone.now()):
        return False, (f"The data of the {phase.name} phase is published when the phase opens, at "
                       f"{phase.starts_at:%Y-%m-%d %H:%M} UTC."), False
    if not phase.data_registered_only:
        return True, "", False
    if not user.is_authenticated:
        return False, (f"The data of the {phase.name} phase is for registered teams only: sign in as a member "
                       "of a team."), True
    team = user.teams.order_by("pk").first()
    if team is None:
        return False, (f"The data of the {phase.name} phase is for registered teams only, and you are not a "
                       "member of a team: create or join one on the sign-up page, or ask an organiser."), False
    if task.requires_team_approval and not team.approved:
        return False, (f"The data of the {phase.name} phase is for registered teams only, and your team "
                       f"{team.name!r} is waiting for an organiser's approval."), False
    if not task.terms_accepted_by(user):
        return False, (f"The data of the {phase.name} phase is for registered teams only: accept the task's "
                       "terms on its overview page first."), False
    return True, "", False


def data_access(user: Any, task: Task, phase_value: str | None, phases: list[Phase] | None = None) -> DataAccess:
    """Resolve a request for a task's data section (``?phase=`` as for boards: exactly a phase's
    name, else 404; none or empty: ``data_phase``'s default)."""
    if phases is None:
        phases = task_phases(task.pk)
    organiser = is_organiser(user, task)
    phase = data_phase(phases, phase_value)
    allowed, reason, sign_in = data_rule(user, task, phase, organiser)
    restricted = phase is not None and (phase.data_registered_only or phase.starts_at > timezone.now())
    return DataAccess(task, phases, phase, organiser, allowed, reason, sign_in, restricted)
