"""Tests of scoring.stats: randomised Tukey HSD, bootstrap intervals and meta-evaluation.

Plain pytest, no Django. Monte Carlo comparisons use fixed seeds, so each is deterministic;
the tolerances (a few Monte Carlo standard errors) say how far apart the numbers may be
by chance, and the seeds were not searched for.
"""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import kendalltau, studentized_range

from scoring import stats
from scoring.stats import (
    bootstrap_confidence_intervals,
    delta_required,
    discriminative_power,
    kendall_tau_with_ci,
    kernels,
    meta_evaluate,
    meta_evaluation,
    randomised_tukey_hsd,
    residual_variance,
    stream,
    tukey_hsd_loop,
)
from scoring.stats import tukey as tukey_module

needs_numba = pytest.mark.skipif(not stats.numba_available(), reason="numba is not installed")


def tukey(matrix: np.ndarray, n_permutations: int = 1000, seed: int = 0, **options) -> stats.TukeyHSDResult:
    return randomised_tukey_hsd({"m": matrix}, n_permutations, seed, **options)["m"]


def scores(n: int, k: int, seed: int, dialogue_sd: float = 3.0, run_effects=None) -> np.ndarray:
    """Normal scores with a strong dialogue effect and optional run effects."""
    rng = np.random.default_rng(seed)
    effects = np.zeros(k) if run_effects is None else np.asarray(run_effects, dtype=float)
    return rng.normal(size=(n, 1)) * dialogue_sd + rng.normal(size=(n, k)) + effects


def upper(matrix: np.ndarray) -> np.ndarray:
    return matrix[np.triu_indices(matrix.shape[0], 1)]


# --------------------------------------------------------------------------- validity and agreement


def test_familywise_error_rate_under_the_null_is_alpha():
    # Runs exchangeable within each dialogue: the smallest p of a data set is below 0.05 in
    # floor(0.05 * (B + 1) - 1) / (B + 1) = 49/1000 of data sets (the observed range is one
    # of B + 1 exchangeable ranges). 400 data sets: standard error 0.011.
    n_sets, n_permutations = 400, 999
    any_significant = 0
    for s in range(n_sets):
        x = scores(15, 5, seed=10_000 + s, dialogue_sd=5.0)
        result = tukey(x, n_permutations, seed=s)
        any_significant += bool((upper(result.pvalues) < 0.05).any())
    rate = any_significant / n_sets
    expected = 49 / 1000
    standard_error = math.sqrt(expected * (1 - expected) / n_sets)
    assert abs(rate - expected) <= 3 * standard_error, rate


def test_agrees_with_blocked_parametric_tukey_on_normal_data():
    # The blocked (two-way) Tukey HSD: q = |diff| / sqrt(V_E / n) on (k - 1)(n - 1) degrees
    # of freedom. The randomisation test uses unstudentised ranges, so the two agree only
    # for large n: with n = 40 the permuted ranges absorb the run effects and the randomised
    # p-values come out clearly larger (docs/statistics.md). n = 1000 here.
    n, k, n_permutations = 1000, 5, 3000
    x = scores(n, k, seed=7, run_effects=[0.0, 0.03, 0.07, 0.10, 0.13])
    result = tukey(x, n_permutations, seed=1)
    # The reference is built from the data alone, not from the code under test: V_E from the
    # sums of squares of the two-way ANOVA without replication, S_E = S_T - S_runs - S_dialogues.
    grand = x.mean()
    s_total = np.square(x - grand).sum()
    s_runs = n * np.square(x.mean(axis=0) - grand).sum()
    s_dialogues = k * np.square(x.mean(axis=1) - grand).sum()
    v_e = (s_total - s_runs - s_dialogues) / ((n - 1) * (k - 1))
    means = x.mean(axis=0)
    q = np.abs(means[:, None] - means[None, :]) / np.sqrt(v_e / n)
    parametric = studentized_range.sf(q, k, (k - 1) * (n - 1))
    p_ref = upper(parametric)
    assert p_ref.min() < 0.05 < 0.5 < p_ref.max()  # the comparison covers small and large p
    standard_error = np.sqrt(np.maximum(p_ref, 1 / n_permutations) * (1 - p_ref) / n_permutations)
    np.testing.assert_array_less(np.abs(upper(result.pvalues) - p_ref), 4 * standard_error + 1 / n_permutations)


def test_two_runs_is_fishers_paired_randomisation_test():
    # With k = 2 a row permutation either keeps or swaps the two scores, each with
    # probability 1/2, so range_b = |mean_d(s_d * (x_d1 - x_d2))| with random signs s_d:
    # exactly Fisher's sign-flip test of the paired differences. Exact p over all 2^12 flips.
    rng = np.random.default_rng(3)
    x = rng.normal(size=(12, 2)) + [0.0, 1.0]
    diffs = x[:, 0] - x[:, 1]
    observed = abs(diffs.mean())
    flips = np.array(list(itertools.product([1.0, -1.0], repeat=12)))
    exact = np.mean(np.abs((flips * diffs).mean(axis=1)) >= observed - 1e-12)
    n_permutations = 20_000
    p = tukey(x, n_permutations, seed=5).pvalues[0, 1]
    assert 0.01 < exact < 0.5
    assert abs(p - exact) <= 4 * math.sqrt(exact * (1 - exact) / n_permutations) + 1 / n_permutations


