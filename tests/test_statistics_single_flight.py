"""Statistics: one computation per board at a time, one follow-up when dirty, no older result over
a newer one, the documented 5 s debounce in every mode, and pages that say what is stored.

Issue 11, defect 2: ten uploads 0.6 s apart started 4-5 computations at once on the embedded
default; the last writer stored statistics over 5 of 12 runs; the page promised a recomputation
that was never scheduled, or said "No statistics yet" with 7 runs scored.

Claims are made by threads with their own database connections: to PostgreSQL these are
separate sessions exactly as two processes would be (the claim is a conditional UPDATE; nothing
process-local takes part), so a thread race is a race between processes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from leaderboard import jobs as statistics_jobs
from leaderboard import scheduling, statistics, statistics_pages
from leaderboard.models import StatisticsState, TaskStatistics
from tasks import submissions
from tasks.changes import touch_scores
from tasks.models import Run
from tests.conftest import World, committing, require_postgres, run_bytes


def submit(world: World, user: Any, seed: int, name: str, capture: bool = True) -> Run:
    submission = submissions.Submission(content=run_bytes(world.gold, 0.3, seed), name=name)
    if not capture:  # transactional tests: on-commit callbacks run by themselves
        return submissions.submit_run(world.task, user, submission)
    with committing():
        return submissions.submit_run(world.task, user, submission)


def board_run_ids(world: World) -> set[int]:
    from leaderboard.board import build_board

    return {row["id"] for row in build_board(world.task, None, organiser=False).rows}


class Spy:
    """Wraps the real ``compute_board_statistics``: counts computations and the most that ran at
    once, and can run an action at the start of each (a trigger arriving mid-computation)."""

    def __init__(self, monkeypatch: Any, during: Any = None, hold: float = 0.0, after: Any = None) -> None:
        import leaderboard.statistics as module

        self.real = module.compute_board_statistics
        self.lock = threading.Lock()
        self.running = 0
        self.max_running = 0
        self.started = 0
        self.generations: list[int] = []
        self.during = during
        self.after = after  # after the board was read and the result stored, before the claim is released
        self.hold = hold
        monkeypatch.setattr(module, "compute_board_statistics", self)

    def __call__(self, task: Any, phase: Any, claim: scheduling.Claim) -> str:
        with self.lock:
            self.running += 1
            self.started += 1
            self.max_running = max(self.max_running, self.running)
            self.generations.append(claim.generation)
            number = self.started
        try:
            if self.during is not None:
                self.during(number)
            time.sleep(self.hold)
            outcome = self.real(task, phase, claim)
            if self.after is not None:
                self.after(number)
            return outcome
        finally:
            with self.lock:
                self.running -= 1


@pytest.fixture
def quiet_timers() -> Iterator[None]:
    """Thread-mode tests: no timer of this test outlives it (they would meet the next test's data)."""
    yield
    with statistics_jobs._timers_lock:
        timers = [timer for timer, _ in statistics_jobs._timers.values()]
        statistics_jobs._timers.clear()
    for timer in timers:
        timer.cancel()
    for timer in timers:
        timer.join(timeout=60)


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def settled(task_id: int) -> bool:
    """Every request served, no claim held, no timer armed (a lease-retry timer may stay armed)."""
    states = list(StatisticsState.objects.filter(task_id=task_id))
    return bool(states) and all(not state.pending and not state.claim_token for state in states)


# The debounce ------------------------------------------------------------------------------------------

def test_the_debounce_is_the_documented_five_seconds() -> None:
    from django.conf import settings

    assert settings.EVALSERVER_STATISTICS_DEBOUNCE_SECONDS == 5.0
    assert scheduling.debounce_seconds() == 5.0


@pytest.mark.django_db
def test_both_modes_wait_the_same_debounce(world: World, settings, monkeypatch, quiet_timers: None) -> None:
    """The thread mode used a 1 s timer (STATISTICS_DEBOUNCE_SECONDS / 5); both use the one setting."""
    armed: list[float] = []

    class Recorder(threading.Timer):
        def __init__(self, interval: float, *args: Any, **kwargs: Any) -> None:
            armed.append(interval)
            super().__init__(3600, *args, **kwargs)  # never fires within the test

    monkeypatch.setattr(threading, "Timer", Recorder)
    settings.EVALSERVER_STATISTICS_MODE = "thread"
    statistics_jobs.schedule_statistics(world.task.pk)
    assert armed == [5.0]

    settings.EVALSERVER_STATISTICS_MODE = "celery"
    sent: list[float] = []
    monkeypatch.setattr(statistics_jobs.compute_statistics_task, "apply_async",
                        lambda args, countdown: sent.append(countdown))
    statistics_jobs.schedule_statistics(world.task.pk)
    assert sent == [5.0]
    # And the settings value is what both read (tests shorten it).
    settings.EVALSERVER_STATISTICS_DEBOUNCE_SECONDS = 0.25
    statistics_jobs.cache.clear()
    statistics_jobs.schedule_statistics(world.task.pk)
    assert sent == [5.0, 0.25]


@pytest.mark.django_db
def test_nothing_starts_before_the_board_has_been_quiet_for_the_debounce(world: World, settings, monkeypatch) -> None:
    settings.EVALSERVER_STATISTICS_MODE = "celery"
    sent: list[float] = []
    monkeypatch.setattr(statistics_jobs.compute_statistics_task, "apply_async",
                        lambda args, countdown: sent.append(countdown))
    submit(world, world.alice, 1, "one")
    submit(world, world.bob, 2, "two")
    state = StatisticsState.objects.get(task=world.task)
    # A job arriving 2 s after the last trigger computes nothing and looks again 3 s later.
    StatisticsState.objects.filter(pk=state.pk).update(requested_at=timezone.now() - timedelta(seconds=2))
    statistics_jobs.cache.clear()
    answer = statistics_jobs.compute_statistics_task.run(world.task.pk)
    assert not TaskStatistics.objects.filter(task=world.task).exists()
    assert answer.startswith("next look in") and 2.5 < sent[-1] <= 3.0
    # But a steady stream of triggers cannot postpone it past six debounce windows.
    StatisticsState.objects.filter(pk=state.pk).update(requested_at=timezone.now(),
                                                       pending_since=timezone.now() - timedelta(seconds=31))
    assert statistics_jobs.compute_statistics_task.run(world.task.pk) == "nothing pending"
    assert len(TaskStatistics.objects.get(task=world.task).run_ids) == 4  # two runs, two baselines


# Single flight -------------------------------------------------------------------------------------------

@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_of_two_concurrent_claimants_exactly_one_wins(world: World) -> None:
    require_postgres()
    scheduling.request(world.task.pk)
    state = StatisticsState.objects.get(task=world.task)
    for round_number in range(12):
        StatisticsState.objects.filter(pk=state.pk).update(claim_token="", heartbeat_at=None, completed=0,
                                                           requested=round_number + 1)
        barrier = threading.Barrier(2)
        won: list[scheduling.Claim | None] = [None, None]

        def contend(slot: int, barrier: threading.Barrier, won: list) -> None:
            try:
                barrier.wait()
                won[slot] = scheduling.claim(state.pk)
            finally:
                connection.close()

        threads = [threading.Thread(target=contend, args=(slot, barrier, won)) for slot in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [claim for claim in won if claim is not None]
        assert len(winners) == 1, f"round {round_number}: {won}"
        assert winners[0].generation == round_number + 1
        assert StatisticsState.objects.get(pk=state.pk).claim_token == winners[0].token


@pytest.mark.django_db
def test_a_live_claim_keeps_others_out_and_a_lapsed_one_is_taken_over(world: World) -> None:
    scheduling.request(world.task.pk)
    state = StatisticsState.objects.get(task=world.task)
    first = scheduling.claim(state.pk)
    assert first is not None and scheduling.claim(state.pk) is None
    scheduling.request(world.task.pk)  # a trigger while it runs: still held
    assert scheduling.claim(state.pk) is None
    # Its process died: no heartbeat for longer than the lease.
    StatisticsState.objects.filter(pk=state.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=scheduling.LEASE_SECONDS + 1))
    second = scheduling.claim(state.pk)
    assert second is not None and second.generation == 2
    assert scheduling.finish(first, "late") is False  # the dead holder's release changes nothing
    assert StatisticsState.objects.get(pk=state.pk).claim_token == second.token


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_from_many_threads_never_compute_a_board_twice_at_once(
        world: World, monkeypatch) -> None:
    """Eight contenders (web threads, a command, workers) call run_due at once, again and again,
    while triggers keep coming: never two computations of the board at the same time."""
    require_postgres()
    spy = Spy(monkeypatch, hold=0.2)
    submit(world, world.alice, 1, "one", capture=False)
    submit(world, world.bob, 2, "two", capture=False)
    # Until a few computations went by (a loaded machine is slow; the bound only ends a hang).
    stop = time.monotonic() + 60.0

    def contender() -> None:
        try:
            while spy.started < 4 and time.monotonic() < stop:
                scheduling.request(world.task.pk)
                statistics.run_due(world.task.pk, force=True)
        finally:
            connection.close()

    threads = [threading.Thread(target=contender) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert spy.started >= 3
    assert spy.max_running == 1
    state = StatisticsState.objects.get(task=world.task)
    assert state.computations == spy.started


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_command_waits_for_the_computation_another_process_holds_then_computes_the_newer_request(
        world: World, monkeypatch) -> None:
    """runserver's timer thread computes the board; ``manage.py demo`` (compute_task_statistics)
    asks meanwhile: it neither computes at the same time nor returns with its request unserved."""
    require_postgres()
    from leaderboard.statistics import compute_task_statistics

    submit(world, world.alice, 1, "one", capture=False)
    submit(world, world.bob, 2, "two", capture=False)
    scheduling.request(world.task.pk)
    state = StatisticsState.objects.get(task=world.task)
    held = scheduling.claim(state.pk)
    spy = Spy(monkeypatch)

    def other_process_finishes() -> None:
        try:
            time.sleep(1.0)
            assert spy.started == 0
            scheduling.finish(held, "finished elsewhere")
        finally:
            connection.close()

    other = threading.Thread(target=other_process_finishes)
    started = time.monotonic()
    other.start()
    compute_task_statistics(world.task.pk)
    other.join()
    assert time.monotonic() - started >= 1.0
    assert spy.started == 1 and spy.generations == [held.generation + 1]
    record = TaskStatistics.objects.get(task=world.task)
    assert set(record.run_ids) == board_run_ids(world) and record.generation == held.generation + 1


# Dirty boards and their one follow-up ----------------------------------------------------------------

@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_triggers_during_a_computation_cause_exactly_one_follow_up(world: World, settings, monkeypatch,
                                                                     quiet_timers: None) -> None:
    """Thread mode, short debounce: five runs scored while the first computation runs make the
    board dirty; one follow-up, really scheduled, covers them all."""
    require_postgres()
    settings.EVALSERVER_STATISTICS_DEBOUNCE_SECONDS = 0.2
    settings.EVALSERVER_STATISTICS_MODE = "thread"
    mid_computation = threading.Event()
    release = threading.Event()

    def during(number: int) -> None:
        if number == 1:
            mid_computation.set()
            assert release.wait(30)

    spy = Spy(monkeypatch, during=during)
    submit(world, world.alice, 1, "first", capture=False)
    assert mid_computation.wait(30)
    for seed in range(2, 7):
        submit(world, world.bob if seed % 2 else world.alice, seed, f"late-{seed}", capture=False)
    time.sleep(0.6)  # the triggers' own timers fire meanwhile and find the board held
    assert spy.started == 1
    release.set()
    wait_until(lambda: settled(world.task.pk), 60, "the follow-up")
    time.sleep(0.5)  # nothing else may start
    assert spy.started == 2 and spy.max_running == 1
    record = TaskStatistics.objects.get(task=world.task)
    assert set(record.run_ids) == board_run_ids(world) and len(record.run_ids) == 8  # 6 runs, 2 baselines
    state = StatisticsState.objects.get(task=world.task)
    assert record.generation == state.requested == state.completed == state.stored_generation


@pytest.mark.django_db
def test_in_celery_mode_the_follow_up_of_a_dirty_board_is_sent(world: World, settings, monkeypatch) -> None:
    settings.EVALSERVER_STATISTICS_MODE = "celery"
    sent: list[float] = []
    monkeypatch.setattr(statistics_jobs.compute_statistics_task, "apply_async",
                        lambda args, countdown: sent.append(countdown))
    submit(world, world.alice, 1, "one")
    submit(world, world.bob, 2, "two")
    late = []

    def during(number: int) -> None:
        if number == 1:  # a run scored while the first computation runs
            late.append(submit(world, world.bob, 3, "three"))

    Spy(monkeypatch, after=during)
    StatisticsState.objects.filter(task=world.task).update(requested_at=timezone.now() - timedelta(seconds=6))
    statistics_jobs.cache.clear()
    answer = statistics_jobs.compute_statistics_task.run(world.task.pk)
    assert answer.startswith("next look in")  # the follow-up was sent: at the end of its debounce
    assert 4.0 < sent[-1] <= 5.0
    assert late[0].pk not in TaskStatistics.objects.get(task=world.task).run_ids
    StatisticsState.objects.filter(task=world.task).update(requested_at=timezone.now() - timedelta(seconds=6))
    assert statistics_jobs.compute_statistics_task.run(world.task.pk) == "nothing pending"
    assert late[0].pk in TaskStatistics.objects.get(task=world.task).run_ids


# Generations --------------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_an_older_computation_finishing_late_does_not_overwrite_a_newer_result(world: World) -> None:
    submit(world, world.alice, 1, "one")
    submit(world, world.bob, 2, "two")
    scheduling.request(world.task.pk)
    state = StatisticsState.objects.get(task=world.task)
    old = scheduling.claim(state.pk)
    # The old computation's process stalls past its lease; a third run arrives; a newer one is stored.
    submit(world, world.bob, 3, "three")
    scheduling.request(world.task.pk)
    StatisticsState.objects.filter(pk=state.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=scheduling.LEASE_SECONDS + 1))
    new = scheduling.claim(state.pk)
    assert new.generation > old.generation
    from leaderboard.statistics import compute_board_statistics

    assert compute_board_statistics(world.task, None, new).startswith("stored over 5 runs")
    stored = TaskStatistics.objects.get(task=world.task)
    outcome = compute_board_statistics(world.task, None, old)
    assert outcome.startswith("not stored: a newer result was stored first")
    again = TaskStatistics.objects.get(task=world.task)
    assert (again.generation, again.computed_at) == (new.generation, stored.computed_at)
    # The same generation twice (a taken-over claim finishing after its successor): stored once.
    assert compute_board_statistics(world.task, None, new).startswith("not stored")


@pytest.mark.django_db
def test_a_publication_refuses_results_of_computations_claimed_before_it(world: World, settings) -> None:
    from leaderboard.statistics import compute_board_statistics
    from tasks.models import Phase

    now = timezone.now()
    final = Phase.objects.create(task=world.task, name="final", kind=Phase.FINAL, gold_version=world.gold_version,
                                 starts_at=now - timedelta(days=2), ends_at=now - timedelta(days=1))
    scheduling.request(world.task.pk)
    state = StatisticsState.objects.get(task=world.task, phase=final)
    before = scheduling.claim(state.pk)
    final.results_published = True
    with committing():
        final.save()
    assert compute_board_statistics(world.task, final, before).startswith("not stored")
    assert not TaskStatistics.objects.filter(phase=final).exists()


# What the pages say --------------------------------------------------------------------------------------

@pytest.fixture
def queued_board(world: World, settings, monkeypatch) -> World:
    """Celery mode whose messages go nowhere: requests stay queued until the test computes."""
    settings.EVALSERVER_STATISTICS_MODE = "celery"
    monkeypatch.setattr(statistics_jobs.compute_statistics_task, "apply_async", lambda args, countdown: None)
    return world


def statistics_page(world: World) -> str:
    return Client().get(f"/tasks/{world.task.slug}/statistics/").content.decode()


@pytest.mark.django_db
def test_with_runs_scored_and_no_statistics_yet_the_page_says_a_computation_is_queued_or_running(
        queued_board: World) -> None:
    world = queued_board
    submit(world, world.alice, 1, "one")
    submit(world, world.bob, 2, "two")
    page = statistics_page(world)
    assert "No statistics yet" not in page and "once at least two runs are scored" not in page
    assert "No statistics stored yet for the 4 scored runs on the board." in page
    assert "A computation over the 4 runs now on the board is queued</strong>: it starts once their scores " \
           "have been unchanged for 5 s" in page
    state = StatisticsState.objects.get(task=world.task)
    scheduling.claim(state.pk)
    page = statistics_page(world)
    assert "A computation over the 4 runs now on the board is running</strong> (started " in page
    task_page = Client().get(f"/tasks/{world.task.slug}/").content.decode()
    assert ("Significance statistics over the 4 runs now on the board are being computed; this page shows them "
            "once they are stored.") in task_page


@pytest.mark.django_db
def test_the_page_says_over_how_many_of_the_runs_on_the_board_the_statistics_are(queued_board: World) -> None:
    from leaderboard.statistics import compute_task_statistics

    world = queued_board
    submit(world, world.alice, 1, "one")
    submit(world, world.bob, 2, "two")
    submit(world, world.bob, 3, "three")
    compute_task_statistics(world.task.pk)
    page = statistics_page(world)
    assert "They cover all 5 runs now on the board." in page and "is queued" not in page
    submit(world, world.alice, 4, "four")
    submit(world, world.alice, 5, "five")
    page = statistics_page(world)
    assert "over 5 runs (3 participants' runs and 2 baselines) and 30 dialogues" in page
    assert "They cover 5 of the 7 runs now on the board." in page
    assert "A computation over the 7 runs now on the board is queued" in page
    assert "on its way" not in page
    board = Client().get(f"/tasks/{world.task.slug}/?sort=quality.A.rsnod").content.decode()
    assert ("over the 5 runs with scores on this measure, baselines included (5 of the 7 runs now in this table). "
            '<span id="statistics-wait">A recomputation over the runs now on the board is queued; this page shows it '
            "once it is stored.</span>") in board
    compute_task_statistics(world.task.pk)
    page = statistics_page(world)
    assert "They cover all 7 runs now on the board." in page and "is queued" not in page
    board = Client().get(f"/tasks/{world.task.slug}/?sort=quality.A.rsnod").content.decode()
    assert "over the 7 runs with scores on this measure, baselines included." in board
    assert "recomputation" not in board


@pytest.mark.django_db
def test_the_page_says_why_no_computation_is_under_way(world: World, settings) -> None:
    # Without the baselines, one run: too few to compare.
    Run.objects.filter(task=world.task, is_baseline=True).update(withdrawn_at=timezone.now())
    touch_scores(world.task)
    submit(world, world.alice, 1, "one")
    page = statistics_page(world)
    assert "No statistics yet: they are computed once at least two runs are scored (1 on the board so far)." in page
    submit(world, world.bob, 2, "two")  # statistics are off in this test
    page = statistics_page(world)
    assert "No statistics yet" not in page and "once at least two runs are scored" not in page
    assert 'Statistics are not recomputed on this server (EVALSERVER_STATISTICS_MODE is "off").' in page
    # A request left from before statistics were switched off is not "queued": nothing would run it.
    scheduling.request(world.task.pk)
    page = statistics_page(world)
    assert "is queued" not in page and 'EVALSERVER_STATISTICS_MODE is "off"' in page


@pytest.mark.django_db
def test_a_board_whose_computation_was_lost_is_woken_by_its_page(queued_board: World, monkeypatch) -> None:
    """A web process restarted with its timer (thread mode), a message lost: the page's visit, or
    celery beat's sweep, sends it again."""
    world = queued_board
    submit(world, world.alice, 1, "one")
    submit(world, world.bob, 2, "two")
    woken: list[tuple[int, float]] = []
    monkeypatch.setattr(statistics_pages, "wake_statistics", lambda task_id, delay: woken.append((task_id, delay)))
    statistics_page(world)
    assert woken == []  # requested just now: its job is on its way
    StatisticsState.objects.filter(task=world.task).update(requested_at=timezone.now() - timedelta(seconds=11))
    statistics_page(world)
    assert woken == [(world.task.pk, 0.0)]
    StatisticsState.objects.filter(task=world.task).update(requested_at=timezone.now() - timedelta(seconds=70))
    assert statistics_jobs.wake_forgotten_statistics() == [world.task.pk]
    # A computing worker that died (no heartbeat for longer than the lease) is noticed too; a
    # live one is not.
    state = StatisticsState.objects.get(task=world.task)
    scheduling.claim(state.pk)
    assert statistics_jobs.wake_forgotten_statistics() == []
    scheduling.request(world.task.pk)
    StatisticsState.objects.filter(pk=state.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=scheduling.LEASE_SECONDS + 1),
        requested_at=timezone.now() - timedelta(seconds=70))
    assert statistics_jobs.wake_forgotten_statistics() == [world.task.pk]


