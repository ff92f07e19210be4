"""vBLEU on the server (issue 15): ``build_vbleu`` stores a pool once by checksum, extends a response
task's gold into a new gold version with its provenance, and the runs are re-scored on it: the
board of that version shows BLEU on the original references beside vBLEU on the extended ones.

The pool is test_vbleu's generated one, whose right answers are known (planted pool pairs for each
item's last utterance; a vector table in which a topic's words lie together). vBLEU is checked
against deltaBLEU computed directly from the extended references (``scoring.kinds.response.bleu`` and a
plain-loop implementation of seed 001 eq. 4), BLEU against sacrebleu on the original references.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
import sacrebleu
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from scoring.kinds import get_kind
from scoring.kinds.response import bleu
from scoring.kinds.response import vbleu as vb
from scoring.kinds.response.formats import load_response_gold
from tests.conftest import committing
from tests.kinds.response.test_vbleu import (
    PLANTED_ITEMS,
    TOPICS,
    jsonl,
    make_gold,
    make_pool,
    plain_corpus_delta_bleu,
    sentence,
    vector_table_text,
)

FAST = ["--train-pairs", "2000", "--held-out-pairs", "500", "--seed", "3"]


@pytest.fixture(scope="module")
def planted() -> dict[str, Any]:
    lines, planted_lines, utterances = make_pool()
    return {"lines": lines, "bytes": jsonl(lines), "planted": planted_lines, "gold": make_gold(utterances)}


def answers(gold: list[dict], lines: list[dict], planted: dict[int, list[int]]) -> dict[str, list[dict]]:
    """``near``: even items answer with a planted pool response (vBLEU retrieves and rates it), odd
    items with the original reference; ``off``: an off-topic sentence everywhere."""
    rng = random.Random(4)
    near = [{"id": entry["id"], "response": lines[planted[item][0] - 1]["response"] if item % 2 == 0
             else entry["references"][0]["text"]} for item, entry in enumerate(gold)]
    off = [{"id": entry["id"], "response": sentence(rng, (item + 5) % TOPICS, 6, ".")}
           for item, entry in enumerate(gold)]
    return {"near": near, "off": off}


@pytest.fixture
def task_with_runs(db: Any, settings: Any, tmp_path: Path, planted: dict[str, Any]) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from kinds.response.vectors import set_vector_table
    from tasks.models import Team
    from tasks.organising import create_task, load_gold_version
    from tasks.tokens import issue_token

    task = create_task("vbleu-task", "response", "Responses", kind="response")
    set_vector_table(task, vector_table_text().encode(), "planted topics")
    with committing():
        load_gold_version(task, orjson.dumps(planted["gold"]), "gold.json", label="original")
    user = get_user_model().objects.create_user("alice", password="alice-pass-1")
    Team.objects.create(name="Aurora", slug="aurora").members.add(user)
    organiser = get_user_model().objects.create_user("olga", password="olga-pass-1")
    task.organisers.add(organiser)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(user)}")
    runs = answers(planted["gold"], planted["lines"], planted["planted"])
    ids = {}
    for name, content in runs.items():
        with committing():
            response = client.post("/api/v1/tasks/vbleu-task/runs/", {
                "file": SimpleUploadedFile("run.json", orjson.dumps(content)), "name": name}, format="multipart")
        assert response.status_code == 202, response.content
        ids[name] = response.json()["id"]
    pool_path = tmp_path / "pool.jsonl"
    pool_path.write_bytes(planted["bytes"])
    yield {"task": task, "runs": runs, "ids": ids, "pool_path": pool_path, "organiser": organiser}


def build(task_with_runs: dict[str, Any], *extra: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    with committing():
        call_command("build_vbleu", "vbleu-task", str(task_with_runs["pool_path"]), *FAST, *extra,
                     stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def delta_bleu_direct(hypotheses: list[str], references: list[list[tuple]]) -> float:
    original = [[(text, weight) for text, weight, *origin in refs if not origin] for refs in references]
    added = [[entry for entry in refs if len(entry) == 3] for refs in references]
    prepared = bleu.prepare_references(original, bleu.DELTA_BLEU, added=added)
    return bleu.corpus_score(bleu.sufficient_statistics(hypotheses, prepared), 2, "average")


@pytest.mark.django_db
def test_build_vbleu_makes_a_new_version_and_the_board_shows_bleu_beside_vbleu(task_with_runs, planted):
    from kinds.response.extension_jobs import pool_file_path
    from kinds.response.models import ReferencePool
    from tasks.models import GoldVersion, Run, Score

    task = task_with_runs["task"]
    out, err = build(task_with_runs)
    assert out.strip().splitlines()[-1] == "2"
    for title in ("reading the pool", "indexing utterances", "retrieving references", "training the rater",
                  "rating references"):
        assert f"{title}" in err and "100%" in err
    original, extended = GoldVersion.objects.filter(task=task).order_by("number")
    assert original.measure_keys == ["bleu", "delta_bleu", "posscore"]
    assert extended.measure_keys == ["bleu", "delta_bleu", "posscore", "vbleu"]
    # The pool: stored once, under its checksum, with its own bytes.
    pool = ReferencePool.objects.get()
    assert pool.sha256 == hashlib.sha256(planted["bytes"]).hexdigest() and pool.n_pairs == len(planted["lines"])
    assert pool_file_path(pool.sha256).read_bytes() == planted["bytes"]
    # Provenance: the version extended, the pool, retrieval and rater settings, accuracy, seed.
    provenance = extended.provenance
    assert provenance["extends"] == 1
    assert provenance["vbleu"]["pool"]["sha256"] == pool.sha256
    assert provenance["vbleu"]["retrieval"]["settings"]["k"] == 15
    rater = provenance["vbleu"]["rater"]
    assert rater["kind"] == "automatic" and rater["settings"]["seed"] == 3
    assert rater["settings"]["train_pairs"] == 2000 and 0.9 < rater["held_out_accuracy"] <= 1.0
    assert extended.provenance_summary() == {"extends": 1, "pool_sha256": pool.sha256, "k": 15, "rater": "automatic",
                                        "seed": 3, "held_out_accuracy": rater["held_out_accuracy"]}
    assert provenance["vbleu"]["references_added"] == PLANTED_ITEMS * 16

    # The extended references, from the version's compiled gold: originals first, 15 + parrot added.
    compiled = extended.load()
    assert compiled.gold.references == load_response_gold(planted["gold"]).references
    assert [len(added) for added in compiled.gold.extended] == [16] * PLANTED_ITEMS
    assert all([origin for _, _, origin in added] == ["pool"] * 15 + ["parrot"] for added in compiled.gold.extended)

    # Runs re-scored on the new version; their scores on version 1 stay, tagged with it.
    for name, run_id in task_with_runs["ids"].items():
        run = Run.objects.get(pk=run_id)
        assert run.status == Run.DONE and run.gold_version_id == extended.pk, name
        assert set(Score.objects.filter(run=run, scope=Score.FULL).values_list("gold_version__number", flat=True)) \
            == {1, 2}
    board = Client().get("/api/v1/tasks/vbleu-task/leaderboard/").json()
    assert [(m["key"], m["higher_is_better"]) for m in board["measures"]] == [
        ("bleu", True), ("delta_bleu", True), ("posscore", True), ("vbleu", True)]
    scores = {run["name"]: run["scores"]["measures"] for run in board["runs"] if not run["name"].startswith("baseline")}
    before = {name: Score.objects.get(run_id=run_id, gold_version=original, scope=Score.FULL).summary["measures"]
              for name, run_id in task_with_runs["ids"].items()}
    all_references = [list(references) + list(added)
                      for references, added in zip(compiled.gold.references, compiled.gold.extended)]
    for name, run in task_with_runs["runs"].items():
        hypotheses = [entry["response"] for entry in run]
        # vBLEU: deltaBLEU over every reference of the new version, computed without the kind.
        assert scores[name]["vbleu"] == pytest.approx(delta_bleu_direct(hypotheses, all_references), abs=1e-12)
        assert scores[name]["vbleu"] == pytest.approx(plain_corpus_delta_bleu(hypotheses, all_references), abs=1e-12)
        # BLEU, deltaBLEU and POSSCORE: the original references only, bit for bit as on version 1.
        for key in ("bleu", "delta_bleu", "posscore"):
            assert scores[name][key] == before[name][key], (name, key)
        kept = [[text for text, weight in references if weight > 0] for references in compiled.gold.references]
        expected = sacrebleu.corpus_bleu(hypotheses, [[refs[0] for refs in kept]], lowercase=True,
                                         smooth_method="none").score / 100
        assert scores[name]["bleu"] == pytest.approx(expected, abs=1e-12)
    # The near run answers half the items with a retrieved, well-rated pool response.
    assert scores["near"]["vbleu"] > scores["near"]["delta_bleu"]
    assert scores["near"]["vbleu"] > scores["off"]["vbleu"]


@pytest.mark.django_db
def test_the_pipeline_reproduces_from_the_recorded_provenance(task_with_runs, planted):
    from kinds.response.extension_jobs import read_stored_pool, source_gold
    from kinds.response.models import ReferencePool
    from scoring.kinds.response.kind import task_vectors
    from tasks.models import GoldVersion

    build(task_with_runs)
    task = task_with_runs["task"]
    original, extended = GoldVersion.objects.filter(task=task).order_by("number")
    pool = read_stored_pool(ReferencePool.objects.get(sha256=extended.provenance["vbleu"]["pool"]["sha256"]))
    gold_data, _ = source_gold(original)
    again = vb.reproduce(gold_data, pool, extended.provenance["vbleu"], vectors=task_vectors(task.kind_config))
    # The same gold file, byte for byte: the version's sha256 is that of the file it was loaded from.
    assert hashlib.sha256(again.gold_json()).hexdigest() == extended.sha256
    assert again.provenance == extended.provenance["vbleu"]
    # Built again from the stored pool (by its checksum): the same version content, the pool not stored twice.
    out = io.StringIO()
    with committing():
        call_command("build_vbleu", "vbleu-task", pool.sha256, *FAST, "--from-version", "1", stdout=out,
                     stderr=io.StringIO())
    third = GoldVersion.objects.get(task=task, number=3)
    assert third.sha256 == extended.sha256 and ReferencePool.objects.count() == 1
    assert third.provenance == extended.provenance


@pytest.mark.django_db
def test_a_bad_pool_is_refused_with_every_bad_line_and_nothing_is_stored(task_with_runs, planted, settings):
    from kinds.response.models import ReferencePool
    from tasks.models import GoldVersion

    lines = planted["bytes"].decode().splitlines()
    lines[2] = '{"utterance": "So what ?", "response": 3}'
    lines[6] = '{"utterance": "So what ?"'
    lines[9] = '{"response": "fine"}'
    task_with_runs["pool_path"].write_text("\n".join(lines) + "\n")
    err = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("build_vbleu", "vbleu-task", str(task_with_runs["pool_path"]), *FAST, stdout=io.StringIO(),
                     stderr=err)
    assert caught.value.returncode == 2 and "3 problem(s); nothing was stored" in str(caught.value)
    problems = [line for line in err.getvalue().splitlines() if line.startswith("pool: ")]
    assert problems == ["pool: line 3: response must be a string, not 3",
                        "pool: line 7: is not valid JSON: unexpected end of data at column 26",
                        "pool: line 10: utterance is missing"]
    assert ReferencePool.objects.count() == 0 and GoldVersion.objects.filter(task=task_with_runs["task"]).count() == 1
    assert not (Path(settings.MEDIA_ROOT) / "pools").exists() or not any((Path(settings.MEDIA_ROOT) / "pools").rglob(
        "*.jsonl"))


@pytest.mark.django_db
def test_bad_arguments_are_all_named_before_any_work(task_with_runs):
    from tasks.models import GoldVersion

    err = io.StringIO()
    ratings = task_with_runs["pool_path"].with_name("ratings.json")
    ratings.write_text("[]")
    with pytest.raises(CommandError) as caught:
        call_command("build_vbleu", "vbleu-task", str(task_with_runs["pool_path"]), "--k", "0", "--ratings",
                     str(ratings), "--parrot-weight", "0.5", "--phase", "nope", stdout=io.StringIO(), stderr=err)
    assert caught.value.returncode == 2
    assert err.getvalue().splitlines() == [
        "--phase: no phase 'nope' in vbleu-task (its phases: none)",
        "--k: k must be an integer from 1 to 100, not 0",
        "--parrot-weight: belongs to the automatic rater, not to --ratings",
    ]
    with pytest.raises(CommandError) as caught:
        call_command("build_vbleu", "vbleu-task", "0" * 64, "--from-version", "7", stdout=io.StringIO(),
                     stderr=(err := io.StringIO()))
    assert err.getvalue().splitlines() == [f"no stored pool has the sha256 {'0' * 64}"]
    with pytest.raises(CommandError):
        call_command("build_vbleu", "vbleu-task", str(task_with_runs["pool_path"]), "--from-version", "7",
                     stdout=io.StringIO(), stderr=(err := io.StringIO()))
    assert err.getvalue().strip().splitlines()[-1] == \
        "--from-version: vbleu-task has no gold version 7 (its versions: 1)"
    assert GoldVersion.objects.filter(task=task_with_runs["task"]).count() == 1


def test_an_unextended_gold_compiles_and_scores_exactly_as_before(planted):
    """The bytes of a gold without vBLEU references hold no trace of vBLEU; an extended gold's
    original references, BLEU, deltaBLEU and POSSCORE are those of the gold it extends, to the bit."""
    kind = get_kind("response")
    config = kind.config({**kind.presets["bleu-only"]})
    plain = kind.compile_gold(planted["gold"], config)
    blob = plain.to_bytes()
    header = json.loads(_header(blob))
    assert sorted(header) == ["acts", "alternatives", "contexts", "format", "ids", "references", "tagging", "warnings"]
    extended_gold = [dict(entry, references=entry["references"] + [
        {"text": f"So t{item % TOPICS}w1 t{item % TOPICS}w2 .", "weight": 0.5, "origin": "pool", "pool_line": 4},
        {"text": entry["context"][-1]["text"], "weight": -0.25, "origin": "parrot"}])
        for item, entry in enumerate(planted["gold"])]
    extended = kind.compile_gold(extended_gold, config)
    assert extended.gold.references == plain.gold.references
    # Participants get the contexts only: no reference, weight or pool information.
    assert kind.participant_data(extended_gold, config) == kind.participant_data(planted["gold"], config) == [
        {"id": entry["id"], "context": entry["context"]} for entry in planted["gold"]]
    again = kind.gold_from_bytes(extended.to_bytes())
    assert again.gold.extended == extended.gold.extended and [origin for _, _, origin in again.gold.extended[0]] == [
        "pool", "parrot"]
    assert [spec.key for spec in kind.measures(config, plain)] == ["bleu", "delta_bleu"]
    assert [spec.key for spec in kind.measures(config, again)] == ["bleu", "delta_bleu", "vbleu"]
    run = answers(planted["gold"], planted["lines"], planted["planted"])["near"]
    on_plain = kind.score(kind.parse_run(run, plain, config), plain, config)
    on_extended = kind.score(kind.parse_run(run, again, config), again, config)
    for key in ("bleu", "delta_bleu"):
        assert on_extended.headlines[key] == on_plain.headlines[key]
        assert on_extended.per_item[key].tobytes() == on_plain.per_item[key].tobytes()
    hypotheses = [entry["response"] for entry in run]
    assert on_extended.headlines["vbleu"] == pytest.approx(
        plain_corpus_delta_bleu(hypotheses, load_response_gold(extended_gold).all_references()), abs=1e-12)
    assert "vbleu" not in on_plain.per_item and list(on_extended.per_item) == ["bleu", "delta_bleu", "vbleu"]
    # An unknown origin is named with its path; no original reference with a positive weight neither.
    bad = [dict(planted["gold"][0], references=[{"text": "a", "weight": -1}, {"text": "b", "origin": "web"},
                                                {"text": "c", "origin": "pool"}])]
    from scoring.validation import ValidationFailed

    with pytest.raises(ValidationFailed) as caught:
        load_response_gold(bad)
    assert caught.value.errors == [
        '[0].references[1].origin: must be "pool" or "parrot" (a reference vBLEU added), or left out, not "web"']
    bad[0]["references"].pop(1)
    with pytest.raises(ValidationFailed) as caught:
        load_response_gold(bad)
    assert caught.value.errors == ["[0].references: no original reference has a positive weight"]


def _header(blob: bytes) -> bytes:
    import numpy as np

    return np.load(io.BytesIO(blob), allow_pickle=False)["header"].tobytes()


@pytest.mark.django_db
def test_organisers_see_the_provenance_on_the_dashboard_and_in_the_api(task_with_runs):
    from django.contrib.auth import get_user_model

    from tasks.models import GoldVersion

    build(task_with_runs)
    extended = GoldVersion.objects.get(task=task_with_runs["task"], number=2)
    summary = extended.provenance_summary()
    organiser = Client()
    organiser.force_login(task_with_runs["organiser"])
    page = organiser.get("/organiser/vbleu-task/").content.decode()
    assert (f"vBLEU references from v1: pool {summary['pool_sha256'][:12]}, k = 15, automatic rater, "
            f"held-out accuracy {summary['held_out_accuracy']:.4f}, seed 3") in page
    answer = organiser.get("/api/v1/tasks/vbleu-task/gold-versions/").json()
    assert [(v["number"], v["measures"], v["provenance_summary"]) for v in answer["gold_versions"]] == [
        (2, ["bleu", "delta_bleu", "posscore", "vbleu"], summary), (1, ["bleu", "delta_bleu", "posscore"], None)]
    assert answer["gold_versions"][0]["provenance"] == extended.provenance
    # Neither references nor pool texts are served, to anybody.
    assert "I have no idea" not in json.dumps(answer)
    participant = Client()
    participant.force_login(get_user_model().objects.get(username="alice"))
    assert participant.get("/api/v1/tasks/vbleu-task/gold-versions/").status_code == 403
    assert Client().get("/api/v1/tasks/vbleu-task/gold-versions/").status_code in (401, 403)


@pytest.mark.django_db
def test_offline_build_writes_the_bytes_the_server_stores(task_with_runs, planted, tmp_path):
    """``build_vbleu --gold --out POOL``: same gold, pool, settings and task configuration (the
    task's uploaded vectors feed the rater), the same bytes as the version the server loads."""
    from tasks.blobs import path as blob_path
    from tasks.models import GoldVersion

    build(task_with_runs)
    version = GoldVersion.objects.get(task=task_with_runs["task"], number=2)
    stored = blob_path("gold", version.source_sha256).read_bytes()
    gold_path, config_path = tmp_path / "gold.json", tmp_path / "config.json"
    gold_path.write_bytes(orjson.dumps(planted["gold"]))
    config_path.write_text(json.dumps(task_with_runs["task"].config))
    out, provenance = tmp_path / "extended.json", tmp_path / "provenance.json"
    call_command("build_vbleu", "--gold", str(gold_path), "--out", str(out), "--config", str(config_path),
                 "--provenance", str(provenance), str(task_with_runs["pool_path"]), *FAST,
                 stdout=io.StringIO(), stderr=io.StringIO())
    assert out.read_bytes() == stored
    assert json.loads(provenance.read_text()) == version.provenance["vbleu"]
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".")) == []
