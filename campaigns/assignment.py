"""Who judges what: k distinct assessors per item, the load balanced, never the same item twice,
never a response of the assessor's own team; each assessor's queue in its own random order.
Opening and closing a campaign live here too (assignment happens when it opens)."""

from __future__ import annotations

import random
from collections import Counter

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from campaigns.models import Assessor, Assignment, Campaign, Item
from tasks.errors import Rejected


def _teams(assessors: list[Assessor]) -> dict[int, set[int]]:
    """Each assessor's teams (an assessor who takes part in the task never judges their own runs)."""
    return {assessor.pk: set(assessor.user.teams.values_list("pk", flat=True)) if assessor.user_id else set()
            for assessor in assessors}


def plan_assignments(campaign: Campaign) -> tuple[list[tuple[int, int]], list[str]]:
    """(assessor id, item id) pairs still to assign, and the items that cannot get k assessors.

    Items are taken in a seeded random order; each goes to the eligible assessors with the fewest
    items so far (ties in a seeded random order), so loads differ by at most one where nobody is
    excluded. Check items go to every assessor (they measure each assessor)."""
    assessors = list(campaign.assessors.select_related("user").order_by("pk"))
    teams = _teams(assessors)
    existing = set(Assignment.objects.filter(assessor__campaign=campaign).values_list("assessor_id", "item_id"))
    load = Counter(assessor for assessor, _ in existing)
    holders: dict[int, set[int]] = {}
    for assessor, item_id in existing:
        holders.setdefault(item_id, set()).add(assessor)
    items = list(campaign.items.order_by("pk"))
    rng = random.Random(campaign.seed)
    rng.shuffle(items)
    pairs: list[tuple[int, int]] = []
    problems = []
    for item in items:
        have = holders.get(item.pk, set())
        eligible = [a for a in assessors if a.pk not in have and not (teams[a.pk] & set(item.team_ids or []))]
        if item.is_check:
            chosen = eligible
        else:
            needed = campaign.per_item - len(have)
            if needed <= 0:
                continue
            rng.shuffle(eligible)
            eligible.sort(key=lambda a: load[a.pk])
            chosen = eligible[:needed]
            if len(chosen) < needed:
                problems.append(f"item {item.key}: {len(have) + len(chosen)} eligible assessor(s), "
                                f"{campaign.per_item} needed")
        for assessor in chosen:
            load[assessor.pk] += 1
            pairs.append((assessor.pk, item.pk))
    return pairs, problems


def assign(campaign: Campaign) -> int:
    """Store the planned assignments, appended to each assessor's queue in their own random order."""
    pairs, problems = plan_assignments(campaign)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise Rejected(problems[:5] + [f"add assessors or lower the judgements per item{more}"], status=409)
    by_assessor: dict[int, list[int]] = {}
    for assessor, item in pairs:
        by_assessor.setdefault(assessor, []).append(item)
    rows = []
    for assessor, items in sorted(by_assessor.items()):
        start = (Assignment.objects.filter(assessor_id=assessor).aggregate(top=Max("position"))["top"] or 0) + 1
        random.Random(f"{campaign.seed}:{assessor}").shuffle(items)
        rows += [Assignment(assessor_id=assessor, item_id=item, position=start + index)
                 for index, item in enumerate(items)]
    Assignment.objects.bulk_create(rows)
    return len(rows)


def open_campaign(campaign: Campaign) -> int:
    """Open a draft or closed campaign: assign what is unassigned, then let assessors judge."""
    with transaction.atomic():
        campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
        if campaign.state == Campaign.OPEN:
            return 0
        if not campaign.assessors.exists():
            raise Rejected(["add assessors before opening the campaign"], status=409)
        made = assign(campaign)
        campaign.state, campaign.opened_at = Campaign.OPEN, campaign.opened_at or timezone.now()
        campaign.save(update_fields=["state", "opened_at"])
    return made


def close_campaign(campaign: Campaign) -> None:
    """Close a campaign: no more answers are taken (those saved stay)."""
    Campaign.objects.filter(pk=campaign.pk).update(state=Campaign.CLOSED, closed_at=timezone.now())


def progress(campaign: Campaign) -> dict[str, object]:
    """Judgements made and needed, overall and per assessor (their pseudonym, never their answers)."""
    needed = Assignment.objects.filter(assessor__campaign=campaign).count()
    done = campaign.judgements.count()
    per_item = Counter(campaign.judgements.filter(item__is_check=False).values_list("item_id", flat=True))
    items = Item.objects.filter(campaign=campaign, is_check=False).count()
    complete = sum(1 for count in per_item.values() if count >= campaign.per_item)
    assigned = Counter(Assignment.objects.filter(assessor__campaign=campaign).values_list("assessor_id", flat=True))
    answered = Counter(campaign.judgements.values_list("assessor_id", flat=True))
    rows = [{"code": assessor.code, "user": assessor.user.username if assessor.user_id else "(imported)",
             "assigned": assigned[assessor.pk], "done": answered[assessor.pk]}
            for assessor in campaign.assessors.select_related("user")]
    return {"needed": needed, "done": done, "items": items, "complete_items": complete,
            "share": done / needed if needed else 0.0, "assessors": rows,
            "complete": items > 0 and complete == items}
