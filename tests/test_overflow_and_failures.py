"""Issue 11, defect 3: values whose sum overflows, non-finite scores and failures that would recur.

Values that are each finite but whose sum overflows a double (two values of 1e308, two integers
of 10**308) are scored like the ratio they state; an integer too large for a double (10**400) is
refused at validation with its JSON path, by both validators. A failure that would happen again
(a run that no longer validates, a NaN score, a value the database refuses, a bug) ends the run
``failed`` after one try, server-side, without using quota; only transient database errors retry.
"""

from __future__ import annotations

import io
import json
import sys
from datetime import timedelta

import numpy as np
import orjson
import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from scoring.kinds.stc3 import STC3, evaluate, load_gold, load_run
from scoring.kinds.stc3.careful import _load_run_checked
from scoring.kinds.stc3.fast import _load_run_fast, _run_fast
from scoring.validation import ValidationFailed, parse_json
from tasks import jobs, organising, submissions
from tasks.models import Phase, Run, Score
from tasks.submissions import quota_numbers
from tests.conftest import World, committing, require_postgres, run_bytes

HOLES = {"quality": '"__Q__"', "nugget": '"__N__"'}


def run_with(gold: list, literal: str) -> tuple[bytes, bytes]:
    """A run whose first dialogue's A distribution and first turn's estimate hold ``literal`` twice,
    written as text exactly as given (``1e308``, ``1`` followed by 308 zeros), and the same run
    with 1 in their place: both state the ratio 1:1, so both must score the same."""
    entries = orjson.loads(run_bytes(gold, 0.3))
    entries[0]["quality"]["A"] = {"2": "__Q__", "1": "__Q__"}
    first_type = "CNUG" if gold[0]["turns"][0]["sender"] == "customer" else "HNUG"
    other_type = "CNaN" if first_type == "CNUG" else "HNaN"
    entries[0]["nugget"][0] = {first_type: "__N__", other_type: "__N__"}
    text = json.dumps(entries)
    big = text.replace(HOLES["quality"], literal).replace(HOLES["nugget"], literal)
    ones = text.replace(HOLES["quality"], "1").replace(HOLES["nugget"], "1")
    return big.encode(), ones.encode()


