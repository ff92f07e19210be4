"""Gold and Run: a validated DQ/ND gold file and run as arrays ready for vectorised scoring.

Also what both validation paths (:mod:`scoring.kinds.stc3.careful`, :mod:`scoring.kinds.stc3.fast`)
call to turn the values of a valid file into these arrays (``_gold_from_codes``, ``_finish_run``),
so the two paths give identical arrays, and ``restrict``, which cuts a run and its gold down to
some dialogues.
"""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from scoring.kinds.stc3.config import TaskConfig

SUM_TOLERANCE = 0.01
CUSTOMER, HELPDESK = "customer", "helpdesk"


@dataclass
class Gold:
    """Gold annotations as label-count arrays, one row per dialogue or per turn.

    Turns are stored per side: ``customer_counts[t]`` is the annotators' label counts for the
    t-th customer turn of the whole file, ``customer_dialogue[t]`` the index of its dialogue.
    """

    config: TaskConfig
    dialogue_ids: list[str]
    annotators: np.ndarray
    turn_counts: np.ndarray
    turn_is_customer: np.ndarray
    quality_counts: dict[str, np.ndarray] | None
    customer_dialogue: np.ndarray
    customer_counts: np.ndarray | None
    helpdesk_dialogue: np.ndarray
    helpdesk_counts: np.ndarray | None
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.index = {dialogue_id: position for position, dialogue_id in enumerate(self.dialogue_ids)}

    @property
    def turn_dialogue(self) -> np.ndarray:
        """The dialogue index of every turn, in file order."""
        return np.repeat(np.arange(self.n_dialogues), self.turn_counts)

    def side_turn_numbers(self, side: str) -> np.ndarray:
        """For each turn of one side, its position among all turns of its dialogue."""
        offsets = np.concatenate(([0], np.cumsum(self.turn_counts)[:-1]))
        is_side = self.turn_is_customer if side == CUSTOMER else ~self.turn_is_customer
        return np.flatnonzero(is_side) - offsets[self.turn_dialogue[is_side]]

    @property
    def n_dialogues(self) -> int:
        return len(self.dialogue_ids)

    @property
    def item_ids(self) -> list[str]:
        """The kind interface's name for the dialogue ids (``scoring.kinds``)."""
        return self.dialogue_ids

    @property
    def has_quality(self) -> bool:
        return self.quality_counts is not None

    @property
    def has_nugget(self) -> bool:
        return self.customer_counts is not None

    def subset(self, dialogue_index: np.ndarray) -> Gold:
        """The gold restricted to some dialogues (indices in ascending order), turns kept in order."""
        dialogue_index = np.asarray(dialogue_index, dtype=np.int64)
        if dialogue_index.size and np.any(np.diff(dialogue_index) <= 0):
            raise ValueError("dialogue_index must be strictly increasing")
        renumber = np.full(self.n_dialogues, -1, dtype=np.int64)
        renumber[dialogue_index] = np.arange(dialogue_index.size)
        keep_customer = renumber[self.customer_dialogue] >= 0
        keep_helpdesk = renumber[self.helpdesk_dialogue] >= 0
        keep_turn = renumber[self.turn_dialogue] >= 0
        return Gold(
            config=self.config,
            dialogue_ids=[self.dialogue_ids[i] for i in dialogue_index],
            annotators=self.annotators[dialogue_index],
            turn_counts=self.turn_counts[dialogue_index],
            turn_is_customer=self.turn_is_customer[keep_turn],
            quality_counts=None if self.quality_counts is None
            else {dim: counts[dialogue_index] for dim, counts in self.quality_counts.items()},
            customer_dialogue=renumber[self.customer_dialogue[keep_customer]],
            customer_counts=None if self.customer_counts is None else self.customer_counts[keep_customer],
            helpdesk_dialogue=renumber[self.helpdesk_dialogue[keep_helpdesk]],
            helpdesk_counts=None if self.helpdesk_counts is None else self.helpdesk_counts[keep_helpdesk],
            warnings=list(self.warnings),
        )

    def to_bytes(self) -> bytes:
        """A compact binary form (NumPy .npz) for storing in a database column."""
        arrays: dict[str, np.ndarray] = {
            "config": np.array(json.dumps(self.config.to_dict())),
            "warnings": np.array(json.dumps(self.warnings)),
            "dialogue_ids": np.array(self.dialogue_ids, dtype=np.str_),
            "annotators": self.annotators,
            "turn_counts": self.turn_counts,
            "turn_is_customer": self.turn_is_customer,
            "customer_dialogue": self.customer_dialogue,
            "helpdesk_dialogue": self.helpdesk_dialogue,
        }
        if self.quality_counts is not None:
            for dim_index, dim in enumerate(self.config.quality_dimensions):
                arrays[f"quality_{dim_index}"] = self.quality_counts[dim]
        if self.customer_counts is not None:
            arrays["customer_counts"] = self.customer_counts
            arrays["helpdesk_counts"] = self.helpdesk_counts
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Gold:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            config = TaskConfig.from_dict(json.loads(str(arrays["config"])))
            quality = None
            if "quality_0" in arrays:
                quality = {dim: arrays[f"quality_{i}"] for i, dim in enumerate(config.quality_dimensions)}
            return cls(
                config=config,
                dialogue_ids=[str(x) for x in arrays["dialogue_ids"]],
                annotators=arrays["annotators"],
                turn_counts=arrays["turn_counts"],
                turn_is_customer=arrays["turn_is_customer"],
                quality_counts=quality,
                customer_dialogue=arrays["customer_dialogue"],
                customer_counts=arrays["customer_counts"] if "customer_counts" in arrays else None,
                helpdesk_dialogue=arrays["helpdesk_dialogue"],
                helpdesk_counts=arrays["helpdesk_counts"] if "helpdesk_counts" in arrays else None,
                warnings=json.loads(str(arrays["warnings"])),
            )


