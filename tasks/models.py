"""Shared tasks, their gold data versions and phases, teams, runs and stored scores."""

from __future__ import annotations

import functools
import secrets
from datetime import datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.core.validators import (
    MaxValueValidator,
    MinValueValidator,
    ProhibitNullCharactersValidator,
    RegexValidator,
)
from django.db import models
from django.utils import timezone

from scoring import Gold, TaskConfig
from tasks.names import validate_visible_name

slug_validator = RegexValidator(r"^[a-z0-9][a-z0-9-]{1,48}[a-z0-9]$",
                                "use 3-50 lower-case letters, digits and hyphens, not starting or ending with -")


class Task(models.Model):
    """A shared task (e.g. NTCIR-14 STC-3 Chinese DQ and ND) with its labels and rules."""

    slug = models.CharField(max_length=50, unique=True, validators=[slug_validator])
    # PostgreSQL refuses NUL characters in text: say so in validation, not with a database error.
    title = models.CharField(max_length=200, validators=[ProhibitNullCharactersValidator()])
    description = models.TextField(blank=True, validators=[ProhibitNullCharactersValidator()])
    config = models.JSONField(help_text="scoring.config.TaskConfig as a dict: labels, alpha, averaging, variant")
    is_public = models.BooleanField(default=True, help_text="listed and its leaderboard shown to everyone")
    organisers = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="organised_tasks")
    requires_team_approval = models.BooleanField(
        default=False, help_text="teams must be approved by an organiser before they can submit")
    permutations = models.PositiveIntegerField(
        default=10_000, validators=[MinValueValidator(100), MaxValueValidator(1_000_000)],
        help_text="B of the randomised Tukey HSD test and of the bootstrap intervals")
    statistics_seed = models.PositiveIntegerField(default=20_190_601, help_text="seed of the randomised tests")
    scores_changed_at = models.DateTimeField(default=timezone.now, help_text="bumped whenever a score changes")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def scoring_config(self) -> TaskConfig:
        return TaskConfig.from_dict(self.config)

    def latest_gold(self) -> GoldVersion | None:
        return self.gold_versions.order_by("-number").first()

    def is_organiser(self, user: Any) -> bool:
        if not user.is_authenticated:
            return False
        return user.is_staff or self.organisers.filter(pk=user.pk).exists()


