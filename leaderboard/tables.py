"""The leaderboard table as HTML, built in Python.

A board of 500 runs has 9,000 score cells; rendering them through the template language (a
``{% with %}``, two filter calls and a ``floatformat`` each) took about a second of CPU per
page view. Here every cell is one f-string with the participant's text escaped, about 100 times
faster; the result is cached with the board (see ``leaderboard.views.task_page``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from leaderboard.board import Column

TOP_MARK_TITLE = "not significantly different from the best run (randomised Tukey HSD, p ≥ 0.05)"


def sort_link(phase_name: str | None, subtask: str, key: str) -> str:
    params = {"phase": phase_name, "tab": subtask, "sort": key}
    return "?" + urlencode({name: value for name, value in params.items() if value})


def board_table(rows: list[dict[str, Any]], columns: list[Column], dimensions: list[str], sort_key: str,
                subtask: str, phase_name: str | None, top_group: Iterable[int]) -> SafeString:
    """``<table>`` of the rows in their given order: rank on the sorted measure, team, run, and per
    column the value with its rank per measure (ties share a rank)."""
    top = set(top_group)
    parts = ['<table class="board" id="board"><thead>']
    if dimensions:
        groups = "".join(f'<th colspan="{sum(1 for c in columns if c.dimension == dim)}" class="group">'
                         f"{escape(dim)}</th>" for dim in dimensions)
        parts.append(f'<tr><th colspan="3"></th>{groups}</tr>')
    parts.append("<tr><th>Rank</th><th>Team</th><th>Run</th>")
    for column in columns:
        sorted_class = " sorted" if column.key == sort_key else ""
        arrow = " ▲" if column.key == sort_key else ""
        parts.append(f'<th class="num{sorted_class}" title="{escape(column.long_title)}">'
                     f'<a href="{escape(sort_link(phase_name, subtask, column.key))}">{escape(column.title)}{arrow}'
                     f"</a></th>")
    parts.append("</tr></thead><tbody>")
    mark = f' <span class="top" title="{escape(TOP_MARK_TITLE)}">●</span>'
    for row in rows:
        ranks, values = row["ranks"], row["values"]
        rank = ranks.get(sort_key)
        tags = ""
        if row["is_baseline"]:
            tags += ' <span class="tag">baseline</span>'
        if not row["is_public"]:
            tags += ' <span class="tag">hidden</span>'
        priority = f' <span class="tag">#{row["priority"]}</span>' if row["priority"] else ""
        row_class = ' class="baseline"' if row["is_baseline"] else ""
        parts.append(
            f'<tr{row_class} data-run="{row["id"]}">'
            f'<td class="num">{"" if rank is None else rank}{mark if row["id"] in top else ""}</td>'
            f"<td>{escape(row['team'])}{tags}</td>"
            f'<td><span title="{escape(row["description"])}">{escape(row["name"])}</span>{priority}</td>')
        for column in columns:
            value = values.get(column.key)
            sorted_class = " sorted" if column.key == sort_key else ""
            cell = "–" if value is None else f"{value:.4f}<sub>{ranks.get(column.key)}</sub>"
            parts.append(f'<td class="num{sorted_class}">{cell}</td>')
        parts.append("</tr>")
    parts.append("</tbody></table>")
    return mark_safe("".join(parts))  # noqa: S308 - every piece of participant text above went through escape()
