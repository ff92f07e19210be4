"""End to end: ``python manage.py score RUN GOLD [options]`` as a subprocess, as people run it."""

from __future__ import annotations

import copy
import gc
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from devtools import reference
from fixtures.synthetic import generate_gold, generate_run
from scoring import cli
from scoring.kinds.stc3.config import STC3
from scoring.kinds.stc3.evaluate import evaluate
from scoring.kinds.stc3.formats import load_gold, load_run

ROOT = Path(__file__).resolve().parents[3]
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


def test_every_run_validation_error_at_once_through_the_command(files):
    """One run file with an instance of every run validation rule: all reported, in file order."""
    run = copy.deepcopy(files["run_data"])
    ids = [entry["id"] for entry in run]
    turns = {dialogue["id"]: len(dialogue["turns"]) for dialogue in files["gold_data"]}
    run[0]["quality"]["A"]["2"] = float("nan")
    run[0]["quality"]["S"]["1"] = float("inf")
    run[0]["quality"]["E"]["0"] = -0.5
    run[1]["quality"]["A"]["0"] = "0.3"
    run[1]["quality"]["S"]["0"] = True
    run[1]["quality"]["E"]["0"] = None
    run[2]["quality"]["A"]["3"] = 0.1
    run[2]["quality"]["X"] = dict(run[2]["quality"]["A"])
    del run[3]["quality"]["E"]
    run[4]["quality"]["S"] = {"2": 0, "1": 0}
    run[5]["nugget"] = run[5]["nugget"][:-1]
    run[6]["nugget"][0] = {"CNUG9": 1}
    run[6]["nugget"][1] = {"CNUG": 1}  # turn 1 is a helpdesk turn
    del run[7]["quality"]
    run[8] = "not a dialogue"
    run[9]["id"] = 1.5
    del run[10]["id"]
    run[11]["id"] = "no-such-dialogue"
    run.append(copy.deepcopy(run[12]))
    path = write(files["folder"] / "every-run-error.json", run)  # NaN and Infinity as JS literals
    completed = score(path, files["gold"])
    assert (completed.returncode, completed.stdout) == (2, "")
    missing = ", ".join(f'"{dialogue_id}"' for dialogue_id in ids[8:12])
    assert completed.stderr.splitlines() == [f"{path}: {line}" for line in [
        "[8]: expected an object, got str",
        "[9].id: must be a non-empty string or an integer, got 1.5",
        "[10].id: missing or not a non-empty string or integer",
        f'[60].id: duplicate dialogue id "{ids[12]}" (first at [12])',
        '[0].quality.A["2"]: value nan is not a finite number',
        '[0].quality.S["1"]: value inf is not a finite number',
        '[0].quality.E["0"]: value -0.5 is negative',
        '[1].quality.A["0"]: value "0.3" is a str, not a number',
        '[1].quality.S["0"]: value True is a boolean, not a number',
        '[1].quality.E["0"]: value None is null, not a number',
        '[2].quality: unknown dimension "X" (allowed: A, S, E)',
        '[2].quality.A: unknown label "3" (allowed: 2, 1, 0, -1, -2)',
        '[3].quality: missing dimension "E"',
        "[4].quality.S: all values are 0: a distribution needs a positive total",
        f'[5].nugget: has {turns[ids[5]] - 1} entries but dialogue "{ids[5]}" has {turns[ids[5]]} turns',
        '[6].nugget[0]: unknown nugget type "CNUG9" (allowed on a customer turn: CNUG0, CNUG, CNUG*, CNaN)',
        '[6].nugget[1]: label "CNUG" is not allowed on a helpdesk turn (allowed: HNUG, HNUG*, HNaN)',
        "[7]: missing 'quality' (other dialogues of this run have it)",
        '[11].id: dialogue "no-such-dialogue" is not in the gold data of this task',
        f"$: the run misses 4 of the 60 gold dialogue(s): {missing} (official scoring needs every dialogue)",
    ]]


def test_every_gold_validation_error_at_once_through_the_command(files):
    gold = copy.deepcopy(files["gold_data"])
    ids = [dialogue["id"] for dialogue in gold]
    gold[2]["id"] = ids[1]
    gold[3]["turns"][0]["sender"] = "bot"
    gold[4]["annotations"][3]["quality"]["E"] = 7
    gold[4]["annotations"][4]["quality"]["Z"] = 1
    del gold[5]["annotations"][0]["quality"]["A"]
    gold[6]["annotations"][2]["nugget"] = gold[6]["annotations"][2]["nugget"][:-1]
    gold[7]["annotations"][1]["nugget"][1] = "CNUG"  # turn 1 is a helpdesk turn
    gold[7]["annotations"][2]["nugget"][0] = "XNUG"
    gold[8]["annotations"] = []
    gold[9]["turns"] = []
    del gold[10]["annotations"][5]["nugget"]
    gold[11]["annotations"][0] = "x"
    gold[12] = "x"
    gold[13]["annotations"][0]["quality"]["S"] = True
    path = write(files["folder"] / "every-gold-error.json", gold)
    completed = score(files["run"], path)
    assert (completed.returncode, completed.stdout) == (2, "")
    n_turns = len(files["gold_data"][6]["turns"])
    assert completed.stderr.splitlines() == [f"{path}: {line}" for line in [
        f'[2].id: duplicate dialogue id "{ids[1]}" (first at [1])',
        "[12]: expected an object, got str",
        "[3].turns[0].sender: expected 'customer' or 'helpdesk', got \"bot\"",
        "[4].annotations[3].quality.E: unknown scale label 7 (allowed: 2, 1, 0, -1, -2)",
        '[4].annotations[4].quality: unknown dimension "Z" (allowed: A, S, E)',
        "[5].annotations[0].quality.A: missing",
        f"[6].annotations[2].nugget: has {n_turns - 1} labels but the dialogue has {n_turns} turns",
        '[7].annotations[1].nugget[1]: label "CNUG" is not allowed on a helpdesk turn (allowed: HNUG, HNUG*, HNaN)',
        '[7].annotations[2].nugget[0]: unknown nugget type "XNUG" (allowed on a customer turn: '
        "CNUG0, CNUG, CNUG*, CNaN)",
        "[8].annotations: missing or not a non-empty list of annotations",
        "[9].turns: missing or not a non-empty list of turns",
        *(f"[9].annotations[{k}].nugget: has {len(files['gold_data'][9]['turns'])} labels but the dialogue "
          "has 0 turns" for k in range(19)),
        "[10].annotations[5].nugget: missing or not a list",
        "[11].annotations[0]: expected an object, got str",
        "[13].annotations[0].quality.S: unknown scale label True (allowed: 2, 1, 0, -1, -2)",
    ]]


