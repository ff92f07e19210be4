"""``manage.py compare`` (SIGNIFICANCE-SPEC, "The offline command"): its JSON shape, its figures equal
to what ``manage.py score`` prints, intervals that hold the headline, and bad input refused with
every problem named (exit 2, nothing on stdout)."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import pytest

from fixtures.response_demo import write_demo
from scoring import cli, compare


def run_command(main, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(argv, stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    paths = write_demo(tmp_path_factory.mktemp("response-demo"), n_items=60)
    # Runs are named by their files' stems.
    return {"gold": paths["gold"], "runs": [paths[name] for name in paths if name.startswith(("run-", "baseline-"))]}


def test_compare_prints_the_pinned_json_with_the_score_commands_figures(demo: dict[str, Path]) -> None:
    runs = [str(path) for path in demo["runs"]]
    status, out, err = run_command(compare.main, [*runs, "--gold", str(demo["gold"]), "--kind", "response",
                                                  "--preset", "bleu-only", "--permutations", "2000",
                                                  "--bootstrap", "500", "--seed", "7"])
    assert status == 0, err
    data = json.loads(out)
    assert {key: data[key] for key in ("kind", "n_items", "permutations", "bootstrap", "seed", "alpha")} == {
        "kind": "response", "n_items": 60, "permutations": 2000, "bootstrap": 500, "seed": 7, "alpha": 0.05}
    names = [path.stem for path in demo["runs"]]
    assert set(data["measures"]) == {"bleu", "delta_bleu"}
    printed = {}
    for path in demo["runs"]:
        status, out, err = run_command(cli.main, [str(path), str(demo["gold"]), "--kind", "response",
                                                  "--preset", "bleu-only"])
        assert status == 0, err
        printed[path.stem] = json.loads(out)["measures"]
    for key, measure in data["measures"].items():
        assert measure["headline"] == "corpus" and measure["higher_is_better"] is True
        assert list(measure["runs"]) == names
        for name, run in measure["runs"].items():
            assert abs(run["score"] - printed[name][key]) <= 1e-12
            low, high = run["ci"]
            assert low <= run["score"] <= high
        # Every unordered pair once, in argument order, difference = score(a) - score(b).
        assert [(pair["a"], pair["b"]) for pair in measure["pairs"]] == list(itertools.combinations(names, 2))
        for pair in measure["pairs"]:
            assert pair["difference"] == measure["runs"][pair["a"]]["score"] - measure["runs"][pair["b"]]["score"]
            assert 1 / 2001 <= pair["p"] <= 1.0
        best = max(names, key=lambda name: measure["runs"][name]["score"])
        assert measure["top_group"][0] == best
        # The top group: the best and every run whose pair with it has p >= alpha.
        p_with_best = {pair["b"] if pair["a"] == best else pair["a"]: pair["p"] for pair in measure["pairs"]
                       if best in (pair["a"], pair["b"])}
        assert set(measure["top_group"]) == {best} | {name for name, p in p_with_best.items() if p >= 0.05}
        assert "adjusted" in measure["p_adjustment"]
    # The strong run is far ahead of the weak one on BLEU.
    assert measure["runs"]["run-strong"]["score"] > measure["runs"]["run-weak"]["score"]


def test_compare_table_and_measures_selection(demo: dict[str, Path]) -> None:
    runs = [str(path) for path in demo["runs"]]
    status, out, err = run_command(compare.main, [*runs, "--gold", str(demo["gold"]), "--kind", "response",
                                                  "--preset", "bleu-only", "--measures", "bleu",
                                                  "--permutations", "500", "--bootstrap", "200",
                                                  "--format", "table"])
    assert status == 0, err
    assert "bleu (corpus figure, higher is better)" in out and "delta_bleu" not in out
    assert "run-strong" in out and "95% interval" in out and "p = " in out


def test_bad_input_names_every_problem_and_prints_nothing(demo: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "run-strong.json"
    copy.write_bytes(demo["runs"][0].read_bytes())
    original = next(path for path in demo["runs"] if path.stem == "run-strong")
    status, out, err = run_command(compare.main, [str(original), str(copy), "--gold", str(tmp_path / "nope.json"),
                                                  "--kind", "response", "--preset", "bleu-only",
                                                  "--permutations", "0", "--bootstrap", "-3", "--alpha", "1.5",
                                                  "--seed", "-1"])
    assert status == 2 and out == ""
    for expected in ("--permutations must be a positive integer", "--bootstrap must be a positive integer",
                     "--alpha must lie strictly between 0 and 1", "--seed must be an integer",
                     "share the name 'run-strong'", "nope.json: cannot read the gold file"):
        assert expected in err, err
    status, out, err = run_command(compare.main, [*map(str, demo["runs"]), "--gold", str(demo["gold"]),
                                                  "--kind", "response", "--preset", "bleu-only",
                                                  "--measures", "bleu,meteor"])
    assert status == 2 and out == "" and "unknown measure key(s) meteor" in err
    status, out, err = run_command(compare.main, [str(demo["runs"][0]), "--gold", str(demo["gold"]), "--kind",
                                                  "response", "--preset", "bleu-only", "--config", "c.json"])
    assert status == 2 and "give --preset or --config, not both" in err and "at least two runs" in err
