"""TASK-SPEC.md's worked examples through the production path: gold and run files, the stc3 kind's
``compile_gold``/``parse_run``/``score``, as the server scores them.

tests/kinds/stc3/test_measures.py checks the same tables on the measure functions alone; here the numbers go
through everything in front of them too (annotator counts to distributions, the label order of the
task's scale, per-dialogue scores and their mean, ND's block average). Every expected value is the
spec's, to the 4 decimals it prints.

Every distribution of the tables is a multiple of 1/3, so three annotators give each gold exactly,
and swapping gold and estimate gives NOD(p*, p) (the table's fourth column) through the kind too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from scoring.kinds import get_kind, measure_key


@pytest.fixture(autouse=True)
def _isolated_settings() -> None:
    """Replaces tests/conftest.py's Django settings fixture: the kinds need no Django."""


KIND = get_kind("stc3")
SCALE = ("2", "1", "0")  # L = 3, in the spec's bin order
HELPDESK = ("HNUG", "HNUG*", "HNaN")  # three nominal bins: the ND side of the same tables
CONFIG_DATA = {**KIND.presets["stc3"], "quality_dimensions": ["A"], "quality_scale": list(SCALE),
               "quality_measures": ["nod", "snod", "rsnod", "nmd", "jsd", "rnss", "nvd"]}

ONE_HOT, UNIFORM = (3, 0, 0), (1, 1, 1)  # as annotator counts: p* = (1, 0, 0) and (1/3, 1/3, 1/3)
# TASK-SPEC.md, "Worked examples": gold, estimate (as counts of 3), NOD(p, p*), SNOD, NOD(p*, p), RNSS, JSD.
TABLE = [
    (ONE_HOT, (0, 0, 3), 1.0, 1.0, 1.0, 1.0, 1.0),
    (ONE_HOT, (0, 1, 2), 0.5000, 0.6944, 0.8889, 0.8819, 1.0),
    (ONE_HOT, (0, 2, 1), 0.3333, 0.6111, 0.8889, 0.8819, 1.0),
    (ONE_HOT, (0, 3, 0), 0.5000, 0.5000, 0.5000, 1.0, 1.0),
    (UNIFORM, (3, 0, 0), 0.3148, 0.2407, 0.1667, 0.5774, 0.4591),
    (UNIFORM, (0, 3, 0), 0.2593, 0.1852, 0.1111, 0.5774, 0.4591),  # the paper's misprint corrected (eq. 7)
    (UNIFORM, (2, 1, 0), 0.1111, 0.1111, 0.1111, 0.3333, 0.2075),
    (UNIFORM, (1, 2, 0), 0.0926, 0.1019, 0.1111, 0.3333, 0.2075),
]


def _votes(counts: tuple[int, ...], labels: tuple[str, ...]) -> list[str]:
    """Three annotators' labels giving these counts."""
    return [label for label, count in zip(labels, counts, strict=True) for _ in range(count)]


def _files(pairs: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> tuple[list, list]:
    """One dialogue (one helpdesk turn) per (gold counts, estimate counts) pair; the run gives the
    estimate as probabilities in DQ and as raw counts in ND (both are allowed)."""
    gold, run = [], []
    for index, (truth, estimate) in enumerate(pairs):
        quality, nugget = _votes(truth, SCALE), _votes(truth, HELPDESK)
        gold.append({"id": f"d{index}", "turns": [{"sender": "helpdesk", "utterances": ["..."]}],
                     "annotations": [{"quality": {"A": int(q)}, "nugget": [n]} for q, n in zip(quality, nugget)]})
        run.append({"id": f"d{index}",
                    "quality": {"A": {label: value / 3 for label, value in zip(SCALE, estimate)}},
                    "nugget": [dict(zip(HELPDESK, estimate))]})
    return gold, run


def _score(pairs):
    config = KIND.config(CONFIG_DATA)
    gold_data, run_data = _files(pairs)
    gold = KIND.compile_gold(gold_data, config)
    return KIND.score(KIND.parse_run(run_data, gold, config), gold, config)


def _dq(scored, name: str) -> np.ndarray:
    return scored.per_item[measure_key("quality", "A", name)]


def test_task_spec_tables_through_the_stc3_kind():
    forward = _score([(truth, estimate) for truth, estimate, *_ in TABLE])
    backward = _score([(estimate, truth) for truth, estimate, *_ in TABLE])  # NOD(p*, p): roles swapped
    for row, (_, _, nod_forward, snod, nod_backward, rnss, jsd) in enumerate(TABLE):
        assert round(float(_dq(forward, "nod")[row]), 4) == nod_forward, row
        assert round(float(_dq(forward, "snod")[row]), 4) == snod, row
        assert round(float(_dq(backward, "nod")[row]), 4) == nod_backward, row
        assert round(float(_dq(forward, "rnss")[row]), 4) == rnss, row
        assert round(float(_dq(forward, "jsd")[row]), 4) == jsd, row
        # RSNOD = sqrt(SNOD), the official DQ measure.
        assert _dq(forward, "rsnod")[row] == pytest.approx(math.sqrt(_dq(forward, "snod")[row]), abs=1e-15)
        # ND: the same nominal measures on a dialogue with one helpdesk turn (that side's mean, eq. 12).
        assert round(float(forward.per_item[measure_key("nugget", "rnss")][row]), 4) == rnss, row
        assert round(float(forward.per_item[measure_key("nugget", "jsd")][row]), 4) == jsd, row


def test_the_run_score_is_the_mean_over_dialogues():
    scored = _score([(truth, estimate) for truth, estimate, *_ in TABLE])
    for key, values in scored.per_item.items():
        assert scored.headlines[key] == pytest.approx(float(np.mean(values)), abs=1e-15), key
    # The table's SNOD column, averaged (eq. 11): its printed values agree to 4 decimals each.
    assert scored.headlines[measure_key("quality", "A", "snod")] == pytest.approx(
        np.mean([row[3] for row in TABLE]), abs=5e-5)


def test_the_misprinted_row_follows_eq_7_through_the_kind():
    # Gold uniform, estimate (0, 1, 0): eq. 7 gives NOD 14/27 / 2 and SNOD 5/27 (the paper prints 0.3148 / 0.2130).
    scored = _score([(UNIFORM, (0, 3, 0))])
    assert _dq(scored, "nod")[0] == pytest.approx(7 / 27, abs=1e-15)
    assert _dq(scored, "snod")[0] == pytest.approx(5 / 27, abs=1e-15)


def test_ordinal_measures_are_refused_for_nominal_nugget_types():
    # TASK-SPEC.md: ordinal measures (SNOD, RSNOD, NMD) apply only where bins are ordered (DQ).
    for name in ("snod", "rsnod", "nmd", "nod"):
        with pytest.raises(ValueError, match=f"nugget_measures: {name} needs ordered bins"):
            KIND.config({**CONFIG_DATA, "nugget_measures": ["jsd", name]})
