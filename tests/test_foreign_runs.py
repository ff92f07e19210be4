"""Issue 37, item 9: a run file of another kind (or of another task's gold) is told so once, naming
the kind it looks like, instead of one problem per entry (141 to 303 lines before). One path for
every kind: ``Kind.read_run_file``, which the upload calls."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from fixtures import metric_demo, response_demo, synthetic
from tests.conftest import committing

TITLES = {"stc3": "dialogue quality and nugget detection (DQ/ND)", "response": "response-evaluation",
          "metric": "metrics-track"}
KEYS = {"stc3": "'quality' and 'nugget'", "response": "'response' and 'nuggets'", "metric": "'score'"}


@pytest.fixture
def tasks(db: Any) -> dict[str, Any]:
    """One task of each kind, 30 items (the metric task: 6 contexts x 5 systems = 30 responses)
    and a run of each kind on its own gold; a team's token."""
    from django.contrib.auth import get_user_model

    from tasks.models import Team
    from tasks.organising import create_task, load_gold_version
    from tasks.tokens import issue_token

    golds = {"stc3": synthetic.generate_gold(30, seed=1), "response": response_demo.generate_gold(30, seed=1),
             "metric": metric_demo.generate_gold(6, 5, seed=1)}
    runs = {"stc3": synthetic.generate_run(golds["stc3"], "noisy", noise=0.2, seed=1),
            "response": response_demo.generate_runs(golds["response"], seed=1)["strong"],
            "metric": metric_demo.generate_runs(golds["metric"], seed=1)["close"]}
    for kind, preset in (("stc3", "stc3"), ("response", "response"), ("metric", "metric-quick")):
        task = create_task(f"{kind}-task", preset, kind, kind=kind)
        with committing():
            load_gold_version(task, orjson.dumps(golds[kind]), "gold.json")
    user = get_user_model().objects.create_user("alice", password="alice-pass-1")
    Team.objects.create(name="Aurora", slug="aurora").members.add(user)
    return {"runs": runs, "token": issue_token(user)}


def upload(tasks: dict[str, Any], kind: str, content: Any) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {tasks['token']}")
    with committing():
        return client.post(f"/api/v1/tasks/{kind}-task/runs/", {
            "file": SimpleUploadedFile("run.json", orjson.dumps(content)), "name": "x"}, format="multipart")


@pytest.mark.django_db
def checked(kind: str) -> str:
    return f"the file was checked against gold version 1 of {kind}-task (its latest)"


@pytest.mark.parametrize("task_kind", ["stc3", "response", "metric"])
@pytest.mark.parametrize("run_kind", ["stc3", "response", "metric"])
def test_a_run_of_another_kind_is_told_so_once_naming_its_kind(tasks: dict[str, Any], task_kind: str,
                                                              run_kind: str) -> None:
    from tasks.models import Run

    if task_kind == run_kind:
        assert upload(tasks, task_kind, tasks["runs"][run_kind]).status_code == 202
        return
    run = tasks["runs"][run_kind]
    response = upload(tasks, task_kind, run)
    assert response.status_code == 400
    first = run[0]["id"]
    # The refusal's last line, on main since the port, names the gold the file was read against.
    assert response.json()["errors"] == [
        f"$: none of the {len(run)} ids in this file is an id of this task's gold data (the file's first is "
        f"\"{first}\"); the file looks like a run of the {TITLES[run_kind]} kind (it has {KEYS[run_kind]}), "
        f"and this task is of the {TITLES[task_kind]} kind", checked(task_kind)]
    assert not Run.objects.filter(name="x", task__slug=f"{task_kind}-task").exists()


@pytest.mark.django_db
def test_a_run_of_this_kind_on_other_gold_and_a_run_with_some_known_ids(tasks: dict[str, Any]) -> None:
    other = synthetic.generate_run(synthetic.generate_gold(30, seed=2), "noisy", noise=0.2, seed=1)
    errors = upload(tasks, "stc3", other).json()["errors"]
    assert errors == [f"$: none of the 30 ids in this file is an id of this task's gold data (the file's first is "
                      f"\"{other[0]['id']}\"); it looks like a run of this kind (it has 'quality' and 'nugget'), "
                      "for other gold data", checked("stc3")]
    # One known id: the file is a run of this gold with wrong entries, each named as before.
    mixed = [tasks["runs"]["stc3"][0], *other[1:]]
    errors = upload(tasks, "stc3", mixed).json()["errors"]
    assert sum("is not in the gold data of this task" in line for line in errors) == 29
    assert not any("none of the" in line for line in errors)
    # Entries that look like no kind's run.
    errors = upload(tasks, "stc3", [{"id": "zz", "guess": 3}]).json()["errors"]
    assert errors == ["$: none of the 1 ids in this file is an id of this task's gold data (the file's first is "
                      "\"zz\"): is it a run of this task?", checked("stc3")]
