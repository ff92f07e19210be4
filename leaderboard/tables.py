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

from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from scoring.kinds import MeasureSpec
from tasks.late import LATE_TITLE

# p-value cells get darker below each of these bounds (the last one only shades "close to").
SHADE_BOUNDS: tuple[float, ...] = (0.01, 0.05, 0.1)
_SHADES = (("#1f5fbf", "#fff"), ("#7aa6e6", "inherit"), ("#d6e4f8", "inherit"))


def top_mark_title(alpha: float) -> str:
    """What the top-group mark means, at the significance level the statistics were computed at."""
    return f"not significantly different from the best run (randomised Tukey HSD, p ≥ {alpha:g})"


def sort_link(phase_name: str | None, group: str, key: str, show: str = "") -> str:
    params = {"phase": phase_name, "tab": group, "sort": key, "show": show}
    return "?" + urlencode({name: value for name, value in params.items() if value})


def column_heading(column: MeasureSpec) -> str:
    """The tooltip of a column: what the measure is, which way is better, where it comes from."""
    official = "official measure; " if column.official else ""
    return f"{column.title}: {official}{column.direction}. {column.citation}"


def board_table(rows: list[dict[str, Any]], columns: list[MeasureSpec], sort_key: str, group: str,
                phase_name: str | None, top_group: Iterable[int], alpha: float | None = None,
                show: str = "") -> SafeString:
    """``<table>`` of the rows in their given order: rank on the sorted measure, team, run, and per
    column the value with its rank per measure (ties share a rank; ranks follow each measure's
    direction); the runs of ``top_group`` are marked as not significantly different from the
    best at ``alpha``, the level their statistics stored (needed whenever ``top_group`` is not
    empty). Measures with subgroups (DQ's dimensions) get a heading row of subgroups."""
    top = set(top_group)
    if top and alpha is None:
        raise ValueError("a top group needs the significance level it was drawn at")
    parts = ['<table class="board" id="board"><thead>']
    if any(column.subgroup for column in columns):
        spans: list[list[Any]] = []
        for column in columns:
            if spans and spans[-1][0] == column.subgroup:
                spans[-1][2] += 1
            else:
                spans.append([column.subgroup, column.subgroup_title, 1])
        heads = "".join(f'<th colspan="{span}" class="group" title="{escape(title)}">{escape(name)}'
                        f'{f" <small>{escape(title)}</small>" if title and title != name else ""}</th>'
                        for name, title, span in spans)
        parts.append(f'<tr><th class="rank"></th><th class="team"></th><th class="run"></th>{heads}</tr>')
    # On a phone the team column is hidden and its name shown under the run's (site.css), and the
    # rank and run columns stay in view while the scores scroll sideways.
    parts.append('<tr><th class="rank">Rank</th><th class="team">Team</th><th class="run">Run</th>')
    for column in columns:
        sorted_class = " sorted" if column.key == sort_key else ""
        arrow = (" ▼" if column.higher_is_better else " ▲") if column.key == sort_key else ""
        title = column.short_title if column.subgroup else column.column_title
        parts.append(f'<th class="num{sorted_class}" title="{escape(column_heading(column))}">'
                     f'<a href="{escape(sort_link(phase_name, group, column.key, show))}">{escape(title)}{arrow}'
                     f"</a></th>")
    parts.append("</tr></thead><tbody>")
    mark = f' <span class="top" title="{escape(top_mark_title(alpha))}">●</span>' if top else ""
    run_url = _run_url_parts()
    for row in rows:
        ranks, values = row["ranks"], row["values"]
        rank = ranks.get(sort_key)
        tags = ""
        if row["is_baseline"]:
            tags += ' <span class="tag">baseline</span>'
        if not row["is_public"]:
            tags += ' <span class="tag">hidden</span>'
        priority = f' <span class="tag">#{row["priority"]}</span>' if row["priority"] else ""
        if row.get("late"):
            priority += f' <span class="tag late" title="{LATE_TITLE}">late</span>'

        row_class = ' class="baseline"' if row["is_baseline"] else ""
        # Shown under the run's name where the team column is hidden (a phone; CSS content, so
        # the cell's text stays the run's name).
        team_note = row["team"] if row["is_baseline"] else row["team"] + ("" if row["is_public"] else " · hidden")
        parts.append(
            f'<tr{row_class} data-run="{row["id"]}">'
            f'<td class="num rank">{"" if rank is None else rank}{mark if row["id"] in top else ""}</td>'
            f"<td class=\"team\">{escape(row['team'])}{tags}</td>"
            f'<td class="run" data-team="{escape(team_note)}">{_run_name(row, run_url)}{priority}</td>')
        for column in columns:
            value = values.get(column.key)
            sorted_class = " sorted" if column.key == sort_key else ""
            cell = "–" if value is None else f"{value:.4f}<sub>{ranks.get(column.key)}</sub>"
            parts.append(f'<td class="num{sorted_class}">{cell}</td>')
        parts.append("</tr>")
    parts.append("</tbody></table>")
    if any(row.get("late") for row in rows):
        # In words under the table too: a phone cannot open the tag's title.
        parts.append(f'<p class="meta board-legend"><span class="tag late">late</span>: {LATE_TITLE}.</p>')
    return mark_safe("".join(parts))  # noqa: S308 - every piece of participant text above went through escape()


