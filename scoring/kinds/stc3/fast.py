"""The fast paths of DQ/ND validation: valid files, read with flat comprehensions.

They return None at the first surprise (a broken structure or a refusal by the rules), and
the careful path (:mod:`scoring.kinds.stc3.careful`) then words every problem.
"""

from __future__ import annotations

from itertools import chain
from operator import itemgetter

import numpy as np

from scoring.kinds.stc3.arrays import CUSTOMER, HELPDESK, Gold, Run, _finish_run, _gold_from_codes, _side_row
from scoring.kinds.stc3.config import TaskConfig
from scoring.kinds.stc3.facts import (
    _Counts,
    _Coverage,
    _DialogueIds,
    _Distributions,
    _NuggetLabels,
    _RunDialogues,
    _RunSubtasks,
    _ScaleLabels,
    _Senders,
    _TurnLists,
)
from scoring.kinds.stc3.rules import _label_problems, _passes

# Fast paths ---------------------------------------------------------------------------------
# Valid files are the common case, and going through them label by label in Python costs
# most of the scoring time. The fast paths pull every label or value out with flat
# comprehensions under structural assumptions (a list of objects, keys present, lists where
# lists belong); a broken assumption raises or returns None. They check no value themselves:
# the facts they extract go to ``_passes`` with the same ``RULES`` the careful path words, and
# any refusal returns None, so the careful path runs and words every problem.

_FAST_PATH_MISS = (KeyError, TypeError, AttributeError, IndexError, ValueError, OverflowError)


def _load_gold_fast(data: object, config: TaskConfig) -> Gold | None:
    try:
        return _gold_fast(data, config)
    except _FAST_PATH_MISS:
        return None


def _gold_fast(data: object, config: TaskConfig) -> Gold | None:
    if not isinstance(data, list) or not data or set(map(type, data)) != {dict}:
        return None
    customer_types, helpdesk_types = config.customer_nugget_types, config.helpdesk_nugget_types
    if set(customer_types) & set(helpdesk_types):
        return None  # a label would not tell its side; the careful path handles such a configuration
    ids = _DialogueIds(list(map(itemgetter("id"), data)), range(len(data)))
    if not _passes("dialogue id", ids):
        return None
    turn_lists = list(map(itemgetter("turns"), data))
    annotations = list(map(itemgetter("annotations"), data))
    if set(map(type, turn_lists)) != {list} or set(map(type, annotations)) != {list}:
        return None
    turn_counts = np.array(list(map(len, turn_lists)), dtype=np.int64)
    annotators = np.array(list(map(len, annotations)), dtype=np.int64)
    if not (_passes("gold turns", _Counts(turn_counts)) and _passes("gold annotations", _Counts(annotators))):
        return None
    flat_senders = [turn["sender"] for turns in turn_lists for turn in turns]
    if not _passes("sender", _Senders(flat_senders)):
        return None
    everyone = list(chain.from_iterable(annotations))
    if set(map(type, everyone)) != {dict}:
        return None
    has_quality = everyone[0].get("quality") is not None
    has_nugget = everyone[0].get("nugget") is not None
    if not (has_quality or has_nugget):
        return None
    n = len(ids.ids)
    annotation_dialogue = np.repeat(np.arange(n), annotators)

    quality_bins = None
    if has_quality:
        dims = config.quality_dimensions
        qualities = list(map(itemgetter("quality"), everyone))
        if set(map(type, qualities)) != {dict} or set(map(len, qualities)) != {len(dims)}:
            return None
        quality_bins = {}
        for dim in dims:
            labels = _ScaleLabels(list(map(itemgetter(dim), qualities)), config)
            if not _passes("scale label", labels):
                return None
            quality_bins[dim] = labels.bins
    elif any(annotation.get("quality") is not None for annotation in everyone):
        return None

    is_customer = np.array([sender == CUSTOMER for sender in flat_senders], dtype=bool)
    label_bins = label_turn = None
    if has_nugget:
        nuggets = list(map(itemgetter("nugget"), everyone))
        if set(map(type, nuggets)) != {list}:
            return None
        lengths = np.array(list(map(len, nuggets)), dtype=np.int64)
        if not _passes("nugget labels", _TurnLists(lengths, turn_counts[annotation_dialogue])):
            return None
        # The gold turn each label belongs to: annotation k of dialogue d labels turns
        # turn_start[d] .. turn_start[d] + turns[d] - 1, in order.
        turn_start = np.concatenate(([0], np.cumsum(turn_counts)[:-1]))
        label_start = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        within = np.arange(int(lengths.sum())) - np.repeat(label_start, lengths)
        label_turn = np.repeat(turn_start[annotation_dialogue], lengths) + within
        labels = _NuggetLabels(list(chain.from_iterable(nuggets)), is_customer[label_turn].astype(np.int64), config)
        if not _passes("nugget label", labels):
            return None
        label_bins = labels.bins
    elif any(annotation.get("nugget") is not None for annotation in everyone):
        return None
    return _gold_from_codes(config, ids.ids, annotators, turn_counts, is_customer, quality_bins,
                            annotation_dialogue, label_bins, label_turn)


