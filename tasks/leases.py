"""A claim kept alive while long work runs: a thread of its own writes ``heartbeat_at`` on the
claimed row every few seconds, so other processes can tell a live claim from a dead process's
(pool jobs in ``kinds.response.extension_jobs``, statistics in ``leaderboard.scheduling``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import DatabaseError, connections
from django.utils import timezone

log = logging.getLogger(__name__)


@contextmanager
def heartbeat(rows: Any, every: float, name: str, join_timeout: float = 5.0) -> Iterator[None]:
    """While the block runs, ``rows.update(heartbeat_at=now)`` every ``every`` seconds from a thread
    with its own database connection. ``rows`` filters on the claim itself (its token), so a
    claim taken over by another process is no longer kept alive by this one."""
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(every):
                try:
                    rows.update(heartbeat_at=timezone.now())
                except DatabaseError:
                    log.warning("%s: heartbeat not written", name, exc_info=True)
        finally:
            connections.close_all()  # this thread's own connections

    thread = threading.Thread(target=beat, name=f"{name}-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=join_timeout)
