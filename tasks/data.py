"""A task's data section on the web (``/tasks/<slug>/data/``) and in the API
(``/api/v1/tasks/<slug>/data/``): what participants download, never the gold.

What a section holds is ``tasks.datafiles``'; who may download what is ``tasks.access.data_access``.
Every download of data kept from the public (a phase for registered teams, or a phase that has
not opened yet, which only organisers see) is written to the organisers' access log.
"""

from __future__ import annotations

import json
import mimetypes
from typing import Any
from urllib.parse import quote

from django.contrib.auth.views import redirect_to_login
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_safe
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from tasks import access, datafiles
from tasks.api import ERRORS
from tasks.errors import Rejected
from tasks.runfiles import download_name

# The types a data file is served with (``_serve``: from its name): the usual ones by name, then any.
DATA_FILE_TYPES = ("application/json", "text/csv", "text/plain", "text/tab-separated-values", "application/zip",
                   "application/gzip", "application/x-tar", "application/pdf", "application/octet-stream", "*/*")
_PHASE = OpenApiParameter("phase", str, description="a phase's exact name (default: the open phase, else the "
                                                    "latest started, else the first to open)")


def _section(request: HttpRequest, slug: str) -> tuple[access.DataAccess, list[datafiles.DataItem], list[str]]:
    task = access.get_task_for_user(request.user, slug)
    view = access.data_access(request.user, task, request.GET.get("phase"))
    items, notes = datafiles.section_items(task, view.phase)
    return view, items, notes


