"""``manage.py compare``: the offline comparison of ``scoring.compare`` as a Django command.

``manage.py`` runs ``scoring.compare`` directly, without starting Django; this class makes the
command appear in ``manage.py help`` and work through ``call_command``.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand

from scoring import compare as cli


class Command(BaseCommand):
    help = cli.build_parser().description
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def run_from_argv(self, argv: list[str]) -> None:
        sys.exit(cli.main(argv[2:]))

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("args", nargs="*")

    def handle(self, *args: Any, **options: Any) -> None:
        status = cli.main(list(args), stdout=self.stdout, stderr=self.stderr)
        if status:
            sys.exit(status)
