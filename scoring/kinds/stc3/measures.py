"""Distribution-comparison measures of STC-3 DQ and ND, vectorised over many distributions.

Every measure takes two arrays of shape (n, L): ``estimate`` (a run's distributions) and
``gold`` (the annotators' distributions), each row already normalised to sum to 1, and
returns n values. Equation numbers refer to Sakai, "Towards Automatic Evaluation of
Multi-Turn Dialogues", EVIA 2017 (seed 002), unless the citation says otherwise.

The registry ``MEASURES`` is the single source of truth for names, directions, bin kinds
and citations: the command line, the server and error messages all read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

VARIANTS: tuple[str, ...] = ("paper", "stc3-2018")
BinKind = Literal["ordinal", "nominal"]

_LN2 = np.log(2.0)


def _check_pair(estimate: np.ndarray, gold: np.ndarray) -> None:
    if estimate.shape != gold.shape or estimate.ndim != 2:
        raise ValueError(f"estimate and gold must both have shape (n, L); got {estimate.shape} and {gold.shape}")
    if estimate.shape[1] < 2:
        raise ValueError("a distribution needs at least 2 bins")


def nvd(estimate: np.ndarray, gold: np.ndarray, variant: str = "paper") -> np.ndarray:
    """Normalised variational distance: ``sum_i |p(i) - p*(i)| / 2`` (eq. 1-2). Range [0, 1]."""
    _check_pair(estimate, gold)
    return np.abs(estimate - gold).sum(axis=1) / 2.0


def rnss(estimate: np.ndarray, gold: np.ndarray, variant: str = "paper") -> np.ndarray:
    """Root normalised sum of squares: ``sqrt(sum_i (p(i) - p*(i))^2 / 2)`` (eq. 3). Range [0, 1]."""
    _check_pair(estimate, gold)
    return np.sqrt(np.square(estimate - gold).sum(axis=1) / 2.0)


def jsd(estimate: np.ndarray, gold: np.ndarray, variant: str = "paper") -> np.ndarray:
    """Jensen-Shannon divergence, log base 2 (eq. 4-5). Range [0, 1].

    ``JSD = (KL(p || m) + KL(p* || m)) / 2`` with ``m = (p + p*) / 2``; a bin where the first
    argument of KL is 0 contributes 0.
    """
    _check_pair(estimate, gold)
    middle = (estimate + gold) / 2.0
    divergence = (_kl_terms(estimate, middle).sum(axis=1) + _kl_terms(gold, middle).sum(axis=1)) / (2.0 * _LN2)
    # Round-off can leave -1e-17 for identical rows or 1 + 1e-16 for disjoint ones;
    # the measure is bounded by [0, 1] mathematically, so clip the noise away.
    return np.clip(divergence, 0.0, 1.0)


def _kl_terms(p: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``p * ln(p / m)`` per bin, 0 where p is 0 (m > 0 wherever p > 0, since m >= p / 2).

    Written with NumPy rather than scipy.special.rel_entr: importing scipy.special alone
    costs about 0.3 s, a third of the whole ``score`` command's budget.
    """
    ratio = np.divide(p, m, out=np.ones_like(p, dtype=np.float64), where=p > 0)  # float even if p is int
    return p * np.log(ratio)


