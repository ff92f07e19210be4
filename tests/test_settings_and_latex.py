"""Issue 17, item 8: every board, export and the API name the variant and each aggregation setting
the runs were scored with; the LaTeX table shows the official measures by default under their
human names, fits a page, and survives pdflatex and xelatex with a Chinese team name."""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from leaderboard.models import TaskStatistics
from scoring import exports
from scoring.kinds import describe_value, get_kind
from tasks.changes import touch_scores
from tasks.models import Score, Team
from tests.conftest import World
from tests.test_statistics_pages import board, submit  # noqa: F401 - the fixture and its helper

PAPER = {"variant": "paper", "alpha": 0.5, "averaging": "macro"}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_board_api_csv_and_results_name_every_scoring_setting(board: World) -> None:  # noqa: F811
    api = Client().get(f"/api/v1/tasks/{board.task.slug}/leaderboard/").json()
    assert api["settings"] == PAPER and api["settings_differ"] == []
    assert [entry["label"] for entry in api["settings_described"]] == ["variant", "ND averaging", "ND alpha"]
    assert api["settings_described"][0]["value"] == "paper (the overview papers' formulas)"
    assert all(run["scores"]["settings"] == PAPER for run in api["runs"])
    page = Client().get(f"/tasks/{board.task.slug}/").content.decode()
    assert ("Scored with: variant: paper (the overview papers&#x27; formulas) · ND averaging: macro (every dialogue "
            "weighs the same) · ND alpha: 0.5") in page
    rows = list(csv.DictReader(io.StringIO(Client().get(f"/tasks/{board.task.slug}/leaderboard.csv").content.decode())))
    assert {(row["setting:variant"], row["setting:alpha"], row["setting:averaging"]) for row in rows} == {
        ("paper", "0.5", "macro")}
    results = signed_in(board.organiser).get(f"/organiser/{board.task.slug}/results.json").json()["results"]
    assert {(row["setting:variant"], row["setting:alpha"], row["setting:averaging"]) for row in results} == {
        ("paper", 0.5, "macro")}
    results_csv = signed_in(board.organiser).get(f"/organiser/{board.task.slug}/results.csv").content.decode()
    assert "setting:alpha,setting:averaging,setting:variant" in results_csv.splitlines()[0]


@pytest.mark.django_db
def test_runs_scored_with_different_settings_are_said_to_differ(board: World) -> None:  # noqa: F811
    """A task re-configured without re-scoring: the board names the setting that differs."""
    score = Score.objects.filter(run__name="half-noise").get()
    score.summary = {**score.summary, "settings": {**PAPER, "variant": "stc3-2018"}}
    score.save()
    touch_scores(board.task)
    api = Client().get(f"/api/v1/tasks/{board.task.slug}/leaderboard/").json()
    assert api["settings"] == {"alpha": 0.5, "averaging": "macro"} and api["settings_differ"] == ["variant"]
    page = Client().get(f"/tasks/{board.task.slug}/").content.decode()
    assert "the runs differ in variant (each run's settings are in the JSON)" in page
    rows = list(csv.DictReader(io.StringIO(Client().get(f"/tasks/{board.task.slug}/leaderboard.csv").content.decode())))
    assert {row["run"]: row["setting:variant"] for row in rows}["half-noise"] == "stc3-2018"


def test_a_kind_without_labels_lists_its_settings_by_key() -> None:
    from tests.toy_kind import ToyKind

    assert ToyKind().describe_settings({"scale": 2.0, "name": "x", "on": True, "sizes": [1, 2]}) == [
        ("name", "x"), ("on", "true"), ("scale", "2"), ("sizes", "1, 2")]
    assert describe_value(None) == "none" and describe_value(0.25) == "0.25"
    # The DQ/ND kind explains its own, in a fixed order whatever order the stored JSON came back in.
    labels = get_kind("stc3").describe_settings({"averaging": "micro", "alpha": 0.3, "variant": "stc3-2018"})
    assert labels == [("variant", "stc3-2018 (the 2018 STC-3 script's SNOD/RSNOD)"),
                      ("ND averaging", "micro (every turn of a side weighs the same)"),
                      ("ND alpha", "0.3 (the weight of customer turns; helpdesk turns get 1 - alpha)")]


