"""The permutation stream of the randomised Tukey HSD: which permutation of the runs every step
and dialogue gets, in pure Python (the reference), vectorised with NumPy, and the NumPy backend's
permuted ranges. The Numba kernels (:mod:`scoring.stats.kernels`) write the same stream out inline.

Permutation stream. Step b (0-based) and dialogue d get their own SplitMix64 stream (Steele,
Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014), so any chunk
of steps can be computed on its own, in any order, on any number of threads, with the same
result::

    mix64(z)  = the SplitMix64 finaliser (xor-shift 30, * 0xBF58476D1CE4E5B9,
                xor-shift 27, * 0x94D049BB133111EB, xor-shift 31), all mod 2^64
    state     = mix64(seed + (b * n + d + 1) * G)        G = 0x9E3779B97F4A7C15
    z_t       = mix64(state + (t + 1) * G)               t = 0, 1, ...
    words     = low 32 bits of z_0, high 32 bits of z_0, low of z_1, high of z_1, ...

The inside-out Fisher-Yates shuffle (Durstenfeld 1964; Knuth, TAOCP vol. 2, 3.4.2) needs a
die ``j_i`` uniform on ``{0..i}`` for i = 1..k-1. Consecutive dice are batched so that the
product P of their sizes is at most 2^16 and drawn from one 32-bit word u by Lemire's
multiply-shift method with rejection (Lemire, ACM TOMACS 29(1), 2019; batched as in
Brackett-Rozinsky and Lemire, "Batched ranged random integer generation", 2024): reject u
while ``(u * P) mod 2^32 < 2^32 mod P`` (probability below P / 2^32 <= 2^-16), then peel the
dice off with ``p = r * (i + 1); j_i = p >> 32; r = p mod 2^32`` starting from r = u. This is
exact: every permutation has probability exactly 1/k!. The shuffle is
``pi[0] = 0; for i in 1..k-1: pi[i] = pi[j_i]; pi[j_i] = i``, and the permuted row is
``M*[d, pi[c]] = M[d, c]`` (the score in column c moves to column pi[c]).
"""

from __future__ import annotations

import functools

import numpy as np

_GAMMA = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1
# Dice are batched up to this product so that a rejection (probability < P / 2^32) is rare.
_BATCH_PRODUCT_LIMIT = 1 << 16
# Chunks of the NumPy path hold about this many (step, dialogue, run) cells per array.
_NUMPY_CELLS_PER_CHUNK = 1 << 19


@functools.cache
def _dice_batches(n_runs: int) -> tuple[tuple[int, int, int, int], ...]:
    """Batches ``(first_i, stop_i, product, threshold)`` of the shuffle's dice for k runs.

    Die i (for i = 1..k-1) is uniform on {0..i}; consecutive dice are grouped while the
    product of their sizes stays <= 2^16 (a die larger than that gets a batch of its own).
    ``threshold = 2^32 mod product``: words u with ``(u * product) mod 2^32 < threshold``
    are rejected, which makes the batch exactly uniform (Lemire 2019).
    """
    batches = []
    i = 1
    while i < n_runs:
        first, product = i, 1
        while i < n_runs and (i == first or product * (i + 1) <= _BATCH_PRODUCT_LIMIT):
            product *= i + 1
            i += 1
        batches.append((first, i, product, (1 << 32) % product))
    return tuple(batches)


def _mix64(z: int) -> int:
    """SplitMix64 finaliser on a Python int (the reference the vectorised versions must match)."""
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK64
    return z ^ (z >> 31)


