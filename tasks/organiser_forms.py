"""The organiser's essentials on the dashboard, scoped to one task: loading a new gold version and
creating or editing a phase. Checked as the commands check them (``load_gold``, ``create_phase``:
``tasks.organising``), every problem named, nothing stored when there is one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_http_methods

from tasks import access
from tasks.errors import Rejected
from tasks.models import Phase, Task
from tasks.organiser import _get_task_for_organiser, _param
from tasks.organising import load_gold_version, phase_overlaps, phase_problems

# The form's fields and how each is read; booleans are checkboxes (absent: off).
NUMBERS = ("daily_quota", "total_quota", "live_subset_size", "live_subset_seed")
BOOLEANS = ("per_item_feedback", "requires_method_description", "data_registered_only")


@require_http_methods(["GET", "POST"])
@login_required
def gold_form(request: HttpRequest, slug: str) -> HttpResponse:
    """Load a new gold version of this task, optionally moving some of its phases to it (their
    runs are scored again and the change is shown to participants)."""
    task = _get_task_for_organiser(request, slug)
    phases = access.task_phases(task.pk)
    context: dict[str, Any] = {"task": task, "phases": phases, "errors": [], "label": "", "chosen": []}
    if request.method == "GET":
        return render(request, "tasks/gold_form.html", context)
    chosen_names = [name.replace("\x00", "") for name in request.POST.getlist("phase")]
    chosen = [phase for phase in phases if phase.name in chosen_names]
    errors = [f"phase: no phase named {name!r} in this task" for name in chosen_names
              if name not in {phase.name for phase in phases}]
    upload = request.FILES.get("gold")
    label = _param(request.POST, "label")
    if upload is None:
        errors.append("gold file: choose the file to load")
    context.update(label=label, chosen=[phase.name for phase in chosen])
    if not errors:
        try:
            version = load_gold_version(task, upload.read(), source_name=upload.name or "", user=request.user,
                                        label=label, phases=chosen)
        except Rejected as rejected:
            errors = rejected.errors
    if errors:
        context["errors"] = errors
        return render(request, "tasks/gold_form.html", context, status=400)
    moved = f"; moved {', '.join(phase.name for phase in chosen)} to it" if chosen else ""
    access.log_access(request, task, f"loaded gold version {version.number} from {upload.name}{moved}")
    messages.success(request, f"Gold version {version.number} is stored ({task.items(version.n_items)})"
                              + (f"; {', '.join(phase.name for phase in chosen)} now use it and their runs are "
                                 "being scored again." if chosen else "."))
    return redirect("organiser-dashboard", slug=task.slug)


def _moment(text: str, label: str, problems: list[str]) -> datetime | None:
    try:
        parsed = parse_datetime(text.replace(" ", "T")) if text else None
    except ValueError:
        parsed = None
    if parsed is None:
        problems.append(f"{label}: {text!r} is not a date and time; write it as YYYY-MM-DD HH:MM (UTC)" if text
                        else f"{label}: required")
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _read_phase(request: HttpRequest, task: Task, phase: Phase) -> list[str]:
    """Fill ``phase`` from the form; the problems of reading it (the rest: ``phase_problems``)."""
    problems: list[str] = []
    data = request.POST
    phase.name = _param(data, "name")
    kind = _param(data, "kind")
    if kind not in {choice for choice, _ in Phase.KINDS}:
        problems.append(f"kind: choose development, test or final (got {kind!r})")
    else:
        phase.kind = kind
    number = _param(data, "gold_version")
    version = task.gold_versions.filter(number=int(number)).first() if number.isdigit() and len(number) < 9 else None
    if version is None:
        problems.append(f"gold version: {number!r} is not a gold version of this task" if number
                        else "gold version: required")
    else:
        phase.gold_version = version
    starts = _moment(_param(data, "starts_at"), "starts", problems)
    ends = _moment(_param(data, "ends_at"), "ends", problems)
    if starts is not None:
        phase.starts_at = starts
    if ends is not None:
        phase.ends_at = ends
    for name in NUMBERS:
        text = _param(data, name)
        if name == "live_subset_size" and not text:
            phase.live_subset_size = None
            continue
        if not text.isdigit() or len(text) > 9:
            problems.append(f"{name.replace('_', ' ')}: a whole number of 0 or more (got {text!r})")
            continue
        setattr(phase, name, int(text))
    for name in BOOLEANS:
        setattr(phase, name, data.get(name) == "on")
    return problems


@require_http_methods(["GET", "POST"])
@login_required
def phase_form(request: HttpRequest, slug: str) -> HttpResponse:
    """Create a phase, or edit the one ``?phase=`` names (exactly its name, else 404)."""
    task = _get_task_for_organiser(request, slug)
    phases = access.task_phases(task.pk)
    existing = access.named_phase(phases, request.GET.get("phase"))
    phase = existing if existing is not None else Phase(task=task, kind=Phase.DEVELOPMENT)
    if existing is None and request.method == "GET":
        latest = task.latest_gold()
        if latest is not None:
            phase.gold_version = latest
    has_runs = existing is not None and existing.runs.exists()
    context: dict[str, Any] = {"task": task, "phase": phase, "existing": existing, "has_runs": has_runs,
                               "versions": task.gold_versions.order_by("-number"), "kinds": Phase.KINDS, "errors": []}
    if request.method == "GET":
        return render(request, "tasks/phase_form.html", context)
    before = (existing.gold_version_id, existing.live_subset_size, existing.live_subset_seed) if existing else None
    problems = _read_phase(request, task, phase)
    if not problems:
        problems = phase_problems(phase)
    if existing is not None and has_runs and before != (phase.gold_version_id, phase.live_subset_size,
                                                        phase.live_subset_seed):
        # As in the admin: a phase's gold and live subset are what its runs' scores mean.
        problems.append("gold version and live subset: the phase has runs scored with them; to correct its gold, "
                        "load a new gold version and tick this phase there (its runs are scored again)")
    if problems:
        context["errors"] = problems
        return render(request, "tasks/phase_form.html", context, status=400)
    phase.save()
    verb = "edited" if existing is not None else "created"
    access.log_access(request, task, f"{verb} the {phase.name} phase ({phase.kind}, gold v{phase.gold_version.number}, "
                                     f"{phase.starts_at:%Y-%m-%d %H:%M} to {phase.ends_at:%Y-%m-%d %H:%M} UTC)")
    messages.success(request, f"The {phase.name} phase is {verb}: {phase.starts_at:%Y-%m-%d %H:%M} to "
                              f"{phase.ends_at:%Y-%m-%d %H:%M} UTC, gold version {phase.gold_version.number}.")
    for warning in phase_overlaps(phase):
        messages.warning(request, warning[0].upper() + warning[1:] + ".")
    return redirect("organiser-dashboard", slug=task.slug)
