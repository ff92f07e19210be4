"""``manage.py score RUN GOLD --kind response``: the offline command through the kind interface
(issue 13 item 4, issue 14 item 5), and any registered kind through the same path."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.response_demo import generate_gold, generate_runs
from scoring import cli
from scoring.kinds import KINDS, get_kind, register
from tests.toy_kind import ToyKind

ROOT = Path(__file__).resolve().parents[3]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else sys.executable)
KIND = get_kind("response")


@pytest.fixture(autouse=True)
def _isolated_settings() -> None:
    """The score command needs no Django (replaces tests/conftest.py's settings fixture)."""


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def run_cli(*args: object) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    status = cli.main([str(arg) for arg in args], stdout=stdout, stderr=stderr)
    return status, stdout.getvalue(), stderr.getvalue()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("response")
    gold = generate_gold(12, seed=2)
    runs = generate_runs(gold, seed=2)
    return {"folder": folder, "gold_data": gold, "runs": runs, "gold": write(folder / "gold.json", gold),
            **{name: write(folder / f"run-{name}.json", run) for name, run in runs.items()}}


def in_process(files: dict, name: str, config: dict | None = None):
    config = KIND.config(config or {})
    gold = KIND.compile_gold(files["gold_data"], config)
    return KIND.score(KIND.parse_run(files["runs"][name], gold, config), gold, config)


def test_json_output_as_a_subprocess(files):
    completed = subprocess.run([PYTHON, "manage.py", "score", str(files["strong"]), str(files["gold"]), "--kind",
                                "response", "--format", "json"], cwd=ROOT, capture_output=True, text=True,
                               timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    data = json.loads(completed.stdout)
    assert list(data) == ["measures", "n_items", "settings"]
    assert list(data["measures"]) == ["bleu", "delta_bleu", "posscore"]
    expected = in_process(files, "strong")
    assert data["measures"] == expected.headlines and data["n_items"] == 12
    assert data["settings"]["posscore"]["pipeline"] == "en_core_web_md"


def test_per_item_adds_per_item_scores_nuggets_and_acts(files):
    status, out, err = run_cli(files["strong"], files["gold"], "--kind", "response", "--per-item")
    assert (status, err) == (0, "")
    data = json.loads(out)
    assert list(data) == ["measures", "n_items", "settings", "per_item", "nuggets", "acts"]
    expected = in_process(files, "strong")
    ids = [entry["id"] for entry in files["gold_data"]]
    for key in ("bleu", "delta_bleu", "posscore"):
        assert list(data["per_item"][key]) == ids
        assert list(data["per_item"][key].values()) == expected.per_item[key].tolist()
    assert data["nuggets"] == expected.details["nuggets"] and data["acts"] == expected.details["acts"]
    first = data["nuggets"][ids[0]]
    assert [nugget["text"] for nugget in first] == [n["text"] for n in files["runs"]["strong"][0]["nuggets"]]
    assert set(first[0]) == {"text", "act", "D_phi", "MD_diff", "MD_same", "NS"}
    # Every nugget of the strong run has the gold's alternatives: all components present.
    assert all(n["MD_diff"] is not None and n["MD_same"] is not None for n in first)
    acts = {}
    for nuggets in data["nuggets"].values():
        for nugget in nuggets:
            acts.setdefault(nugget["act"], []).append(nugget["NS"])
    assert data["acts"] == {act: pytest.approx(sum(v) / len(v), abs=1e-15) for act, v in sorted(acts.items())}


def test_sentence_fallback_prints_null_components(files):
    status, out, err = run_cli(files["weak"], files["gold"], "--kind", "response", "--per-item")
    assert status == 0 and err == ""
    data = json.loads(out)
    nuggets = [nugget for item in data["nuggets"].values() for nugget in item]
    assert nuggets and all(n["act"] is None and n["MD_diff"] is None and n["MD_same"] is None for n in nuggets)
    assert data["acts"] == {}


def test_config_file_and_preset(files):
    config = write(files["folder"] / "task.json", {"measures": ["delta_bleu"], "delta_bleu": {"brevity": "closest"},
                                                    "nuggets": {"score": "never"}})
    status, out, _ = run_cli(files["medium"], files["gold"], "--kind", "response", "--config", config)
    data = json.loads(out)
    assert status == 0 and list(data["measures"]) == ["delta_bleu"]
    assert data["measures"]["delta_bleu"] == in_process(files, "medium", json.loads(config.read_text())).headlines[
        "delta_bleu"]
    status, out, _ = run_cli(files["medium"], files["gold"], "--kind", "response", "--preset", "bleu-only")
    assert status == 0 and list(json.loads(out)["measures"]) == ["bleu", "delta_bleu"]


def test_table_output(files):
    status, out, _ = run_cli(files["strong"], files["gold"], "--kind", "response", "--format", "table", "--per-item")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "contexts: 12"
    expected = in_process(files, "strong")
    assert lines[3].split() == ["bleu", f"{expected.headlines['bleu']:.4f}", "corpus", "higher", "is", "better",
                                "(official)"]
    assert "Per context" in lines and "Mean nugget score (NS) per dialogue act" in lines


def test_invalid_input_exits_2_with_every_problem_on_stderr(files):
    bad_run = write(files["folder"] / "bad-run.json", [{"id": files["gold_data"][0]["id"], "response": ""},
                                                       {"id": "nope", "response": "hi"}])
    bad_gold = write(files["folder"] / "bad-gold.json", [{"id": "a", "references": [{"text": "x", "weight": 2}]},
                                                         {"id": "b"}])
    status, out, err = run_cli(bad_run, files["gold"], "--kind", "response")
    assert (status, out) == (2, "")
    assert err.splitlines() == [f"{bad_run}: [0].response: must not be empty",
                                f"{bad_run}: [1].id: \"nope\" is not an item of the gold",
                                f"{bad_run}: 11 gold item(s) have no response: "
                                + ", ".join(f'"{entry["id"]}"' for entry in files["gold_data"][1:])]
    status, out, err = run_cli(bad_run, bad_gold, "--kind", "response")
    assert (status, out) == (2, "")
    assert err.splitlines() == [f"{bad_gold}: [0].references[0].weight: 2 is outside [-1, 1]",
                                f"{bad_gold}: [1].references: is missing"]
    status, out, err = run_cli(files["folder"] / "none.json", bad_gold, "--kind", "response")
    assert (status, out) == (2, "")
    missing = files["folder"] / "none.json"
    assert err.splitlines()[0] == f"{missing}: cannot read the run file: No such file or directory"
    assert len(err.splitlines()) == 3


@pytest.mark.parametrize(("options", "messages"), [
    (["--alpha", "0.3", "--per-dialogue"], ["usage: --alpha applies to --kind stc3 only (see --help)",
                                            "usage: --per-dialogue applies to --kind stc3 only (see --help)"]),
    (["--preset", "nope"], ["configuration: unknown preset 'nope' for kind 'response'; known presets: bleu-only, "
                            "response, response-bertscore, response-ja, response-ja-bertscore, response-zh, "
                            "response-zh-bertscore"]),
    (["--vectors", "v.txt", "--kind", "stc3"], ["usage: --vectors applies to --kind response only (see --help)"]),
])
def test_bad_options_exit_2(files, options, messages):
    status, out, err = run_cli(files["strong"], files["gold"], "--kind", "response", *options)
    assert (status, out, err.splitlines()) == (2, "", messages)


def test_bad_configuration_and_missing_resources_exit_2(files):
    config = write(files["folder"] / "bad-task.json", {"bleu": {"max_order": 0}, "nuggets": {"K": -1}})
    status, out, err = run_cli(files["strong"], files["gold"], "--kind", "response", "--config", config)
    assert (status, out) == (2, "")
    assert err.splitlines() == [
        "configuration: invalid task configuration: bleu.max_order: must be an integer from 1 to 9, not 0",
        "configuration: invalid task configuration: nuggets.K: must be an integer from 1 to 1000, not -1"]
    # A missing pipeline leaves out what needs it, with one sentence each, never the whole run (issue 42).
    missing = write(files["folder"] / "missing.json", {"pipeline": "no_such_spacy_pipeline_package"})
    status, out, err = run_cli(files["strong"], files["gold"], "--kind", "response", "--config", missing)
    assert status == 0 and set(json.loads(out)["measures"]) == {"bleu", "delta_bleu"}
    assert err.startswith("warning: POSSCORE left out: spaCy pipeline 'no_such_spacy_pipeline_package' is not "
                          "installed")
    # Only BLEU asked for and the pipeline still missing for the nuggets: they are left out too.
    assert "nugget-level scores" in err
    # Nothing computable at all: refused, naming what is missing.
    nothing = write(files["folder"] / "nothing.json", {"pipeline": "no_such_spacy_pipeline_package",
                                                       "measures": ["posscore"]})
    status, out, err = run_cli(files["strong"], files["gold"], "--kind", "response", "--config", nothing)
    assert (status, out) == (2, "")
    assert err.startswith("configuration: spaCy pipeline 'no_such_spacy_pipeline_package' is not installed")
    status, _, err = run_cli(files["strong"], files["gold"], "--kind", "klingon")
    assert status == 2
    assert err == ("usage: argument --kind: unknown task kind 'klingon'; known kinds: metric, response, stc3 "
                   "(see --help)\n")


def test_allow_missing(files):
    partial = write(files["folder"] / "partial.json", files["runs"]["strong"][:9])
    status, out, err = run_cli(partial, files["gold"], "--kind", "response", "--allow-missing")
    assert status == 0
    data = json.loads(out)
    assert (data["n_items"], data["n_missing"]) == (9, 3)
    assert err == f"warning: {partial}: 3 of the 12 gold context(s) are missing from the run; scored on the 9 it " \
                  "contains\n"


def test_any_registered_kind_goes_through_the_same_path(tmp_path):
    kind = register(ToyKind())
    try:
        gold = write(tmp_path / "gold.json", [{"id": 1, "value": 2.0}, {"id": "b", "value": 4.0}])
        run = write(tmp_path / "run.json", [{"id": "1", "guess": 3.0}, {"id": "b", "guess": 3.0}])
        status, out, err = run_cli(run, gold, "--kind", "toy", "--per-item")
        assert (status, err) == (0, "")
        assert json.loads(out) == {"measures": {"error": 1.0, "ratio": 1.0}, "n_items": 2,
                                   "settings": {"scale": 1.0},
                                   "per_item": {"error": {"1": 1.0, "b": 1.0}, "ratio": {"1": 1.5, "b": 0.75}}}
        status, out, err = run_cli(write(tmp_path / "bad.json", [{"id": "1", "guess": "x"}]), gold, "--kind", "toy")
        assert (status, out) == (2, "")
        assert err.splitlines() == [f"{tmp_path / 'bad.json'}: $[0].guess: expected a finite number",
                                    f"{tmp_path / 'bad.json'}: $: missing id '1'",
                                    f"{tmp_path / 'bad.json'}: $: missing id 'b'"]
        assert kind is KINDS["toy"]
    finally:
        KINDS.pop("toy", None)


def test_a_non_finite_score_is_never_printed(tmp_path, monkeypatch):
    kind = register(ToyKind())
    try:
        gold = write(tmp_path / "gold.json", [{"id": 1, "value": 0.0}])
        run = write(tmp_path / "run.json", [{"id": "1", "guess": 0.0}])  # ratio 0 / 0
        with pytest.warns(RuntimeWarning):
            status, out, err = run_cli(run, gold, "--kind", "toy")
        assert (status, out) == (cli.EXIT_NOT_FINITE, "")
        assert "not finite numbers for ratio" in err
        assert kind is KINDS["toy"]
    finally:
        KINDS.pop("toy", None)


def test_stc3_stays_the_default_and_per_item_is_per_dialogue_there(tmp_path):
    from fixtures.synthetic import generate_gold as generate_stc3_gold
    from fixtures.synthetic import generate_run as generate_stc3_run

    gold_data = generate_stc3_gold(6, seed=3)
    gold = write(tmp_path / "gold.json", gold_data)
    run = write(tmp_path / "run.json", generate_stc3_run(gold_data, "noisy", noise=0.3, seed=1))
    default = run_cli(run, gold, "--per-dialogue")
    assert default[0] == 0 and "per_dialogue" in json.loads(default[1])
    assert run_cli(run, gold, "--per-item") == default
    assert run_cli(run, gold, "--kind", "stc3", "--per-dialogue") == default
    assert get_kind("stc3").check_resources(get_kind("stc3").preset("stc3")) == []
    status, out, err = run_cli(run, gold, "--preset", "nope")
    assert (status, out, err) == (2, "", "usage: argument --preset: invalid choice: 'nope' (choose from 'stc3') "
                                         "(see --help)\n")
