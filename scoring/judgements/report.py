"""The agreement report of a set of judgements: Krippendorff's alpha per dimension with its
bootstrap interval, and each assessor's quality (agreement with the others, time per item,
straight-lining, accuracy on check items), as the judgements specification's "Assessor quality".

``agreement_report`` returns a JSON-ready dict (no NaN: an undefined figure is None, with the
reason in ``notes``); ``format_table`` words it for a terminal. Check items (a known answer) are
left out of alpha and of agreement with the others: they are there to test assessors, and their
degraded texts would inflate agreement.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from scoring.judgements.alpha import LEVELS, alpha_with_interval
from scoring.judgements.formats import Dimension, JudgementSet, _on_scale
from scoring.validation import Problems, ValidationFailed, canonical_id, quoted

NUGGET = "nugget"
DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
CONFIDENCE = 0.95
UNDEFINED = {
    "alpha": "not defined: no item has two judgements, or every judgement is the same value",
}


def load_checks(data: object, judgements: JudgementSet) -> dict[str, dict[str, Hashable]]:
    """Check items' known answers: ``{"<item>": {"<dimension>": value, ...}, ...}`` (stc3 may add
    ``"nugget": [labels]``). Every value must be on its dimension's scale."""
    if not isinstance(data, dict) or not data:
        raise ValidationFailed(["checks: must be a non-empty JSON object {\"<item>\": {\"<dimension>\": value}}"])
    problems = Problems()
    dims = {dimension.name: dimension for dimension in judgements.dimensions}
    out: dict[str, dict[str, Hashable]] = {}
    for key, answer in data.items():
        item = canonical_id(key)
        path = f"[{quoted(key)}]"
        if item is None or (judgements.items is not None and item not in judgements.items):
            problems.add(path, f"unknown item {quoted(key)}")
            continue
        if not isinstance(answer, dict) or not answer:
            problems.add(path, "must be an object of answers by dimension")
            continue
        answers: dict[str, Hashable] = {}
        for name, value in answer.items():
            if name == NUGGET and judgements.has_nugget and isinstance(value, list):
                answers[name] = tuple(value)
            elif name not in dims:
                problems.add(f"{path}.{name}", f"unknown dimension (dimensions: {', '.join(sorted(dims))})")
            elif (point := _on_scale(value, dims[name])) is None:
                problems.add(f"{path}.{name}", f"value {quoted(value)} is off the scale")
            else:
                answers[name] = point
        out[item] = answers
    problems.raise_if_any()
    return out


def _units(judgements: JudgementSet, checks: set[str]) -> dict[str, dict[str, list]]:
    """Per dimension (and ``nugget`` per turn), the values each unit received, by assessor."""
    units: dict[str, dict[object, list]] = defaultdict(lambda: defaultdict(list))
    for judgement in judgements.judgements:
        if judgement.item in checks:
            continue
        for name, value in judgement.values.items():
            units[name][judgement.item].append((judgement.assessor, value))
        if judgement.nugget is not None:
            for turn, label in enumerate(judgement.nugget):
                units[NUGGET][judgement.item, turn].append((judgement.assessor, label))
    return units


def _dimension_alpha(by_unit: Mapping[object, list], level: str, order: Sequence | None, resamples: int,
                     seed: int) -> dict:
    values = [[value for _, value in pairs] for pairs in by_unit.values()]
    alpha, interval = alpha_with_interval(values, level, resamples=resamples, seed=seed, order=order)
    out = {"alpha": alpha, "level": level, "interval": list(interval) if interval else None,
           "n_items": len(values), "n_pairable_items": sum(len(v) >= 2 for v in values),
           "n_judgements": sum(len(v) for v in values)}
    if alpha is None:
        out["note"] = UNDEFINED["alpha"]
    return out


def _numbers(value: Hashable, dimension: Dimension | None) -> float:
    """A value as a number for Spearman and means: the number itself, or a label's rank on its scale."""
    if dimension is not None and not dimension.numeric:
        return float(dimension.scale.index(value))
    return float(value)  # type: ignore[arg-type]


