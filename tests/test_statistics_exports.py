"""The statistics exports for an overview paper (issue 43.5): Discpower's p-value file, the LaTeX
table in the board's order, Kendall's tau, mean ranks and runs per team as files, and one zip of
a board's exports. Expected values are computed here from the exported per-item scores."""

from __future__ import annotations

import csv
import io
import re
import zipfile
from datetime import timedelta

import numpy as np
import pytest
from django.test import Client
from django.utils import timezone
from scipy import stats as scipy_stats

from leaderboard.models import TaskStatistics
from scoring import exports
from scoring.stats import TukeyHSDResult, mean_ranks
from tasks import submissions
from tasks.models import Phase, Run
from tests.conftest import World, committing, run_bytes

PER_MEASURE = ("pvalues.txt", "pvalues.csv", "matrix.csv", "matrix.txt", "runs.txt")
BOARD_FILES = ("means.tex", "means-all.tex", "kendall.csv", "meanranks.csv", "teams.csv")


def submit(world: World, user, noise: float, seed: int, name: str, phase: Phase | None = None) -> Run:
    with committing():
        submission = submissions.Submission(content=run_bytes(world.gold, noise, seed), name=name)
        return submissions.submit_run(world.task, user, submission, phase)


@pytest.fixture
def board(world: World, settings) -> World:
    settings.EVALSERVER_STATISTICS_MODE = "sync"
    submit(world, world.alice, 0.05, 1, "close-to-gold")
    submit(world, world.alice, 0.5, 2, "half-noise")
    submit(world, world.bob, 0.95, 3, "mostly-noise")
    return world


def per_item(client: Client, base: str, key: str) -> dict[str, np.ndarray]:
    """Each run's per-item scores of ``key``, by label, read from the exported matrix."""
    rows = list(csv.reader(io.StringIO(client.get(f"{base}/{key}/matrix.csv").content.decode())))
    values = np.array([row[1:] for row in rows[1:]], dtype=float)
    return {label: values[:, j] for j, label in enumerate(rows[0][1:])}


def test_pvalue_lines_write_the_absolute_difference_and_the_csv_says_which_run_is_higher() -> None:
    # Runs 0..2 on 3 items: means 0.2, 0.5, 0.5 (a tie), differences worked out by hand.
    matrix = np.array([[0.1, 0.4, 0.6], [0.2, 0.5, 0.5], [0.3, 0.6, 0.4]])
    means = matrix.mean(axis=0)
    differences = means[:, None] - means[None, :]
    pvalues = np.array([[1.0, 0.01, 0.02], [0.01, 1.0, 0.9], [0.02, 0.9, 1.0]])
    result = TukeyHSDResult(measure="m", n_runs=3, n_dialogues=3, means=means, pvalues=pvalues,
                            differences=differences, effect_sizes=np.zeros((3, 3)), residual_variance=1.0,
                            mc_standard_errors=np.zeros((3, 3)), n_permutations=99, seed=1)
    lines = [line.split() for line in exports.pvalue_lines(["x", "y z", "w"], result).splitlines()]
    assert [(a, b) for a, b, _, _ in lines] == [("x", "y_z"), ("x", "w"), ("y_z", "w")]
    assert [float(diff) for _, _, diff, _ in lines] == pytest.approx([0.3, 0.3, 0.0], abs=1e-15)
    assert all(float(diff) >= 0 for _, _, diff, _ in lines)
    rows = list(csv.DictReader(io.StringIO(exports.pvalue_csv(["x", "y z", "w"], result))))
    assert [float(row["diff"]) for row in rows] == pytest.approx([-0.3, -0.3, 0.0], abs=1e-15)
    assert [row["higher"] for row in rows] == ["y z", "w", ""]


def test_mean_ranks_average_ties_as_rankdata_does() -> None:
    generator = np.random.default_rng(3)
    matrix = generator.integers(0, 4, size=(40, 6)).astype(float)  # many ties
    assert np.allclose(mean_ranks(matrix), scipy_stats.rankdata(matrix, axis=1).mean(axis=0), rtol=0, atol=1e-12)
    assert np.allclose(mean_ranks(matrix, lower_is_better=False),
                       scipy_stats.rankdata(-matrix, axis=1).mean(axis=0), rtol=0, atol=1e-12)
    # Worked example: item 1 ranks (1, 2.5, 2.5), item 2 ranks (3, 1, 2).
    assert mean_ranks(np.array([[0.1, 0.5, 0.5], [0.9, 0.2, 0.3]])).tolist() == [2.0, 1.75, 2.25]
    with pytest.raises(ValueError, match="missing scores"):
        mean_ranks(np.array([[0.1, np.nan]]))


