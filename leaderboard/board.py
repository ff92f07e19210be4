"""The leaderboard of a task: which runs, which scores, ranks; cached until a score changes."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db.models import Q

from scoring.exports import whitespace_free
from scoring.kinds import MeasureGroup, MeasureSpec, grouped
from tasks import access, cachekeys
from tasks.models import GoldVersion, Phase, Run, Score, Task

CACHE_SECONDS = cachekeys.BOARD_SECONDS


@dataclass
class Board:
    task_id: int
    phase_id: int | None
    gold_version: int | None
    scope: str
    gold_version_id: int | None = None
    hidden_reason: str = ""
    # The measures of the gold version the board shows, in the kind's order (``MeasureSpec``:
    # key, titles, direction, group); every rank, sort and mark follows each one's direction.
    columns: list[MeasureSpec] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    item_noun: str = "item"
    # The scoring settings every run on the board was scored with (``Scored.settings``: variant,
    # aggregation, ...), and the keys whose values differ between its runs (each run's own are in
    # its scores).
    settings: dict[str, Any] = field(default_factory=dict)
    settings_differ: list[str] = field(default_factory=list)

    def groups(self) -> list[MeasureGroup]:
        return grouped(self.columns)

    def columns_for(self, group: str) -> list[MeasureSpec]:
        return [column for column in self.columns if column.group == group]

    def column(self, key: str) -> MeasureSpec | None:
        return next((column for column in self.columns if column.key == key), None)

    def labels(self) -> dict[int, str]:
        """Each run's label, unique on this board (``run_labels``)."""
        return run_labels(self.rows)


def run_labels(rows: Iterable[Mapping[str, Any]]) -> dict[int, str]:
    """The name every export, the p-value page and the charts give each run of ``rows`` (board
    rows: ``id``, ``team``, ``name``): "team/run", and where that repeats (a team may reuse a
    run name: the runs differ by id) "team/run (#id)", the number of the run's page
    (``/runs/<id>/``). Labels are compared as the whitespace-separated exports write them
    (``whitespace_free``), so "A/x y" and "A/x_y" are told apart there too. Only repeated
    labels get the number, so a board without repeats reads as before. A late run (submitted after
    its phase's end under its team's extension, ``tasks.late``) is "team/run (late)" everywhere
    its label goes: the LaTeX tables, Discpower's files and the p-value lists have no other mark."""
    plain = {row["id"]: f"{row['team']}/{row['name']}" + (" (late)" if row.get("late") else "") for row in rows}
    labels = dict(plain)
    numbered: set[int] = set()
    while True:
        holders: dict[str, list[int]] = {}
        for run_id, label in labels.items():
            holders.setdefault(whitespace_free(label), []).append(run_id)
        # A run name may itself end in " (#7)": a numbered label can then meet a plain one, which
        # gets its number in the next round. Two numbered labels never meet (they end in their
        # distinct ids), so every round numbers at least one more run and the loop ends.
        repeated = [run_id for ids in holders.values() if len(ids) > 1 for run_id in ids if run_id not in numbered]
        if not repeated:
            return labels
        for run_id in repeated:
            labels[run_id] = f"{plain[run_id]} (#{run_id})"
            numbered.add(run_id)


board_cache_key = cachekeys.board


def get_board(task: Task, phase: Phase | None = None, organiser: bool = False, preview: bool = False,
              phases: list[Phase] | None = None) -> Board:
    key = board_cache_key(task, phase, organiser, preview, phases)
    board = cache.get(key)
    if board is None:
        board = build_board(task, phase, organiser, preview, phases)
        cache.set(key, board, CACHE_SECONDS)
    return board


