"""The task-kind interface: the DQ/ND kind through it gives exactly the numbers of ``evaluate``,
and a toy kind of a few lines plugs in through the same interface."""

from __future__ import annotations

import numpy as np
import pytest

from fixtures.synthetic import generate_gold, generate_run
from scoring.kinds import KINDS, Scored, ValidationFailed, get_kind, measure_key, register
from scoring.kinds.stc3 import STC3, evaluate, load_gold, load_run
from scoring.kinds.stc3.formats import restrict
from scoring.kinds.stc3.measures import MEASURES
from tests.toy_kind import ToyKind


@pytest.fixture(scope="module")
def stc3_files() -> tuple[list, list]:
    gold = generate_gold(40, seed=11)
    return gold, generate_run(gold, "noisy", noise=0.4, seed=3)


@pytest.mark.parametrize("averaging", ["macro", "micro"])
def test_stc3_kind_is_bit_identical_to_evaluate(stc3_files: tuple[list, list], averaging: str) -> None:
    gold_data, run_data = stc3_files
    kind = get_kind("stc3")
    config = kind.config({**kind.presets["stc3"], "averaging": averaging})
    gold = kind.compile_gold(gold_data, config)
    run = kind.parse_run(run_data, gold, config)
    scored = kind.score(run, gold, config)
    reference = evaluate(load_run(run_data, load_gold(gold_data, config)), load_gold(gold_data, config), config)
    assert scored.item_ids == reference.dialogue_ids
    for dim, measures in reference.quality.items():
        for name, values in measures.items():
            key = f"quality.{dim}.{name}"
            assert scored.per_item[key].tobytes() == values.tobytes()
            assert scored.headlines[key] == reference.quality_means[dim][name]
    for name, values in reference.nugget.items():
        assert scored.per_item[f"nugget.{name}"].tobytes() == values.tobytes()
        assert scored.headlines[f"nugget.{name}"] == reference.nugget_means[name]
    assert set(scored.per_item) == {spec.key for spec in kind.measures(config, gold)}
    assert scored.settings == {"variant": "paper", "alpha": 0.5, "averaging": averaging}


def test_stc3_kind_scores_a_subset_as_the_live_board_did(stc3_files: tuple[list, list]) -> None:
    gold_data, run_data = stc3_files
    kind = get_kind("stc3")
    config = kind.preset("stc3")
    gold = kind.compile_gold(gold_data, config)
    run = kind.parse_run(run_data, gold, config)
    items = np.array([1, 4, 5, 17, 30, 39])
    scored = kind.score(run, gold, config, items=items)
    reference = evaluate(*restrict(run, gold, items), config)
    assert scored.item_ids == [gold.dialogue_ids[i] for i in items]
    assert scored.headlines["quality.A.rsnod"] == reference.quality_means["A"]["rsnod"]
    assert scored.per_item["nugget.jsd"].tobytes() == reference.nugget["jsd"].tobytes()


def test_micro_averaging_statistics_give_the_micro_figure_of_any_subset(stc3_files: tuple[list, list]) -> None:
    """The sufficient statistics of micro-averaged ND reproduce the pooled-turn figure of the whole
    run and of a subset (computed independently here from the turn-level scores)."""
    gold_data, run_data = stc3_files
    kind = get_kind("stc3")
    config = kind.config({**kind.presets["stc3"], "averaging": "micro", "alpha": 0.3})
    gold = kind.compile_gold(gold_data, config)
    run = kind.parse_run(run_data, gold, config)
    scored = kind.score(run, gold, config)
    specs = {spec.key: spec for spec in kind.measures(config, gold)}
    spec = specs["nugget.rnss"]
    assert spec.headline == "corpus"
    whole = spec.aggregate(scored.per_item[spec.key], scored.statistics[spec.key])
    assert whole == pytest.approx(scored.headlines[spec.key], abs=1e-14)
    subset = np.array([0, 2, 3, 8, 21])
    # Independent: pool the turns of the subset's dialogues side by side.
    estimate_c = run.customer / run.customer.sum(axis=1, keepdims=True)
    truth_c = gold.customer_counts / gold.customer_counts.sum(axis=1, keepdims=True)
    estimate_h = run.helpdesk / run.helpdesk.sum(axis=1, keepdims=True)
    truth_h = gold.helpdesk_counts / gold.helpdesk_counts.sum(axis=1, keepdims=True)
    rnss_c = np.sqrt(((estimate_c - truth_c) ** 2).sum(axis=1) / 2)
    rnss_h = np.sqrt(((estimate_h - truth_h) ** 2).sum(axis=1) / 2)
    in_c = np.isin(gold.customer_dialogue, subset)
    in_h = np.isin(gold.helpdesk_dialogue, subset)
    expected = 0.3 * rnss_c[in_c].mean() + 0.7 * rnss_h[in_h].mean()
    assert spec.aggregate(scored.per_item[spec.key][subset], scored.statistics[spec.key][subset]) == \
        pytest.approx(expected, abs=1e-12)


