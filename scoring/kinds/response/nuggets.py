"""Nugget-level scores NS(T, n) from a turn-level measure (seed 004, Section 4, eq. 1-4; RESPONSE-SPEC.md).

A response turn T is a sequence of nuggets (a span with one dialogue act). With s(.) a per-item
response measure (default POSSCORE) computed against the item's references::

    D_phi(T, n)   = s(T) - s(T with n deleted)                                        (eq. 1)
    MD_diff(T, n) = mean over the top K scores s of s(T with n -> n_diff) of s(T) - s   (eq. 2)
    MD_same(T, n) = mean over the top L scores s of s(T with n -> n_same) of s(T) - s   (eq. 3)
    NS(T, n)      = sigmoid(w_phi D_phi + w_diff MD_diff + w_same MD_same)             (eq. 4)

Defaults K = 5, L = 3, weights 10, 5, 2. NS is in (0, 1); above 0.5 the nugget helps the turn.
Fallbacks: fewer than K (L) alternatives: the mean over all there are; none: the term is left
out (its component is None); no nuggets given: the response is split into sentences (spaCy's
rule-based sentencizer) and scored by D_phi alone.

Cost: every variant of every turn of a run is scored in one pass. Texts are encoded once per
distinct nugget or alternative (for POSSCORE one ``nlp.pipe`` call over all of them: **tags are
taken per nugget**, not per turn), and a variant turn is put together from its nuggets' encodings:
POSSCORE rows add up, BLEU token lists are concatenated. s(T) is computed the same way, so
D_phi compares like with like.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from scoring.kinds.response import bleu as bleu_module
from scoring.kinds.response import posscore as posscore_module

# A response without nuggets is split into sentences for D_phi; past this many, the rest of the
# response is the last piece (the same bound as nuggets per response, so a 10,000-character
# "a. a. a. ..." cannot cost the square of 5,000 sentences).
MAX_SENTENCE_NUGGETS = 100

# Seed 004, Table 1: the default taxonomy of dialogue acts of open-domain response nuggets.
ACTS_SEED004: tuple[str, ...] = (
    "Agreement", "Disagreement", "Yes Answer", "No Answer", "Opening", "Closing", "Apology", "Thanking",
    "Rejection", "Applause", "Declarative Question", "Confusion", "Reasoning", "Downplayer", "Assumption",
    "Acknowledgment", "Clarification", "Non-Declarative Question", "User instruction", "Recommendation",
    "Citation", "Example", "Commissive", "Opinion",
)


@dataclass(frozen=True)
class NuggetConfig:
    """K, L, the three weights and the act taxonomy of a task (defaults: seed 004)."""

    k: int = 5
    l: int = 3  # noqa: E741 - the seed's name
    w_phi: float = 10.0
    w_diff: float = 5.0
    w_same: float = 2.0
    acts: tuple[str, ...] = ACTS_SEED004

    def __post_init__(self) -> None:
        for name in ("k", "l"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name.upper()} must be a positive integer, not {value!r}")
        for name in ("w_phi", "w_diff", "w_same"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, not {value!r}")
        if not self.acts or len(set(self.acts)) != len(self.acts) or not all(
            isinstance(act, str) and act.strip() for act in self.acts
        ):
            raise ValueError("the act taxonomy must be a non-empty list of distinct, non-empty names")

    def settings(self) -> dict[str, object]:
        return {"K": self.k, "L": self.l, "w_phi": self.w_phi, "w_diff": self.w_diff, "w_same": self.w_same,
                "acts": list(self.acts)}


@dataclass(frozen=True)
class NuggetScore:
    """One nugget's components (None where a fallback left the term out) and NS."""

    text: str
    act: str | None
    d_phi: float
    md_diff: float | None
    md_same: float | None
    ns: float

    def as_dict(self) -> dict[str, object]:
        return {"text": self.text, "act": self.act, "D_phi": self.d_phi, "MD_diff": self.md_diff,
                "MD_same": self.md_same, "NS": self.ns}


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def _mean_top(s_turn: float, scores: Sequence[float], top: int) -> float | None:
    if len(scores) == 0:
        return None
    best = sorted((float(s) for s in scores), reverse=True)[:top]
    return sum(s_turn - s for s in best) / len(best)


def nugget_score(
    s_turn: float, s_deleted: float, s_diff: Sequence[float], s_same: Sequence[float], config: NuggetConfig,
    text: str = "", act: str | None = None,
) -> NuggetScore:
    """Eq. 1-4 from the turn's score, the score with the nugget deleted and the alternatives' scores."""
    d_phi = float(s_turn - s_deleted)
    md_diff = _mean_top(s_turn, s_diff, config.k)
    md_same = _mean_top(s_turn, s_same, config.l)
    total = config.w_phi * d_phi
    if md_diff is not None:
        total += config.w_diff * md_diff
    if md_same is not None:
        total += config.w_same * md_same
    return NuggetScore(text, act, d_phi, md_diff, md_same, _sigmoid(total))


