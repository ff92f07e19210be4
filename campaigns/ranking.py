"""The official human ranking of the runs a responses campaign judged: each run's mean per
dimension over the items every judged run answered, with the server's bootstrap intervals and
randomised Tukey HSD (``scoring.stats``, as every board's statistics; SIGNIFICANCE-SPEC.md). The
matrix is items x runs of per-item means of the judgements of the (pooled) response each run gave;
a response several runs gave counts, with the same judgements, for each of them."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from campaigns.models import RESPONSES, Campaign
from campaigns.schemes import scales
from scoring.stats import SIGNIFICANCE_LEVEL, bootstrap_confidence_intervals, randomised_tukey_hsd


def item_means(campaign: Campaign) -> dict[str, dict[int, float]]:
    """Per dimension, the mean of each judged item's judgements (check items left out)."""
    sums: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for item_id, values in campaign.judgements.filter(item__is_check=False).values_list("item_id", "values"):
        for name, value in (values.get("values") or {}).items():
            sums[name][item_id].append(float(value))
    return {name: {item: sum(found) / len(found) for item, found in per_item.items()}
            for name, per_item in sums.items()}


def run_matrix(campaign: Campaign, means: dict[int, float]) -> tuple[np.ndarray, list[str], int]:
    """(items x runs matrix, the gold item ids of its rows, items left out because some run's
    response to them has no judgement yet)."""
    runs = list(campaign.runs.order_by("pk").values_list("pk", flat=True))
    cells: dict[str, dict[int, float]] = defaultdict(dict)
    for item_id, sources in campaign.items.filter(is_check=False).values_list("pk", "sources"):
        if item_id not in means:
            continue
        for run in sources.get("runs", []):
            cells[sources["item"]][run] = means[item_id]
    items = sorted(cells)
    full = [item for item in items if all(run in cells[item] for run in runs)]
    matrix = np.array([[cells[item][run] for run in runs] for item in full], dtype=float).reshape(len(full), len(runs))
    return matrix, full, len(items) - len(full)


def ranking(campaign: Campaign) -> dict[str, Any] | None:
    """Per dimension: each run (best first) with its mean, interval and whether it is in the top
    group; pairs with p-values. None for a campaign that judges no runs."""
    if campaign.kind != RESPONSES or campaign.task.kind != "response":
        return None
    runs = list(campaign.runs.select_related("team").order_by("pk"))
    if len(runs) < 1:
        return None
    task = campaign.task
    all_means = item_means(campaign)
    tables = []
    for dimension in scales(campaign.dimensions):
        matrix, items, left_out = run_matrix(campaign, all_means.get(dimension["name"], {}))
        table: dict[str, Any] = {"dimension": dimension["name"], "n_items": len(items), "left_out": left_out,
                                 "rows": [], "pairs": []}
        if len(items) >= 2:
            intervals = bootstrap_confidence_intervals(matrix, n_resamples=task.permutations, seed=task.statistics_seed)
            top: set[int] = set(range(len(runs)))
            if len(runs) >= 2:
                tukey = randomised_tukey_hsd({dimension["name"]: matrix}, n_permutations=task.permutations,
                                             seed=task.statistics_seed)[dimension["name"]]
                top = set(tukey.top_group(SIGNIFICANCE_LEVEL, lower_is_better=False))
                table["pairs"] = [{"a": runs[i].label, "b": runs[j].label, "difference": difference, "p": p}
                                  for i, j, difference, p in tukey.pairs()]
            order = sorted(range(len(runs)), key=lambda j: -intervals.means[j])
            table["rows"] = [{"run": runs[j], "mean": float(intervals.means[j]), "lower": float(intervals.lower[j]),
                              "upper": float(intervals.upper[j]), "top": j in top} for j in order]
        tables.append(table)
    return {"tables": tables, "permutations": task.permutations, "seed": task.statistics_seed,
            "level": SIGNIFICANCE_LEVEL, "runs": len(runs)}
