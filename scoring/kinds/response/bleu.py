"""BLEU and deltaBLEU from per-item sufficient statistics (seed 001, eq. 1-4; RESPONSE-SPEC.md).

For item i with hypothesis h_i and references r_ij weighted w_ij in [-1, 1], and n-gram order n
(g ranges over the distinct n-grams of h_i; ``#g(u)`` counts g in u; ``#g(u, v) = min(#g(u), #g(v))``)::

    num_n = sum_i sum_g  max_{j : g in r_ij} { w_ij * #g(h_i, r_ij) }    (0 if no reference holds g)
    den_n = sum_i sum_g  max_j { w_ij * #g(h_i) }                         (= #g(h_i) * max_j w_ij)
    p_n   = num_n / den_n ;   score = BP * exp( sum_{n=1..N} log(p_n) / N )
    BP    = 1 if eta > rho else exp(1 - rho / eta)                        (eq. 2)

With every weight 1 this is BLEU (Papineni et al. 2002; seed 001 eq. 3). eta is the hypothesis
length and rho the reference length, summed over items: ``brevity="average"`` takes each item's
mean reference length (the seed's definition: averages over the corpus have the same ratio as
sums), ``brevity="closest"`` the reference length closest to the hypothesis, ties to the shorter
(sacrebleu's choice). Only the item's original references rated appropriate (weight > 0) set rho
by default (RESPONSE-SPEC.md, "Which references set rho"); ``brevity_references="all"`` lets every
used reference set it, as eq. 2 read literally does. A g found only in negatively weighted
references contributes a negative amount (eq. 4). Range: [0, 1] with non-negative weights; higher is better.

Every item is reduced to one row of float64 *sufficient statistics* (``statistic_names``), so the
corpus score of any subset of items (a live subset, a bootstrap resample, a per-act breakdown) is
``corpus_score(stats[subset].sum(axis=0))`` exactly, and the per-item score is the same formula
on one row with add-one smoothing for n >= 2 (Lin and Och 2004). This is sacrebleu's
``metrics/base.py`` design.

Tokenisation: sacrebleu's tokeniser of the task's language (``13a``, mteval-v13a, for English;
``zh``; ``ja-mecab``; ``char`` or ``intl`` for other languages), lower-cased first by default.
"""

from __future__ import annotations

import copy
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:  # sacrebleu takes 0.2 s to import: the DQ/ND score command never pays for it
    from collections.abc import Callable

Brevity = Literal["average", "closest"]
BREVITY_CHOICES: tuple[str, ...] = ("average", "closest")
BrevityReferences = Literal["positive", "all"]
# Which references set rho (RESPONSE-SPEC.md, "Which references set rho"): "positive", the item's
# original references rated appropriate (weight > 0), or "all" used references (eq. 2 read
# literally, as Galley's and seed 001's code do; kept for replication).
BREVITY_REFERENCE_CHOICES: tuple[str, ...] = ("positive", "all")
# sacrebleu's own tokenisers, one per task language (RESPONSE-SPEC.md, "Languages"): with the same
# tokeniser, corpus BLEU equals sacrebleu's. "ja-mecab" needs mecab-python3 and ipadic (pinned
# packages, the dictionary inside the wheel: nothing is downloaded).
# Another language a task declares gets "char" (every character a token: a script written without
# spaces, Thai, Lao, Khmer, Burmese) or "intl" (words and punctuation by Unicode classes: any
# language written with spaces); scoring.kinds.response.languages chooses.
TOKENIZERS: tuple[str, ...] = ("13a", "zh", "ja-mecab", "char", "intl")


