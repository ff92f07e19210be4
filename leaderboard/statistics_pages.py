"""The statistics pages of a board: significance tests and intervals per measure, the p-value
matrix of a measure, and their exports (CSV, text, LaTeX, Discpower files). The boards
themselves are ``leaderboard.views``."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_GET

from leaderboard import scheduling
from leaderboard.board import CACHE_SECONDS, Board, board_cache_key, run_counts
from leaderboard.charts import asl_chart, bar_chart, heat_map
from leaderboard.jobs import wake_statistics
from leaderboard.tables import SHADE_BOUNDS, pvalue_pairs, pvalue_table
from leaderboard.views import _find_board, board_for, settings_lines, shown_statistics
from scoring.kinds import MeasureSpec
from scoring.stats import alpha_suffix, asl_curve
from tasks import access, cachekeys
from tasks.models import Run, Task

logger = logging.getLogger(__name__)


def _statistics_for(request: HttpRequest, slug: str) -> tuple[access.BoardAccess, Board, Any]:
    view, board = board_for(request, slug)
    return view, board, shown_statistics(view, board)


@require_GET
def statistics_page(request: HttpRequest, slug: str) -> HttpResponse:
    view, board, record = _statistics_for(request, slug)
    task, phase = view.task, view.phase
    measures = []
    levels: list[float] = []
    charts: dict[str, Any] = {}
    summaries: dict[str, Any] = {}
    if record is not None:
        summaries = record.summaries()
        # The levels meta-evaluation reported at, as stored with it (``scoring.stats.meta_evaluate``).
        for group in board.groups():
            levels = levels or record.meta.get(group.name, {}).get("alphas", [])
        suffixes = [alpha_suffix(level) for level in levels]
        for column in board.columns:
            summary = summaries.get(column.key)
            if summary is None:
                continue
            meta = record.meta.get(column.group, {}).get("measures", {}).get(column.key, {})
            measures.append({"key": column.key, "spec": column, "runs": len(summary["run_ids"]),
                             "top_group": len(summary["top_group"]),
                             "powers": [meta.get(f"discriminative_power_{suffix}") for suffix in suffixes],
                             "deltas": [meta.get(f"delta_required_{suffix}") for suffix in suffixes]})
        # Drawn once per board version and stored computation (about 100 ms of a request that
        # was otherwise a few cached reads): the same inputs as the ASL curves they draw.
        board_key = board_cache_key(view.task, view.phase, view.organiser, phases=view.phases)
        charts_key = cachekeys.statistics_charts(board_key, record.pk, record.generation,
                                                 record.computed_at.timestamp())
        charts = cache.get(charts_key)
        if charts is None:
            charts = _drawn(_statistics_charts(view, board, record, measures, levels))
            cache.set(charts_key, charts, CACHE_SECONDS)
    return render(request, "leaderboard/statistics.html", {
        "task": task, "phase": phase, "board": board, "record": record, "measures": measures,
        "levels": levels, "settings": settings_lines(task, board), **charts,
        "columns": [measure["spec"] for measure in measures], "kind_tables": _kind_tables(task, board, record),
        "exports_allowed": _matrices_allowed(view, board), "other_scope": _other_scope(view, board, record),
        "run_labels": _run_labels(record, board, record.run_ids) if record else [],
        "record_counts": _record_counts(board, record, summaries) if record else None,
        **_statistics_status(task, phase, board, record),
    })


def _record_counts(board: Board, record: Any, summaries: dict[str, Any]) -> dict[str, Any]:
    """Which runs a stored computation compared (``run_counts``): baselines among them (asked of
    the database: a run may have left the board since) and, per measure group, the runs that had
    its scores (the union over the group's measures of the runs each compared); ``summaries`` is
    ``record.summaries()``, read once by the page."""
    per_group: dict[str, set[int]] = {}
    for column in board.columns:
        summary = summaries.get(column.key)
        if summary is not None:
            per_group.setdefault(column.group, set()).update(summary["run_ids"])
    baselines = Run.objects.filter(pk__in=record.run_ids, is_baseline=True).count()
    return run_counts(board, list(record.run_ids), baselines=baselines,
                      per_group={group: len(ids) for group, ids in per_group.items()})


def statistics_wait(status: scheduling.BoardStatus) -> str:
    """A board's statistics wait in a sentence ("" when nothing is under way), for pages and the
    status answer their script polls."""
    if status.running:
        return (f"The significance statistics of this board are being computed (for {status.running_for or 0:.0f} s"
                + (f"; the last computation took {status.state.last_seconds:.1f} s" if status.state.last_seconds
                   else "") + ").")
    if status.queued:
        return ("The significance statistics of this board are queued: they are computed once its scores have been "
                f"unchanged for {scheduling.debounce_seconds():g} s"
                + (f" (in about {status.starts_in:.0f} s)" if status.starts_in else "") + ".")
    return ""


@require_GET
def statistics_status(request: HttpRequest, slug: str) -> HttpResponse:
    """``{"waiting": bool, "message": str}`` for a board's statistics (``?phase=``): what the
    pages' script (static/js/wait.js) polls while a computation is queued or running, to reload
    the page once it is stored. One small query; it never says more than the board page does."""
    view = _find_board(request, slug)
    status = scheduling.board_status(view.task.pk, view.phase.pk if view.phase else None)
    message = statistics_wait(status)
    response = JsonResponse({"waiting": bool(message), "message": message,
                             "finished_at": status.state.finished_at.isoformat()
                             if status.state is not None and status.state.finished_at else None})
    response["Cache-Control"] = "no-store"
    return response


def _kind_tables(task: Task, board: Board, record: Any) -> list[dict[str, Any]] | None:
    """The kind's own comparisons (``Kind.compare``) as tables with formatted cells; None while
    the board's runs differ from those compared (a run hidden or withdrawn since is named in
    them, so they wait for the recomputation that its change queued)."""
    data = record.meta.get("kind") if record is not None else None
    if not data:
        return []
    if {row["id"] for row in board.rows} != set(record.run_ids):
        return None
    if isinstance(data.get("unavailable"), str):  # the server's own reason (a live board), not the kind's
        return [{"title": "Comparisons between the runs", "note": f"Not computed: {data['unavailable']}.",
                 "headers": [], "rows": []}]
    tables = task.kind_impl.compare_tables(data)
    for table in tables:
        table["rows"] = [[_cell(value, table.get("shade", False)) for value in row] for row in table["rows"]]
        curves = table.get("curves") or []
        # At most CURVES_PER_CHART curves a chart, each in its own colour and dash.
        table["charts"] = [asl_chart(curves[start:start + CURVES_PER_CHART])
                           for start in range(0, len(curves), CURVES_PER_CHART)]
        # A kind's table may be a heat map (the metrics track's dimension x metric correlations).
        heat = table.get("heat_map")
        if heat:
            table["heat"] = heat_map(heat["rows"], heat["columns"], heat["values"], what=heat["what"])
    return tables


def _cell(value: Any, shade: bool) -> dict[str, Any]:
    if value is None:
        return {"text": "–", "number": True}
    if isinstance(value, bool) or not isinstance(value, int | float):
        return {"text": str(value), "number": False}
    text = f"{value:,}" if isinstance(value, int) else f"{value:.4f}"
    # Shading in five steps of a single blue (readable without telling hues apart).
    level = min(4, max(0, int(float(value) * 5))) if shade and 0.0 <= value <= 1.0 else None
    return {"text": text, "number": True, "level": level}


CURVES_PER_CHART = 7


def _statistics_charts(view: access.BoardAccess, board: Board, record: Any, measures: list[dict[str, Any]],
                       levels: list[float]) -> dict[str, Any]:
    """The pictures of the statistics page, drawn from the stored numbers: discriminative power as
    bars, the ASL curves of each measure group (by subgroup), Kendall's tau as a heat map per group."""
    titles = {column.key: column.column_title for column in board.columns}
    power = bar_chart([measure["spec"].column_title for measure in measures],
                      [(f"pairs with p < {level:g}", [measure["powers"][i] for measure in measures])
                       for i, level in enumerate(levels)],
                      titles=[measure["spec"].title for measure in measures]) if measures and levels else None
    curves = _asl_curves(view, board, record, [measure["key"] for measure in measures])
    asl = []
    for group in board.groups():
        sets: dict[str, list[MeasureSpec]] = {}
        for spec in group.measures:
            if spec.key in curves:
                named = spec.subgroup_title and spec.subgroup_title != spec.subgroup
                sets.setdefault(f"{spec.subgroup} ({spec.subgroup_title})" if named else spec.subgroup, []).append(spec)
        for subgroup, specs in sets.items():
            for start in range(0, len(specs), CURVES_PER_CHART):
                chunk = specs[start:start + CURVES_PER_CHART]
                title = group.title + (f", {subgroup}" if subgroup else "")
                asl.append({"title": title, "chart": asl_chart(
                    [(spec.column_title, curves[spec.key]) for spec in chunk], levels=levels or (0.05,),
                    titles=[spec.title for spec in chunk])})
    heat_maps = []
    # One heat map per group, or per subgroup where the statistics compared each subgroup alone.
    parts = [(group, subgroup, [spec for spec in group.measures if not split or spec.subgroup == subgroup])
             for group in board.groups()
             for split in [bool(record.meta.get(group.name, {}).get("by_subgroup"))]
             for subgroup in (dict.fromkeys(spec.subgroup for spec in group.measures) if split else [""])]
    for group, subgroup, members in parts:
        taus = record.meta.get(group.name, {}).get("kendall_tau", [])
        keys = [spec.key for spec in members if any(spec.key in (tau["a"], tau["b"]) for tau in taus)]
        if len(keys) < 2:
            continue
        where = {key: i for i, key in enumerate(keys)}
        values: list[list[float | None]] = [[1.0 if i == j else None for j in range(len(keys))]
                                            for i in range(len(keys))]
        notes = [["the same measure" if i == j else "" for j in range(len(keys))] for i in range(len(keys))]
        for tau in taus:
            if tau["a"] in where and tau["b"] in where:
                i, j = where[tau["a"]], where[tau["b"]]
                values[i][j] = values[j][i] = tau["tau"]
                if tau.get("low") is not None and tau.get("high") is not None:
                    notes[i][j] = notes[j][i] = (f"{tau.get('level', 0.95):.0%} interval [{tau['low']:.3f}, "
                                                 f"{tau['high']:.3f}]")
        long_titles = [board.column(key).title for key in keys]
        heat_maps.append({"title": group.title + (f", {subgroup}" if subgroup else ""),
                          "n_resamples": taus[0].get("n_resamples"), "seed": taus[0].get("seed"),
                          "chart": heat_map([titles[key] for key in keys], [titles[key] for key in keys], values,
                                            row_titles=long_titles, column_titles=long_titles, notes=notes,
                                            what="Kendall's tau")})
    return {"power_chart": power, "asl_charts": asl, "heat_maps": heat_maps}


