"""Who may see what: one place for the rules every view and API endpoint follows."""

from __future__ import annotations

from typing import Any

from django.http import Http404

from tasks.models import Run, Score, Task


def is_organiser(user: Any, task: Task) -> bool:
    return task.is_organiser(user)


def is_member(user: Any, run: Run) -> bool:
    return bool(user.is_authenticated and run.team_id and run.team.members.filter(pk=user.pk).exists())


def get_run_for_user(user: Any, run_id: int) -> Run:
    """The run if the user's team owns it or the user organises its task; 404 otherwise (even for
    runs that exist, so nobody learns which ids belong to other teams)."""
    run = Run.objects.select_related("task", "team", "phase", "gold_version").filter(pk=run_id).first()
    if run is None or not (is_member(user, run) or is_organiser(user, run.task)):
        raise Http404("no such run")
    return run


def get_task_for_user(user: Any, slug: str) -> Task:
    task = Task.objects.filter(slug=slug).first()
    if task is None or not (task.is_public or is_organiser(user, task)):
        raise Http404("no such task")
    return task


def visible_score(run: Run, user: Any) -> Score | None:
    """The score a user may see for a run: during a test phase whose results are not published,
    participants see only the live-subset score; organisers see the score on the whole set."""
    if run.status != Run.DONE or run.gold_version_id is None:
        return None
    scores = {score.scope: score for score in run.scores.filter(gold_version_id=run.gold_version_id)}
    if is_organiser(user, run.task) or not hides_full_scores(run):
        return scores.get(Score.FULL)
    return scores.get(Score.LIVE) or None


def hides_full_scores(run: Run) -> bool:
    phase = run.phase
    return bool(phase and phase.live_subset_size and not phase.results_published)


def may_see_per_dialogue(run: Run, user: Any) -> bool:
    if is_organiser(user, run.task):
        return True
    phase = run.phase
    if phase is None:
        return is_member(user, run)
    return is_member(user, run) and (phase.per_dialogue_feedback or phase.results_published)
