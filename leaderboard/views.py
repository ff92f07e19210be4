"""Public pages: the task list, a task's leaderboard (HTML and CSV) and the read API."""

from __future__ import annotations

import gzip
import hashlib
import re
import threading
from collections import OrderedDict
from typing import Any

import orjson
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.db.models import Count, F, OuterRef, Subquery
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotModified
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.utils.http import parse_etags
from django.views.decorators.http import require_GET
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from leaderboard.board import CACHE_SECONDS, Board, board_cache_key, get_board, sort_rows
from leaderboard.charts import interval_chart
from leaderboard.scheduling import board_status
from leaderboard.tables import board_table, sort_link
from scoring import exports
from tasks import access, cachekeys
from tasks.api import ERRORS
from tasks.lookup import cached_task
from tasks.models import GoldVersion, Phase, Run, Score, Task, publication_problem
from tasks.runfiles import download_name
from tasks.submissions import quota_status, submission_status, upload_context


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    tasks = [task for task in Task.objects.prefetch_related("organisers")
             if task.is_public or task.is_organiser(request.user)]
    phases: dict[int, list[Phase]] = {}
    for phase in Phase.objects.filter(task__in=tasks).order_by("starts_at"):
        phases.setdefault(phase.task_id, []).append(phase)
    counts = public_counts(tasks, phases)
    now = timezone.now()
    return render(request, "leaderboard/home.html", {"tasks": [
        {"task": task, "status": task_status(phases.get(task.pk, []), now), **counts.get(task.pk, {})}
        for task in tasks]})


def task_status(phases: list[Phase], now: Any) -> dict[str, Any]:
    """A task's state in a line: the phase open now and until when, else the next one and when it
    opens, else that every phase has ended (a task without phases takes runs at any time)."""
    if not phases:
        return {"state": "open", "words": "runs accepted at any time"}
    open_now = [phase for phase in phases if phase.takes_runs and phase.is_open(now)]
    if open_now:
        phase = min(open_now, key=lambda item: item.ends_at)
        return {"state": "open", "phase": phase, "deadline": phase.ends_at,
                "words": f"{phase.name} phase, deadline {phase.ends_at:%Y-%m-%d %H:%M} UTC"}
    upcoming = [phase for phase in phases if phase.takes_runs and phase.starts_at > now]
    if upcoming:
        phase = min(upcoming, key=lambda item: item.starts_at)
        return {"state": "upcoming", "phase": phase,
                "words": f"the {phase.name} phase opens {phase.starts_at:%Y-%m-%d %H:%M} UTC"}
    return {"state": "closed", "words": "every phase has ended"}


def public_counts(tasks: list[Task], phases: dict[int, list[Phase]]) -> dict[int, dict[str, int]]:
    """Per task, the runs and the teams the public boards show, whatever the reader: scored runs
    shown on the public board (not hidden, not withdrawn, no baselines) of a phase whose board
    shows runs to the public (``tasks.access.board_rule``), on that phase's gold; a task without
    phases, those on its latest gold. Runs kept from the public (a test board whose results are
    not published and that has no live subset) are not counted: a count is no back door. Two
    queries whatever the number of tasks."""
    shown = [phase.pk for task in tasks for phase in phases.get(task.pk, [])
             if phase.takes_runs and phase.starts_at <= timezone.now()
             and not access.board_rule(phases[task.pk], phase, organiser=False)[1]]
    runs = Run.objects.filter(status=Run.DONE, withdrawn_at__isnull=True, is_public=True, is_baseline=False,
                              task__is_public=True)
    found = {row["task_id"]: {"runs": row["runs"], "teams": row["teams"]} for row in runs.filter(
        phase_id__in=shown, gold_version_id=F("phase__gold_version_id")).values("task_id").annotate(
        runs=Count("pk"), teams=Count("team_id", distinct=True))}
    without_phases = [task.pk for task in tasks if not phases.get(task.pk)]
    if without_phases:
        latest = GoldVersion.objects.filter(task_id=OuterRef("task_id")).order_by("-number").values("pk")[:1]
        for row in runs.filter(task_id__in=without_phases, phase__isnull=True).annotate(
                latest=Subquery(latest)).filter(gold_version_id=F("latest")).values("task_id").annotate(
                runs=Count("pk"), teams=Count("team_id", distinct=True)):
            found[row["task_id"]] = {"runs": row["runs"], "teams": row["teams"]}
    return found


# Built once per process: the measures of a kind's default configuration do not change while it runs.
_MEASURES_PAGE: list[dict[str, Any]] = []


