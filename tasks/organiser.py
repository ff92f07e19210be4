"""The organiser dashboard: every submission, re-scoring, exports of runs and results, the access log."""

from __future__ import annotations

import json
import re
import tempfile
import zipfile
from datetime import UTC
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, Q, QuerySet
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_http_methods

from scoring import exports
from tasks import access, datafiles
from tasks.errors import Rejected
from tasks.hooks import organiser_links, page_sections
from tasks.late import late_context
from tasks.models import AccessLog, DataFile, Phase, Run, Score, Task, Team
from tasks.organising import rescore_runs, runs_to_rescore, set_publication
from tasks.runfiles import download_name, read_run_file


def _get_task_for_organiser(request: HttpRequest, slug: str) -> Task:
    """The task if the user organises it (or is staff); 404 for everyone else."""
    task = Task.objects.filter(slug=slug).first()
    if task is None or not task.is_organiser(request.user):
        raise Http404("no such task")
    return task


def _param(data: Any, name: str) -> str:
    """A query or form value as text without NUL characters (PostgreSQL refuses them in queries,
    and no name, description or hash contains one)."""
    return data.get(name, "").replace("\x00", "").strip()


FILTERS = ("q", "status", "phase", "baselines")


def _filtered_runs(task: Task, request: HttpRequest) -> QuerySet:
    runs = Run.objects.filter(task=task).select_related("team", "phase", "gold_version", "submitted_by")
    status = _param(request.GET, "status")
    if status in {choice for choice, _ in Run.STATUSES}:
        runs = runs.filter(status=status)
    phase = access.named_phase(access.task_phases(task.pk), request.GET.get("phase"))
    if phase is not None:
        runs = runs.filter(phase=phase)
    query = _param(request.GET, "q")
    if query:
        runs = runs.filter(Q(name__icontains=query) | Q(team__name__icontains=query)
                           | Q(description__icontains=query) | Q(file_sha256__startswith=query.lower()))
    if request.GET.get("baselines") != "1":
        runs = runs.filter(is_baseline=False)
    return runs


@require_http_methods(["GET", "POST"])
@login_required
def dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    """The dashboard; a POST carries an organiser's action (publish or withdraw a phase's results,
    approve a team) and comes back here."""
    task = _get_task_for_organiser(request, slug)
    if request.method == "POST":
        _dashboard_action(request, task)
        return redirect("organiser-dashboard", slug=task.slug)
    runs = _filtered_runs(task, request)
    page = Paginator(runs, 100).get_page(request.GET.get("page"))
    counts = run_status_counts(task)
    kept = urlencode([(name, _param(request.GET, name)) for name in FILTERS if _param(request.GET, name)])
    return render(request, "tasks/dashboard.html", {
        "task": task, "page": page, "counts": counts, "waiting": _waiting(counts),
        "phases": task.phases.select_related("gold_version"),
        "phase_rows": (rows := phase_rows(task)), "now": timezone.now(),
        "timeline": sorted(((when, row["phase"].name, what) for row in rows for when, what in row["schedule"]),
                           key=lambda event: event[0]),
        "statuses": [status for status, _ in Run.STATUSES], "filters": request.GET, "kept_filters": kept,
        "access_log": AccessLog.objects.filter(task=task).select_related("user")[:50],
        "gold_versions": task.gold_versions.order_by("-number")[:10], "kind_links": organiser_links(task),
        "data_files": data_file_rows(task),
        "pending_teams": Team.objects.filter(approved=False).prefetch_related("members")[:200]
        if task.requires_team_approval else [], **late_context(task),
        "sections": page_sections("organiser-dashboard", request, task=task),
    })


def run_status_counts(task: Task) -> dict[str, int]:
    """The participants' runs of the task per status (baselines are not counted: they are the
    organisers' own), in one grouped query."""
    found = dict(Run.objects.filter(task=task, is_baseline=False).order_by().values("status")
                 .annotate(n=Count("pk")).values_list("status", "n"))
    return {status: found.get(status, 0) for status, _ in Run.STATUSES}


