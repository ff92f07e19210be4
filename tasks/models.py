"""Shared tasks, their gold data versions and phases, teams, runs and stored scores."""

from __future__ import annotations

import functools
import secrets
from datetime import datetime
from typing import Any

import numpy as np
import orjson
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import (
    MaxValueValidator,
    MinValueValidator,
    ProhibitNullCharactersValidator,
    RegexValidator,
)
from django.db import models
from django.utils import timezone

from scoring.kinds import KINDS, Kind, MeasureSpec, get_kind
from tasks.names import validate_visible_name

slug_validator = RegexValidator(r"^[a-z0-9][a-z0-9-]{1,48}[a-z0-9]$",
                                "use 3-50 lower-case letters, digits and hyphens, not starting or ending with -")


def validate_kind(name: str) -> None:
    if name not in KINDS:
        raise ValidationError(f"unknown task kind {name!r}; known kinds: {', '.join(sorted(KINDS))}")


class Task(models.Model):
    """A shared task of one kind (``scoring.kinds``: DQ/ND ``stc3``, ``response``, ``metric``, ...)
    with its configuration and rules. Everything about its files and numbers is the kind's."""

    slug = models.CharField(max_length=50, unique=True, validators=[slug_validator])
    # PostgreSQL refuses NUL characters in text: say so in validation, not with a database error.
    title = models.CharField(max_length=200, validators=[ProhibitNullCharactersValidator()])
    description = models.TextField(blank=True, validators=[ProhibitNullCharactersValidator()])
    kind = models.CharField(max_length=30, default="stc3", validators=[validate_kind],
                            help_text="the kind of task (scoring.kinds): what files look like and how they are scored")
    config = models.JSONField(help_text="the kind's configuration as a dict (labels, measures, options)")
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
    def kind_impl(self) -> Kind:
        return get_kind(self.kind)

    @property
    def kind_config(self) -> Any:
        """The validated configuration object of the task's kind (cached per configuration)."""
        return _kind_config(self.kind, orjson.dumps(self.config, option=orjson.OPT_SORT_KEYS))

    @property
    def item_noun(self) -> str:
        """What the kind scores one by one: "dialogue", "context"."""
        return self.kind_impl.item_noun

    def items(self, count: int) -> str:
        """``300 dialogues``, ``1 context``: a count in the kind's words."""
        return f"{count:,} {self.item_noun}{'' if count == 1 else 's'}"

    def measure_specs(self, keys: list[str] | None = None) -> list[MeasureSpec]:
        """The kind's measures for this task in display order, only ``keys`` when given (a gold
        version's ``measure_keys``)."""
        specs = self.kind_impl.measures(self.kind_config)
        return specs if keys is None else [spec for spec in specs if spec.key in set(keys)]

    def clean(self) -> None:
        super().clean()
        if self.kind in KINDS:
            try:
                self.kind_impl.config(self.config if isinstance(self.config, dict) else {})
            except (TypeError, ValueError) as error:
                raise ValidationError({"config": str(error)}) from None
            if not isinstance(self.config, dict):
                raise ValidationError({"config": "must be a JSON object"})

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
    compiled = models.BinaryField(help_text="the kind's compiled gold (to_bytes()), ready for scoring")
    sha256 = models.CharField(max_length=64)
    source_name = models.CharField(max_length=255, blank=True)
    n_items = models.PositiveIntegerField()
    measure_keys = models.JSONField(default=list, blank=True,
                                    help_text="the keys of the measures runs are scored with against this version")
    warnings = models.JSONField(default=list, blank=True)
    provenance = models.JSONField(
        default=dict, blank=True,
        help_text="how the version was made when not uploaded as it is (vBLEU: the version extended, the pool's "
                  "checksum, retrieval and rater settings, held-out accuracy, seed)")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="unique_gold_version_number")]
        ordering = ["task", "number"]

    def __str__(self) -> str:
        return f"{self.task.slug} gold v{self.number}"

    def load(self) -> Any:
        return _compiled_gold(self.pk, self.task.kind, bytes(self.compiled))


    def vbleu_summary(self) -> dict[str, Any] | None:
        """The few vBLEU provenance figures a list of versions shows, or None for another version."""
        extension = self.provenance.get("vbleu") if isinstance(self.provenance, dict) else None
        if not isinstance(extension, dict):
            return None
        rater = extension.get("rater", {})
        automatic = rater.get("kind") == "automatic"
        return {"extends": self.provenance.get("extends"), "pool_sha256": extension.get("pool", {}).get("sha256", ""),
                "k": extension.get("retrieval", {}).get("settings", {}).get("k"), "rater": rater.get("kind"),
                "seed": rater.get("settings", {}).get("seed") if automatic else None,
                "held_out_accuracy": rater.get("held_out_accuracy") if automatic else None}


