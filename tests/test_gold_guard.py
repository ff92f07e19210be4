"""The gold guard by content (issue 43, item 2): a data file holding the annotations of any item of
a gold version that is still secret is refused, whatever its formatting, key order, escapes,
compression, or the other items around it; dialogues without annotations (what participants must
get) and unrelated files are accepted; a bomb is refused without being unpacked.

The files are built here the way an organiser would make them (``json.dumps`` with an indent, the
keys in another order, ``gzip``, a training file with the test dialogues in it), and the expected
messages are written out from the gold's own ids, never read from the guard.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import lzma
import re
import tarfile
import zipfile
from datetime import timedelta
from typing import Any

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from fixtures import metric_demo, response_demo
from fixtures.synthetic import generate_gold
from tasks import blobs, datafiles
from tasks.errors import Rejected
from tasks.models import AccessLog, DataFile, GoldVersion, Phase, Task
from tasks.organising import create_task, load_gold_version
from tests.conftest import World, committing

NEVER = ("gold annotations are never published as a data file. Participants get the items without annotations "
         "from the participant-data.json the server makes for each phase. It may be published once every phase "
         "on that gold has ended with its results published.")


def add(task: Task, name: str, content: bytes, **options: Any) -> DataFile:
    with committing():
        return datafiles.add_data_file(task, name, io.BytesIO(content), **options)


def refusal(task: Task, name: str, content: bytes) -> list[str]:
    with pytest.raises(Rejected) as refused:
        add(task, name, content)
    assert not DataFile.objects.filter(task=task, name=name).exists()
    return refused.value.errors


def named(ids: list[str]) -> str:
    """How the message names leaked items: the first three ids in order, then how many more."""
    ids = sorted(ids)
    return ", ".join(ids[:3]) + (f" and {len(ids) - 3:,} more" if len(ids) > 3 else "")


def leak(count: int, noun: str, ids: list[str], version: str) -> str:
    return f"file: holds the hidden annotations of {count} {noun} ({named(ids)}) of {version}: {NEVER}"


@pytest.fixture
def test_gold(world: World) -> tuple[list[dict[str, Any]], GoldVersion]:
    """A second, test gold of the demo task with a Chinese utterance (so that escapes matter)."""
    gold = generate_gold(20, seed=41)
    gold[0]["turns"][0]["utterances"] = ["我的订单还没到，怎么办？"]
    with committing():
        version = load_gold_version(world.task, orjson.dumps(gold), "test_cn.json", label="test")
    return gold, version


TEST_VERSION = "gold version 2 (test) of this task, loaded from test_cn.json"


# Whatever the formatting --------------------------------------------------------------------------

@pytest.mark.django_db
def test_the_gold_reindented_with_keys_reordered_and_escaped_is_refused(world: World, test_gold: Any) -> None:
    gold, _ = test_gold
    ids = [dialogue["id"] for dialogue in gold]
    reindented = json.dumps(gold, indent=2).encode()
    assert refusal(world.task, "test.json", reindented) == [leak(20, "dialogues", ids, TEST_VERSION)]

    def reordered(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: reordered(value[key]) for key in sorted(value, reverse=True)}
        return [reordered(item) for item in value] if isinstance(value, list) else value

    # Keys in reverse order, every non-ASCII character as \uXXXX, ids as numbers, labels as floats
    # where they are numbers: the same annotations.
    def respelled(dialogue: dict[str, Any]) -> dict[str, Any]:
        copy = reordered(dialogue)
        copy["id"] = int(dialogue["id"])
        for annotation in copy["annotations"]:
            annotation["quality"] = {dim: float(label) if isinstance(label, int) else label
                                     for dim, label in annotation["quality"].items()}
        return copy

    escaped = json.dumps([respelled(dialogue) for dialogue in gold], ensure_ascii=True, separators=(",", ":"))
    assert "\\u6211" in escaped and '"id":' + gold[0]["id"] in escaped
    assert refusal(world.task, "test.json", escaped.encode()) == [leak(20, "dialogues", ids, TEST_VERSION)]


@pytest.mark.django_db
@pytest.mark.parametrize("packing", ["gzip", "bzip2", "xz", "zip", "tar.gz", "zip-of-gzip", "jsonl"])
def test_the_gold_compressed_or_packed_is_refused(world: World, test_gold: Any, packing: str) -> None:
    gold, _ = test_gold
    plain = json.dumps(gold, indent=1).encode()
    if packing == "gzip":
        content = gzip.compress(plain)
    elif packing == "bzip2":
        content = bz2.compress(plain)
    elif packing == "xz":
        content = lzma.compress(plain)
    elif packing in ("zip", "zip-of-gzip"):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("README.txt", "the test data")
            if packing == "zip":
                archive.writestr("data/test.json", plain)
            else:
                archive.writestr("data/test.json.gz", gzip.compress(plain))
        content = buffer.getvalue()
    elif packing == "tar.gz":
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            info = tarfile.TarInfo("test/test.json")
            info.size = len(plain)
            archive.addfile(info, io.BytesIO(plain))
        content = buffer.getvalue()
    else:  # one dialogue per line
        content = b"\n".join(orjson.dumps(dialogue) for dialogue in gold)
    ids = [dialogue["id"] for dialogue in gold]
    assert refusal(world.task, f"test.{packing}", content) == [leak(20, "dialogues", ids, TEST_VERSION)]
    assert blobs.exists("data", hashlib.sha256(content).hexdigest()) is False


# Among other items, or a single one -------------------------------------------------------------

@pytest.mark.django_db
def test_a_training_file_holding_the_test_dialogues_is_refused(world: World, test_gold: Any) -> None:
    """The audit's case: the training set with every test dialogue and its annotations in it."""
    gold, _ = test_gold
    training = generate_gold(150, seed=77)
    content = json.dumps(training[:70] + gold + training[70:], indent=4, ensure_ascii=False).encode()
    ids = [dialogue["id"] for dialogue in gold]
    assert refusal(world.task, "train.json", content) == [leak(20, "dialogues", ids, TEST_VERSION)]
    # The training set alone is the organisers' to publish.
    add(world.task, "train.json", json.dumps(training, indent=4).encode())