def _waiting(counts: dict[str, int]) -> str:
    """The dashboard's wait in words ("" when no participant's run waits for scoring)."""
    queued, scoring = counts.get(Run.QUEUED, 0), counts.get(Run.SCORING, 0)
    if not queued and not scoring:
        return ""
    return (f"{queued} participants' run{'s' if queued != 1 else ''} queued and {scoring} being scored; "
            "this page updates itself as they are stored.")


@require_GET
@login_required
def dashboard_status(request: HttpRequest, slug: str) -> HttpResponse:
    """``{"waiting": bool, "message": str, "counts": {status: n}}`` of the task's participants'
    runs: what the dashboard's script polls while runs wait for scoring (organisers only)."""
    task = _get_task_for_organiser(request, slug)
    counts = run_status_counts(task)
    message = _waiting(counts)
    response = JsonResponse({"waiting": bool(message), "message": message, "counts": counts})
    response["Cache-Control"] = "no-store"
    return response


def _schedule(phase: Phase, now: Any) -> list[tuple[Any, str]]:
    """What the phase clock will do, and when: (time, sentence) for what is still ahead."""
    events = []
    if phase.starts_at > now:
        events.append((phase.starts_at, "opens" + (" for submissions" if phase.takes_runs else "")))
    if phase.ends_at > now:
        events.append((phase.ends_at, ("submissions close; " if phase.takes_runs else "ends; ")
                       + "the final statistics are computed"))
    if phase.kind != Phase.DEVELOPMENT and not phase.results_published and phase.publish_at is not None:
        events.append((phase.publish_at, "the results are published on their own"
                       + (" (it is due: it waits until no phase takes runs on its gold)"
                          if phase.publish_at <= now else "")))
    return events


def phase_rows(task: Task) -> list[dict[str, Any]]:
    """Each phase with where it stands now and, for a test or final phase, what stands in the way
    of publishing its results (a phase that still accepts runs on its gold)."""
    now = timezone.now()
    rows = []
    for phase in task.phases.select_related("gold_version"):
        blocking = phase.open_phases_on_gold(now) if phase.kind != Phase.DEVELOPMENT else []
        rows.append({"phase": phase, "state": phase.state(now), "blocking": blocking,
                     "blocking_names": " and ".join(other.name for other in blocking),
                     "schedule": _schedule(phase, now)})
    return rows


def _schedule_publication(request: HttpRequest, task: Task, schedule: bool) -> None:
    """Publish a phase's results on their own at a time (UTC), or cancel that: checked as the
    model checks it (not before the phase ends; not a development phase), nothing stored on error."""
    name = _param(request.POST, "phase")
    phase = Phase.objects.filter(task=task, name=name).first() if name else None
    if phase is None:
        messages.error(request, f"No phase named {name!r} in this task." if name else "Choose a phase.")
        return
    when = None
    if schedule:
        text = _param(request.POST, "publish_at")
        try:
            parsed = parse_datetime(text.replace(" ", "T")) if text else None
        except ValueError:  # well formed, but no such day or hour (2026-02-30)
            parsed = None
        if parsed is None:
            messages.error(request, f"Publication time: {text!r} is not a date and time; write it as "
                                    "YYYY-MM-DD HH:MM (UTC)." if text else "Publication time: choose a date and time.")
            return
        when = parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=UTC)
    phase.publish_at = when
    try:
        phase.full_clean(exclude=["task", "gold_version"])
    except ValidationError as error:
        messages.error(request, " ".join(f"{'Publication time' if field == 'publish_at' else field}: {message}"
                                         for field, problems in error.message_dict.items() for message in problems))
        return
    phase.save(update_fields=["publish_at"])
    if when is None:
        access.log_access(request, task, f"cancelled the scheduled publication of the {phase.name} phase")
        messages.success(request, f"The results of the {phase.name} phase will not be published on their own.")
        return
    access.log_access(request, task, f"scheduled the publication of the {phase.name} phase for "
                                     f"{when:%Y-%m-%d %H:%M} UTC")
    messages.success(request, f"The results of the {phase.name} phase will be published on their own at "
                              f"{when:%Y-%m-%d %H:%M} UTC (once no phase takes runs on its gold).")