# LaTeX ---------------------------------------------------------------------------------------------

def test_latex_names_keep_what_pdflatex_prints_and_wrap_the_rest() -> None:
    assert exports.latex_name("team_1/run") == r"team\_1/run"
    assert exports.latex_name("Équipe/ü") == "Équipe/ü"  # Latin-1 letters print with pdflatex's defaults
    assert exports.latex_name("清华对话组/bert", "run 7") == r"\evalname{清华对话组/bert}{?/bert (run 7)}"
    assert exports.latex_name("Δ-net & co", "run 3") == r"\evalname{Δ-net \& co}{?-net \& co (run 3)}"
    # Accents outside Latin-1 fold to their letter; nothing is lost, so no note.
    assert exports.latex_name("Łódź ő", "run 1") == r"\evalname{Łódź ő}{?ódz o (run 1)}"
    assert exports.latex_name("Zoë ő", "run 1") == r"\evalname{Zoë ő}{Zoë o}"


def test_latex_tables_are_cut_by_group_and_whole_subgroups_to_fit_a_page() -> None:
    measures = [f"{dim}.{name}" for dim in "ASE" for name in ("rsnod", "nmd", "snod")] + ["jsd", "rnss"]
    means = {m: {1: 0.2 + i / 100, 2: 0.1} for i, m in enumerate(measures)}
    means["jsd"] = {2: 0.4}  # run 1 has no nugget scores: it is left out of that table
    means["rnss"] = {2: 0.3}
    text = exports.latex_means_tables(
        ["one", "two"], measures, means, {m: {2} for m in measures}, [1, 2],
        headers={m: m.split(".")[-1].upper() for m in measures},
        groups={m: "DQ" if "." in m else "ND" for m in measures},
        subgroups={m: m.split(".")[0] if "." in m else "" for m in measures}, max_columns=7)
    tables = text.split(r"\begin{tabular}")[1:]
    assert len(tables) == 3
    headers = [next(line for line in table.splitlines() if line.startswith("Run & ")) for table in tables]
    # A and S (6 columns) fit one table, E goes to the next: a subgroup is never cut when it fits.
    assert headers == [r"Run & RSNOD & NMD & SNOD & RSNOD & NMD & SNOD \\", r"Run & RSNOD & NMD & SNOD \\",
                       r"Run & JSD & RNSS \\"]
    assert r" & \multicolumn{3}{c}{A} & \multicolumn{3}{c}{S} \\" in tables[0]
    assert "% Table 3 of 3: ND" in text
    assert "one &" not in tables[2] and r"two & \textbf{0.4000}$^\dagger$ & \textbf{0.3000}$^\dagger$ \\" in tables[2]
    assert r"\evalname" not in text  # no name needs it: no macro either


@pytest.fixture
def cjk_board(board: World) -> World:  # noqa: F811
    chen = get_user_model().objects.create_user("chen", password="chen-pass-1")
    Team.objects.create(name="清华对话组", slug="tsinghua").members.add(chen)
    submit(board, chen, 0.3, 9, "thu-roberta")
    return board


