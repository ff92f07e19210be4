#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    if sys.argv[1:2] == ["score"]:
        # The offline scorer needs no database, broker or Django start-up: run it directly.
        from scoring.cli import main as score

        sys.exit(score(sys.argv[2:]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalserver.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
