"""Who may see what: one place for the rules every view and API endpoint follows."""

from __future__ import annotations

from typing import Any

from django.http import Http404

from tasks.models import Phase, Run, Score, Task

TEST_KINDS = (Phase.TEST, Phase.FINAL)


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


def task_phases(task_id: int) -> list[Phase]:
    """Every phase of a task (a handful); callers that look at many runs of one task pass the
    list on to ``visible_score`` and ``may_see_per_dialogue`` so that it is read once."""
    return list(Phase.objects.filter(task_id=task_id))


def test_phases_on(phases: list[Phase], gold_version_id: int | None) -> list[Phase]:
    """The test and final phases that use this gold version: scores on it are scores on *test data*."""
    return [phase for phase in phases if phase.kind in TEST_KINDS and gold_version_id is not None
            and phase.gold_version_id == gold_version_id]


def test_results_hidden(phases: list[Phase], gold_version_id: int | None) -> bool:
    """Whether scores on this gold version are test data whose results are not published yet
    (by any test or final phase that uses it)."""
    tests = test_phases_on(phases, gold_version_id)
    return bool(tests) and not any(phase.results_published for phase in tests)


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
    against: ticked on its test phase, or on a final phase over the same gold."""
    return any(phase.results_published for phase in _test_phases(run, phases))


def visible_score(run: Run, user: Any, phases: list[Phase] | None = None) -> Score | None:
    """The score a user may see for a run. Organisers see the score on the whole set. On test data
    whose results are not published, everybody else sees the live-subset score of a test phase
    that has one, and nothing for a run outside that phase that was scored against its gold (a
    run from before the phases, re-scored when the test gold was loaded)."""
    if run.status != Run.DONE or run.gold_version_id is None:
        return None
    scores = {score.scope: score for score in run.scores.filter(gold_version_id=run.gold_version_id)}
    if is_organiser(user, run.task):
        return scores.get(Score.FULL)
    tests = _test_phases(run, phases)
    if not tests or any(phase.results_published for phase in tests):
        return scores.get(Score.FULL)
    own = run.phase if run.phase_id and run.phase.kind == Phase.TEST else None
    if own is not None and own.gold_version_id == run.gold_version_id:
        return scores.get(Score.LIVE) if own.live_subset_size else scores.get(Score.FULL)
    if any(phase.live_subset_size for phase in tests):
        return None
    return scores.get(Score.FULL)


def may_see_per_dialogue(run: Run, user: Any, phases: list[Phase] | None = None) -> bool:
    """Organisers always; otherwise only the run's own team, and on test data only once the
    results are published (whatever a test phase's per-dialogue feedback box says); in a
    development phase, if the phase gives per-dialogue feedback."""
    if is_organiser(user, run.task):
        return True
    if not is_member(user, run):
        return False
    if on_test_data(run, phases):
        return test_results_published(run, phases)
    phase = run.phase
    return phase is None or phase.per_dialogue_feedback or phase.results_published