@require_GET
def measures_page(request: HttpRequest) -> HttpResponse:
    """Every kind's measures with their direction, range and the paper each comes from (the
    kind's default configuration; a task's own are under "What the measures mean" beside its
    tables): where the footer of every page sends a reader for the definitions."""
    if not _MEASURES_PAGE:
        from scoring.kinds import KINDS

        for name in KINDS:
            kind = KINDS[name]
            specs = kind.measures(kind.preset(kind.default_preset)) if kind.default_preset else []
            _MEASURES_PAGE.append({"name": name, "title": kind.title, "measures": specs,
                                   "languages": kind.language_support()})
    return render(request, "leaderboard/measures.html", {"kinds": _MEASURES_PAGE})


def _find_board(request: HttpRequest, slug: str) -> access.BoardAccess:
    """The board the request asks for as this user may see it (``tasks.access.board_access``):
    404 unless the task is public or organised by the user, and for a ``?phase=`` that is not one
    of its phases. No query for anonymous readers while the cached task is current
    (``tasks.lookup``)."""
    found = cached_task(slug)
    organiser = found is not None and access.is_organiser(request.user, found[0])
    if found is None or not (found[0].is_public or organiser):
        raise Http404("no such task")
    task, phases = found
    return access.board_access(request.user, task, request.GET.get("phase"), phases, organiser)


def board_for(request: HttpRequest, slug: str) -> tuple[access.BoardAccess, Board]:
    view = _find_board(request, slug)
    return view, get_board(view.task, view.phase, view.organiser, phases=view.phases)


def shown_statistics(view: access.BoardAccess, board: Board) -> Any:
    """The stored statistics of a board while they describe what it shows now: none for a hidden
    board, nor while they were computed over another scope or gold (the test board's whole-set
    statistics, kept from when the final results were public, until the recomputation that a
    withdrawal of the publication queues)."""
    from leaderboard.statistics import stored_statistics

    if board.hidden_reason:
        return None
    record = stored_statistics(view.task, view.phase)
    if record is None or record.scope != board.scope or record.gold_version_id != board.gold_version_id:
        return None
    return record


@require_GET
def task_page(request: HttpRequest, slug: str) -> HttpResponse:
    view = _find_board(request, slug)
    task, phase, organiser = view.task, view.phase, view.organiser
    # Only values that can name a tab or a column reach the cache key, so requests cannot fill
    # the cache with variants; anything else means "the default".
    specs = task.measure_specs()
    tab = request.GET.get("tab", "") if request.GET.get("tab") in {spec.group for spec in specs} else ""
    sort = request.GET.get("sort", "") if request.GET.get("sort") in {spec.key for spec in specs} else ""
    # "all" shows every measure; otherwise a kind with official measures shows only those.
    show = "all" if request.GET.get("show") == "all" else ""
    # One small query: the board's statistics state changes whenever the stored statistics do or
    # a newer computation is queued, started or finished, which the section reports; whether the
    # stored statistics match the board (shown_statistics) changes only with the board's key or a
    # new computation, both in this key.
    status = board_status(task.pk, phase.pk if phase else None)
    board_key = board_cache_key(task, phase, organiser, phases=view.phases)
    key = cachekeys.board_section(board_key, tab, sort, show, status.cache_token())
    # The section under a key never changes (the key carries the scores' timestamp and the
    # statistics' state): a process keeps recent ones in memory and skips the shared cache, whose
    # read (a file, decompressed, by default) was a fifth of a page request.
    section = _recent_sections.get(key)
    if section is None:
        section = cache.get(key)
        if section is None:
            section = _board_section(view, tab, sort, show, status)
            cache.set(key, section, CACHE_SECONDS)
        _recent_sections.put(key, section)
    resolved = upload_context(task, request.user) if request.user.is_authenticated else None
    team = resolved.team if resolved else None
    # The upload box names the phase a run would go to: the open one, which need not be the
    # board shown (a finished phase's tab says its own phase is over).
    submission = submission_status(resolved) if resolved and team else None
    return render(request, "leaderboard/task.html", {
        "task": task, "phase": phase, "phases": view.phases, "section": section, "team": team,
        "submission": submission, "board_state": phase.state() if phase else "",
        # A computation under way: the page follows it (static/js/wait.js, or a refresh without script).
        "waiting": status.running or status.queued,
        "quota": quota_status(resolved) if resolved and submission and submission["open"] else None})


