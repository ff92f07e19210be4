"""Drawing of stored numbers: the geometry of the SVG charts of the leaderboard pages.

Nothing here computes a statistic: each function places numbers it is given (stored means and
intervals, Kendall's tau, p-values, per-item scores) on a canvas for a template under
``templates/leaderboard/charts/``. The functions take plain labels, matrices and curves, not
boards or records, so every page (the statistics of a board, a metrics-track page, a run
comparison) draws with the same code; no JavaScript is involved.

Colours are readable with the common colour-vision deficiencies: series use the Okabe-Ito
palette (Okabe and Ito, "Color Universal Design", 2008) with a dash pattern each, so two series
never differ by hue alone; the heat map uses ColorBrewer's PuOr diverging scheme (marked safe for
colour-blind readers), with every value also written in its cell and in a table.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from scoring.kinds import MeasureSpec

# Room left and right of the intervals, as a share of their span, so no mark sits on the frame.
_MARGIN = 0.05

# A chart shrinks with a narrow column (a phone) down to this share of its width, where its 11 px
# labels are still about 8 px; below that it scrolls sideways instead.
MIN_SCALE = 0.72

# Okabe-Ito without its yellow, which is too light on white; black last.
SERIES_COLOURS: tuple[str, ...] = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000")
# Dash patterns (SVG stroke-dasharray) cycled with the colours: series 1-7 solid, 8-14 dashed, ...
SERIES_DASHES: tuple[str, ...] = ("", "6 3", "2 3", "8 3 2 3")
# ColorBrewer PuOr, 9 classes: orange for negative, white at the middle, purple for positive.
DIVERGING: tuple[str, ...] = ("#b35806", "#e08214", "#fdb863", "#fee0b6", "#f7f7f7", "#d8daeb", "#b2abd2",
                              "#8073ac", "#542788")
MISSING_FILL = "#d9d9d9"


def series_style(index: int) -> dict[str, str]:
    """Colour and dash pattern of the ``index``-th series of a chart (never two alike below 28)."""
    return {"colour": SERIES_COLOURS[index % len(SERIES_COLOURS)],
            "dash": SERIES_DASHES[(index // len(SERIES_COLOURS)) % len(SERIES_DASHES)]}


def text_width(text: str, size: float = 11.0) -> float:
    """Roughly how wide ``text`` is in a sans-serif font of ``size`` px (wide CJK characters count
    one em): enough to leave room for labels without a browser to measure them."""
    return sum(size if unicodedata.east_asian_width(char) in "WF" else 0.6 * size for char in text)


def _hex(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def diverging_colour(value: float, low: float, high: float) -> str:
    """The PuOr colour of ``value`` on the scale from ``low`` (orange) to ``high`` (purple),
    linearly between the scheme's nine classes; values outside the scale take its ends."""
    if not high > low:
        raise ValueError(f"the colour scale needs low < high; got {low} and {high}")
    share = min(1.0, max(0.0, (value - low) / (high - low))) * (len(DIVERGING) - 1)
    below = min(int(share), len(DIVERGING) - 2)
    weight = share - below
    start, end = _hex(DIVERGING[below]), _hex(DIVERGING[below + 1])
    red, green, blue = (round(a + (b - a) * weight) for a, b in zip(start, end, strict=True))
    return f"#{red:02x}{green:02x}{blue:02x}"


