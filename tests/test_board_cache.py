"""The cached leaderboard: the HTML table built in Python, and the JSON's ETag and gzip.

Cached pages and bodies must change the moment a score, a run's visibility or the statistics
change; these tests read the board before and after each of those.
"""

from __future__ import annotations

import gzip
import re
import warnings

import orjson
import pytest
from django.test import Client

from leaderboard.statistics import compute_task_statistics
from tasks import organising, submissions
from tasks.models import Run
from tests.conftest import World, committing, run_bytes


@pytest.fixture(autouse=True)
def _task_lookups_cached(settings) -> None:
    """One process and its local-memory cache, as in a deployment with a shared cache."""
    settings.EVALSERVER_CACHE_TASK_LOOKUPS = True


def submit(world: World, user, noise: float, seed: int, name: str, public: bool = True) -> Run:
    with committing():
        return submissions.submit_run(world.task, user, submissions.Submission(
            content=run_bytes(world.gold, noise, seed), name=name, is_public=public))


def board_rows(page: str) -> list[tuple[str, list[str]]]:
    """(run name, [cell texts]) per table row, in page order."""
    rows = []
    for row in re.findall(r"<tr[^>]*data-run=[^>]*>(.*?)</tr>", page, flags=re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)
        # A run's name: a link to its page where the reader may open it, else plain text.
        name = re.search(r"<(?:span|a)[^>]* title=\"[^\"]*\">(.*?)</(?:span|a)>", cells[2]).group(1)
        rows.append((name, cells))
    return rows


