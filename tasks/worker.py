"""The background scoring worker of the embedded default (no broker): ``manage.py scoring_worker``.

gunicorn.conf.py starts one beside the web server when ``CELERY_BROKER_URL`` is not set, so an
upload is answered as soon as it is validated and stored (202, as in production) and is scored
here. The database is the queue: ``send_scoring`` only records the send
(``EVALSERVER_SCORING_MODE=worker``), and this worker takes the oldest queued run within
``POLL_SECONDS``. Nothing is lost when the server stops or dies: a queued run stays queued, and a
run this worker was scoring keeps a claim whose heartbeat (``Run.heartbeat_at``, written by
``tasks.leases.heartbeat``) stops; the next worker takes it over once the heartbeat is older than
``EVALSERVER_SCORING_LEASE_SECONDS`` (30 s), or at once when this one stopped on a signal and gave
the run back. A run cut off ``MAX_INTERRUPTIONS`` times fails, as ``requeue_stuck_runs`` does it.

spaCy and each response task's vectors are loaded when the worker starts (``warm_up``), not at
the first upload. Significance statistics of the boards it changes are not computed here: with
``EVALSERVER_STATISTICS_MODE=worker`` (gunicorn.conf.py's default without a broker) the scores
only record the request, and the statistics worker (``leaderboard.worker``), a process of its own
at a lower priority, computes them, so that a run uploaded while statistics are computed is not
scored at half speed (issue 28: 2.95 s instead of 1.43 s for 1,500 responses when they shared
this process). Every ``SWEEP_SECONDS`` it does what celery beat does in production.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from datetime import UTC, datetime
from types import FrameType

import orjson
from billiard.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connections
from django.db.models import F, Max, Q
from django.utils import timezone

from tasks.changes import periodic_sweep
from tasks.errors import TRANSIENT_DB_ERRORS
from tasks.jobs import (
    MAX_INTERRUPTIONS,
    ScoringInterrupted,
    dead_claims,
    fail_runs_cut_too_often,
    score_run,
)
from tasks.models import GoldVersion, Run, Task

log = logging.getLogger(__name__)

# An upload waits at most this long before the worker notices it: one indexed query each time
# (well under a millisecond on SQLite or PostgreSQL, so 20 a second cost nothing worth having
# an upload wait 0.1 s on average for; issue 28, item 2).
POLL_SECONDS = 0.05
SWEEP_SECONDS = 60.0


class Stopped(BaseException):
    """SIGTERM or SIGINT while a run was being scored: a BaseException, so that no ``except
    Exception`` of the scoring code takes it for the run's own failure."""


def warm_up() -> list[str]:
    """Load now what scoring each task's runs needs (``Kind.warm_up``: the response kind's spaCy
    pipeline and vectors, seconds), and prepare the gold versions uploads are scored against now
    (``Kind.prepare_gold``: the response kind's BLEU tables and POSSCORE reference vectors), so that
    no upload waits for either; returns what was loaded. A task whose resources cannot be loaded is
    logged and left to fail its runs with the reason, as before."""
    loaded, seen = [], set()
    # The tasks most recently active (a run received, or a gold version loaded: a new task waits for
    # its first run) come first: when more versions take runs than a process keeps, those are prepared.
    # (Two queries: one join of runs and versions would pair every run with every version.)
    tasks = list(Task.objects.annotate(last_run=Max("runs__created_at")))
    last_gold = dict(GoldVersion.objects.order_by().values_list("task_id").annotate(Max("created_at")))
    tasks.sort(key=lambda task: (max((at for at in (task.last_run, last_gold.get(task.pk)) if at is not None),
                                     default=datetime.min.replace(tzinfo=UTC)), -task.pk), reverse=True)
    prepared = 0
    for task in tasks:
        try:
            key = (task.kind, orjson.dumps(task.config, option=orjson.OPT_SORT_KEYS))
            if key not in seen:
                seen.add(key)
                what = task.kind_impl.warm_up(task.kind_config)
                if what:
                    loaded.append(f"{what} ({task.slug})")
            for version in scored_against_now(task)[:max(0, PREPARED_VERSIONS - prepared)]:
                # GoldVersion.load keeps the compiled gold (a few per process), and with it what
                # prepare_gold prepared, for the runs this worker scores next.
                task.kind_impl.prepare_gold(version.load(), task.kind_config)
                prepared += 1
                loaded.append(f"gold version {version.number} ({task.slug})")
        except Exception:  # a broken configuration must not keep every other task from being scored
            log.exception("could not load what task %s needs for scoring", task.slug)
    return loaded


# Compiled golds GoldVersion.load keeps per process (tasks.models._compiled_gold: 8): the worker
# prepares fewer, so that the first are not dropped for the last, nor at the first other version a
# run or a page needs.
PREPARED_VERSIONS = 6


def scored_against_now(task: Task) -> list[GoldVersion]:
    """The gold versions an upload to ``task`` is scored against now: those of its phases open to
    runs, or its latest version when it has no phases (tasks.submissions.current_gold_for)."""
    phases = list(task.phases.select_related("gold_version"))
    if not phases:
        latest = task.latest_gold()
        return [latest] if latest is not None else []
    versions = {phase.gold_version_id: phase.gold_version for phase in phases
                if phase.takes_runs and phase.is_open() and phase.gold_version is not None}
    return list(versions.values())


