"""Annotation campaigns: what is judged (items), by whom (assessors, assignments), and the answers
(judgements), one row per answer so that each is committed on its own (docs/organisers/campaigns.md)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, ProhibitNullCharactersValidator
from django.db import models

from tasks.models import GoldVersion, Run, Task

DIALOGUES, REFERENCES, RESPONSES = "dialogues", "references", "responses"
# Which campaign kinds a task kind offers (issue 40.1): dialogues make STC-3 gold; references are a
# response task's gold references rated for deltaBLEU's weights; responses are pooled system
# responses (a response task's runs, a metrics task's gold responses) on the organiser's dimensions.
KINDS_FOR_TASK = {"stc3": (DIALOGUES,), "response": (REFERENCES, RESPONSES), "metric": (RESPONSES,)}
KIND_WORDS = {DIALOGUES: "dialogues (A, E, S and a nugget label per turn, as STC-3)",
              REFERENCES: "references (each gold reference rated 1-5 for deltaBLEU's weights)",
              RESPONSES: "responses (pooled system responses on dimensions you define)"}


# Default orderings name columns (``campaign_id``), never relations: ordering by a relation orders
# by the related model's own ordering, a join per query (a save on the judging page paid three).


class Campaign(models.Model):
    """One round of human judgements on a task's items: draft (being set up), open (assessors
    judge), closed (no more answers; the gold and the ranking are made from it)."""

    DRAFT, OPEN, CLOSED = "draft", "open", "closed"
    STATES = [(DRAFT, "draft"), (OPEN, "open"), (CLOSED, "closed")]

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="campaigns")
    name = models.CharField(max_length=200, validators=[ProhibitNullCharactersValidator()])
    kind = models.CharField(max_length=20, choices=[(kind, kind) for kind in KIND_WORDS])
    state = models.CharField(max_length=10, choices=STATES, default=DRAFT)
    instructions = models.TextField(blank=True, validators=[ProhibitNullCharactersValidator()],
                                    help_text="what assessors read above every item")
    per_item = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(1), MaxValueValidator(50)],
        help_text="k: how many distinct assessors judge each item")
    # [{"name", "min", "max", "level", "points": {"1": "meaning", ...}}] (scales) or
    # [{"name", "labels": [...], "level": "nominal"}]; the dialogues kind's are STC-3's, fixed.
    dimensions = models.JSONField(default=list)
    gold_version = models.ForeignKey(GoldVersion, null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="+", help_text="the gold version whose items are judged")
    runs = models.ManyToManyField(Run, blank=True, related_name="+", help_text="the runs whose responses are judged")
    seed = models.PositiveIntegerField(default=40, help_text="seed of the assignment and of each assessor's order")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.task.slug}: {self.name}"


class Assessor(models.Model):
    """A user's role in one campaign, under a pseudonym (``code``) that exports and gold provenance
    use: the judgements file names assessors, never accounts."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="assessors")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="assessor_roles")
    code = models.CharField(max_length=100, validators=[ProhibitNullCharactersValidator()])
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["campaign_id", "code"]
        constraints = [models.UniqueConstraint(fields=["campaign", "code"], name="unique_assessor_code"),
                       models.UniqueConstraint(fields=["campaign", "user"], name="unique_assessor_user")]

    def __str__(self) -> str:
        return f"{self.campaign_id}/{self.code}"


class Item(models.Model):
    """One thing judged: a dialogue, a reference, or a pooled response. ``content`` is all an
    assessor sees (the text and its context); ``sources`` is for organisers only (which runs gave a
    pooled response, which gold item and reference an item is)."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="items")
    key = models.CharField(max_length=300, help_text="the item's id in judgements files")
    content = models.JSONField()
    sources = models.JSONField(default=dict, blank=True)
    # The teams whose runs gave a pooled response: their members never judge it.
    team_ids = models.JSONField(default=list, blank=True)
    is_check = models.BooleanField(default=False)
    check_answer = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["pk"]
        constraints = [models.UniqueConstraint(fields=["campaign", "key"], name="unique_item_key")]

    def __str__(self) -> str:
        return self.key


class Assignment(models.Model):
    """An item in one assessor's queue, at its place in their own random order."""

    assessor = models.ForeignKey(Assessor, on_delete=models.CASCADE, related_name="assignments")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="assignments")
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["assessor_id", "position"]
        constraints = [models.UniqueConstraint(fields=["assessor", "item"], name="never_the_same_item_twice"),
                       models.UniqueConstraint(fields=["assessor", "position"], name="one_item_per_position")]

    def __str__(self) -> str:
        return f"{self.assessor} #{self.position}"


class Judgement(models.Model):
    """One assessor's answer on one item: ``values`` in the judgements file's shape (stc3:
    ``{"quality": {...}, "nugget": [...]}``; otherwise ``{"values": {dimension: value}}``), the
    seconds it took, and where it came from (the judging page or an imported file)."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="judgements")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="judgements")
    assessor = models.ForeignKey(Assessor, on_delete=models.CASCADE, related_name="judgements")
    values = models.JSONField()
    seconds = models.FloatField(null=True, blank=True)
    imported = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pk"]
        constraints = [models.UniqueConstraint(fields=["item", "assessor"], name="one_judgement_per_item_and_assessor")]

    def __str__(self) -> str:
        return f"{self.assessor} on {self.item_id}"

    def as_record(self) -> dict[str, Any]:
        """The judgement as one object of a judgements file (JUDGEMENTS-SPEC.md)."""
        record: dict[str, Any] = {"item": self.item.key, "assessor": self.assessor.code, **self.values}
        if self.seconds is not None:
            record["seconds"] = round(self.seconds, 3)
        return record
