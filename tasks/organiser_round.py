"""What an organiser needs for a round beyond the dashboard's runs and phases, so that nobody needs
the Django admin: the task's settings (title, texts, terms, visibility, approval, team size, the
statistics' resamples), its co-organisers, who accepted the terms, adding files to the data section,
and withdrawing a run. Each form names every problem and stores nothing then; each change goes to
the task's access log."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from tasks import access, datafiles
from tasks.changes import board_changed
from tasks.errors import Rejected
from tasks.models import Phase, Run, Task, TermsAcceptance
from tasks.organiser import _get_task_for_organiser, _param

TEXT_FIELDS = ("title", "description", "rules", "terms", "contact", "citation")


class TaskSettingsForm(forms.ModelForm):
    """The task's own settings an organiser may change (its slug, kind and configuration stay: runs
    and gold versions are of them)."""

    class Meta:
        model = Task
        fields = ["title", "description", "rules", "terms", "contact", "citation", "is_public",
                  "requires_team_approval", "max_team_size", "permutations"]
        labels = {"is_public": "Public: listed on the home page, its overview and leaderboard shown to everyone",
                  "requires_team_approval": "Teams need your approval before they can submit runs",
                  "max_team_size": "Largest team (empty: no limit)",
                  "permutations": "Resamples of the significance tests (B of the randomised Tukey HSD test and of "
                                  "the bootstrap intervals, 100 to 1,000,000)"}
        # The labels above say it all; the model's help texts would repeat them.
        help_texts = {"is_public": "", "requires_team_approval": "", "max_team_size": "", "permutations": ""}
        widgets = {name: forms.Textarea(attrs={"rows": 4}) for name in ("description", "rules", "terms", "citation")}

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        for name in TEXT_FIELDS:
            if isinstance(data.get(name), str):
                # As typed in a browser: Windows line ends and decomposed accents would make a terms
                # text that reads the same a new version nobody accepted.
                data[name] = unicodedata.normalize("NFC", data[name].replace("\r\n", "\n")).strip()
        return data


def _people(task: Task) -> list[dict[str, Any]]:
    """Who accepted the task's terms, newest first, with whether it was the current version."""
    current = task.terms_sha256
    rows = (TermsAcceptance.objects.filter(task=task).select_related("user").prefetch_related("user__teams")
            .order_by("-accepted_at")[:500])
    return [{"acceptance": row, "current": row.terms_sha256 == current,
             "team": ", ".join(team.name for team in row.user.teams.all()) if row.user else ""} for row in rows]


