#!/usr/bin/env python3
"""Django's command-line utility for administrative tasks."""

import importlib
import os
import sys
from pathlib import Path

# Commands whose modules run without Django (tasks.management.offline makes them Django commands too).
OFFLINE_COMMANDS = {"score": "scoring.cli", "compare": "scoring.compare",
                    "agreement": "scoring.judgements.agreement_cli",
                    "judgements_to_gold": "scoring.judgements.gold_cli"}
VENV_PYTHON = Path(__file__).resolve().parent / ".venv" / "bin" / "python"


def use_project_virtualenv() -> None:
    """Run under the project's .venv when started by a Python without Django (``python manage.py``
    straight after ``python3 dev.py serve``, which made .venv): the README's commands then work as
    written, without activating anything first."""
    try:
        import django  # noqa: F401
    except ImportError:
        if VENV_PYTHON.exists() and Path(sys.prefix).resolve() != VENV_PYTHON.parent.parent.resolve():
            os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), *sys.argv])  # noqa: S606
        sys.exit("Django is not installed for this Python. Run `python3 dev.py serve` once: it creates .venv "
                 "with every dependency, and manage.py then uses it by itself.")


def main() -> None:
    use_project_virtualenv()  # importing the django package alone is cheap: no settings, no apps
    if sys.argv[1:2] and sys.argv[1] in OFFLINE_COMMANDS:
        # The offline scorer and comparison need no database, broker or Django start-up: run them directly.
        module = importlib.import_module(OFFLINE_COMMANDS[sys.argv[1]])
        sys.exit(module.main(sys.argv[2:]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalserver.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