@pytest.mark.django_db
def test_the_table_shows_every_score_to_four_places_with_its_rank(world: World) -> None:
    runs = [submit(world, world.alice, noise, seed, f"run-{seed}") for seed, noise in enumerate((0.1, 0.5, 0.9))]
    api = {run["name"]: run for run in Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/").json()["runs"]}
    page = Client().get(f"/tasks/{world.task.slug}/?tab=quality&sort=quality.S.nmd&show=all").content.decode()
    rows = board_rows(page)
    assert [name for name, _ in rows] == sorted(api, key=lambda name: api[name]["scores"]["measures"]["quality.S.nmd"])
    assert len(rows) == len(runs) + 2  # and the two baselines
    columns = [f"quality.{dim}.{name}" for dim in "ASE" for name in ("rsnod", "nmd", "snod", "jsd", "rnss", "nvd")]
    for position, (name, cells) in enumerate(rows, start=1):
        assert cells[0].startswith(str(position))  # rank on the sorted measure
        for column, cell in zip(columns, cells[3:], strict=True):
            value = api[name]["scores"]["measures"][column]
            assert cell == f"{value:.4f}<sub>{api[name]['ranks'][column]}</sub>"
    # By default only the official measures (RSNOD and NMD per dimension), in the same order.
    default = board_rows(Client().get(f"/tasks/{world.task.slug}/?tab=quality&sort=quality.S.nmd").content.decode())
    official = [f"quality.{dim}.{name}" for dim in "ASE" for name in ("rsnod", "nmd")]
    for (name, cells), (same, every) in zip(default, rows, strict=True):
        assert name == same and cells[3:] == [every[3 + columns.index(key)] for key in official]


@pytest.mark.django_db
def test_the_cached_page_follows_new_scores_visibility_and_statistics(world: World, settings) -> None:
    url = f"/tasks/{world.task.slug}/?sort=quality.A.rsnod"
    first = submit(world, world.alice, 0.1, 1, "first-run")
    page = Client().get(url).content.decode()
    assert "first-run" in page and '<span class="top"' not in page  # no statistics yet

    submit(world, world.bob, 0.3, 2, "second-run")
    assert "second-run" in Client().get(url).content.decode()

    Client().get(url)  # cached again; hiding the run must show at once
    owner = Client()
    owner.force_login(world.alice)
    owner.post(f"/runs/{first.pk}/visibility/", {"action": "hide"})
    assert "first-run" not in Client().get(url).content.decode()

    compute_task_statistics(world.task.pk)
    page = Client().get(url).content.decode()
    assert '<span class="top"' in page and "95% bootstrap confidence interval" in page


@pytest.mark.django_db
def test_leaderboard_json_etag_gzip_and_invalidation(world: World) -> None:
    url = f"/api/v1/tasks/{world.task.slug}/leaderboard/"
    submit(world, world.alice, 0.2, 1, "json-run")
    client = Client()
    plain = client.get(url)
    etag = plain["ETag"]
    assert plain.status_code == 200 and etag.startswith('"') and "no-cache" in plain["Cache-Control"]
    assert "Accept-Encoding" in plain["Vary"]
    packed = client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert packed["Content-Encoding"] == "gzip"
    assert gzip.decompress(packed.content) == plain.content
    assert len(packed.content) < len(plain.content) / 2

    again = client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304 and again.content == b"" and again["ETag"] == etag

    submit(world, world.bob, 0.4, 2, "newer-run")
    changed = client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and changed["ETag"] != etag
    assert "newer-run" in {run["name"] for run in orjson.loads(changed.content)["runs"]}


@pytest.mark.django_db
def test_an_organisers_board_is_private_and_has_its_own_etag(world: World) -> None:
    submit(world, world.alice, 0.2, 1, "hidden-run", public=False)
    url = f"/api/v1/tasks/{world.task.slug}/leaderboard/"
    public = Client().get(url)
    organiser = Client()
    organiser.force_login(world.organiser)
    private = organiser.get(url)
    assert "hidden-run" not in {run["name"] for run in public.json()["runs"]}
    assert "hidden-run" in {run["name"] for run in private.json()["runs"]}
    assert private["Cache-Control"].startswith("private") and public["Cache-Control"].startswith("public")
    # The public ETag does not unlock the organiser's body, nor the other way round.
    assert organiser.get(url, HTTP_IF_NONE_MATCH=public["ETag"]).status_code == 200
    assert Client().get(url, HTTP_IF_NONE_MATCH=private["ETag"]).status_code == 200


@pytest.mark.django_db
def test_unknown_tab_and_sort_fall_back_to_the_defaults(world: World) -> None:
    submit(world, world.alice, 0.2, 1, "some-run")
    default = Client().get(f"/tasks/{world.task.slug}/").content.decode()
    odd = Client().get(f"/tasks/{world.task.slug}/?tab=<x>&sort=quality.A.nope").content.decode()
    assert board_rows(odd) == board_rows(default)
    assert "RSNOD ▲" in default  # the first official DQ measure


@pytest.mark.django_db
def test_an_anonymous_reader_of_a_cached_board_costs_almost_no_query(world: World) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    submit(world, world.alice, 0.2, 1, "some-run")
    client = Client()
    # The JSON: none at all. The page: one, for the board's statistics state (what is stored,
    # whether a newer computation is queued or running).
    for path, expected in ((f"/api/v1/tasks/{world.task.slug}/leaderboard/", []),
                           (f"/tasks/{world.task.slug}/", ["leaderboard_statisticsstate"])):
        client.get(path)  # fills the caches
        with CaptureQueriesContext(connection) as queries:
            assert client.get(path).status_code == 200
        tables = [query["sql"].split(" FROM ")[1].split()[0].strip('"') for query in queries.captured_queries]
        assert tables == expected


@pytest.mark.django_db
def test_the_cached_task_follows_every_change(world: World) -> None:
    from django.core.cache import cache
    from django.core.cache.backends.base import CacheKeyWarning

    from tasks.lookup import _token_key, cached_task
    from tasks.models import Task, Team

    url = f"/api/v1/tasks/{world.task.slug}/leaderboard/"
    submit(world, world.alice, 0.2, 1, "first-run")
    assert Client().get(url).json()["runs"][-1]["team"] == "Aurora"

    # A renamed team: its tasks' boards are rebuilt.
    team = Team.objects.get(name="Aurora")
    team.name = "Aurora Borealis Labs"
    team.save()
    assert "Aurora Borealis Labs" in {run["team"] for run in Client().get(url).json()["runs"]}

    # A task made private disappears from the public at once.
    task = Task.objects.get(pk=world.task.pk)
    task.is_public = False
    task.save()
    assert Client().get(url).status_code == 404

    # A new slug: the old one is forgotten, the new one found.
    task.is_public, task.slug = True, "renamed-task"
    task.save()
    assert Client().get(url).status_code == 404
    assert Client().get("/api/v1/tasks/renamed-task/leaderboard/").status_code == 200

    # A task that did not exist a moment ago is found as soon as it does (no negative caching), and
    # asking for it left nothing in the cache; nor does a slug longer than any task's.
    assert cached_task("brand-new") is None and cache.get(_token_key("brand-new")) is None
    assert cached_task("a" * 300) is None
    with warnings.catch_warnings():  # looking for the key memcached would refuse, to show it is not there
        warnings.simplefilter("ignore", CacheKeyWarning)
        assert cache.get(_token_key("a" * 300)) is None
    organising.create_task("brand-new", "stc3", "Brand new")
    assert cached_task("brand-new")[0].title == "Brand new"
    assert cache_token_changes(_token_key("renamed-task"))


def cache_token_changes(key: str) -> bool:
    """A change inside a transaction renews the token at once and again at the commit, so that
    rows a reader cached in between (the old ones) are never served after the commit."""
    from django.core.cache import cache
    from django.db import transaction
    from django.test import TestCase

    from tasks.lookup import forget_task

    slug = key.split(":", 1)[1]
    before = cache.get(key)
    with TestCase.captureOnCommitCallbacks(execute=True), transaction.atomic():
        forget_task(slug)
        during = cache.get(key)
    after = cache.get(key)
    return len({before, during, after}) == 3


@pytest.mark.django_db
def test_board_rows_link_to_run_pages_without_a_query_per_run(world: World) -> None:
    """Building a board (cache empty) costs the same queries for 2 runs as for 8, links included;
    every row links to the run's page, which opens for the public (the task has no phases: its
    scores are public)."""
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = []
    for count in (2, 8):
        for seed in range(len(counts) * 2, count):
            submit(world, world.alice if seed % 2 else world.bob, 0.2 + 0.03 * seed, seed, f"run-{seed}")
        cache.clear()
        with CaptureQueriesContext(connection) as queries:
            page = Client().get(f"/tasks/{world.task.slug}/").content.decode()
        counts.append(len(queries.captured_queries))
        links = re.findall(r'<td class="run"[^>]*><a href="/runs/(\d+)/"', page)
        assert sorted(map(int, links)) == sorted(Run.objects.values_list("pk", flat=True))
        for run_id in links:
            assert Client().get(f"/runs/{run_id}/").status_code == 200
    assert counts[0] == counts[1], counts
