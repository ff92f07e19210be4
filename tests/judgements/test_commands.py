"""``manage.py agreement`` and ``manage.py judgements_to_gold``: what they print and write on good
input (figures equal to the worked examples and to the kinds' own readers), and bad input refused
with every problem on stderr, exit status 2 and nothing written."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from scoring.judgements import agreement_cli, gold_cli
from scoring.kinds.stc3.config import STC3
from scoring.kinds.stc3.evaluate import evaluate
from scoring.kinds.stc3.formats import load_gold, load_run
from tests.judgements.test_alpha import real_stc3
from tests.judgements.test_gold import METRIC_ITEMS, RESPONSE_GOLD, as_judgements, random_run
from tests.judgements.test_report import worked_judgements

ROOT = Path(__file__).resolve().parents[2]


def run_command(main, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(argv, stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def stc3_files(tmp_path: Path) -> dict[str, Path]:
    dialogues = real_stc3()[:60]
    return {"original": write(tmp_path / "original.json", dialogues),
            "items": write(tmp_path / "dialogues.json", [{"id": d["id"], "turns": d["turns"]} for d in dialogues]),
            "judgements": write(tmp_path / "judgements.json", as_judgements(dialogues))}


def test_agreement_json_of_the_worked_example(tmp_path: Path) -> None:
    judgements = write(tmp_path / "j.json", worked_judgements())
    dims = write(tmp_path / "dims.json", [{"name": "quality", "scale": [1, 2, 3, 4, 5]}])
    status, out, err = run_command(agreement_cli.main, [str(judgements), "--kind", "metric", "--dimensions",
                                                        str(dims), "--bootstrap", "100", "--seed", "4"])
    assert (status, err) == (0, "")
    data = json.loads(out)
    row = data["dimensions"]["quality"]
    assert round(row["alpha"], 10) == 0.8153875038 and row["level"] == "ordinal" and row["n_items"] == 12
    assert row["n_judgements"] == 41 and len(row["interval"]) == 2
    assert data["bootstrap"]["resamples"] == 100 and data["bootstrap"]["seed"] == 4
    status, out, _ = run_command(agreement_cli.main, [str(judgements), "--kind", "metric", "--dimensions", str(dims),
                                                      "--level", "interval", "--bootstrap", "20"])
    assert round(json.loads(out)["dimensions"]["quality"]["alpha"], 10) == 0.8491071429
    status, out, _ = run_command(agreement_cli.main, [str(judgements), "--kind", "metric", "--dimensions", str(dims),
                                                      "--format", "table", "--bootstrap", "20"])
    assert status == 0 and out.splitlines()[3].startswith("quality          ordinal     0.815")


def test_agreement_of_real_stc3_judgements_as_a_table(stc3_files: dict[str, Path]) -> None:
    status, out, err = run_command(agreement_cli.main, [str(stc3_files["judgements"]), "--kind", "stc3", "--items",
                                                        str(stc3_files["items"]), "--bootstrap", "50"])
    assert status == 0, err
    data = json.loads(out)
    assert list(data["dimensions"]) == ["A", "E", "S", "nugget"] and data["n_assessors"] == 19
    assert data["dimensions"]["nugget"]["level"] == "nominal" and data["dimensions"]["A"]["n_judgements"] == 60 * 19


def test_judgements_to_gold_stc3_round_trip(stc3_files: dict[str, Path], tmp_path: Path) -> None:
    gold_path = tmp_path / "gold.json"
    status, out, err = run_command(gold_cli.main, [str(stc3_files["judgements"]), "--kind", "stc3", "--items",
                                                   str(stc3_files["items"]), "-o", str(gold_path), "--campaign",
                                                   "STC-3 round trip", "--per-item", "19", "--bootstrap", "30"])
    assert status == 0, err
    facts = json.loads(out)
    assert facts["complete"] is True and facts["campaign"] == "STC-3 round trip" and len(facts["assessors"]) == 19
    assert set(facts["alpha"]) == {"A", "E", "S", "nugget"}
    dialogues = json.loads(stc3_files["original"].read_text())
    original, built = load_gold(dialogues, STC3), load_gold(json.loads(gold_path.read_text()), STC3)
    run = random_run(dialogues, 5)
    assert evaluate(load_run(run, built), built).to_dict() == evaluate(load_run(run, original), original).to_dict()


def test_judgements_to_gold_references_and_metric(tmp_path: Path) -> None:
    items = write(tmp_path / "gold.json", RESPONSE_GOLD)
    ratings = write(tmp_path / "ratings.json", [{"item": "c1#0", "assessor": "x", "values": {"rating": 4}},
                                                {"item": "c1#0", "assessor": "y", "values": {"rating": 5}}])
    out_path, facts_path = tmp_path / "weighted.json", tmp_path / "provenance.json"
    status, out, err = run_command(gold_cli.main, [str(ratings), "--kind", "response", "--items", str(items),
                                                   "-o", str(out_path), "--provenance", str(facts_path)])
    assert (status, out, err) == (0, "", "")
    assert json.loads(out_path.read_text())[0]["references"][0]["weight"] == 0.75
    assert json.loads(facts_path.read_text())["complete"] is False  # three references were not rated
    contexts = write(tmp_path / "contexts.json", METRIC_ITEMS)
    rows = [{"item": rid, "assessor": who, "values": {"appropriateness": v}}
            for who, given in {"p": {"r1": 5, "r2": 1, "r4": 2, "r5": 3}, "q": {"r1": 3, "r2": 1, "r4": 4}}.items()
            for rid, v in given.items()]
    judged = write(tmp_path / "responses.json", rows)
    status, out, err = run_command(gold_cli.main, [str(judged), "--kind", "metric", "--items", str(contexts),
                                                   "-o", str(tmp_path / "metric.json"), "--aggregation", "z-score"])
    assert status == 0, err
    facts = json.loads(out)
    assert facts["aggregation"] == "z-score" and facts["items_left_out"] == ["r3"]
    built = json.loads((tmp_path / "metric.json").read_text())
    # p: 5, 1, 2, 3 (mean 2.75, sd sqrt(2.1875)); q: 3, 1, 4 (mean 8/3, sd sqrt(14/9)).
    z_p1, z_q1 = (5 - 2.75) / 2.1875 ** 0.5, (3 - 8 / 3) / (14 / 9) ** 0.5
    assert built[0]["responses"][0]["human"] == pytest.approx((z_p1 + z_q1) / 2, abs=1e-12)
    assert built[0]["responses"][0]["judgements"] == {"human": [5, 3]}


def test_bad_input_names_every_problem_and_writes_nothing(stc3_files: dict[str, Path], tmp_path: Path) -> None:
    bad = json.loads(stc3_files["judgements"].read_text())
    bad[0]["quality"]["A"] = 9
    bad[1]["item"] = "no such dialogue"
    bad_path = write(tmp_path / "bad.json", bad)
    gold_path = tmp_path / "gold.json"
    status, out, err = run_command(gold_cli.main, [str(bad_path), "--kind", "stc3", "--items",
                                                   str(stc3_files["items"]), "-o", str(gold_path), "--bootstrap", "0",
                                                   "--aggregation", "z-score", "--dimensions", "dims.json"])
    assert status == 2 and out == "" and not gold_path.exists()
    assert err.splitlines() == [
        "usage: --aggregation is for --kind metric (stc3 keeps every label; reference weights map the raw mean)",
        "--bootstrap must be a positive integer; got 0",
        "usage: --dimensions is for --kind metric (the stc3 kind's are fixed)",
        f"{bad_path}: [0].quality.A: value 9 is off the scale (allowed: -2, -1, 0, 1, 2)",
        f'{bad_path}: [1].item: unknown item "no such dialogue" (not in the items file)',
    ]
    (tmp_path / "broken.json").write_text("[{", encoding="utf-8")
    status, out, err = run_command(agreement_cli.main, [str(tmp_path / "broken.json"), "--kind", "stc3", "--items",
                                                        str(tmp_path / "missing.json")])
    assert status == 2 and out == ""
    assert err.splitlines()[0].startswith(f"{tmp_path / 'missing.json'}: cannot read the items file")
    assert err.splitlines()[1].startswith(f"{tmp_path / 'broken.json'}: judgements file")
    status, _, err = run_command(agreement_cli.main, [str(bad_path)])
    assert status == 2 and "--kind" in err


def test_an_item_without_a_positive_reference_refuses_the_gold(tmp_path: Path) -> None:
    items = write(tmp_path / "gold.json", RESPONSE_GOLD)
    ratings = write(tmp_path / "ratings.json", [{"item": "c#2#0", "assessor": "x", "values": {"rating": 2}},
                                                {"item": "c#2#1", "assessor": "x", "values": {"rating": 3}}])
    out_path = tmp_path / "weighted.json"
    status, out, err = run_command(gold_cli.main, [str(ratings), "--kind", "response", "--items", str(items),
                                                   "-o", str(out_path)])
    assert status == 2 and out == "" and not out_path.exists()
    assert 'item "c#2": no original reference keeps a positive weight' in err


def test_manage_py_runs_both_without_django(stc3_files: dict[str, Path], tmp_path: Path) -> None:
    """As the documentation writes them: ``python3 manage.py agreement ...`` (no database, no settings)."""
    done = subprocess.run([sys.executable, "manage.py", "agreement", str(stc3_files["judgements"]), "--kind", "stc3",
                           "--bootstrap", "20", "--format", "table"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "nonexistent.settings"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("1140 judgements of 60 items by 19 assessors")
    done = subprocess.run([sys.executable, "manage.py", "judgements_to_gold", str(stc3_files["judgements"]),
                           "--kind", "stc3", "--items", str(stc3_files["items"]), "-o", str(tmp_path / "g.json"),
                           "--bootstrap", "20"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "nonexistent.settings"})
    assert done.returncode == 0, done.stderr
    assert len(json.loads((tmp_path / "g.json").read_text())) == 60


def test_the_documented_example_files_give_the_documented_figures() -> None:
    """docs/organisers/judgements.md's worked example: Krippendorff (2011)'s figures at each level."""
    examples = ROOT / "docs" / "organisers" / "examples"
    expected = {"ordinal": 0.8153875038, "interval": 0.8491071429, "nominal": 0.7434210526}
    for level, alpha in expected.items():
        status, out, err = run_command(agreement_cli.main, [str(examples / "response-judgements.json"), "--kind",
                                                            "metric", "--items", str(examples / "responses.json"),
                                                            "--level", level, "--bootstrap", "20"])
        assert status == 0, err
        assert round(json.loads(out)["dimensions"]["appropriateness"]["alpha"], 10) == alpha
    status, out, err = run_command(agreement_cli.main, [str(examples / "stc3-judgements.json"), "--kind", "stc3",
                                                        "--items", str(examples / "dialogues.json"), "--bootstrap",
                                                        "20"])
    assert status == 0, err
    data = json.loads(out)
    assert data["n_assessors"] == 3 and data["assessors"]["chen"]["median_seconds"] == 5.0
    # Its first dialogue's nugget labels are the specification's worked example (alpha 0.4210526316 alone).
    assert data["dimensions"]["nugget"]["n_items"] == 9