def _row_permutation(seed: int, step: int, dialogue: int, n_dialogues: int, n_runs: int) -> list[int]:
    """The permutation ``pi`` of (step, dialogue), in pure Python: see the module docstring above."""
    state = _mix64((seed + (step * n_dialogues + dialogue + 1) * _GAMMA) & _MASK64)
    word_index = 0

    def next_word() -> int:
        nonlocal word_index
        z = _mix64((state + (word_index // 2 + 1) * _GAMMA) & _MASK64)
        word = z & _MASK32 if word_index % 2 == 0 else z >> 32
        word_index += 1
        return word

    dice = [0] * n_runs
    for first, stop, product, threshold in _dice_batches(n_runs):
        word = next_word()
        while (word * product) & _MASK32 < threshold:
            word = next_word()
        for i in range(first, stop):
            word *= i + 1
            dice[i] = word >> 32
            word &= _MASK32
    perm = [0] * n_runs
    for i in range(1, n_runs):
        j = dice[i]
        perm[i] = perm[j]
        perm[j] = i
    return perm


def _mix64_array(z: np.ndarray) -> np.ndarray:
    # uint64 array arithmetic wraps modulo 2^64 silently, which is what SplitMix64 wants.
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return z ^ (z >> np.uint64(31))


def _words_at(states: np.ndarray, index: np.ndarray) -> np.ndarray:
    """32-bit word number ``index`` of each row stream, as uint64."""
    index = index.astype(np.uint64)
    z = _mix64_array(states + (index // np.uint64(2) + np.uint64(1)) * np.uint64(_GAMMA))
    return np.where(index % np.uint64(2) == 0, z & np.uint64(_MASK32), z >> np.uint64(32))


def _permutations_numpy(seed: int, first_step: int, n_steps: int, n_dialogues: int, n_runs: int) -> np.ndarray:
    """Permutations of steps ``first_step ..`` as an array ``perm[s * n + d, c]``.

    Vectorised over rows; identical to :func:`_row_permutation` row by row.
    """
    n_rows = n_steps * n_dialogues
    row_ids = np.arange(first_step * n_dialogues, first_step * n_dialogues + n_rows, dtype=np.uint64)
    return _permutations_for_rows(seed, row_ids, n_runs)


def _permutations_for_rows(seed: int, row_ids: np.ndarray, n_runs: int) -> np.ndarray:
    """The permutations of the stream's rows ``row_ids`` (``b * n + d``) as ``perm[row, c]``."""
    n_rows = row_ids.shape[0]
    states = _mix64_array(np.uint64(seed) + (row_ids + np.uint64(1)) * np.uint64(_GAMMA))
    batches = _dice_batches(n_runs)
    n_words = len(batches)
    # The words each row needs when nothing is rejected; rejected rows fetch theirs on demand.
    z = _mix64_array(
        states[:, None] + np.arange(1, (n_words + 1) // 2 + 1, dtype=np.uint64)[None, :] * np.uint64(_GAMMA)
    )
    planned = np.empty((n_rows, 2 * z.shape[1]), dtype=np.uint64)
    planned[:, 0::2] = z & np.uint64(_MASK32)
    planned[:, 1::2] = z >> np.uint64(32)
    skipped = np.zeros(n_rows, dtype=np.int64)  # words rejected so far, per row
    perm = np.empty((n_rows, n_runs), dtype=np.intp)
    flat = perm.reshape(-1)
    perm[:, 0] = 0
    # Row-major, so that each row's reads and writes stay within its own cache lines.
    row_starts = np.arange(0, n_rows * n_runs, n_runs, dtype=np.uint64)
    mask32 = np.uint64(_MASK32)
    target = np.empty(n_rows, dtype=np.uint64)
    # Dice are below 2^32 and targets below 2^63, so the uint64 buffer reads as intp unchanged.
    target_index = target.view(np.intp)
    for q, (first, stop, product, threshold) in enumerate(batches):
        words = planned[:, q].copy()
        shifted = np.flatnonzero(skipped)
        if shifted.size:
            words[shifted] = _words_at(states[shifted], q + skipped[shifted])
        rejected = np.flatnonzero((words * np.uint64(product)) & mask32 < np.uint64(threshold))
        while rejected.size:
            skipped[rejected] += 1
            words[rejected] = _words_at(states[rejected], q + skipped[rejected])
            still = (words[rejected] * np.uint64(product)) & mask32 < np.uint64(threshold)
            rejected = rejected[still]
        for i in range(first, stop):
            np.multiply(words, np.uint64(i + 1), out=words)
            np.right_shift(words, np.uint64(32), out=target)  # the die j_i
            np.bitwise_and(words, mask32, out=words)
            np.add(target, row_starts, out=target)
            perm[:, i] = np.take(flat, target_index, mode="clip")
            # An np.intp scalar, not a Python int: NumPy's scatter is ~5x slower with the latter.
            flat[target_index] = np.intp(i)
    return perm


def _ranges_numpy(centred: list[np.ndarray], seed: int, n_permutations: int, chunk_size: int | None) -> np.ndarray:
    """Permuted ranges of column means, shape (measures, B), with the NumPy backend."""
    n, k = centred[0].shape
    steps = chunk_size or max(1, _NUMPY_CELLS_PER_CHUNK // (n * k))
    ranges = np.empty((len(centred), n_permutations))
    for first in range(0, n_permutations, steps):
        count = min(steps, n_permutations - first)
        perm = _permutations_numpy(seed, first, count, n, k)
        # Column pi[c] of step s collects the score that sat in column c: a scatter-add.
        perm += (np.arange(count, dtype=np.intp) * k).repeat(n)[:, None]
        bins = perm.reshape(-1)
        for m, x in enumerate(centred):
            weights = np.tile(x, (count, 1)).reshape(-1)
            sums = np.bincount(bins, weights=weights, minlength=count * k).reshape(count, k)
            ranges[m, first : first + count] = (sums.max(axis=1) - sums.min(axis=1)) / n
            del weights, sums
        # Free this chunk before the next one is drawn, so that at most one chunk is held.
        del perm, bins
    return ranges
