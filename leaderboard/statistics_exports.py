"""The exports of a board's statistics: CSV, text, LaTeX and Discpower files of each measure, the
board-wide files (Kendall's tau, mean ranks, runs per team) and the zip of them all, under the
pages' access rules (``leaderboard.statistics_pages``). A refused export answers 409, never 500."""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Iterator
from datetime import UTC
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from leaderboard.board import Board, headline_column
from leaderboard.statistics_pages import _matrices_allowed, _on_board, _statistics_for
from scoring import exports, stats
from scoring.stats import TukeyHSDResult
from tasks import access
from tasks.models import Task
from tasks.runfiles import download_name

logger = logging.getLogger(__name__)


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
