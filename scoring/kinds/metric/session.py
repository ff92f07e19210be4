"""Session measures of seed 003 section 3.3 and the random metric: reference metrics for the board.

Each takes a session's per-turn relevance grades (turn 1 first) and returns one number,
higher is better. Turn i's gain is ``gain_i = 2^rel_i - 1`` (seed 003 eq. 14). The
vectorised :func:`session_scores` scores every response of a gold with per-turn grades, so
the measures can be judged like any submitted metric.

Seed 003, Table 2 gives the weight of the r-th query for ``0 < r <= N/2`` and for
``N/2 < r <= N``. For odd N the middle turn r = (N + 1)/2 falls in the second half, where
middle-high gives ``N + 1 - r = r`` and middle-low ``1/(N + 1 - r) = 1/r``: the two columns
agree there, so the split is unambiguous and nothing had to be chosen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

__all__ = [
    "BQ",
    "SESSION_CITATIONS",
    "SESSION_MEASURES",
    "random_scores",
    "session_scores",
    "session_weights",
]

# The reformulation base of sDCG; seed 003 uses the recommended bq = 4 (Jarvelin et al., ECIR 2008).
BQ = 4.0


def _gains(grades: Sequence[float] | np.ndarray) -> np.ndarray:
    rel = np.asarray(grades, dtype=np.float64)
    if rel.ndim != 1 or rel.size == 0 or not np.isfinite(rel).all() or (rel < 0).any():
        raise ValueError(f"grades must be a non-empty list of finite numbers >= 0; got {grades!r}")
    return np.exp2(rel) - 1.0


def session_weights(kind: str, n_turns: int) -> np.ndarray:
    """Normalised weights ``w*_r = w_r / sum w`` of seed 003 Table 2 and eq. 20, r = 1..N.

    decrease ``1/r``; increase ``r``; equal ``1``; middle-high ``r`` for r <= N/2 and
    ``N + 1 - r`` after; middle-low ``1/r`` for r <= N/2 and ``1/(N + 1 - r)`` after.
    """
    if n_turns < 1:
        raise ValueError(f"n_turns must be at least 1; got {n_turns}")
    r = np.arange(1, n_turns + 1, dtype=np.float64)
    first_half = r <= n_turns / 2
    if kind == "decrease":
        w = 1.0 / r
    elif kind == "increase":
        w = r
    elif kind == "equal":
        w = np.ones_like(r)
    elif kind == "middle_high":
        w = np.where(first_half, r, n_turns + 1 - r)
    elif kind == "middle_low":
        w = np.where(first_half, 1.0 / r, 1.0 / (n_turns + 1 - r))
    else:
        raise ValueError(f"unknown session weighting {kind!r} (known: {', '.join(_WEIGHTINGS)})")
    return w / w.sum()


_WEIGHTINGS = ("decrease", "increase", "equal", "middle_high", "middle_low")


def scg(grades: Sequence[float]) -> float:
    """sCG = sum_i (2^rel_i - 1) (seed 003 eq. 15; Liu et al. [48]). Range [0, inf)."""
    return float(_gains(grades).sum())


def sdcg(grades: Sequence[float], bq: float = BQ) -> float:
    """sDCG = sum_i gain_i / log_bq(i + bq - 1) (seed 003 eq. 17; Jarvelin et al. [29]).

    One response per turn, so a turn's DCG (eq. 16) is its gain over log2(2) = 1. Range [0, inf).
    """
    gains = _gains(grades)
    turn = np.arange(1, gains.size + 1, dtype=np.float64)
    return float((gains / (np.log(turn + bq - 1.0) / math.log(bq))).sum())


def sdcg_per_query(grades: Sequence[float], bq: float = BQ) -> float:
    """sDCG/q = sDCG / n, n the number of turns (seed 003 eq. 18; Kanoulas et al. [30, 31])."""
    return sdcg(grades, bq) / len(grades)


def weighted(kind: str) -> Callable[[Sequence[float]], float]:
    """M = sum_i w*_i gain_i with the Table 2 weighting ``kind`` (seed 003 eqs. 19-20)."""

    def measure(grades: Sequence[float]) -> float:
        gains = _gains(grades)
        return float(session_weights(kind, gains.size) @ gains)

    measure.__name__ = f"{kind}_weight"
    measure.__doc__ = (f"Session weighting function {kind} of Liu, Zhou and Wilson, ACM TOIS 2021, Table 2, "
                       "over gains 2^rel - 1.")
    return measure


# name -> function of one session's grades. Names are the board's measure keys.
SESSION_MEASURES: dict[str, Callable[[Sequence[float]], float]] = {
    "scg": scg,
    "sdcg": sdcg,
    "sdcg_per_query": sdcg_per_query,
    **{f"{kind}_weight": weighted(kind) for kind in _WEIGHTINGS},
}


_TABLE2 = "Liu, Zhou and Wilson, ACM TOIS 2021, eqs. 19-20 and Table 2"
# name -> where the measure is defined; every session measure is higher-is-better, range [0, inf)
# for sCG and sDCG and [0, 2^max_grade - 1] for sDCG/q and the weighted ones.
SESSION_CITATIONS: dict[str, str] = {
    "scg": "Liu, Zhou and Wilson, ACM TOIS 2021, eq. 15",
    "sdcg": "Liu, Zhou and Wilson, ACM TOIS 2021, eq. 17 (Jarvelin et al., ECIR 2008), bq = 4",
    "sdcg_per_query": "Liu, Zhou and Wilson, ACM TOIS 2021, eq. 18 (Kanoulas et al.)",
    **{f"{kind}_weight": _TABLE2 for kind in _WEIGHTINGS},
}


def session_scores(grades: np.ndarray, grade_counts: np.ndarray, bq: float = BQ) -> dict[str, np.ndarray]:
    """Every session measure for every response, vectorised: ``{name: (n_responses,) array}``.

    ``grades`` holds all turns' grades flat, ``grade_counts[r]`` the turns of response r (as in
    ``MetricGold``). Agrees with the one-session functions above (tests check it).
    """
    grade_counts = np.asarray(grade_counts, dtype=np.int64)
    gains = _gains(grades)
    if grade_counts.ndim != 1 or (grade_counts < 1).any() or grade_counts.sum() != gains.size:
        raise ValueError("grade_counts must be positive and sum to the number of grades")
    owner = np.repeat(np.arange(grade_counts.size), grade_counts)
    starts = np.concatenate(([0], np.cumsum(grade_counts)[:-1]))
    turn = (np.arange(gains.size) - starts[owner] + 1).astype(np.float64)  # 1-based
    n = grade_counts[owner].astype(np.float64)

    def per_response(values: np.ndarray) -> np.ndarray:
        return np.bincount(owner, weights=values, minlength=grade_counts.size)

    out = {"scg": per_response(gains)}
    out["sdcg"] = per_response(gains / (np.log(turn + bq - 1.0) / math.log(bq)))
    out["sdcg_per_query"] = out["sdcg"] / grade_counts
    first_half = turn <= n / 2
    raw = {
        "decrease": 1.0 / turn,
        "increase": turn,
        "equal": np.ones_like(turn),
        "middle_high": np.where(first_half, turn, n + 1 - turn),
        "middle_low": np.where(first_half, 1.0 / turn, 1.0 / (n + 1 - turn)),
    }
    for kind, w in raw.items():
        out[f"{kind}_weight"] = per_response(w * gains) / per_response(w)
    return out


def random_scores(n_responses: int, seed: int) -> np.ndarray:
    """The random metric: i.i.d. uniform [0, 1) scores from ``numpy.random.default_rng(seed)``.

    Ties have probability ~0, so its expected predictive power is 0.5 (seed 003 Table 8's
    "random selection" baseline). Same seed, same scores.
    """
    if isinstance(n_responses, bool) or n_responses < 1:
        raise ValueError(f"n_responses must be a positive integer; got {n_responses!r}")
    return np.random.default_rng(seed).random(int(n_responses))