@pytest.mark.django_db
def test_one_test_dialogue_with_one_annotators_labels_is_refused(world: World, test_gold: Any) -> None:
    gold, _ = test_gold
    training = generate_gold(40, seed=78)
    one = {"id": gold[7]["id"], "turns": gold[7]["turns"],
           "annotations": [{"nugget": gold[7]["annotations"][4]["nugget"]}]}
    content = json.dumps({"train": training, "extra": [one]}).encode()
    assert refusal(world.task, "train.json", content) == [
        f"file: holds the hidden annotations of 1 dialogue ({gold[7]['id']}) of {TEST_VERSION}: {NEVER}"]


@pytest.mark.django_db
def test_both_gold_versions_are_named_when_a_file_holds_both(world: World, test_gold: Any) -> None:
    gold, _ = test_gold
    content = json.dumps(world.gold[:2] + gold[:1]).encode()
    assert refusal(world.task, "mixed.json", content) == [
        leak(2, "dialogues", [d["id"] for d in world.gold[:2]], "gold version 1 of this task, loaded from gold.json"),
        f"file: holds the hidden annotations of 1 dialogue ({gold[0]['id']}) of {TEST_VERSION}: {NEVER}"]


@pytest.mark.django_db
def test_another_tasks_gold_is_refused_without_naming_its_items(world: World) -> None:
    other = create_task("other-task", "stc3", "Other")
    theirs = generate_gold(6, seed=90)
    with committing():
        load_gold_version(other, orjson.dumps(theirs), "theirs.json")
    assert refusal(world.task, "x.json", json.dumps(theirs[2:5], indent=2).encode()) == [
        f"file: holds the hidden annotations of 3 dialogues of a gold version of another task: {NEVER}"]


# What is accepted ----------------------------------------------------------------------------------

@pytest.mark.django_db
def test_the_test_dialogues_without_annotations_and_unrelated_files_are_accepted(world: World,
                                                                                 test_gold: Any) -> None:
    gold, _ = test_gold
    inputs = [{"id": dialogue["id"], "turns": dialogue["turns"]} for dialogue in gold]
    add(world.task, "test-input.json", json.dumps(inputs, indent=2).encode())
    add(world.task, "test-input.json.gz", gzip.compress(orjson.dumps(inputs)))
    add(world.task, "guidelines.txt", b"Annotate each turn with one nugget type.\n")
    add(world.task, "broken.json", b"[{\"id\": 1,")  # not JSON: nothing in it to compare
    add(world.task, "scores.json", orjson.dumps([{"id": d["id"], "score": 0.5} for d in gold]))
    assert sorted(DataFile.objects.values_list("name", flat=True)) == [
        "broken.json", "guidelines.txt", "scores.json", "test-input.json", "test-input.json.gz"]


def make_phase(task: Task, version: GoldVersion, kind: str, ended: bool, published: bool = False) -> Phase:
    now = timezone.now()
    start, end = (now - timedelta(days=10), now - timedelta(days=1)) if ended else (now - timedelta(days=1),
                                                                                     now + timedelta(days=5))
    return Phase.objects.create(task=task, name=f"{kind}-{version.number}", kind=kind, gold_version=version,
                                starts_at=start, ends_at=end, results_published=published)


