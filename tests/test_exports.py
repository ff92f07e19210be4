"""Tests of scoring.exports: CSV, NTCIR Discpower, p-value tables and the LaTeX table."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from scoring import exports
from scoring.stats import randomised_tukey_hsd

RUNS = ["plain", 'quote "q", comma', "<b>html</b>", "a_b & c%"]
DIALOGUES = ["d1", "d,2", "=cmd()", "d 4", "d5"]


@pytest.fixture(scope="module")
def matrix() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.random((5, 1)) + rng.random((5, 4)) * 0.3 + [0.0, 0.05, 0.4, 0.6]


@pytest.fixture(scope="module")
def results(matrix) -> dict:
    return randomised_tukey_hsd({"JSD": matrix, "RNSS_x": matrix * 2}, 999, seed=3)


def read_csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_matrix_csv_round_trips(matrix):
    rows = read_csv(exports.matrix_csv(DIALOGUES, RUNS, matrix))
    assert rows[0] == ["dialogue_id", *RUNS]
    assert [row[0] for row in rows[1:]] == ["d1", "d,2", "'=cmd()", "d 4", "d5"]  # formula guarded
    np.testing.assert_array_equal(np.array([[float(v) for v in row[1:]] for row in rows[1:]]), matrix)


def test_matrix_csv_without_formula_guard_and_bad_input(matrix):
    rows = read_csv(exports.matrix_csv(DIALOGUES, ["-run", "+b", "@c", "d"], matrix, guard_formulas=False))
    assert rows[0][1:] == ["-run", "+b", "@c", "d"] and rows[3][0] == "=cmd()"
    assert read_csv(exports.matrix_csv(DIALOGUES, ["-run", "+b", "@c", "d"], matrix))[0][1:] == [
        "'-run",
        "'+b",
        "'@c",
        "d",
    ]
    with pytest.raises(ValueError, match="3 run names given for 4"):
        exports.matrix_csv(DIALOGUES, RUNS[:3], matrix)
    with pytest.raises(ValueError, match="unique"):
        exports.matrix_csv(DIALOGUES, ["a", "a", "b", "c"], matrix)
    with pytest.raises(ValueError, match="2-dimensional"):
        exports.matrix_csv(DIALOGUES, RUNS, matrix[0])


def test_discpower_files(matrix):
    # Read the way the DialEval-2 organisers' scripts read Discpower's input: the run file one
    # name per line, the matrix one line per dialogue, fields split on a single space
    # (pandas.read_table(sep=" ", names=runs)), no header, no dialogue id.
    files = exports.discpower_files(RUNS, matrix)
    lines = files.matrix.splitlines()
    assert len(lines) == 5 and files.matrix.endswith("\n")
    assert all(len(line.split(" ")) == 4 for line in lines)
    np.testing.assert_array_equal(np.array([[float(v) for v in line.split(" ")] for line in lines]), matrix)
    assert files.run_names.splitlines() == ["plain", 'quote_"q",_comma', "<b>html</b>", "a_b_&_c%"]


def test_whitespace_collisions_are_rejected(matrix):
    with pytest.raises(ValueError, match="collide"):
        exports.discpower_files(["a b", "a_b", "c", "d"], matrix)
    with pytest.raises(ValueError, match="empty"):
        exports.discpower_files(["", "x", "c", "d"], matrix)
    assert exports.whitespace_free("a\tb\nc d") == "a_b_c_d"


def test_pvalue_lines(results):
    result = results["JSD"]
    lines = exports.pvalue_lines(RUNS, result).splitlines()
    assert len(lines) == 6
    names = ["plain", 'quote_"q",_comma', "<b>html</b>", "a_b_&_c%"]
    for line, (i, j, diff, p) in zip(lines, result.pairs()):
        a, b, d, pv = line.split()
        assert (a, b) == (names[i], names[j])
        # Discpower's p-value file carries the absolute difference of the means.
        assert float(d) == abs(diff) and float(pv) == p


def test_pvalue_csv_round_trips(results):
    result = results["JSD"]
    rows = read_csv(exports.pvalue_csv(RUNS, result))
    assert rows[0] == ["run_a", "run_b", "diff", "p", "effect_size", "mc_se", "higher"]
    assert len(rows) == 7
    for row, (i, j, diff, p) in zip(rows[1:], result.pairs()):
        assert row[:2] == [RUNS[i], RUNS[j]]
        assert [float(v) for v in row[2:6]] == [diff, p, result.effect_sizes[i, j], result.mc_standard_errors[i, j]]
        means = result.means
        assert row[6] == (RUNS[i] if means[i] > means[j] else RUNS[j] if means[j] > means[i] else "")


def test_latex_escape():
    assert exports.latex_escape("a_b & c%") == r"a\_b \& c\%"
    assert exports.latex_escape(r"$#{}~^\x") == (r"\$\#\{\}\textasciitilde{}\textasciicircum{}\textbackslash{}x")
    assert exports.latex_escape("<b>|") == r"\textless{}b\textgreater{}\textbar{}"


def test_latex_means_table_marks_best_and_top_group(results):
    text = exports.latex_means_table_from_results(results, RUNS, alpha=0.05)
    lines = text.splitlines()
    assert lines[0].startswith("% Bold: best run") and "B=999, seed=3" in lines[0]
    assert lines[1] == r"\begin{tabular}{lrr}"
    assert lines[3] == r"Run & JSD & RNSS\_x \\"
    body = lines[5:9]
    assert [row.split(" & ")[0] for row in body] == [
        "plain",
        'quote "q", comma',
        r"\textless{}b\textgreater{}html\textless{}/b\textgreater{}",
        r"a\_b \& c\%",
    ]
    sizes = set()
    for column, measure in enumerate(["JSD", "RNSS_x"], start=1):
        result = results[measure]
        group = set(result.top_group(0.05))
        sizes.add(len(group))
        best = result.best_run()
        for j, row in enumerate(body):
            cell = row.removesuffix(r" \\").split(" & ")[column]
            assert cell.startswith(r"\textbf{") == (j == best)
            assert cell.endswith(r"$^\dagger$") == (j in group)
            assert f"{result.means[j]:.4f}" in cell
    assert max(sizes) < 4  # the marks distinguish something
    higher = exports.latex_means_table_from_results(results, RUNS, lower_is_better={"JSD": False, "RNSS_x": True})
    jsd_cells = [row.split(" & ")[1] for row in higher.splitlines()[5:9]]
    assert jsd_cells[int(np.argmax(results["JSD"].means))].startswith(r"\textbf{")


def test_latex_means_table_from_stored_numbers_with_run_ids_and_gaps():
    # Runs identified by database ids; run 12 has no nugget score.
    text = exports.latex_means_table(
        ["team/a_1", "team/b", "team/c"],
        ["quality.rsnod", "nugget.jsd"],
        {"quality.rsnod": {7: 0.25, 12: 0.2, 30: 0.4}, "nugget.jsd": {7: 0.1, 30: 0.05}},
        {"quality.rsnod": {12, 7}, "nugget.jsd": {30}},
        [7, 12, 30],
        digits=2,
    )
    rows = [line.removesuffix(r" \\").split(" & ") for line in text.splitlines()[5:8]]
    assert rows == [
        [r"team/a\_1", r"0.25$^\dagger$", "0.10"],
        ["team/b", r"\textbf{0.20}$^\dagger$", "--"],
        ["team/c", "0.40", r"\textbf{0.05}$^\dagger$"],
    ]


def test_latex_means_table_rejects_mismatched_runs(results):
    with pytest.raises(ValueError, match="3 run names given for 4"):
        exports.latex_means_table_from_results(results, RUNS[:3])
    with pytest.raises(ValueError, match="at least one measure"):
        exports.latex_means_table_from_results({}, RUNS)
    with pytest.raises(ValueError, match="missing"):
        exports.latex_means_table(["a", "b"], ["x"], {}, {})
    with pytest.raises(ValueError, match="second argument"):
        exports.pvalue_lines(results["JSD"], RUNS)
