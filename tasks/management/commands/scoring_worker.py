"""``manage.py scoring_worker``: the background scoring worker of the embedded default (no broker).

gunicorn.conf.py starts it beside the web server; see ``tasks.worker``.
"""

import os
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from scoring.kinds.response.kind import set_tagging_processes
from tasks.worker import Worker, warm_up


class Command(BaseCommand):
    help = "Score queued runs in the background (the embedded default, without a broker); stops on SIGTERM or SIGINT."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--parent-pid", type=int, default=None,
                            help="stop when this process (gunicorn's master) is gone")

    def handle(self, *args: Any, **options: Any) -> None:
        # Both cores for tagging a large response run (forked taggers inherit the loaded pipeline).
        set_tagging_processes(settings.EVALSERVER_TAGGING_PROCESSES)
        worker = Worker(parent_pid=options["parent_pid"])
        worker.install_signal_handlers()
        loaded = warm_up()
        self.stdout.write(f"scoring worker ready (pid {os.getpid()}); loaded: "
                          f"{', '.join(loaded) or 'nothing'}", ending="\n")
        self.stdout.flush()
        worker.run()
        self.stdout.write("scoring worker stopped")