def _gold_from_codes(config: TaskConfig, ids: list[str], annotators: np.ndarray, turn_counts: np.ndarray,
                     is_customer: np.ndarray, quality_bins: dict[str, np.ndarray] | None,
                     quality_dialogue: np.ndarray, label_bins: np.ndarray | None,
                     label_turn: np.ndarray | None) -> Gold:
    """Count a valid gold's labels: both paths end here, so their arrays are the same.

    ``quality_bins[dim][k]`` is annotation k's bin (``quality_dialogue[k]`` its dialogue);
    ``label_bins[j]`` a nugget label's column on its side, ``label_turn[j]`` its turn in file order.
    """
    n = len(ids)
    quality_counts = None
    if quality_bins is not None:
        n_scale = len(config.quality_scale)
        quality_counts = {dim: np.bincount(quality_dialogue * n_scale + bins, minlength=n * n_scale)
                          .reshape(n, n_scale).astype(np.float64) for dim, bins in quality_bins.items()}
    customer_counts = helpdesk_counts = None
    if label_bins is not None:
        side_row = np.where(is_customer, np.cumsum(is_customer) - 1, np.cumsum(~is_customer) - 1)
        label_is_customer = is_customer[label_turn]
        counts = []
        for on_side, width, rows in ((label_is_customer, len(config.customer_nugget_types), int(is_customer.sum())),
                                     (~label_is_customer, len(config.helpdesk_nugget_types),
                                      int((~is_customer).sum()))):
            counts.append(np.bincount(side_row[label_turn[on_side]] * width + label_bins[on_side],
                                      minlength=rows * width).reshape(rows, width).astype(np.float64))
        customer_counts, helpdesk_counts = counts
    turn_dialogue = np.repeat(np.arange(n), turn_counts)
    return Gold(
        config=config,
        dialogue_ids=ids,
        annotators=annotators,
        turn_counts=turn_counts,
        turn_is_customer=is_customer,
        quality_counts=quality_counts,
        customer_dialogue=turn_dialogue[is_customer],
        customer_counts=customer_counts,
        helpdesk_dialogue=turn_dialogue[~is_customer],
        helpdesk_counts=helpdesk_counts,
        warnings=_annotator_warnings(annotators),
    )


def _annotator_warnings(annotators: np.ndarray) -> list[str]:
    if not annotators.size or annotators.min() == annotators.max():
        return []
    spread = Counter(annotators.tolist()).most_common()
    return ["annotator counts differ between dialogues ("
            + ", ".join(f"{count} annotators in {dialogues} dialogue(s)" for count, dialogues in spread)
            + "); each dialogue's labels are normalised by its own count"]


@dataclass
class Run:
    """A validated run, aligned with the gold.

    ``dialogue_index`` lists the gold dialogues the run covers, ascending. ``quality[dim]`` has
    one row per covered dialogue; ``customer``/``helpdesk`` one row per turn of the covered
    dialogues, in the gold's order. Rows are the run's raw values (normalised when scored).
    """

    dialogue_index: np.ndarray
    quality: dict[str, np.ndarray] | None
    customer: np.ndarray | None
    helpdesk: np.ndarray | None
    n_missing: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def has_quality(self) -> bool:
        return self.quality is not None

    @property
    def has_nugget(self) -> bool:
        return self.customer is not None


def _side_row(gold: Gold) -> np.ndarray:
    """For every gold turn, its row among the turns of its side."""
    is_customer = gold.turn_is_customer
    return np.where(is_customer, np.cumsum(is_customer) - 1, np.cumsum(~is_customer) - 1)


