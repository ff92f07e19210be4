"""Judgements turned into a gold file of the kind they were made for, with its provenance (the
judgements specification, "From judgements to gold").

* stc3: each judged dialogue of the items file with ``annotations``, its judgements' annotation
  objects ordered by assessor id; the distributions are counts, so a gold rebuilt from a gold's
  own annotations scores every run exactly as the original does;
* response: each rated reference's weight = (mean rating - 3) / 2 on the 5-point scale (Galley et
  al. 2015); an unrated reference keeps its weight; an item left with no positive original
  reference is refused with its id;
* metric: each judged response's ``human`` (one dimension: a number, as a one-dimension gold has
  always had; several: ``{dimension: number}``) and, with two assessors or more, ``judgements``
  ``{dimension: [one value per assessor, null where none]}`` in the provenance's assessor order
  (``{"human": [...]}`` for one dimension; the metrics specification, "Dimensions, levels,
  languages"); the mean of the raw values, or of per-assessor z-scores (WMT's Direct Assessment;
  Ji et al. 2022).

Every built gold is validated by its kind's own gold reader before it is returned: what this
module writes, the server accepts. Items with no judgement are left out (stc3, metric) and the
provenance says the gold is incomplete; check items (marked ``"check": true``) never go into a gold.
"""

from __future__ import annotations

import copy
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from scoring.judgements.formats import JudgementSet
from scoring.judgements.report import NUGGET
from scoring.judgements.report import agreement_report as _agreement_report
from scoring.kinds.metric.formats import load_metric_gold
from scoring.kinds.response.formats import load_response_gold
from scoring.kinds.stc3.formats import load_gold as load_stc3_gold
from scoring.validation import ValidationFailed, canonical_id, quoted

AGGREGATIONS: tuple[str, ...] = ("mean", "z-score")
AGGREGATION_WORDS = {
    "mean": "the mean of the assessors' raw judgements",
    "z-score": "the mean of per-assessor standardised scores (each assessor's judgements of a dimension minus "
               "their mean, divided by their standard deviation, population formula; an assessor who gave one "
               "value throughout counts 0), as WMT's Direct Assessment and Ji et al. 2022",
}


def _by_item(judgements: JudgementSet) -> dict[str, list]:
    grouped: dict[str, list] = defaultdict(list)
    for judgement in judgements.judgements:
        grouped[judgement.item].append(judgement)
    for item in grouped:
        grouped[item].sort(key=lambda judgement: judgement.assessor)
    return grouped


def provenance(judgements: JudgementSet, *, campaign: str | None = None, required_per_item: int | None = None,
               aggregation: str | None = None, left_out: Sequence[str] = (), resamples: int = 1000,
               seed: int = 0, report: Mapping | None = None) -> dict:
    """What a gold built from ``judgements`` stands on: the campaign, the scheme (dimensions), the
    assessors, the judgements per item, alpha per dimension, and whether it is complete (every item
    of the items file judged, ``required_per_item`` times when given)."""
    report = report if report is not None else _agreement_report(judgements, resamples=resamples, seed=seed)
    counts = defaultdict(int)
    for judgement in judgements.judgements:
        counts[judgement.item] += 1
    items = judgements.items.ids if judgements.items is not None else list(counts)
    unjudged = [item for item in items if not counts.get(item)]
    short = [item for item in items if required_per_item and 0 < counts.get(item, 0) < required_per_item]
    out = {
        "campaign": campaign,
        "kind": judgements.kind,
        "scheme": [dimension.to_dict() for dimension in judgements.dimensions]
        + ([{"name": NUGGET, "level": "nominal", "unit": "turn"}] if judgements.has_nugget else []),
        "assessors": judgements.assessors(),
        "judgements_per_item": dict(counts),
        "judgements_per_item_summary": {"min": min(counts.values()), "median": statistics.median(counts.values()),
                                        "max": max(counts.values())} if counts else None,
        "alpha": {name: {"alpha": row["alpha"], "level": row["level"], "interval": row["interval"]}
                  for name, row in report["dimensions"].items()},
        "bootstrap": report["bootstrap"],
        "complete": not unjudged and not short and not left_out,
        "items_without_judgements": unjudged,
        "items_with_fewer_judgements": short,
        "required_per_item": required_per_item,
    }
    if left_out:
        out["items_left_out"] = list(left_out)
    if aggregation is not None:
        out["aggregation"] = aggregation
        out["aggregation_words"] = AGGREGATION_WORDS[aggregation]
    return out


def stc3_gold(judgements: JudgementSet, dialogues: list) -> list[dict]:
    """The judged dialogues of ``dialogues`` (the items file, parsed) with their annotations."""
    if judgements.kind != "stc3":
        raise ValueError(f"stc3_gold needs stc3 judgements, not {judgements.kind}")
    grouped = _by_item(judgements.without_checks())
    gold = []
    for dialogue in dialogues:
        item = canonical_id(dialogue.get("id"))
        if item not in grouped:
            continue
        annotations = []
        for judgement in grouped[item]:
            annotation: dict = {}
            if judgement.values:
                annotation["quality"] = dict(judgement.values)
            if judgement.nugget is not None:
                annotation["nugget"] = list(judgement.nugget)
            annotations.append(annotation)
        built = {key: value for key, value in dialogue.items() if key != "annotations"}
        built["annotations"] = annotations
        gold.append(built)
    if not gold:
        raise ValidationFailed(["no dialogue of the items file has a judgement: there is nothing to build a gold from"])
    load_stc3_gold(gold, judgements.config)
    return gold


