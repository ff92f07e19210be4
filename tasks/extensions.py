"""The ``Extension`` model: one team's permission to submit runs to one phase after its end, until a
date and time the task's organisers set. The rules around it (giving, ending, what a late run is)
are ``tasks.late``; this module holds the model only, imported by ``tasks.models`` (it imports no
other model module, so the two never import each other)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Extension(models.Model):
    """An organiser's extension of a phase's deadline for one team: the team's runs are accepted
    until ``until`` and marked late (``Run.late``); every other team's deadline stays the phase's end."""

    phase = models.ForeignKey("tasks.Phase", on_delete=models.CASCADE, related_name="extensions")
    team = models.ForeignKey("tasks.Team", on_delete=models.CASCADE, related_name="extensions")
    until = models.DateTimeField(help_text="the team's runs are accepted until this time (UTC)")
    note = models.CharField(max_length=300, blank=True, help_text="why, for the organisers and the team")
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "tasks"
        constraints = [models.UniqueConstraint(fields=["phase", "team"], name="one_extension_per_team_and_phase")]

    def __str__(self) -> str:
        return f"{self.phase}: {self.team} until {self.until:%Y-%m-%d %H:%M} UTC"
