"""Publishing a test phase recomputes the statistics of the boards whose content changed, once
each, and leaves the others alone (issue 37.10)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import orjson
import pytest
from django.test import Client
from django.utils import timezone

from leaderboard import statistics
from tasks import organising, phaseclock, submissions
from tasks.models import Phase, Run
from tests.conftest import committing, make_world, run_bytes


def upload(world, user, seed: int, name: str, phase: Phase) -> Run:
    with committing():
        return submissions.submit_run(world.task, user, submissions.Submission(
            content=run_bytes(world.gold, 0.1 * seed, seed), name=name), phase)


@pytest.mark.django_db
@pytest.mark.parametrize("ticked_before", [False, True])
def test_publishing_a_test_phase_computes_its_board_once_and_not_the_development_board(
        settings, monkeypatch, ticked_before: bool) -> None:
    settings.EVALSERVER_STATISTICS_MODE = "sync"
    world = make_world(n_dialogues=30, seed=4)
    with committing():
        test_gold = organising.load_gold_version(world.task, orjson.dumps(world.gold), "test.json", label="test")
    now = timezone.now()
    with committing():
        dev = Phase.objects.create(task=world.task, name="dev", kind=Phase.DEVELOPMENT, gold_version=world.gold_version,
                                   starts_at=now - timedelta(days=3), ends_at=now + timedelta(days=3))
        test = Phase.objects.create(task=world.task, name="test", kind=Phase.TEST, gold_version=test_gold,
                                    starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=1),
                                    live_subset_size=10, live_subset_seed=4)
    for seed, user in enumerate((world.alice, world.bob), start=1):
        upload(world, user, seed, f"dev-{seed}", dev)
        upload(world, user, seed + 2, f"test-{seed}", test)
    phaseclock.advance()  # the clock has seen both phases open
    if ticked_before:  # ticked in the admin while open: the publication waits for the phase to close
        Phase.objects.filter(pk=test.pk).update(results_published=True)
        test.refresh_from_db()
    computed: Counter = Counter()
    real = statistics.compute_claimed

    def counted(task, claim):
        computed[claim.phase_id] += 1
        return real(task, claim)

    monkeypatch.setattr(statistics, "compute_claimed", counted)
    with committing():
        organising.set_publication(test, True, close_first=True)
    with committing():
        phaseclock.advance()  # the clock's next tick sees the test phase ended
    # The development board (another gold) shows what it showed: not computed; the test board once.
    assert dict(computed) == {test.pk: 1}
    assert Client().get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=test").json()["scope"] == "full"
