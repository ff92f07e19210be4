"""BERTScore (Zhang et al. 2020) and weighted BERTScore (Tsuta et al. 2023, section 4.3, eq. 11-12).

For a candidate h (token vectors h_j) and a reference r (token vectors r_i) with weight w, all
vectors of unit length so that r_i . h_j is their cosine (Tsuta et al. 2023, eq. 5-7, 11-12):

    P(h, r) = 1/|h| * sum_j max_i  w * r_i . h_j        (precision: every candidate token finds its best match)
    R(h, r) = 1/|r| * sum_i max_j  w * r_i . h_j        (recall: every reference token finds its best match)
    F(h, r) = 2 P R / (P + R)

With several references the item's score is the best F over them (Tsuta et al. 2023, section 3.3,
following Zhang et al. 2020, section 4). With every weight 1 this is BERTScore; vBERTScore is the
same over the references vBLEU retrieved and rated, with their weights. Because w multiplies inside
the max, a negative weight turns each max into w times the *smallest* cosine: P and R are then
negative, and so is F, so a negatively rated reference never wins the maximum unless every
reference is negative. When P and R have opposite signs (possible only with negative cosines) or
sum to 0, the harmonic mean means nothing and F is 0.

Raw F of this encoder is compressed (unrelated texts still score about 0.8), so the headline is
rescaled with a baseline b as in Zhang et al. 2020 (section 6): F' = (F - b) / (1 - b), where b is the
mean F of shuffled pairs of texts of the same language (``baseline``): 0 for texts as unrelated as
random ones, 1 for identical texts. b is stored beside the scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["PreparedBertReferences", "TokenEncoder", "baseline", "encode_distinct", "pair_scores", "prepare_references",
           "references_from_texts", "rescale", "score_items"]

BASELINE_PAIRS = 1000  # shuffled pairs behind b: its standard error is then about 0.002
BASELINE_SEED = 20230


@dataclass(frozen=True)
class PreparedBertReferences:
    """Every reference's unit token vectors stacked, with where each reference and each item starts."""

    vectors: np.ndarray  # (total reference tokens, d) float32
    token_offsets: np.ndarray  # (references + 1,) int64: reference k owns rows token_offsets[k]:token_offsets[k+1]
    item_offsets: np.ndarray  # (items + 1,) int64: item i owns references item_offsets[i]:item_offsets[i+1]
    weights: np.ndarray  # (references,) float64

    def item_references(self, item: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Item ``item``'s reference rows, their per-reference starts (relative, with the end) and weights."""
        first, last = self.item_offsets[item], self.item_offsets[item + 1]
        starts = self.token_offsets[first:last + 1]
        return self.vectors[starts[0]:starts[-1]], starts - starts[0], self.weights[first:last]


def prepare_references(token_vectors: Sequence[np.ndarray], weights: Sequence[float], counts: Sequence[int],
                       dtype: type = np.float32) -> PreparedBertReferences:
    """Stack the references' token vectors; ``counts[i]`` references belong to item i, in order.

    ``dtype``: how they are kept (the server keeps float16: a vBLEU-extended gold of 10^4 items has
    about 1.6 * 10^5 references, 3 * 10^6 token vectors, 2.3 GB as float16; cosines are computed in
    float64 from them)."""
    if len(token_vectors) != len(weights) or sum(counts) != len(weights):
        raise ValueError("token vectors, weights and per-item counts disagree")
    if any(len(vectors) == 0 for vectors in token_vectors):
        raise ValueError("every reference needs at least one token vector")
    if any(count < 1 for count in counts):
        raise ValueError("every item needs at least one reference")
    lengths = np.array([len(vectors) for vectors in token_vectors], dtype=np.int64)
    dimension = token_vectors[0].shape[1] if token_vectors else 0
    stacked = np.concatenate(token_vectors).astype(dtype) if token_vectors else np.zeros((0, dimension), dtype)
    return PreparedBertReferences(stacked, np.concatenate([[0], np.cumsum(lengths)]),
                                  np.concatenate([[0], np.cumsum(np.asarray(counts, dtype=np.int64))]),
                                  np.asarray(weights, dtype=np.float64))


def pair_scores(candidate: np.ndarray, references: np.ndarray, starts: np.ndarray, weights: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P, R and F (eq. 11-12, 7) of one candidate against each reference, in one matrix product.

    ``references`` stacks the references' rows; reference k owns rows ``starts[k]:starts[k+1]``.
    """
    # Cosines in float64 from re-normalised rows, clipped to [-1, 1]: a text against itself gives exactly 1.
    reference_rows = np.asarray(references, dtype=np.float64)
    candidate_rows = np.asarray(candidate, dtype=np.float64)
    reference_rows = reference_rows / np.maximum(np.linalg.norm(reference_rows, axis=1, keepdims=True), 1e-12)
    candidate_rows = candidate_rows / np.maximum(np.linalg.norm(candidate_rows, axis=1, keepdims=True), 1e-12)
    similarity = np.clip(reference_rows @ candidate_rows.T, -1.0, 1.0)  # (reference tokens, candidate tokens)
    bounds = starts[:-1]
    lengths = np.diff(starts)
    # Per reference: each candidate token's best and worst cosine (a negative weight turns max into min).
    column_max = np.maximum.reduceat(similarity, bounds, axis=0)  # (references, candidate tokens)
    column_min = np.minimum.reduceat(similarity, bounds, axis=0)
    row_max = similarity.max(axis=1)  # each reference token's best candidate token
    row_min = similarity.min(axis=1)
    positive = weights >= 0
    precision = weights * np.where(positive[:, None], column_max, column_min).mean(axis=1)
    per_row = np.where(np.repeat(positive, lengths), row_max, row_min)
    recall = weights * np.add.reduceat(per_row, bounds) / lengths
    total = precision + recall
    same_sign = (precision * recall > 0) & (total != 0)
    f = np.where(same_sign, 2.0 * precision * recall / np.where(same_sign, total, 1.0), 0.0)
    return precision, recall, f


def score_items(candidates: Sequence[np.ndarray], prepared: PreparedBertReferences, items: Sequence[int]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw P, R and F per item: those of the reference with the best F (eq. 11-12 and section 3.3)."""
    out = np.zeros((3, len(items)), dtype=np.float64)
    for row, (candidate, item) in enumerate(zip(candidates, items)):
        references, starts, weights = prepared.item_references(int(item))
        precision, recall, f = pair_scores(candidate, references, starts, weights)
        best = int(np.argmax(f))
        out[:, row] = precision[best], recall[best], f[best]
    return out[0], out[1], out[2]


def baseline(texts: Sequence[np.ndarray]) -> tuple[float, int]:
    """b: the mean F of texts paired with other texts (a fixed shuffle, every pair of two different texts).

    Returns (b, pairs). Fewer than two texts give no pair: b = 0 (no rescaling), pairs = 0.
    """
    n = len(texts)
    if n < 2:
        return 0.0, 0
    rng = np.random.default_rng(BASELINE_SEED)
    order = rng.permutation(n)[:min(n, BASELINE_PAIRS + 1)]
    # Each chosen text against the next chosen one (a cycle): no text meets itself.
    values = []
    one = np.array([0, 0], dtype=np.int64)
    weight = np.ones(1)
    for a, b in zip(order, np.roll(order, -1)):
        if len(order) == 2 and a > b:
            break
        one[1] = len(texts[b])
        values.append(pair_scores(texts[a], texts[b], one, weight)[2][0])
    return float(np.mean(values)), len(values)


def rescale(f: np.ndarray, b: float) -> np.ndarray:
    """(F - b) / (1 - b): Zhang et al. 2020's baseline rescaling (b < 1)."""
    if not b < 1.0:
        raise ValueError(f"a baseline must be below 1, got {b}")
    return (np.asarray(f, dtype=np.float64) - b) / (1.0 - b)


class TokenEncoder(Protocol):
    def encode(self, texts: Sequence[str], layer: int | None = None) -> list[np.ndarray]: ...


def encode_distinct(encoder: TokenEncoder, texts: Sequence[str], layer: int | None) -> list[np.ndarray]:
    """Token vectors of ``texts``, each distinct text encoded once (references repeat across items)."""
    distinct = list(dict.fromkeys(texts))
    vectors = dict(zip(distinct, encoder.encode(distinct, layer)))
    return [vectors[text] for text in texts]


def references_from_texts(encoder: TokenEncoder, references: Sequence[Sequence[tuple[str, float]]],
                          layer: int | None, *, weighted: bool) -> PreparedBertReferences:
    """BERTScore's references (``weighted=False``: those rated above 0, each with weight 1) or
    vBERTScore's (``weighted=True``: every reference with its weight)."""
    chosen = [[(text, weight if weighted else 1.0) for text, weight in item if weighted or weight > 0]
              for item in references]
    texts = [text for item in chosen for text, _ in item]
    return prepare_references(encode_distinct(encoder, texts, layer), [w for item in chosen for _, w in item],
                              [len(item) for item in chosen])
