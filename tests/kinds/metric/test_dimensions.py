"""Several dimensions, levels, languages and annotators in the metrics track (issue 39;
METRICS-SPEC.md, "Dimensions, levels, languages"): every per-dimension figure against SciPy on the
items of its dimension, level and language picked out of the gold file here, a hand-worked
two-dimension example, the leave-one-out human reference written out with loops, validation with
JSON paths, per-dimension runs, one-dimension golds unchanged, subsets, the comparisons and the
offline command.

USR's annotations (Mehri and Eskenazi 2020) could not be fetched on this machine (they are served
from the authors' site, not a repository), so the "real" judgements are realistic synthetic ones:
three annotators with personal leniency and noise on 1-5 scales (fixtures.metric_dims_demo).

Plain pytest, no Django.
"""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from fixtures import metric_dims_demo
from scoring.judgements.alpha import krippendorff_alpha
from scoring.kinds import ValidationFailed, get_kind
from scoring.kinds.metric.config import MetricConfig
from scoring.kinds.metric.humans import leave_one_out

KIND = get_kind("metric")
ROOT = Path(__file__).resolve().parents[3]
QUICK = {"n_resamples": 50, "rank_intervals": False}
DEMO_CONFIG = MetricConfig.from_dict({**metric_dims_demo.CONFIG, **QUICK})
MEASURES = {"spearman": lambda x, y: sps.spearmanr(x, y).statistic,
            "pearson": lambda x, y: sps.pearsonr(x, y).statistic,
            "kendall_tau_b": lambda x, y: sps.kendalltau(x, y).statistic}


def errors_of(call, *args, **kwargs) -> list[str]:
    with pytest.raises(ValidationFailed) as caught:
        call(*args, **kwargs)
    return list(caught.value.errors)


def score(gold_data, run_data, config=DEMO_CONFIG):
    gold = KIND.compile_gold(gold_data, config)
    result = KIND.score(KIND.parse_run(run_data, gold, config), gold, config)
    result.check_finite()
    return result, gold


@pytest.fixture(scope="module")
def demo():
    gold = metric_dims_demo.generate_gold(12, seed=3)
    return gold, metric_dims_demo.generate_runs(gold, seed=3)


# ------------------------------------------------------------------ every figure against SciPy

def items_of(gold_data, dimension, level, language):
    """(response id, human judgement) of one slice, read from the gold file itself."""
    return [(response["id"], response["human"][dimension]) for context in gold_data for response in context["responses"]
            if response.get("level", "turn") == level and response.get("language") == language
            and dimension in response["human"]]


def test_every_per_dimension_correlation_equals_scipy(demo):
    gold_data, runs = demo
    result, _ = score(gold_data, runs["close"])
    scores = {entry["id"]: entry["score"] for entry in runs["close"]}
    checked = 0
    for entry in metric_dims_demo.CONFIG["dimensions"]:
        for language in metric_dims_demo.LANGUAGES:
            picked = items_of(gold_data, entry["name"], entry["level"], language)
            assert len(picked) == 4 * (8 if entry["level"] == "turn" else 4)
            human = [value for _, value in picked]
            metric = [scores[response_id] for response_id, _ in picked]
            for measure, reference in MEASURES.items():
                key = f"{entry['name']}.{language}.{measure}"
                assert result.headlines[key] == pytest.approx(reference(metric, human), abs=1e-12), key
                checked += 1
    assert checked == 8 * 2 * 3
    means = [result.headlines[f"{e['name']}.{lang}.spearman"] for e in metric_dims_demo.CONFIG["dimensions"]
             for lang in metric_dims_demo.LANGUAGES]
    assert result.headlines["mean_spearman"] == pytest.approx(float(np.mean(means)), abs=1e-15)
    assert result.summary()["aggregate"] == {"key": "mean_spearman", "measure": "spearman", "n_slices": 16,
                                             "n_defined": 16}