@dataclass(frozen=True)
class BleuConfig:
    """One BLEU-family measure: n-gram order, brevity penalty, tokenisation, which references count.

    ``weighted=False`` is plain BLEU: every used reference counts with weight 1.
    ``min_weight``: references whose weight is not above it are left out (plain BLEU leaves out the
    references the organisers rated inappropriate, weight <= 0); deltaBLEU keeps them all, since
    its negative weights are the point (eq. 4).
    ``brevity_references``: which references set rho, the reference length of the brevity penalty.
    ``"positive"`` (default): the item's original references with weight > 0 only; a bad reply's
    length says nothing about how long a good one should be, and over all references a response
    identical to its only positive reference scored below 0.5 in 279 of 1,500 real helpdesk items.
    ``"all"``: every used reference, negative and vBLEU-added ones included (eq. 2 read literally).
    """

    max_order: int = 4
    brevity: Brevity = "closest"
    lowercase: bool = True
    weighted: bool = False
    min_weight: float | None = 0.0
    brevity_references: BrevityReferences = "positive"
    tokenizer: str = "13a"

    def __post_init__(self) -> None:
        if not isinstance(self.max_order, int) or not 1 <= self.max_order <= 9:
            raise ValueError(f"max_order must be an integer from 1 to 9, not {self.max_order!r}")
        if self.brevity not in BREVITY_CHOICES:
            raise ValueError(f"brevity must be one of {', '.join(BREVITY_CHOICES)}, not {self.brevity!r}")
        if self.brevity_references not in BREVITY_REFERENCE_CHOICES:
            raise ValueError(f"brevity_references must be one of {', '.join(BREVITY_REFERENCE_CHOICES)}, "
                             f"not {self.brevity_references!r}")
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {', '.join(TOKENIZERS)}, not {self.tokenizer!r}")

    def settings(self) -> dict[str, object]:
        return {
            "max_order": self.max_order,
            "brevity": self.brevity,
            "lowercase": self.lowercase,
            "weighted": self.weighted,
            "min_weight": self.min_weight,
            "brevity_references": self.brevity_references,
            "tokenize": self.tokenizer,
            "per_item_smoothing": "add-one for n >= 2 (Lin and Och 2004)",
        }


# The two official measures of the response kind (RESPONSE-SPEC.md).
BLEU = BleuConfig(max_order=4, brevity="closest", weighted=False, min_weight=0.0)
DELTA_BLEU = BleuConfig(max_order=2, brevity="average", weighted=True, min_weight=None)




class TokenizerUnavailable(RuntimeError):
    """A tokeniser whose packages are not installed on this machine."""


@cache
def _tokenizer(name: str = "13a") -> Callable[[str], str]:
    if name == "13a":
        from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

        return Tokenizer13a()
    if name == "zh":
        from sacrebleu.tokenizers.tokenizer_zh import TokenizerZh

        return TokenizerZh()
    if name == "char":
        from sacrebleu.tokenizers.tokenizer_char import TokenizerChar

        return TokenizerChar()
    if name == "intl":
        from sacrebleu.tokenizers.tokenizer_intl import TokenizerV14International

        return TokenizerV14International()
    if name == "ja-mecab":
        try:
            from sacrebleu.tokenizers.tokenizer_ja_mecab import TokenizerJaMecab

            return TokenizerJaMecab()
        except (ImportError, RuntimeError) as error:
            raise TokenizerUnavailable(f"the ja-mecab tokeniser needs the packages mecab-python3 and ipadic "
                                       f"(pip install mecab-python3 ipadic): {error}") from None
    raise ValueError(f"tokenizer must be one of {', '.join(TOKENIZERS)}, not {name!r}")


def _unmemoised(tokenizer: object) -> Callable[[str], str]:
    call = getattr(type(tokenizer).__call__, "__wrapped__", None)
    return partial(call, tokenizer) if call is not None else tokenizer  # type: ignore[return-value]


@cache
def _unmemoised_function(name: str) -> Callable[[str], str]:
    """The tokeniser's own function without sacrebleu's memos: the same tokens for the same text."""
    tokenizer = copy.copy(_tokenizer(name))
    post = getattr(tokenizer, "_post_tokenizer", None)
    if post is not None:
        tokenizer._post_tokenizer = _unmemoised(post)  # type: ignore[attr-defined]
    return _unmemoised(tokenizer)


def tokenize(text: str, lowercase: bool = True, tokenizer: str = "13a", *, memo: bool = True) -> list[str]:
    """sacrebleu's tokenisation (``13a``, ``zh`` or ``ja-mecab``), lower-casing first as sacrebleu's
    ``lowercase=True`` does.

    ``memo=False`` for texts seen once, a run's responses: every sacrebleu tokeniser (and the
    regular-expression step of 13a and zh) keeps its last 65,536 inputs and outputs, shared by
    the process, which in a long-lived worker held past runs' responses (up to 10,000 characters
    each: gigabytes) and made scoring a 30 MB run grow by 150 MB that stayed. References and pool
    texts, tokenised again and again (three BLEU-family tables, vBLEU's retrieval and rater), keep
    the memo."""
    if lowercase:
        text = text.lower()
    return (_tokenizer(tokenizer) if memo else _unmemoised_function(tokenizer))(text).split()


