"""Phases and quotas: which phase an upload belongs to and how many runs a team has left."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from tasks.models import Phase, Run, Task, Team


def open_phase(task: Task, at: datetime | None = None) -> Phase | None:
    at = at or timezone.now()
    return task.phases.filter(starts_at__lte=at, ends_at__gt=at).exclude(kind=Phase.FINAL).order_by(
        "starts_at").first()


def phase_for_upload(task: Task, user: Any) -> Phase | None:
    """The open phase of a task with phases (an upload outside every phase is refused); None for a
    task without phases, which accepts runs at any time."""
    from tasks.services import Rejected

    if not task.phases.exists():
        return None
    phase = open_phase(task)
    if phase is None:
        upcoming = task.phases.filter(starts_at__gt=timezone.now()).order_by("starts_at").first()
        hint = (f"; the next phase, {upcoming.name}, opens at {upcoming.starts_at:%Y-%m-%d %H:%M} UTC"
                if upcoming else "; the submission period is over")
        raise Rejected([f"no phase of {task.slug} is open for submissions now{hint}"], status=403)
    return phase


def day_start(at: datetime) -> datetime:
    """Midnight UTC of the day ``at`` falls in: quotas reset at the same moment for everyone."""
    return at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def counted_runs(team: Team, phase: Phase) -> Any:
    """Runs that use quota: every run created in the phase except those that failed for a
    server-side reason (validation failures never become runs at all)."""
    return Run.objects.filter(team=team, phase=phase).exclude(Q(status=Run.FAILED) & Q(failure_is_server_side=True))


def quota_numbers(team: Team, phase: Phase, at: datetime | None = None) -> dict[str, Any]:
    at = at or timezone.now()
    start = day_start(at)
    runs = counted_runs(team, phase)
    daily_used = runs.filter(created_at__gte=start, created_at__lt=start + timedelta(days=1)).count()
    total_used = runs.count()
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


def quota_status(task: Task, user: Any) -> dict[str, Any] | None:
    from tasks.services import participant_team

    team = participant_team(user)
    phase = open_phase(task)
    if team is None or phase is None:
        return None
    return quota_numbers(team, phase)


def check_quota(team: Team, phase: Phase) -> None:
    """Refuse an upload past the daily or total quota. Call inside the transaction that creates the
    run, after locking the team row, so concurrent uploads are counted one after another."""
    from tasks.services import Rejected

    numbers = quota_numbers(team, phase)
    if numbers["total_remaining"] <= 0:
        raise Rejected([f"quota: team {team.name!r} has used all {phase.total_quota} runs of the "
                        f"{phase.name} phase"], status=429)
    if numbers["daily_remaining"] <= 0:
        raise Rejected([f"quota: team {team.name!r} has used its {phase.daily_quota} runs for today "
                        f"(UTC); the count resets at {numbers['daily_resets_at']}"], status=429)