def test_per_dimension_runs_are_held_against_their_own_dimension(demo):
    gold_data, _ = demo
    config = MetricConfig.from_dict({**metric_dims_demo.CONFIG, **QUICK, "run_scores": "per-dimension"})
    rng = np.random.default_rng(5)
    run, own = [], {}
    for context in gold_data:
        for response in context["responses"]:
            values = {name: float(value + rng.normal(scale=0.5)) for name, value in response["human"].items()}
            run.append({"id": response["id"], "scores": values})
            own[response["id"]] = values
    result, _ = score(gold_data, run, config)
    for entry in metric_dims_demo.CONFIG["dimensions"]:
        picked = items_of(gold_data, entry["name"], entry["level"], "zh")
        metric = [own[response_id][entry["name"]] for response_id, _ in picked]
        expected = sps.spearmanr(metric, [value for _, value in picked]).statistic
        assert result.headlines[f"{entry['name']}.zh.spearman"] == pytest.approx(expected, abs=1e-12)


# ------------------------------------------------------------------ a hand-worked example

HAND_GOLD = [{"id": "c1", "responses": [{"id": "c1/a", "human": {"overall": 5, "engaging": 1}},
                                        {"id": "c1/b", "human": {"overall": 2, "engaging": 2}},
                                        {"id": "c1/c", "human": {"overall": 3, "engaging": 3}}]},
             {"id": "c2", "responses": [{"id": "c2/a", "human": {"overall": 1, "engaging": 4}},
                                        {"id": "c2/b", "human": {"overall": 1, "engaging": 5}},
                                        {"id": "c2/c", "human": {"overall": 4, "engaging": 6}}]}]
HAND_RUN = [{"id": i, "score": s} for i, s in zip(["c1/a", "c1/b", "c1/c", "c2/a", "c2/b", "c2/c"],
                                                   [0.9, 0.4, 0.4, 0.2, 0.7, 0.5], strict=True)]


def test_hand_worked_two_dimensions():
    result, _ = score(HAND_GOLD, HAND_RUN, MetricConfig.from_dict({**QUICK, "dimensions": [
        {"name": "overall"}, {"name": "engaging"}]}))
    h = result.headlines
    # overall is METRICS-SPEC.md's predictive-power example: 5 pairs, 3 correct; ties half 0.7.
    assert h["overall.predictive_power"] == 0.6
    assert h["overall.predictive_power_ties_half"] == pytest.approx(0.7, abs=1e-15)
    # engaging: c1 orders none of its 3 pairs right (the tie counts wrong), c2 two of 3.
    assert h["engaging.predictive_power"] == pytest.approx(2 / 6, abs=1e-15)
    assert h["engaging.predictive_power_ties_half"] == pytest.approx(2.5 / 6, abs=1e-15)
    # Spearman by hand: metric mid-ranks 6, 2.5, 2.5, 1, 5, 4; overall's 6, 3, 4, 1.5, 1.5, 5 give
    # sum of products of deviations 9 over sqrt(17 * 17); engaging's 1..6 give -2 over sqrt(17 * 17.5).
    assert h["overall.spearman"] == pytest.approx(9 / 17, abs=1e-14)
    assert h["engaging.spearman"] == pytest.approx(-2 / math.sqrt(17 * 17.5), abs=1e-14)
    assert h["mean_spearman"] == pytest.approx((9 / 17 - 2 / math.sqrt(297.5)) / 2, abs=1e-14)


def test_one_dimension_object_keeps_todays_keys_and_numbers():
    plain = [{"id": c["id"], "responses": [{"id": r["id"], "human": r["human"]["overall"]} for r in c["responses"]]}
             for c in HAND_GOLD]
    one = [{"id": c["id"], "responses": [{"id": r["id"], "human": {"overall": r["human"]["overall"]}}
                                         for r in c["responses"]]} for c in HAND_GOLD]
    config = MetricConfig.from_dict(QUICK)
    expected, _ = score(plain, HAND_RUN, config)
    got, _ = score(one, HAND_RUN, config)
    assert got.summary() == expected.summary()
    assert "predictive_power" in got.headlines and "mean_spearman" not in got.headlines
    assert KIND.measures(config, KIND.compile_gold(plain, config)) == KIND.measures(
        config, KIND.compile_gold(one, config))


# ------------------------------------------------------------------ people beside the metrics

