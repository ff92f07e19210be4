"""Tests and intervals of corpus-level measures (SIGNIFICANCE-SPEC, issue 26), checked against the
spec's worked example, loops written here from the spec's text, sacrebleu's paired approximate
randomisation, and plain bootstrap loops; never against the code under test."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from scoring import stats
from scoring.kinds.response import bleu
from scoring.stats.stream import _row_permutation  # the permutation stream, to draw the same steps in the loop

# The spec's worked example: BLEU with N = 1, rows (num1, den1, hyp_len, ref_len).
RUN_A = [(3, 4, 4, 4), (2, 2, 2, 3), (0, 1, 1, 2)]
RUN_B = [(1, 3, 3, 4), (2, 3, 3, 3), (2, 2, 2, 2)]


def spec_bleu1(totals: list[float] | np.ndarray) -> float:
    """C = p1 * (1 if h > ref else exp(1 - ref / h)), as the spec writes it."""
    num, den, hyp, ref = (float(v) for v in totals)
    return num / den * (1.0 if hyp > ref else math.exp(1.0 - ref / hyp))


def spec_bleu1_many(totals: np.ndarray) -> np.ndarray:
    flat = np.asarray(totals).reshape(-1, 4)
    return np.array([spec_bleu1(row) for row in flat]).reshape(np.shape(totals)[:-1])


def example() -> np.ndarray:
    return np.array([[a, b] for a, b in zip(RUN_A, RUN_B, strict=True)], dtype=np.float64)  # items x runs x 4


def test_the_spec_worked_example_corpus_figures_means_and_exact_p() -> None:
    x = example()
    corpus = [spec_bleu1(x[:, j].sum(axis=0)) for j in range(2)]
    assert corpus == pytest.approx([0.5367694951, 0.5515605641], abs=5e-11)
    means = [np.mean([spec_bleu1(row) for row in x[:, j]]) for j in range(2)]
    assert means == pytest.approx([0.4521768866, 0.6351701456], abs=5e-11)
    # Every one of the 2^3 swaps gives a range >= D: the exact permutation p is 8 / 8.
    observed = abs(corpus[0] - corpus[1])
    reached = 0
    for swaps in itertools.product([False, True], repeat=3):
        totals = [np.zeros(4), np.zeros(4)]
        for d, swap in enumerate(swaps):
            totals[0] += x[d, 1 if swap else 0]
            totals[1] += x[d, 0 if swap else 1]
        figures = [spec_bleu1(t) for t in totals]
        reached += max(figures) - min(figures) >= observed - 1e-12
    assert reached == 8
    assert min(abs(spec_bleu1(x[:, 0].sum(0)) - spec_bleu1(x[:, 1].sum(0))), 1.0) == pytest.approx(0.0147910691,
                                                                                                   abs=5e-11)
    # The server's test with B >= 1,000: p = 1, the figures are the corpus figures, on both backends.
    for backend in ("numpy", "numba"):
        result = stats.corpus_tukey_hsd({"bleu1": stats.CorpusMeasure(x, spec_bleu1_many)}, n_permutations=1000,
                                        seed=0, backend=backend)["bleu1"]
        assert result.means.tolist() == pytest.approx(corpus, abs=1e-15)
        assert result.pvalues[0, 1] == 1.0
        assert not result.effect_sizes_defined
    # The response kind's vectorised BLEU gives the same figures (closest = shortest reference here).
    five = np.concatenate([x, x[..., 3:4]], axis=2)
    assert bleu.corpus_scores(five.sum(axis=0), 1, "closest").tolist() == pytest.approx(corpus, abs=1e-15)


def loop_corpus_tukey(x: np.ndarray, corpus, n_permutations: int, seed: int) -> np.ndarray:
    """The spec's loop: each step moves each item's row of column c to run pi[c] (the stream's
    permutation of step b and item d), recomputes C per run, and counts ranges >= D - 1e-12."""
    n, k, width = x.shape
    observed = [corpus(x[:, j].sum(axis=0)) for j in range(k)]
    counts = np.zeros((k, k), dtype=np.int64)
    for b in range(n_permutations):
        totals = np.zeros((k, width))
        for d in range(n):
            perm = _row_permutation(seed, b, d, n, k)
            for c in range(k):
                totals[perm[c]] += x[d, c]
        figures = [corpus(totals[j]) for j in range(k)]
        spread = max(figures) - min(figures)
        for i in range(k):
            for j in range(k):
                counts[i, j] += spread >= abs(observed[i] - observed[j]) - 1e-12
    return (counts + 1) / (n_permutations + 1)


def small_bleu_matrix(n: int = 25, k: int = 4, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    den = rng.integers(3, 12, size=(n, k)).astype(float)
    skill = np.linspace(0.3, 0.6, k)
    num = rng.binomial(den.astype(int), skill).astype(float)
    ref = den + rng.integers(-2, 3, size=(n, k))
    ref = np.maximum(ref, 1.0)
    return np.stack([num, den, den, ref], axis=2)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_corpus_tukey_equals_the_spec_loop_on_a_small_matrix(backend: str) -> None:
    x = small_bleu_matrix()
    expected = loop_corpus_tukey(x, spec_bleu1, n_permutations=200, seed=11)
    result = stats.corpus_tukey_hsd({"bleu1": stats.CorpusMeasure(x, spec_bleu1_many)}, n_permutations=200,
                                    seed=11, backend=backend, method="exact")["bleu1"]
    assert np.array_equal(result.pvalues, expected)
    assert result.means.tolist() == pytest.approx([spec_bleu1(x[:, j].sum(0)) for j in range(x.shape[1])], abs=1e-15)


def test_recombined_corpus_tukey_agrees_with_the_exact_test_within_monte_carlo_error() -> None:
    x = small_bleu_matrix(n=600, k=5, seed=4)
    measure = {"bleu1": stats.CorpusMeasure(x, spec_bleu1_many)}
    exact = stats.corpus_tukey_hsd(measure, n_permutations=4000, seed=2, method="exact")["bleu1"].pvalues
    recombined = stats.corpus_tukey_hsd(measure, n_permutations=4000, seed=2, method="recombined")["bleu1"].pvalues
    spread = 4 * np.sqrt(2 * exact * (1 - exact) / 4000) + 2 / 4000
    assert (np.abs(exact - recombined) <= spread).all()


def sentences(rng: np.random.Generator, n: int) -> list[str]:
    vocabulary = [f"w{i}" for i in range(40)]
    return [" ".join(rng.choice(vocabulary, size=rng.integers(8, 16))) for _ in range(n)]


def noisy(rng: np.random.Generator, references: list[str], share: float) -> list[str]:
    out = []
    for reference in references:
        words = reference.split()
        out.append(" ".join(w if rng.random() > share else f"w{rng.integers(0, 40)}" for w in words))
    return out


@pytest.mark.parametrize(("share_a", "share_b"), [(0.40, 0.44), (0.40, 0.50)])
def test_two_systems_agree_with_sacrebleu_paired_ar(share_a: float, share_b: float) -> None:
    """sacrebleu's --paired-ar tests |BLEU(A*) - BLEU(B*)| under per-sentence swaps: with two runs the
    Tukey range is that statistic, so both p-values estimate the same number."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    rng = np.random.default_rng(26)
    references = sentences(rng, 150)
    systems = {"a": noisy(rng, references, share_a), "b": noisy(rng, references, share_b)}
    metric = BLEU()
    test = PairedTest([("a", systems["a"]), ("b", systems["b"])], {"BLEU": metric}, references=[references],
                      test_type="ar", n_samples=10_000)
    _, results = test()
    p_sacrebleu = results["BLEU"][1].p_value
    rows = np.stack([np.array(metric._extract_corpus_statistics(systems[name], [references]), dtype=np.float64)
                     for name in ("a", "b")], axis=1)

    def corpus(totals: np.ndarray) -> np.ndarray:
        flat = totals.reshape(-1, totals.shape[-1])
        values = [metric._compute_score_from_stats(list(row)).score / 100.0 for row in flat]
        return np.array(values).reshape(totals.shape[:-1])

    result = stats.corpus_tukey_hsd({"bleu": stats.CorpusMeasure(rows, corpus)}, n_permutations=10_000,
                                    seed=5)["bleu"]
    assert result.means[0] == pytest.approx(results["BLEU"][0].score / 100.0, abs=1e-12)
    p = result.pvalues[0, 1]
    error = 4 * math.sqrt(2 * p_sacrebleu * (1 - p_sacrebleu) / 10_000) + 2 / 10_001
    assert abs(p - p_sacrebleu) <= error, (p, p_sacrebleu)