def test_two_runs_counts_exactly_the_sign_flips_of_fishers_test():
    # The same statement without Monte Carlo slack: step b keeps or swaps dialogue d's two
    # scores as the permutation stream says; Fisher's statistic with those signs,
    # |mean_d(s_d (x_d1 - x_d2))|, must reach the observed |mean difference| in exactly the
    # steps that the Tukey range does.
    rng = np.random.default_rng(13)
    n, n_permutations, seed = 25, 2000, 21
    x = rng.normal(size=(n, 2)) + [0.0, 0.6]
    diffs = x[:, 0] - x[:, 1]
    observed = abs(diffs.mean())
    count = 0
    for b in range(n_permutations):
        signs = np.array([1.0 if stream._row_permutation(seed, b, d, n, 2) == [0, 1] else -1.0 for d in range(n)])
        count += abs((signs * diffs).mean()) >= observed
    assert 0.01 < count / n_permutations < 0.5  # a p-value in the interesting range
    for backend in ("numpy", "numba") if stats.numba_available() else ("numpy",):
        assert tukey(x, n_permutations, seed, backend=backend).pvalues[0, 1] == (count + 1) / (n_permutations + 1)


def test_vectorised_version_equals_the_loop_reference():
    x = scores(9, 4, seed=11, run_effects=[0.0, 0.4, 0.8, 1.2])
    loop = tukey_hsd_loop(x, n_permutations=300, seed=17)
    fast = tukey(x, 300, seed=17)
    np.testing.assert_array_equal(fast.pvalues, loop.pvalues)
    np.testing.assert_array_equal(fast.differences, loop.differences)
    assert (loop.n_permutations, loop.seed) == (300, 17)


def test_loop_reference_equals_vectorised_on_tied_decimal_scores():
    # Scores on a 0.1 grid: many permuted ranges tie the observed differences exactly, and
    # the two implementations add them up in different orders.
    rng = np.random.default_rng(2)
    x = rng.integers(0, 6, size=(10, 4)) / 10
    loop = tukey_hsd_loop(x, n_permutations=200, seed=4)
    np.testing.assert_array_equal(tukey(x, 200, seed=4, backend="numpy").pvalues, loop.pvalues)
    np.testing.assert_array_equal(tukey(x, 200, seed=4).pvalues, loop.pvalues)


def test_ties_are_counted_as_in_exact_arithmetic(monkeypatch):
    # Decimal scores whose sums are inexact in binary; count with Fractions instead.
    rows = [["0.1", "0.3", "0.9"], ["0.7", "0.1", "0.8"], ["0.3", "0.3", "0.6"], ["0.2", "0.1", "0.7"]]
    exact = [[Fraction(v) for v in row] for row in rows]
    x = np.array([[float(v) for v in row] for row in rows])
    n, k = x.shape
    n_permutations, seed = 300, 9
    means = [sum(exact[d][j] for d in range(n)) / n for j in range(k)]
    observed = {abs(a - b) for a in means for b in means}
    counts = np.zeros((k, k), dtype=int)
    exact_ties = 0
    for b in range(n_permutations):
        permuted = [[Fraction(0)] * k for _ in range(n)]
        for d in range(n):
            for c, target in enumerate(stream._row_permutation(seed, b, d, n, k)):
                permuted[d][target] = exact[d][c]
        col = [sum(permuted[d][j] for d in range(n)) / n for j in range(k)]
        spread = max(col) - min(col)
        exact_ties += spread in observed
        counts += np.array([[spread >= abs(means[i] - means[j]) for j in range(k)] for i in range(k)])
    expected = (counts + 1) / (n_permutations + 1)
    assert exact_ties > 0 and (counts[np.triu_indices(k, 1)] < n_permutations).all()
    for backend in ("numpy", "numba") if stats.numba_available() else ("numpy",):
        np.testing.assert_array_equal(tukey(x, n_permutations, seed, backend=backend).pvalues, expected)
    np.testing.assert_array_equal(tukey_hsd_loop(x, n_permutations, seed).pvalues, expected)
    # Without the tolerance, round-off drops some of those ties: the test can tell.
    # Patched where randomised_tukey_hsd looks it up.
    monkeypatch.setattr(tukey_module, "_tie_tolerance", lambda matrix: 0.0)
    assert not np.array_equal(tukey(x, n_permutations, seed).pvalues, expected)


# --------------------------------------------------------------------------- properties


def test_p_never_decreases_as_the_difference_shrinks():
    for seed in range(5):
        x = scores(20, 8, seed=seed, run_effects=np.linspace(0, 1.5, 8))
        result = tukey(x, 500, seed=seed)
        diffs = np.abs(upper(result.differences))
        pvalues = upper(result.pvalues)
        order = np.argsort(-diffs, kind="stable")
        assert np.all(np.diff(pvalues[order]) >= 0)


