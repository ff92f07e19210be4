"""The broker-less sender of the outbox: ``manage.py notices_worker``, a process of its own that
gunicorn.conf.py starts beside the scoring worker (``EVALSERVER_NOTICE_MODE=worker``). A process,
not a thread of the scoring worker: that one forks tagging processes, and a slow mail server must
never hold up a run's scoring. The database is the queue: it looks every ``POLL_SECONDS``."""

from __future__ import annotations

import logging
import os
import signal
import threading
from types import FrameType

from django.db import connections

from notices.outbox import send_due

log = logging.getLogger("evalserver.notices")

POLL_SECONDS = 2.0


class Sender:
    def __init__(self, parent_pid: int | None = None, poll: float = POLL_SECONDS) -> None:
        self.parent_pid, self.poll = parent_pid, poll
        self.stopping = threading.Event()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        self.stopping.set()

    def orphaned(self) -> bool:
        """gunicorn's master is gone (killed without stopping its children)."""
        return self.parent_pid is not None and os.getppid() != self.parent_pid

    def run(self) -> None:
        while not self.stopping.is_set() and not self.orphaned():
            try:
                counts = send_due()
                if any(counts.values()):
                    log.info("e-mails: %(sent)s sent, %(failed)s failed (tried again later), %(gave_up)s given up",
                             counts)
            except Exception:  # the database unreachable: look again shortly
                log.exception("the e-mail sender could not read the outbox")
            finally:
                for connection in connections.all(initialized_only=True):
                    connection.close_if_unusable_or_obsolete()
            self.stopping.wait(self.poll)
