"""HTTP API for participants: upload runs and follow their scoring (``/api/v1/``)."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.http import Http404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.decorators import api_view, parser_classes, permission_classes, throttle_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle
from rest_framework.views import exception_handler as drf_exception_handler

from evalserver.clientip import client_ip
from evalserver.errors import request_problem
from evalserver.middleware import API_MESSAGE, RETRY_AFTER_SECONDS
from tasks import access
from tasks.errors import TRANSIENT_DB_ERRORS, Rejected
from tasks.late import late_sentence, uploader_sentence
from tasks.models import Run
from tasks.submissions import (
    API_FORM,
    identical_note,
    identical_runs,
    phase_for_upload,
    quota_status,
    submission_from_request,
    submission_status,
    submit_run,
    upload_context,
    upload_context_for_team,
)

log = logging.getLogger(__name__)


def exception_handler(exc: Exception, context: dict) -> Response | None:
    """Every API error is ``{"errors": ["..."]}``, whatever raised it."""
    if isinstance(exc, Rejected):
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else None
        return Response({"errors": exc.errors}, status=exc.status, headers=headers)
    problem = request_problem(exc)
    if problem is not None:  # Django refused the body (too many fields or files, fields too large)
        return Response({"errors": [problem[1]]}, status=problem[0])
    if isinstance(exc, exceptions.UnsupportedMediaType):
        request = context.get("request")
        sent = (request.content_type if request is not None else "") or "none"
        return Response({"errors": [f"Content-Type {sent[:80]!r} is not accepted here: send the run as "
                                    "multipart/form-data with the file in a field named 'file'"]}, status=415)
    if isinstance(exc, Http404):
        return Response({"errors": [str(exc) or "not found"]}, status=404)
    if isinstance(exc, TRANSIENT_DB_ERRORS):
        # The database is down or restarting: a temporary state, not a bug; clients may retry.
        log.error("database unavailable: %s", exc)
        return Response({"errors": [API_MESSAGE]}, status=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    response = drf_exception_handler(exc, context)
    if response is not None:
        response.data = {"errors": _flatten(response.data)}
    return response


def _flatten(data: Any, prefix: str = "") -> list[str]:
    if isinstance(data, dict):
        if set(data) == {"detail"}:
            return _flatten(data["detail"], prefix)
        return [line for key, value in data.items() for line in _flatten(value, f"{prefix}{key}: ")]
    if isinstance(data, list):
        return [line for item in data for line in _flatten(item, prefix)]
    return [f"{prefix}{data}"]


def run_data(run: Run, user: Any, phases: list[Any] | None = None, describe: bool = True) -> dict[str, Any]:
    """A run as the API shows it to ``user``; ``describe`` adds what each measure key means (a
    list of runs says it once instead)."""
    score = access.visible_score(run, user, phases)
    data = {
        "id": run.pk,
        "task": run.task.slug,
        "team": run.team.name if run.team_id else None,
        "name": run.name,
        "description": run.description,
        "phase": run.phase.name if run.phase_id else None,
        "priority": run.priority,
        "is_baseline": run.is_baseline,
        "is_public": run.is_public,
        "withdrawn": run.is_withdrawn,
        "status": run.status,
        "errors": run.errors,
        "warnings": run.warnings,
        "scores": score.summary if score else None,
        "scores_scope": score.scope if score else None,
        "gold_version": run.gold_version.number if run.gold_version_id else None,
        "submitted_at": run.created_at.isoformat(),
        # Submitted after its phase's end under its team's extension (tasks.late), in words too.
        "late": run.late, "late_note": late_sentence(run),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "url": reverse("api-run", args=[run.pk]),
    }
    if access.is_member(user, run) or access.is_organiser(user, run.task):
        # Who uploaded a run an organiser sent for its team: for the team and the organisers only.
        data["uploaded_on_behalf"] = uploader_sentence(run)
    if describe:
        # What each key of "scores" means and which way is better, in the board's order.
        data["measures"] = [spec.public() for spec in run.task.measure_specs()
                            if score and spec.key in score.summary.get("measures", {})]
    return data


class UploadThrottle(UserRateThrottle):
    """Uploads per user and period, from ``EVALSERVER_UPLOAD_RATE`` (read per request)."""

    scope = "uploads"

    def get_rate(self) -> str:
        return settings.EVALSERVER_UPLOAD_RATE

    def get_ident(self, request: Request) -> str | None:
        # DRF's own reads X-Forwarded-For as sent, which anyone can forge.
        return client_ip(request)


_run_response = inline_serializer("RunStatus", {
    "id": serializers.IntegerField(), "status": serializers.ChoiceField(choices=[s for s, _ in Run.STATUSES]),
    "errors": serializers.ListField(child=serializers.CharField()),
    "scores": serializers.DictField(allow_null=True), "url": serializers.CharField(),
    # Upload answers only: the team's earlier runs with the very same file, and the sentence saying so.
    "identical_to": serializers.ListField(child=serializers.DictField(), required=False),
    "identical_note": serializers.CharField(required=False),
    "phase": serializers.CharField(required=False, allow_null=True),  # upload answers: where the run went
})
_errors = inline_serializer("Errors", {"errors": serializers.ListField(child=serializers.CharField())})
ERRORS = _errors  # every API error's body: the other apps' schemas name it too


@extend_schema(
    summary="Upload a run",
    description="Multipart form with `file` (a run JSON file), optional `name`, `description`, `priority` "
                "(1 = primary; unique among your team's runs of the phase that are not withdrawn or failed, else 409) "
                "`public` (true/false) and `phase` (a phase's name: needed while several phases of the task are "
                "open, when an upload that names none is refused with the open phases listed; the answer's "
                "`phase` says where the run went). The file is validated at once: every problem is listed and nothing "
                "is stored. A valid run is queued for scoring; the answer says how much quota is left and names "
                "your team's earlier runs whose file is byte for byte the same (`identical_to`, `identical_note`). "
                "Send a Content-Length (a chunked body gets 411); when the server is validating too many "
                "uploads at once the answer is 503 with Retry-After. A field the upload does not take is refused "
                "(400) by name.",
    # A plain schema rather than a serializer: it can say that no other field is taken
    # (``additionalProperties``: an unknown field is a 400 naming it) and the bounds the rules keep.
    request={"multipart/form-data": {"type": "object", "required": ["file"], "additionalProperties": False,
                                     "properties": {
        "file": {"type": "string", "format": "binary", "description": "the run file (JSON), as a file part"},
        "name": {"type": "string", "maxLength": 100, "description": "the run's name (default: from the file name)"},
        "description": {"type": "string", "maxLength": 5000, "description": "how the run was made"},
        "priority": {"type": "integer", "minimum": 1, "maximum": 99, "description": "1 = primary run"},
        "public": {"type": "boolean", "description": "shown on the public board (default true)"},
        "team": {"type": "string", "description": (
            "organisers of the task only: the team (its name or short name) this run is uploaded for; the run "
            "follows that team's phase, extension and quota and records who uploaded it")},
        "phase": {"type": "string", "description": (
            "the phase's name; may be left out while only one phase is open, and must be given while several "
            "are (an upload that names none is then refused with the open phases listed)")}}}},
    responses={202: _run_response, 400: _errors, 401: _errors, 403: _errors, 404: _errors, 409: _errors,
               411: _errors, 413: _errors, 415: _errors, 429: _errors, 503: _errors},
)
@api_view(["POST"])
@permission_classes([IsAuthenticated])
@parser_classes([MultiPartParser])
@throttle_classes([UploadThrottle])
def upload_run(request: Request, slug: str) -> Response:
    # The request's size (and a Content-Length that is not a number) was checked before its body
    # was read, by evalserver.middleware.RequestBodyMiddleware.
    task = access.get_task_for_user(request.user, slug)
    team = str(request.POST.get("team") or "").strip()  # an empty field is no team, as for the phase
    # An organiser's upload for a team (tasks.late): refused for anybody else before the file is read.
    resolved = upload_context_for_team(task, request.user, team) if team else upload_context(task, request.user)
    submission = submission_from_request(request, API_FORM)
    run = submit_run(task, request.user, submission, phase_for_upload(resolved, submission.phase), resolved)
    copies = identical_runs(run)
    return Response({"id": run.pk, "status": Run.QUEUED, "url": reverse("api-run", args=[run.pk]),
                     "warnings": run.warnings, "identical_to": identical_payload(run, copies),
                     "identical_note": identical_note(run, copies),
                     "phase": run.phase.name if run.phase_id else None,
                     "quota": quota_status(resolved, run.phase),
                     "submissions": submission_status(resolved)},
                    status=status.HTTP_202_ACCEPTED)


def identical_payload(run: Run, copies: list[Run]) -> list[dict[str, Any]]:
    """The team's earlier runs with the very same file (``identical_runs``), as the upload answer
    lists them: only the team's own runs, never another team's."""
    return [{"id": copy.pk, "name": copy.name, "phase": copy.phase.name if copy.phase_id else None,
             "submitted_at": copy.created_at.isoformat(), "withdrawn": copy.is_withdrawn}
            for copy in copies if copy.pk < run.pk]


def details_payload(run: Run, score: Any) -> dict[str, Any]:
    """A run's per-item details (``Score.details``: the response kind's nugget scores and per-act
    means) as the API and the run page's JSON download give them."""
    return {"run": run.pk, "task": run.task.slug, "gold_version": score.gold_version.number, "scope": score.scope,
            "details": score.details or {}}


