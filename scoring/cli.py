"""The offline ``score`` command: ``python manage.py score RUN.json GOLD.json [--kind K] [options]``.

Framework-free, so ``manage.py`` can run it without starting Django (which would add about
0.4 s of start-up to a command whose whole budget is 1 s). Exit status 0 on success, 2 on
invalid input with every problem on stderr and nothing on stdout, 1 (nothing on stdout) if a
score came out NaN or infinite, which would be a bug: neither is JSON.

This module names no kind: a kind's options and, where it has one, its own path come from its
offline module (``scoring.kinds.OFFLINE``). The default kind (DQ/ND) prints the object it always
printed, by its own path. Any other kind is scored through the kind interface alone and prints
``Scored.summary()`` (``{"measures": {key: headline}, "n_items": N, "settings": {...}}`` and the
kind's extra run-level figures); ``--per-item`` adds ``"per_item": {key: {item id: score}}`` and
every entry of ``Scored.details`` (the response kind's ``"nuggets"`` and ``"acts"``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from scoring.kinds import DEFAULT_KIND, KINDS, offline_hooks
from scoring.offline import EXIT_INVALID, EXIT_NOT_FINITE, Invalid, Parser, problem_lines, read_files
from scoring.report import format_scored_table
from scoring.validation import ValidationFailed, gc_paused

if TYPE_CHECKING:
    from scoring.kinds import Kind, MeasureSpec, Scored

__all__ = ["DEFAULT_KIND", "EXIT_INVALID", "EXIT_NOT_FINITE", "KindOutcome", "build_parser", "kind_output", "main"]


def build_parser(prog: str = "manage.py score") -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="Score a run against gold annotations with the measures of its task "
                                           f"kind (--kind; default {DEFAULT_KIND}).")
    parser.add_argument("run", type=Path, help="the run: a JSON list, one entry per dialogue (per item)")
    parser.add_argument("gold", type=Path, help="the gold: a JSON list of annotated dialogues (items)")
    parser.add_argument("--kind", default=DEFAULT_KIND,
                        help=f"the task kind: {', '.join(sorted(KINDS))} (default: {DEFAULT_KIND})")
    hooks = offline_hooks()
    presets = "; ".join(hook.preset_help() for hook in hooks.values() if hasattr(hook, "preset_help"))
    parser.add_argument("--preset", default=None,
                        help=f"the kind's preset configuration ({presets}; default: the kind's default preset)")
    parser.add_argument("--config", type=Path, default=None,
                        help="a JSON task configuration of the kind instead of the preset")
    for hook in hooks.values():
        hook.add_arguments(parser)
    parser.add_argument("--per-item", action="store_true",
                        help="add every item's scores (and the kind's per-item details, such as the response kind's "
                             "nugget scores); for stc3 the same as --per-dialogue")
    parser.add_argument("--allow-missing", action="store_true",
                        help="score the items the run has and say how many gold items are missing")
    parser.add_argument("--format", choices=("json", "table"), default="json", dest="output_format")
    return parser


@dataclass
class KindOutcome:
    """What scoring a run of any kind through the kind interface gives the command."""

    kind: Kind
    specs: list[MeasureSpec]
    scored: Scored
    warnings: list[str]


def _refuse_other_kinds_options(options: argparse.Namespace, hooks: dict[str, ModuleType]) -> None:
    """An option one kind owns, given with another kind: refused, naming the kind it belongs to."""
    wrong = [f"usage: {flag} applies to --kind {owner} only (see --help)" for owner, hook in hooks.items()
             if owner != options.kind for name, flag in hook.OPTIONS.items()
             if getattr(options, name, None) not in (None, False)]
    if wrong:
        raise Invalid(wrong)


def _score_kind(options: argparse.Namespace, hook: ModuleType | None) -> KindOutcome:
    """Any registered kind, through the kind interface alone; ``Invalid`` with every problem found."""
    from scoring.kinds import get_kind

    try:
        kind = get_kind(options.kind)
    except ValueError as error:
        raise Invalid([f"usage: argument --kind: {error} (see --help)"]) from None
    try:
        if options.config is not None:
            config = kind.config(json.loads(options.config.read_text(encoding="utf-8")))
        else:
            config = kind.preset(options.preset or kind.default_preset)
    except (OSError, ValueError, TypeError) as error:
        raise Invalid([f"configuration: {line}" for line in problem_lines(error)]) from None
    if hook is not None and hasattr(hook, "configure"):
        config = hook.configure(options, config)
    # Every measure this machine can compute; one it cannot is left out with a sentence saying why.
    config, left_out = kind.computable(config)
    missing = kind.check_resources(config)
    if missing:
        raise Invalid([f"configuration: {line}" for line in missing])
    documents, found, problems = read_files(options)
    gold = run = None
    if "gold" in documents:
        try:
            gold = kind.compile_gold(documents["gold"], config)
        except ValidationFailed as error:
            found["gold"] = [f"{options.gold}: {line}" for line in error.errors]
    if gold is not None and "run" in documents:
        try:
            run = kind.parse_run(documents["run"], gold, config, allow_missing=options.allow_missing)
        except ValidationFailed as error:
            found["run"] = [f"{options.run}: {line}" for line in error.errors]
    problems += found["gold"] + found["run"]
    if problems or gold is None or run is None:
        raise Invalid(problems)
    scored = kind.score(run, gold, config)
    warnings = [*left_out, *(f"{options.gold}: {line}" for line in getattr(gold, "warnings", []))]
    for line in [*getattr(run, "warnings", []), *scored.warnings]:
        if f"{options.run}: {line}" not in warnings:
            warnings.append(f"{options.run}: {line}")
    return KindOutcome(kind, kind.measures(config, gold), scored, warnings)


def kind_output(outcome: KindOutcome, per_item: bool) -> dict[str, Any]:
    """The JSON object of a run of any kind: ``Scored.summary()``, then per-item scores and details."""
    scored = outcome.scored
    data = scored.summary()
    if per_item:
        data["per_item"] = {key: dict(zip(scored.item_ids, np.asarray(values, dtype=np.float64).tolist()))
                            for key, values in scored.per_item.items()}
        for key, value in scored.details.items():
            data.setdefault(key, value)
    return data


def _json_value(value: object) -> object:
    """NumPy values a kind put into its settings or details, as JSON."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON: {type(value).__name__}")


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
        options = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
        hooks = offline_hooks()
        _refuse_other_kinds_options(options, hooks)
        hook = hooks.get(options.kind)
        if hook is not None and hasattr(hook, "run"):
            return hook.run(options, stdout, stderr)
        return _print_kind(_score_kind(options, hook), options, stdout, stderr)
    except Invalid as invalid:
        for line in invalid.problems:
            print(line, file=stderr)
        return EXIT_INVALID


def _print_kind(outcome: KindOutcome, options: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    for warning in outcome.warnings:
        print(f"warning: {warning}", file=stderr)
    scored = outcome.scored
    bad = scored.non_finite()
    text = ""
    if not bad:
        try:
            if options.output_format == "json":
                text = json.dumps(kind_output(outcome, options.per_item), ensure_ascii=False, allow_nan=False,
                                  default=_json_value) + "\n"
            else:
                text = format_scored_table(scored, outcome.specs, outcome.kind.item_noun, options.per_item)
        except ValueError:  # json.dumps refuses NaN in the kind's details or extra figures
            bad = ["details"]
    if bad:
        print(f"error: scoring produced values that are not finite numbers for {', '.join(bad)}; "
              "nothing was printed (please report this with the files)", file=stderr)
        return EXIT_NOT_FINITE
    stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
