"""The judging page in a real browser at a phone's width (issue 40.2): a key per answer, Enter
saves and shows the next item, Backspace goes back with the answer saved; the page is no wider
than the phone. The answer is read back from the database, not from the page."""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_browser import browser  # noqa: F401 - the fixture, shared

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def judging(transactional_db: Any, live_server: Any) -> tuple[str, int]:
    import orjson
    from django.contrib.auth import get_user_model

    from campaigns.assignment import open_campaign
    from campaigns.building import Plan, create_campaign
    from tasks.organising import create_task
    from tests.campaign_world import dialogues

    get_user_model().objects.create_user("carol", password="carol-pass-1")
    task = create_task("keys-task", "stc3", "Keys")
    campaign = create_campaign(task, Plan(name="keys", kind="dialogues", per_item=1, assessors=["carol"],
                                          dialogues=orjson.dumps(dialogues(2))))
    open_campaign(campaign)
    return live_server.url, campaign.pk


def test_keys_save_an_answer_and_go_back_to_it_on_a_phone(judging: tuple[str, int], browser: Any) -> None:  # noqa: F811
    url, campaign = judging
    page = browser.new_context(viewport={"width": 390, "height": 900}).new_page()
    page.goto(f"{url}/accounts/login/")
    page.fill("#id_username", "carol")
    page.fill("#id_password", "carol-pass-1")
    page.click("form.stacked button[type=submit]")
    page.goto(f"{url}/campaigns/{campaign}/judge/")
    turns = page.locator("fieldset.judge-field[data-field^=nugget]").count()
    # Each turn's first label (CNUG0 or HNUG), then A = 2 (key 5), E = 0 (key 3), S = -2 (key 1).
    for key in ["1"] * turns + ["5", "3", "1"]:
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_url("**?at=*")
    assert "1 judged" in page.inner_text("#progress")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.keyboard.press("Backspace")
    page.wait_for_selector("text=this item's answer is saved")
    assert page.eval_on_selector("input[name=A]:checked", "e => e.value") == "2"
    page.context.close()
    from concurrent.futures import ThreadPoolExecutor

    from campaigns.models import Judgement

    # Read in a thread of its own: Playwright's event loop runs in this one, where Django refuses queries.
    with ThreadPoolExecutor(1) as pool:
        judgement = pool.submit(lambda: Judgement.objects.get()).result()
    assert judgement.values["quality"] == {"A": 2, "E": 0, "S": -2}
    assert judgement.values["nugget"][:2] == ["CNUG0", "HNUG"] and judgement.seconds is not None
