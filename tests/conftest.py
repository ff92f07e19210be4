"""Shared fixtures: stock users built in code, a small task with gold, and service detection.

Tests marked ``services`` need PostgreSQL, Redis or RabbitMQ on localhost: they skip on a laptop
without them and fail, never skip, when ``CI=true``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from devtools.workers.processes import reachable

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


# The checkout's var/: a running demo's database, uploads and demo-logins.txt, which the README's
# commands read. The test settings place everything elsewhere (evalserver/settings_test.py); this
# guard makes a write that still aims here fail at once, in the test that made it.
CHECKOUT_VAR = Path(__file__).resolve().parent.parent / "var"
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _aimed_at_checkout_var(path: Any) -> bool:
    if isinstance(path, int):  # a file descriptor: its opening was checked
        return False
    try:
        target = os.path.abspath(os.fsdecode(path))
    except TypeError:
        return False
    return target == str(CHECKOUT_VAR) or target.startswith(str(CHECKOUT_VAR) + os.sep)


def _refuse_checkout_var_writes(event: str, args: tuple) -> None:
    """An audit hook (PEP 578): writing, creating, renaming or removing anything under the
    checkout's var/ raises PermissionError, and SQLite may not open a database there."""
    if event == "open":
        path, mode, flags = args
        writing = any(letter in mode for letter in "wax+") if isinstance(mode, str) else bool(flags & _WRITE_FLAGS)
        paths = (path,) if writing else ()
    elif event in ("os.mkdir", "os.remove", "os.rmdir", "os.truncate", "os.chmod", "os.utime", "shutil.rmtree",
                   "sqlite3.connect"):
        paths = args[:1]
    elif event in ("os.rename", "os.symlink", "os.link"):
        paths = args[:2]
    else:
        return
    for path in paths:
        if _aimed_at_checkout_var(path):
            raise PermissionError(f"a test tried to {event.removeprefix('os.')} {os.fsdecode(path)!s}: tests write "
                                  "only in their own folders, never in the checkout's var/ (a running demo's "
                                  "files); use tmp_path or settings.VAR_DIR, which the test settings place in a "
                                  "folder of the run's own")


def pytest_configure(config: pytest.Config) -> None:
    # Audit hooks cannot be removed; one per process is enough (pytest_configure runs once).
    if not getattr(sys, "_evalserver_var_guard", False):
        sys.addaudithook(_refuse_checkout_var_writes)
        sys._evalserver_var_guard = True  # type: ignore[attr-defined]


def require_service(name: str, port: int) -> None:
    """Skip (laptop) or fail (CI) when a service is not listening."""
    if reachable(port):
        return
    if IN_CI:
        pytest.fail(f"{name} is not reachable on 127.0.0.1:{port}, and CI=true forbids skipping")
    pytest.skip(f"{name} is not running on 127.0.0.1:{port}")


def using_postgres() -> bool:
    from django.conf import settings

    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def require_postgres() -> None:
    """For tests whose worker processes read the test database: it must be PostgreSQL (a worker
    cannot share the test's SQLite). Skip on a laptop, fail in CI."""
    require_service("PostgreSQL", 5432)
    if not using_postgres():
        message = "DATABASE_URL must point at PostgreSQL: a worker process cannot share the test's SQLite"
        if IN_CI:
            pytest.fail(message + ", and CI=true forbids skipping")
        pytest.skip(message)


def isolated_settings(media_root: Any, cache_location: str) -> dict[str, Any]:
    """What every test runs with: uploads in a folder of its own, no statistics (tests of them switch
    them on), a local cache of its own. Also for state built once for several tests
    (``override_settings``), which the per-test fixture below cannot reach."""
    from django.conf import settings

    return {
        "MEDIA_ROOT": media_root,
        "EVALSERVER_STATISTICS_MODE": "off",
        # No clock thread per test process: tests call tasks.phaseclock.advance with the time they choose.
        "EVALSERVER_PHASE_CLOCK_MODE": "off",
        # Nobody sends the e-mail outbox: tests call notices.outbox.send_due and read Django's outbox.
        "EVALSERVER_NOTICE_MODE": "off",
        # Pool jobs run where they are started (tests of the background modes switch those on).
        "EVALSERVER_POOL_JOB_MODE": "sync",
        "CACHES": {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache",
                               "LOCATION": cache_location}},
        "RATELIMIT_ENABLE": True,
        # Pages render without a prior collectstatic (the manifest storage needs one).
        "STORAGES": {**settings.STORAGES,
                     "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}},
        # Real hashing costs ~0.3 s a user; tests are not about password strength.
        "PASSWORD_HASHERS": ["django.contrib.auth.hashers.MD5PasswordHasher"],
    }