def build_board(task: Task, phase: Phase | None, organiser: bool, preview: bool = False,
                phases: list[Phase] | None = None) -> Board:
    """The board of ``phase`` (None: the phase-less board of a task without phases) as the public
    (``organiser`` False) or the task's organisers see it; ``tasks.access.board_rule`` decides
    its scope and whether it shows any run. ``preview``: the board of a test or final phase as
    the public will see it once its results are published (``tasks.access.preview_rule``; the
    caller checks the reader organises the task), with the runs the public sees. ``phases``: the
    task's phases where the caller has read them already."""
    phases = list(task.phases.all()) if phases is None else list(phases)
    if preview:
        scope, hidden_reason = access.preview_rule(phase)
        organiser = False
    else:
        scope, hidden_reason = access.board_rule(phases, phase, organiser)
    version: GoldVersion | None = phase.gold_version if phase else (None if phases else task.latest_gold())
    board = Board(task_id=task.pk, phase_id=phase.pk if phase else None,
                  gold_version=version.number if version else None, scope=scope,
                  gold_version_id=version.pk if version else None, hidden_reason=hidden_reason,
                  item_noun=task.item_noun)
    if hidden_reason:
        return board
    if version is None:
        board.hidden_reason = "No gold data has been loaded for this task yet."
        return board
    runs = Run.objects.filter(task=task, status=Run.DONE, gold_version=version, withdrawn_at__isnull=True)
    if phase is not None:
        # Baselines have no phase: every board shows those of its gold version.
        if phase.kind == Phase.FINAL:
            runs = runs.filter(Q(phase__gold_version=version, phase__kind__in=(Phase.TEST, Phase.FINAL))
                               | Q(is_baseline=True))
        else:
            runs = runs.filter(Q(phase=phase) | Q(is_baseline=True))
    if not organiser:
        runs = runs.filter(is_public=True) | runs.filter(is_baseline=True)
    runs = runs.select_related("team").order_by("pk")
    # Whether the rows link to their runs' pages: organisers (and their previews) open every run;
    # the public a run whose scores are public (the rule a run page follows: run_is_public), the
    # same for every row of a board since they share its phase's gold and publication.
    linked = organiser or preview or (task.is_public and access.scores_public(phases, phase, version.pk))
    scores = {score.run_id: score.summary for score in Score.objects.filter(
        run__in=runs, gold_version=version, scope=board.scope).only("run_id", "summary")}
    board.columns = task.measure_specs(version.measure_keys)
    for run in runs:
        summary = scores.get(run.pk)
        if summary is None:
            continue
        measures = summary.get("measures", {})
        values = {column.key: measures.get(column.key) for column in board.columns}
        board.rows.append({
            "id": run.pk, "team": run.team.name if run.team_id else "baseline", "name": run.name,
            "description": run.description, "is_baseline": run.is_baseline, "is_public": run.is_public,
            "priority": run.priority, "submitted_at": run.created_at.isoformat(), "linked": linked,
            "late": run.late,  # submitted after the phase's end under its team's extension (tasks.late)
            # The groups the run has scores in (a DQ-only run is not on the ND tab).
            "groups": sorted({column.group for column in board.columns if values[column.key] is not None}),
            "scores": summary, "values": values,
        })
    _rank(board)
    board.settings, board.settings_differ = common_settings([row["scores"].get("settings") or {}
                                                             for row in board.rows])
    return board


