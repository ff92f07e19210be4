"""The leak probe: no test-phase score before publication on any board path with any
``?phase=`` value, numbers compared in every printed form.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from devtools.workers.web import call

# Leak probe --------------------------------------------------------------------------------------

LEAK_PROBE_MEASURE = "quality.A.rsnod"
_NUMBER_TOKEN = re.compile(r"\d+\.\d+(?:[eE][-+]?\d+)?")


def leak_probe_phase_values(phase_names: list[str]) -> dict[str, tuple[str | None, bool]]:
    """``?phase=`` query strings by class: (query, whether it names a phase). A known name in
    percent-encoding is still that name; anything else must be a 404."""
    first = phase_names[0] if phase_names else "test"
    values: dict[str, tuple[str | None, bool]] = {"absent": (None, True), "empty": ("phase=", True)}
    for name in phase_names:
        values[f"known {name}"] = (f"phase={quote(name, safe='')}", True)
        values[f"percent-encoded {name}"] = ("phase=" + "".join(f"%{byte:02X}" for byte in name.encode()), True)
        for variant in {name.upper(), name.capitalize(), name.lower(), f" {name}", f"{name} ", f"{name}\n",
                        name[:1] + "\x00" + name[1:]} - set(phase_names):
            values[f"variant {variant!r}"] = (f"phase={quote(variant, safe='')}", False)
    values.update({
        "unknown": ("phase=bogus-phase", False), "NUL": ("phase=%00", False), "whitespace": ("phase=%20%09", False),
        # Decoded once by the server: "%74est" for "test", which is no phase's name.
        "double-encoded": (f"phase=%25{ord(first[0]):02X}{quote(first[1:], safe='')}", False),
        "unicode": ("phase=" + quote(first + "\u00e9", safe=""), False),
        "fullwidth": ("phase=" + quote("".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in first),
                                       safe=""), False),
        "very long": ("phase=" + "x" * 3000, False),
        "repeated, last unknown": (f"phase={quote(first, safe='')}&phase=bogus-phase", False),
    })
    return values


def leak_probe_paths(slug: str, measure: str = LEAK_PROBE_MEASURE) -> list[str]:
    """Every path that builds a board or serves data derived from one and takes ``?phase=``."""
    stats = f"/tasks/{slug}/statistics"
    return [f"/tasks/{slug}/", f"/tasks/{slug}/leaderboard.csv", f"/api/v1/tasks/{slug}/leaderboard/",
            f"{stats}/", f"{stats}/{measure}/pvalues/", f"{stats}/all/means.tex",
            *(f"{stats}/{measure}/{kind}" for kind in ("matrix.csv", "matrix.txt", "runs.txt", "pvalues.txt",
                                                        "pvalues.csv"))]


def number_forms(value: float, rounded: bool = True) -> set[str]:
    """How the server writes a number: ``repr`` (JSON, CSV, exports) and, if ``rounded``, 4 decimals
    (pages, LaTeX; Python's rounding and Django's ``floatformat``, which rounds the decimal repr
    half up)."""
    from decimal import ROUND_HALF_UP, Decimal

    forms = {f"{value:.4f}", str(Decimal(repr(value)).quantize(Decimal("0.0001"), ROUND_HALF_UP))} if rounded \
        else set()
    text = repr(value)
    if len(text) >= 8:  # "0.5" occurs in any page
        forms.add(text)
    return {form for form in forms if not form.endswith("00")}


def leak_probe(base_url: str, slug: str, phase_names: list[str], forbidden_numbers: Iterable[float],
               allowed_numbers: Iterable[float] = (), token: str | None = None,
               forbidden_exact: Iterable[float] = ()) -> list[str]:
    """Ask every board path of a task (``leak_probe_paths``) with every class of ``?phase=`` value
    (``leak_probe_phase_values``) as an anonymous reader (or with ``token``, which only the API
    reads) and return the problems: a 5xx, a value that names no phase answered otherwise than
    404, or a body holding a forbidden number in one of its written forms (``number_forms``:
    ``forbidden_exact`` ones, per-dialogue scores, only as ``repr``, since thousands of them
    rounded to 4 decimals would match any page; forms an allowed number shares are not searched).
    Empty: no leak."""
    allowed = {form for value in allowed_numbers for form in number_forms(value)}
    forbidden: dict[str, float] = {}
    for values, rounded in ((forbidden_numbers, True), (forbidden_exact, False)):
        for value in values:
            for form in number_forms(value, rounded) - allowed:
                forbidden.setdefault(form, value)
    problems = []
    for path in leak_probe_paths(slug):
        for label, (query, names_a_phase) in leak_probe_phase_values(phase_names).items():
            url = f"{base_url}{path}" + (f"?{query}" if query else "")
            reply = call(url, token, accept="*/*")
            shown = f"GET {path}" + (f"?{query[:60]}" if query else "") + f" ({label})"
            if reply.status == 0 or reply.status >= 500:
                problems.append(f"{shown}: {reply.status} {reply.body[:120]!r}")
            if not names_a_phase and reply.status != 404:
                problems.append(f"{shown}: {reply.status} instead of 404 for a phase that does not exist")
            body = (gzip.decompress(reply.body) if reply.headers.get("content-encoding") == "gzip"
                    else reply.body).decode("utf-8", errors="replace")
            leaked = sorted(set(_NUMBER_TOKEN.findall(body)) & forbidden.keys())
            if leaked:
                problems.append(f"{shown}: {reply.status} with {len(leaked)} forbidden number(s), e.g. "
                                f"{leaked[0]} ({forbidden[leaked[0]]!r})")
    return problems


def forbidden_test_numbers(slug: str) -> tuple[list[float], list[float], list[float]]:
    """(forbidden means, forbidden per-dialogue scores, allowed numbers) of a task for an anonymous
    reader, from the database (needs Django set up): on a test gold whose results are not
    published, every whole-set mean and every per-dialogue score; the numbers of hidden runs;
    everything else (and every stored statistic but the means) is allowed. The first two go to
    ``leak_probe`` as ``forbidden_numbers`` and ``forbidden_exact``."""
    from tasks import access
    from tasks.models import Score, ScoreVector, Task

    task = Task.objects.get(slug=slug)
    phases = access.task_phases(task.pk)
    hidden_golds = {phase.gold_version_id for phase in phases
                    if access.test_results_hidden(phases, phase.gold_version_id)}
    forbidden: list[float] = []
    per_dialogue: list[float] = []
    allowed: list[float] = []

    def secret(run: Any, gold_version_id: int, whole_set_or_dialogue: bool) -> bool:
        return ((not run.is_baseline and not run.is_public)
                or (gold_version_id in hidden_golds and whole_set_or_dialogue))

    for score in Score.objects.filter(run__task=task).select_related("run"):
        (forbidden if secret(score.run, score.gold_version_id, score.scope == Score.FULL)
         else allowed).extend(float(v) for v in score.summary.get("measures", {}).values())
    for vector in ScoreVector.objects.filter(score__run__task=task).select_related("score__run"):
        (per_dialogue if secret(vector.score.run, vector.score.gold_version_id, True)
         else allowed).extend(vector.array().tolist())
    allowed += statistics_numbers(task)
    return forbidden, per_dialogue, allowed


def statistics_numbers(task: Any) -> list[float]:
    """Every stored statistic of a task but the means (intervals, deltas, tau...), which pages round
    to 4 decimals too: a probe must not take them for scores. Means are left out on purpose: a
    stale record's means are the very scores a probe looks for."""
    from leaderboard.models import TaskStatistics

    found: list[float] = []

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for name, item in value.items():
                walk(item, name)
        elif isinstance(value, list) and key != "means":
            for item in value:
                walk(item, key)
        elif isinstance(value, float):
            found.append(value)

    for record in TaskStatistics.objects.filter(task=task).prefetch_related("measures"):
        walk(record.meta)
        for measure in record.measures.all():
            walk(measure.summary)
            for matrix in measure.matrices(record.permutations).values():
                # Pages print negative differences too; the probe reads numbers without their sign.
                found += [abs(value) for value in matrix.ravel().tolist()]
    return found
