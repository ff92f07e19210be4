"""The metrics track through the server: a metric run's figures are those of the metric kind on
the same files, the board ranks metrics best first (every figure is higher-is-better), and the
statistics page carries the kind's comparisons (paired tests, concordance, discriminative power)
on whole-set boards only."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from fixtures import metric_demo
from scoring.kinds import get_kind
from tests.conftest import committing


@pytest.fixture
def metric_task(db: Any, settings: Any) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from tasks.models import Team
    from tasks.organising import create_task, load_gold_version
    from tasks.tokens import issue_token

    settings.EVALSERVER_STATISTICS_MODE = "sync"
    task = create_task("metric-task", "metric-quick", "Metrics", kind="metric")
    task.permutations = 200
    task.save()
    gold = metric_demo.generate_gold(24, 4, seed=3)
    with committing():
        load_gold_version(task, orjson.dumps(gold), "gold.json")
    user = get_user_model().objects.create_user("alice", password="alice-pass-1")
    Team.objects.create(name="Aurora", slug="aurora").members.add(user)
    return {"task": task, "gold": gold, "token": issue_token(user), "runs": metric_demo.generate_runs(gold, seed=5)}


def upload(data: dict[str, Any], name: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {data['token']}")
    with committing():
        response = client.post("/api/v1/tasks/metric-task/runs/", {
            "file": SimpleUploadedFile("run.json", orjson.dumps(data["runs"][name])), "name": name},
            format="multipart")
    assert response.status_code == 202, response.content
    return response.json()["id"]


@pytest.mark.django_db
def test_metric_runs_are_scored_ranked_and_compared(metric_task: dict[str, Any]) -> None:
    kind, task = get_kind("metric"), metric_task["task"]
    config = task.kind_config
    gold = kind.compile_gold(metric_task["gold"], config)
    for name in ("close", "noisy", "length"):
        upload(metric_task, name)
    board = Client().get("/api/v1/tasks/metric-task/leaderboard/").json()
    assert all(measure["higher_is_better"] for measure in board["measures"])
    runs = {run["name"]: run for run in board["runs"]}
    for name in ("close", "noisy", "length"):
        direct = kind.score(kind.parse_run(metric_task["runs"][name], gold, config), gold, config).summary()
        assert runs[name]["scores"] == orjson.loads(orjson.dumps(direct))
    close_pp = runs["close"]["scores"]["measures"]["predictive_power"]
    better = [run for run in runs.values() if run["scores"]["measures"]["predictive_power"] > close_pp]
    assert runs["close"]["ranks"]["predictive_power"] == 1 + len(better)

    from leaderboard.models import TaskStatistics

    record = TaskStatistics.objects.get(task=task, phase=None)
    labels = {str(run_id): label for run_id, label in record.run_labels.items()}
    from tasks.models import Run

    stored = Run.objects.in_bulk(record.run_ids)
    parsed = {labels[str(run_id)]: kind.parse_run(orjson.loads(_file(stored[run_id])), gold, config)
              for run_id in record.run_ids}
    expected = kind.compare(parsed, gold, config, seed=task.statistics_seed, resamples=200)
    assert record.meta["kind"] == orjson.loads(orjson.dumps(expected))
    assert set(record.meta["kind"]["metrics"]) == set(labels.values())
    page = Client().get("/tasks/metric-task/statistics/").content.decode()
    assert "Paired bootstrap test of predictive power" in page and "Concordance with the gold property metric" in page
    assert "Aurora/close" in page
    # Each metric's ASL curve over the gold's systems, as the kind computed it (sorted p-values).
    section = page[page.index("ASL curves over the gold&#x27;s systems</h2>"):]
    assert 'aria-label="ASL curves: ASL curves over the gold&#x27;s systems"' in section.split("</h2>", 2)[1]
    power = record.meta["kind"]["discriminative_power"]["metrics"]
    curves = {name: entry["asl_curve"] for name, entry in power.items()}
    assert all(curve == sorted(curve) and len(curve) == 6 for curve in curves.values())  # 4 systems: 6 pairs


def _file(run: Any) -> bytes:
    from tasks.runfiles import read_run_file

    return read_run_file(run)


@pytest.mark.django_db
def test_a_live_board_does_not_compare_metrics_on_the_whole_test_set(metric_task: dict[str, Any]) -> None:
    from django.utils import timezone

    from leaderboard.models import TaskStatistics
    from tasks.models import Phase

    task = metric_task["task"]
    now = timezone.now()
    Phase.objects.create(task=task, name="test", kind=Phase.TEST, gold_version=task.latest_gold(),
                         starts_at=now - timezone.timedelta(days=1), ends_at=now + timezone.timedelta(days=1),
                         live_subset_size=12, live_subset_seed=1)
    for name in ("close", "noisy"):
        upload(metric_task, name)
    record = TaskStatistics.objects.get(task=task, phase__name="test")
    assert record.scope == "live" and record.n_items == 12
    assert record.meta["kind"] == {"unavailable": "computed on whole-set scores only; this board shows the live "
                                                  "subset"}
    page = Client().get("/tasks/metric-task/statistics/?phase=test").content.decode()
    assert "Not computed: computed on whole-set scores only" in page


@pytest.mark.django_db
def test_the_run_page_shows_each_interval_with_what_it_estimates(metric_task: dict[str, Any]) -> None:
    from tasks.models import Run, Score

    run_id = upload(metric_task, "close")
    client = Client()
    assert client.login(username="alice", password="alice-pass-1")
    page = client.get(f"/runs/{Run.objects.get(pk=run_id).pk}/").content.decode()
    summary = Score.objects.get(run_id=run_id).summary
    section = page[page.index('<section id="run-intervals">'):]
    section = section[:section.index("</section>")]
    low, high = summary["intervals"]["system_spearman"]
    assert ("<td>Spearman of system means<br><span class=\"meta\">95% interval for the system-level Spearman "
            "correlation if the contexts were drawn again</span></td><td class=\"num\">"
            f"{summary['measures']['system_spearman']:.4f}<br><span class=\"meta\">{low:.4f} to {high:.4f}</span>"
            "</td>") in section
    assert "<td>Pearson of system means, corrected for context noise<br>" in section
    assert "95% interval for the correlation of the systems&#x27; true mean scores" in section
    # The plain Pearson of system means: no interval, and one sentence says why.
    assert "<strong>Pearson of system means</strong>" in section and "no interval: context noise" in section
    assert "<td>Pearson of system means<br>" not in section
