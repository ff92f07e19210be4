"""The campaign's side of the judgements library (``scoring.judgements``, database-free): its rows
as the library's judgements, items and dimensions; the agreement report; a gold version made from
the judgements with its provenance; a judgements file imported. The library owns every number and
every rule of the files; nothing here computes alpha or builds gold itself."""

from __future__ import annotations

from typing import Any

import orjson
from django.db import transaction

from campaigns.building import gold_source
from campaigns.models import DIALOGUES, REFERENCES, RESPONSES, Assessor, Campaign, Item, Judgement
from campaigns.results import records
from campaigns.schemes import scales
from scoring.judgements.formats import Dimension, Items, JudgementSet, load_dimensions, load_judgements
from scoring.judgements.gold import metric_gold, provenance, reference_gold, stc3_gold
from scoring.judgements.report import agreement_report, load_checks
from scoring.judgements.tables import csv_lines, records_from_csv
from scoring.validation import ValidationFailed, parse_json
from tasks.errors import Rejected
from tasks.models import GoldVersion
from tasks.organising import load_gold_version

# The library's kinds: STC-3 annotations, reference ratings (the response kind's deltaBLEU
# weights) and responses on dimensions (the metrics track's human scores).
LIBRARY_KIND = {DIALOGUES: "stc3", REFERENCES: "response", RESPONSES: "metric"}
RESAMPLES = 1000  # R of alpha's bootstrap interval; the seed is the campaign's


def dimensions(campaign: Campaign) -> tuple[Dimension, ...] | None:
    """The organiser's dimensions of a responses campaign, as the library reads a dimensions file."""
    if campaign.kind != RESPONSES:
        return None
    found = []
    for dimension in scales(campaign.dimensions):
        points = range(dimension["min"], dimension["max"] + 1)
        meanings = [(dimension.get("points") or {}).get(str(value), "") for value in points]
        found.append({"name": dimension["name"], "scale": list(points), "level": dimension["level"],
                      **({"meanings": meanings} if all(meanings) else {})})
    return load_dimensions(found)


def items(campaign: Campaign, checks: bool = True, expand: bool = False) -> Items:
    """What the campaign's judgements may name (check items only when asked); ``expand``: a pooled
    response of a metrics-track gold as each of the gold's response ids it stands for."""
    kind = LIBRARY_KIND[campaign.kind]
    rows = Item.objects.filter(campaign=campaign).order_by("pk")
    if not checks:
        rows = rows.filter(is_check=False)
    ids: list[str] = []
    senders: dict[str, tuple[str, ...]] = {}
    references: dict[str, tuple[str, int]] = {}
    for item in rows:
        if expand and item.sources.get("responses"):
            ids += item.sources["responses"]
            continue
        ids.append(item.key)
        if campaign.kind == DIALOGUES:
            senders[item.key] = tuple(turn["sender"] for turn in item.content.get("turns", []))
        if campaign.kind == REFERENCES and not item.is_check:
            references[item.key] = (item.sources["item"], item.sources["reference"])
    return Items(kind=kind, ids=ids, senders=senders, references=references)


def _config(campaign: Campaign) -> dict[str, Any]:
    return {"config": campaign.task.kind_config} if campaign.kind == DIALOGUES else {}


def judgement_set(campaign: Campaign, data: list[dict[str, Any]] | None = None, checks: bool = True,
                  expand: bool = False) -> JudgementSet:
    """The campaign's judgements (or ``data``, a judgements file) validated by the library."""
    if data is None:
        data = records(campaign, checks=checks)
        if expand:
            data = _expanded(campaign, data)
    return load_judgements(data, LIBRARY_KIND[campaign.kind], items(campaign, checks=checks, expand=expand),
                           dimensions(campaign), **_config(campaign))


