"""Every CSV the project serves guards participant text against spreadsheet formulas (issue 11,
defect 8c): a team and a run named like a DDE formula appear with a leading ' in the leaderboard
CSV, the organiser's results.csv, the runs zip's manifest.csv and the statistics exports."""

from __future__ import annotations

import csv
import io
import zipfile

import numpy as np
import pytest
from django.test import Client

from scoring.exports import csv_cell, csv_text
from tasks import submissions
from tasks.models import Team
from tests.conftest import World, committing, run_bytes

HOSTILE = "=cmd|' /C calc'!A0"
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def test_the_writer_guards_text_and_leaves_numbers_alone() -> None:
    assert [csv_cell(value) for value in ("=1+1", "+x", "-x", "@x", "\tx", "\rx", "plain", -0.5, -3, None, True)] == [
        "'=1+1", "'+x", "'-x", "'@x", "'\tx", "'\rx", "plain", "-0.5", "-3", "", "1"]
    assert [csv_cell(value) for value in (False, np.bool_(True), np.bool_(False), 1, 0)] == ["0", "1", "0", "1", "0"]
    assert csv_text([["a", "=b"], [0.1, None]]) == "a,'=b\n0.1,\n"
    assert csv_text([["=b"]], guard_formulas=False) == "=b\n"


def _cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def _assert_guarded(text: str, where: str) -> None:
    cells = _cells(text)
    hostile = [cell for cell in cells if "cmd|" in cell]
    assert hostile, f"{where}: the hostile name is missing"
    assert all(cell.startswith("'") for cell in hostile), (where, hostile)
    for cell in cells:  # nothing else starts like a formula either, except numbers
        if cell.startswith(FORMULA_START):
            float(cell)


@pytest.mark.django_db
def test_every_csv_the_project_serves_is_guarded(world: World, settings) -> None:
    settings.EVALSERVER_STATISTICS_MODE = "sync"
    team = Team.objects.create(name=HOSTILE, slug="cmd-c-calc")
    team.members.add(world.bob)
    world.bob.teams.remove(*world.bob.teams.exclude(pk=team.pk))
    with committing():
        submissions.submit_run(world.task, world.bob, submissions.Submission(
            content=run_bytes(world.gold, 0.4, 2), name=HOSTILE, description="+SUM(A1:A9)"))
        submissions.submit_run(world.task, world.alice, submissions.Submission(
            content=run_bytes(world.gold, 0.2, 3), name="-1+1"))
    organiser = Client()
    organiser.force_login(world.organiser)
    slug = world.task.slug
    _assert_guarded(Client().get(f"/tasks/{slug}/leaderboard.csv").content.decode(), "leaderboard.csv")
    _assert_guarded(organiser.get(f"/organiser/{slug}/results.csv").content.decode(), "results.csv")
    download = organiser.get(f"/organiser/{slug}/runs.zip")
    archive = zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content)))
    manifest = archive.read("manifest.csv").decode()
    _assert_guarded(manifest, "manifest.csv")
    assert "'+SUM(A1:A9)" in _cells(manifest) and "'-1+1" in _cells(manifest)
    for kind in ("matrix.csv", "pvalues.csv"):
        response = organiser.get(f"/tasks/{slug}/statistics/nugget.jsd/{kind}")
        assert response.status_code == 200, kind
        _assert_guarded(response.content.decode(), kind)
    # The numbers still read back as numbers (results.csv: the means of the runs).
    rows = list(csv.DictReader(io.StringIO(organiser.get(f"/organiser/{slug}/results.csv").content.decode())))
    hostile_row = next(row for row in rows if row["team"] == "'" + HOSTILE)
    assert hostile_row["run"] == "'" + HOSTILE and 0 < float(hostile_row["nugget.jsd"]) < 1


@pytest.mark.django_db
def test_booleans_are_written_alike_in_the_public_and_the_organisers_csvs(world: World) -> None:
    """The public leaderboard CSV wrote ``baseline`` as 0/1, results.csv and manifest.csv as
    True/False (issue 17, item 9): every CSV now writes 1 and 0."""
    with committing():
        submissions.submit_run(world.task, world.alice, submissions.Submission(
            content=run_bytes(world.gold, 0.2, 3), name="shown"))
        submissions.submit_run(world.task, world.bob, submissions.Submission(
            content=run_bytes(world.gold, 0.3, 4), name="hidden", is_public=False))
    organiser = Client()
    organiser.force_login(world.organiser)
    slug = world.task.slug
    public = {row["run"]: row for row in csv.DictReader(io.StringIO(
        Client().get(f"/tasks/{slug}/leaderboard.csv").content.decode()))}
    results = {row["run"]: row for row in csv.DictReader(io.StringIO(
        organiser.get(f"/organiser/{slug}/results.csv").content.decode()))}
    assert {run: row["baseline"] for run, row in public.items()} == {
        "shown": "0", "baseline-uniform-v1": "1", "baseline-popularity-v1": "1"}
    assert {run: (row["baseline"], row["public"], row["withdrawn"]) for run, row in results.items()} == {
        "shown": ("0", "1", "0"), "hidden": ("0", "0", "0"), "baseline-uniform-v1": ("1", "1", "0"),
        "baseline-popularity-v1": ("1", "1", "0")}
    archive = zipfile.ZipFile(io.BytesIO(b"".join(organiser.get(f"/organiser/{slug}/runs.zip").streaming_content)))
    manifest = {row["name"]: row for row in csv.DictReader(io.StringIO(archive.read("manifest.csv").decode()))}
    assert {name: (row["public"], row["withdrawn"]) for name, row in manifest.items()} == {
        "shown": ("1", "0"), "hidden": ("0", "0")}
