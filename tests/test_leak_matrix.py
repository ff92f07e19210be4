"""No test score leaks: every URL of the URL conf x every class of ``?phase=`` value x every role x
every phase state, searched for the numbers the privacy rules forbid.

The world: a task with a development phase (gold v1), a test phase with a live subset and a final
phase (both on the test gold v2), runs of three teams in each, public and hidden, two runs
uploaded before the phases existed (scored on the test gold, the latest then), and statistics
stored for every board (including a phase-less record from before the phases existed); one test
run is hidden by its team after the statistics were computed.

The forbidden numbers are computed here from the stored scores with the README's rules, not by
the code under test:

* the task's organisers and superusers may see everything; staff status alone gives nothing
  (a "staff without permissions" account is a plain signed-in user to these rules);
* a hidden run's numbers reach only its team (and organisers);
* on the test gold, until the results are published (by the test or the final phase) while no
  phase takes runs on it, scores on the whole test set and every per-dialogue score reach nobody
  else; the live-subset means may be shown. A publication ticked while the test phase is still
  open (the organiser's slip) publishes nothing until it closes.

A response leaks when its body holds one of those numbers as the JSON and the CSV write it
(``repr``) or as the pages and the LaTeX export round it (4 decimals). Numbers that some allowed
number also formats to are left out of the search (they cannot tell a leak from a coincidence).

Every phase state is one test; the states of a test process share one world, built once and
rolled back to after each (``leak_base``). In each state the statistics are first those stored
while the final results were published (the worst stale records a page could still read between a
withdrawal and the recomputation) and then freshly computed ones.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from fixtures.synthetic import generate_gold
from leaderboard.models import TaskStatistics
from leaderboard.statistics import compute_task_statistics
from tasks import changes, organising, submissions
from tasks.models import GoldVersion, Phase, Run, Score, ScoreVector, Task, Team
from tests.conftest import World, committing, isolated_settings, make_world, run_bytes

# Every named URL of evalserver/urls.py, by what it serves. A new URL fails
# test_every_url_is_classified until it is added here (and so walked below).
BOARD = "board"  # builds a board or serves board-derived data; takes ?phase=
ORGANISER = "organiser"  # organiser pages and exports; take ?phase=
RUN = "run"  # one run's page or API answer (its id in the path)
TASK_RUNS = "task-runs"  # the user's runs of a task (API)
ORGANISER_API = "organiser-api"  # organiser-only API answers about a task (slug in the path), no ?phase=
PAGE = "page"  # no task data beyond names: still searched, without a phase parameter
POST = "post"  # changes something; a GET is refused (still searched)
ADMIN = "admin"  # the Django admin: staff accounts only, outside the participant rules
DATA = "data"  # a task's data section (participants' data, format, sample run): takes ?phase=

URL_KINDS: dict[str, str] = {
    "home": PAGE, "task-page": BOARD, "leaderboard-csv": BOARD, "statistics-page": BOARD,
    "pvalues-page": BOARD, "statistics-export": BOARD, "api-leaderboard": BOARD,
    "upload": PAGE, "organiser-dashboard": ORGANISER, "organiser-rescore": ORGANISER, "organiser-preview": ORGANISER,
    "run-items-csv": RUN, "run-compare": RUN, "run-details": RUN, "api-run-details": RUN,
    "organiser-runs-zip": ORGANISER, "organiser-results": ORGANISER,
    "run-page": RUN, "run-visibility": POST, "api-run": RUN, "api-my-runs": TASK_RUNS,
    "api-gold-versions": ORGANISER_API,
    "team-page": PAGE, "token-regenerate": POST, "token-revoke": POST, "login": PAGE, "signup": PAGE,
    "logout": POST, "api-tasks": PAGE, "api-upload": POST, "api-schema": PAGE, "api-docs": PAGE,
    "api-redoc": PAGE, "api-not-found": PAGE, "healthz": PAGE, "client-download": PAGE,
    "task-overview": PAGE, "task-terms": POST, "task-data": DATA, "task-data-file": DATA, "api-task-data": DATA,
    "api-task-data-file": DATA, "password-reset": PAGE, "password-reset-sent": PAGE, "password-reset-confirm": PAGE,
    "password-reset-complete": PAGE, "favicon": PAGE,
    "organiser-vbleu": ORGANISER_API, "organiser-gold": ORGANISER_API, "organiser-phase": ORGANISER,
    "organiser-settings": ORGANISER_API, "organiser-data-file": ORGANISER_API, "organiser-withdraw": POST,
    "notices-preferences": POST, "announcements-feed": PAGE, "organiser-announce": POST, "organiser-message": POST,
    "pool-job": PAGE, "pool-job-status": PAGE,
    # Issue 30: a run's file (its team and organisers) and links form; team and account management.
    "run-file": RUN, "run-links": POST, "team-join": PAGE, "team-leave": POST, "team-remove-member": POST,
    "team-rename": POST, "team-new-code": POST, "account": PAGE,
    # Issue 30: the measures page (names, no numbers); a board's statistics wait, as its pages say
    # it (takes ?phase= like the board); the dashboard's counts of runs waiting (organisers only).
    "measures-page": PAGE, "statistics-status": BOARD, "organiser-status": ORGANISER_API,
    # Issue 29: a response task's BERTScore encoder (its organisers upload a model).
    "organiser-encoder": ORGANISER_API,
    # Issue 40: annotation campaigns (the organisers' pages, the assessors' judging pages), walked
    # here for every campaign of the world (one on the test gold, alice and bob its assessors) and a
    # missing one; tests/test_campaign_matrix.py walks every role x campaign state.
    "campaign-list": ORGANISER_API, "campaign-page": PAGE, "campaign-export": PAGE, "judging": PAGE,
    "campaign-judge": PAGE, "campaign-answer": POST, "campaign-metrics-gold": PAGE,
    # Issue 43: late runs (an extension given or ended; an organiser's upload for a team).
    "organiser-extensions": POST, "organiser-upload-for-team": ORGANISER_API,
    # Issue 41: Prometheus' figures (counts by kind and status, no task data), behind a token.
    "metrics": PAGE,
}
DATA_FILES = ("participant-data.json", "format.json", "sample-run.json")
MEASURE = "quality.A.rsnod"
EXPORT_KINDS = ("matrix.csv", "matrix.txt", "runs.txt", "pvalues.txt", "pvalues.csv")

# The classes of ?phase= values: the query string, and what it must mean.
ABSENT, KNOWN, DEFAULT, UNKNOWN = "absent", "known", "default", "unknown"
PHASE_VALUES: dict[str, tuple[str | None, str]] = {
    "absent": (None, ABSENT),
    "dev": ("phase=dev", KNOWN),
    "test": ("phase=test", KNOWN),
    "final": ("phase=final", KNOWN),
    "percent-encoded known name": ("phase=te%73t", KNOWN),  # the server reads "test"
    "empty": ("phase=", DEFAULT),
    "bare": ("phase", DEFAULT),
    "unknown": ("phase=bogus", UNKNOWN),
    "odd case": ("phase=TEST", UNKNOWN),
    "odd case (capitalised)": ("phase=Dev", UNKNOWN),
    "double-encoded": ("phase=%2574est", UNKNOWN),
    "NUL": ("phase=%00", UNKNOWN),
    "NUL inside a name": ("phase=te%00st", UNKNOWN),
    "leading space": ("phase=%20test", UNKNOWN),
    "trailing newline": ("phase=test%0A", UNKNOWN),
    "whitespace only": ("phase=%20%09", UNKNOWN),
    "unicode": ("phase=t%C3%A9st", UNKNOWN),
    "fullwidth (NFKC-equal to test)": ("phase=%EF%BD%94%EF%BD%85%EF%BD%93%EF%BD%94", UNKNOWN),
    "very long": ("phase=" + "test" * 800, UNKNOWN),
    "repeated, last unknown": ("phase=test&phase=bogus", UNKNOWN),
}
# Stale statistics are a matter of known boards: the unknown classes are walked with fresh ones.
STALE_CLASSES = ("absent", "dev", "test", "final", "empty")

# "staff" is a superuser; "staff without permissions" has staff status and nothing else.
ROLES = ("anonymous", "alice", "bob", "organiser", "staff", "staff without permissions")


@dataclass(frozen=True)
class State:
    name: str
    running: str | None  # the phase running now; None: no phase has started
    test_published: bool
    final_published: bool


STATES = [
    State("nothing started", None, False, False),
    State("development open", "dev", False, False),
    State("test open", "test", False, False),
    State("test open, test results published", "test", True, False),
    State("test open, final results published", "test", False, True),
    State("test open, both published", "test", True, True),
    State("test closed, final open, unpublished", "final", False, False),
    State("test closed, test results published", "final", True, False),
    State("test closed, final results published", "final", False, True),
    State("test closed, both published", "final", True, True),
]

# Phase windows (days from now) for each running phase.
WINDOWS = {
    None: {"dev": (1, 2), "test": (3, 4), "final": (5, 30)},
    "dev": {"dev": (-1, 1), "test": (2, 3), "final": (4, 30)},
    "test": {"dev": (-3, -2), "test": (-1, 1), "final": (2, 30)},
    "final": {"dev": (-5, -4), "test": (-3, -1), "final": (-0.5, 30)},
}


@dataclass
class LeakWorld:
    world: World
    test_gold: GoldVersion
    phases: dict[str, Phase]
    carol: Any
    numbers: dict[str, list[Number]] = field(default_factory=dict)  # per role, in the state entered


def _upload(world: World, user: Any, seed: int, name: str, phase: Phase | None, public: bool = True,
            gold: list | None = None) -> Run:
    with committing():
        return submissions.submit_run(world.task, user, submissions.Submission(
            content=run_bytes(gold if gold is not None else world.gold, noise=0.2 + 0.07 * seed, seed=seed),
            name=name, description="method", is_public=public), phase)


def build_world() -> LeakWorld:
    from django.contrib.auth import get_user_model

    world = make_world(n_dialogues=30, seed=5, permutations=100)
    carol = get_user_model().objects.create_user("carol", password="carol-pass-1")
    Team.objects.create(name="Cygnus", slug="cygnus").members.add(carol)
    test_gold_data = generate_gold(40, seed=8)
    with committing():
        test_gold = organising.load_gold_version(world.task, orjson.dumps(test_gold_data), "test.json",
                                                 world.organiser, label="test")
    # Runs from before the phases: a task without phases scores them on its latest gold, the test gold.
    _upload(world, world.bob, 1, "early-b", None, gold=test_gold_data)
    _upload(world, carol, 2, "early-c", None, gold=test_gold_data)
    # Statistics of the phase-less board, stored before the organisers created the phases.
    compute_task_statistics(world.task.pk)
    assert TaskStatistics.objects.filter(task=world.task, phase=None, gold_version=test_gold).exists()
    now = timezone.now()
    phases = {}
    with committing():  # a phase with a live subset has its baselines scored on it after commit
        for name, kind, gold, extra in (("dev", Phase.DEVELOPMENT, world.gold_version, {}),
                                        ("test", Phase.TEST, test_gold, {"live_subset_size": 12,
                                                                         "live_subset_seed": 3}),
                                        ("final", Phase.FINAL, test_gold, {})):
            start, end = WINDOWS[None][name]
            phases[name] = Phase.objects.create(task=world.task, name=name, kind=kind, gold_version=gold,
                                                starts_at=now + timedelta(days=start),
                                                ends_at=now + timedelta(days=end), **extra)
    for seed, (user, name, public) in enumerate(((world.alice, "dev-a1", True), (world.alice, "dev-a2", False),
                                                 (world.bob, "dev-b1", True), (carol, "dev-c1", True)), start=3):
        _upload(world, user, seed, name, phases["dev"], public)
    for seed, (user, name, public) in enumerate(((world.alice, "test-a1", True), (world.alice, "test-a2", False),
                                                 (world.bob, "test-b1", True), (world.bob, "test-b2", False),
                                                 (carol, "test-c1", True)), start=7):
        _upload(world, user, seed, name, phases["test"], public, gold=test_gold_data)
    assert not Run.objects.exclude(status=Run.DONE).exists()
    assert Score.objects.filter(scope=Score.LIVE, run__name="test-a1").exists()
    _campaign(world, test_gold, test_gold_data)
    return LeakWorld(world, test_gold, phases, carol)


def _campaign(world: World, test_gold: GoldVersion, test_gold_data: list) -> None:
    """An open campaign on five dialogues of the test gold, judged by alice and bob (participants),
    one judgement saved: its pages are walked with the others (they show no score)."""
    from campaigns.assignment import open_campaign
    from campaigns.building import Plan, create_campaign
    from campaigns.models import Judgement

    items = [entry["id"] for entry in test_gold_data[:5]]
    campaign = create_campaign(world.task, Plan(name="test-gold judging", kind="dialogues", gold_version=test_gold,
                                                item_ids=items, per_item=2, assessors=["alice", "bob"]))
    open_campaign(campaign)
    assignment = campaign.assessors.get(user=world.alice).assignments.select_related("item").first()
    turns = assignment.item.content["turns"]
    Judgement.objects.create(campaign=campaign, item=assignment.item, assessor=assignment.assessor, seconds=3.0,
                             values={"quality": {"A": 1, "E": 1, "S": 0},
                                     "nugget": ["CNUG" if turn["sender"] == "customer" else "HNUG" for turn in turns]})


def enter_state(leak: LeakWorld, running: str | None, test_published: bool, final_published: bool) -> None:
    """Move the phases' windows and publication flags with save(), as the dashboard and admin do."""
    now = timezone.now()
    for name, phase in leak.phases.items():
        start, end = WINDOWS[running][name]
        phase.starts_at, phase.ends_at = now + timedelta(days=start), now + timedelta(days=end)
        if name == "test":
            phase.results_published = test_published
        if name == "final":
            phase.results_published = final_published
        with committing():
            phase.save()


