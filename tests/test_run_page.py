"""Issue 17, item 5: a run's page says where the run stands on its board (rank, distance to the
best run and to each baseline, per measure and in its direction) and shows every per-item score
in a sortable, paginated, downloadable table, within the privacy rules. Every expected number is
computed here from the API's numbers or the stored per-item vectors."""

from __future__ import annotations

import csv
import html
import io
import re
from datetime import timedelta
from typing import Any

import numpy as np
import orjson
import pytest
from django.test import Client
from django.utils import timezone

from tasks import organising, submissions
from tasks.models import AccessLog, Phase, Run, ScoreVector
from tests.conftest import World, committing, make_world, run_bytes

STANDING_ROW = re.compile(
    r'<tr><th scope="row" title="(?P<title>[^"]+)">(?P<name>[^<]+) <small>[▲▼]</small></th>\s*'
    r'<td class="num">(?P<value>[0-9.]+)</td><td class="num">(?P<rank>\d+) of (?P<ranked>\d+)</td>'
    r'<td class="num">(?P<best>[0-9.]+)</td>\s*<td class="num">(?P<behind>best|[0-9.]+)</td>\s*'
    r'(?P<baselines>(?:<td class="num[^"]*">[^<]*</td>)*)</tr>')
ITEM_ROW = re.compile(r'<tr><td title="[^"]*">(?P<id>[^<]+)</td>(?P<cells>(?:<td class="num">[^<]*</td>)+)</tr>')


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def make_phase(world: World, name: str, kind: str, days: tuple[float, float], version: Any = None,
               **fields: Any) -> Phase:
    now = timezone.now()
    with committing():
        return Phase.objects.create(task=world.task, name=name, kind=kind, gold_version=version or world.gold_version,
                                    starts_at=now + timedelta(days=days[0]), ends_at=now + timedelta(days=days[1]),
                                    **fields)


def upload(world: World, user: Any, noise: float, seed: int, name: str, phase: Phase, public: bool = True) -> Run:
    with committing():
        return submissions.submit_run(world.task, user, submissions.Submission(
            content=run_bytes(world.gold, noise, seed), name=name, is_public=public), phase)


@pytest.fixture
def dev(db: Any) -> dict[str, Any]:
    """250 dialogues (three pages of per-item scores), a development phase with per-item feedback,
    two runs of alice (one hidden), one of bob."""
    world = make_world(n_dialogues=250, seed=3)
    phase = make_phase(world, "dev", Phase.DEVELOPMENT, (-1, 5))
    runs = {"good": upload(world, world.alice, 0.1, 1, "good", phase),
            "shy": upload(world, world.alice, 0.2, 2, "shy", phase, public=False),
            "rival": upload(world, world.bob, 0.4, 3, "rival", phase)}
    return {"world": world, "phase": phase, "runs": runs}


def standing_rows(page: str) -> dict[str, dict[str, str]]:
    section = page[page.index('<section id="standing">'):page.index("</section>", page.index('id="standing"'))]
    return {html.unescape(match["name"]): match.groupdict() for match in STANDING_ROW.finditer(section)}


def expected_standing(runs: list[dict[str, Any]], own: dict[str, float], specs: list[Any],
                      own_id: int) -> dict[str, dict[str, Any]]:
    """Rank, best and distances from the API's numbers, in each measure's direction."""
    expected = {}
    for spec in specs:
        sign = 1.0 if spec["higher_is_better"] else -1.0
        value = own[spec["key"]]
        others = [run for run in runs if run["id"] != own_id]
        rivals = [run["scores"]["measures"][spec["key"]] for run in others]
        best = max([value, *rivals], key=lambda v: sign * v)
        expected[spec["short_title"]] = {
            "value": value, "rank": 1 + sum(sign * rival > sign * value for rival in rivals),
            "ranked": len(rivals) + 1, "best": best, "behind": abs(best - value),
            "baselines": [sign * (value - run["scores"]["measures"][spec["key"]]) for run in others
                          if run["is_baseline"]]}
    return expected


def check_standing(page: str, expected: dict[str, dict[str, Any]]) -> None:
    rows = standing_rows(page)
    assert set(rows) == set(expected)
    for name, want in expected.items():
        row = rows[name]
        assert row["value"] == f"{want['value']:.4f}"
        assert (int(row["rank"]), int(row["ranked"])) == (want["rank"], want["ranked"]), name
        assert row["best"] == f"{want['best']:.4f}"
        assert row["behind"] == ("best" if want["rank"] == 1 else f"{want['behind']:.4f}")
        margins = re.findall(r">([+−]?)([0-9.]+)</td>", row["baselines"])
        assert [(sign, text) for sign, text in margins] == [
            ("+" if margin > 0 else "−" if margin < 0 else "", f"{abs(margin):.4f}") for margin in want["baselines"]]