@pytest.mark.django_db
def test_the_latex_table_shows_the_official_measures_under_their_names(cjk_board: World) -> None:
    base = f"/tasks/{cjk_board.task.slug}/statistics/all/means.tex"
    latex = Client().get(base).content.decode()
    record = TaskStatistics.objects.get(task=cjk_board.task, phase=None)
    assert latex.count(r"\begin{tabular}") == 2
    headers = [line for line in latex.splitlines() if line.startswith("Run & ")]
    assert headers == [r"Run & RSNOD & NMD & RSNOD & NMD & RSNOD & NMD \\", r"Run & JSD & RNSS \\"]
    assert r" & \multicolumn{2}{c}{A} & \multicolumn{2}{c}{S} & \multicolumn{2}{c}{E} \\" in latex
    assert "Scored with variant: paper (the overview papers' formulas); ND averaging: macro" in latex
    # What each column is, above its table.
    assert ("% Table 1 of 2: Dialogue quality (DQ)\n% RSNOD (A): Root Symmetric Normalised Order-aware "
            "Divergence, A (task accomplishment); lower is better\n") in latex
    # Every run, and the Chinese team's name for xelatex with an ASCII fallback for pdflatex.
    run_id = next(int(key) for key, label in record.run_labels.items() if label.startswith("清华"))
    assert rf"\evalname{{清华对话组/thu-roberta}}{{?/thu-roberta (run {run_id} on the board)}}" in latex
    assert latex.count(r"\providecommand{\evalname}") == 1
    every = Client().get(f"{base}?measures=all").content.decode()
    assert every.count(r"\begin{tabular}") == 4  # 18 DQ measures by dimension, then ND
    assert all(len(line.split(" & ")) - 1 <= exports.LATEX_MAX_COLUMNS for line in every.splitlines()
               if line.startswith("Run & "))
    chosen = Client().get(f"{base}?measures=nugget.jsd,quality.E.nmd").content.decode()
    assert [line for line in chosen.splitlines() if line.startswith("Run & ")] == [r"Run & NMD \\", r"Run & JSD \\"]
    refused = Client().get(f"{base}?measures=nugget.jsd,quality.X.nmd,bogus")
    assert refused.status_code == 400
    assert refused.content.decode().startswith("measures: no statistics on this board for 'quality.X.nmd', 'bogus'")


def _compile(engine: str, document: str, folder: Path) -> subprocess.CompletedProcess:
    (folder / "doc.tex").write_text(document, encoding="utf-8")
    return subprocess.run([engine, "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=folder,
                          capture_output=True, text=True, timeout=120)


def _skip_unless_ci(reason: str) -> None:
    # .ci/run installs TeX and the CJK font: in CI a missing one is a failure, not a skip.
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.mark.django_db
def test_the_latex_table_compiles_with_pdflatex_and_xelatex_and_fits_a4(cjk_board: World, tmp_path: Path) -> None:
    """Both engines compile the whole export inside an A4 article with 2.5 cm margins: no error, no
    overfull line, and xelatex finds every character (the Chinese name in a CJK font)."""
    if not shutil.which("pdflatex") or not shutil.which("xelatex"):
        _skip_unless_ci("pdflatex and xelatex are not installed (apt-get install texlive-latex-base texlive-xetex)")
    latex = Client().get(f"/tasks/{cjk_board.task.slug}/statistics/all/means.tex?measures=all").content.decode()
    preamble = "\\documentclass{article}\n\\usepackage[a4paper,margin=2.5cm]{geometry}\n"
    body = f"\\begin{{document}}\n{latex}\n\\end{{document}}\n"
    pdf = _compile("pdflatex", preamble + body, tmp_path)
    assert pdf.returncode == 0, pdf.stdout[-2000:]
    log = (tmp_path / "doc.log").read_text(errors="replace")
    assert "Overfull \\hbox" not in log
    fonts = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout
    if "Noto Serif CJK SC" not in fonts:
        _skip_unless_ci("no Noto CJK font for xelatex (apt-get install fonts-noto-cjk)")
    xe = _compile("xelatex", preamble + "\\usepackage{fontspec}\n\\setmainfont{Noto Serif CJK SC}\n" + body, tmp_path)
    assert xe.returncode == 0, xe.stdout[-2000:]
    log = (tmp_path / "doc.log").read_text(errors="replace")
    assert "Overfull \\hbox" not in log and "Missing character" not in log
    # Unwrapped, the same table stops pdflatex: the reason for \evalname.
    raw = re.sub(r"\\evalname\{([^}]*)\}\{[^}]*\}", lambda match: match.group(1), latex)
    assert "清华对话组/thu-roberta &" in raw
    assert _compile("pdflatex", preamble + f"\\begin{{document}}\n{raw}\n\\end{{document}}\n", tmp_path).returncode != 0
    assert "Unicode character 清" in (tmp_path / "doc.log").read_text(errors="replace")
