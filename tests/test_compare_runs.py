"""Issue 17, item 5: two runs compared item by item (a scatter and the sorted differences), for
the runs a user may open and only where the per-item scores of both are visible to that user
(``tasks.access.per_item_score``); organisers reading unpublished test data are logged."""

from __future__ import annotations

import html
import re
from typing import Any

import numpy as np
import orjson
import pytest
from django.test import Client
from django.utils import timezone

from tasks import organising
from tasks.models import AccessLog, Phase, Run
from tests.conftest import committing, make_world
from tests.test_run_page import dev, make_phase, signed_in, upload, vectors_of  # noqa: F401 - the fixture


def compare(client: Client, first: Any, second: Any, measure: str = "") -> str:
    response = client.get(f"/runs/{first.pk}/compare/?with={second.pk}" + (f"&measure={measure}" if measure else ""))
    assert response.status_code == 200
    return response.content.decode()


def summary(page: str) -> list[str]:
    table = page[page.index('<table class="board compact compare-summary">'):]
    return re.findall(r'<td class="num">([^<]+)</td>', table[:table.index("</table>")])


@pytest.mark.django_db
def test_two_runs_of_a_team_compared_item_by_item(dev: dict[str, Any]) -> None:  # noqa: F811
    world, good, shy = dev["world"], dev["runs"]["good"], dev["runs"]["shy"]
    page = compare(signed_in(world.alice), good, shy, "quality.S.rsnod")
    a, b = vectors_of(good)["quality.S.rsnod"], vectors_of(shy)["quality.S.rsnod"]
    advantage = b - a  # lower is better: positive where the first run is better
    assert summary(page) == [str(int((advantage > 0).sum())), str(int((advantage < 0).sum())),
                             str(int((advantage == 0).sum())), f"{a.mean():.4f} / {b.mean():.4f}",
                             f"{advantage.mean():.4f}"]
    # One point per dialogue with both scores in its tooltip.
    ids = [dialogue["id"] for dialogue in world.gold]
    points = re.findall(r"<g><title>([^<]+): Aurora: good ([0-9.]+), Aurora: shy ([0-9.]+)</title>", page)
    assert len(points) == 250
    assert {item: (x, y) for item, x, y in points} == {
        item: (f"{a[k]:.4f}", f"{b[k]:.4f}") for k, item in enumerate(ids)}
    # The ten dialogues where each run is furthest ahead, largest first.
    ahead = page[page.index("Where Aurora: good is most ahead"):page.index("Where Aurora: shy is most ahead")]
    order = sorted(range(250), key=lambda k: (-advantage[k], k))
    assert re.findall(r'<tr><td title="[^"]*">([^<]+)</td>', ahead) == [ids[k] for k in order[:10] if advantage[k] > 0]
    # The sorted differences: a line of 250 points from the largest advantage down.
    curve = re.search(r'\(250 points\)</title><polyline points="([^"]+)"', page).group(1).split()
    ys = [float(point.split(",")[1]) for point in curve]
    assert len(ys) == 250 and ys == sorted(ys)  # SVG y grows downwards: largest advantage first
    assert "S RSNOD</strong>: Root Symmetric Normalised Order-aware Divergence, S" in html.unescape(page)


@pytest.mark.django_db
def test_the_first_official_measure_is_the_default_and_direction_decides_better(dev: dict[str, Any],  # noqa: F811
                                                                                  monkeypatch: Any) -> None:
    from dataclasses import replace

    from scoring.kinds.stc3.measures import MEASURES

    world, good, shy = dev["world"], dev["runs"]["good"], dev["runs"]["shy"]
    page = compare(signed_in(world.alice), good, shy)
    assert '<option value="quality.A.rsnod" selected>' in page
    monkeypatch.setitem(MEASURES, "rsnod", replace(MEASURES["rsnod"], lower_is_better=False))
    a, b = vectors_of(good)["quality.A.rsnod"], vectors_of(shy)["quality.A.rsnod"]
    page = compare(signed_in(world.alice), good, shy, "quality.A.rsnod")
    assert summary(page)[:2] == [str(int((a > b).sum())), str(int((a < b).sum()))]