@pytest.mark.django_db
def test_a_run_page_gives_rank_and_distances_computed_from_the_public_board(dev: dict[str, Any]) -> None:
    world, good = dev["world"], dev["runs"]["good"]
    board = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=dev").json()
    own = next(run for run in board["runs"] if run["id"] == good.pk)["scores"]["measures"]
    page = signed_in(world.alice).get(f"/runs/{good.pk}/").content.decode()
    check_standing(page, expected_standing(board["runs"], own, board["measures"], good.pk))
    # Good, rival and the two baselines (shy is hidden), every one with every measure group.
    assert "board, which shows 4 runs (2 participants' runs and 2 baselines)." in page
    assert page.count("Against baseline-") == 4  # two baselines, in the official and the other measures' tables


@pytest.mark.django_db
def test_a_hidden_run_is_placed_among_the_public_runs_for_its_team(dev: dict[str, Any]) -> None:
    world, shy = dev["world"], dev["runs"]["shy"]
    board = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=dev").json()
    assert shy.pk not in {run["id"] for run in board["runs"]}
    own = signed_in(world.alice).get(f"/api/v1/runs/{shy.pk}/").json()["scores"]["measures"]
    page = signed_in(world.alice).get(f"/runs/{shy.pk}/").content.decode()
    expected = expected_standing(board["runs"], own, board["measures"], shy.pk)
    check_standing(page, expected)
    assert all(row["ranked"] == 5 for row in expected.values())
    assert "this run is hidden from it, so its rank is where it would be if shown" in page
    # Its organisers see it on their board, which lists it.
    organiser = signed_in(world.organiser).get(f"/runs/{shy.pk}/").content.decode()
    assert "board, which shows 5 runs (3 participants' runs and 2 baselines)." in organiser
    assert "which shows the public 4 runs (2 participants' runs and 2 baselines); this run is hidden" in page


@pytest.mark.django_db
def test_ranks_follow_a_measure_where_higher_is_better(dev: dict[str, Any], monkeypatch: Any) -> None:
    from dataclasses import replace

    from scoring.kinds.stc3.measures import MEASURES

    monkeypatch.setitem(MEASURES, "nmd", replace(MEASURES["nmd"], lower_is_better=False))
    world, good = dev["world"], dev["runs"]["good"]
    board = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=dev").json()
    assert next(spec for spec in board["measures"] if spec["key"] == "quality.A.nmd")["higher_is_better"]
    own = next(run for run in board["runs"] if run["id"] == good.pk)["scores"]["measures"]
    page = signed_in(world.alice).get(f"/runs/{good.pk}/").content.decode()
    expected = expected_standing(board["runs"], own, board["measures"], good.pk)
    check_standing(page, expected)
    assert expected["A NMD"]["rank"] == 4 and expected["A RSNOD"]["rank"] == 1  # the least noisy run


@pytest.mark.django_db
def test_on_a_test_phase_the_standing_is_on_the_live_board_until_publication(db: Any) -> None:
    world = make_world(n_dialogues=40, seed=4)
    test = make_phase(world, "test", Phase.TEST, (-1, 1), live_subset_size=15, live_subset_seed=2)
    final = make_phase(world, "final", Phase.FINAL, (1, 9))
    runs = [upload(world, user, noise, seed, name, test)
            for user, noise, seed, name in ((world.alice, 0.1, 1, "a1"), (world.bob, 0.3, 2, "b1"))]
    board = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=test").json()
    assert board["scope"] == "live"
    own = next(run for run in board["runs"] if run["id"] == runs[0].pk)["scores"]["measures"]
    page = signed_in(world.alice).get(f"/runs/{runs[0].pk}/").content.decode()
    check_standing(page, expected_standing(board["runs"], own, board["measures"], runs[0].pk))
    assert "board (live subset)" in page
    test.ends_at = timezone.now()  # publication waits until no phase takes runs on the test gold
    final.results_published = True
    with committing():
        test.save()
        final.save()
    board = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=test").json()
    assert board["scope"] == "full"
    own = next(run for run in board["runs"] if run["id"] == runs[0].pk)["scores"]["measures"]
    page = signed_in(world.alice).get(f"/runs/{runs[0].pk}/").content.decode()
    check_standing(page, expected_standing(board["runs"], own, board["measures"], runs[0].pk))


@pytest.mark.django_db
def test_a_final_board_kept_back_says_so_instead_of_a_rank(db: Any) -> None:
    world = make_world(n_dialogues=30, seed=4)
    final = make_phase(world, "final", Phase.FINAL, (-1, 9))
    run = upload(world, world.alice, 0.1, 1, "a1", final)
    page = signed_in(world.alice).get(f"/runs/{run.pk}/").content.decode()
    assert "The organisers have not published the final results yet." in page
    assert standing_rows(page) == {}