def test_corpus_bootstrap_equals_a_plain_loop_and_holds_the_headline() -> None:
    x = small_bleu_matrix(n=200, k=3, seed=8)
    result = stats.corpus_bootstrap_intervals(stats.CorpusMeasure(x, spec_bleu1_many), n_resamples=500, seed=9)
    # resample_counts draws all 500 resamples in one chunk of default_rng(seed).integers here.
    picks = np.random.default_rng(9).integers(0, 200, size=(500, 200))
    replicates = np.array([[spec_bleu1(x[pick, j].sum(axis=0)) for j in range(3)] for pick in picks])
    low, high = np.quantile(replicates, [0.025, 0.975], axis=0)
    assert result.lower.tolist() == pytest.approx(low.tolist(), abs=1e-12)
    assert result.upper.tolist() == pytest.approx(high.tolist(), abs=1e-12)
    assert ((result.lower <= result.means) & (result.means <= result.upper)).all()


def test_bad_corpus_input_is_named() -> None:
    with pytest.raises(ValueError, match="items x runs x statistics"):
        stats.corpus_tukey_hsd({"m": stats.CorpusMeasure(np.zeros((3, 2)), spec_bleu1_many)})
    with pytest.raises(ValueError, match="at least 2 runs"):
        stats.corpus_tukey_hsd({"m": stats.CorpusMeasure(np.ones((3, 1, 4)), spec_bleu1_many)})
    bad = example()
    bad[1, 0, 2] = np.nan
    with pytest.raises(ValueError, match="item 1, run 0"):
        stats.corpus_tukey_hsd({"m": stats.CorpusMeasure(bad, spec_bleu1_many)})


def test_holm_on_a_worked_example() -> None:
    # Sorted: 0.005 x 4 = 0.02; 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04, raised to 0.06 (monotone).
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=1e-15)
    assert stats.holm([0.5, 0.9]) == [1.0, 1.0]
    assert stats.holm([]) == []
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        stats.holm([0.2, float("nan")])
