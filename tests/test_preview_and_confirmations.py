"""Issue 17, item 6: organisers preview the final results (whole-test-set scores, the runs the
public will see) before publishing them, and publishing and re-scoring every run each need a
ticked confirmation, checked by the server (not by a script in the page)."""

from __future__ import annotations

import html
import re
from typing import Any

import orjson
import pytest
from django.test import Client
from django.utils import timezone

from tasks import organising
from tasks.models import AccessLog, Phase, Run, Score
from tests.conftest import World, committing, make_world
from tests.test_run_page import make_phase, signed_in, upload


@pytest.fixture
def phases(db: Any) -> dict[str, Any]:
    """A development phase, a test phase with a live subset and a final phase, both on the test
    gold; test runs of two teams, one hidden by its team."""
    world = make_world(n_dialogues=40, seed=6)
    with committing():
        test_gold = organising.load_gold_version(world.task, orjson.dumps(world.gold), "test.json", label="test")
    dev = make_phase(world, "dev", Phase.DEVELOPMENT, (-5, -3))
    test = make_phase(world, "test", Phase.TEST, (-2, 1), version=test_gold, live_subset_size=12, live_subset_seed=1)
    final = make_phase(world, "final", Phase.FINAL, (1, 9), version=test_gold)
    runs = {name: upload(world, user, noise, seed, name, test, public)
            for user, noise, seed, name, public in ((world.alice, 0.1, 1, "a-best", True),
                                                    (world.alice, 0.2, 2, "a-hidden", False),
                                                    (world.bob, 0.4, 3, "b-run", True))}
    return {"world": world, "dev": dev, "test": test, "final": final, "runs": runs, "gold": test_gold}


BOARD_ROW = re.compile(r'<tr(?: class="baseline")? data-run="(?P<id>\d+)">(?P<cells>.*?)</tr>')


def preview_values(page: str) -> dict[int, list[str]]:
    """Run id -> the score cells of the preview's table (the value without its rank)."""
    table = page[page.index('<table class="board" id="board">'):page.index("</table>")]
    return {int(match["id"]): re.findall(r'<td class="num(?: sorted)?">([0-9.]+)<sub>', match["cells"])
            for match in BOARD_ROW.finditer(table)}


@pytest.mark.django_db
def test_organisers_preview_the_whole_test_set_scores_the_public_will_see(phases: dict[str, Any]) -> None:
    world: World = phases["world"]
    organiser = signed_in(world.organiser)
    page = organiser.get(f"/organiser/{world.task.slug}/preview/").content.decode()  # the final phase by default
    assert "once its results are published: scores on the whole test set" in page
    official = [spec for spec in world.task.measure_specs() if spec.official and spec.group == "quality"]
    public = Run.objects.filter(gold_version=phases["gold"], status=Run.DONE, is_public=True)
    expected = {}
    for run in public:
        measures = Score.objects.get(run=run, scope=Score.FULL, gold_version=phases["gold"]).summary["measures"]
        expected[run.pk] = [f"{measures[spec.key]:.4f}" for spec in official]
    assert preview_values(page) == expected  # the hidden run is not on it, the baselines are
    assert "1 run hidden by its team will stay off it: Aurora/a-hidden." in html.unescape(page)
    # Not the live subset the test board shows now.
    live = Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=test").json()
    assert live["scope"] == "live" and live["runs"][0]["scores"]["n_items"] == 12
    test_preview = organiser.get(f"/organiser/{world.task.slug}/preview/?phase=test").content.decode()
    assert preview_values(test_preview) == expected
    assert "development phase has no final results" in organiser.get(
        f"/organiser/{world.task.slug}/preview/?phase=dev").content.decode()
    assert organiser.get(f"/organiser/{world.task.slug}/preview/?phase=nope").status_code == 404
    for user in (world.alice, world.bob):
        assert signed_in(user).get(f"/organiser/{world.task.slug}/preview/").status_code == 404
    assert Client().get(f"/organiser/{world.task.slug}/preview/").status_code == 302