# Per-item table ---------------------------------------------------------------------------------

def vectors_of(run: Run) -> dict[str, np.ndarray]:
    return {vector.key: vector.array() for vector in ScoreVector.objects.filter(score__run=run, score__scope="full")}


def table_rows(page: str) -> list[tuple[str, list[str]]]:
    section = page[page.index('<section id="per-item">'):]
    return [(match["id"], re.findall(r">([^<]*)</td>", match["cells"])) for match in ITEM_ROW.finditer(section)]


@pytest.mark.django_db
def test_every_item_is_in_the_table_page_by_page_in_the_data_order(dev: dict[str, Any]) -> None:
    world, good = dev["world"], dev["runs"]["good"]
    client = signed_in(world.alice)
    vectors = vectors_of(good)
    official = [spec for spec in world.task.measure_specs() if spec.official]
    ids = [dialogue["id"] for dialogue in world.gold]
    seen = []
    for number in (1, 2, 3):
        page = client.get(f"/runs/{good.pk}/?page={number}").content.decode()
        assert "Per-dialogue scores (250 dialogues)" in page
        rows = table_rows(page)
        assert len(rows) == (100 if number < 3 else 50)
        for item, cells in rows:
            k = ids.index(item)
            assert cells == [f"{vectors[spec.key][k]:.4f}" for spec in official]
        seen += [item for item, _ in rows]
    assert seen == ids
    header = page[page.index('<table class="board small items">'):page.index("</thead>", page.index("items"))]
    assert [html.unescape(t) for t in re.findall(r'<a href="[^"]*">([^<]+)</a></th>', header)] == [
        spec.column_title for spec in official]
    every = client.get(f"/runs/{good.pk}/?show=all").content.decode()
    assert len(table_rows(every)[0][1]) == len(vectors) == 21
    assert client.get(f"/runs/{good.pk}/?page=x&sort=bogus").status_code == 200  # first page, data order


@pytest.mark.django_db
def test_the_table_sorts_on_the_server_by_a_measure_best_or_worst_first(dev: dict[str, Any]) -> None:
    world, good = dev["world"], dev["runs"]["good"]
    client = signed_in(world.alice)
    values = vectors_of(good)["quality.E.nmd"]
    ids = [dialogue["id"] for dialogue in world.gold]
    # Lower is better: best first is ascending, ties in the data's order (a stable sort).
    best = sorted(range(250), key=lambda k: (values[k], k))
    worst = sorted(range(250), key=lambda k: (-values[k], k))
    for order, expected in (("", best), ("worst", worst)):
        shown = []
        for number in (1, 2, 3):
            page = client.get(f"/runs/{good.pk}/?sort=quality.E.nmd&order={order}&page={number}").content.decode()
            shown += [item for item, _ in table_rows(page)]
        assert shown == [ids[k] for k in expected]
    page = client.get(f"/runs/{good.pk}/?sort=quality.E.nmd").content.decode()
    assert "sorted by E NMD, best first" in html.unescape(page)
    assert "?sort=quality.E.nmd&amp;order=worst#per-item" in page  # the column's link turns the order round


@pytest.mark.django_db
def test_a_higher_is_better_measure_sorts_the_other_way(dev: dict[str, Any], monkeypatch: Any) -> None:
    from dataclasses import replace

    from scoring.kinds.stc3.measures import MEASURES

    monkeypatch.setitem(MEASURES, "nmd", replace(MEASURES["nmd"], lower_is_better=False))
    world, good = dev["world"], dev["runs"]["good"]
    values = vectors_of(good)["quality.E.nmd"]
    ids = [dialogue["id"] for dialogue in world.gold]
    page = signed_in(world.alice).get(f"/runs/{good.pk}/?sort=quality.E.nmd").content.decode()
    assert [item for item, _ in table_rows(page)] == [ids[k] for k in sorted(range(250),
                                                                               key=lambda k: (-values[k], k))[:100]]