def _drawn(charts: dict[str, Any]) -> dict[str, Any]:
    """The pictures with their SVG and tables rendered, cached with them: rendering them was most
    of every statistics page's time (a heat map alone is some 2,000 numbers formatted by the
    template engine), for markup that changes only with the charts. The chart templates read only
    ``chart``, ``caption`` and ``label``, so rendering them here gives the bytes the page's
    ``include`` gave."""
    def html(template: str, chart: Any, caption: str, label: str) -> str:
        return render_to_string(f"leaderboard/charts/{template}", {"chart": chart, "caption": caption, "label": label})

    power = charts["power_chart"]
    return {
        **charts,
        "power_html": html("bar_chart.html", power, POWER_CAPTION, POWER_LABEL) if power else "",
        "asl_charts": [{**item, "html": html("line_chart.html", item["chart"], item["title"],
                                             f"ASL curves of {item['title']}")} for item in charts["asl_charts"]],
        "heat_maps": [{**item, "html": html("heat_map.html", item["chart"], f"{item['title']}: Kendall's tau between "
                                            "measures", f"Heat map of Kendall's tau between the measures of "
                                            f"{item['title']}")} for item in charts["heat_maps"]],
    }


POWER_CAPTION = "Share of run pairs significantly different, per measure (randomised Tukey HSD)"
POWER_LABEL = ("Bar chart of the share of run pairs significantly different per measure; the table below gives "
               "every value")