class _Table:
    """One dimension's judgements as a (units x assessors) table: ``codes`` the value's index
    among ``values`` (-1 where the assessor did not judge the unit), ``numbers`` the value as a
    number (NaN where not judged; None for labels)."""

    def __init__(self, by_unit: Mapping[object, list], assessors: Sequence[str], dimension: Dimension | None) -> None:
        column = {assessor: a for a, assessor in enumerate(assessors)}
        values = list(dict.fromkeys(value for pairs in by_unit.values() for _, value in pairs))
        index = {value: v for v, value in enumerate(values)}
        self.codes = np.full((len(by_unit), len(assessors)), -1, dtype=np.int64)
        for u, pairs in enumerate(by_unit.values()):
            for assessor, value in pairs:
                self.codes[u, column[assessor]] = index[value]
        self.values = values
        numeric = dimension is not None and (dimension.numeric or dimension.level != "nominal")
        if numeric:
            as_numbers = np.array([_numbers(value, dimension) for value in values] + [np.nan])
            self.numbers: np.ndarray | None = as_numbers[self.codes]  # -1 picks the trailing NaN
        else:
            self.numbers = None


def _agreement(a: int, table: _Table, level: str) -> dict:
    """Spearman with the mean of the others (ordinal, interval), or the share of exact agreement
    with the others' majority (nominal; a tie for the majority counts as agreeing with it)."""
    judged = table.codes[:, a] >= 0
    others = (table.codes >= 0).sum(axis=1) - judged
    rows = judged & (others > 0)
    if level == "nominal" or table.numbers is None:
        codes = table.codes[rows]
        counts = np.zeros((codes.shape[0], len(table.values) + 1), dtype=np.int64)
        np.add.at(counts, (np.repeat(np.arange(codes.shape[0]), codes.shape[1]), codes.reshape(-1)), 1)
        counts = counts[:, :-1]  # column -1 counted the holes
        own = codes[:, a]
        counts[np.arange(len(own)), own] -= 1
        agree = counts[np.arange(len(own)), own] == counts.max(axis=1)
        return {"measure": "exact agreement with the others' majority",
                "value": float(agree.mean()) if len(own) else None, "n_items": int(len(own))}
    numbers = table.numbers[rows]
    own = numbers[:, a]
    rest_mean = (np.nansum(numbers, axis=1) - own) / others[rows]
    value = None
    if len(own) >= 3 and np.ptp(own) > 0 and np.ptp(rest_mean) > 0:
        # Imported here: scipy.stats takes 0.8 s to import, and every process that loads the URL
        # configuration (each web process, each management command) reaches this module.
        from scipy.stats import spearmanr

        value = float(spearmanr(own, rest_mean).statistic)
    return {"measure": "Spearman with the mean of the others", "value": value, "n_items": int(len(own))}


def agreement_report(judgements: JudgementSet, level: str | None = None, resamples: int = DEFAULT_RESAMPLES,
                     seed: int = DEFAULT_SEED, checks: Mapping[str, Mapping[str, Hashable]] | None = None) -> dict:
    """Alpha per dimension and each assessor's quality.

    ``level`` overrides the dimensions' own (A, E, S and Likert scales are ordinal by default;
    nugget labels are always nominal); interval needs numeric scales. ``resamples`` and ``seed``
    make the bootstrap intervals (said in ``bootstrap``). ``checks``: known answers of check items
    (``load_checks``); items marked ``"check": true`` are check items too (left out of alpha,
    accuracy only where an answer is known).
    """
    if level is not None and level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}; got {level!r}")
    checks = dict(checks or {})
    excluded = set(checks) | judgements.check_items
    dims = {dimension.name: dimension for dimension in judgements.dimensions}
    if level == "interval":
        labelled = [name for name, dimension in dims.items() if not dimension.numeric]
        if labelled:
            raise ValueError(f"the interval level needs numbers, but {', '.join(labelled)} has labels")
    units = _units(judgements, excluded)
    dimensions: dict[str, dict] = {}
    levels: dict[str, str] = {}
    for name, dimension in dims.items():
        levels[name] = level or dimension.level
        order = dimension.scale if levels[name] != "nominal" or not dimension.numeric else None
        dimensions[name] = _dimension_alpha(units.get(name, {}), levels[name], order, resamples, seed)
    if judgements.has_nugget:
        levels[NUGGET] = "nominal"
        dimensions[NUGGET] = _dimension_alpha(units.get(NUGGET, {}), "nominal", None, resamples, seed)
        dimensions[NUGGET]["unit"] = "turn"
    names = judgements.assessors()
    tables = {name: _Table(units.get(name, {}), names, dims.get(name)) for name in levels}
    by_assessor: dict[str, list] = defaultdict(list)
    for judgement in judgements.judgements:
        by_assessor[judgement.assessor].append(judgement)
    assessors = {assessor: _assessor(a, by_assessor[assessor], tables, levels, checks)
                 for a, assessor in enumerate(names)}
    items = {judgement.item for judgement in judgements.judgements}
    return {
        "kind": judgements.kind,
        "n_judgements": len(judgements.judgements),
        "n_items": len(items - excluded),
        "n_check_items": len(items & excluded),
        "n_assessors": len(assessors),
        "bootstrap": {"resamples": resamples, "seed": seed, "confidence": CONFIDENCE,
                      "method": "percentile bootstrap over items"},
        "dimensions": dimensions,
        "assessors": assessors,
    }


