"""The careful path of DQ/ND validation: every problem of a gold file or run, at its JSON path.

Walks the JSON object by object, words every structural problem, and hands the values it
gathers to the rules (``_report``); a valid file's arrays are built by the same functions as
the fast path's (:mod:`scoring.kinds.stc3.arrays`).
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from scoring.kinds.stc3.arrays import (
    CUSTOMER,
    HELPDESK,
    Gold,
    Run,
    _finish_run,
    _gold_from_codes,
    _side_row,
)
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
from scoring.kinds.stc3.rules import _label_problems, _OrderedProblems, _report
from scoring.validation import (
    quoted,
)


def _entries(data: object, problems: _OrderedProblems) -> list[tuple[int, str, dict]]:
    """Top-level checks shared by gold and runs: a list of objects with unique ids.

    Returns ``(position in the file, canonical id, entry)`` for every usable entry. Problems
    found here come first (sort key ``(0, ...)``).
    """
    if not isinstance(data, list):
        kind = "an object" if isinstance(data, dict) else type(data).__name__
        problems.add((0,), "$", f"expected a JSON list of dialogues, got {kind}")
        return []
    if not data:
        problems.add((0,), "$", "the list of dialogues is empty")
    objects, positions = [], []
    for position, entry in enumerate(data):
        if not isinstance(entry, dict):
            problems.add((0, position), f"[{position}]", f"expected an object, got {type(entry).__name__}")
            continue
        objects.append(entry)
        positions.append(position)
    ids = _DialogueIds([entry.get("id") for entry in objects], positions)
    refused = _report("dialogue id", ids, lambda row: ((0, positions[row]), f"[{positions[row]}]"), problems)
    return [(positions[row], ids.ids[row], objects[row]) for row in np.flatnonzero(~refused).tolist()]


def _load_gold_checked(data: object, config: TaskConfig) -> Gold:
    """The careful extraction: every structural problem worded, every value checked by ``RULES``."""
    problems = _OrderedProblems()
    entries = _entries(data, problems)
    dims = config.quality_dimensions

    # Which subtasks does this gold annotate? Those that any annotation labels; every annotation
    # must then label them all (as for runs, where one dialogue's subtask binds all).
    annotation_objects = [annotation for _, _, entry in entries if isinstance(entry.get("annotations"), list)
                          for annotation in entry["annotations"] if isinstance(annotation, dict)]
    if annotation_objects:
        has_quality = any(annotation.get("quality") is not None for annotation in annotation_objects)
        has_nugget = any(annotation.get("nugget") is not None for annotation in annotation_objects)
        if not (has_quality or has_nugget):
            problems.add((1,), "$", "no annotation has 'quality' or 'nugget': nothing to score against")
    else:
        has_quality = has_nugget = True  # nothing to go by: the missing annotations are reported below

    # Sort keys: (2, position, 0) turns, (2, position, 1, turn) senders, (2, position, 2) annotations,
    # (2, position, 3, annotation, 1 quality | 2 nugget, ...) inside an annotation. Places are kept as
    # (position, number) pairs and spelled out only for a problem: a valid gold has 10^5-10^6 labels.
    turn_counts, annotator_counts, positions = [], [], []
    senders, sender_places = [], []
    quality_labels: dict[str, list] = {dim: [] for dim in dims}
    quality_places: list[tuple[int, int]] = []
    quality_dialogue: list[int] = []
    nugget_lists, nugget_places, nugget_turns, nugget_first_turn = [], [], [], []
    turn_offset = 0
    for dialogue_no, (position, _, entry) in enumerate(entries):
        positions.append(position)
        turns = entry.get("turns")
        dialogue_senders = [turn.get("sender") if isinstance(turn, dict) else None
                            for turn in (turns if isinstance(turns, list) else ())]
        turn_counts.append(len(turns) if isinstance(turns, list) else -1)
        senders.extend(dialogue_senders)
        sender_places.extend((position, turn_no) for turn_no in range(len(dialogue_senders)))
        annotations = entry.get("annotations")
        annotator_counts.append(len(annotations) if isinstance(annotations, list) else -1)
        for ann_no, annotation in enumerate(annotations if isinstance(annotations, list) else ()):
            if not isinstance(annotation, dict):
                problems.add((2, position, 3, ann_no, 0), f"[{position}].annotations[{ann_no}]",
                             f"expected an object, got {type(annotation).__name__}")
                continue
            if has_quality:
                quality = annotation.get("quality")
                if not isinstance(quality, dict):
                    problems.add((2, position, 3, ann_no, 1, 0), f"[{position}].annotations[{ann_no}].quality",
                                 "missing or not an object")
                else:
                    for dim in quality.keys() - set(dims):
                        problems.add((2, position, 3, ann_no, 1, 0), f"[{position}].annotations[{ann_no}].quality",
                                     f"unknown dimension {quoted(dim)} (allowed: {', '.join(dims)})")
                    for dim in dims:
                        quality_labels[dim].append(quality.get(dim))
                    quality_places.append((position, ann_no))
                    quality_dialogue.append(dialogue_no)
            if has_nugget:
                nugget = annotation.get("nugget")
                if not isinstance(nugget, list):
                    problems.add((2, position, 3, ann_no, 2, 0), f"[{position}].annotations[{ann_no}].nugget",
                                 "missing or not a list")
                else:
                    nugget_lists.append(nugget)
                    nugget_places.append((position, ann_no))
                    nugget_turns.append(len(dialogue_senders))
                    nugget_first_turn.append(turn_offset)
        turn_offset += len(dialogue_senders)

    def sender_place(row: int) -> tuple[tuple[int, ...], str]:
        position, turn_no = sender_places[row]
        return (2, position, 1, turn_no), f"[{position}].turns[{turn_no}].sender"

    def nugget_place(row: int) -> tuple[tuple[int, ...], str]:
        position, ann_no = nugget_places[row]
        return (2, position, 3, ann_no, 2), f"[{position}].annotations[{ann_no}].nugget"

    _report("gold turns", _Counts(np.array(turn_counts, dtype=np.int64)),
            lambda row: ((2, positions[row], 0), f"[{positions[row]}]"), problems)
    _report("gold annotations", _Counts(np.array(annotator_counts, dtype=np.int64)),
            lambda row: ((2, positions[row], 2), f"[{positions[row]}]"), problems)
    _report("sender", _Senders(senders), sender_place, problems)
    # 1 customer, 0 helpdesk, -1 a sender reported above (a list compares unequal, never raises)
    sides = np.array([1 if sender == CUSTOMER else 0 if sender == HELPDESK else -1 for sender in senders],
                     dtype=np.int64)
    quality_bins: dict[str, np.ndarray] = {}
    for dim_no, dim in enumerate(dims if has_quality else ()):
        labels = _ScaleLabels(quality_labels[dim], config)
        _report("scale label", labels, lambda row, dim_no=dim_no, dim=dim: (
            (2, quality_places[row][0], 3, quality_places[row][1], 1, 1 + dim_no),
            f"[{quality_places[row][0]}].annotations[{quality_places[row][1]}].quality.{dim}"), problems)
        quality_bins[dim] = labels.bins
    label_bins = label_turn = None
    if has_nugget:
        lengths = np.array([len(labels) for labels in nugget_lists], dtype=np.int64)
        counted = _TurnLists(lengths, np.array(nugget_turns, dtype=np.int64))
        refused = _report("nugget labels", counted, nugget_place, problems)
        kept = np.flatnonzero(~refused)
        labels = list(chain.from_iterable(nugget_lists[row] for row in kept.tolist()))
        kept_lengths = lengths[kept]
        list_of_label = np.repeat(kept, kept_lengths)
        turn_of_label = np.arange(int(kept_lengths.sum())) - np.repeat(np.cumsum(kept_lengths) - kept_lengths,
                                                                       kept_lengths)
        label_turn = np.array(nugget_first_turn, dtype=np.int64)[list_of_label] + turn_of_label

        def label_place(row: int) -> tuple[tuple[int, ...], str]:
            key, path = nugget_place(int(list_of_label[row]))
            return key + (1 + int(turn_of_label[row]),), f"{path}[{turn_of_label[row]}]"

        nugget_labels = _NuggetLabels(labels, sides[label_turn], config)
        _report("nugget label", nugget_labels, label_place, problems)
        label_bins = nugget_labels.bins
    problems.raise_if_any()

    annotators = np.array(annotator_counts, dtype=np.int64)
    return _gold_from_codes(
        config, [dialogue_id for _, dialogue_id, _ in entries], annotators, np.array(turn_counts, dtype=np.int64),
        sides == 1, quality_bins if has_quality else None, np.array(quality_dialogue, dtype=np.int64),
        label_bins, label_turn)


def _load_run_checked(data: object, gold: Gold, allow_missing: bool = False) -> Run:
    """The careful extraction: every structural problem worded, every value checked by ``RULES``.

    Sort keys: (0, ...) entries and ids, (1, ...) the file's subtasks, (2, position, 0) the
    dialogue, (2, position, 1, ...) its quality, (2, position, 2, ...) its nugget estimates,
    (3, ...) coverage.
    """
    config = gold.config
    problems = _OrderedProblems()
    entries = _entries(data, problems)
    dims = config.quality_dimensions
    side_types = {CUSTOMER: config.customer_nugget_types, HELPDESK: config.helpdesk_nugget_types}
    label_problems = _label_problems(config)

    has_quality = any(entry.get("quality") is not None for _, _, entry in entries)
    has_nugget = any(entry.get("nugget") is not None for _, _, entry in entries)
    _report("run subtasks", _RunSubtasks(has_quality, has_nugget, gold, bool(entries)),
            lambda row: ((1,), "$"), problems)
    has_quality = has_quality and gold.has_quality
    has_nugget = has_nugget and gold.has_nugget

    dialogues = _RunDialogues([dialogue_id for _, dialogue_id, _ in entries], gold)
    _report("run dialogue", dialogues, lambda row: ((2, entries[row][0], 0), f"[{entries[row][0]}]"), problems)
    n = gold.n_dialogues
    covered = np.zeros(n, dtype=bool)
    position_of = np.full(n, -1, dtype=np.int64)
    in_gold = [(position, dialogue_id, entry, dialogue_no) for (position, dialogue_id, entry), dialogue_no
               in zip(entries, dialogues.index.tolist(), strict=True) if dialogue_no >= 0]
    for position, _, _, dialogue_no in in_gold:
        covered[dialogue_no] = True
        position_of[dialogue_no] = position

    # Each block of distributions: the objects, the row each fills, and its sort key and path.
    blocks: dict[tuple[str, str], tuple[list, list[int], list[tuple[tuple[int, ...], str]]]] = {}
    if has_quality:
        for dim in dims:
            blocks["quality", dim] = ([], [], [])
        for position, _, entry, dialogue_no in in_gold:
            path, key = f"[{position}]", (2, position, 1)
            estimate = entry.get("quality")
            if estimate is None:
                problems.add(key, path, "missing 'quality' (other dialogues of this run have it)")
            elif not isinstance(estimate, dict):
                problems.add(key, f"{path}.quality", f"expected an object of dimensions, got "
                                                     f"{type(estimate).__name__}")
            else:
                for dim in estimate.keys() - set(dims):
                    problems.add(key + (0,), f"{path}.quality",
                                 f"unknown dimension {quoted(dim)} (allowed: {', '.join(dims)})")
                for dim_no, dim in enumerate(dims):
                    place = (key + (1 + dim_no,), f"{path}.quality.{dim}")
                    if dim not in estimate:
                        problems.add(place[0], f"{path}.quality", f"missing dimension {quoted(dim)}")
                    elif not isinstance(estimate[dim], dict):
                        problems.add(place[0], place[1], f"expected an object of label: value, got "
                                                         f"{type(estimate[dim]).__name__}")
                    else:
                        objects, targets, places = blocks["quality", dim]
                        objects.append(estimate[dim])
                        targets.append(dialogue_no)
                        places.append(place)

    if has_nugget:
        blocks["nugget", CUSTOMER], blocks["nugget", HELPDESK] = ([], [], []), ([], [], [])
        lists = []
        for position, dialogue_id, entry, dialogue_no in in_gold:
            path, key = f"[{position}]", (2, position, 2)
            estimate = entry.get("nugget")
            if estimate is None:
                problems.add(key, path, "missing 'nugget' (other dialogues of this run have it)")
            elif not isinstance(estimate, list):
                problems.add(key, f"{path}.nugget", f"expected a list with one object per turn, got "
                                                    f"{type(estimate).__name__}")
            else:
                lists.append((position, dialogue_id, estimate, dialogue_no))
        counted = _TurnLists(np.array([len(estimate) for _, _, estimate, _ in lists], dtype=np.int64),
                             gold.turn_counts[np.array([dialogue_no for *_, dialogue_no in lists], dtype=np.int64)],
                             [dialogue_id for _, dialogue_id, _, _ in lists])
        refused = _report("run turn estimates", counted,
                          lambda row: ((2, lists[row][0], 2, 0), f"[{lists[row][0]}]"), problems)
        turn_start = np.concatenate(([0], np.cumsum(gold.turn_counts)[:-1])).tolist()
        side_row = _side_row(gold).tolist()
        is_customer = gold.turn_is_customer.tolist()
        for row in np.flatnonzero(~refused).tolist():
            position, _, estimate, dialogue_no = lists[row]
            for turn_no, turn_estimate in enumerate(estimate):
                gold_turn = turn_start[dialogue_no] + turn_no
                side = CUSTOMER if is_customer[gold_turn] else HELPDESK
                place = ((2, position, 2, 1 + turn_no), f"[{position}].nugget[{turn_no}]")
                if not isinstance(turn_estimate, dict):
                    problems.add(place[0], place[1], f"expected an object of label: value, got "
                                                     f"{type(turn_estimate).__name__}")
                    continue
                objects, targets, places = blocks["nugget", side]
                objects.append(turn_estimate)
                targets.append(side_row[gold_turn])
                places.append(place)

    rows: dict[tuple[str, str], np.ndarray] = {}
    for (subtask, name), (objects, _, places) in blocks.items():
        labels = config.quality_scale if subtask == "quality" else side_types[name]
        facts = _Distributions(objects, labels, label_problems["quality" if subtask == "quality" else name])
        _report("distribution", facts, places.__getitem__, problems)
        rows[subtask, name] = facts.numbers
    _report("run coverage", _Coverage(covered, gold, allow_missing, bool(entries)), lambda row: ((3,), "$"),
            problems)
    problems.raise_if_any()

    quality = None
    if has_quality:
        quality = {}
        for dim in dims:
            quality[dim] = np.zeros((n, len(config.quality_scale)))
            quality[dim][blocks["quality", dim][1]] = rows["quality", dim]
    side_rows = {CUSTOMER: np.zeros((len(gold.customer_dialogue), len(side_types[CUSTOMER]))),
                 HELPDESK: np.zeros((len(gold.helpdesk_dialogue), len(side_types[HELPDESK])))}
    if has_nugget:
        for side in side_types:
            side_rows[side][blocks["nugget", side][1]] = rows["nugget", side]
    return _finish_run(gold, quality, side_rows, covered, position_of, has_nugget)