def _load_run_fast(data: object, gold: Gold, allow_missing: bool) -> Run | None:
    try:
        return _run_fast(data, gold, allow_missing)
    except _FAST_PATH_MISS:
        return None


def _run_fast(data: object, gold: Gold, allow_missing: bool) -> Run | None:
    if not isinstance(data, list) or not data or set(map(type, data)) != {dict}:
        return None
    config = gold.config
    n = gold.n_dialogues
    ids = _DialogueIds(list(map(itemgetter("id"), data)), range(len(data)))
    if not _passes("dialogue id", ids):
        return None
    dialogues = _RunDialogues(ids.ids, gold)
    if not _passes("run dialogue", dialogues):
        return None
    index = dialogues.index
    has_quality = data[0].get("quality") is not None
    has_nugget = data[0].get("nugget") is not None
    if not _passes("run subtasks", _RunSubtasks(has_quality, has_nugget, gold, True)):
        return None
    covered = np.zeros(n, dtype=bool)
    covered[index] = True
    if not _passes("run coverage", _Coverage(covered, gold, allow_missing, True)):
        return None
    position_of = np.full(n, -1, dtype=np.int64)
    position_of[index] = np.arange(index.size)
    label_problems = _label_problems(config)

    quality = None
    if has_quality:
        dims = config.quality_dimensions
        estimates = list(map(itemgetter("quality"), data))
        if set(map(type, estimates)) != {dict} or set(map(len, estimates)) != {len(dims)}:
            return None
        quality = {}
        for dim in dims:
            objects = list(map(itemgetter(dim), estimates))
            if set(map(type, objects)) != {dict}:
                return None
            facts = _Distributions(objects, config.quality_scale, label_problems["quality"])
            if not _passes("distribution", facts):
                return None
            quality[dim] = np.zeros((n, facts.width))
            quality[dim][index] = facts.numbers
    elif any(entry.get("quality") is not None for entry in data):
        return None

    side_types = {CUSTOMER: config.customer_nugget_types, HELPDESK: config.helpdesk_nugget_types}
    side_rows = {CUSTOMER: np.zeros((len(gold.customer_dialogue), len(side_types[CUSTOMER]))),
                 HELPDESK: np.zeros((len(gold.helpdesk_dialogue), len(side_types[HELPDESK])))}
    if has_nugget:
        estimates = list(map(itemgetter("nugget"), data))
        if set(map(type, estimates)) != {list}:
            return None
        lengths = np.array(list(map(len, estimates)), dtype=np.int64)
        if not _passes("run turn estimates", _TurnLists(lengths, gold.turn_counts[index], ids.ids)):
            return None
        # Gold turn of every estimate, in the run's order.
        turn_start = np.concatenate(([0], np.cumsum(gold.turn_counts)[:-1]))
        estimate_start = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        gold_turn = (np.repeat(turn_start[index], lengths) + np.arange(lengths.sum())
                     - np.repeat(estimate_start, lengths))
        turn_estimates = list(chain.from_iterable(estimates))
        is_customer = gold.turn_is_customer
        side_row = _side_row(gold)
        for side, on_side in ((CUSTOMER, is_customer[gold_turn]), (HELPDESK, ~is_customer[gold_turn])):
            positions = np.flatnonzero(on_side)
            objects = [turn_estimates[i] for i in positions.tolist()]
            if set(map(type, objects)) - {dict}:
                return None
            facts = _Distributions(objects, side_types[side], label_problems[side])
            if not _passes("distribution", facts):
                return None
            side_rows[side][side_row[gold_turn[positions]]] = facts.numbers
    elif any(entry.get("nugget") is not None for entry in data):
        return None
    return _finish_run(gold, quality, side_rows, covered, position_of, has_nugget)