def statistic_names(max_order: int) -> list[str]:
    """Column names of the sufficient-statistics array."""
    return (
        [f"num_{n}" for n in range(1, max_order + 1)]
        + [f"den_{n}" for n in range(1, max_order + 1)]
        + ["hyp_len", "closest_ref_len", "average_ref_len"]
    )


def _ngrams(tokens: Sequence[str], max_order: int) -> list[Counter]:
    # zip over shifted views builds the n-gram tuples in C, several times faster than slicing.
    return [Counter(zip(*[tokens[k:] for k in range(n)])) for n in range(1, max_order + 1)]


@dataclass
class PreparedReferences:
    """The references of every item, tokenised and counted once per gold version, as flat arrays.

    One entry per (item, reference, distinct n-gram of that reference): ``keys`` (sorted) identify
    the item and the n-gram, ``weights`` and ``counts`` are the reference's weight and the n-gram's
    count in it. Plain BLEU keeps one entry per (item, n-gram), its largest count, all that clipping
    needs. ``lengths[i]`` are the lengths of item i's references that set rho; ``max_weight[i]`` its largest weight. A
    gold of 10,000 items with 3 references takes about 50 MB (Python dicts of n-gram tuples took
    300-400 MB per measure).

    A key is Python's hash of ``(item, n-gram)``: exact unless two distinct n-grams of one item
    collide in 64 bits, and valid only in the process that built it (string hashes are salted per
    process), which is where prepared references live.
    """

    config: BleuConfig
    keys: np.ndarray
    weights: np.ndarray
    counts: np.ndarray
    lengths: list[np.ndarray]
    max_weight: np.ndarray
    _groups: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.max_weight)

    def groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The distinct keys, where each one's entries start and how many there are."""
        if self._groups is None:
            starts = np.flatnonzero(np.r_[True, self.keys[1:] != self.keys[:-1]]) if len(self.keys) else \
                np.zeros(0, dtype=np.int64)
            sizes = np.diff(np.r_[starts, len(self.keys)])
            self._groups = (self.keys[starts], starts, sizes)
        return self._groups


def _gram_keys(item: int, counts: Counter) -> list[int]:
    return [hash((item, gram)) for gram in counts]


def prepare_references(
    references: Sequence[Sequence[tuple[str, float]]], config: BleuConfig,
    added: Sequence[Sequence[tuple[str, float, str]]] | None = None,
) -> PreparedReferences:
    """Tokenise and count the references of every item: ``references[i]`` = ``[(text, weight), ...]``,
    the item's original references, and ``added[i]`` = ``[(text, weight, origin), ...]`` those vBLEU
    added (scored like the others, but never setting rho).

    Raises ValueError when an item has no usable reference, or no positively rated original one
    when those set rho (validation prevents both for gold files).
    """
    # Typed arrays, not lists: 3 million Python ints would hold 100 MB more while preparing.
    keys = array("q")
    weights = array("d")
    counts = array("i")
    lengths: list[np.ndarray] = []
    max_weights = np.empty(len(references), dtype=np.float64)
    if added is not None and len(added) != len(references):
        raise ValueError(f"{len(added)} lists of added references for {len(references)} items")
    for index, item_references in enumerate(references):
        candidates = [(text, weight, True) for text, weight in item_references]
        if added is not None:
            candidates += [(text, weight, False) for text, weight, _ in added[index]]
        # (text, weight used in eq. 4, whether it sets rho)
        used = [
            (text, float(weight) if config.weighted else 1.0,
             config.brevity_references == "all" or (original and weight > 0))
            for text, weight, original in candidates
            if config.min_weight is None or weight > config.min_weight
        ]
        if not used:
            raise ValueError(f"item {index} has no reference usable by this measure (min_weight {config.min_weight})")
        if not any(sets_length for _, _, sets_length in used):
            raise ValueError(f"item {index} has no positively rated original reference to set the reference "
                             "length (brevity_references 'positive'); use brevity_references 'all'")
        item_lengths = []
        for text, weight, sets_length in used:
            tokens = tokenize(text, config.lowercase, config.tokenizer)
            if sets_length:
                item_lengths.append(len(tokens))
            for grams in _ngrams(tokens, config.max_order):
                keys.extend(_gram_keys(index, grams))
                counts.extend(grams.values())
                weights.extend([weight] * len(grams))
        lengths.append(np.array(item_lengths, dtype=np.float64))
        max_weights[index] = max(weight for _, weight, _ in used)
    key_array = np.frombuffer(keys, dtype=np.int64)
    weight_array = np.frombuffer(weights, dtype=np.float64)
    count_array = np.frombuffer(counts, dtype=np.int32)
    order = np.argsort(key_array, kind="stable")
    key_array, weight_array, count_array = key_array[order], weight_array[order], count_array[order]
    if not config.weighted and len(key_array):
        # Plain BLEU clips by the largest count of any reference: one entry per (item, n-gram).
        starts = np.flatnonzero(np.r_[True, key_array[1:] != key_array[:-1]])
        count_array = np.maximum.reduceat(count_array, starts)
        key_array, weight_array = key_array[starts], weight_array[starts]
    return PreparedReferences(config, key_array, weight_array, count_array, lengths, max_weights)


