"""Keep cached task lookups and leaderboards in step with edits made anywhere (admin, commands, code)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver

from tasks.changes import board_changed, phase_published
from tasks.datafiles import forget_unused_blob
from tasks.lookup import forget_task
from tasks.models import DataFile, Phase, Run, Task, Team
from tasks.organising import rescore_runs


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


LIVE_FIELDS = ("gold_version_id", "live_subset_size", "live_subset_seed")


@receiver(pre_save, sender=Phase)
def _phase_saving(sender: type, instance: Phase, **kwargs: Any) -> None:
    before = (Phase.objects.filter(pk=instance.pk).values("results_published", *LIVE_FIELDS).first()
              if instance.pk else None)
    instance._was_published = before["results_published"] if before else None
    instance._live_before = tuple(before[name] for name in LIVE_FIELDS) if before else None


@receiver(post_save, sender=Phase)
@receiver(post_delete, sender=Phase)
def _phase_changed(sender: type, instance: Phase, **kwargs: Any) -> None:
    slug = Task.objects.filter(pk=instance.task_id).values_list("slug", flat=True).first()
    if slug:
        forget_task(slug)
    if kwargs.get("signal") is not post_save or kwargs.get("created"):
        # A phase appears or goes: which boards exist changes (a task with phases never shows
        # its phase-less board), so every cached board of the task is renewed.
        task = Task.objects.filter(pk=instance.task_id).first()
        if task is not None:
            board_changed(task)
        if kwargs.get("signal") is not post_save:
            return
    was = getattr(instance, "_was_published", None)
    if was is not None and was != instance.results_published:
        phase_published(instance)
    live = tuple(getattr(instance, name) for name in LIVE_FIELDS)
    if instance.live_subset_size and live != getattr(instance, "_live_before", None):
        _live_subset_changed(instance)


def _live_subset_changed(phase: Phase) -> None:
    """A phase with a live subset, new or changed: the baselines of its gold (which belong to no
    phase) are scored again so that they have live-subset scores for its board."""
    rescore_runs(Run.objects.filter(task_id=phase.task_id, is_baseline=True, gold_version_id=phase.gold_version_id,
                                    withdrawn_at__isnull=True))


@receiver(post_save, sender=Team)
def _team_changed(sender: type, instance: Team, created: bool, **kwargs: Any) -> None:
    """A renamed team: boards show team names, so the boards of its tasks are rebuilt."""
    if not created:
        for task in Task.objects.filter(runs__team=instance).distinct():
            board_changed(task)


@receiver(post_delete, sender=DataFile)
def _data_file_deleted(sender: type, instance: DataFile, **kwargs: Any) -> None:
    """A removed organiser's file: its stored copy goes too once no other file shares it (after
    the commit, so that a replacement with the same content in the same transaction keeps it)."""
    transaction.on_commit(lambda sha=instance.sha256: forget_unused_blob(sha))
