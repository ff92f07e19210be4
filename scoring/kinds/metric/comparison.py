"""Statistics between the metrics of one board (:func:`compare_metrics`: the paired tests of predictive
power, concordance, discriminative power) and the statistics page's tables of them
(:func:`compare_tables`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from scoring import stats
from scoring.kinds.metric import meta, session
from scoring.kinds.metric.config import MetricConfig, MetricRun
from scoring.kinds.metric.formats import MetricGold


def compare_tables(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The statistics page's tables of ``compare()``: predictive power, the paired tests,
    concordance and discriminative power, each saying how it was computed."""
    if not data or "metrics" not in data:
        return []
    names = list(data["metrics"])
    settings = data.get("settings", {})
    tables: list[dict[str, Any]] = [{
        "title": "Predictive power", "shade": False,
        "note": f"{data.get('n_pairs', 0):,} response pairs with different human judgements in "
                f"{data.get('n_contexts', 0):,} contexts; the tie-aware variant counts a metric tie as half.",
        "headers": ["metric", "predictive power", "tie-aware (ties count half)"],
        "rows": [[name, data["predictive_power"].get(name), data["predictive_power_ties_half"].get(name)]
                 for name in names]}]
    bootstrap = data.get("paired_bootstrap")
    if bootstrap:
        tables.append({
            "title": "Paired bootstrap test of predictive power", "shade": False,
            "note": f"{bootstrap['test']}; B = {bootstrap['n_resamples']:,}, seed {bootstrap['seed']}, "
                    f"{bootstrap['level']:.0%} interval of the difference.",
            "headers": ["metric A", "metric B", "A - B", "p (unadjusted)", "p (Holm)", "interval low",
                        "interval high"],
            "rows": [[pair["a"], pair["b"], pair["difference"], pair["p"], pair.get("p_holm"), pair["low"],
                      pair["high"]] for pair in bootstrap["pairs"]]})
        tables[-1]["note"] += _adjustment_note(len(bootstrap["pairs"]), "pairs")
    tests = data.get("t_tests")
    if tests:
        tables.append(_t_test_table("Paired t-tests, all pairs", tests, "pairs"))
    against = data.get("against_random")
    if against:
        paired = against["paired_bootstrap"]
        tables.append({
            "title": f"Each metric against the random baseline ({against['baseline']})", "shade": False,
            "note": "The family of Liu, Zhou and Wilson (ACM TOIS 2021): each metric compared with random "
                    f"scores only ({len(paired['pairs'])} comparisons, so a smaller correction than over all "
                    f"pairs). Paired bootstrap as above." + _adjustment_note(len(paired["pairs"]),
                                                                               "comparisons"),
            "headers": ["metric", "baseline", "metric - baseline", "p (unadjusted)", "p (Holm)",
                        "interval low", "interval high"],
            "rows": [[pair["a"], pair["b"], pair["difference"], pair["p"], pair["p_holm"], pair["low"],
                      pair["high"]] for pair in paired["pairs"]]})
        if against.get("t_tests"):
            tables.append(_t_test_table(f"Paired t-tests against the random baseline ({against['baseline']})",
                                        against["t_tests"], "comparisons"))
    concordance = data.get("concordance")
    if concordance:
        tables.append({
            "title": "Concordance with the gold property metric", "shade": True,
            "note": "Row metric A, column metric B: the share of the pairs on which A and B disagree where A "
                    "agrees with the gold-standard property metric (Liu, Zhou and Wilson, ACM TOIS 2021, "
                    "Algorithm 4); empty where they never disagree.",
            "headers": ["metric A \\ B", *concordance["names"]],
            "rows": [[name, *row] for name, row in zip(concordance["names"], concordance["concordance"],
                                                          strict=True)]})
    power = data.get("discriminative_power")
    if power:
        tables.append({
            "title": "Discriminative power over the gold's systems", "shade": False,
            "note": f"Randomised Tukey HSD over {len(power['systems'])} systems on the "
                    f"{power['n_contexts_used']} contexts all of them answered; B = {power['n_permutations']:,}, "
                    f"seed {power['seed']}. Share of system pairs with p < alpha, and the smallest "
                    "significant difference (delta required).",
            "headers": ["metric", "system pairs", "power (0.05)", "delta required (0.05)", "power (0.01)",
                        "delta required (0.01)"],
            "rows": [[name, entry["n_system_pairs"], entry["discriminative_power_05"],
                      entry["delta_required_05"], entry["discriminative_power_01"], entry["delta_required_01"]]
                     for name, entry in power["metrics"].items()]})
    if power and any(entry.get("asl_curve") for entry in power["metrics"].values()):
        tables.append({
            "title": "ASL curves over the gold's systems", "shade": False, "headers": [], "rows": [],
            "note": "Per metric, the p-values of every pair of the gold's systems, smallest first (Liu, Zhou "
                    "and Wilson, ACM TOIS 2021, Figure 5): a curve that stays low longer tells more systems apart.",
            "curves": [(name, entry["asl_curve"]) for name, entry in power["metrics"].items()
                       if entry.get("asl_curve")]})
    for part, reason in (data.get("unavailable") or {}).items():
        tables.append({"title": part.replace("_", " ").capitalize(), "note": f"Not computed: {reason}",
                       "headers": [], "rows": [], "shade": False})
    if settings:
        tables[0]["note"] += f" Seed {settings.get('seed')}, B = {settings.get('resamples')}."
    return tables