# Hypothesis n-grams looked up at a time: the lookup holds about 60 bytes per n-gram (keys, counts,
# cells, the sort order, positions), so a block is about 30 MB however long the run's texts; one
# pass over a 30 MB run (24 million n-grams) held 1.4 GB (issue 28).
BLOCK_NGRAMS = 1 << 19


def sufficient_statistics(
    hypotheses: Sequence[str] | Sequence[Sequence[str]],
    prepared: PreparedReferences,
    items: Sequence[int] | np.ndarray | None = None,
) -> np.ndarray:
    """Per-hypothesis sufficient statistics, float64 of shape (len(hypotheses), 2N + 3).

    ``hypotheses`` are texts, or already tokenised (lists of tokens, e.g. nuggets put together);
    ``items[k]`` is the item whose references hypothesis k is compared with (default: k).
    Hypotheses are looked up in blocks of whole hypotheses (``BLOCK_NGRAMS``): each row's
    numerators are summed over the same n-grams in the same order whatever the blocks.
    """
    config = prepared.config
    max_order = config.max_order
    n_rows = len(hypotheses)
    stats = np.zeros((n_rows, 2 * max_order + 3), dtype=np.float64)
    keys = array("q")
    counts = array("i")
    cells = array("q")  # (row - first row of the block) * max_order + order of each hypothesis n-gram
    block_start = 0
    for row, hypothesis in enumerate(hypotheses):
        item = row if items is None else int(items[row])
        tokens = (tokenize(hypothesis, config.lowercase, config.tokenizer) if isinstance(hypothesis, str)
                  else hypothesis)
        for order, grams in enumerate(_ngrams(tokens, max_order)):
            keys.extend(_gram_keys(item, grams))
            counts.extend(grams.values())
            cells.extend([(row - block_start) * max_order + order] * len(grams))
            stats[row, max_order + order] = max(len(tokens) - order, 0) * prepared.max_weight[item]
        hyp_len = len(tokens)
        lengths = prepared.lengths[item]
        stats[row, 2 * max_order] = hyp_len
        # Closest reference length, ties to the shorter one (sacrebleu's rule).
        stats[row, 2 * max_order + 1] = min(lengths, key=lambda length: (abs(length - hyp_len), length))
        stats[row, 2 * max_order + 2] = lengths.mean()
        if len(keys) >= BLOCK_NGRAMS:
            _numerators(stats[block_start : row + 1, :max_order], keys, counts, cells, prepared)
            keys, counts, cells = array("q"), array("i"), array("q")
            block_start = row + 1
    if keys:
        _numerators(stats[block_start:, :max_order], keys, counts, cells, prepared)
    return stats