def test_stc3_measures_are_classified() -> None:
    """Every registered DQ/ND measure appears with its registry facts; official ones are those of
    the STC-3 and DialEval overviews; keys are unique."""
    kind = get_kind("stc3")
    specs = kind.measures(STC3)
    keys = [spec.key for spec in specs]
    assert len(keys) == len(set(keys)) == 3 * 6 + 3
    for spec in specs:
        assert spec.higher_is_better is (not MEASURES[spec.name].lower_is_better) is False
        assert spec.value_range == (0.0, 1.0)
    official = sorted(spec.key for spec in specs if spec.official)
    assert official == sorted([f"quality.{dim}.{name}" for dim in "ASE" for name in ("rsnod", "nmd")]
                              + ["nugget.jsd", "nugget.rnss"])
    assert {spec.group for spec in specs} == {"quality", "nugget"}


def test_unknown_kind_and_key_errors_name_what_exists() -> None:
    with pytest.raises(ValueError, match="known kinds: .*stc3"):
        get_kind("nonsense")
    with pytest.raises(ValueError, match="not a valid measure key"):
        measure_key("quality", "A b")
    with pytest.raises(ValueError, match="unknown preset"):
        get_kind("stc3").preset("nope")


def test_scored_refuses_non_finite_numbers() -> None:
    scored = Scored(item_ids=["a", "b"], per_item={"m": np.array([0.5, np.nan])}, headlines={"m": 0.5})
    with pytest.raises(ValueError, match="not finite.*m"):
        scored.check_finite()


def test_a_toy_kind_plugs_in() -> None:
    kind = register(ToyKind())
    try:
        assert get_kind("toy") is kind
        config = kind.preset("toy")
        gold = kind.gold_from_bytes(kind.compile_gold([{"id": 1, "value": 2.0}, {"id": "b", "value": 4.0}],
                                                      config).to_bytes())
        run = kind.parse_run([{"id": "1", "guess": 3.0}, {"id": "b", "guess": 3.0}], gold, config)
        scored = kind.score(run, gold, config)
        assert scored.headlines == {"error": 1.0, "ratio": 1.0}
        ratio = kind.measures(config)[1]
        assert ratio.aggregate(scored.per_item["ratio"][[1]], scored.statistics["ratio"][[1]]) == 0.75
        assert ratio.better(0.9, 0.8) and not kind.measures(config)[0].better(0.9, 0.8)
        with pytest.raises(ValidationFailed, match="missing id 'b'"):
            kind.parse_run([{"id": "1", "guess": 3.0}], gold, config)
    finally:
        KINDS.pop("toy", None)