@dataclass
class Nugget:
    """A span of a response with its act, and the alternatives written for it (texts)."""

    text: str
    act: str | None = None
    diff: tuple[str, ...] = ()
    same: tuple[str, ...] = ()


@dataclass
class Turn:
    """One response to score: its item (row of the prepared references) and its nuggets, or None."""

    item: int
    response: str
    nuggets: list[Nugget] | None = None


class TurnMeasure(Protocol):
    """A per-item response measure able to score turns put together from separately encoded pieces."""

    def encode(self, texts: Sequence[str]) -> object:
        """Encode every text once (one batch)."""

    def score(self, encoded: object, items: np.ndarray, turns: list[list[int]]) -> np.ndarray:
        """Score each turn (a list of indices into ``encoded``) against its item's references."""


@dataclass
class PosscoreTurns:
    """POSSCORE as a turn measure: a turn's row is the sum of its pieces' rows."""

    encoder: posscore_module.PosEncoder
    prepared: posscore_module.PreparedReferences

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.encoder.encode(texts)

    def score(self, encoded: np.ndarray, items: np.ndarray, turns: list[list[int]]) -> np.ndarray:
        from scipy import sparse

        lengths = np.array([len(turn) for turn in turns], dtype=np.int64)
        columns = np.fromiter((piece for turn in turns for piece in turn), dtype=np.int64, count=int(lengths.sum()))
        rows = np.repeat(np.arange(len(turns)), lengths)
        composition = sparse.csr_matrix((np.ones(len(columns)), (rows, columns)), shape=(len(turns), len(encoded)))
        # The variant turns' rows are put together a chunk at a time (65,000 turns x 604 columns
        # would be 315 MB at once).
        chunk = posscore_module.SCORE_CHUNK
        return np.concatenate([
            posscore_module.score_rows(np.asarray(composition[start : start + chunk] @ encoded), self.prepared,
                                       items[start : start + chunk])
            for start in range(0, len(turns), chunk)]) if turns else np.zeros(0)


@dataclass
class BleuTurns:
    """A BLEU-family measure as a turn measure (per-item, smoothed): pieces' tokens are concatenated."""

    prepared: bleu_module.PreparedReferences

    def encode(self, texts: Sequence[str]) -> list[list[str]]:
        config = self.prepared.config
        return [bleu_module.tokenize(text, config.lowercase, config.tokenizer) for text in texts]

    def score(self, encoded: list[list[str]], items: np.ndarray, turns: list[list[int]]) -> np.ndarray:
        hypotheses = [[token for piece in turn for token in encoded[piece]] for turn in turns]
        stats = bleu_module.sufficient_statistics(hypotheses, self.prepared, items)
        return bleu_module.item_scores(stats, self.prepared.config.max_order, self.prepared.config.brevity)


# Variants are scored a batch at a time: at most this many pieces (nugget references) or this many
# characters of variant text per batch. Memory is then bounded by the batch, not by the square of
# a turn's nugget count (7,500 one-character nuggets were 56 million pieces and 2.8 GB at once).
BATCH_PIECES = 65_536
BATCH_CHARACTERS = 500_000
# Distinct texts encoded at once: a group of turns is encoded together, at least one turn.
GROUP_TEXTS = 8_192


def _variants(turn_pieces: list[int], nuggets: Sequence[Nugget], index: dict[str, int]
              ) -> Iterator[list[int]]:
    """The turn T itself, then per nugget: T without it, T with each diff, then each same alternative."""
    yield turn_pieces
    for position, nugget in enumerate(nuggets):
        before, after = turn_pieces[:position], turn_pieces[position + 1 :]
        yield before + after
        for text in (*nugget.diff, *nugget.same):
            yield before + [index[text]] + after


def variant_count(nuggets: Sequence[Nugget]) -> int:
    """How many variant turns ``score_nuggets`` scores for a turn with these nuggets."""
    return 1 + sum(1 + len(nugget.diff) + len(nugget.same) for nugget in nuggets)


def _score_batches(measure: TurnMeasure, encoded: object, lengths: list[int],
                   variants: Iterable[tuple[int, list[int]]]) -> np.ndarray:
    """One score per variant, scoring them a bounded batch at a time."""
    scores: list[np.ndarray] = []
    batch: list[list[int]] = []
    items: list[int] = []
    pieces = characters = 0
    for item, variant in variants:
        batch.append(variant)
        items.append(item)
        pieces += len(variant)
        characters += sum(lengths[piece] for piece in variant)
        if pieces >= BATCH_PIECES or characters >= BATCH_CHARACTERS:
            scores.append(np.asarray(measure.score(encoded, np.array(items, dtype=np.int64), batch), dtype=np.float64))
            batch, items, pieces, characters = [], [], 0, 0
    if batch:
        scores.append(np.asarray(measure.score(encoded, np.array(items, dtype=np.int64), batch), dtype=np.float64))
    return np.concatenate(scores) if scores else np.zeros(0)