def _numerators(out: np.ndarray, keys: array, counts: array, cells: array, prepared: PreparedReferences) -> None:
    """Fill ``out`` (rows x N, a view of the statistics) with the clipped, weighted n-gram matches
    of one block of hypotheses: their n-grams' ``keys``, ``counts`` and ``cells`` (row in the block
    times N plus order)."""
    if not len(prepared.keys):
        return
    n_cells = out.shape[0] * out.shape[1]
    key_array = np.frombuffer(keys, dtype=np.int64)
    # Sorted queries make NumPy's binary search walk the table once, several times faster.
    order = np.argsort(key_array)
    group_keys, group_starts, group_sizes = prepared.groups()
    position = np.minimum(np.searchsorted(group_keys, key_array[order]), len(group_keys) - 1)
    hit = group_keys[position] == key_array[order]
    left = np.empty(len(key_array), dtype=np.int64)
    held = np.empty(len(key_array), dtype=np.int64)
    left[order] = group_starts[position]
    held[order] = np.where(hit, group_sizes[position], 0)
    del order, position, hit
    found = np.flatnonzero(held)
    if len(found):
        # Every (hypothesis n-gram, reference holding it) pair: w * min(#g(h), #g(r)), the best per n-gram.
        repeats = held[found]
        first = np.cumsum(repeats) - repeats
        pair_gram = np.repeat(found, repeats)
        pair_reference = np.arange(repeats.sum()) - np.repeat(first, repeats) + np.repeat(left[found], repeats)
        hyp_counts = np.frombuffer(counts, dtype=np.int32)
        values = prepared.weights[pair_reference] * np.minimum(hyp_counts[pair_gram],
                                                               prepared.counts[pair_reference])
        best = np.maximum.reduceat(values, first)
        numerators = np.bincount(np.frombuffer(cells, dtype=np.int64)[found], weights=best, minlength=n_cells)
        out[:] = numerators.reshape(out.shape)


def _brevity_penalty(hyp_len: np.ndarray, ref_len: np.ndarray) -> np.ndarray:
    """BP = 1 if eta > rho else exp(1 - rho / eta); 0 for an empty hypothesis side."""
    safe = np.where(hyp_len > 0, hyp_len, 1.0)
    penalty = np.where(hyp_len > ref_len, 1.0, np.exp(np.minimum(1.0 - ref_len / safe, 0.0)))
    return np.where(hyp_len > 0, penalty, 0.0)


def _scores(stats: np.ndarray, max_order: int, brevity: Brevity, smooth: bool) -> np.ndarray:
    stats = np.atleast_2d(np.asarray(stats, dtype=np.float64))
    if stats.shape[1] != 2 * max_order + 3:
        raise ValueError(f"statistics have {stats.shape[1]} columns; order {max_order} needs {2 * max_order + 3}")
    if brevity not in BREVITY_CHOICES:
        raise ValueError(f"brevity must be one of {', '.join(BREVITY_CHOICES)}, not {brevity!r}")
    numerator = stats[:, :max_order].copy()
    denominator = stats[:, max_order : 2 * max_order].copy()
    if smooth:
        numerator[:, 1:] += 1.0
        denominator[:, 1:] += 1.0
    # A precision that is zero, negative (negative weights, eq. 4) or undefined (no n-grams of
    # that order) leaves the geometric mean undefined; like sacrebleu, the score is then 0.
    defined = np.all((numerator > 0) & (denominator > 0), axis=1)
    safe_num = np.where(numerator > 0, numerator, 1.0)
    safe_den = np.where(denominator > 0, denominator, 1.0)
    log_mean = np.sum(np.log(safe_num) - np.log(safe_den), axis=1) / max_order
    ref_len = stats[:, 2 * max_order + (1 if brevity == "closest" else 2)]
    penalty = _brevity_penalty(stats[:, 2 * max_order], ref_len)
    return np.where(defined, penalty * np.exp(log_mean), 0.0)


def corpus_score(stats: np.ndarray, max_order: int, brevity: Brevity) -> float:
    """The corpus score of the items whose statistics are given (rows are summed first)."""
    stats = np.atleast_2d(np.asarray(stats, dtype=np.float64))
    return float(_scores(stats.sum(axis=0, keepdims=True), max_order, brevity, smooth=False)[0])


def corpus_scores(totals: np.ndarray, max_order: int, brevity: Brevity) -> np.ndarray:
    """Corpus scores of many summed statistics at once: (..., S) -> (...), each the same number
    :func:`corpus_score` gives for that vector (what the significance tests apply per run and step)."""
    totals = np.asarray(totals, dtype=np.float64)
    return _scores(totals.reshape(-1, totals.shape[-1]), max_order, brevity, smooth=False).reshape(totals.shape[:-1])


def item_scores(stats: np.ndarray, max_order: int, brevity: Brevity) -> np.ndarray:
    """Per-item scores: the formula on each row, add-one smoothing for n >= 2, p_1 <= 0 gives 0."""
    return _scores(stats, max_order, brevity, smooth=True)
