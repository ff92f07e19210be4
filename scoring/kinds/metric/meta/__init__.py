"""Meta-evaluation of submitted metrics against hidden human judgements (seeds 003 and 000).

Framework-free: NumPy, SciPy (imported lazily) and :mod:`scoring.stats`, never Django. A
*metric* is a vector of scores, one per gold response, higher meaning better, aligned with a
:class:`~scoring.kinds.metric.formats.MetricGold` (``load_metric_run`` returns exactly that).
docs/metrics.md has the definitions, the choices and the benchmark figures.

Sufficient statistics. Everything drawn from a context bootstrap is a function of per-context
sums (sacrebleu's design): predictive power of correct and pair counts, Pearson of five
moment sums, within-context correlations of per-context values, system means of per-context,
per-system sums. A resample is a vector of context counts ``w`` (from
:func:`scoring.stats.resample_counts`, the same stream as the dialogue bootstrap), and the
statistic on it is computed exactly from ``w @ per_context_sums``: one count matrix
(B x contexts) serves every metric and every figure. Pooled Kendall and Spearman are the
exception (ranks are not sums), see :func:`evaluate_metrics`.

Modules, one job each; every name below is importable from ``scoring.kinds.metric.meta`` as before
the split:

* :mod:`~scoring.kinds.metric.meta.registry`: the figures reported for every metric, and what each
  interval estimates;
* :mod:`~scoring.kinds.metric.meta.inputs`: the checked score matrix and what the other parts share;
* :mod:`~scoring.kinds.metric.meta.predictive`: predictive power and its per-context counts;
* :mod:`~scoring.kinds.metric.meta.correlations`: correlations with people, within contexts, of
  system means (plain and disattenuated) and pooled;
* :mod:`~scoring.kinds.metric.meta.ranks`: pooled Kendall and Spearman on context resamples (the
  Numba kernel, the one home of the lazily imported numba);
* :mod:`~scoring.kinds.metric.meta.evaluation`: every figure with its bootstrap interval over contexts;
* :mod:`~scoring.kinds.metric.meta.between`: paired tests between metrics, concordance,
  discriminative power.

The names here are re-exports: a test that turns the rank kernel off patches
``scoring.kinds.metric.meta.ranks._pooled_rank_kernel``, where it is read; patching it here would
change nothing, so it is not re-exported.
"""

# MetricGold is re-exported for the benchmarks that read it from here (noqa: not used here).
from scoring.kinds.metric.formats import MetricGold  # noqa: F401
from scoring.kinds.metric.meta.between import (
    ConcordanceResult,
    PairedBootstrapResult,
    concordance_matrix,
    discriminative_power_figures,
    paired_bootstrap,
    paired_t_tests,
    system_matrix,
)
from scoring.kinds.metric.meta.correlations import per_context_values
from scoring.kinds.metric.meta.evaluation import evaluate_metrics, metric_report
from scoring.kinds.metric.meta.inputs import score_matrix
from scoring.kinds.metric.meta.predictive import ContextCounts, context_counts, predictive_power
from scoring.kinds.metric.meta.ranks import pooled_rank_replicates
from scoring.kinds.metric.meta.registry import MEASURES, SYSTEM_INTERVAL_NOTE, MetricMeasure, interval_label

__all__ = [
    "MEASURES",
    "SYSTEM_INTERVAL_NOTE",
    "ConcordanceResult",
    "ContextCounts",
    "MetricMeasure",
    "PairedBootstrapResult",
    "concordance_matrix",
    "context_counts",
    "discriminative_power_figures",
    "evaluate_metrics",
    "interval_label",
    "metric_report",
    "paired_bootstrap",
    "paired_t_tests",
    "per_context_values",
    "pooled_rank_replicates",
    "predictive_power",
    "score_matrix",
    "system_matrix",
]
