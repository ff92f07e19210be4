"""Krippendorff's alpha (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability") at the
nominal, ordinal and interval levels, from the coincidence matrix, and a percentile bootstrap
interval over units.

A *unit* is one judged thing (a dialogue for A/E/S, a turn for nugget labels, a reference, a
response); its values are the judgements it received, missing ones simply absent. Everything is
vectorised: the units become a (units x values) count matrix C, and the coincidence matrix is
``o = (C / (m - 1))^T C - diag(sum_u C_u / (m_u - 1))`` (ordered pairs of different judgements
of a unit, each unit weighted by 1 / (m_u - 1)), so a bootstrap resample is a weighted sum of the
units' own matrices (``scoring.stats.bootstrap.resample_counts``, the server's one resampling
stream).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np

from scoring.stats.bootstrap import resample_counts
from scoring.stats.validation import _check_count, _check_seed

Level = Literal["nominal", "ordinal", "interval"]
LEVELS: tuple[str, ...] = ("nominal", "ordinal", "interval")

# Above this many cells (pairable units x values^2) the ordinal bootstrap builds each resample's
# coincidence matrix on its own instead of one (resamples x cells) product: bounded memory for a
# scale of many distinct values.
_FLAT_CELLS = 1 << 22


class _Encoded:
    """Units as counts: ``counts[u, c]`` is how often pairable unit u received the c-th value of
    ``values`` (the scale in its order); ``numbers`` are the values as floats (interval level)."""

    __slots__ = ("counts", "numbers", "values")

    def __init__(self, counts: np.ndarray, values: list, numbers: np.ndarray | None) -> None:
        self.counts = counts
        self.values = values
        self.numbers = numbers


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _encode(units: Sequence[Sequence[Hashable | float]], level: str, order: Sequence | None) -> _Encoded:
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}; got {level!r}")
    if isinstance(units, (str, bytes)) or not isinstance(units, Sequence):
        raise ValueError("units must be a list of units, each the list of values one item received")
    flat: list = []
    sizes = np.zeros(len(units), dtype=np.int64)
    for u, unit in enumerate(units):
        if isinstance(unit, (str, bytes)) or not isinstance(unit, Sequence):
            raise ValueError(f"unit {u}: must be the list of values the item received; got {type(unit).__name__}")
        for value in unit:
            kind = type(value)
            if (kind is str or kind is int) and level != "interval":
                continue  # the common case, checked cheaply: labels and integer points
            if value is None or (isinstance(value, float) and math.isnan(value)):
                raise ValueError(f"unit {u}: a missing value must be left out of its unit, not given as {value!r}")
            if level == "interval" and not (_is_number(value) and math.isfinite(value)):
                raise ValueError(f"unit {u}: the interval level needs finite numbers; got {value!r}")
            if not isinstance(value, Hashable):
                raise ValueError(f"unit {u}: a value must be a label or a number; got {type(value).__name__}")
        sizes[u] = len(unit)
        flat.extend(unit)
    if order is not None:
        values = list(order)
        if len(set(values)) != len(values):
            raise ValueError("order: every value of the scale must be listed once")
        known = set(values)
        for u, unit in enumerate(units):
            outside = [value for value in unit if value not in known]
            if outside:
                raise ValueError(f"unit {u}: value {outside[0]!r} is not on the scale {values!r}")
    elif level == "nominal":
        values = list(dict.fromkeys(flat))
    else:
        try:
            values = sorted(set(flat))
        except TypeError:
            raise ValueError(f"the {level} level needs values in an order: give `order` (the scale from "
                             "lowest to highest) for labels that do not sort") from None
    if level == "interval":
        bad = [value for value in values if not (_is_number(value) and math.isfinite(value))]
        if bad:
            raise ValueError(f"order: the interval level needs finite numbers; got {bad[0]!r}")
    index = {value: i for i, value in enumerate(values)}
    codes = np.fromiter((index[value] for value in flat), dtype=np.int64, count=len(flat))
    rows = np.repeat(np.arange(len(units)), sizes)
    counts = np.zeros((len(units), len(values)))
    np.add.at(counts, (rows, codes), 1.0)
    # A unit with fewer than two values has no pair: it adds nothing to the coincidences.
    counts = counts[sizes >= 2]
    numbers_ = np.array(values, dtype=np.float64) if level == "interval" else None
    return _Encoded(counts, values, numbers_)


def _coincidences(counts: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """o_ck = sum_u w_u (n_uc n_uk - [c = k] n_uc) / (m_u - 1) for count rows n_u (w_u = 1 unless given)."""
    per_unit = 1.0 / (counts.sum(axis=1) - 1.0)
    if weights is not None:
        per_unit = per_unit * weights
    scaled = counts * per_unit[:, None]
    return scaled.T @ counts - np.diag(scaled.sum(axis=0))


def _fixed_delta(encoded: _Encoded, level: str) -> np.ndarray:
    """The nominal or interval difference function, which depends on the values only."""
    if level == "nominal":
        size = len(encoded.values)
        return 1.0 - np.eye(size)
    assert encoded.numbers is not None
    return np.subtract.outer(encoded.numbers, encoded.numbers) ** 2


def _ordinal_delta(marginals: np.ndarray) -> np.ndarray:
    """delta_ck = (sum_{g between c and k} n_g - (n_c + n_k) / 2)^2 for marginals of shape (..., V).

    With S the cumulative sum, the sum from c to k (c <= k) is S_k - S_c + n_c, so the bracket is
    S_k - S_c + (n_c - n_k) / 2, which only changes sign when c and k swap: one formula for both.
    """
    cumulative = np.cumsum(marginals, axis=-1)
    bracket = (cumulative[..., None, :] - cumulative[..., :, None]
               + (marginals[..., :, None] - marginals[..., None, :]) / 2.0)
    return bracket**2


def _alpha_from(coincidence: np.ndarray, delta: np.ndarray) -> float | None:
    marginals = coincidence.sum(axis=1)
    total = marginals.sum()
    expected = float(marginals @ delta @ marginals)
    if total < 2 or expected <= 0.0:
        return None
    return float(1.0 - (float(total) - 1.0) * float((coincidence * delta).sum()) / expected)


def krippendorff_alpha(units: Sequence[Sequence[Hashable | float]], level: Level = "nominal",
                       order: Sequence | None = None) -> float | None:
    """Krippendorff's alpha of ``units`` at ``level``: 1 - D_o / D_e from the coincidence matrix.

    ``units``: one list per judged thing, the values it received (missing judgements left out;
    ``None`` or NaN is refused, so that a hole is never counted as a value). ``order``: the scale
    from lowest to highest (every value must be on it); it orders labels at the ordinal level
    (default: the values sorted) and, at every level, refuses a value off the scale. Values that
    no pairable unit uses change nothing. Nominal: delta 0 for equal values, else 1; ordinal:
    ``(sum of the marginals from c to k - (n_c + n_k) / 2)^2``; interval: ``(c - k)^2`` on the
    numbers.

    Returns None, never NaN, when alpha is undefined: no unit has two values (nothing to pair,
    so no observed disagreement can be measured), or every paired value is the same (the
    expected disagreement D_e is 0: with no variation there is nothing to be reliable about, and
    1 - 0/0 has no value). Raises ValueError naming the unit for a value that cannot be used.
    """
    return _alpha_of(_encode(units, level, order), level)


def _alpha_of(encoded: _Encoded, level: str) -> float | None:
    if not encoded.counts.shape[0]:
        return None
    coincidence = _coincidences(encoded.counts)
    delta = _ordinal_delta(coincidence.sum(axis=1)) if level == "ordinal" else _fixed_delta(encoded, level)
    return _alpha_from(coincidence, delta)


def alpha_interval(units: Sequence[Sequence[Hashable | float]], level: Level = "nominal", resamples: int = 1000,
                   seed: int = 0, order: Sequence | None = None,
                   confidence: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval of Krippendorff's alpha over units (see ``alpha_with_interval``)."""
    return alpha_with_interval(units, level, resamples, seed, order, confidence)[1]


