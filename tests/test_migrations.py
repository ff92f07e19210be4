"""Migrations: the models and the migration files agree, and data migrations keep stored numbers."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone


@pytest.mark.django_db
def test_no_model_change_is_missing_a_migration() -> None:
    out = io.StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_statistics_stored_as_json_are_moved_to_one_row_per_measure(world: Any) -> None:
    before, after = [("leaderboard", "0001_initial")], [("leaderboard", "0004_statistics_significance_level")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    # What the JSON storage held for three runs and B = 200 (p-values rounded to 10 places).
    p = [round((count + 1) / 201, 10) for count in (0, 57, 200)]
    pvalues = [[1.0, p[0], p[1]], [p[0], 1.0, p[2]], [p[1], p[2], 1.0]]
    means = [0.1, 0.3, 0.25]
    differences = [[a - b for b in means] for a in means]
    entry = {"run_ids": [7, 9, 11], "means": means, "ci_low": [0.05, 0.25, 0.2], "ci_high": [0.15, 0.35, 0.3],
             "top_group": [7], "residual_variance": 0.04, "pvalues": pvalues, "differences": differences,
             "effect_sizes": [[d / 0.2 for d in row] for row in differences],
             "mc_se": [[round((v * (1 - v) / 200) ** 0.5, 10) for v in row] for row in pvalues]}
    old.get_model("leaderboard", "TaskStatistics").objects.create(
        task_id=world.task.pk, gold_version_id=world.gold_version.pk, scope="full", run_ids=[7, 9, 11],
        data={"quality.A.rsnod": entry}, meta={}, permutations=200, seed=1, scores_as_of=timezone.now())

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    from leaderboard.models import TaskStatistics

    record = TaskStatistics.objects.get(task=world.task)
    # Computed before the level was stored, at the only level the server ever used.
    assert record.alpha == 0.05
    stored = record.measure("quality.A.rsnod", pairwise=True)
    assert stored.summary == {**{key: entry[key] for key in ("run_ids", "means", "ci_low", "ci_high", "top_group",
                                                              "residual_variance")}, "effect_sizes_defined": True}
    matrices = stored.matrices()
    exact = [(count + 1) / 201 for count in (0, 57, 200)]
    assert matrices["pvalues"].tolist() == [[1.0, exact[0], exact[1]], [exact[0], 1.0, exact[2]],
                                            [exact[1], exact[2], 1.0]]
    assert np.array_equal(matrices["differences"], np.array(entry["differences"]))
    assert np.allclose(matrices["effect_sizes"], np.array(entry["effect_sizes"]), rtol=1e-12)
    assert np.allclose(matrices["mc_se"], np.array(entry["mc_se"]), atol=1e-10)


@pytest.mark.django_db(transaction=True)
def test_clear_text_api_tokens_are_hashed_and_keep_working(world: Any) -> None:
    """Issue 11, defect 8b: a token issued before the change (rest_framework.authtoken, clear text)
    authenticates after the migration, and no clear-text token is left in the database."""
    import hashlib

    from rest_framework.test import APIClient

    before = [("tasks", "0004_visible_names"), ("authtoken", "0004_alter_tokenproxy_options"),
              ("knox", "0009_extend_authtoken_field")]
    after = [("tasks", "0005_hash_api_tokens")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    key = "0123456789abcdef0123456789abcdef01234567"  # DRF's format: 40 hex characters
    old.get_model("authtoken", "Token").objects.create(key=key, user_id=world.alice.pk)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    from knox.models import AuthToken
    from rest_framework.authtoken.models import Token

    assert not Token.objects.exists()
    stored = AuthToken.objects.get(user=world.alice)
    assert (stored.token_key, stored.digest) == (key[:15], hashlib.sha512(key.encode()).hexdigest())
    with connection.cursor() as cursor:  # nowhere in the token tables as text
        cursor.execute("SELECT COUNT(*) FROM knox_authtoken WHERE digest = %s OR token_key = %s", [key, key])
        assert cursor.fetchone()[0] == 0
    api = APIClient(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get(f"/api/v1/tasks/{world.task.slug}/my-runs/").status_code == 200
    assert APIClient(HTTP_AUTHORIZATION=f"Token {key[:-1]}8").get(
        f"/api/v1/tasks/{world.task.slug}/my-runs/").status_code == 401


@pytest.mark.django_db(transaction=True)
def test_task_kinds_migration_keeps_every_score_bit_for_bit_both_ways(world: Any) -> None:
    """Issue 12: the DQ/ND flags and nested summaries become measure keys and back, every stored
    float unchanged. Going back gives exactly what the scoring core's ``Result.summary()`` gives
    (the shape stored before the kinds existed); coming forward again gives today's rows."""
    import orjson

    from scoring.kinds.stc3 import STC3, evaluate, load_gold, load_run
    from scoring.kinds.stc3.baselines import uniform_run
    from tasks.models import GoldVersion, Run, Score

    before = {score.pk: score.summary for score in Score.objects.all()}
    keys = {version.pk: version.measure_keys for version in GoldVersion.objects.all()}
    parts = {run.pk: run.parts for run in Run.objects.all()}
    assert len(before) >= 2 and all(parts.values())
    uniform = Run.objects.get(task=world.task, name="baseline-uniform-v1")

    executor = MigrationExecutor(connection)
    executor.migrate([("tasks", "0006_run_interruptions")])
    old = executor.loader.project_state([("tasks", "0006_run_interruptions")]).apps
    gold = load_gold(world.gold, STC3)
    expected = orjson.loads(orjson.dumps(evaluate(load_run(uniform_run(gold), gold), gold).summary()))
    stored = old.get_model("tasks", "Score").objects.get(run_id=uniform.pk).summary
    assert stored == expected and set(stored["quality"]) == {"A", "S", "E"}
    version = old.get_model("tasks", "GoldVersion").objects.get(pk=world.gold_version.pk)
    assert (version.has_quality, version.has_nugget, version.n_dialogues) == (True, True, 30)
    assert {run.pk: (run.has_quality, run.has_nugget) for run in old.get_model("tasks", "Run").objects.all()} == {
        pk: ("quality" in value, "nugget" in value) for pk, value in parts.items()}

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert {score.pk: score.summary for score in Score.objects.all()} == before
    assert {version.pk: version.measure_keys for version in GoldVersion.objects.all()} == keys
    assert {run.pk: run.parts for run in Run.objects.all()} == parts
    assert Score.objects.get(run=uniform).summary["measures"]["quality.E.nvd"] == expected["quality"]["E"]["nvd"]


