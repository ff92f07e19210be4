"""Predictive power (Liu, Zhou and Wilson, ACM TOIS 2021, Algorithm 3): the per-context counts of
correct, tied and total pairs that are stored with a run, and the figure of any set of contexts
computed exactly from them."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from scoring.kinds.metric.formats import MetricGold
from scoring.kinds.metric.meta.inputs import score_matrix


@dataclass(frozen=True, eq=False)
class ContextCounts:
    """Per-context sufficient statistics of predictive power, stored like per-item scores.

    ``correct[c, m]``: pairs of context c (with different human judgements) that metric m
    orders as people do; ``ties[c, m]``: such pairs metric m scores equal; ``pairs[c]``: pairs
    with different human judgements (the same for every metric). Any subset of contexts or
    bootstrap resample is scored exactly from these, see :func:`predictive_power`.
    """

    names: tuple[str, ...]
    correct: np.ndarray
    ties: np.ndarray
    pairs: np.ndarray

    def column(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(correct, ties, pairs)`` per context of one metric."""
        m = self.names.index(name)
        return self.correct[:, m], self.ties[:, m], self.pairs

    def stored(self, name: str) -> dict[str, list[int]]:
        """One metric's per-context vectors, JSON-ready, to store with its run (keys as in :meth:`from_stored`)."""
        correct, ties, pairs = self.column(name)
        return {"correct": correct.tolist(), "ties": ties.tolist(), "pairs": pairs.tolist()}

    @classmethod
    def from_stored(cls, stored: Mapping[str, Mapping[str, Sequence[int]]]) -> ContextCounts:
        """Counts of several metrics from their stored vectors (``{name: {"correct", "ties", "pairs"}}``).

        Raises ValueError unless every metric was scored on the same contexts (same ``pairs``)
        and ``0 <= correct, ties``, ``correct + ties <= pairs``.
        """
        if not stored:
            raise ValueError("no metrics given")
        names = tuple(str(name) for name in stored)
        columns = [{key: np.asarray(entry[key], dtype=np.int64) for key in ("correct", "ties", "pairs")}
                   for entry in stored.values()]
        pairs = columns[0]["pairs"]
        for name, column in zip(names, columns, strict=True):
            if not np.array_equal(column["pairs"], pairs):
                raise ValueError(f"metric {name!r} was scored on other contexts (its pair counts differ)")
            if column["correct"].shape != pairs.shape or column["ties"].shape != pairs.shape:
                raise ValueError(f"metric {name!r}: correct and ties need one count per context")
            if (column["correct"] < 0).any() or (column["ties"] < 0).any() \
                    or (column["correct"] + column["ties"] > pairs).any():
                raise ValueError(f"metric {name!r}: counts must satisfy 0 <= correct, ties and correct + ties <= pairs")
        return cls(names=names, correct=np.stack([c["correct"] for c in columns], axis=1),
                   ties=np.stack([c["ties"] for c in columns], axis=1), pairs=pairs)

    def credit(self, ties_half: bool = False) -> np.ndarray:
        """Per-context credit: correct pairs, plus half the tied ones when ``ties_half``."""
        return self.correct + 0.5 * self.ties if ties_half else self.correct.astype(np.float64)


def _check_tolerance(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"tie_tolerance must be a finite number >= 0; got {value!r}")
    return float(value)


def context_counts(
    gold: MetricGold, runs: Mapping[str, np.ndarray] | np.ndarray, *, tie_tolerance: float = 0.0
) -> ContextCounts:
    """Correct, tied and total pairs per context for each metric (seed 003 Algorithm 3, per context).

    A pair (r1, r2) of responses to one context counts when its human judgements differ
    (pairs with equal judgements are dropped, as both seeds do); it is correct when
    ``(X(r1) - X(r2)) * (X*(r1) - X*(r2)) > 0`` and tied when ``X(r1) = X(r2)``. With a
    ``tie_tolerance`` t > 0, metric scores closer than t (``|X(r1) - X(r2)| <= t``) are a tie
    and a pair is correct when ``(X(r1) - X(r2)) * sign(X*(r1) - X*(r2)) > t``.
    """
    tolerance = _check_tolerance(tie_tolerance)
    names, x = score_matrix(gold, runs)
    first, second, context = gold.pairs
    human_sign = np.sign(gold.human[first] - gold.human[second])
    kept = human_sign != 0
    first, second, context, human_sign = first[kept], second[kept], context[kept], human_sign[kept]
    n_contexts, n_metrics = gold.n_contexts, x.shape[1]
    correct = np.empty((n_contexts, n_metrics), dtype=np.int64)
    ties = np.empty((n_contexts, n_metrics), dtype=np.int64)
    # One metric at a time over contiguous vectors: gathers from a column-major copy stay in cache.
    columns = np.asfortranarray(x)
    for m in range(n_metrics):
        column = columns[:, m]
        agreement = (column[first] - column[second]) * human_sign
        correct[:, m] = np.bincount(context, weights=agreement > tolerance, minlength=n_contexts)
        ties[:, m] = np.bincount(context, weights=np.abs(agreement) <= tolerance, minlength=n_contexts)
    pairs = np.bincount(context, minlength=n_contexts).astype(np.int64)
    return ContextCounts(names=tuple(names), correct=correct, ties=ties, pairs=pairs)


def predictive_power(
    counts: ContextCounts, ties_half: bool = False, contexts: np.ndarray | None = None
) -> dict[str, float]:
    """Predictive power per metric: ``sum correct / sum pairs`` over ``contexts`` (default all).

    ``ties_half`` gives the tie-aware variant ``(correct + ties / 2) / pairs``. Range [0, 1].
    """
    credit = counts.credit(ties_half)
    pairs = counts.pairs
    if contexts is not None:
        credit, pairs = credit[contexts], pairs[contexts]
    total = int(pairs.sum())
    if total == 0:
        raise ValueError("no pair with different human judgements among these contexts")
    values = credit.sum(axis=0) / total
    return {name: float(v) for name, v in zip(counts.names, values, strict=True)}
