"""A run's pages: where it stands on the board its reader may see, its scores by measure group,
every per-item score (sortable, paginated, as CSV) and two runs compared item by item.

Here and not in ``tasks``: a run's standing is read from its board, and boards live in this layer
(``tasks`` never imports the leaderboard). Who may see what is ``tasks.access`` throughout.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

import numpy as np
import orjson
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from leaderboard.board import run_standing
from leaderboard.charts import line_chart, scatter
from scoring import exports
from scoring.kinds import MeasureGroup, MeasureSpec, grouped
from tasks import access
from tasks.api import details_payload, run_data
from tasks.late import late_sentence, uploader_sentence
from tasks.models import Run, Score
from tasks.runfiles import download_name
from tasks.runlinks import RunLinksForm
from tasks.submissions import identical_runs
from tasks.views import withdrawal_undo_until


@require_GET
def run_page(request: HttpRequest, run_id: int) -> HttpResponse:
    """A run's page: everything of its own to its team (and the task's organisers), before and
    after publication, with the file to download and its links to edit; to anybody else, once its
    scores are public (``tasks.access.run_is_public``), its method, links, scores, where it stands
    and its per-item scores where the task's rules give them; 404 otherwise."""
    # Who reads the page and what they may see, resolved once and passed to every rule below.
    run, reader = access.read_run_page(request.user, run_id)
    role, phases = reader.role, reader.phases
    per_item = None
    score = access.readable_per_item(run, reader, role, phases)
    if score is not None:
        per_item = per_item_table(score, request.GET)
        _log_per_item(request, run, score, phases, "per-item scores")
    data = run_data(run, reader, phases)
    standing = run_standing(reader, run, phases)
    own = role == access.OWN
    run_settings = (data["scores"] or {}).get("settings") or {}
    member = own and access.is_member(reader, run)
    return render(request, "tasks/run.html", {
        "run": run, "data": data, "per_item": per_item, "score_groups": score_groups(run, data["scores"]),
        "score_intervals": score_intervals(run, data["scores"]),
        "public_view": not own, "member": member,
        "breakdown": breakdown(run, access.visible_score(run, reader, phases)),
        "segments": item_segments(run, score, request.GET, access.references_rule(run, reader, role, phases))
        if score is not None else None,
        "settings": {"shared": run.task.kind_impl.describe_settings(run_settings), "differ": [],
                     "versions": run.task.kind_impl.describe_versions(run_settings)},
        "standing": _standing_rows(standing),
        "comparable": comparable_runs(run, reader if own else reader.real, score.scope) if score is not None else [],
        "finished": run.status not in Run.UNFINISHED,
        "queue_ahead": _queue_ahead(run),
        "statistics_wait": _statistics_wait(run, standing),
        "undo_until": withdrawal_undo_until(run) if run.is_withdrawn else None,
        "identical": identical_runs(run) if own else [],
        "links_form": RunLinksForm(instance=run) if member else None,
        "public_page": own and access.run_is_public(run, phases),
        "late_note": late_sentence(run), "uploader_note": uploader_sentence(run) if own else "",
        # The gold moved under the run after it was submitted: its scores are on the new version.
        "gold_notes": run.phase.gold_change_notes(since=run.created_at) if run.phase_id else []})


def _queue_ahead(run: Run) -> int | None:
    """How many runs wait for scoring before this queued one (oldest first, as the workers take
    them); None unless it is queued."""
    if run.status != Run.QUEUED:
        return None
    # In the order the background worker takes them (tasks.worker.next_run): oldest first, then by id.
    return Run.objects.filter(Q(queued_at__lt=run.queued_at) | Q(queued_at=run.queued_at, pk__lt=run.pk),
                              status=Run.QUEUED).count()