class ReferencePool(models.Model):
    """A dialogue pool vBLEU retrieves references from (JSONL utterance-response pairs), stored once
    by its sha256 under ``MEDIA_ROOT/pools`` (``tasks.pools``)."""

    sha256 = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=255, blank=True, validators=[ProhibitNullCharactersValidator()],
                            help_text="the uploaded file's name, for display")
    n_pairs = models.PositiveIntegerField()
    size = models.PositiveBigIntegerField(help_text="bytes")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"pool {self.sha256[:12]} ({self.n_pairs:,} pairs{', ' + self.name if self.name else ''})"


@functools.lru_cache(maxsize=8)
def _compiled_gold(pk: int, kind: str, data: bytes) -> Any:
    # Versions never change once written, so the primary key is a sound cache key; the bytes
    # argument only makes a cache miss possible without another query.
    return get_kind(kind).gold_from_bytes(data)


@functools.lru_cache(maxsize=64)
def _kind_config(kind: str, config: bytes) -> Any:
    # A task page, a board and a scoring job each need the validated configuration; validating
    # it once per distinct configuration is enough (the key is the configuration itself).
    return get_kind(kind).config(orjson.loads(config))


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
        null=True, blank=True, help_text="test phase: the live leaderboard scores this many items only")
    live_subset_seed = models.PositiveIntegerField(default=0)
    per_item_feedback = models.BooleanField(default=True, help_text="run owners see per-item scores")
    requires_method_description = models.BooleanField(default=False)
    results_published = models.BooleanField(
        default=False, help_text="final phase: full-test-set scores and per-item scores are public")

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
        """Indices of the gold items the live leaderboard scores (fixed by the organiser's seed)."""
        n = self.gold_version.n_items
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
    parts = models.JSONField(default=list, blank=True,
                             help_text="the measure groups the run was scored in (a DQ-only run: ['quality'])")
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



class Score(models.Model):
    """A run's scores against one gold version on one scope (all items, or the live subset).

    ``summary`` is ``Scored.summary()``: ``{"measures": {key: headline}, "n_items": N, "settings":
    {...}}`` and whatever run-level figures the kind adds; ``details`` what a kind says per item
    beyond its numbers (the response kind's nugget scores), read only by run pages and exports."""

    FULL, LIVE = "full", "live"
    SCOPES = [(FULL, "whole gold"), (LIVE, "live subset")]

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="scores")
    gold_version = models.ForeignKey(GoldVersion, on_delete=models.CASCADE, related_name="scores")
    scope = models.CharField(max_length=10, choices=SCOPES, default=FULL)
    summary = models.JSONField(help_text="the structure of `score --format json`")
    details = models.JSONField(default=dict, blank=True, help_text="per-item details the kind reports")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "gold_version", "scope"], name="unique_score")]

    def __str__(self) -> str:
        return f"{self.run} on {self.gold_version} ({self.scope})"


class ScoreVector(models.Model):
    """Per-item scores of one measure as float64 bytes, in the gold version's item order.

    One row per run and measure: a dialogue-by-run matrix for the significance tests is one
    query (``key`` and the runs) and a ``np.frombuffer`` per run. ``mean`` is the measure's headline
    figure (the mean of the items, or a corpus-level figure where the measure says so).
    """

    score = models.ForeignKey(Score, on_delete=models.CASCADE, related_name="vectors")
    key = models.CharField(max_length=64, help_text="a measure key of the task's kind (scoring.kinds.measure_key)")
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
    """Who downloaded gold-derived data (exports, per-item scores, run files)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    task = models.ForeignKey(Task, null=True, on_delete=models.CASCADE, related_name="access_log")
    what = models.CharField(max_length=200)
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.user}: {self.what}"
