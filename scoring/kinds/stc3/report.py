"""Plain-text rendering of a DQ/ND result for people (``score --format table``)."""

from __future__ import annotations

from scoring.kinds.stc3.evaluate import Result
from scoring.kinds.stc3.measures import MEASURES


def format_table(result: Result, digits: int = 4) -> str:
    lines = [f"dialogues: {result.n_dialogues}   variant: {result.variant}   alpha: {result.alpha:g}   "
             f"averaging: {result.averaging}   (every measure: lower is better)"]
    if result.n_missing:
        lines.append(f"note: {result.n_missing} gold dialogue(s) missing from the run were left out")
    width = digits + 4
    if result.quality_means:
        measures = list(next(iter(result.quality_means.values())))
        lines += ["", "Dialogue quality (DQ)",
                  "dimension".ljust(10) + "".join(name.upper().rjust(width) for name in measures)]
        for dim, means in result.quality_means.items():
            lines.append(dim.ljust(10) + "".join(f"{means[name]:.{digits}f}".rjust(width) for name in measures))
    if result.nugget_means:
        measures = list(result.nugget_means)
        lines += ["", f"Nugget detection (ND), {result.averaging} average, alpha {result.alpha:g}",
                  " " * 10 + "".join(name.upper().rjust(width) for name in measures),
                  "".ljust(10) + "".join(f"{result.nugget_means[name]:.{digits}f}".rjust(width) for name in measures)]
    lines += ["", "Measures: " + "; ".join(f"{name.upper()} = {MEASURES[name].title}" for name in _used(result))]
    return "\n".join(lines) + "\n"


def _used(result: Result) -> list[str]:
    names: list[str] = []
    for means in (result.quality_means or {}).values():
        names += [name for name in means if name not in names]
    names += [name for name in (result.nugget_means or {}) if name not in names]
    return names
