"""Checks every public function of :mod:`scoring.stats` runs on its inputs, each raising a
ValueError that says what is wrong; and the types of the backend and method options."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from scoring.stats.stream import _MASK64

Backend = Literal["auto", "numba", "numpy"]
Method = Literal["auto", "exact", "recombined"]


def _check_matrix(matrix: object, name: str = "score matrix") -> np.ndarray:
    """Return ``matrix`` as a C-contiguous float64 (n, k) array, or raise ValueError saying what is wrong."""
    try:
        array = np.asarray(matrix, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: cannot be read as an array of numbers ({exc})") from None
    if array.ndim != 2:
        raise ValueError(f"{name}: must be 2-dimensional (dialogues x runs); got shape {array.shape}")
    n_dialogues, n_runs = array.shape
    if n_runs < 2:
        raise ValueError(f"{name}: needs at least 2 runs to compare; got {n_runs}")
    if n_dialogues < 2:
        raise ValueError(f"{name}: needs at least 2 dialogues; got {n_dialogues}")
    finite = np.isfinite(array)
    if not finite.all():
        bad = np.argwhere(~finite)
        d, j = bad[0]
        raise ValueError(
            f"{name}: {len(bad)} value(s) are NaN or infinite (first at dialogue {d}, run {j}); "
            "every run needs a finite score on every dialogue"
        )
    return np.ascontiguousarray(array)


def _check_count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{what} must be a positive integer; got {value!r}")
    return int(value)


def _check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed <= _MASK64:
        raise ValueError(f"seed must be an integer in [0, 2**64); got {seed!r}")
    return int(seed)


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1; got {alpha!r}")


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be strictly between 0 and 1; got {level!r}")


def _check_matrices(matrices: Mapping[str, object]) -> dict[str, np.ndarray]:
    if not isinstance(matrices, Mapping) or not matrices:
        raise ValueError("matrices must be a non-empty mapping from measure name to score matrix")
    checked = {str(name): _check_matrix(m, f"measure {name!r}") for name, m in matrices.items()}
    shapes = {name: m.shape for name, m in checked.items()}
    if len(set(shapes.values())) > 1:
        listing = ", ".join(f"{name!r}: {shape}" for name, shape in shapes.items())
        raise ValueError(f"all score matrices must have the same shape (same dialogues and runs); got {listing}")
    return checked


def _check_inflation(value: Any) -> float:
    inflation = float(value)
    if not (math.isfinite(inflation) and inflation >= 1.0):
        raise ValueError(f"mc_variance_inflation must be a finite number >= 1; got {value!r}")
    return inflation