@pytest.mark.parametrize(("role", "document", "message"), [
    ("run", {"id": "d1"}, "$: expected a JSON list of dialogues, got an object"),
    ("run", [], "$: the list of dialogues is empty"),
    ("gold", "gold", "$: expected a JSON list of dialogues, got str"),
    ("gold", [], "$: the list of dialogues is empty"),
])
def test_a_file_that_is_not_a_list_of_dialogues(files, role, document, message):
    path = write(files["folder"] / f"not-a-list-{role}.json", document)
    completed = score(path, files["gold"]) if role == "run" else score(files["run"], path)
    assert (completed.returncode, completed.stdout, completed.stderr) == (2, "", f"{path}: {message}\n")


@pytest.mark.parametrize("alpha", ["0.5", "0.3", "1"])
def test_alpha_and_one_sided_dialogues_end_to_end(files, alpha):
    # Dialogues of 1-3 turns: the customer-only ones take the customer mean whatever alpha is.
    gold_data = generate_gold(40, seed=305, min_turns=1, max_turns=3)
    assert any(len(dialogue["turns"]) == 1 for dialogue in gold_data)
    run_data = generate_run(gold_data, "noisy", noise=0.6, seed=306)
    gold = write(files["folder"] / "short-gold.json", gold_data)
    run = write(files["folder"] / "short-run.json", run_data)
    for averaging in ("macro", "micro"):
        data = json_output(score(run, gold, "--alpha", alpha, "--averaging", averaging, "--per-dialogue"))
        expected = reference.evaluate_reference(run_data, gold_data,
                                                STC3.with_options(alpha=float(alpha), averaging=averaging))
        assert data["alpha"] == float(alpha)
        for name in ("jsd", "rnss", "nvd"):
            assert data["nugget"][name] == pytest.approx(expected["nugget"][name], abs=1e-12)
            per_dialogue = expected["per_dialogue"]["nugget"][name]
            assert data["per_dialogue"]["nugget"][name] == pytest.approx(per_dialogue, abs=1e-12)


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


def test_problems_of_both_files_are_reported(files):
    folder = files["folder"]
    broken_run = folder / "broken-run.json"
    broken_run.write_bytes(b'[{"id": "d1",]')
    broken_gold = folder / "broken-gold.json"
    broken_gold.write_bytes(b"")
    completed = score(broken_run, broken_gold)
    assert (completed.returncode, completed.stdout) == (2, "")
    assert completed.stderr.splitlines() == [
        f"{broken_gold}: gold file is empty",
        f"{broken_run}: run file is not valid JSON: Expecting property name enclosed in double quotes "
        "at line 1 column 14",
    ]
    # An invalid gold and a run that is not JSON: both reported (the run cannot be validated
    # against an invalid gold, but its own syntax can be).
    gold = copy.deepcopy(files["gold_data"])
    gold[1]["annotations"][0]["quality"]["A"] = 9
    bad_gold = write(folder / "bad-gold-2.json", gold)
    completed = score(broken_run, bad_gold)
    assert (completed.returncode, completed.stdout) == (2, "")
    assert completed.stderr.splitlines() == [
        f"{bad_gold}: [1].annotations[0].quality.A: unknown scale label 9 (allowed: 2, 1, 0, -1, -2)",
        f"{broken_run}: run file is not valid JSON: Expecting property name enclosed in double quotes "
        "at line 1 column 14",
    ]
    # A missing run and an invalid gold: both reported too.
    completed = score(folder / "no-such-run.json", bad_gold)
    assert completed.stderr.splitlines() == [
        f"{folder / 'no-such-run.json'}: cannot read the run file: No such file or directory",
        f"{bad_gold}: [1].annotations[0].quality.A: unknown scale label 9 (allowed: 2, 1, 0, -1, -2)",
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


def test_in_process_call_gives_the_same_output_and_leaves_the_garbage_collector_as_it_was(files):
    # Command.handle (call_command("score", ...)) runs the scorer inside a long-lived process.
    expected = json_output(score(files["run"], files["gold"]))
    assert gc.isenabled()
    try:
        for argv, status in (([str(files["run"]), str(files["gold"])], 0), ([str(files["run"])], 2)):
            stdout, stderr = io.StringIO(), io.StringIO()
            assert cli.main(argv, stdout=stdout, stderr=stderr) == status
            assert gc.isenabled(), "the scorer must not leave the caller's collector disabled"
        assert json.loads(cli_output(files)) == expected
    finally:
        gc.enable()


def cli_output(files) -> str:
    stdout = io.StringIO()
    assert cli.main([str(files["run"]), str(files["gold"])], stdout=stdout, stderr=io.StringIO()) == 0
    return stdout.getvalue()