def test_leave_one_out_reference_written_out():
    rng = np.random.default_rng(11)
    truth = rng.normal(size=40)
    judgements = np.clip(np.rint(3 + truth[:, None] + rng.normal(scale=0.7, size=(40, 3))), 1, 5)
    judgements[3, 1] = np.nan  # an annotator who skipped an item
    got = leave_one_out(judgements)
    per = {key: [] for key in MEASURES}
    for a in range(3):
        xs, ys = [], []
        for i in range(40):
            if math.isnan(judgements[i, a]):
                continue
            others = [judgements[i, b] for b in range(3) if b != a and not math.isnan(judgements[i, b])]
            xs.append(judgements[i, a])
            ys.append(sum(others) / len(others))
        for key, reference in MEASURES.items():
            per[key].append(reference(xs, ys))
    for key in MEASURES:
        assert got[key] == pytest.approx(sum(per[key]) / 3, abs=1e-12)
        assert got[f"{key}_min"] == pytest.approx(min(per[key]), abs=1e-12)
        assert got[f"{key}_max"] == pytest.approx(max(per[key]), abs=1e-12)


def test_humans_per_slice_beside_the_comparisons(demo):
    gold_data, runs = demo
    gold = KIND.compile_gold(gold_data, DEMO_CONFIG)
    parsed = {name: KIND.parse_run(runs[name], gold, DEMO_CONFIG) for name in ("close", "noisy")}
    humans = KIND.compare(parsed, gold, DEMO_CONFIG, seed=1, resamples=20)["humans"]
    entry = humans["coherence.en"]
    assert entry["title"] == "coherence (dialogue level, English)" and entry["n_annotators"] == 3
    matrix = np.array([response["judgements"]["coherence"] for context in gold_data for response in
                       context["responses"] if response["language"] == "en" and response["level"] == "dialogue"],
                      dtype=np.float64)
    assert entry["n_items"] == matrix.shape[0] == 16
    assert entry["spearman"] == pytest.approx(leave_one_out(matrix)["spearman"], abs=1e-15)
    assert entry["alpha"] == krippendorff_alpha(matrix.tolist(), "interval")
    assert 0.2 < entry["alpha"] < 0.9  # three noisy annotators of one latent quality agree in part


def test_a_number_with_named_judgements_is_one_named_dimension():
    # What the judgements-to-gold command writes for one dimension: the number, its judgements by name.
    gold = [{"id": c["id"], "responses": [{"id": r["id"], "human": r["human"]["overall"],
                                           "judgements": {"overall": [r["human"]["overall"]] * 2}}
                                          for r in c["responses"]]} for c in HAND_GOLD]
    config = MetricConfig.from_dict({**QUICK, "dimensions": [{"name": "overall"}]})
    result, compiled = score(gold, HAND_RUN, config)
    assert compiled.dims.names == ["overall"] and result.headlines["predictive_power"] == 0.6
    gold[1]["responses"][0]["judgements"] = {"fluent": [1, 2]}
    assert errors_of(KIND.compile_gold, gold, config) == [
        "[1].responses[0].judgements: names the dimension \"fluent\" but the item at [0].responses[0].human "
        "names \"overall\""]


# ------------------------------------------------------------------ validation

def test_gold_problems_named_with_their_paths():
    gold = copy.deepcopy(HAND_GOLD)
    gold[0]["responses"][0]["human"] = {"overall": "x", "engaging": 1}
    gold[0]["responses"][1]["human"] = {"overall": 2}
    gold[0]["responses"][2]["level"] = "chapter"
    gold[1]["responses"][0]["human"] = {"overall": 1, "engaging": 4, "bad name": 2}
    gold[1]["responses"][1]["human"] = 3
    errors = errors_of(KIND.compile_gold, gold, MetricConfig.from_dict({}))
    assert errors == [
        "[0].responses[0].human.overall: must be a finite number, got \"x\"",
        "[0].responses[1].human: judges \"overall\" but the turn-level item at [0].responses[0].human judges "
        "\"overall\", \"engaging\": every item of a level judges the same dimensions",
        "[0].responses[2].level: must be \"turn\" or \"dialogue\", got \"chapter\"",
        "[1].responses[0].human: dimension name \"bad name\": must start with a letter and hold only letters, "
        "digits, _ and -, at most 24 characters",
        "[1].responses[0].human: judges \"overall\", \"engaging\", \"bad name\" but the turn-level item at "
        "[0].responses[0].human judges \"overall\", \"engaging\": every item of a level judges the same dimensions",
        "[1].responses[1].human: must be an object of dimensions ({\"overall\": 4.3, ...}) like the gold's other "
        "items, got 3",
    ]


