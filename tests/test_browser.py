"""A participant in a real browser: sign in, upload a run through the web form, follow it to
"done", and find it on the public leaderboard with the API's numbers.

Drives Debian's chromium (``apt-get install chromium``) through Playwright against the live
server, with the embedded default: scoring in-process, whichever database the suite uses.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

import pytest

from tests.conftest import IN_CI, World, run_bytes

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
RUN_NAME = "aurora-web-form"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason}, and CI=true forbids skipping")
    pytest.skip(reason)


@pytest.fixture
def browser() -> Any:
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def signed_in_page(browser: Any, base_url: str) -> Any:
    """A new page signed in as alice through the sign-in form."""
    page = browser.new_page()
    page.goto(f"{base_url}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pass-1")
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(f"{base_url}/")
    return page


def leaderboard(base_url: str, slug: str) -> dict[str, Any]:
    with urlopen(Request(f"{base_url}/api/v1/tasks/{slug}/leaderboard/", headers={"Accept": "application/json"}),
                 timeout=15) as response:
        return json.loads(response.read())


# The cell under a column header, found by the header's sort link rather than by position, in
# the row whose run name matches. The first text node is the value; the rank follows in <sub>.
BOARD_CELL = """([runName, key]) => {
  const headers = [...document.querySelectorAll('#board thead tr:last-child th')];
  const column = headers.findIndex(th => {
    const link = th.querySelector('a');
    return link && new URLSearchParams(link.getAttribute('href').replace(/^\\?/, '')).get('sort') === key;
  });
  const row = [...document.querySelectorAll('#board tbody tr')]
    .find(tr => tr.cells[2].textContent.trim() === runName);
  if (column < 0 || !row) return null;
  return {team: row.cells[1].textContent.trim(), value: row.cells[column].firstChild.textContent.trim()};
}"""


def test_a_participant_uploads_through_the_web_form_and_finds_the_run_on_the_board(
        world: World, live_server: Any, browser: Any, tmp_path: Path) -> None:
    run_file = tmp_path / f"{RUN_NAME}.json"
    run_file.write_bytes(run_bytes(world.gold, noise=0.2, seed=21))
    slug = world.task.slug
    page = signed_in_page(browser, live_server.url)
    assert "Sign out (alice)" in page.inner_text("header")

    page.goto(f"{live_server.url}/tasks/{slug}/upload/")
    page.set_input_files("#id_file", str(run_file))
    page.fill("#id_name", RUN_NAME)
    page.fill("#id_description", "Gold mixed with 20% noise, uploaded from a browser.")
    assert page.is_checked("#id_public")
    page.click("#upload-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run_id = int(re.search(r"/runs/(\d+)/$", page.url).group(1))
    assert f"Run '{RUN_NAME}' was accepted" in page.inner_text(".messages")
    # The page polls the API while the run is queued or scoring and reloads when it finishes.
    page.wait_for_selector('#run-status[data-status="done"]', timeout=30_000)
    assert page.inner_text("#run-status") == "done"
    assert page.inner_text("#run-errors").strip() == ""

    entries = [entry for entry in leaderboard(live_server.url, slug)["runs"] if entry["id"] == run_id]
    assert len(entries) == 1
    rsnod = {key.split(".")[1]: value for key, value in entries[0]["scores"]["measures"].items()
             if key.startswith("quality.") and key.endswith(".rsnod")}
    assert set(rsnod) == {"A", "S", "E"}

    page.goto(f"{live_server.url}/tasks/{slug}/")
    for dim, value in rsnod.items():
        cell = page.evaluate(BOARD_CELL, [RUN_NAME, f"quality.{dim}.rsnod"])
        assert cell is not None, f"no {RUN_NAME} row or no quality.{dim}.rsnod column on the task page"
        assert cell == {"team": "Aurora", "value": f"{value:.4f}"}, dim
    screenshot = tmp_path / "task-page.png"
    page.screenshot(path=str(screenshot), full_page=True)
    content = screenshot.read_bytes()
    assert content.startswith(PNG_SIGNATURE) and len(content) > 1000
    page.close()


@pytest.fixture
def queued_run(world: World, live_server: Any) -> Any:
    """A run waiting for a worker (no job was sent), made before Playwright's event loop starts."""
    from tasks import runfiles
    from tasks.models import Run

    content = run_bytes(world.gold, noise=0.4, seed=5)
    return Run.objects.create(task=world.task, team=world.alice.teams.get(), submitted_by=world.alice,
                              name="waiting-run", file_sha256=runfiles.store_run_file(content),
                              file_size=len(content), parts=["nugget", "quality"],
                              gold_version=world.gold_version)


def test_the_run_page_follows_a_queued_run_until_it_is_done(live_server: Any, queued_run: Any, browser: Any) -> None:
    """The run page's script polls the API and shows the scores once a worker has finished."""
    from tasks import jobs

    run = queued_run
    page = signed_in_page(browser, live_server.url)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    assert page.text_content("#run-status") == "queued"
    assert page.locator("#run-script").count() == 1
    # What a worker would do while the page is open. In another thread: Playwright's event loop
    # in this one makes Django refuse database calls here.
    outcome: list[str] = []

    def work() -> None:
        from django.db import connection

        outcome.append(jobs.score_run(run.pk))
        connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(timeout=30)
    assert outcome == ["done"]
    page.wait_for_selector('#run-status[data-status="done"]', timeout=20_000)
    page.wait_for_selector("#run-scores table", timeout=20_000)
    assert page.locator("#run-script").count() == 0  # the reloaded page stops polling
    assert "RSNOD" in page.text_content("#run-scores")
