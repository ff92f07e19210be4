"""What a campaign's judgements make (issue 40.3-4): alpha on the campaign page equal to the
``krippendorff`` package (an implementation independent of the server's library); a gold version
from them with its provenance, the STC-3 round trip exact; reference weights (mean - 3) / 2;
imports validated whole; the human ranking's means written out here from the judgements."""

from __future__ import annotations

from typing import Any

import krippendorff
import numpy as np
import orjson
import pytest
from django.test import Client

from campaigns import library
from campaigns.assignment import open_campaign
from campaigns.building import Plan, create_campaign
from campaigns.models import Judgement
from tasks import blobs
from tasks.errors import Rejected
from tasks.models import Team
from tests.campaign_world import response_task, stc3_campaign, stored_run, user
from tests.conftest import World, run_bytes

pytestmark = pytest.mark.django_db


def _gold_campaign(world: World, n: int = 30) -> Any:
    items = [entry["id"] for entry in world.gold[:n]]
    return create_campaign(world.task, Plan(name="re-annotation", kind="dialogues", gold_version=world.gold_version,
                                            item_ids=items, per_item=19))


def _annotations_as_judgements(gold: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The gold's annotations, one judgement per annotator (``x01``..``x19``), as a platform exports them."""
    return [{"item": entry["id"], "assessor": f"x{number:02d}", **annotation}
            for entry in gold for number, annotation in enumerate(entry["annotations"], start=1)]


def test_the_stc3_round_trip_is_exact_and_the_gold_says_where_it_comes_from(world: World) -> None:
    campaign = _gold_campaign(world)
    assert library.import_judgements(campaign, orjson.dumps(_annotations_as_judgements(world.gold))) == 30 * 19
    version = library.build_gold(campaign, "mean", world.organiser)
    kind, config = world.task.kind_impl, world.task.kind_config
    original, rebuilt = world.gold_version.load(), version.load()
    for seed in (1, 2):
        run = kind.parse_run(orjson.loads(run_bytes(world.gold, seed=seed)), original, config)
        assert kind.score(run, rebuilt, config).summary() == kind.score(run, original, config).summary()
    provenance = version.provenance
    assert provenance["campaign_id"] == campaign.pk and provenance["complete"] is True
    assert provenance["assessors"] == [f"x{number:02d}" for number in range(1, 20)]
    assert set(provenance["alpha"]) == {"A", "E", "S", "nugget"}
    assert provenance["judgements_per_item"] == {entry["id"]: 19 for entry in world.gold}
    page = Client()
    page.force_login(world.organiser)
    body = page.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert f"gold version {version.number}" in body


def _alpha_by_package(matrix: list[list[Any]], level: str) -> float:
    return float(krippendorff.alpha(reliability_data=np.array(matrix, dtype=float), level_of_measurement=level))


def test_alpha_on_the_campaign_page_equals_the_krippendorff_package(world: World) -> None:
    campaign = _gold_campaign(world, n=12)
    judgements = _annotations_as_judgements(world.gold[:12])
    library.import_judgements(campaign, orjson.dumps(judgements))
    report = library.agreement(campaign)
    rows = {row["name"]: row for row in report["dimensions"]}
    coders = sorted({j["assessor"] for j in judgements})
    for name in ("A", "E", "S"):
        matrix = [[next(j["quality"][name] for j in judgements if j["assessor"] == coder and j["item"] == entry["id"])
                   for entry in world.gold[:12]] for coder in coders]
        assert rows[name]["alpha"] == pytest.approx(_alpha_by_package(matrix, "ordinal"), abs=1e-12)
        assert rows[name]["level"] == "ordinal" and rows[name]["n_judgements"] == 12 * 19
    labels = {"CNUG0": 0, "CNUG": 1, "CNUG*": 2, "CNaN": 3, "HNUG": 4, "HNUG*": 5, "HNaN": 6}
    turns = [(entry["id"], index) for entry in world.gold[:12] for index in range(len(entry["turns"]))]
    matrix = [[labels[next(j["nugget"][index] for j in judgements if j["assessor"] == coder and j["item"] == item)]
               for item, index in turns] for coder in coders]
    assert rows["nugget"]["alpha"] == pytest.approx(_alpha_by_package(matrix, "nominal"), abs=1e-12)
    lower, upper = rows["A"]["interval"]
    assert lower <= rows["A"]["alpha"] <= upper
    page = Client()
    page.force_login(world.organiser)
    body = page.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert f"{rows['A']['alpha']:.3f}" in body and "1000 resamples, seed 40" in body


def test_an_import_with_problems_names_each_with_its_path_and_stores_nothing(world: World) -> None:
    campaign = stc3_campaign(world, n=2, per_item=1, assessors=("carol",))
    good = {"item": "d2", "assessor": "p1", "quality": {"A": 1, "E": 0, "S": 0}, "nugget": ["CNUG0", "HNUG"]}
    bad = [good, {**good, "item": "d9"}, {**good, "nugget": ["HNUG", "HNUG"]}, {**good, "assessor": "p2",
                                                                                  "quality": {"A": 7, "E": 0, "S": 0}}]
    with pytest.raises(Rejected) as refused:
        library.import_judgements(campaign, orjson.dumps(bad))
    text = "\n".join(refused.value.errors)
    assert "[1].item" in text and "d9" in text
    assert "[2]" in text and "twice" in text
    assert "[3].quality.A" in text
    assert not Judgement.objects.exists() and campaign.assessors.count() == 1
    assert library.import_judgements(campaign, orjson.dumps([good])) == 1
    with pytest.raises(Rejected) as refused:
        library.import_judgements(campaign, orjson.dumps([good]))
    assert refused.value.errors == ["[0]: assessor 'p1' already judged item 'd2' in this campaign"]
    assert sorted(campaign.assessors.values_list("code", flat=True)) == ["a01", "p1"]


def test_reference_ratings_become_weights_mean_minus_three_over_two(db: Any) -> None:
    task, version, gold = response_task()
    organiser = user("olivia")
    task.organisers.add(organiser)
    campaign = create_campaign(task, Plan(name="refs", kind="references", gold_version=version, per_item=2))
    keys = list(campaign.items.values_list("key", flat=True))
    assert keys == [f"{entry['id']}#{k}" for entry in gold for k in range(len(entry["references"]))]
    # Two raters: the first reference of each item rated 5 and 4, every other 2 and 1.
    ratings = {key: ((5, 4) if key.endswith("#0") else (2, 1)) for key in keys}
    data = [{"item": key, "assessor": name, "values": {"rating": pair[index]}}
            for key, pair in ratings.items() for index, name in enumerate(("r1", "r2"))]
    library.import_judgements(campaign, orjson.dumps(data))
    built = library.build_gold(campaign, "mean", organiser)
    stored = {entry["id"]: entry for entry in orjson.loads(
        orjson.dumps(library.gold_content(campaign)[0]))}
    for entry in gold:
        weights = [reference["weight"] for reference in stored[entry["id"]]["references"]]
        assert weights == [0.75] + [-0.75] * (len(entry["references"]) - 1)  # (4.5 - 3) / 2, (1.5 - 3) / 2
    assert built.n_items == len(gold) and built.provenance["complete"] is True


def test_the_human_ranking_is_each_runs_mean_over_the_items_all_judged_runs_answered(db: Any) -> None:
    task, version, gold = response_task(n=8)  # 8 items: a Tukey HSD p-value can go below 0.05 (2/2^8)
    aurora = Team.objects.create(name="Aurora", slug="aurora")
    ids = [entry["id"] for entry in gold]
    good = stored_run(task, aurora, "good", {item: f"good answer {n}" for n, item in enumerate(ids)})
    poor = stored_run(task, aurora, "poor", {item: f"poor answer {n}" for n, item in enumerate(ids)})
    campaign = create_campaign(task, Plan(name="resp", kind="responses", gold_version=version, runs=[good, poor],
                                          per_item=2, dimensions="appropriateness 1-5"))
    scores = {}
    data = []
    for item in campaign.items.all():
        high = item.content["text"].startswith("good")
        pair = (5, 4) if high else (2, 1 + int(item.sources["item"] == ids[0]))
        scores[(item.sources["runs"][0], item.sources["item"])] = sum(pair) / 2
        data += [{"item": item.key, "assessor": name, "values": {"appropriateness": value}}
                 for name, value in zip(("j1", "j2"), pair, strict=True)]
    library.import_judgements(campaign, orjson.dumps(data))
    table = library_ranking(campaign)
    expected = {run.pk: sum(scores[(run.pk, item)] for item in ids) / len(ids) for run in (good, poor)}
    assert [(row["run"].pk, row["mean"]) for row in table["rows"]] == [(good.pk, expected[good.pk]),
                                                                        (poor.pk, expected[poor.pk])]
    assert expected == {good.pk: 4.5, poor.pk: 1.5625}
    assert table["n_items"] == 8 and [row["top"] for row in table["rows"]] == [True, False]
    assert all(row["lower"] <= row["mean"] <= row["upper"] for row in table["rows"])


def library_ranking(campaign: Any) -> dict[str, Any]:
    from campaigns.ranking import ranking

    return ranking(campaign)["tables"][0]


def test_a_judge_then_agreement_then_gold_through_the_pages(world: World) -> None:
    campaign = stc3_campaign(world, n=2, per_item=2, assessors=("carol", "dave"))
    open_campaign(campaign)
    for name, a in (("carol", 2), ("dave", 1)):
        client = Client()
        client.force_login(user(name))
        for _ in range(2):
            page = client.get(f"/campaigns/{campaign.pk}/judge/")
            data = {"A": str(a), "E": "0", "S": "1", "shown": page.context["shown"]}
            for index, turn in enumerate(page.context["turns"]):
                data[f"nugget-{index}"] = "CNUG0" if turn["sender"] == "customer" else "HNUG"
            assert client.post(f"/campaigns/{campaign.pk}/judge/{page.context['position']}/", data).status_code == 302
    organiser = Client()
    organiser.force_login(world.organiser)
    answer = organiser.post(f"/campaigns/{campaign.pk}/", {"action": "gold"})
    assert answer.status_code == 302
    version = world.task.gold_versions.order_by("-number").first()
    assert version.provenance["campaign_id"] == campaign.pk and version.n_items == 2
    annotations = [entry["annotations"] for entry in orjson.loads(
        orjson.dumps(library.gold_content(campaign)[0]))]
    assert [[a["quality"]["A"] for a in pair] for pair in annotations] == [[2, 1], [2, 1]]


def test_a_metrics_tasks_responses_pooled_then_each_gets_the_mean_of_its_judgements(db: Any) -> None:
    from fixtures import metric_demo
    from tasks.organising import create_task, load_gold_version

    task = create_task("metric-task", "metric-quick", "Metrics", kind="metric")
    gold = metric_demo.generate_gold(3, 3, seed=2)
    # Two systems gave the same reply to the first context (once with other spaces): judged once.
    gold[0]["responses"][1]["text"] = "  " + gold[0]["responses"][0]["text"].replace(" ", "   ") + " "
    organiser = user("olivia")
    task.organisers.add(organiser)
    version = load_gold_version(task, orjson.dumps(gold), "gold.json")
    campaign = create_campaign(task, Plan(name="humans", kind="responses", gold_version=version, per_item=2,
                                          dimensions="appropriateness 1-5"))
    # Nine responses: two the same text after normalisation, two more the same already in the demo.
    assert campaign.items.count() == 7
    items = list(campaign.items.order_by("pk"))
    pooled = sorted(item.sources["responses"] for item in items if len(item.sources["responses"]) == 2)
    assert pooled == [[gold[0]["responses"][0]["id"], gold[0]["responses"][1]["id"]],
                      [gold[2]["responses"][0]["id"], gold[2]["responses"][2]["id"]]]
    assert "system" not in orjson.dumps([item.content for item in items]).decode()
    values = {item.key: (1 + n % 5, 1 + (n + 2) % 5) for n, item in enumerate(items)}
    data = [{"item": key, "assessor": name, "values": {"appropriateness": pair[index]}}
            for key, pair in values.items() for index, name in enumerate(("h1", "h2"))]
    library.import_judgements(campaign, orjson.dumps(data))
    version = library.build_gold(campaign, "mean", organiser)
    built = {response["id"]: response for context in orjson.loads(blobs.read("gold", version.source_sha256))
             for response in context["responses"]}
    for item in items:
        for response_id in item.sources["responses"]:
            assert built[response_id]["human"] == sum(values[item.key]) / 2
            # One dimension: the metrics-track gold keys its judgements as it keys "human".
            assert list(built[response_id]["judgements"].values()) == [list(values[item.key])]
    assert version.provenance["aggregation"] == "mean" and version.provenance["complete"] is True


def test_a_csv_table_imports_like_the_json_file_and_its_problems_name_their_lines(world: World) -> None:
    campaign = stc3_campaign(world, n=2, per_item=1, assessors=("carol",))
    table = ("item,assessor,seconds,A,E,S,nugget\n"
             "d1,p1,12.5,1,0,-1,CNUG0 HNUG CNUG*\n"
             "d2,p1,,2,2,2,CNUG0 HNUG\n")
    assert library.import_judgements(campaign, table.encode(), "platform.csv") == 2
    assert sorted(Judgement.objects.values_list("item__key", "values", "seconds")) == [
        ("d1", {"quality": {"A": 1, "E": 0, "S": -1}, "nugget": ["CNUG0", "HNUG", "CNUG*"]}, 12.5),
        ("d2", {"quality": {"A": 2, "E": 2, "S": 2}, "nugget": ["CNUG0", "HNUG"]}, None)]
    bad = "item,assessor,seconds,A,E,S,nugget\nd1,p2,,9,0,0,CNUG0 HNUG CNUG*\n"
    with pytest.raises(Rejected) as refused:
        library.import_judgements(campaign, bad.encode(), "platform.csv")
    assert refused.value.errors[0].startswith("line 2") and "A" in refused.value.errors[0]
    assert Judgement.objects.count() == 2
