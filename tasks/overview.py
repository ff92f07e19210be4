"""A task's overview page: description, the phases with their dates and what each allows, rules,
contact, how to cite, and the task's terms, which a signed-in participant accepts here (recorded)."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from datetime import datetime

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator, validate_email
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from tasks import access
from tasks.hooks import page_sections
from tasks.models import Phase, Profile, Task
from tasks.registration import affiliation_problems, record_acceptance, set_affiliation


@dataclass
class PhaseSummary:
    phase: Phase
    state: str  # "upcoming", "open" or "ended"
    allows: list[str]


def phase_state(phase: Phase, now: datetime) -> str:
    if now < phase.starts_at:
        return "upcoming"
    return "open" if now < phase.ends_at else "ended"


def phase_allows(task: Task, phase: Phase, phases: list[Phase] | None = None) -> list[str]:
    """What a phase allows, in sentences, from its settings (the rules ``tasks.submissions`` and
    ``tasks.access`` apply)."""
    noun = task.item_noun
    n_items = phase.gold_version.n_items
    lines = []
    if phase.kind == Phase.FINAL:
        lines.append("No submissions: this phase shows the test runs on the whole test set, with significance "
                     "results, once the organisers publish the results.")
    else:
        lines.append(f"Submissions: at most {phase.daily_quota} run{'s' if phase.daily_quota != 1 else ''} a day "
                     f"(UTC) and {phase.total_quota} in all per team"
                     + ("; every run needs a description of the method." if phase.requires_method_description
                        else "."))
        if phase.live_subset_size and phase.live_subset_size < n_items:
            lines.append(f"Live leaderboard on a fixed subset of {phase.live_subset_size:,} of the "
                         f"{task.items(n_items)}; scores on the whole set once the results are published.")
        else:
            lines.append(f"Leaderboard on all {task.items(n_items)}.")
    if phase.kind in access.TEST_KINDS:
        lines.append(f"Per-{noun} scores reach participants only once the results are published.")
    elif phase.per_item_feedback:
        lines.append(f"Each team sees the per-{noun} scores of its own runs.")
    else:
        lines.append(f"No per-{noun} scores for participants.")
    if phase.kind in access.TEST_KINDS:
        lines.append(publication_line(phase, phases if phases is not None else [phase]))
    lines += phase.gold_change_notes()
    lines.append("Data: " + ("for registered teams only" if phase.data_registered_only else "for everyone")
                 + f", from {phase.starts_at:%Y-%m-%d %H:%M} UTC.")
    return lines


def publication_line(phase: Phase, phases: list[Phase], now: datetime | None = None) -> str:
    """What a participant can expect of a test or final phase's results, as the rules stand now
    (``tasks.access.publication_counts``): never "published" while runs can still arrive."""
    now = now or timezone.now()
    if access.publication_counts(phases, phase, now):
        return "Results published."
    open_now = access.accepting_runs_on(phases, phase.gold_version_id, now)
    if phase.results_published and open_now:
        return ("Results published once submissions on this test set close ("
                + ", ".join(f"{other.name} ends at {other.ends_at:%Y-%m-%d %H:%M} UTC" for other in open_now) + ").")
    if phase.publish_at is not None and not phase.results_published:
        return (f"Results published on their own at {phase.publish_at:%Y-%m-%d %H:%M} UTC"
                + (" (once submissions on this test set close)." if open_now else "."))
    if phase.takes_runs and phase.is_open(now):
        return (f"Open for submissions until {phase.ends_at:%Y-%m-%d %H:%M} UTC; the results on the whole test "
                "set are published after it ends.")
    return "Results not published yet."


def contact_link(contact: str) -> str:
    """``mailto:`` for an email address, the address itself for a web URL, else nothing (text)."""
    text = contact.strip()
    try:
        validate_email(text)
        return f"mailto:{text}"
    except ValidationError:
        pass
    try:
        URLValidator(schemes=["http", "https"])(text)
        return text
    except ValidationError:
        return ""


@require_GET
def overview(request: HttpRequest, slug: str) -> HttpResponse:
    task = access.get_task_for_user(request.user, slug)
    now = timezone.now()
    phases = sorted(access.task_phases(task.pk), key=lambda phase: phase.starts_at)
    accepted = None
    if request.user.is_authenticated and task.terms.strip():
        accepted = task.terms_acceptances.filter(user=request.user, terms_sha256=task.terms_sha256).first()
    return render(request, "tasks/overview.html", {
        "task": task, "phases": [PhaseSummary(phase, phase_state(phase, now), phase_allows(task, phase, phases))
                                 for phase in phases],
        "contact_link": contact_link(task.contact), "accepted": accepted, "now": now,
        "terms_version": task.terms_sha256[:12], "kind": task.kind_impl,
        "needs_affiliation": request.user.is_authenticated and not Profile.objects.filter(user=request.user).exists(),
        "sections": page_sections("task-overview", request, task=task)})


@require_POST
@login_required
def accept_terms(request: HttpRequest, slug: str) -> HttpResponse:
    task = access.get_task_for_user(request.user, slug)
    if not task.terms.strip():
        messages.info(request, "This task has no terms to accept.")
        return redirect("task-overview", slug=task.slug)
    # The text the page showed: terms edited in between are not accepted unseen.
    if request.POST.get("terms_sha256") != task.terms_sha256 or request.POST.get("accept") != "on":
        messages.error(request, "Tick the box to accept the terms as shown (they may have changed since the page "
                                "was loaded: read them again).")
        return redirect("task-overview", slug=task.slug)
    if not Profile.objects.filter(user=request.user).exists():
        # Accounts made by create_participant have no affiliation yet: the acceptance records one.
        affiliation = unicodedata.normalize("NFC", request.POST.get("affiliation", "")).strip()
        problems = affiliation_problems(affiliation)
        if problems:
            messages.error(request, "Affiliation: " + "; ".join(problems) + ".")
            return redirect("task-overview", slug=task.slug)
        set_affiliation(request.user, affiliation)
    record_acceptance(request, task, request.user)
    messages.success(request, f"You accepted the terms of {task.title}.")
    return redirect("task-overview", slug=task.slug)
