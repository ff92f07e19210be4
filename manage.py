#!/usr/bin/env python3
"""Django's command-line utility for administrative tasks."""

import os
import sys
from pathlib import Path

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
    if sys.argv[1:2] == ["score"]:
        # The offline scorer needs no database, broker or Django start-up: run it directly.
        from scoring.cli import main as score

        sys.exit(score(sys.argv[2:]))
    if sys.argv[1:2] == ["compare"]:
        # The offline comparison, likewise (scoring.compare).
        from scoring.compare import main as compare

        sys.exit(compare(sys.argv[2:]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalserver.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
