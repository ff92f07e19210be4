"""The CSV and Discpower exports read back by pandas, the reader most organisers and participants
load them with (an implementation independent of the csv module that writes them): every number
round-trips to the same float, text with commas, quotes, line breaks and non-Latin letters comes
back as written, a text that a spreadsheet would run as a formula comes back with its guard, and
the Discpower files read the way the DialEval-2 organisers' scripts read them."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from scoring import exports

IDS = ["d1", "d,2", 'd"3"', "=HYPERLINK(1)", "\u5bf9\u8bdd4", "line\nbreak"]
RUNS = ["plain", "=run", "Team, Inc.", "\u30c1\u30fc\u30e0"]


def _matrix() -> np.ndarray:
    rng = np.random.default_rng(5)
    # Floats whose shortest text is long or in exponent form: a lossy writer would show here.
    return np.array(rng.random((len(IDS), len(RUNS))) ** 7 * 10.0 ** rng.integers(-12, 12, (len(IDS), len(RUNS))))


def test_the_score_matrix_round_trips_through_pandas_bit_for_bit():
    matrix = _matrix()
    frame = pd.read_csv(io.StringIO(exports.matrix_csv(IDS, RUNS, matrix)), dtype={"dialogue_id": str},
                        keep_default_na=False)
    assert list(frame.columns) == ["dialogue_id", "plain", "'=run", "Team, Inc.", "\u30c1\u30fc\u30e0"]
    assert frame["dialogue_id"].tolist() == ["d1", "d,2", 'd"3"', "'=HYPERLINK(1)", "\u5bf9\u8bdd4", "line\nbreak"]
    assert frame.iloc[:, 1:].to_numpy().tobytes() == matrix.tobytes()


def test_result_rows_read_back_cell_for_cell():
    rows = [["run_id", "team", "baseline", "score", "note"],
            [7, "-1 team", True, 0.1, None], [8, "NTT", False, 1e-300, "says \"hi\", then leaves"]]
    frame = pd.read_csv(io.StringIO(exports.csv_text(rows)))
    assert frame["run_id"].tolist() == [7, 8] and frame["baseline"].tolist() == [1, 0]
    assert frame["team"].tolist() == ["'-1 team", "NTT"]
    assert frame["score"].tolist() == [0.1, 1e-300]
    assert frame["note"].isna().tolist() == [True, False] and frame["note"][1] == 'says "hi", then leaves'


def test_discpower_files_read_as_the_organisers_scripts_read_them():
    matrix = _matrix()
    files = exports.discpower_files(RUNS, matrix)
    names = files.run_names.splitlines()
    assert names == ["plain", "=run", "Team,_Inc.", "\u30c1\u30fc\u30e0"]
    frame = pd.read_table(io.StringIO(files.matrix), sep=" ", names=names)
    assert frame.shape == matrix.shape and frame.to_numpy().tobytes() == matrix.tobytes()
