"""The DQ/ND kind's part of the offline ``score`` command: its options (``--alpha``,
``--variant``, ``--averaging``, ``--per-dialogue``) and its own path, which prints the object the
command always printed for DQ/ND (``Result.to_dict``) rather than the kind interface's summary.

Reached through ``scoring.kinds.OFFLINE`` by the generic command (``scoring.cli``), which names
no kind itself.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import TextIO

import numpy as np

from scoring.kinds.stc3.config import AVERAGINGS, PRESETS, TaskConfig
from scoring.kinds.stc3.evaluate import Result, evaluate
from scoring.kinds.stc3.formats import load_gold, load_run
from scoring.kinds.stc3.measures import VARIANTS
from scoring.kinds.stc3.report import format_table
from scoring.offline import EXIT_NOT_FINITE, Invalid, read_files
from scoring.validation import ValidationFailed

# The options this kind owns: refused with any other kind (option's attribute -> its flag).
OPTIONS = {"alpha": "--alpha", "variant": "--variant", "averaging": "--averaging", "per_dialogue": "--per-dialogue"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--alpha", type=float, default=None,
                        help="stc3: weight of customer turns in ND, in [0, 1] (default: 0.5)")
    parser.add_argument("--variant", choices=VARIANTS, default=None,
                        help="stc3: paper (default) or stc3-2018 (OD averaged over all bins, as the 2018 script)")
    parser.add_argument("--averaging", choices=AVERAGINGS, default=None,
                        help="stc3, ND: macro (every dialogue counts the same, default) or micro (pooled turns)")
    parser.add_argument("--per-dialogue", action="store_true", help="stc3: add every dialogue's scores")


def preset_help() -> str:
    return f"stc3: {', '.join(sorted(PRESETS))}"


def score(options: argparse.Namespace) -> Result:
    """Read, validate and score a DQ/ND run; raise ``Invalid`` with every problem found."""
    if options.preset is not None and options.preset not in PRESETS:
        raise Invalid([f"usage: argument --preset: invalid choice: {options.preset!r} (choose from "
                       f"{', '.join(repr(name) for name in sorted(PRESETS))}) (see --help)"])
    try:
        config = PRESETS[options.preset or "stc3"]
        if options.config is not None:
            config = TaskConfig.from_dict(json.loads(options.config.read_text(encoding="utf-8")))
        config = config.with_options(alpha=options.alpha, variant=options.variant, averaging=options.averaging)
    except (OSError, ValueError, TypeError) as error:
        raise Invalid([f"configuration: {error}"]) from None
    documents, found, problems = read_files(options)
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
        raise Invalid(problems)
    result = evaluate(run, gold, config)
    result.warnings = [f"{options.gold}: {line}" for line in gold.warnings] + [
        f"{options.run}: {line}" for line in result.warnings]
    return result


def run(options: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    """The command for a DQ/ND run: scores, then prints JSON or the table (``Invalid`` on bad input)."""
    options.per_dialogue = options.per_dialogue or options.per_item
    result = score(options)
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
