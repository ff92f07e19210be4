"""The metrics track: participants submit an evaluation metric's scores; the server judges the metric.

Framework-free maths (NumPy, SciPy, :mod:`scoring.stats`), never Django; docs/metrics.md has
the definitions and choices. Modules:

* :mod:`scoring.kinds.metric.formats`: gold and run files, validated and compiled to arrays;
* :mod:`scoring.kinds.metric.meta`: predictive power and its per-context counts, correlations with
  people, bootstrap intervals over contexts, paired tests between metrics, concordance,
  discriminative power (a package, one module a part: its docstring lists them);
* :mod:`scoring.kinds.metric.session`: session measures of seed 003 section 3.3 and the random metric.
"""

from scoring.kinds.metric.formats import MetricGold, load_metric_gold, load_metric_run
from scoring.kinds.metric.meta import (
    MEASURES,
    ContextCounts,
    concordance_matrix,
    context_counts,
    discriminative_power_figures,
    evaluate_metrics,
    paired_bootstrap,
    paired_t_tests,
    predictive_power,
)
from scoring.kinds.metric.session import SESSION_MEASURES, random_scores, session_scores
from scoring.validation import ValidationFailed

__all__ = [
    "MEASURES",
    "SESSION_MEASURES",
    "ContextCounts",
    "MetricGold",
    "ValidationFailed",
    "concordance_matrix",
    "context_counts",
    "discriminative_power_figures",
    "evaluate_metrics",
    "load_metric_gold",
    "load_metric_run",
    "paired_bootstrap",
    "paired_t_tests",
    "predictive_power",
    "random_scores",
    "session_scores",
]
