"""Pages in the reader's words (issue 30): the demo's public pages name papers by authors and year
and symbols in words, never our file names ("seed 003") or the code's symbols (D_phi, MD_diff,
raw setting keys); every count says which runs it covers; a nugget's score is explained on the
page with the context and, once the phase is over, the references.

The expected counts come from the demo's plan (``leaderboard/management/commands/demo.py``: per
phase two runs with both subtasks, one DQ-only, one ND-only, and the two baselines of each gold),
the expected texts from the demo's generated gold (``fixtures.response_demo``), not from the pages.
"""

from __future__ import annotations

import html
import io
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from tests.test_browser import browser  # noqa: F401 - the fixture, shared
from tests.visible_text import visible_text

# Our file names for the papers and the code's symbols: a reader knows neither. The JSON answers
# (the API, format.json) keep their keys, which are names for programs; the papers' file names
# reach no answer at all.
INTERNAL = re.compile(r"[Ss]eed 00\d|[A-Z]+-SPEC\.md|D_phi|MD_diff|MD_same|NS\(T|pooled_rank_resamples|tie_tolerance|"
                      r"n_resamples|project's docs")
FILE_NAMES = re.compile(r"[Ss]eed 00\d|[A-Z]+-SPEC\.md")
LONG_NUMBER = re.compile(r"\d\.\d{7,}")
DEMO_TASKS = ("stc3-demo", "response-demo", "metric-demo")
DIALOGUES = 20  # the demo's --dialogues: the response and metric demos then have 20 contexts per gold


def public_paths(slug: str, groups: list[str], measure: str) -> list[str]:
    """Every page (and the JSON) the public reaches for a demo task, both phases, every tab."""
    paths = [f"/tasks/{slug}/overview/", f"/tasks/{slug}/data/", f"/tasks/{slug}/data/format.json",
             f"/api/v1/tasks/{slug}/leaderboard/"]
    for phase in ("development", "test"):
        paths += [f"/tasks/{slug}/?phase={phase}", f"/tasks/{slug}/?phase={phase}&show=all",
                  f"/tasks/{slug}/statistics/?phase={phase}",
                  f"/tasks/{slug}/statistics/{measure}/pvalues/?phase={phase}",
                  f"/api/v1/tasks/{slug}/leaderboard/?phase={phase}", f"/tasks/{slug}/data/?phase={phase}"]
        paths += [f"/tasks/{slug}/?phase={phase}&tab={group}&show=all" for group in groups]
    return paths


@pytest.fixture
def demo(transactional_db: Any, settings: Any, tmp_path: Path) -> str:
    """The demo as ``dev.py serve`` builds it, smaller (committed: its runs are scored on commit)."""
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("demo", "--dialogues", str(DIALOGUES), "--password", "demo-pass-123", stdout=out)
    return out.getvalue()


def all_public_paths() -> list[str]:
    from tasks.models import Task

    paths = ["/", "/measures/"]
    for slug in DEMO_TASKS:
        task = Task.objects.get(slug=slug)
        specs = task.measure_specs()
        # A measure with per-item statistics (a p-value page): the official one, or the first such
        # (the metrics demo's official figures are correlations over the whole run, without one).
        tested = [spec for spec in specs if spec.headline != "run"]
        official = next((spec.key for spec in tested if spec.official), tested[0].key)
        paths += public_paths(slug, sorted({spec.group for spec in specs}), official)
    return paths


