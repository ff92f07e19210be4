"""Participant pages: sign-in, uploading a run through the web form, the team page, run visibility.

A run's own pages (where it stands, its per-item scores, comparisons) are ``leaderboard.runs``:
they read boards, which live above this layer."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_ratelimit.decorators import ratelimit

from tasks import access, late
from tasks.changes import board_changed
from tasks.errors import Rejected
from tasks.models import Run
from tasks.submissions import (
    WEB_FORM,
    check_priority_free,
    identical_note,
    identical_runs,
    participant_team,
    phase_for_upload,
    quota_status,
    submission_from_request,
    submit_run,
    upload_context,
)
from tasks.teams import team_context
from tasks.tokens import current_token, follow_in_logins_file, issue_token, revoke_tokens

# Every password form counts against one limit per address: the admin's sign-in had none (125
# wrong passwords for a superuser all answered 200), and separate counters would add up.
SIGN_IN_GROUP = "sign-in"
_sign_in_limit = ratelimit(key="ip", group=SIGN_IN_GROUP, rate=lambda group, request: settings.EVALSERVER_LOGIN_RATE,
                           method="POST", block=False)
LIMITED_MESSAGE = "Too many sign-in attempts from your address. Wait a minute and try again."


@method_decorator(_sign_in_limit, name="post")
class LoginView(auth_views.LoginView):
    """Sign-in with a limit on attempts per address: past it, the form says to wait."""

    # Django's LoginView puts the request's host in ``site_name``, over the context processor's
    # site name: the page title read "Sign in · 127.0.0.1:8000".
    extra_context = {"site_name": settings.SITE_NAME}

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "signup_open": settings.EVALSERVER_SIGNUP_OPEN}

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if getattr(request, "limited", False):
            form = self.get_form()
            form.errors.clear()
            return render(request, "registration/login.html",
                          {"form": form, "limited": True}, status=429)
        return super().post(request, *args, **kwargs)


@never_cache
@_sign_in_limit
def admin_login(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    """The admin's sign-in (``admin.site.login``) under the same limit as ``/accounts/login/``:
    past it, the admin's form with the reason and a 429, and the password is not checked."""
    from django.contrib import admin
    from django.contrib.admin.forms import AdminAuthenticationForm
    from django.contrib.admin.sites import AdminSite
    from django.core.exceptions import NON_FIELD_ERRORS
    from django.template.response import TemplateResponse

    if not getattr(request, "limited", False):
        return AdminSite.login(admin.site, request, extra_context)
    from django.forms.utils import ErrorDict

    # An unbound form with the reason as its error: binding it to the post would check the password.
    form = AdminAuthenticationForm(request)
    form._errors = ErrorDict({NON_FIELD_ERRORS: form.error_class([LIMITED_MESSAGE])})
    context = {**admin.site.each_context(request), "title": "Log in", "subtitle": None, "form": form,
               "app_path": request.get_full_path(), "username": "", **(extra_context or {})}
    request.current_app = admin.site.name
    return TemplateResponse(request, admin.site.login_template or "admin/login.html", context, status=429)


class PasswordResetView(auth_views.PasswordResetView):
    """Django's password reset, with a limit on requests per address (each sends an email) and the
    site's name in the email. Unknown addresses get the same answer as known ones."""

    template_name = "registration/password_reset_form.html"
    email_template_name = "registration/password_reset_email.txt"
    subject_template_name = "registration/password_reset_subject.txt"
    success_url = reverse_lazy("password-reset-sent")
    extra_email_context = {"site_title": settings.SITE_NAME}

    @method_decorator(ratelimit(key="ip", rate=lambda group, request: settings.EVALSERVER_PASSWORD_RESET_RATE,
                                method="POST", block=False))
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if getattr(request, "limited", False):
            return render(request, self.template_name, {"form": self.get_form_class()(), "limited": True},
                          status=429)
        return super().post(request, *args, **kwargs)


class PasswordResetSentView(auth_views.PasswordResetDoneView):
    template_name = "registration/password_reset_done.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        # Without an SMTP server the email is printed on the server's console: say where it went.
        return {**super().get_context_data(**kwargs),
                "console_email": settings.EMAIL_BACKEND.endswith("console.EmailBackend")}


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    template_name = "registration/password_reset_confirm.html"
    success_url = reverse_lazy("password-reset-complete")


class PasswordResetCompleteView(auth_views.PasswordResetCompleteView):
    template_name = "registration/password_reset_complete.html"


@require_http_methods(["GET", "POST"])
@login_required
@ratelimit(key="user_or_ip", rate=lambda group, request: settings.EVALSERVER_UPLOAD_RATE, method="POST",
           block=False)
