"""Issue 37, item 6: a comparison of two runs item by item is open for every pair of runs whose
per-item scores the reader may see, and for nothing else: every role x every run state x both
positions (the run of the path and the ``?with=`` run), plus the chooser of the comparison page
and of the run page, in every phase state.

The rules are written down here, independently of ``tasks.access``:

* the task's organisers and superusers read every run (withdrawn ones too) and its per-item scores;
* a team reads its own runs (hidden or withdrawn) and their per-item scores where its phase gives
  per-item feedback, and on test data only once the results are published and the test phase has
  closed;
* anybody else (signed in or not, staff status alone included) opens a run of a public task that is
  public or a baseline, not withdrawn, and not on test data whose results are unpublished; its
  per-item scores where its phase gives per-item feedback (a baseline belongs to no phase);
* a comparison needs both runs open to the reader (404 otherwise, whichever position, as for an id
  that does not exist), and shows figures only where both per-item scores are readable and on the
  same gold; its chooser offers exactly the other runs of the same gold, not withdrawn, whose
  per-item scores the reader reads.

The figures shown are checked against the stored per-item vectors.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import orjson
import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from fixtures.synthetic import generate_gold
from tasks import organising, submissions
from tasks.models import Phase, Run, ScoreVector
from tests.conftest import World, committing, make_world, run_bytes

MEASURE = "quality.A.rsnod"
ROLES = ("anonymous", "alice", "bob", "organiser", "staff", "staff without permissions")


@dataclass(frozen=True)
class State:
    name: str
    test_open: bool
    test_published: bool
    task_public: bool = True


STATES = [
    State("test open, unpublished", True, False),
    State("test open, publication ticked too early", True, True),
    State("test closed, unpublished", False, False),
    State("test closed, published", False, True),
    State("test closed, published, task hidden from the public", False, True, task_public=False),
]


def _upload(world: World, user: Any, gold: list, seed: int, name: str, phase: Phase, public: bool = True) -> Run:
    with committing():
        return submissions.submit_run(world.task, user, submissions.Submission(
            content=run_bytes(gold, noise=0.2 + 0.05 * seed, seed=seed), name=name, description="method",
            is_public=public), phase)


def build(state: State) -> tuple[World, dict[str, Run], dict[str, Any]]:
    """Runs in every state a run can be in, on a development gold (v1) and a test gold (v2)."""
    world = make_world(n_dialogues=20, seed=6, permutations=50)
    test_gold = generate_gold(24, seed=9)
    with committing():
        version = organising.load_gold_version(world.task, orjson.dumps(test_gold), "test.json", label="test")
    now = timezone.now()

    def phase(name: str, kind: str, gold: Any, **fields: Any) -> Phase:
        with committing():
            return Phase.objects.create(task=world.task, name=name, kind=kind, gold_version=gold,
                                        starts_at=now - timedelta(days=1), ends_at=now + timedelta(days=1), **fields)

    dev = phase("dev", Phase.DEVELOPMENT, world.gold_version)
    quiet = phase("quiet", Phase.DEVELOPMENT, world.gold_version, per_item_feedback=False)
    test = phase("test", Phase.TEST, version, live_subset_size=8, live_subset_seed=2)
    runs = {name: _upload(world, user, world.gold, seed, name, where, public)
            for seed, (name, user, where, public) in enumerate((
                ("a-public", world.alice, dev, True), ("a-hidden", world.alice, dev, False),
                ("a-withdrawn", world.alice, dev, True), ("b-public", world.bob, dev, True),
                ("b-hidden", world.bob, dev, False), ("b-no-feedback", world.bob, quiet, True)))}
    runs |= {name: _upload(world, user, test_gold, seed, name, test, public)
             for seed, (name, user, public) in enumerate((
                 ("a-test", world.alice, True), ("b-test", world.bob, True), ("b-test-hidden", world.bob, False)),
                 start=10)}
    Run.objects.filter(pk=runs["a-withdrawn"].pk).update(withdrawn_at=now)
    for run in Run.objects.filter(is_baseline=True):
        runs[f"baseline {run.name} v{run.gold_version.number}"] = run
    # The phases as the state has them: the test phase open or closed (a final phase after it), the
    # publication ticked or not, the task public or not.
    with committing():
        Phase.objects.create(task=world.task, name="final", kind=Phase.FINAL, gold_version=version,
                             starts_at=now + timedelta(days=2), ends_at=now + timedelta(days=30))
        quiet.ends_at = now - timedelta(hours=1)
        quiet.save()
        if not state.test_open:
            test.ends_at = now - timedelta(hours=1)
        test.results_published = state.test_published
        test.save()
        world.task.is_public = state.task_public
        world.task.save()
    assert not Run.objects.exclude(status=Run.DONE).exists()
    bare = get_user_model().objects.create_user("vera", password="vera-pass-1", is_staff=True)
    users = {"anonymous": None, "alice": world.alice, "bob": world.bob, "organiser": world.organiser,
             "staff": world.staff, "staff without permissions": bare}
    fresh = {name: Run.objects.select_related("team", "phase").get(pk=run.pk) for name, run in runs.items()}
    return world, fresh, users


def rules(state: State, user: Any, run: Run) -> tuple[bool, bool]:
    """(may open the run, may read its per-item scores) for this user in this state."""
    test_data = run.gold_version.number == 2
    published = state.test_published and not state.test_open
    if user is not None and (user.is_superuser or user.username == "olivia"):
        return True, True
    member = user is not None and run.team_id is not None and run.team.members.filter(pk=user.pk).exists()
    feedback = run.phase is None or run.phase.per_item_feedback
    if member:
        return True, (published if test_data else feedback)
    opens = (state.task_public and not run.is_withdrawn and (run.is_public or run.is_baseline)
             and (published or not test_data))
    return opens, opens and (published if test_data else feedback)


def client_for(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    if user is not None:
        client.force_login(user)
    return client


def offered(page: str, select: str = "compare-with") -> list[int]:
    found = re.search(rf'<select name="with" id="{select}">(.*?)</select>', page, re.S)
    return [int(value) for value in re.findall(r'<option value="(\d+)"', found.group(1))] if found else []


def shown_means(page: str) -> str:
    table = page[page.index('<table class="board compact compare-summary">'):]
    return re.findall(r'<td class="num">([^<]+)</td>', table[:table.index("</table>")])[3]


def mean_of(run: Run) -> float:
    return float(ScoreVector.objects.get(score__run=run, score__scope="full", key=MEASURE).array().mean())


@pytest.mark.slow  # every role x every run x both positions, in five states: about 8 s a state
@pytest.mark.django_db
@pytest.mark.parametrize("state", STATES, ids=[state.name for state in STATES])
def test_every_role_compares_exactly_the_runs_whose_per_item_scores_it_reads(state: State) -> None:
    world, runs, users = build(state)
    means = {run.pk: mean_of(run) for run in runs.values()}
    problems: list[str] = []
    for role, user in users.items():
        client = client_for(user)
        allowed = {name: rules(state, user, run) for name, run in runs.items()}
        for name, run in runs.items():
            opens, reads = allowed[name]
            expected = sorted(other.pk for other_name, other in runs.items() if other.pk != run.pk and reads
                              and other.gold_version_id == run.gold_version_id and not other.is_withdrawn
                              and allowed[other_name][1])
            chooser = client.get(f"/runs/{run.pk}/compare/")
            where = f"[{state.name}] {role} on {name}"
            if chooser.status_code != (200 if opens else 404):
                problems.append(f"{where}: the chooser answered {chooser.status_code}")
            elif opens and sorted(offered(chooser.content.decode())) != expected:
                problems.append(f"{where}: the chooser offers {sorted(offered(chooser.content.decode()))}, "
                                f"not {expected}")
            if opens:
                page = client.get(f"/runs/{run.pk}/").content.decode()
                if sorted(offered(page)) != (expected if reads else []):
                    problems.append(f"{where}: the run page offers {sorted(offered(page))}, not {expected}")
            for other_name, other in runs.items():
                # Every pair on one gold; across the two golds, one run of each (the refusal).
                if other.pk == run.pk or (other.gold_version_id != run.gold_version_id
                                          and {name, other_name} != {"a-public", "a-test"}):
                    continue
                # Both positions: each pair is asked both ways round as the loops go.
                response = client.get(f"/runs/{run.pk}/compare/?with={other.pk}&measure={MEASURE}")
                pair = f"{where} with {other_name}"
                if not (opens and allowed[other_name][0]):
                    if response.status_code != 404:
                        problems.append(f"{pair}: {response.status_code}, not 404")
                    continue
                if response.status_code != 200:
                    problems.append(f"{pair}: {response.status_code}, not 200")
                    continue
                page = html.unescape(response.content.decode())
                both = reads and allowed[other_name][1]
                if both and other.gold_version_id == run.gold_version_id:
                    wanted = f"{means[run.pk]:.4f} / {means[other.pk]:.4f}"
                    if "compare-summary" not in page or shown_means(page) != wanted:
                        problems.append(f"{pair}: no comparison with the means {wanted}")
                elif both:
                    if "scored on different gold data" not in page:
                        problems.append(f"{pair}: runs of two golds not refused")
                else:
                    missing = " and ".join(item.label for item, item_name in ((run, name), (other, other_name))
                                           if not allowed[item_name][1])
                    if f"those of {missing} are not available to you" not in page or re.search(r"\d\.\d{4}", page):
                        problems.append(f"{pair}: not refused for {missing}, or a score shown")
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:40])