@pytest.mark.slow
def test_the_demos_public_pages_use_the_readers_words_and_say_which_runs_they_count(demo: str) -> None:
    anonymous = Client()
    problems = []
    for path in all_public_paths():
        response = anonymous.get(path)
        body = response.content.decode()
        if response.status_code != 200:
            problems.append(f"{path}: {response.status_code}")
        words = FILE_NAMES if response["Content-Type"].startswith("application/json") else INTERNAL
        found = sorted(set(words.findall(html.unescape(body))))
        if not response["Content-Type"].startswith("application/json"):
            # A number printed with every digit Python has (a range shown as -3.718281828459045)
            # is the code's repr, not a figure rounded for a reader.
            found += sorted(set(LONG_NUMBER.findall(visible_text(body))))
        if found:
            problems.append(f"{path}: {', '.join(found)}")
    assert not problems, "\n".join(problems)

    # The footer's definitions are a link, to a page that has every kind's measures.
    home = anonymous.get("/").content.decode()
    assert '<a href="/measures/">the measures page</a>' in home
    measures = anonymous.get("/measures/").content.decode()
    assert "Takehi" not in measures or "SIGIR-AP 2023" in measures
    assert all(title in measures for title in ("RSNOD", "POSSCORE", "Predictive power"))

    # The metrics demo's settings (preset metric-quick: no interval for the pooled rank correlations,
    # exact ties) in words, where the board printed "pooled_rank_resamples: 0 · tie_tolerance: 0".
    metric = html.unescape(anonymous.get("/tasks/metric-demo/?phase=test").content.decode())
    assert ("pooled Kendall and Spearman: no interval (re-ranking every resample was switched off for this task) "
            "· metric ties: only equal scores are a tie") in metric

    # Counts (the demo's plan): per phase 2 runs with DQ and ND, 1 DQ-only, 1 ND-only, 2 baselines.
    covered = ("6 runs (4 participants' runs and 2 baselines; 5 with Dialogue quality (DQ) scores and 5 with "
               "Nugget detection (ND) scores)")
    assert f"development: {covered}; test: {covered}" in demo
    assert "8 runs and the baselines" not in demo
    statistics = html.unescape(anonymous.get("/tasks/stc3-demo/statistics/?phase=development").content.decode())
    assert f"over {covered} and {DIALOGUES} dialogues" in statistics
    alice = Client()
    assert alice.login(username="alice", password="demo-pass-123")
    from tasks.models import Run

    run = Run.objects.get(task__slug="stc3-demo", phase__name="development", name="aurora-run1")
    page = html.unescape(alice.get(f"/runs/{run.pk}/").content.decode())
    standing = page[page.index('id="standing"'):]
    assert f"which shows {covered}." in standing
    ranks = re.findall(r"<td[^>]*>(\d+) of (\d+)</td>", standing)
    # Every DQ measure ranks the 5 runs with DQ scores (3 participants' runs and the 2 baselines).
    assert ranks and {total for _, total in ranks} == {"5"}


