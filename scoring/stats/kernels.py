"""The Numba backend: every Numba kernel (the full test's fused ranges, the recombined method's
pools and steps, Knight's tau-b), compiled lazily and cached on disk, and the full test's ranges
with Numba.

The kernels are kept together because they share one piece of state: ``_numba``, the numba module,
imported on the first compilation (so that ``import scoring.stats`` stays fast) and read by every
kernel for ``prange``; and one lock that serialises launches. Each kernel's NumPy twin lives with
the method it serves (:mod:`scoring.stats.stream`, :mod:`scoring.stats.recombined`,
:mod:`scoring.stats.meta_evaluation`); both give the same numbers bit for bit (tested)."""

from __future__ import annotations

import functools
import threading

import numpy as np

from scoring.stats.stream import _GAMMA, _MASK32, _MIX1, _MIX2, _dice_batches

_NUMBA_STEPS_PER_CHUNK = 1024


# The workqueue threading layer aborts the process when two threads launch parallel kernels
# at once (e.g. a threaded web worker), so kernel launches are serialised.
_NUMBA_LOCK = threading.Lock()


# Set to the numba module by _numba_kernel(); every kernel below reads _numba.prange from it.
# Importing numba lazily keeps `import scoring.stats` fast for processes that never test.
_numba = None


# --------------------------------------------------------------------------- the full test


