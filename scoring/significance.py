"""The tests and intervals of a set of measures over the same runs and items, each about its headline.

One function, used by the server's board statistics (``leaderboard.statistics``) and by the
offline ``compare`` command (``scoring.compare``), so that the same runs, gold, seed and B give
the same numbers in both (SIGNIFICANCE-SPEC, "The rule"):

* a **mean** measure (its figure is the mean of its per-item scores) is tested on its
  items x runs score matrix: :func:`scoring.stats.randomised_tukey_hsd` over all mean measures
  together (they share the permutations) and :func:`scoring.stats.bootstrap_confidence_intervals`;
* a **corpus** measure (its figure is ``corpus(summed sufficient statistics)``: BLEU, the metrics
  track's pooled predictive power) on its rows of statistics:
  :func:`scoring.stats.corpus_tukey_hsd` over all corpus measures together (one permutation per
  step and item for all of them) and :func:`scoring.stats.corpus_bootstrap_intervals` (Koehn 2004).

Which measures are tested together decides, through their total size, whether the Tukey HSD
draws its steps exactly or recombined (``scoring.stats.RECOMBINE_MIN_CELLS``); both the server
and ``compare`` therefore test every measure of the runs, and select what they show afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scoring import stats
from scoring.kinds.base import MeasureSpec


@dataclass(frozen=True)
class MeasureTests:
    """One measure's Tukey HSD result and bootstrap intervals; ``headline`` says which figure
    (``mean`` or ``corpus``) both are about (``tukey.means`` is that figure per run)."""

    key: str
    headline: str
    tukey: stats.TukeyHSDResult
    intervals: stats.BootstrapResult


def corpus_measure(spec: MeasureSpec, statistics: np.ndarray) -> stats.CorpusMeasure:
    """A corpus measure's statistics (items x runs x S) with its vectorised corpus function."""
    return stats.CorpusMeasure(np.asarray(statistics, dtype=np.float64), spec.corpus_figures)


def is_corpus(spec: MeasureSpec | None) -> bool:
    """Whether the measure's tests work on sufficient statistics (a corpus headline with its function)."""
    return spec is not None and spec.headline == "corpus" and spec.corpus is not None


def measure_tests(specs: Mapping[str, MeasureSpec], matrices: Mapping[str, np.ndarray],
                  statistics: Mapping[str, np.ndarray], *, permutations: int, seed: int, resamples: int,
                  level: float) -> dict[str, MeasureTests]:
    """Tukey HSD and bootstrap intervals of every measure in ``matrices`` (items x runs each).

    ``statistics`` holds, for each corpus measure, its (items x runs x S) sufficient statistics;
    a corpus measure without them is refused (``ValueError``): the mean of its per-item scores
    is a different estimand and is never tested in its place. Results in ``matrices``' order.
    """
    corpus_keys = [key for key in matrices if is_corpus(specs.get(key))]
    missing = [key for key in corpus_keys if key not in statistics]
    if missing:
        raise ValueError("corpus-level measures without their sufficient statistics: " + ", ".join(missing))
    mean_keys = [key for key in matrices if key not in corpus_keys]
    tukey: dict[str, stats.TukeyHSDResult] = {}
    intervals: dict[str, stats.BootstrapResult] = {}
    if mean_keys:
        tukey.update(stats.randomised_tukey_hsd({key: matrices[key] for key in mean_keys},
                                                n_permutations=permutations, seed=seed))
        for key in mean_keys:
            intervals[key] = stats.bootstrap_confidence_intervals(matrices[key], n_resamples=resamples, seed=seed,
                                                                  level=level)
    if corpus_keys:
        measures = {key: corpus_measure(specs[key], statistics[key]) for key in corpus_keys}
        tukey.update(stats.corpus_tukey_hsd(measures, n_permutations=permutations, seed=seed))
        for key, measure in measures.items():
            intervals[key] = stats.corpus_bootstrap_intervals(measure, n_resamples=resamples, seed=seed,
                                                              level=level)
    return {key: MeasureTests(key, "corpus" if key in corpus_keys else "mean", tukey[key], intervals[key])
            for key in matrices}


def corpus_measures(specs: Mapping[str, MeasureSpec], statistics: Mapping[str, np.ndarray],
                    keys: list[str]) -> dict[str, stats.CorpusMeasure]:
    """The corpus measures among ``keys``, for :func:`scoring.stats.meta_evaluate`'s ``corpus``."""
    return {key: corpus_measure(specs[key], statistics[key]) for key in keys
            if is_corpus(specs.get(key)) and key in statistics}
