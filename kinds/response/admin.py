"""The admin of the response kind's records: vBLEU pools (an upload becomes a background job) and
the pool jobs, read only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from kinds.response import views
from kinds.response.models import PoolJob, ReferencePool
from tasks.admin import ProjectAdmin


class PoolUploadForm(forms.ModelForm):
    file = forms.FileField(help_text="JSONL, one {\"utterance\": ..., \"response\": ...} object a line, up to "
                                     "1,000,000 lines; read in the background (its page shows the progress and "
                                     "names every bad line) and stored once by its checksum")

    class Meta:
        model = ReferencePool
        fields = ["name"]


@admin.register(ReferencePool)
class ReferencePoolAdmin(ProjectAdmin):
    """vBLEU pools: an upload becomes a background job that validates it line by line (every bad
    line named on the job's page, nothing stored on failure) and stores it once by checksum."""

    large_files = 1  # its add page takes a pool (tasks.hooks.large_files_of)
    list_display = ["sha256", "name", "n_pairs", "size", "created_at", "created_by"]
    readonly_fields = ["sha256", "n_pairs", "size", "created_by", "created_at"]

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = PoolUploadForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["name", "file"] if obj is None else super().get_fields(request, obj)

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: Any = None) -> HttpResponse:
        if request.method == "POST" and self.has_add_permission(request):
            form = PoolUploadForm(request.POST, request.FILES)
            if form.is_valid():
                upload = form.cleaned_data["file"]
                return views.admin_upload(request, upload, form.cleaned_data.get("name") or upload.name)
        return super().add_view(request, form_url, extra_context)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # gold versions' provenance names pools by checksum


@admin.register(PoolJob)
class PoolJobAdmin(ProjectAdmin):
    """Pool jobs, read-only: their pages (``view on site``) follow the progress."""

    list_display = ["pk", "task", "status", "stage", "upload_name", "pool", "version", "attempts", "created_by",
                    "created_at", "finished_at"]
    list_filter = ["status"]

    def view_on_site(self, obj: PoolJob) -> str:
        return reverse("pool-job", args=[obj.pk])

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