def _ranges_kernel(x, seed, first_step, n_steps, tile, firsts, stops, products, thresholds, out):
    """Fused Numba kernel: permute, scatter-add and take ranges for a chunk of steps.

    x: centred scores (n, k, m); out: (m, n_steps) ranges of permuted column means. The
    permutation stream is :mod:`scoring.stats.stream`'s, written out with SplitMix64 inlined
    twice: a module-level function (not a closure over a jitted helper) is what lets Numba
    reuse its on-disk cache across processes.
    """
    n, k, m = x.shape
    n_batches = products.shape[0]
    gamma = np.uint64(_GAMMA)
    mix1 = np.uint64(_MIX1)
    mix2 = np.uint64(_MIX2)
    mask32 = np.uint64(_MASK32)
    n_u = np.uint64(n)
    n_tiles = (n_steps + tile - 1) // tile
    for t in _numba.prange(n_tiles):
        s_lo = t * tile
        s_count = min(n_steps, s_lo + tile) - s_lo
        sums = np.zeros((s_count, k, m))
        perm = np.empty(k, np.uint64)
        # Dialogue-major inside a tile, so each dialogue's scores are read from memory once
        # per tile rather than once per step.
        for d in range(n):
            xd = x[d]
            for sl in range(s_count):
                step = np.uint64(first_step + s_lo + sl)
                z = seed + (step * n_u + np.uint64(d) + np.uint64(1)) * gamma
                z = (z ^ (z >> np.uint64(30))) * mix1
                z = (z ^ (z >> np.uint64(27))) * mix2
                state = z ^ (z >> np.uint64(31))
                w = 0
                perm[0] = np.uint64(0)
                for q in range(n_batches):
                    product = products[q]
                    while True:
                        if w % 2 == 0:
                            z = state + np.uint64(w // 2 + 1) * gamma
                            z = (z ^ (z >> np.uint64(30))) * mix1
                            z = (z ^ (z >> np.uint64(27))) * mix2
                            z = z ^ (z >> np.uint64(31))
                            u = z & mask32
                        else:
                            u = z >> np.uint64(32)
                        w += 1
                        if (u * product) & mask32 >= thresholds[q]:
                            break
                    # Each die feeds the inside-out shuffle at once (both run over i upwards).
                    for i in range(firsts[q], stops[q]):
                        u = u * np.uint64(i + 1)
                        j = u >> np.uint64(32)
                        u = u & mask32
                        perm[i] = perm[j]
                        perm[j] = np.uint64(i)
                acc = sums[sl]
                if m == 1:
                    for c in range(k):
                        acc[perm[c], 0] += xd[c, 0]
                else:
                    for c in range(k):
                        row = acc[perm[c]]
                        xc = xd[c]
                        for mm in range(m):
                            row[mm] += xc[mm]
        for sl in range(s_count):
            for mm in range(m):
                lo = sums[sl, 0, mm]
                hi = lo
                for j in range(1, k):
                    v = sums[sl, j, mm]
                    lo = min(lo, v)
                    hi = max(hi, v)
                out[mm, s_lo + sl] = (hi - lo) / n


@functools.cache
def _numba_kernel():
    """The jitted kernel (compiled on first call, cached on disk when possible), or None without Numba."""
    global _numba
    try:
        import numba
    except ImportError:
        return None
    _numba = numba
    try:
        return numba.njit(parallel=True, cache=True)(_ranges_kernel)
    except RuntimeError:  # no writable cache directory: compile in each process instead
        return numba.njit(parallel=True, cache=False)(_ranges_kernel)


def _numba_threads() -> int:
    import numba

    return int(numba.get_num_threads())


def numba_available() -> bool:
    """True when the Numba backend can be used (Numba importable; compiles on first use)."""
    return _numba_kernel() is not None


def _ranges_numba(centred: list[np.ndarray], seed: int, n_permutations: int, chunk_size: int | None) -> np.ndarray:
    kernel = _numba_kernel()
    n, k = centred[0].shape
    x = np.ascontiguousarray(np.stack(centred, axis=-1))  # (n, k, m): one dialogue's scores together
    batches = _dice_batches(k)
    firsts = np.array([b[0] for b in batches], dtype=np.int64)
    stops = np.array([b[1] for b in batches], dtype=np.int64)
    products = np.array([b[2] for b in batches], dtype=np.uint64)
    thresholds = np.array([b[3] for b in batches], dtype=np.uint64)
    steps = chunk_size or _NUMBA_STEPS_PER_CHUNK
    ranges = np.empty((len(centred), n_permutations))
    threads = _numba_threads()
    for first in range(0, n_permutations, steps):
        count = min(steps, n_permutations - first)
        # Tiles of up to 32 steps share each dialogue's cache lines; keep >= 4 tiles per thread.
        tile = max(1, min(32, count // (4 * threads)))
        out = np.empty((len(centred), count))
        with _NUMBA_LOCK:
            kernel(x, np.uint64(seed), first, count, tile, firsts, stops, products, thresholds, out)
        ranges[:, first : first + count] = out
    return ranges


# --------------------------------------------------------------------------- recombined method


def _pool_kernel(x, seed, lo, hi, n, pool, tile, firsts, stops, products, thresholds, out):
    """Numba: out[r] = sum over dialogues lo..hi-1 of x[d] permuted as in step r (the stream).

    Tiles of ``tile`` pool entries, dialogue-major inside a tile (as ``_ranges_kernel``): each
    dialogue's scores are read once per tile, not once per entry."""
    k, m = x.shape[1], x.shape[2]
    n_batches = products.shape[0]
    gamma = np.uint64(_GAMMA)
    mix1 = np.uint64(_MIX1)
    mix2 = np.uint64(_MIX2)
    mask32 = np.uint64(_MASK32)
    n_u = np.uint64(n)
    n_tiles = (pool + tile - 1) // tile
    for t in _numba.prange(n_tiles):
        r_lo = t * tile
        r_count = min(pool, r_lo + tile) - r_lo
        for rr in range(r_count):
            out[r_lo + rr, :, :] = 0.0
        perm = np.empty(k, np.uint64)
        for d in range(lo, hi):
            xd = x[d]
            for rr in range(r_count):
                z = seed + (np.uint64(r_lo + rr) * n_u + np.uint64(d) + np.uint64(1)) * gamma
                z = (z ^ (z >> np.uint64(30))) * mix1
                z = (z ^ (z >> np.uint64(27))) * mix2
                state = z ^ (z >> np.uint64(31))
                w = 0
                perm[0] = np.uint64(0)
                for q in range(n_batches):
                    product = products[q]
                    while True:
                        if w % 2 == 0:
                            z = state + np.uint64(w // 2 + 1) * gamma
                            z = (z ^ (z >> np.uint64(30))) * mix1
                            z = (z ^ (z >> np.uint64(27))) * mix2
                            z = z ^ (z >> np.uint64(31))
                            u = z & mask32
                        else:
                            u = z >> np.uint64(32)
                        w += 1
                        if (u * product) & mask32 >= thresholds[q]:
                            break
                    for i in range(firsts[q], stops[q]):
                        u = u * np.uint64(i + 1)
                        j = u >> np.uint64(32)
                        u = u & mask32
                        perm[i] = perm[j]
                        perm[j] = np.uint64(i)
                acc = out[r_lo + rr]
                for c in range(k):
                    row = acc[perm[c]]
                    xc = xd[c]
                    for mm in range(m):
                        row[mm] += xc[mm]


def _recombine_kernel(pools, first_group, groups, sigma_seed, pick_seed, first_step, firsts, stops, products,
                      thresholds, sums):
    """Numba: sums[s] += pools[i, r(b, g)] with its columns moved by sigma(b, g), for the groups
    g = first_group + i in order and the steps b = first_step + s of one chunk (G = ``groups``)."""
    block, pool, k, m = pools.shape
    n_steps = sums.shape[0]
    n_batches = products.shape[0]
    gamma = np.uint64(_GAMMA)
    mix1 = np.uint64(_MIX1)
    mix2 = np.uint64(_MIX2)
    mask32 = np.uint64(_MASK32)
    groups_u = np.uint64(groups)
    for s in _numba.prange(n_steps):
        acc = sums[s]
        perm = np.empty(k, np.uint64)
        for i_group in range(block):
            row_id = np.uint64(first_step + s) * groups_u + np.uint64(first_group + i_group) + np.uint64(1)
            z = pick_seed + row_id * gamma
            z = (z ^ (z >> np.uint64(30))) * mix1
            z = (z ^ (z >> np.uint64(27))) * mix2
            z = z ^ (z >> np.uint64(31))
            r = ((z >> np.uint64(32)) * np.uint64(pool)) >> np.uint64(32)
            z = sigma_seed + row_id * gamma
            z = (z ^ (z >> np.uint64(30))) * mix1
            z = (z ^ (z >> np.uint64(27))) * mix2
            state = z ^ (z >> np.uint64(31))
            w = 0
            perm[0] = np.uint64(0)
            for q in range(n_batches):
                product = products[q]
                while True:
                    if w % 2 == 0:
                        z = state + np.uint64(w // 2 + 1) * gamma
                        z = (z ^ (z >> np.uint64(30))) * mix1
                        z = (z ^ (z >> np.uint64(27))) * mix2
                        z = z ^ (z >> np.uint64(31))
                        u = z & mask32
                    else:
                        u = z >> np.uint64(32)
                    w += 1
                    if (u * product) & mask32 >= thresholds[q]:
                        break
                for i in range(firsts[q], stops[q]):
                    u = u * np.uint64(i + 1)
                    j = u >> np.uint64(32)
                    u = u & mask32
                    perm[i] = perm[j]
                    perm[j] = np.uint64(i)
            entry = pools[i_group, r]
            for c in range(k):
                row = acc[perm[c]]
                src = entry[c]
                for mm in range(m):
                    row[mm] += src[mm]


@functools.cache
def _recombine_kernels():
    """The two jitted kernels of the recombined method (cached on disk when possible)."""
    if _numba_kernel() is None:
        return None
    try:
        return (_numba.njit(parallel=True, cache=True)(_pool_kernel),
                _numba.njit(parallel=True, cache=True)(_recombine_kernel))
    except RuntimeError:
        return (_numba.njit(parallel=True, cache=False)(_pool_kernel),
                _numba.njit(parallel=True, cache=False)(_recombine_kernel))


# --------------------------------------------------------------------------- Kendall's tau-b


def _tau_b_kernel(a, b, out):
    """Kendall's tau-b of ``a[r]`` against ``b[r]`` for every row r, into ``out[r]`` (Numba).

    Knight's algorithm (Knight 1966, JASA 61(314)): order the runs by (a, b) with stable sorts;
    n1 counts the pairs tied in a and n3 those tied in both. In that order a pair
    is discordant exactly when its b values are strictly inverted (within a tie in a, b
    ascends), so a second merge sort of b counts the discordant pairs D as it merges; n2
    counts the pairs tied in b. With n0 = k (k - 1) / 2 pairs, the numerator sum s_a s_b is
    n0 - n1 - n2 + n3 - 2 D and the denominator sqrt((n0 - n1) (n0 - n2)): the whole numbers
    the pairwise sum adds up, so the result is the same float. A row is NaN where the pairwise
    form would be: a NaN in it, or one infinity twice (inf - inf is NaN).
    """
    rows, k = a.shape
    for r in _numba.prange(rows):
        x = a[r]
        y = b[r]
        undefined = False
        for values in (x, y):
            up = 0
            down = 0
            for t in range(k):
                v = values[t]
                if v != v:
                    undefined = True
                elif v == np.inf:
                    up += 1
                elif v == -np.inf:
                    down += 1
            if up > 1 or down > 1:
                undefined = True
        if undefined or k < 2:
            out[r] = np.nan
            continue
        # By (a, b): a stable sort by a of the runs sorted by b.
        by_b = np.argsort(y, kind="mergesort")
        order = by_b[np.argsort(x[by_b], kind="mergesort")]
        tied_a = 0
        tied_both = 0
        run_a = 1
        run_both = 1
        for t in range(1, k):
            p = order[t - 1]
            q = order[t]
            if x[q] == x[p]:
                run_a += 1
                if y[q] == y[p]:
                    run_both += 1
                else:
                    tied_both += run_both * (run_both - 1) // 2
                    run_both = 1
            else:
                tied_a += run_a * (run_a - 1) // 2
                tied_both += run_both * (run_both - 1) // 2
                run_a = 1
                run_both = 1
        tied_a += run_a * (run_a - 1) // 2
        tied_both += run_both * (run_both - 1) // 2
        ys = y[order]
        other = np.empty(k)
        discordant = 0
        width = 1
        while width < k:
            lo = 0
            while lo < k:
                mid = min(lo + width, k)
                hi = min(lo + 2 * width, k)
                i = lo
                j = mid
                t = lo
                while i < mid and j < hi:
                    if ys[j] < ys[i]:
                        other[t] = ys[j]
                        discordant += mid - i
                        j += 1
                    else:
                        other[t] = ys[i]
                        i += 1
                    t += 1
                while i < mid:
                    other[t] = ys[i]
                    i += 1
                    t += 1
                while j < hi:
                    other[t] = ys[j]
                    j += 1
                    t += 1
                lo += 2 * width
            ys, other = other, ys
            width *= 2
        tied_b = 0
        run_b = 1
        for t in range(1, k):
            if ys[t] == ys[t - 1]:
                run_b += 1
            else:
                tied_b += run_b * (run_b - 1) // 2
                run_b = 1
        tied_b += run_b * (run_b - 1) // 2
        pairs = k * (k - 1) // 2
        untied_a = pairs - tied_a
        untied_b = pairs - tied_b
        if untied_a > 0 and untied_b > 0:
            numerator = pairs - tied_a - tied_b + tied_both - 2 * discordant
            out[r] = numerator / np.sqrt(float(untied_a) * float(untied_b))
        else:
            out[r] = np.nan


@functools.cache
def _tau_b_numba():
    """The jitted :func:`_tau_b_kernel` (cached on disk when possible), or None without Numba."""
    if _numba_kernel() is None:
        return None
    try:
        return _numba.njit(parallel=True, cache=True)(_tau_b_kernel)
    except RuntimeError:
        return _numba.njit(parallel=True, cache=False)(_tau_b_kernel)
