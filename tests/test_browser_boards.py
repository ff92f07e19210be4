"""The public, a participant and an organiser in a real browser at 1366 px and on a phone (390 px):
the board, the statistics page, a run page and a comparison, the preview of the final results
and the confirmations (issue 17, items 3 to 6 and 8).

Debian's chromium through Playwright against the live server, on the task of ``tests.ux_world``
(three phases, four teams, one with a Chinese name). Every page must fit its width (the page
never scrolls sideways; wide tables and charts scroll inside their box). With
``EVALSERVER_SCREENSHOTS=<folder>`` each page is also saved there at both widths, for a person to
look at.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest

from tests.test_browser import browser  # noqa: F401 - the chromium fixture
from tests.ux_world import PASSWORD, SLUG

pytestmark = pytest.mark.browser

WIDTHS = (1366, 390)
SCREENSHOTS = os.environ.get("EVALSERVER_SCREENSHOTS", "")


@pytest.fixture
def ux(live_server: Any, settings: Any) -> dict[str, Any]:
    """The task, built (and its numbers read) before Playwright's event loop starts: Django refuses
    database calls from the thread that runs it."""
    from tests.ux_world import build

    world = build(dev_dialogues=60, test_dialogues=80, live_subset=30, permutations=200)
    return {"world": world, "runs": {name: run.pk for name, run in world.runs.items()},
            "dev_board": read_json(f"{live_server.url}/api/v1/tasks/{SLUG}/leaderboard/?phase=dev"),
            "specs": [spec.key for spec in world.task.measure_specs()],
            "official": [spec.column_title for spec in world.task.measure_specs() if spec.official]}


def read_json(url: str) -> dict[str, Any]:
    with urlopen(url, timeout=15) as response:
        return json.loads(response.read())


def open_as(browser: Any, base: str, width: int, user: str | None = None) -> Any:  # noqa: F811
    page = browser.new_context(viewport={"width": width, "height": 900}, accept_downloads=True).new_page()
    if user:
        page.goto(f"{base}/accounts/login/")
        page.fill("#id_username", user)
        page.fill("#id_password", PASSWORD)
        page.click("form.stacked button[type=submit]")
        page.wait_for_url(f"{base}/")
    return page


def visit(page: Any, url: str, name: str) -> None:
    """Open a page, check that it fits its width, and save a screenshot if asked to."""
    response = page.goto(url)
    assert response.status == 200, url
    width = page.viewport_size["width"]
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{url} is {overflow} px wider than the {width} px screen"
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}-{width}.png"), full_page=True)


def test_the_public_reads_the_board_and_the_statistics_at_both_widths(ux: dict[str, Any], live_server: Any,
                                                                      browser: Any) -> None:  # noqa: F811
    base = live_server.url
    board = ux["dev_board"]
    best = min(board["runs"], key=lambda run: run["scores"]["measures"]["quality.A.rsnod"])
    for width in WIDTHS:
        page = open_as(browser, base, width)
        visit(page, f"{base}/tasks/{SLUG}/?phase=dev", "board")
        headings = page.eval_on_selector_all("#board thead tr:last-child th a",
                                             "links => links.map(a => a.textContent)")
        assert [heading.rstrip(" ▲▼") for heading in headings] == ["RSNOD", "NMD"] * 3  # official only, by dimension
        first = page.locator("#board tbody tr").first
        assert first.locator("td.run").inner_text().startswith(best["name"])
        value = best["scores"]["measures"]["quality.A.rsnod"]
        assert first.locator("td.num").nth(1).inner_text().startswith(f"{value:.4f}")
        assert "variant: paper" in page.inner_text("#scoring-settings")
        page.click("details.legend summary")
        assert "Root Symmetric Normalised Order-aware Divergence, A (task accomplishment)" in page.inner_text(
            "details.legend")
        if width == 390:
            # The team column folds under the run's name, and rank and run stay put while the scores scroll.
            assert not page.locator("#board th.team").first.is_visible()
            after = page.evaluate("getComputedStyle(document.querySelector('#board tbody td.run'), '::after').content")
            assert after == f'"{best["team"]}"'
            before = page.locator("#board tbody td.run").first.bounding_box()["x"]
            page.evaluate("document.querySelector('.scroll').scrollLeft = 300")
            assert page.locator("#board tbody td.run").first.bounding_box()["x"] == pytest.approx(before, abs=1)
        page.click("text=show all measures")
        page.wait_for_url(re.compile(r"show=all"))
        assert page.locator("#board thead tr:last-child th a").count() == 18
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0

        visit(page, f"{base}/tasks/{SLUG}/statistics/?phase=dev", "statistics")
        assert page.locator("figure.heat-map").count() == 2
        assert page.locator("figure.heat-map").first.locator("g.cell").count() == 18 * 18
        assert page.locator("figure.line-chart polyline").count() == len(ux["specs"])
        assert page.locator("figure.bar-chart rect").count() == 2 * len(ux["specs"]) + 2  # two levels, the legend
        exports = page.locator("table.exports")
        assert exports.locator("a", has_text="Discpower matrix").count() == len(ux["specs"])
        link = exports.locator("a", has_text="run names").last
        link.scroll_into_view_if_needed()
        assert link.is_visible()  # the last export link of the last row is reachable, not cut off
        page.click("figure.heat-map details.values summary >> nth=1")
        assert page.locator("figure.heat-map table").nth(1).is_visible()
        visit(page, f"{base}/tasks/{SLUG}/statistics/quality.A.rsnod/pvalues/?phase=dev", "pvalues")
        assert page.inner_text("h1") == "p-values of A RSNOD"
        page.context.close()


def test_a_participant_reads_a_run_page_downloads_it_and_compares_two_runs(ux: dict[str, Any], live_server: Any,
                                                                            browser: Any) -> None:  # noqa: F811
    base = live_server.url
    run_id, other_id = ux["runs"]["aurora-lstm"], ux["runs"]["aurora-bert"]
    board = ux["dev_board"]
    own = next(run for run in board["runs"] if run["id"] == run_id)
    for width in WIDTHS:
        page = open_as(browser, base, width, "alice")
        visit(page, f"{base}/runs/{run_id}/", "run")
        rows = page.locator("#standing tbody tr")
        assert rows.count() == len(ux["specs"])
        rank = own["ranks"]["quality.A.rsnod"]
        ranked = page.locator("#standing tbody tr").first.locator("td").nth(1).inner_text()
        assert ranked == f"{rank} of {len(board['runs'])}"
        assert page.locator("#per-item table.items tbody tr").count() == 60
        page.locator("#per-item thead a", has_text="E NMD").click()
        # Sorting is a link to the server: read the cells only once the sorted page has loaded.
        page.wait_for_selector("#per-item th.sorted >> text=E NMD (best first)")
        page.wait_for_load_state()  # the sorted page's own load, so every row is there
        # The dialogue, then A, S and E RSNOD and NMD: E NMD is the seventh cell.
        values = [float(cell) for cell in page.eval_on_selector_all(
            "#per-item tbody tr td:nth-child(7)", "cells => cells.map(c => c.textContent)")]
        assert len(values) == 60 and values == sorted(values)  # lower is better: best first
        page.locator("#per-item thead a", has_text="E NMD").click()
        page.wait_for_selector("#per-item th.sorted >> text=E NMD (worst first)")
        page.wait_for_load_state()
        worst = [float(cell) for cell in page.eval_on_selector_all(
            "#per-item tbody tr td:nth-child(7)", "cells => cells.map(c => c.textContent)")]
        assert worst == sorted(values, reverse=True)
        with page.expect_download() as download:
            page.click("text=Download every dialogue's scores (CSV)")
        rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text())))
        assert rows[0] == ["dialogue_id", *ux["specs"]] and len(rows) == 61
        page.select_option("#compare-with", str(other_id))
        page.click(".compare-form button")
        page.wait_for_url(re.compile(rf"/runs/{run_id}/compare/\?with={other_id}"))
        visit(page, page.url, "compare")
        assert page.locator("figure.scatter svg g").count() == 60
        assert page.locator("figure.line-chart polyline").count() == 1
        page.select_option("#compare-measure", "nugget.jsd")
        page.click(".compare-form button")
        page.wait_for_url(re.compile(r"measure=nugget\.jsd"))
        assert page.inner_text("strong").startswith("JSD")
        page.context.close()


def test_an_organiser_previews_and_publishes_the_final_results_and_confirms_a_rescore(
        ux: dict[str, Any], live_server: Any, browser: Any) -> None:  # noqa: F811
    base = live_server.url
    assert read_json(f"{base}/api/v1/tasks/{SLUG}/leaderboard/?phase=final")["runs"] == []
    for width in WIDTHS:
        page = open_as(browser, base, width, "olga")
        visit(page, f"{base}/organiser/{SLUG}/", "dashboard")
        page.click("text=Preview the final results")
        page.wait_for_url(re.compile(r"/preview/"))
        visit(page, page.url, "preview")
        assert page.locator("#board tbody tr").count() == 7  # five test runs and two baselines
        teams = page.eval_on_selector_all(
            "#board tbody td.run", "cells => cells.map(c => [c.closest('tr').querySelector('td.team').innerText, "
                                   "getComputedStyle(c, '::after').content])")
        # At 1366 px in the team column, at 390 px under the run's name.
        assert ("清华对话组", '"清华对话组"' if width == 390 else "none") in [tuple(team) for team in teams]
        visit(page, f"{base}/organiser/{SLUG}/rescore/", "rescore")
        page.context.close()
    page = open_as(browser, base, 1366, "olga")
    page.goto(f"{base}/organiser/{SLUG}/preview/?phase=final")
    page.click("#publish-form button")  # the box is not ticked: the browser does not send the form
    assert "/preview/" in page.url
    assert read_json(f"{base}/api/v1/tasks/{SLUG}/leaderboard/?phase=final")["runs"] == []
    page.check("#publish-form input[name=confirm]")
    page.click("#publish-form button")
    page.wait_for_url(f"{base}/organiser/{SLUG}/")
    assert "now public" in page.inner_text(".messages")
    final = read_json(f"{base}/api/v1/tasks/{SLUG}/leaderboard/?phase=final")
    assert len(final["runs"]) == 7 and final["scope"] == "full"
    page.click("text=Re-score every run…")
    page.wait_for_url(re.compile(r"/rescore/"))
    page.click("#rescore-form button")
    assert "/rescore/" in page.url  # not sent without the tick either
    page.check("#rescore-form input[name=confirm]")
    page.click("#rescore-form button")
    page.wait_for_url(f"{base}/organiser/{SLUG}/")
    # tests/ux_world.py: 7 development and 5 test runs; the two baselines of each of the two gold versions.
    assert "Queued for re-scoring: 12 participants' runs and 4 baselines." in page.inner_text(".messages")
    page.context.close()


@pytest.fixture
def superuser(transactional_db: Any, settings: Any, one_rate_window: None) -> None:
    """Made before Playwright's event loop starts (Django refuses database calls from its thread);
    the sign-in limit counts in one window (tests.conftest.one_rate_window)."""
    from django.contrib.auth import get_user_model

    settings.EVALSERVER_LOGIN_RATE = "3/m"
    get_user_model().objects.create_user("root", password="root-pass-1", is_staff=True, is_superuser=True)


def test_the_admin_sign_in_past_the_limit_says_why_at_both_widths(superuser: None, live_server: Any,
                                                                   browser: Any) -> None:  # noqa: F811
    """Issue 24: the admin's sign-in takes the sign-in limit; past it, its own form with the reason
    (a 429), at 1366 px and on a phone (one address: the phone's attempts are all past it)."""
    base = live_server.url
    for width in WIDTHS:
        page = open_as(browser, base, width)
        statuses = []
        for attempt in range(4):
            page.goto(f"{base}/admin/login/")
            page.fill("#id_username", "root")
            page.fill("#id_password", f"wrong-{width}-{attempt}")
            with page.expect_response(lambda response: response.request.method == "POST") as answer:
                page.click("input[type=submit]")
            statuses.append(answer.value.status)
        assert statuses[-1] == 429, statuses
        # The answer has arrived; wait for the browser to show it before reading the page.
        page.wait_for_selector("text=Too many sign-in attempts")
        text = page.inner_text("body")
        assert "Too many sign-in attempts from your address. Wait a minute and try again." in text
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
        if SCREENSHOTS:
            Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(SCREENSHOTS) / f"admin-login-limited-{width}.png"), full_page=True)