@pytest.fixture(autouse=True)
def _isolated_settings(settings: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Uploads in a temporary folder, no statistics (tests of them switch them on), a fresh cache."""
    for name, value in isolated_settings(tmp_path_factory.mktemp("uploads"),
                                         f"test-{os.getpid()}-{id(settings)}").items():
        setattr(settings, name, value)
    from django.core.cache import cache

    from tasks import datafiles

    cache.clear()
    # Sample runs are cached per gold version id, which a test database hands out again after a
    # rollback: another test's version 2 would bring its sample run along.
    datafiles._sample_run.cache_clear()


@pytest.fixture(autouse=True)
def _celery_join_flag_cleared() -> Any:
    """Celery keeps a process-wide "this process is a worker" flag, which makes ``result.get()``
    raise "Never call result.get() within a task!". A test that builds a worker's components in
    the test process sets it; cleared around each test so that none leaks it into the next one
    (the suite's order decides which tests share a process)."""
    from celery._state import _set_task_join_will_block

    _set_task_join_will_block(False)
    yield
    _set_task_join_will_block(False)


@pytest.fixture(autouse=True)
def _response_resources_restored() -> Any:
    """Where the response kind finds uploaded vector tables, encoder models and encoded references
    is process-wide (the server sets it at start-up: kinds/response/apps.py). Tests that point it
    elsewhere would otherwise leave it so for the next test of the same process, which then found
    no uploaded model (an order-dependent failure under pytest-xdist)."""
    from scoring.kinds.response import encodings
    from scoring.kinds.response import resources as response_resources

    saved = (response_resources._VECTOR_DIRECTORY, response_resources._RESOURCE_LOCATOR, encodings._STORE)
    yield
    response_resources._VECTOR_DIRECTORY, response_resources._RESOURCE_LOCATOR, encodings._STORE = saved


@dataclass
class World:
    """A task with gold and the stock users: two teams, an organiser, a staff member."""

    task: Any
    gold: list
    gold_version: Any
    alice: Any  # participant, team Aurora
    bob: Any  # rival participant, team Borealis
    organiser: Any  # organiser of the task, not staff
    staff: Any
    alice_token: str
    bob_token: str


def committing() -> Any:
    """Run on-commit callbacks (the scoring job) inside a test's wrapping transaction, as a
    real commit would; for tests on ``transactional_db`` they run by themselves."""
    from django.test import TestCase

    return TestCase.captureOnCommitCallbacks(execute=True)


def make_world(n_dialogues: int = 30, seed: int = 5, permutations: int = 200) -> World:
    from django.contrib.auth import get_user_model

    from fixtures.synthetic import generate_gold
    from tasks.models import Team
    from tasks.organising import create_task, load_gold_version
    from tasks.tokens import issue_token

    users = get_user_model()
    task = create_task("demo-task", "stc3", "Demo task")
    task.permutations = permutations
    task.save()
    gold = generate_gold(n_dialogues, seed=seed)
    organiser = users.objects.create_user("olivia", password="organiser-pass-1")
    task.organisers.add(organiser)
    with committing():
        version = load_gold_version(task, orjson.dumps(gold), "gold.json", organiser)
    alice = users.objects.create_user("alice", password="alice-pass-1")
    bob = users.objects.create_user("bob", password="bob-pass-1")
    staff = users.objects.create_user("sam", password="staff-pass-1", is_staff=True, is_superuser=True)
    aurora = Team.objects.create(name="Aurora", slug="aurora")
    aurora.members.add(alice)
    borealis = Team.objects.create(name="Borealis", slug="borealis")
    borealis.members.add(bob)
    return World(task=task, gold=gold, gold_version=version, alice=alice, bob=bob, organiser=organiser,
                 staff=staff, alice_token=issue_token(alice),
                 bob_token=issue_token(bob))


@pytest.fixture
def world(db: Any) -> World:
    return make_world()


def run_bytes(gold: list, noise: float = 0.3, seed: int = 1, kind: str = "noisy",
              subtasks: tuple[str, ...] = ("quality", "nugget")) -> bytes:
    from fixtures.synthetic import generate_run

    return orjson.dumps(generate_run(gold, kind, noise=noise, seed=seed, subtasks=subtasks))


def stc3_measures(summary: dict[str, Any]) -> dict[str, float]:
    """The DQ/ND figures of ``score --format json`` (nested by subtask and dimension) under the
    server's measure keys, to compare the server's numbers with the offline scorer's."""
    flat = {f"quality.{dim}.{name}": value for dim, values in (summary.get("quality") or {}).items()
            for name, value in values.items()}
    flat.update({f"nugget.{name}": value for name, value in (summary.get("nugget") or {}).items()})
    return flat


def stc3_server_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """What the server stores and serves for a DQ/ND run (``Score.summary``) given the offline
    scorer's ``Result.summary()``: the same floats under measure keys."""
    data = {"measures": stc3_measures(summary), "n_items": summary["n_dialogues"],
            "settings": {name: summary[name] for name in ("variant", "alpha", "averaging")}}
    if summary.get("n_missing"):
        data["n_missing"] = summary["n_missing"]
    return data


@pytest.fixture
def one_rate_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """django-ratelimit counts in fixed windows (a minute, offset per key): a burst of attempts
    that straddles a window's end starts counting again, which on a loaded machine made exact
    counts of the sign-in limits flaky. The limits' clock stands still, so a burst is one window."""
    import time as real_time
    from types import SimpleNamespace

    import django_ratelimit.core

    now = real_time.time()
    monkeypatch.setattr(django_ratelimit.core, "time", SimpleNamespace(time=lambda: now))


# The CI's second pass runs the fast tests again on SQLite to catch what differs between the two
# databases. A test that never opens the test database (scoring arithmetic, the statistics
# kernels, the README's commands, which start their own servers on their own SQLite files)
# cannot differ between the passes, so dev.py sets this variable there and those tests are left
# out: the pass re-ran about 500 such tests for nothing and took the CI command past 15 minutes.
DATABASE_TESTS_ONLY = "EVALSERVER_DATABASE_TESTS_ONLY"
_DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_reset_sequences",
                                "django_db_serialized_rollback", "live_server", "admin_user", "admin_client"})