@pytest.mark.django_db
def test_the_csv_has_every_item_and_every_measure_exactly(dev: dict[str, Any]) -> None:
    world, good = dev["world"], dev["runs"]["good"]
    response = signed_in(world.alice).get(f"/runs/{good.pk}/items.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == f'attachment; filename="demo-task-run{good.pk}-good-full-items.csv"'
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    vectors = vectors_of(good)
    keys = [spec.key for spec in world.task.measure_specs()]
    assert rows[0] == ["dialogue_id", *keys]
    assert [row[0] for row in rows[1:]] == [dialogue["id"] for dialogue in world.gold]
    for k, row in enumerate(rows[1:]):
        assert [float(cell) for cell in row[1:]] == [vectors[key][k] for key in keys]  # repr: exact


@pytest.mark.django_db
def test_per_item_scores_follow_the_privacy_rules(db: Any) -> None:
    """Per-item scores (page and CSV) reach the run's team only where its phase gives per-item
    feedback and, on test data, once the results are published; organisers always, logged
    while the test results are not published; other teams never."""
    world = make_world(n_dialogues=30, seed=4)
    quiet = make_phase(world, "quiet", Phase.DEVELOPMENT, (-2, -1), per_item_feedback=False)
    with committing():
        test_gold = organising.load_gold_version(world.task, orjson.dumps(world.gold), "test.json", label="test")
    test = make_phase(world, "test", Phase.TEST, (-1, 1), version=test_gold)
    quiet_run = upload(world, world.alice, 0.1, 1, "quiet-run", quiet)
    test_run = upload(world, world.alice, 0.1, 2, "test-run", test)
    alice, bob, organiser = signed_in(world.alice), signed_in(world.bob), signed_in(world.organiser)
    for run in (quiet_run, test_run):
        assert 'id="per-item"' not in alice.get(f"/runs/{run.pk}/").content.decode()
        assert alice.get(f"/runs/{run.pk}/items.csv").status_code == 404
        assert bob.get(f"/runs/{run.pk}/items.csv").status_code == 404
        assert organiser.get(f"/runs/{run.pk}/items.csv").status_code == 200
    assert AccessLog.objects.filter(what__startswith=f"per-item scores CSV of run #{test_run.pk}").count() == 1
    assert not AccessLog.objects.filter(what__contains=f"run #{quiet_run.pk}").exists()  # not test data
    # The public: the same 404 as a run that does not exist, until the test results are published.
    assert Client().get(f"/runs/{test_run.pk}/items.csv").status_code == 404
    test.results_published = True
    with committing():
        test.save()
    # Not while the test phase takes runs: a run submitted now would get per-item test scores.
    assert test.is_open() and alice.get(f"/runs/{test_run.pk}/items.csv").status_code == 404
    test.ends_at = timezone.now()
    with committing():
        test.save()
    assert alice.get(f"/runs/{test_run.pk}/items.csv").status_code == 200
    # Published: the run's public page gives its per-item scores to everybody (issue 30); the quiet
    # development phase gives none, to the public either.
    assert Client().get(f"/runs/{test_run.pk}/items.csv").content == alice.get(f"/runs/{test_run.pk}/items.csv").content
    assert Client().get(f"/runs/{quiet_run.pk}/items.csv").status_code == 404
    assert 'id="per-item"' not in Client().get(f"/runs/{quiet_run.pk}/").content.decode()


@pytest.mark.django_db
def test_a_metric_run_stands_against_its_seven_baselines_in_one_column(db: Any) -> None:
    """The metric kind (higher is better, seven reference baselines): the margins over every
    baseline are listed in one column, each from the API's numbers in the measure's direction."""
    from fixtures.metric_demo import generate_gold, generate_runs
    from tasks.models import Team

    world = make_world(n_dialogues=10, seed=1)
    task = organising.create_task("metric-walk", "", "Metric walk", kind="metric")
    task.config = {**task.config, "n_resamples": 50}
    task.save()
    gold = generate_gold(12, 4, seed=2)
    with committing():
        organising.load_gold_version(task, orjson.dumps(gold), "gold.json")
    assert Team.objects.get(name="Aurora").members.filter(pk=world.alice.pk).exists()
    with committing():
        run = submissions.submit_run(task, world.alice, submissions.Submission(
            content=orjson.dumps(generate_runs(gold, seed=2)["noisy"]), name="noisy"))
    board = Client().get("/api/v1/tasks/metric-walk/leaderboard/").json()
    baselines = [entry for entry in board["runs"] if entry["is_baseline"]]
    assert len(baselines) == 7
    page = signed_in(world.alice).get(f"/runs/{run.pk}/").content.decode()
    assert "<th>Against the baselines</th>" in page
    pp = next(spec for spec in board["measures"] if spec["key"] == "predictive_power")
    assert pp["higher_is_better"]
    own = next(entry for entry in board["runs"] if entry["id"] == run.pk)["scores"]["measures"]["predictive_power"]
    row = page[page.index(f">{pp['short_title']} <small>"):]
    row = row[:row.index("</tr>")]
    listed = re.findall(r'<span class="(?:better|worse|)">([^<]+) ([+−]?)([0-9.]+)</span>', row)
    expected = []
    for entry in baselines:
        margin = own - entry["scores"]["measures"]["predictive_power"]  # higher is better
        expected.append((entry["name"], "+" if margin > 0 else "−" if margin < 0 else "", f"{abs(margin):.4f}"))
    assert listed == expected
