"""Issue 12's acceptance test: a kind defined in the tests (``tests.toy_kind``, a few lines, one
gold format) gets uploads, scores, a board, statistics and exports from the server, without a line
of ``tasks/`` or ``leaderboard/`` knowing it. Every number is checked against plain Python here,
not against the server's own code."""

from __future__ import annotations

import csv
import io
from typing import Any

import numpy as np
import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from scoring import compare, stats
from scoring.kinds import KINDS, register
from scoring.stats import stream
from tests.conftest import committing
from tests.toy_kind import ToyKind

VALUES = [2.0, 4.0, 1.0, 8.0, 5.0, 3.0]
GUESSES = {"near": [2.5, 4.0, 1.5, 7.0, 5.0, 3.5], "far": [4.0, 1.0, 3.0, 2.0, 9.0, 0.5],
           "middle": [3.0, 5.0, 2.0, 6.0, 4.0, 3.0]}


@pytest.fixture
def toy(db: Any, settings: Any, tmp_path: Any) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from tasks.models import Team
    from tasks.organising import create_task, load_gold_version
    from tasks.tokens import issue_token

    settings.EVALSERVER_STATISTICS_MODE = "sync"
    register(ToyKind())
    users = get_user_model()
    task = create_task("toy-task", title="Guess the numbers", kind="toy")
    task.permutations = 500
    task.save()
    organiser = users.objects.create_user("olivia", password="organiser-pass-1")
    task.organisers.add(organiser)
    with committing():
        load_gold_version(task, orjson.dumps([{"id": f"n{i}", "value": v} for i, v in enumerate(VALUES)]), "gold.json")
    tokens = {}
    for name in ("alice", "bob"):
        user = users.objects.create_user(name, password=f"{name}-pass-1")
        Team.objects.create(name=name.title(), slug=name).members.add(user)
        tokens[name] = issue_token(user)
    yield {"task": task, "organiser": organiser, "tokens": tokens, "folder": tmp_path}
    KINDS.pop("toy", None)


def upload(toy: dict[str, Any], who: str, name: str, entries: Any) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {toy['tokens'][who]}")
    with committing():
        return client.post("/api/v1/tasks/toy-task/runs/", {
            "file": SimpleUploadedFile("run.json", orjson.dumps(entries), "application/json"), "name": name},
            format="multipart")


def guesses(values: list[float]) -> list[dict[str, Any]]:
    return [{"id": f"n{i}", "guess": g} for i, g in enumerate(values)]


def expected(values: list[float]) -> dict[str, float]:
    error = sum(abs(g - v) for g, v in zip(values, VALUES, strict=True)) / len(VALUES)
    return {"error": error, "ratio": sum(values) / sum(VALUES)}


