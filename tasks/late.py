"""Late runs: a team's extension of a phase's deadline, the "late" mark of a run that arrived under
one, and organisers uploading a run on a team's behalf.

Why extensions and not reopening: a reopened phase takes every team's runs, and a phase whose
results are published cannot be reopened at all (``tasks.phaserules.reopening_problem``). An
extension lets one team submit until a set time; its runs are marked late wherever they are shown.
While any extension of a phase runs, the phase still takes runs (``Phase.late_until`` and
``Phase.closes_at``), so its results are not published and its references stay hidden
(``tasks.access``), exactly as while the phase itself is open.

An organiser's upload for a team goes through the team's rules (its phase, extension, quota, run
numbers and names, the validation) and is recorded: ``Run.submitted_by`` is the organiser and
``Run.on_behalf`` says it was not a member.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from tasks.errors import Rejected
from tasks.extensions import Extension
from tasks.models import Phase, Run, Task, Team
from tasks.names import character_problems

MAX_NOTE = 300
LATE_TITLE = "submitted after its phase had ended, under an extension the organisers gave its team"


def active_extensions(team: Team | None, phases: tuple[Phase, ...] | list[Phase], at: datetime) -> dict[int, datetime]:
    """The team's extensions running at ``at`` on these phases: phase id -> until when (one query,
    none without a team or phases)."""
    # Phase.late_until says whether any team's extension still runs: no query while none does.
    extended = [phase.pk for phase in phases if phase.late_until is not None and phase.late_until > at]
    if team is None or not extended:
        return {}
    return dict(Extension.objects.filter(team=team, phase__in=extended, until__gt=at)
                .values_list("phase_id", "until"))


def find_team(name: str) -> Team:
    """A team by its slug or its exact name, else ``Rejected`` naming what was looked for."""
    name = (name or "").strip()
    # No team name holds a control character (tasks.names refuses them), and PostgreSQL cannot
    # even compare a text with a NUL byte: refused by name before any lookup.
    problems = character_problems(name, "team")
    if problems:
        raise Rejected(problems, status=400)
    team = Team.objects.filter(Q(slug=name) | Q(name=name)).order_by("pk").first() if name else None
    if team is None:
        raise Rejected([f"team: no team called {name!r}; give a team's name or its short name (slug)" if name
                        else "team: name the team"], status=404 if name else 400)
    return team


def find_phase(task: Task, name: str) -> Phase:
    problems = character_problems(name or "", "phase")  # as for a team: before any lookup
    if problems:
        raise Rejected(problems, status=400)
    phase = task.phases.filter(name=name).first() if name else None
    if phase is None:
        names = ", ".join(task.phases.values_list("name", flat=True)) or "none"
        raise Rejected([f"phase: {task.slug} has no phase named {name!r}; its phases are {names}" if name
                        else "phase: name the phase"], status=404 if name else 400)
    return phase


def grant_extension(phase: Phase, team: Team, until: datetime, user: Any = None, note: str = "",
                    now: datetime | None = None) -> Extension:
    """Let ``team`` submit to ``phase`` until ``until`` (a later time replaces an earlier extension;
    an earlier one shortens it). Refused with every reason: a final phase (it takes no runs), an
    end not after the phase's end or already past, published results (the late team would see the
    whole test set's scores while it can still submit: withdraw the publication first)."""
    now = now or timezone.now()
    note = (note or "").strip()
    problems = []
    if until <= phase.ends_at:
        problems.append(f"until: {until:%Y-%m-%d %H:%M} UTC is not after the end of the {phase.name} phase "
                        f"({phase.ends_at:%Y-%m-%d %H:%M} UTC): an extension gives time after the end")
    elif until <= now:
        problems.append(f"until: {until:%Y-%m-%d %H:%M} UTC has passed already; choose a later time")
    if not phase.takes_runs:
        problems.append(f"phase: the {phase.name} phase is a final phase and takes no runs; extend the test phase "
                        "whose runs it ranks")
    if phase.published_at(now):
        problems.append(f"phase: the results of the {phase.name} phase are published: withdraw the publication "
                        "first (the dashboard's Withdraw publication button), since a team that may still submit would "
                        "otherwise see the scores on the whole test set")
    problems += character_problems(note, "note")
    if len(note) > MAX_NOTE:
        problems.append(f"note: at most {MAX_NOTE} characters (got {len(note)})")
    if problems:
        raise Rejected(problems)
    with transaction.atomic():
        extension, _ = Extension.objects.update_or_create(
            phase=phase, team=team, defaults={"until": until, "note": note, "granted_by": user, "created_at": now})
        refresh_late_until(phase)
    return extension