# The rules, written down independently of tasks.access ------------------------------------------

@dataclass(frozen=True)
class Number:
    value: float
    run: str
    what: str  # e.g. "full mean quality.A.rsnod on gold v2" or "per-dialogue ..."
    forbidden: bool


def _floats(summary: Any, path: str = "") -> list[tuple[str, float]]:
    if isinstance(summary, dict):
        return [item for key, value in summary.items() for item in _floats(value, f"{path}.{key}" if path else key)]
    if isinstance(summary, float):
        return [(path, summary)]
    return []


def numbers_for(leak: LeakWorld, viewer: Any, state: State) -> list[Number]:
    """Every stored score number, and whether this viewer may see it in this state."""
    # A publication counts only once no phase takes runs on the test gold: ticked while the test
    # phase is open (the admin, a phase whose end was moved later), it would be an oracle.
    published = (state.test_published or state.final_published) and state.running != "test"
    organiser = viewer is not None and (viewer.is_superuser or
                                        leak.world.task.organisers.filter(pk=viewer.pk).exists())
    members = {team.pk: set(team.members.values_list("pk", flat=True)) for team in Team.objects.all()}
    numbers = []

    def forbidden(run: Run, gold_id: int, whole_set_or_dialogue: bool) -> bool:
        if organiser:
            return False
        member = viewer is not None and run.team_id is not None and viewer.pk in members[run.team_id]
        if not run.is_baseline and not run.is_public and not member:
            return True
        return gold_id == leak.test_gold.pk and not published and whole_set_or_dialogue

    for score in Score.objects.select_related("run", "gold_version"):
        run = score.run
        for path, value in _floats(score.summary):
            if path.split(".")[0] != "measures":
                continue
            numbers.append(Number(value, run.name, f"{score.scope} mean {path} on gold v{score.gold_version.number}",
                                  forbidden(run, score.gold_version_id, score.scope == Score.FULL)))
    for vector in ScoreVector.objects.select_related("score__run", "score__gold_version"):
        run = vector.score.run
        for value in vector.array().tolist():
            numbers.append(Number(value, run.name, f"per-dialogue {vector.key} ({vector.score.scope}) on gold "
                                                   f"v{vector.score.gold_version.number}",
                                  forbidden(run, vector.score.gold_version_id, True)))
    return numbers


