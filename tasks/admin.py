"""The Django admin for organisers (staff accounts): tasks, gold versions, phases, teams and runs."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.views.main import SEARCH_VAR
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.core.exceptions import FieldDoesNotExist
from django.db import models, transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.template.response import TemplateResponse
from django.utils import timezone

from scoring.kinds import KINDS
from tasks.access import log_access
from tasks.accounts import team_name_problems
from tasks.changes import board_changed
from tasks.datafiles import (
    data_file_problems,
    default_data_file_name,
    forget_unused_blob,
    gold_problems,
    store_data_content,
)
from tasks.errors import Rejected
from tasks.extensions import Extension
from tasks.models import (
    AccessLog,
    DataFile,
    GoldVersion,
    Phase,
    Profile,
    Run,
    Score,
    Task,
    Team,
    TermsAcceptance,
)
from tasks.organising import load_gold_version, rescore_runs, runs_to_rescore, validated_gold
from tasks.views import admin_login


def _preset_choices() -> list[tuple[str, str]]:
    return [("", "---------")] + [(name, f"{name} ({kind.name})") for kind in KINDS.values()
                                  for name in sorted(kind.presets)]


# The largest integer every database we support stores. SQLite's driver raises OverflowError for a
# larger one in a related lookup (Django range-checks plain integer lookups only), which was a 500.
_LARGEST_INTEGER = 2**63 - 1
_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")


def _too_large(text: str) -> bool:
    # Compare lengths before converting: int() of a long enough string is itself refused by Python.
    if not _INTEGER.fullmatch(text):
        return False
    digits = text.strip().lstrip("+-").lstrip("0")
    return len(digits) > 19 or (len(digits) == 19 and int(digits) > _LARGEST_INTEGER)


def _bad_parameter(name: str, values: list[str], ids: bool = True) -> str | None:
    if any("\x00" in text for text in [name, *values]):
        return f"the parameter {name!r} of the address contains a NUL character"
    if ids and any(_too_large(text) for text in values):
        return f"the parameter {name!r} holds a number larger than {_LARGEST_INTEGER:,} (no record has such an id)"
    return None


class SafeParametersMixin:
    """The admin's lists and forms refuse, as a 400 naming the parameter, what the database would
    turn into a 500: a NUL character in a filter or search parameter (PostgreSQL refuses it in the
    query) and an id beyond 64 bits in a filter or in a relation or integer field of a form (SQLite's
    driver overflows). Every admin page of the project, Django's users and groups included, uses it."""

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        for name, values in request.GET.lists():
            # The search box takes any text: a long number there is a search, not an id.
            problem = _bad_parameter(name, values, ids=name != SEARCH_VAR)
            if problem:
                return HttpResponseBadRequest(problem, content_type="text/plain; charset=utf-8")
        return super().changelist_view(request, extra_context)  # type: ignore[misc]

    def changeform_view(self, request: HttpRequest, object_id: str | None = None, form_url: str = "",
                        extra_context: dict[str, Any] | None = None) -> HttpResponse:
        if request.method == "POST":
            for name, values in request.POST.lists():
                if not self._holds_ids(name):
                    continue
                problem = _bad_parameter(name, values)
                if problem:
                    return HttpResponseBadRequest(problem, content_type="text/plain; charset=utf-8")
        return super().changeform_view(request, object_id, form_url, extra_context)  # type: ignore[misc]

    def _holds_ids(self, name: str) -> bool:
        try:
            field = self.model._meta.get_field(name)  # type: ignore[attr-defined]
        except FieldDoesNotExist:
            return False
        return bool(field.is_relation) or isinstance(field, models.IntegerField)


class ProjectAdmin(SafeParametersMixin, admin.ModelAdmin):
    """Every admin page of the project's own models."""


