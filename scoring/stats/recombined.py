"""The recombined method of the randomised Tukey HSD: every step an exact draw of the full test,
made from pools of partial sums over groups of dialogues (issue 28); its plan, its modelled
variance inflation, the NumPy forms of its kernels, and the rule "auto" uses to choose it."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from fractions import Fraction

import numpy as np

from scoring.stats.kernels import _NUMBA_LOCK, _numba_threads, _recombine_kernels
from scoring.stats.stream import (
    _GAMMA,
    _NUMPY_CELLS_PER_CHUNK,
    _dice_batches,
    _mix64,
    _mix64_array,
    _permutations_for_rows,
)
from scoring.stats.validation import Method

# At full scale (10,000 dialogues x 100 runs x 21 measures x B = 10,000: 2.1e11 cell updates)
# Algorithm 1 costs a minute on two cores. The "recombined" method draws the same kind of step
# with a fraction of the work (issue 28):
#
# * the dialogues are cut into G consecutive groups; for each group g a pool of P partial sums
#   T[g, r] = sum over d in g of M*[d] with the row permutations of steps r = 0..P-1 of the
#   stream of scoring.stats.stream (P = ceil(B / D), D the pool divisor of the plan below);
# * step b takes, for every group, an entry r(b, g) of its pool and a uniform permutation
#   sigma(b, g) of the runs, and adds sigma(b, g) applied to T[g, r(b, g)].
#
# Every step is an exact draw of Algorithm 1: within a step each dialogue's row is permuted by
# sigma(b, g) o pi(r, d), and for any fixed sigma the pi(r, d) of distinct dialogues are
# independent and uniform, so these compositions are too. Each share of steps whose range
# reaches a difference, count / B, is therefore an unbiased estimate of the permutation p-value
# p, as in the full test. What is shared is work between steps, and with it a little
# dependence: given the pools the steps are independent, so the variance of count / B is the
# binomial p (1 - p) / B plus (1 - 1/B) times the variance, over the pools, of the exceedance
# probability given the pools. That probability depends on the pools through
# averages over each group's P entries, so its variance is of order 1 / (G P), and the variance
# of the estimate is p (1 - p) / B times an inflation 1 + A(k) D / G. The inflation was measured
# with benchmarks/tukey_recombined.py --calibrate (variance over 40 seeds against the binomial,
# at pool divisors large enough to measure it; docs/statistics.md has the figures): A(k) fell
# from 0.46-0.49 at k = 5 to 0.29-0.31 at 12, 0.20-0.24 at 30, 0.13-0.17 at 100 and about 0.06
# at 500, which A(k) = INFLATION_SCALE / (k - 1)^(1/3) meets or exceeds (0.50, 0.36, 0.26, 0.17,
# 0.10) within the noise of the measurement (but for 0.31 at k = 30 with pools of 2 entries,
# far from the hundreds the plan makes). The plan takes the largest D (at most
# MAX_POOL_DIVISOR) whose modelled inflation stays within 1 + INFLATION_BUDGET: Monte Carlo
# standard errors within 2.5% of the full test's (as if B were 5% smaller). Cost: P n k m for
# the pools plus B G k m for the steps, instead of B n k m. Below RECOMBINE_MIN_DIVISOR the
# pools would save too little to be worth the dependence, and "auto" keeps the full test.
#
# The steps are made in chunks, each step adding its G pool entries to 0 in group order (steps
# outer, groups inner), so the order of additions, and with it every bit of the sums, is the
# same on both backends and for any chunk size. Up to _RECOMBINE_POOL_BYTES of pools only a
# chunk's sums are held; beyond that (10,000 x 100 x 21 at B = 10,000: 598 MB of pools) the
# groups are taken in blocks whose entries are added to the held B k m sums, which keeps that
# order.
#
# sigma(b, g) is the stream's permutation of row (b, g) of a G-dialogue stream under a seed
# derived from ``seed``, r(b, g) the high bits of a SplitMix64 word under another one.

RECOMBINE_MIN_CELLS = 4_000_000_000  # B n k m above which "auto" recombines (the full test: > ~1 s)
RECOMBINE_GROUPS = 64
RECOMBINE_MIN_DIALOGUES = 512  # "auto" recombines only with >= 32 groups of >= 16 dialogues
# The inflation model 1 + INFLATION_SCALE D / (G (k - 1)^(1/3)) and its budget, as exact
# fractions so that the plan (and with it every p-value) is the same on every platform.
INFLATION_SCALE = Fraction(4, 5)
INFLATION_BUDGET = Fraction(1, 20)
MAX_POOL_DIVISOR = 64
RECOMBINE_MIN_DIVISOR = 4
_RECOMBINE_CELLS_PER_CHUNK = 1 << 21  # (step, run, measure) sums per chunk of steps: 16 MiB
# Pools of all groups are held at once up to this size; above it (they take G / D times the
# B k m sums, 3.6 times at k = 100, whatever B), blocks of groups are added to the held
# sums instead, which bounds the memory by B k m + this.
_RECOMBINE_POOL_BYTES = 1 << 27
_SIGMA_SALT = 0x243F6A8885A308D3  # digits of pi: seeds of the sigma and pick streams
_PICK_SALT = 0x13198A2E03707344


def _recombine_plan(n_dialogues: int, n_runs: int, n_permutations: int) -> tuple[int, int, int]:
    """(groups G, pool divisor D, pool entries per group P) of the recombined method: the largest
    D <= MAX_POOL_DIVISOR with ``INFLATION_SCALE D / (G (k - 1)^(1/3)) <= INFLATION_BUDGET``,
    i.e. ``(INFLATION_SCALE D)^3 <= (k - 1) (INFLATION_BUDGET G)^3``, decided in exact arithmetic."""
    groups = max(1, min(RECOMBINE_GROUPS, n_dialogues // 16))
    bound = (n_runs - 1) * (INFLATION_BUDGET * groups) ** 3
    divisor = 1
    while divisor < MAX_POOL_DIVISOR and (INFLATION_SCALE * (divisor + 1)) ** 3 <= bound:
        divisor += 1
    return groups, divisor, max(1, -(-n_permutations // divisor))


def recombined_variance_inflation(n_dialogues: int, n_runs: int, n_permutations: int) -> float:
    """The modelled inflation ``1 + INFLATION_SCALE D / (G (k - 1)^(1/3))`` of the Monte Carlo
    variance of a recombined p-value over the binomial, with the G and D of the plan: what the
    recombined results report (``TukeyHSDResult.mc_variance_inflation``). The model meets or
    exceeds the measured inflation (see above), so the standard error it gives errs on the large
    side; it is at most ``1 + INFLATION_BUDGET`` whenever the plan could honour the budget."""
    groups, divisor, _ = _recombine_plan(n_dialogues, n_runs, n_permutations)
    return 1.0 + float(INFLATION_SCALE) * divisor / (groups * max(1, n_runs - 1) ** (1.0 / 3.0))


def _group_bounds(n_dialogues: int, groups: int) -> list[tuple[int, int]]:
    edges = [n_dialogues * g // groups for g in range(groups + 1)]
    return list(itertools.pairwise(edges))


def _derived_seeds(seed: int) -> tuple[int, int]:
    return _mix64(seed ^ _SIGMA_SALT), _mix64(seed ^ _PICK_SALT)


def _picks(pick_seed: int, steps: np.ndarray, group: int, groups: int, pool: int) -> np.ndarray:
    """r(b, g) for the steps ``steps`` of group ``group``: the high 32 bits of a word times P."""
    rows = steps.astype(np.uint64) * np.uint64(groups) + np.uint64(group)
    z = _mix64_array(np.uint64(pick_seed) + (rows + np.uint64(1)) * np.uint64(_GAMMA))
    return ((z >> np.uint64(32)) * np.uint64(pool) >> np.uint64(32)).astype(np.intp)


def _pool_numpy(x: np.ndarray, seed: int, lo: int, hi: int, n_dialogues: int, pool: int) -> np.ndarray:
    """T[r] = sum over dialogues lo..hi-1 of their rows permuted as in step r: (pool, k, m)."""
    size, k, m = hi - lo, x.shape[1], x.shape[2]
    out = np.empty((pool, k, m))
    steps = max(1, _NUMPY_CELLS_PER_CHUNK // (size * k))
    local = np.arange(lo, hi, dtype=np.uint64)
    for first in range(0, pool, steps):
        count = min(steps, pool - first)
        rows = (np.arange(first, first + count, dtype=np.uint64)[:, None] * np.uint64(n_dialogues)
                + local[None, :]).reshape(-1)
        perm = _permutations_for_rows(seed, rows, k)
        perm += (np.arange(count, dtype=np.intp) * k).repeat(size)[:, None]
        bins = perm.reshape(-1)
        for mm in range(m):
            weights = np.tile(x[lo:hi, :, mm], (count, 1)).reshape(-1)
            out[first : first + count, :, mm] = np.bincount(bins, weights=weights,
                                                            minlength=count * k).reshape(count, k)
    return out


def _kernel_tables(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The dice batches of k runs as the kernels' arrays (firsts, stops, products, thresholds)."""
    batches = _dice_batches(k)
    return (np.array([b[0] for b in batches], dtype=np.int64), np.array([b[1] for b in batches], dtype=np.int64),
            np.array([b[2] for b in batches], dtype=np.uint64), np.array([b[3] for b in batches], dtype=np.uint64))


