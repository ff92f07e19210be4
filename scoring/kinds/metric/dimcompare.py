"""Statistics between the metrics of a board when the gold judges several dimensions (issue 39):
the track's comparisons (:func:`scoring.kinds.metric.comparison.compare_metrics`: paired tests of
predictive power with Holm over each table's family, concordance, discriminative power) per
dimension slice, the dimension x metric heat map of the task's aggregate measure with the people's
reference beside the metrics, and the annotators' agreement; and the statistics page's tables
of them (:func:`slice_tables`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from scoring.kinds.metric import meta, session
from scoring.kinds.metric.comparison import compare_metrics, compare_tables
from scoring.kinds.metric.config import MetricConfig, MetricRun
from scoring.kinds.metric.dimensions import Slice
from scoring.kinds.metric.formats import MetricGold
from scoring.kinds.metric.humans import REFERENCE_MEASURES, human_figures
from scoring.kinds.metric.sliced import slice_gold

PEOPLE = "people (one annotator vs the others)"


def slice_runs(runs: Mapping[str, MetricRun], gold: MetricGold,
               chosen: Slice) -> tuple[MetricGold, dict[str, MetricRun]]:
    """The gold of one slice and each run's scores on it (its dimension's column with per-dimension scores)."""
    scored_gold, rows = slice_gold(gold, chosen)
    column = gold.dims.column(chosen) if gold.dims is not None else 0
    return scored_gold, {name: MetricRun(run.scores[rows] if run.scores.ndim == 1 else run.scores[rows, column],
                                         np.arange(scored_gold.n_contexts), run.n_missing)
                                for name, run in runs.items()}


def compare_slices(runs: Mapping[str, MetricRun], gold: MetricGold, config: MetricConfig, slices: list[Slice], *,
                   seed: int, resamples: int) -> dict[str, Any]:
    """Per slice, ``compare_metrics`` on that slice's gold (the random baseline found on the whole
    gold); the aggregate measure of every metric per slice, with the people's reference where the
    measure is a pooled correlation and the gold has judgements; alpha per slice::

        {"metrics": [name, ...], "aggregate": measure key,
         "heat": {"slices": [title, ...], "keys": [slice key, ...], "values": [[x | None per metric]],
                  "people": [x | None per slice] | None, "means": [x | None per metric]},
         "humans": {slice key: human_figures entry}, "slices": [{"key", "title", **compare_metrics}]}
    """
    names = [str(name) for name in runs]
    partial = [name for name, run in zip(names, runs.values(), strict=True) if run.n_missing]
    if partial:
        raise ValueError(f"runs that leave out responses cannot be compared: {', '.join(partial)}")
    named = dict(zip(names, runs.values(), strict=True))
    expected = session.random_scores(gold.n_responses, config.seed)
    random_name = next((name for name, run in named.items()
                        if run.scores.ndim == 1 and np.array_equal(run.scores, expected)), None)
    humans = human_figures(gold.dims, slices, config.agreement_level) if gold.dims is not None else {}
    values: list[list[float | None]] = []
    parts: list[dict[str, Any]] = []
    for chosen in slices:
        scored_gold, scored_runs = slice_runs(named, gold, chosen)
        figures = meta.evaluate_metrics(scored_gold, {name: run.scores for name, run in scored_runs.items()},
                                        n_resamples=1, seed=seed, tie_tolerance=config.tie_tolerance)
        values.append([figures["metrics"][name]["measures"][config.aggregate] for name in names])
        part = compare_metrics(scored_runs, scored_gold, config, seed=seed, resamples=resamples,
                               random_name=random_name)
        parts.append({"key": chosen.prefix, "title": chosen.title, **part})
    people = None
    if humans and config.aggregate in REFERENCE_MEASURES:
        people = [humans[chosen.prefix][config.aggregate] for chosen in slices]
    means = []
    for m in range(len(names)):
        defined = [row[m] for row in values if row[m] is not None]
        means.append(float(np.mean(defined)) if defined else None)
    return {"metrics": names, "aggregate": config.aggregate,
            "heat": {"slices": [chosen.title for chosen in slices], "keys": [chosen.prefix for chosen in slices],
                     "values": values, "people": people, "means": means},
            "humans": humans, "slices": parts}


def human_table(humans: Mapping[str, Any]) -> dict[str, Any]:
    """The annotators' agreement and the human reference line per slice."""
    figures = [f"{key}{end}" for key in ("spearman", "pearson", "kendall_tau_b") for end in ("", "_min", "_max")]
    rows = [[entry["title"], entry["n_annotators"], entry["n_items"], entry["alpha"], *(entry[f] for f in figures)]
            for entry in humans.values()]
    level = next(iter(humans.values()))["alpha_level"] if humans else "interval"
    return {"title": "People: agreement and the human reference line", "shade": False,
            "note": f"Krippendorff's alpha ({level} level) of the annotators' judgements, and the human reference: "
                    "for each annotator, the correlation of their judgements with the mean of the other annotators' "
                    "on the same items (leave one out), averaged over annotators, with the lowest and highest "
                    "annotator beside it (as Tsuta et al. 2023 report them). A metric's pooled correlation near "
                    "the reference agrees with the people about as well as one of them agrees with the rest.",
            "headers": ["dimension", "annotators", "items", "alpha", "Spearman (reference)", "Spearman (lowest)",
                        "Spearman (highest)", "Pearson (reference)", "Pearson (lowest)", "Pearson (highest)",
                        "Kendall tau-b (reference)", "tau-b (lowest)", "tau-b (highest)"],
            "rows": rows}


def slice_tables(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The statistics page's tables: the heat map (dimension x metric), the people, then each
    slice's comparison tables titled with the slice."""
    heat = data["heat"]
    names = list(data["metrics"])
    measure = meta.MEASURES[data["aggregate"]].label
    columns = names + ([PEOPLE] if heat["people"] is not None else [])
    rows = [list(row) + ([heat["people"][i]] if heat["people"] is not None else [])
            for i, row in enumerate(heat["values"])]
    mean_row = list(heat["means"])
    if heat["people"] is not None:
        defined = [value for value in heat["people"] if value is not None]
        mean_row.append(float(np.mean(defined)) if defined else None)
    tables: list[dict[str, Any]] = [{
        "title": f"{measure} per dimension and metric",
        "note": f"Each cell: {measure} between a metric's scores (columns) and the human judgements of one "
                "dimension (rows); the last row is the mean over dimensions, the task's aggregate."
                + (" The last column is the people's own reference line on the same figure: one annotator against "
                   "the mean of the others, averaged over annotators." if heat["people"] is not None else ""),
        "shade": False, "headers": [], "rows": [],
        "heat_map": {"rows": [*heat["slices"], "mean over dimensions"], "columns": columns,
                     "values": [*rows, mean_row], "what": measure}}]
    if data.get("humans"):
        tables.append(human_table(data["humans"]))
    for part in data["slices"]:
        for table in compare_tables(part):
            tables.append({**table, "title": f"{part['title']}: {table['title']}"})
    return tables
