"""RESPONSE-SPEC.md's and METRICS-SPEC.md's worked examples through the server (upload, scoring job,
leaderboard API), and their validation rule "every problem with its JSON path; nothing stored on
failure" for response and metric runs and response golds.

The expected numbers are the specs' (computed there by an independent implementation); the kinds'
own tests check the same numbers on ``score``; here they go through everything a participant's file
goes through.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from tests.conftest import committing

# RESPONSE-SPEC.md, "BLEU and deltaBLEU", worked examples: the corpus of two items.
CHESS = [{"text": "i love chess", "weight": 1}, {"text": "chess tournaments are fun", "weight": 0.5},
         {"text": "i hate chess tournaments", "weight": -0.5}]
RESPONSE_GOLD = [{"id": "a", "context": [{"sender": "user", "text": "Do you play chess?"}], "references": CHESS},
                 {"id": "b", "context": [{"sender": "user", "text": "Bye then."}],
                  "references": [{"text": "see you later", "weight": 1}, {"text": "bye", "weight": 0.2}]}]
RESPONSE_RUN = [{"id": "a", "response": "i love chess"}, {"id": "b", "response": "see you"}]

# METRICS-SPEC.md, "Fidelity: predictive power", worked example: (metric, human) per response.
METRIC_GOLD = [{"id": "c1", "responses": [{"id": "c1/a", "human": 5}, {"id": "c1/b", "human": 2},
                                          {"id": "c1/c", "human": 3}]},
               {"id": "c2", "responses": [{"id": "c2/a", "human": 1}, {"id": "c2/b", "human": 1},
                                          {"id": "c2/c", "human": 4}]}]
METRIC_RUN = [{"id": "c1/a", "score": 0.9}, {"id": "c1/b", "score": 0.4}, {"id": "c1/c", "score": 0.4},
              {"id": "c2/a", "score": 0.2}, {"id": "c2/b", "score": 0.7}, {"id": "c2/c", "score": 0.5}]


def _task(slug: str, kind: str, gold: list, preset: str = "") -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from tasks.models import Team
    from tasks.organising import create_task, load_gold_version
    from tasks.tokens import issue_token

    task = create_task(slug, preset, slug, kind=kind)
    with committing():
        load_gold_version(task, orjson.dumps(gold), "gold.json")
    user = get_user_model().objects.create_user("alice", password="alice-pass-1")
    Team.objects.create(name="Aurora", slug="aurora").members.add(user)
    return {"task": task, "token": issue_token(user)}


def _upload(world: dict[str, Any], content: Any, name: str) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {world['token']}")
    with committing():
        return client.post(f"/api/v1/tasks/{world['task'].slug}/runs/", {
            "file": SimpleUploadedFile("run.json", orjson.dumps(content)), "name": name}, format="multipart")


def _headlines(slug: str, name: str) -> dict[str, float]:
    board = Client().get(f"/api/v1/tasks/{slug}/leaderboard/").json()
    return next(run for run in board["runs"] if run["name"] == name)["scores"]["measures"]


def _row_counts() -> tuple[int, int, int]:
    from tasks.models import Run, Score, ScoreVector

    return Run.objects.count(), Score.objects.count(), ScoreVector.objects.count()


@pytest.mark.django_db
def test_response_worked_corpus_example_through_the_server() -> None:
    world = _task("spec-response", "response", RESPONSE_GOLD)
    response = _upload(world, RESPONSE_RUN, "worked-example")
    assert response.status_code == 202, response.content
    headlines = _headlines("spec-response", "worked-example")
    # Corpus deltaBLEU with the default brevity "average", rho from the original positively rated
    # references (RESPONSE-SPEC.md, "Which references set rho"): BP = exp(1 - 2.75 / 2.5).
    assert headlines["delta_bleu"] == pytest.approx(0.9048374180, abs=1e-10)
    assert headlines["delta_bleu"] == pytest.approx(math.exp(1 - 2.75 / 2.5), abs=1e-15)


@pytest.mark.django_db
def test_an_invalid_response_run_lists_every_problem_with_its_path_and_stores_nothing() -> None:
    world = _task("spec-response", "response", RESPONSE_GOLD)
    before = _row_counts()
    # (A run with more entries than the gold has items is refused before its entries are read, so
    # each file here has two entries.)
    bad = [{"id": "a", "response": "i love chess", "nuggets": [{"text": "i love", "act": "Apology"},
                                                               {"text": "chess!", "act": "Apology"}]},
           {"id": "zzz", "response": "x"}]
    response = _upload(world, bad, "bad")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    # RESPONSE-SPEC.md, "Validation": unknown or missing ids, nugget texts that do not put together the
    # response, non-string or empty responses; each named with its JSON path.
    assert any(line.startswith("[0].nuggets:") and "not the response" in line for line in errors), errors
    assert any(line.startswith('[1].id: "zzz"') for line in errors), errors
    assert any('have no response: "b"' in line for line in errors), errors
    texts = _upload(world, [{"id": "a", "response": 42}, {"id": "b", "response": "  "}], "bad-texts")
    assert texts.status_code == 400
    assert texts.json()["errors"] == ["[0].response: must be a string, not 42", "[1].response: must not be empty",
                                      "the file was checked against gold version 1 of spec-response (its latest)"]
    assert _row_counts() == before
    acts = _upload(world, [{"id": "a", "response": "i love chess", "nuggets": [{"text": "i love chess",
                                                                               "act": "Sonnet"}]},
                           {"id": "b", "response": "see you"}], "bad-act")
    assert acts.status_code == 400
    assert any(line.startswith('[0].nuggets[0].act: "Sonnet" is not an act') for line in acts.json()["errors"])
    assert _row_counts() == before


@pytest.mark.django_db
def test_an_invalid_response_gold_lists_every_problem_and_stores_no_version() -> None:
    from tasks.errors import Rejected
    from tasks.models import GoldVersion
    from tasks.organising import create_task, load_gold_version

    task = create_task("spec-response-gold", "", "gold", kind="response")
    # NaN written as JSON's extension, as a careless exporter writes it (orjson refuses to write it).
    bad = (b'[{"id": "a", "references": [{"text": "ok", "weight": 1.5}, {"text": "x", "weight": NaN}]},'
           b' {"id": "b", "references": [{"text": "only bad", "weight": -0.2}]}]')
    with pytest.raises(Rejected) as refused:
        load_gold_version(task, bad, "gold.json")
    errors = refused.value.errors
    assert any(line.startswith("[0].references[0].weight: 1.5 is outside [-1, 1]") for line in errors), errors
    assert any(line.startswith("[0].references[1].weight: must be a finite number") for line in errors), errors
    assert any(line.startswith("[1].references: no reference has a positive weight") for line in errors), errors
    assert not GoldVersion.objects.filter(task=task).exists()


@pytest.mark.django_db
def test_metric_predictive_power_worked_example_through_the_server() -> None:
    world = _task("spec-metric", "metric", METRIC_GOLD, preset="metric-quick")
    response = _upload(world, METRIC_RUN, "worked-example")
    assert response.status_code == 202, response.content
    headlines = _headlines("spec-metric", "worked-example")
    # 5 pairs (c2/a, c2/b tie in people: dropped), 3 correct; the metric tie c1/b, c1/c is wrong, or half.
    assert headlines["predictive_power"] == pytest.approx(0.6, abs=1e-15)
    assert headlines["predictive_power_ties_half"] == pytest.approx(0.7, abs=1e-15)


@pytest.mark.django_db
def test_an_invalid_metric_run_lists_every_problem_with_its_path_and_stores_nothing() -> None:
    world = _task("spec-metric", "metric", METRIC_GOLD, preset="metric-quick")
    before = _row_counts()
    bad = [dict(entry) for entry in METRIC_RUN]
    bad[0]["score"] = "high"
    bad[1]["id"] = "c9/z"
    response = _upload(world, bad, "bad")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert any(line.startswith("[0].score") for line in errors), errors
    assert any(line.startswith("[1].id") for line in errors), errors
    assert any('"c1/b" has no score' in line for line in errors), errors
    assert _row_counts() == before