FOUR = Decimal("0.0001")


def _four_decimals(value: float) -> set[str]:
    """How pages (Python's format; Django's floatformat rounds the decimal repr half up) and the
    LaTeX export round a number."""
    return {f"{value:.4f}", str(Decimal(repr(value)).quantize(FOUR, ROUND_HALF_UP))}


def statistics_numbers() -> set[float]:
    """Every stored statistic except the means (a stale record's means are the forbidden scores)."""
    from devtools.workers import statistics_numbers as of_task

    return {value for task in Task.objects.all() for value in of_task(task)}


def forbidden_strings(numbers: list[Number]) -> dict[str, str]:
    """The text forms of the forbidden numbers that no allowed number shares, with what they are."""
    allowed = {number.value for number in numbers if not number.forbidden}
    allowed_text = {repr(value) for value in allowed}
    for value in allowed | statistics_numbers():
        allowed_text |= _four_decimals(value)
    found: dict[str, str] = {}
    for number in numbers:
        if not number.forbidden or number.value in allowed:
            continue
        text = repr(number.value)
        if len(text) >= 8 and text not in allowed_text:  # short ones (0.5) occur in any page
            found[text] = f"{number.run}: {number.what} = {text}"
        if number.what.startswith("per-dialogue"):
            continue  # per-dialogue values are shown rounded only on run pages, which show one run
        for rounded in _four_decimals(number.value):
            if rounded not in allowed_text and not rounded.endswith("00"):
                found.setdefault(rounded, f"{number.run}: {number.what} = {text} (shown as {rounded})")
    return found


