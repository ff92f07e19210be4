"""The offline ``score`` command: ``python manage.py score RUN.json GOLD.json [options]``.

Framework-free, so ``manage.py`` can run it without starting Django (which would add about
0.4 s of start-up to a command whose whole budget is 1 s). Exit status 0 on success, 2 on
invalid input with every problem on stderr and nothing on stdout, 1 (nothing on stdout) if a
score came out NaN or infinite, which would be a bug: neither is JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TextIO

import numpy as np

from scoring.config import AVERAGINGS, PRESETS, TaskConfig
from scoring.evaluate import Result, evaluate
from scoring.formats import ValidationFailed, gc_paused, load_gold, load_run, parse_json
from scoring.measures import VARIANTS
from scoring.report import format_table

EXIT_INVALID = 2
EXIT_NOT_FINITE = 1


class _Invalid(Exception):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Invalid([f"usage: {message} (see --help)"])


def build_parser(prog: str = "manage.py score") -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, description="Score a run against gold annotations (STC-3 DQ and ND measures).")
    parser.add_argument("run", type=Path, help="the run: a JSON list, one entry per dialogue")
    parser.add_argument("gold", type=Path, help="the gold: a JSON list of annotated dialogues")
    parser.add_argument("--alpha", type=float, default=None,
                        help="weight of customer turns in ND, in [0, 1] (default: 0.5)")
    parser.add_argument("--variant", choices=VARIANTS, default=None,
                        help="paper (default) or stc3-2018 (OD averaged over all bins, as the 2018 script)")
    parser.add_argument("--averaging", choices=AVERAGINGS, default=None,
                        help="ND: macro (every dialogue counts the same, default) or micro (pooled turns)")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="stc3", help="task labels (default stc3)")
    parser.add_argument("--config", type=Path, default=None,
                        help="a JSON task configuration (keys of scoring.config.TaskConfig) instead of the preset")
    parser.add_argument("--per-dialogue", action="store_true", help="add every dialogue's scores")
    parser.add_argument("--allow-missing", action="store_true",
                        help="score the dialogues the run has and say how many gold dialogues are missing")
    parser.add_argument("--format", choices=("json", "table"), default="json", dest="output_format")
    return parser


def run_score(argv: list[str]) -> tuple[Result, argparse.Namespace]:
    """Parse arguments, read, validate and score; raise ``_Invalid`` with every problem found."""
    options = build_parser().parse_args(argv)
    try:
        config = PRESETS[options.preset]
        if options.config is not None:
            config = TaskConfig.from_dict(json.loads(options.config.read_text(encoding="utf-8")))
        config = config.with_options(alpha=options.alpha, variant=options.variant, averaging=options.averaging)
    except (OSError, ValueError, TypeError) as error:
        raise _Invalid([f"configuration: {error}"]) from None
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
    gold = run = None
    if "gold" in documents:
        try:
            gold = load_gold(documents["gold"], config)
        except ValidationFailed as error:
            found["gold"] = [f"{options.gold}: {line}" for line in error.errors]
    if gold is not None and "run" in documents:
        try:
            run = load_run(documents["run"], gold, allow_missing=options.allow_missing)
        except ValidationFailed as error:
            found["run"] = [f"{options.run}: {line}" for line in error.errors]
    problems += found["gold"] + found["run"]
    if problems or gold is None or run is None:
        raise _Invalid(problems)
    result = evaluate(run, gold, config)
    result.warnings = [f"{options.gold}: {line}" for line in gold.warnings] + [
        f"{options.run}: {line}" for line in result.warnings]
    return result, options


def main(argv: list[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    # The parsed files have no reference cycles: the cyclic collector would only walk them
    # again and again (a tenth of the run time in measurements). Paused, not disabled, so that
    # a caller in a long-lived process (``call_command("score", ...)``) keeps its collector.
    with gc_paused():
        return _main(argv, stdout or sys.stdout, stderr or sys.stderr)


def _main(argv: list[str] | None, stdout: TextIO, stderr: TextIO) -> int:
    if argv is not None and any(arg in ("-h", "--help") for arg in argv):
        build_parser().print_help(stdout)
        return 0
    try:
        result, options = run_score(sys.argv[1:] if argv is None else argv)
    except _Invalid as invalid:
        for line in invalid.problems:
            print(line, file=stderr)
        return EXIT_INVALID
    for warning in result.warnings:
        print(f"warning: {warning}", file=stderr)
    not_finite = non_finite_scores(result)
    if not_finite:
        # Never print NaN or Infinity: neither is JSON, and a score that is not a number is a bug.
        print(f"error: scoring produced values that are not finite numbers for {', '.join(not_finite)}; "
              "nothing was printed (please report this with the files)", file=stderr)
        return EXIT_NOT_FINITE
    if options.output_format == "json":
        stdout.write(json.dumps(result.to_dict(per_dialogue=options.per_dialogue), ensure_ascii=False,
                                allow_nan=False) + "\n")
    else:
        stdout.write(format_table(result))
        if options.per_dialogue:
            stdout.write(per_dialogue_table(result))
    return 0


def non_finite_scores(result: Result) -> list[str]:
    """The measures (``A.rsnod``, ``nugget.jsd``) with a NaN or infinite score, mean or per dialogue."""
    bad = []
    for dim, measures in (result.quality or {}).items():
        bad += [f"{dim}.{name}" for name, values in measures.items()
                if not (np.isfinite(values).all() and math.isfinite(result.quality_means[dim][name]))]
    bad += [f"nugget.{name}" for name, values in (result.nugget or {}).items()
            if not (np.isfinite(values).all() and math.isfinite(result.nugget_means[name]))]
    return bad


def per_dialogue_table(result: Result) -> str:
    columns: list[tuple[str, object]] = []
    for dim, measures in (result.quality or {}).items():
        columns += [(f"{dim}.{name}", values) for name, values in measures.items()]
    columns += [(f"nugget.{name}", values) for name, values in (result.nugget or {}).items()]
    lines = ["", "Per dialogue", "\t".join(["id"] + [name for name, _ in columns])]
    for row, dialogue_id in enumerate(result.dialogue_ids):
        lines.append("\t".join([dialogue_id] + [f"{values[row]:.6f}" for _, values in columns]))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
