"""Judgements to gold: the STC-3 round trip (a gold rebuilt from the real annotations, turned into
judgements, scores every run exactly as the original), reference weights (mean - 3) / 2 with the
positive-reference rule, and metrics-track human scores (raw means and per-assessor z-scores,
computed here by hand), with their provenance."""

from __future__ import annotations

import random

import numpy as np
import pytest

from scoring.judgements.formats import Dimension, load_items, load_judgements
from scoring.judgements.gold import metric_gold, provenance, reference_gold, stc3_gold
from scoring.kinds.metric.formats import load_metric_gold
from scoring.kinds.response.formats import load_response_gold
from scoring.kinds.stc3.baselines import popularity_run, uniform_run
from scoring.kinds.stc3.config import STC3
from scoring.kinds.stc3.evaluate import evaluate
from scoring.kinds.stc3.formats import load_gold, load_run
from scoring.validation import ValidationFailed
from tests.judgements.test_alpha import real_stc3


def as_judgements(dialogues: list[dict]) -> list[dict]:
    """Each annotation of each dialogue as one judgement; the annotators' ids are shuffled per
    dialogue so that the rebuilt order (by assessor id) differs from the file's."""
    rng = random.Random(11)
    out = []
    for dialogue in dialogues:
        names = [f"assessor-{n:02d}" for n in range(len(dialogue["annotations"]))]
        rng.shuffle(names)
        for name, annotation in zip(names, dialogue["annotations"], strict=True):
            out.append({"item": dialogue["id"], "assessor": name, **annotation})
    rng.shuffle(out)
    return out


