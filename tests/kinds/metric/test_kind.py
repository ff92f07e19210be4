"""The metrics-track kind (scoring.kinds.metric.kind) through the task-kind interface: METRICS-SPEC.md's
worked examples, the ``score --kind metric --format json`` shape of issue 16, validation with
JSON paths, subset scoring against restricted files, the between-metric statistics of
``compare`` against SciPy, plain loops and the shared Tukey HSD, and the baselines against
sacrebleu and the spec's session example.

Plain pytest, no Django.
"""

from __future__ import annotations

import copy
import io
import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from fixtures.metric_demo import generate_gold, generate_runs
from scoring import stats
from scoring.kinds import Kind, Scored, ValidationFailed, get_kind
from scoring.kinds.metric import meta
from scoring.kinds.metric.kind import BASELINES, MetricConfig, MetricKind

KIND = get_kind("metric")
CONFIG = KIND.preset("metric")
MEASURE_KEYS = list(meta.MEASURES)


def run_file(ids, scores):
    return [{"id": i, "score": float(s)} for i, s in zip(ids, scores, strict=True)]


def scored(gold_data, run_data, config=CONFIG, **kwargs) -> tuple[Scored, object, object]:
    gold = KIND.compile_gold(gold_data, config)
    run = KIND.parse_run(run_data, gold, config, **kwargs)
    result = KIND.score(run, gold, config)
    result.check_finite()
    return result, gold, run


def errors_of(call, *args, **kwargs) -> list[str]:
    with pytest.raises(ValidationFailed) as caught:
        call(*args, **kwargs)
    return list(caught.value.errors)


# --------------------------------------------------------------------------- worked examples

SPEC_GOLD = [{"id": "c1", "responses": [{"id": "c1/a", "human": 5}, {"id": "c1/b", "human": 2},
                                        {"id": "c1/c", "human": 3}]},
             {"id": "c2", "responses": [{"id": "c2/a", "human": 1}, {"id": "c2/b", "human": 1},
                                        {"id": "c2/c", "human": 4}]}]
SPEC_IDS = ["c1/a", "c1/b", "c1/c", "c2/a", "c2/b", "c2/c"]
SPEC_METRIC = [0.9, 0.4, 0.4, 0.2, 0.7, 0.5]


def test_kind_is_registered() -> None:
    assert isinstance(KIND, MetricKind) and KIND.name == "metric" and KIND.item_noun == "context"


def test_spec_predictive_power_example_through_the_kind() -> None:
    result, gold, _ = scored(SPEC_GOLD, run_file(SPEC_IDS, SPEC_METRIC))
    summary = result.summary()
    assert summary["measures"]["predictive_power"] == 0.6
    assert summary["measures"]["predictive_power_ties_half"] == 0.7
    assert (summary["n_items"], summary["n_pairs"]) == (2, 5)
    assert result.item_ids == ["c1", "c2"]
    # Per context: c1 has 3 pairs, 2 correct, 1 tie; c2 has 2 pairs (c2/a, c2/b tie in people), 1 correct.
    assert result.statistics["predictive_power"].tolist() == [[2, 1, 3], [1, 0, 2]]
    assert result.per_item["predictive_power"].tolist() == [2 / 3, 1 / 2]
    assert result.per_item["predictive_power_ties_half"].tolist() == [2.5 / 3, 1 / 2]
    specs = {spec.key: spec for spec in KIND.measures(CONFIG, gold)}
    for key in ("predictive_power", "predictive_power_ties_half"):
        spec = specs[key]
        assert spec.headline == "corpus"
        assert spec.aggregate(result.per_item[key], result.statistics[key]) == result.headlines[key]


def concordance_gold() -> tuple[list, dict]:
    """METRICS-SPEC's concordance example: runs r1, r2, r3 (the systems) over three topics (contexts)."""
    m1 = [[.9, .1, .3], [.2, .4, .3], [.5, .5, .9]]  # topic x run
    m2 = [[.2, .6, .3], [.8, .1, .5], [.1, .4, .2]]
    star = [[1, 0, 1], [1, 0, 0], [0, 1, 1]]
    gold = [{"id": f"t{t}", "responses": [{"id": f"t{t}/r{r + 1}", "system": f"r{r + 1}", "human": 3 - r,
                                           "property": star[t][r]} for r in range(3)]} for t in range(3)]
    ids = [f"t{t}/r{r + 1}" for t in range(3) for r in range(3)]
    runs = {"M1": run_file(ids, np.ravel(m1)), "M2": run_file(ids, np.ravel(m2))}
    return gold, runs


def test_spec_concordance_example_through_compare() -> None:
    gold_data, run_data = concordance_gold()
    gold = KIND.compile_gold(gold_data, CONFIG)
    runs = {name: KIND.parse_run(data, gold, CONFIG) for name, data in run_data.items()}
    result = KIND.compare(runs, gold, CONFIG, seed=3, resamples=200)
    concordance = result["concordance"]
    assert concordance["names"] == ["M1", "M2"]
    assert concordance["disagreements"] == [[0, 7], [7, 0]]
    assert concordance["concordant"] == [[0, 5], [5, 0]]
    assert concordance["concordance"][0][1] == pytest.approx(0.7142857143, abs=1e-10)
    assert concordance["concordance"][1][0] == pytest.approx(0.7142857143, abs=1e-10)
    assert concordance["concordance"][0][0] is None  # a metric never disagrees with itself
    json.dumps(result, allow_nan=False)


