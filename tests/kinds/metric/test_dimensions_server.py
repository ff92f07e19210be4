"""A metrics task judged on several dimensions, levels and languages through the server (issue 39):
the board's default order is the task's aggregate, its columns the dimensions as subgroups, the
CSV and LaTeX exports carry the board's numbers, and the statistics page shows the dimension x
metric heat map and the people's agreement."""

from __future__ import annotations

import csv
import io
from typing import Any

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from fixtures import metric_dims_demo
from scoring.kinds import get_kind
from tests.conftest import committing


@pytest.fixture
def dims_task(db: Any, settings: Any) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from tasks.models import Team
    from tasks.organising import create_task, load_gold_version
    from tasks.tokens import issue_token

    # Recorded, then computed once after the uploads (each upload's own computation tripled the time).
    settings.EVALSERVER_STATISTICS_MODE = "worker"
    task = create_task("dims-task", "metric-quick", "Dimensions", kind="metric")
    task.config = {**task.config, **metric_dims_demo.CONFIG}
    task.permutations = 200
    task.save()
    gold = metric_dims_demo.generate_gold(6, seed=2)
    with committing():
        load_gold_version(task, orjson.dumps(gold), "gold.json")
    user = get_user_model().objects.create_user("alice", password="alice-pass-1")
    Team.objects.create(name="Aurora", slug="aurora").members.add(user)
    return {"task": task, "gold": gold, "token": issue_token(user),
            "runs": metric_dims_demo.generate_runs(gold, seed=4)}


def upload(data: dict[str, Any], name: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {data['token']}")
    with committing():
        response = client.post("/api/v1/tasks/dims-task/runs/", {
            "file": SimpleUploadedFile("run.json", orjson.dumps(data["runs"][name])), "name": name},
            format="multipart")
    assert response.status_code == 202, response.content


@pytest.mark.slow
@pytest.mark.django_db
def test_board_exports_and_statistics_of_several_dimensions(dims_task: dict[str, Any]) -> None:
    kind, task = get_kind("metric"), dims_task["task"]
    config = task.kind_config
    gold = kind.compile_gold(dims_task["gold"], config)
    for name in ("close", "noisy", "contrary"):
        upload(dims_task, name)
    from leaderboard.statistics import compute_task_statistics

    compute_task_statistics(task.pk)
    board = Client().get("/api/v1/tasks/dims-task/leaderboard/").json()
    runs = {run["name"]: run for run in board["runs"]}
    for name in ("close", "noisy", "contrary"):
        direct = kind.score(kind.parse_run(dims_task["runs"][name], gold, config), gold, config).summary()
        assert runs[name]["scores"] == orjson.loads(orjson.dumps(direct))
    # The aggregate ranks: close (the mean judgement plus noise) first, contrary last.
    assert runs["close"]["ranks"]["mean_spearman"] == 1 and runs["contrary"]["ranks"]["mean_spearman"] >= 3

    page = Client().get("/tasks/dims-task/").content.decode()
    assert "Mean Spearman ▼" in page  # the default sort, marked
    assert "coherence (dialogue level, Chinese)" in page and "content richness (turn level, English)" in page
    for name in ("close", "contrary"):
        assert f"{runs[name]['scores']['measures']['mean_spearman']:.4f}" in page

    # The run's own page: the mean over dimensions above the dimensions x measures table.
    alice = Client()
    assert alice.login(username="alice", password="alice-pass-1")
    from tasks.models import Run

    run_page = alice.get(f"/runs/{Run.objects.get(task=task, name='close').pk}/").content.decode()
    mean_at = run_page.index(f"{runs['close']['scores']['measures']['mean_spearman']:.4f}")
    assert mean_at < run_page.index("appropriateness (turn level, English)")

    rows = list(csv.DictReader(io.StringIO(Client().get("/tasks/dims-task/leaderboard.csv").content.decode())))
    by_run = {row["run"]: row for row in rows}
    keys = [spec.key for spec in kind.measures(config, gold)]
    assert keys[0] == "mean_spearman" and len(keys) == 1 + 16 * 12
    for name in ("close", "noisy", "contrary"):
        measures = runs[name]["scores"]["measures"]
        for key in keys:
            cell = by_run[name][key]
            assert (cell == "" and measures[key] is None) or float(cell) == measures[key], (name, key)

    latex = Client().get("/tasks/dims-task/statistics/all/means.tex").content.decode()
    close = runs["close"]["scores"]["measures"]
    assert "overall (dialogue level, Chinese)" in latex
    assert f"{close['overall.zh.predictive_power']:.4f}" in latex

    statistics = Client().get("/tasks/dims-task/statistics/").content.decode()
    assert "Spearman, responses pooled per dimension and metric" in statistics
    assert "People: agreement and the human reference line" in statistics
    assert "people (one annotator vs the others)" in statistics
    # Kendall's tau between measures: within each dimension slice (48 within-context measures).
    from leaderboard.models import TaskStatistics

    record = TaskStatistics.objects.get(task=task, phase=None)
    assert record.meta["within"]["by_subgroup"] is True
    subgroup = {spec.key: spec.subgroup for spec in kind.measures(config, gold)}
    taus = record.meta["within"]["kendall_tau"]
    assert len(taus) == 16 * 3 and all(subgroup[tau["a"]] == subgroup[tau["b"]] for tau in taus)
    assert ("Correlation with people within contexts (mean over contexts), overall (dialogue level, Chinese): "
            "Kendall&#x27;s tau between measures") in statistics


@pytest.mark.django_db
def test_create_task_takes_its_dimensions_from_a_settings_file(tmp_path: Any) -> None:
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from tasks.models import Task

    bad = tmp_path / "bad.json"
    bad.write_text('{"dimensions": [{"name": "x y"}], "languages": "en"}')
    with pytest.raises(CommandError) as caught:
        call_command("create_task", "metric-dims", "--kind", "metric", "--config-file", str(bad))
    assert str(caught.value) == (
        f"{bad}: invalid task configuration: dimensions[0].name: must start with a letter and hold only letters, "
        "digits, _ and -, at most 24 characters, got 'x y'; languages: must be a list of BCP 47 codes such as "
        "\"en\", \"zh\", got 'en'")
    assert not Task.objects.filter(slug="metric-dims").exists()
    listed = tmp_path / "list.json"
    listed.write_text("[1]")
    with pytest.raises(CommandError, match="must be a JSON object of settings, not list"):
        call_command("create_task", "metric-dims", "--kind", "metric", "--config-file", str(listed))
    good = tmp_path / "config.json"
    good.write_text(orjson.dumps(metric_dims_demo.CONFIG).decode())
    call_command("create_task", "metric-dims", "--kind", "metric", "--preset", "metric-quick",
                 "--config-file", str(good))
    task = Task.objects.get(slug="metric-dims")
    assert task.kind_config.dimensions[-1] == ("overall", "dialogue") and task.kind_config.n_resamples == 200