@extend_schema(summary="A run's per-item details (nugget scores per response and per dialogue act)",
               description="Visible to whom the run's per-item scores are (its team where the phase gives per-item "
                           "feedback or the results are published, and organisers); test data before publication "
                           "is for organisers only, and their reading is logged.",
               responses={200: OpenApiTypes.OBJECT, 401: _errors, 404: _errors})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def run_details(request: Request, run_id: int) -> Response:
    run = access.get_run_for_user(request.user, run_id)
    phases = access.task_phases(run.task_id)
    score = access.per_item_score(run, request.user, phases)
    if score is None:
        raise Http404("no per-item details of this run are visible to you")
    if access.per_item_is_logged(run, phases):
        access.log_access(request, run.task, f"per-item details of run #{run.pk} ({run.label[:100]}, "
                                             f"gold v{score.gold_version.number})")
    return Response(details_payload(run, score))


@extend_schema(summary="A run's status, errors and scores (its team and the task's organisers only)",
               responses={200: OpenApiTypes.OBJECT, 401: _errors, 404: _errors})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def run_detail(request: Request, run_id: int) -> Response:
    run = access.get_run_for_user(request.user, run_id)
    return Response(run_data(run, request.user))


@extend_schema(summary="Your team's runs of a task, newest first",
               responses={200: OpenApiTypes.OBJECT, 401: _errors, 404: _errors})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def my_runs(request: Request, slug: str) -> Response:
    task = access.get_task_for_user(request.user, slug)
    runs = Run.objects.filter(task=task, team__members=request.user).select_related(
        "task", "team", "phase", "gold_version")
    phases = access.task_phases(task.pk)
    resolved = upload_context(task, request.user)
    return Response({"runs": [run_data(run, request.user, phases, describe=False) for run in runs[:500]],
                     "measures": [spec.public() for spec in task.measure_specs()],
                     "quota": quota_status(resolved),
                     # Whether runs are accepted now: a null quota alone cannot tell "no phases, no
                     # quota" from "closed" (the client said "no submission phase is open").
                     "submissions": submission_status(resolved)})