def ink_for(fill: str) -> str:
    """Black or white text, whichever contrasts more with ``fill`` (WCAG contrast ratio; one of
    the two always reaches 4.58:1, above the 4.5:1 small text needs)."""
    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    red, green, blue = (linear(channel) for channel in _hex(fill))
    luminance = 0.2126 * red + 0.7152 * green + 0.0722 * blue
    on_white, on_black = 1.05 / (luminance + 0.05), (luminance + 0.05) / 0.05
    return "#ffffff" if on_white > on_black else "#000000"


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values from ``low`` to ``high`` (both ends within)."""
    if high <= low:
        return [low]
    raw = (high - low) / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(magnitude * factor for factor in (1, 2, 2.5, 5, 10) if magnitude * factor >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks = []
    value = first
    while value <= high + 1e-9 * step:
        ticks.append(round(value, 12) + 0.0)
        value += step
    return ticks


def _tick_label(value: float, ticks: Sequence[float]) -> str:
    """A tick value with as many decimals as the step between ticks needs (0.25 steps: two)."""
    step = abs(ticks[1] - ticks[0]) if len(ticks) > 1 else 1.0
    exponent = math.floor(math.log10(step) + 1e-9)
    digits = max(0, -exponent) + (1 if round(step / 10 ** exponent, 6) == 2.5 else 0)
    return f"{value:.{digits}f}"


# Heat map -----------------------------------------------------------------------------------------

def heat_map(row_labels: Sequence[str], column_labels: Sequence[str], values: Sequence[Sequence[float | None]],
             *, row_titles: Sequence[str] | None = None, column_titles: Sequence[str] | None = None,
             notes: Sequence[Sequence[str]] | None = None, value_range: tuple[float, float] = (-1.0, 1.0),
             what: str = "value", digits: int = 2, cell: int = 34) -> dict[str, Any]:
    """Geometry of a heat map of ``values`` (rows x columns; None where undefined), coloured on the
    diverging scale of ``value_range`` and with every value written in its cell.

    ``row_titles``/``column_titles`` are the long names hover text gives (default: the labels);
    ``notes[i][j]`` adds to a cell's hover text (an interval, say); ``what`` names the value there
    ("Kendall's tau"). The template also renders the values as a table, for screen readers.
    """
    n_rows, n_columns = len(row_labels), len(column_labels)
    if len(values) != n_rows or any(len(row) != n_columns for row in values):
        raise ValueError(f"values must be {n_rows} x {n_columns} to match the labels")
    row_titles = list(row_titles or row_labels)
    column_titles = list(column_titles or column_labels)
    if len(row_titles) != n_rows or len(column_titles) != n_columns:
        raise ValueError("one title per row and one per column")
    low, high = value_range
    font = 11.0
    left = round(max((text_width(label, font) for label in row_labels), default=0) + 10)
    # Column labels are turned 45 degrees: they need their width times sin 45 above the cells,
    # and as much again on the right for the last one.
    slant = max((text_width(label, font) for label in column_labels), default=0) * math.sqrt(0.5)
    top = round(slant + 14)
    cells = []
    for i, row in enumerate(values):
        for j, value in enumerate(row):
            fill = MISSING_FILL if value is None else diverging_colour(value, low, high)
            shown = "n/a" if value is None else f"{value:.{digits}f}"
            note = notes[i][j] if notes is not None and notes[i][j] else ""
            hover = f"{row_titles[i]} and {column_titles[j]}: {what} " + (
                "undefined" if value is None else f"= {value:.3f}") + (f"; {note}" if note else "")
            cells.append({"x": left + j * cell, "y": top + i * cell, "cx": left + j * cell + cell / 2,
                          "cy": top + i * cell + cell / 2 + 4, "fill": fill, "ink": ink_for(fill),
                          "text": shown.replace("-", "−"), "title": hover, "value": value, "row": i, "column": j})
    grid_bottom = top + n_rows * cell
    legend_width = min(260, max(160, n_columns * cell))
    steps = 24
    legend = [{"x": left + round(k * legend_width / steps), "width": math.ceil(legend_width / steps) + 1,
               "fill": diverging_colour(low + (high - low) * (k + 0.5) / steps, low, high)} for k in range(steps)]
    legend_ticks = [{"x": left + round((tick - low) / (high - low) * legend_width), "label": f"{tick:g}".replace(
        "-", "−")} for tick in _ticks(low, high, 5)]
    width = left + max(n_columns * cell + round(slant) + 4, legend_width + 20)
    return {
        "rows": [{"label": label, "title": title, "y": top + i * cell + cell / 2 + 4}
                 for i, (label, title) in enumerate(zip(row_labels, row_titles, strict=True))],
        "columns": [{"label": label, "title": title, "x": left + j * cell + cell / 2, "y": top - 6}
                    for j, (label, title) in enumerate(zip(column_labels, column_titles, strict=True))],
        "cells": cells, "cell": cell, "half": cell / 2, "left": left, "top": top,
        "table": [{"label": label, "title": title, "cells": [c for c in cells if c["row"] == i]}
                  for i, (label, title) in enumerate(zip(row_labels, row_titles, strict=True))],
        "column_labels": list(column_labels),
        "legend": legend, "legend_ticks": legend_ticks, "legend_y": grid_bottom + 14,
        "legend_width": legend_width, "width": width, "min_width": round(width * MIN_SCALE),
        "height": grid_bottom + 48, "what": what,
        "low": low, "high": high,
    }


# Line charts: ASL curves, sorted differences ----------------------------------------------------------

def thinned(n: int, max_points: int) -> np.ndarray:
    """Indices of at most ``max_points`` of ``n`` points of a sorted curve, evenly spread and always
    with the first and the last: a curve of 100,000 run pairs drawn with 400 of its own points."""
    if n <= max_points:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, max_points).round().astype(np.int64))


def line_chart(curves: Sequence[tuple[str, Sequence[float]]], *, y_range: tuple[float, float], x_label: str,
               y_label: str, references: Sequence[tuple[float, str]] = (), max_points: int = 400,
               width: int = 480, height: int = 280, titles: Sequence[str] | None = None) -> dict[str, Any]:
    """Geometry of curves drawn over their positions (point k of a curve of n at x = k / (n - 1) of
    the axis, so curves of different lengths share it), each with a colour and a dash pattern
    (``series_style``); ``references`` are horizontal lines (value, label): significance levels,
    zero. Long curves are drawn through ``thinned`` points, each an exact point of the curve."""
    low, high = y_range
    if not high > low:
        raise ValueError(f"y_range must have low < high; got {y_range}")
    left, right, top, bottom = 52, width - 12, 12, height - 40
    lengths = {len(values) for _, values in curves}

    def y(value: float) -> float:
        return round(bottom - (min(high, max(low, value)) - low) / (high - low) * (bottom - top), 2)

    drawn = []
    for index, (label, values) in enumerate(curves):
        array = np.asarray(values, dtype=np.float64)
        if array.size == 0:
            continue
        keep = thinned(array.size, max_points)
        span = max(array.size - 1, 1)
        points = " ".join(f"{round(left + k / span * (right - left), 2)},{y(array[k])}" for k in keep.tolist())
        drawn.append({"label": label, "title": (titles[index] if titles else label), "points": points,
                      "n": int(array.size), "single": array.size == 1,
                      "x0": left, "y0": y(array[0]), **series_style(index)})
    y_ticks = [{"y": y(tick), "label": _tick_label(tick, _ticks(low, high))} for tick in _ticks(low, high)]
    if len(lengths) == 1:
        n = lengths.pop()
        x_ticks = [{"x": round(left + (tick - 1) / max(n - 1, 1) * (right - left), 2), "label": f"{int(tick):,}"}
                   for tick in _ticks(1, n) if float(tick).is_integer() and 1 <= tick <= n]
    else:
        x_ticks = [{"x": round(left + share * (right - left), 2), "label": f"{share:.0%}"}
                   for share in (0, 0.25, 0.5, 0.75, 1)]
    return {"curves": drawn, "left": left, "right": right, "top": top, "bottom": bottom, "width": width,
            "min_width": round(width * MIN_SCALE),
            "height": height, "x_label": x_label, "y_label": y_label, "x_ticks": x_ticks, "y_ticks": y_ticks,
            "references": [{"y": y(value), "label": label} for value, label in references if low <= value <= high],
            "x_mid": (left + right) / 2, "y_mid": (top + bottom) / 2}


def asl_chart(curves: Sequence[tuple[str, Sequence[float]]], *, levels: Sequence[float] = (0.05, 0.01),
              titles: Sequence[str] | None = None, max_points: int = 400) -> dict[str, Any]:
    """ASL curves (seed 003 Figure 5): each measure's p-values of every run pair, smallest first
    (``scoring.stats.asl_curve``), over the pairs; the significance levels as reference lines."""
    pairs = {len(values) for _, values in curves}
    what = f"run pairs sorted by p-value ({pairs.pop():,} pairs)" if len(pairs) == 1 else "run pairs sorted by p-value"
    return line_chart(curves, y_range=(0.0, 1.0), x_label=what, y_label="p-value (ASL)", titles=titles,
                      references=[(level, f"p = {level:g}") for level in levels], max_points=max_points)


# Bars: discriminative power ------------------------------------------------------------------------

def bar_chart(labels: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]], *,
              value_range: tuple[float, float] = (0.0, 1.0), titles: Sequence[str] | None = None,
              percent: bool = True, width: int = 460) -> dict[str, Any]:
    """Horizontal grouped bars: per label one bar of each series (value written at its end; None
    drawn as no bar and written "n/a")."""
    low, high = value_range
    if not high > low:
        raise ValueError(f"value_range must have low < high; got {value_range}")
    if any(len(values) != len(labels) for _, values in series):
        raise ValueError("every series needs one value per label")
    font = 11.0
    left = round(max((text_width(label, font) for label in labels), default=0) + 12)
    right = width - 56
    bar, gap = 11, 9
    group = bar * len(series) + gap
    groups = []
    for i, label in enumerate(labels):
        top = 8 + i * group
        bars = []
        for s, (name, values) in enumerate(series):
            value = values[i]
            end = left if value is None else left + (min(high, max(low, value)) - low) / (high - low) * (right - left)
            text = "n/a" if value is None else (f"{value:.1%}" if percent else f"{value:.3f}")
            bars.append({"y": top + s * bar, "x": left, "width": round(end - left, 2), "end": round(end + 4, 2),
                         "text": text, "series": name, "value": value, **series_style(s)})
        groups.append({"label": label, "title": titles[i] if titles else label, "y": top + bar * len(series) / 2 + 4,
                       "bars": bars})
    axis_y = 8 + len(labels) * group
    ticks = [{"x": round(left + (tick - low) / (high - low) * (right - left), 2),
              "label": f"{tick:.0%}" if percent else f"{tick:g}"} for tick in _ticks(low, high)]
    return {"groups": groups, "left": left, "right": right, "axis_y": axis_y, "ticks": ticks, "width": width,
            "min_width": round(width * MIN_SCALE),
            "height": axis_y + 24, "bar": bar - 2,
            "legend": [{"name": name, **series_style(s)} for s, (name, _) in enumerate(series)]}


# Scatter: two runs item by item ------------------------------------------------------------------

def scatter(x: Sequence[float], y: Sequence[float], *, labels: Sequence[str], categories: Sequence[int],
            category_names: Sequence[str], x_label: str, y_label: str,
            value_range: tuple[float, float] | None = None, size: int = 360) -> dict[str, Any]:
    """A square scatter of paired values (one point per item, the same scale on both axes, the
    diagonal y = x drawn); ``categories[k]`` indexes ``category_names`` and picks the point's
    colour and shape (circle, square, triangle), so categories never differ by colour alone."""
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape or len(labels) != xs.size or len(categories) != xs.size:
        raise ValueError("x, y, labels and categories must have one entry per item")
    if value_range is None:
        both = np.concatenate([xs, ys]) if xs.size else np.array([0.0, 1.0])
        value_range = (float(both.min()), float(both.max()))
    low, high = value_range
    if high <= low:
        low, high = low - 0.5, high + 0.5
    pad = (high - low) * 0.03
    low, high = low - pad, high + pad
    left, top = 56, 10
    inner = size - left - 40

    def at(value: float) -> float:
        return (value - low) / (high - low) * inner

    shapes = ("circle", "square", "triangle")
    points = []
    for k in range(xs.size):
        px, py = round(left + at(xs[k]), 2), round(top + inner - at(ys[k]), 2)
        category = int(categories[k])
        points.append({"x": px, "y": py, "corner_x": round(px - 3, 2), "corner_y": round(py - 3, 2),
                       "shape": shapes[category % len(shapes)],
                       "colour": SERIES_COLOURS[category % len(SERIES_COLOURS)], "category": category,
                       "title": f"{labels[k]}: {x_label} {xs[k]:.4f}, {y_label} {ys[k]:.4f}",
                       "tri": f"{px},{py - 3.6} {px - 3.2},{py + 2.4} {px + 3.2},{py + 2.4}"})
    ticks = [{"at": round(at(tick), 2), "label": _tick_label(tick, _ticks(low, high))} for tick in _ticks(low, high)]
    return {"points": points, "left": left, "top": top, "inner": inner, "right": left + inner,
            "bottom": top + inner, "width": left + inner + 12, "min_width": round((left + inner + 12) * MIN_SCALE),
            "height": top + inner + 44,
            "ticks": [{**tick, "x": round(left + tick["at"], 2), "y": round(top + inner - tick["at"], 2)}
                      for tick in ticks],
            "x_label": x_label, "y_label": y_label, "x_mid": left + inner / 2, "y_mid": top + inner / 2,
            "legend": [{"name": name, "shape": shapes[c % len(shapes)], "colour": SERIES_COLOURS[c % len(
                SERIES_COLOURS)], "count": int(sum(1 for value in categories if value == c))}
                for c, name in enumerate(category_names)]}


# A phone's column is about 360 px: the wide chart (labels left of a 530 px plot) shrank there to
# 7 px labels or scrolled its baselines out of sight. The narrow one puts each label above its
# interval and spans the whole width, drawn at 1:1 on a phone (CSS shows one of the two).
NARROW_WIDTH, NARROW_STEP = 360, 34


def _narrow_intervals(bars: list[dict[str, Any]], low: float, high: float) -> dict[str, Any]:
    left, right = 10, NARROW_WIDTH - 14

    def x(value: float) -> int:
        return round(left + (value - low) / (high - low) * (right - left))

    rows = [{**bar, "label_y": 14 + n * NARROW_STEP, "y": 26 + n * NARROW_STEP, "low": x(bar["value_low"]),
             "high": x(bar["value_high"]), "mean": x(bar["value"])} for n, bar in enumerate(bars)]
    axis_y = 14 + len(bars) * NARROW_STEP
    # Three ticks: six labels of 5 characters do not fit 336 px at a readable size.
    ticks = [{"x": x(value), "label": f"{value:.3f}", "anchor": anchor}
             for value, anchor in ((low, "start"), ((low + high) / 2, "middle"), (high, "end"))]
    return {"bars": rows, "ticks": ticks, "left": left, "right": right, "axis_y": axis_y, "width": NARROW_WIDTH,
            "height": axis_y + 22}


# Intervals on the task page -------------------------------------------------------------------------
def interval_chart(entry: dict[str, Any] | None, rows: list[dict[str, Any]],
                   column: MeasureSpec, labels: Mapping[int, str]) -> dict[str, Any] | None:
    """Geometry of an SVG interval chart (mean and 95% interval per run, in the table's order)
    from a measure's stored summary (``leaderboard.statistics.measure_summary``); None without one.
    ``labels``: the board's run labels (``Board.labels``)."""
    if entry is None:
        return None
    where = {run_id: i for i, run_id in enumerate(entry["run_ids"])}
    shown = [row for row in rows if row["id"] in where]
    if not shown:
        return None
    low = min(entry["ci_low"][where[row["id"]]] for row in shown)
    high = max(entry["ci_high"][where[row["id"]]] for row in shown)
    span = (high - low) or 1.0
    # The margin never reaches past the measure's range (no axis below 0 for a distance).
    low = max(column.value_range[0], low - _MARGIN * span)
    high = min(column.value_range[1], high + _MARGIN * span)
    if high <= low:
        low, high = low - 0.5, high + 0.5
    left, right, step = 230, 760, 18
    top_group = set(entry["top_group"])

    def x(value: float) -> int:
        return round(left + (value - low) / (high - low) * (right - left))

    bars = []
    for number, row in enumerate(shown):
        i = where[row["id"]]
        bars.append({"label": labels[row["id"]], "y": 14 + number * step,
                     "low": x(entry["ci_low"][i]), "high": x(entry["ci_high"][i]), "mean": x(entry["means"][i]),
                     "value": entry["means"][i], "value_low": entry["ci_low"][i], "value_high": entry["ci_high"][i],
                     "top": row["id"] in top_group, "baseline": row["is_baseline"]})
    axis_y = 14 + len(shown) * step
    ticks = [{"x": x(value), "label": f"{value:.3f}"} for value in np.linspace(low, high, 6)]
    return {"key": column.key, "title": column.title, "bars": bars, "ticks": ticks, "left": left, "right": right,
            "axis_y": axis_y, "width": right + 30, "min_width": round((right + 30) * MIN_SCALE), "height": axis_y + 24,
            "narrow": _narrow_intervals(bars, low, high),
            # When and over which runs the statistics were computed, and how the intervals were drawn.
            "computed_at": entry.get("computed_at"), "n_runs": len(entry["run_ids"]),
            # How many of the runs the table shows now the statistics cover.
            "n_shown": len(shown), "n_rows": len(rows),
            "bootstrap": entry.get("bootstrap"), "alpha": entry.get("alpha"),
            # Which figure the points and intervals are about: "corpus" (the corpus figure, as the
            # table shows it) or "mean" (statistics stored before issue 26 say nothing: mean).
            "headline": entry.get("headline", "mean"),
            "higher_is_better": column.higher_is_better}