def _pools(x: np.ndarray, seed: int, bounds: list[tuple[int, int]], pool: int, use_numba: bool) -> np.ndarray:
    """The pools T[g, r] of the groups with dialogues ``bounds`` (lo, hi), (groups, P, k, m)."""
    n, k, m = x.shape
    pools = np.empty((len(bounds), pool, k, m))
    if not use_numba:
        for g, (lo, hi) in enumerate(bounds):
            pools[g] = _pool_numpy(x, seed, lo, hi, n, pool)
        return pools
    pool_kernel, _ = _recombine_kernels()
    firsts, stops, products, thresholds = _kernel_tables(k)
    tile = max(1, min(32, pool // (4 * _numba_threads())))
    for g, (lo, hi) in enumerate(bounds):
        with _NUMBA_LOCK:
            pool_kernel(x, np.uint64(seed), lo, hi, n, pool, tile, firsts, stops, products, thresholds, pools[g])
    return pools


def _recombine_numpy(pools: np.ndarray, first_group: int, groups: int, sigma_seed: int, pick_seed: int, first: int,
                     sums: np.ndarray) -> None:
    """The NumPy form of ``_recombine_kernel``: adds the block's groups to the sums of steps first.."""
    block, pool, k, _ = pools.shape
    count = sums.shape[0]
    steps = np.arange(first, first + count)
    for i in range(block):
        g = first_group + i
        rows = steps.astype(np.uint64) * np.uint64(groups) + np.uint64(g)
        sigma = _permutations_for_rows(sigma_seed, rows, k)
        # Column c of the pool entry moves to column sigma[c]; a permutation has no repeated
        # column, so the fancy-indexed += adds each value once.
        sums[np.arange(count)[:, None], sigma] += pools[i, _picks(pick_seed, steps, g, groups, pool)]


def _recombined_sums(
    x: np.ndarray, seed: int, n_permutations: int, use_numba: bool
) -> Iterator[tuple[int, np.ndarray]]:
    """The permuted column sums of the recombined steps in chunks: yields ``(first, sums)`` with
    ``sums[s]`` (k, m) the sums of step ``first + s``. Identical on both backends, for any chunk
    and block sizes: every step adds its groups' entries to 0 in group order."""
    n, k, m = x.shape
    groups, _, pool = _recombine_plan(n, k, n_permutations)
    sigma_seed, pick_seed = _derived_seeds(seed)
    bounds = _group_bounds(n, groups)
    chunk = max(1, _RECOMBINE_CELLS_PER_CHUNK // (k * m))
    per_block = max(1, _RECOMBINE_POOL_BYTES // (pool * k * m * 8))
    if use_numba:
        _, kernel = _recombine_kernels()
        tables = _kernel_tables(k)

    def add(pools: np.ndarray, first_group: int, first: int, sums: np.ndarray) -> None:
        if use_numba:
            with _NUMBA_LOCK:
                kernel(pools, first_group, groups, np.uint64(sigma_seed), np.uint64(pick_seed), first, *tables, sums)
        else:
            _recombine_numpy(pools, first_group, groups, sigma_seed, pick_seed, first, sums)

    if per_block >= groups:
        # Every pool fits the byte cap: the steps are made chunk by chunk, and only a chunk's sums are held.
        pools = _pools(x, seed, bounds, pool, use_numba)
        for first in range(0, n_permutations, chunk):
            sums = np.zeros((min(chunk, n_permutations - first), k, m))
            add(pools, 0, first, sums)
            yield first, sums
        return
    # Otherwise blocks of groups, each added to the held sums of every step (B k m, as large B needs).
    sums = np.zeros((n_permutations, k, m))
    for first_group in range(0, groups, per_block):
        pools = _pools(x, seed, bounds[first_group : first_group + per_block], pool, use_numba)
        for first in range(0, n_permutations, chunk):
            add(pools, first_group, first, sums[first : first + chunk])
        del pools
    for first in range(0, n_permutations, chunk):
        yield first, sums[first : first + chunk]


def _recombined_ranges(x: np.ndarray, seed: int, n_permutations: int, use_numba: bool) -> np.ndarray:
    """Permuted ranges of column means of the recombined steps, shape (measures, B); ``x`` is the
    (n, k, m) array of row-centred scores."""
    ranges = np.empty((x.shape[2], n_permutations))
    for first, sums in _recombined_sums(x, seed, n_permutations, use_numba):
        ranges[:, first : first + sums.shape[0]] = ((sums.max(axis=1) - sums.min(axis=1)) / x.shape[0]).T
    return ranges


def _choose_method(method: Method, n_dialogues: int, n_runs: int, n_permutations: int, columns: int) -> str:
    """The method "auto" stands for: recombined at ``B n k columns >= RECOMBINE_MIN_CELLS`` when the
    plan has at least RECOMBINE_MIN_DIALOGUES dialogues and a pool divisor of RECOMBINE_MIN_DIVISOR
    or more; the full test otherwise (every pinned and worked example)."""
    if method not in ("auto", "exact", "recombined"):
        raise ValueError(f"method must be 'auto', 'exact' or 'recombined'; got {method!r}")
    if method != "auto":
        return method
    cells = n_permutations * n_dialogues * n_runs * columns
    _, divisor, _ = _recombine_plan(n_dialogues, n_runs, n_permutations)
    large = cells >= RECOMBINE_MIN_CELLS and n_dialogues >= RECOMBINE_MIN_DIALOGUES
    return "recombined" if large and divisor >= RECOMBINE_MIN_DIVISOR else "exact"