NUMBER = re.compile(r"\d+\.\d+(?:[eE][-+]?\d+)?")
RUN_IDS = re.compile(r"^/runs/(\d+)/(?:.*[?&]with=(\d+))?")


def derived_strings(numbers: list[Number], url: str) -> set[str]:
    """What a run's page (or a comparison of two runs) may derive from numbers its reader may
    see: the difference between the run's mean and any other allowed mean of the same measure,
    scope and gold (how far behind the best, the margin over a baseline, the mean advantage of
    one run over the other). At four decimals such a difference can equal a forbidden number by
    chance; it tells nothing, so it is not a leak."""
    match = RUN_IDS.match(url)
    if match is None:
        return set()
    names = {run.name for run in Run.objects.filter(pk__in=[int(group) for group in match.groups() if group])}
    allowed: dict[str, list[Number]] = {}
    for number in numbers:
        if not number.forbidden and not number.what.startswith("per-dialogue"):
            allowed.setdefault(number.what, []).append(number)
    found: set[str] = set()
    for group in allowed.values():
        for own in (number for number in group if number.run in names):
            for other in group:
                found |= _four_decimals(abs(own.value - other.value))
    if match.group(2):
        found |= _item_differences(numbers, int(match.group(1)), int(match.group(2)))
    return found


