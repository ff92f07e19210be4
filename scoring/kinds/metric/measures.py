"""How the metric kind presents the figures of :data:`scoring.kinds.metric.meta.MEASURES`: titles,
groups and descriptions, the corpus functions that give a figure of any set of contexts from the
per-context statistics, and the value a context without information stores."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from scoring.kinds.base import MeasureSpec
from scoring.kinds.metric import meta
from scoring.kinds.metric.dimensions import Slice
from scoring.kinds.metric.formats import MetricGold

_WITHIN = ("kendall_tau_b_within", "spearman_within", "pearson_within")
_POOLED = ("kendall_tau_b", "spearman", "pearson")
_SYSTEM = ("system_kendall_tau_b", "system_spearman", "system_pearson", "system_pearson_disattenuated")
_PREDICTIVE = ("predictive_power", "predictive_power_ties_half")
# The value a per-item vector holds for a context where the measure is undefined there: what a
# metric with no information gets (chance for predictive power, no association for a correlation).
_NO_INFORMATION = {"predictive_power": 0.5, "predictive_power_ties_half": 0.5,
                   **dict.fromkeys(_WITHIN, 0.0)}


def _titles() -> dict[str, tuple[str, str, str, str]]:
    """key -> (title, short title, group, group title)."""
    fidelity = ("fidelity", "Fidelity: predictive power (Liu, Zhou and Wilson, ACM TOIS 2021)")
    pooled = ("responses", "Correlation with people, responses pooled")
    within = ("within", "Correlation with people within contexts (mean over contexts)")
    system = ("systems", "Correlation with people, system means")
    return {
        "predictive_power": ("Predictive power (a metric tie counts as wrong)", "PP", *fidelity),
        "predictive_power_ties_half": ("Predictive power, tie-aware variant (a metric tie counts half)",
                                       "PP-ties", *fidelity),
        "kendall_tau_b": ("Kendall tau-b with human judgements, responses pooled", "tau-b", *pooled),
        "spearman": ("Spearman correlation with human judgements, responses pooled", "Spearman", *pooled),
        "pearson": ("Pearson correlation with human judgements, responses pooled", "Pearson", *pooled),
        "kendall_tau_b_within": ("Kendall tau-b within contexts, averaged", "tau-b (ctx)", *within),
        "spearman_within": ("Spearman within contexts, averaged", "Spearman (ctx)", *within),
        "pearson_within": ("Pearson within contexts, averaged", "Pearson (ctx)", *within),
        "system_kendall_tau_b": ("Kendall tau-b of system means", "tau-b (sys)", *system),
        "system_spearman": ("Spearman of system means", "Spearman (sys)", *system),
        "system_pearson": ("Pearson of system means", "Pearson (sys)", *system),
        "system_pearson_disattenuated": ("Pearson of system means, corrected for context noise",
                                         "Pearson (sys, corrected)", *system),
    }


def _predictive_power(totals: np.ndarray) -> float:
    """Statistics (correct, ties, pairs): sum correct / sum pairs (NaN without a pair)."""
    correct, _, pairs = totals.tolist()
    return correct / pairs if pairs else math.nan


def _predictive_power_ties_half(totals: np.ndarray) -> float:
    """Statistics (correct, ties, pairs): (sum correct + sum ties / 2) / sum pairs."""
    correct, ties, pairs = totals.tolist()
    return (correct + 0.5 * ties) / pairs if pairs else math.nan


def _defined_mean(totals: np.ndarray) -> float:
    """Statistics (value where defined else 0, defined): mean over the defined contexts."""
    total, defined = totals.tolist()
    return total / defined if defined else math.nan


def _ratio_many(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator elementwise, NaN where the denominator is 0 (as the scalar forms)."""
    return np.divide(numerator, denominator, out=np.full(np.shape(numerator), math.nan), where=denominator != 0)


# The corpus functions vectorised over leading axes ((..., S) -> (...)), for the significance tests.
_CORPUS_MANY = {
    "predictive_power": lambda t: _ratio_many(t[..., 0], t[..., 2]),
    "predictive_power_ties_half": lambda t: _ratio_many(t[..., 0] + 0.5 * t[..., 1], t[..., 2]),
    **dict.fromkeys(_WITHIN, lambda t: _ratio_many(t[..., 0], t[..., 1])),
}

_CORPUS = {"predictive_power": _predictive_power, "predictive_power_ties_half": _predictive_power_ties_half,
           **dict.fromkeys(_WITHIN, _defined_mean)}

