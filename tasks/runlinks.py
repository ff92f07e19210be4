"""What a team adds to its own run after the upload (the paper and code links its page shows) and
the run file it downloads back. Who may do either is ``tasks.access``: the run's team (the file
also the task's organisers); anybody else gets the 404 of a run that does not exist."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.validators import URLValidator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from tasks import access
from tasks.models import Run
from tasks.runfiles import download_name, read_run_file

MAX_URL_LENGTH = Run._meta.get_field("paper_url").max_length
# Only web addresses a reader's browser opens as a page: a javascript:, data: or ftp: link on a
# public page would run code or send readers elsewhere than a paper or a repository.
_WEB_URL = URLValidator(schemes=["http", "https"],
                        message="Enter a web address that starts with http:// or https://, such as "
                                "https://github.com/your-team/your-method.")


def WEB_URL(value: str) -> None:  # noqa: N802 - used like Django's validator objects
    """An http(s) address; one without a scheme (``github.com/x``) is told the address it meant."""
    text = value.strip()
    if text and ":" not in text.split("/")[0] and "://" not in text:
        try:
            _WEB_URL("https://" + text)
        except forms.ValidationError:
            pass
        else:
            raise forms.ValidationError(f"Start the address with https:// or http://: did you mean https://{text}?")
    _WEB_URL(text)


class RunLinksForm(forms.ModelForm):
    """The paper and code links of a run; either may be empty."""

    paper_url = forms.CharField(label="Paper", required=False, max_length=MAX_URL_LENGTH, validators=[WEB_URL],
                                help_text="the paper that describes the method (optional)",
                                widget=forms.URLInput(attrs={"placeholder": "https://aclanthology.org/…"}))
    code_url = forms.CharField(label="Code", required=False, max_length=MAX_URL_LENGTH, validators=[WEB_URL],
                               help_text="where the method's code is (optional)",
                               widget=forms.URLInput(attrs={"placeholder": "https://github.com/…"}))

    class Meta:
        model = Run
        fields = ["paper_url", "code_url"]

    def clean_paper_url(self) -> str:
        return self.cleaned_data["paper_url"].strip()

    def clean_code_url(self) -> str:
        return self.cleaned_data["code_url"].strip()


@require_POST
@login_required
def run_links(request: HttpRequest, run_id: int) -> HttpResponse:
    """A member of the run's team sets or clears its paper and code links. Organisers may read the
    run but not speak for its team: they get the same 404 as anybody else."""
    run, reader = access.read_run_page(request.user, run_id)
    if not access.is_member(reader, run):
        raise Http404("no such run")
    form = RunLinksForm(request.POST, instance=run)
    if not form.is_valid():
        return render(request, "tasks/run_links.html", {"run": run, "form": form}, status=400)
    Run.objects.filter(pk=run.pk).update(paper_url=form.cleaned_data["paper_url"],
                                         code_url=form.cleaned_data["code_url"])
    # No board_changed: boards do not show the links (a run page reads them afresh), and a board
    # change would queue its statistics again for nothing.
    messages.success(request, "The run's links were saved." if any(form.cleaned_data.values())
                     else "The run's links were removed.")
    return redirect("run-page", run_id=run.pk)


@require_GET
@login_required
@never_cache  # no-store: a team's run file must not stay in a shared browser's or proxy's cache
def run_file(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run file as uploaded, byte for byte, to the run's team and the task's organisers, as an
    attachment (a browser saves it, never renders it), logged for organisers like runs.zip."""
    run, reader = access.read_run_page(request.user, run_id)
    if reader.role != access.OWN:
        raise Http404("no such run")
    try:
        content = read_run_file(run)
    except FileNotFoundError:
        raise Http404("the run's file is missing from the server's store; ask the organisers") from None
    if not access.is_member(reader, run):
        access.log_access(request, run.task, f"run file of run #{run.pk} ({run.label[:100]})")
    response = HttpResponse(content, content_type="application/octet-stream")
    # ASCII only: the header is Latin-1, and a team or run name in another script would not fit.
    name = download_name(f"{run.task.slug}-run{run.pk}-{run.name}", 150)
    name = "".join(char if char.isascii() else "_" for char in name)
    response["Content-Disposition"] = f'attachment; filename="{name}.json"'
    response["X-Content-Type-Options"] = "nosniff"
    return response
