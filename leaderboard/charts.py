"""Drawing of stored statistics: the geometry of the SVG interval chart on a task page.

Nothing here computes a statistic: it places the numbers ``leaderboard.statistics`` stored
(means, bootstrap intervals, top group) on a canvas for ``leaderboard/interval_chart.html``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scoring.kinds import MeasureSpec

# Room left and right of the intervals, as a share of their span, so no mark sits on the frame.
_MARGIN = 0.05


def interval_chart(entry: dict[str, Any] | None, rows: list[dict[str, Any]],
                   column: MeasureSpec) -> dict[str, Any] | None:
    """Geometry of an SVG interval chart (mean and 95% interval per run, in the table's order)
    from a measure's stored summary (``leaderboard.statistics.measure_summary``); None without one."""
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
        bars.append({"label": f"{row['team']} / {row['name']}", "y": 14 + number * step,
                     "low": x(entry["ci_low"][i]), "high": x(entry["ci_high"][i]), "mean": x(entry["means"][i]),
                     "value": entry["means"][i], "value_low": entry["ci_low"][i], "value_high": entry["ci_high"][i],
                     "top": row["id"] in top_group, "baseline": row["is_baseline"]})
    axis_y = 14 + len(shown) * step
    ticks = [{"x": x(value), "label": f"{value:.3f}"} for value in np.linspace(low, high, 6)]
    return {"key": column.key, "title": column.title, "bars": bars, "ticks": ticks, "left": left, "right": right,
            "axis_y": axis_y, "width": right + 30, "height": axis_y + 24,
            # When and over which runs the statistics were computed, and how the intervals were drawn.
            "computed_at": entry.get("computed_at"), "n_runs": len(entry["run_ids"]),
            # How many of the runs the table shows now the statistics cover.
            "n_shown": len(shown), "n_rows": len(rows),
            "bootstrap": entry.get("bootstrap"), "alpha": entry.get("alpha"),
            "higher_is_better": column.higher_is_better}