def test_spec_session_example_through_the_baselines() -> None:
    gold_data = [{"id": "s", "responses": [{"id": "s/a", "human": 2, "grades": [2, 0, 1, 2]},
                                           {"id": "s/b", "human": 1, "grades": [0]}]}]
    gold = KIND.compile_gold(gold_data, CONFIG)
    baselines = {baseline.name: baseline for baseline in KIND.baselines(gold, CONFIG)}
    expected = {"scg": 7, "sdcg": 5.9109487371, "sdcg-per-query": 1.4777371843, "decrease-weight": 1.96,
                "increase-weight": 1.8, "equal-weight": 1.75, "middle-high-weight": 1.3333333333,
                "middle-low-weight": 2.1666666667}
    assert list(baselines) == ["random", *expected]
    for name, value in expected.items():
        content = baselines[name].content
        assert content[0]["id"] == "s/a"
        assert content[0]["score"] == pytest.approx(value, abs=1e-10)
        assert content[1]["score"] == 0.0  # one turn graded 0: no gain
        KIND.parse_run(content, gold, CONFIG)


# --------------------------------------------------------------------------- the summary JSON


def demo(n_contexts=30, n_systems=4, seed=0, **kwargs):
    gold_data = generate_gold(n_contexts, n_systems, seed, **kwargs)
    return gold_data, generate_runs(gold_data, seed)


def test_summary_is_the_score_command_json_of_issue_16() -> None:
    gold_data, runs = demo()
    result, _, _ = scored(gold_data, runs["noisy"])
    summary = json.loads(json.dumps(result.summary(), allow_nan=False))
    assert set(summary) == {"measures", "n_items", "n_pairs", "settings", "intervals", "interval_labels",
                            "interval_notes"}
    assert list(summary["measures"]) == MEASURE_KEYS
    assert list(summary["measures"])[:5] == ["predictive_power", "predictive_power_ties_half", "kendall_tau_b",
                                             "spearman", "pearson"]
    assert all(isinstance(value, float) for value in summary["measures"].values())
    assert summary["n_items"] == 30
    assert summary["settings"] == {"n_resamples": 1000, "seed": 0, "level": 0.95, "pooled_rank_resamples": 1000,
                                   "resampling": "contexts", "tie_tolerance": 0.0}
    assert set(summary["intervals"]) == set(MEASURE_KEYS)
    for key, interval in summary["intervals"].items():
        if key == "system_pearson":  # no interval, and the summary says why (SIGNIFICANCE-SPEC, "Intervals")
            assert interval is None and "no interval" in summary["interval_notes"][key], key
            assert key not in summary["interval_labels"]
            continue
        low, high = interval
        assert low <= summary["measures"][key] <= high, key
        assert summary["interval_labels"][key].startswith("95% interval for "), key
    assert summary["interval_labels"]["system_kendall_tau_b"] == (
        "95% interval for the system-level Kendall tau-b if the contexts were drawn again")
    # The board's headline figures are the summary's, finite only.
    assert result.headlines == summary["measures"]


def test_no_systems_gives_null_system_figures_left_out_of_headlines() -> None:
    gold_data, runs = demo(systems=False)
    result, gold, _ = scored(gold_data, runs["close"])
    summary = result.summary()
    for key in ("system_kendall_tau_b", "system_spearman", "system_pearson", "system_pearson_disattenuated"):
        assert summary["measures"][key] is None and summary["intervals"][key] is None
        assert key not in result.headlines and key not in result.per_item
    assert "system_pearson" not in {spec.key for spec in KIND.measures(CONFIG, gold)}
    assert "system_pearson" in {spec.key for spec in KIND.measures(CONFIG)}


def test_undefined_figures_are_none_and_never_nan() -> None:
    """A metric constant within every context: within-context correlations undefined everywhere;
    a subset of contexts whose judgements all tie: predictive power undefined."""
    gold_data = [{"id": "a", "responses": [{"id": "a1", "human": 1}, {"id": "a2", "human": 2}]},
                 {"id": "b", "responses": [{"id": "b1", "human": 3}, {"id": "b2", "human": 3}]}]
    result, gold, run = scored(gold_data, run_file(["a1", "a2", "b1", "b2"], [1, 1, 2, 2]))
    measures = result.summary()["measures"]
    assert measures["predictive_power"] == 0.0 and measures["predictive_power_ties_half"] == 0.5
    for key in ("kendall_tau_b_within", "spearman_within", "pearson_within"):
        assert measures[key] is None and key not in result.per_item and key not in result.statistics
    subset = KIND.score(run, gold, CONFIG, items=np.array([1]))
    subset.check_finite()
    assert subset.summary()["measures"]["predictive_power"] is None
    assert "predictive_power" not in subset.headlines and subset.summary()["n_pairs"] == 0
    json.dumps(subset.summary(), allow_nan=False)