def next_run() -> tuple[int, int, bool] | None:
    """The run to score next: the oldest queued one, or one whose claim is dead (its worker was
    killed). Returns (run id, attempts as read, whether it is a dead claim taken over)."""
    row = (Run.objects.filter(Q(status=Run.QUEUED) | (dead_claims() & Q(interruptions__lt=MAX_INTERRUPTIONS)))
           .order_by("queued_at", "pk").values_list("pk", "attempts", "status").first())
    if row is None:
        return None
    return row[0], row[1], row[2] == Run.SCORING


class BackgroundLoop:
    """What the embedded default's background processes share (this scoring worker and the
    statistics worker, ``leaderboard.worker``): a stop flag that SIGTERM and SIGINT set, which also
    cuts off the work under way (``Stopped``, raised where it runs), and a stop of its own once the
    process that started it (gunicorn's master) is gone."""

    def __init__(self, parent_pid: int | None = None) -> None:
        self.parent_pid = parent_pid
        self.stopping = threading.Event()
        self.busy = False  # set around the work a stop signal must cut off

    def stop(self) -> None:
        self.stopping.set()

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        self.stopping.set()
        if self.busy:
            raise Stopped(signal.Signals(number).name)

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def orphaned(self) -> bool:
        # gunicorn's master started this process; if it died without stopping it, stop too.
        return self.parent_pid is not None and os.getppid() != self.parent_pid


class Worker(BackgroundLoop):
    """The scoring worker's loop; ``run`` returns when it is told to stop (a signal, ``stop()``, or
    the process that started it is gone)."""

    def __init__(self, parent_pid: int | None = None, poll: float = POLL_SECONDS,
                 sweep_every: float = SWEEP_SECONDS) -> None:
        super().__init__(parent_pid)
        self.poll, self.sweep_every = poll, sweep_every
        self.scoring: int | None = None  # the run being scored, while it is

    @staticmethod
    def _on_alarm(number: int, frame: FrameType | None) -> None:
        # As Celery's soft time limit: the scoring code ends the run "failed: time limit".
        raise SoftTimeLimitExceeded()

    def install_signal_handlers(self) -> None:
        super().install_signal_handlers()
        signal.signal(signal.SIGALRM, self._on_alarm)

    def run(self) -> None:
        last_sweep = 0.0
        while not self.stopping.is_set() and not self.orphaned():
            try:
                if time.monotonic() - last_sweep >= self.sweep_every:
                    self.sweep()
                    last_sweep = time.monotonic()
                found = next_run()
            except TRANSIENT_DB_ERRORS:
                log.warning("the database is unavailable; trying again", exc_info=True)
                release_connections()
                self.stopping.wait(5.0)
                continue
            if found is None:
                self.stopping.wait(self.poll)
                continue
            self.score(*found)

    def score(self, run_id: int, attempts: int, taken_over: bool) -> str:
        """Score one run under a heartbeat and the soft time limit; on a stop signal, give the run
        back (queued) so that the next start scores it at once."""
        if taken_over:
            log.warning("run %s: its previous worker died while scoring it; scoring it again", run_id)
            Run.objects.filter(pk=run_id, attempts=attempts).update(interruptions=F("interruptions") + 1)
        outcome = "not scored"
        started = time.monotonic()
        try:
            self.scoring, self.busy = run_id, True
            signal.setitimer(signal.ITIMER_REAL, settings.CELERY_TASK_SOFT_TIME_LIMIT)
            outcome = score_run(run_id, heartbeat_every=settings.EVALSERVER_SCORING_HEARTBEAT_SECONDS)
        except Stopped:
            signal.setitimer(signal.ITIMER_REAL, 0)
            # attempts + 1 is the claim this worker took, if it took one.
            given_back = Run.objects.filter(pk=run_id, status=Run.SCORING, attempts=attempts + 1).update(
                status=Run.QUEUED, heartbeat_at=None, queued_at=timezone.now())
            outcome = "stopped; given back" if given_back else "stopped"
        except ScoringInterrupted as interrupted:
            # The database went away mid-run: the claim stays, its heartbeat stops, and the run is
            # taken over once the lease runs out (by this worker, once the database is back).
            log.warning("run %s: %s", run_id, interrupted)
            outcome = "interrupted"
        except TRANSIENT_DB_ERRORS:
            log.warning("run %s: the database is unavailable", run_id, exc_info=True)
            outcome = "database unavailable"
        except Exception:  # a bug outside the scoring's own handling: log, keep serving the others
            log.exception("run %s: the worker failed", run_id)
            outcome = "worker error"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self.scoring, self.busy = None, False
            release_connections()
        # A run another attempt already took is nothing a person watching the console must act on.
        # With its time: what an organiser watching the console wants to know of a large run.
        log.log(logging.DEBUG if outcome.startswith("skipped") else logging.INFO, "run %s: %s in %.2f s", run_id,
                outcome, time.monotonic() - started)
        return outcome

    def sweep(self) -> None:
        """What celery beat does every minute in production: end runs cut off too often, look at
        statistics whose computation was forgotten (a process that died with its timer)."""
        fail_runs_cut_too_often()
        periodic_sweep.send(sender=None)  # the statistics' own sweep (leaderboard.jobs) listens


def release_connections() -> None:
    """Django's ``close_old_connections`` for a loop that is not a request: drop a connection that
    is broken or past its age, but never one inside a transaction (a caller's, or a test's: closing
    it there would cut the caller's work, which PostgreSQL reports as "the connection is closed")."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()