class GoldVersion(models.Model):
    """One upload of gold annotations, compiled into arrays; every load creates a new version."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="gold_versions")
    number = models.PositiveIntegerField()
    label = models.CharField(max_length=100, blank=True, help_text="e.g. 'development' or 'test'",
                             validators=[ProhibitNullCharactersValidator()])
    compiled = models.BinaryField(help_text="scoring.Gold.to_bytes(): label counts ready for scoring")
    sha256 = models.CharField(max_length=64)
    source_name = models.CharField(max_length=255, blank=True)
    n_dialogues = models.PositiveIntegerField()
    has_quality = models.BooleanField(default=True)
    has_nugget = models.BooleanField(default=True)
    warnings = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="unique_gold_version_number")]
        ordering = ["task", "number"]

    def __str__(self) -> str:
        return f"{self.task.slug} gold v{self.number}"

    def load(self) -> Gold:
        return _compiled_gold(self.pk, bytes(self.compiled))


@functools.lru_cache(maxsize=8)
def _compiled_gold(pk: int, data: bytes) -> Gold:
    # Versions never change once written, so the primary key is a sound cache key; the bytes
    # argument only makes a cache miss possible without another query.
    return Gold.from_bytes(data)


class Phase(models.Model):
    """A period of a task with its own gold version, deadlines, quotas and feedback rules."""

    DEVELOPMENT, TEST, FINAL = "development", "test", "final"
    KINDS = [(DEVELOPMENT, "development"), (TEST, "test"), (FINAL, "final")]

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="phases")
    name = models.CharField(max_length=100, validators=[ProhibitNullCharactersValidator(), validate_visible_name])
    kind = models.CharField(max_length=20, choices=KINDS, default=DEVELOPMENT)
    gold_version = models.ForeignKey(GoldVersion, on_delete=models.PROTECT, related_name="phases")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    daily_quota = models.PositiveIntegerField(default=20, help_text="runs per team per UTC day")
    total_quota = models.PositiveIntegerField(default=200, help_text="runs per team in the whole phase")
    live_subset_size = models.PositiveIntegerField(
        null=True, blank=True, help_text="test phase: the live leaderboard scores this many dialogues only")
    live_subset_seed = models.PositiveIntegerField(default=0)
    per_dialogue_feedback = models.BooleanField(default=True, help_text="run owners see per-dialogue scores")
    requires_method_description = models.BooleanField(default=False)
    results_published = models.BooleanField(
        default=False, help_text="final phase: full-test-set scores and per-dialogue scores are public")

    class Meta:
        ordering = ["task", "starts_at"]
        constraints = [
            models.UniqueConstraint(fields=["task", "name"], name="unique_phase_name"),
            models.CheckConstraint(condition=models.Q(ends_at__gt=models.F("starts_at")),
                                   name="phase_ends_after_start"),
        ]

    def __str__(self) -> str:
        return f"{self.task.slug}: {self.name}"

    def is_open(self, at: datetime | None = None) -> bool:
        at = at or timezone.now()
        return self.starts_at <= at < self.ends_at

    def live_subset(self) -> np.ndarray | None:
        """Indices of the gold dialogues the live leaderboard scores (fixed by the organiser's seed)."""
        n = self.gold_version.n_dialogues
        if not self.live_subset_size or self.live_subset_size >= n:
            return None
        rng = np.random.default_rng(self.live_subset_seed)
        return np.sort(rng.choice(n, size=self.live_subset_size, replace=False))


def _join_code() -> str:
    return secrets.token_urlsafe(12)


class Team(models.Model):
    # Shown on every board: visible characters only (tasks.names); confusable names are refused
    # where teams are created or renamed (tasks.accounts.team_name_problems).
    name = models.CharField(max_length=100, unique=True, validators=[validate_visible_name])
    slug = models.CharField(max_length=50, unique=True, validators=[slug_validator])
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)
    approved = models.BooleanField(default=True, help_text="tasks that require approval accept runs only "
                                                           "from approved teams")
    join_code = models.CharField(max_length=32, default=_join_code, unique=True,
                                 help_text="members share it with colleagues who sign up into this team")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Run(models.Model):
    """An uploaded run (or a baseline). The file is stored unchanged under its SHA-256."""

    QUEUED, SCORING, DONE, FAILED = "queued", "scoring", "done", "failed"
    STATUSES = [(QUEUED, "queued"), (SCORING, "scoring"), (DONE, "done"), (FAILED, "failed")]
    UNFINISHED = (QUEUED, SCORING)

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="runs")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.PROTECT, related_name="runs")
    phase = models.ForeignKey(Phase, null=True, blank=True, on_delete=models.PROTECT, related_name="runs")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    name = models.CharField(max_length=100, validators=[validate_visible_name])
    description = models.TextField(blank=True, max_length=5000)
    priority = models.PositiveSmallIntegerField(null=True, blank=True, help_text="NTCIR run number: 1 = primary")
    is_baseline = models.BooleanField(default=False)
    is_public = models.BooleanField(default=True, help_text="shown on the public leaderboard")
    withdrawn_at = models.DateTimeField(null=True, blank=True, help_text="hidden everywhere, never deleted")
    file_sha256 = models.CharField(max_length=64)
    file_size = models.PositiveIntegerField()
    original_filename = models.CharField(max_length=255, blank=True)
    has_quality = models.BooleanField(default=False)
    has_nugget = models.BooleanField(default=False)
    status = models.CharField(max_length=10, choices=STATUSES, default=QUEUED, db_index=True)
    gold_version = models.ForeignKey(GoldVersion, null=True, on_delete=models.PROTECT, related_name="+",
                                     help_text="the gold version the status refers to")
    errors = models.JSONField(default=list, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    failure_is_server_side = models.BooleanField(default=False)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    queued_at = models.DateTimeField(default=timezone.now, help_text="when the scoring job was last queued")
    last_sent_at = models.DateTimeField(null=True, blank=True,
                                        help_text="when a scoring job was last handed to the broker")
    sends = models.PositiveIntegerField(default=0, help_text="scoring jobs handed to the broker in all")
    interruptions = models.PositiveSmallIntegerField(
        default=0, help_text="times its scoring job died (time limit, worker killed) and was sent again")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["task", "status"]), models.Index(fields=["team", "phase", "created_at"])]

    def __str__(self) -> str:
        return f"{self.label} (#{self.pk})"

    @property
    def label(self) -> str:
        owner = "baseline" if self.is_baseline else (self.team.name if self.team_id else "?")
        return f"{owner}: {self.name}"

    @property
    def is_withdrawn(self) -> bool:
        return self.withdrawn_at is not None

    @property
    def subtasks(self) -> list[str]:
        return [name for name, present in (("quality", self.has_quality), ("nugget", self.has_nugget)) if present]


class Score(models.Model):
    """A run's scores against one gold version on one scope (all dialogues, or the live subset)."""

    FULL, LIVE = "full", "live"
    SCOPES = [(FULL, "whole gold"), (LIVE, "live subset")]

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="scores")
    gold_version = models.ForeignKey(GoldVersion, on_delete=models.CASCADE, related_name="scores")
    scope = models.CharField(max_length=10, choices=SCOPES, default=FULL)
    summary = models.JSONField(help_text="the structure of `score --format json`")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "gold_version", "scope"], name="unique_score")]

    def __str__(self) -> str:
        return f"{self.run} on {self.gold_version} ({self.scope})"


class ScoreVector(models.Model):
    """Per-dialogue scores of one measure as float64 bytes, in the gold version's dialogue order.

    One row per run and measure: a dialogue-by-run matrix for the significance tests is one
    query (``key`` and the runs) and a ``np.frombuffer`` per run.
    """

    score = models.ForeignKey(Score, on_delete=models.CASCADE, related_name="vectors")
    key = models.CharField(max_length=64, help_text="'quality.<dimension>.<measure>' or 'nugget.<measure>'")
    mean = models.FloatField()
    values = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["score", "key"], name="unique_score_vector")]
        indexes = [models.Index(fields=["key"])]

    def __str__(self) -> str:
        return f"{self.key} of {self.score}"

    def array(self) -> np.ndarray:
        return np.frombuffer(bytes(self.values), dtype=np.float64)


class AccessLog(models.Model):
    """Who downloaded gold-derived data (exports, per-dialogue scores, run files)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    task = models.ForeignKey(Task, null=True, on_delete=models.CASCADE, related_name="access_log")
    what = models.CharField(max_length=200)
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.user}: {self.what}"