def test_within_context_values_stored_per_context() -> None:
    """Per-context vectors are the per-context correlations (0 where undefined), and the headline
    is their mean over the defined contexts, computed from the statistics."""
    gold_data, runs = demo(n_contexts=12, seed=4)
    result, gold, run = scored(gold_data, runs["coarse"])
    specs = {spec.key: spec for spec in KIND.measures(CONFIG, gold)}
    for key, correlation in (("kendall_tau_b_within", sps.kendalltau), ("spearman_within", sps.spearmanr),
                             ("pearson_within", sps.pearsonr)):
        values = []
        for c in range(gold.n_contexts):
            rows = gold.context == c
            x, y = run.scores[rows], gold.human[rows]
            values.append(math.nan if np.ptp(x) == 0 or np.ptp(y) == 0 else correlation(x, y).statistic)
        values = np.array(values)
        defined = ~np.isnan(values)
        np.testing.assert_allclose(result.per_item[key], np.where(defined, values, 0.0), atol=1e-12)
        assert result.statistics[key][:, 1].tolist() == defined.astype(float).tolist()
        assert result.headlines[key] == pytest.approx(values[defined].mean(), abs=1e-12)
        assert spec_aggregate(specs[key], result, key) == result.headlines[key]


def spec_aggregate(spec, result, key):
    return spec.aggregate(result.per_item[key], result.statistics[key])


def test_pooled_and_system_correlations_match_scipy() -> None:
    gold_data, runs = demo(n_contexts=25, n_systems=5, seed=7)
    result, gold, run = scored(gold_data, runs["noisy"])
    x, y = run.scores, gold.human
    assert result.headlines["kendall_tau_b"] == pytest.approx(sps.kendalltau(x, y).statistic, abs=1e-12)
    assert result.headlines["spearman"] == pytest.approx(sps.spearmanr(x, y).statistic, abs=1e-12)
    assert result.headlines["pearson"] == pytest.approx(sps.pearsonr(x, y).statistic, abs=1e-12)
    systems = sorted({r["system"] for c in gold_data for r in c["responses"]})
    metric_means = [np.mean([s["score"] for s, r in zip(runs["noisy"], (r for c in gold_data for r in c["responses"]),
                                                         strict=True) if r["system"] == name]) for name in systems]
    human_means = [np.mean([r["human"] for c in gold_data for r in c["responses"] if r["system"] == name])
                   for name in systems]
    assert result.headlines["system_pearson"] == pytest.approx(sps.pearsonr(metric_means, human_means).statistic,
                                                               abs=1e-12)
    assert result.headlines["system_spearman"] == pytest.approx(
        sps.spearmanr(metric_means, human_means).statistic, abs=1e-12)
    assert result.headlines["system_kendall_tau_b"] == pytest.approx(
        sps.kendalltau(metric_means, human_means).statistic, abs=1e-12)
    for spec in KIND.measures(CONFIG, gold):
        low, high = spec.value_range
        assert low <= result.headlines[spec.key] <= high
        assert spec.headline == ("corpus" if spec.key.startswith("predictive") or spec.key.endswith("_within")
                                 else "run")


def test_pooled_rank_intervals_are_those_of_rebuilt_resamples() -> None:
    """The kernel's exact weighted ranks against SciPy on each resample rebuilt response by response."""
    gold_data, runs = demo(n_contexts=12, seed=2)
    config = KIND.config({"n_resamples": 60, "seed": 3})
    result, gold, run = scored(gold_data, runs["coarse"], config)
    replicates = []
    for _, counts in stats.resample_counts(gold.n_contexts, 60, 3):
        for weights in counts:
            rows = np.repeat(np.arange(gold.n_responses), weights[gold.context])
            replicates.append((sps.kendalltau(run.scores[rows], gold.human[rows]).statistic,
                               sps.spearmanr(run.scores[rows], gold.human[rows]).statistic))
    replicates = np.array(replicates)
    for column, key in enumerate(("kendall_tau_b", "spearman")):
        expected = np.quantile(replicates[:, column], [0.025, 0.975])
        np.testing.assert_allclose(result.summary()["intervals"][key], expected, atol=1e-12)
    quick = KIND.preset("metric-quick")
    fast, _, _ = scored(gold_data, runs["coarse"], quick)
    assert fast.summary()["intervals"]["kendall_tau_b"] is None and fast.settings["pooled_rank_resamples"] == 0
    assert fast.settings["n_resamples"] == 200


def test_same_seed_same_scores_other_seed_other_intervals() -> None:
    gold_data, runs = demo(n_contexts=15, seed=5)
    first, _, _ = scored(gold_data, runs["noisy"])
    again, _, _ = scored(gold_data, runs["noisy"])
    other, _, _ = scored(gold_data, runs["noisy"], KIND.config({"seed": 9}))
    assert first.summary() == again.summary()
    assert first.summary()["measures"] == other.summary()["measures"]
    assert first.summary()["intervals"] != other.summary()["intervals"]
    assert other.settings["seed"] == 9


