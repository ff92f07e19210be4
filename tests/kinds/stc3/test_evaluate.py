"""evaluate(): agreement with the 2018 script and with plain loops, alpha weighting, macro/micro."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from devtools import reference
from fixtures.synthetic import generate_gold, generate_run
from scoring.kinds.stc3.config import STC3
from scoring.kinds.stc3.evaluate import evaluate, weighted_block_average
from scoring.kinds.stc3.formats import load_gold, load_run
from scoring.kinds.stc3.measures import MEASURES
from tests.kinds.stc3.test_formats import to_counts


@pytest.fixture(autouse=True)
def _isolated_settings() -> None:
    """Replaces tests/conftest.py's Django settings fixture: the scoring core needs no Django,
    so these tests also run with ``-p no:django``."""


@pytest.fixture(scope="module")
def stc3_like():
    """A gold shaped like STC-3 (19 annotators, 2-7 turns, many empty bins) and runs of all kinds."""
    gold_data = generate_gold(80, seed=101)
    runs = {
        "noisy-0.2": generate_run(gold_data, "noisy", noise=0.2, seed=1),
        "noisy-0.8": generate_run(gold_data, "noisy", noise=0.8, seed=2),
        "uniform": generate_run(gold_data, "uniform"),
        "popularity": generate_run(gold_data, "popularity"),  # estimates with empty bins
        "counts": to_counts(generate_run(gold_data, "noisy", noise=0.5, seed=3)),
        "gold-itself": generate_run(gold_data, "noisy", noise=0.0),
    }
    return gold_data, load_gold(gold_data, STC3), runs


RUN_KINDS = ["noisy-0.2", "noisy-0.8", "uniform", "popularity", "counts", "gold-itself"]


@pytest.mark.parametrize(("kind", "alpha"), [(kind, 0.5) for kind in RUN_KINDS] + [("noisy-0.8", 0.3)])
def test_stc3_2018_variant_reproduces_the_2018_script(stc3_like, kind, alpha):
    gold_data, gold, runs = stc3_like
    config = STC3.with_options(variant="stc3-2018", alpha=alpha)
    result = evaluate(load_run(runs[kind], gold), gold, config)
    script = reference.stc3_2018_script(runs[kind], gold_data, alpha=alpha)
    for dim in STC3.quality_dimensions:
        for name in ("rsnod", "nmd"):
            assert result.quality_means[dim][name] == pytest.approx(script["quality"][dim][name], abs=1e-9)
    for name in ("jsd", "rnss"):
        assert result.nugget_means[name] == pytest.approx(script["nugget"][name], abs=1e-9)


def test_paper_variant_differs_from_the_2018_script_only_in_rsnod(stc3_like):
    gold_data, gold, runs = stc3_like
    result = evaluate(load_run(runs["noisy-0.2"], gold), gold, STC3)
    script = reference.stc3_2018_script(runs["noisy-0.2"], gold_data)
    for dim in STC3.quality_dimensions:
        assert result.quality_means[dim]["nmd"] == pytest.approx(script["quality"][dim]["nmd"], abs=1e-9)
        # 19 annotators leave bins empty in most golds, so the paper's RSNOD is not the script's.
        assert abs(result.quality_means[dim]["rsnod"] - script["quality"][dim]["rsnod"]) > 1e-3
    assert result.nugget_means["jsd"] == pytest.approx(script["nugget"]["jsd"], abs=1e-9)


def test_one_sided_dialogues_are_a_documented_difference_from_the_2018_script():
    # The 2018 script takes mean(customer) * alpha + mean(helpdesk) * (1 - alpha) for every
    # dialogue, so a dialogue without helpdesk turns gives NaN and makes the run's ND score NaN.
    # TASK-SPEC.md asks for that side's mean instead (docs/scoring.md, "Variants"), in both
    # variants. Real STC-3 dialogues (2-7 alternating turns) always have both sides, where the
    # two agree.
    gold_data = generate_gold(40, seed=303, min_turns=1, max_turns=3, annotators=19)
    one_sided = [dialogue["id"] for dialogue in gold_data if len(dialogue["turns"]) == 1]
    assert one_sided, "the seed must give customer-only dialogues"
    run = generate_run(gold_data, "noisy", noise=0.5, seed=304, subtasks=("nugget",))
    gold = load_gold(gold_data, STC3)
    config = STC3.with_options(variant="stc3-2018")
    result = evaluate(load_run(run, gold), gold, config)
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        script = reference.stc3_2018_script(run, gold_data)
    assert math.isnan(script["nugget"]["jsd"])
    assert np.isfinite(result.nugget_means["jsd"])
    expected = reference.evaluate_reference(run, gold_data, config)
    assert result.nugget_means["jsd"] == pytest.approx(expected["nugget"]["jsd"], abs=1e-12)
    # Without the one-sided dialogues, the numbers are the script's.
    both_sides = [entry for entry in run if entry["id"] not in one_sided]
    kept_gold = [dialogue for dialogue in gold_data if dialogue["id"] not in one_sided]
    partial = evaluate(load_run(both_sides, gold, allow_missing=True), gold, config)
    script = reference.stc3_2018_script(both_sides, kept_gold)
    for name in ("jsd", "rnss"):
        assert partial.nugget_means[name] == pytest.approx(script["nugget"][name], abs=1e-9)


EVERY_QUALITY_MEASURE = tuple(MEASURES)
EVERY_NUGGET_MEASURE = tuple(name for name, measure in MEASURES.items() if measure.bins == "nominal")


@pytest.mark.parametrize(("variant", "averaging", "alpha"), [
    ("paper", "macro", 0.5), ("paper", "micro", 0.5), ("paper", "macro", 0.2),
    ("stc3-2018", "macro", 0.5), ("stc3-2018", "micro", 0.8), ("paper", "micro", 1.0),
])
def test_evaluate_agrees_with_plain_loops_for_every_measure(variant, averaging, alpha):
    # 1-5 turns: dialogues with a single (customer) turn exercise the one-sided rule.
    gold_data = generate_gold(80, seed=202, min_turns=1, max_turns=5, annotators=7)
    gold = load_gold(gold_data, STC3)
    config = STC3.with_options(variant=variant, averaging=averaging, alpha=alpha,
                               quality_measures=EVERY_QUALITY_MEASURE, nugget_measures=EVERY_NUGGET_MEASURE)
    for run in (generate_run(gold_data, "noisy", noise=0.6, seed=7), generate_run(gold_data, "popularity")):
        result = evaluate(load_run(run, gold), gold, config)
        expected = reference.evaluate_reference(run, gold_data, config)
        assert sorted(result.nugget_means) == sorted(EVERY_NUGGET_MEASURE)
        for name in EVERY_NUGGET_MEASURE:
            assert result.nugget_means[name] == pytest.approx(expected["nugget"][name], abs=1e-12), name
            per_dialogue = expected["per_dialogue"]["nugget"][name]
            assert np.allclose(result.nugget[name], [per_dialogue[i] for i in result.dialogue_ids], rtol=0, atol=1e-12)
        for dim in STC3.quality_dimensions:
            assert sorted(result.quality_means[dim]) == sorted(EVERY_QUALITY_MEASURE)
            for name in EVERY_QUALITY_MEASURE:
                assert result.quality_means[dim][name] == pytest.approx(expected["quality"][dim][name], abs=1e-12)
                per_dialogue = expected["per_dialogue"]["quality"][dim][name]
                assert np.allclose(result.quality[dim][name], [per_dialogue[i] for i in result.dialogue_ids],
                                   rtol=0, atol=1e-12)


def test_default_measures_and_order():
    gold_data = generate_gold(5, seed=3)
    gold = load_gold(gold_data, STC3)
    result = evaluate(load_run(generate_run(gold_data, seed=4), gold), gold)
    # Official measures first: RSNOD and NMD for DQ, JSD and RNSS for ND.
    assert list(result.quality_means["A"]) == ["rsnod", "nmd", "snod", "jsd", "rnss", "nvd"]
    assert list(result.nugget_means) == ["jsd", "rnss", "nvd"]
    assert list(result.quality_means) == ["A", "S", "E"]


def test_a_run_equal_to_the_gold_scores_zero(stc3_like):
    _, gold, runs = stc3_like
    for variant in ("paper", "stc3-2018"):
        result = evaluate(load_run(runs["gold-itself"], gold), gold, STC3.with_options(variant=variant))
        for means in [*result.quality_means.values(), result.nugget_means]:
            assert all(value == pytest.approx(0.0, abs=1e-7) for value in means.values()), means


def test_the_variant_changes_only_snod_and_rsnod(stc3_like):
    _, gold, runs = stc3_like
    run = load_run(runs["noisy-0.8"], gold)
    paper, stc3_2018 = evaluate(run, gold, STC3), evaluate(run, gold, STC3.with_options(variant="stc3-2018"))
    assert paper.nugget_means == stc3_2018.nugget_means
    for dim in STC3.quality_dimensions:
        for name in ("nmd", "jsd", "rnss", "nvd"):
            assert paper.quality_means[dim][name] == stc3_2018.quality_means[dim][name]
        for name in ("snod", "rsnod"):
            assert paper.quality_means[dim][name] != stc3_2018.quality_means[dim][name]


# Alpha weighting and averaging on hand-built data -------------------------------------------
# Every annotator gives a turn the same label, so the gold is one-hot. Estimates used:
#   customer, wrong type  {"CNUG": 1} vs CNUG0:  NVD 1, RNSS 1, JSD 1
#   customer, exact       {"CNUG0": 1} vs CNUG0: 0 everywhere
#   helpdesk, half right  {"HNUG": .5, "HNUG*": .5} vs HNUG: NVD 0.5, RNSS sqrt((.25 + .25) / 2) = 0.5,
#                         JSD: m = (3/4, 1/4, 0), (KL(p || m) + KL(p* || m)) / 2 = HALF_RIGHT_JSD
#   helpdesk, exact       {"HNUG": 1} vs HNUG: 0 everywhere

HALF_RIGHT_JSD = (0.5 * math.log2(0.5 / 0.75) + 0.5 * math.log2(0.5 / 0.25) + 1 * math.log2(1 / 0.75)) / 2
TURNS = {
    "customer-wrong": ("customer", "CNUG0", {"CNUG": 1}),
    "customer-exact": ("customer", "CNUG0", {"CNUG0": 1}),
    "helpdesk-half": ("helpdesk", "HNUG", {"HNUG": 0.5, "HNUG*": 0.5}),
    "helpdesk-exact": ("helpdesk", "HNUG", {"HNUG": 1}),
}
SCORES = {  # (NVD, RNSS, JSD) of each kind of turn, by hand
    "customer-wrong": (1.0, 1.0, 1.0),
    "customer-exact": (0.0, 0.0, 0.0),
    "helpdesk-half": (0.5, 0.5, HALF_RIGHT_JSD),
    "helpdesk-exact": (0.0, 0.0, 0.0),
}


def hand_built(dialogues: dict[str, list[str]], annotators: int = 3):
    """A nugget-only gold and a run from ``{dialogue id: [turn kind, ...]}``; loaded gold and run."""
    gold_data, run = [], []
    for dialogue_id, kinds in dialogues.items():
        turns = [TURNS[kind] for kind in kinds]
        gold_data.append({
            "id": dialogue_id,
            "turns": [{"sender": sender, "utterances": ["..."]} for sender, _, _ in turns],
            "annotations": [{"nugget": [label for _, label, _ in turns]} for _ in range(annotators)],
        })
        run.append({"id": dialogue_id, "nugget": [copy.deepcopy(estimate) for _, _, estimate in turns]})
    gold = load_gold(gold_data, STC3)
    return gold, load_run(run, gold)


@pytest.mark.parametrize(("alpha", "expected_nvd", "expected_jsd"), [
    (0.0, 0.5, HALF_RIGHT_JSD),  # only the helpdesk turn counts
    (1.0, 1.0, 1.0),  # only the customer turn counts
    (0.3, 0.3 * 1.0 + 0.7 * 0.5, 0.3 * 1.0 + 0.7 * HALF_RIGHT_JSD),
    (0.5, 0.75, (1.0 + HALF_RIGHT_JSD) / 2),
])
def test_alpha_weighs_the_customer_block_against_the_helpdesk_block(alpha, expected_nvd, expected_jsd):
    gold, run = hand_built({"d": ["customer-wrong", "helpdesk-half"]})
    for averaging in ("macro", "micro"):  # one dialogue: both averagings agree
        result = evaluate(run, gold, STC3.with_options(alpha=alpha, averaging=averaging))
        assert result.nugget_means["nvd"] == pytest.approx(expected_nvd, abs=1e-12)
        assert result.nugget_means["rnss"] == pytest.approx(expected_nvd, abs=1e-12)  # same per-side values
        assert result.nugget_means["jsd"] == pytest.approx(expected_jsd, abs=1e-12)
        assert result.nugget["nvd"].tolist() == pytest.approx([expected_nvd], abs=1e-12)


def test_block_means_are_means_over_each_sides_turns():
    # Customer turns 1, 0, 0 (mean 1/3); helpdesk turns 0.5, 0 (mean 1/4).
    gold, run = hand_built({"d": ["customer-wrong", "helpdesk-half", "customer-exact", "helpdesk-exact",
                                  "customer-exact"]})
    result = evaluate(run, gold, STC3.with_options(alpha=0.6))
    assert result.nugget_means["nvd"] == pytest.approx(0.6 / 3 + 0.4 / 4, abs=1e-12)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
def test_dialogues_with_turns_of_one_side_only_use_that_sides_mean(alpha):
    gold, run = hand_built({
        "customer-only": ["customer-wrong", "customer-exact"],  # NVD (1 + 0) / 2, whatever alpha
        "helpdesk-only": ["helpdesk-half"],  # NVD 0.5, whatever alpha
        "both": ["customer-wrong", "helpdesk-half"],  # alpha * 1 + (1 - alpha) * 0.5
    })
    result = evaluate(run, gold, STC3.with_options(alpha=alpha))
    both = alpha + (1 - alpha) * 0.5
    assert result.dialogue_ids == ["customer-only", "helpdesk-only", "both"]
    assert result.nugget["nvd"].tolist() == pytest.approx([0.5, 0.5, both], abs=1e-12)
    assert result.nugget["jsd"].tolist() == pytest.approx([0.5, HALF_RIGHT_JSD, alpha + (1 - alpha) * HALF_RIGHT_JSD],
                                                          abs=1e-12)
    assert result.nugget_means["nvd"] == pytest.approx((0.5 + 0.5 + both) / 3, abs=1e-12)


UNBALANCED = {
    "short": ["customer-wrong", "helpdesk-exact"],  # customer 1; helpdesk 0
    "long": ["customer-exact", "helpdesk-half", "customer-exact", "helpdesk-half", "customer-exact"],
}


@pytest.mark.parametrize(("alpha", "macro", "micro"), [
    # macro: mean over dialogues of alpha * customer mean + (1 - alpha) * helpdesk mean:
    #   short = alpha * 1 + (1 - alpha) * 0, long = alpha * 0 + (1 - alpha) * 0.5.
    # micro (scoring/kinds/stc3/config.py): pool each side's turns over the run, then weigh by alpha:
    #   customer turns 1, 0, 0, 0 (mean 1/4); helpdesk turns 0, 0.5, 0.5 (mean 1/3).
    (0.5, (0.5 + 0.25) / 2, 0.5 / 4 + 0.5 / 3),
    (0.2, (0.2 + 0.4) / 2, 0.2 / 4 + 0.8 / 3),
    (1.0, (1.0 + 0.0) / 2, 1 / 4),
])
def test_micro_and_macro_differ_on_unbalanced_dialogues(alpha, macro, micro):
    gold, run = hand_built(UNBALANCED)
    macro_result = evaluate(run, gold, STC3.with_options(alpha=alpha, averaging="macro"))
    micro_result = evaluate(run, gold, STC3.with_options(alpha=alpha, averaging="micro"))
    assert macro_result.nugget_means["nvd"] == pytest.approx(macro, abs=1e-12)
    assert micro_result.nugget_means["nvd"] == pytest.approx(micro, abs=1e-12)
    assert macro_result.nugget_means["nvd"] != pytest.approx(micro_result.nugget_means["nvd"])
    # The per-dialogue scores are eq. 12 in both cases; only the run's mean differs.
    assert np.array_equal(macro_result.nugget["nvd"], micro_result.nugget["nvd"])
    assert micro_result.averaging == "micro" and micro_result.summary()["averaging"] == "micro"


def test_micro_pools_turns_of_one_sided_dialogues_into_their_side():
    gold, run = hand_built({**UNBALANCED, "alone": ["customer-wrong"]})
    result = evaluate(run, gold, STC3.with_options(averaging="micro"))
    # Customer turns 1, 0, 0, 0, 1 (mean 2/5); helpdesk turns 0, 0.5, 0.5 (mean 1/3).
    assert result.nugget_means["nvd"] == pytest.approx(0.5 * 2 / 5 + 0.5 / 3, abs=1e-12)


def test_micro_with_customer_turns_only_is_the_customer_mean():
    gold, run = hand_built({"a": ["customer-wrong"], "b": ["customer-exact", "customer-exact", "customer-exact"]})
    micro = evaluate(run, gold, STC3.with_options(averaging="micro", alpha=0.3))
    macro = evaluate(run, gold, STC3.with_options(averaging="macro", alpha=0.3))
    assert micro.nugget_means["nvd"] == pytest.approx(1 / 4, abs=1e-12)
    assert macro.nugget_means["nvd"] == pytest.approx(1 / 2, abs=1e-12)


def test_weighted_block_average_directly():
    scores = weighted_block_average(
        customer_scores=np.array([1.0, 0.0, 0.2]), customer_dialogue=np.array([0, 0, 2]),
        helpdesk_scores=np.array([0.4, 0.8]), helpdesk_dialogue=np.array([0, 1]), n_dialogues=3, alpha=0.25)
    # d0: 0.25 * 0.5 + 0.75 * 0.4; d1 helpdesk only: 0.8; d2 customer only: 0.2.
    assert scores.tolist() == pytest.approx([0.425, 0.8, 0.2], abs=1e-15)


def test_alpha_does_not_change_quality_scores(stc3_like):
    _, gold, runs = stc3_like
    run = load_run(runs["noisy-0.2"], gold)
    low, high = evaluate(run, gold, STC3.with_options(alpha=0.1)), evaluate(run, gold, STC3.with_options(alpha=0.9))
    assert low.quality_means == high.quality_means
    assert low.nugget_means != high.nugget_means


def test_result_dictionaries(stc3_like):
    _, gold, runs = stc3_like
    result = evaluate(load_run(runs["noisy-0.2"][:60], gold, allow_missing=True), gold)
    summary = result.summary()
    assert list(summary) == ["quality", "nugget", "n_dialogues", "variant", "alpha", "averaging", "n_missing"]
    assert (summary["n_dialogues"], summary["n_missing"]) == (60, 20)
    assert (summary["variant"], summary["alpha"], summary["averaging"]) == ("paper", 0.5, "macro")
    detail = result.to_dict(per_dialogue=True)["per_dialogue"]
    ids = [entry["id"] for entry in runs["noisy-0.2"][:60]]
    assert sorted(detail["quality"]["S"]["nmd"]) == sorted(ids)
    assert sorted(detail["nugget"]["jsd"]) == sorted(ids)
    for dialogue_id, value in detail["nugget"]["rnss"].items():
        assert value == result.nugget["rnss"][result.dialogue_ids.index(dialogue_id)]
    assert np.mean(list(detail["quality"]["E"]["rsnod"].values())) == pytest.approx(
        summary["quality"]["E"]["rsnod"], abs=1e-15)
    assert "per_dialogue" not in result.to_dict()


def test_a_run_validated_against_another_gold_is_refused(stc3_like):
    gold_data, gold, runs = stc3_like
    other_gold = load_gold(gold_data[:50], STC3)
    with pytest.raises(ValueError, match="different gold"):
        evaluate(load_run(runs["uniform"][:50], other_gold), gold)


def test_same_input_gives_the_same_scores(stc3_like):
    _, gold, runs = stc3_like
    first = evaluate(load_run(runs["counts"], gold), gold).to_dict(per_dialogue=True)
    again = evaluate(load_run(copy.deepcopy(runs["counts"]), gold), gold).to_dict(per_dialogue=True)
    assert first == again