def _board_section(view: access.BoardAccess, tab: str, sort_key: str, show: str, status: Any) -> str:
    """The board part of a task page (everything but the visitor's own upload box), rendered once
    per board, tab, sort and statistics and then served from the cache."""
    from leaderboard.statistics import measure_summary

    task, phase, organiser = view.task, view.phase, view.organiser
    board = get_board(task, phase, organiser, phases=view.phases)
    groups = board.groups()
    group = tab if tab in {g.name for g in groups} else (groups[0].name if groups else "")
    every = board.columns_for(group)
    official = [column for column in every if column.official]
    # The official measures by default (a toggle shows all): 18 DQ columns do not fit a screen.
    columns = every if show == "all" or not official else official
    sorted_column = board.column(sort_key)
    if sorted_column is None or sorted_column.group != group:
        sorted_column = columns[0] if columns else None
    elif sorted_column not in columns:
        columns = every  # a link sorted by a measure the default view leaves out shows them all
        show = "all"
    sort_key = sorted_column.key if sorted_column else ""
    rows = sort_rows([row for row in board.rows if group in row["groups"]], sorted_column)
    shown = sort_key and shown_statistics(view, board) is not None
    summary = measure_summary(task, phase.pk if phase else None, sort_key) if shown else None
    top_group = summary["top_group"] if summary else []
    # The level the stored top group was drawn at, read back with it.
    alpha = summary["alpha"] if summary else None
    phase_name = phase.name if phase else None
    table = board_table(rows, columns, sort_key, group, phase_name, top_group, alpha, show) if rows else ""
    chart = interval_chart(summary, rows, sorted_column, board.labels()) if sorted_column else None
    return render_to_string("leaderboard/board_section.html", {
        "task": task, "phase": phase, "board": board, "group": group, "organiser": organiser,
        "table": table, "top_group": top_group, "alpha": alpha, "chart": chart,
        "status": status, "runs_on_board": len(board.rows), "columns": columns, "show": show,
        "settings": settings_lines(task, board), "breakdown": board_breakdown(task, board),
        "has_unofficial": len(official) not in (0, len(every)),
        "toggle": sort_link(phase_name, group, sort_key if show != "all" or sorted_column in official else "",
                            "" if show == "all" else "all"),
        "tabs": [(g.name, g.title, sort_link(phase_name, g.name, "", show)) for g in groups if len(groups) > 1],
    })


@require_GET
@login_required
def preview_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The final results of a test or final phase as everyone will see them once they are
    published (scores on the whole test set, the runs the public sees), for the task's organisers
    only, with the confirmation that publishes them."""
    found = cached_task(slug)
    if found is None or not access.is_organiser(request.user, found[0]):
        raise Http404("no such task")
    task, phases = found
    phase = access.named_phase(phases, request.GET.get("phase")) or access.preview_phase(phases)
    board = get_board(task, phase, organiser=False, preview=True, phases=phases)
    groups = board.groups()
    tab = request.GET.get("tab", "")
    group = tab if tab in {g.name for g in groups} else (groups[0].name if groups else "")
    every = board.columns_for(group)
    official = [column for column in every if column.official]
    show = "all" if request.GET.get("show") == "all" or not official else ""
    columns = every if show else official
    sorted_column = board.column(request.GET.get("sort", ""))
    if sorted_column is None or sorted_column.group != group:
        sorted_column = columns[0] if columns else None
    elif sorted_column not in columns:
        columns, show = every, "all"
    sort_key = sorted_column.key if sorted_column else ""
    rows = sort_rows([row for row in board.rows if group in row["groups"]], sorted_column)
    phase_name = phase.name if phase else None
    shown = {row["id"] for row in board.rows}
    left_out = [] if board.hidden_reason else [
        row for row in get_board(task, phase, organiser=True, phases=phases).rows if row["id"] not in shown]
    # While a phase accepts runs on this gold, publishing is refused (tasks.organising.set_publication):
    # the page says so, and offers to close submissions first.
    blocking = phase.open_phases_on_gold() if phase is not None and phase.kind != "development" else []
    return render(request, "leaderboard/preview.html", {
        "blocking": blocking, "blocking_reason": publication_problem(phase, blocking) if blocking else "",
        "task": task, "phase": phase, "phases": [item for item in phases if item.kind != "development"],
        "board": board, "group": group, "columns": columns, "show": show,
        "table": board_table(rows, columns, sort_key, group, phase_name, [], None, show) if rows else "",
        "tabs": [(g.name, g.title, sort_link(phase_name, g.name, "", show)) for g in groups if len(groups) > 1],
        "toggle": sort_link(phase_name, group, sort_key if not show or sorted_column in official else "",
                            "" if show else "all"),
        "has_unofficial": len(official) not in (0, len(every)), "left_out": left_out,
        "settings": settings_lines(task, board)})


@require_GET
def leaderboard_csv(request: HttpRequest, slug: str) -> HttpResponse:
    view, board = board_for(request, slug)
    task, phase = view.task, view.phase
    # Every scoring setting (variant, aggregation, ...) per run: a CSV on its own says how it was made.
    settings = list(dict.fromkeys(key for row in board.rows for key in sorted(row["scores"].get("settings") or {})))
    rows: list[list[Any]] = [["run_id", "team", "run", "baseline", "submitted_at", "gold_version", "scope"]
                             + [column.key for column in board.columns]
                             + [f"rank:{column.key}" for column in board.columns]
                             + [f"setting:{key}" for key in settings] + ["late"]]
    for row in board.rows:
        run_settings = row["scores"].get("settings") or {}
        rows.append([row["id"], row["team"], row["name"], int(row["is_baseline"]), row["submitted_at"],
                     board.gold_version, board.scope]
                    + [row["values"][column.key] for column in board.columns]
                    + [row["ranks"][column.key] or None for column in board.columns]
                    + [_setting_cell(run_settings.get(key)) for key in settings]
                    # 1: submitted after the phase's end under its team's extension (tasks.late).
                    + [int(row.get("late", False))])
    # The project's one CSV writer: participant text cannot become a spreadsheet formula.
    response = HttpResponse(exports.csv_text(rows), content_type="text/csv; charset=utf-8")
    suffix = f"-{phase.name}" if phase else ""
    response["Content-Disposition"] = f'attachment; filename="{task.slug}{download_name(suffix)}-leaderboard.csv"'
    return response


def _setting_cell(value: Any) -> Any:
    """A setting in a CSV cell: numbers and text as they are, anything else as its JSON."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return orjson.dumps(value).decode()


