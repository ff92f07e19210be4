"""What the tasks' signals become: e-mails in the outbox, recorded in the transaction that sent the
signal (``tasks.changes``: a run finished, a phase reminder due, a publication). A failure here is
logged and never fails the scoring or the publication that caused it (a savepoint keeps the rest)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.dispatch import receiver

from notices import texts
from notices.models import PHASE_REMINDERS, PUBLICATIONS, RUN_RESULTS
from notices.outbox import first_time, participants, record
from tasks.changes import phase_reminder, publication_changed, run_finished
from tasks.models import Phase, Run

log = logging.getLogger("evalserver.notices")


def _safely(what: str, action: Callable[[], Any]) -> None:
    try:
        with transaction.atomic():
            action()
    except Exception:
        log.exception("could not record the e-mails %s", what)


@receiver(run_finished, dispatch_uid="notices-run-finished")
def _run_finished(sender: type, run_id: int, status: str, **kwargs: Any) -> None:
    def tell() -> None:
        run = Run.objects.select_related("task", "team", "phase").get(pk=run_id)
        if run.team is None or run.is_baseline:
            return
        compose = texts.run_scored if status == Run.DONE else texts.run_failed
        record(run.team.members.all(), RUN_RESULTS, run.task, lambda person: compose(run, person))

    _safely(f"about run {run_id}", tell)


@receiver(phase_reminder, dispatch_uid="notices-phase-reminder")
def _phase_reminder(sender: type, phase: Phase, event: str, hours: int, at: datetime, now: datetime,
                    **kwargs: Any) -> None:
    def tell() -> None:
        if first_time(f"reminder:{phase.pk}:{event}:{hours}:{at.isoformat()}"):
            record(participants(phase.task), PHASE_REMINDERS, phase.task,
                   lambda person: texts.phase_reminder(phase, event, at, now, person))

    _safely(f"reminding of the {phase.name} phase", tell)


@receiver(publication_changed, dispatch_uid="notices-publication")
def _published(sender: type, phase: Phase, **kwargs: Any) -> None:
    if not phase.results_published or phase.open_phases_on_gold():
        # A withdrawal is not announced by e-mail, nor a publication that shows nothing yet
        # (a phase still takes runs on its gold: the boards keep the results hidden until it ends).
        return

    def tell() -> None:
        record(participants(phase.task), PUBLICATIONS, phase.task, lambda person: texts.published(phase, person))

    _safely(f"about the publication of the {phase.name} phase", tell)