def compare_metrics(runs: Mapping[str, MetricRun], gold: MetricGold, config: MetricConfig, *,
                    seed: int, resamples: int, random_name: str | None = None) -> dict[str, Any]:
    """Statistics between the metrics of one board (runs scoring every gold response).

    ``seed`` and ``resamples`` (B) are the board's; the level and the tie tolerance the
    task's. Returns JSON-ready data, metrics named as the keys of ``runs`` (as strings), in
    their order::

        {"metrics": [name, ...],
         "n_contexts": C, "n_pairs": P,           # pairs with different human judgements
         "settings": {"seed": s, "resamples": B, "level": 0.95, "tie_tolerance": t},
         "predictive_power": {name: x}, "predictive_power_ties_half": {name: x},
         "paired_bootstrap": None | {               # predictive power, contexts resampled
             "test": "paired bootstrap over contexts (shift method)", "n_resamples": B,
             "n_undefined": 0, "seed": s, "level": 0.95, "ties_half": false,
             "pairs": [{"a": name, "b": name, "difference": pp_a - pp_b, "p": two-sided p,
                        "p_holm": Holm over the pairs, "low": x, "high": x}, ...],  # a before b
             "adjustment": "p unadjusted; p_holm adjusted ..."},
         "t_tests": None | {                        # seed 003's two-tailed paired t-test
             "test": "two-tailed paired t-test over contexts, Bonferroni", "baseline": None,
             "ties_half": false, "n_contexts": n, "bonferroni_factor": M(M-1)/2,
             "tests": [{"a", "b", "difference", "t": x | None (infinite), "df": n - 1, "p": x,
                        "p_bonferroni": min(1, factor * p), "p_holm": x}, ...], "adjustment": "..."},
         "against_random": None | {                 # Liu, Zhou and Wilson's family: M - 1 tests
                                                    # (None: no run is the task's random baseline)
             "baseline": name, "paired_bootstrap": {... as above, pairs (metric, baseline)},
             "t_tests": {... as above with "baseline": name} | None},
         "concordance": None | {                    # seed 003 Algorithm 4, against the gold's M*
             "names": [name, ...], "disagreements": [[int]], "concordant": [[int]],
             "concordance": [[x | None]]},          # [a][b] = Conc(a | b, M*); None: no disagreement
         "discriminative_power": None | {           # shared randomised Tukey HSD, B = resamples
             "n_permutations": B, "seed": s, "alphas": [0.05, 0.01], "systems": [name, ...],
             "n_contexts_used": n, "n_contexts": C,  # contexts answered by every system
             "metrics": {name: {"n_system_pairs": k(k-1)/2,
                                "discriminative_power_05": x, "delta_required_05": x | None,
                                "discriminative_power_01": x, "delta_required_01": x | None,
                                "asl_curve": [p, ...],   # p-values of all system pairs, ascending
                                "means": {system: mean score}}}},
         "unavailable": {part: reason}}             # why each None part is None

    The paired tests need at least two metrics; concordance also a property metric in the
    gold; discriminative power a gold naming at least two systems, with at least two
    contexts answered by all of them. ``random_name`` names the random baseline when the caller
    found it (on a dimension slice its scores are a part of the seeded draw). Raises ValueError
    for a run that leaves out responses (metrics are compared on the same pairs) and for no runs.
    """
    if not runs:
        raise ValueError("compare needs at least one run")
    names = [str(name) for name in runs]
    partial = [name for name, run in zip(names, runs.values(), strict=True) if run.n_missing]
    if partial:
        raise ValueError(f"runs that leave out responses cannot be compared: {', '.join(partial)}")
    vectors = {name: run.scores for name, run in zip(names, runs.values(), strict=True)}
    counts = meta.context_counts(gold, vectors, tie_tolerance=config.tie_tolerance)
    unavailable: dict[str, str] = {}
    out: dict[str, Any] = {
        "metrics": names, "n_contexts": gold.n_contexts, "n_pairs": int(counts.pairs.sum()),
        "settings": {"seed": int(seed), "resamples": int(resamples), "level": config.level,
                     "tie_tolerance": config.tie_tolerance},
        "predictive_power": meta.predictive_power(counts),
        "predictive_power_ties_half": meta.predictive_power(counts, ties_half=True),
        "paired_bootstrap": None, "t_tests": None, "against_random": None, "concordance": None,
        "discriminative_power": None,
    }
    if len(names) < 2:
        for part in ("paired_bootstrap", "t_tests", "concordance"):
            unavailable[part] = "needs at least two metrics"
    else:
        bootstrap = meta.paired_bootstrap(counts, resamples, seed, level=config.level)
        out["paired_bootstrap"] = bootstrap.to_dict()
        enough = int((counts.pairs > 0).sum()) >= 2
        if enough:
            out["t_tests"] = meta.paired_t_tests(counts)
        else:
            unavailable["t_tests"] = "needs at least two contexts with a pair of different human judgements"
        # Liu, Zhou and Wilson's family: each metric against the random baseline (M - 1 tests),
        # found by its scores (the task's random baseline is the same seeded draw).
        expected = session.random_scores(gold.n_responses, config.seed)
        random_name = random_name or next((name for name, run in zip(names, runs.values(), strict=True)
                                           if np.array_equal(run.scores, expected)), None)
        if random_name is not None:
            out["against_random"] = {
                "baseline": random_name, "paired_bootstrap": bootstrap.against(random_name),
                "t_tests": meta.paired_t_tests(counts, baseline=random_name) if enough else None}
        if gold.property_metric is not None:
            out["concordance"] = meta.concordance_matrix(gold, vectors).to_dict()
        else:
            unavailable["concordance"] = "the gold has no property metric (M*)"
    n_systems = len(gold.system_names)
    if n_systems < 2:
        unavailable["discriminative_power"] = "the gold names fewer than two systems"
    elif meta.system_matrix(gold, gold.human)[1].size < 2:
        unavailable["discriminative_power"] = f"fewer than two contexts are answered by all {n_systems} systems"
    else:
        out["discriminative_power"] = meta.discriminative_power_figures(
            gold, vectors, n_permutations=resamples, seed=seed, alphas=stats.REPORTED_LEVELS)
    out["unavailable"] = unavailable
    return out


def _adjustment_note(size: int, what: str) -> str:
    return (f" p (unadjusted) is each test on its own; p (Holm) is adjusted for the {size} {what} of this table "
            "(Holm 1979): compare that one with the significance level.")


def _t_test_table(title: str, tests: Mapping[str, Any], what: str) -> dict[str, Any]:
    """A table of :func:`meta.paired_t_tests`: unadjusted, Bonferroni- and Holm-adjusted p-values."""
    return {"title": title, "shade": False,
            "note": f"{tests['test']} ({tests['n_contexts']} contexts); p (Bonferroni) is p times "
                    f"{tests['bonferroni_factor']}, capped at 1." + _adjustment_note(len(tests["tests"]), what),
            "headers": ["metric A", "metric B", "A - B", "t", "df", "p (unadjusted)", "p (Bonferroni)", "p (Holm)"],
            "rows": [[t["a"], t["b"], t["difference"], t["t"], t["df"], t["p"], t["p_bonferroni"], t.get("p_holm")]
                     for t in tests["tests"]]}