def _item_differences(numbers: list[Number], first: int, second: int) -> set[str]:
    """A comparison's per-item advantages: item by item, the difference between two per-item
    scores the reader may see (on the same measure, scope and gold). One such difference, 0.3255
    minus 0.2143 on a development gold, rounds to a hidden test run's live mean (0.1112) by chance."""
    import numpy as np

    allowed = {(number.run, number.what) for number in numbers
               if not number.forbidden and number.what.startswith("per-dialogue")}
    pairs: dict[str, dict[int, Any]] = {}
    for vector in ScoreVector.objects.filter(score__run_id__in=(first, second)).select_related(
            "score__run", "score__gold_version"):
        what = f"per-dialogue {vector.key} ({vector.score.scope}) on gold v{vector.score.gold_version.number}"
        if (vector.score.run.name, what) in allowed:
            pairs.setdefault(what, {})[vector.score.run_id] = vector.array()
    found: set[str] = set()
    for pair in pairs.values():
        if len(pair) == 2:
            for difference in np.abs(pair[first] - pair[second]).tolist():
                found |= _four_decimals(difference)
    return found


def body_of(response: Any) -> str:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return content.decode("utf-8", errors="replace")


# The walk ------------------------------------------------------------------------------------------

def _patterns(resolver: URLResolver | None = None) -> list[URLPattern | URLResolver]:
    """Every URL pattern, the kinds' apps' included at the root (``kinds/<kind>/urls.py``) taken as
    their own patterns, so the walk reaches them; the admin stays one included conf."""
    found: list[URLPattern | URLResolver] = []
    for pattern in (resolver or get_resolver()).url_patterns:
        if isinstance(pattern, URLResolver) and pattern.namespace != "admin" and not str(pattern.pattern):
            found += _patterns(pattern)
        else:
            found.append(pattern)
    return found


def url_targets(leak: LeakWorld, kind: str, name: str) -> list[str]:
    """Concrete paths for one named URL."""
    slug = leak.world.task.slug
    if name == "statistics-export":
        return ([reverse(name, args=[slug, MEASURE, kind_]) for kind_ in EXPORT_KINDS]
                + [reverse(name, args=[slug, "all", "means.tex"])])
    if name == "pvalues-page":
        return [reverse(name, args=[slug, MEASURE])]
    if name == "organiser-results":
        return [reverse(name, args=[slug, "csv"]), reverse(name, args=[slug, "json"])]
    if name == "api-not-found":
        return ["/api/v1/nothing/"]
    if name == "password-reset-confirm":
        return [reverse(name, args=["MQ", "set-password"])]
    if name in ("task-data-file", "api-task-data-file"):
        return [reverse(name, args=[slug, file_name]) for file_name in DATA_FILES]
    if name.startswith("campaign-") and name != "campaign-list":
        from campaigns.models import Campaign

        ids = [*Campaign.objects.values_list("pk", flat=True), 999_999]
        if name == "campaign-export":
            return [reverse(name, args=[pk, fmt]) for pk in ids for fmt in ("json", "csv")]
        if name == "campaign-answer":
            return [reverse(name, args=[pk, 1]) for pk in ids]
        return [reverse(name, args=[pk]) for pk in ids] + [f"{reverse(name, args=[pk])}?at=1" for pk in ids
                                                           if name == "campaign-judge"]
    if name in ("pool-job", "pool-job-status"):
        from kinds.response.models import PoolJob

        return [reverse(name, args=[pk]) for pk in [*PoolJob.objects.values_list("pk", flat=True), 999_999]]
    if name == "run-compare":
        # Each run with a run of its own team and with a run of another team (or a baseline).
        runs = list(Run.objects.order_by("pk").values_list("pk", "team_id"))
        targets = []
        for run_id, team in runs:
            mate = next((other for other, other_team in runs if other != run_id and other_team == team), None)
            stranger = next((other for other, other_team in runs if other_team != team), None)
            targets += [f"{reverse(name, args=[run_id])}?with={other}" for other in (mate, stranger) if other]
        return targets
    if kind == RUN or name in ("run-visibility", "run-links"):
        return [reverse(name, args=[run_id]) for run_id in Run.objects.order_by("pk").values_list("pk", flat=True)]
    if kind in (BOARD, ORGANISER, TASK_RUNS, ORGANISER_API, DATA) or name in (
            "upload", "organiser-rescore", "api-upload", "task-overview", "task-terms", "announcements-feed",
            "organiser-announce", "organiser-message", "organiser-withdraw", "organiser-extensions"):
        return [reverse(name, args=[slug])]
    return [reverse(name)]


def clients(leak: LeakWorld) -> dict[str, tuple[Client, Any]]:
    made = {"anonymous": (Client(raise_request_exception=False), None)}
    from django.contrib.auth import get_user_model

    bare = get_user_model().objects.get_or_create(username="vera", defaults={"is_staff": True})[0]
    for role, user in (("alice", leak.world.alice), ("bob", leak.world.bob),
                       ("organiser", leak.world.organiser), ("staff", leak.world.staff),
                       ("staff without permissions", bare)):
        client = Client(raise_request_exception=False)
        client.force_login(user)
        made[role] = (client, user)
    return made