# --------------------------------------------------------------------------- subsets and partial runs


def restricted(gold_data, run_data, contexts):
    keep = [gold_data[c] for c in contexts]
    ids = {r["id"] for context in keep for r in context["responses"]}
    return keep, [entry for entry in run_data if entry["id"] in ids]


@pytest.mark.parametrize("contexts", [[0, 3, 4, 9, 17], [2], list(range(1, 20, 2))])
def test_subset_scoring_equals_scoring_the_restricted_files(contexts) -> None:
    gold_data, runs = demo(n_contexts=20, n_systems=4, seed=11)
    # Leave one system out of the chosen contexts, so the subset also re-codes systems.
    for c in contexts:
        gold_data[c]["responses"] = [r for r in gold_data[c]["responses"] if r["system"] != "S2"]
    run_data = [entry for entry in runs["coarse"] if "-r1" not in entry["id"] or
                int(entry["id"][1:4]) not in contexts]
    gold = KIND.compile_gold(gold_data, CONFIG)
    run = KIND.parse_run(run_data, gold, CONFIG)
    subset = KIND.score(run, gold, CONFIG, items=np.array(contexts))
    alone, _, _ = scored(*restricted(gold_data, run_data, contexts))
    assert subset.summary() == alone.summary()
    assert subset.item_ids == alone.item_ids
    assert subset.per_item.keys() == alone.per_item.keys()
    for key, values in alone.per_item.items():
        assert subset.per_item[key].tobytes() == values.tobytes()
        assert subset.statistics.get(key, np.empty(0)).tobytes() == alone.statistics.get(key, np.empty(0)).tobytes()
    # The whole run's stored statistics give the subset's corpus figures exactly.
    whole = KIND.score(run, gold, CONFIG)
    for spec in KIND.measures(CONFIG, gold):
        if spec.headline == "corpus" and spec.key in subset.headlines:
            chosen = np.array(contexts)
            value = spec.aggregate(whole.per_item[spec.key][chosen], whole.statistics[spec.key][chosen])
            assert value == pytest.approx(subset.headlines[spec.key], abs=1e-15)


def test_partial_run_scores_the_complete_contexts_and_says_how_many() -> None:
    gold_data, runs = demo(n_contexts=10, seed=1)
    run_data = [entry for entry in runs["noisy"] if entry["id"] not in ("c002-r0", "c007-r3", "c007-r1")]
    gold = KIND.compile_gold(gold_data, CONFIG)
    problems = errors_of(KIND.parse_run, run_data, gold, CONFIG)
    assert problems == ['$: response "c002-r0" has no score', '$: response "c007-r1" has no score',
                        '$: response "c007-r3" has no score']
    run = KIND.parse_run(run_data, gold, CONFIG, allow_missing=True)
    assert run.n_missing == 2
    assert run.warnings == ["2 of the 10 gold context(s) lack a score for some response; scored on the 8 it "
                            "scores completely"]
    partial = KIND.score(run, gold, CONFIG)
    assert partial.n_missing == 2 and partial.summary()["n_missing"] == 2
    kept = [c for c in range(10) if c not in (2, 7)]
    alone, _, _ = scored(*restricted(gold_data, run_data, kept))
    assert partial.summary()["measures"] == alone.summary()["measures"]
    assert partial.summary()["intervals"] == alone.summary()["intervals"]
    with pytest.raises(ValueError, match="cannot be compared: partial"):
        KIND.compare({"partial": run}, gold, CONFIG, seed=0, resamples=10)


# --------------------------------------------------------------------------- validation


def test_run_validation_names_every_problem_with_its_path() -> None:
    gold = KIND.compile_gold(SPEC_GOLD, CONFIG)
    run = run_file(SPEC_IDS, SPEC_METRIC)
    run[0]["score"] = "high"
    run[1]["score"] = float("nan")
    run[2]["id"] = "c9/x"
    run[3] = {"id": "c1/b", "score": 1}
    run[4]["score"] = True
    problems = errors_of(KIND.parse_run, run, gold, CONFIG)
    assert problems == [
        '[0].score: must be a number, got "high"',
        "[1].score: must be a finite number, got nan",
        '[2].id: unknown response id "c9/x" (not in the gold)',
        '[3].id: duplicate response id "c1/b" (first at [1])',
        "[4].score: must be a number, got the boolean True",
        '$: response "c1/c" has no score',
        '$: response "c2/a" has no score',
    ]
    assert errors_of(KIND.parse_run, {"id": "c1/a"}, gold, CONFIG) == [
        '$: expected a JSON list of {"id", "score"} objects, got an object']