def uses_test_database(item: pytest.Item) -> bool:
    """Whether a test opens the test database: a django_db mark, or a database fixture anywhere in
    its fixture closure (fixtures such as ``world`` ask for ``db``)."""
    if item.get_closest_marker("django_db") is not None:
        return True
    return bool(_DATABASE_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def empties_the_database(item: pytest.Item) -> bool:
    """Whether a test commits for real (``transaction=True``, ``transactional_db``, a live server):
    its database is emptied after it, data migrations' rows included, so pytest-django runs these
    after the tests that roll back."""
    marker = item.get_closest_marker("django_db")
    fixtures = getattr(item, "fixturenames", ())
    return (marker is not None and bool(marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences"))
            ) or "transactional_db" in fixtures or "live_server" in fixtures


def slow_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The tests marked slow first, each group in its collection order (a module's or a class's
    tests stay together, so their shared fixtures are built once). pytest-xdist hands tests out in
    this order: the sweeps of a minute or more start while both processes are free, and the short
    tests fill the gaps at the end, instead of one process finishing the leak matrix alone while
    the other idles (the longest-first rule for two machines). The tests that empty the database
    stay after the others (pytest-django's order), slow ones first among them."""
    return sorted(items, key=lambda item: (empties_the_database(item), item.get_closest_marker("slow") is None))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(DATABASE_TESTS_ONLY, "") == "1":
        kept = [item for item in items if uses_test_database(item)]
        left = [item for item in items if not uses_test_database(item)]
        if left:
            config.hook.pytest_deselected(items=left)
            items[:] = kept
    items[:] = slow_first(items)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None,
                                 tmp_path_factory: pytest.TempPathFactory) -> None:
    """On SQLite, a test database in a file (one per xdist process), as the server's own: Django's
    default in-memory test database shares one cache between connections, whose table locks fail
    at once ("database table is locked") instead of waiting for the busy timeout, so a test of
    work in a background thread failed whenever the thread wrote while the test read. A file
    gives the tests the locking the server has (WAL, the 20 s busy timeout: settings.DATABASES)."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3") and not database.get("TEST", {}).get("NAME"):
        database.setdefault("TEST", {})["NAME"] = str(tmp_path_factory.mktemp("database") / "test.sqlite3")