def _assessor(a: int, mine: list, tables: Mapping[str, _Table],
              levels: Mapping[str, str], checks: Mapping[str, Mapping]) -> dict:
    seconds = [judgement.seconds for judgement in mine if judgement.seconds is not None]
    straight: dict[str, float] = {}
    for name in levels:
        if name == NUGGET:
            values = [label for judgement in mine if judgement.nugget for label in judgement.nugget]
        else:
            values = [judgement.values[name] for judgement in mine if name in judgement.values]
        if values:
            straight[name] = Counter(values).most_common(1)[0][1] / len(values)
    right = total = 0
    for judgement in mine:
        for name, answer in checks.get(judgement.item, {}).items():
            given = judgement.nugget if name == NUGGET else judgement.values.get(name)
            total += 1
            right += given == answer
    return {
        "n_judgements": len(mine),
        "agreement": {name: _agreement(a, tables[name], levels[name]) for name in levels},
        "median_seconds": statistics.median(seconds) if seconds else None,
        "straight_lining": straight,
        "check_accuracy": right / total if total else None,
        "n_check_answers": total,
    }


def _figure(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def format_table(report: Mapping) -> str:
    """The report for a terminal: one line per dimension, then one per assessor."""
    boot = report["bootstrap"]
    lines = [f"{report['n_judgements']} judgements of {report['n_items']} items by {report['n_assessors']} assessors"
             + (f" ({report['n_check_items']} check items left out of alpha)" if report["n_check_items"] else ""),
             "",
             f"{'dimension':<16} {'level':<9} {'alpha':>7}  {'95% interval':<17} {'items':>7} {'judgements':>10}"]
    for name, row in report["dimensions"].items():
        interval = row["interval"]
        shown = f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "n/a"
        lines.append(f"{name:<16} {row['level']:<9} {_figure(row['alpha']):>7}  {shown:<17} {row['n_items']:>7} "
                     f"{row['n_judgements']:>10}")
    lines += [f"Krippendorff's alpha: 1 is perfect agreement, 0 what chance gives; interval: percentile bootstrap "
              f"over items, {boot['resamples']} resamples, seed {boot['seed']}."]
    if "nugget" in report["dimensions"]:
        lines.append("nugget: the items are turns, each labelled by every assessor of its dialogue.")
    lines.append("")
    names = list(report["dimensions"])
    widths = {name: max(12, len(name) + 6) for name in names}
    lines.append(f"{'assessor':<16} {'judged':>6} {'median s':>8}  {'check acc':>9}  "
                 + "  ".join(f"{'agree ' + name:>{widths[name]}} {'same ' + name:>{widths[name]}}" for name in names))
    for assessor, row in report["assessors"].items():
        cells = "  ".join(f"{_figure(row['agreement'][name]['value']):>{widths[name]}} "
                          f"{_figure(row['straight_lining'].get(name)):>{widths[name]}}" for name in names)
        lines.append(f"{assessor:<16} {row['n_judgements']:>6} {_figure(row['median_seconds'], 1):>8}  "
                     f"{_figure(row['check_accuracy']):>9}  {cells}")
    lines.append("agree: Spearman with the mean of the other assessors (scales) or share agreeing with their "
                 "majority (labels); same: share of the assessor's judgements that are one value (straight-lining).")
    return "\n".join(lines) + "\n"