def test_gold_validation_of_texts_and_references_with_paths() -> None:
    gold_data, _ = demo(n_contexts=3)
    gold_data[0]["references"][1]["weight"] = 1.5
    gold_data[0]["references"][2]["text"] = ""
    del gold_data[1]["responses"][2]["text"]
    gold_data[1]["context"][0]["sender"] = 7
    gold_data[2]["references"] = [{"text": "bad", "weight": -0.5}]
    gold_data[2]["responses"][0]["text"] = "x\x00"
    problems = errors_of(KIND.compile_gold, gold_data, CONFIG)
    assert problems == [
        "[0].references[1].weight: must be in [-1, 1], got 1.5",
        "[0].references[2].text: must not be empty",
        "[1].context[0].sender: must be a string, not 7",
        "[1].responses[2].text: missing: the contexts carry references, which score the responses' texts, so "
        "every response needs one",
        "[2].references: no reference has a positive weight",
        "[2].responses[0].text: must not contain NUL characters",
    ]
    del gold_data[0]["references"]
    assert "[0].references: missing: other contexts of the gold carry references, so every one must" in \
        errors_of(KIND.compile_gold, gold_data, CONFIG)


def test_config_validation_lists_every_problem() -> None:
    with pytest.raises(ValueError) as caught:
        KIND.config({"n_resamples": 0, "seed": -1, "level": 1.5, "tie_tolerance": float("nan"),
                     "rank_intervals": 1, "publish_references": "yes", "baselines": ["random", "rouge"],
                     "colour": "red"})
    message = str(caught.value)
    for fragment in ("unknown keys colour", "n_resamples: must be an integer from 1 to 100,000, got 0",
                     "seed: must be an integer from 0", "level: must be a number strictly between 0 and 1, got 1.5",
                     "tie_tolerance: must be a finite number >= 0, got nan",
                     "rank_intervals: must be true or false, got 1",
                     "publish_references: must be true or false, got 'yes'", "baselines: unknown 'rouge'"):
        assert fragment in message, fragment
    assert KIND.config({}) == MetricConfig()
    assert KIND.config(KIND.presets["metric"]) == MetricConfig()
    for name in KIND.presets:
        assert KIND.config(KIND.preset(name).to_dict()) == KIND.preset(name)


def test_tie_tolerance_counts_close_scores_as_ties() -> None:
    gold = [{"id": "c", "responses": [{"id": "a", "human": 2}, {"id": "b", "human": 1}, {"id": "d", "human": 0}]}]
    run = run_file(["a", "b", "d"], [0.5 + 1e-12, 0.5, 0.2])
    exact, _, _ = scored(gold, run)
    assert exact.headlines["predictive_power"] == 1.0
    loose, _, _ = scored(gold, run, KIND.config({"tie_tolerance": 1e-9}))
    assert loose.headlines["predictive_power"] == pytest.approx(2 / 3, abs=1e-15)
    assert loose.headlines["predictive_power_ties_half"] == pytest.approx(2.5 / 3, abs=1e-15)
    assert loose.settings["tie_tolerance"] == 1e-9


# --------------------------------------------------------------------------- compare


def loop_predictive_power(gold, scores):
    correct = total = 0
    for c in range(gold.n_contexts):
        rows = np.flatnonzero(gold.context == c)
        for i, j in itertools.combinations(rows, 2):
            if gold.human[i] != gold.human[j]:
                total += 1
                correct += (scores[i] - scores[j]) * (gold.human[i] - gold.human[j]) > 0
    return correct / total


