"""Shared tasks, their gold data versions and phases, teams, runs and stored scores."""

from __future__ import annotations

import functools
import hashlib
import re
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
from tasks.phaserules import publication_problem, reopening_problem

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
    # What the overview page says beside the description and the phases.
    rules = models.TextField(blank=True, validators=[ProhibitNullCharactersValidator()],
                             help_text="the task's rules, shown on its overview page")
    contact = models.CharField(max_length=300, blank=True, validators=[ProhibitNullCharactersValidator()],
                               help_text="how to reach the organisers: an email address, a URL or a sentence")
    citation = models.TextField(blank=True, validators=[ProhibitNullCharactersValidator()],
                                help_text="how to cite the task (a reference or BibTeX), shown on its overview page")
    terms = models.TextField(
        blank=True, validators=[ProhibitNullCharactersValidator()],
        help_text="terms participants accept before they submit runs or download data kept for registered "
                  "teams; every acceptance is recorded with the text accepted. A changed text is a new version "
                  "that everyone accepts again. Empty: nothing to accept")
    max_team_size = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="the most members a team taking part in this task may have (checked when somebody joins a team "
                  "that has runs in the task, and at every upload); empty: no limit")
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

    @property
    def terms_sha256(self) -> str:
        """The version of the terms: the SHA-256 of their text (an edit is a new version)."""
        return terms_digest(self.terms)

    def terms_accepted_by(self, user: Any) -> bool:
        """Whether the user accepted the current terms (always true when the task has none)."""
        if not self.terms.strip():
            return True
        return bool(user.is_authenticated and self.terms_acceptances.filter(
            user=user, terms_sha256=self.terms_sha256).exists())

    def is_organiser(self, user: Any) -> bool:
        """The task's organisers and superusers. Staff status alone is no right: it only opens the
        admin, where model permissions decide (a staff account without any saw every hidden task,
        dashboard and runs.zip)."""
        if not user.is_authenticated or not user.is_active:
            return False
        return user.is_superuser or self.organisers.filter(pk=user.pk).exists()


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
    source_sha256 = models.CharField(
        max_length=64, blank=True,
        help_text="the gold file as uploaded, kept under this SHA-256 (participants' data is made from it); "
                  "empty for versions loaded before gold files were kept: they have no participants' data")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="unique_gold_version_number")]
        ordering = ["task", "number"]

    def __str__(self) -> str:
        return f"{self.task.slug} gold v{self.number}"

    def load(self) -> Any:
        return _compiled_gold(self.pk, self.task.kind, bytes(self.compiled))


    def provenance_summary(self) -> dict[str, Any] | None:
        """The few figures of how this version was made that a list of versions shows (the kind's
        ``provenance_summary``: the response kind's vBLEU extension), or None."""
        return self.task.kind_impl.provenance_summary(self.provenance if isinstance(self.provenance, dict) else {})

    def provenance_words(self) -> str:
        """How this version was made, in a reader's words (empty for a version uploaded as it is)."""
        return self.task.kind_impl.describe_provenance(self.provenance if isinstance(self.provenance, dict) else {})


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
    publish_at = models.DateTimeField(
        null=True, blank=True,
        help_text="test and final phases: the results are published on their own at this time (UTC), not before "
                  "the phase and every phase taking runs on its gold have ended; empty: published by hand")
    gold_changes = models.JSONField(
        default=list, blank=True, editable=False,
        help_text="each move of the phase to another gold version: from, to (numbers), at (ISO time), the runs "
                  "scored again; shown to participants on the overview and on their run pages")
    clock_state = models.CharField(
        max_length=10, blank=True, editable=False,
        help_text="the state the phase clock (tasks.phaseclock) last recorded: upcoming, open or ended")
    # The latest end of an extension given to one team (tasks.late), kept here so that every rule
    # reading a list of phases (publication, a secret gold, references) sees the phase still taking runs.
    late_until = models.DateTimeField(null=True, blank=True, editable=False,
                                      help_text="until when an extension lets a team submit after the end")
    data_registered_only = models.BooleanField(
        default=False, help_text="the phase's data (participants' data, sample run, the organisers' files of the "
                                 "phase) only for signed-in members of a team, approved where the task requires "
                                 "approval, who accepted the task's terms where it has terms; organisers always")

    class Meta:
        ordering = ["task", "starts_at"]
        constraints = [
            models.UniqueConstraint(fields=["task", "name"], name="unique_phase_name"),
            models.CheckConstraint(condition=models.Q(ends_at__gt=models.F("starts_at")),
                                   name="phase_ends_after_start"),
        ]

    def __str__(self) -> str:
        return f"{self.task.slug}: {self.name}"

    def gold_change_notes(self, since: datetime | None = None) -> list[str]:
        """Each move of the phase to another gold version (``gold_changes``), as participants read it;
        ``since``: only those after that time (a run's page: the changes that re-scored it)."""
        notes = []
        for change in self.gold_changes or []:
            at = datetime.fromisoformat(change["at"])
            if since is not None and at < since:
                continue
            count = change.get("runs_rescored", 0)
            notes.append(f"On {at:%Y-%m-%d %H:%M} UTC the organisers moved the {self.name} phase from gold version "
                         f"{change['from']} to version {change['to']}; {count} run{'s' if count != 1 else ''} "
                         f"submitted before then {'were' if count != 1 else 'was'} scored again against it.")
        return notes

    def published_at(self, at: datetime | None = None) -> bool:
        """Ticked, or its scheduled publication time has come (whether the phase clock has
        recorded it yet or not: a publication at a time is exact to the second)."""
        at = at or timezone.now()
        return self.results_published or (self.publish_at is not None and self.publish_at <= at)

    @property
    def closes_at(self) -> datetime:
        """When the phase stops taking runs from every team: its end, or a team's later extension."""
        return max(self.ends_at, self.late_until) if self.late_until else self.ends_at

    def is_open(self, at: datetime | None = None) -> bool:
        at = at or timezone.now()
        return self.starts_at <= at < self.ends_at

    @property
    def takes_runs(self) -> bool:
        """Development and test phases accept runs while open; a final phase never does."""
        return self.kind != self.FINAL

    def state(self, at: datetime | None = None) -> str:
        """"upcoming", "open" or "ended" (by the clock: nothing has to flip it)."""
        at = at or timezone.now()
        if at < self.starts_at:
            return "upcoming"
        return "open" if at < self.ends_at else "ended"

    def open_phases_on_gold(self, at: datetime | None = None) -> list[Phase]:
        """The phases of the task that accept runs now and are scored against this phase's gold
        (this phase itself if it is open and takes runs). While one exists, publishing scores on
        that gold would answer every new run with its whole-test-set and per-item scores: the
        test set would be an oracle."""
        at = at or timezone.now()
        found = [] if self.pk is None else list(
            Phase.objects.filter(models.Q(ends_at__gt=at) | models.Q(late_until__gt=at), task_id=self.task_id,
                                 gold_version_id=self.gold_version_id, starts_at__lte=at)
            .exclude(kind=self.FINAL).exclude(pk=self.pk))
        if self.takes_runs and self.starts_at <= at < self.closes_at:
            found.insert(0, self)
        return found

    def clean(self) -> None:
        super().clean()
        if self.task_id and self.gold_version_id and self.gold_version.task_id != self.task_id:
            # A phase scores its runs on its task's gold: another task's version would score them on
            # items they never saw (and show that task's gold to this task's organisers).
            raise ValidationError({"gold_version": f"{self.gold_version} is a gold version of another task; "
                                                   f"choose one of {self.task.slug}'s versions"})
        if self.publish_at is not None and self.ends_at and self.publish_at < self.ends_at:
            raise ValidationError({"publish_at": f"the results can be published at {self.ends_at:%Y-%m-%d %H:%M} "
                                                 "UTC (the phase's end) at the earliest"})
        if self.publish_at is not None and self.kind == self.DEVELOPMENT:
            raise ValidationError({"publish_at": "a development phase has no results to publish"})
        if self.results_published and self.task_id and self.gold_version_id and self.starts_at and self.ends_at:
            problem = reopening_problem(self) or publication_problem(self, self.open_phases_on_gold())
            if self.takes_runs and self.starts_at > timezone.now():
                problem = (f"The {self.name} phase has not started yet (it opens at "
                           f"{self.starts_at:%Y-%m-%d %H:%M} UTC): it has no results to publish.")
            if problem:
                raise ValidationError({"results_published": problem})

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
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="owned_teams",
        help_text="the member who manages the team (renames it, removes members, renews the join code); empty or "
                  "no longer a member: the member who joined first (tasks.teams.team_owner)")
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
    # Where readers find more about the method: shown on the run's page (public once the results
    # are); the team fills them in and edits them (http and https only: tasks.runlinks).
    paper_url = models.URLField(max_length=500, blank=True, help_text="the paper that describes the method")
    code_url = models.URLField(max_length=500, blank=True, help_text="the method's code")
    original_filename = models.CharField(max_length=255, blank=True)
    parts = models.JSONField(default=list, blank=True,
                             help_text="the measure groups the run was scored in (a DQ-only run: ['quality'])")
    status = models.CharField(max_length=10, choices=STATUSES, default=QUEUED, db_index=True)
    gold_version = models.ForeignKey(GoldVersion, null=True, on_delete=models.PROTECT, related_name="+",
                                     help_text="the gold version the status refers to")
    errors = models.JSONField(default=list, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    late = models.BooleanField(default=False, help_text="submitted after its phase's end, under its team's extension")
    on_behalf = models.BooleanField(default=False, help_text="uploaded by an organiser (submitted by) for the team")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    queued_at = models.DateTimeField(default=timezone.now, help_text="when the scoring job was last queued")
    last_sent_at = models.DateTimeField(null=True, blank=True,
                                        help_text="when a scoring job was last handed to the broker")
    sends = models.PositiveIntegerField(default=0, help_text="scoring jobs handed to the broker in all")
    interruptions = models.PositiveSmallIntegerField(
        default=0, help_text="times its scoring job died (time limit, worker killed) and was sent again")
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="last sign of life of the background worker scoring it (none under Celery)")
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
    # A corpus-level measure's per-item sufficient statistics (items x ``n_statistics`` float64,
    # row-major): its significance tests and intervals recompute the corpus figure from them
    # (docs/statistics.md, "Corpus-level measures"). Empty for mean measures.
    statistics = models.BinaryField(default=b"", blank=True)
    n_statistics = models.PositiveSmallIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["score", "key"], name="unique_score_vector")]
        indexes = [models.Index(fields=["key"])]

    def __str__(self) -> str:
        return f"{self.key} of {self.score}"

    def array(self) -> np.ndarray:
        return np.frombuffer(bytes(self.values), dtype=np.float64)

    @staticmethod
    def statistics_array(blob: bytes | memoryview, width: int) -> np.ndarray | None:
        """Stored sufficient statistics as (items x width), or None when none were stored."""
        if not width:
            return None
        return np.frombuffer(bytes(blob), dtype=np.float64).reshape(-1, width)


