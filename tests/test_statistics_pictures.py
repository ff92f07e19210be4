"""The statistics page's pictures against numbers computed here: the Kendall's tau heat map
(cells = stored tau = scipy's tau-b of the run means), the ASL curves (= the sorted p-values of
every run pair, recomputed with the core from the per-dialogue matrix), discriminative power as
bars, and human names instead of measure keys in everything a reader sees."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
from django.test import Client
from scipy.stats import kendalltau

from leaderboard.models import TaskStatistics
from scoring import stats
from tests.conftest import World
from tests.test_statistics_pages import board, matrix_of, submit  # noqa: F401 - the fixture and its helpers

CELL = re.compile(r'<g class="cell"><title>(?P<a>[^<]+?) and (?P<b>[^<]+?): Kendall&#x27;s tau = (?P<tau>-?[0-9.]+)'
                  r'; 95% interval \[(?P<low>-?[0-9.]+), (?P<high>-?[0-9.]+)\]</title>')


def figure(page: str, caption_start: str) -> str:
    """The <figure> whose caption starts with ``caption_start``."""
    start = page.index(f"<figcaption>{caption_start}")
    return page[page.rindex("<figure", 0, start):page.index("</figure>", start)]


def visible_text(page: str) -> str:
    """What a reader sees: the page without tags, attributes, scripts and tooltips."""
    page = re.sub(r"<(script|style|title)\b.*?</\1>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@pytest.mark.django_db
def test_the_tau_heat_map_holds_the_stored_tau_of_every_pair(board: World) -> None:  # noqa: F811
    record = TaskStatistics.objects.get(task=board.task, phase=None)
    specs = {spec.title: spec for spec in board.task.measure_specs()}
    page = Client().get(f"/tasks/{board.task.slug}/statistics/").content.decode()
    for group in ("quality", "nugget"):
        title = {"quality": "Dialogue quality (DQ)", "nugget": "Nugget detection (ND)"}[group]
        heat = figure(page, f"{title}: Kendall&#x27;s tau between measures")
        cells = {(specs[html.unescape(m["a"])].key, specs[html.unescape(m["b"])].key): m.groupdict()
                 for m in CELL.finditer(heat)}
        stored = record.meta[group]["kendall_tau"]
        keys = [spec.key for spec in board.task.measure_specs() if spec.group == group]
        assert len(stored) == len(keys) * (len(keys) - 1) // 2
        assert len(cells) == 2 * len(stored)  # both halves of the matrix, the diagonal apart
        run_ids = record.measure(keys[0]).summary["run_ids"]
        means = {key: matrix_of(board, key, run_ids).mean(axis=0) for key in keys}
        for tau in stored:
            for pair in ((tau["a"], tau["b"]), (tau["b"], tau["a"])):
                cell = cells[pair]
                assert float(cell["tau"]) == pytest.approx(tau["tau"], abs=5e-4)
                assert (float(cell["low"]), float(cell["high"])) == pytest.approx((tau["low"], tau["high"]), abs=5e-4)
            # The stored tau is Kendall's tau-b of the two measures' run means (both lower is better).
            assert tau["tau"] == pytest.approx(kendalltau(means[tau["a"]], means[tau["b"]]).statistic, abs=1e-12)
        # The diagonal says 1 and every value is also in the table for screen readers.
        drawing = heat[:heat.index("<details")]
        assert drawing.count("Kendall&#x27;s tau = 1.000; the same measure</title>") == len(keys)
        assert 'role="img"' in heat and "<table" in heat


@pytest.mark.django_db
def test_the_asl_curves_are_the_sorted_p_values_of_every_run_pair(board: World) -> None:  # noqa: F811
    from leaderboard.statistics_pages import _asl_curves
    from tasks import access

    record = TaskStatistics.objects.get(task=board.task, phase=None)
    keys = [spec.key for spec in board.task.measure_specs()]
    run_ids = record.measure("nugget.jsd").summary["run_ids"]
    expected = {}
    for key in keys:
        matrix = matrix_of(board, key, run_ids)
        result = stats.randomised_tukey_hsd({key: matrix}, n_permutations=record.permutations,
                                            seed=record.seed)[key]
        expected[key] = sorted(result.pvalues[i, j] for i in range(5) for j in range(i + 1, 5))
    from leaderboard.board import get_board

    view = access.board_access(board.alice, board.task, None)
    curves = _asl_curves(view, get_board(board.task, None, False), record, keys)
    assert curves == expected  # exact: the same counts give the same floats

    page = Client().get(f"/tasks/{board.task.slug}/statistics/").content.decode()
    chart = figure(page, "Nugget detection (ND)</figcaption>")
    ticks = {label: float(y) for y, label in re.findall(r'y="([0-9.]+)" dy="4" class="tick end">([0-9.]+)<', chart)}
    zero, one = ticks["0.00"], ticks["1.00"]
    jsd = board.task.measure_specs(["nugget.jsd"])[0]
    title = re.escape(html.escape(jsd.title))
    polyline = re.search(rf"<title>{title} \(10 points\)</title><polyline points=\"([^\"]+)\"", chart).group(1)
    ys = [float(point.split(",")[1]) for point in polyline.split()]
    assert [(zero - y) / (zero - one) for y in ys] == pytest.approx(expected["nugget.jsd"], abs=1e-4)
    assert "run pairs sorted by p-value (10 pairs)" in chart


@pytest.mark.django_db
def test_discriminative_power_is_drawn_as_bars_of_the_stored_shares(board: World) -> None:  # noqa: F811
    record = TaskStatistics.objects.get(task=board.task, phase=None)
    page = Client().get(f"/tasks/{board.task.slug}/statistics/").content.decode()
    bars = figure(page, "Share of run pairs significantly different")
    for spec in board.task.measure_specs():
        meta = record.meta[spec.group]["measures"][spec.key]
        for level, suffix in ((0.05, "05"), (0.01, "01")):
            share = meta[f"discriminative_power_{suffix}"]
            assert f"<title>{html.escape(spec.title)}, pairs with p &lt; {level:g}: {share:.1%}</title>" in bars


@pytest.mark.django_db
def test_readers_see_measure_names_not_keys_and_every_export_link(board: World) -> None:  # noqa: F811
    client = Client()
    pages = [client.get(f"/tasks/{board.task.slug}/statistics/").content.decode(),
             client.get(f"/tasks/{board.task.slug}/statistics/quality.S.nmd/pvalues/").content.decode(),
             client.get(f"/tasks/{board.task.slug}/?show=all").content.decode()]
    for page in pages:
        text = visible_text(page)
        leftovers = [spec.key for spec in board.task.measure_specs() if spec.key in text]
        assert leftovers == [], leftovers
    assert "p-values of S NMD" in visible_text(pages[1])
    statistics = pages[0]
    exports = statistics[statistics.index('id="exports"'):]
    for spec in board.task.measure_specs():
        for kind in ("pvalues.txt", "pvalues.csv", "matrix.csv", "matrix.txt", "runs.txt"):
            assert f"/statistics/{spec.key}/{kind}" in exports
    # The settings the runs were scored with are named on the page.
    assert "variant: paper (the overview papers' formulas)" in visible_text(statistics)


@pytest.mark.django_db
def test_a_measure_where_higher_is_better_gets_its_heat_map_sign_from_its_direction(board: World,  # noqa: F811
                                                                                    monkeypatch) -> None:
    """Kendall's tau compares rankings best first: declared higher-is-better, RSNOD ranks the runs
    the other way round and its cells against the other DQ measures turn negative."""
    from dataclasses import replace

    from leaderboard.statistics import compute_task_statistics
    from scoring.kinds.stc3.measures import MEASURES

    monkeypatch.setitem(MEASURES, "rsnod", replace(MEASURES["rsnod"], lower_is_better=False))
    compute_task_statistics(board.task.pk)
    page = Client().get(f"/tasks/{board.task.slug}/statistics/").content.decode()
    heat = figure(page, "Dialogue quality (DQ): Kendall&#x27;s tau between measures")
    specs = {spec.title: spec.key for spec in board.task.measure_specs()}
    cells = {(specs[html.unescape(m["a"])], specs[html.unescape(m["b"])]): float(m["tau"]) for m in CELL.finditer(heat)}
    record = TaskStatistics.objects.get(task=board.task, phase=None)
    run_ids = record.measure("quality.A.rsnod").summary["run_ids"]
    rsnod = matrix_of(board, "quality.A.rsnod", run_ids).mean(axis=0)
    nmd = matrix_of(board, "quality.A.nmd", run_ids).mean(axis=0)
    expected = kendalltau(-rsnod, nmd).statistic  # best first: the highest RSNOD against the lowest NMD
    assert expected < 0
    assert cells[("quality.A.rsnod", "quality.A.nmd")] == pytest.approx(expected, abs=5e-4)
    assert np.isclose(cells[("quality.A.nmd", "quality.S.nmd")], kendalltau(
        nmd, matrix_of(board, "quality.S.nmd", run_ids).mean(axis=0)).statistic, atol=5e-4)


@pytest.mark.django_db
def test_the_pictures_are_drawn_once_per_computation_and_again_for_a_new_one(board: World, monkeypatch) -> None:  # noqa: F811
    """The charts were drawn at every request (about 100 ms of a statistics page); they are kept
    with the board version and the stored computation, so a new run's statistics draw new ones."""
    from leaderboard import statistics_pages

    real, drawn = statistics_pages._statistics_charts, []
    monkeypatch.setattr(statistics_pages, "_statistics_charts",
                        lambda *args: drawn.append(args[2].generation) or real(*args))
    url = f"/tasks/{board.task.slug}/statistics/"
    first = Client().get(url).content.decode()
    second = Client().get(url).content.decode()
    assert len(drawn) == 1 and first == second
    assert "run pairs sorted by p-value (10 pairs)" in first
    submit(board, board.bob, 0.3, 4, "fourth")  # sync statistics: a new computation over 6 runs
    third = Client().get(url).content.decode()
    assert len(drawn) == 2 and drawn[1] > drawn[0]
    assert "run pairs sorted by p-value (15 pairs)" in third


@pytest.mark.django_db
def test_the_pictures_markup_is_rendered_once_with_them(board: World) -> None:  # noqa: F811
    """The charts' markup is kept with them: the chart templates rendered it at every request (a
    heat map is some 2,000 numbers through the template engine, most of the page's time). The
    page shows what the chart templates make of the charts, as its ``include`` did."""
    from django.template.loader import render_to_string

    url = f"/tasks/{board.task.slug}/statistics/"
    first, second = Client().get(url), Client().get(url)
    charts = {template.name for template in first.templates if template.name.startswith("leaderboard/charts/")}
    assert charts == {f"leaderboard/charts/{name}.html" for name in ("bar_chart", "line_chart", "heat_map")}
    assert not [template.name for template in second.templates if template.name.startswith("leaderboard/charts/")]
    page = second.content.decode()
    assert first.content.decode() == page
    for item in second.context["heat_maps"]:
        assert render_to_string("leaderboard/charts/heat_map.html", {
            "chart": item["chart"], "caption": f"{item['title']}: Kendall's tau between measures",
            "label": f"Heat map of Kendall's tau between the measures of {item['title']}"}) in page
    assert second.context["asl_charts"] and all(item["html"] in page for item in second.context["asl_charts"])
