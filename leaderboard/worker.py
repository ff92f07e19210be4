"""The background statistics worker of the embedded default (no broker): ``manage.py statistics_worker``.

gunicorn.conf.py starts it beside the web server and the scoring worker when ``CELERY_BROKER_URL``
is not set. Triggers (``leaderboard.jobs.schedule_statistics`` with
``EVALSERVER_STATISTICS_MODE=worker``) only record the request in the board's
``StatisticsState`` row; this process looks at the rows every ``POLL_SECONDS`` (or when the next
debounce ends, if sooner) and computes each due board through ``statistics.run_due``, with its
claim, lease and heartbeat, exactly as a Celery worker does in production.

Why a process of its own: computed in a thread of the scoring worker, the statistics shared its
interpreter lock, and a run uploaded while they were computed was scored at half speed (1,500
responses: 2.95 s instead of 1.43 s; issue 28). Here they run in parallel on the other core, at a
lower priority than scoring and the web processes (``EVALSERVER_STATISTICS_WORKER_NICE``): when
every core is wanted, readers and uploads go first.

A stop signal while a board is computed gives its claim back (``scheduling.give_back``): the
request stays pending and the next start computes it at once.
"""

from __future__ import annotations

import logging
import time

from leaderboard import scheduling, statistics
from tasks.errors import TRANSIENT_DB_ERRORS
from tasks.worker import BackgroundLoop, Stopped, release_connections

log = logging.getLogger(__name__)

# A new request is noticed within this long; one indexed query each time. The debounce (5 s by
# default) is what a board waits anyway, so a faster poll would buy nothing.
POLL_SECONDS = 0.5
# How often boards no longer shown are retired (as the periodic sweep does with Celery).
RETIRE_SECONDS = 60.0


class StatisticsWorker(BackgroundLoop):
    """The statistics worker's loop; ``run`` returns when it is told to stop (a signal, ``stop()``,
    or the process that started it is gone)."""

    def __init__(self, parent_pid: int | None = None, poll: float = POLL_SECONDS) -> None:
        super().__init__(parent_pid)
        self.poll = poll

    def run(self) -> None:
        last_retire = 0.0
        while not self.stopping.is_set() and not self.orphaned():
            try:
                if time.monotonic() - last_retire >= RETIRE_SECONDS:
                    scheduling.retire_unshown()
                    last_retire = time.monotonic()
                wait = self.look()
            except TRANSIENT_DB_ERRORS:
                log.warning("the database is unavailable; trying again", exc_info=True)
                release_connections()
                self.stopping.wait(5.0)
                continue
            except Stopped:
                break
            self.stopping.wait(wait)

    def look(self) -> float:
        """Compute every due board of every task with a pending request; returns how long to wait
        before looking again (until the next debounce ends, at most ``poll``)."""
        wait = self.poll
        for task_id in scheduling.pending_task_ids():
            if self.stopping.is_set():
                break
            self.busy = True
            try:
                again = statistics.run_due(task_id)
            except TRANSIENT_DB_ERRORS:
                raise
            except Exception:  # one task's failure must not keep the others' statistics from being computed
                log.exception("statistics of task %s failed", task_id)
                again = None
            finally:
                self.busy = False
                release_connections()
            if again is not None:
                wait = min(wait, max(again, 0.05))
        return wait
