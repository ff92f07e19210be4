#!/usr/bin/env python3
"""Coverage of bootstrap intervals of a system-level correlation, in SIGNIFICANCE-SPEC's model.

Contexts c, 6 systems s answering every context, latent quality q (sd 1); human = mu_s + u_c + q +
e_h, metric = nu_s + 0.5 u_c + q + e_x (sd(u) = 1, sd(e_h) = 0.8, sd(e_x) = 1.2); mu and nu order two
pairs of systems differently; the target is the Pearson correlation of (mu, nu). The statistic is
the Pearson correlation of the systems' mean human and metric scores; intervals resample contexts
(B = 1,000): the percentile interval and the bias-corrected and accelerated one (BCa: Efron and
Tibshirani 1993, ch. 14; acceleration from the jackknife over contexts). Prints the share of
repetitions whose interval holds the target. The spec asks for >= 0.90 at 60 contexts and >= 0.93
at 200; this is why the metrics track shows no interval for system-level correlations.

    .venv/bin/python benchmarks/system_interval_coverage.py [--repetitions 300]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.stats import norm

MU = np.array([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
NU = np.array([0.0, 0.4, 0.2, 0.6, 1.0, 0.8])  # systems 2-3 and 5-6 in the other order


def pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    return (a * b).sum(axis=-1) / np.sqrt((a * a).sum(axis=-1) * (b * b).sum(axis=-1))


def coverage(contexts: int, repetitions: int, resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    target = float(np.corrcoef(MU, NU)[0, 1])
    held = np.zeros(2)
    z = norm.ppf([0.025, 0.975])
    for _ in range(repetitions):
        u = rng.normal(size=(contexts, 1))
        q = rng.normal(size=(contexts, 6))
        human = MU + u + q + rng.normal(scale=0.8, size=(contexts, 6))
        metric = NU + 0.5 * u + q + rng.normal(scale=1.2, size=(contexts, 6))
        observed = pearson_rows(human.mean(0), metric.mean(0))
        picks = rng.integers(0, contexts, size=(resamples, contexts))
        replicates = pearson_rows(human[picks].mean(1), metric[picks].mean(1))
        low, high = np.quantile(replicates, [0.025, 0.975])
        held[0] += low <= target <= high
        z0 = norm.ppf(np.clip((replicates < observed).mean(), 1e-6, 1 - 1e-6))
        jack = pearson_rows((human.sum(0) - human) / (contexts - 1), (metric.sum(0) - metric) / (contexts - 1))
        d = jack.mean() - jack
        acceleration = (d ** 3).sum() / (6 * ((d ** 2).sum()) ** 1.5)
        levels = norm.cdf(z0 + (z0 + z) / (1 - acceleration * (z0 + z)))
        low, high = np.quantile(replicates, levels)
        held[1] += low <= target <= high
    return float(held[0] / repetitions), float(held[1] / repetitions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=300)
    options = parser.parse_args()
    for contexts in (30, 60, 200):
        percentile, bca = coverage(contexts, options.repetitions)
        print(f"{contexts} contexts, {options.repetitions} repetitions: nominal 0.95; percentile {percentile:.3f}, "
              f"BCa {bca:.3f}")


if __name__ == "__main__":
    main()