def test_reordering_runs_permutes_the_pvalues_within_monte_carlo_error():
    n_permutations = 4000
    x = scores(30, 6, seed=21, run_effects=[0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    order = np.array([3, 0, 5, 1, 4, 2])
    original = tukey(x, n_permutations, seed=2)
    reordered = tukey(x[:, order], n_permutations, seed=2)
    expected = original.pvalues[np.ix_(order, order)]
    np.testing.assert_array_equal(reordered.differences, original.differences[np.ix_(order, order)])
    standard_error = np.sqrt(np.maximum(expected, 1 / n_permutations) * (1 - expected) / n_permutations)
    np.testing.assert_array_less(np.abs(reordered.pvalues - expected), 4 * standard_error + 1 / n_permutations)


def test_adding_a_constant_per_dialogue_changes_nothing():
    x = scores(25, 5, seed=8, run_effects=[0.0, 0.3, 0.6, 0.9, 1.2])
    shifted = x + np.random.default_rng(1).uniform(-5, 5, size=(25, 1))
    a, b = tukey(x, 2000, seed=3), tukey(shifted, 2000, seed=3)
    np.testing.assert_array_equal(b.pvalues, a.pvalues)
    np.testing.assert_allclose(b.differences, a.differences, rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.effect_sizes, a.effect_sizes, rtol=0, atol=1e-12)
    assert b.residual_variance == pytest.approx(a.residual_variance, rel=1e-12)


def test_same_seed_same_output_and_different_seeds_differ():
    x = scores(20, 6, seed=5, run_effects=np.linspace(0, 1, 6))
    first, again, other = tukey(x, 1000, seed=42), tukey(x, 1000, seed=42), tukey(x, 1000, seed=43)
    for field in ("pvalues", "differences", "effect_sizes", "mc_standard_errors", "means"):
        np.testing.assert_array_equal(getattr(first, field), getattr(again, field))
    assert not np.array_equal(first.pvalues, other.pvalues)
    assert (first.seed, first.n_permutations, other.seed) == (42, 1000, 43)


@pytest.mark.parametrize("backend", ["numpy", pytest.param("numba", marks=needs_numba)])
def test_chunk_size_does_not_change_the_result(backend):
    x = scores(13, 5, seed=6, run_effects=np.linspace(0, 1, 5))
    reference = tukey(x, 257, seed=8, backend=backend)
    for chunk_size in (1, 7, 256, 10_000):
        np.testing.assert_array_equal(
            tukey(x, 257, seed=8, chunk_size=chunk_size, backend=backend).pvalues, reference.pvalues
        )


def test_memory_does_not_grow_with_the_number_of_permutations():
    # Streaming: 6 times more permutations may add their ranges (8 bytes each per measure, and
    # a sorted copy) but no chunk-sized arrays. Both B span several chunks (174 steps each for
    # 300 x 10). tracemalloc sees NumPy's buffers (the NumPy path).
    import tracemalloc

    x = scores(300, 10, seed=4, run_effects=np.linspace(0, 0.3, 10))
    peaks = {}
    for n_permutations in (1000, 6000):
        tracemalloc.start()
        randomised_tukey_hsd({"a": x, "b": 2 * x}, n_permutations, seed=1, backend="numpy")
        peaks[n_permutations] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[1000] > 1_000_000  # a chunk of permutations was really held
    assert peaks[6000] < peaks[1000] + 2 * 8 * 6000 * 4 + 200_000, peaks
    # One chunk at a time: a chunk's permutation indices and one measure's weights (8 bytes a
    # cell each) plus the stream's scratch, not two chunks' worth.
    assert peaks[6000] < 3 * 8 * stream._NUMPY_CELLS_PER_CHUNK, peaks


@needs_numba
def test_numba_and_numpy_backends_agree_for_several_measures():
    x = scores(40, 7, seed=12, run_effects=np.linspace(0, 1, 7))
    matrices = {"a": x, "b": x**2, "c": np.abs(x)}
    by_numba = randomised_tukey_hsd(matrices, 500, seed=77, backend="numba")
    by_numpy = randomised_tukey_hsd(matrices, 500, seed=77, backend="numpy")
    for name in matrices:
        np.testing.assert_array_equal(by_numba[name].pvalues, by_numpy[name].pvalues)


def test_measures_share_permutations_so_a_measure_alone_gives_the_same_pvalues():
    x = scores(15, 4, seed=30, run_effects=[0, 0.5, 1, 1.5])
    together = randomised_tukey_hsd({"a": x, "b": -x, "c": x * 3}, 800, seed=5)
    np.testing.assert_array_equal(together["a"].pvalues, tukey(x, 800, seed=5).pvalues)
    # -x and 3x have the same permuted ranges as x up to sign and scale, under shared permutations.
    np.testing.assert_array_equal(together["b"].pvalues, together["a"].pvalues)
    np.testing.assert_array_equal(together["c"].pvalues, together["a"].pvalues)


def test_rejection_sampling_path_matches_across_implementations():
    # Rows of seed 0, k = 30 whose first word for dice batch 3 or 5 is rejected (found by a
    # search over row ids b * n + d); with n = 2 they are step row_id // 2, dialogue row_id % 2.
    k = 30
    batches = stream._dice_batches(k)
    for row_id, batch in ((52077, 3), (170845, 5), (824183, 5)):
        first, stop, product, threshold = batches[batch]
        state = stream._mix64((0 + (row_id + 1) * stream._GAMMA) & stream._MASK64)
        z = stream._mix64((state + (batch // 2 + 1) * stream._GAMMA) & stream._MASK64)
        word = z >> 32 if batch % 2 else z & stream._MASK32
        assert (word * product) & stream._MASK32 < threshold  # it really is rejected
        step, dialogue = divmod(row_id, 2)
        expected = stream._row_permutation(0, step, dialogue, 2, k)
        assert sorted(expected) == list(range(k))
        assert stream._permutations_numpy(0, step, 1, 2, k)[dialogue].tolist() == expected
    if stats.numba_available():
        x = np.random.default_rng(0).normal(size=(2, k))
        centred = [x - x.mean(axis=1, keepdims=True)]
        n_steps = 824183 // 2 + 1
        np.testing.assert_array_equal(
            kernels._ranges_numba(centred, 0, n_steps, None), stream._ranges_numpy(centred, 0, n_steps, None)
        )


@pytest.mark.parametrize("n_runs", [2, 3, 17, 100, 70_000])
def test_vectorised_permutations_match_the_pure_python_stream(n_runs):
    # 70,000 runs puts a die larger than 2^16 in a batch of its own.
    n_steps, n_dialogues = (1, 2) if n_runs > 1000 else (3, 4)
    perms = stream._permutations_numpy(seed=12345, first_step=5, n_steps=n_steps, n_dialogues=n_dialogues,
                                       n_runs=n_runs)
    for s, d in itertools.product(range(n_steps), range(n_dialogues)):
        expected = stream._row_permutation(12345, 5 + s, d, n_dialogues, n_runs)
        assert perms[s * n_dialogues + d].tolist() == expected
        assert sorted(expected) == list(range(n_runs))


def test_permutations_are_uniform():
    # All 24 permutations of 4 runs, from 24,000 rows: chi-square against uniform.
    perms = stream._permutations_numpy(seed=3, first_step=0, n_steps=1000, n_dialogues=24, n_runs=4)
    codes = perms @ np.array([64, 16, 4, 1])
    _, counts = np.unique(codes, return_counts=True)
    assert len(counts) == 24
    chi_square = ((counts - 1000) ** 2 / 1000).sum()
    assert chi_square < 49.7  # 99.9% point of chi-square with 23 degrees of freedom


# --------------------------------------------------------------------------- effect sizes and result API


def test_residual_variance_and_effect_sizes_by_hand():
    # Row means 2, 4, 2; column means 2, 2, 4; grand mean 8/3. Residuals
    # [[-1/3, 2/3, -1/3], [2/3, 2/3, -4/3], [-1/3, -4/3, 5/3]]: squares sum to 72/9 = 8,
    # so V_E = 8 / ((3 - 1)(3 - 1)) = 2 and run 2 vs run 0 has ES = (4 - 2) / sqrt(2).
    x = np.array([[1.0, 2.0, 3.0], [4.0, 4.0, 4.0], [1.0, 0.0, 5.0]])
    assert residual_variance(x) == pytest.approx(2.0)
    result = tukey(x, 100)
    np.testing.assert_allclose(result.means, [2.0, 2.0, 4.0])
    assert result.residual_variance == pytest.approx(2.0)
    assert result.differences[2, 0] == pytest.approx(2.0)
    assert result.effect_sizes[2, 0] == pytest.approx(math.sqrt(2.0))
    assert result.effect_sizes[0, 2] == pytest.approx(-math.sqrt(2.0))
    assert result.effect_sizes[0, 1] == 0.0
    # Two runs: paired differences -2, 0, -4 around their mean -2 give residuals 0, +-1, -+1.
    two = np.array([[1.0, 3.0], [2.0, 2.0], [3.0, 7.0]])
    assert residual_variance(two) == pytest.approx(4.0 / 2.0)
    assert tukey(two, 100).effect_sizes[0, 1] == pytest.approx(-2.0 / math.sqrt(2.0))


def test_effect_sizes_are_nan_when_scores_are_exactly_additive():
    x = np.add.outer([0.0, 1.0, 5.0], [0.0, 0.5, 2.0])
    result = tukey(x, 50)
    assert result.residual_variance < 1e-28  # zero up to round-off
    assert np.isnan(result.effect_sizes).all()


def test_result_shapes_symmetry_and_metadata():
    x = scores(12, 5, seed=1, run_effects=np.linspace(0, 2, 5))
    result = tukey(x, 999, seed=4)
    assert (result.measure, result.n_runs, result.n_dialogues, result.n_permutations, result.seed) == (
        "m",
        5,
        12,
        999,
        4,
    )
    np.testing.assert_array_equal(result.pvalues, result.pvalues.T)
    np.testing.assert_array_equal(np.diag(result.pvalues), 1.0)
    np.testing.assert_array_equal(result.differences, -result.differences.T)
    counts = result.pvalues * 1000 - 1
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)  # multiples of 1/(B+1)
    assert result.pvalues.min() >= 1 / 1000
    np.testing.assert_allclose(result.mc_standard_errors, np.sqrt(result.pvalues * (1 - result.pvalues) / 999))
    with pytest.raises(ValueError):
        result.pvalues[0, 1] = 0.5  # read-only
    pairs = list(result.pairs())
    assert [(i, j) for i, j, _, _ in pairs] == list(itertools.combinations(range(5), 2))
    assert all(d == result.differences[i, j] and p == result.pvalues[i, j] for i, j, d, p in pairs)


def test_top_group_contains_best_and_runs_not_significantly_different():
    # Runs 0 and 1 close and best (lowest), run 2 a bit worse, runs 3 and 4 far worse.
    x = scores(60, 5, seed=9, dialogue_sd=1.0, run_effects=[0.0, 0.05, 0.3, 2.0, 2.5])
    result = tukey(x, 2000, seed=1)
    group = result.top_group(0.05)
    best = int(np.argmin(result.means))
    assert group[0] == best
    assert set(group) == {j for j in range(5) if j == best or result.pvalues[best, j] >= 0.05}
    assert {0, 1} <= set(group) and not {3, 4} & set(group)
    higher = result.top_group(0.05, lower_is_better=False)
    assert higher[0] == int(np.argmax(result.means)) == 4
    assert result.significant_pairs(0.05) == [(i, j) for i, j, _, p in result.pairs() if p < 0.05]


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_interval_contains_the_mean_and_shrinks_with_n():
    small = scores(50, 3, seed=1, dialogue_sd=1.0)
    large = scores(800, 3, seed=1, dialogue_sd=1.0)
    a = bootstrap_confidence_intervals(small, n_resamples=2000, seed=3)
    b = bootstrap_confidence_intervals(large, n_resamples=2000, seed=3)
    for result, x in ((a, small), (b, large)):
        np.testing.assert_allclose(result.means, x.mean(axis=0))
        assert np.all(result.lower < result.means) and np.all(result.means < result.upper)
        # Bootstrap standard error close to the textbook sd / sqrt(n).
        np.testing.assert_allclose(result.standard_errors, x.std(axis=0, ddof=1) / np.sqrt(len(x)), rtol=0.1)
    width_small, width_large = a.upper - a.lower, b.upper - b.lower
    # Width ~ 2 * 1.96 * sd / sqrt(n): the ratio is sqrt(50 / 800) = 1/4 times the sd ratio.
    sd_ratio = large.std(axis=0, ddof=1) / small.std(axis=0, ddof=1)
    np.testing.assert_allclose(width_large / width_small, sd_ratio / 4, rtol=0.15)
    assert np.all(width_large < width_small / 2)
    assert (a.n_resamples, a.seed, a.level, a.n_dialogues, a.n_runs) == (2000, 3, 0.95, 50, 3)


def test_bootstrap_is_reproducible_and_level_widens_interval():
    x = scores(40, 4, seed=2)
    first, again = bootstrap_confidence_intervals(x, 500, seed=9), bootstrap_confidence_intervals(x, 500, seed=9)
    np.testing.assert_array_equal(first.lower, again.lower)
    np.testing.assert_array_equal(first.upper, again.upper)
    other = bootstrap_confidence_intervals(x, 500, seed=10)
    assert not np.array_equal(first.lower, other.lower)
    wide = bootstrap_confidence_intervals(x, 500, seed=9, level=0.99)
    assert np.all(wide.lower <= first.lower) and np.all(wide.upper >= first.upper)


def test_bootstrap_resamples_rows_not_cells():
    # Run 1 = run 0 + 1 on every dialogue, so every resample keeps the difference at 1.
    x0 = np.random.default_rng(4).normal(size=30)
    result = bootstrap_confidence_intervals(np.column_stack([x0, x0 + 1.0]), 300, seed=1)
    np.testing.assert_allclose(result.lower[1] - result.lower[0], 1.0)
    np.testing.assert_allclose(result.upper[1] - result.upper[0], 1.0)


# --------------------------------------------------------------------------- meta-evaluation


P_HAND = np.array(
    [
        [1.0, 0.001, 0.03, 0.2],
        [0.001, 1.0, 0.04, 0.5],
        [0.03, 0.04, 1.0, 0.009],
        [0.2, 0.5, 0.009, 1.0],
    ]
)
D_HAND = np.array(
    [
        [0.0, -0.30, -0.12, 0.05],
        [0.30, 0.0, 0.18, 0.35],
        [0.12, -0.18, 0.0, 0.17],
        [-0.05, -0.35, -0.17, 0.0],
    ]
)


def test_discriminative_power_on_a_hand_made_matrix():
    # Upper triangle: 0.001, 0.03, 0.2, 0.04, 0.5, 0.009.
    assert discriminative_power(P_HAND, 0.05) == pytest.approx(4 / 6)
    assert discriminative_power(P_HAND, 0.01) == pytest.approx(2 / 6)
    assert discriminative_power(P_HAND, 0.001) == 0.0  # strict: p = 0.001 is not < 0.001


def test_delta_required_on_a_hand_made_matrix():
    # Significant at 0.05: (0,1) 0.30, (0,2) 0.12, (1,2) 0.18, (2,3) 0.17 -> smallest 0.12.
    assert delta_required(D_HAND, P_HAND, 0.05) == pytest.approx(0.12)
    # At 0.01: (0,1) 0.30 and (2,3) 0.17.
    assert delta_required(D_HAND, P_HAND, 0.01) == pytest.approx(0.17)
    assert delta_required(D_HAND, P_HAND, 0.0005) is None


def test_kendall_tau_matches_scipy_and_interval_contains_it():
    base = scores(200, 8, seed=3, dialogue_sd=1.0, run_effects=np.linspace(0, 0.6, 8))
    other = base + np.random.default_rng(5).normal(scale=1.0, size=base.shape)
    result = kendall_tau_with_ci(base, other, n_resamples=1000, seed=2)
    expected = kendalltau(base.mean(axis=0), other.mean(axis=0)).statistic
    assert result.tau == pytest.approx(expected, abs=1e-15)
    assert result.lower <= result.tau <= result.upper
    assert -1.0 <= result.lower < result.upper <= 1.0
    assert (result.n_resamples, result.seed, result.level, result.n_undefined) == (1000, 2, 0.95, 0)
    again = kendall_tau_with_ci(base, other, n_resamples=1000, seed=2)
    assert again == result


@pytest.mark.parametrize("form", ["shipped", "numpy"])
def test_vectorised_tau_b_equals_scipy_including_ties(form: str):
    rng = np.random.default_rng(8)
    a = rng.integers(0, 4, size=(50, 7)).astype(float)  # many ties
    b = rng.integers(0, 4, size=(50, 7)).astype(float)
    ours = meta_evaluation._tau_b_rows(a, b) if form == "shipped" else meta_evaluation._tau_b_rows_numpy(a, b)
    for row in range(50):
        reference = kendalltau(a[row], b[row]).statistic
        if np.isnan(reference):
            assert np.isnan(ours[row])
        else:
            assert ours[row] == pytest.approx(reference, abs=1e-12)


@pytest.mark.skipif(not stats.numba_available(), reason="numba is not installed")
@pytest.mark.parametrize("k", [1, 2, 3, 7, 8, 9, 33, 120])
def test_knights_tau_b_equals_the_pairwise_sum_bit_for_bit(k: int, monkeypatch: pytest.MonkeyPatch):
    """The Numba kernel counts ties and discordant pairs by merge sort (Knight 1966); the NumPy form
    sums the signs of every pair. Same whole numbers, same float: equal bit for bit, with heavy
    ties, a NaN (the row is NaN), one infinity twice (inf - inf: NaN) and two opposite infinities
    (a valid row), and with the NumPy form cut into blocks of 5 rows."""
    rng = np.random.default_rng(k)
    a = rng.integers(0, 4, size=(300, k)).astype(float)
    b = rng.integers(0, 5, size=(300, k)).astype(float)
    a[100:] = rng.normal(size=(200, k))  # and rows without ties
    b[100:] = a[100:] + rng.normal(scale=0.5, size=(200, k))
    a[5, 0] = np.nan
    b[7, -1] = np.inf
    if k > 1:
        b[9, :2] = np.inf
        a[11, 0], a[11, -1] = -np.inf, np.inf
    shipped = meta_evaluation._tau_b_rows(a, b)
    monkeypatch.setattr(meta_evaluation, "_TAU_BLOCK_CELLS", 5 * k * (k - 1) // 2)
    pairwise = meta_evaluation._tau_b_rows_numpy(a, b)
    assert np.array_equal(shipped, pairwise, equal_nan=True)
    assert np.isnan(shipped[5]) and (k == 1 or (np.isnan(shipped[9]) and not np.isnan(shipped[11])))
    if k > 1:
        for row in (11, 150, 299):
            assert shipped[row] == pytest.approx(kendalltau(a[row], b[row]).statistic, abs=1e-12)


def test_kendall_tau_of_a_measure_with_itself_is_one():
    x = scores(50, 6, seed=2, run_effects=np.linspace(0, 1, 6))
    result = kendall_tau_with_ci(x, 2 * x + 1, n_resamples=200)
    assert result.tau == pytest.approx(1.0)
    assert (result.lower, result.upper) == (1.0, 1.0)


def test_meta_evaluate_combines_the_pieces():
    x = scores(80, 6, seed=4, dialogue_sd=1.0, run_effects=[0, 0.1, 0.3, 0.6, 1.0, 1.5])
    matrices = {
        "jsd": x,
        "rnss": x + np.random.default_rng(1).normal(scale=0.5, size=x.shape),
        "nvd": np.sqrt(x**2),
    }
    results = randomised_tukey_hsd(matrices, 1000, seed=1)
    meta = meta_evaluate(results, matrices, n_resamples=300, seed=6)
    assert (meta["alphas"], meta["n_resamples"], meta["seed"], meta["level"]) == ([0.05, 0.01], 300, 6, 0.95)
    assert set(meta["measures"]) == set(matrices)
    for name, result in results.items():
        entry = meta["measures"][name]
        assert entry == {
            "n_pairs": 15,
            "discriminative_power_05": discriminative_power(result.pvalues, 0.05),
            "delta_required_05": delta_required(result.differences, result.pvalues, 0.05),
            "discriminative_power_01": discriminative_power(result.pvalues, 0.01),
            "delta_required_01": delta_required(result.differences, result.pvalues, 0.01),
        }
    assert meta["measures"]["jsd"]["discriminative_power_05"] > 0
    assert [(t["a"], t["b"]) for t in meta["kendall_tau"]] == [("jsd", "rnss"), ("jsd", "nvd"), ("rnss", "nvd")]
    single = kendall_tau_with_ci(x, matrices["rnss"], 300, seed=6)
    first = meta["kendall_tau"][0]
    assert (first["tau"], first["low"], first["high"], first["n_undefined"]) == (
        single.tau,
        single.lower,
        single.upper,
        single.n_undefined,
    )
    json.dumps(meta)  # plain data, ready for a JSON field
    three = meta_evaluate(results, matrices, alphas=(0.1, 0.001), n_resamples=10)
    assert set(three["measures"]["jsd"]) == {
        "n_pairs",
        "discriminative_power_1",
        "delta_required_1",
        "discriminative_power_001",
        "delta_required_001",
    }


def test_result_rebuilt_from_stored_numbers():
    x = scores(20, 4, seed=3, run_effects=[0, 0.5, 1, 1.5])
    result = tukey(x, 500, seed=2)
    entry = {
        "run_ids": [11, 12, 13, 14],
        "means": result.means.tolist(),
        "pvalues": np.round(result.pvalues, 10).tolist(),
        "differences": result.differences.tolist(),
        "effect_sizes": [
            [None if i == j else v for j, v in enumerate(row)] for i, row in enumerate(result.effect_sizes.tolist())
        ],
        "mc_se": result.mc_standard_errors.tolist(),
        "residual_variance": result.residual_variance,
    }
    rebuilt = stats.TukeyHSDResult.from_stored(entry, permutations=500, seed=2, n_dialogues=20)
    assert (rebuilt.n_runs, rebuilt.n_dialogues, rebuilt.n_permutations, rebuilt.seed) == (4, 20, 500, 2)
    np.testing.assert_allclose(rebuilt.pvalues, result.pvalues, atol=1e-10)
    assert np.isnan(rebuilt.effect_sizes[1, 1]) and rebuilt.effect_sizes[0, 1] == result.effect_sizes[0, 1]
    assert rebuilt.top_group() == result.top_group()
    entry["pvalues"] = entry["pvalues"][:3]
    with pytest.raises(ValueError, match="stored 'pvalues' must be 4 x 4"):
        stats.TukeyHSDResult.from_stored(entry, permutations=500, seed=2, n_dialogues=20)


@pytest.mark.parametrize("additive", [False, True])
def test_result_rebuilt_from_exceedance_counts_is_bit_identical(additive: bool):
    """Counts, means, V_E and whether effect sizes are defined are all the server stores; every
    matrix rebuilt from them must equal the original exactly, undefined effect sizes included."""
    rng = np.random.default_rng(5)
    n, k, permutations = 30, 6, 777
    if additive:  # V_E is round-off: effect sizes undefined
        x = rng.random((n, 1)) + np.linspace(0.0, 0.3, k)[None, :]
    else:
        x = rng.beta(2, 5, size=(n, k)) + np.linspace(0.0, 0.05, k)[None, :]
    for result in (tukey(x, permutations, seed=9), tukey_hsd_loop(x[:, :4], 50, seed=9, measure="m")):
        counts = result.exceedance_counts()
        assert counts.dtype == np.int64 and counts.size == result.n_runs * (result.n_runs - 1) // 2
        # Independent of the code under test: count the p-values' numerators by hand.
        expected = [round(result.pvalues[i, j] * (result.n_permutations + 1)) - 1
                    for i, j in itertools.combinations(range(result.n_runs), 2)]
        assert counts.tolist() == expected
        rebuilt = stats.TukeyHSDResult.from_counts(
            counts, result.means.tolist(), residual_variance=result.residual_variance,
            effect_sizes_defined=result.effect_sizes_defined, n_permutations=result.n_permutations,
            seed=result.seed, n_dialogues=result.n_dialogues, measure=result.measure)
        for name in ("means", "pvalues", "differences", "mc_standard_errors"):
            assert np.array_equal(getattr(rebuilt, name), getattr(result, name)), name
        assert np.array_equal(rebuilt.effect_sizes, result.effect_sizes, equal_nan=True)
        assert rebuilt.effect_sizes_defined == (not additive)
        assert (rebuilt.n_runs, rebuilt.n_dialogues, rebuilt.n_permutations, rebuilt.seed, rebuilt.measure) == (
            result.n_runs, result.n_dialogues, result.n_permutations, result.seed, result.measure)
        assert rebuilt.residual_variance == result.residual_variance
        assert not rebuilt.pvalues.flags.writeable


def test_result_from_counts_refuses_counts_that_do_not_fit():
    means = [0.1, 0.2, 0.3]
    common = {"residual_variance": 0.01, "effect_sizes_defined": True, "n_permutations": 10, "seed": 0,
              "n_dialogues": 5, "measure": "m"}
    with pytest.raises(ValueError, match="m: 2 pair counts given, expected 3 for 3 runs"):
        stats.TukeyHSDResult.from_counts([1, 2], means, **common)
    with pytest.raises(ValueError, match=r"m: pair counts must lie in \[0, 10\]"):
        stats.TukeyHSDResult.from_counts([1, 2, 11], means, **common)
    with pytest.raises(ValueError, match="n_permutations must be a positive integer"):
        stats.TukeyHSDResult.from_counts([1, 2, 3], means, **{**common, "n_permutations": 0})


def test_one_significance_level_is_the_default_everywhere():
    """Top groups, significant pairs, discriminative power, delta required and meta-evaluation
    default to the one constant, and the level is 5% (the STC-3 and DialEval overviews)."""
    import inspect

    from scoring import exports

    assert stats.SIGNIFICANCE_LEVEL == 0.05 and stats.REPORTED_LEVELS == (0.05, 0.01)
    defaults = [inspect.signature(stats.TukeyHSDResult.top_group).parameters["alpha"].default,
                inspect.signature(stats.TukeyHSDResult.significant_pairs).parameters["alpha"].default,
                inspect.signature(discriminative_power).parameters["alpha"].default,
                inspect.signature(delta_required).parameters["alpha"].default,
                inspect.signature(exports.latex_means_table_from_results).parameters["alpha"].default]
    assert defaults == [stats.SIGNIFICANCE_LEVEL] * 5
    assert inspect.signature(meta_evaluate).parameters["alphas"].default == stats.REPORTED_LEVELS


# --------------------------------------------------------------------------- bad input


GOOD = np.arange(12, dtype=float).reshape(4, 3) % 5


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (np.where(GOOD == 3, np.nan, GOOD), r"NaN or infinite \(first at dialogue 1, run 0\)"),
        (np.where(GOOD == 4, np.inf, GOOD), "NaN or infinite"),
        (GOOD[:, :1], "at least 2 runs"),
        (GOOD[:1], "at least 2 dialogues"),
        (GOOD.ravel(), "2-dimensional"),
        (np.array([["a", "b"], ["c", "d"]]), "cannot be read as an array of numbers"),
    ],
)
def test_bad_matrices_are_rejected_with_a_clear_message(matrix, message):
    with pytest.raises(ValueError, match=message):
        randomised_tukey_hsd({"jsd": matrix}, 10)
    with pytest.raises(ValueError, match=message):
        tukey_hsd_loop(matrix, 10)
    with pytest.raises(ValueError, match=message):
        bootstrap_confidence_intervals(matrix, 10)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="same shape"):
        randomised_tukey_hsd({"a": GOOD, "b": GOOD[:3]}, 10)
    with pytest.raises(ValueError, match="non-empty mapping"):
        randomised_tukey_hsd({}, 10)
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="n_permutations must be a positive integer"):
            randomised_tukey_hsd({"a": GOOD}, bad)
    with pytest.raises(ValueError, match="n_permutations must be a positive integer"):
        tukey_hsd_loop(GOOD, 0)
    with pytest.raises(ValueError, match="seed"):
        randomised_tukey_hsd({"a": GOOD}, 10, seed=-1)
    with pytest.raises(ValueError, match="chunk_size"):
        randomised_tukey_hsd({"a": GOOD}, 10, chunk_size=0)
    with pytest.raises(ValueError, match="backend"):
        randomised_tukey_hsd({"a": GOOD}, 10, backend="cuda")
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_confidence_intervals(GOOD, 0)
    with pytest.raises(ValueError, match="level"):
        bootstrap_confidence_intervals(GOOD, 10, level=1.0)
    with pytest.raises(ValueError, match="same shape"):
        kendall_tau_with_ci(GOOD, GOOD[:, :2], 10)
    with pytest.raises(ValueError, match="alpha"):
        discriminative_power(P_HAND, 0.0)
    with pytest.raises(ValueError, match="square"):
        discriminative_power(P_HAND[:3], 0.05)
    with pytest.raises(ValueError, match="same shape"):
        delta_required(D_HAND[:3, :3], P_HAND, 0.05)
    result = tukey(GOOD, 10)
    with pytest.raises(ValueError, match="alpha"):
        result.top_group(1.5)
    with pytest.raises(ValueError, match="same measures"):
        meta_evaluate({"a": result}, {"b": GOOD})


def test_meta_evaluation_compares_rankings_best_first_whatever_the_direction():
    """A higher-is-better measure that orders the runs exactly as a distance does (its negation)
    agrees with it: tau = +1 once directions are given, -1 when both are taken as distances."""
    x = scores(25, 5, seed=4, run_effects=[0, 0.4, 0.8, 1.2, 1.6])
    matrices = {"distance": x, "similarity": -x}
    results = randomised_tukey_hsd(matrices, 100, seed=1)
    naive = meta_evaluate(results, matrices, n_resamples=50, seed=2)["kendall_tau"][0]
    oriented = meta_evaluate(results, matrices, n_resamples=50, seed=2,
                             lower_is_better={"distance": True, "similarity": False})["kendall_tau"][0]
    assert [naive["tau"], naive["low"], naive["high"]] == pytest.approx([-1.0] * 3, abs=1e-12)
    assert [oriented["tau"], oriented["low"], oriented["high"]] == pytest.approx([1.0] * 3, abs=1e-12)
    # Discriminative power does not depend on the direction.
    assert (meta_evaluate(results, matrices, n_resamples=50, seed=2)["measures"]
            == meta_evaluate(results, matrices, n_resamples=50, seed=2,
                             lower_is_better={"distance": True, "similarity": False})["measures"])
    with pytest.raises(ValueError, match=r"lower_is_better names no direction for \['similarity'\]"):
        meta_evaluate(results, matrices, n_resamples=50, seed=2, lower_is_better={"distance": True})