def test_latex_rows_follow_the_ranking_measure_in_its_direction_ties_by_name() -> None:
    means = {"m": {1: 0.3, 2: 0.1, 3: 0.2, 4: 0.2}}
    figures = {1: 5.0, 2: 1.0, 3: 3.0, 4: 3.0}  # higher is better: 1, then 3 and 4 by name, then 2
    latex = exports.latex_means_tables(["zed", "amy", "kim", "bob"], ["m"], means, {"m": {2}}, [1, 2, 3, 4],
                                       groups={"m": "G"}, rank_by={"G": (figures, False)})
    rows = [line.split(" & ")[0] for line in latex.splitlines() if line.endswith(r"\\") and "Run" not in line]
    assert rows == ["zed", "bob", "kim", "amy"]


@pytest.mark.django_db
def test_board_exports_give_real_values(board: World) -> None:
    client = Client()
    base = f"/tasks/{board.task.slug}/statistics"
    specs = {spec.key: spec for spec in board.task.measure_specs()}

    # pvalues.txt: |mean_a - mean_b| of the per-item scores; the CSV keeps the sign and names the higher run.
    scores = per_item(client, base, "nugget.jsd")
    lines = [line.split() for line in client.get(f"{base}/nugget.jsd/pvalues.txt").content.decode().splitlines()]
    assert len(lines) == 10
    for a, b, diff, _ in lines:
        assert float(diff) == pytest.approx(abs(scores[a].mean() - scores[b].mean()), rel=1e-12, abs=1e-15)
    for row in csv.DictReader(io.StringIO(client.get(f"{base}/nugget.jsd/pvalues.csv").content.decode())):
        signed = scores[row["run_a"]].mean() - scores[row["run_b"]].mean()
        assert float(row["diff"]) == pytest.approx(signed, rel=1e-12, abs=1e-15)
        assert row["higher"] == (row["run_a"] if signed > 0 else row["run_b"])

    # Kendall's tau of every pair of measures: scipy's tau-b of the two rankings of the runs.
    taus = list(csv.DictReader(io.StringIO(client.get(f"{base}/all/kendall.csv").content.decode())))
    assert taus and set(taus[0]) >= {"measure_a", "measure_b", "tau", "low", "high"}
    matrices = {}
    for row in taus:
        for key in (row["measure_a"], row["measure_b"]):
            matrices.setdefault(key, per_item(client, base, key))
        labels = sorted(matrices[row["measure_a"]])

        def ranking(key: str, labels: list[str] = labels) -> list[float]:
            sign = -1.0 if specs[key].higher_is_better else 1.0
            return [sign * matrices[key][label].mean() for label in labels]

        expected = scipy_stats.kendalltau(ranking(row["measure_a"]), ranking(row["measure_b"])).statistic
        assert float(row["tau"]) == pytest.approx(expected, abs=1e-12)
        assert float(row["low"]) <= float(row["high"])

    # Mean ranks: scipy's rankdata over the runs on each item (rank 1 the best), averaged.
    table = list(csv.reader(io.StringIO(client.get(f"{base}/all/meanranks.csv").content.decode())))
    header, rows = table[0], table[1:]
    assert header[0] == "run" and len(rows) == 5 and {"nugget.jsd", "quality.A.rsnod"} <= set(header[1:])
    for column, key in enumerate(header[1:], start=1):
        by_label = matrices.get(key) or per_item(client, base, key)
        labels = list(by_label)
        sign = -1.0 if specs[key].higher_is_better else 1.0
        ranks = scipy_stats.rankdata(sign * np.column_stack([by_label[label] for label in labels]), axis=1).mean(axis=0)
        expected = dict(zip(labels, ranks, strict=True))
        assert {row[0]: float(row[column]) for row in rows} == pytest.approx(expected, abs=1e-12)

    # Runs per team.
    teams = list(csv.DictReader(io.StringIO(client.get(f"{base}/all/teams.csv").content.decode())))
    expected_teams = {}
    for run in Run.objects.filter(task=board.task).select_related("team"):
        team = run.team.name if run.team_id else "baseline"
        expected_teams.setdefault(team, []).append(f"{team}/{run.name}")
    assert {row["team"]: sorted(row["labels"].split("; ")) for row in teams} == {
        team: sorted(labels) for team, labels in expected_teams.items()}
    assert {row["team"]: int(row["runs"]) for row in teams} == {team: len(v) for team, v in expected_teams.items()}
    assert [row["baseline"] for row in teams] == ["0", "0", "1"]

    # LaTeX: each group's table lists its runs best first by the measure its board tab is sorted by.
    latex = client.get(f"{base}/all/means.tex").content.decode()
    tables = re.findall(r"% Table \d+ of \d+: ([^\n]*)\n.*?\\hline\n.*?\\hline\n(.*?)\\hline", latex, re.S)
    assert len(tables) >= 2
    for title, body in tables:
        group = [spec for spec in specs.values() if (spec.group_title or spec.group) == title]
        headline = ([spec for spec in group if spec.official] or group)[0]
        by_label = per_item(client, base, headline.key)
        sign = -1.0 if headline.higher_is_better else 1.0
        order = [line.split(" & ")[0] for line in body.strip().splitlines()]
        assert order == sorted(order, key=lambda label: (sign * by_label[label].mean(), label))
        assert len(order) == 5


