"""What every part of the metrics track's meta-evaluation shares: the checked score matrix, the
positive-integer check, the chunk size and the single BLAS thread of its matrix products, and the
JSON form of a figure (None for an undefined one)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from functools import cache

import numpy as np
from threadpoolctl import ThreadpoolController

from scoring.kinds.metric.formats import MetricGold

# Chunks of pair-by-metric arrays hold about this many cells.
_CELLS_PER_CHUNK = 1 << 22


def _one_blas_thread():
    """Run matrix products on one BLAS thread.

    A threaded BLAS splits a product's sums by thread count, so the last bits of a bootstrap
    figure would depend on the machine's cores; and these products are skinny (contexts x a
    few hundred columns), where threads cost more than they save, 10-50x on a busy machine.
    One controller serves every call: ``threadpool_limits`` looked for the loaded libraries
    again each time (10 ms, 0.7 s of a run scored on 8 dimensions).
    """
    return _controller().limit(limits=1, user_api="blas")


@cache
def _controller() -> ThreadpoolController:
    return ThreadpoolController()


def _check_positive(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{what} must be a positive integer; got {value!r}")
    return int(value)


def score_matrix(gold: MetricGold, runs: Mapping[str, np.ndarray] | np.ndarray) -> tuple[list[str], np.ndarray]:
    """Names and an (n_responses, n_metrics) float64 matrix from metric vectors; ValueError if unusable."""
    if isinstance(runs, Mapping):
        names = [str(name) for name in runs]
        columns = [np.asarray(v, dtype=np.float64) for v in runs.values()]
        if not columns:
            raise ValueError("no metrics given")
        for name, column in zip(names, columns, strict=True):
            if column.shape != (gold.n_responses,):
                raise ValueError(f"metric {name!r}: expected {gold.n_responses} scores, got shape {column.shape}")
        matrix = np.stack(columns, axis=1)
    else:
        matrix = np.asarray(runs, dtype=np.float64)
        if matrix.ndim == 1:
            matrix = matrix[:, None]
        if matrix.ndim != 2 or matrix.shape[0] != gold.n_responses:
            raise ValueError(f"expected ({gold.n_responses}, n_metrics) scores, got shape {matrix.shape}")
        names = [str(j) for j in range(matrix.shape[1])]
    if not np.isfinite(matrix).all():
        raise ValueError("metric scores must be finite (validate runs with load_metric_run)")
    return names, np.ascontiguousarray(matrix)


def _json_number(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)