# The scenario, small ----------------------------------------------------------------------------

@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_burst_of_scored_runs_ends_with_statistics_over_every_run(world: World, settings, monkeypatch,
                                                                      quiet_timers: None) -> None:
    """Thread mode (the embedded default), debounce shortened to 0.3 s: eight runs scored 0.1 s
    apart start one computation after the burst (never two at once) and end with statistics
    over every run on the board."""
    require_postgres()
    settings.EVALSERVER_STATISTICS_DEBOUNCE_SECONDS = 0.3
    settings.EVALSERVER_STATISTICS_MODE = "thread"
    spy = Spy(monkeypatch)
    for seed in range(1, 9):
        submit(world, world.alice if seed % 2 else world.bob, seed, f"burst-{seed}", capture=False)
        time.sleep(0.1)
    last_upload = time.monotonic()
    wait_until(lambda: settled(world.task.pk) and TaskStatistics.objects.filter(task=world.task).exists(), 60,
               "statistics over the burst")
    took = time.monotonic() - last_upload
    record = TaskStatistics.objects.get(task=world.task)
    assert set(record.run_ids) == board_run_ids(world) and len(record.run_ids) == 10
    assert spy.max_running == 1 and spy.started <= 2
    state = StatisticsState.objects.get(task=world.task)
    assert took < 0.3 + 3 * max(state.last_seconds, 0.5) + 2.0


