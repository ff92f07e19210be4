"""Stored significance statistics of a leaderboard."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from django.db import models

from scoring import stats


class TaskStatistics(models.Model):
    """Randomised Tukey HSD, bootstrap intervals and meta-evaluation over a leaderboard's runs.

    One record per board (task, or task and phase): when and over which runs the numbers were
    computed, the significance level ``alpha`` their top groups were drawn at, and ``meta``
    (discriminative power, delta required, Kendall's tau). The numbers of
    each measure are in :class:`MeasureStatistics` rows, so that a page showing one measure
    reads one small row instead of every measure's k x k matrices (with 100 runs and 24
    measures those are about a million numbers).
    """

    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="statistics")
    phase = models.ForeignKey("tasks.Phase", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    gold_version = models.ForeignKey("tasks.GoldVersion", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=10)
    run_ids = models.JSONField(default=list)
    run_labels = models.JSONField(default=dict)
    meta = models.JSONField(default=dict)
    permutations = models.PositiveIntegerField()
    seed = models.PositiveIntegerField()
    n_items = models.PositiveIntegerField(default=0)
    seconds = models.FloatField(default=0.0)
    scores_as_of = models.DateTimeField(help_text="the task's scores_changed_at when computed")
    computed_at = models.DateTimeField(auto_now=True)
    generation = models.PositiveBigIntegerField(
        default=0, help_text="the board's requested generation (StatisticsState) these numbers were computed for")
    alpha = models.FloatField(
        default=stats.SIGNIFICANCE_LEVEL,
        help_text="the significance level of the top groups (and every mark and note that says 'significant')")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "phase"], condition=models.Q(phase__isnull=False),
                                    name="one_statistics_per_phase"),
            models.UniqueConstraint(fields=["task"], condition=models.Q(phase__isnull=True),
                                    name="one_statistics_per_phaseless_task"),
        ]

    def __str__(self) -> str:
        return f"statistics of {self.task} ({self.phase or 'no phase'})"

    def summaries(self) -> dict[str, dict[str, Any]]:
        """Per measure key, its summary (run ids, means, intervals, top group), in one query
        that leaves the pairwise matrices in the database."""
        return {row.key: row.summary for row in self.measures.defer("pairwise").order_by("pk")}

    def measure(self, key: str, pairwise: bool = False) -> MeasureStatistics | None:
        if "\x00" in key:  # from a URL (%00): PostgreSQL refuses NUL in a query; no measure has one
            return None
        rows = self.measures.filter(key=key)
        row = (rows if pairwise else rows.defer("pairwise")).first()
        if row is not None:
            row.statistics = self  # its B rebuilds the p-values; spare the query
        return row


class MeasureStatistics(models.Model):
    """The statistics of one measure (a measure key of the task's kind) on one board.

    ``summary`` is what leaderboard pages need: ``run_ids`` (matrix order), ``means``,
    ``ci_low``/``ci_high`` (95% bootstrap interval), ``top_group`` (run ids not significantly
    different from the best at the record's ``alpha``, best taken in the measure's direction),
    ``residual_variance`` and ``effect_sizes_defined``.

    ``pairwise`` holds, for every pair i < j in row-major order, the number of permutations
    whose range reached the pair's difference, as little-endian uint32: 4 bytes a pair, where
    the four k x k float64 matrices would take 64 (with 500 runs and 24 measures, 12 MB per
    recomputation instead of 190 MB). :meth:`result` rebuilds p-values, differences, effect
    sizes and Monte Carlo standard errors from it with ``scoring.stats.TukeyHSDResult.from_counts``,
    bit for bit (tested); no number is computed here.
    """

    statistics = models.ForeignKey(TaskStatistics, on_delete=models.CASCADE, related_name="measures")
    key = models.CharField(max_length=64)
    summary = models.JSONField(default=dict)
    pairwise = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["statistics", "key"], name="one_row_per_measure")]

    def __str__(self) -> str:
        return f"{self.key} of {self.statistics}"

    @staticmethod
    def pack(result: stats.TukeyHSDResult) -> bytes:
        """The result's exceedance counts (:meth:`scoring.stats.TukeyHSDResult.exceedance_counts`)
        as stored: little-endian uint32, 4 bytes a pair."""
        return result.exceedance_counts().astype("<u4").tobytes()

    def result(self, n_permutations: int | None = None) -> stats.TukeyHSDResult:
        """The measure's Tukey HSD result rebuilt from the stored counts and summary by
        :meth:`scoring.stats.TukeyHSDResult.from_counts`, bit for bit (tested), indexed like
        ``summary["run_ids"]``."""
        record = self.statistics
        return stats.TukeyHSDResult.from_counts(
            np.frombuffer(bytes(self.pairwise), dtype="<u4"), self.summary["means"],
            # None: a corpus-level measure, which has no per-item residual (and no effect sizes).
            residual_variance=(math.nan if self.summary["residual_variance"] is None
                               else self.summary["residual_variance"]),
            effect_sizes_defined=self.summary.get("effect_sizes_defined", True),
            n_permutations=n_permutations or record.permutations, seed=record.seed or 0,
            n_dialogues=record.n_items or 0, measure=self.key,
            # Absent from records stored before it was kept: those show the binomial error until
            # their board's statistics are computed again.
            mc_variance_inflation=self.summary.get("mc_variance_inflation", 1.0))

    def matrices(self, n_permutations: int | None = None) -> dict[str, np.ndarray]:
        """``pvalues``, ``differences``, ``effect_sizes`` (NaN where undefined) and ``mc_se``,
        indexed like ``summary["run_ids"]``."""
        result = self.result(n_permutations)
        return {"pvalues": result.pvalues, "differences": result.differences, "effect_sizes": result.effect_sizes,
                "mc_se": result.mc_standard_errors}

    def entry(self) -> dict[str, Any]:
        """Summary and matrices in one mapping (what :meth:`scoring.stats.TukeyHSDResult.from_stored` reads)."""
        return {**self.summary, **self.matrices(), "measure": self.key}


class StatisticsState(models.Model):
    """Single flight of one board's statistics, shared by every process through the database.

    Every trigger (scores changed, a run hidden, a publication) adds one to ``requested``. A
    computation starts by claiming the row with a conditional UPDATE that copies ``requested``
    into ``computing`` and sets ``claim_token``; only one claim can hold the row while its
    ``heartbeat_at`` is fresh (``leaderboard.scheduling.LEASE_SECONDS``), so two processes never
    compute the same board at once. A trigger during a computation leaves ``requested`` above
    ``computing``: the board is dirty and the holder schedules one follow-up when it finishes.
    ``completed`` is the last generation whose computation finished (stored or not, see
    ``outcome``); ``stored_generation`` the one the stored numbers belong to. A result is written
    only if its generation is above ``stored_generation`` and ``floor``, checked in the same
    transaction as the write, so a computation that finishes late never overwrites a newer one.
    """

    task = models.ForeignKey("tasks.Task", on_delete=models.CASCADE, related_name="+")
    phase = models.ForeignKey("tasks.Phase", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    requested = models.PositiveBigIntegerField(default=0)
    requested_at = models.DateTimeField(null=True, blank=True, help_text="the latest trigger")
    pending_since = models.DateTimeField(null=True, blank=True,
                                         help_text="the first trigger no computation has started for yet")
    computing = models.PositiveBigIntegerField(null=True, blank=True)
    claim_token = models.CharField(max_length=32, blank=True, default="")
    running_since = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    completed = models.PositiveBigIntegerField(default=0)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_seconds = models.FloatField(default=0.0, help_text="how long the last finished computation took")
    outcome = models.CharField(max_length=300, blank=True, default="")
    stored_generation = models.PositiveBigIntegerField(default=0)
    stored_at = models.DateTimeField(null=True, blank=True)
    floor = models.PositiveBigIntegerField(
        default=0, help_text="results of this generation or older are never stored (the board changed under them)")
    computations = models.PositiveIntegerField(default=0, help_text="computations started (claims won)")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "phase"], condition=models.Q(phase__isnull=False),
                                    name="one_statistics_state_per_phase"),
            models.UniqueConstraint(fields=["task"], condition=models.Q(phase__isnull=True),
                                    name="one_statistics_state_per_phaseless_task"),
        ]

    def __str__(self) -> str:
        return f"statistics state of task {self.task_id} ({self.phase_id or 'no phase'})"

    @property
    def pending(self) -> bool:
        """A trigger has come that no finished computation has served yet."""
        return self.requested > self.completed