def walk(leak: LeakWorld, state: State, classes: tuple[str, ...], stats: str, kinds: tuple[str, ...]) -> list[str]:
    """Request every URL of these kinds with every phase value class as every role; the problems."""
    problems: list[str] = []
    targets = [(URL_KINDS[pattern.name], url) for pattern in _patterns()
               if isinstance(pattern, URLPattern) and URL_KINDS[pattern.name] in kinds
               for url in url_targets(leak, URL_KINDS[pattern.name], pattern.name)]
    for role, (client, user) in clients(leak).items():
        if role not in leak.numbers:
            leak.numbers[role] = numbers_for(leak, user, state)
        forbidden = forbidden_strings(leak.numbers[role])
        for kind, url in targets:
            takes_phase = kind in (BOARD, ORGANISER, DATA)
            statuses: dict[str, int] = {}
            for label in classes if takes_phase else ("absent",):
                query, meaning = PHASE_VALUES[label]
                response = client.get(f"{url}?{query}" if query else url)
                where = f"[{state.name}; {stats} statistics] {role} GET {url} ({label})"
                statuses[label] = response.status_code
                if response.status_code >= 500:
                    problems.append(f"{where}: {response.status_code}")
                # Signing in comes first on organiser pages: anonymous visitors are sent to log in
                # whatever the phase, which tells them nothing about the task's phases.
                to_login = role == "anonymous" and response.status_code == 302 and \
                    response["Location"].startswith("/accounts/login/")
                if meaning == UNKNOWN and response.status_code != 404 and not to_login:
                    problems.append(f"{where}: {response.status_code}, not 404, for a phase that does not exist")
                if meaning == DEFAULT and response.status_code != statuses["absent"]:
                    problems.append(f"{where}: {response.status_code}, not {statuses['absent']} as without ?phase=")
                if url.endswith("/file") and response.status_code == 200:
                    # A run's file back: exactly the bytes its team uploaded, to the team or the
                    # organisers only; a number in it is the team's own (a probability can equal a
                    # per-dialogue score by construction: NVD is 1 - p on a one-label gold).
                    problem = own_file_problem(url, body_of(response), role, user)
                    if problem:
                        problems.append(f"{where}: {problem}")
                    continue
                body = body_of(response)
                leaked = set(NUMBER.findall(body)) & forbidden.keys()
                if leaked and kind == RUN:
                    # What a run's page may derive can only take numbers out of ``leaked``: worked
                    # out only when a forbidden number is there, not for every run page.
                    leaked -= derived_strings(leak.numbers[role], url)
                if leaked:
                    first = min(leaked)
                    at = body.index(first)
                    problems.append(f"{where}: {response.status_code} with {len(leaked)} forbidden number(s), "
                                    f"e.g. {forbidden[first]}, in {body[max(0, at - 120):at + 20]!r}")
    return problems


def own_file_problem(url: str, body: str, role: str, user: Any) -> str:
    """Why serving this run file to this reader is wrong (empty: it is right): the reader must be
    of the run's team or organise the task, and the body the stored upload byte for byte."""
    from tasks.runfiles import read_run_file

    run = Run.objects.select_related("team").get(pk=int(url.split("/")[2]))
    member = user is not None and run.team_id is not None and run.team.members.filter(pk=user.pk).exists()
    organiser = user is not None and (user.is_superuser or run.task.organisers.filter(pk=user.pk).exists())
    if not (member or organiser):
        return f"the file of run {run.name} served to {role}, who is not of its team"
    if body != read_run_file(run).decode("utf-8", errors="replace"):
        return "a run file that is not the bytes uploaded"
    return ""


def test_every_url_is_classified() -> None:
    """A URL nobody classified is a URL the leak walk would skip."""
    names = []
    for pattern in _patterns():
        if isinstance(pattern, URLResolver):
            assert pattern.namespace == "admin", f"an included URL conf {pattern.pattern} is not classified"
            continue
        assert pattern.name, f"URL {pattern.pattern} has no name, so it cannot be classified"
        names.append(pattern.name)
    unclassified = sorted(set(names) - set(URL_KINDS))
    assert not unclassified, f"classify these URLs in URL_KINDS of tests/test_leak_matrix.py: {unclassified}"
    assert not set(URL_KINDS) - set(names), f"URL_KINDS names URLs that are gone: {set(URL_KINDS) - set(names)}"


@pytest.fixture(scope="class")
def leak_base(django_db_setup: None, django_db_blocker: Any,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LeakWorld, Path]]:
    """The world and what every state starts from, built once for the states a test process runs
    (it was rebuilt for each, 26 s of the CI command's 15 minutes each time): statistics stored
    while the final results were public, then a run hidden by its team after that computation (the
    stored statistics still hold it). Built in a transaction of its own, in which each state's
    test is a savepoint that is rolled back (pytest-django's ``db``), and rolled back at the end."""
    from django.db import transaction
    from django.test import override_settings

    media = tmp_path_factory.mktemp("leak-uploads")
    with django_db_blocker.unblock(), override_settings(**isolated_settings(media, f"leak-{os.getpid()}")):
        outer = transaction.atomic()
        outer.__enter__()
        try:
            leak = build_world()
            enter_state(leak, "final", False, True)
            compute_task_statistics(leak.world.task.pk)
            with committing():
                Run.objects.filter(name="test-c1").update(is_public=False)
                changes.board_changed(leak.world.task)
            yield leak, media
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


