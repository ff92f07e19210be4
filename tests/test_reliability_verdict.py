"""The reliability report fails when a target is missed (issue 11, defect 8e: it printed PASS with
the gzip p95 at 466 ms against a 200 ms target)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import reliability_report as report  # noqa: E402

from benchmarks.reliability_load import _verdict  # noqa: E402  (its home since the report's split)

ARGS = argparse.Namespace(quick=True, inputs_only=False)


def test_a_missed_latency_target_fails_the_report() -> None:
    tally = report.Tally()
    judged = "saturated, gzip"
    assert _verdict(tally, "saturated, plain", 0.9, judged) == ""  # not the judged reader
    assert _verdict(tally, judged, 0.466, judged) == " (target p95 <= 200 ms: MISSED)"
    assert tally.targets_missed == ["leaderboard JSON (saturated, gzip) p95 466 ms > 200 ms"]
    text, ok = report.table(tally, None, ARGS, 10.0)
    assert not ok
    assert text.splitlines()[0].endswith(": FAIL")
    assert "targets missed (FAIL): leaderboard JSON (saturated, gzip) p95 466 ms > 200 ms" in text


def test_met_targets_and_zero_figures_pass() -> None:
    tally = report.Tally()
    assert _verdict(tally, "saturated, gzip", 0.150, "saturated, gzip") == " (target p95 <= 200 ms: met)"
    text, ok = report.table(tally, None, ARGS, 10.0)
    assert ok and text.splitlines()[0].endswith(": PASS")


def test_a_hostile_name_not_refused_fails_the_report() -> None:
    tally = report.Tally(names_tried=8, names_refused=7,
                         name_problems=["run name with U+202E (API): status 202, expected 400"])
    text, ok = report.table(tally, None, ARGS, 10.0)
    assert not ok
    assert "| hostile names not refused precisely, or something stored (must be 0)" in text
    assert "confusable names" in text and "7/8 refused" in text
