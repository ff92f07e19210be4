"""``manage.py statistics_worker``: the background statistics worker of the embedded default (no
broker). gunicorn.conf.py starts it beside the web server; see ``leaderboard.worker``."""

import os
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from leaderboard.worker import StatisticsWorker
from tasks import heartbeats


class Command(BaseCommand):
    help = ("Compute the boards' significance statistics in the background (the embedded default, "
            "without a broker); stops on SIGTERM or SIGINT.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--parent-pid", type=int, default=None,
                            help="stop when this process (gunicorn's master) is gone")

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.EVALSERVER_STATISTICS_MODE != "worker":
            # In any other mode the triggers wake their own computation (a Celery job, a thread):
            # a second computing process would only wait on their claims.
            raise CommandError(f"EVALSERVER_STATISTICS_MODE is {settings.EVALSERVER_STATISTICS_MODE!r}; "
                               "this worker serves the mode 'worker' (set EVALSERVER_STATISTICS_MODE=worker)")
        # Readers and scoring go first when every core is wanted (EVALSERVER_STATISTICS_WORKER_NICE).
        os.nice(settings.EVALSERVER_STATISTICS_WORKER_NICE)
        worker = StatisticsWorker(parent_pid=options["parent_pid"])
        worker.install_signal_handlers()
        heartbeats.start("statistics", worker.stopping)
        self.stdout.write(f"statistics worker ready (pid {os.getpid()})", ending="\n")
        self.stdout.flush()
        worker.run()
        self.stdout.write("statistics worker stopped")
