"""What the offline commands (``score`` and ``compare``) share, and what a kind's own offline
hooks use: exit statuses, the usage error, reading the run and gold files.

Framework-free: ``manage.py`` runs these commands without starting Django. A kind adds options or
a path of its own through ``scoring.kinds.OFFLINE`` (a module per kind, named by string so that the
generic commands import no kind), never by an import in the commands.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scoring.validation import ValidationFailed, parse_json

EXIT_INVALID = 2
EXIT_NOT_FINITE = 1


class Invalid(Exception):
    """Bad input: every problem, one line each, printed on stderr with exit status 2."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors become ``Invalid`` (listed with the others) instead of an exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise Invalid([f"usage: {message} (see --help)"])


def problem_lines(error: Exception) -> list[str]:
    """One line per problem: a configuration error lists them in ``problems`` (the response kind)."""
    problems = getattr(error, "problems", None)
    if isinstance(problems, list) and problems:
        return ["invalid task configuration: " + str(problem) for problem in problems]
    return [str(error)]


def read_files(options: argparse.Namespace) -> tuple[dict[str, object], dict[str, list[str]], list[str]]:
    """Both files (``options.run`` and ``options.gold``) read and parsed: the parsed documents,
    each file's problems, unreadable files."""
    contents, problems = {}, []
    for role in ("run", "gold"):
        path: Path = getattr(options, role)
        try:
            contents[role] = path.read_bytes()
        except OSError as error:
            problems.append(f"{path}: cannot read the {role} file: {error.strerror or error}")
    # Every file's problems are reported, not only the first file's: the run is parsed even when
    # the gold is invalid (only its validation needs a valid gold).
    found: dict[str, list[str]] = {"gold": [], "run": []}
    documents: dict[str, object] = {}
    for role in ("gold", "run"):
        if role in contents:
            try:
                documents[role] = parse_json(contents[role], f"{role} file")
            except ValidationFailed as error:
                found[role] = [f"{getattr(options, role)}: {line}" for line in error.errors]
    return documents, found, problems
