"""Gold versions across a whole round: development gold, test gold, a corrected test gold.

Each board shows the runs and the baselines of its own gold version; a corrected gold moves the
phases it is loaded for and re-scores their runs, keeping the old scores; publication of the
final phase turns the test board from its live subset to the whole set.
"""

from __future__ import annotations

import io
from datetime import timedelta

import orjson
import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from fixtures.synthetic import generate_gold
from tasks import changes, organising, submissions
from tasks.models import Phase, Run, Score
from tests.conftest import World, committing, run_bytes


def phase(world: World, name: str, kind: str, version, live: int | None = None, open_now: bool = True) -> Phase:
    now = timezone.now()
    start, end = (now - timedelta(hours=1), now + timedelta(hours=1)) if open_now else (
        now - timedelta(days=3), now - timedelta(days=2))
    with committing():
        return Phase.objects.create(task=world.task, name=name, kind=kind, gold_version=version, starts_at=start,
                                    ends_at=end, live_subset_size=live, live_subset_seed=3)


def upload(world: World, user, content: bytes, name: str, in_phase: Phase | None) -> Run:
    with committing():
        return submissions.submit_run(world.task, user, submissions.Submission(content=content, name=name,
                                                                               description="method"), in_phase)


def board(world: World, phase_name: str) -> dict:
    return Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase={phase_name}").json()


def load(world: World, gold: list, phases=()) -> object:
    with committing():
        return organising.load_gold_version(world.task, orjson.dumps(gold), "gold.json", phases=phases)


@pytest.mark.django_db
def test_every_board_shows_the_baselines_of_its_gold_version_with_live_scores_where_needed(world: World) -> None:
    dev = phase(world, "dev", Phase.DEVELOPMENT, world.gold_version, open_now=False)
    upload(world, world.alice, run_bytes(world.gold), "dev-run", None)
    Run.objects.filter(name="dev-run").update(phase=dev)
    test_gold = generate_gold(40, seed=8)
    v2 = load(world, test_gold)
    phase(world, "test", Phase.TEST, v2, live=15)
    upload(world, world.alice, run_bytes(test_gold), "test-run", Phase.objects.get(name="test"))

    development = board(world, "dev")
    assert development["gold_version"] == 1
    assert sorted(entry["name"] for entry in development["runs"]) == [
        "baseline-popularity-v1", "baseline-uniform-v1", "dev-run"]
    test = board(world, "test")
    assert (test["gold_version"], test["scope"]) == (2, "live")
    assert sorted(entry["name"] for entry in test["runs"]) == [
        "baseline-popularity-v2", "baseline-uniform-v2", "test-run"]
    # The baselines were scored again when the phase with a live subset appeared: 15 dialogues.
    assert {entry["scores"]["n_items"] for entry in test["runs"]} == {15}
    uniform = Run.objects.get(name="baseline-uniform-v2")
    assert set(Score.objects.filter(run=uniform).values_list("scope", flat=True)) == {"full", "live"}


@pytest.mark.django_db
def test_publishing_the_final_phase_puts_the_test_board_on_the_whole_test_set(world: World) -> None:
    test = phase(world, "test", Phase.TEST, world.gold_version, live=10)
    upload(world, world.alice, run_bytes(world.gold), "test-run", test)
    assert board(world, "test")["scope"] == "live"
    final = phase(world, "final", Phase.FINAL, world.gold_version, open_now=False)
    assert board(world, "final")["runs"] == []  # not published yet
    with committing():
        final.results_published = True
        final.save()
    # Not while the test phase takes runs on that gold (each new run would learn its test scores).
    assert board(world, "test")["scope"] == "live" and board(world, "final")["runs"] == []
    with committing():
        test.ends_at = timezone.now()
        test.save()
    shown = board(world, "test")
    assert shown["scope"] == "full" and {entry["scores"]["n_items"] for entry in shown["runs"]} == {30}
    assert sorted(entry["name"] for entry in board(world, "final")["runs"]) == [
        "baseline-popularity-v1", "baseline-uniform-v1", "test-run"]