def _expanded(campaign: Campaign, data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each judgement of a pooled metrics-track response once per response id it stands for."""
    pooled = {item.key: item.sources["responses"] for item in campaign.items.filter(is_check=False)
              if len(item.sources.get("responses") or []) > 1}
    return [{**record, "item": response} for record in data for response in pooled.get(record["item"],
                                                                                        [record["item"]])]


def _checks(campaign: Campaign, judgements: JudgementSet) -> dict[str, Any]:
    answers = {item.key: item.check_answer for item in campaign.items.filter(is_check=True)
               if item.check_answer and any(judgement.item == item.key for judgement in judgements.judgements)}
    return load_checks(answers, judgements) if answers else {}


def agreement(campaign: Campaign) -> dict[str, Any] | None:
    """The agreement report of the judgements saved so far (None before the first), shaped for the
    campaign page: alpha per dimension with its interval, each assessor's quality."""
    if not campaign.judgements.exists():
        return None
    judgements = judgement_set(campaign)
    report = agreement_report(judgements, resamples=RESAMPLES, seed=campaign.seed,
                              checks=_checks(campaign, judgements))
    names = list(report["dimensions"])
    rows = [{"name": name, **row} for name, row in report["dimensions"].items()]
    people = {assessor.code: assessor for assessor in campaign.assessors.select_related("user")}
    assigned = {code: people[code].assignments.count() for code in people}
    assessors = []
    for code, row in sorted(report["assessors"].items()):
        scale_shares = [share for name, share in row["straight_lining"].items() if name != "nugget"]
        assessor = people.get(code)
        assessors.append({
            "code": code, "user": assessor.user.username if assessor and assessor.user_id else "(imported)",
            "done": row["n_judgements"], "assigned": assigned.get(code, 0),
            "agreement": [{"name": name, "value": (row["agreement"].get(name) or {}).get("value")} for name in names],
            "seconds": row["median_seconds"], "straight": max(scale_shares) if scale_shares else None,
            "checks": row["check_accuracy"]})
    undefined = "; ".join(f"{row['name']}: {row['note']}" for row in rows
                          if row["alpha"] is None and row.get("note"))
    return {"dimensions": rows, "names": names, "assessors": assessors, "undefined": undefined,
            "resamples": report["bootstrap"]["resamples"], "seed": report["bootstrap"]["seed"], "raw": report}


AGGREGATIONS = ("mean", "z-score")


def gold_content(campaign: Campaign, aggregation: str = "mean") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(gold file, provenance) from the campaign's judgements (check items left out); Rejected
    with the library's problems when no gold can be made from them."""
    if aggregation not in AGGREGATIONS:
        raise Rejected([f"aggregation: one of {', '.join(AGGREGATIONS)}, not {aggregation[:20]!r}"])
    pooled_metric = campaign.kind == RESPONSES and campaign.task.kind == "metric"
    if not campaign.judgements.filter(item__is_check=False).exists():
        raise Rejected(["no judgement yet: there is nothing to make a gold from"], status=409)
    judgements = judgement_set(campaign, checks=False, expand=pooled_metric)
    report = agreement_report(judgements, resamples=RESAMPLES, seed=campaign.seed)
    left_out: list[str] = []
    try:
        if campaign.kind == DIALOGUES:
            dialogues = [{"id": item.key, "turns": item.sources["turns"]}
                         for item in campaign.items.filter(is_check=False).order_by("pk")]
            gold = stc3_gold(judgements, dialogues)
        elif campaign.kind == REFERENCES:
            gold = reference_gold(judgements, gold_source(campaign.gold_version))
        elif pooled_metric:
            gold, left_out = metric_gold(judgements, gold_source(campaign.gold_version), aggregation)
        else:
            gold, left_out = metric_gold(judgements, contexts_of(campaign), aggregation)
    except ValidationFailed as failed:
        raise Rejected(failed.errors, status=409) from None
    made = provenance(judgements, campaign=f"{campaign.name} (campaign {campaign.pk} of task {campaign.task.slug})",
                      required_per_item=campaign.per_item, left_out=left_out, resamples=RESAMPLES, seed=campaign.seed,
                      report=report, aggregation=aggregation if campaign.kind == RESPONSES else None)
    return gold, {**made, "campaign_id": campaign.pk}


def contexts_of(campaign: Campaign) -> list[dict[str, Any]]:
    """A responses campaign of a response task as a metrics track's contexts: each gold item with
    its context and the pooled responses judged (no run names: the metrics track's gold is for
    meta-evaluating metrics, which need none)."""
    contexts: dict[str, dict[str, Any]] = {}
    for item in campaign.items.filter(is_check=False).order_by("pk"):
        context = contexts.setdefault(item.sources["item"], {"id": item.sources["item"],
                                                             "context": item.content.get("context", []),
                                                             "responses": []})
        context["responses"].append({"id": item.key, "text": item.content["text"]})
    return list(contexts.values())


def build_gold(campaign: Campaign, aggregation: str, user: Any) -> GoldVersion:
    """The campaign's judgements as the task's next gold version, with their provenance (a
    responses campaign of a response task makes a metrics-track gold: ``metrics_gold_file``)."""
    if campaign.kind == RESPONSES and campaign.task.kind == "response":
        raise Rejected(["a response task's gold holds references, not judged responses: download the metrics-track "
                        "gold these judgements make (below) and load it into a metrics task"], status=409)
    gold, made = gold_content(campaign, aggregation)
    label = f"from campaign {campaign.name}"[:100]
    try:
        return load_gold_version(campaign.task, orjson.dumps(gold), f"campaign-{campaign.pk}-gold.json", user,
                                 label=label, provenance=made)
    except Rejected as rejected:
        raise Rejected([f"the gold made from the judgements was refused: {error}" for error in rejected.errors],
                       status=409) from None


def import_judgements(campaign: Campaign, content: bytes, name: str = "") -> int:
    """Store a judgements file's judgements (a crowdsourcing platform's output, JSON or a CSV table
    as the export writes it) after the library has validated all of it: every problem with its
    JSON path (a CSV table's with its line), nothing stored on any."""
    table = name.lower().endswith(".csv") or content.lstrip()[:1] not in (b"[", b"{", b"")
    try:
        if table:
            data = records_from_csv(content, LIBRARY_KIND[campaign.kind], dimensions(campaign),
                                    **_config(campaign))
        else:
            data = parse_json(content, "judgements file")
        judgements = judgement_set(campaign, data)
    except ValidationFailed as failed:
        raise Rejected(csv_lines(failed.errors, content) if table else failed.errors) from None
    taken = set(Judgement.objects.filter(campaign=campaign).values_list("item__key", "assessor__code"))
    clashes = [f"[{index}]: assessor {judgement.assessor!r} already judged item {judgement.item!r} in this campaign"
               for index, judgement in enumerate(judgements.judgements)
               if (judgement.item, judgement.assessor) in taken]
    if clashes:
        raise Rejected(clashes[:50] + ([f"... and {len(clashes) - 50} more"] if len(clashes) > 50 else []))
    rows = {item.key: item for item in campaign.items.all()}
    with transaction.atomic():
        people = {assessor.code: assessor for assessor in campaign.assessors.all()}
        for judgement in judgements.judgements:
            if judgement.assessor not in people:
                people[judgement.assessor] = Assessor.objects.create(campaign=campaign, code=judgement.assessor)
        Judgement.objects.bulk_create([Judgement(
            campaign=campaign, item=rows[judgement.item], assessor=people[judgement.assessor], imported=True,
            seconds=judgement.seconds, values=_stored(campaign, entry))
            for judgement, entry in zip(judgements.judgements, data, strict=True)])
    return len(judgements.judgements)


def _stored(campaign: Campaign, entry: dict[str, Any]) -> dict[str, Any]:
    """A validated judgements-file entry as a judgement row's values (the file's own shape)."""
    if campaign.kind == DIALOGUES:
        return {key: entry[key] for key in ("quality", "nugget") if entry.get(key) is not None}
    return {"values": entry["values"]}
