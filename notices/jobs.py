"""The Celery job that sends the outbox (``notices.outbox``): queued when e-mails are recorded, and
every minute by celery beat for the retries. On the heavy queue: a slow or unreachable mail server
must never keep a scoring worker from an upload."""

from __future__ import annotations

from celery import shared_task

from notices.outbox import send_due


@shared_task(heavy=True, acks_late=True, ignore_result=True)
def send_notices_task() -> dict[str, int]:
    return send_due()
