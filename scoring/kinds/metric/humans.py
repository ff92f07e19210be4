"""People beside the metrics (METRICS-SPEC.md, "Dimensions, levels, languages"; issue 39, item 4):
per dimension slice, how well the annotators agree (Krippendorff's alpha) and the human reference
line, how well one annotator's judgements correlate with the mean of the others'.

The reference is leave-one-out: for each annotator a, over the items a judged and at least one
other annotator judged, the correlation of a's judgements with the mean of the others' on the same
item; the line is the mean over annotators (Tsuta et al. 2023 report the minimum and maximum of
the same per-annotator figures, given beside it). It is the pooled item-level correlation, the
figure a metric's ``spearman`` (``pearson``, ``kendall_tau_b``) is read against: a metric near the
line agrees with the people about as well as one of them agrees with the rest.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from scoring.kinds.metric.dimensions import DimensionData, Slice

REFERENCE_MEASURES = ("kendall_tau_b", "spearman", "pearson")


def agreement(judgements: np.ndarray, level: str) -> float | None:
    """Krippendorff's alpha of an items x annotators matrix (NaN: no judgement) at ``level``
    (``interval``, ``ordinal`` or ``nominal``); None when not computable. The one call of the
    project's alpha (``scoring.judgements.alpha``) from the metrics track."""
    try:
        from scoring.judgements.alpha import krippendorff_alpha
    except ModuleNotFoundError:  # the judgements package is merged separately (issue 39's note)
        return None
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
