"""The task overview, data section, sign-up and home pages in a real browser (Debian's chromium
through Playwright) at 1366 px and on a 390 px phone: nothing wider than the screen, inputs of
every type drawn alike, and a participant who accepts the terms and downloads the data."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest

from tests.conftest import World
from tests.test_browser import browser, signed_in_page  # noqa: F401 - the fixture, shared

pytestmark = pytest.mark.browser

WIDTHS = (1366, 390)
SLUG = "demo-task"


@pytest.fixture
def dressed(world: World, live_server: Any) -> str:
    """The demo task with everything the pages show: long texts, phases, terms, an organiser's file
    (made before Playwright's event loop starts: the database is not reachable from inside it)."""
    import io

    from django.utils import timezone

    from tasks.datafiles import add_data_file
    from tasks.models import Phase

    task = world.task
    task.description = ("Participants estimate, for each customer-helpdesk dialogue, how 19 annotators distributed "
                        "their quality labels and nugget types; " * 3).strip()
    task.rules = "One primary run per team.\n\nNo manual annotation of the test dialogues."
    task.contact = "organisers@example.org"
    task.citation = ("@inproceedings{zeng2020overview,\n  title = {Overview of the NTCIR-15 Dialogue Evaluation "
                     "(DialEval-1) Task with a very long title that does not fit a phone},\n  year = {2020}\n}")
    task.terms = "Use the test dialogues for this task only."
    task.save()
    now = timezone.now()
    Phase.objects.create(task=task, name="development", gold_version=world.gold_version,
                         starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=10), daily_quota=5)
    Phase.objects.create(task=task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                         starts_at=now + timedelta(days=11), ends_at=now + timedelta(days=20), live_subset_size=12,
                         data_registered_only=True)
    add_data_file(task, "annotation-guidelines.txt", io.BytesIO(b"How annotators labelled.\n" * 40),
                  description="The annotators' guidelines, a long description " * 4)
    return live_server.url


PAGES = ["/", f"/tasks/{SLUG}/overview/", f"/tasks/{SLUG}/data/", f"/tasks/{SLUG}/data/?phase=test",
         f"/accounts/signup/?task={SLUG}", "/accounts/login/", "/accounts/password-reset/"]
SIGNED_IN_PAGES = [f"/tasks/{SLUG}/upload/", f"/tasks/{SLUG}/overview/", f"/tasks/{SLUG}/data/"]

STYLE = """(selector) => {
  const style = getComputedStyle(document.querySelector(selector));
  return ['borderTopWidth', 'borderTopStyle', 'borderTopColor', 'borderRadius', 'paddingTop', 'paddingLeft',
          'fontSize', 'fontFamily', 'backgroundColor'].map(name => style[name]);
}"""


def test_no_page_is_wider_than_the_screen(dressed: str, browser: Any) -> None:  # noqa: F811
    problems = []
    for width in WIDTHS:
        anonymous = browser.new_context(viewport={"width": width, "height": 900})
        member = browser.new_context(viewport={"width": width, "height": 900})
        signed_in_page(member, dressed).close()
        for context, paths in ((anonymous, PAGES), (member, SIGNED_IN_PAGES)):
            page = context.new_page()
            for path in paths:
                response = page.goto(dressed + path)
                assert response.status == 200, path
                extra = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
                if extra > 0:
                    problems.append(f"{path} at {width} px: {extra} px wider than the screen")
            page.close()
        anonymous.close()
        member.close()
    assert not problems, problems


def test_inputs_of_every_type_look_alike(dressed: str, browser: Any) -> None:  # noqa: F811
    page = browser.new_page()
    page.goto(f"{dressed}/accounts/signup/?task={SLUG}")
    assert page.evaluate(STYLE, "#id_email") == page.evaluate(STYLE, "#id_username")
    assert page.evaluate(STYLE, "#id_password1") == page.evaluate(STYLE, "#id_username")
    page.close()
    page = signed_in_page(browser, dressed)
    page.goto(f"{dressed}/tasks/{SLUG}/upload/")
    assert page.evaluate(STYLE, "#id_priority") == page.evaluate(STYLE, "#id_name")
    page.close()
    with urlopen(f"{dressed}/favicon.ico", timeout=15) as response:
        assert response.headers["Content-Type"] == "image/x-icon"
        assert response.read() == (Path(__file__).resolve().parent.parent / "static" / "favicon.ico").read_bytes()


def test_a_participant_accepts_the_terms_and_downloads_the_data(dressed: str, browser: Any,  # noqa: F811
                                                                tmp_path: Path) -> None:
    page = signed_in_page(browser, dressed)
    page.goto(f"{dressed}/tasks/{SLUG}/overview/")
    assert page.inner_text("#phase-2 .tag.state") == "upcoming"
    page.fill("#id_affiliation", "Waseda University")
    page.check("#terms-form input[name=accept]")
    page.click("#terms-form button[type=submit]")
    page.wait_for_selector("#terms-accepted")
    assert "You accepted these terms on" in page.inner_text("#terms-accepted")

    page.click("nav.task-nav >> text=Data")
    page.wait_for_url(f"{dressed}/tasks/{SLUG}/data/")
    with page.expect_download() as caught:
        page.click("#file-participant-datajson a")
    download = caught.value
    assert download.suggested_filename == f"{SLUG}-development-participant-data.json"
    saved = tmp_path / "participant-data.json"
    download.save_as(str(saved))
    data = json.loads(saved.read_text())
    assert len(data) == 30 and set(data[0]) == {"id", "turns"}
    assert "annotations" not in saved.read_text()

    page.click(".tabs >> text=test")
    page.wait_for_selector("#data-reason")
    assert "The data of the test phase is published when the phase opens" in page.inner_text("#data-reason")
    assert page.locator("#file-participant-datajson a").count() == 0
    assert page.locator("#file-formatjson a").count() == 1
    page.close()
