"""The offline commands (``manage.py score``, ``manage.py compare``) as Django commands.

``manage.py`` runs their modules directly, without starting Django (``OFFLINE_COMMANDS`` there);
the class made here makes each command appear in ``manage.py help`` and work through
``call_command``. One home for both, so that they cannot drift apart.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from django.core.management.base import BaseCommand


def offline_command(module: ModuleType) -> type[BaseCommand]:
    """A command class running ``module.main`` (argv, stdout, stderr) -> exit status, with
    ``module.build_parser()``'s description as its help."""

    class Command(BaseCommand):
        help = module.build_parser().description
        requires_system_checks: list[str] = []
        requires_migrations_checks = False

        def run_from_argv(self, argv: list[str]) -> None:
            sys.exit(module.main(argv[2:]))

        def add_arguments(self, parser: Any) -> None:
            parser.add_argument("args", nargs="*")

        def handle(self, *args: Any, **options: Any) -> None:
            status = module.main(list(args), stdout=self.stdout, stderr=self.stderr)
            if status:
                sys.exit(status)

    return Command
