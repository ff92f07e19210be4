"""Every URL of the project, as every role, with hostile parameters: never a server error.

The URLs come from the URL configuration (``tests.test_security.project_patterns``) and the query
and form parameter names from the views' own source (every ``.get("name")`` on a query or form),
so a new URL or a new parameter is driven without editing this file. Each URL gets, as an
anonymous visitor, a participant, an organiser and a staff member: every parameter at once with
each hostile value class (huge, negative, non-numeric, NUL, unicode confusables and digits,
undecodable bytes, overlong, repeated), the same without ``phase`` and ``task`` (which are
checked first and would hide the others) and with a real phase, each parameter alone with a NUL
and a huge number, its path parameters replaced by hostile values, every
HTTP method, a POST without a CSRF token, bodies that are not what they claim, and bad API
tokens. Anything from 500 up, or an exception out of a view, is a failure.

The admin is driven by its own test below (from the admin's registry: lists, add and change
forms, as staff); the API schema and docs pages are driven with the rest.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client

from tasks import submissions
from tasks.models import Phase, Run
from tests.conftest import World, committing, make_world, run_bytes
from tests.test_run_page import make_phase
from tests.test_security import concrete, project_patterns

ROOT = Path(__file__).resolve().parent.parent
ROLES = {"anonymous": None, "participant": "alice", "organiser": "organiser", "staff": "staff"}
READ = re.compile(r"""(?:GET|POST|query|source|query_params|data|params)\.get(?:list)?\(\s*["']([a-z_0-9]+)["']"""
                  r"""|_param\(\s*request\.(?:GET|POST),\s*["']([a-z_0-9]+)["']""")


def parameter_names() -> list[str]:
    """Every query or form parameter some view reads by name."""
    names: set[str] = set()
    for folder in ("tasks", "leaderboard", "evalserver", "campaigns"):
        for path in (ROOT / folder).glob("*.py"):
            names.update(a or b for a, b in READ.findall(path.read_text()))
    return sorted(names)


PARAMETERS = parameter_names()
# (name, one value or a list of values (a repeated parameter)); all of them strings the client encodes.
VALUES: list[tuple[str, Any]] = [
    ("huge", "9" * 40),
    ("negative", "-1"),
    ("zero", "0"),
    ("non-numeric", "abc"),
    ("float", "1e309"),
    ("nul", "a\x00b"),
    ("confusable", "ｐｈａｓｅ\u0430\u200b"),
    ("unicode-digits", "\u0661\u0662"),
    ("overlong", "x" * 20_000),
    ("empty", ""),
    ("repeated", ["1", "2", "\x00"]),
]
# Each parameter alone is sent as a participant and as an organiser: the two sides of every
# access branch (staff follow the organisers' paths, anonymous visitors stop before parameters).
ONE_BY_ONE_ROLES = ("participant", "organiser")
RAW_QUERIES = ["%ff%fe%00", "%ED%A0%80", "page=%00&phase=%ff&sort=%C0%AF", "&&==&", "page[]=1&phase[$ne]=x"]
PATH_VALUES = {
    "<int:run_id>": ["0", "9" * 30, "2147483648"],
    "<slug:slug>": ["no-such-task", "a" * 300],
    "<str:key>": ["%00", "x" * 3000, "..%2F..%2Fsettings", "quality.A.rsnod%00", "ｑuality"],
    "<str:kind>": ["%00", "x" * 3000, "pvalues.txt%00", "..%2F.."],
    "<str:fmt>": ["%00", "csv%00", "x" * 3000],
    "<str:name>": ["%00", "..%2F..%2Fgold.json", "x" * 3000, "participant-data.json%00", "ｐarticipant-data.json"],
    "<uidb64>": ["%00", "x" * 3000, "!!!"],
    "<token>": ["%00", "x" * 3000],
    "<int:campaign_id>": ["0", "9" * 30, "2147483648"],
    "<int:position>": ["0", "9" * 30, "2147483648"],
}
BAD_TOKENS = ["Token", "Token ", "Token " + "a" * 5000, "Token \x00", "Bearer abc", "Token a b c", "Basic !!!"]
BODIES = [("application/json", b"{not json"), ("application/json", b"\xff\xfe"), ("application/json", b"[]"),
          ("application/json", b"null"), ("text/plain", b"\x00" * 100), ("multipart/form-data", b"--x\r\n"),
          ("multipart/form-data; boundary=x", b"--x\r\nContent-Disposition: form-data\r\n\r\n--x--"),
          ("application/x-www-form-urlencoded", b"%ff=%00&a=" + b"9" * 40)]


def query(value: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {name: value for name in PARAMETERS if name not in skip}


def client_for(role: str, world: World, **options: Any) -> Client:
    client = Client(**options)
    user = ROLES[role]
    if user is not None:
        client.force_login(getattr(world, user))
    return client


def requests_for(route: str, world: World, run: Run) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, url, options) of every hostile request for one URL pattern."""
    url = concrete(route, world, run)
    found: list[tuple[str, str, dict[str, Any]]] = []
    for _, value in VALUES:
        found.append(("get", url, {"data": query(value)}))
        found.append(("get", url, {"data": query(value, skip=("phase", "task"))}))
        for phase in ("dev", "test"):  # a real phase, so that the checks after it are reached
            found.append(("get", url, {"data": {**query(value, skip=("task",)), "phase": phase}}))
        found.append(("post", url, {"data": query(value, skip=("phase", "task", "file"))}))
        found.append(("post", url, {"data": query(value)}))
    # One parameter at a time as well (in the open test phase), with the two classes that reach
    # the database: a check that fails early on another parameter cannot hide it.
    found += [("get", url, {"data": {"phase": "test", name: value}, "one_by_one": True})
              for name in PARAMETERS if name != "phase" for value in ("a\x00b", "9" * 40)]
    found += [("get", f"{url}?{raw}", {}) for raw in RAW_QUERIES]
    for placeholder, values in PATH_VALUES.items():
        if placeholder in route:
            found += [("get", concrete(route.replace(placeholder, quote(value, safe="%")), world, run), {})
                      for value in values]
    found += [(method, url, {}) for method in ("put", "patch", "delete", "options", "head", "trace")]
    found += [("post", url, {"data": body, "content_type": kind}) for kind, body in BODIES]
    found += [("get", url, {"HTTP_AUTHORIZATION": token}) for token in BAD_TOKENS]
    found += [("post", url, {"HTTP_AUTHORIZATION": token}) for token in BAD_TOKENS[:3]]
    found.append(("csrf", url, {"data": {"action": "publish", "phase": "test", "confirm": "yes"}}))
    return found


@pytest.fixture
def hostile_world(db: Any, settings: Any) -> tuple[World, Run]:
    settings.RATELIMIT_ENABLE = False  # thousands of requests: the limits have their own tests
    # The production shape's lookups (task and phases from the shared cache, renewed by the
    # signals) and sessions in the cache, as the leak matrix has them: fewer queries per request
    # (about 100,000 requests), the same views and rules.
    settings.EVALSERVER_CACHE_TASK_LOOKUPS = True
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.cache"
    settings.EVALSERVER_UPLOAD_RATE = "100000/minute"
    # Statistics computed once, as the runs come in, so that their pages and exports have something
    # to show; not again on every hostile request that changes a board (a run hidden, say).
    settings.EVALSERVER_STATISTICS_MODE = "sync"
    world = make_world(n_dialogues=8, permutations=20)
    # A development phase that is over and an open test phase with a live subset, a run of each
    # team in each: the pages then reach their phase, subset and comparison code.
    dev = make_phase(world, "dev", Phase.DEVELOPMENT, (-5, -3))
    test = make_phase(world, "test", Phase.TEST, (-2, 1), live_subset_size=4, live_subset_seed=1)
    with committing():
        run = submissions.submit_run(world.task, world.alice, submissions.Submission(
            content=run_bytes(world.gold), name="alice-run", is_public=True), None)
    Run.objects.filter(pk=run.pk).update(phase=dev)
    for user, seed in ((world.alice, 2), (world.bob, 3)):
        with committing():
            submissions.submit_run(world.task, user, submissions.Submission(
                content=run_bytes(world.gold, seed=seed), name=f"{user.username}-test", is_public=True,
                description="a method"), test)
    run.refresh_from_db()
    settings.EVALSERVER_STATISTICS_MODE = "off"
    return world, run


PATTERNS = project_patterns()


# The patterns in a few shards, so that pytest-xdist spreads them over its processes: in one test
# the sweep took 12 of the PostgreSQL pass's 25 minutes on one process while the other idled.
SHARDS = 4


@pytest.mark.slow  # about 100,000 requests
@pytest.mark.django_db
@pytest.mark.parametrize("shard", range(SHARDS))
def test_no_hostile_request_is_a_server_error(hostile_world: tuple[World, Run], shard: int) -> None:
    """Every URL pattern (this shard's share of them), as every role, with every hostile request.
    One world per shard (building it is seconds; once per URL it was most of this test's time)."""
    world, run = hostile_world
    failures = []
    for name, route in PATTERNS[shard::SHARDS]:
        requests = requests_for(route, world, run)
        for role in ROLES:
            # One signed-in client per role (and one that checks CSRF), not a sign-in per request.
            clients = {False: client_for(role, world), True: client_for(role, world, enforce_csrf_checks=True)}
            for method, url, options in requests:
                if options.get("one_by_one") and role not in ONE_BY_ONE_ROLES:
                    continue
                options = {key: value for key, value in options.items() if key != "one_by_one"}
                send = getattr(clients[method == "csrf"], "post" if method == "csrf" else method)
                try:
                    with committing():
                        status = send(url, **options).status_code
                except Exception as error:  # a view that raises is what this test is here to find
                    failures.append((name, role, method, url[:120], str(options)[:120],
                                     f"{type(error).__name__}: {error}"[:200]))
                    continue
                if status >= 500:
                    failures.append((name, role, method, url[:120], str(options)[:120], status))
    assert not failures, f"{len(failures)} server errors:\n" + "\n".join(map(str, failures[:30]))


def test_the_parameters_come_from_the_views() -> None:
    # The names every view reads, found in the source; a few that must be among them.
    assert {"phase", "page", "sort", "with", "measure", "q", "status", "run", "confirm"} <= set(PARAMETERS)


@pytest.mark.django_db
def test_a_token_with_a_nul_character_is_refused_by_name(world: World) -> None:
    answer = Client().get(f"/api/v1/tasks/{world.task.slug}/my-runs/", HTTP_AUTHORIZATION="Token \x00abc")
    assert (answer.status_code, answer.json()) == (401, {"errors": ["Invalid token: it contains a NUL character."]})
    # The real token still works, and a wrong one is the usual 401.
    assert Client().get(f"/api/v1/tasks/{world.task.slug}/my-runs/",
                        HTTP_AUTHORIZATION=f"Token {world.alice_token}").status_code == 200
    assert Client().get(f"/api/v1/tasks/{world.task.slug}/my-runs/",
                        HTTP_AUTHORIZATION="Token " + "0" * 64).json() == {"errors": ["Invalid token."]}


@pytest.mark.django_db
def test_a_sign_up_link_naming_a_task_with_a_nul_character_names_no_task(world: World) -> None:
    page = Client().get("/accounts/signup/", {"task": f"{world.task.slug}\x00"})
    assert page.status_code == 200 and world.task.title not in page.content.decode()
    page = Client().get("/accounts/signup/", {"task": world.task.slug})
    assert page.status_code == 200 and world.task.title in page.content.decode()


@pytest.mark.django_db
def test_the_api_docs_answer_only_get(world: World) -> None:
    for url in ("/api/v1/schema/", "/api/v1/docs/", "/api/v1/redoc/"):
        assert Client().options(url).status_code == 405, url
        assert Client().post(url).status_code == 405, url
        assert Client().get(url).status_code == 200, url


@pytest.mark.django_db
def test_a_statistics_address_with_a_nul_character_is_a_404_that_says_so(world: World, settings: Any) -> None:
    settings.DEBUG = False
    from leaderboard.statistics import compute_task_statistics

    for seed, user in ((1, world.alice), (2, world.bob)):
        with committing():
            submissions.submit_run(world.task, user, submissions.Submission(
                content=run_bytes(world.gold, seed=seed), name=f"{user.username}-run"), None)
    compute_task_statistics(world.task.pk)
    base = f"/tasks/{world.task.slug}/statistics"
    assert Client().get(f"{base}/quality.A.rsnod/pvalues/").status_code == 200  # the statistics are there
    for url in (f"{base}/quality.A.rsnod%00/pvalues/", f"{base}/%00/pvalues.csv"):
        page = Client().get(url)
        assert page.status_code == 404, url
        assert "No statistics for this measure yet." in page.content.decode()


ADMIN_VALUES = ["9" * 40, "-1", "a\x00b", "\u0661", "x" * 5000, "", '{"a": "\\u0000"}', "[]", "null", "1e309"]


@pytest.mark.slow
@pytest.mark.django_db
def test_no_hostile_admin_request_is_a_server_error(hostile_world: tuple[World, Run]) -> None:
    """Every model of the admin (from its registry): its list with hostile search, ordering, page
    and filter parameters, its add page and one object's change page posted with every field of
    the form set to each hostile value, as a staff member."""
    from django.contrib import admin
    from django.urls import reverse

    world, _ = hostile_world
    client = client_for("staff", world)
    failures = []
    for model, model_admin in admin.site._registry.items():
        info = (model._meta.app_label, model._meta.model_name)
        listing = reverse(f"admin:{info[0]}_{info[1]}_changelist")
        filters = [item if isinstance(item, str) else item[0] for item in model_admin.list_filter]
        requests: list[tuple[str, str, dict[str, Any]]] = []
        # One parameter at a time: a bad page or ordering alone sends the list back to itself
        # (Django's "?e=1") before the filters are read.
        for name in ["q", "o", "p", *(f"{field}__exact" for field in filters)]:
            requests += [("get", listing, {"data": {name: value}}) for value in ADMIN_VALUES]
        pages = [reverse(f"admin:{info[0]}_{info[1]}_add")]
        first = model.objects.order_by("pk").first()
        if first is not None:
            pages.append(reverse(f"admin:{info[0]}_{info[1]}_change", args=[first.pk]))
        for page in pages:
            html = client.get(page).content.decode()
            names = set(re.findall(r'name="([A-Za-z_][\w-]*)"', html)) - {"csrfmiddlewaretoken", "_save"}
            requests += [("post", page, {"data": dict.fromkeys(names, value)}) for value in ADMIN_VALUES]
        for method, url, options in requests:
            try:
                with committing():
                    status = getattr(client, method)(url, **options).status_code
            except Exception as error:
                failures.append((method, url, str(options)[:100], f"{type(error).__name__}: {error}"[:200]))
                continue
            if status >= 500:
                failures.append((method, url, str(options)[:100], status))
    assert not failures, f"{len(failures)} server errors:\n" + "\n".join(map(str, failures[:30]))


@pytest.mark.django_db
def test_an_id_beyond_64_bits_in_the_admin_is_a_400_naming_the_parameter(world: World) -> None:
    """SQLite's driver overflows on a related lookup with an id beyond 64 bits (a 500 before); the
    largest 64-bit id is still an ordinary, empty filter on both databases."""
    client = client_for("staff", world)
    for url, name in (("/admin/tasks/run/", "task__exact"), ("/admin/auth/user/", "groups__exact")):
        page = client.get(url, {name: str(2**63)})
        assert page.status_code == 400, url
        assert page.content.decode() == (f"the parameter {name!r} holds a number larger than "
                                          "9,223,372,036,854,775,807 (no record has such an id)")
        assert client.get(url, {name: str(2**63 - 1)}).status_code == 200, url
    # A long number in the search box is a search.
    assert client.get("/admin/tasks/run/", {"q": "9" * 40}).status_code == 200
    page = client.post("/admin/auth/group/add/", {"name": "g", "permissions": "9" * 40})
    assert page.status_code == 400
    assert "'permissions' holds a number larger than" in page.content.decode()
    from django.contrib.auth.models import Group

    assert not Group.objects.filter(name="g").exists()
