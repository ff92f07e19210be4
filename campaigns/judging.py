"""The assessors' pages: their campaigns, and the judging page, one item at a time.

Every answer is one POST, saved in its own transaction before the reply (a closed tab, a lost
connection or a server killed after the reply loses nothing), and idempotent: the same answer sent
twice is one judgement. Plain forms work without JavaScript; ``static/js/judge.js`` adds a key per
label, back, and retries while the connection is down."""

from __future__ import annotations

import time
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Subquery
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from campaigns.access import assessor_of, judging_role
from campaigns.models import DIALOGUES, Assessor, Assignment, Campaign, Judgement
from campaigns.schemes import NUGGET_LABELS, answer_fields, answer_from_form, scales

MAX_SECONDS = 6 * 3600  # a page left open overnight is not six hours of judging


@require_GET
@login_required
def my_campaigns(request: HttpRequest) -> HttpResponse:
    """The campaigns the user judges in (open and closed), with their progress."""
    roles = (Assessor.objects.filter(user=request.user).exclude(campaign__state=Campaign.DRAFT)
             .select_related("campaign", "campaign__task").order_by("-campaign__created_at"))
    rows = [{"assessor": role, "campaign": role.campaign, "assigned": role.assignments.count(),
             "done": role.judgements.count()} for role in roles]
    return render(request, "campaigns/my_campaigns.html", {"rows": rows})


def _queue(assessor: Assessor) -> tuple[list[tuple[int, int]], set[int]]:
    """The assessor's queue as (position, item id) in order, and the items answered: one narrow
    query (the items' texts are read for the one item shown, not for the whole queue)."""
    answered = Judgement.objects.filter(assessor=assessor, item_id=OuterRef("item_id"))
    rows = list(assessor.assignments.order_by("position").annotate(answered=Exists(answered))
                .values_list("position", "item_id", "answered"))
    return [(position, item) for position, item, _ in rows], {item for _, item, done in rows if done}


def _position(request: HttpRequest, slots: list[tuple[int, int]], saved: set[int]) -> int | None:
    """The position asked for (``?at=``), else the first not yet answered; None when all are."""
    raw = request.GET.get("at", "")
    if raw.isdigit() and len(raw) < 10 and any(position == int(raw) for position, _ in slots):
        return int(raw)
    return next((position for position, item in slots if item not in saved), None)


def _fields(campaign: Campaign, item_content: dict[str, Any], chosen: dict[str, Any]) -> list[dict[str, Any]]:
    """The form's questions, each with its options (value, label, meaning, key) and the choice made."""
    fields = []
    for dimension in scales(campaign.dimensions):
        points = dimension.get("points") or {}
        options = [{"value": str(value), "label": str(value), "meaning": points.get(str(value), ""),
                    "key": str(number)} for number, value in enumerate(range(dimension["min"], dimension["max"] + 1),
                                                                       start=1)]
        fields.append({"name": dimension["name"], "title": dimension["name"], "meaning": dimension.get("meaning", ""),
                       "options": options, "chosen": chosen.get(dimension["name"], "")})
    if campaign.kind == DIALOGUES:
        for index, turn in enumerate(item_content.get("turns", [])):
            options = [{"value": label, "label": label, "meaning": meaning, "key": str(number)}
                       for number, (label, meaning) in enumerate(NUGGET_LABELS[turn["sender"]], start=1)]
            fields.append({"name": f"nugget-{index}", "title": f"Turn {index + 1} ({turn['sender']})",
                           "meaning": "", "options": options, "chosen": chosen.get(f"nugget-{index}", ""),
                           "turn": index})
    return fields


def _render_item(request: HttpRequest, assessor: Assessor, slots: list[tuple[int, int]],
                 saved: set[int], position: int, errors: list[str] | None = None,
                 posted: dict[str, Any] | None = None, status: int = 200) -> HttpResponse:
    campaign = assessor.campaign
    index = next(number for number, (at, _) in enumerate(slots) if at == position)
    assignment = assessor.assignments.select_related("item").get(position=position)
    judgement = (Judgement.objects.filter(item_id=assignment.item_id, assessor=assessor).first()
                 if assignment.item_id in saved else None)
    chosen = posted if posted is not None else answer_fields(campaign.kind, judgement.values if judgement else None)
    fields = _fields(campaign, assignment.item.content, chosen)
    turn_fields = {field["turn"]: field for field in fields if "turn" in field}
    turns = [{**turn, "number": number + 1, "field": turn_fields.get(number)}
             for number, turn in enumerate(assignment.item.content.get("turns", []))]
    return render(request, "campaigns/judge.html", {
        "campaign": campaign, "assessor": assessor, "item": assignment.item.content, "turns": turns,
        "scale_fields": [field for field in fields if "turn" not in field], "position": position,
        "number": index + 1, "total": len(slots), "done": len(saved), "saved": judgement is not None,
        "previous": slots[index - 1][0] if index else None,
        "next": slots[index + 1][0] if index + 1 < len(slots) else None,
        "shown": f"{time.time():.3f}", "errors": errors or [], "open": campaign.state == Campaign.OPEN,
        # The header's Judging link: this page knows the answer without the context processor's query.
        **({"judging_open": True} if campaign.state == Campaign.OPEN else {}),
    }, status=status)


