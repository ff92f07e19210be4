"""Baseline runs built from a gold: ``uniform`` and ``popularity``.

``popularity`` puts all probability on the most frequent label of the whole gold, per quality
dimension and per sender, ties split equally. It uses no per-dialogue knowledge, so it is a
fair baseline to publish next to participants' runs on a test set.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scoring.kinds.stc3.formats import Gold


def _run(gold: Gold, quality: dict[str, np.ndarray], customer: np.ndarray, helpdesk: np.ndarray) -> list[dict]:
    config = gold.config
    quality_entry = {dim: dict(zip(config.quality_scale, values.tolist(), strict=True))
                     for dim, values in quality.items()}
    customer_entry = dict(zip(config.customer_nugget_types, customer.tolist(), strict=True))
    helpdesk_entry = dict(zip(config.helpdesk_nugget_types, helpdesk.tolist(), strict=True))
    bounds = np.concatenate(([0], np.cumsum(gold.turn_counts))).tolist()
    is_customer = gold.turn_is_customer.tolist()
    run: list[dict[str, Any]] = []
    for number, dialogue_id in enumerate(gold.dialogue_ids):
        entry: dict[str, Any] = {"id": dialogue_id}
        if gold.has_quality:
            entry["quality"] = quality_entry
        if gold.has_nugget:
            entry["nugget"] = [customer_entry if is_customer[turn] else helpdesk_entry
                               for turn in range(bounds[number], bounds[number + 1])]
        run.append(entry)
    return run


def _split_mode(counts: np.ndarray) -> np.ndarray:
    modes = counts == counts.max()
    return modes / modes.sum()


def uniform_run(gold: Gold) -> list[dict]:
    config = gold.config
    flat = {dim: np.full(len(config.quality_scale), 1.0 / len(config.quality_scale))
            for dim in config.quality_dimensions}
    return _run(gold, flat,
                np.full(len(config.customer_nugget_types), 1.0 / len(config.customer_nugget_types)),
                np.full(len(config.helpdesk_nugget_types), 1.0 / len(config.helpdesk_nugget_types)))


def popularity_run(gold: Gold) -> list[dict]:
    config = gold.config
    quality = {}
    if gold.has_quality:
        quality = {dim: _split_mode(gold.quality_counts[dim].sum(axis=0)) for dim in config.quality_dimensions}
    customer = helpdesk = np.zeros(1)
    if gold.has_nugget:
        customer = _split_mode(gold.customer_counts.sum(axis=0)) if gold.customer_counts.size else \
            np.full(len(config.customer_nugget_types), 1.0 / len(config.customer_nugget_types))
        helpdesk = _split_mode(gold.helpdesk_counts.sum(axis=0)) if gold.helpdesk_counts.size else \
            np.full(len(config.helpdesk_nugget_types), 1.0 / len(config.helpdesk_nugget_types))
    return _run(gold, quality, customer, helpdesk)