@pytest.mark.django_db
def test_a_board_nobody_sees_is_not_sent_for_ever(queued_board: World) -> None:
    """Issue 24: the phase-less board of a task that later got phases kept its pending request;
    run_due never serves that board, so beat re-sent the task a job every minute, for ever."""
    from django.db.models import F

    from tasks.models import Phase

    world = queued_board
    submit(world, world.alice, 1, "one")
    phaseless = StatisticsState.objects.get(task=world.task, phase=None)
    assert phaseless.requested > phaseless.completed
    now = timezone.now()
    with committing():
        phase = Phase.objects.create(task=world.task, name="dev", gold_version=world.gold_version,
                                     starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=1))
    # The new phase's board was requested when the phase was made; say it has been computed.
    StatisticsState.objects.filter(task=world.task, phase=phase).update(completed=F("requested"))
    StatisticsState.objects.filter(task=world.task).update(requested_at=now - timedelta(seconds=70))
    assert statistics_jobs.wake_forgotten_statistics() == []
    phaseless.refresh_from_db()
    assert phaseless.requested == phaseless.completed and phaseless.pending_since is None
    assert phaseless.outcome == "not computed: this board is no longer shown (the task has phases)"
    assert statistics_jobs.wake_forgotten_statistics() == []  # and the next minute too
    # The phase's board is served as before: a lost job for it is sent again.
    scheduling.request(world.task.pk)
    StatisticsState.objects.filter(task=world.task, phase=phase).update(requested_at=now - timedelta(seconds=70))
    assert statistics_jobs.wake_forgotten_statistics() == [world.task.pk]
