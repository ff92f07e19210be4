"""The organisers' campaign pages: the task's campaigns with the form that makes one, and a
campaign's page (progress, agreement and each assessor's quality, the human ranking of judged
runs, opening and closing, assessors, exports, imports and the gold made from it)."""

from __future__ import annotations

import orjson
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from campaigns import library, results
from campaigns.access import campaign_for_organiser
from campaigns.assignment import assign, close_campaign, open_campaign, progress
from campaigns.building import add_assessors, assessor_users, create_campaign
from campaigns.forms import CampaignForm, _lines
from campaigns.models import KIND_WORDS, Campaign
from campaigns.schemes import dimensions_text
from tasks import access
from tasks.errors import Rejected
from tasks.hooks import accepts_large_files
from tasks.organiser import _get_task_for_organiser


@accepts_large_files(2)
@require_http_methods(["GET", "POST"])
@login_required
def campaign_list(request: HttpRequest, slug: str) -> HttpResponse:
    """The task's campaigns, and the form that makes a new one (a draft: nothing is asked of
    assessors until it is opened)."""
    task = _get_task_for_organiser(request, slug)
    form = CampaignForm(task, request.POST or None, request.FILES or None)
    errors: list[str] = []
    if request.method == "POST" and form.is_valid():
        try:
            campaign = create_campaign(task, form.plan(), request.user)
        except Rejected as rejected:
            errors = rejected.errors
        else:
            access.log_access(request, task, f"created campaign {campaign.pk} ({campaign.kind})")
            messages.success(request, f"Campaign {campaign.name!r} is a draft with {campaign.items.count():,} items: "
                                      "check it, then open it for its assessors.")
            return redirect("campaign-page", campaign_id=campaign.pk)
    campaigns = [{"campaign": campaign, "progress": progress(campaign)}
                 for campaign in Campaign.objects.filter(task=task).order_by("-created_at")]
    status = 400 if request.method == "POST" else 200
    return render(request, "campaigns/list.html", {"task": task, "form": form, "errors": errors,
                                                   "campaigns": campaigns}, status=status)


ACTIONS = ("open", "close", "assessors", "gold", "import")


@accepts_large_files(1)
@require_http_methods(["GET", "POST"])
@login_required
def campaign_page(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """A campaign, live: progress, agreement and quality from the judgements saved so far."""
    campaign = campaign_for_organiser(request.user, campaign_id)
    if request.method == "POST":
        errors = _action(request, campaign)
        if not errors:
            return redirect("campaign-page", campaign_id=campaign.pk)
        for error in errors:
            messages.error(request, error)
        return redirect("campaign-page", campaign_id=campaign.pk)
    campaign.refresh_from_db()
    report = library.agreement(campaign)
    return render(request, "campaigns/campaign.html", {
        "task": campaign.task, "campaign": campaign, "kind_words": KIND_WORDS[campaign.kind],
        "progress": progress(campaign), "report": report, "ranking": results.ranking(campaign),
        "dimensions": campaign.dimensions, "dimensions_text": dimensions_text(campaign.dimensions),
        "gold_versions": results.gold_versions_of(campaign), "n_runs": campaign.runs.count(),
        "checks": campaign.items.filter(is_check=True).count(),
        # A response task's gold holds references: judged responses make a metrics-track gold instead.
        "metrics_only": campaign.kind == "responses" and campaign.task.kind == "response",
    })


def _action(request: HttpRequest, campaign: Campaign) -> list[str]:
    """Carry out one POSTed action; the problems, or [] after saying what was done."""
    action = request.POST.get("action", "").replace("\x00", "")
    task = campaign.task
    try:
        if action == "open":
            made = open_campaign(campaign)
            messages.success(request, f"The campaign is open: {made:,} new assignments.")
        elif action == "close":
            close_campaign(campaign)
            messages.success(request, "The campaign is closed: no more answers are taken.")
        elif action == "assessors":
            users, missing = assessor_users(_lines(request.POST.get("usernames", "")))
            if missing or not users:
                return missing or ["assessors: give at least one user name"]
            added = add_assessors(campaign, users)
            made = open_campaign_assign(campaign) if added else 0
            more = f", {made:,} new assignments" if made else ""
            messages.success(request, f"{len(added)} assessor(s) added{more}.")
        elif action == "gold":
            version = library.build_gold(campaign, request.POST.get("aggregation", "mean"), request.user)
            access.log_access(request, task, f"gold version {version.number} from campaign {campaign.pk}")
            messages.success(request, f"Gold version {version.number} is stored from this campaign's judgements.")
        elif action == "import":
            upload = request.FILES.get("file")
            if upload is None:
                return ["import: choose a judgements file"]
            count = library.import_judgements(campaign, upload.read(), upload.name or "")
            access.log_access(request, task, f"imported {count} judgements into campaign {campaign.pk}")
            messages.success(request, f"{count:,} judgements imported.")
        else:
            return [f"unknown action {action[:40]!r}; one of {', '.join(ACTIONS)}"]
    except Rejected as rejected:
        return rejected.errors
    return []


def open_campaign_assign(campaign: Campaign) -> int:
    """New assessors of an open campaign get work at once; a draft or closed one waits for opening."""
    campaign.refresh_from_db()
    return assign(campaign) if campaign.state == Campaign.OPEN else 0


@require_GET
@login_required
def export(request: HttpRequest, campaign_id: int, fmt: str) -> HttpResponse:
    """The campaign's judgements as a judgements file (JSON) or a table (CSV), check items included
    (marked); organisers only, and written to the access log."""
    campaign = campaign_for_organiser(request.user, campaign_id)
    if fmt not in ("json", "csv"):
        return render(request, "campaigns/refused.html", {"errors": [f"no export {fmt[:20]!r}: json or csv"]},
                      status=404)
    access.log_access(request, campaign.task, f"exported the judgements of campaign {campaign.pk} ({fmt})")
    body, content_type = results.export(campaign, fmt)
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-judgements.{fmt}"'
    return response



@require_GET
@login_required
def metrics_gold(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """The metrics-track gold a responses campaign's judgements make (``?aggregation=mean|z-score``;
    ``?part=provenance`` for what it stands on): a response task keeps references as its gold, so
    these human scores go to a metrics task (``load_gold``) to meta-evaluate metrics against."""
    campaign = campaign_for_organiser(request.user, campaign_id)
    if campaign.kind != "responses":
        return render(request, "campaigns/refused.html", {"errors": [
            "only a responses campaign makes a metrics-track gold; this campaign's gold is made on its page"]},
            status=404)
    try:
        gold, made = library.gold_content(campaign, request.GET.get("aggregation", "mean").replace("\x00", ""))
    except Rejected as rejected:
        return render(request, "campaigns/refused.html", {"errors": rejected.errors}, status=rejected.status)
    # The gold alone, as load_gold takes it; ?part=provenance: what it stands on (alpha, assessors).
    part = "provenance" if request.GET.get("part") == "provenance" else "gold"
    access.log_access(request, campaign.task, f"downloaded the metrics-track {part} of campaign {campaign.pk}")
    response = HttpResponse(orjson.dumps(made if part == "provenance" else gold, option=orjson.OPT_INDENT_2),
                            content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-metrics-{part}.json"'
    return response
