"""The offline ``compare`` command: significance tests and intervals between runs, for papers.

    python3 manage.py compare RUN [RUN ...] --gold GOLD [--kind KIND] [--preset P | --config C]
        [--measures KEY,KEY] [--permutations B] [--bootstrap R] [--seed S] [--alpha A] [--format json|table]

Pinned by SIGNIFICANCE-SPEC ("The offline command"). Every run is scored through the kind
interface (the numbers ``manage.py score`` prints), then every measure is tested about its
headline with :func:`scoring.significance.measure_tests`, the function the server's board
statistics use: the same runs in the same order, gold, seed, B and R give the same numbers as
the server stores (the server's R is min(B, 10,000); its run order is the board's). Mean
measures are always tested together, all of them, as on the server (they share permutations),
and ``--measures`` only selects what is printed. Framework-free (no Django), like ``score``.

Exit status 0 on success; 2 on invalid input, with every problem named on stderr and nothing on
stdout; 1 if a number came out NaN or infinite (a bug: neither is JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from scoring import significance, stats
from scoring.kinds import DEFAULT_KIND
from scoring.offline import EXIT_INVALID, EXIT_NOT_FINITE, Invalid, Parser, problem_lines
from scoring.validation import ValidationFailed, gc_paused, parse_json

DEFAULT_PERMUTATIONS = 10_000
DEFAULT_BOOTSTRAP = 1_000
DEFAULT_SEED = 0
LEVEL = 0.95
MAX_SEED = 2**32 - 1  # the server records seeds as 32-bit unsigned integers
TUKEY_FAMILY = "randomised Tukey HSD: adjusted for every pair of the runs compared"


def build_parser(prog: str = "manage.py compare") -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="Compare runs on one gold: each run's figure with a bootstrap interval, "
                                            "the randomised Tukey HSD p-value of every pair and the top group, "
                                            "each about the figure the board shows (corpus or mean).")
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN",
                        help="run files; a run is named by its file's stem")
    parser.add_argument("--gold", type=Path, required=True, help="the gold file")
    parser.add_argument("--kind", default=DEFAULT_KIND, help=f"the task kind (default {DEFAULT_KIND})")
    parser.add_argument("--preset", default=None, help="the kind's preset configuration")
    parser.add_argument("--config", type=Path, default=None, help="a JSON task configuration instead of a preset")
    parser.add_argument("--measures", default=None, metavar="KEY,KEY", help="only these measure keys (default: all)")
    parser.add_argument("--permutations", type=int, default=DEFAULT_PERMUTATIONS, metavar="B",
                        help=f"Tukey HSD permutations (default {DEFAULT_PERMUTATIONS:,})")
    parser.add_argument("--bootstrap", type=int, default=DEFAULT_BOOTSTRAP, metavar="R",
                        help=f"bootstrap resamples of the intervals (default {DEFAULT_BOOTSTRAP:,})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, metavar="S", help="seed (default 0)")
    parser.add_argument("--alpha", type=float, default=stats.SIGNIFICANCE_LEVEL, metavar="A",
                        help="significance level of the top group (default 0.05)")
    parser.add_argument("--format", choices=("json", "table"), default="json", dest="output_format")
    return parser


def _check_options(options: argparse.Namespace) -> list[str]:
    problems = []
    if options.preset is not None and options.config is not None:
        problems.append("usage: give --preset or --config, not both (see --help)")
    if options.permutations < 1:
        problems.append(f"--permutations must be a positive integer; got {options.permutations}")
    if options.bootstrap < 1:
        problems.append(f"--bootstrap must be a positive integer; got {options.bootstrap}")
    if not 0 <= options.seed <= MAX_SEED:
        problems.append(f"--seed must be an integer from 0 to {MAX_SEED}; got {options.seed}")
    if not (math.isfinite(options.alpha) and 0.0 < options.alpha < 1.0):
        problems.append(f"--alpha must lie strictly between 0 and 1; got {options.alpha}")
    if len(options.runs) < 2:
        problems.append("compare needs at least two runs")
    stems: dict[str, list[str]] = {}
    for path in options.runs:
        stems.setdefault(path.stem, []).append(str(path))
    problems += [f"runs are named by their files' stems, and {', '.join(paths)} share the name {stem!r}"
                 for stem, paths in stems.items() if len(paths) > 1]
    return problems


def _read(path: Path, role: str) -> tuple[object | None, list[str]]:
    try:
        content = path.read_bytes()
    except OSError as error:
        return None, [f"{path}: cannot read the {role} file: {error.strerror or error}"]
    try:
        return parse_json(content, f"{role} file"), []
    except ValidationFailed as error:
        return None, [f"{path}: {line}" for line in error.errors]


def compare(options: argparse.Namespace) -> dict[str, Any]:
    """The command's JSON object (``Invalid`` listing every problem on bad input)."""
    from scoring.kinds import get_kind

    problems = _check_options(options)
    try:
        kind = get_kind(options.kind)
    except ValueError as error:
        raise Invalid([*problems, f"usage: argument --kind: {error} (see --help)"]) from None
    config = None
    try:
        if options.config is not None:
            config = kind.config(json.loads(options.config.read_text(encoding="utf-8")))
        elif options.preset is not None or not problems:
            config = kind.preset(options.preset or kind.default_preset)
    except (OSError, ValueError, TypeError) as error:
        problems += [f"configuration: {line}" for line in problem_lines(error)]
    left_out: list[str] = []
    if config is not None:
        # Every measure this machine can compute; one it cannot is left out with a sentence saying why.
        config, left_out = kind.computable(config)
        problems += [f"configuration: {line}" for line in kind.check_resources(config)]
    gold_data, found = _read(options.gold, "gold")
    problems += found
    gold = None
    if gold_data is not None and config is not None:
        try:
            gold = kind.compile_gold(gold_data, config)
        except ValidationFailed as error:
            problems += [f"{options.gold}: {line}" for line in error.errors]
    parsed = {}
    for path in options.runs:
        data, found = _read(path, "run")
        problems += found
        if data is not None and gold is not None:
            try:
                parsed[path.stem] = kind.parse_run(data, gold, config)
            except ValidationFailed as error:
                problems += [f"{path}: {line}" for line in error.errors]
    specs = {spec.key: spec for spec in kind.measures(config, gold)} if config is not None and gold is not None else {}
    wanted = None
    if options.measures is not None:
        wanted = [key.strip() for key in options.measures.split(",") if key.strip()]
        unknown = [key for key in wanted if key not in specs] if specs else []
        if not wanted:
            problems.append("--measures names no measure key")
        if unknown:
            problems.append(f"--measures: unknown measure key(s) {', '.join(unknown)}; this task's measures: "
                            f"{', '.join(specs)}")
    if problems:
        raise Invalid(problems)
    names = list(parsed)
    scored = {name: kind.score(run, gold, config) for name, run in parsed.items()}
    # Measures every run has per-item scores for (a metrics track's whole-run correlations have none).
    keys = [key for key in specs if all(key in result.per_item for result in scored.values())]
    untestable = [key for key in (wanted or []) if key not in keys]
    if untestable:
        raise Invalid([f"--measures: {', '.join(untestable)} cannot be tested between runs (no per-item "
                        "scores: the figure is computed from the whole run)"])
    n_items = len(next(iter(scored.values())).item_ids)
    if n_items < 2:
        raise Invalid([f"{options.gold}: compare needs at least two {kind.item_noun}s"])
    matrices = {key: np.column_stack([scored[name].per_item[key] for name in names]) for key in keys}
    statistics = {key: np.stack([scored[name].statistics[key] for name in names], axis=1) for key in keys
                  if significance.is_corpus(specs[key])}
    tested = significance.measure_tests(specs, matrices, statistics, permutations=options.permutations,
                                        seed=options.seed, resamples=options.bootstrap, level=LEVEL)
    measures = {}
    for key in wanted or keys:
        spec, result = specs[key], tested[key]
        figures = {name: float(scored[name].headlines[key]) for name in names}
        top = result.tukey.top_group(alpha=options.alpha, lower_is_better=not spec.higher_is_better)
        measures[key] = {
            "headline": result.headline, "higher_is_better": spec.higher_is_better,
            "runs": {name: {"score": figures[name], "ci": [float(result.intervals.lower[j]),
                                                            float(result.intervals.upper[j])]}
                     for j, name in enumerate(names)},
            "pairs": [{"a": names[i], "b": names[j], "difference": figures[names[i]] - figures[names[j]],
                       "p": float(p)} for i, j, _, p in result.tukey.pairs()],
            "p_adjustment": TUKEY_FAMILY,
            "top_group": [names[j] for j in top],
        }
    return {"kind": kind.name, "n_items": n_items, "permutations": options.permutations,
            "bootstrap": options.bootstrap, "seed": options.seed, "alpha": options.alpha,
            "level": LEVEL, "measures": measures, **({"left_out": left_out} if left_out else {})}


