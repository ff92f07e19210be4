"""The offline ``agreement`` command: Krippendorff's alpha per dimension with its bootstrap
interval, and each assessor's quality, for a judgements file (docs/organisers/judgements.md).

    python3 manage.py agreement JUDGEMENTS --kind stc3|response|metric [--items ITEMS]
        [--dimensions DIMS] [--config CONFIG] [--checks CHECKS] [--level nominal|ordinal|interval]
        [--bootstrap R] [--seed S] [--format json|table]

Exit status 0 with the report on stdout; 2 on invalid input, every problem on stderr and nothing
on stdout; 1 if a figure came out not finite (a bug).
"""

from __future__ import annotations

import argparse
from typing import TextIO

from scoring.judgements.alpha import LEVELS
from scoring.judgements.offline import add_common_arguments, as_json, read_inputs, run
from scoring.judgements.report import agreement_report, format_table
from scoring.offline import Invalid, Parser


def build_parser(prog: str = "manage.py agreement") -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="How well assessors agree in a judgements file: Krippendorff's alpha per "
                                           "dimension with a bootstrap interval over items, and each assessor's "
                                           "agreement with the others, time per item, straight-lining and "
                                           "accuracy on check items.")
    add_common_arguments(parser, items_required=False)
    parser.add_argument("--level", choices=LEVELS, default=None,
                        help="level of measurement of every scale (default: each dimension's own, ordinal for "
                             "A, E, S and 1-5 ratings; nugget labels are always nominal)")
    parser.add_argument("--format", choices=("json", "table"), default="json", dest="output_format")
    return parser


def agreement(options: argparse.Namespace) -> str:
    inputs = read_inputs(options)
    try:
        report = agreement_report(inputs.judgements, options.level, options.bootstrap, options.seed, inputs.checks)
    except ValueError as error:
        raise Invalid([f"--level: {error}"]) from None
    text = as_json(report)  # refuses a NaN for the table too
    return text if options.output_format == "json" else format_table(report)


def main(argv: list[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    return run(build_parser, agreement, argv, stdout, stderr)


if __name__ == "__main__":
    raise SystemExit(main())