DATA_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# The files the server makes for every data section; an organiser's file may not take their names.
GENERATED_DATA_FILES = ("participant-data.json", "format.json", "sample-run.json")


# The client refuses these names too (client/evalserver_cli.py, WINDOWS_DEVICES).
WINDOWS_DEVICE_NAMES = frozenset({"con", "prn", "aux", "nul"} | {f"{port}{n}" for port in ("com", "lpt")
                                                                  for n in range(1, 10)})


def validate_data_file_name(name: str) -> None:
    """A name that is safe as a URL path part and as a file name on any system (the command-line
    client saves files under it): letters, digits, ``.``, ``-`` and ``_``, starting with a letter
    or digit, at most 100 characters, no ``..``; not one of the generated files' names."""
    if not DATA_FILE_NAME.fullmatch(name or ""):
        raise ValidationError(f"{name!r} is not a valid file name: use 1-100 letters, digits, '.', '-' and '_', "
                              "starting with a letter or digit")
    if ".." in name or name.endswith("."):
        raise ValidationError(f"{name!r} is not a valid file name: no '..' and no '.' at the end")
    if name.split(".")[0].lower() in WINDOWS_DEVICE_NAMES:
        raise ValidationError(f"{name!r} is not a valid file name: Windows keeps {name.split('.')[0]!r} for a "
                              "device, whatever the extension (participants could not save it)")
    if name.lower() in GENERATED_DATA_FILES:
        raise ValidationError(f"{name!r} is the name of a file the server makes itself; choose another name")