@pytest.mark.django_db
def test_publishing_needs_the_ticked_confirmation_of_the_preview(phases: dict[str, Any]) -> None:
    world, final, test = phases["world"], phases["final"], phases["test"]
    organiser = signed_in(world.organiser)
    url = f"/organiser/{world.task.slug}/"
    # The test phase still takes runs on the final phase's gold: the preview says so and offers
    # to close it first; a plain publication is refused with the reason.
    page = html.unescape(organiser.get(f"{url}preview/?phase=final").content.decode())
    form = page[page.index('id="publish-form"'):page.index("</form>", page.index('id="publish-form"'))]
    assert 'name="confirm" value="yes" required' in form and 'name="action" value="close-and-publish"' in form
    assert "Close test now and publish" in form
    assert f"test is open for submissions until {test.ends_at:%Y-%m-%d %H:%M} UTC" in re.sub("<[^>]+>", "", page)
    refusal = (f"The results of the final phase cannot be published yet: the phase test (until "
               f"{test.ends_at:%Y-%m-%d %H:%M} UTC) still accept runs on the same gold. Every run submitted after "
               "publication would get its scores on the whole test set and per item, which would turn the test "
               "set into an answer key. Close submissions first (or wait until the phase ends), then publish.")
    assert refusal in form
    with committing():
        answer = organiser.post(url, {"action": "publish", "phase": "final", "confirm": "yes"}, follow=True)
    assert refusal in html.unescape(answer.content.decode())
    final.refresh_from_db()
    test.refresh_from_db()
    assert not final.results_published and test.is_open()
    for data in ({"action": "close-and-publish", "phase": "final"},
                 {"action": "close-and-publish", "phase": "final", "confirm": "on"}):
        with committing():
            answer = organiser.post(url, data, follow=True)
        assert "were not published: tick the confirmation" in html.unescape(answer.content.decode())
        final.refresh_from_db()
        test.refresh_from_db()
        assert not final.results_published and test.is_open()
    assert not AccessLog.objects.filter(what__startswith="published").exists()
    with committing():
        answer = organiser.post(url, {"action": "close-and-publish", "phase": "final", "confirm": "yes"}, follow=True)
    assert ("Submissions to test are closed. The results of the final phase are now public"
            in html.unescape(answer.content.decode()))
    final.refresh_from_db()
    test.refresh_from_db()
    assert final.results_published and not test.is_open() and test.ends_at <= timezone.now()
    assert list(AccessLog.objects.filter(task=world.task).order_by("pk").values_list("what", flat=True)) == [
        f"closed the test phase for submissions at {test.ends_at:%Y-%m-%d %H:%M:%S} UTC",
        "published the results of the final phase"]
    page = organiser.get(f"{url}preview/?phase=final").content.decode()
    assert "are published: everyone sees this board" in page and 'id="publish-form"' not in page
    # Withdrawing needs no confirmation: it hides again.
    with committing():
        organiser.post(f"/organiser/{world.task.slug}/", {"action": "unpublish", "phase": "final"})
    final.refresh_from_db()
    assert not final.results_published


@pytest.mark.django_db
def test_rescoring_every_run_needs_a_ticked_confirmation(phases: dict[str, Any]) -> None:
    world = phases["world"]
    organiser = signed_in(world.organiser)
    url = f"/organiser/{world.task.slug}/rescore/"
    dashboard = organiser.get(f"/organiser/{world.task.slug}/").content.decode()
    assert f'href="{url}">Re-score every run…</a>' in dashboard and "<button>Re-score every run" not in dashboard
    page = organiser.get(url).content.decode()
    everyone = Run.objects.filter(task=world.task, withdrawn_at__isnull=True)
    assert f"{everyone.count()} runs that are not withdrawn ({everyone.filter(is_baseline=True).count()} of them " \
           "baselines)" in page
    assert 'name="confirm" value="yes" required' in page
    before = dict(everyone.values_list("pk", "queued_at"))
    refused = organiser.post(url, {"confirm": "on"})
    assert refused.status_code == 400 and "Nothing was re-scored" in refused.content.decode()
    assert dict(everyone.values_list("pk", "queued_at")) == before
    with committing():
        done = organiser.post(url, {"confirm": "yes", "phase": "test"})
    assert done.status_code == 302
    changed = {pk for pk, at in everyone.values_list("pk", "queued_at") if at != before[pk]}
    assert changed == set(Run.objects.filter(phase=phases["test"]).values_list("pk", flat=True))
    assert AccessLog.objects.filter(what="re-scored 3 runs (test)").exists()
    assert organiser.get(f"{url}?phase=nope").status_code == 404
    assert set(everyone.values_list("status", flat=True)) == {Run.DONE}  # scored again at once (in-process)
    # One run is re-scored at once, as before.
    run = phases["runs"]["b-run"]
    with committing():
        assert organiser.post(url, {"run": str(run.pk)}).status_code == 302
    for user in (world.alice, world.bob):
        assert signed_in(user).get(url).status_code == 404
        assert signed_in(user).post(url, {"confirm": "yes"}).status_code == 404
