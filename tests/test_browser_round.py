"""An organiser runs a round in a real browser (Debian's chromium through Playwright) at 1366 px
and on a 390 px phone, from the dashboard alone: the task's settings and terms, a co-organiser, a
gold version, a phase, a data file, a team approved, a run withdrawn, a publication from the
preview, an announcement and a message to every participant. No admin page is opened, no page is
wider than the screen, and every step's page is photographed (to ``EVALSERVER_SHOTS_DIR`` when
set, for a person to look at)."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import World, run_bytes
from tests.test_browser import browser  # noqa: F401 - the fixture, shared

pytestmark = pytest.mark.browser


@pytest.fixture
def round_start(world: World, live_server: Any, tmp_path: Path) -> dict[str, Any]:
    """Two teams with a scored run each, a team waiting for approval and a would-be co-organiser
    (made before Playwright's event loop starts: the database is not reachable from inside it)."""
    from django.utils import timezone

    from tasks import submissions
    from tasks.models import Team

    users = type(world.alice)
    users.objects.create_user("carol", "carol@uni.example", "carol-pass-1")
    dan = users.objects.create_user("dan", "dan@cygnus.example", "dan-pass-1")
    Team.objects.create(name="Cygnus", slug="cygnus", approved=False).members.add(dan)
    for user, address, seed in ((world.alice, "alice@aurora.example", 1), (world.bob, "bob@borealis.example", 2)):
        user.email = address
        user.save(update_fields=["email"])
        submissions.submit_run(world.task, user, submissions.Submission(
            content=run_bytes(world.gold, seed=seed), filename="r.json", name=f"{user.username}-run"))
    gold = tmp_path / "test-gold.json"
    gold.write_bytes(orjson.dumps(world.gold))
    guide = tmp_path / "annotation guide.txt"
    guide.write_text("How the annotators labelled the dialogues.\n" * 20)
    now = timezone.now()
    return {"url": live_server.url, "gold": gold, "guide": guide,
            "starts": (now - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M"),
            "ends": (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")}


def shots_dir(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("EVALSERVER_SHOTS_DIR") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.parametrize("width", [1366, 390])
def test_an_organiser_runs_a_round_from_the_dashboard_without_the_admin(
        round_start: dict[str, Any], browser: Any, width: int, tmp_path: Path) -> None:  # noqa: F811
    base = round_start["url"]
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    visited: list[str] = []
    page.on("framenavigated", lambda frame: visited.append(frame.url) if frame == page.main_frame else None)
    folder = shots_dir(tmp_path)
    problems: list[str] = []
    step = [0]

    def look(name: str, said: str | None = None) -> None:
        """The step's page: its message, no sideways scrolling, and its picture."""
        step[0] += 1
        if said is not None:
            assert said in page.inner_text(".messages"), (name, page.inner_text("main") if page.locator("main").count()
                                                          else page.content()[:2000])
        extra = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if extra > 0:
            problems.append(f"{name} at {width} px: {extra} px wider than the screen")
        page.screenshot(path=str(folder / f"round-{width}-{step[0]:02d}-{name}.png"), full_page=True)

    page.goto(f"{base}/accounts/login/?next=/organiser/demo-task/")
    page.fill("#id_username", "olivia")
    page.fill("#id_password", "organiser-pass-1")
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(f"{base}/organiser/demo-task/")
    look("dashboard")

    page.click("#settings-link")
    page.fill("#id_title", "DialEval-5 English")
    page.fill("#id_terms", "Use the test dialogues for this task only.")
    page.check("#id_requires_team_approval")
    page.click("#settings-form button[type=submit]")
    look("settings", "The settings of DialEval-5 English are saved. The terms changed")

    page.fill("#id_who", "carol@uni.example")
    page.click("#add-organiser button[type=submit]")
    look("co-organiser", "carol now organises DialEval-5 English")
    assert "carol" in page.inner_text("#organiser-list")

    page.click("text=Back to the organiser dashboard")
    page.click("text=Load a gold version…")
    page.set_input_files("#id_gold", str(round_start["gold"]))
    page.fill("#id_label", "test")
    page.click("#gold-form button[type=submit]")
    look("gold-version", "Gold version 2 is stored")

    page.click("text=Add a phase…")
    page.fill("#id_name", "test")
    page.select_option("#id_kind", "test")
    page.select_option("#id_gold_version", "2")
    page.fill("#id_starts_at", round_start["starts"])
    page.fill("#id_ends_at", round_start["ends"])
    page.click("#phase-form button[type=submit]")
    look("phase", "The test phase is created")

    page.click("text=Add a data file…")
    page.set_input_files("#id_file", str(round_start["guide"]))
    page.fill("#id_description", "How the annotators labelled the dialogues")
    page.click("#data-file-form button[type=submit]")
    look("data-file", "annotation_guide.txt (860 bytes) is in the whole task's section of the data page.")

    page.click("#pending-teams button")
    look("team-approved", "Team 'Cygnus' is approved and can submit runs.")

    row = page.locator("tr", has_text="bob-run")
    row.locator("details.withdraw summary").click()
    row.locator("details.withdraw input[name=confirm]").check()
    row.locator("details.withdraw button").click()
    look("run-withdrawn", "(bob-run) is withdrawn")

    page.click("#phases >> text=Preview and publish…")
    look("preview")
    page.check("#publish-form input[name=confirm]")
    page.click("#publish-form button")
    look("published", "The results of the test phase are now public")

    page.fill("#announcement-form #id_title", "Results are out")
    page.fill("#announcement-form #id_body", "The test phase's results are on the leaderboard.")
    page.click("#announcement-form button[type=submit]")
    look("announcement", "“Results are out” is posted on the task's overview and in its feed. It is e-mailed to 2")

    page.fill("#message-form #id_subject", "Thank you")
    page.fill("#message-form #id_body", "The workshop papers are due on 1 March.")
    page.check("#message-form #id_confirm")
    page.click("#message-form button[type=submit]")
    look("message", "“Thank you” is on its way to 2 participants, one e-mail each.")

    page.goto(f"{base}/tasks/demo-task/overview/")
    look("overview")
    assert "Results are out" in page.inner_text("#announcements")
    context.close()

    assert not [url for url in visited if "/admin" in url], visited
    assert not problems, problems
    assert all(re.match(re.escape(base), url) for url in visited)


@pytest.mark.parametrize("width", [1366, 390])
def test_a_participant_turns_an_e_mail_off_and_reads_the_announcements(
        round_start: dict[str, Any], browser: Any, width: int, tmp_path: Path) -> None:  # noqa: F811
    base = round_start["url"]
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    folder = shots_dir(tmp_path)
    page.goto(f"{base}/accounts/login/?next=/accounts/account/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pass-1")
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(f"{base}/accounts/account/")
    assert page.is_checked("#id_run_results") and page.is_checked("#id_announcements")
    page.uncheck("#id_phase_reminders")
    page.click("#notification-choices button[type=submit]")
    assert "Your e-mail choices are saved: you get e-mails when a run of your team is scored" in page.inner_text(
        ".messages")
    assert not page.is_checked("#id_phase_reminders") and page.is_checked("#id_run_results")
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    page.screenshot(path=str(folder / f"participant-{width}-account.png"), full_page=True)
    page.goto(f"{base}/tasks/demo-task/overview/")
    assert "No announcements yet." in page.inner_text("#announcements")
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    page.screenshot(path=str(folder / f"participant-{width}-overview.png"), full_page=True)
    feed = page.goto(f"{base}/tasks/demo-task/announcements.atom")
    assert feed.status == 200 and feed.headers["content-type"].startswith("application/atom+xml")
    context.close()