def client_for(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def upload(world: World, content: bytes, name: str = "run"):
    from django.core.files.uploadedfile import SimpleUploadedFile

    with committing():
        return client_for(world.alice_token).post(
            f"/api/v1/tasks/{world.task.slug}/runs/",
            {"file": SimpleUploadedFile("run.json", content), "name": name}, format="multipart")


def all_finite(data: object) -> bool:
    if isinstance(data, dict):
        return all(all_finite(value) for value in data.values())
    if isinstance(data, list):
        return all(all_finite(value) for value in data)
    return not isinstance(data, float) or np.isfinite(data)


@pytest.mark.parametrize("literal", ["1e308", "1" + "0" * 308, "1.7976931348623157e308"])
def test_both_validators_accept_values_whose_sum_overflows_and_agree(literal: str) -> None:
    from fixtures.synthetic import generate_gold

    gold_data = generate_gold(12, seed=3)
    gold = load_gold(gold_data, STC3)
    big, ones = run_with(gold_data, literal)
    parsed = parse_json(big)
    fast, careful = _run_fast(parsed, gold, False), _load_run_checked(parsed, gold)
    assert fast is not None, "the fast path must not fall back on such a file"
    for dim in STC3.quality_dimensions:
        assert np.array_equal(fast.quality[dim], careful.quality[dim])
    assert np.array_equal(fast.customer, careful.customer) and np.array_equal(fast.helpdesk, careful.helpdesk)
    assert fast.warnings == careful.warnings == []
    scored = evaluate(careful, gold).to_dict(per_dialogue=True)
    reference = evaluate(load_run(parse_json(ones), gold), gold).to_dict(per_dialogue=True)
    assert all_finite(scored)
    assert scored == reference


def test_a_row_of_huge_fractions_warns_without_infinity() -> None:
    from fixtures.synthetic import generate_gold

    gold_data = generate_gold(5, seed=3)
    gold = load_gold(gold_data, STC3)
    entries = orjson.loads(run_bytes(gold_data, 0.3))
    entries[1]["quality"]["S"] = {"2": 1e308, "1": 1e308, "0": 0.5}
    run = load_run(entries, gold)
    assert run.warnings == ["1 distribution(s) sum to neither 1 (probabilities) nor whole counts; they were "
                            "normalised by their sums, which may hide a mistake: [1].quality.S (sum over 1.8e308)"]
    assert all_finite(evaluate(run, gold).to_dict(per_dialogue=True))


@pytest.mark.parametrize("where", ["quality", "nugget"])
def test_an_integer_too_large_for_a_double_is_refused_by_both_validators(where: str) -> None:
    from fixtures.synthetic import generate_gold

    gold_data = generate_gold(6, seed=3)
    gold = load_gold(gold_data, STC3)
    entries = orjson.loads(run_bytes(gold_data, 0.3))
    if where == "quality":
        entries[2]["quality"]["E"]["0"] = 10**400
        expected = '[2].quality.E["0"]: value is too large to be a number'
    else:
        label = next(iter(entries[2]["nugget"][1]))
        entries[2]["nugget"][1][label] = 10**400
        expected = f'[2].nugget[1]["{label}"]: value is too large to be a number'
    assert _load_run_fast(entries, gold, False) is None  # the fast path hands it to the careful one
    with pytest.raises(ValidationFailed) as failed:
        load_run(entries, gold)
    assert failed.value.errors == [expected]


@pytest.mark.django_db
@pytest.mark.parametrize("literal", ["1e308", "1" + "0" * 308])
def test_overflowing_values_upload_and_score_like_their_ratio(world: World, literal: str) -> None:
    big, ones = run_with(world.gold, literal)
    response = upload(world, big, name="huge")
    assert response.status_code == 202, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.status == Run.DONE and run.errors == [] and run.attempts == 1
    reference = client_for(world.alice_token).get(upload(world, ones, name="ones").json()["url"]).json()
    status = client_for(world.alice_token).get(f"/api/v1/runs/{run.pk}/").json()
    assert status["scores"] == reference["scores"]
    assert all_finite(status["scores"])
    for vector in Score.objects.get(run=run).vectors.all():
        assert np.isfinite(vector.array()).all() and np.isfinite(vector.mean)
    # The worker function itself, called again on the queued run, gives the same.
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED)
    assert jobs.score_run(run.pk) == "done"
    assert Score.objects.get(run=run).summary == reference["scores"]
    board = client_for(world.alice_token).get(f"/api/v1/tasks/{world.task.slug}/leaderboard/")
    assert b"NaN" not in board.content and b"Infinity" not in board.content


@pytest.mark.django_db
def test_an_integer_too_large_for_a_double_is_refused_at_upload_with_its_path(world: World) -> None:
    big, _ = run_with(world.gold, "1" + "0" * 400)
    response = upload(world, big)
    assert response.status_code == 400
    assert '[0].quality.A["2"]: value is too large to be a number' in response.json()["errors"]
    assert not Run.objects.filter(team__isnull=False).exists()


def test_score_command_prints_finite_json_for_overflowing_values(tmp_path) -> None:
    from fixtures.synthetic import generate_gold
    from scoring.cli import main

    gold_data = generate_gold(8, seed=4)
    big, ones = run_with(gold_data, "1e308")
    (tmp_path / "gold.json").write_bytes(orjson.dumps(gold_data))
    outputs = []
    for name, content in (("big.json", big), ("ones.json", ones)):
        (tmp_path / name).write_bytes(content)
        stdout, stderr = io.StringIO(), io.StringIO()
        assert main([str(tmp_path / name), str(tmp_path / "gold.json"), "--per-dialogue"], stdout, stderr) == 0
        outputs.append(json.loads(stdout.getvalue(), parse_constant=lambda token: pytest.fail(f"{token} printed")))
    assert outputs[0] == outputs[1]


