"""``tasks.leases.heartbeat``: the thread that keeps a claim alive writes ``heartbeat_at`` on the
claimed row while the block runs, only on that row, and stops when the block ends."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_keeps_only_the_claimed_row_alive_and_stops_with_the_block() -> None:
    from kinds.response.models import PoolJob
    from tasks.leases import heartbeat

    long_ago = timezone.now() - timedelta(hours=1)
    held = PoolJob.objects.create(status=PoolJob.RUNNING, claim_token="mine", heartbeat_at=long_ago)
    other = PoolJob.objects.create(status=PoolJob.RUNNING, claim_token="theirs", heartbeat_at=long_ago)
    entered = timezone.now()
    with heartbeat(PoolJob.objects.filter(pk=held.pk, claim_token="mine"), 0.05, "test"):
        deadline = time.monotonic() + 10
        while PoolJob.objects.get(pk=held.pk).heartbeat_at < entered and time.monotonic() < deadline:
            time.sleep(0.02)
    beaten = PoolJob.objects.get(pk=held.pk).heartbeat_at
    assert beaten >= entered
    assert PoolJob.objects.get(pk=other.pk).heartbeat_at == long_ago
    time.sleep(0.3)  # the thread has stopped: nothing more is written
    assert PoolJob.objects.get(pk=held.pk).heartbeat_at == beaten