def _statistics_wait(run: Run, standing: dict[str, Any] | None) -> dict[str, str] | None:
    """A scored run's board whose statistics are being computed again (with it): the sentence and
    the status URL the page's script polls; None when nothing is under way."""
    from leaderboard.scheduling import board_status
    from leaderboard.statistics_pages import statistics_wait

    if run.status != Run.DONE or not standing or standing.get("hidden") or "board" not in standing:
        return None
    phase = standing["phase"]
    message = statistics_wait(board_status(run.task_id, phase.pk if phase else None))
    if not message:
        return None
    query = f"?phase={quote(phase.name)}" if phase else ""
    return {"message": message, "url": reverse("statistics-status", args=[run.task.slug]) + query,
            "page": reverse("statistics-page", args=[run.task.slug]) + query}


# Shades of a value in [0, 1] (nugget scores): five steps of a diverging orange-to-purple scale that
# colour-blind readers tell apart (ColorBrewer PuOr), each step's text colour chosen for contrast.
SEGMENT_STEPS = 5
SEGMENTS_PER_PAGE = 20


def breakdown(run: Run, score: Score | None) -> dict[str, Any] | None:
    """The kind's run-level breakdown (the response kind: mean NS per dialogue act) of the score
    the reader may see, lowest first."""
    spec = run.task.kind_impl.detail_breakdown
    if score is None or spec is None:
        return None
    values = (score.details or {}).get(spec[0])
    if not values:
        return None
    return {"title": spec[1], "note": spec[2], "rows": sorted(values.items(), key=lambda item: (item[1], item[0]))}


def item_segments(run: Run, score: Score, query: Any, references: tuple[bool, str] = (False, "")
                  ) -> dict[str, Any] | None:
    """Each item's details as shaded segments (nuggets by NS), 20 items a page, in the data's
    order or lowest-scoring segment first (``?segments=lowest``); None for kinds with none. Each
    item of the page also carries what it answers and, where ``references`` (``references_rule``:
    whether the reader sees the gold, and if not who does) allows, what it was scored against
    (``Kind.item_context``)."""
    kind, details = run.task.kind_impl, score.details or {}
    gold, indices, ids = item_ids(score)
    items = [(item, kind.item_segments(details, item), index) for item, index in zip(ids, indices, strict=True)]
    items = [entry for entry in items if entry[1]]
    if not items:
        return None
    lowest = query.get("segments") == "lowest"
    if lowest:
        items.sort(key=lambda entry: min(segment["value"] for segment in entry[1]))
    page = Paginator(items, SEGMENTS_PER_PAGE).get_page(query.get("segments_page"))
    shown = []
    for item, segments, index in page:
        for segment in segments:
            segment["step"] = min(SEGMENT_STEPS - 1, max(0, int(segment["value"] * SEGMENT_STEPS)))
        shown.append(_item_html(item, segments, kind.item_context(gold, index, references[0])))

    def link(**changes: Any) -> str:
        params = {"segments": "lowest" if lowest else "", **changes}
        return "?" + urlencode({key: value for key, value in params.items() if value}) + "#segments"

    return {"page": page, "items": shown, "lowest": lowest, "total": len(items), "noun": run.task.item_noun,
            "references": references[0], "references_note": references[1],
            "order_link": link(segments="" if lowest else "lowest"),
            "previous": link(segments_page=page.previous_page_number()) if page.has_previous() else "",
            "next": link(segments_page=page.next_page_number()) if page.has_next() else "",
            "steps": [(step, f"{step / SEGMENT_STEPS:.1f}–{(step + 1) / SEGMENT_STEPS:.1f}")
                      for step in range(SEGMENT_STEPS)]}


def _item_html(item: str, segments: list[dict[str, Any]], context: list[tuple[str, str]]) -> SafeString:
    """One item of the nugget list: its shaded segments and a "Why" that opens on a touch screen
    (each nugget's act, score and the parts of the score in words; the context and references).
    Built here rather than in the template: rendering the same markup with template tags made
    the run page half as slow again (20 items with their nuggets, twice)."""
    shaded = format_html_join(" ", '<span class="seg seg-{}" title="{}">{}</span>',
                              ((part["step"], part["title"], part["text"]) for part in segments))
    why = format_html_join("", '<li><span class="seg seg-{}">{}</span> <strong>{}</strong>, NS {}{}.</li>',
                           ((part["step"], part["text"], part["label"], f"{part['value']:.4f}",
                             ": " + "; ".join(part["reasons"]) if part.get("reasons") else "") for part in segments))
    lines = format_html('<dl class="context">{}</dl>', format_html_join("", "<dt>{}</dt><dd>{}</dd>", context)) \
        if context else ""
    return format_html('<span class="item-id">{}</span> {} \n<details class="why"><summary>Why</summary>\n'
                       '<ul class="nuggets">{}</ul>\n{}</details>', item, shaded, why, lines)


