"""Runs with faces (issue 30): the access matrix of a run's pages, every URL x run class x role x
phase state, against rules written down here (not read from ``tasks.access``):

* the run's team and the task's organisers (and superusers) open every page of the run, the file
  included, in every state; a staff account without permissions is anybody;
* anybody else (signed in or not) opens the run's page, its per-item CSV and its details only when
  the run is scored, shown on the public board (not hidden, not withdrawn) and its scores are public:
  a development run at once, a test run once the results on the test gold are published and no
  phase takes runs on that gold; never its file, never its links form;
* everything else answers exactly what a run id that does not exist answers (same status, same
  page once the id in the path is set aside), so a 404 tells nothing about which runs exist.

``tests/test_leak_matrix.py`` walks the same URLs for forbidden numbers; this walk checks who
gets in at all.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import orjson
import pytest
from django.test import Client
from django.utils import timezone

from fixtures.synthetic import generate_gold
from tasks import organising, submissions
from tasks.models import Phase, Run
from tests.conftest import World, committing, make_world, run_bytes

ROLES = ("anonymous", "alice", "bob", "carol", "organiser", "staff", "staff without permissions")
# run name -> (owner role, phase, public on the board, withdrawn)
RUNS = {
    "dev-a": ("alice", "dev", True, False),
    "dev-a-hidden": ("alice", "dev", False, False),
    "dev-a-withdrawn": ("alice", "dev", True, True),
    "test-a": ("alice", "test", True, False),
    "test-a-hidden": ("alice", "test", False, False),
    "test-b": ("bob", "test", True, False),
    "test-b-withdrawn": ("bob", "test", True, True),
}
# state -> (running phase, final results ticked)
STATES = {
    "development open": ("dev", False),
    "test open": ("test", False),
    "test open, final ticked": ("test", True),  # a publication while runs can arrive counts for nothing
    "test closed, final unpublished": ("final", False),
    "test closed, final published": ("final", True),
}
WINDOWS = {"dev": {"dev": (-1, 1), "test": (2, 3), "final": (4, 30)},
           "test": {"dev": (-3, -2), "test": (-1, 1), "final": (2, 30)},
           "final": {"dev": (-5, -4), "test": (-3, -1), "final": (-0.5, 30)}}
PAGES = ("run-page", "items.csv", "details.json", "file")
MISSING_ID = 987_654


def _path(page: str, run_id: int) -> str:
    return {"run-page": f"/runs/{run_id}/", "items.csv": f"/runs/{run_id}/items.csv",
            "details.json": f"/runs/{run_id}/details.json", "file": f"/runs/{run_id}/file"}[page]


def opens_run(role: str, run: str, running: str, final_ticked: bool) -> bool:
    """Whether the role may open the run at all (its page); everything else is a missing run."""
    owner, phase, public, withdrawn = RUNS[run]
    if role in ("organiser", "staff") or role == owner:
        return True
    if not public or withdrawn:
        return False
    return phase == "dev" or (final_ticked and running == "final")


def expected_open(role: str, run: str, page: str, running: str, final_ticked: bool) -> bool:
    owner, phase, public, withdrawn = RUNS[run]
    if not opens_run(role, run, running, final_ticked):
        return False
    if page == "run-page":
        return True
    if page == "file":
        return role in ("organiser", "staff") or role == owner
    # Per-item scores (the CSV, the details JSON): organisers always; the team and, for a public
    # run, everybody: development runs at once (the phase gives per-item feedback), test runs
    # once the results are published.
    return role in ("organiser", "staff") or phase == "dev" or (final_ticked and running == "final")


def build() -> tuple[World, dict[str, Phase], dict[str, Run], dict[str, Client]]:
    from django.contrib.auth import get_user_model

    from tasks.models import Team

    world = make_world(n_dialogues=20, seed=3, permutations=100)
    test_gold = generate_gold(24, seed=8)
    with committing():
        test_version = organising.load_gold_version(world.task, orjson.dumps(test_gold), "test.json",
                                                    world.organiser, label="test")
    carol = get_user_model().objects.create_user("carol", password="carol-pass-1")
    Team.objects.create(name="Cygnus", slug="cygnus").members.add(carol)
    vera = get_user_model().objects.create_user("vera", password="vera-pass-1", is_staff=True)
    now = timezone.now()
    phases = {}
    for name, kind in (("dev", Phase.DEVELOPMENT), ("test", Phase.TEST), ("final", Phase.FINAL)):
        start, end = WINDOWS["dev"][name]
        gold = world.gold_version if name == "dev" else test_version
        phases[name] = Phase.objects.create(task=world.task, name=name, kind=kind, gold_version=gold,
                                            starts_at=now + timedelta(days=start), ends_at=now + timedelta(days=end))
    users = {"alice": world.alice, "bob": world.bob}
    runs = {}
    for seed, (name, (owner, phase, public, withdrawn)) in enumerate(RUNS.items()):
        enter(phases, phase)
        with committing():
            run = submissions.submit_run(world.task, users[owner], submissions.Submission(
                content=run_bytes(world.gold if phase == "dev" else test_gold, noise=0.2 + 0.05 * seed, seed=seed),
                name=name, description="m",
                is_public=public), phases[phase])
        if withdrawn:
            Run.objects.filter(pk=run.pk).update(withdrawn_at=timezone.now())
        runs[name] = run
    assert not Run.objects.exclude(status=Run.DONE).exists()
    clients = {"anonymous": Client(raise_request_exception=False)}
    for role, user in (("alice", world.alice), ("bob", world.bob), ("carol", carol),
                       ("organiser", world.organiser), ("staff", world.staff), ("staff without permissions", vera)):
        clients[role] = Client(raise_request_exception=False)
        clients[role].force_login(user)
    return world, phases, runs, clients


def enter(phases: dict[str, Phase], running: str, final_ticked: bool = False) -> None:
    now = timezone.now()
    for name, phase in phases.items():
        start, end = WINDOWS[running][name]
        phase.starts_at, phase.ends_at = now + timedelta(days=start), now + timedelta(days=end)
        if name == "final":
            phase.results_published = final_ticked
        with committing():
            phase.save()


def _page(response: Any, path: str) -> str:
    """A response's body with the request's own path (the sign-in link's ``next``) set aside."""
    body = response.content.decode("utf-8", errors="replace")
    body = re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "CSRF", body)  # masked afresh per response
    return re.sub(r"/runs/\d+/", "/runs/ID/", body.replace(path, "PATH"))


