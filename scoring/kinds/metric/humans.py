"""People beside the metrics (METRICS-SPEC.md, "Dimensions, levels, languages"; issue 39, item 4):
per dimension slice, how well the annotators agree (Krippendorff's alpha) and the human reference
line, how well one annotator's judgements correlate with the mean of the others'.

The reference is leave-one-out: for each annotator a (slot a of the items' judgement lists: one
annotator when every item lists the same annotators in one order, else the a-th judgement of
each item), over the items a judged and at least one other annotator judged, the correlation of
a's judgements with the mean of the others' on the same item; the line is the mean over
annotators (Tsuta et al. 2023 report the minimum and maximum of the same per-annotator figures,
given beside it). It is the pooled item-level correlation, the
figure a metric's ``spearman`` (``pearson``, ``kendall_tau_b``) is read against: a metric near the
line agrees with the people about as well as one of them agrees with the rest.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from scoring.kinds.metric.dimensions import DimensionData, Slice, language_name

REFERENCE_MEASURES = ("kendall_tau_b", "spearman", "pearson")


def agreement(judgements: np.ndarray, level: str) -> float | None:
    """Krippendorff's alpha of an items x annotators matrix (NaN: no judgement) at ``level``
    (``interval``, ``ordinal`` or ``nominal``); None when not computable. The one call of the
    project's alpha (``scoring.judgements.alpha``) from the metrics track."""
    from scoring.judgements.alpha import krippendorff_alpha

    units = [row[~np.isnan(row)].tolist() for row in judgements]
    return krippendorff_alpha(units, level)


def leave_one_out(judgements: np.ndarray) -> dict[str, Any]:
    """The human reference of an items x annotators matrix (NaN: no judgement): per measure the
    mean over annotators of the correlation between one annotator and the mean of the others,
    with its minimum and maximum; None where no annotator's correlation is defined."""
    from scipy import stats

    n_annotators = judgements.shape[1]
    per_annotator: dict[str, list[float]] = {key: [] for key in REFERENCE_MEASURES}
    judged = ~np.isnan(judgements)
    for a in range(n_annotators):
        others = np.delete(judgements, a, axis=1)
        counted = np.delete(judged, a, axis=1).sum(axis=1)
        rows = judged[:, a] & (counted > 0)
        if rows.sum() < 2:
            continue
        own = judgements[rows, a]
        rest = np.nansum(others[rows], axis=1) / counted[rows]
        if np.all(own == own[0]) or np.all(rest == rest[0]):
            continue  # a constant side: no correlation is defined
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            figures = {"kendall_tau_b": stats.kendalltau(own, rest).statistic,
                       "spearman": stats.spearmanr(own, rest).statistic,
                       "pearson": stats.pearsonr(own, rest).statistic}
        for key, value in figures.items():
            if np.isfinite(value):
                per_annotator[key].append(float(value))
    result: dict[str, Any] = {"n_annotators": n_annotators}
    for key, values in per_annotator.items():
        result[key] = float(np.mean(values)) if values else None
        result[f"{key}_min"] = min(values) if values else None
        result[f"{key}_max"] = max(values) if values else None
    return result


def human_figures(dims: DimensionData, slices: list[Slice], level: str) -> dict[str, dict[str, Any]]:
    """Per slice (by its title): alpha and the leave-one-out reference; empty without judgements."""
    if dims.judgements is None:
        return {}
    figures = {}
    for chosen in slices:
        rows = dims.slice_rows(chosen)
        matrix = dims.judgements[rows, dims.column(chosen)]
        matrix = matrix[:, ~np.all(np.isnan(matrix), axis=0)]  # annotator slots no item of this slice uses
        figures[chosen.prefix or chosen.dimension] = {
            "dimension": chosen.dimension, "title": chosen.title, "alpha": agreement(matrix, level),
            "alpha_level": level, "n_items": int(rows.size), **leave_one_out(matrix)}
    return figures


def describe_dimensions(description: dict[str, Any], config: Any, slices: list[Slice]) -> dict[str, Any]:
    """The run format's description for a task of several dimensions: the ``scores`` object when
    the task takes one score per dimension, and what the board ranks by."""
    from scoring.kinds.metric.meta.registry import MEASURES

    by_level: dict[str, list[str]] = {}
    for name, level in config.dimensions:
        by_level.setdefault(level, []).append(name)
    judged = "; ".join(f"{level}-level items: {', '.join(names)}" for level, names in by_level.items())
    measure = MEASURES[config.aggregate].label
    notes = [f"The human judgements have several dimensions ({judged})"
             + (f", in {', '.join(map(language_name, config.languages))}" if config.languages else "")
             + f"; every figure is computed per dimension{', level' if len(by_level) > 1 else ''}"
             + (" and language" if len(config.languages) > 1 else "") + f" ({len(slices)} in all).",
             f"The board's default order is the task's aggregate: the mean over those {len(slices)} of the figure "
             f"\"{measure}\"."]
    if config.run_scores == "per-dimension":
        first = next(iter(by_level.values()))
        description = {**description,
                       "summary": "A JSON list with one entry per item (a turn, or a whole dialogue for dialogue-level "
                                  "items) of the test data: your metric's score on each of the item's dimensions, "
                                  "higher meaning better. Every item is scored, once.",
                       "fields": [description["fields"][0],
                                  {"path": "[i].scores.<dimension>", "type": "number",
                                   "meaning": "a finite number per dimension of the item's level, higher = better"}],
                       "example": {"id": "<response id>", "scores": dict.fromkeys(first, 0.73)}}
    else:
        notes.append("One score per item is held against every dimension of its level.")
    return {**description, "notes": notes + list(description["notes"][:1]) + list(description["notes"][2:])}