def format_table(data: dict[str, Any], digits: int = 4) -> str:
    """The JSON object for people: per measure, the runs with their figure and interval (``*``:
    in the top group), then every pair's difference and p."""
    from scoring.kinds import get_kind

    noun = get_kind(data["kind"]).item_noun
    lines = [f"{data['kind']}: {data['n_items']} {noun}s; B = {data['permutations']:,} permutations, "
             f"R = {data['bootstrap']:,} bootstrap resamples, seed {data['seed']}, alpha {data['alpha']:g}"]
    for key, measure in data["measures"].items():
        direction = "higher is better" if measure["higher_is_better"] else "lower is better"
        width = max([len(name) for name in measure["runs"]] + [3]) + 2
        lines += ["", f"{key} ({measure['headline']} figure, {direction})",
                  "run".ljust(width) + "score".rjust(digits + 4) + f"   {int(data['level'] * 100)}% interval"
                  + "   top group"]
        for name, run in measure["runs"].items():
            low, high = run["ci"]
            lines.append(name.ljust(width) + f"{run['score']:.{digits}f}".rjust(digits + 4)
                         + f"   [{low:.{digits}f}, {high:.{digits}f}]"
                         + ("   *" if name in measure["top_group"] else ""))
        lines.append(f"pairs (p: {measure['p_adjustment']})")
        for pair in measure["pairs"]:
            lines.append(f"  {pair['a']} - {pair['b']}: {pair['difference']:+.{digits}f}   p = {pair['p']:.4f}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    if argv is not None and any(arg in ("-h", "--help") for arg in argv):
        build_parser().print_help(stdout)
        return 0
    try:
        with gc_paused():
            options = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
            data = compare(options)
    except Invalid as invalid:
        for line in invalid.problems:
            print(line, file=stderr)
        return EXIT_INVALID
    for line in data.get("left_out", ()):
        print(f"warning: {line}", file=stderr)
    try:
        text = (json.dumps(data, ensure_ascii=False, allow_nan=False) + "\n" if options.output_format == "json"
                else format_table(data))
    except ValueError:
        print("error: a figure, interval or p-value is not a finite number; nothing was printed (please report "
              "this with the files)", file=stderr)
        return EXIT_NOT_FINITE
    stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