_RUN_ID_MARK = 987654321


def _run_url_parts() -> tuple[str, str]:
    """The run page's URL around the id, resolved once per table: ``reverse`` per row made a
    500-row table four times slower (benchmarks/board_links.py)."""
    url = reverse("run-page", args=[_RUN_ID_MARK])
    before, after = url.split(str(_RUN_ID_MARK))
    return before, after


def _run_name(row: dict[str, Any], url: tuple[str, str]) -> str:
    """A row's run name, a link to the run's page where its reader may open it (``linked``: a
    board built before rows had the key links nothing), its method description as the title."""
    name = escape(row["name"])
    title = escape(row["description"])
    if row.get("linked"):
        return f'<a href="{url[0]}{int(row["id"])}{url[1]}" title="{title}">{name}</a>'
    return f'<span title="{title}">{name}</span>'


def _shade(p: float) -> tuple[str, str]:
    """Background and text colour of a p-value cell: darker for smaller p, white from the last bound."""
    for bound, shade in zip(SHADE_BOUNDS, _SHADES, strict=True):
        if p < bound:
            return shade
    return "#fff", "inherit"


def pvalue_table(labels: list[str], entry: dict[str, Any], higher_is_better: bool = False) -> SafeString:
    """Runs x runs, best figure first (in the measure's direction): p in each cell (never 0: below
    0.001 it says so), coloured by p, with the difference, the effect size (Sakai 2018's ES_E) and
    the Monte Carlo standard error of p in the cell's tooltip; ``pvalue_pairs`` says the same for
    readers without a pointer to hover with."""
    means = entry["means"]
    sign = -1.0 if higher_is_better else 1.0
    order = sorted(range(len(labels)), key=lambda i: sign * means[i])
    pvalues, differences = entry["pvalues"].tolist(), entry["differences"].tolist()
    effects, errors = entry["effect_sizes"].tolist(), entry["mc_se"].tolist()
    # The figure the board shows: a corpus figure for corpus measures, a mean otherwise.
    figure = "corpus" if entry.get("headline") == "corpus" else "mean"
    parts = [f'<table class="board pvalues"><thead><tr><th>run</th><th class="num">{figure}</th>']
    parts += [f'<th title="{escape(labels[i])}">{number}</th>' for number, i in enumerate(order, start=1)]
    parts.append("</tr></thead><tbody>")
    for number, i in enumerate(order, start=1):
        parts.append(f"<tr><td>{number}. {escape(labels[i])}</td><td class=\"num\">{means[i]:.4f}</td>")
        for j in order:
            if i == j:
                parts.append("<td>–</td>")
                continue
            p = pvalues[i][j]
            background, colour = _shade(p)
            title = _pair_words(labels, i, j, p, differences, effects, errors)
            shown = "&lt; 0.001" if p < 0.001 else f"{p:.3f}"
            parts.append(f'<td style="background: {background}; color: {colour}" title="{escape(title)}">'
                         f"{shown}</td>")
        parts.append("</tr>")
    parts.append("</tbody></table>")
    return mark_safe("".join(parts))  # noqa: S308 - run names went through escape()


def _pair_words(labels: list[str], i: int, j: int, p: float, differences: list, effects: list,
                errors: list) -> str:
    # NaN: undefined (always for a corpus measure, which has no per-item residual).
    effect = "undefined" if effects[i][j] != effects[i][j] else f"{effects[i][j]:.3f}"
    return (f"{labels[i]} minus {labels[j]}: difference {differences[i][j]:.4f}, effect size {effect}, "
            f"p = {p:.5f} (Monte Carlo standard error {errors[i][j]:.5f})")


def pvalue_pairs(labels: list[str], entry: dict[str, Any], higher_is_better: bool = False) -> list[str]:
    """Each pair of runs once, in the table's order (the better figure first), in the words of the
    table cells' tooltips: on a phone, which has no pointer to hover with, the page shows these."""
    means = entry["means"]
    sign = -1.0 if higher_is_better else 1.0
    order = sorted(range(len(labels)), key=lambda i: sign * means[i])
    pvalues, differences = entry["pvalues"].tolist(), entry["differences"].tolist()
    effects, errors = entry["effect_sizes"].tolist(), entry["mc_se"].tolist()
    return [_pair_words(labels, i, j, pvalues[i][j], differences, effects, errors)
            for k, i in enumerate(order) for j in order[k + 1:]]
