"""Who may open a campaign's pages: its task's organisers (the campaign page, exports, imports,
gold), and its assessors (the judging page, their own queue only, once the campaign is open).
Everybody else gets the 404 of a campaign that does not exist, so nobody learns which ids exist."""

from __future__ import annotations

from typing import Any

from django.http import Http404

from campaigns.models import Assessor, Campaign


def campaign_for_organiser(user: Any, campaign_id: int) -> Campaign:
    """The campaign if the user organises its task (superusers too); 404 otherwise."""
    campaign = Campaign.objects.select_related("task", "gold_version").filter(pk=campaign_id).first()
    if campaign is None or not campaign.task.is_organiser(user):
        raise Http404("no such campaign")
    return campaign


def assessor_of(user: Any, campaign_id: int) -> Assessor:
    """The user's assessor role in an open or closed campaign; 404 for anybody else, and for a
    draft (its items and assignments may still change). Organisers are assessors only if added."""
    if not user.is_authenticated or not user.is_active:
        raise Http404("no such campaign")
    assessor = (Assessor.objects.select_related("campaign", "campaign__task")
                .filter(campaign_id=campaign_id, user=user).first())
    if assessor is None or assessor.campaign.state == Campaign.DRAFT:
        raise Http404("no such campaign")
    return assessor
