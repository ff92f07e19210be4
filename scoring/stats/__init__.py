"""Significance tests and meta-evaluation of runs over a dialogue-by-run score matrix.

Framework-free: imports NumPy (and SciPy lazily, for Kendall's tau), never Django. Numba is
used when it can be imported and NumPy otherwise; both give the same p-values for the same
seed, because the permutations come from one counter-based stream
(:mod:`scoring.stats.stream`), not from a library's generator.

Input convention: a score matrix is a float64 array of shape ``(n_dialogues, k_runs)``;
entry ``[d, j]`` is run ``j``'s score on dialogue ``d`` for one measure. All measures of the
project are distances (lower is better); functions where "best" matters take
``lower_is_better``. ``SIGNIFICANCE_LEVEL`` is the one significance level of the project (top
groups, significance marks); ``REPORTED_LEVELS`` the levels meta-evaluation reports.

What is computed (docs/statistics.md has the full write-up and the benchmark figures):

* ``randomised_tukey_hsd``: the randomised Tukey HSD test (Carterette, "Multiple testing in
  statistical analysis of systems-based information retrieval experiments", ACM TOIS 30(1),
  2012; Algorithm 1 of seed 003, section 4.1.1). For b = 1..B every dialogue's row is
  permuted across runs and ``range_b = max_j mean*_j - min_j mean*_j`` is recorded; the
  p-value of runs (i, j) is ``(#{b : range_b >= |mean_i - mean_j|} + 1) / (B + 1)``.
  Several measures over the same dialogues and runs share the permutations.
* effect sizes ``(mean_i - mean_j) / sqrt(V_E)`` with ``V_E`` the residual variance of the
  two-way ANOVA without replication (Sakai, "Laboratory Experiments in Information
  Retrieval", Springer 2018, ch. 5);
* ``bootstrap_confidence_intervals``: percentile intervals of each run's mean from a
  dialogue bootstrap (Efron and Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13);
* meta-evaluation: discriminative power (Sakai, SIGIR 2006), delta required (Sakai, WWW 2012;
  Algorithm 2 of seed 003) and Kendall's tau-b between the run rankings of two measures
  with a dialogue-bootstrap interval.

Modules, one job each; every name below is importable from ``scoring.stats`` as before the split:

* :mod:`scoring.stats.results`: the result types and the significance levels;
* :mod:`scoring.stats.validation`: the checks of inputs and the option types;
* :mod:`scoring.stats.anova`: residual variance, effect sizes, p-values from permuted ranges;
* :mod:`scoring.stats.stream`: the permutation stream (pure Python and NumPy);
* :mod:`scoring.stats.kernels`: the Numba backend, every kernel and the lazily imported numba;
* :mod:`scoring.stats.recombined`: the recombined method and when "auto" uses it;
* :mod:`scoring.stats.tukey`: the randomised Tukey HSD and its reference loop;
* :mod:`scoring.stats.corpus`: the tests of corpus-level measures;
* :mod:`scoring.stats.bootstrap`: the dialogue bootstrap;
* :mod:`scoring.stats.meta_evaluation`: discriminative power, delta required, Holm, Kendall's tau.

The names here are re-exports: a setting is read where it is defined, so a test or benchmark that
changes one (``RECOMBINE_MIN_CELLS``, ``_TAU_BLOCK_CELLS``, ...) sets it on that module
(``scoring.stats.recombined.RECOMBINE_MIN_CELLS``); setting it here would change nothing.
"""

# Names outside ``__all__`` are imported for the modules, benchmarks and tests that read them from here
# (noqa: re-exported, not used here).
from scoring.stats.anova import _tie_tolerance, residual_variance  # noqa: F401
from scoring.stats.bootstrap import bootstrap_confidence_intervals, resample_counts
from scoring.stats.corpus import (  # noqa: F401
    CORPUS_TIE_TOLERANCE,
    CorpusFunction,
    CorpusMeasure,
    corpus_bootstrap_intervals,
    corpus_bootstrap_replicates,
    corpus_tukey_hsd,
)
from scoring.stats.kernels import _NUMBA_LOCK, _ranges_numba, _tau_b_numba, numba_available  # noqa: F401
from scoring.stats.meta_evaluation import (  # noqa: F401
    _TAU_BLOCK_CELLS,
    _tau_b_rows,
    alpha_suffix,
    asl_curve,
    delta_required,
    discriminative_power,
    holm,
    kendall_tau_with_ci,
    mean_ranks,
    meta_evaluate,
)
from scoring.stats.recombined import (  # noqa: F401
    INFLATION_BUDGET,
    INFLATION_SCALE,
    MAX_POOL_DIVISOR,
    RECOMBINE_GROUPS,
    RECOMBINE_MIN_CELLS,
    RECOMBINE_MIN_DIALOGUES,
    RECOMBINE_MIN_DIVISOR,
    _recombine_plan,
    recombined_variance_inflation,
)
from scoring.stats.results import (
    REPORTED_LEVELS,
    SIGNIFICANCE_LEVEL,
    BootstrapResult,
    KendallTauResult,
    TukeyHSDResult,
)
from scoring.stats.tukey import randomised_tukey_hsd, tukey_hsd_loop
from scoring.stats.validation import Backend, Method, _check_level, _check_seed  # noqa: F401

__all__ = [
    "REPORTED_LEVELS",
    "SIGNIFICANCE_LEVEL",
    "BootstrapResult",
    "CorpusMeasure",
    "KendallTauResult",
    "TukeyHSDResult",
    "alpha_suffix",
    "asl_curve",
    "bootstrap_confidence_intervals",
    "corpus_bootstrap_intervals",
    "corpus_bootstrap_replicates",
    "corpus_tukey_hsd",
    "delta_required",
    "discriminative_power",
    "holm",
    "kendall_tau_with_ci",
    "mean_ranks",
    "meta_evaluate",
    "numba_available",
    "randomised_tukey_hsd",
    "resample_counts",
    "residual_variance",
    "tukey_hsd_loop",
]