@pytest.mark.django_db
def test_gold_becomes_publishable_once_its_phases_have_ended_with_published_results(world: World,
                                                                                    test_gold: Any) -> None:
    gold, version = test_gold
    content = json.dumps(gold, indent=2).encode()
    phase = make_phase(world.task, version, Phase.TEST, ended=False)
    assert refusal(world.task, "test.json", content)  # open
    Phase.objects.filter(pk=phase.pk).update(starts_at=timezone.now() - timedelta(days=9),
                                             ends_at=timezone.now() - timedelta(hours=1))
    assert refusal(world.task, "test.json", content)  # ended, results not published
    Phase.objects.filter(pk=phase.pk).update(results_published=True)
    add(world.task, "test.json", content)  # ended and published: the organisers may release it
    # The development gold: hidden while its phase is open and after it ends, until the organisers
    # release it by marking the phase's results published.
    dev_content = json.dumps(world.gold).encode()
    dev = make_phase(world.task, world.gold_version, Phase.DEVELOPMENT, ended=False)
    assert refusal(world.task, "dev.json", dev_content)
    Phase.objects.filter(pk=dev.pk).update(starts_at=timezone.now() - timedelta(days=9),
                                           ends_at=timezone.now() - timedelta(hours=1))
    assert refusal(world.task, "dev.json", dev_content)
    Phase.objects.filter(pk=dev.pk).update(results_published=True)
    add(world.task, "dev.json", dev_content)


# Bounded -------------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_a_bomb_is_refused_without_being_unpacked(world: World, settings: Any) -> None:
    settings.EVALSERVER_DATA_FILE_MAX_BYTES = 1_000_000
    bomb = gzip.compress(b"[" + b" " * 50_000_000 + b"]", compresslevel=9)
    assert len(bomb) < 100_000
    assert refusal(world.task, "bomb.json.gz", bomb) == [
        "file: unpacked, bomb.json.gz holds more than 1,000,000 bytes, the largest data file accepted "
        "(EVALSERVER_DATA_FILE_MAX_BYTES): the server reads every file it publishes for gold annotations, so an "
        "archive may hold at most that much"]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for number in range(3):
            archive.writestr(f"part{number}.json", b" " * 400_000)
    assert refusal(world.task, "parts.zip", buffer.getvalue()) == [
        "file: unpacked, part2.json in parts.zip holds more than 1,000,000 bytes, the largest data file accepted "
        "(EVALSERVER_DATA_FILE_MAX_BYTES): the server reads every file it publishes for gold annotations, so an "
        "archive may hold at most that much"]
    assert refusal(world.task, "cut.json.gz", gzip.compress(b"[1, 2, 3]" * 1000)[:-20])[0].startswith(
        "file: cut.json.gz looks like a gzip file but cannot be unpacked (")


# Other kinds, through their own annotations ----------------------------------------------------

@pytest.mark.django_db
def test_metric_judgements_are_found_by_response_id(db: Any) -> None:
    task = create_task("metric-guard", "metric-quick", "Metrics", kind="metric")
    gold = metric_demo.generate_gold(8, 3, seed=2)
    with committing():
        load_gold_version(task, orjson.dumps(gold), "judgements.json")
    # The judgements flattened to one object per response, integers where they are whole.
    flat = [{"human": int(r["human"]) if float(r["human"]).is_integer() else r["human"], "id": r["id"]}
            for context in gold[:2] for r in context["responses"]]
    contexts = [context["id"] for context in gold[:2]]
    assert refusal(task, "flat.json", json.dumps(flat).encode()) == [
        f"file: holds the hidden annotations of 2 contexts ({named(contexts)}) of gold version 1 of this task, "
        f"loaded from judgements.json: {NEVER}"]
    participants = [{"id": c["id"], "responses": [{"id": r["id"], "text": r.get("text")} for r in c["responses"]]}
                    for c in gold]
    add(task, "contexts.json", json.dumps(participants).encode())


def test_each_kind_names_the_annotations_of_its_items() -> None:
    """The kinds' records, checked on worked examples: equal across spellings, absent without
    annotations."""
    from scoring.kinds import get_kind

    stc3 = get_kind("stc3")
    config = stc3.preset(stc3.default_preset)
    dialogue = {"id": "42", "turns": [], "annotations": [{"quality": {"A": 1, "S": 0}, "nugget": ["CNUG0"]}]}
    respelled = {"annotations": [{"nugget": ["CNUG0"], "quality": {"S": 0.0, "A": 1.0}}], "id": 42}
    assert sorted(stc3.hidden_annotations(dialogue, config)) == sorted(stc3.hidden_annotations(respelled, config))
    assert [item for item, _ in stc3.hidden_annotations(dialogue, config)] == ["42", "42"]
    assert list(stc3.hidden_annotations({"id": "42", "turns": []}, config)) == []

    response = get_kind("response")
    rconfig = response.preset("response")
    item = response_demo.generate_gold(1, seed=1)[0]
    records = list(response.hidden_annotations(item, rconfig))
    assert len(records) == len(item["references"]) and {i for i, _ in records} == {item["id"]}
    spaced = {"id": item["id"], "references": [{"text": "  " + r["text"].replace(" ", "\n "), "weight": 0.5}
                                               for r in item["references"]]}
    assert sorted(response.hidden_annotations(spaced, rconfig)) == sorted(records)
    assert list(response.hidden_annotations({"id": item["id"], "context": item.get("context", [])}, rconfig)) == []


