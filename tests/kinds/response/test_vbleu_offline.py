"""``manage.py build_vbleu --gold GOLD.json --out EXTENDED.json POOL.jsonl`` works without a database
(issue 27): these tests have no database access (pytest-django refuses any query), and bad input is
refused with every problem and nothing written."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from devtools.dialogues import dialogues, pool_pairs, response_items
from scoring.kinds.response import vbleu as vb

FAST = ["--train-pairs", "1000", "--held-out-pairs", "200", "--seed", "1"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("offline")
    pairs = pool_pairs(dialogues(600, seed=2))
    items = response_items(dialogues(20, seed=3))
    (folder / "pool.jsonl").write_text("".join(json.dumps(pair) + "\n" for pair in pairs))
    (folder / "gold.json").write_text(json.dumps(items))
    return folder


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("build_vbleu", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_offline_build_without_a_database_is_extend_gold_with_the_presets_vectors(files):
    from scoring.kinds import get_kind
    from scoring.kinds.response.kind import task_vectors

    out = files / "extended.json"
    printed, _ = run("--gold", str(files / "gold.json"), "--out", str(out), str(files / "pool.jsonl"), *FAST)
    assert "references added to 20 items" in printed and "parrots weighted -1" in printed
    pool = vb.read_pool(files / "pool.jsonl")
    config = get_kind("response").preset("response")
    expected = vb.extend_gold(json.loads((files / "gold.json").read_text()), pool, vectors=task_vectors(config),
                              rater=vb.RaterSettings(seed=1, train_pairs=1000, held_out_pairs=200))
    assert out.read_bytes() == expected.gold_json()
    parrots = [ref for entry in json.loads(out.read_text()) for ref in entry["references"]
               if ref.get("origin") == "parrot"]
    assert parrots and all(ref["weight"] == -1.0 for ref in parrots)
    rated = files / "rated.json"
    run("--gold", str(files / "gold.json"), "--out", str(rated), "--parrot-weight", "rated",
        str(files / "pool.jsonl"), *FAST)
    assert any(ref.get("origin") == "parrot" and "p" in ref
               for entry in json.loads(rated.read_text()) for ref in entry["references"])


def test_bad_offline_input_names_every_problem_and_writes_nothing(files, tmp_path):
    out = tmp_path / "extended.json"
    with pytest.raises(CommandError, match="problem"):
        run("--out", str(out), "--preset", "nonsense", "--label", "x", "--k", "0", str(tmp_path / "missing.jsonl"),
            "extra.jsonl")
    with pytest.raises(CommandError):
        run("--gold", str(files / "gold.json"), "--out", str(tmp_path / "no" / "such" / "x.json"),
            str(files / "pool.jsonl"))
    broken = tmp_path / "broken.json"
    broken.write_text('[{"id": "a", "references": []}]')
    with pytest.raises(CommandError):
        run("--gold", str(broken), "--out", str(out), str(files / "pool.jsonl"), *FAST)
    assert list(tmp_path.iterdir()) == [broken]


def test_bad_offline_input_messages(files, tmp_path, capsys):
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("build_vbleu", "--out", str(tmp_path / "x.json"), "--preset", "nonsense", "--label", "x",
                     str(tmp_path / "missing.jsonl"), "extra.jsonl", stdout=io.StringIO(), stderr=err)
    lines = err.getvalue().splitlines()
    assert "--label: belongs to a task on the server, not to --out" in lines
    assert "with --out give the pool file alone, not 2 arguments" in lines
    assert "--out needs --gold GOLD.json, the gold to extend" in lines
    assert any(line.startswith("--preset: no preset 'nonsense'") for line in lines)
    assert f"{tmp_path / 'extra.jsonl'}: no such file" in lines or "extra.jsonl: no such file" in lines
