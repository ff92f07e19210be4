"""Stored significance statistics of a leaderboard."""

from __future__ import annotations

from django.db import models


class TaskStatistics(models.Model):
    """Randomised Tukey HSD, bootstrap intervals and meta-evaluation over a leaderboard's runs.

    ``data`` holds, per measure key (``quality.A.rsnod``, ``nugget.jsd``): the run ids in
    matrix order, means, interval bounds, p-values, differences, effect sizes and Monte Carlo
    standard errors; ``meta`` holds discriminative power, delta required and Kendall's tau.
    """

    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="statistics")
    phase = models.ForeignKey("tasks.Phase", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    gold_version = models.ForeignKey("tasks.GoldVersion", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=10)
    run_ids = models.JSONField(default=list)
    run_labels = models.JSONField(default=dict)
    data = models.JSONField(default=dict)
    meta = models.JSONField(default=dict)
    permutations = models.PositiveIntegerField()
    seed = models.PositiveIntegerField()
    n_dialogues = models.PositiveIntegerField(default=0)
    seconds = models.FloatField(default=0.0)
    scores_as_of = models.DateTimeField(help_text="the task's scores_changed_at when computed")
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "phase"], condition=models.Q(phase__isnull=False),
                                    name="one_statistics_per_phase"),
            models.UniqueConstraint(fields=["task"], condition=models.Q(phase__isnull=True),
                                    name="one_statistics_per_phaseless_task"),
        ]

    def __str__(self) -> str:
        return f"statistics of {self.task} ({self.phase or 'no phase'})"
