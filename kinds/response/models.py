"""The response kind's records on the server: the dialogue pools vBLEU retrieves references from,
and the background pool jobs. Their tables are those they had in the ``tasks`` app (state-only
migrations moved them here; no row moved)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator
from django.db import models
from django.utils import timezone


class ReferencePool(models.Model):
    """A dialogue pool vBLEU retrieves references from (JSONL utterance-response pairs), stored once
    by its sha256 under ``MEDIA_ROOT/pools`` (``kinds.response.extension_jobs``)."""

    sha256 = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=255, blank=True, validators=[ProhibitNullCharactersValidator()],
                            help_text="the uploaded file's name, for display")
    n_pairs = models.PositiveIntegerField()
    size = models.PositiveBigIntegerField(help_text="bytes")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "tasks_referencepool"  # the table it had in the tasks app: moved without moving data
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"pool {self.sha256[:12]} ({self.n_pairs:,} pairs{', ' + self.name if self.name else ''})"


class PoolJob(models.Model):
    """Long pool work done in the background, with its progress for the page that follows it
    (``kinds.response.extension_jobs``): reading and storing an uploaded pool (``task`` empty), or extending a
    response task's gold with vBLEU references from a pool into a new gold version.

    The uploaded files wait under ``MEDIA_ROOT/pool-uploads`` (by checksum) until the job ends.
    A job is held by one process at a time through ``claim_token`` and a heartbeat: a job whose
    heartbeat stopped (its worker was killed or restarted) is taken over, at most
    ``kinds.response.extension_jobs.MAX_ATTEMPTS`` times, and then fails with a reason; it never stays running."""

    QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
    STATUSES = [(QUEUED, "queued"), (RUNNING, "running"), (DONE, "done"), (FAILED, "failed")]

    task = models.ForeignKey("tasks.Task", null=True, blank=True, on_delete=models.CASCADE, related_name="pool_jobs",
                             help_text="the response task whose gold is extended; empty: store the pool only")
    pool = models.ForeignKey(ReferencePool, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
                             help_text="the stored pool used, or (once done) the pool the upload was stored as")
    upload_sha256 = models.CharField(max_length=64, blank=True, help_text="the uploaded pool waiting to be read")
    upload_name = models.CharField(max_length=255, blank=True, validators=[ProhibitNullCharactersValidator()])
    ratings_sha256 = models.CharField(max_length=64, blank=True, help_text="uploaded human ratings, if any")
    options = models.JSONField(default=dict, blank=True,
                               help_text="from_version, label, phase ids, retrieval and rater settings")
    status = models.CharField(max_length=8, choices=STATUSES, default=QUEUED, db_index=True)
    stage = models.CharField(max_length=16, blank=True)
    done = models.PositiveBigIntegerField(default=0)
    total = models.PositiveBigIntegerField(default=0)
    stages_done = models.JSONField(default=list, blank=True, help_text="[stage, seconds] of each finished stage")
    errors = models.JSONField(default=list, blank=True)
    result = models.JSONField(default=dict, blank=True, help_text="what was made: pool, version, figures")
    version = models.ForeignKey("tasks.GoldVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    claim_token = models.CharField(max_length=32, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True, help_text="when the job was last handed to a worker")
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "tasks_pooljob"  # the table it had in the tasks app: moved without moving data
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        what = f"vBLEU references for {self.task.slug}" if self.task_id else "pool upload"
        return f"{what} (job {self.pk}, {self.status})"

    @property
    def finished(self) -> bool:
        return self.status in (self.DONE, self.FAILED)
