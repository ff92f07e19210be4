"""Keep cached task lookups and leaderboards in step with edits made anywhere (admin, commands, code)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver

from tasks.lookup import forget_task
from tasks.models import Phase, Task, Team


@receiver(pre_save, sender=Task)
def _task_renamed(sender: type, instance: Task, **kwargs: Any) -> None:
    if instance.pk:
        old = Task.objects.filter(pk=instance.pk).values_list("slug", flat=True).first()
        if old and old != instance.slug:
            forget_task(old)


@receiver(post_save, sender=Task)
@receiver(post_delete, sender=Task)
def _task_changed(sender: type, instance: Task, **kwargs: Any) -> None:
    forget_task(instance.slug)


@receiver(pre_save, sender=Phase)
def _phase_saving(sender: type, instance: Phase, **kwargs: Any) -> None:
    instance._was_published = (Phase.objects.filter(pk=instance.pk).values_list("results_published", flat=True)
                               .first() if instance.pk else None)


@receiver(post_save, sender=Phase)
@receiver(post_delete, sender=Phase)
def _phase_changed(sender: type, instance: Phase, **kwargs: Any) -> None:
    slug = Task.objects.filter(pk=instance.task_id).values_list("slug", flat=True).first()
    if slug:
        forget_task(slug)
    was = getattr(instance, "_was_published", None)
    if kwargs.get("signal") is post_save and was is not None and was != instance.results_published:
        _publication_changed(instance)


def _publication_changed(phase: Phase) -> None:
    """Results published (from the dashboard, the admin or code) or withdrawn: the stored
    significance results of the phase's board were computed over the other scope, or over a
    board that is now hidden (they would keep showing full-test-set means), so they go, and the
    statistics are computed again for what the board now shows."""
    from leaderboard.models import TaskStatistics
    from tasks.services import statistics_changed

    TaskStatistics.objects.filter(task_id=phase.task_id, phase=phase).delete()
    task_id = phase.task_id
    transaction.on_commit(lambda: statistics_changed(task_id))


@receiver(post_save, sender=Team)
def _team_changed(sender: type, instance: Team, created: bool, **kwargs: Any) -> None:
    """A renamed team: boards show team names, so the boards of its tasks are rebuilt."""
    if not created:
        from tasks.services import statistics_changed

        for task in Task.objects.filter(runs__team=instance).distinct():
            task.touch_scores()
            task_id = task.pk
            transaction.on_commit(lambda task_id=task_id: statistics_changed(task_id))  # labels name teams