@extend_schema(
    summary="A task's public leaderboard",
    description="Every visible run with team, name, description, baseline flag, submission time, its scores "
                "in the structure of `score --format json` and its rank per measure; `measures` says what each "
                "measure key means and whether higher or lower is better; `settings` the scoring settings "
                "(variant, aggregation, ...) every run shares, `settings_described` the same in words, "
                "`settings_differ` the keys whose values differ between runs (each run's are in its scores).",
    parameters=[OpenApiParameter("phase", str, description="a phase's exact name, else 404 (absent or empty: the "
                                                         "open phase, else the latest that started)")],
    responses={200: OpenApiTypes.OBJECT,
               304: OpenApiResponse(description="the board has not changed since the ETag sent in If-None-Match"),
               404: OpenApiResponse(ERRORS, description="no such task (or not visible to you), or no phase of it "
                                                        "has the name given in `phase`")},
)
@api_view(["GET"])
def leaderboard_api(request: Request, slug: str) -> HttpResponse:
    view = _find_board(request, slug)
    task, phase, organiser = view.task, view.phase, view.organiser
    # The rendered JSON (and its gzip) is cached with the board, under a key that changes with
    # every score: a request is a cache read (no query for an anonymous reader, tasks.lookup), or
    # no body at all when the reader sends back the ETag it has.
    key = cachekeys.board_json(board_cache_key(task, phase, organiser, phases=view.phases))
    etag = f'"{hashlib.sha256(key.encode()).hexdigest()[:32]}"'
    if etag in parse_etags(request.headers.get("If-None-Match", "")):
        return _board_caching_headers(HttpResponseNotModified(), etag, organiser)
    # Each encoding under its own key: a reader fetches only the bytes it is sent (about 100 kB
    # gzipped for 500 runs, instead of that plus the 645 kB original).
    encoding = "gzip" if _ACCEPTS_GZIP.search(request.headers.get("Accept-Encoding", "")) else "identity"
    # The body under a key never changes (the key carries the scores' timestamp), so a process
    # may keep recent ones in memory and skip the shared cache too.
    body = _recent_bodies.get(f"{key}:{encoding}")
    if body is None:
        body = cache.get(f"{key}:{encoding}") or _json_bodies(task, phase, organiser, key)[encoding]
        _recent_bodies.put(f"{key}:{encoding}", body)
    response = HttpResponse(body, content_type="application/json")
    if encoding == "gzip":
        response["Content-Encoding"] = "gzip"
    return _board_caching_headers(response, etag, organiser)