def test_compare_against_independent_computations() -> None:
    gold_data, run_data = demo(n_contexts=40, n_systems=4, seed=3)
    gold = KIND.compile_gold(gold_data, CONFIG)
    runs = {name: KIND.parse_run(data, gold, CONFIG) for name, data in run_data.items()}
    result = KIND.compare(runs, gold, CONFIG, seed=5, resamples=500)
    json.dumps(result, allow_nan=False)
    names = list(runs)
    assert result["metrics"] == names and result["unavailable"] == {}
    assert result["settings"] == {"seed": 5, "resamples": 500, "level": 0.95, "tie_tolerance": 0.0}
    for name, run in runs.items():
        assert result["predictive_power"][name] == pytest.approx(loop_predictive_power(gold, run.scores), abs=1e-15)

    # t-tests: SciPy's paired t-test on per-context correct pairs, Bonferroni over all pairs.
    counts = meta.context_counts(gold, {name: run.scores for name, run in runs.items()})
    factor = len(names) * (len(names) - 1) // 2
    tests = result["t_tests"]
    assert tests["bonferroni_factor"] == factor
    for test, (a, b) in zip(tests["tests"], itertools.combinations(range(len(names)), 2), strict=True):
        assert (test["a"], test["b"]) == (names[a], names[b])
        reference = sps.ttest_rel(counts.correct[:, a], counts.correct[:, b])
        assert test["t"] == pytest.approx(reference.statistic, rel=1e-10)
        assert test["p"] == pytest.approx(reference.pvalue, rel=1e-8, abs=1e-300)
        assert test["p_bonferroni"] == pytest.approx(min(1.0, factor * reference.pvalue), rel=1e-8, abs=1e-300)

    # Paired bootstrap: rebuilt here from the shared resample stream, resample by resample.
    boot = result["paired_bootstrap"]
    assert (boot["n_resamples"], boot["seed"], boot["n_undefined"]) == (500, 5, 0)
    replicates = []
    for _, weights in stats.resample_counts(gold.n_contexts, 500, 5):
        for w in weights:
            replicates.append((w @ counts.correct) / (w @ counts.pairs))
    replicates = np.array(replicates)
    pp = counts.correct.sum(axis=0) / counts.pairs.sum()
    for pair, (a, b) in zip(boot["pairs"], itertools.combinations(range(len(names)), 2), strict=True):
        d = pp[a] - pp[b]
        d_star = replicates[:, a] - replicates[:, b]
        assert pair["difference"] == pytest.approx(d, abs=1e-15)
        assert pair["p"] == pytest.approx(((np.abs(d_star - d) >= abs(d) - 1e-12).sum() + 1) / 501, abs=1e-15)

    # Discriminative power: the shared randomised Tukey HSD on each metric's topic-by-system matrix.
    power = result["discriminative_power"]
    assert (power["n_permutations"], power["seed"], power["systems"]) == (500, 5, ["S1", "S2", "S3", "S4"])
    matrices = {}
    for name, run in runs.items():
        matrix = np.zeros((gold.n_contexts, 4))
        matrix[gold.context, gold.system] = run.scores
        matrices[name] = matrix
    tukey = stats.randomised_tukey_hsd(matrices, n_permutations=500, seed=5)
    for name in names:
        entry = power["metrics"][name]
        upper = tukey[name].pvalues[np.triu_indices(4, 1)]
        assert entry["asl_curve"] == sorted(upper.tolist())
        assert entry["discriminative_power_05"] == np.mean(upper < 0.05)
        assert entry["discriminative_power_01"] == np.mean(upper < 0.01)
        significant = upper < 0.05
        differences = np.abs(tukey[name].differences[np.triu_indices(4, 1)])
        assert entry["delta_required_05"] == (differences[significant].min() if significant.any() else None)

    # Concordance: seed 003 Algorithm 4 as a plain loop, for one pair.
    concordance = result["concordance"]
    a, b = names.index("close"), names.index("noisy")
    disagreements = conc_a = 0
    star = gold.property_metric
    for c in range(gold.n_contexts):
        rows = np.flatnonzero(gold.context == c)
        for i, j in itertools.combinations(rows, 2):
            da = runs["close"].scores[i] - runs["close"].scores[j]
            db = runs["noisy"].scores[i] - runs["noisy"].scores[j]
            if da * db < 0:
                disagreements += 1
                conc_a += da * (star[i] - star[j]) >= 0
    assert concordance["disagreements"][a][b] == disagreements
    assert concordance["concordant"][a][b] == conc_a


def test_compare_says_what_is_unavailable() -> None:
    gold_data, run_data = demo(n_contexts=6, systems=False, prop=False)
    gold = KIND.compile_gold(gold_data, CONFIG)
    one = {"close": KIND.parse_run(run_data["close"], gold, CONFIG)}
    result = KIND.compare(one, gold, CONFIG, seed=0, resamples=20)
    assert result["paired_bootstrap"] is None and result["t_tests"] is None
    assert result["concordance"] is None and result["discriminative_power"] is None
    assert result["unavailable"] == {"paired_bootstrap": "needs at least two metrics",
                                     "t_tests": "needs at least two metrics",
                                     "concordance": "needs at least two metrics",
                                     "discriminative_power": "the gold names fewer than two systems"}
    two = {**one, "noisy": KIND.parse_run(run_data["noisy"], gold, CONFIG)}
    result = KIND.compare(two, gold, CONFIG, seed=0, resamples=20)
    assert result["unavailable"] == {"concordance": "the gold has no property metric (M*)",
                                     "discriminative_power": "the gold names fewer than two systems"}
    with pytest.raises(ValueError, match="at least one run"):
        KIND.compare({}, gold, CONFIG, seed=0, resamples=20)


def test_other_kinds_compare_nothing_by_default() -> None:
    stc3 = get_kind("stc3")
    assert type(stc3).compare is Kind.compare
    assert stc3.compare({}, None, None, seed=0, resamples=10) == {}


# --------------------------------------------------------------------------- baselines and display


def test_baselines_are_valid_runs_and_the_reference_metrics_match_sacrebleu() -> None:
    from sacrebleu.metrics import BLEU

    gold_data, _ = demo(n_contexts=8, n_systems=3, seed=6, grades=True)
    gold = KIND.compile_gold(gold_data, CONFIG)
    baselines = KIND.baselines(gold, CONFIG)
    assert [baseline.name for baseline in baselines] == list(BASELINES)
    for baseline in baselines:
        run = KIND.parse_run(baseline.content, gold, CONFIG)
        KIND.score(run, gold, CONFIG).check_finite()
        assert baseline.description.startswith("Baseline: ")
    by_name = {baseline.name: baseline.content for baseline in baselines}
    texts = [r["text"] for c in gold_data for r in c["responses"]]
    references = [[ref["text"] for ref in c["references"] if ref["weight"] > 0]
                  for c in gold_data for _ in c["responses"]]
    for order in range(1, 5):
        bleu = BLEU(max_ngram_order=order, smooth_method="add-k", smooth_value=1, lowercase=True,
                    effective_order=False)
        expected = [bleu.sentence_score(text, refs).score / 100 for text, refs in zip(texts, references, strict=True)]
        np.testing.assert_allclose([e["score"] for e in by_name[f"bleu-{order}"]], expected, atol=1e-12)
    assert [e["score"] for e in by_name["random"]] == np.random.default_rng(0).random(gold.n_responses).tolist()


