"""The statistics pages of a board: significance tests and intervals per measure, the p-value
matrix of a measure, and their exports (CSV, text, LaTeX, Discpower files). The boards
themselves are ``leaderboard.views``."""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Iterator
from datetime import UTC
from typing import Any

import numpy as np
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from leaderboard import scheduling
from leaderboard.board import CACHE_SECONDS, Board, board_cache_key, headline_column, run_counts
from leaderboard.charts import asl_chart, bar_chart, heat_map
from leaderboard.jobs import wake_statistics
from leaderboard.tables import SHADE_BOUNDS, pvalue_pairs, pvalue_table
from leaderboard.views import _find_board, board_for, settings_lines, shown_statistics
from scoring import exports, stats
from scoring.kinds import MeasureSpec
from scoring.stats import TukeyHSDResult, alpha_suffix, asl_curve
from tasks import access, cachekeys
from tasks.models import Run, Task
from tasks.runfiles import download_name

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
            charts = _statistics_charts(view, board, record, measures, levels)
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
    for group in board.groups():
        taus = record.meta.get(group.name, {}).get("kendall_tau", [])
        keys = [spec.key for spec in group.measures if any(spec.key in (tau["a"], tau["b"]) for tau in taus)]
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
        heat_maps.append({"title": group.title, "n_resamples": taus[0].get("n_resamples"), "seed": taus[0].get("seed"),
                          "chart": heat_map([titles[key] for key in keys], [titles[key] for key in keys], values,
                                            row_titles=long_titles, column_titles=long_titles, notes=notes,
                                            what="Kendall's tau")})
    return {"power_chart": power, "asl_charts": asl, "heat_maps": heat_maps}


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


# Exports of a whole board (``key`` "all"), besides the LaTeX table.
BOARD_EXPORTS = ("kendall.csv", "meanranks.csv", "teams.csv")