def random_run(dialogues: list[dict], seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    run = []
    for dialogue in dialogues:
        quality = {dim: dict(zip(["2", "1", "0", "-1", "-2"], rng.dirichlet(np.ones(5)).tolist(), strict=True))
                   for dim in "ASE"}
        nugget = []
        for turn in dialogue["turns"]:
            labels = STC3.customer_nugget_types if turn["sender"] == "customer" else STC3.helpdesk_nugget_types
            nugget.append(dict(zip(labels, rng.dirichlet(np.ones(len(labels))).tolist(), strict=True)))
        run.append({"id": dialogue["id"], "quality": quality, "nugget": nugget})
    return run


def test_stc3_gold_from_the_real_annotations_scores_every_run_exactly_as_the_original() -> None:
    dialogues = real_stc3()[:400]
    items = load_items([{"id": d["id"], "turns": d["turns"]} for d in dialogues], "stc3")
    judgements = load_judgements(as_judgements(dialogues), "stc3", items)
    rebuilt = stc3_gold(judgements, [{"id": d["id"], "turns": d["turns"]} for d in dialogues])
    assert [d["id"] for d in rebuilt] == [d["id"] for d in dialogues]
    assert all(len(d["annotations"]) == 19 for d in rebuilt)
    original, built = load_gold(dialogues, STC3), load_gold(rebuilt, STC3)
    runs = [uniform_run(original), popularity_run(original), random_run(dialogues, 1), random_run(dialogues, 2)]
    for run in runs:
        expected = evaluate(load_run(run, original), original).to_dict()
        got = evaluate(load_run(run, built), built).to_dict()
        assert got == expected  # exactly: the distributions are the same counts
    assert np.array_equal(original.quality_counts["A"], built.quality_counts["A"])
    assert np.array_equal(original.customer_counts, built.customer_counts)


def test_stc3_gold_orders_annotations_by_assessor_and_keeps_only_judged_dialogues() -> None:
    dialogues = [{"id": "d1", "turns": [{"sender": "customer", "utterances": ["hi"]}, {"sender": "helpdesk"}]},
                 {"id": "d2", "turns": [{"sender": "customer"}]}]
    judgements = load_judgements([
        {"item": "d1", "assessor": "b", "quality": {"A": 1, "E": 0, "S": "-1"}, "nugget": ["CNUG0", "HNUG"]},
        {"item": "d1", "assessor": "a", "quality": {"A": 2, "E": 2, "S": 2}, "nugget": ["CNaN", "HNaN"]},
    ], "stc3", load_items(dialogues, "stc3"))
    gold = stc3_gold(judgements, dialogues)
    assert gold == [{"id": "d1", "turns": dialogues[0]["turns"], "annotations": [
        {"quality": {"A": 2, "E": 2, "S": 2}, "nugget": ["CNaN", "HNaN"]},
        {"quality": {"A": 1, "E": 0, "S": -1}, "nugget": ["CNUG0", "HNUG"]}]}]
    facts = provenance(judgements, campaign="round 2", required_per_item=2)
    assert facts["complete"] is False and facts["items_without_judgements"] == ["d2"]
    assert facts["assessors"] == ["a", "b"] and facts["judgements_per_item"] == {"d1": 2}
    assert set(facts["alpha"]) == {"A", "E", "S", "nugget"} and facts["campaign"] == "round 2"
    # One dialogue with A = (2, 1): o_12 = o_21 = 1, n_1 = n_2 = 1, n = 2, so alpha = 1 - 1 * 2d / 2d = 0.
    assert facts["alpha"]["A"]["alpha"] == 0.0


RESPONSE_GOLD = [
    {"id": "c1", "context": [{"sender": "user", "text": "Where is the station?"}],
     "references": [{"text": "Turn left at the bank."}, {"text": "No idea.", "weight": 0.5}]},
    {"id": "c#2", "references": [{"text": "It is sunny."}, {"text": "Bring an umbrella.", "weight": 1}]},
]


def test_reference_weights_are_the_mean_rating_mapped_to_minus_one_one() -> None:
    items = load_items(RESPONSE_GOLD, "response")
    assert items.ids == ["c1#0", "c1#1", "c#2#0", "c#2#1"]
    judgements = load_judgements([
        {"item": "c1#0", "assessor": "x", "values": {"rating": 5}},
        {"item": "c1#0", "assessor": "y", "values": {"rating": 4}},
        {"item": "c1#1", "assessor": "x", "values": {"rating": "1"}},
        {"item": "c#2#1", "assessor": "y", "values": {"rating": 2}},
    ], "response", items)
    gold = reference_gold(judgements, RESPONSE_GOLD)
    assert [r.get("weight") for r in gold[0]["references"]] == [0.75, -1.0]  # (4.5 - 3) / 2, (1 - 3) / 2
    assert [r.get("weight") for r in gold[1]["references"]] == [None, -0.5]  # unrated keeps its (default) weight
    assert RESPONSE_GOLD[0]["references"][0] == {"text": "Turn left at the bank."}  # the input is not changed
    assert load_response_gold(gold).references[0] == [("Turn left at the bank.", 0.75), ("No idea.", -1.0)]


def test_an_item_left_without_a_positive_reference_is_refused_with_its_id() -> None:
    items = load_items(RESPONSE_GOLD, "response")
    judgements = load_judgements([
        {"item": "c#2#0", "assessor": "x", "values": {"rating": 3}},
        {"item": "c#2#1", "assessor": "x", "values": {"rating": 1}},
    ], "response", items)
    with pytest.raises(ValidationFailed) as caught:
        reference_gold(judgements, RESPONSE_GOLD)
    assert caught.value.errors == ['[1] item "c#2": no original reference keeps a positive weight after the ratings '
                                   '(weights 0, -1); deltaBLEU needs one: rate again or add a reference']


METRIC_ITEMS = [{"id": "ctx-1", "responses": [{"id": "r1", "text": "a"}, {"id": "r2", "text": "b"},
                                              {"id": "r3", "text": "c"}]},
                {"id": "ctx-2", "responses": [{"id": "r4", "text": "d"}, {"id": "r5", "text": "e"}]}]
RATINGS = {  # assessor -> response -> appropriateness
    "p": {"r1": 5, "r2": 3, "r3": 1, "r4": 4},
    "q": {"r1": 4, "r2": 4, "r4": 2, "r5": 1},
    "s": {"r1": 2, "r2": 2, "r3": 2, "r5": 5},
}


def _metric_judgements() -> list[dict]:
    return [{"item": rid, "assessor": who, "values": {"appropriateness": value}}
            for who, given in RATINGS.items() for rid, value in given.items()]


def test_metric_gold_means_and_judgements_kept() -> None:
    judgements = load_judgements(_metric_judgements(), "metric", load_items(METRIC_ITEMS, "metric"))
    gold, left_out = metric_gold(judgements, METRIC_ITEMS)
    humans = {r["id"]: r["human"] for c in gold for r in c["responses"]}
    assert humans == {"r1": 11 / 3, "r2": 3.0, "r3": 1.5, "r4": 3.0, "r5": 3.0}
    # One entry per assessor (p, q, s), null where none; a one-dimension gold names its judgements "human".
    assert gold[0]["responses"][0]["judgements"] == {"human": [5, 4, 2]}
    assert gold[0]["responses"][2]["judgements"] == {"human": [1, None, 2]}
    assert gold[0]["responses"][0]["text"] == "a" and left_out == []
    assert load_metric_gold(gold).human.tolist() == [11 / 3, 3.0, 1.5, 3.0, 3.0]


def test_metric_gold_with_per_assessor_z_scores() -> None:
    judgements = load_judgements(_metric_judgements(), "metric", load_items(METRIC_ITEMS, "metric"))
    gold, _ = metric_gold(judgements, METRIC_ITEMS, aggregation="z-score")
    z = {}
    for who, given in RATINGS.items():
        values = list(given.values())
        mean = sum(values) / len(values)
        sd = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
        z[who] = {rid: (v - mean) / sd if sd else 0.0 for rid, v in given.items()}
    expected = {rid: np.mean([z[who][rid] for who in RATINGS if rid in z[who]])
                for rid in ("r1", "r2", "r3", "r4", "r5")}
    humans = {r["id"]: r["human"] for c in gold for r in c["responses"]}
    assert humans == pytest.approx(expected, abs=1e-12)


def test_metric_gold_with_several_dimensions_and_unjudged_responses() -> None:
    dims = (Dimension("relevance", "ordinal", (1, 2, 3)), Dimension("fluency", "interval", (0, 1, 2, 3)))
    rows = [{"item": "r1", "assessor": "p", "values": {"relevance": 3, "fluency": 2}},
            {"item": "r2", "assessor": "p", "values": {"relevance": 1, "fluency": 0}},
            {"item": "r2", "assessor": "q", "values": {"relevance": 2, "fluency": 3}},
            {"item": "r4", "assessor": "q", "values": {"relevance": 2, "fluency": 3}}]
    judgements = load_judgements(rows, "metric", load_items(METRIC_ITEMS, "metric"), dims)
    gold, left_out = metric_gold(judgements, METRIC_ITEMS)
    assert [c["id"] for c in gold] == ["ctx-1"]  # ctx-2 keeps one judged response: no pair, left out
    assert gold[0]["responses"][1]["human"] == {"relevance": 1.5, "fluency": 1.5}
    assert gold[0]["responses"][1]["judgements"] == {"relevance": [1, 2], "fluency": [0, 3]}
    assert gold[0]["responses"][0]["judgements"] == {"relevance": [3, None], "fluency": [2, None]}
    assert sorted(left_out) == ["r3", "r4", "r5"]
    facts = provenance(judgements, aggregation="mean", left_out=left_out)
    assert facts["complete"] is False and facts["items_without_judgements"] == ["r3", "r5"]
    assert facts["aggregation"] == "mean" and [d["name"] for d in facts["scheme"]] == ["relevance", "fluency"]


def test_metric_gold_refuses_labels_for_a_mean() -> None:
    dims = (Dimension("verdict", "nominal", ("good", "bad")),)
    rows = [{"item": "r1", "assessor": "p", "values": {"verdict": "good"}},
            {"item": "r2", "assessor": "p", "values": {"verdict": "bad"}}]
    judgements = load_judgements(rows, "metric", load_items(METRIC_ITEMS, "metric"), dims)
    with pytest.raises(ValidationFailed, match="dimension \"verdict\" has labels, not numbers"):
        metric_gold(judgements, METRIC_ITEMS)


def test_check_items_never_go_into_a_gold() -> None:
    rows = _metric_judgements()
    rows = [dict(row, check=True) if row["item"] == "r2" else row for row in rows]
    judgements = load_judgements(rows, "metric", load_items(METRIC_ITEMS, "metric"))
    gold, left_out = metric_gold(judgements, METRIC_ITEMS)
    assert [r["id"] for c in gold for r in c["responses"]] == ["r1", "r3", "r4", "r5"] and left_out == ["r2"]