def _dashboard_action(request: HttpRequest, task: Task) -> None:
    action = _param(request.POST, "action")
    if action in ("schedule", "unschedule"):
        _schedule_publication(request, task, action == "schedule")
        return
    if action in ("publish", "unpublish", "close-and-publish"):
        name = _param(request.POST, "phase")
        phase = Phase.objects.filter(task=task, name=name).first() if name else None
        if phase is None:
            messages.error(request, f"No phase named {name!r} in this task." if name else "Choose a phase.")
            return
        publish = action != "unpublish"
        if phase.kind == Phase.DEVELOPMENT:
            messages.error(request, f"The {phase.name} phase is a development phase: it has no results to publish.")
            return
        if publish and request.POST.get("confirm") != "yes":
            # A publication is confirmed on the preview page, which shows what it will show.
            messages.error(request, f"The results of the {phase.name} phase were not published: tick the "
                                    "confirmation below the preview of the results first.")
            return
        if phase.results_published == publish and not (publish and phase.open_phases_on_gold()):
            messages.info(request, f"The results of the {phase.name} phase are {'already' if publish else 'not'} "
                                   "published; nothing changed.")
            return
        try:
            closed = set_publication(phase, publish, close_first=action == "close-and-publish")
        except Rejected as rejected:
            messages.error(request, " ".join(rejected.errors))
            return
        for other in closed:
            access.log_access(request, task, f"closed the {other.name} phase for submissions at "
                                             f"{other.ends_at:%Y-%m-%d %H:%M:%S} UTC")
        done = "published" if publish else "withdrew"
        access.log_access(request, task, f"{done} the results of the {phase.name} phase")
        now = "public: scores on the whole test set and per-item scores" if publish else "hidden again"
        closing = (f"Submissions to {' and '.join(other.name for other in closed)} are closed. " if closed else "")
        messages.success(request, f"{closing}The results of the {phase.name} phase are now {now}.")
    elif action == "remove-data-file":
        _remove_data_file(request, task)
    elif action == "approve":
        team_id = _param(request.POST, "team")
        if not task.requires_team_approval:
            messages.error(request, "This task does not require team approval.")
            return
        team = Team.objects.filter(pk=int(team_id)).first() if re.fullmatch(r"[0-9]{1,18}", team_id) else None
        if team is None:
            messages.error(request, "No such team.")
            return
        if not team.approved:
            Team.objects.filter(pk=team.pk).update(approved=True)
            access.log_access(request, task, f"approved team {team.name}")
        messages.success(request, f"Team {team.name!r} is approved and can submit runs.")
    else:
        messages.error(request, "Unknown action: choose publish, unpublish, approve or remove-data-file.")


def _remove_data_file(request: HttpRequest, task: Task) -> None:
    """Take one of the task's files out of its data section, after the confirmation box."""
    name = _param(request.POST, "name")
    data_file = DataFile.objects.filter(task=task, name=name).first() if name else None
    if data_file is None:
        messages.error(request, f"No data file named {name!r} in this task." if name else "Choose a data file.")
        return
    if request.POST.get("confirm") != "yes":
        messages.error(request, f"{name} was not removed: tick the box beside it to confirm the removal.")
        return
    leaked = bool(datafiles.stored_file_problems(data_file))
    datafiles.remove_data_file(data_file)
    access.log_access(request, task, f"removed the data file {name} (SHA-256 {data_file.sha256[:12]}"
                                     f"{', which held secret gold annotations' if leaked else ''})")
    messages.success(request, f"{name} is removed from the data section: nobody can download it any more.")