@extend_schema(summary="A task's gold versions and how each was made (organisers only)",
               responses={200: OpenApiTypes.OBJECT, 401: _errors, 403: _errors, 404: _errors})
@api_view(["GET"])
@permission_classes([IsAuthenticated])
def gold_versions(request: Request, slug: str) -> Response:
    """Every gold version, newest first: number, label, items, measures, checksum and provenance
    with the kind's summary of it (a vBLEU version's pool checksum, retrieval and rater settings,
    held-out accuracy and seed).
    Gold data itself is never served."""
    task = access.get_task_for_user(request.user, slug)
    if not access.is_organiser(request.user, task):
        raise exceptions.PermissionDenied("only the task's organisers see its gold versions")
    versions = task.gold_versions.order_by("-number").only(
        "number", "label", "n_items", "measure_keys", "sha256", "source_name", "warnings", "provenance",
        "created_at")
    return Response({"task": task.slug, "gold_versions": [{
        "number": version.number, "label": version.label, "n_items": version.n_items,
        "measures": version.measure_keys, "sha256": version.sha256, "source_name": version.source_name,
        "created_at": version.created_at.isoformat(), "warnings": version.warnings,
        "provenance_summary": task.kind_impl.provenance_summary(version.provenance or {}),
        "provenance": version.provenance} for version in versions]})


@extend_schema(exclude=True)
@api_view(["GET", "POST", "PUT", "PATCH", "DELETE"])
def not_found(request: Request, *args: Any, **kwargs: Any) -> Response:
    raise exceptions.NotFound("no such API endpoint; see /api/v1/docs/")