@pytest.mark.slow  # every URL x parameter class x role, in every state: dev.py test --quick leaves it out
@pytest.mark.django_db
class TestEveryState:
    """One test per phase state; the states share ``leak_base`` (a class, so that the world's
    transaction ends before any other test of this module runs)."""

    @pytest.mark.parametrize("state", STATES, ids=[state.name for state in STATES])
    def test_no_forbidden_score_in_any_response(self, state: State, settings: Any,
                                                leak_base: tuple[LeakWorld, Path]) -> None:
        leak, media = leak_base
        leak.numbers.clear()  # per role, in the state entered
        settings.MEDIA_ROOT = media  # the run files the world's uploads stored
        # The production shape's lookups (task and phases from the shared cache, renewed by the
        # signals) and sessions in the cache: about half the queries per request, same rules.
        settings.EVALSERVER_CACHE_TASK_LOOKUPS = True
        settings.SESSION_ENGINE = "django.contrib.sessions.backends.cache"
        enter_state(leak, state.running, state.test_published, state.final_published)
        # Stale statistics can only reach the pages and exports of boards.
        problems = walk(leak, state, STALE_CLASSES, "stale", (BOARD,))
        compute_task_statistics(leak.world.task.pk)
        problems += walk(leak, state, tuple(PHASE_VALUES), "fresh",
                         (BOARD, ORGANISER, RUN, TASK_RUNS, ORGANISER_API, PAGE, POST, DATA))
        assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:40])


# The decisions behind the walk, one by one --------------------------------------------------------

def _phase(world: World, name: str, kind: str, days: tuple[float, float], **fields: Any) -> Phase:
    now = timezone.now()
    with committing():
        return Phase.objects.create(task=world.task, name=name, kind=kind, gold_version=world.gold_version,
                                    starts_at=now + timedelta(days=days[0]), ends_at=now + timedelta(days=days[1]),
                                    **fields)


@pytest.mark.django_db
def test_an_unknown_phase_is_a_404_that_says_so(world: World) -> None:
    _phase(world, "test", Phase.TEST, (-1, 1), live_subset_size=10)
    slug = world.task.slug
    answer = Client().get(f"/api/v1/tasks/{slug}/leaderboard/?phase=TEST")
    assert (answer.status_code, answer.json()) == (404, {"errors": ["no such phase in this task"]})
    assert Client().get(f"/tasks/{slug}/leaderboard.csv?phase=bogus").status_code == 404
    # An empty value is no value: the default board (the open phase).
    assert Client().get(f"/api/v1/tasks/{slug}/leaderboard/?phase=").json()["phase"] == "test"


@pytest.mark.django_db
def test_a_task_whose_phases_have_not_started_shows_no_run_to_anybody(world: World) -> None:
    """Before its first phase a task shows an explanation, not the phase-less board (every run
    on the latest gold, on the whole set) - organisers included: they pick a phase by name."""
    assert _upload(world, world.alice, 1, "early", None).scores.exists()
    _phase(world, "test", Phase.TEST, (2, 3), live_subset_size=10)
    organiser = Client()
    organiser.force_login(world.organiser)
    for client in (Client(), organiser):
        board = client.get(f"/api/v1/tasks/{world.task.slug}/leaderboard/").json()
        assert board["runs"] == [] and board["phase"] is None
        assert board["note"].startswith("No phase of this task has started yet: the first, test, opens at ")
        page = client.get(f"/tasks/{world.task.slug}/").content.decode()
        assert "No phase of this task has started yet" in page and "early" not in page
    named = organiser.get(f"/api/v1/tasks/{world.task.slug}/leaderboard/?phase=test").json()
    assert named["scope"] == "live" and named["runs"]  # the baselines of its gold