@require_GET
def run_details_json(request: HttpRequest, run_id: int) -> HttpResponse:
    """Everything the kind reports per item beside the numbers (nugget scores), as JSON: the
    per-item rule, like the per-item table and its CSV."""
    run, reader = access.read_run_page(request.user, run_id)
    phases = reader.phases
    score = access.readable_per_item(run, reader, reader.role, phases)
    if score is None:
        raise Http404("no per-item details of this run are visible to you")
    _log_per_item(request, run, score, phases, "per-item details")
    body = orjson.dumps(details_payload(run, score))
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-{download_name(run.name, 60)}-details.json"'
    return response


def _log_per_item(request: HttpRequest, run: Run, score: Score, phases: list[Any], what: str) -> None:
    if access.per_item_is_logged(run, phases):
        # Gold-derived data that only organisers may see yet: the access log says who did.
        access.log_access(request, run.task, f"{what} of run #{run.pk} ({run.label[:100]}, "
                                             f"gold v{score.gold_version.number})")


MAX_BASELINE_COLUMNS = 3


def _standing_rows(standing: dict[str, Any] | None) -> dict[str, Any] | None:
    """Where the run stands, split into the official measures and the others (the board's view)."""
    if standing is None or "measures" not in standing:
        return standing
    measures = standing["measures"]
    official = [entry for entry in measures if entry["spec"].official]
    baselines = list(dict.fromkeys(baseline["name"] for entry in measures for baseline in entry["baselines"]))
    for entry in measures:
        by_name = {baseline["name"]: baseline for baseline in entry["baselines"]}
        entry["against"] = [by_name.get(name) for name in baselines]
    return {**standing, "official": official or measures,
            "others": [entry for entry in measures if entry not in official] if official else [],
            # Beyond a few baselines (the metric kind builds seven) one column lists them all.
            "baseline_names": baselines, "many_baselines": len(baselines) > MAX_BASELINE_COLUMNS}


