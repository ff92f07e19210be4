"""``manage.py scoring_worker``: the background scoring worker of the embedded default (no broker).

gunicorn.conf.py starts it beside the web server; see ``tasks.worker``.
"""

import os
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from tasks import heartbeats
from tasks.changes import scoring_worker_starting
from tasks.worker import Worker, warm_up


class Command(BaseCommand):
    help = "Score queued runs in the background (the embedded default, without a broker); stops on SIGTERM or SIGINT."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--parent-pid", type=int, default=None,
                            help="stop when this process (gunicorn's master) is gone")

    def handle(self, *args: Any, **options: Any) -> None:
        # Before anything heavy: loading the pipelines below takes seconds of CPU while the web
        # processes start answering readers (settings.EVALSERVER_SCORING_WORKER_NICE).
        os.nice(settings.EVALSERVER_SCORING_WORKER_NICE)
        # The kinds' apps set up what a long-lived scoring process may do (kinds.response: both
        # cores for tagging a large response run; forked taggers inherit the loaded pipeline).
        scoring_worker_starting.send(sender=None)
        worker = Worker(parent_pid=options["parent_pid"])
        worker.install_signal_handlers()
        heartbeats.start("scoring", worker.stopping)
        loaded = warm_up()
        self.stdout.write(f"scoring worker ready (pid {os.getpid()}); loaded: "
                          f"{', '.join(loaded) or 'nothing'}", ending="\n")
        self.stdout.flush()
        worker.run()
        self.stdout.write("scoring worker stopped")