def test_posscore_and_delta_bleu_baselines_are_the_registered_response_measures() -> None:
    response = get_kind("response")
    gold_data, _ = demo(n_contexts=5, n_systems=3, seed=8)
    gold = KIND.compile_gold(gold_data, CONFIG)
    by_name = {b.name: b.content for b in KIND.baselines(gold, KIND.config({"baselines": ["posscore", "delta-bleu"]}))}
    assert list(by_name) == ["delta-bleu", "posscore"]
    # The same responses as a response-kind task: one item per response, its context's references,
    # scored the one way the response kind scores (its registry's scorers).
    config = response.config({"measures": ["delta_bleu", "posscore"], "nuggets": {"score": "never"}})
    response_gold = response.compile_gold([{"id": r["id"], "references": c["references"]}
                                           for c in gold_data for r in c["responses"]], config)
    response_run = response.parse_run([{"id": r["id"], "response": r["text"]} for c in gold_data
                                       for r in c["responses"]], response_gold, config)
    reference = response.score(response_run, response_gold, config)
    assert reference.item_ids == [r["id"] for c in gold_data for r in c["responses"]]
    np.testing.assert_allclose([e["score"] for e in by_name["delta-bleu"]], reference.per_item["delta_bleu"],
                               atol=1e-12)
    np.testing.assert_allclose([e["score"] for e in by_name["posscore"]], reference.per_item["posscore"],
                               atol=1e-12)


def test_baselines_follow_what_the_gold_holds() -> None:
    gold_data, _ = demo(n_contexts=4, texts=False)
    gold = KIND.compile_gold(gold_data, CONFIG)
    assert [b.name for b in KIND.baselines(gold, CONFIG)] == ["random"]
    assert KIND.sample_run(gold, CONFIG) == KIND.baselines(gold, CONFIG)[0].content
    assert KIND.baselines(gold, KIND.config({"baselines": []})) == []
    assert KIND.sample_run(gold, KIND.config({"baselines": []})) == KIND.baselines(gold, CONFIG)[0].content


def test_gold_bytes_round_trip_keeps_texts_and_references() -> None:
    gold_data, _ = demo(n_contexts=6, grades=True)
    gold = KIND.compile_gold(gold_data, CONFIG)
    blob = gold.to_bytes()
    with np.load(io.BytesIO(blob), allow_pickle=False) as arrays:  # compact arrays, no pickle
        assert {"texts", "references", "human", "context"} <= set(arrays.files)
    again = KIND.gold_from_bytes(blob)
    assert again.texts == gold.texts and again.references == gold.references
    assert again.item_ids == gold.item_ids and again.grades.tolist() == gold.grades.tolist()
    assert [b.content for b in KIND.baselines(again, CONFIG)] == [b.content for b in KIND.baselines(gold, CONFIG)]


def test_participant_data_strips_judgements_systems_properties_and_grades() -> None:
    gold_data, _ = demo(n_contexts=5, grades=True)
    gold_data[0]["responses"].reverse()
    gold_data[0]["secret"] = "organiser notes"
    original = copy.deepcopy(gold_data)
    published = KIND.participant_data(gold_data, CONFIG)
    assert gold_data == original
    text = json.dumps(published)
    for hidden in ('"human"', '"system"', '"property"', '"grades"', "organiser notes"):
        assert hidden not in text
    assert [r["id"] for r in published[0]["responses"]] == sorted(r["id"] for r in original[0]["responses"])
    assert published[1] == {"id": "c001", "context": original[1]["context"], "references": original[1]["references"],
                            "responses": [{"id": r["id"], "text": r["text"]} for r in original[1]["responses"]]}
    hidden_references = KIND.participant_data(gold_data, KIND.config({"publish_references": False}))
    assert all("references" not in context for context in hidden_references)


def test_format_description_is_generated_from_the_config() -> None:
    description = KIND.format_description(KIND.config({"n_resamples": 2000, "seed": 4, "tie_tolerance": 1e-6}))
    assert [field["path"] for field in description["fields"]] == ["[i].id", "[i].score"]
    notes = " ".join(description["notes"])
    assert "B = 2,000, seed 4" in notes and "closer than 1e-06" in notes
    assert "Predictive power (a metric tie counts as wrong)" in notes
    gold = KIND.compile_gold(SPEC_GOLD, CONFIG)
    example = [{**description["example"], "id": response_id} for response_id in SPEC_IDS]
    KIND.parse_run(example, gold, CONFIG)