@pytest.mark.django_db
def test_pools_and_pool_jobs_moved_to_the_response_app_without_touching_the_database(world: Any) -> None:
    """ReferencePool and PoolJob moved from the tasks app to the response kind's app by state-only
    migrations: neither migration writes any SQL, and rows in the tables the tasks app made (as a
    server before the move wrote them) are the new models' rows. (Migrating the tasks app back to
    0011 instead is not possible on SQLite once later branches' migrations sit on top of it.)"""
    from django.db.migrations import SeparateDatabaseAndState
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(connection, ignore_no_migrations=True)
    for app, name in (("tasks", "0012_pools_moved_to_the_response_app"), ("response", "0001_initial")):
        operations = loader.get_migration(app, name).operations
        assert [type(operation) for operation in operations] == [SeparateDatabaseAndState], (app, name)
        assert operations[0].database_operations == [] and operations[0].state_operations, (app, name)
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO tasks_referencepool (sha256, name, n_pairs, size, created_at) "
                       "VALUES (%s, %s, %s, %s, %s)", ["a" * 64, "pool.jsonl", 12, 345, timezone.now()])
    from kinds.response.models import PoolJob, ReferencePool

    pool = ReferencePool.objects.get(sha256="a" * 64)
    assert (pool.name, pool.n_pairs, pool.size) == ("pool.jsonl", 12, 345)
    job = PoolJob.objects.create(task=world.task, pool=pool, status="done", result={"pool": "a" * 64})
    with connection.cursor() as cursor:
        cursor.execute("SELECT task_id, pool_id, status FROM tasks_pooljob WHERE id = %s", [job.pk])
        assert cursor.fetchone() == (world.task.pk, pool.pk, "done")
    assert ReferencePool._meta.db_table == "tasks_referencepool" and PoolJob._meta.db_table == "tasks_pooljob"


