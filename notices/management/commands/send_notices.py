"""``manage.py send_notices``: send the e-mails of the outbox that are due now, once (for a server
with EVALSERVER_NOTICE_MODE=off, or to see at once what a mail server answers)."""

from typing import Any

from django.core.management.base import BaseCommand

from notices.outbox import send_due


class Command(BaseCommand):
    help = "Send the notifications' e-mails that are due now, once, and say how many were sent."

    def handle(self, *args: Any, **options: Any) -> None:
        total = {"sent": 0, "failed": 0, "gave_up": 0}
        while True:
            counts = send_due()
            for name, value in counts.items():
                total[name] += value
            if not any(counts.values()):
                break
        self.stdout.write(f"{total['sent']} e-mails sent, {total['failed']} failed (tried again later), "
                          f"{total['gave_up']} given up")
