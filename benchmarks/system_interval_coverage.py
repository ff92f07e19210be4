#!/usr/bin/env python3
"""Coverage of the metrics track's system-level intervals, in SIGNIFICANCE-SPEC's model.

Contexts c, 6 systems s answering every context, latent quality q (sd 1); human = mu_s + u_c + q +
e_h, metric = nu_s + 0.5 u_c + q + e_x (sd(u) = 1, sd(e_h) = 0.8, sd(e_x) = 1.2); mu and nu order two
pairs of systems differently. Each repetition scores one simulated metric with the server's own code
(``scoring.kinds.metric.meta.evaluate_metrics``, B = 1,000 context resamples, a fresh seed) and
counts whether each interval holds its target, the figure's value for the systems' true means:
Kendall tau-b of (mu, nu) = 11/15, Spearman = 31/35 and, for the disattenuated (corrected)
Pearson, the Pearson correlation of (mu, nu) = 31/35 as well. Bounds are compared with a tolerance
of 1e-9: rank correlations of six means take few values, and a percentile bound equal to the target
in exact arithmetic can differ from it in the last bits (comparing exactly counted those as misses,
the 0.63-0.86 measured before). A repetition whose figure is undefined (a corrected variance not
positive; no interval shown) counts as a miss.

For the plain Pearson of system means, which the board shows without an interval, the same
repetitions give the percentile interval's and the bias-corrected and accelerated (BCa: Efron and
Tibshirani 1993, ch. 14; jackknife acceleration) interval's coverage of Pearson(mu, nu), computed
here on the same resamples.

    .venv/bin/python benchmarks/system_interval_coverage.py [--repetitions 300] [--contexts 30 60 100 200]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import kendalltau, norm, spearmanr

from scoring import stats  # noqa: E402
from scoring.kinds.metric import meta  # noqa: E402
from scoring.kinds.metric.formats import load_metric_gold  # noqa: E402

MU = np.array([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
NU = np.array([0.0, 0.4, 0.2, 0.6, 1.0, 0.8])  # systems 2-3 and 5-6 in the other order
TOLERANCE = 1e-9
SHOWN = ("system_kendall_tau_b", "system_spearman", "system_pearson_disattenuated")


def pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    return (a * b).sum(axis=-1) / np.sqrt((a * a).sum(axis=-1) * (b * b).sum(axis=-1))


def gold_of(human: np.ndarray) -> meta.MetricGold:
    return load_metric_gold([{"id": f"c{c}", "responses": [{"id": f"c{c}/{s}", "system": f"S{s}", "human": float(v)}
                                                          for s, v in enumerate(row)]}
                             for c, row in enumerate(human)])


def coverage(contexts: int, repetitions: int, resamples: int = 1000, seed: int = 0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    targets = {"system_kendall_tau_b": float(kendalltau(MU, NU).statistic),
               "system_spearman": float(spearmanr(MU, NU).statistic),
               "system_pearson_disattenuated": float(np.corrcoef(MU, NU)[0, 1])}
    pearson_target = float(np.corrcoef(MU, NU)[0, 1])
    held = dict.fromkeys([*SHOWN, "pearson percentile", "pearson BCa"], 0)
    undefined = 0
    z = norm.ppf([0.025, 0.975])
    for _ in range(repetitions):
        u = rng.normal(size=(contexts, 1))
        q = rng.normal(size=(contexts, 6))
        human = MU + u + q + rng.normal(scale=0.8, size=(contexts, 6))
        metric = NU + 0.5 * u + q + rng.normal(scale=1.2, size=(contexts, 6))
        bootstrap_seed = int(rng.integers(1 << 31))
        entry = meta.evaluate_metrics(gold_of(human), {"m": metric.reshape(-1)}, n_resamples=resamples,
                                      seed=bootstrap_seed)["metrics"]["m"]
        for key in SHOWN:
            interval = entry["intervals"][key]
            if interval is None:
                undefined += key == "system_pearson_disattenuated"
                continue
            low, high = interval
            held[key] += low - TOLERANCE <= targets[key] <= high + TOLERANCE
        # The plain Pearson of system means on the same resamples (scoring.stats.resample_counts).
        counts = np.concatenate([w for _, w in stats.resample_counts(contexts, resamples, bootstrap_seed)])
        replicates = pearson_rows(counts @ human / contexts, counts @ metric / contexts)
        observed = float(pearson_rows(human.mean(0), metric.mean(0)))
        low, high = np.quantile(replicates, [0.025, 0.975])
        held["pearson percentile"] += low - TOLERANCE <= pearson_target <= high + TOLERANCE
        z0 = norm.ppf(np.clip((replicates < observed).mean(), 1e-6, 1 - 1e-6))
        jack = pearson_rows((human.sum(0) - human) / (contexts - 1), (metric.sum(0) - metric) / (contexts - 1))
        d = jack.mean() - jack
        acceleration = (d ** 3).sum() / (6 * ((d ** 2).sum()) ** 1.5)
        low, high = np.quantile(replicates, norm.cdf(z0 + (z0 + z) / (1 - acceleration * (z0 + z))))
        held["pearson BCa"] += low - TOLERANCE <= pearson_target <= high + TOLERANCE
    out = {key: count / repetitions for key, count in held.items()}
    out["corrected undefined"] = undefined / repetitions
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=300)
    parser.add_argument("--contexts", type=int, nargs="+", default=[30, 60, 100, 200])
    options = parser.parse_args()
    print(f"nominal 0.95; {options.repetitions} repetitions, B = 1,000; share of intervals holding the target")
    for contexts in options.contexts:
        started = time.perf_counter()
        result = coverage(contexts, options.repetitions)
        print(f"{contexts} contexts: Kendall {result['system_kendall_tau_b']:.3f}, Spearman "
              f"{result['system_spearman']:.3f}, corrected Pearson {result['system_pearson_disattenuated']:.3f} "
              f"(undefined, no interval, in {result['corrected undefined']:.3f}; of those shown "
              f"{result['system_pearson_disattenuated'] / (1 - result['corrected undefined']):.3f}); "
              f"not shown: plain Pearson percentile "
              f"{result['pearson percentile']:.3f}, BCa {result['pearson BCa']:.3f} "
              f"({time.perf_counter() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
