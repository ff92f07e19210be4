"""The offline ``judgements_to_gold`` command: a judgements file and the items it judged become
a gold file of their kind, with its provenance (docs/organisers/judgements.md).

    python3 manage.py judgements_to_gold JUDGEMENTS --kind stc3|response|metric --items ITEMS -o GOLD
        [--dimensions DIMS] [--config CONFIG] [--checks CHECKS] [--aggregation mean|z-score]
        [--campaign NAME] [--per-item K] [--provenance FILE] [--bootstrap R] [--seed S]

The gold is written to GOLD (atomically: a temporary file renamed over it), the provenance
printed on stdout as JSON (or written to ``--provenance``). Exit status 0; 2 on invalid input,
every problem on stderr and nothing written; 1 if a figure came out not finite (a bug).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import TextIO

from scoring.judgements.gold import AGGREGATIONS, metric_gold, provenance, reference_gold, stc3_gold
from scoring.judgements.offline import add_common_arguments, as_json, read_inputs, run
from scoring.judgements.report import agreement_report
from scoring.offline import Invalid, Parser
from scoring.validation import ValidationFailed


def build_parser(prog: str = "manage.py judgements_to_gold") -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="Turn judgements into a gold file: stc3 annotations (one per assessor), "
                                           "deltaBLEU reference weights (mean rating - 3) / 2, or metrics-track "
                                           "human scores per dimension with the judgements kept; the provenance "
                                           "(assessors, judgements per item, alpha per dimension, complete or not) "
                                           "goes to stdout.")
    add_common_arguments(parser, items_required=True)
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="GOLD", help="the gold file to write")
    parser.add_argument("--aggregation", choices=AGGREGATIONS, default="mean",
                        help="metric: human score = the mean of raw judgements (default) or of per-assessor z-scores")
    parser.add_argument("--campaign", default=None, metavar="NAME", help="the campaign's name, kept in the provenance")
    parser.add_argument("--per-item", type=int, default=None, metavar="K",
                        help="judgements each item needed: fewer makes the gold incomplete in its provenance")
    parser.add_argument("--provenance", type=Path, default=None, metavar="FILE",
                        help="write the provenance JSON here instead of stdout")
    return parser


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all."""
    directory = path.resolve().parent
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def to_gold(options: argparse.Namespace) -> str:
    problems = []
    if options.per_item is not None and options.per_item < 1:
        problems.append(f"--per-item must be a positive integer; got {options.per_item}")
    if options.aggregation != "mean" and options.kind != "metric":
        problems.append("usage: --aggregation is for --kind metric (stc3 keeps every label; reference weights "
                        "map the raw mean)")
    if not options.output.resolve().parent.is_dir():
        problems.append(f"-o: the folder of {options.output} does not exist")
    try:
        inputs = read_inputs(options)
    except Invalid as invalid:
        raise Invalid(problems + invalid.problems) from None
    if problems:
        raise Invalid(problems)
    judged = inputs.judgements.without_checks(inputs.checks)
    if not judged.judgements:
        raise Invalid([f"{options.judgements}: every judgement is of a check item: there is no gold to build"])
    left_out: list[str] = []
    try:
        if options.kind == "stc3":
            gold = stc3_gold(judged, inputs.items_data)  # type: ignore[arg-type]
        elif options.kind == "response":
            gold = reference_gold(judged, inputs.items_data)  # type: ignore[arg-type]
        else:
            gold, left_out = metric_gold(judged, inputs.items_data, options.aggregation)  # type: ignore[arg-type]
    except ValidationFailed as error:
        raise Invalid([f"{options.judgements}: {line}" for line in error.errors]) from None
    report = agreement_report(judged, None, options.bootstrap, options.seed)
    facts = provenance(judged, campaign=options.campaign, required_per_item=options.per_item,
                       aggregation=options.aggregation if options.kind == "metric" else None, left_out=left_out,
                       report=report)
    left_out_checks = set(inputs.checks) | inputs.judgements.check_items
    if left_out_checks:
        facts["check_items"] = sorted(left_out_checks)
    facts_text = as_json(facts)
    _write(options.output, json.dumps(gold, ensure_ascii=False, allow_nan=False) + "\n")
    if options.provenance is not None:
        _write(options.provenance, facts_text)
        return ""
    return facts_text


def main(argv: list[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    return run(build_parser, to_gold, argv, stdout, stderr)


if __name__ == "__main__":
    raise SystemExit(main())