@pytest.mark.slow
def test_a_nugget_score_is_explained_on_the_page_with_the_context_and_references(demo: str) -> None:
    from django.utils import timezone

    from fixtures import response_demo
    from tasks.models import Phase, Run

    # The demo's development gold, made again from its seed (demo: seed 14, "dev-" ids).
    gold = {entry["id"]: entry for entry in response_demo.generate_gold(max(20, DIALOGUES // 5), seed=14,
                                                                        prefix="dev-")}
    run = Run.objects.get(task__slug="response-demo", phase__name="development", name="aurora-strong")
    alice = Client()
    assert alice.login(username="alice", password="demo-pass-123")
    page = html.unescape(alice.get(f"/runs/{run.pk}/").content.decode())
    segments = page[page.index('id="segments"'):page.index("</section>", page.index('id="segments"'))]
    first = re.search(r'<span class="item-id">([^<]+)</span>', segments).group(1)
    entry = gold[first]
    item = segments[segments.index(f'<span class="item-id">{first}</span>'):]
    item = item[:item.index("</details>")]
    # A "Why" that opens on a touch screen (no title needed): each nugget's act, score and parts in words.
    assert "<details class=\"why\"><summary>Why</summary>" in item
    assert "without it the response would score" in item
    assert entry["context"][-1]["text"] in item
    # The development phase is over: the references it was scored against, with their weights.
    for reference in entry["references"]:
        assert reference["text"] in item
        assert f"reference (weight {float(reference.get('weight', 1.0)):g})" in item  # unrated: weight 1
    assert "references it was scored against are shown to" not in segments

    # While a phase takes runs its references stay with the organisers.
    Phase.objects.filter(pk=run.phase_id).update(ends_at=timezone.now() + timezone.timedelta(days=3))
    page = html.unescape(alice.get(f"/runs/{run.pk}/").content.decode())
    assert "(the references it was scored against are shown to your team once the development phase ends" in page
    assert entry["context"][-1]["text"] in page
    assert "reference (weight" not in page
    organiser = Client()
    assert organiser.login(username="organiser", password="demo-pass-123")
    assert all(reference["text"] in html.unescape(organiser.get(f"/runs/{run.pk}/").content.decode())
               for reference in entry["references"])


@pytest.fixture
def demo_pages(demo: str, live_server: Any) -> tuple[str, list[str], list[str]]:
    """The server's address, the demo's public pages and alice's own (made before Playwright's
    event loop starts: the database is not reachable from inside it)."""
    from tasks.models import Run

    pages = [path for path in all_public_paths() if "/api/" not in path and not path.endswith(".json")]
    mine = Run.objects.filter(team__slug="aurora", task__slug__in=DEMO_TASKS).order_by("pk")
    signed_in = ["/team/"] + [f"/runs/{run_id}/" for run_id in mine.values_list("pk", flat=True)]
    first, second = mine.filter(task__slug="response-demo", phase__name="development").values_list("pk", flat=True)[:2]
    signed_in.append(f"/runs/{first}/compare/?with={second}")
    return live_server.url, pages, signed_in


@pytest.mark.browser
@pytest.mark.slow
def test_no_page_of_the_demos_is_wider_than_a_phone(demo_pages: tuple[str, list[str], list[str]],
                                                    browser: Any) -> None:  # noqa: F811
    """At 390 px (a phone) and 1366 px, no page of the three demo tasks scrolls sideways as a
    whole: wide tables scroll in their own box, the interval chart has a phone layout, and My
    team's runs stack (813 px wide before)."""
    url, pages, signed_in = demo_pages
    problems = []
    for width in (390, 1366):
        context = browser.new_context(viewport={"width": width, "height": 900})
        page = context.new_page()
        for path in pages:
            page.goto(url + path)
            wide = page.evaluate("document.documentElement.scrollWidth")
            if wide > width:
                problems.append(f"{path} at {width} px: {wide} px wide")
        page.goto(f"{url}/accounts/login/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", "demo-pass-123")
        page.click("form.stacked button[type=submit]")
        for path in signed_in:
            page.goto(url + path)
            wide = page.evaluate("document.documentElement.scrollWidth")
            if wide > width:
                problems.append(f"{path} (alice) at {width} px: {wide} px wide")
        context.close()
    assert not problems, "\n".join(problems)


# Issue 37, item 8: what no page may show its reader (the visible text and the tooltips; a fold-out
# of versions and checksums is for those who open it): a path of our repository, a package pin or
# checksum, and the words of the code.
# A path of ours: a folder and a file of code, documentation or data, or a file of code or
# documentation by itself (a .json name alone is a data file's: the reader's upload or download).
SOURCE_PATH = re.compile(r"\b[\w.-]+/[\w./-]*\.(?:py|md|json)\b|\b[\w-]+\.(?:py|md)\b")
# Files the server itself serves under these names, and the organisers' command on the server.
SERVED = {"evalserver_cli.py", "manage.py"}
# A version pin or a checksum: hex of 12 digits or more with a letter in it (an STC-3 dialogue id
# is 16 decimal digits).
PIN = re.compile(r"==|\b(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b|\bsha256\b")
JARGON = re.compile(r"ES_E|added by vBLEU|rho from the original|\brho\b|origin pool or parrot|"
                    r"\{[#%{]|[#%}]\}")  # and template syntax that reached the page (a comment on two lines)


def walked_paths(slugs: tuple[str, ...]) -> list[str]:
    """Every HTML page of the demo a role may reach: the public pages, every run's page and a
    comparison, the team and account pages, the upload pages, the organisers' pages."""
    from tasks.models import Run

    paths = [path for path in all_public_paths() if "/api/" not in path and not path.endswith(".json")]
    paths += ["/team/", "/team/join/", "/accounts/account/", "/accounts/login/", "/accounts/signup/"]
    for slug in slugs:
        paths += [f"/tasks/{slug}/upload/", f"/organiser/{slug}/", f"/organiser/{slug}/preview/",
                  f"/organiser/{slug}/gold/", f"/organiser/{slug}/phase/", f"/organiser/{slug}/vbleu/",
                  f"/organiser/{slug}/encoder/"]
        runs = list(Run.objects.filter(task__slug=slug).order_by("pk").values_list("pk", "phase_id"))
        paths += [f"/runs/{run_id}/" for run_id, _ in runs]
        paths += [f"/runs/{first}/compare/?with={second}" for (first, phase), (second, other) in zip(runs, runs[1:])
                  if phase == other]
    # Annotation campaigns (issue 40): the organisers' pages and the assessors' judging pages.
    from campaigns.models import Campaign

    paths.append("/judging/")
    for campaign in Campaign.objects.select_related("task").filter(task__slug__in=slugs):
        paths += [f"/organiser/{campaign.task.slug}/campaigns/", f"/campaigns/{campaign.pk}/",
                  f"/campaigns/{campaign.pk}/judge/"]
    return paths


@pytest.mark.slow
def test_no_page_shows_a_source_path_a_package_pin_or_the_codes_words_to_any_role(demo: str) -> None:
    call_command("demo_campaigns", stdout=io.StringIO())  # as dev.py serve runs it after the demo
    clients = {"anonymous": Client()}
    for username in ("alice", "bob", "organiser"):
        clients[username] = Client()
        assert clients[username].login(username=username, password="demo-pass-123")
    problems, walked = [], 0
    for path in walked_paths(DEMO_TASKS):
        for role, client in clients.items():
            response = client.get(path)
            if response.status_code != 200 or not response["Content-Type"].startswith("text/html"):
                continue
            walked += 1
            text = visible_text(response.content.decode())
            for name, pattern in (("source path", SOURCE_PATH), ("pin", PIN), ("jargon", JARGON)):
                found = sorted({match.group(0) for match in pattern.finditer(text)} - SERVED)
                if found:
                    problems.append(f"{role} {path}: {name} {', '.join(found[:5])}")
    assert walked > 200
    assert not problems, f"{len(problems)} page-hit(s):\n" + "\n".join(problems)