def score_nuggets(
    turns: Sequence[Turn], measure: TurnMeasure, config: NuggetConfig | None = None, nlp: object | None = None,
) -> list[list[NuggetScore]]:
    """NS for every nugget of every turn.

    Turns are taken in groups whose distinct texts are encoded in one ``measure.encode`` call; a
    group's variant turns are generated lazily and scored a bounded batch at a time, so only one
    score per variant is kept. Within a group, texts are numbered in the order they first appear
    in the whole call, so a variant's pieces are summed in the same order as when every variant
    was scored at once: the scores are bit-identical to that.

    Turns without nuggets are split into sentences with ``nlp`` (default: the task pipeline's
    sentencizer) and get D_phi alone; past ``MAX_SENTENCE_NUGGETS`` sentences, the rest of the
    response is the last piece.
    """
    config = config or NuggetConfig()
    unsplit = [index for index, turn in enumerate(turns) if turn.nuggets is None]
    split: dict[int, list[Nugget]] = {}
    if unsplit:
        from scoring.kinds.response.nlp import load_pipeline, sentences

        pieces = sentences([turns[index].response for index in unsplit], nlp or load_pipeline())
        split = {index: [Nugget(text) for text in _capped(texts)] for index, texts in zip(unsplit, pieces)}

    all_nuggets = [split.get(index, turn.nuggets) or [] for index, turn in enumerate(turns)]
    # Every distinct text's number in order of first appearance (what one batch would have used).
    order: dict[str, int] = {}
    for nuggets in all_nuggets:
        for nugget in nuggets:
            order.setdefault(nugget.text, len(order))
        for nugget in nuggets:
            for text in (*nugget.diff, *nugget.same):
                order.setdefault(text, len(order))

    scores_by_turn: list[np.ndarray] = []
    start = 0
    while start < len(turns):
        stop, texts = start, set()
        while stop < len(turns) and (stop == start or len(texts) < GROUP_TEXTS):
            for nugget in all_nuggets[stop]:
                texts.add(nugget.text)
                texts.update(nugget.diff)
                texts.update(nugget.same)
            stop += 1
        local = sorted(texts, key=order.__getitem__)
        index = {text: position for position, text in enumerate(local)}
        encoded = measure.encode(local) if local else None
        lengths = [len(text) for text in local]
        counts = [variant_count(nuggets) if nuggets else 0 for nuggets in all_nuggets[start:stop]]
        flat = _score_batches(measure, encoded, lengths, (
            (turns[position].item, variant)
            for position in range(start, stop) if all_nuggets[position]
            for variant in _variants([index[n.text] for n in all_nuggets[position]], all_nuggets[position], index)))
        offset = 0
        for count in counts:
            scores_by_turn.append(flat[offset : offset + count])
            offset += count
        start = stop

    results = []
    for nuggets, scores in zip(all_nuggets, scores_by_turn):
        if not nuggets:
            results.append([])
            continue
        s_turn = float(scores[0])
        scored = []
        cursor = 1
        for nugget in nuggets:
            deleted = float(scores[cursor])
            diff = scores[cursor + 1 : cursor + 1 + len(nugget.diff)].tolist()
            same_start = cursor + 1 + len(nugget.diff)
            same = scores[same_start : same_start + len(nugget.same)].tolist()
            cursor = same_start + len(nugget.same)
            scored.append(nugget_score(s_turn, deleted, diff, same, config, text=nugget.text, act=nugget.act))
        results.append(scored)
    return results


def _capped(texts: list[str]) -> list[str]:
    """At most ``MAX_SENTENCE_NUGGETS`` sentences: the rest of the response joins the last one."""
    if len(texts) <= MAX_SENTENCE_NUGGETS:
        return texts
    return [*texts[: MAX_SENTENCE_NUGGETS - 1], " ".join(texts[MAX_SENTENCE_NUGGETS - 1 :])]


def act_means(results: Sequence[Sequence[NuggetScore]]) -> dict[str, float]:
    """Mean NS per dialogue act over a run (nuggets from the sentence fallback have no act)."""
    totals: dict[str, list[float]] = {}
    for turn in results:
        for nugget in turn:
            if nugget.act is not None:
                totals.setdefault(nugget.act, []).append(nugget.ns)
    return {act: sum(values) / len(values) for act, values in sorted(totals.items())}