def test_levels_languages_and_judgements_checked():
    gold = copy.deepcopy(HAND_GOLD)
    for context in gold:
        for response in context["responses"]:
            response["language"] = "en"
            response["judgements"] = {"overall": [1, 2, 3], "engaging": [2, 2, 2]}
    gold[0]["responses"][1]["language"] = "zh"
    gold[0]["responses"][2]["language"] = "english!"
    gold[1]["responses"][0]["level"] = "dialogue"
    gold[1]["responses"][1]["judgements"] = {"overall": [1, 2, "x"], "engaging": [None, None, None]}
    del gold[1]["responses"][2]["judgements"]
    errors = errors_of(KIND.compile_gold, gold, MetricConfig.from_dict({}))
    assert errors == [
        "[0].responses[2].language: must be a BCP 47 language code such as \"en\", \"zh\" or \"es\", got "
        "\"english!\"",
        "[0].responses: mixes languages: the items compared in one context must be in one language",
        "[1].responses[1].judgements.overall[2]: must be a finite number, got \"x\"",
        "[1].responses[1].judgements.engaging: has no judgement at all (every entry null)",
        "[1].responses[2].judgements: missing: other items of the gold carry their annotators' judgements, so "
        "every one must",
        "[1].responses: mixes turn-level and dialogue-level items: the items compared in one context must be of "
        "one level",
    ]


def test_a_dimension_without_variation_or_preference_is_refused():
    gold = copy.deepcopy(HAND_GOLD)
    for context in gold:
        for response in context["responses"]:
            response["human"]["engaging"] = 3
    assert errors_of(KIND.compile_gold, gold, MetricConfig.from_dict({})) == [
        "$: every item has the same human judgement on engaging: there is nothing to correlate with"]
    for number, context in enumerate(gold):
        for response in context["responses"]:
            response["human"]["engaging"] = number
    assert errors_of(KIND.compile_gold, gold, MetricConfig.from_dict({})) == [
        "$: no two responses to the same context differ on engaging: there is no preference to predict"]


def test_the_task_must_name_the_golds_dimensions():
    assert errors_of(KIND.compile_gold, HAND_GOLD, MetricConfig.from_dict({})) == [
        "$: the gold judges 2 dimension slices (overall, engaging) but the task's configuration names no "
        "dimensions: add \"dimensions\": [{\"name\": ..., \"level\": ...}, ...] (and \"languages\" for several "
        "languages) so that the board has their columns"]
    config = MetricConfig.from_dict({"dimensions": [{"name": "overall"}, {"name": "fluent"}]})
    assert errors_of(KIND.compile_gold, HAND_GOLD, config) == [
        "$: the gold judges the dimensions overall (turn), engaging (turn) but the task's configuration names "
        "overall (turn), fluent (turn)"]
    with pytest.raises(ValueError, match=r"dimensions\[1\].level: must be \"turn\" or \"dialogue\", got 'both'"):
        MetricConfig.from_dict({"dimensions": [{"name": "a"}, {"name": "b", "level": "both"}]})
    with pytest.raises(ValueError, match="run_scores: per-dimension scores need the task's dimensions"):
        MetricConfig.from_dict({"run_scores": "per-dimension"})


def test_per_dimension_run_problems():
    config = MetricConfig.from_dict({**QUICK, "run_scores": "per-dimension",
                                     "dimensions": [{"name": "overall"}, {"name": "engaging"}]})
    gold = KIND.compile_gold(HAND_GOLD, config)
    run = [{"id": r["id"], "scores": {"overall": 0.5, "engaging": 0.5}} for c in HAND_GOLD for r in c["responses"]]
    run[0]["scores"] = {"overall": 1.0}
    run[1]["scores"]["fluent"] = 2.0
    run[2]["scores"]["engaging"] = float("nan")
    run[3] = {"id": "c2/a", "score": 0.3}
    assert errors_of(KIND.parse_run, run, gold, config) == [
        "[0].scores: has no score for dimension \"engaging\"",
        "[1].scores: unknown dimension \"fluent\" (this turn-level item's dimensions: overall, engaging)",
        "[2].scores.engaging: must be a finite number, got nan",
        "[3].scores: missing: this task takes one score per dimension, {\"scores\": {\"<dimension>\": number, "
        "...}}",
    ]


# ------------------------------------------------------------------ storage, subsets, corpus figures

