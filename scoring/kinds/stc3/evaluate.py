"""Scoring a validated run against the gold: per-dialogue scores and their means.

Aggregation follows Sakai (EVIA 2017): DQ scores are averaged over dialogues (eq. 11); ND
scores are first averaged per dialogue over each side's turns and combined as
``alpha * customer mean + (1 - alpha) * helpdesk mean`` (eq. 12), a dialogue with turns of
one side only taking that side's mean, then averaged over dialogues (eq. 13, ``macro``).
``micro`` averaging pools each side's turns over the whole run instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scoring.kinds.stc3.config import TaskConfig
from scoring.kinds.stc3.formats import Gold, Run
from scoring.kinds.stc3.measures import MEASURES


def normalise(rows: np.ndarray) -> np.ndarray:
    """Divide every row by its sum (validation guarantees finite values >= 0 and positive sums).

    Each value is at most the largest double (1.8e308), but a row's sum may still overflow
    (two values of 1e308): such rows are first divided by their largest value, which changes
    no ratio. Every other row is divided by its plain sum, exactly as before, so ordinary
    runs keep their scores to the last bit and pay for one check only.
    """
    with np.errstate(over="ignore"):
        sums = rows.sum(axis=1, keepdims=True)
    overflowed = ~np.isfinite(sums[:, 0])
    if not overflowed.any():
        return rows / sums
    result = np.empty_like(rows, dtype=np.float64)
    result[~overflowed] = rows[~overflowed] / sums[~overflowed]
    scaled = rows[overflowed] / rows[overflowed].max(axis=1, keepdims=True)
    result[overflowed] = scaled / scaled.sum(axis=1, keepdims=True)
    return result


def _side_means(scores: np.ndarray, dialogue_of_turn: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    totals = np.bincount(dialogue_of_turn, weights=scores, minlength=n)
    counts = np.bincount(dialogue_of_turn, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return totals / counts, counts


def weighted_block_average(
    customer_scores: np.ndarray, customer_dialogue: np.ndarray,
    helpdesk_scores: np.ndarray, helpdesk_dialogue: np.ndarray, n_dialogues: int, alpha: float,
) -> np.ndarray:
    """Per-dialogue ``alpha * mean(customer turns) + (1 - alpha) * mean(helpdesk turns)`` (eq. 12)."""
    customer_mean, customer_count = _side_means(customer_scores, customer_dialogue, n_dialogues)
    helpdesk_mean, helpdesk_count = _side_means(helpdesk_scores, helpdesk_dialogue, n_dialogues)
    both = alpha * customer_mean + (1.0 - alpha) * helpdesk_mean
    return np.where(customer_count == 0, helpdesk_mean, np.where(helpdesk_count == 0, customer_mean, both))


@dataclass
class Result:
    """Scores of one run: per-dialogue arrays (aligned with ``dialogue_ids``) and their means."""

    dialogue_ids: list[str]
    variant: str
    alpha: float
    averaging: str
    quality: dict[str, dict[str, np.ndarray]] | None = None
    nugget: dict[str, np.ndarray] | None = None
    quality_means: dict[str, dict[str, float]] | None = None
    nugget_means: dict[str, float] | None = None
    n_missing: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def n_dialogues(self) -> int:
        return len(self.dialogue_ids)

    def summary(self) -> dict[str, Any]:
        """The ``score --format json`` object without per-dialogue scores."""
        data: dict[str, Any] = {}
        if self.quality_means is not None:
            data["quality"] = self.quality_means
        if self.nugget_means is not None:
            data["nugget"] = self.nugget_means
        data.update(n_dialogues=self.n_dialogues, variant=self.variant, alpha=self.alpha, averaging=self.averaging)
        if self.n_missing:
            data["n_missing"] = self.n_missing
        return data

    def to_dict(self, per_dialogue: bool = False) -> dict[str, Any]:
        data = self.summary()
        if per_dialogue:
            ids = self.dialogue_ids
            detail: dict[str, Any] = {}
            if self.quality is not None:
                detail["quality"] = {
                    dim: {name: dict(zip(ids, values.tolist(), strict=True)) for name, values in measures.items()}
                    for dim, measures in self.quality.items()
                }
            if self.nugget is not None:
                detail["nugget"] = {name: dict(zip(ids, values.tolist(), strict=True))
                                    for name, values in self.nugget.items()}
            data["per_dialogue"] = detail
        return data


def evaluate(run: Run, gold: Gold, config: TaskConfig | None = None) -> Result:
    """Score every measure of the configuration for both subtasks the run contains."""
    config = config or gold.config
    if run.n_missing:
        gold = gold.subset(run.dialogue_index)
    elif run.dialogue_index.size != gold.n_dialogues:
        raise ValueError("the run was validated against a different gold")
    result = Result(dialogue_ids=list(gold.dialogue_ids), variant=config.variant, alpha=config.alpha,
                    averaging=config.averaging, n_missing=run.n_missing, warnings=list(run.warnings))
    n = gold.n_dialogues
    if run.quality is not None:
        result.quality, result.quality_means = {}, {}
        for dim in config.quality_dimensions:
            estimate, truth = normalise(run.quality[dim]), normalise(gold.quality_counts[dim])
            scores = {name: MEASURES[name](estimate, truth, config.variant) for name in config.quality_measures}
            result.quality[dim] = scores
            result.quality_means[dim] = {name: float(values.mean()) for name, values in scores.items()}
    if run.customer is not None:
        customer_estimate, customer_truth = normalise(run.customer), normalise(gold.customer_counts)
        helpdesk_estimate, helpdesk_truth = normalise(run.helpdesk), normalise(gold.helpdesk_counts)
        result.nugget, result.nugget_means = {}, {}
        for name in config.nugget_measures:
            measure = MEASURES[name]
            customer_scores = measure(customer_estimate, customer_truth, config.variant)
            helpdesk_scores = measure(helpdesk_estimate, helpdesk_truth, config.variant)
            per_dialogue = weighted_block_average(customer_scores, gold.customer_dialogue, helpdesk_scores,
                                                  gold.helpdesk_dialogue, n, config.alpha)
            result.nugget[name] = per_dialogue
            if config.averaging == "macro":
                result.nugget_means[name] = float(per_dialogue.mean())
            else:
                result.nugget_means[name] = _micro_mean(customer_scores, helpdesk_scores, config.alpha)
    return result


def _micro_mean(customer_scores: np.ndarray, helpdesk_scores: np.ndarray, alpha: float) -> float:
    """Every turn of a side counts the same: alpha-weighted means of the pooled turns."""
    if not customer_scores.size:
        return float(helpdesk_scores.mean())
    if not helpdesk_scores.size:
        return float(customer_scores.mean())
    return float(alpha * customer_scores.mean() + (1.0 - alpha) * helpdesk_scores.mean())