def alpha_with_interval(units: Sequence[Sequence[Hashable | float]], level: Level = "nominal", resamples: int = 1000,
                        seed: int = 0, order: Sequence | None = None,
                        confidence: float = 0.95) -> tuple[float | None, tuple[float, float] | None]:
    """Krippendorff's alpha and its percentile bootstrap interval over units, the units read once.

    Each of ``resamples`` resamples draws as many pairable units as there are, uniformly with
    replacement (``resample_counts(n_units, resamples, seed)``: the same seed gives the same
    interval), and recomputes alpha on them, the ordinal differences from the resample's own
    marginals; the interval is the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2``
    quantiles. Units with fewer than two values are left out before resampling: they add nothing
    to alpha, so drawing them would only make resamples smaller at random. A resample where alpha
    is undefined (all its values equal) is left out of the quantiles. Returns alpha (as
    ``krippendorff_alpha``) and the interval, the units read once; the interval is None when
    alpha itself is undefined or no resample defines it.
    """
    resamples = _check_count(resamples, "resamples")
    seed = _check_seed(seed)
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1; got {confidence!r}")
    encoded = _encode(units, level, order)
    counts = encoded.counts
    n_units, size = counts.shape
    alpha = _alpha_of(encoded, level)
    if alpha is None:
        return None, None
    per_unit = 1.0 / (counts.sum(axis=1) - 1.0)
    boot = np.full(resamples, np.nan)
    if level == "ordinal":
        # The difference function moves with each resample's marginals: build its coincidences.
        flat = None
        if n_units * size * size <= _FLAT_CELLS:
            own = np.einsum("uc,uk->uck", counts, counts) - counts[:, :, None] * np.eye(size)[None]
            flat = (own * per_unit[:, None, None]).reshape(n_units, size * size)
        for first, weights in resample_counts(n_units, resamples, seed):
            weights = weights.astype(np.float64)
            if flat is not None:
                coincidences = (weights @ flat).reshape(-1, size, size)
            else:
                coincidences = np.stack([_coincidences(counts, row) for row in weights])
            marginals = coincidences.sum(axis=2)
            delta = _ordinal_delta(marginals)
            boot[first:first + len(weights)] = _batch_alpha(coincidences, marginals, delta)
    else:
        delta = _fixed_delta(encoded, level)
        # D_o is a sum over units and the marginals are the units' counts: both are weighted sums.
        own_disagreement = ((counts @ delta) * counts).sum(axis=1) * per_unit
        for first, weights in resample_counts(n_units, resamples, seed):
            weights = weights.astype(np.float64)
            marginals = weights @ counts
            total = marginals.sum(axis=1)
            observed = weights @ own_disagreement
            expected = np.einsum("rc,ck,rk->r", marginals, delta, marginals)
            with np.errstate(divide="ignore", invalid="ignore"):
                values = 1.0 - (total - 1.0) * observed / expected
            boot[first:first + len(weights)] = np.where(expected > 0, values, np.nan)
    defined = boot[np.isfinite(boot)]
    if not defined.size:
        return alpha, None
    lower, upper = np.quantile(defined, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0])
    return alpha, (float(lower), float(upper))


def _batch_alpha(coincidences: np.ndarray, marginals: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Alpha of each resample (NaN where undefined; the caller drops those) from its coincidences."""
    total = marginals.sum(axis=1)
    observed = (coincidences * delta).sum(axis=(1, 2))
    expected = np.einsum("rc,rck,rk->r", marginals, delta, marginals)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = 1.0 - (total - 1.0) * observed / expected
    return np.where(expected > 0, values, np.nan)