@pytest.mark.django_db
@pytest.mark.parametrize("state", list(STATES))
def test_every_run_url_opens_exactly_for_the_roles_the_rules_name(state: str, settings: Any) -> None:
    settings.DEBUG = False
    running, final_ticked = STATES[state]
    world, phases, runs, clients = build()
    enter(phases, running, final_ticked)
    problems = []
    for role, client in clients.items():
        for page in PAGES:
            missing = client.get(_path(page, MISSING_ID))
            for name, run in runs.items():
                path = _path(page, run.pk)
                response = client.get(path)
                should = expected_open(role, name, page, running, final_ticked)
                where = f"[{state}] {role} GET {path} ({name})"
                if should and response.status_code != 200:
                    problems.append(f"{where}: {response.status_code}, expected 200")
                if not should and opens_run(role, name, running, final_ticked):
                    # A run the reader sees, without this part: 404 (anonymous readers are sent to
                    # sign in first where the part needs an account, as for any id).
                    if response.status_code not in (404, missing.status_code):
                        problems.append(f"{where}: {response.status_code}, expected 404")
                elif not should:
                    if response.status_code != missing.status_code:
                        problems.append(f"{where}: {response.status_code}, but a missing run answers "
                                        f"{missing.status_code}")
                    elif response.status_code == 404 and _page(response, path) != _page(
                            missing, _path(page, MISSING_ID)):
                        problems.append(f"{where}: a 404 that differs from a missing run's")
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:30])


@pytest.mark.django_db
def test_the_links_form_takes_posts_from_the_runs_team_only(settings: Any) -> None:
    """POST /runs/<id>/links/: the team's members save; the organisers, other teams and staff get
    the 404 of a missing run (anonymous: the sign-in page, as for a missing run)."""
    settings.DEBUG = False
    world, phases, runs, clients = build()
    enter(phases, "final", True)
    data = {"paper_url": "https://example.org/paper.pdf", "code_url": ""}
    for role, client in clients.items():
        for name, run in runs.items():
            missing = client.post(f"/runs/{MISSING_ID}/links/", data)
            response = client.post(f"/runs/{run.pk}/links/", data)
            if role == RUNS[name][0]:
                assert response.status_code == 302, (role, name)
            else:
                assert response.status_code == missing.status_code, (role, name, response.status_code)
    assert set(Run.objects.exclude(paper_url="").values_list("name", flat=True)) == {
        name for name, (owner, *_rest) in RUNS.items() if owner in ("alice", "bob")}
    # A GET is refused whoever asks.
    assert clients["alice"].get(f"/runs/{runs['dev-a'].pk}/links/").status_code == 405


@pytest.mark.django_db
def test_a_public_run_page_shows_the_method_links_and_scores_but_not_the_file(settings: Any) -> None:
    world, phases, runs, clients = build()
    enter(phases, "final", True)
    run = runs["test-a"]
    Run.objects.filter(pk=run.pk).update(description="Two towers, one fine-tuned.",
                                         paper_url="https://example.org/p.pdf", code_url="https://example.org/code")
    public = clients["bob"].get(f"/runs/{run.pk}/").content.decode()
    assert "Two towers, one fine-tuned." in public
    assert 'href="https://example.org/p.pdf"' in public and 'href="https://example.org/code"' in public
    assert "Per-dialogue scores (24 dialogues" in public and "Where the run stands" in public
    for private in (f"/runs/{run.pk}/file", run.file_sha256[:12], "Withdraw", "Save the links", "run-status"):
        assert private not in public, private
    own = clients["alice"].get(f"/runs/{run.pk}/").content.decode()
    assert f"/runs/{run.pk}/file" in own and "Save the links" in own and "Anyone can open this page" in own
    enter(phases, "test")
    own = clients["alice"].get(f"/runs/{run.pk}/").content.decode()
    assert "Only your team and the task's organisers can open this page" in own