@pytest.mark.django_db
def test_the_bundle_holds_every_export_byte_for_byte(board: World) -> None:
    client = Client()
    base = f"/tasks/{board.task.slug}/statistics"
    record = TaskStatistics.objects.get(task=board.task, phase=None)
    keys = [spec.key for spec in board.task.measure_specs() if spec.key in record.summaries()]
    response = client.get(f"{base}/all/exports.zip")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    name = response["Content-Disposition"].split('filename="')[1].rstrip('"')
    assert name.startswith(f"{board.task.slug}-board-gold-v1-statistics-") and name.endswith(".zip")
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    folder = name.removesuffix(".zip")
    expected = (["README.txt"] + [f"{key.replace('.', '_')}-{kind}" for key in keys for kind in PER_MEASURE]
                + [f"all-{kind}" for kind in BOARD_FILES])
    assert archive.namelist() == [f"{folder}/{member}" for member in expected]
    for key in keys:
        for kind in PER_MEASURE:
            single = client.get(f"{base}/{key}/{kind}")
            assert single.status_code == 200
            assert archive.read(f"{folder}/{key.replace('.', '_')}-{kind}") == single.content
    for kind in BOARD_FILES:
        url = f"{base}/all/means.tex?measures=all" if kind == "means-all.tex" else f"{base}/all/{kind}"
        assert archive.read(f"{folder}/all-{kind}") == client.get(url).content
    page = client.get(f"{base}/").content.decode()
    for kind in ("kendall.csv", "meanranks.csv", "teams.csv", "exports.zip"):
        assert f'href="{base}/all/{kind}"' in page
    readme = archive.read(f"{folder}/README.txt").decode()
    assert "Gold version 1" in readme and "B = 200" in readme and "all-kendall.csv" in readme


@pytest.mark.django_db
def test_a_refused_export_makes_the_bundle_409_not_500(board: World, monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise ValueError("run names collide")

    monkeypatch.setattr(exports, "pvalue_lines", refuse)
    response = Client().get(f"/tasks/{board.task.slug}/statistics/all/exports.zip")
    assert response.status_code == 409
    assert response.content.decode().startswith("cannot export pvalues.txt of ") and "run names collide" in \
        response.content.decode()


@pytest.mark.django_db
def test_the_bundle_answers_as_the_single_exports_do(world: World, settings) -> None:
    settings.EVALSERVER_STATISTICS_MODE = "sync"
    now = timezone.now()
    phase = Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=world.gold_version,
                                 starts_at=now - timedelta(hours=1), ends_at=now + timedelta(hours=1))
    submit(world, world.alice, 0.3, 0, "test-run-0", phase)
    submit(world, world.bob, 0.3, 1, "test-run-1", phase)
    readers = {"anonymous": Client(), "participant": Client(), "organiser": Client()}
    readers["participant"].force_login(world.alice)
    readers["organiser"].force_login(world.organiser)
    base = f"/tasks/{world.task.slug}/statistics"

    def statuses() -> dict[str, tuple[int, ...]]:
        seen = {}
        for who, client in readers.items():
            bundle = client.get(f"{base}/all/exports.zip?phase=test")
            names = zipfile.ZipFile(io.BytesIO(b"".join(bundle.streaming_content))).namelist() \
                if bundle.status_code == 200 else []
            seen[who] = (bundle.status_code,
                         client.get(f"{base}/quality.A.nmd/pvalues.txt?phase=test").status_code,
                         client.get(f"{base}/all/means.tex?phase=test").status_code,
                         client.get(f"{base}/all/teams.csv?phase=test").status_code,
                         # matrices: the single export's 200 or 403, and whether the bundle holds them
                         client.get(f"{base}/quality.A.nmd/matrix.csv?phase=test").status_code,
                         any(name.endswith("quality_A_nmd-matrix.csv") for name in names))
        return seen

    # While the test phase runs, the public board shows the live subset; its per-item scores are the organisers'.
    assert statuses() == {"anonymous": (200, 200, 200, 200, 403, False),
                          "participant": (200, 200, 200, 200, 403, False),
                          "organiser": (200, 200, 200, 200, 200, True)}
    phase.results_published = True
    with committing():  # publication drops the phase's statistics and computes them again on commit
        phase.save()
    phase.ends_at = timezone.now()
    with committing():
        phase.save()
    assert statuses() == {"anonymous": (200, 200, 200, 200, 200, True),
                          "participant": (200, 200, 200, 200, 200, True),
                          "organiser": (200, 200, 200, 200, 200, True)}
    world.task.is_public = False  # an unpublished task: nothing of it for anyone but its organisers
    with committing():
        world.task.save()
    assert statuses() == {"anonymous": (404, 404, 404, 404, 404, False),
                          "participant": (404, 404, 404, 404, 404, False),
                          "organiser": (200, 200, 200, 200, 200, True)}
