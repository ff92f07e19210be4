"""Organiser commands: create_task, load_gold, create_participant, demo."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from knox.models import AuthToken
from rest_framework.test import APIClient

from fixtures.synthetic import generate_gold
from tasks.models import GoldVersion, Run, Task
from tests.conftest import committing


def run_command(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    with committing():
        call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_create_task_with_the_stc3_preset() -> None:
    out, _ = run_command("create_task", "stc3-zh", "--preset", "stc3", "--title", "STC-3 Chinese")
    task = Task.objects.get(slug="stc3-zh")
    assert task.title == "STC-3 Chinese"
    assert task.config["quality_dimensions"] == ["A", "S", "E"]
    assert task.config["quality_scale"] == ["2", "1", "0", "-1", "-2"]
    assert task.config["customer_nugget_types"] == ["CNUG0", "CNUG", "CNUG*", "CNaN"]
    assert task.config["helpdesk_nugget_types"] == ["HNUG", "HNUG*", "HNaN"]
    assert task.config["alpha"] == 0.5
    assert "created task stc3-zh" in out


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ["A", "has space", "-lead", "x" * 60])
def test_create_task_rejects_bad_slugs(slug: str) -> None:
    with pytest.raises(CommandError, match="slug"):
        run_command("create_task", slug)
    assert not Task.objects.exists()


@pytest.mark.django_db
def test_load_gold_prints_the_version_and_adds_baselines(tmp_path: Path) -> None:
    run_command("create_task", "t-one")
    gold_file = tmp_path / "gold.json"
    gold_file.write_bytes(orjson.dumps(generate_gold(25, seed=1)))
    out, _ = run_command("load_gold", "t-one", str(gold_file))
    assert out.strip().splitlines()[-1] == "1"
    out, _ = run_command("load_gold", "t-one", str(gold_file))
    assert out.strip().splitlines()[-1] == "2"
    assert GoldVersion.objects.filter(task__slug="t-one").count() == 2
    baselines = Run.objects.filter(task__slug="t-one", is_baseline=True, gold_version__number=2)
    assert sorted(run.name for run in baselines) == ["baseline-popularity-v2", "baseline-uniform-v2"]
    assert all(run.status == Run.DONE for run in baselines)
    assert Run.objects.filter(task__slug="t-one", is_baseline=True, gold_version__number=1).count() == 2


@pytest.mark.django_db
def test_load_gold_reports_every_problem_and_stores_nothing(tmp_path: Path) -> None:
    run_command("create_task", "t-two")
    gold = generate_gold(5, seed=1)
    gold[1]["annotations"][0]["nugget"] = gold[1]["annotations"][0]["nugget"][:-1]
    gold[2]["turns"][0]["sender"] = "robot"
    gold_file = tmp_path / "gold.json"
    gold_file.write_bytes(orjson.dumps(gold))
    with pytest.raises(CommandError, match="2 problem"):
        run_command("load_gold", "t-two", str(gold_file))
    assert not GoldVersion.objects.exists() and not Run.objects.exists()
    with pytest.raises(CommandError, match="no task 'nope'"):
        run_command("load_gold", "nope", str(gold_file))
    with pytest.raises(CommandError, match="cannot read"):
        run_command("load_gold", "t-two", str(tmp_path / "missing.json"))


@pytest.mark.django_db
def test_create_participant_prints_a_working_token_last() -> None:
    out, _ = run_command("create_participant", "carol", "--team", "Team Carol")
    token = out.strip().splitlines()[-1]
    # Stored only as its SHA-512 digest (knox), and it authenticates carol.
    stored = AuthToken.objects.get(user__username="carol")
    assert stored.digest == hashlib.sha512(token.encode()).hexdigest() and token not in str(stored.__dict__)
    assert stored.user.teams.get().name == "Team Carol"
    reply = APIClient(HTTP_AUTHORIZATION=f"Token {token}").get("/api/v1/runs/999999/")
    assert reply.status_code == 404  # authenticated (an unknown token would be 401)
    assert APIClient(HTTP_AUTHORIZATION=f"Token {token[:-1]}x").get("/api/v1/runs/999999/").status_code == 401
    with pytest.raises(CommandError, match="exists already"):
        run_command("create_participant", "carol", "--team", "Other")


@pytest.mark.django_db
def test_demo_builds_a_scored_task_of_every_kind_once(settings, tmp_path: Path) -> None:
    from scoring.kinds import KINDS
    from tasks.models import Phase, Score

    settings.VAR_DIR = tmp_path
    out, _ = run_command("demo", "--dialogues", "40", "--password", "demo-pass-123")
    every = list(Task.objects.all())
    tasks = {task.kind: task for task in every}
    assert set(tasks) == set(KINDS)
    # A Japanese response task too (issue 27): ja-mecab tokens, GiNZA's tags and vectors.
    japanese = Task.objects.get(slug="response-ja-demo")
    assert japanese.kind_config.language == "ja" and japanese.kind_config.pipeline == "ja_ginza"
    # ... with BERTScore (issue 29): its runs' scores name the encoder and the baseline.
    assert "bertscore" in japanese.kind_config.measures
    scored = Score.objects.filter(run__task=japanese, run__is_baseline=False).first()
    assert scored.summary["settings"]["bertscore"]["encoder"] == "multilingual-e5-small"
    assert "bertscore" in scored.summary["measures"]
    # A Chinese one (issue 42): zh tokens, jieba's tags with the encoder's word vectors, BERTScore.
    chinese = Task.objects.get(slug="response-zh-demo")
    assert chinese.kind_config.language == "zh" and chinese.kind_config.pipeline == "zh_jieba"
    scored = Score.objects.filter(run__task=chinese, run__is_baseline=False).first()
    assert set(scored.summary["measures"]) == {"bleu", "delta_bleu", "posscore", "bertscore"}
    assert scored.summary["settings"]["posscore"]["vectors"]["source"] == "encoder"
    assert (tmp_path / "demo" / "response-zh-demo" / "pool.jsonl").exists()
    for task in every:
        # A development phase that is over and a test phase open now, each on its own gold version.
        development, test = task.phases.order_by("starts_at")
        assert (development.kind, test.kind) == (Phase.DEVELOPMENT, Phase.TEST)
        assert not development.is_open() and test.is_open() and test.live_subset_size
        assert development.gold_version.label == "development" and test.gold_version.label == "test"
        runs = Run.objects.filter(task=task)
        assert set(runs.values_list("status", flat=True)) == {Run.DONE}
        assert runs.filter(phase=development).exists() and runs.filter(phase=test).exists()
        assert runs.filter(is_baseline=True, gold_version=test.gold_version).exists()
        assert (tmp_path / "demo" / task.slug / "sample-run.json").exists()
    task = tasks["stc3"]
    assert task.slug == "stc3-demo" and Run.objects.filter(task=task, is_baseline=False).count() == 8
    assert "participant login: alice / demo-pass-123" in out
    # The files to try it with: a run that the open test phase accepts, and the test data without annotations.
    sample = (tmp_path / "demo" / "sample-run.json").read_bytes()
    test_data = orjson.loads((tmp_path / "demo" / "test-data.json").read_bytes())
    gold = orjson.loads((tmp_path / "demo" / "gold.json").read_bytes())
    assert [dialogue["id"] for dialogue in test_data] == [dialogue["id"] for dialogue in gold]
    assert len(test_data) == 40 and all(set(dialogue) == {"id", "turns"} for dialogue in test_data)
    client = APIClient()
    token = out.split("alice's API token: ")[1].split()[0]
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    for slug, folder in (("stc3-demo", tmp_path / "demo"), ("metric-demo", tmp_path / "demo" / "metric-demo")):
        with committing():
            reply = client.post(f"/api/v1/tasks/{slug}/runs/", {
                "file": SimpleUploadedFile("sample-run.json", (folder / "sample-run.json").read_bytes()),
                "description": "the demo's sample run"}, format="multipart")
        assert reply.status_code == 202, reply.content
        assert Run.objects.get(pk=reply.json()["id"]).status == Run.DONE
    assert sample == (tmp_path / "demo" / "stc3-demo" / "sample-run.json").read_bytes()
    again, _ = run_command("demo")
    assert "exists already" in again and "alice / demo-pass-123" in again


@pytest.mark.django_db
def test_nul_characters_in_command_arguments_are_refused_with_a_message(tmp_path: Path) -> None:
    """PostgreSQL refuses NUL in text; the commands say so instead of failing in the database."""
    with pytest.raises(CommandError, match="title: Null characters are not allowed"):
        run_command("create_task", "t-nul", "--title", "bad\x00title")
    assert not Task.objects.exists()
    run_command("create_task", "t-nul")
    gold_file = tmp_path / "gold.json"
    gold_file.write_bytes(orjson.dumps(generate_gold(10, seed=2)))
    stderr = io.StringIO()
    with pytest.raises(CommandError, match="1 problem"):
        call_command("load_gold", "t-nul", str(gold_file), "--label", "te\x00st", stderr=stderr)
    assert "label: at most 100 characters, without NUL characters" in stderr.getvalue()
    assert not GoldVersion.objects.exists()
    with committing():
        run_command("load_gold", "t-nul", str(gold_file))
    with pytest.raises(CommandError, match="name: Null characters are not allowed"):
        run_command("create_phase", "t-nul", "ph\x00ase", "--starts", "2026-12-01T00:00", "--ends", "2026-12-02T00:00")


@pytest.mark.django_db
def test_staff_cannot_delete_or_edit_scores_in_the_admin(world) -> None:
    from django.test import Client

    from tasks.models import Score

    staff = Client()
    staff.force_login(world.staff)
    score = Score.objects.first()
    assert staff.get(f"/admin/tasks/score/{score.pk}/change/").status_code == 200  # viewable
    assert staff.post(f"/admin/tasks/score/{score.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Score.objects.filter(pk=score.pk).exists()


def test_manage_py_runs_under_the_project_virtualenv_from_a_plain_python(tmp_path: Path) -> None:
    """``python manage.py ...`` as the README writes it, from a Python without Django (the one that
    ran ``dev.py``): manage.py re-runs itself under .venv instead of failing on ``import django``."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    base = Path(sys.base_prefix) / "bin" / "python3"
    if not (root / ".venv" / "bin" / "python").exists() or not base.exists():
        pytest.skip("needs the project's .venv (made by dev.py) and the Python that made it")
    if subprocess.run([str(base), "-c", "import django"], capture_output=True).returncode == 0:
        pytest.skip("this Python has Django installed itself: there is nothing to re-run")
    gold = generate_gold(4, seed=1)
    (tmp_path / "gold.json").write_bytes(orjson.dumps(gold))
    from fixtures.synthetic import generate_run

    (tmp_path / "run.json").write_bytes(orjson.dumps(generate_run(gold, "noisy", seed=2)))
    scored = subprocess.run([str(base), str(root / "manage.py"), "score", str(tmp_path / "run.json"),
                             str(tmp_path / "gold.json")], capture_output=True, text=True, timeout=120)
    assert scored.returncode == 0, scored.stderr
    assert orjson.loads(scored.stdout)["n_dialogues"] == 4
    helped = subprocess.run([str(base), str(root / "manage.py"), "help", "load_gold"], capture_output=True,
                            text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "EVALSERVER_VAR_DIR": str(tmp_path)})
    assert helped.returncode == 0, helped.stderr
    assert "load_gold" in helped.stdout