def data_file_rows(task: Task) -> list[dict[str, Any]]:
    """The task's data files, each with why it must not be published, if it holds secret gold."""
    return [{"file": data_file, "problems": [problem.partition(": ")[2] for problem in
                                             datafiles.stored_file_problems(data_file)]}
            for data_file in DataFile.objects.filter(task=task).select_related("phase").order_by("name")]


@require_http_methods(["GET", "POST"])
@login_required
def rescore(request: HttpRequest, slug: str) -> HttpResponse:
    """Re-score one run (a POST with ``run``), or every run of the task or of one phase after a
    confirmation: the GET shows what would be re-scored and a required checkbox; a POST without
    the box ticked changes nothing."""
    task = _get_task_for_organiser(request, slug)
    run_id = _param(request.POST, "run")
    if request.method == "POST" and run_id:
        runs = Run.objects.filter(task=task, pk=int(run_id)) if re.fullmatch(r"[0-9]{1,18}", run_id) \
            else Run.objects.none()
        if not runs.exists():
            raise Http404("no such run in this task")
        baselines = runs.filter(is_baseline=True).count()
        messages.success(request, _queued_message(rescore_runs(runs), baselines))
        return redirect("organiser-dashboard", slug=task.slug)
    source = request.POST if request.method == "POST" else request.GET
    phase = access.named_phase(access.task_phases(task.pk), source.get("phase"))
    runs = runs_to_rescore(task, phase)
    if request.method == "POST" and source.get("confirm") == "yes":
        baselines = runs.filter(is_baseline=True).count()
        count = rescore_runs(runs)
        access.log_access(request, task, f"re-scored {count} runs ({phase.name if phase else 'every phase'})")
        messages.success(request, _queued_message(count, baselines))
        return redirect("organiser-dashboard", slug=task.slug)
    counts = {status: runs.filter(status=status).count() for status, _ in Run.STATUSES}
    return render(request, "tasks/rescore_confirm.html", {
        "task": task, "phase": phase, "phases": access.task_phases(task.pk), "counts": counts,
        "total": sum(counts.values()), "baselines": runs.filter(is_baseline=True).count(),
        "unconfirmed": request.method == "POST"}, status=400 if request.method == "POST" else 200)


def _queued_message(count: int, baselines: int) -> str:
    """What "re-score" did, said at once: the runs only wait in the queue (the scoring worker or
    the Celery workers take them one at a time), counted as the dashboard counts them."""
    participants = count - baselines
    which = f"{participants} participants' run{'s' if participants != 1 else ''}" + (
        f" and {baselines} baseline{'s' if baselines != 1 else ''}" if baselines else "")
    return (f"Queued for re-scoring: {which}. They are scored one after another in the background; the counts "
            "below follow them, and the boards and statistics change as each new score is stored.")


@require_GET
@login_required
def runs_zip(request: HttpRequest, slug: str) -> HttpResponse:
    """Every run file of a phase (or of the task) in a zip, with a manifest in CSV and JSON."""
    task = _get_task_for_organiser(request, slug)
    runs = Run.objects.filter(task=task, is_baseline=False).select_related("team", "phase").order_by("pk")
    phase = access.named_phase(access.task_phases(task.pk), request.GET.get("phase"))
    phase_name = phase.name if phase else ""
    if phase is not None:
        runs = runs.filter(phase=phase)
    # Written to a temporary file, not memory: a test phase of many teams is hundreds of megabytes.
    buffer = tempfile.TemporaryFile()
    manifest = []
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for run in runs:
            owner = run.team.name if run.team else "baseline"
            member = f"runs/{run.pk:06d}-{download_name(owner, 60)}-{download_name(run.name, 60)}.json"
            try:
                archive.writestr(member, read_run_file(run))
            except FileNotFoundError:
                member = ""
            manifest.append({"id": run.pk, "file": member, "team": run.team.name if run.team else None,
                             "name": run.name, "description": run.description, "phase": run.phase.name
                             if run.phase else None, "priority": run.priority, "status": run.status,
                             "public": run.is_public, "withdrawn": run.is_withdrawn, "sha256": run.file_sha256,
                             "original_filename": run.original_filename,
                             "submitted_at": run.created_at.isoformat()})
        archive.writestr("manifest.json", json.dumps(manifest, indent=1, ensure_ascii=False))
        archive.writestr("manifest.csv", _dicts_csv(manifest, ["id"]))
    access.log_access(request, task, f"runs zip ({phase_name or 'all phases'}, {len(manifest)} runs)")
    buffer.seek(0)
    name = f"{task.slug}-{download_name(phase_name or 'all', 60)}-runs.zip"
    return FileResponse(buffer, as_attachment=True, filename=name,
                        content_type="application/zip")