def readable_json(value: Any, indent: int = 0, width: int = 72) -> str:
    """JSON for people: an object or list that fits on one line of ``width`` stays on one (a
    distribution over five labels), longer ones get a line per member."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(flat) + indent <= width or not isinstance(value, (dict, list)) or not value:
        return flat
    inner = " " * (indent + 2)
    if isinstance(value, dict):
        members = [f"{inner}{json.dumps(key, ensure_ascii=False)}: {readable_json(item, indent + 2, width)}"
                   for key, item in value.items()]
        return "{\n" + ",\n".join(members) + "\n" + " " * indent + "}"
    members = [inner + readable_json(item, indent + 2, width) for item in value]
    return "[\n" + ",\n".join(members) + "\n" + " " * indent + "]"


def may_download(view: access.DataAccess, item: datafiles.DataItem) -> bool:
    """The format and the task-wide files are for everyone who can see the task; the rest follows
    the phase (``access.data_rule``)."""
    return view.allowed or not item.gold_derived


def who_can_get(view: access.DataAccess, item: datafiles.DataItem) -> str:
    """Who may download a file of this section, in words (the rule ``may_download`` applies)."""
    if not item.gold_derived or view.phase is None:
        return "Everyone who can see this task." if view.task.is_public else "The task's organisers only."
    phase = view.phase
    opens = f", from {phase.starts_at:%Y-%m-%d %H:%M} UTC" if phase.starts_at > timezone.now() else ""
    if not phase.data_registered_only:
        return f"Everyone who can see this task{opens}; the organisers always."
    conditions = ["signed in as a member of a team"]
    if view.task.requires_team_approval:
        conditions.append("the team approved by an organiser")
    if view.task.terms.strip():
        conditions.append("the task's terms accepted")
    return f"Registered teams only ({', '.join(conditions)}){opens}; the organisers always."


def _query(view: access.DataAccess) -> str:
    return f"?phase={quote(view.phase.name, safe='')}" if view.phase is not None else ""


def _find(items: list[datafiles.DataItem], name: str) -> datafiles.DataItem:
    item = next((item for item in items if item.name == name), None)
    if item is None:
        raise Http404("no such file in this data section")
    return item


def _download(request: HttpRequest, view: access.DataAccess, item: datafiles.DataItem) -> HttpResponse:
    try:
        content = datafiles.item_content(view.task, view.phase, item)
    except FileNotFoundError:
        raise Http404("this file is missing from the server's storage; the organisers have been told") from None
    if view.restricted and item.gold_derived and request.method != "HEAD":  # a HEAD reads no data
        where = f"phase {view.phase.name}" if view.phase is not None else "the task"
        access.log_access(request, view.task, f"data file {item.name} of {where}")
    parts = [view.task.slug] + ([view.phase.name] if view.phase is not None else [])
    filename = "-".join(download_name(part, 40) for part in parts) + "-" + item.name
    content_type = "application/json" if item.name.endswith(".json") else (
        mimetypes.guess_type(item.name)[0] or "application/octet-stream")
    if not isinstance(content, bytes):
        response: HttpResponse = FileResponse(content, content_type=content_type)
    else:
        response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Content-Length"] = str(item.size)
    response["X-Content-SHA256"] = item.sha256
    # Per user (the rule depends on who asks): never in a shared cache.
    response["Cache-Control"] = "private, no-cache"
    return response


# Web ---------------------------------------------------------------------------------------

@require_safe
def data_page(request: HttpRequest, slug: str) -> HttpResponse:
    view, items, notes = _section(request, slug)
    task = view.task
    description = task.kind_impl.format_description(task.kind_config)
    rows = [{"item": item, "allowed": may_download(view, item), "who": who_can_get(view, item),
             "url": reverse("task-data-file", args=[task.slug, item.name]) + _query(view)} for item in items]
    return render(request, "tasks/data.html", {
        "task": task, "view": view, "phase": view.phase, "phases": view.phases, "rows": rows, "notes": notes,
        "format": description, "example": readable_json(description.get("example")),
        "measures": task.measure_specs(), "gold": datafiles.section_gold(task, view.phase),
        "phase_query": _query(view), "not_open": view.phase is not None and view.phase.starts_at > timezone.now()})


@require_safe
def data_file(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    view, items, _ = _section(request, slug)
    item = _find(items, name)
    if not may_download(view, item):
        if view.sign_in and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return render(request, "tasks/unavailable.html", {
            "title": "Not available", "reason": view.reason, "task": view.task,
            "back": reverse("task-data", args=[view.task.slug]) + _query(view)}, status=403)
    return _download(request, view, item)


# API ---------------------------------------------------------------------------------------

def data_listing(request: Any, view: access.DataAccess, items: list[datafiles.DataItem],
                 notes: list[str]) -> dict[str, Any]:
    task, phase = view.task, view.phase
    gold = datafiles.section_gold(task, phase)
    return {
        "task": task.slug,
        "phase": None if phase is None else {
            "name": phase.name, "kind": phase.kind, "starts_at": phase.starts_at.isoformat(),
            "ends_at": phase.ends_at.isoformat(), "registered_teams_only": phase.data_registered_only},
        "phases": [item.name for item in view.phases],
        "gold_version": gold.number if gold is not None else None,
        "available": view.allowed,
        "reason": view.reason,
        "files": [{**item.public(request.build_absolute_uri(
                       reverse("api-task-data-file", args=[task.slug, item.name]) + _query(view))),
                   "available": may_download(view, item)} for item in items],
        "notes": notes,
    }


@extend_schema(operation_id="task_data", summary="A task's data section: participants' data, run format, sample run, "
                                                  "organisers' files",
               description="Every file with its size, SHA-256 and download URL, and whether you may download it "
                           "(`available`; `reason` says why not). Never the gold.",
               parameters=[_PHASE], responses={200: OpenApiTypes.OBJECT, 404: ERRORS})
@api_view(["GET"])
def data_api(request: Request, slug: str) -> Response:
    view, items, notes = _section(request, slug)
    return Response(data_listing(request, view, items, notes))


@extend_schema(operation_id="task_data_file", summary="Download one file of a task's data section", parameters=[_PHASE],
               description="The file as stored, with the type its name says (`.json`: application/json, `.csv`: "
                           "text/csv, ..., application/octet-stream when the name says none).",
               # A JSON file is any JSON document (what it holds is the task's format), the others bytes.
               responses={**{(200, media): OpenApiTypes.ANY if media == "application/json" else OpenApiTypes.BINARY
                             for media in DATA_FILE_TYPES},
                          401: ERRORS, 403: ERRORS, 404: ERRORS})
@api_view(["GET"])
def data_file_api(request: Request, slug: str, name: str) -> HttpResponse:
    view, items, _ = _section(request, slug)
    item = _find(items, name)
    if not may_download(view, item):
        raise Rejected([view.reason], status=401 if view.sign_in and not request.user.is_authenticated else 403)
    return _download(request, view, item)