def reference_gold(judgements: JudgementSet, gold: list) -> list[dict]:
    """The response gold ``gold`` (parsed) with each rated reference's weight (mean - 3) / 2."""
    if judgements.kind != "response":
        raise ValueError(f"reference_gold needs response (reference) judgements, not {judgements.kind}")
    ratings: dict[str, list[float]] = defaultdict(list)
    for judgement in judgements.without_checks().judgements:
        ratings[judgement.item].append(float(judgement.values["rating"]))  # type: ignore[arg-type]
    built = copy.deepcopy(gold)
    problems = []
    for position, entry in enumerate(built):
        item = canonical_id(entry.get("id"))
        for k, reference in enumerate(entry["references"]):
            given = ratings.get(f"{item}#{k}")
            if given:
                reference["weight"] = (sum(given) / len(given) - 3.0) / 2.0
        originals = [reference for reference in entry["references"] if not reference.get("origin")]
        if not any(reference.get("weight", 1) > 0 for reference in originals):
            weights = ", ".join(f"{reference.get('weight', 1):g}" for reference in originals)
            problems.append(f"[{position}] item {quoted(item)}: no original reference keeps a positive weight after "
                            f"the ratings (weights {weights}); deltaBLEU needs one: rate again or add a reference")
    if problems:
        raise ValidationFailed(problems)
    load_response_gold(built)
    return built


def _standardised(judgements: JudgementSet, name: str) -> dict[tuple[str, str], float]:
    """Each (item, assessor) judgement of dimension ``name`` as the assessor's z-score."""
    by_assessor: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for judgement in judgements.judgements:
        by_assessor[judgement.assessor].append((judgement.item, float(judgement.values[name])))  # type: ignore[arg-type]
    out = {}
    for assessor, pairs in by_assessor.items():
        values = np.array([value for _, value in pairs])
        spread = values.std()
        scores = (values - values.mean()) / spread if spread > 0 else np.zeros_like(values)
        for (item, _), score in zip(pairs, scores, strict=True):
            out[item, assessor] = float(score)
    return out


def metric_gold(judgements: JudgementSet, gold: list, aggregation: str = "mean") -> tuple[list[dict], list[str]]:
    """The metrics-track gold ``gold`` (parsed contexts) with each judged response's human scores
    and judgements; unjudged responses are left out, and then contexts with fewer than two
    responses (a context needs a pair). Returns the gold and the ids left out."""
    if judgements.kind != "metric":
        raise ValueError(f"metric_gold needs metric (response) judgements, not {judgements.kind}")
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)}; got {aggregation!r}")
    labelled = [dimension.name for dimension in judgements.dimensions if not dimension.numeric]
    if labelled:
        raise ValidationFailed([f"dimension {quoted(name)} has labels, not numbers: a human score is a mean and "
                                "needs a numeric scale" for name in labelled])
    judgements = judgements.without_checks()
    grouped = _by_item(judgements)
    names = [dimension.name for dimension in judgements.dimensions]
    assessors = judgements.assessors()
    z = {name: _standardised(judgements, name) for name in names} if aggregation == "z-score" else {}
    built, left_out = [], []
    for context in gold:
        responses = []
        for response in context["responses"]:
            rid = canonical_id(response.get("id"))
            found = grouped.get(rid)
            if not found:
                left_out.append(rid)
                continue
            raw = {name: [judgement.values[name] for judgement in found] for name in names}
            by_assessor = {judgement.assessor: judgement for judgement in found}
            if aggregation == "mean":
                means = {name: float(np.mean(raw[name])) for name in names}
            else:
                means = {name: float(np.mean([z[name][rid, judgement.assessor] for judgement in found]))
                         for name in names}
            out = dict(response)
            out["human"] = means[names[0]] if len(names) == 1 else means
            if len(assessors) >= 2:
                # One entry per assessor, in the provenance's order on every response, null where the
                # assessor did not judge it: the metrics track reads each annotator's column (leave-one-out
                # references, alpha). A one-dimension gold's human is a number, which it names "human".
                out["judgements"] = {("human" if len(names) == 1 else name): [
                    by_assessor[who].values[name] if who in by_assessor else None for who in assessors]
                    for name in names}
            responses.append(out)
        if len(responses) >= 2:
            built.append({**context, "responses": responses})
        else:
            left_out.extend(canonical_id(response["id"]) for response in responses)
    if not built:
        raise ValidationFailed(["no context has two judged responses: there is nothing to build a gold from"])
    if len(names) == 1:
        load_metric_gold(built)
    return built, left_out
