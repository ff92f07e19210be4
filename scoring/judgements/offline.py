"""What the offline judgements commands (``manage.py agreement`` and ``manage.py
judgements_to_gold``) share: their common options, reading and validating every input file with
every problem collected (``scoring.offline.Invalid``: exit status 2, nothing written), and
running a command's work with the house's exit statuses.

Framework-free, like ``score`` and ``compare``: ``manage.py`` runs these without starting Django.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from scoring.judgements.formats import KINDS, Items, JudgementSet, load_dimensions, load_items, load_judgements
from scoring.judgements.report import DEFAULT_RESAMPLES, DEFAULT_SEED, load_checks
from scoring.judgements.tables import csv_lines, records_from_csv
from scoring.kinds.stc3.config import STC3, TaskConfig
from scoring.offline import EXIT_INVALID, EXIT_NOT_FINITE, Invalid
from scoring.validation import ValidationFailed, gc_paused, parse_json

MAX_SEED = 2**32 - 1  # as the server's seeds (scoring.compare)


def add_common_arguments(parser: argparse.ArgumentParser, items_required: bool) -> None:
    parser.add_argument("judgements", type=Path, metavar="JUDGEMENTS",
                        help="the judgements file: a JSON list, or a CSV table (a name ending in .csv)")
    parser.add_argument("--kind", required=True, choices=KINDS,
                        help="stc3: dialogues (A, E, S and nugget labels); response: references rated 1-5; "
                             "metric: responses judged on dimensions")
    parser.add_argument("--items", type=Path, required=items_required, metavar="ITEMS",
                        help="what was judged: stc3 dialogues [{id, turns}], a response gold, or metrics-track "
                             "contexts; checks every item id (and stc3 labels against each turn's sender)")
    parser.add_argument("--dimensions", type=Path, default=None, metavar="DIMS",
                        help="metric: the dimensions file [{name, scale, level, meanings}] "
                             "(default: appropriateness on 1-5)")
    parser.add_argument("--config", type=Path, default=None, metavar="CONFIG",
                        help="stc3: a task configuration (JSON) with other labels than STC-3's")
    parser.add_argument("--checks", type=Path, default=None, metavar="CHECKS",
                        help="check items' known answers {item: {dimension: answer}}; left out of alpha and gold")
    parser.add_argument("--bootstrap", type=int, default=DEFAULT_RESAMPLES, metavar="R",
                        help=f"bootstrap resamples of alpha's interval (default {DEFAULT_RESAMPLES:,})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, metavar="S", help="bootstrap seed (default 0)")


def read_json(path: Path, role: str) -> tuple[object | None, list[str]]:
    """A file parsed, or the problems (prefixed with its path) that stop it."""
    try:
        content = path.read_bytes()
    except OSError as error:
        return None, [f"{path}: cannot read the {role} file: {error.strerror or error}"]
    try:
        return parse_json(content, f"{role} file"), []
    except ValidationFailed as error:
        return None, [f"{path}: {line}" for line in error.errors]


def _validated(path: Path, data: object, read: Callable[[object], object], problems: list[str]) -> object | None:
    try:
        return read(data)
    except ValidationFailed as error:
        problems.extend(f"{path}: {line}" for line in error.errors)
    except ValueError as error:
        problems.append(f"{path}: {error}")
    return None


def _read_table(path: Path, kind: str, dimensions: object, config: TaskConfig) -> tuple[list | None, list[str]]:
    """A CSV judgements table as records, or the problems that stop it."""
    try:
        content = path.read_bytes()
    except OSError as error:
        return None, [f"{path}: cannot read the judgements file: {error.strerror or error}"]
    try:
        return records_from_csv(content, kind, dimensions, config), []  # type: ignore[arg-type]
    except ValidationFailed as error:
        return None, [f"{path}: {line}" for line in error.errors]


class Inputs:
    """Every input of a judgements command, validated: the judgements (check items left out into
    ``checks``), the items' parsed data and the check answers."""

    def __init__(self, judgements: JudgementSet, items_data: object | None, checks: dict) -> None:
        self.judgements, self.items_data, self.checks = judgements, items_data, checks