@pytest.mark.django_db
def test_statistics_of_another_scope_are_not_served(world: World) -> None:
    """Withdrawing the final publication keeps the test board's whole-set statistics until they are
    computed again: meanwhile its pages and exports show none, not whole-set means."""
    test = _phase(world, "test", Phase.TEST, (-1, 1), live_subset_size=10)
    final = _phase(world, "final", Phase.FINAL, (2, 30))
    for seed, user in enumerate((world.alice, world.bob)):
        _upload(world, user, seed, f"run-{seed}", test)
    # Published once the test phase has closed (a publication counts only then).
    test.ends_at = timezone.now()
    final.results_published = True
    with committing():
        test.save()
        final.save()
    compute_task_statistics(world.task.pk)
    assert TaskStatistics.objects.get(phase=test).scope == Score.FULL
    final.results_published = False
    with committing():
        final.save()
    assert TaskStatistics.objects.get(phase=test).scope == Score.FULL  # not recomputed yet (statistics off)
    base = f"/tasks/{world.task.slug}/statistics"
    assert Client().get(f"{base}/all/means.tex?phase=test").status_code == 404
    assert Client().get(f"{base}/{MEASURE}/pvalues/?phase=test").status_code == 404
    page = Client().get(f"{base}/?phase=test").content.decode()
    assert "computed over the whole gold, not over what it shows now (the live subset, 4 runs on the board)" in page
    compute_task_statistics(world.task.pk)
    assert TaskStatistics.objects.get(phase=test).scope == Score.LIVE
    assert Client().get(f"{base}/all/means.tex?phase=test").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_leak_probe_finds_nothing_over_http_and_finds_what_is_shown(live_server: Any) -> None:
    """``devtools.workers.leak_probe``, which the reliability report runs against a live server: no
    problem on this server, and a problem for each number it is told is forbidden but shown."""
    from devtools.workers import forbidden_test_numbers, leak_probe

    world = make_world(n_dialogues=30, seed=5, permutations=100)
    test = _phase(world, "test", Phase.TEST, (-1, 1), live_subset_size=10)
    _phase(world, "final", Phase.FINAL, (2, 30))
    for seed, user in enumerate((world.alice, world.bob)):
        _upload(world, user, seed, f"run-{seed}", test)
    compute_task_statistics(world.task.pk)
    forbidden, per_dialogue, allowed = forbidden_test_numbers(world.task.slug)
    assert len(forbidden) > 50 and len(per_dialogue) > 1000 and allowed
    problems = leak_probe(live_server.url, world.task.slug, ["test", "final"], forbidden, allowed,
                          forbidden_exact=per_dialogue)
    assert problems == [], "\n".join(problems)
    # The live means are on the board: told they are forbidden, the probe reports them.
    live = [value for score in Score.objects.filter(scope=Score.LIVE, run__is_baseline=False)
            for key, value in score.summary["measures"].items() if key.startswith("nugget.")]
    found = leak_probe(live_server.url, world.task.slug, ["test", "final"], live)
    assert any("/api/v1/tasks/demo-task/leaderboard/ (absent)" in problem for problem in found)
    assert any("leaderboard.csv?phase=test (known test)" in problem for problem in found)


@pytest.mark.django_db
def test_an_unknown_phase_page_says_which_thing_was_not_found(world: World, settings) -> None:
    """A newcomer who typed ?phase=Test reads why the page is missing, not only "nothing here"."""
    settings.DEBUG = False
    _phase(world, "test", Phase.TEST, (-1, 1))
    page = Client().get(f"/tasks/{world.task.slug}/?phase=Test")
    assert page.status_code == 404
    assert "No such phase in this task." in page.content.decode()
    assert "Resolver404" not in Client().get("/no/such/page/").content.decode()


# The organisers' slips (issue 23) -----------------------------------------------------------------
# A publication ticked while the test phase is open is walked above: ``enter_state`` saves the flag
# without the admin's check, and the rules count such a publication only once the phase has
# closed ("test open, ... published" states). Here: a gold file offered as a data file.

@pytest.mark.django_db
def test_no_gold_file_becomes_a_data_file_under_any_name() -> None:
    import io
    import tempfile
    from pathlib import Path

    from django.core.management import call_command
    from django.core.management.base import CommandError

    from tasks.blobs import path as blob_path
    from tasks.models import DataFile

    leak = build_world()
    enter_state(leak, "test", False, False)
    slug = leak.world.task.slug
    golds = {version.number: blob_path("gold", version.source_sha256).read_bytes()
             for version in GoldVersion.objects.filter(task=leak.world.task)}
    assert len(golds) == 2
    with tempfile.TemporaryDirectory() as folder:
        for number, content in golds.items():
            for phase in (None, "dev", "test"):
                path = Path(folder) / f"v{number}.json"
                path.write_bytes(content)
                options = ["--phase", phase] if phase else []
                with pytest.raises(CommandError, match="nothing was stored"):
                    call_command("add_data_file", slug, str(path), "--name", f"train-v{number}.json", *options,
                                 stderr=io.StringIO())
    assert not DataFile.objects.exists()
    gold_digests = {hashlib.sha256(content).hexdigest() for content in golds.values()}
    listed = 0
    for role, (client, _) in clients(leak).items():
        for phase_query in ("", "?phase=dev", "?phase=test", "?phase=final"):
            listing = client.get(f"/api/v1/tasks/{slug}/data/{phase_query}")
            if listing.status_code != 200:
                continue
            listed += len(listing.json()["files"])
            for entry in listing.json()["files"]:
                assert entry["sha256"] not in gold_digests, (role, entry)
            for name in ("train-v1.json", "train-v2.json", "gold.json", "test.json"):
                assert client.get(f"/api/v1/tasks/{slug}/data/{name}{phase_query}").status_code == 404, (role, name)
    assert listed >= 20  # every role read some listing: the search above saw the files