class TaskForm(forms.ModelForm):
    preset = forms.ChoiceField(choices=_preset_choices, required=False,
                               help_text="new tasks: fill the configuration from one of the kind's presets")

    class Meta:
        model = Task
        fields = ["slug", "title", "description", "kind", "is_public", "organisers", "requires_team_approval",
                  "max_team_size", "permutations", "statistics_seed", "config", "rules", "contact", "citation", "terms"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["config"].required = False

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        name = data.get("kind") or "stc3"
        if name not in KINDS:
            return data  # the field's validator has said so
        kind = KINDS[name]
        if self.instance.pk and self.instance.kind != name and self.instance.gold_versions.exists():
            self.add_error("kind", "a task with gold versions keeps its kind (its gold and runs are of that kind)")
        preset = data.get("preset") or ""
        if preset and preset not in kind.presets:
            self.add_error("preset", f"{preset!r} is not a preset of the kind {name!r} "
                                     f"(its presets: {', '.join(sorted(kind.presets)) or 'none'})")
            return data
        if not data.get("config") or preset:
            data["config"] = dict(kind.presets[preset or kind.default_preset])
        try:
            kind.config(data["config"])
        except (ValueError, TypeError) as error:
            self.add_error("config", str(error))
        return data


@admin.register(Task)
class TaskAdmin(ProjectAdmin):
    form = TaskForm
    list_display = ["slug", "title", "is_public", "created_at"]
    search_fields = ["slug", "title"]
    filter_horizontal = ["organisers"]
    actions = ["rescore_all"]

    @admin.action(description="Re-score every run of the selected tasks", permissions=["change"])
    def rescore_all(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        """Like the organiser dashboard's re-score, only after a confirmation: the first POST
        shows what would be re-scored (per task, counts per status); the page's POST with
        ``post=yes`` queues the runs and records it in each task's access log."""
        tasks = list(queryset.order_by("slug"))
        if request.POST.get("post") == "yes":
            total = 0
            for task in tasks:
                count = rescore_runs(runs_to_rescore(task))
                log_access(request, task, f"re-scored {count} runs (every phase, admin)")
                total += count
            self.message_user(request, f"{total} run(s) queued for re-scoring.")
            return None
        rows = []
        for task in tasks:
            runs = runs_to_rescore(task)
            counts = {status: runs.filter(status=status).count() for status, _ in Run.STATUSES}
            rows.append({"task": task, "counts": counts, "total": sum(counts.values())})
        return TemplateResponse(request, "admin/tasks/task/rescore_confirmation.html", {
            **self.admin_site.each_context(request), "title": "Re-score every run of the selected tasks?",
            "opts": self.model._meta, "rows": rows, "total": sum(row["total"] for row in rows),
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME})


class GoldUploadForm(forms.ModelForm):
    file = forms.FileField(help_text="the gold JSON file; every upload becomes a new version")
    phases = forms.ModelMultipleChoiceField(
        queryset=Phase.objects.select_related("task"), required=False,
        help_text="phases of this task to move to the new version, their runs re-scored (a corrected gold); "
                  "runs outside phases are always re-scored")

    class Meta:
        model = GoldVersion
        fields = ["task", "label"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        upload = data.get("file")
        task = data.get("task")
        foreign = [phase for phase in data.get("phases") or () if task is not None and phase.task_id != task.pk]
        if foreign:
            self.add_error("phases", f"not phases of {task.slug}: {', '.join(str(phase) for phase in foreign)}")
        if upload is not None and task is not None:
            try:
                self.gold_content = upload.read()
                validated_gold(task, self.gold_content)
            except Rejected as rejected:
                shown = rejected.errors[:50]
                more = len(rejected.errors) - len(shown)
                raise forms.ValidationError([*shown, *([f"... and {more} more"] if more else [])]) from None
        return data


@admin.register(GoldVersion)
class GoldVersionAdmin(ProjectAdmin):
    list_display = ["task", "number", "label", "n_items", "source_name", "created_at", "created_by"]
    list_filter = ["task"]
    readonly_fields = ["number", "sha256", "n_items", "measure_keys", "warnings", "source_name", "provenance",
                       "created_by", "created_at"]
    exclude = ["compiled"]

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = GoldUploadForm
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*self.readonly_fields, "task"] if obj else []

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["task", "label", "file", "phases"] if obj is None else super().get_fields(request, obj)

    def save_model(self, request: HttpRequest, obj: GoldVersion, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        version = load_gold_version(obj.task, form.gold_content, form.cleaned_data["file"].name,
                                    request.user, obj.label, phases=form.cleaned_data.get("phases") or ())
        obj.pk, obj.number = version.pk, version.number
        messages.info(request, f"Gold version {version.number} stored; baselines created and runs re-queued.")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # scores refer to versions; a version is never deleted


@admin.register(Phase)
class PhaseAdmin(ProjectAdmin):
    list_display = ["task", "name", "kind", "gold_version", "starts_at", "ends_at", "daily_quota", "total_quota",
                    "live_subset_size", "results_published"]
    list_filter = ["task", "kind"]
    help_texts = {
        "per_item_feedback": "development phases: run owners see per-item scores. Test and final phases "
                                 "never show per-dialogue scores to participants before the results are published.",
        "requires_method_description": "every run needs a description of the method (NTCIR asks for one in the "
                                       "test phase)",
        "results_published": "test and final phases: everyone sees the scores on the whole test set, the "
                             "significance results and their own per-dialogue scores (also a button on the "
                             "organiser dashboard)",
    }

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Once runs are scored in a phase, its gold and live subset are what their scores mean:
        # changing them would relabel stored per-dialogue scores and drop runs from its board.
        if obj is not None and obj.runs.exists():
            return ["task", "gold_version", "live_subset_size", "live_subset_seed"]
        return []

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, **kwargs)
        if obj is not None and "gold_version" in form.base_fields:
            # An existing phase picks among its own task's versions only (the model refuses others).
            form.base_fields["gold_version"].queryset = GoldVersion.objects.filter(task_id=obj.task_id)
        for name, text in self.help_texts.items():
            if name in form.base_fields:
                form.base_fields[name].help_text = text
        return form


class TeamForm(forms.ModelForm):
    """Renaming or adding a team in the admin follows the sign-up rules: visible characters, and
    not confusable with another team's name (``team_name_problems``)."""

    class Meta:
        model = Team
        fields = ["name", "slug", "members", "owner", "approved", "join_code"]

    def clean_name(self) -> str:
        name = unicodedata.normalize("NFC", self.cleaned_data["name"])
        problems = team_name_problems(name, team_pk=self.instance.pk)
        if problems:
            raise forms.ValidationError([problem.removeprefix("team: ") for problem in problems])
        return name


@admin.register(Team)
class TeamAdmin(ProjectAdmin):
    form = TeamForm
    list_display = ["name", "slug", "approved", "created_at"]
    list_filter = ["approved"]
    search_fields = ["name", "members__username"]
    filter_horizontal = ["members"]
    actions = ["approve"]

    @admin.action(description="Approve the selected teams", permissions=["change"])
    def approve(self, request: HttpRequest, queryset: QuerySet) -> None:
        self.message_user(request, f"{queryset.update(approved=True)} team(s) approved.")


@admin.register(Run)
class RunAdmin(ProjectAdmin):
    list_display = ["pk", "task", "team", "phase", "name", "status", "is_baseline", "is_public", "withdrawn_at",
                    "late", "on_behalf", "created_at", "finished_at"]
    list_filter = ["task", "phase", "status", "is_baseline", "is_public", "late", "on_behalf"]
    search_fields = ["name", "team__name", "description", "file_sha256"]
    readonly_fields = [field.name for field in Run._meta.fields]
    actions = ["rescore", "withdraw"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # runs come in through the upload form, the API or the command line

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # withdraw instead: runs are never deleted

    @admin.action(description="Re-score the selected runs", permissions=["change"])
    def rescore(self, request: HttpRequest, queryset: QuerySet) -> None:
        self.message_user(request, f"{rescore_runs(queryset)} run(s) queued for re-scoring.")

    @admin.action(description="Withdraw the selected runs (hidden everywhere, kept)", permissions=["change"])
    def withdraw(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = queryset.filter(withdrawn_at__isnull=True).update(withdrawn_at=timezone.now())
        for task in Task.objects.filter(runs__in=queryset).distinct():
            board_changed(task, list(queryset.filter(task=task).values_list("pk", flat=True)))
        self.message_user(request, f"{count} run(s) withdrawn.", messages.INFO)


@admin.register(Extension)
class ExtensionAdmin(ProjectAdmin):
    """Extensions are read here; they are given and ended on the dashboard or with ``manage.py
    extension`` (tasks.late), which keep the phase's ``late_until`` in step."""

    list_display = ["phase", "team", "until", "note", "granted_by", "created_at"]
    list_filter = ["phase__task"]
    readonly_fields = [field.name for field in Extension._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Score)
class ScoreAdmin(ProjectAdmin):
    list_display = ["run", "gold_version", "scope", "created_at"]
    list_filter = ["scope", "gold_version__task"]
    readonly_fields = ["run", "gold_version", "scope", "summary", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # scores are the record of what a run got: re-score instead

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AccessLog)
class AccessLogAdmin(ProjectAdmin):
    list_display = ["at", "user", "task", "what", "ip_address"]
    list_filter = ["task"]
    readonly_fields = ["at", "user", "task", "what", "ip_address"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class DataFileForm(forms.ModelForm):
    """An organiser's file for a data section: the upload, its name (default: the file's own name)
    and the phase whose section lists it, checked as ``tasks.datafiles.add_data_file`` checks them
    (safe, unused name; size limit). A new upload on an existing entry replaces its content."""

    file = forms.FileField(required=False, help_text="the file (on an existing entry: replaces its content)")
    name = forms.CharField(max_length=100, required=False,
                           help_text="the download's file name: letters, digits, '.', '-' and '_' (default: the "
                                     "uploaded file's name)")

    class Meta:
        model = DataFile
        fields = ["task", "phase", "file", "name", "description"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        upload = data.get("file")
        if self.instance.pk is None and upload is None:
            self.add_error("file", "choose the file to add")
        if upload is not None and upload.size > settings.EVALSERVER_DATA_FILE_MAX_BYTES:
            limit = settings.EVALSERVER_DATA_FILE_MAX_BYTES
            self.add_error("file", f"{upload.size:,} bytes is more than the largest data file accepted, "
                                   f"{limit:,} bytes (EVALSERVER_DATA_FILE_MAX_BYTES)")
        name = (data.get("name") or "").strip() or (default_data_file_name(upload.name) if upload is not None
                                                     else self.instance.name)
        data["name"] = name
        task = data.get("task") or (self.instance.task if self.instance.pk else None)
        if task is not None and upload is not None and upload.size <= settings.EVALSERVER_DATA_FILE_MAX_BYTES:
            content = b"".join(upload.chunks())
            upload.seek(0)
            for problem in gold_problems(task, upload.name, content):
                self.add_error("file", problem.partition(": ")[2])
        if task is not None:
            for problem in data_file_problems(task, name, data.get("phase"), data.get("description") or "",
                                              keep_pk=self.instance.pk):
                field, _, message = problem.partition(": ")
                self.add_error(field if field in ("name", "phase", "description") else None, message)
        return data


@admin.register(DataFile)
class DataFileAdmin(ProjectAdmin):
    form = DataFileForm
    list_display = ["task", "name", "phase", "size", "uploaded_at", "uploaded_by"]
    list_filter = ["task"]
    search_fields = ["name", "description"]
    readonly_fields = ["sha256", "size", "uploaded_by", "uploaded_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*self.readonly_fields, "task"] if obj else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: DataFile, form: Any, change: bool) -> None:
        obj.name = form.cleaned_data["name"]
        upload = form.cleaned_data.get("file")
        old_sha = obj.sha256 if change else ""
        if upload is not None:
            obj.sha256, obj.size = store_data_content(upload)
            obj.uploaded_by, obj.uploaded_at = request.user, timezone.now()
        super().save_model(request, obj, form, change)
        if old_sha and old_sha != obj.sha256:
            transaction.on_commit(lambda: forget_unused_blob(old_sha))


@admin.register(Profile)
class ProfileAdmin(ProjectAdmin):
    list_display = ["user", "affiliation"]
    search_fields = ["user__username", "affiliation"]


@admin.register(TermsAcceptance)
class TermsAcceptanceAdmin(ProjectAdmin):
    """The record of who accepted which text of a task's terms: read only."""

    list_display = ["accepted_at", "task", "username", "affiliation", "terms_sha256", "ip_address"]
    list_filter = ["task"]
    search_fields = ["username", "affiliation"]
    readonly_fields = ["task", "user", "username", "affiliation", "terms_sha256", "terms", "accepted_at", "ip_address"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# API tokens live in knox's table as digests (tasks.tokens); rest_framework.authtoken stays
# installed only for the migration that hashed its tokens. Its admin page would create clear-text
# tokens that no longer authenticate anyone: hide it.
from rest_framework.authtoken.models import TokenProxy  # noqa: E402

# The admin signs in through the rate-limited view (tasks.views.admin_login); bound before the
# URL configuration reads admin.site.urls, which takes self.login.
admin.site.login = admin_login

if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


# Django's own users and groups take the same parameter checks as the project's models.
class SafeUserAdmin(SafeParametersMixin, UserAdmin):
    pass


class SafeGroupAdmin(SafeParametersMixin, GroupAdmin):
    pass


for _model, _admin in ((User, SafeUserAdmin), (Group, SafeGroupAdmin)):
    if admin.site.is_registered(_model):
        admin.site.unregister(_model)
    admin.site.register(_model, _admin)