def common_settings(settings: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The settings shared by every run (in the order the first run lists them), and the keys whose
    values differ between runs (a task re-configured without re-scoring, say)."""
    keys = list(dict.fromkeys(key for entry in settings for key in entry))
    common, differ = {}, []
    for key in keys:
        values = {repr(entry.get(key)) for entry in settings}
        if len(values) == 1:
            common[key] = settings[0][key]
        else:
            differ.append(key)
    return common, differ


def _rank(board: Board) -> None:
    """Rank per measure: 1 + the number of runs strictly better in the measure's direction, so
    ties share a rank."""
    for column in board.columns:
        sign = -1.0 if column.higher_is_better else 1.0
        values = sorted(sign * row["values"][column.key] for row in board.rows if row["values"][column.key] is not None)
        for row in board.rows:
            value = row["values"][column.key]
            row.setdefault("ranks", {})[column.key] = (None if value is None
                                                       else bisect.bisect_left(values, sign * value) + 1)


def standing(board: Board, run_id: int, values: dict[str, float | None] | None = None) -> list[dict[str, Any]]:
    """Where a run stands on a board, per measure and in each measure's direction: its value, its
    rank (1 + the runs strictly better, as on the board), the number of runs ranked, the best value
    and how far the run is behind it, and its margin over each baseline (positive: better).

    A run on the board is read from its row; a run the board does not show (hidden by its team)
    is placed among the board's runs with ``values``, scores of the scope the board shows.
    """
    row = next((row for row in board.rows if row["id"] == run_id), None)
    own = row["values"] if row is not None else (values or {})
    others = [other for other in board.rows if other["id"] != run_id]
    measures = []
    for column in board.columns:
        value = own.get(column.key)
        if value is None:
            continue
        sign = 1.0 if column.higher_is_better else -1.0
        rivals = [other["values"][column.key] for other in others if other["values"].get(column.key) is not None]
        best = max([value, *rivals], key=lambda v: sign * v)
        baselines = [{"name": other["name"], "value": other["values"][column.key],
                      "margin": sign * (value - other["values"][column.key])}
                     for other in others if other["is_baseline"] and other["values"].get(column.key) is not None]
        measures.append({"spec": column, "value": value,
                         "rank": 1 + sum(1 for rival in rivals if sign * rival > sign * value),
                         "ranked": len(rivals) + 1, "best": best, "behind": sign * (best - value),
                         "baselines": baselines})
    return measures


def run_counts(board: Board, run_ids: list[int] | None = None, baselines: int | None = None,
               per_group: dict[str, int] | None = None) -> dict[str, Any]:
    """Which runs a count covers, so that every count on a page says so (a board said "over 8
    runs" beside a table of 7, a run page "among the 9 runs" and then "rank 3 of 8"): the runs
    (the board's rows, or ``run_ids`` of a stored computation), how many of them are baselines and
    participants' runs, and per measure group how many have its scores (a DQ-only run has no ND
    rank). ``baselines`` and ``per_group`` give what the board's rows cannot know (runs that left
    the board since a computation)."""
    rows = board.rows if run_ids is None else [row for row in board.rows if row["id"] in set(run_ids)]
    total = len(rows) if run_ids is None else len(run_ids)
    if baselines is None:
        baselines = sum(1 for row in rows if row["is_baseline"])
    if per_group is None:
        per_group = {group.name: sum(1 for row in rows if group.name in row["groups"]) for group in board.groups()}
    groups = [(group.title, per_group[group.name]) for group in board.groups() if group.name in per_group]
    return {"total": total, "baselines": baselines, "participants": total - baselines,
            # Named only when some group leaves runs out: "every group ranks all of them" needs no words.
            "groups": groups if any(count != total for _, count in groups) else []}


def boards_showing(task_id: int, run_ids: list[int]) -> list[int | None]:
    """The boards that may show any of the runs, by ``build_board``'s rules (phase ids; None: the
    phase-less board of a task without phases): a baseline is on every board of its gold version,
    a phase's run on its phase's board, and a test or final phase's run also on the final boards
    of that gold. Which runs a reader may see does not matter here: statistics are computed over
    what the public board shows, and a hidden run leaving it changes it."""
    phases = {phase.pk: phase for phase in Phase.objects.filter(task_id=task_id)}
    runs = list(Run.objects.filter(task_id=task_id, pk__in=run_ids).values_list("phase_id", "gold_version_id",
                                                                                "is_baseline"))
    if not phases:
        return [None] if runs else []
    shown: set[int] = set()
    for phase_id, version_id, is_baseline in runs:
        own = phases.get(phase_id) if phase_id is not None else None
        for phase in phases.values():
            if phase.gold_version_id != version_id:
                continue
            if is_baseline or phase.pk == phase_id:
                shown.add(phase.pk)
            elif (phase.kind == Phase.FINAL and own is not None and own.gold_version_id == version_id
                  and own.kind in (Phase.TEST, Phase.FINAL)):
                shown.add(phase.pk)
    return sorted(shown)


def run_standing(user: Any, run: Run, phases: list[Phase]) -> dict[str, Any] | None:
    """Where a run stands on the board of its phase, as this user may see that board (the public
    one for its team, the organisers' for organisers): None for a run that is on no board (not
    scored, withdrawn, or scored on another gold than its board shows); ``hidden`` with the reason
    while the board shows no run to this user; else ``standing`` per measure. A run its team hid
    from the public board is placed among that board's runs with its own score of the board's
    scope, which its team may see (``tasks.access.visible_score``)."""
    if run.status != Run.DONE or run.is_withdrawn or run.gold_version_id is None:
        return None
    task = run.task
    organiser = access.is_organiser(user, task)
    phase = run.phase if run.phase_id else None
    if phase is None and phases:
        return None  # a run from before the phases (or a baseline): only phase boards are shown
    board = get_board(task, phase, organiser, phases=phases)
    if board.hidden_reason:
        return {"board": board, "phase": phase, "hidden": board.hidden_reason}
    if board.gold_version_id != run.gold_version_id:
        return None
    on_board = any(row["id"] == run.pk for row in board.rows)
    values = None
    if not on_board:
        score = access.visible_score(run, user, phases)
        if score is None or score.scope != board.scope or score.gold_version_id != board.gold_version_id:
            return None
        values = score.summary.get("measures", {})
    return {"board": board, "phase": phase, "on_board": on_board, "scope": board.scope,
            "measures": standing(board, run.pk, values), "counts": run_counts(board)}


def headline_column(board: Board, group: str) -> MeasureSpec | None:
    """The measure a group's tab of the board is sorted by unless the reader picks another: its
    first official measure, or its first measure where the kind names none official."""
    every = board.columns_for(group)
    official = [column for column in every if column.official]
    return (official or every or [None])[0]


def sort_rows(rows: list[dict[str, Any]], column: MeasureSpec | None) -> list[dict[str, Any]]:
    """Rows best first on ``column`` (in its direction), runs without a value last, ties by id."""
    if column is None:
        return sorted(rows, key=lambda row: row["id"])
    sign = -1.0 if column.higher_is_better else 1.0
    return sorted(rows, key=lambda row: (row["values"].get(column.key) is None,
                                         sign * (row["values"].get(column.key) or 0.0), row["id"]))