def test_stc3_participant_data_keeps_dialogues_and_drops_every_annotation(stc3_files: tuple[list, list]) -> None:
    gold_data, _ = stc3_files
    kind = get_kind("stc3")
    leaked = [dict(gold_data[0], secret="do not publish")] + gold_data[1:]
    data = kind.participant_data(leaked, STC3)
    assert [entry["id"] for entry in data] == [entry["id"] for entry in gold_data]
    assert all(set(entry) == {"id", "turns"} for entry in data)
    assert data[3]["turns"] == [{"sender": t["sender"], "utterances": t["utterances"]} for t in gold_data[3]["turns"]]
    description = kind.format_description(STC3)
    assert set(description["example"]["quality"]) == {"A", "S", "E"}
    assert "CNUG*" in description["example"]["nugget"][0] and "HNaN" in description["example"]["nugget"][1]


def test_measure_specs_survive_the_board_cache_even_with_a_corpus_closure() -> None:
    import pickle

    micro = STC3.with_options(averaging="micro")
    specs = get_kind("stc3").measures(micro)
    nugget = next(spec for spec in specs if spec.key == "nugget.jsd")
    assert nugget.headline == "corpus" and nugget.corpus is not None
    back = pickle.loads(pickle.dumps(specs))  # noqa: S301 - our own bytes, as the cache does
    assert [spec.key for spec in back] == [spec.key for spec in specs]
    assert back[-1].title == specs[-1].title and back[-1].corpus is None


@pytest.mark.parametrize("averaging", ["macro", "micro"])
def test_a_live_subset_taken_from_the_whole_sets_scores_equals_scoring_the_subset(
        stc3_files: tuple[list, list], averaging: str) -> None:
    """The scoring job takes a live subset's figures from the whole set's per-item scores and
    sufficient statistics (tasks.jobs.subset_scores): bit for bit what scoring the subset gives."""
    from tasks.jobs import subset_scores

    gold_data, run_data = stc3_files
    kind, config = get_kind("stc3"), STC3.with_options(averaging=averaging)
    gold = load_gold(gold_data, config)
    run = load_run(run_data, gold)
    subset = np.sort(np.random.default_rng(3).choice(len(gold_data), size=17, replace=False))
    taken = subset_scores(kind.measures(config), kind.score(run, gold, config), subset)
    scored = kind.score(run, gold, config, items=subset)
    if averaging == "micro":
        # evaluate() pools the turns, which rounds otherwise than summed per-dialogue statistics:
        # the job scores the subset instead of taking it (a last-bit difference, but a difference).
        assert taken is None
        return
    assert taken is not None and taken.summary() == scored.summary()
    assert all(np.array_equal(taken.per_item[key], scored.per_item[key]) for key in scored.per_item)


def test_a_response_live_subset_taken_from_the_whole_sets_scores_equals_scoring_the_subset() -> None:
    from fixtures import response_demo
    from tasks.jobs import subset_scores

    kind = get_kind("response")
    config = kind.preset("bleu-only")
    gold_data = response_demo.generate_gold(30, seed=2)
    gold = kind.gold_from_bytes(kind.compile_gold(gold_data, config).to_bytes())
    run = kind.parse_run(response_demo.generate_runs(gold_data, seed=4)["medium"], gold, config)
    subset = np.array([0, 3, 4, 9, 17, 28])
    taken = subset_scores(kind.measures(config, gold), kind.score(run, gold, config), subset)
    scored = kind.score(run, gold, config, items=subset)
    assert taken is not None and taken.summary()["measures"] == scored.summary()["measures"]
    assert set(scored.summary()["measures"]) == {"bleu", "delta_bleu"}


def test_a_response_live_subsets_nugget_details_are_those_of_scoring_the_subset() -> None:
    from fixtures import response_demo

    kind = get_kind("response")
    config = kind.preset("response")
    gold_data = response_demo.generate_gold(14, seed=2)
    gold = kind.gold_from_bytes(kind.compile_gold(gold_data, config).to_bytes())
    run = kind.parse_run(response_demo.generate_runs(gold_data, seed=4)["strong"], gold, config)
    subset = np.array([1, 2, 6, 11])
    whole = kind.score(run, gold, config)
    scored = kind.score(run, gold, config, items=subset)
    taken = kind.subset_details(whole.details, scored.item_ids)
    assert scored.details["acts"] and taken == scored.details
    assert taken["acts"] != whole.details["acts"]