def score_groups(run: Run, summary: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A run's figures as the kind groups its measures: per group either a subgroups x names
    table (DQ: dimensions x measures) or one row of measures, each with its direction."""
    if not summary:
        return []
    values = summary.get("measures", {})
    specs = run.task.measure_specs(run.gold_version.measure_keys if run.gold_version_id else None)
    groups = []
    for group in grouped([spec for spec in specs if values.get(spec.key) is not None]):
        names = group.names
        if group.subgroups:
            # A measure of the whole group beside its subgroups (the metrics track's mean over
            # dimensions) is a row of its own above the table, not an empty column of it.
            whole = [spec for spec in group.measures if not spec.subgroup]
            if whole:
                groups.append({"title": group.title, "measures": whole, "rows": [("", [values[spec.key]
                                                                                        for spec in whole])],
                               "specs": whole})
            parts = MeasureGroup(group.name, group.title, [spec for spec in group.measures if spec.subgroup])
            names = parts.names
            by_cell = {(spec.subgroup, spec.name): values[spec.key] for spec in parts.measures}
            rows = [(f"{name} ({title})" if title and title != name else name,
                     [by_cell.get((name, spec.name)) for spec in names]) for name, title in group.subgroups]
            groups.append({"title": group.title, "measures": names, "rows": rows, "specs": parts.measures})
            continue
        rows = [("", [values[spec.key] for spec in names])]
        groups.append({"title": group.title, "measures": names, "rows": rows, "specs": group.measures})
    return groups


def score_intervals(run: Run, summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """The run-level intervals a kind stores in its summary (the metrics track's: ``intervals``,
    ``interval_labels`` saying what each estimates, ``interval_notes`` why a figure has none), in
    the kind's measure order; None when the summary has none."""
    if not summary or not summary.get("intervals"):
        return None
    values, intervals = summary.get("measures", {}), summary["intervals"]
    labels, notes = summary.get("interval_labels", {}), summary.get("interval_notes", {})
    rows, without = [], []
    for spec in run.task.measure_specs(run.gold_version.measure_keys if run.gold_version_id else None):
        value = values.get(spec.key)
        if value is None:
            continue
        interval = intervals.get(spec.key)
        if interval is not None:
            rows.append({"spec": spec, "value": value, "low": interval[0], "high": interval[1],
                         "label": labels.get(spec.key, "")})
        elif spec.key in notes:
            without.append({"spec": spec, "value": value, "note": notes[spec.key]})
    return {"rows": rows, "without": without} if rows or without else None


# Per-item scores ------------------------------------------------------------------------------

PER_ITEM_PAGE = 100


def item_ids(score: Score) -> tuple[Any, list[int], list[str]]:
    """The compiled gold of a score, the gold indices of its items and their ids, in the order
    of its per-item vectors (the live subset's items for a live score)."""
    gold = score.gold_version.load()
    indices = list(range(len(gold.item_ids)))
    if score.scope == Score.LIVE and score.run.phase_id:
        subset = score.run.phase.live_subset()
        if subset is not None:
            indices = subset.tolist()
    return gold, indices, [gold.item_ids[i] for i in indices]


def _vectors(score: Score) -> tuple[list[MeasureSpec], dict[str, np.ndarray]]:
    vectors = {vector.key: vector.array() for vector in score.vectors.all()}
    return [spec for spec in score.run.task.measure_specs() if spec.key in vectors], vectors


def best_first(values: np.ndarray, spec: MeasureSpec, worst: bool = False) -> np.ndarray:
    """Item positions best first in the measure's direction (worst first if asked); ties keep
    the gold's order."""
    oriented = -values if spec.higher_is_better else values
    return np.argsort(-oriented if worst else oriented, kind="stable")


def per_item_table(score: Score, query: Any) -> dict[str, Any]:
    """One page of a run's per-item scores: every item of the score (not a first few), sorted on
    the server by a measure (best or worst first, in its direction) or in the gold's order, the
    official measures by default and every one with ``show=all``."""
    gold, indices, ids = item_ids(score)
    specs, vectors = _vectors(score)
    official = [spec for spec in specs if spec.official]
    show = "all" if query.get("show") == "all" or not official else ""
    shown = specs if show else official
    sort_spec = next((spec for spec in specs if spec.key == query.get("sort")), None)
    if sort_spec is not None and sort_spec not in shown:
        shown, show = specs, "all"  # a link sorted by a measure the default leaves out shows them all
    worst = query.get("order") == "worst"
    order = best_first(vectors[sort_spec.key], sort_spec, worst) if sort_spec else np.arange(len(ids))
    page = Paginator(range(len(ids)), PER_ITEM_PAGE).get_page(query.get("page"))
    positions = order[page.start_index() - 1:page.end_index()].tolist() if ids else []
    kind = score.run.task.kind_impl
    rows = [{"id": ids[k], "about": kind.describe_item(gold, indices[k]),
             "values": [float(vectors[spec.key][k]) for spec in shown]} for k in positions]
    sort_key = sort_spec.key if sort_spec else ""

    def link(**changes: Any) -> str:
        params = {"sort": sort_key, "order": "worst" if worst else "", "show": show, **changes}
        return "?" + urlencode({name: value for name, value in params.items() if value}) + "#per-item"

    return {"measures": shown, "rows": rows, "total": len(ids), "noun": score.run.task.item_noun, "page": page,
            "sort": sort_key, "worst": worst, "show": show, "has_unofficial": 0 < len(official) < len(specs),
            "columns": [(spec, link(sort=spec.key, order="worst" if spec.key == sort_key and not worst else "",
                                    page="")) for spec in shown],
            "gold_order": link(sort="", order="", page=""),
            # Back to the official measures keeps the sort only if its measure is one of them.
            "toggle": link(show="" if show else "all", page="",
                           sort=sort_key if not show or sort_spec is None or sort_spec.official else ""),
            "previous": link(page=page.previous_page_number()) if page.has_previous() else "",
            "next": link(page=page.next_page_number()) if page.has_next() else "",
            "scope": score.scope}


@require_GET
def run_items_csv(request: HttpRequest, run_id: int) -> HttpResponse:
    """Every per-item score of a run the user may see, in the gold's order, one column per measure key."""
    run, reader = access.read_run_page(request.user, run_id)
    phases = reader.phases
    score = access.readable_per_item(run, reader, reader.role, phases)
    if score is None:
        raise Http404("no per-item scores of this run for you: it has none yet, or they are not shown "
                      "(on test data they come with the published results)")
    _, _, ids = item_ids(score)
    specs, vectors = _vectors(score)
    rows: list[list[Any]] = [[f"{run.task.item_noun}_id", *(spec.key for spec in specs)]]
    rows += [[item, *(float(vectors[spec.key][k]) for spec in specs)] for k, item in enumerate(ids)]
    _log_per_item(request, run, score, phases, "per-item scores CSV")
    response = HttpResponse(exports.csv_text(rows), content_type="text/csv; charset=utf-8")
    name = download_name(f"{run.task.slug}-run{run.pk}-{run.name}", 120)
    response["Content-Disposition"] = f'attachment; filename="{name}-{score.scope}-items.csv"'
    return response


MAX_COMPARABLE = 200


def comparable_runs(run: Run, reader: access.Reader, scope: str | None) -> list[Run]:
    """Runs ``reader`` may compare with ``run`` item by item: every other scored run of the task on
    the same gold version whose per-item scores on the same scope (``scope``, the one the reader
    reads of ``run``) the reader may see (``tasks.access.readable_per_item_scope``, the run page's
    rule): the reader's team's runs, other teams' public runs and the baselines where the task's
    rules show their per-item scores, every run for the task's organisers. The reader's own runs
    first, then the baselines, then the others, newest first in each."""
    if scope is None:
        return []
    runs = Run.objects.filter(task_id=run.task_id, status=Run.DONE, gold_version_id=run.gold_version_id,
                              withdrawn_at__isnull=True).exclude(pk=run.pk).select_related(
        "task", "team", "phase", "gold_version").order_by("-created_at", "-pk")
    found = [other for other in runs if access.readable_per_item_scope(other, reader, reader.phases) == scope]
    found.sort(key=lambda other: (not access.is_member(reader, other), not other.is_baseline))
    return found[:MAX_COMPARABLE]


NOT_COMPARABLE = "no such run to compare with in this task"


@require_GET
def run_compare(request: HttpRequest, run_id: int) -> HttpResponse:
    """Two runs item by item on one measure: a scatter of their per-item scores and the sorted
    differences. Each run is one whose page the reader may open (``tasks.access.read_run_page``:
    their team's, the organisers', or a public one) and whose per-item scores the reader may see
    there (``readable_per_item``), on the same gold and scope; a run the reader may not open is a
    404, as on its page, whichever position it takes."""
    run, page_reader = access.read_run_page(request.user, run_id)
    phases = page_reader.phases
    # The run page's reader of a public run reads as anybody; the chooser and the second run are
    # read as the user is (a team's own runs beside another team's public run).
    reader = page_reader if page_reader.role == access.OWN else page_reader.real
    first = access.readable_per_item(run, page_reader, page_reader.role, phases)
    context: dict[str, Any] = {"run": run, "comparable": comparable_runs(run, reader, first and first.scope)}
    other_id = request.GET.get("with", "")
    if not other_id:
        return render(request, "tasks/compare.html", {**context, "choose": True, "readable": first is not None})
    if not other_id.isascii() or not other_id.isdigit() or len(other_id) > 18:
        raise Http404("no such run to compare with: ?with= takes a run id")
    other = Run.objects.select_related("task", "team", "phase", "gold_version").filter(
        pk=int(other_id), task_id=run.task_id).exclude(pk=run.pk).first()
    role = access.run_role(reader, other) if other is not None else ""
    if not role:
        raise Http404(NOT_COMPARABLE)
    second = access.readable_per_item(other, reader, role, phases)
    context["other"] = other
    scores = (first, second)
    if first is None or second is None:
        missing = " and ".join(item.label for item, score in zip((run, other), scores, strict=True) if score is None)
        context["problem"] = (f"The per-item scores of both runs are needed, and those of {missing} are not "
                              "available to you (on test data they come with the published results).")
        return render(request, "tasks/compare.html", context)
    if first.gold_version_id != second.gold_version_id or first.scope != second.scope:
        context["problem"] = "The two runs were scored on different gold data or different items: nothing to pair."
        return render(request, "tasks/compare.html", context)
    for item, score, partner in ((run, first, other), (other, second, run)):
        _log_per_item(request, item, score, phases, f"per-item comparison with run #{partner.pk}")
    context.update(compare_runs(first, second, request.GET.get("measure", "")))
    return render(request, "tasks/compare.html", context)


def compare_runs(first: Score, second: Score, measure: str) -> dict[str, Any]:
    """The comparison of two scores on the same items: on one measure (the first official one by
    default), per item which run is better in the measure's direction, the scatter and the sorted
    differences (positive: the first run better), and the items where they differ most."""
    gold, indices, ids = item_ids(first)
    specs, vectors = _vectors(first)
    _, others = _vectors(second)
    specs = [spec for spec in specs if spec.key in others]
    spec = next((item for item in specs if item.key == measure), None) or next(
        (item for item in specs if item.official), specs[0] if specs else None)
    if spec is None:
        return {"problem": "The two runs have no measure in common."}
    a, b = vectors[spec.key], others[spec.key]
    sign = 1.0 if spec.higher_is_better else -1.0
    advantage = sign * (a - b)  # positive where the first run is better on the item
    categories = np.where(advantage > 0, 0, np.where(advantage < 0, 1, 2)).tolist()
    first_name, second_name = first.run.label, second.run.label
    order = np.argsort(-advantage, kind="stable")
    kind = first.run.task.kind_impl

    def items(positions: Any) -> list[dict[str, Any]]:
        return [{"id": ids[k], "about": kind.describe_item(gold, indices[k]), "a": float(a[k]), "b": float(b[k]),
                 "advantage": float(advantage[k])} for k in positions]

    low, high = spec.value_range
    both = np.concatenate([a, b])
    value_range = (max(low, float(both.min())), min(high, float(both.max())))
    spread = float(np.abs(advantage).max()) or 1.0
    return {
        "spec": spec, "specs": specs, "n": len(ids), "noun": first.run.task.item_noun,
        "first_better": int((advantage > 0).sum()), "second_better": int((advantage < 0).sum()),
        "ties": int((advantage == 0).sum()), "mean_a": float(a.mean()), "mean_b": float(b.mean()),
        "mean_advantage": float(advantage.mean()), "scope": first.scope,
        "scatter": scatter(a, b, labels=ids, categories=categories,
                           category_names=[f"{first_name} better", f"{second_name} better", "equal"],
                           x_label=first_name, y_label=second_name, value_range=value_range),
        "differences": line_chart([(f"{first_name} minus {second_name}, oriented", advantage[order].tolist())],
                                  y_range=(-spread, spread), x_label=f"{first.run.task.item_noun}s sorted by the "
                                  "difference", y_label="advantage of the first run",
                                  references=[(0.0, "no difference")]),
        "most_first": items(order[:10][advantage[order[:10]] > 0]),
        "most_second": items(order[::-1][:10][advantage[order[::-1][:10]] < 0]),
    }