@pytest.mark.django_db
def test_a_corrected_test_gold_moves_its_phase_and_rescores_only_its_runs(world: World, tmp_path) -> None:
    dev = phase(world, "dev", Phase.DEVELOPMENT, world.gold_version, open_now=False)
    dev_run = upload(world, world.alice, run_bytes(world.gold), "dev-run", None)
    Run.objects.filter(pk=dev_run.pk).update(phase=dev)
    test_gold = generate_gold(40, seed=8)
    v2 = load(world, test_gold)
    test = phase(world, "test", Phase.TEST, v2, live=15)
    test_run = upload(world, world.bob, run_bytes(test_gold, seed=4), "test-run", test)
    before = Score.objects.get(run=test_run, scope="full").summary

    corrected = [dict(dialogue) for dialogue in test_gold]
    for dialogue in corrected[:5]:  # five dialogues get one more annotator
        dialogue["annotations"] = [*dialogue["annotations"], dialogue["annotations"][0]]
    out = io.StringIO()
    gold_file = tmp_path / "test-gold-corrected.json"
    gold_file.write_bytes(orjson.dumps(corrected))
    with committing():
        call_command("load_gold", world.task.slug, str(gold_file), "--phase", "test", stdout=out)
    assert out.getvalue().strip().splitlines()[-1] == "3"
    assert "phase(s) test now use it" in out.getvalue()

    test.refresh_from_db()
    test_run.refresh_from_db()
    dev_run.refresh_from_db()
    assert test.gold_version.number == 3
    assert (test_run.status, test_run.gold_version.number) == (Run.DONE, 3)
    assert dev_run.gold_version.number == 1  # its phase kept its gold
    # The old scores stay, tagged with their version; the new ones differ where the gold changed.
    kept = {score.gold_version.number: score.summary for score in Score.objects.filter(run=test_run, scope="full")}
    assert kept[2] == before and kept[3] != before
    shown = board(world, "test")
    assert shown["gold_version"] == 3
    assert sorted(entry["name"] for entry in shown["runs"]) == [
        "baseline-popularity-v3", "baseline-uniform-v3", "test-run"]


@pytest.mark.django_db
def test_load_gold_refuses_an_unknown_phase_and_stores_nothing(world: World, tmp_path) -> None:
    gold_file = tmp_path / "gold.json"
    gold_file.write_bytes(orjson.dumps(world.gold))
    phase(world, "dev", Phase.DEVELOPMENT, world.gold_version)
    with pytest.raises(CommandError, match=r"no phase 'tset' in demo-task \(its phases: dev\); nothing was stored"):
        call_command("load_gold", world.task.slug, str(gold_file), "--phase", "tset")
    assert world.task.gold_versions.count() == 1


@pytest.mark.django_db
def test_matrices_of_test_gold_wait_for_publication_even_on_a_development_board(world: World, settings) -> None:
    """A development phase bound to the test gold must not hand out per-dialogue test scores."""
    settings.EVALSERVER_STATISTICS_MODE = "sync"
    phase(world, "dev", Phase.DEVELOPMENT, world.gold_version)
    final = phase(world, "final", Phase.FINAL, world.gold_version, open_now=False)
    for number, user in enumerate((world.alice, world.bob)):
        upload(world, user, run_bytes(world.gold, seed=number), f"run-{number}", Phase.objects.get(name="dev"))
    url = f"/tasks/{world.task.slug}/statistics/nugget.jsd/matrix.csv?phase=dev"
    assert Client().get(url).status_code == 403
    page = Client().get(f"/tasks/{world.task.slug}/statistics/?phase=dev").content.decode()
    assert "pairs.csv" in page and "matrix.csv" not in page
    with committing():
        final.results_published = True
        final.save()
    assert Client().get(url).status_code == 403  # the dev phase still takes runs scored on this gold
    with committing():
        Phase.objects.filter(name="dev").update(ends_at=timezone.now())
        changes.board_changed(world.task)
    assert Client().get(url).status_code == 200


@pytest.mark.django_db
def test_pvalue_cells_and_latex_say_how_they_were_computed(world: World, settings) -> None:
    settings.EVALSERVER_STATISTICS_MODE = "sync"
    for number, user in enumerate((world.alice, world.bob)):
        upload(world, user, run_bytes(world.gold, noise=0.2 + 0.6 * number, seed=number), f"run-{number}", None)
    matrix = Client().get(f"/tasks/{world.task.slug}/statistics/nugget.jsd/pvalues/").content.decode()
    assert "effect size" in matrix and "Monte Carlo standard error" in matrix and matrix.count("<tr>") == 5
    latex = Client().get(f"/tasks/{world.task.slug}/statistics/all/means.tex").content.decode()
    assert "B = 200, seed 20190601" in latex and "30 dialogues (full scores, gold version 1)" in latex