def upload(request: HttpRequest, slug: str) -> HttpResponse:
    task = access.get_task_for_user(request.user, slug)
    # Team, phases and terms, resolved once for the page and the upload alike.
    resolved = upload_context(task, request.user)
    taking = resolved.open_phases
    phase = taking[0] if len(taking) == 1 else None
    closed = ""
    if not taking and resolved.phases:
        try:
            phase_for_upload(resolved)
        except Rejected as rejected:
            closed = rejected.errors[0]
    context: dict[str, Any] = {"task": task, "team": resolved.team, "phase": phase,
                               "open_phases": taking if len(taking) > 1 else [], "closed": closed,
                               "max_bytes": settings.RUN_UPLOAD_MAX_BYTES,
                               "terms_needed": not resolved.terms_accepted,
                               # The team's extensions (tasks.late): a phase it keeps open is open until then.
                               "extension_notes": late.extension_notes(resolved.team, task, resolved.at)
                               if resolved.extensions else [],
                               "phase_until": resolved.extensions.get(phase.pk, phase.ends_at) if phase else None}
    if request.method == "GET":
        return render(request, "tasks/upload.html", {**context, "quota": quota_status(resolved)})
    if getattr(request, "limited", False):  # the same limit per user as the API's uploads
        context.update(quota=quota_status(resolved),
                       errors=[f"too many uploads: at most {settings.EVALSERVER_UPLOAD_RATE}; try again later"])
        return render(request, "tasks/upload.html", context, status=429)
    try:
        submission = submission_from_request(request, WEB_FORM)
        run = submit_run(task, request.user, submission, phase_for_upload(resolved, submission.phase), resolved)
    except Rejected as rejected:
        context.update(errors=rejected.errors, form_name=request.POST.get("name", ""),
                       form_phase=request.POST.get("phase", ""),
                       form_description=request.POST.get("description", ""),
                       form_priority=request.POST.get("priority", ""), form_public=request.POST.get("public") == "on",
                       quota=quota_status(resolved))
        response = render(request, "tasks/upload.html", context, status=rejected.status)
        if rejected.retry_after:
            response["Retry-After"] = str(rejected.retry_after)
        return response
    messages.success(request, f"Run {run.name!r} was accepted and queued for scoring.")
    note = identical_note(run, identical_runs(run))
    if note:
        messages.warning(request, note)
    return redirect("run-page", run_id=run.pk)


@require_GET
@login_required
def team_page(request: HttpRequest) -> HttpResponse:
    team = participant_team(request.user)
    runs = Run.objects.filter(team=team).select_related("task", "phase") if team else Run.objects.none()
    token = current_token(request.user)
    return render(request, "tasks/team.html", {"team": team, "runs": runs[:500], "token": token,
                                               **team_context(request.user, team)})


@require_POST
@login_required
@never_cache  # Cache-Control: no-store: the token must not stay in a browser's or proxy's cache
def regenerate_token(request: HttpRequest) -> HttpResponse:
    """A new token; replacing one that exists kills the old at once (every script using it stops),
    so that is asked first, on a page of its own (no script needed)."""
    if current_token(request.user) is not None and request.POST.get("confirm") != "yes":
        return render(request, "tasks/confirm.html", {
            "title": "Replace your API token?",
            "paragraphs": ["A new token is made and your current one stops working at once: every script, "
                           "command-line client or notebook that uses it is refused from then on until you give it "
                           "the new token.",
                           "The new token is shown once, on the next page. Nothing else changes: your runs, "
                           "scores and quota stay as they are."],
            "action": reverse("token-regenerate"), "fields": [], "button": "Replace the token",
            "cancel_url": reverse("team-page"), "cancel": "Keep the current token"})
    token = issue_token(request.user)  # only its hash is stored: this page is the one time it is shown
    messages.success(request, "A new API token was created; the old one no longer works.")
    # The demo's account: var/demo-logins.txt, which the README's examples read, gets the new token.
    logins = follow_in_logins_file(request.user, token)
    return render(request, "tasks/token.html", {"token": token, "logins_file": logins})


@require_POST
@login_required
def revoke_token(request: HttpRequest) -> HttpResponse:
    revoke_tokens(request.user)
    follow_in_logins_file(request.user, None)
    messages.success(request, "Your API token was revoked.")
    return redirect("team-page")