def test_bytes_round_trip_and_live_subset_equal_restricted_files(demo):
    gold_data, runs = demo
    gold = KIND.compile_gold(gold_data, DEMO_CONFIG)
    assert KIND.describe_item(gold, 23) == ("context zh-d011 (4 dialogues in Chinese, judged on coherence, engageness, "
                                            "informativeness, overall)")
    again = KIND.gold_from_bytes(gold.to_bytes())
    assert again.dims.names == gold.dims.names and again.dims.languages == ["en", "zh"]
    np.testing.assert_array_equal(again.dims.judgements, gold.dims.judgements)
    run = KIND.parse_run(runs["noisy"], again, DEMO_CONFIG)
    items = np.array([0, 3, 9, 12, 15, 20])
    subset = KIND.score(run, again, DEMO_CONFIG, items=items)
    kept = [gold_data[i] for i in items.tolist()]
    ids = {r["id"] for c in kept for r in c["responses"]}
    restricted, _ = score(kept, [e for e in runs["noisy"] if e["id"] in ids])
    assert subset.summary() == restricted.summary()
    for key, values in subset.per_item.items():
        np.testing.assert_array_equal(values, restricted.per_item[key])


def test_corpus_figures_of_the_stored_statistics_equal_the_headlines(demo):
    gold_data, runs = demo
    result, gold = score(gold_data, runs["close"])
    specs = {spec.key: spec for spec in KIND.measures(DEMO_CONFIG, gold)}
    corpus = [key for key in result.statistics if specs[key].headline == "corpus"]
    assert len(corpus) == 16 * 5
    for key in corpus:
        assert specs[key].aggregate(result.per_item[key], result.statistics[key]) == result.headlines[key]
    assert set(result.headlines) <= set(specs)
    assert [spec.key for spec in KIND.measures(DEMO_CONFIG)] == list(specs)
    assert specs["mean_spearman"].official and list(specs)[0] == "mean_spearman"


# ------------------------------------------------------------------ between metrics

def test_compare_per_dimension_with_heat_map(demo):
    gold_data, runs = demo
    gold = KIND.compile_gold(gold_data, DEMO_CONFIG)
    parsed = {name: KIND.parse_run(run, gold, DEMO_CONFIG) for name, run in runs.items()}
    data = KIND.compare(parsed, gold, DEMO_CONFIG, seed=1, resamples=200)
    heat = data["heat"]
    assert heat["keys"][0] == "appropriateness.en" and len(heat["values"]) == 16
    scores = {name: {e["id"]: e["score"] for e in run} for name, run in runs.items()}
    picked = items_of(gold_data, "overall", "dialogue", "zh")
    row = heat["keys"].index("overall.zh")
    for m, name in enumerate(data["metrics"]):
        expected = sps.spearmanr([scores[name][i] for i, _ in picked], [v for _, v in picked]).statistic
        assert heat["values"][row][m] == pytest.approx(expected, abs=1e-12)
    assert heat["people"][row] == data["humans"]["overall.zh"]["spearman"]
    part = data["slices"][row]
    assert part["title"] == "overall (dialogue level, Chinese)" and len(part["paired_bootstrap"]["pairs"]) == 6
    tables = KIND.compare_tables(json.loads(json.dumps(data)))
    assert tables[0]["heat_map"]["rows"][-1] == "mean over dimensions"
    assert tables[1]["title"] == "People: agreement and the human reference line"
    assert any(t["title"] == "overall (dialogue level, Chinese): Paired bootstrap test of predictive power"
               for t in tables)


# ------------------------------------------------------------------ the offline command

def test_offline_score_takes_the_dimensions_from_the_gold(tmp_path):
    (tmp_path / "gold.json").write_text(json.dumps(HAND_GOLD))
    (tmp_path / "run.json").write_text(json.dumps(HAND_RUN))
    done = subprocess.run([sys.executable, "manage.py", "score", "--kind", "metric", "--preset", "metric-quick",
                           str(tmp_path / "run.json"), str(tmp_path / "gold.json"), "--format", "json"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    measures = json.loads(done.stdout)["measures"]
    assert measures["engaging.spearman"] == pytest.approx(-2 / math.sqrt(297.5), abs=1e-14)
    assert measures["overall.predictive_power"] == 0.6 and "predictive_power" not in measures
