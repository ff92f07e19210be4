"""What stands in the way of a phase's publication or of moving its end: sentences the phase's
own validation (``Phase.clean``), the dashboard and the publication preview share. Apart from
``tasks.models`` so that the model module stays within its size; it imports no model."""

from __future__ import annotations

from typing import Any

from django.utils import timezone


def reopening_problem(phase: Any) -> str:
    """Why an edit may not move the end of a published phase that has ended into the future."""
    stored = type(phase).objects.filter(pk=phase.pk).values_list("ends_at", flat=True).first() if phase.pk else None
    now = timezone.now()
    if stored is None or stored > now or phase.ends_at <= now:
        return ""
    return (f"The {phase.name} phase has ended and its results are published: it cannot be reopened while they are. "
            "Withdraw the publication first (the dashboard's Withdraw publication button), then move its end. "
            "A reopened phase takes runs from every team; to let one team submit late, give that team an extension "
            "instead.")


def publication_problem(phase: Any, open_phases: list[Any]) -> str:
    """Why the results of ``phase`` cannot be published while ``open_phases`` accept runs on its
    gold (``Phase.open_phases_on_gold``), in a sentence; empty when nothing stands in the way."""
    if not open_phases:
        return ""
    now = timezone.now()

    def until(other: Any) -> str:
        if other.ends_at <= now:  # ended, yet a team's extension (tasks.late) still lets that team submit
            return f"until {other.closes_at:%Y-%m-%d %H:%M} UTC, under an extension given to a team"
        return f"until {other.closes_at:%Y-%m-%d %H:%M} UTC"

    names = " and ".join(f"{other.name} ({until(other)})" for other in open_phases)
    if open_phases == [phase]:
        which = f"the {phase.name} phase is still open for submissions {until(phase)}"
    else:
        which = f"{'the phase' if len(open_phases) == 1 else 'the phases'} {names} still accept runs on the same gold"
    return (f"The results of the {phase.name} phase cannot be published yet: {which}. Every run submitted after "
            "publication would get its scores on the whole test set and per item, which would turn the test set "
            "into an answer key. Close submissions first (or wait until the phase ends), then publish."
            + (" Closing also ends the extensions given to teams." if any(other.ends_at <= now for other in open_phases)
               else ""))