def _finish_run(
    gold: Gold, quality: dict[str, np.ndarray] | None, side_rows: dict[str, np.ndarray], covered: np.ndarray,
    position_of: np.ndarray, has_nugget: bool,
) -> Run:
    """The rows of the covered dialogues of a valid run, and its warnings (sums, missing dialogues)."""
    n = gold.n_dialogues
    dims = gold.config.quality_dimensions
    missing = np.flatnonzero(~covered)
    dialogue_index = np.flatnonzero(covered)
    keep = {CUSTOMER: covered[gold.customer_dialogue], HELPDESK: covered[gold.helpdesk_dialogue]}
    # Where each row came from in the file, so sum warnings can name a JSON path.
    blocks: list[tuple[np.ndarray, Callable[[int], str]]] = []
    if quality is not None:
        for dim in dims:
            quality[dim] = quality[dim][dialogue_index]
            blocks.append((quality[dim],
                           lambda row, dim=dim: f"[{position_of[dialogue_index[row]]}].quality.{dim}"))
    if has_nugget:
        for side, dialogue_of_row in ((CUSTOMER, gold.customer_dialogue), (HELPDESK, gold.helpdesk_dialogue)):
            side_rows[side] = side_rows[side][keep[side]]
            turn_numbers = gold.side_turn_numbers(side)[keep[side]]
            rows_dialogue = dialogue_of_row[keep[side]]
            blocks.append((side_rows[side], lambda row, rows_dialogue=rows_dialogue, turn_numbers=turn_numbers:
                           f"[{position_of[rows_dialogue[row]]}].nugget[{turn_numbers[row]}]"))
    warnings = _sum_warnings(blocks)
    if missing.size:
        warnings.insert(0, f"{missing.size} of the {n} gold dialogue(s) are missing from the run; "
                           f"scored on the {dialogue_index.size} it contains")
    return Run(
        dialogue_index=dialogue_index,
        quality=quality,
        customer=side_rows[CUSTOMER] if has_nugget else None,
        helpdesk=side_rows[HELPDESK] if has_nugget else None,
        n_missing=int(missing.size),
        warnings=warnings,
    )


def _sum_warnings(blocks: list[tuple[np.ndarray, Callable[[int], str]]]) -> list[str]:
    """Sums that are neither ~1 nor whole-number counts are warnings (all-zero rows are refused by a rule)."""
    suspicious: list[str] = []
    n_suspicious = 0
    for rows, path_of in blocks:
        if not rows.size:
            continue
        with np.errstate(over="ignore"):  # two values of 1e308: the sum is infinite, the row is fine
            sums = rows.sum(axis=1)
        counts = np.all(rows == np.floor(rows), axis=1)
        odd = np.flatnonzero(~counts & (np.abs(sums - 1.0) > SUM_TOLERANCE) & (sums > 0))
        n_suspicious += odd.size
        suspicious.extend(f"{path_of(row)} (sum {_sum_label(sums[row])})"
                          for row in odd[: max(0, 5 - len(suspicious))])
    if not n_suspicious:
        return []
    return [f"{n_suspicious} distribution(s) sum to neither 1 (probabilities) nor whole counts; they were "
            f"normalised by their sums, which may hide a mistake: " + ", ".join(suspicious)
            + (" ..." if n_suspicious > len(suspicious) else "")]


def _sum_label(total: float) -> str:
    """A row's sum for a message: an overflowed sum is said in words, never as ``inf``."""
    return f"{total:.6g}" if math.isfinite(total) else "over 1.8e308"


def restrict(run: Run, gold: Gold, dialogue_index: np.ndarray) -> tuple[Run, Gold]:
    """A run and its gold cut down to some gold dialogues (ascending indices into ``gold``).

    Used for the live leaderboard of a test phase, which scores a fixed subset of the test
    dialogues; the run must cover all of them.
    """
    dialogue_index = np.asarray(dialogue_index, dtype=np.int64)
    position = np.full(gold.n_dialogues, -1, dtype=np.int64)
    position[run.dialogue_index] = np.arange(run.dialogue_index.size)
    rows = position[dialogue_index]
    if (rows < 0).any():
        raise ValueError("the run does not cover every dialogue of the subset")
    covered_gold = gold.subset(run.dialogue_index) if run.n_missing else gold
    keep = np.zeros(covered_gold.n_dialogues, dtype=bool)
    keep[rows] = True
    subset = Run(
        dialogue_index=np.arange(dialogue_index.size),
        quality=None if run.quality is None else {dim: values[rows] for dim, values in run.quality.items()},
        customer=None if run.customer is None else run.customer[keep[covered_gold.customer_dialogue]],
        helpdesk=None if run.helpdesk is None else run.helpdesk[keep[covered_gold.helpdesk_dialogue]],
        warnings=list(run.warnings),
    )
    return subset, covered_gold.subset(rows)