@pytest.mark.django_db
def test_another_teams_public_run_is_compared_and_a_hidden_one_is_not_found(dev: dict[str, Any]) -> None:  # noqa: F811
    """Issue 37, item 6: every run whose per-item scores the reader may see, in either position
    (tests/test_compare_matrix.py walks every role and run state)."""
    world, good, shy, rival = dev["world"], dev["runs"]["good"], dev["runs"]["shy"], dev["runs"]["rival"]
    alice, bob = signed_in(world.alice), signed_in(world.bob)
    a, b = vectors_of(good)["quality.A.rsnod"], vectors_of(rival)["quality.A.rsnod"]
    for client in (alice, bob, Client()):
        page = compare(client, good, rival, "quality.A.rsnod")
        assert summary(page)[3] == f"{a.mean():.4f} / {b.mean():.4f}"
        assert summary(compare(client, rival, good, "quality.A.rsnod"))[3] == f"{b.mean():.4f} / {a.mean():.4f}"
    # Alice's hidden run: hers to compare with bob's public one, not found by bob or anybody else.
    assert "<polyline" in compare(alice, shy, rival)
    for client in (bob, Client()):
        assert client.get(f"/runs/{rival.pk}/compare/?with={shy.pk}").status_code == 404
        assert client.get(f"/runs/{shy.pk}/compare/?with={rival.pk}").status_code == 404
    assert alice.get(f"/runs/{good.pk}/compare/?with={good.pk}").status_code == 404
    assert alice.get(f"/runs/{good.pk}/compare/?with=١").status_code == 404  # not an ASCII number
    # The chooser: one's own runs first, then the baselines, then the other teams' public runs;
    # nobody else's hidden run.
    baselines = {str(pk) for pk in Run.objects.filter(is_baseline=True).values_list("pk", flat=True)}
    assert len(baselines) == 2
    offered = re.findall(r'<option value="(\d+)"', alice.get(f"/runs/{good.pk}/compare/").content.decode())
    assert offered[0] == str(shy.pk) and set(offered[1:3]) == baselines and offered[3:] == [str(rival.pk)]
    offered = re.findall(r'<option value="(\d+)"', bob.get(f"/runs/{rival.pk}/compare/").content.decode())
    assert set(offered[:2]) == baselines and offered[2:] == [str(good.pk)]
    organiser = signed_in(world.organiser)
    assert f'value="{shy.pk}"' in organiser.get(f"/runs/{rival.pk}/compare/").content.decode()
    page = compare(organiser, good, rival)
    assert "Aurora: good is better" in page
    assert not AccessLog.objects.filter(what__contains="comparison").exists()  # not test data


@pytest.mark.django_db
def test_test_data_is_compared_only_once_published_and_organisers_are_logged(db: Any) -> None:
    world = make_world(n_dialogues=30, seed=4)
    with committing():
        test_gold = organising.load_gold_version(world.task, orjson.dumps(world.gold), "test.json", label="test")
    dev_phase = make_phase(world, "dev", Phase.DEVELOPMENT, (-3, -2))
    test = make_phase(world, "test", Phase.TEST, (-1, 1), version=test_gold)
    dev_run = upload(world, world.alice, 0.1, 1, "dev-run", dev_phase)
    first, second = (upload(world, world.alice, noise, seed, name, test)
                     for noise, seed, name in ((0.1, 2, "t1"), (0.3, 3, "t2")))
    alice = signed_in(world.alice)
    page = compare(alice, first, second)
    assert "are not available to you (on test data they come with the published results)" in page
    assert "Aurora: t1 and Aurora: t2" in html.unescape(page) and "<polyline" not in page
    assert not re.search(r"\d\.\d{4}", page)  # not a single score
    organiser = signed_in(world.organiser)
    assert "<polyline" in compare(organiser, first, second)
    logged = set(AccessLog.objects.filter(user=world.organiser).values_list("what", flat=True))
    assert logged == {f"per-item comparison with run #{second.pk} of run #{first.pk} (Aurora: t1, gold v2)",
                      f"per-item comparison with run #{first.pk} of run #{second.pk} (Aurora: t2, gold v2)"}
    # Runs on different gold data have no items in common.
    assert "scored on different gold data" in compare(organiser, first, dev_run)
    test.results_published = True
    with committing():
        test.save()
    # Not while the test phase takes runs: a run submitted now would get per-item test scores.
    assert "<polyline" not in compare(alice, first, second)
    test.ends_at = timezone.now()
    with committing():
        test.save()
    page = compare(alice, first, second)
    a, b = vectors_of(first)["quality.A.rsnod"], vectors_of(second)["quality.A.rsnod"]
    assert summary(page)[3] == f"{a.mean():.4f} / {b.mean():.4f}"
    assert np.isfinite(a).all()
