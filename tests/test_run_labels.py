"""Run labels unique within a board (issue 37.1): a team may reuse a run name (the runs differ by
id), and every export, the p-value page and the charts must still tell the runs apart."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

from leaderboard.board import Board, run_labels
from leaderboard.models import TaskStatistics
from tasks import submissions
from tasks.models import Run
from tests.conftest import World, committing, run_bytes


def submit(world: World, user, noise: float, seed: int, name: str) -> Run:
    with committing():
        submission = submissions.Submission(content=run_bytes(world.gold, noise, seed), name=name)
        return submissions.submit_run(world.task, user, submission)


@pytest.fixture
def twice(world: World, settings) -> tuple[World, Run, Run]:
    settings.EVALSERVER_STATISTICS_MODE = "sync"
    first = submit(world, world.alice, 0.05, 1, "TEAM-run1")
    second = submit(world, world.alice, 0.5, 2, "TEAM-run1")
    submit(world, world.bob, 0.95, 3, "other")
    return world, first, second


@pytest.mark.django_db
def test_every_export_of_a_board_with_a_repeated_run_name_names_the_runs_apart(twice) -> None:
    world, first, second = twice
    team = first.team.name
    one, two = f"{team}/TEAM-run1 (#{first.pk})", f"{team}/TEAM-run1 (#{second.pk})"
    client = Client()
    base = f"/tasks/{world.task.slug}/statistics"
    for path in ("all/means.tex", "nugget.jsd/pvalues.txt", "nugget.jsd/pvalues.csv", "nugget.jsd/matrix.csv",
                 "nugget.jsd/matrix.txt", "nugget.jsd/runs.txt"):
        response = client.get(f"{base}/{path}")
        assert response.status_code == 200, (path, response.content[:300])
    header = next(csv.reader(io.StringIO(client.get(f"{base}/nugget.jsd/matrix.csv").content.decode())))
    assert one in header and two in header
    runs = client.get(f"{base}/nugget.jsd/runs.txt").content.decode().splitlines()
    assert one.replace(" ", "_") in runs and two.replace(" ", "_") in runs
    pairs = list(csv.DictReader(io.StringIO(client.get(f"{base}/nugget.jsd/pvalues.csv").content.decode())))
    assert {(one, two), (two, one)} & {(pair["run_a"], pair["run_b"]) for pair in pairs}
    latex = client.get(f"{base}/all/means.tex").content.decode()
    assert f"TEAM-run1 (\\#{first.pk})" in latex and f"TEAM-run1 (\\#{second.pk})" in latex
    # The other runs keep their plain names: only a repeated label gets the run's number.
    assert f"{world.bob.teams.first().name}/other" in header
    page = client.get(f"{base}/nugget.jsd/pvalues/").content.decode()
    assert one in page and two in page
    statistics = client.get(f"{base}/").content.decode()
    assert one in statistics and two in statistics
    record = TaskStatistics.objects.get(task=world.task, phase=None)
    assert record.run_labels[str(first.pk)] == one and record.run_labels[str(second.pk)] == two
    chart = client.get(f"/tasks/{world.task.slug}/?sort=nugget.jsd").content.decode()
    assert one in chart and two in chart


def test_labels_number_only_the_runs_whose_label_repeats() -> None:
    rows = [{"id": 5, "team": "Aurora", "name": "run1"}, {"id": 6, "team": "Aurora", "name": "run1"},
            {"id": 7, "team": "Borealis", "name": "run1"}, {"id": 8, "team": "Aurora", "name": "a b"},
            {"id": 9, "team": "Aurora", "name": "a_b"}, {"id": 10, "team": "Aurora", "name": "run1 (#5)"}]
    assert run_labels(rows) == {
        5: "Aurora/run1 (#5)", 6: "Aurora/run1 (#6)", 7: "Borealis/run1",
        # One name in the whitespace-separated exports (Discpower, pvalues.txt): numbered too.
        8: "Aurora/a b (#8)", 9: "Aurora/a_b (#9)",
        # A name that copies another run's number: it meets "Aurora/run1 (#5)" and gets its own.
        10: "Aurora/run1 (#5) (#10)"}
    assert run_labels(rows[:1] + rows[2:4]) == {5: "Aurora/run1", 7: "Borealis/run1", 8: "Aurora/a b"}


@pytest.mark.django_db
def test_an_export_the_library_refuses_is_a_clear_409_not_a_500(twice, monkeypatch) -> None:
    world, _, _ = twice
    # Labels that are not unique, as a labelling mistake would hand them to the export functions.
    monkeypatch.setattr(Board, "labels", lambda self: {row["id"]: "same" for row in self.rows})
    client = Client(raise_request_exception=False)
    base = f"/tasks/{world.task.slug}/statistics"
    for path in ("all/means.tex", "nugget.jsd/pvalues.txt", "nugget.jsd/pvalues.csv", "nugget.jsd/matrix.csv",
                 "nugget.jsd/runs.txt"):
        response = client.get(f"{base}/{path}")
        kind = path.split("/")[1]
        assert response.status_code == 409, (path, response.status_code)
        assert response.content.decode() == (f"cannot export {kind} of {path.split('/')[0]} because run names must "
                                              "be unique; repeated: ['same']\n")
