"""The offline ``score`` command: ``python manage.py score RUN.json GOLD.json [--kind K] [options]``.

Framework-free, so ``manage.py`` can run it without starting Django (which would add about
0.4 s of start-up to a command whose whole budget is 1 s). Exit status 0 on success, 2 on
invalid input with every problem on stderr and nothing on stdout, 1 (nothing on stdout) if a
score came out NaN or infinite, which would be a bug: neither is JSON.

The default kind, ``stc3`` (DQ/ND), prints the object it always printed. Any other kind
registered in ``scoring.kinds`` is scored through the kind interface alone and prints
``Scored.summary()`` (``{"measures": {key: headline}, "n_items": N, "settings": {...}}`` and the
kind's extra run-level figures); ``--per-item`` adds ``"per_item": {key: {item id: score}}`` and
every entry of ``Scored.details`` (the response kind's ``"nuggets"`` and ``"acts"``). The kinds
are imported only for another kind than stc3, which keeps the DQ/ND command as fast as before.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from scoring.kinds.stc3.config import AVERAGINGS, PRESETS, TaskConfig
from scoring.kinds.stc3.evaluate import Result, evaluate
from scoring.kinds.stc3.formats import load_gold, load_run
from scoring.kinds.stc3.measures import VARIANTS
from scoring.kinds.stc3.report import format_table
from scoring.report import format_scored_table
from scoring.validation import ValidationFailed, gc_paused, parse_json

if TYPE_CHECKING:
    from scoring.kinds import Kind, MeasureSpec, Scored

EXIT_INVALID = 2
EXIT_NOT_FINITE = 1
DEFAULT_KIND = "stc3"
# Options of the DQ/ND kind's own configuration, refused with any other kind.
STC3_OPTIONS = {"alpha": "--alpha", "variant": "--variant", "averaging": "--averaging",
                "per_dialogue": "--per-dialogue"}
# Options of one other kind only: (kind, flag).
KIND_OPTIONS = {"vectors": ("response", "--vectors")}


class _Invalid(Exception):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Invalid([f"usage: {message} (see --help)"])


def build_parser(prog: str = "manage.py score") -> argparse.ArgumentParser:
    parser = _Parser(prog=prog, description="Score a run against gold annotations (STC-3 DQ and ND measures, or "
                                            "the measures of another task kind: --kind response).")
    parser.add_argument("run", type=Path, help="the run: a JSON list, one entry per dialogue (per item)")
    parser.add_argument("gold", type=Path, help="the gold: a JSON list of annotated dialogues (items)")
    parser.add_argument("--kind", default=DEFAULT_KIND,
                        help="the task kind: stc3 (DQ/ND, default) or another kind registered in scoring.kinds "
                             "(response: BLEU, deltaBLEU, POSSCORE and nugget-level scores)")
    parser.add_argument("--alpha", type=float, default=None,
                        help="stc3: weight of customer turns in ND, in [0, 1] (default: 0.5)")
    parser.add_argument("--variant", choices=VARIANTS, default=None,
                        help="stc3: paper (default) or stc3-2018 (OD averaged over all bins, as the 2018 script)")
    parser.add_argument("--averaging", choices=AVERAGINGS, default=None,
                        help="stc3, ND: macro (every dialogue counts the same, default) or micro (pooled turns)")
    parser.add_argument("--preset", default=None,
                        help=f"the kind's preset configuration (stc3: {', '.join(sorted(PRESETS))}; default: "
                             "the kind's default preset)")
    parser.add_argument("--config", type=Path, default=None,
                        help="a JSON task configuration of the kind instead of the preset (stc3: keys of "
                             "scoring.kinds.stc3.config.TaskConfig)")
    parser.add_argument("--vectors", type=Path, default=None, metavar="TABLE.txt",
                        help="response: a word2vec text table of the task's language for POSSCORE (and vBLEU's "
                             "rater), instead of the pipeline's vectors; what a Chinese task (--preset response-zh) "
                             "needs, as an organiser uploads it on the server")
    parser.add_argument("--per-dialogue", action="store_true", help="stc3: add every dialogue's scores")
    parser.add_argument("--per-item", action="store_true",
                        help="add every item's scores (and the kind's per-item details, such as the response kind's "
                             "nugget scores); for stc3 the same as --per-dialogue")
    parser.add_argument("--allow-missing", action="store_true",
                        help="score the items the run has and say how many gold items are missing")
    parser.add_argument("--format", choices=("json", "table"), default="json", dest="output_format")
    return parser


def _score_stc3(options: argparse.Namespace) -> Result:
    """Read, validate and score a DQ/ND run; raise ``_Invalid`` with every problem found."""
    _refuse_other_kinds_options(options)
    if options.preset is not None and options.preset not in PRESETS:
        raise _Invalid([f"usage: argument --preset: invalid choice: {options.preset!r} (choose from "
                        f"{', '.join(repr(name) for name in sorted(PRESETS))}) (see --help)"])
    try:
        config = PRESETS[options.preset or "stc3"]
        if options.config is not None:
            config = TaskConfig.from_dict(json.loads(options.config.read_text(encoding="utf-8")))
        config = config.with_options(alpha=options.alpha, variant=options.variant, averaging=options.averaging)
    except (OSError, ValueError, TypeError) as error:
        raise _Invalid([f"configuration: {error}"]) from None
    documents, found, problems = _read_files(options)
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
    return result


def _read_files(options: argparse.Namespace) -> tuple[dict[str, object], dict[str, list[str]], list[str]]:
    """Both files read and parsed: the parsed documents, each file's problems, unreadable files."""
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