def test_score_command_refuses_to_print_a_non_finite_score(tmp_path, monkeypatch) -> None:
    """Fault injection: a measure that returns NaN (a bug) must not reach the output."""
    from fixtures.synthetic import generate_gold
    from scoring import cli
    from scoring.kinds.stc3 import measures

    gold_data = generate_gold(8, seed=4)
    (tmp_path / "gold.json").write_bytes(orjson.dumps(gold_data))
    (tmp_path / "run.json").write_bytes(run_bytes(gold_data))
    broken = dict(measures.MEASURES)
    original = broken["nmd"]
    broken["nmd"] = lambda estimate, gold, variant: original(estimate, gold, variant) * np.nan
    monkeypatch.setattr(sys.modules["scoring.kinds.stc3.evaluate"], "MEASURES", broken)
    for output_format in ("json", "table"):
        stdout, stderr = io.StringIO(), io.StringIO()
        status = cli.main([str(tmp_path / "run.json"), str(tmp_path / "gold.json"), "--format", output_format],
                          stdout, stderr)
        assert status == cli.EXIT_NOT_FINITE
        assert stdout.getvalue() == ""
        assert "not finite numbers for A.nmd, S.nmd, E.nmd" in stderr.getvalue()


def _phase(world: World) -> Phase:
    now = timezone.now()
    return Phase.objects.create(task=world.task, name="dev", gold_version=world.gold_version,
                                starts_at=now - timedelta(hours=1), ends_at=now + timedelta(hours=1),
                                daily_quota=5, total_quota=5)


def _submit(world: World, phase: Phase | None = None) -> Run:
    with committing():
        return submissions.submit_run(world.task, world.alice, submissions.Submission(
            content=run_bytes(world.gold), filename="r.json", name="r"), phase)


def _assert_failed_once_server_side(run: Run, fragment: str, phase: Phase, attempts: int = 1) -> None:
    run.refresh_from_db()
    assert run.status == Run.FAILED, run.errors
    assert run.attempts == attempts
    assert any(fragment in line for line in run.errors), run.errors
    assert not Score.objects.filter(run=run, gold_version=run.gold_version).exists()
    assert quota_numbers(run.team, phase)["total_used"] == 0


@pytest.mark.django_db
def test_a_non_finite_score_fails_the_run_once_server_side(world: World, monkeypatch) -> None:
    from scoring.kinds.stc3 import measures
    from tasks.jobs import score_run_task

    phase = _phase(world)
    broken = dict(measures.MEASURES)
    original = broken["jsd"]
    broken["jsd"] = lambda estimate, gold, variant: original(estimate, gold, variant) * np.inf
    monkeypatch.setattr(sys.modules["scoring.kinds.stc3.evaluate"], "MEASURES", broken)
    run = _submit(world, phase)
    _assert_failed_once_server_side(run, "not finite numbers (NaN or infinity) for quality.A.jsd", phase)
    # The Celery task, run again on the failed run, does nothing: nothing to retry.
    assert score_run_task.apply((run.pk,)).get().startswith("skipped")
    run.refresh_from_db()
    assert run.attempts == 1 and run.status == Run.FAILED


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_value_the_database_refuses_fails_the_run_once_instead_of_retrying(monkeypatch) -> None:
    """PostgreSQL refuses a NUL character in jsonb (a DataError): on the old code the job raised,
    the run stayed ``scoring`` and was re-sent at every stale timeout."""
    require_postgres()
    from scoring.kinds import Scored
    from tasks.jobs import score_run_task
    from tests.conftest import make_world

    world = make_world()
    phase = _phase(world)
    original = Scored.summary
    monkeypatch.setattr(Scored, "summary", lambda self: {**original(self), "settings": {"variant": "paper\x00"}})
    run = _submit(world, phase)
    _assert_failed_once_server_side(run, "internal error while scoring (DataError)", phase)
    Run.objects.filter(pk=run.pk).update(status=Run.QUEUED)
    # .result, not .get(): get() refuses to run when an earlier test left a task on Celery's stack
    assert score_run_task.apply((run.pk,)).result == "failed: internal error"
    run.refresh_from_db()
    assert run.status == Run.FAILED and run.attempts == 2


@pytest.mark.django_db
def test_a_run_that_no_longer_validates_fails_server_side_and_frees_its_quota(world: World) -> None:
    phase = _phase(world)
    run = _submit(world, phase)
    assert quota_numbers(run.team, phase)["total_used"] == 1
    with committing():
        organising.load_gold_version(world.task, orjson.dumps(world.gold[:20]), "smaller.json", phases=[phase])
    _assert_failed_once_server_side(run, "is not in the gold data of this task", phase, attempts=2)
    assert run.errors[0] == ("the run does not validate against gold version 2 of the dev phase (the organisers "
                             "changed the gold); it does not count against your quota:")
