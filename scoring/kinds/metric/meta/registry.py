"""The registry of the figures the metrics track reports for every metric: key, label, range,
citation, and in words what each figure's bootstrap interval estimates (or why the plain Pearson of
system means has none)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricMeasure:
    """A figure the metrics track reports for every submitted metric (all higher is better)."""

    key: str
    label: str
    low: float
    high: float
    official: bool
    aggregation: str
    citation: str
    higher_is_better: bool = True


_SEED003 = "Liu, Zhou and Wilson, ACM TOIS 2021"
MEASURES: dict[str, MetricMeasure] = {
    m.key: m
    for m in (
        MetricMeasure("predictive_power", "Predictive power", 0.0, 1.0, True,
                      "sum of per-context correct / sum of per-context pairs",
                      f"{_SEED003}, Algorithm 3; Liu et al., POSSCORE, CIKM 2021, Algorithm 1"),
        MetricMeasure("predictive_power_ties_half", "Predictive power (metric ties count half)", 0.0, 1.0, False,
                      "(sum correct + sum ties / 2) / sum pairs", f"variant of {_SEED003}, Algorithm 3"),
        MetricMeasure("kendall_tau_b", "Kendall tau-b, responses pooled", -1.0, 1.0, False, "pooled responses",
                      "Kendall, Biometrika 1945 (tau-b)"),
        MetricMeasure("spearman", "Spearman, responses pooled", -1.0, 1.0, False, "pooled responses",
                      "Spearman 1904 (Pearson of mid-ranks)"),
        MetricMeasure("pearson", "Pearson, responses pooled", -1.0, 1.0, False, "pooled responses", "Pearson 1896"),
        MetricMeasure("kendall_tau_b_within", "Kendall tau-b within contexts", -1.0, 1.0, False,
                      "mean over contexts where defined", "Kendall 1945"),
        MetricMeasure("spearman_within", "Spearman within contexts", -1.0, 1.0, False,
                      "mean over contexts where defined", "Spearman 1904"),
        MetricMeasure("pearson_within", "Pearson within contexts", -1.0, 1.0, False,
                      "mean over contexts where defined", "Pearson 1896"),
        MetricMeasure("system_kendall_tau_b", "Kendall tau-b of system means", -1.0, 1.0, False,
                      "system means over all their responses", "Kendall 1945"),
        MetricMeasure("system_spearman", "Spearman of system means", -1.0, 1.0, False,
                      "system means over all their responses", "Spearman 1904"),
        MetricMeasure("system_pearson", "Pearson of system means", -1.0, 1.0, False,
                      "system means over all their responses", "Pearson 1896"),
        MetricMeasure("system_pearson_disattenuated", "Pearson of system means, corrected for context noise",
                      -1.0, 1.0, False,
                      "system means over all their responses; covariances less their context-sampling noise",
                      "Spearman 1904 (correction for attenuation)"),
    )
}
_SYSTEM_KEYS = ("system_kendall_tau_b", "system_spearman", "system_pearson", "system_pearson_disattenuated")
# The system-level figures whose percentile interval over contexts is calibrated in SIGNIFICANCE-SPEC's
# model (benchmarks/system_interval_coverage.py, 300 repetitions, docs/metrics.md): at 30, 60, 100 and 200
# contexts Kendall and Spearman of system means cover 0.97-1.00 for a nominal 0.95, the disattenuated
# Pearson 0.97-1.00 where it is defined (0.93 at 30 contexts counting the 7% where it is not as misses).
# The plain Pearson of system means is pulled away by what the context noise shares (people and metric
# err together on a response), so an interval around it misses the systems' true correlation: percentile
# 0.83-0.93, BCa 0.77-0.92 in the same runs; it is shown without one.
SYSTEM_INTERVAL_NOTE = ("no interval: context noise pulls this figure away from the correlation of the systems' true "
                        "means, so a bootstrap interval around it holds that correlation less often than it claims "
                        "(0.77-0.93 for a nominal 0.95 in a simulation); the corrected Pearson beside it has a "
                        "calibrated one")
# What each interval estimates, in words (the figure recomputed on contexts drawn again).
_INTERVAL_SUBJECTS = {
    "predictive_power": "predictive power",
    "predictive_power_ties_half": "the tie-aware predictive power",
    "kendall_tau_b": "Kendall's tau-b over the pooled responses",
    "spearman": "the Spearman correlation over the pooled responses",
    "pearson": "the Pearson correlation over the pooled responses",
    "kendall_tau_b_within": "the mean within-context Kendall tau-b",
    "spearman_within": "the mean within-context Spearman correlation",
    "pearson_within": "the mean within-context Pearson correlation",
    "system_kendall_tau_b": "the system-level Kendall tau-b",
    "system_spearman": "the system-level Spearman correlation",
    "system_pearson_disattenuated": "the correlation of the systems' true mean scores (Pearson of system means "
                                    "corrected for context noise)",
}


def interval_label(key: str, level: float) -> str:
    """What the interval of figure ``key`` estimates, in words, e.g. "95% interval for the
    system-level Spearman correlation if the contexts were drawn again"."""
    return f"{level:.0%} interval for {_INTERVAL_SUBJECTS[key]} if the contexts were drawn again"
