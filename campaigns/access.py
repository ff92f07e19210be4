"""Who may open a campaign's pages: its task's organisers (the campaign page, exports, imports,
gold), and its assessors (the judging page, their own queue only, once the campaign is open).
Everybody else gets the 404 of a campaign that does not exist, so nobody learns which ids exist."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404

from campaigns.models import Assessor, Campaign


def campaign_for_organiser(user: Any, campaign_id: int) -> Campaign:
    """The campaign if the user organises its task (superusers too); 404 otherwise."""
    campaign = Campaign.objects.select_related("task", "gold_version").filter(pk=campaign_id).first()
    if campaign is None or not campaign.task.is_organiser(user):
        raise Http404("no such campaign")
    return campaign


def judging_role(user: Any, campaign_id: int) -> QuerySet[Assessor]:
    """The user's assessor role in a campaign open or closed, as a query (empty for anybody else,
    and for a draft: its items and assignments may still change). The judging page reads it
    whole (``assessor_of``); a save joins it to the assignment it saves, in one statement."""
    if not user.is_authenticated or not user.is_active:
        return Assessor.objects.none()
    return Assessor.objects.filter(campaign_id=campaign_id, user=user).exclude(campaign__state=Campaign.DRAFT)


def assessor_of(user: Any, campaign_id: int) -> Assessor:
    """The user's assessor role (``judging_role``); 404 for anybody else. Organisers are
    assessors only if added."""
    assessor = judging_role(user, campaign_id).select_related("campaign", "campaign__task").first()
    if assessor is None:
        raise Http404("no such campaign")
    return assessor