@require_POST
@login_required
def run_visibility(request: HttpRequest, run_id: int) -> HttpResponse:
    """A member of the owning team shows the run on, or hides it from, the public leaderboard,
    withdraws it (hidden everywhere, never deleted; asked first), or undoes a withdrawal while the
    run's phase has not ended."""
    run = access.get_run_for_user(request.user, run_id)
    if not access.is_member(request.user, run):
        return render(request, "403.html", status=403)
    action = request.POST.get("action")
    if action not in ("show", "hide", "withdraw", "restore"):
        messages.error(request, "Unknown action: choose show, hide, withdraw or restore.")
        return redirect("run-page", run_id=run.pk)
    if action == "restore":
        return _restore(request, run)
    if run.is_withdrawn:
        messages.error(request, "The run is withdrawn: undo the withdrawal first to show or hide it.")
        return redirect("run-page", run_id=run.pk)
    if action == "withdraw" and request.POST.get("confirm") != "yes":
        until = withdrawal_undo_until(run)
        return render(request, "tasks/confirm.html", {
            "title": f"Withdraw the run {run.name}?",
            "paragraphs": [
                "A withdrawn run is hidden everywhere: it leaves every leaderboard, the statistics and the "
                "organisers' results. It is never deleted. " + _quota_sentence(run),
                _undo_sentence(run, until)],
            "action": reverse("run-visibility", args=[run.pk]), "fields": [("action", "withdraw")],
            "button": "Withdraw the run", "cancel_url": reverse("run-page", args=[run.pk]),
            "cancel": "Keep the run"})
    if action == "withdraw":
        Run.objects.filter(pk=run.pk, withdrawn_at__isnull=True).update(withdrawn_at=timezone.now())
    else:
        Run.objects.filter(pk=run.pk).update(is_public=action == "show")
    board_changed(run.task, [run.pk])  # the statistics name the runs they compare: a hidden run leaves them too
    messages.success(request, {"show": "The run is shown on the public leaderboard.",
                               "hide": "The run is hidden from the public leaderboard.",
                               "withdraw": "The run was withdrawn: it is hidden everywhere."}[action])
    return redirect("run-page", run_id=run.pk)


def _quota_sentence(run: Run) -> str:
    """What withdrawing does to the quota (``tasks.submissions.counted_runs``)."""
    copy = next((other for other in identical_runs(run) if other.pk < run.pk and other.phase_id == run.phase_id
                 and other.status != Run.FAILED), None)
    if run.phase_id is not None and copy is not None:
        return (f"Its file is identical to the earlier run #{copy.pk} {copy.name!r} of this phase, so withdrawing it "
                "gives its quota slot back.")
    return "It keeps counting against your quota."


def _undo_sentence(run: Run, until: datetime | None) -> str:
    if run.phase_id is None:
        return "Your team can undo the withdrawal from the run's page at any time."
    if until is None:
        return f"The {run.phase.name} phase has ended, so the withdrawal cannot be undone."
    return (f"Your team can undo the withdrawal from the run's page until the {run.phase.name} phase ends, at "
            f"{until:%Y-%m-%d %H:%M} UTC; after that it is final.")


def withdrawal_undo_until(run: Run) -> datetime | None:
    """Until when a withdrawal of the run can be undone: the end of its phase (a phase's runs are
    final once it has ended), None when it cannot be undone any more, or for a run outside
    phases, whose task has no end (``datetime.max`` stands for that)."""
    if run.phase_id is None:
        return datetime.max.replace(tzinfo=UTC)
    return run.phase.ends_at if run.phase.ends_at > timezone.now() else None


def _restore(request: HttpRequest, run: Run) -> HttpResponse:
    if not run.is_withdrawn:
        messages.info(request, "The run is not withdrawn; nothing changed.")
        return redirect("run-page", run_id=run.pk)
    if withdrawal_undo_until(run) is None:
        messages.error(request, f"The {run.phase.name} phase ended at {run.phase.ends_at:%Y-%m-%d %H:%M} UTC: "
                                "its runs are final, and the withdrawal can no longer be undone.")
        return redirect("run-page", run_id=run.pk)
    try:
        with transaction.atomic():
            if run.priority is not None:
                check_priority_free(run.task, run.team, run.phase, run.priority)
            Run.objects.filter(pk=run.pk).update(withdrawn_at=None)
    except Rejected as rejected:
        messages.error(request, "The withdrawal was not undone: " + " ".join(rejected.errors))
        return redirect("run-page", run_id=run.pk)
    board_changed(run.task, [run.pk])
    messages.success(request, "The withdrawal is undone: the run is back "
                              + ("on the public leaderboard." if run.is_public else "(hidden from the public board)."))
    return redirect("run-page", run_id=run.pk)


CLIENT_PATH = Path(__file__).resolve().parent.parent / "client" / "evalserver_cli.py"


@require_GET
def client_download(request: HttpRequest) -> HttpResponse:
    """The single-file participant client (standard library only)."""
    response = HttpResponse(CLIENT_PATH.read_bytes(), content_type="text/x-python; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="evalserver_cli.py"'
    return response


FAVICON_PATH = Path(__file__).resolve().parent.parent / "static" / "favicon.ico"


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``, which browsers ask for whatever the page links (it was a 404 in every log)."""
    response = HttpResponse(FAVICON_PATH.read_bytes(), content_type="image/x-icon")
    response["Cache-Control"] = "public, max-age=86400"
    return response