# Files already stored: the dashboard and the command show them; organisers remove them --------------

def stored(task: Task, name: str, content: bytes) -> DataFile:
    """A file added before the guard compared content: stored as add_data_file stores, unchecked."""
    sha = blobs.store("data", content).sha256
    return DataFile.objects.create(task=task, name=name, sha256=sha, size=len(content))


@pytest.mark.django_db
def test_the_dashboard_marks_a_stored_leak_and_the_organiser_removes_it(world: World, test_gold: Any) -> None:
    import html

    gold, _ = test_gold
    leaking = stored(world.task, "train.json", json.dumps(generate_gold(10, seed=5) + gold[:1], indent=2).encode())
    stored(world.task, "guidelines.txt", b"read me")
    url = f"/tasks/{world.task.slug}/data/train.json"
    assert Client().get(url).status_code == 200  # the leak as the audit found it: anyone downloads it
    organiser = Client()
    organiser.force_login(world.organiser)
    page = re.sub(r"<[^>]+>", "", html.unescape(organiser.get(f"/organiser/{world.task.slug}/").content.decode()))
    assert (f"Leaks gold: holds the hidden annotations of 1 dialogue ({gold[0]['id']}) of {TEST_VERSION}"
            in page)
    assert page.count("Leaks gold:") == 1
    # Without the confirmation nothing is removed.
    organiser.post(f"/organiser/{world.task.slug}/", {"action": "remove-data-file", "name": "train.json"})
    assert DataFile.objects.filter(pk=leaking.pk).exists()
    done = organiser.post(f"/organiser/{world.task.slug}/", {"action": "remove-data-file", "name": "train.json",
                                                            "confirm": "yes"}, follow=True)
    assert "train.json is removed from the data section" in html.unescape(done.content.decode())
    assert not DataFile.objects.filter(pk=leaking.pk).exists()
    assert Client().get(url).status_code == 404
    assert organiser.get(url).status_code == 404
    assert AccessLog.objects.filter(task=world.task, user=world.organiser).values_list("what", flat=True).get() == (
        f"removed the data file train.json (SHA-256 {leaking.sha256[:12]}, which held secret gold annotations)")


@pytest.mark.django_db
def test_participants_and_strangers_cannot_remove_a_data_file(world: World) -> None:
    stored(world.task, "guidelines.txt", b"read me")
    anonymous = Client().post(f"/organiser/{world.task.slug}/", {"action": "remove-data-file",
                                                                 "name": "guidelines.txt", "confirm": "yes"})
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]
    participant = Client()
    participant.force_login(world.alice)
    refused = participant.post(f"/organiser/{world.task.slug}/", {"action": "remove-data-file",
                                                                  "name": "guidelines.txt", "confirm": "yes"})
    assert refused.status_code in (403, 404)
    assert DataFile.objects.filter(name="guidelines.txt").exists()
    assert Client().get(f"/tasks/{world.task.slug}/data/guidelines.txt").status_code == 200


@pytest.mark.django_db
def test_check_data_files_lists_and_removes_stored_leaks(world: World, test_gold: Any) -> None:
    gold, _ = test_gold
    stored(world.task, "test.json.gz", gzip.compress(json.dumps(gold[:4]).encode()))
    stored(world.task, "guidelines.txt", b"read me")
    out = io.StringIO()
    with pytest.raises(CommandError, match="--remove") as failed:
        call_command("check_data_files", stdout=out)
    assert failed.value.returncode == 1
    ids = [dialogue["id"] for dialogue in gold[:4]]
    assert out.getvalue() == (
        f"demo-task: test.json.gz: {leak(4, 'dialogues', ids, TEST_VERSION)}\n"
        "2 data file(s) checked, 1 holding secret gold annotations\n")
    out = io.StringIO()
    with committing():
        call_command("check_data_files", "demo-task", "--remove", stdout=out)
    assert out.getvalue().splitlines()[1:] == ["demo-task: test.json.gz: removed",
                                               "2 data file(s) checked, 1 holding secret gold annotations, removed"]
    assert list(DataFile.objects.values_list("name", flat=True)) == ["guidelines.txt"]