@require_GET
def statistics_export(request: HttpRequest, slug: str, key: str, kind: str) -> HttpResponse:
    view, board, record = _statistics_for(request, slug)
    task = view.task
    stored = None
    if record is not None and key != "all":
        stored = record.measure(key, pairwise=kind in ("pvalues.txt", "pvalues.csv"))
    if record is None or (key != "all" and stored is None):
        raise Http404("no statistics for this measure yet")
    if key == "all" and kind == "exports.zip":
        return _bundle(request, view, board, record)
    try:
        made = _export(request, view, board, record, stored, key, kind)
    except ValueError as error:
        return _refused(task, key, kind, error)
    if isinstance(made, HttpResponse):
        return made
    body, content_type = made
    response = HttpResponse(body, content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{task.slug}-{download_name(key)}-{kind}"'
    return response


def _refused(task: Task, key: str, kind: str, error: ValueError) -> HttpResponse:
    # The export functions refuse what they cannot write faithfully (two runs under one
    # name, say); the reader learns why instead of getting a server error.
    logger.warning("export %s of %s on %s refused: %s", kind, key, task.slug, error)
    return HttpResponse(f"cannot export {kind} of {key} because {error}\n", status=409,
                        content_type="text/plain; charset=utf-8")


def _export(request: HttpRequest, view: access.BoardAccess, board: Board, record: Any, stored: Any, key: str,
            kind: str, *, measures: str | None = None, memo: dict[str, Any] | None = None,
            log: bool = True) -> tuple[str, str] | HttpResponse:
    """The body and content type of one export of ``statistics_export``, or the response that
    refuses it (403, 404, 400); ValueError when the export functions cannot write it. The bundle
    names the LaTeX table's ``measures`` (else ``?measures=``), shares ``memo`` (per-item
    matrices and item ids, read once) and logs the matrices' reading once itself (``log``)."""
    task, phase = view.task, view.phase
    memo = {} if memo is None else memo
    needs_matrix = kind in ("matrix.csv", "matrix.txt", "runs.txt")
    if needs_matrix and not _matrices_allowed(view, board):
        return render(request, "403.html", status=403)
    if needs_matrix:
        column = board.column(key)
        if column is None:
            raise Http404("no per-item scores for this measure")
        if column.headline == "corpus" and kind != "matrix.csv":
            # Discpower tests the means of these columns; a corpus figure is not a mean of per-item scores.
            return HttpResponse(f"{key} is a corpus-level figure, not the mean of per-item scores, so Discpower (which "
                                "tests means) cannot reproduce its tests; use pairs.csv, or `manage.py compare` on "
                                "the run files\n", status=404, content_type="text/plain; charset=utf-8")
        matrices = _matrices(board, column.group, memo)
        if key not in matrices.by_key:
            raise Http404("no per-item scores for this measure")
        names = board.labels()
        labels = [names.get(run_id, str(run_id)) for run_id in matrices.run_ids]
        if "item_ids" not in memo:
            ids = list(task.gold_versions.get(number=board.gold_version).load().item_ids)
            if board.scope == "live" and phase is not None and phase.live_subset() is not None:
                ids = [ids[i] for i in phase.live_subset()]
            memo["item_ids"] = ids
        ids = memo["item_ids"]
        if kind == "matrix.csv":
            made = exports.matrix_csv(ids, labels, matrices.by_key[key]), "text/csv"
        else:
            matrix_text, names_text = exports.discpower_files(labels, matrices.by_key[key])
            made = (matrix_text if kind == "matrix.txt" else names_text), "text/plain"
        if log:
            access.log_access(request, task, f"{kind} of {key} ({board.scope}, gold v{board.gold_version})")
        return made
    if kind in ("pvalues.txt", "pvalues.csv") and stored is not None:
        entry = _on_board(stored.entry(), board)
        names = board.labels()
        labels = [names[run_id] for run_id in entry["run_ids"]]
        result = _result_from(entry, record)
        if kind == "pvalues.txt":
            return exports.pvalue_lines(labels, result), "text/plain"
        return exports.pvalue_csv(labels, result), "text/csv"
    if kind == "means.tex":
        keys = _latex_measures(board, record, request.GET.get("measures", "") if measures is None else measures)
        if isinstance(keys, HttpResponse):
            return keys
        return _latex(view.task, board, record, keys), "text/x-tex"
    if key != "all":
        raise Http404("unknown export")
    if kind == "kendall.csv":
        taus = [tau for group in board.groups() for tau in record.meta.get(group.name, {}).get("kendall_tau", [])]
        return exports.kendall_csv(taus, {column.key: column.title for column in board.columns}), "text/csv"
    if kind == "meanranks.csv":
        return _mean_rank_table(board, record, memo), "text/csv"
    if kind == "teams.csv":
        labels = board.labels()
        teams: dict[tuple[str, bool], list[str]] = {}
        for row in sorted(board.rows, key=lambda row: (row["is_baseline"], row["team"].casefold(), row["id"])):
            teams.setdefault((row["team"], row["is_baseline"]), []).append(labels[row["id"]])
        return exports.teams_csv((team, baseline, names) for (team, baseline), names in teams.items()), "text/csv"
    raise Http404("unknown export")


# What each file of the bundle is, for its README.txt: (file name pattern, description).
_BUNDLE_FILES = (
    ("<measure>-pvalues.txt", "every pair of runs: run_a run_b |mean_a - mean_b| p, space-separated, as NTCIR's "
     "Discpower tool writes its p-value file (randomised Tukey HSD; whitespace in a run label becomes _)"),
    ("<measure>-pvalues.csv", "every pair of runs as CSV: run_a, run_b, diff = mean_a - mean_b (signed), p, effect "
     "size, Monte Carlo standard error of p, and which of the two runs has the higher mean"),
    ("<measure>-matrix.csv", "per-item scores (organisers, or everyone once the results on this gold are published): "
     "one row per item, one column per run"),
    ("<measure>-matrix.txt", "the same scores as Discpower's input: one line per item, space-separated, no header"),
    ("<measure>-runs.txt", "Discpower's run list: the run labels of matrix.txt's columns, one a line"),
    ("all-means.tex", "LaTeX table of the official measures' figures, rows best first by the board's headline measure; "
     "bold: best run, dagger: not significantly different from it"),
    ("all-means-all.tex", "the same table with every measure"),
    ("all-kendall.csv", "Kendall's tau-b between the run rankings of every pair of measures of a group, with its "
     "dialogue-bootstrap interval"),
    ("all-meanranks.csv", "each run's mean rank over the items per measure (rank 1 the best on an item, tied runs "
     "sharing the mean of their ranks)"),
    ("all-teams.csv", "runs per team: team, whether its runs are baselines, number of runs, their labels"),
)


def _bundle(request: HttpRequest, view: access.BoardAccess, board: Board, record: Any) -> HttpResponse:
    """Every export of the board in one zip, each member byte for byte the single export the same
    reader would download, and a README.txt saying what each is. Exports this reader may not have
    (per-item matrices before publication) or that do not exist (Discpower files of a corpus
    measure) are left out, the README says which; an export the library refuses answers 409 as
    the single one does. Built before the first byte is sent, so a refusal is never a broken zip."""
    task, phase = view.task, view.phase
    base = "-".join([task.slug, download_name(phase.name) if phase else "board", f"gold-v{board.gold_version}",
                     f"statistics-{record.computed_at:%Y%m%d-%H%M}"])
    memo: dict[str, Any] = {}
    members: list[tuple[str, str]] = []
    missing: list[str] = []
    wanted: list[tuple[str, str, str | None]] = []
    summaries = record.summaries()
    for column in board.columns:
        if column.key in summaries:
            wanted += [(column.key, kind, None) for kind in
                       ("pvalues.txt", "pvalues.csv", "matrix.csv", "matrix.txt", "runs.txt")]
    wanted += [("all", "means.tex", ""), ("all", "means-all.tex", "all"),
               *(("all", kind, None) for kind in BOARD_EXPORTS)]
    matrices_read = []
    for key, kind, measures in wanted:
        name = f"{download_name(key)}-{kind}"
        single = "means.tex" if kind == "means-all.tex" else kind
        stored = record.measure(key, pairwise=single.startswith("pvalues")) if key != "all" else None
        try:
            if key != "all" and stored is None:
                raise Http404("no statistics for this measure yet")
            made = _export(request, view, board, record, stored, key, single, measures=measures, memo=memo, log=False)
        except Http404 as error:
            missing.append(f"{name}: {error}")
            continue
        except ValueError as error:
            return _refused(task, key, single, error)
        if isinstance(made, HttpResponse):
            missing.append(f"{name}: " + ("the per-item scores of this gold are for the organisers until its results "
                                          "are published" if made.status_code == 403 else
                                          made.content.decode().strip()))
            continue
        members.append((name, made[0]))
        if single.startswith(("matrix", "runs")):
            matrices_read.append(name)
    if matrices_read:
        access.log_access(request, task, f"exports.zip with {len(matrices_read)} per-item files "
                                         f"({board.scope}, gold v{board.gold_version})")
    members.insert(0, ("README.txt", _bundle_readme(task, phase, board, record, [m[0] for m in members], missing)))
    stamp = record.computed_at.astimezone(UTC).timetuple()[:6]
    response = StreamingHttpResponse(_zip_stream(base, members, stamp), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{base}.zip"'
    return response


def _bundle_readme(task: Task, phase: Any, board: Board, record: Any, names: list[str], missing: list[str]) -> str:
    lines = [f"Statistics exports of {task.title}" + (f", phase {phase.name}" if phase else ""),
             f"Gold version {board.gold_version}, {board.scope} scores, {record.n_items} {board.item_noun}s; "
             f"randomised Tukey HSD with B = {record.permutations}, seed {record.seed}, alpha = {record.alpha:g}; "
             f"computed {record.computed_at:%Y-%m-%d %H:%M} UTC.",
             "Runs are named by their labels on the board: team/run, with the run's number where that repeats.",
             "", "What each file is (<measure> is a measure's key):"]
    lines += [f"  {pattern}: {description}" for pattern, description in _BUNDLE_FILES]
    lines += ["", "Files in this archive:", *(f"  {name}" for name in names)]
    if missing:
        lines += ["", "Left out:", *(f"  {reason}" for reason in missing)]
    return "\n".join(lines) + "\n"


class _Sink:
    """A write-only file for ``zipfile``, emptied after each member (no ``seek``: the zip is
    written with data descriptors, as a stream)."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.chunks.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data, self.chunks = b"".join(self.chunks), []
        return data


def _zip_stream(base: str, members: list[tuple[str, str]], stamp: tuple[int, ...]) -> Iterator[bytes]:
    sink = _Sink()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED) as archive:  # type: ignore[arg-type]
        for name, body in members:
            info = zipfile.ZipInfo(f"{base}/{name}", date_time=stamp)  # type: ignore[arg-type]
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, body.encode("utf-8"))
            yield sink.take()
    yield sink.take()


def _matrices(board: Board, group: str, memo: dict[str, Any]) -> Any:
    from leaderboard.statistics import gather_matrices

    if ("matrices", group) not in memo:
        memo["matrices", group] = gather_matrices(board, group)
    return memo["matrices", group]


def _mean_rank_table(board: Board, record: Any, memo: dict[str, Any]) -> str:
    """Each run's mean rank over the items per measure (``scoring.stats.mean_ranks``), for the
    runs the statistics compared that the board still shows, rank 1 the best in each measure's
    direction; rows ordered as the board's runs."""
    compared = set(record.run_ids)
    ranks: dict[str, dict[int, float]] = {}
    for group in board.groups():
        matrices = _matrices(board, group.name, memo)
        keep = [i for i, run_id in enumerate(matrices.run_ids) if run_id in compared]
        if len(keep) < 2:
            continue
        for column in board.columns_for(group.name):
            if column.key in matrices.by_key:
                values = stats.mean_ranks(matrices.by_key[column.key][:, keep],
                                          lower_is_better=not column.higher_is_better)
                ranks[column.key] = {matrices.run_ids[i]: float(v) for i, v in zip(keep, values, strict=True)}
    names = board.labels()
    run_ids = [row["id"] for row in board.rows if any(row["id"] in by_run for by_run in ranks.values())]
    keys = [column.key for column in board.columns if column.key in ranks]
    return exports.mean_rank_csv([names[run_id] for run_id in run_ids], keys, ranks, run_ids)


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


def _result_from(entry: dict, record: Any) -> Any:
    """A TukeyHSDResult rebuilt from stored numbers, for the export functions."""
    return TukeyHSDResult.from_stored(entry, permutations=record.permutations, seed=record.seed,
                                      n_dialogues=record.n_items)


def _latex_measures(board: Board, record: Any, chosen: str) -> list[str] | HttpResponse:
    """The measures of the LaTeX table: the official ones by default (all where the kind names
    none), every one for ``all``, or a comma-separated list of measure keys (400 naming every key
    that has no statistics on this board)."""
    summaries = set(record.summaries())
    available = [column for column in board.columns if column.key in summaries]
    chosen = chosen.strip()
    if chosen == "all":
        return [column.key for column in available]
    if chosen in ("", "official"):
        official = [column.key for column in available if column.official]
        return official or [column.key for column in available]
    asked = [key.strip() for key in chosen.split(",") if key.strip()]
    known = {column.key for column in available}
    unknown = [key for key in asked if key not in known]
    if unknown or not asked:
        message = (f"measures: no statistics on this board for {', '.join(repr(key[:64]) for key in unknown[:20])}"
                   if unknown else "measures: name at least one measure key")
        return HttpResponse(f"{message}; use 'official', 'all' or a comma-separated list of: "
                            f"{', '.join(column.key for column in available)}\n", status=400,
                            content_type="text/plain; charset=utf-8")
    return [column.key for column in available if column.key in set(asked)]


def _latex(task: Task, board: Board, record: Any, keys: list[str]) -> str:
    summaries = record.summaries()
    names = board.labels()
    # Runs hidden or withdrawn since the computation are left out, not named by their ids.
    run_ids = sorted({run_id for key in keys for run_id in summaries[key]["run_ids"]} & set(names))
    settings = "; ".join(f"{label}: {value}" for label, value in task.kind_impl.describe_settings(board.settings))
    note = (f"Randomised Tukey HSD, B = {record.permutations}, seed {record.seed}; "
            f"top group at alpha = {record.alpha:g}; "
            f"{record.n_items} {board.item_noun}s ({board.scope} scores, gold version {board.gold_version}); "
            f"computed {record.computed_at:%Y-%m-%d %H:%M} UTC."
            + (f" Scored with {settings}." if settings else ""))
    columns = {column.key: column for column in board.columns}
    return exports.latex_means_tables(
        [names[run_id] for run_id in run_ids], keys,
        {key: dict(zip(summaries[key]["run_ids"], summaries[key]["means"], strict=True)) for key in keys},
        {key: set(summaries[key]["top_group"]) for key in keys}, run_ids,
        # Bold marks the best run in each measure's direction, as its top group was drawn.
        lower_is_better={key: not columns[key].higher_is_better for key in keys},
        headers={key: columns[key].short_title if columns[key].subgroup else columns[key].column_title
                 for key in keys},
        groups={key: columns[key].group_title or columns[key].group for key in keys},
        subgroups={key: columns[key].subgroup for key in keys},
        descriptions={key: f"{columns[key].title}; {columns[key].direction}" for key in keys},
        name_notes=[f"run {run_id} on the board" for run_id in run_ids], note=note,
        # Rows in the board's order: each group's tables by the measure its tab is sorted by.
        rank_by={columns[key].group_title or columns[key].group: _headline_figures(board, columns[key].group)
                 for key in keys})


def _headline_figures(board: Board, group: str) -> tuple[dict[int, float], bool]:
    """The figures of the measure a group's board tab is sorted by (``headline_column``), per run
    id, and whether lower is better there."""
    column = headline_column(board, group)
    if column is None:
        return {}, True
    return ({row["id"]: row["values"][column.key] for row in board.rows if row["values"].get(column.key) is not None},
            not column.higher_is_better)