def _json_bodies(task: Task, phase: Any, organiser: bool, key: str) -> dict[str, bytes]:
    """The board as JSON, plain and gzipped once, both stored in the shared cache."""
    board = get_board(task, phase, organiser)
    plain = orjson.dumps({
        "task": task.slug, "title": task.title, "phase": phase.name if phase else None,
        "gold_version": board.gold_version, "scope": board.scope, "kind": task.kind,
        "note": board.hidden_reason or None,
        # What each key in the runs' scores means, and which way is better (ranks follow it).
        "measures": [column.public() for column in board.columns],
        "settings": board.settings, "settings_differ": board.settings_differ,
        "settings_described": [{"label": label, "value": value}
                               for label, value in task.kind_impl.describe_settings(board.settings)],
        "versions_described": [{"label": label, "value": value}
                               for label, value in task.kind_impl.describe_versions(board.settings)],
        "runs": [{**{field: row[field] for field in ("id", "team", "name", "description", "is_baseline", "priority",
                                                     "submitted_at", "scores", "ranks")},
                  "late": row.get("late", False)} for row in board.rows],
    })
    bodies = {"identity": plain, "gzip": gzip.compress(plain, compresslevel=6, mtime=0)}
    cache.set_many({f"{key}:{name}": value for name, value in bodies.items()}, CACHE_SECONDS)
    return bodies


_ACCEPTS_GZIP = re.compile(r"\bgzip\b")


class _RecentBodies:
    """A few recent immutable response bodies per process, least recently used dropped first."""

    def __init__(self, size: int) -> None:
        self.size, self.items, self.lock = size, OrderedDict[str, bytes | str](), threading.Lock()

    def get(self, key: str) -> bytes | str | None:
        with self.lock:
            body = self.items.get(key)
            if body is not None:
                self.items.move_to_end(key)
            return body

    def put(self, key: str, body: bytes | str) -> None:
        with self.lock:
            self.items[key] = body
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)


_recent_bodies = _RecentBodies(16)  # at most 16 x 645 kB for boards of 500 runs
_recent_sections = _RecentBodies(32)  # rendered board sections (str), ~200 kB for 500 runs


def _board_caching_headers(response: HttpResponse, etag: str, organiser: bool) -> HttpResponse:
    """Readers may keep the body but must ask again each time (a new score shows at once); an
    organiser's board, which lists hidden runs, is never kept by shared caches."""
    response["ETag"] = etag
    response["Cache-Control"] = f"{'private' if organiser else 'public'}, no-cache"
    patch_vary_headers(response, ("Accept-Encoding", "Authorization", "Cookie"))
    return response


@extend_schema(summary="Public tasks", responses={200: OpenApiTypes.OBJECT})
@api_view(["GET"])
def tasks_api(request: Request) -> Response:
    tasks = [task for task in Task.objects.all() if task.is_public or task.is_organiser(request.user)]
    return Response({"tasks": [{"slug": task.slug, "title": task.title, "description": task.description,
                                "kind": task.kind, "config": task.config,
                                "leaderboard": request.build_absolute_uri(f"/api/v1/tasks/{task.slug}/leaderboard/")}
                               for task in tasks]})


# Statistics ---------------------------------------------------------------------------------


def board_breakdown(task: Task, board: Board) -> dict[str, Any] | None:
    """The kind's run-level breakdown (the response kind: mean nugget score per dialogue act) of
    every run on the board, on the board's scope and gold version: one query reading only that
    key of each score's details."""
    spec = task.kind_impl.detail_breakdown
    if spec is None or not board.rows or board.gold_version_id is None:
        return None
    found = dict(Score.objects.filter(run_id__in=[row["id"] for row in board.rows], scope=board.scope,
                                      gold_version_id=board.gold_version_id)
                 .values_list("run_id", f"details__{spec[0]}"))
    labels = board.labels()
    rows = [(labels[row["id"]], found.get(row["id"]) or {}) for row in board.rows]
    labels = sorted({label for _, values in rows for label in values})
    if not labels:
        return None
    shown = [(name, values) for name, values in rows if values]
    # One row per label (act) and a column per run: a dozen acts as columns did not fit a 1366 px
    # screen, while a board's runs are usually fewer, and the act stays in view as the runs scroll.
    return {"title": spec[1], "note": spec[2], "labels": labels, "runs": [name for name, _ in shown],
            "rows": [(name, [values.get(label) for label in labels]) for name, values in shown],
            "by_label": [(label, [values.get(label) for _, values in shown]) for label in labels]}


def settings_lines(task: Task, board: Board) -> dict[str, Any]:
    """The scoring settings of a board in the kind's words, and which ones differ between its runs."""
    return {"shared": task.kind_impl.describe_settings(board.settings), "differ": board.settings_differ,
            "versions": task.kind_impl.describe_versions(board.settings)}


# At most this many curves share one ASL chart: each has its own colour (series_style), so that
# a reader can tell them apart; a group with more measures is drawn in several charts.