def _dicts_csv(rows: list[dict[str, Any]], empty_header: list[str]) -> str:
    """Rows of dicts as CSV through the project's one writer (formula guard on text cells), with
    the union of their keys as columns in order of first appearance (runs of one
    measure group only, a DQ-only run say, have fewer measures); a missing value is an empty cell."""
    columns = list(dict.fromkeys(key for row in rows for key in row)) or empty_header
    return exports.csv_text([columns, *([row.get(column) for column in columns] for row in rows)])


def results_rows(task: Task, phase: Phase | None = None) -> list[dict[str, Any]]:
    """One row per scored run and scope: the means of every measure, for CSV and JSON exports."""
    scores = Score.objects.filter(run__task=task, run__is_baseline__in=[True, False]).select_related(
        "run", "run__team", "run__phase", "run__submitted_by", "gold_version").order_by("run_id", "scope")
    if phase is not None:
        scores = scores.filter(run__phase=phase)
    rows = []
    for score in scores:
        run = score.run
        if run.gold_version_id != score.gold_version_id:
            continue  # superseded by a newer gold version
        row: dict[str, Any] = {"run_id": run.pk, "team": run.team.name if run.team else "baseline",
                               "run": run.name, "baseline": run.is_baseline, "public": run.is_public,
                               "withdrawn": run.is_withdrawn, "phase": run.phase.name if run.phase else "",
                               "priority": run.priority, "gold_version": score.gold_version.number,
                               "scope": score.scope, "submitted_at": run.created_at.isoformat(),
                               "late": run.late, "uploaded_by": run.submitted_by.get_username()
                               if run.submitted_by_id else "", "on_behalf": run.on_behalf}
        row.update(score.summary.get("measures", {}))
        # How the numbers were made (variant, aggregation, ...), named in every row.
        row.update({f"setting:{key}": _setting_value(value)
                    for key, value in sorted((score.summary.get("settings") or {}).items())})
        rows.append(row)
    return rows


def _setting_value(value: Any) -> Any:
    """A scoring setting as one cell: numbers and text as they are, anything else as its JSON."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return json.dumps(value, ensure_ascii=False)


@require_GET
@login_required
def results_export(request: HttpRequest, slug: str, fmt: str) -> HttpResponse:
    task = _get_task_for_organiser(request, slug)
    if fmt not in ("csv", "json"):
        raise Http404("unknown format: results.csv or results.json")
    phase = access.named_phase(access.task_phases(task.pk), request.GET.get("phase"))
    phase_name = phase.name if phase else ""
    rows = results_rows(task, phase)
    access.log_access(request, task, f"results {fmt} ({phase_name or 'all phases'})")
    if fmt == "json":
        response: HttpResponse = JsonResponse({"task": task.slug, "exported_at": timezone.now().isoformat(),
                                               "results": rows})
    elif fmt == "csv":
        response = HttpResponse(_dicts_csv(rows, ["run_id"]), content_type="text/csv; charset=utf-8")
    else:
        raise Http404("unknown format")
    response["Content-Disposition"] = f'attachment; filename="{task.slug}-results.{fmt}"'
    return response