@pytest.mark.django_db
def test_a_toy_kind_goes_through_uploads_scores_board_statistics_and_exports(toy: dict[str, Any]) -> None:
    for who, name in (("alice", "near"), ("alice", "far"), ("bob", "middle")):
        response = upload(toy, who, name, guesses(GUESSES[name]))
        assert response.status_code == 202, response.content
    # Validation is the kind's, with its messages, and nothing is stored.
    refused = upload(toy, "bob", "broken", [{"id": "n0", "guess": "x"}])
    assert refused.status_code == 400
    assert refused.json()["errors"][0] == "$[0].guess: expected a finite number"

    board = Client().get("/api/v1/tasks/toy-task/leaderboard/").json()
    assert board["kind"] == "toy"
    assert [(m["key"], m["higher_is_better"], m["official"]) for m in board["measures"]] == [
        ("error", False, True), ("ratio", True, False)]
    runs = {run["name"]: run for run in board["runs"]}
    assert set(runs) == {"near", "far", "middle", "baseline-one-v1"}
    for name, values in {**GUESSES, "baseline-one-v1": [1.0] * 6}.items():
        assert runs[name]["scores"]["measures"] == pytest.approx(expected(values), abs=1e-15)
        assert runs[name]["scores"]["n_items"] == 6
    # Ranks follow each measure's direction: least error first, largest ratio first.
    by_error = sorted(runs, key=lambda name: runs[name]["scores"]["measures"]["error"])
    by_ratio = sorted(runs, key=lambda name: -runs[name]["scores"]["measures"]["ratio"])
    assert [runs[name]["ranks"]["error"] for name in by_error] == [1, 2, 3, 4]
    assert [runs[name]["ranks"]["ratio"] for name in by_ratio] == [1, 2, 3, 4]

    # The page: its group's tab, the official measure by default, all on request, best first.
    page = Client().get("/tasks/toy-task/").content.decode()
    assert "Toy numbers" not in page.split('<table class="board"')[0].split("<nav")[0]
    assert ">ERR" in page and ">RATIO" not in page.split("</table>")[0]
    every = Client().get("/tasks/toy-task/?show=all&sort=ratio").content.decode()
    table = every[every.index('<table class="board"'):every.index("</table>")]
    assert ">RATIO ▼" in table
    assert [table.index(f">{name}<") for name in by_ratio] == sorted(table.index(f">{name}<") for name in by_ratio)
    assert "higher is better" in every and "lower is better" in every

    csv_rows = list(csv.DictReader(io.StringIO(Client().get("/tasks/toy-task/leaderboard.csv").content.decode())))
    assert {row["run"]: float(row["ratio"]) for row in csv_rows} == pytest.approx(
        {name: expected(values)["ratio"] for name, values in {**GUESSES, "baseline-one-v1": [1.0] * 6}.items()})

    # Statistics over per-item vectors, with the top group drawn in each measure's direction.
    from leaderboard.models import TaskStatistics

    record = TaskStatistics.objects.get(task=toy["task"], phase=None)
    assert record.n_items == 6
    error = record.measure("error", pairwise=True).entry()
    order = [next(name for name in runs if runs[name]["id"] == run_id) for run_id in error["run_ids"]]
    matrix = np.column_stack([np.abs(np.array(GUESSES.get(name, [1.0] * 6)) - VALUES) for name in order])
    reference = stats.randomised_tukey_hsd({"error": matrix}, n_permutations=500, seed=toy["task"].statistics_seed)
    assert np.array_equal(error["pvalues"], reference["error"].pvalues)
    assert error["top_group"][0] == runs["near"]["id"]
    ratio = record.measure("ratio").summary
    best_ratio = max(ratio["run_ids"], key=lambda run_id: ratio["means"][ratio["run_ids"].index(run_id)])
    assert best_ratio in ratio["top_group"]
    # The ratio is a corpus figure (issue 26): its statistics are about sum(guesses) / sum(values),
    # not the mean of per-item ratios; p-values as the spec's loop over rows of statistics gives them.
    order = [next(name for name in runs if runs[name]["id"] == run_id) for run_id in ratio["run_ids"]]
    guessed = np.column_stack([np.array(GUESSES.get(name, [1.0] * 6)) for name in order])
    assert ratio["headline"] == "corpus"
    assert ratio["means"] == pytest.approx([expected(list(guessed[:, j]))["ratio"] for j in range(len(order))],
                                           abs=1e-15)
    k = len(order)
    observed = guessed.sum(axis=0) / sum(VALUES)
    counts = np.zeros((k, k), dtype=np.int64)
    for b in range(500):
        totals = np.zeros((k, 2))
        for d in range(6):
            perm = stream._row_permutation(toy["task"].statistics_seed, b, d, 6, k)
            for c in range(k):
                totals[perm[c]] += (guessed[d, c], VALUES[d])
        figures = totals[:, 0] / totals[:, 1]
        counts += (figures.max() - figures.min()) >= np.abs(observed[:, None] - observed[None, :]) - 1e-12
    ratio_pvalues = record.measure("ratio", pairwise=True).entry()["pvalues"]
    assert np.array_equal(ratio_pvalues, (counts + 1) / 501)
    assert all(low <= mean <= high for low, mean, high in zip(ratio["ci_low"], ratio["means"], ratio["ci_high"],
                                                             strict=True))
    # The offline compare command on the same runs (in the board's order), gold, seed and B gives the
    # numbers the server stored (R: the server draws min(B, 10,000) resamples).
    folder = toy["folder"]
    (folder / "gold.json").write_bytes(orjson.dumps([{"id": f"n{i}", "value": v} for i, v in enumerate(VALUES)]))
    for name in order:
        (folder / f"{name}.json").write_bytes(orjson.dumps(guesses(GUESSES.get(name, [1.0] * 6))))
    out, err = io.StringIO(), io.StringIO()
    status = compare.main([*(str(folder / f"{name}.json") for name in order), "--gold", str(folder / "gold.json"),
                           "--kind", "toy", "--permutations", "500", "--bootstrap", "500",
                           "--seed", str(toy["task"].statistics_seed)], stdout=out, stderr=err)
    assert status == 0, err.getvalue()
    offline = orjson.loads(out.getvalue())["measures"]
    for key in ("error", "ratio"):
        stored = record.measure(key, pairwise=True).entry()
        measure = offline[key]
        assert measure["headline"] == ("corpus" if key == "ratio" else "mean")
        assert [measure["runs"][name]["score"] for name in order] == pytest.approx(stored["means"], abs=1e-12)
        assert [measure["runs"][name]["ci"] for name in order] == [
            [low, high] for low, high in zip(stored["ci_low"], stored["ci_high"], strict=True)]
        k = len(order)
        assert [pair["p"] for pair in measure["pairs"]] == [stored["pvalues"][i][j] for i in range(k)
                                                            for j in range(i + 1, k)]
        assert measure["top_group"] == [order[stored["run_ids"].index(run_id)] for run_id in stored["top_group"]]
    stats_page = Client().get("/tasks/toy-task/statistics/").content.decode()
    assert "RATIO" in stats_page and "6 items" in stats_page

    # Exports: the per-item matrix (public board, no test phase), p-values and the LaTeX table.
    matrix_csv = Client().get("/tasks/toy-task/statistics/error/matrix.csv").content.decode().splitlines()
    assert matrix_csv[1].split(",")[0] == "n0" and len(matrix_csv) == 7
    assert Client().get("/tasks/toy-task/statistics/ratio/pvalues.csv").status_code == 200
    # A corpus figure is not the mean of its per-item scores: its matrix is offered under its own name,
    # but no Discpower files (Discpower tests means).
    assert Client().get("/tasks/toy-task/statistics/ratio/matrix.csv").status_code == 200
    refused = Client().get("/tasks/toy-task/statistics/ratio/matrix.txt")
    assert refused.status_code == 404 and b"corpus-level figure" in refused.content
    assert "no Discpower files" in Client().get("/tasks/toy-task/statistics/").content.decode()
    latex = Client().get("/tasks/toy-task/statistics/all/means.tex").content.decode()
    assert "6 items" in latex and "near" in latex

    # The run page and the organiser's results export.
    client = Client()
    client.force_login(toy["organiser"])
    run_page = client.get(f"/runs/{runs['far']['id']}/").content.decode()
    assert "Per-item scores (6 items)" in run_page and "n5" in run_page
    results = client.get("/organiser/toy-task/results.json").json()["results"]
    far = next(row for row in results if row["run"] == "far")
    assert far["error"] == pytest.approx(expected(GUESSES["far"])["error"], abs=1e-15)