@require_GET
@login_required
def judge(request: HttpRequest, campaign_id: int) -> HttpResponse:
    """One item of the assessor's queue with its context, or the end of the queue."""
    assessor = assessor_of(request.user, campaign_id)
    slots, saved = _queue(assessor)
    position = _position(request, slots, saved)
    if position is None:
        return render(request, "campaigns/judge_done.html", {
            "campaign": assessor.campaign, "total": len(slots), "done": len(saved),
            "last": slots[-1][0] if slots else None, "open": assessor.campaign.state == Campaign.OPEN})
    return _render_item(request, assessor, slots, saved, position)


def _seconds(raw: str) -> float | None:
    """Time on the item: from when the page was shown (its ``shown`` field) to now; None if unknown."""
    try:
        shown = float(raw)
    except ValueError:
        return None
    seconds = time.time() - shown
    return round(seconds, 3) if 0 <= seconds <= MAX_SECONDS else None


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


@require_POST
@login_required
def answer(request: HttpRequest, campaign_id: int, position: int) -> HttpResponse:
    """Save one answer (the whole item's) and go on to the next item.

    This is the request every assessor sends for every item, often many at the same moment, so it
    is kept to one read (the assignment with its item, campaign and next position) and one write
    (the INSERT, tried first: a first answer is the usual case) besides the session's two."""
    later = (Assignment.objects.filter(assessor_id=OuterRef("assessor_id"), position__gt=OuterRef("position"))
             .order_by("position").values("position")[:1])
    assignment = (Assignment.objects.select_related("item", "assessor__campaign")
                  .annotate(following=Subquery(later))
                  .filter(assessor__in=judging_role(request.user, campaign_id), position=position).first())
    if assignment is None:
        assessor_of(request.user, campaign_id)  # 404 unless the user judges in this campaign
        return _refuse(request, 404, ["no such item in your queue"])
    assessor = assignment.assessor
    campaign = assessor.campaign
    if campaign.state != Campaign.OPEN:
        return _refuse(request, 409, ["this campaign is closed: answers are no longer taken (those saved are kept)"])
    senders = [turn["sender"] for turn in assignment.item.content.get("turns", [])]
    values, problems = answer_from_form(campaign.kind, campaign.dimensions, request.POST, senders)
    if problems:
        if _wants_json(request):
            return JsonResponse({"saved": False, "errors": problems}, status=400)
        slots, saved = _queue(assessor)
        posted = {key: request.POST.get(key, "") for key in request.POST if key not in ("csrfmiddlewaretoken",)}
        return _render_item(request, assessor, slots, saved, position, problems, posted, status=400)
    _save(assignment, values, _seconds(request.POST.get("shown", "")))
    following = assignment.following
    target = reverse("campaign-judge", args=[campaign.pk]) + (f"?at={following}" if following else "?at=end")
    if _wants_json(request):
        return JsonResponse({"saved": True, "next": target})
    return redirect(target, permanent=False)


def _save(assignment: Assignment, values: dict[str, Any], seconds: float | None) -> None:
    """Store the answer, committed before the reply: a new judgement, or, for an item answered
    before (going back, or a retry of a save whose reply was lost), the one judgement updated."""
    assessor, item = assignment.assessor, assignment.item
    try:
        with transaction.atomic():
            Judgement.objects.create(item=item, assessor=assessor, campaign=assessor.campaign, values=values,
                                     seconds=seconds)
        return
    except IntegrityError:
        pass  # answered before: the unique item-assessor pair holds one judgement
    with transaction.atomic():
        judgement = Judgement.objects.select_for_update().get(item=item, assessor=assessor)
        if judgement.values != values:
            # A changed answer (after going back): the new values, and the time spent on both visits.
            judgement.values = values
            if seconds is not None:
                judgement.seconds = (judgement.seconds or 0.0) + seconds
            judgement.save(update_fields=["values", "seconds", "updated_at"])


def _refuse(request: HttpRequest, status: int, errors: list[str]) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"saved": False, "errors": errors}, status=status)
    return render(request, "campaigns/refused.html", {"errors": errors}, status=status)