def _asl_curves(view: access.BoardAccess, board: Board, record: Any, keys: list[str]) -> dict[str, list[float]]:
    """Per measure, the p-values of every pair of the runs the board shows, smallest first
    (``scoring.stats.asl_curve``), from the stored counts; cached with the record and the board
    (500 runs and 22 measures are 2.7 million p-values rebuilt from 11 MB of counts)."""
    board_key = board_cache_key(view.task, view.phase, view.organiser, phases=view.phases)
    key = cachekeys.asl_curves(board_key, record.pk, record.generation,
                               record.computed_at.timestamp())
    curves = cache.get(key)
    if curves is None:
        curves = {}
        shown = {row["id"] for row in board.rows}
        for stored in record.measures.filter(key__in=keys).order_by("pk"):
            stored.statistics = record
            keep = [i for i, run_id in enumerate(stored.summary["run_ids"]) if run_id in shown]
            if len(keep) >= 2:
                pvalues = stored.result().pvalues
                curves[stored.key] = asl_curve(pvalues[np.ix_(keep, keep)]).tolist()
        cache.set(key, curves, CACHE_SECONDS)
    return curves


def _other_scope(view: access.BoardAccess, board: Board, record: Any) -> str:
    """What stored statistics that are not shown were computed over (the whole test set, kept
    from a publication since withdrawn; another gold version), so the page can say why."""
    from leaderboard.statistics import stored_statistics

    if record is not None or board.hidden_reason:
        return ""
    stored = stored_statistics(view.task, view.phase)
    if stored is None:
        return ""
    scope = "the whole gold" if stored.scope == "full" else "the live subset"
    version = "" if stored.gold_version_id == board.gold_version_id else ", on another gold version"
    return f"{scope}{version}"


