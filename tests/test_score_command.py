"""End to end: ``python manage.py score RUN GOLD [options]`` as a subprocess, as people run it."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.synthetic import generate_gold, generate_run
from scoring.config import STC3
from scoring.evaluate import evaluate
from scoring.formats import load_gold, load_run

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else sys.executable)
SUMMARY_KEYS = ["quality", "nugget", "n_dialogues", "variant", "alpha", "averaging"]


@pytest.fixture(autouse=True)
def _isolated_settings() -> None:
    """Replaces tests/conftest.py's Django settings fixture: the score command needs no Django,
    so these tests also run with ``-p no:django``."""


def score(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "manage.py", "score", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("score")
    gold_data = generate_gold(60, seed=301)
    run_data = generate_run(gold_data, "noisy", noise=0.5, seed=302)
    return {
        "folder": folder,
        "gold_data": gold_data,
        "run_data": run_data,
        "gold": write(folder / "gold.json", gold_data),
        "run": write(folder / "run.json", run_data),
        "quality_run": write(folder / "quality.json", generate_run(gold_data, "noisy", seed=303,
                                                                  subtasks=("quality",))),
    }


def in_process(files, run_data=None, allow_missing=False, **options):
    gold = load_gold(files["gold_data"], STC3)
    config = STC3.with_options(**options)
    return evaluate(load_run(run_data or files["run_data"], gold, allow_missing=allow_missing), gold, config)


def json_output(completed: subprocess.CompletedProcess) -> dict:
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert len(lines) == 1, "exactly one JSON object, on one line"
    data = json.loads(lines[0])
    assert isinstance(data, dict)
    return data


def test_json_output_is_one_object_equal_to_evaluate(files):
    completed = score(files["run"], files["gold"])
    data = json_output(completed)
    assert completed.stderr == ""
    assert list(data) == SUMMARY_KEYS
    expected = in_process(files)
    assert data["quality"] == expected.quality_means
    assert data["nugget"] == expected.nugget_means
    assert (data["n_dialogues"], data["variant"], data["alpha"], data["averaging"]) == (60, "paper", 0.5, "macro")
    assert list(data["quality"]) == ["A", "S", "E"]
    assert list(data["quality"]["A"]) == ["rsnod", "nmd", "snod", "jsd", "rnss", "nvd"]
    assert list(data["nugget"]) == ["jsd", "rnss", "nvd"]


def test_per_dialogue_scores(files):
    data = json_output(score(files["run"], files["gold"], "--per-dialogue"))
    assert list(data) == [*SUMMARY_KEYS, "per_dialogue"]
    expected = in_process(files)
    ids = [dialogue["id"] for dialogue in files["gold_data"]]
    detail = data["per_dialogue"]
    assert list(detail) == ["quality", "nugget"]
    for dim in ("A", "S", "E"):
        assert list(detail["quality"][dim]) == ["rsnod", "nmd", "snod", "jsd", "rnss", "nvd"]
        for name, scores in detail["quality"][dim].items():
            assert list(scores) == ids
            assert list(scores.values()) == expected.quality[dim][name].tolist()
    for name, scores in detail["nugget"].items():
        assert list(scores) == ids
        assert list(scores.values()) == expected.nugget[name].tolist()


def test_table_output_is_readable_text(files):
    completed = score(files["run"], files["gold"], "--format", "table")
    assert completed.returncode == 0 and completed.stderr == ""
    text = completed.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    expected = in_process(files)
    lines = text.splitlines()
    assert lines[0].startswith("dialogues: 60   variant: paper   alpha: 0.5   averaging: macro")
    assert "Dialogue quality (DQ)" in lines and "Nugget detection (ND), macro average, alpha 0.5" in lines
    header = lines[lines.index("Dialogue quality (DQ)") + 1].split()
    assert header == ["dimension", "RSNOD", "NMD", "SNOD", "JSD", "RNSS", "NVD"]
    for dim in ("A", "S", "E"):
        row = next(line.split() for line in lines if line.startswith(dim + " "))
        assert row[1:] == [f"{expected.quality_means[dim][name.lower()]:.4f}" for name in header[1:]]
    nugget = lines[lines.index("Nugget detection (ND), macro average, alpha 0.5") + 2].split()
    assert nugget == [f"{expected.nugget_means[name]:.4f}" for name in ("jsd", "rnss", "nvd")]
    assert "RSNOD = Root Symmetric Normalised Order-aware Divergence" in text


def test_table_with_per_dialogue_lists_every_dialogue(files):
    completed = score(files["run"], files["gold"], "--format", "table", "--per-dialogue")
    lines = completed.stdout.splitlines()
    start = lines.index("Per dialogue")
    assert lines[start + 1].split("\t")[:3] == ["id", "A.rsnod", "A.nmd"]
    assert [line.split("\t")[0] for line in lines[start + 2:]] == [d["id"] for d in files["gold_data"]]


def test_alpha_changes_only_the_nugget_numbers(files):
    default = json_output(score(files["run"], files["gold"]))
    weighted = json_output(score(files["run"], files["gold"], "--alpha", "0.2"))
    assert weighted["alpha"] == 0.2
    assert weighted["quality"] == default["quality"]
    for name in ("jsd", "rnss", "nvd"):
        assert weighted["nugget"][name] != default["nugget"][name]
    assert weighted["nugget"] == in_process(files, alpha=0.2).nugget_means


def test_variant_stc3_2018_changes_only_snod_and_rsnod(files):
    paper = json_output(score(files["run"], files["gold"]))
    stc3_2018 = json_output(score(files["run"], files["gold"], "--variant", "stc3-2018"))
    assert stc3_2018["variant"] == "stc3-2018"
    assert stc3_2018["nugget"] == paper["nugget"]
    for dim in ("A", "S", "E"):
        for name in ("nmd", "jsd", "rnss", "nvd"):
            assert stc3_2018["quality"][dim][name] == paper["quality"][dim][name]
        for name in ("snod", "rsnod"):
            assert stc3_2018["quality"][dim][name] != paper["quality"][dim][name]
    assert stc3_2018["quality"] == in_process(files, variant="stc3-2018").quality_means


def test_micro_averaging_changes_only_the_nugget_numbers(files):
    macro = json_output(score(files["run"], files["gold"]))
    micro = json_output(score(files["run"], files["gold"], "--averaging", "micro"))
    assert micro["averaging"] == "micro" and micro["quality"] == macro["quality"]
    assert micro["nugget"] == in_process(files, averaging="micro").nugget_means != macro["nugget"]


def test_a_run_for_one_subtask(files):
    data = json_output(score(files["quality_run"], files["gold"]))
    assert "nugget" not in data and list(data["quality"]) == ["A", "S", "E"]


def test_invalid_run_exits_2_with_every_error_on_stderr_and_nothing_on_stdout(files):
    run = copy.deepcopy(files["run_data"])
    run[0]["quality"]["A"]["2"] = -0.5
    run[3]["nugget"][1] = {"CNUG": 1}  # turn 1 is a helpdesk turn
    run[5]["quality"]["S"] = {}
    run.append(copy.deepcopy(run[7]))
    path = write(files["folder"] / "invalid.json", run)
    completed = score(path, files["gold"])
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr.splitlines() == [
        f'{path}: [60].id: duplicate dialogue id "{run[7]["id"]}" (first at [7])',
        f'{path}: [0].quality.A["2"]: value -0.5 is negative',
        f'{path}: [3].nugget[1]: label "CNUG" is not allowed on a helpdesk turn (allowed: HNUG, HNUG*, HNaN)',
        f"{path}: [5].quality.S: all values are 0: a distribution needs a positive total",
    ]


def test_invalid_json_and_empty_files(files):
    folder = files["folder"]
    (folder / "empty.json").write_bytes(b"")
    (folder / "bom.json").write_bytes(b"\xef\xbb\xbf" + files["run"].read_bytes())
    (folder / "broken.json").write_bytes(b'[{"id": 1,]')
    (folder / "deep.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    for name, message in (("empty.json", "run file is empty"),
                          ("bom.json", "run file starts with a UTF-8 byte-order mark"),
                          ("broken.json", "run file is not valid JSON: Expecting property name enclosed in "
                                          "double quotes at line 1 column 11"),
                          ("deep.json", "run file is nested too deeply to be a run or gold file")):
        completed = score(folder / name, files["gold"])
        assert (completed.returncode, completed.stdout) == (2, ""), name
        assert completed.stderr.startswith(f"{folder / name}: {message}"), completed.stderr
        assert "Traceback" not in completed.stderr


def test_invalid_gold_is_reported_with_the_gold_path(files):
    gold = copy.deepcopy(files["gold_data"])
    gold[2]["turns"][0]["sender"] = "bot"
    gold[4]["annotations"][3]["quality"]["E"] = 7
    path = write(files["folder"] / "bad-gold.json", gold)
    completed = score(files["run"], path)
    assert (completed.returncode, completed.stdout) == (2, "")
    assert completed.stderr.splitlines() == [
        f"{path}: [2].turns[0].sender: expected 'customer' or 'helpdesk', got \"bot\"",
        f"{path}: [4].annotations[3].quality.E: unknown scale label 7 (allowed: 2, 1, 0, -1, -2)",
    ]


def test_nonexistent_files(files):
    missing = files["folder"] / "no-such-run.json"
    completed = score(missing, files["gold"])
    assert (completed.returncode, completed.stdout) == (2, "")
    assert completed.stderr == f"{missing}: cannot read the run file: No such file or directory\n"
    both = score(missing, files["folder"] / "no-such-gold.json")
    assert both.stderr.splitlines() == [
        f"{missing}: cannot read the run file: No such file or directory",
        f"{files['folder'] / 'no-such-gold.json'}: cannot read the gold file: No such file or directory",
    ]


@pytest.mark.parametrize(("option", "message"), [
    (["--alpha", "1.5"], "configuration: invalid task configuration: alpha: must be a number in [0, 1], got 1.5"),
    (["--alpha", "nan"], "configuration: invalid task configuration: alpha: must be a number in [0, 1], got nan"),
    (["--alpha", "-0.1"], "configuration: invalid task configuration: alpha: must be a number in [0, 1], got -0.1"),
    (["--alpha", "half"], "usage: argument --alpha: invalid float value: 'half' (see --help)"),
    (["--variant", "stc3-2019"], "usage: argument --variant: invalid choice: 'stc3-2019' "
                                 "(choose from 'paper', 'stc3-2018') (see --help)"),
])
def test_bad_options_exit_2_with_a_clear_message(files, option, message):
    completed = score(files["run"], files["gold"], *option)
    assert (completed.returncode, completed.stdout, completed.stderr) == (2, "", message + "\n")


def test_allow_missing_scores_the_rest_and_says_how_many(files):
    path = write(files["folder"] / "partial.json", files["run_data"][:45])
    refused = score(path, files["gold"])
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr.startswith(f"{path}: $: the run misses 15 of the 60 gold dialogue(s): ")
    completed = score(path, files["gold"], "--allow-missing")
    data = json_output(completed)
    assert (data["n_dialogues"], data["n_missing"]) == (45, 15)
    assert completed.stderr == (f"warning: {path}: 15 of the 60 gold dialogue(s) are missing from the run; "
                                "scored on the 45 it contains\n")
    expected = in_process(files, run_data=files["run_data"][:45], allow_missing=True)
    assert data["nugget"] == expected.nugget_means and data["quality"] == expected.quality_means


def test_warnings_go_to_stderr_and_scores_to_stdout(files):
    gold = copy.deepcopy(files["gold_data"])
    gold[0]["annotations"] = gold[0]["annotations"][:10]
    gold_path = write(files["folder"] / "uneven-gold.json", gold)
    run = copy.deepcopy(files["run_data"])
    run[1]["quality"]["E"] = {label: value * 0.5 for label, value in run[1]["quality"]["E"].items()}
    run_path = write(files["folder"] / "odd-run.json", run)
    completed = score(run_path, gold_path)
    data = json_output(completed)
    assert data["n_dialogues"] == 60
    warnings = completed.stderr.splitlines()
    assert len(warnings) == 2
    assert warnings[0] == (f"warning: {gold_path}: annotator counts differ between dialogues (19 annotators in "
                           "59 dialogue(s), 10 annotators in 1 dialogue(s)); each dialogue's labels are normalised "
                           "by its own count")
    assert warnings[1].startswith(f"warning: {run_path}: 1 distribution(s) sum to neither 1 (probabilities) nor "
                                  "whole counts")
    assert warnings[1].endswith("[1].quality.E (sum 0.5)")


def test_help(files):
    completed = score("--help")
    assert completed.returncode == 0
    assert completed.stdout.startswith("usage: manage.py score")
    assert "--variant" in completed.stdout and "--allow-missing" in completed.stdout
