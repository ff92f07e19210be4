"""The recombined randomised Tukey HSD (issue 28): the same test as Algorithm 1 with a fraction of
the work. Checked against a pure-Python reference written from its definition (module comment
"recombined steps" in scoring.stats), against the full test (Monte Carlo), and for the size rule
that keeps every pinned example on the full test."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from scoring import stats
from scoring.stats import randomised_tukey_hsd
from scoring.stats import recombined as recombined_method
from scoring.stats.stream import _mix64, _row_permutation

needs_numba = pytest.mark.skipif(not stats.numba_available(), reason="numba is not installed")


def scores(n: int, k: int, seed: int, effects: list[float] | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 1)) * 2.0 + rng.normal(size=(n, k)) + np.asarray(effects or [0.0] * k)


def reference_ranges(x: np.ndarray, seed: int, n_permutations: int, groups: int, pool: int) -> np.ndarray:
    """Permuted ranges of the recombined method from its definition, in plain Python: pools of
    ``pool`` partial sums over ``groups`` consecutive groups with the stream's step-r permutations,
    then for step b and group g the entry r(b, g) with its columns moved by sigma(b, g)."""
    n, k = x.shape
    centred = x - x.mean(axis=1, keepdims=True)
    sigma_seed = _mix64(seed ^ 0x243F6A8885A308D3)
    pick_seed = _mix64(seed ^ 0x13198A2E03707344)
    edges = [n * g // groups for g in range(groups + 1)]
    tables = []
    for g in range(groups):
        table = []
        for r in range(pool):
            entry = [0.0] * k
            for d in range(edges[g], edges[g + 1]):
                perm = _row_permutation(seed, r, d, n, k)
                for c in range(k):
                    entry[perm[c]] += centred[d, c]
            table.append(entry)
        tables.append(table)
    ranges = []
    for b in range(n_permutations):
        sums = [0.0] * k
        for g in range(groups):
            word = _mix64((pick_seed + (b * groups + g + 1) * 0x9E3779B97F4A7C15) & ((1 << 64) - 1))
            r = ((word >> 32) * pool) >> 32
            sigma = _row_permutation(sigma_seed, b, g, groups, k)
            for c in range(k):
                sums[sigma[c]] += tables[g][r][c]
        ranges.append((max(sums) - min(sums)) / n)
    return np.array(ranges)


def test_the_plan_takes_the_largest_pool_divisor_within_the_inflation_budget() -> None:
    # G = min(64, n // 16); D the largest in [1, 64] with 0.8 D / (G (k - 1)^(1/3)) <= 0.05,
    # i.e. (16 D)^3 <= (k - 1) G^3; P = ceil(B / D). Worked by hand:
    assert (stats.INFLATION_SCALE, stats.INFLATION_BUDGET) == (Fraction(4, 5), Fraction(1, 20))
    # 99 * 64^3 = 25,952,256 lies between 288^3 (D = 18) and 304^3 (D = 19); 18 * 555 < 10,000.
    assert recombined_method._recombine_plan(10_000, 100, 10_000) == (64, 18, 556)
    # 29 * 64^3 = 7,602,176 lies between 192^3 (D = 12) and 208^3; 12 * 833 < 10,000.
    assert recombined_method._recombine_plan(4_000, 30, 10_000) == (64, 12, 834)
    # 15 * 20^3 = 120,000 lies between 48^3 (D = 3) and 64^3.
    assert recombined_method._recombine_plan(320, 16, 24) == (20, 3, 8)
    # 4 * 64^3 = 1,048,576 lies between 96^3 (D = 6) and 112^3.
    assert recombined_method._recombine_plan(100_000, 5, 10_000) == (64, 6, 1667)
    # 1 * 32^3 = 32,768 lies between 32^3 (D = 2) and 48^3.
    assert recombined_method._recombine_plan(512, 2, 1_000_000) == (32, 2, 500_000)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("numba", marks=needs_numba)])
def test_both_backends_draw_the_steps_of_the_definition(backend: str) -> None:
    x = scores(320, 16, seed=3)
    assert recombined_method._recombine_plan(320, 16, 24) == (20, 3, 8)
    centred = np.ascontiguousarray((x - x.mean(axis=1, keepdims=True))[:, :, None])
    ranges = recombined_method._recombined_ranges(centred, seed=7, n_permutations=24, use_numba=backend == "numba")
    assert np.allclose(ranges[0], reference_ranges(x, seed=7, n_permutations=24, groups=20, pool=8),
                       rtol=0, atol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("numba", marks=needs_numba)])
def test_chunks_of_steps_and_blocks_of_groups_do_not_change_the_p_values(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Same seed, same p-values, however the steps are cut into chunks (here 7 steps of 2 x 5
    # sums) and the groups into blocks (here pools of 3 groups of 100 entries at a time).
    matrices = {"a": scores(600, 5, seed=1, effects=[0, 0.05, 0.1, 0.1, 0.2]), "b": scores(600, 5, seed=2)}
    assert recombined_method._recombine_plan(600, 5, 300) == (37, 3, 100)
    whole = randomised_tukey_hsd(matrices, 300, seed=4, method="recombined", backend=backend)
    monkeypatch.setattr(recombined_method, "_RECOMBINE_CELLS_PER_CHUNK", 70)
    chunked = randomised_tukey_hsd(matrices, 300, seed=4, method="recombined", backend=backend)
    monkeypatch.setattr(recombined_method, "_RECOMBINE_POOL_BYTES", 3 * 100 * 5 * 2 * 8)
    blocked = randomised_tukey_hsd(matrices, 300, seed=4, method="recombined", backend=backend)
    for name in matrices:
        assert np.array_equal(whole[name].pvalues, chunked[name].pvalues)
        assert np.array_equal(whole[name].pvalues, blocked[name].pvalues)


@needs_numba
def test_numba_and_numpy_give_the_same_p_values() -> None:
    matrices = {"a": scores(300, 7, seed=1, effects=[0, 0.1, 0.2, 0.2, 0.3, 0.5, 0.0]), "b": scores(300, 7, seed=2)}
    fast = randomised_tukey_hsd(matrices, 400, seed=11, method="recombined", backend="numba")
    plain = randomised_tukey_hsd(matrices, 400, seed=11, method="recombined", backend="numpy")
    for name in matrices:
        assert np.array_equal(fast[name].pvalues, plain[name].pvalues)


def test_its_p_values_are_the_full_tests_within_monte_carlo_error() -> None:
    # Run effects that put p-values across (0, 1); 800 dialogues make 50 groups of 16, and 30
    # runs a pool divisor of 9 (P = 445 entries per group for B = 4,000).
    assert recombined_method._recombine_plan(800, 30, 4000) == (50, 9, 445)
    x = scores(800, 30, seed=9, effects=list(np.linspace(0.0, 0.2, 30)))
    n_permutations = 4000
    full = randomised_tukey_hsd({"m": x}, n_permutations, seed=1, method="exact")["m"].pvalues
    recombined = randomised_tukey_hsd({"m": x}, n_permutations, seed=2, method="recombined")["m"].pvalues
    upper = np.triu_indices(30, 1)
    p, q = full[upper], recombined[upper]
    # The comparison covers small and middle p: 10 pairs in [0.01, 0.05), 24 in [0.05, 0.2), 27 in [0.2, 0.5).
    assert np.count_nonzero((p >= 0.01) & (p < 0.05)) == 10 and np.count_nonzero((p >= 0.2) & (p < 0.5)) == 27
    # Two independent estimates of one p differ by sqrt(2) Monte Carlo standard errors on average.
    se = np.sqrt(2 * p * (1 - p) / n_permutations)
    assert np.all(np.abs(p - q) <= 4 * se + 1 / (n_permutations + 1))


def test_the_size_rule_keeps_small_inputs_on_the_full_test() -> None:
    x = scores(600, 5, seed=4)
    auto = randomised_tukey_hsd({"m": x}, 300, seed=5)["m"].pvalues
    assert np.array_equal(auto, randomised_tukey_hsd({"m": x}, 300, seed=5, method="exact")["m"].pvalues)
    assert not np.array_equal(auto, randomised_tukey_hsd({"m": x}, 300, seed=5, method="recombined")["m"].pvalues)
    # Past RECOMBINE_MIN_CELLS (B n k m) and RECOMBINE_MIN_DIALOGUES, "auto" recombines when the
    # plan's pool divisor is at least 4: both sizes of issue 28, not 2 runs over 512 dialogues
    # (D = 2: too little saved to be worth the dependence).
    assert 10_000 * 10_000 * 100 * 21 >= stats.RECOMBINE_MIN_CELLS
    assert recombined_method._choose_method("auto", 10_000, 100, 10_000, 21) == "recombined"
    assert recombined_method._choose_method("auto", 4_000, 30, 10_000, 20) == "recombined"
    assert recombined_method._choose_method("auto", 512, 2, 1_000_000, 4) == "exact"
    assert recombined_method._choose_method("auto", 400, 100, 10_000, 21) == "exact"  # fewer than 512 dialogues
    with pytest.raises(ValueError, match="method must be"):
        randomised_tukey_hsd({"m": x}, 10, method="fast")


def test_the_recombined_standard_errors_carry_the_inflation_of_the_plan() -> None:
    """The Monte Carlo standard error printed with a recombined p is the binomial's times
    sqrt(1 + 0.8 D / (G (k - 1)^(1/3))), with the G and D of the plan: the model the plan was
    chosen under, which meets or exceeds the inflation benchmarks/tukey_recombined.py measured.
    The full test keeps the binomial error bit for bit."""
    # Worked by hand with the plans of the test above: 1 + 0.8 * 18 / (64 * 99^(1/3)) = 1.04863...
    for shape, (groups, divisor, runs) in {(10_000, 100, 10_000): (64, 18, 100), (4_000, 30, 10_000): (64, 12, 30),
                                           (800, 30, 4000): (50, 9, 30)}.items():
        expected = 1 + 0.8 * divisor / (groups * (runs - 1) ** (1 / 3))
        assert stats.recombined_variance_inflation(*shape) == pytest.approx(expected, rel=1e-15)
        assert 1.04 < expected <= 1.05  # within the plan's budget: errors at most 2.5% wider
    x = scores(800, 30, seed=9, effects=list(np.linspace(0.0, 0.2, 30)))
    recombined = randomised_tukey_hsd({"m": x}, 4000, seed=2, method="recombined")["m"]
    exact = randomised_tukey_hsd({"m": x}, 4000, seed=2, method="exact")["m"]
    inflation = 1 + 0.8 * 9 / (50 * 29 ** (1 / 3))
    assert recombined.mc_variance_inflation == pytest.approx(inflation, rel=1e-15)
    p = recombined.pvalues
    np.testing.assert_allclose(recombined.mc_standard_errors, np.sqrt(inflation * p * (1 - p) / 4000), rtol=1e-14)
    assert exact.mc_variance_inflation == 1.0
    assert np.array_equal(exact.mc_standard_errors, np.sqrt(exact.pvalues * (1 - exact.pvalues) / 4000))
    # What the server stores (the pair counts and the inflation) rebuilds the errors exactly.
    rebuilt = stats.TukeyHSDResult.from_counts(
        recombined.exceedance_counts(), recombined.means, residual_variance=recombined.residual_variance,
        effect_sizes_defined=True, n_permutations=4000, seed=2, n_dialogues=800,
        mc_variance_inflation=recombined.mc_variance_inflation)
    assert np.array_equal(rebuilt.mc_standard_errors, recombined.mc_standard_errors)
    entry = {"means": recombined.means, "pvalues": recombined.pvalues, "differences": recombined.differences,
             "effect_sizes": recombined.effect_sizes, "mc_se": recombined.mc_standard_errors,
             "mc_variance_inflation": recombined.mc_variance_inflation}
    stored = stats.TukeyHSDResult.from_stored(entry, permutations=4000, seed=2, n_dialogues=800)
    assert stored.mc_variance_inflation == recombined.mc_variance_inflation
    for bad in (0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="mc_variance_inflation must be a finite number >= 1"):
            stats.TukeyHSDResult.from_stored({**entry, "mc_variance_inflation": bad}, permutations=4000, seed=2,
                                             n_dialogues=800)


def test_recombined_corpus_p_values_carry_the_inflation_too() -> None:
    rng = np.random.default_rng(3)
    # Sufficient statistics of a ratio measure (hits, length) over 600 items and 5 runs.
    rows = np.stack([rng.integers(0, 10, size=(600, 5)), np.full((600, 5), 10)], axis=2).astype(float)
    ratio = {"r": stats.CorpusMeasure(rows, lambda sums: sums[..., 0] / sums[..., 1])}
    recombined = stats.corpus_tukey_hsd(ratio, n_permutations=300, seed=4, method="recombined")["r"]
    assert recombined_method._recombine_plan(600, 5, 300) == (37, 3, 100)
    inflation = 1 + 0.8 * 3 / (37 * 4 ** (1 / 3))
    assert recombined.mc_variance_inflation == pytest.approx(inflation, rel=1e-15)
    p = recombined.pvalues
    np.testing.assert_allclose(recombined.mc_standard_errors, np.sqrt(inflation * p * (1 - p) / 300), rtol=1e-14)
    exact = stats.corpus_tukey_hsd(ratio, n_permutations=300, seed=4, method="exact")["r"]
    assert exact.mc_variance_inflation == 1.0