@dataclass
class KindOutcome:
    """What scoring a run of any kind through the kind interface gives the command."""

    kind: Kind
    specs: list[MeasureSpec]
    scored: Scored
    warnings: list[str]


def _score_kind(options: argparse.Namespace) -> KindOutcome:
    """Any registered kind, through the kind interface alone; ``_Invalid`` with every problem found."""
    from scoring.kinds import get_kind

    used = [flag for name, flag in STC3_OPTIONS.items() if getattr(options, name) not in (None, False)]
    if used:
        raise _Invalid([f"usage: {flag} applies to --kind stc3 only (see --help)" for flag in used])
    try:
        kind = get_kind(options.kind)
    except ValueError as error:
        raise _Invalid([f"usage: argument --kind: {error} (see --help)"]) from None
    _refuse_other_kinds_options(options)
    try:
        if options.config is not None:
            config = kind.config(json.loads(options.config.read_text(encoding="utf-8")))
        else:
            config = kind.preset(options.preset or kind.default_preset)
    except (OSError, ValueError, TypeError) as error:
        raise _Invalid([f"configuration: {line}" for line in _problem_lines(error)]) from None
    if getattr(options, "vectors", None) is not None:
        config = _with_vectors(config, options.vectors)
    missing = kind.check_resources(config)
    if missing:
        raise _Invalid([f"configuration: {line}" for line in missing])
    documents, found, problems = _read_files(options)
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
        raise _Invalid(problems)
    scored = kind.score(run, gold, config)
    warnings = [f"{options.gold}: {line}" for line in getattr(gold, "warnings", [])]
    for line in [*getattr(run, "warnings", []), *scored.warnings]:
        if f"{options.run}: {line}" not in warnings:
            warnings.append(f"{options.run}: {line}")
    return KindOutcome(kind, kind.measures(config, gold), scored, warnings)


def _refuse_other_kinds_options(options: argparse.Namespace) -> None:
    wrong = [f"usage: {flag} applies to --kind {owner} only (see --help)" for name, (owner, flag)
             in KIND_OPTIONS.items() if getattr(options, name, None) is not None and owner != options.kind]
    if wrong:
        raise _Invalid(wrong)


def _with_vectors(config: object, path: Path) -> object:
    """The response configuration naming the word2vec table at ``path``: the table is checked (every
    bad line named) and kept under its sha256 in a vector directory, as an organiser's upload is."""
    import dataclasses
    import tempfile

    from scoring.kinds.response.kind import set_vector_directory, store_vector_table
    from scoring.kinds.response.nlp import VectorTableError

    try:
        data = path.read_bytes()
    except OSError as error:
        raise _Invalid([f"--vectors: {path}: cannot read: {error.strerror or error}"]) from None
    if not os.environ.get("EVALSERVER_VECTOR_DIR"):
        set_vector_directory(tempfile.mkdtemp(prefix="evalserver-vectors-"))
    try:
        digest, _ = store_vector_table(data, name=path.name)
    except VectorTableError as error:
        raise _Invalid([f"--vectors: {path}: {line}" for line in error.problems]) from None
    return dataclasses.replace(config, vectors=digest, vectors_name=path.name)


def _problem_lines(error: Exception) -> list[str]:
    """One line per problem: a configuration error lists them in ``problems`` (the response kind)."""
    problems = getattr(error, "problems", None)
    if isinstance(problems, list) and problems:
        return ["invalid task configuration: " + str(problem) for problem in problems]
    return [str(error)]


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
        if options.kind != DEFAULT_KIND:
            return _print_kind(_score_kind(options), options, stdout, stderr)
        options.per_dialogue = options.per_dialogue or options.per_item
        result = _score_stc3(options)
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
