"""E-mail notifications and announcements: the participants' choices, the organisers' announcements,
and the outbox every e-mail goes through (``notices.outbox``)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import ProhibitNullCharactersValidator
from django.db import models
from django.utils import timezone

from tasks.models import Task

# What a participant may turn off, in the words of the account page. Messages the organisers write
# to every participant (``MESSAGE``) cannot be turned off: they are how a round's organisers reach
# everyone (a moved deadline, a fixed gold file).
RUN_RESULTS = "run_results"
PHASE_REMINDERS = "phase_reminders"
PUBLICATIONS = "publications"
ANNOUNCEMENTS = "announcements"
MESSAGE = "message"
CHOICES = {
    RUN_RESULTS: "when a run of your team is scored or fails (with its first errors)",
    PHASE_REMINDERS: "24 hours and 1 hour before a phase of a task you take part in opens or closes",
    PUBLICATIONS: "when the results of a phase of a task you take part in are published",
    ANNOUNCEMENTS: "the organisers' announcements of the tasks you take part in",
}
TOPICS = [*((key, key.replace("_", " ")) for key in CHOICES), (MESSAGE, "message from the organisers")]


class Preference(models.Model):
    """Which e-mails one person wants; without a row, every one (a new account is told of its runs)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notice_preference")
    run_results = models.BooleanField(default=True)
    phase_reminders = models.BooleanField(default=True)
    publications = models.BooleanField(default=True)
    announcements = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"e-mail choices of {self.user}"


class Announcement(models.Model):
    """A dated announcement of a task's organisers: on the task's overview, in its Atom feed, and
    e-mailed to its participants who want announcements."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="announcements")
    title = models.CharField(max_length=200, validators=[ProhibitNullCharactersValidator()])
    body = models.TextField(max_length=10_000, validators=[ProhibitNullCharactersValidator()])
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    recipients = models.PositiveIntegerField(default=0, help_text="e-mails recorded for it")

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.task.slug}: {self.title}"


class Event(models.Model):
    """An event told once (a phase reminder): its key is unique, so two clocks record it once."""

    key = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.key


class Email(models.Model):
    """One e-mail to one person (the outbox): recorded in the transaction of what caused it, sent
    by the background worker, retried with a growing wait, never deleted."""

    topic = models.CharField(max_length=20, choices=TOPICS)
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    address = models.EmailField(max_length=254)
    subject = models.CharField(max_length=300)
    body = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    claimed_until = models.DateTimeField(null=True, blank=True, help_text="a sender is at it until then")
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    gave_up_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["sent_at", "gave_up_at", "next_attempt_at"], name="notices_email_due")]

    def __str__(self) -> str:
        return f"{self.topic} to {self.address}: {self.subject}"
