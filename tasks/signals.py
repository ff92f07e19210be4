"""Keep cached task lookups and leaderboards in step with edits made anywhere (admin, commands, code)."""

from __future__ import annotations

from typing import Any

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


@receiver(post_save, sender=Phase)
@receiver(post_delete, sender=Phase)
def _phase_changed(sender: type, instance: Phase, **kwargs: Any) -> None:
    slug = Task.objects.filter(pk=instance.task_id).values_list("slug", flat=True).first()
    if slug:
        forget_task(slug)


@receiver(post_save, sender=Team)
def _team_changed(sender: type, instance: Team, created: bool, **kwargs: Any) -> None:
    """A renamed team: boards show team names, so the boards of its tasks are rebuilt."""
    if not created:
        for task in Task.objects.filter(runs__team=instance).distinct():
            task.touch_scores()
