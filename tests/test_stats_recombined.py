"""The recombined randomised Tukey HSD (issue 28): the same test as Algorithm 1 with about 1/8 of
the work. Checked against a pure-Python reference written from its definition (module comment
"recombined steps" in scoring.stats), against the full test (Monte Carlo), and for the size rule
that keeps every pinned example on the full test."""

from __future__ import annotations

import numpy as np
import pytest

from scoring import stats
from scoring.stats import _mix64, _row_permutation, randomised_tukey_hsd

needs_numba = pytest.mark.skipif(not stats.numba_available(), reason="numba is not installed")


def scores(n: int, k: int, seed: int, effects: list[float] | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 1)) * 2.0 + rng.normal(size=(n, k)) + np.asarray(effects or [0.0] * k)


def reference_ranges(x: np.ndarray, seed: int, n_permutations: int) -> np.ndarray:
    """Permuted ranges of the recombined method from its definition, in plain Python: pools of
    partial sums over consecutive groups with the stream's step-r permutations, then for step b
    and group g the entry r(b, g) with its columns moved by sigma(b, g)."""
    n, k = x.shape
    centred = x - x.mean(axis=1, keepdims=True)
    groups = max(1, min(32, n // 16))
    pool = -(-n_permutations // 8)
    sigma_seed = _mix64(seed ^ 0x243F6A8885A308D3)
    pick_seed = _mix64(seed ^ 0x13198A2E03707344)
    edges = [n * g // groups for g in range(groups + 1)]
    sums = [[0.0] * k for _ in range(n_permutations)]
    for g in range(groups):
        table = []
        for r in range(pool):
            entry = [0.0] * k
            for d in range(edges[g], edges[g + 1]):
                perm = _row_permutation(seed, r, d, n, k)
                for c in range(k):
                    entry[perm[c]] += centred[d, c]
            table.append(entry)
        for b in range(n_permutations):
            word = _mix64((pick_seed + (b * groups + g + 1) * 0x9E3779B97F4A7C15) & ((1 << 64) - 1))
            r = ((word >> 32) * pool) >> 32
            sigma = _row_permutation(sigma_seed, b, g, groups, k)
            for c in range(k):
                sums[b][sigma[c]] += table[r][c]
    return np.array([(max(row) - min(row)) / n for row in sums])


def test_the_numpy_path_draws_the_steps_of_the_definition() -> None:
    x = scores(40, 4, seed=3)
    ranges = stats._recombined_numpy([x - x.mean(axis=1, keepdims=True)], seed=7, n_permutations=24)
    assert np.allclose(ranges[0], reference_ranges(x, seed=7, n_permutations=24), rtol=0, atol=1e-12)


@needs_numba
def test_numba_and_numpy_give_the_same_p_values() -> None:
    matrices = {"a": scores(300, 7, seed=1, effects=[0, 0.1, 0.2, 0.2, 0.3, 0.5, 0.0]), "b": scores(300, 7, seed=2)}
    fast = randomised_tukey_hsd(matrices, 400, seed=11, method="recombined", backend="numba")
    plain = randomised_tukey_hsd(matrices, 400, seed=11, method="recombined", backend="numpy")
    for name in matrices:
        assert np.array_equal(fast[name].pvalues, plain[name].pvalues)


def test_its_p_values_are_the_full_tests_within_monte_carlo_error() -> None:
    # Run effects that put p-values across (0, 1); 800 dialogues make 32 groups of 25.
    x = scores(800, 6, seed=9, effects=[0.0, 0.02, 0.05, 0.08, 0.1, 0.15])
    n_permutations = 4000
    full = randomised_tukey_hsd({"m": x}, n_permutations, seed=1, method="exact")["m"].pvalues
    recombined = randomised_tukey_hsd({"m": x}, n_permutations, seed=2, method="recombined")["m"].pvalues
    upper = np.triu_indices(6, 1)
    p, q = full[upper], recombined[upper]
    assert 0.01 < p.min() < 0.5 < p.max() < 1.0  # the comparison covers small and large p
    # Two independent estimates of one p differ by sqrt(2) Monte Carlo standard errors on average.
    se = np.sqrt(2 * p * (1 - p) / n_permutations)
    assert np.all(np.abs(p - q) <= 4 * se + 1 / (n_permutations + 1))


def test_the_size_rule_keeps_small_inputs_on_the_full_test() -> None:
    x = scores(600, 5, seed=4)
    auto = randomised_tukey_hsd({"m": x}, 300, seed=5)["m"].pvalues
    assert np.array_equal(auto, randomised_tukey_hsd({"m": x}, 300, seed=5, method="exact")["m"].pvalues)
    assert not np.array_equal(auto, randomised_tukey_hsd({"m": x}, 300, seed=5, method="recombined")["m"].pvalues)
    # Past RECOMBINE_MIN_CELLS (B n k m) and RECOMBINE_MIN_DIALOGUES, "auto" recombines.
    assert 10_000 * 10_000 * 100 * 21 >= stats.RECOMBINE_MIN_CELLS
    with pytest.raises(ValueError, match="method must be"):
        randomised_tukey_hsd({"m": x}, 10, method="fast")