@pytest.mark.django_db
def test_the_test_database_has_every_migration_applied() -> None:
    """``migrate --check``, as an operator runs it after an upgrade (docs/operators/upgrades.md)."""
    call_command("migrate", "--check", verbosity=0)  # SystemExit(1) if a migration is not applied


# The previous release's commit: a site is built with its own code and migrated by this one. Set it
# to the released commit at each release (docs/operators/upgrades.md); 0.1.0 is main before issue 41.
PREVIOUS_RELEASE = "22d1a56c46bb47ed2f5a2a80628a5f30092aeb1c"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_site_made_by_the_previous_release_migrates_with_everything_kept(tmp_path: Any) -> None:
    """Issue 41, item 6: teams, a task, its gold, a phase, a scored board and its statistics made by
    the previous release's code in its own database; read (runs' bytes, scores, vectors, boards,
    exports, statistics) by that code; migrated by this release's ``migrate``; read again by this
    release: the same, and nothing left to migrate."""
    import json
    import shutil
    import subprocess

    from devtools.workers import PYTHON, ROOT
    from devtools.workers.restore import Installations
    from tests.conftest import IN_CI

    if shutil.which("git") is None or subprocess.run(["git", "cat-file", "-e", f"{PREVIOUS_RELEASE}^{{commit}}"],
                                                     cwd=ROOT, capture_output=True).returncode:
        if IN_CI:
            pytest.fail(f"the previous release's commit {PREVIOUS_RELEASE[:12]} is not in this clone")
        pytest.skip(f"the previous release's commit {PREVIOUS_RELEASE[:12]} is not in this clone")
    old = tmp_path / "previous-release"
    old.mkdir()
    archive = subprocess.run(["git", "archive", PREVIOUS_RELEASE], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    # The reader of a site (devtools/workers/restore.py's probe) is the same program on both sides.
    # The previous release kept these helpers in tests/workers/; the copy imports them from there.
    probe_source = (ROOT / "devtools" / "workers" / "restore.py").read_text()
    (old / "tests" / "workers" / "upgrade_probe.py").write_text(
        probe_source.replace("from devtools.workers.", "from tests.workers."))

    installations = Installations(tmp_path / "sites")
    (tmp_path / "sites").mkdir()
    try:
        env = installations.new("site")

        def run(code: Any, *args: str) -> str:
            done = subprocess.run([PYTHON, *args], cwd=code, env={**env, "PYTHONPATH": str(code)},
                                  capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, done.stderr[-3000:]
            return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""

        spec = {"slug": "upgrade", "dialogues": 30, "teams": 2, "phase": {"daily_quota": 10}, "board": 4,
                "superuser": {"username": "organiser", "password": "previous-release-password"}}
        run(old, "-m", "tests.workers", "seed", json.dumps(spec))
        run(old, "-c", "import django; django.setup(); from leaderboard.statistics import compute_task_statistics; "
                       "from tasks.models import Task; compute_task_statistics(Task.objects.get(slug='upgrade').pk)")
        probe = ('import json; from {} import probe; print(json.dumps(probe({{"parsed": True}})))')
        before = json.loads(run(old, "-c", probe.format("tests.workers.upgrade_probe")))
        run(ROOT, "manage.py", "migrate", "-v0")
        run(ROOT, "manage.py", "migrate", "--check")
        after = json.loads(run(ROOT, "-c", probe.format("devtools.workers.restore")))
    finally:
        installations.drop()
    assert len(before["runs"]) >= 6 and before["statistics"]
    assert after["runs"] == before["runs"]
    assert after["statistics"] == before["statistics"]
    # What the previous release showed, this one shows; a column or key a release adds is new.
    assert set(after["pages"]) == set(before["pages"])
    for path, page in before["pages"].items():
        assert shared(after["pages"][path], page) == page, path


def shared(new: Any, old: Any) -> Any:
    """``new`` restricted to the keys ``old`` has, at every depth (lists element by element)."""
    if isinstance(new, dict) and isinstance(old, dict):
        return {key: shared(new[key], old[key]) if key in new else None for key in old}
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [shared(a, b) for a, b in zip(new, old)]
    return new