@require_http_methods(["GET", "POST"])
@login_required
def settings_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The task's settings (``form=settings``), its organisers (``form=add-organiser`` with
    ``who``, ``form=remove-organiser`` with ``user``) and who accepted its terms."""
    task = _get_task_for_organiser(request, slug)
    which = request.POST.get("form") if request.method == "POST" else None
    form = TaskSettingsForm(request.POST if which == "settings" else None, instance=task)
    if which == "settings":
        before = Task.objects.get(pk=task.pk)
        if form.is_valid():
            changed = [name for name in form.changed_data]
            with transaction.atomic():
                saved = form.save()
                if "permutations" in changed:
                    board_changed(saved)  # the statistics are computed again with the new B
                access.log_access(request, saved, "changed the task's settings: " + (", ".join(
                    name.replace("_", " ") for name in changed) or "nothing"))
            note = (" The terms changed: every participant accepts the new version before their next upload."
                    if before.terms != saved.terms and saved.terms else "")
            messages.success(request, f"The settings of {saved.title} are saved.{note}")
            return redirect("organiser-settings", slug=task.slug)
        task = before  # the page shows the stored title, not the refused one
    elif which in ("add-organiser", "remove-organiser"):
        (_add_organiser if which == "add-organiser" else _remove_organiser)(request, task)
        return redirect(reverse("organiser-settings", args=[task.slug]) + "#organisers")
    elif which is not None:
        messages.error(request, "Unknown form: choose settings, add-organiser or remove-organiser.")
    status = 400 if which == "settings" or (which is not None and request.method == "POST") else 200
    return render(request, "tasks/task_settings.html", {
        "task": task, "form": form, "organisers": task.organisers.order_by("username"), "people": _people(task),
        "terms_version": task.terms_sha256[:12]}, status=status)


def _add_organiser(request: HttpRequest, task: Task) -> None:
    who = _param(request.POST, "who")
    users = get_user_model()
    found = list(users.objects.filter(Q(username=who) | Q(email__iexact=who), is_active=True)[:2]) if who else []
    if not who:
        messages.error(request, "Co-organiser: give the username or e-mail address of an account.")
    elif not found:
        messages.error(request, f"Co-organiser: no active account has the username or e-mail address {who!r}; "
                                "ask them to sign up first.")
    elif len(found) > 1 and not any(user.username == who for user in found):
        messages.error(request, f"Co-organiser: several accounts have the e-mail address {who!r}; give the "
                                "username instead.")
    else:
        user = next((user for user in found if user.username == who), found[0])
        if task.organisers.filter(pk=user.pk).exists():
            messages.info(request, f"{user.username} already organises {task.title}.")
            return
        task.organisers.add(user)
        access.log_access(request, task, f"added {user.username} as an organiser")
        messages.success(request, f"{user.username} now organises {task.title}: they see this dashboard, every "
                                  "run and the results before publication.")


def _remove_organiser(request: HttpRequest, task: Task) -> None:
    raw = _param(request.POST, "user")
    user = task.organisers.filter(pk=int(raw)).first() if re.fullmatch(r"[0-9]{1,18}", raw) else None
    if user is None:
        messages.error(request, "No such organiser of this task.")
        return
    if task.organisers.count() == 1:
        messages.error(request, f"{user.username} is the task's only organiser: add another one first.")
        return
    task.organisers.remove(user)
    access.log_access(request, task, f"removed {user.username} from the organisers")
    messages.success(request, f"{user.username} no longer organises {task.title}.")


class DataFileUploadForm(forms.Form):
    file = forms.FileField(label="File")
    name = forms.CharField(max_length=100, required=False,
                           label="Download name (letters, digits, '.', '-' and '_'; empty: the file's own name)")
    phase = forms.ChoiceField(required=False, label="Section")
    description = forms.CharField(max_length=2000, required=False, widget=forms.Textarea(attrs={"rows": 3}),
                                  label="Description (shown beside the file)")
    replace = forms.BooleanField(required=False, label="Replace the file of the same name, if there is one")

    def __init__(self, *args: Any, task: Task, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["phase"].choices = [("", "the whole task"), *((phase.name, f"the {phase.name} phase")
                                                                   for phase in access.task_phases(task.pk))]


@require_http_methods(["GET", "POST"])
@login_required
def data_file_form(request: HttpRequest, slug: str) -> HttpResponse:
    """Add a file to the task's data section (or replace one), checked as ``add_data_file`` checks
    it: a safe, unused name, the size limit, and never a file that holds secret gold annotations."""
    task = _get_task_for_organiser(request, slug)
    form = DataFileUploadForm(request.POST or None, request.FILES or None, task=task)
    errors: list[str] = []
    if request.method == "POST":
        if form.is_valid():
            upload = form.cleaned_data["file"]
            name = form.cleaned_data["name"].strip() or datafiles.default_data_file_name(upload.name or "")
            phase = Phase.objects.filter(task=task, name=form.cleaned_data["phase"]).first() \
                if form.cleaned_data["phase"] else None
            try:
                added = datafiles.add_data_file(task, name, upload, phase=phase,
                                                description=form.cleaned_data["description"].strip(),
                                                user=request.user, replace=form.cleaned_data["replace"])
            except Rejected as rejected:
                errors = list(rejected.errors)
            else:
                where = f"the {phase.name} phase's section" if phase else "the whole task's section"
                access.log_access(request, task, f"added the data file {added.name} to {where} "
                                                 f"(SHA-256 {added.sha256[:12]})")
                messages.success(request, f"{added.name} ({added.size:,} bytes) is in {where} of the data page.")
                return redirect(reverse("organiser-dashboard", args=[task.slug]) + "#data-files")
        else:
            errors = [f"{form.fields[name].label if name in form.fields else name}: {' '.join(problems)}"
                      for name, problems in form.errors.items()]
    return render(request, "tasks/data_file_form.html", {"task": task, "form": form, "errors": errors,
                                                         "max_bytes": settings.EVALSERVER_DATA_FILE_MAX_BYTES},
                  status=400 if errors else 200)


@require_POST
@login_required
def withdraw_run(request: HttpRequest, slug: str) -> HttpResponse:
    """Withdraw a run, confirmed (a run that breaks the rules): hidden everywhere, never deleted, as
    the admin's action did. There is no undo here: a team's own withdrawal is the team's to undo
    (``tasks.views.run_visibility``), and nothing records whose withdrawal a run carries."""
    task = _get_task_for_organiser(request, slug)
    raw = _param(request.POST, "run")
    run = (Run.objects.filter(task=task, pk=int(raw)).select_related("team").first()
           if re.fullmatch(r"[0-9]{1,18}", raw) else None)
    back = redirect("organiser-dashboard", slug=task.slug)
    if run is None:
        messages.error(request, "No such run of this task.")
        return back
    if request.POST.get("confirm") != "yes":
        messages.error(request, f"Run {run.pk} was not withdrawn: tick the box beside it first.")
        return back
    with transaction.atomic():
        changed = Run.objects.filter(pk=run.pk, withdrawn_at__isnull=True).update(withdrawn_at=timezone.now())
        if changed:
            board_changed(task, [run.pk])
            access.log_access(request, task, f"withdrew run {run.pk} ({run.name}"
                                             f"{f' of {run.team.name}' if run.team else ''})")
    if changed:
        messages.success(request, f"Run {run.pk} ({run.name}) is withdrawn: it has left every leaderboard and the "
                                  "statistics, and is kept.")
    else:
        messages.info(request, f"Run {run.pk} is already withdrawn; nothing changed.")
    return back