def test_measures_and_item_description() -> None:
    specs = KIND.measures(CONFIG)
    assert [spec.key for spec in specs] == MEASURE_KEYS
    assert [spec.key for spec in specs if spec.official] == ["predictive_power"]
    assert all(spec.higher_is_better and spec.citation for spec in specs)
    tie_aware = next(spec for spec in specs if spec.key == "predictive_power_ties_half")
    assert "tie-aware" in tie_aware.title
    gold = KIND.compile_gold(SPEC_GOLD, CONFIG)
    assert KIND.describe_item(gold, 0) == "context c1 (3 responses, 3 pairs with different human judgements)"
    assert KIND.describe_item(gold, 1) == "context c2 (3 responses, 2 pairs with different human judgements)"


def test_text_rules_are_the_response_kind_s() -> None:
    from scoring.kinds.metric import formats
    from scoring.kinds.response.formats import MAX_RESPONSE_CHARS

    assert formats.MAX_RESPONSE_CHARS == MAX_RESPONSE_CHARS
    gold_data, _ = demo(n_contexts=2)
    gold_data[0]["responses"][0]["text"] = "x" * (MAX_RESPONSE_CHARS + 1)
    assert errors_of(KIND.compile_gold, gold_data, CONFIG) == [
        f"[0].responses[0].text: is {MAX_RESPONSE_CHARS + 1} characters long; at most {MAX_RESPONSE_CHARS} "
        "are allowed"]


def test_gold_subset_is_the_gold_of_the_restricted_file() -> None:
    gold_data, _ = demo(n_contexts=7, n_systems=3, seed=12, grades=True)
    gold = KIND.compile_gold(gold_data, CONFIG)
    chosen = [1, 4, 5]
    subset = gold.subset(np.array(chosen))
    alone = KIND.compile_gold([gold_data[c] for c in chosen], CONFIG)
    for name in ("context_ids", "response_ids", "system_names", "texts", "references", "warnings"):
        assert getattr(subset, name) == getattr(alone, name), name
    for name in ("context", "human", "system", "property_metric", "grades", "grade_counts"):
        assert getattr(subset, name).tolist() == getattr(alone, name).tolist(), name
    with pytest.raises(ValueError, match="ascending distinct indices"):
        gold.subset(np.array([4, 1]))


def loop_holm(pvalues):
    """Holm (1979) step by step: reject in ascending order while p_(i) <= alpha / (m - i + 1); the adjusted
    p-value is the smallest alpha at which a hypothesis is rejected."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted, best = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        best = max(best, min(1.0, pvalues[i] * (m - rank)))
        adjusted[i] = best
    return adjusted


def test_compare_labels_adjustments_and_offers_each_metric_against_random() -> None:
    gold_data, run_data = demo(n_contexts=40, n_systems=4, seed=3)
    gold = KIND.compile_gold(gold_data, CONFIG)
    ids = [response["id"] for context in gold_data for response in context["responses"]]
    run_data = {**run_data, "random": run_file(ids, session_random(gold.n_responses))}
    runs = {name: KIND.parse_run(data, gold, CONFIG) for name, data in run_data.items()}
    result = KIND.compare(runs, gold, CONFIG, seed=5, resamples=500)
    json.dumps(result, allow_nan=False)
    names = list(runs)
    boot, tests = result["paired_bootstrap"], result["t_tests"]
    assert "unadjusted" in boot["adjustment"] and "Holm" in boot["adjustment"]
    assert [pair["p_holm"] for pair in boot["pairs"]] == pytest.approx(loop_holm([p["p"] for p in boot["pairs"]]))
    assert [t["p_holm"] for t in tests["tests"]] == pytest.approx(loop_holm([t["p"] for t in tests["tests"]]))
    against = result["against_random"]
    assert against["baseline"] == "random"
    family = against["paired_bootstrap"]["pairs"]
    assert [(pair["a"], pair["b"]) for pair in family] == [(name, "random") for name in names[:-1]]
    all_pairs = {(pair["a"], pair["b"]): pair for pair in boot["pairs"]}
    assert [pair["p"] for pair in family] == [all_pairs[(pair["a"], "random")]["p"] for pair in family]
    assert [pair["p_holm"] for pair in family] == pytest.approx(loop_holm([pair["p"] for pair in family]))
    t_family = against["t_tests"]
    assert t_family["bonferroni_factor"] == len(names) - 1 and t_family["baseline"] == "random"
    counts = meta.context_counts(gold, {name: run.scores for name, run in runs.items()})
    for test in t_family["tests"]:
        a = names.index(test["a"])
        reference = sps.ttest_rel(counts.correct[:, a], counts.correct[:, names.index("random")])
        assert test["p"] == pytest.approx(reference.pvalue, rel=1e-8, abs=1e-300)
    titles = [table["title"] for table in KIND.compare_tables(result)]
    assert "Each metric against the random baseline (random)" in titles
    headers = next(table["headers"] for table in KIND.compare_tables(result)
                   if table["title"].startswith("Paired boot"))
    assert "p (unadjusted)" in headers and "p (Holm)" in headers


def session_random(n_responses):
    from scoring.kinds.metric import session

    return session.random_scores(n_responses, CONFIG.seed)
