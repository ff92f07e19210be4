"""The outbox: every e-mail is a row recorded in the transaction of what caused it, and sent later
by a background process, never inside a request.

Who sends (``EVALSERVER_NOTICE_MODE``): "celery" (with a broker: a job on the heavy queue once the
recording commits, and celery beat every minute for retries; on the heavy queue so that a slow mail
server never holds up the scoring of an upload), "worker" (the broker-less default: ``manage.py
notices_worker``, started by gunicorn beside the scoring worker, takes due rows from the database)
or "off" (nobody; ``manage.py send_notices`` sends what is due once, tests call ``send_due``).

A failed send is logged and tried again after 1, 2, 4, ... minutes (at most 6 hours apart); after
``MAX_ATTEMPTS`` the row is marked given up, with the last error, and kept.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage, get_connection
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from evalserver.celery import heavy_queue
from notices.models import CHOICES, MESSAGE, Email, Event, Preference
from tasks.models import Run, Task, TermsAcceptance

log = logging.getLogger("evalserver.notices")

SEND_TASK = "notices.jobs.send_notices_task"
MAX_ATTEMPTS = 12
CLAIM = timedelta(minutes=5)
LONGEST_WAIT = timedelta(hours=6)


def retry_wait(attempts: int) -> timedelta:
    """The wait after the ``attempts``-th failed send: 1, 2, 4, ... minutes, at most 6 hours."""
    return min(timedelta(minutes=2 ** (attempts - 1)), LONGEST_WAIT)


def participants(task: Task) -> list[Any]:
    """The people who take part in a task: the members of every team with a run on it and everyone
    who accepted its terms, with the members of their teams; active accounts only."""
    users = get_user_model()
    accepted = TermsAcceptance.objects.filter(task=task, user__isnull=False).values("user_id")
    teams = Run.objects.filter(task=task, is_baseline=False, team__isnull=False).values("team_id")
    return list(users.objects.filter(Q(pk__in=accepted) | Q(teams__in=teams) | Q(teams__members__in=accepted),
                                     is_active=True).distinct().order_by("pk"))


def wanting(people: Iterable[Any], topic: str) -> list[Any]:
    """Those of ``people`` with an e-mail address who did not turn ``topic`` off."""
    people = [person for person in people if person.email]
    if topic == MESSAGE:
        return people
    if topic not in CHOICES:
        raise ValueError(f"unknown topic {topic!r}")
    off = set(Preference.objects.filter(user__in=people, **{topic: False}).values_list("user_id", flat=True))
    return [person for person in people if person.pk not in off]


def record(people: Iterable[Any], topic: str, task: Task | None, compose: Any) -> int:
    """One e-mail per person (nobody sees another's address) to those who want ``topic``;
    ``compose(person)`` gives (subject, body). In the caller's transaction; returns how many."""
    rows = []
    for person in wanting(people, topic):
        subject, body = compose(person)
        rows.append(Email(topic=topic, task=task, user=person, address=person.email, subject=subject, body=body))
    if rows:
        Email.objects.bulk_create(rows)
        transaction.on_commit(wake)
    return len(rows)


def first_time(key: str) -> bool:
    """Record the event ``key``; False when it was recorded before (by this process or another)."""
    if Event.objects.filter(key=key).exists():
        return False
    try:
        with transaction.atomic():
            Event.objects.create(key=key)
    except IntegrityError:  # another clock recorded it a moment ago
        return False
    return True


def wake() -> None:
    """Tell the sender that e-mails wait: a job with a broker; the worker polls by itself."""
    if settings.EVALSERVER_NOTICE_MODE == "celery":
        try:
            # By name: the job's module (notices.jobs) imports this one.
            current_app.send_task(SEND_TASK, queue=heavy_queue())
        except Exception:  # the broker is down: beat's next minute sends them
            log.warning("could not queue the sending of e-mails; they wait in the outbox", exc_info=True)


def due(now: datetime) -> Q:
    return (Q(sent_at__isnull=True, gave_up_at__isnull=True, next_attempt_at__lte=now)
            & (Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)))


def send_due(limit: int = 200, now: datetime | None = None) -> dict[str, int]:
    """Send the e-mails that are due, each claimed first (so two senders never send one twice);
    returns {"sent", "failed", "gave_up"}."""
    now = now or timezone.now()
    counts = {"sent": 0, "failed": 0, "gave_up": 0}
    ids = list(Email.objects.filter(due(now)).order_by("next_attempt_at", "pk").values_list("pk", flat=True)[:limit])
    if not ids:
        return counts
    connection = get_connection(fail_silently=False)
    try:
        for pk in ids:
            if not Email.objects.filter(due(now), pk=pk).update(claimed_until=now + CLAIM):
                continue  # another sender took it
            email = Email.objects.get(pk=pk)
            outcome = _send(email, connection)
            counts[outcome] += 1
    finally:
        try:
            connection.close()
        except Exception:  # a connection that broke mid-way: nothing left to close
            log.debug("closing the mail connection failed", exc_info=True)
    return counts


def _send(email: Email, connection: Any) -> str:
    message = EmailMessage(email.subject, email.body, settings.DEFAULT_FROM_EMAIL, [email.address],
                           connection=connection, headers={"Auto-Submitted": "auto-generated"})
    try:
        message.send()
    except Exception as error:
        attempts = email.attempts + 1
        reason = f"{type(error).__name__}: {error}"[:2000]
        if attempts >= MAX_ATTEMPTS:
            Email.objects.filter(pk=email.pk).update(attempts=attempts, last_error=reason, claimed_until=None,
                                                     gave_up_at=timezone.now())
            log.error("gave up sending e-mail %s (%s) to %s after %s attempts: %s", email.pk, email.topic,
                      email.address, attempts, reason)
            return "gave_up"
        wait = retry_wait(attempts)
        Email.objects.filter(pk=email.pk).update(attempts=attempts, last_error=reason, claimed_until=None,
                                                 next_attempt_at=timezone.now() + wait)
        log.warning("sending e-mail %s (%s) to %s failed (attempt %s; next in %s): %s", email.pk, email.topic,
                    email.address, attempts, wait, reason)
        try:
            connection.close()  # a broken SMTP session is opened afresh for the next e-mail
        except Exception:
            log.debug("closing the broken mail connection failed", exc_info=True)
        return "failed"
    Email.objects.filter(pk=email.pk).update(sent_at=timezone.now(), attempts=F("attempts") + 1, claimed_until=None,
                                             last_error="")
    return "sent"


def next_due(now: datetime | None = None) -> datetime | None:
    """When the next unsent e-mail falls due (None: nothing waits)."""
    return (Email.objects.filter(sent_at__isnull=True, gave_up_at__isnull=True)
            .order_by("next_attempt_at").values_list("next_attempt_at", flat=True).first())
