"""``manage.py notices_worker``: send the e-mail outbox in the background (the embedded default,
without a broker); gunicorn.conf.py starts it. Stops on SIGTERM or SIGINT."""

import os
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from notices.worker import Sender


class Command(BaseCommand):
    help = "Send the notifications' e-mails in the background (without a broker); stops on SIGTERM or SIGINT."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--parent-pid", type=int, default=None,
                            help="stop when this process (gunicorn's master) is gone")

    def handle(self, *args: Any, **options: Any) -> None:
        sender = Sender(parent_pid=options["parent_pid"])
        sender.install_signal_handlers()
        self.stdout.write(f"e-mail sender ready (pid {os.getpid()})")
        self.stdout.flush()
        sender.run()
        self.stdout.write("e-mail sender stopped")