def end_extension(phase: Phase, team: Team, now: datetime | None = None) -> Extension:
    """End the team's extension of ``phase`` now (kept, with its end, as a record); ``Rejected``
    when the team has none that is still running."""
    now = now or timezone.now()
    extension = Extension.objects.filter(phase=phase, team=team, until__gt=now).first()
    if extension is None:
        raise Rejected([f"team {team.name!r} has no running extension of the {phase.name} phase"], status=404)
    with transaction.atomic():
        extension.until = now
        extension.save(update_fields=["until"])
        refresh_late_until(phase)
    return extension


def end_all_extensions(phase: Phase, now: datetime) -> int:
    """End every running extension of ``phase`` (closing its submissions for everyone: the
    dashboard's close and publish); how many there were."""
    count = Extension.objects.filter(phase=phase, until__gt=now).update(until=now)
    if count:
        refresh_late_until(phase)
    return count


def refresh_late_until(phase: Phase) -> None:
    """``Phase.late_until``: the latest end of its extensions, saved with ``save()`` so that the
    signals renew the cached phase lists (every rule that reads them sees the phase take runs)."""
    latest = Extension.objects.filter(phase=phase).aggregate(latest=Max("until"))["latest"]
    phase.late_until = latest if latest is not None and latest > phase.ends_at else None
    phase.save(update_fields=["late_until"])


def extension_rows(task: Task, now: datetime | None = None) -> list[dict[str, Any]]:
    """Every extension of the task's phases, running ones first, for the dashboard."""
    now = now or timezone.now()
    rows = [{"extension": extension, "running": extension.until > now,
             "late_runs": Run.objects.filter(phase=extension.phase, team=extension.team, late=True).count()}
            for extension in Extension.objects.filter(phase__task=task).select_related("phase", "team", "granted_by")
            .order_by("-until")]
    return sorted(rows, key=lambda row: not row["running"])


def late_context(task: Task) -> dict[str, Any]:
    """What the dashboard's section on late runs shows: the extensions, and the teams and phases
    its form offers (phases that take runs)."""
    return {"extensions": extension_rows(task),
            "extension_phases": [phase for phase in task.phases.all() if phase.takes_runs],
            "teams": Team.objects.order_by("name")[:1000]}


def extension_notes(team: Team | None, task: Task, now: datetime | None = None) -> list[str]:
    """What a team reads about its running extensions of the task's phases (the upload page, the
    API's submission status)."""
    now = now or timezone.now()
    if team is None:
        return []
    notes = []
    for extension in Extension.objects.filter(team=team, phase__task=task, until__gt=now).select_related("phase"):
        phase = extension.phase
        why = f" ({extension.note})" if extension.note else ""
        notes.append(f"The organisers gave your team an extension of the {phase.name} phase until "
                     f"{extension.until:%Y-%m-%d %H:%M} UTC{why}: it ended for other teams at "
                     f"{phase.ends_at:%Y-%m-%d %H:%M} UTC, and the runs you submit after that are marked late.")
    return notes


def late_sentence(run: Run) -> str:
    """A late run in its readers' words (run pages); empty for a run on time."""
    if not run.late or not run.phase_id:
        return ""
    team = run.team.name if run.team_id else "its team"
    return (f"Late run: submitted at {run.created_at:%Y-%m-%d %H:%M} UTC, after the {run.phase.name} phase ended at "
            f"{run.phase.ends_at:%Y-%m-%d %H:%M} UTC, under an extension the organisers gave {team}.")


def uploader_sentence(run: Run) -> str:
    """Who uploaded a run an organiser sent for its team (its team and the organisers read it)."""
    if not run.on_behalf:
        return ""
    who = run.submitted_by.get_username() if run.submitted_by_id else "an organiser whose account was removed"
    return f"Uploaded on the team's behalf by {who}, an organiser of the task, at {run.created_at:%Y-%m-%d %H:%M} UTC."


def check_organiser(task: Task, user: Any) -> None:
    """Only the task's organisers upload for a team that is not theirs (403 for anybody else)."""
    if not task.is_organiser(user):
        raise Rejected(["team: only the task's organisers upload a run on a team's behalf; leave the team out to "
                        "upload for your own team"], status=403)
