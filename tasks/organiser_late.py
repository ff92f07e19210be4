"""The organisers' pages for late runs (``tasks.late``): giving a team an extension of a phase or
ending it (a form on the dashboard, posted here), and uploading a run on a team's behalf. Every
refusal names what is wrong and nothing is stored; every change goes to the task's access log."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from tasks import access, late
from tasks.errors import Rejected
from tasks.models import Team
from tasks.organiser import _get_task_for_organiser, _param
from tasks.organiser_forms import _moment
from tasks.submissions import (
    WEB_FORM,
    phase_for_upload,
    submission_from_request,
    submit_run,
    upload_context_for_team,
)


@require_POST
@login_required
def extensions(request: HttpRequest, slug: str) -> HttpResponse:
    """Give a team an extension of a phase (``action=extend``: team, phase, until, note) or end one
    (``action=end``: team, phase), then back to the dashboard with what was done or why not."""
    task = _get_task_for_organiser(request, slug)
    action = _param(request.POST, "action")
    try:
        phase = late.find_phase(task, _param(request.POST, "phase"))
        team = late.find_team(_param(request.POST, "team"))
        if action == "extend":
            problems: list[str] = []
            until = _moment(_param(request.POST, "until"), "until", problems)
            if problems or until is None:
                raise Rejected(problems)
            extension = late.grant_extension(phase, team, until, request.user, _param(request.POST, "note"))
            access.log_access(request, task, f"gave team {team.name} an extension of the {phase.name} phase until "
                                             f"{extension.until:%Y-%m-%d %H:%M} UTC")
            messages.success(request, f"Team {team.name!r} may submit to the {phase.name} phase until "
                                      f"{extension.until:%Y-%m-%d %H:%M} UTC; its runs after the end are marked late. "
                                      "Its members read this on their upload page.")
        elif action == "end":
            late.end_extension(phase, team)
            access.log_access(request, task, f"ended the extension of team {team.name} in the {phase.name} phase")
            messages.success(request, f"The extension of team {team.name!r} in the {phase.name} phase has ended.")
        else:
            raise Rejected(["action: choose extend or end"])
    except Rejected as rejected:
        messages.error(request, "Nothing was changed: " + "; ".join(rejected.errors) + ".")
    return redirect("organiser-dashboard", slug=task.slug)


@require_http_methods(["GET", "POST"])
@login_required
def upload_for_team(request: HttpRequest, slug: str) -> HttpResponse:
    """An organiser uploads a run on a team's behalf (a run the team sent by e-mail when the server
    was down, say): the team's phase rules, extension and quota apply, and the run records who
    uploaded it, shown to the organisers and to the team."""
    task = _get_task_for_organiser(request, slug)
    context: dict[str, Any] = {"task": task, "teams": Team.objects.order_by("name")[:1000],
                               "phases": [phase for phase in task.phases.all() if phase.takes_runs],
                               "max_bytes": settings.RUN_UPLOAD_MAX_BYTES, "form": request.POST}
    if request.method == "GET":
        return render(request, "tasks/upload_for_team.html", context)
    try:
        resolved = upload_context_for_team(task, request.user, _param(request.POST, "team"))
        submission = submission_from_request(request, WEB_FORM)
        run = submit_run(task, request.user, submission, phase_for_upload(resolved, submission.phase), resolved)
    except Rejected as rejected:
        return render(request, "tasks/upload_for_team.html", {**context, "errors": rejected.errors},
                      status=rejected.status)
    access.log_access(request, task, f"uploaded run #{run.pk} ({run.name[:80]}) on behalf of team {run.team.name}"
                                     f"{' (late)' if run.late else ''}")
    messages.success(request, f"Run {run.name!r} was uploaded for team {run.team.name!r} and queued for scoring"
                              f"{'; it is marked late' if run.late else ''}.")
    return redirect("run-page", run_id=run.pk)