class DataFile(models.Model):
    """A file the organisers add to a task's data section (guidelines, a training set, a script),
    stored unchanged under its SHA-256 (``tasks.datafiles``)."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="data_files")
    phase = models.ForeignKey(
        Phase, null=True, blank=True, on_delete=models.CASCADE, related_name="data_files",
        help_text="the phase whose data section lists the file, with that phase's access rule (from its start; "
                  "registered teams only if the phase says so); empty: the whole task, listed in every data "
                  "section and available to everyone who can see the task")
    name = models.CharField(max_length=100, validators=[validate_data_file_name],
                            help_text="the download's file name, unique in the task")
    description = models.TextField(blank=True, max_length=2000, validators=[ProhibitNullCharactersValidator()])
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    uploaded_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    uploaded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["task", "name"]
        constraints = [models.UniqueConstraint(fields=["task", "name"], name="unique_data_file_name")]

    def __str__(self) -> str:
        return f"{self.task.slug}: {self.name}"


def terms_digest(text: str) -> str:
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()


class Profile(models.Model):
    """What a participant says about themselves at sign-up beyond the account."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile")
    affiliation = models.CharField(max_length=200, validators=[ProhibitNullCharactersValidator()],
                                   help_text="university, company or lab")

    def __str__(self) -> str:
        return f"{self.user}: {self.affiliation}"


class TermsAcceptance(models.Model):
    """Who accepted which text of a task's terms, and when: the record organisers can show."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="terms_acceptances")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                             related_name="terms_acceptances")
    username = models.CharField(max_length=150, help_text="kept if the account is deleted")
    affiliation = models.CharField(max_length=200, blank=True, help_text="as given then")
    terms_sha256 = models.CharField(max_length=64, help_text="the version: SHA-256 of the text accepted")
    terms = models.TextField(help_text="the text accepted, word for word")
    accepted_at = models.DateTimeField(default=timezone.now)
    ip_address = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        ordering = ["-accepted_at"]
        constraints = [models.UniqueConstraint(fields=["task", "user", "terms_sha256"], name="unique_terms_acceptance")]

    def __str__(self) -> str:
        return (f"{self.username} accepted the terms of {self.task.slug} ({self.terms_sha256[:12]}) "
                f"on {self.accepted_at:%Y-%m-%d}")


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


from tasks.extensions import Extension  # noqa: E402,F401 - a model of this app kept in its own module

# A model of its own module (the heartbeats and the model they write), registered with the app here.
from tasks.heartbeats import WorkerHeartbeat  # noqa: E402, F401
