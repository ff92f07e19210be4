"""A campaign's judgements as the judgements files of JUDGEMENTS-SPEC.md, and what is made of them:
exports (JSON, CSV), imports, the agreement report and the gold version. The numbers and the gold
are the database-free library's (``scoring.judgements``); this module only turns rows into its
JSON list and its answers into rows (one home for alpha and for gold: the library)."""

from __future__ import annotations

from typing import Any

import orjson

from campaigns.models import DIALOGUES, Campaign, Judgement
from campaigns.ranking import ranking  # noqa: F401  (the campaign page's ranking, beside the other results)
from campaigns.schemes import scales
from scoring.exports import csv_text
from tasks.models import GoldVersion


def records(campaign: Campaign, checks: bool = False) -> list[dict[str, Any]]:
    """The campaign's judgements as a judgements file: one object per judgement, by item then
    assessor; check items only when asked (they are no data for agreement or gold)."""
    rows = Judgement.objects.filter(campaign=campaign).select_related("item", "assessor").order_by(
        "item__key", "assessor__code")
    if not checks:
        rows = rows.filter(item__is_check=False)
    return [row.as_record() for row in rows]


def export(campaign: Campaign, fmt: str) -> tuple[bytes, str]:
    """(body, content type): the judgements file (check items marked ``"check": true``) or a CSV
    with one column per dimension (the nugget labels space-separated, in turn order)."""
    rows = Judgement.objects.filter(campaign=campaign).select_related("item", "assessor").order_by(
        "item__key", "assessor__code")
    if fmt == "json":
        found = []
        for row in rows:
            record = row.as_record()
            if row.item.is_check:
                record["check"] = True
            found.append(record)
        return orjson.dumps(found, option=orjson.OPT_INDENT_2) + b"\n", "application/json"
    names = [dimension["name"] for dimension in scales(campaign.dimensions)]
    header = ["item", "assessor", "check", "seconds", *names] + (["nugget"] if campaign.kind == DIALOGUES else [])
    table: list[list[Any]] = [header]
    for row in rows:
        values = row.values.get("quality" if campaign.kind == DIALOGUES else "values") or {}
        line = [row.item.key, row.assessor.code, "yes" if row.item.is_check else "no",
                "" if row.seconds is None else f"{row.seconds:.3f}", *[values.get(name, "") for name in names]]
        if campaign.kind == DIALOGUES:
            line.append(" ".join(row.values.get("nugget") or []))
        table.append(line)
    return csv_text(table).encode(), "text/csv; charset=utf-8"


def gold_versions_of(campaign: Campaign) -> list[GoldVersion]:
    """The gold versions made from this campaign (their provenance names it)."""
    return [version for version in campaign.task.gold_versions.order_by("-number")
            if isinstance(version.provenance, dict) and version.provenance.get("campaign_id") == campaign.pk]