_DESCRIPTIONS = {
    "predictive_power": "Over every pair of responses to one context whose human judgements differ: the share "
                        "the metric orders as people do. Per context: its own share (0.5 without such a pair); "
                        "statistics: correct, tied and total pairs.",
    "predictive_power_ties_half": "As predictive power, with a pair the metric scores equal counting half.",
    "kendall_tau_b": "Over all responses of the run together.",
    "spearman": "Over all responses of the run together (Pearson of mid-ranks).",
    "pearson": "Over all responses of the run together.",
    "kendall_tau_b_within": "Per context, averaged over the contexts where it is defined (the metric and the people "
                            "both vary); per context 0 where undefined; statistics: value, defined.",
    "spearman_within": "Per context, averaged over the contexts where it is defined.",
    "pearson_within": "Per context, averaged over the contexts where it is defined.",
    "system_kendall_tau_b": "Between each system's mean metric score and mean human judgement over its responses.",
    "system_spearman": "Between each system's mean metric score and mean human judgement over its responses.",
    "system_pearson": "Between each system's mean metric score and mean human judgement over its responses.",
    "system_pearson_disattenuated": "As the Pearson of system means, with the part of the means' spread and "
                                    "covariance that comes from which contexts were drawn taken out (Spearman's "
                                    "correction for attenuation, the noise estimated from the contexts); it "
                                    "estimates the correlation of the systems' true mean scores. Undefined when a "
                                    "side's system means vary no more than that noise explains.",
}


def measure_specs(gold: MetricGold | None = None) -> list[MeasureSpec]:
    """Every figure as a measure of the task-kind interface, in registry order; without systems in
    ``gold``, the system-level figures are left out."""
    titles = _titles()
    specs = []
    for key, measure in meta.MEASURES.items():
        if key in _SYSTEM and gold is not None and not gold.has_systems:
            continue
        title, short_title, group, group_title = titles[key]
        headline = "corpus" if key in _CORPUS else "run"
        specs.append(MeasureSpec(
            key=key, name=key, title=title, short_title=short_title, higher_is_better=measure.higher_is_better,
            value_range=(measure.low, measure.high), citation=measure.citation, official=measure.official,
            group=group, group_title=group_title, headline=headline, corpus=_CORPUS.get(key),
            corpus_many=_CORPUS_MANY.get(key),
            description=_DESCRIPTIONS[key]))
    return specs


def aggregate_key(measure: str) -> str:
    """The key of the task's aggregate: ``mean_spearman`` (no dot, so no dimension's key)."""
    return f"mean_{measure}"


def sliced_specs(slices: list[Slice], aggregate: str, gold: MetricGold | None = None) -> list[MeasureSpec]:
    """Every figure per slice (key ``<slice>.<measure>``, the slice as the subgroup, as DQ's A/E/S),
    after the task's aggregate, the board's default sort; the aggregate's measure is official on
    every slice, so the default view is the DSTC table (the aggregate beside it per dimension).
    One slice: today's keys and specs."""
    base = measure_specs(gold)
    if len(slices) == 1 and not slices[0].prefix:
        return base
    by_key = {spec.key: spec for spec in base}
    chosen = by_key[aggregate]
    names = sorted({sl.dimension for sl in slices})
    mean = MeasureSpec(
        key=aggregate_key(aggregate), name=aggregate_key(aggregate),
        title=f"Mean over the {len(slices)} dimension slices of the {chosen.title} (the task's aggregate)",
        short_title=f"Mean {chosen.short_title}", higher_is_better=True, value_range=chosen.value_range,
        citation=chosen.citation, official=True, group=chosen.group, group_title=chosen.group_title,
        headline="run",
        description=f"The task's aggregate and the board's default order: the mean over {', '.join(names)} (each "
                    "dimension at each level and in each language counted once) of the figure beside it, over "
                    "the slices where it is defined.")
    specs = [mean]
    # Group by group (the board's tabs), then slice (its column heads), then measure.
    for group in dict.fromkeys(spec.group for spec in base):
        for sl in slices:
            for spec in base:
                if spec.group == group:
                    specs.append(dataclasses.replace(
                        spec, key=f"{sl.prefix}.{spec.key}", subgroup=sl.title, subgroup_title=sl.title,
                        official=spec.key == aggregate, title=f"{spec.title}: {sl.title}"))
    # The aggregate's group first, so that its tab is the board's first.
    return sorted(specs, key=lambda spec: spec.group != chosen.group)