def read_inputs(options: argparse.Namespace) -> Inputs:
    """Read and validate every file the options name, collecting every problem of every file;
    raise ``Invalid`` with all of them."""
    problems: list[str] = []
    if options.bootstrap < 1:
        problems.append(f"--bootstrap must be a positive integer; got {options.bootstrap}")
    if not 0 <= options.seed <= MAX_SEED:
        problems.append(f"--seed must be an integer from 0 to {MAX_SEED}; got {options.seed}")
    if options.dimensions is not None and options.kind != "metric":
        problems.append(f"usage: --dimensions is for --kind metric (the {options.kind} kind's are fixed)")
    if options.config is not None and options.kind != "stc3":
        problems.append("usage: --config is for --kind stc3")
    config: TaskConfig = STC3
    if options.config is not None:
        data, found = read_json(options.config, "configuration")
        problems += found
        if data is not None:
            try:
                config = TaskConfig.from_dict(data)  # type: ignore[arg-type]
            except (ValueError, TypeError, AttributeError) as error:
                problems.append(f"{options.config}: {error}")
    dimensions = None
    if options.dimensions is not None and options.kind == "metric":
        data, found = read_json(options.dimensions, "dimensions")
        problems += found
        if data is not None:
            dimensions = _validated(options.dimensions, data, load_dimensions, problems)
    items: Items | None = None
    items_data = None
    if options.items is not None:
        items_data, found = read_json(options.items, "items")
        problems += found
        if items_data is not None:
            items = _validated(options.items, items_data, lambda d: load_items(d, options.kind), problems)  # type: ignore[assignment]
    table = options.judgements.suffix.lower() == ".csv"
    if table:
        data, found = _read_table(options.judgements, options.kind, dimensions, config)
    else:
        data, found = read_json(options.judgements, "judgements")
    problems += found
    judgements = None
    items_ok = options.items is None or items is not None
    dimensions_ok = options.kind != "metric" or options.dimensions is None or dimensions is not None
    if data is not None and items_ok and dimensions_ok:
        try:
            judgements = load_judgements(data, options.kind, items, dimensions, config)  # type: ignore[arg-type]
        except ValidationFailed as error:
            lines = csv_lines(error.errors, options.judgements.read_bytes()) if table else error.errors
            problems.extend(f"{options.judgements}: {line}" for line in lines)
    checks: dict = {}
    if options.checks is not None:
        data, found = read_json(options.checks, "checks")
        problems += found
        if data is not None and judgements is not None:
            checks = _validated(options.checks, data, lambda d: load_checks(d, judgements), problems) or {}  # type: ignore[arg-type]
    if problems or judgements is None:
        raise Invalid(problems or [f"{options.judgements}: could not be read"])
    assert isinstance(judgements, JudgementSet)
    return Inputs(judgements, items_data, checks)


def run(build_parser: Callable[[], argparse.ArgumentParser], work: Callable[[argparse.Namespace], str],
        argv: list[str] | None, stdout: TextIO | None, stderr: TextIO | None) -> int:
    """Parse, work, print: exit 0; every problem on stderr and exit 2 on bad input; exit 1 if a
    figure came out not finite (a bug: JSON has no NaN)."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    if argv is not None and any(arg in ("-h", "--help") for arg in argv):
        build_parser().print_help(stdout)
        return 0
    try:
        with gc_paused():
            options = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
            text = work(options)
    except Invalid as invalid:
        for line in invalid.problems:
            print(line, file=stderr)
        return EXIT_INVALID
    except NotFinite:
        print("error: a figure is not a finite number; nothing was written (please report this with the files)",
              file=stderr)
        return EXIT_NOT_FINITE
    stdout.write(text)
    return 0


class NotFinite(Exception):
    """A figure came out NaN or infinite."""


def as_json(data: object) -> str:
    try:
        return json.dumps(data, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError:
        raise NotFinite from None