def _statistics_status(task: Task, phase: Any, board: Board, record: Any) -> dict[str, Any]:
    """What the pages say about the statistics besides their numbers: over how many of the runs
    now on the board they were computed, and whether a newer computation is queued or running
    (``leaderboard.scheduling``). A board whose computation was lost (a web process restarted
    with its timer) is woken here, so a visitor never reads "queued" for ever."""
    status = scheduling.board_status(task.pk, phase.pk if phase else None)
    on_board = {row["id"] for row in board.rows}
    covered = len(on_board & set(record.run_ids)) if record is not None else 0
    if status.mode in ("thread", "celery", "worker") and not board.hidden_reason:
        if status.state is None and len(on_board) >= 2:
            # Scored before any computation was ever requested (e.g. while statistics were off).
            scheduling.request(task.pk, [phase.pk if phase else None])  # this board, not its neighbours
            wake_statistics(task.pk, 0.0)
            status = scheduling.board_status(task.pk, phase.pk if phase else None)
        elif status.queued and status.starts_in == 0 and status.state.requested_at is not None and (
                timezone.now() - status.state.requested_at).total_seconds() > 2 * scheduling.debounce_seconds():
            wake_statistics(task.pk, 0.0)
    return {"status": status, "runs_on_board": len(on_board), "runs_covered": covered,
            "covers_board": record is not None and covered == len(on_board) == len(record.run_ids),
            "debounce": scheduling.debounce_seconds()}


def _run_labels(record: Any, board: Board, run_ids: list[int]) -> list[str]:
    """Labels of the runs the statistics compared (``Board.labels``, the exports' names), as far
    as the board still shows them: a run hidden or withdrawn since (a recomputation is then on
    its way) is not named any more."""
    labels = board.labels()
    return [labels.get(run_id, "(a run no longer on the board)") for run_id in run_ids]


@require_GET
def pvalues_page(request: HttpRequest, slug: str, key: str) -> HttpResponse:
    view, board, record = _statistics_for(request, slug)
    task, phase = view.task, view.phase
    stored = record.measure(key, pairwise=True) if record is not None else None
    if stored is None:
        raise Http404("no statistics for this measure yet")
    entry = _on_board(stored.entry(), board)
    labels = _run_labels(record, board, entry["run_ids"])
    column = board.column(key)
    # Above 1 when the recombined method computed the p-values (scoring.stats): the page says so,
    # and by how much its Monte Carlo standard errors exceed independent draws'.
    inflation = float(entry.get("mc_variance_inflation", 1.0))
    widening = f"{100 * (inflation ** 0.5 - 1):.1f}" if inflation > 1.0 else ""
    return render(request, "leaderboard/pvalues.html", {
        "task": task, "phase": phase, "record": record, "key": key, "n_runs": len(labels), "widening": widening,
        "shade_bounds": SHADE_BOUNDS, "board": board, "headline": entry.get("headline", "mean"),
        "column": column, "table": pvalue_table(labels, entry, column.higher_is_better if column else False),
        "pairs": pvalue_pairs(labels, entry, column.higher_is_better if column else False)})


def _matrices_allowed(view: access.BoardAccess, board: Board) -> bool:
    """Per-item matrices of test data reach only organisers until the results are published:
    test data is a gold version that a test or final phase uses, whichever board shows it (the
    same rule as per-item scores on run pages, ``tasks.access``)."""
    return access.matrices_allowed(view.phases, board.gold_version_id, view.organiser)


def _on_board(entry: dict[str, Any], board: Board) -> dict[str, Any]:
    """A measure's stored statistics restricted to the runs the board shows this reader: a run
    hidden or withdrawn since they were computed keeps its mean and differences to itself until
    the recomputation its hiding queued (the p-values of the others stay those computed with it)."""
    shown = {row["id"] for row in board.rows}
    keep = [i for i, run_id in enumerate(entry["run_ids"]) if run_id in shown]
    if len(keep) == len(entry["run_ids"]):
        return entry
    if len(keep) < 2:
        raise Http404("no statistics for this measure until they are computed again")
    rows = np.ix_(keep, keep)
    return {**entry, "run_ids": [entry["run_ids"][i] for i in keep], "means": [entry["means"][i] for i in keep],
            **{name: np.asarray(entry[name])[rows] for name in ("pvalues", "differences", "effect_sizes", "mc_se")},
            **{name: [entry[name][i] for i in keep] for name in ("ci_low", "ci_high") if name in entry}}