def _distance_weighted_squares(estimate: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """DW(i) = sum_j |i - j| (p(j) - p*(j))^2 for every bin i: shape (n, L) (eq. 6)."""
    n_bins = estimate.shape[1]
    positions = np.arange(n_bins)
    distance = np.abs(positions[:, None] - positions[None, :]).astype(np.float64)
    # distance is symmetric, so squares @ distance gives DW(i) in column i.
    return np.square(estimate - gold) @ distance


def _order_aware_divergence(dw: np.ndarray, reference: np.ndarray, variant: str) -> np.ndarray:
    """OD averaged over the reference's non-empty bins (paper) or over all bins (stc3-2018)."""
    if variant == "paper":
        support = reference > 0
        return (dw * support).sum(axis=1) / support.sum(axis=1)
    if variant == "stc3-2018":
        return dw.mean(axis=1)
    raise ValueError(f"unknown variant {variant!r}; expected one of: {', '.join(VARIANTS)}")


def nod(estimate: np.ndarray, gold: np.ndarray, variant: str = "paper") -> np.ndarray:
    """Normalised order-aware divergence ``NOD(p, p*) = OD(p, p*) / (L - 1)`` (eq. 7-8). Range [0, 1].

    ``OD(p, p*) = (1 / |B*|) sum_{i in B*} sum_j |i - j| (p(j) - p*(j))^2`` with
    ``B* = {i : p*(i) > 0}``. Not symmetric.
    """
    _check_pair(estimate, gold)
    dw = _distance_weighted_squares(estimate, gold)
    return _order_aware_divergence(dw, gold, variant) / (estimate.shape[1] - 1)


def snod(estimate: np.ndarray, gold: np.ndarray, variant: str = "paper") -> np.ndarray:
    """Symmetric NOD: ``(OD(p, p*) + OD(p*, p)) / 2 / (L - 1)`` (eq. 9-10). Range [0, 1].

    Variant ``stc3-2018`` averages OD's outer sum over all L bins, as the 2018 STC-3 script did.
    """
    _check_pair(estimate, gold)
    # (p - p*)^2 is symmetric, so one DW matrix serves both directions; only the support differs.
    dw = _distance_weighted_squares(estimate, gold)
    both = _order_aware_divergence(dw, gold, variant) + _order_aware_divergence(dw, estimate, variant)
    return both / 2.0 / (estimate.shape[1] - 1)


def rsnod(estimate: np.ndarray, gold: np.ndarray, variant: str = "paper") -> np.ndarray:
    """Root symmetric NOD: ``sqrt(SNOD)``, the official DQ measure at STC-3 and DialEval. Range [0, 1]."""
    return np.sqrt(snod(estimate, gold, variant))


def nmd(estimate: np.ndarray, gold: np.ndarray, variant: str = "paper") -> np.ndarray:
    """Normalised match distance: ``sum_i |cumsum(p)(i) - cumsum(p*)(i)| / (L - 1)``. Range [0, 1].

    Official DQ measure at STC-3 and DialEval (Sakai, SIGIR 2018, "Comparing two binned
    probability distributions for information access evaluation", eq. for NMD).
    """
    _check_pair(estimate, gold)
    gap = np.abs(np.cumsum(estimate, axis=1) - np.cumsum(gold, axis=1)).sum(axis=1)
    # The last cumulative bin is 1 for both, up to round-off: at most ~1e-16 of noise.
    return np.clip(gap / (estimate.shape[1] - 1), 0.0, 1.0)


@dataclass(frozen=True)
class Measure:
    """A registered measure and the facts every caller needs about it."""

    name: str
    title: str
    function: Callable[[np.ndarray, np.ndarray, str], np.ndarray]
    bins: BinKind  # "ordinal" measures need ordered bins (DQ); "nominal" ones work anywhere
    lower_is_better: bool
    value_range: tuple[float, float]
    symmetric: bool
    citation: str

    def __call__(self, estimate: np.ndarray, gold: np.ndarray, variant: str = "paper") -> np.ndarray:
        return self.function(estimate, gold, variant)


_SEED002 = "Sakai, EVIA 2017"
MEASURES: dict[str, Measure] = {
    measure.name: measure
    for measure in (
        Measure("nvd", "Normalised Variational Distance", nvd, "nominal", True, (0.0, 1.0), True,
                f"{_SEED002}, eq. 1-2"),
        Measure("rnss", "Root Normalised Sum of Squares", rnss, "nominal", True, (0.0, 1.0), True,
                f"{_SEED002}, eq. 3"),
        Measure("jsd", "Jensen-Shannon Divergence", jsd, "nominal", True, (0.0, 1.0), True,
                f"{_SEED002}, eq. 4-5"),
        Measure("nod", "Normalised Order-aware Divergence", nod, "ordinal", True, (0.0, 1.0), False,
                f"{_SEED002}, eq. 7-8"),
        Measure("snod", "Symmetric Normalised Order-aware Divergence", snod, "ordinal", True, (0.0, 1.0), True,
                f"{_SEED002}, eq. 9-10"),
        Measure("rsnod", "Root Symmetric Normalised Order-aware Divergence", rsnod, "ordinal", True, (0.0, 1.0),
                True, "Sakai, SIGIR 2018, sqrt of SNOD (eq. 9-10 of EVIA 2017)"),
        Measure("nmd", "Normalised Match Distance", nmd, "ordinal", True, (0.0, 1.0), True,
                "Sakai, SIGIR 2018, NMD"),
    )
}

# What the score command and the server report, in display order (official measures first).
QUALITY_MEASURES: tuple[str, ...] = ("rsnod", "nmd", "snod", "jsd", "rnss", "nvd")
NUGGET_MEASURES: tuple[str, ...] = ("jsd", "rnss", "nvd")


def get_measure(name: str) -> Measure:
    """Look a measure up by name; the error lists what exists, so it cannot drift from the registry."""
    try:
        return MEASURES[name]
    except KeyError:
        raise ValueError(f"unknown measure {name!r}; known measures: {', '.join(MEASURES)}") from None
