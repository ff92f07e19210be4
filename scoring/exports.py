"""Text exports of score matrices and significance-test results: CSV, NTCIR Discpower, LaTeX.

Pure functions returning ``str``; framework-free (NumPy only). Numbers in CSV, Discpower
and p-value files are written with Python's ``repr`` (the shortest string that reads back
to the same float), so nothing is lost on a round trip; the LaTeX table rounds.

Run names come from participants, so they are treated as untrusted text:

* CSV goes through ``csv_text``, the one CSV writer of the whole project (leaderboard CSV,
  organiser ``results.csv``, the runs zip's ``manifest.csv``, statistics exports): commas,
  quotes and newlines are quoted by the ``csv`` module, and every *text* cell starting with
  ``= + - @`` or a tab/carriage return gets a leading ``'`` so that spreadsheet programs do
  not run it as a formula (OWASP "CSV injection"); numbers are written as numbers, never
  guarded. ``guard_formulas=False`` turns the guard off.
* Whitespace-separated formats (Discpower, p-value lines) cannot hold whitespace in a name:
  each whitespace character becomes ``_``; two names that become equal raise ValueError.
* LaTeX escapes ``& % $ # _ { } ~ ^ \\`` and ``< > |``.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from scoring.stats import SIGNIFICANCE_LEVEL, TukeyHSDResult

__all__ = [
    "DiscpowerFiles",
    "csv_cell",
    "csv_text",
    "discpower_files",
    "latex_escape",
    "latex_means_table",
    "latex_means_table_from_results",
    "matrix_csv",
    "pvalue_csv",
    "pvalue_lines",
    "whitespace_free",
]

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_WHITESPACE = re.compile(r"\s")
_LATEX_SPECIAL = str.maketrans(
    {
        "&": r"\&",
        "%": r"\%",
        "$": r"\$",
        "#": r"\#",
        "_": r"\_",
        "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
        "\\": r"\textbackslash{}",
        # Outside the T1 font encoding these print as other glyphs (e.g. "<" as an inverted "!").
        "<": r"\textless{}",
        ">": r"\textgreater{}",
        "|": r"\textbar{}",
        "\n": " ",
        "\r": " ",
        "\t": " ",
    }
)


class DiscpowerFiles(NamedTuple):
    """The two files of the NTCIR Discpower tool: the score matrix and the run list."""

    matrix: str
    run_names: str


def _number(value: float) -> str:
    return repr(float(value))


def _text_cell(text: str, guard_formulas: bool) -> str:
    text = str(text)
    return "'" + text if guard_formulas and text.startswith(_FORMULA_START) else text


def _check_names(names: Sequence[str], expected: int, what: str) -> list[str]:
    names = [str(name) for name in names]
    if len(names) != expected:
        raise ValueError(f"{len(names)} {what} given for {expected} columns/rows of the matrix")
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"{what} must be unique; repeated: {duplicates}")
    return names


def _check_export_matrix(matrix: np.ndarray) -> np.ndarray:
    array = np.asarray(matrix, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"matrix must be 2-dimensional (dialogues x runs); got shape {array.shape}")
    return array


def csv_cell(value: Any, guard_formulas: bool = True) -> str:
    """One CSV cell: empty for None, ``repr`` for floats (the shortest text that reads back to the
    same number), ``str`` for integers, ``1``/``0`` for booleans, and text guarded against formulas.

    Booleans are ``1`` and ``0`` in every CSV the server writes: the leaderboard CSV wrote its
    ``baseline`` column so, the organisers' results.csv and manifest.csv wrote ``True``/``False``,
    and a spreadsheet sums 1/0 columns as they are."""
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "1" if value else "0"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    return _text_cell(value, guard_formulas)


def csv_text(rows: Iterable[Sequence[Any]], guard_formulas: bool = True) -> str:
    """The project's CSV writer: rows of cells (``csv_cell``), ``\n`` line ends."""
    buffer = io.StringIO()
    # "\n" rather than the csv default "\r\n": diff- and grep-friendly; csv readers accept both.
    writer = csv.writer(buffer, lineterminator="\n")
    for row in rows:
        writer.writerow([csv_cell(value, guard_formulas) for value in row])
    return buffer.getvalue()


def whitespace_free(name: str) -> str:
    """``name`` with every whitespace character replaced by ``_`` (for whitespace-separated formats)."""
    return _WHITESPACE.sub("_", str(name))


def _whitespace_free_names(run_names: Sequence[str]) -> list[str]:
    cleaned = [whitespace_free(name) for name in run_names]
    if any(not name for name in cleaned):
        raise ValueError("run names must not be empty in a whitespace-separated format")
    clashes = sorted({c for c in cleaned if cleaned.count(c) > 1})
    if clashes:
        raise ValueError(f"run names collide once whitespace is replaced by '_': {clashes}")
    return cleaned


def matrix_csv(
    dialogue_ids: Sequence[str], run_names: Sequence[str], matrix: np.ndarray, *, guard_formulas: bool = True
) -> str:
    """Score matrix as CSV: header ``dialogue_id,<run name>,...``, then one row per dialogue."""
    array = _check_export_matrix(matrix)
    dialogue_ids = _check_names(dialogue_ids, array.shape[0], "dialogue ids")
    run_names = _check_names(run_names, array.shape[1], "run names")
    rows: list[list[Any]] = [["dialogue_id", *(str(name) for name in run_names)]]
    for dialogue, values in zip(dialogue_ids, array):
        rows.append([str(dialogue), *(float(v) for v in values)])
    return csv_text(rows, guard_formulas)


def discpower_files(run_names: Sequence[str], matrix: np.ndarray) -> DiscpowerFiles:
    """Input files of NTCIR's Discpower tool.

    ``matrix``: one line per dialogue (topic), one space-separated score per run, no header.
    ``run_names``: one name per line, in column order; whitespace in a name becomes ``_``.
    """
    array = _check_export_matrix(matrix)
    names = _whitespace_free_names(_check_names(run_names, array.shape[1], "run names"))
    matrix_text = "".join(" ".join(_number(v) for v in row) + "\n" for row in array)
    return DiscpowerFiles(matrix=matrix_text, run_names="".join(name + "\n" for name in names))


def _check_result_names(result: TukeyHSDResult, run_names: Sequence[str]) -> list[str]:
    if not isinstance(result, TukeyHSDResult):
        raise ValueError("expected (run_names, result) with a TukeyHSDResult as the second argument")
    return _check_names(run_names, result.n_runs, "run names")


def pvalue_lines(run_names: Sequence[str], result: TukeyHSDResult) -> str:
    """One line ``run_a run_b diff p`` per run pair (i < j), ``diff = mean_a - mean_b``.

    Space-separated, so whitespace in run names becomes ``_``.
    """
    names = _whitespace_free_names(_check_result_names(result, run_names))
    return "".join(f"{names[i]} {names[j]} {_number(d)} {_number(p)}\n" for i, j, d, p in result.pairs())


def pvalue_csv(run_names: Sequence[str], result: TukeyHSDResult, *, guard_formulas: bool = True) -> str:
    """CSV ``run_a,run_b,diff,p,effect_size,mc_se``, one row per run pair (i < j)."""
    names = _check_result_names(result, run_names)
    rows: list[list[Any]] = [["run_a", "run_b", "diff", "p", "effect_size", "mc_se"]]
    for i, j, diff, p in result.pairs():
        rows.append([names[i], names[j], float(diff), float(p), float(result.effect_sizes[i, j]),
                     float(result.mc_standard_errors[i, j])])
    return csv_text(rows, guard_formulas)


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters (``& % $ # _ { } ~ ^ \\ < > |``); newlines become spaces."""
    return str(text).translate(_LATEX_SPECIAL)


def latex_means_table(
    run_names: Sequence[str],
    measures: Sequence[str],
    means: Mapping[str, Mapping[Hashable, float]],
    top_groups: Mapping[str, Collection[Hashable]],
    run_ids: Sequence[Hashable] | None = None,
    *,
    lower_is_better: bool | Mapping[str, bool] = True,
    digits: int = 4,
    note: str = "",
) -> str:
    """A LaTeX ``tabular`` of mean scores: one row per run, one column per measure.

    Rows follow ``run_ids`` (default ``0..len(run_names)-1``), labelled by the parallel
    ``run_names``. ``means[measure][run_id]`` is the run's mean (a missing run gets an en
    dash); ``top_groups[measure]`` holds the run ids not significantly different from the best
    run (best included), e.g. ``TukeyHSDResult.top_group``. Per measure the best mean is bold
    (lowest, or highest where ``lower_is_better`` is False; one flag or one per measure) and
    every top-group run gets ``$^\\dagger$``. A leading LaTeX comment gives the legend and
    ``note``. Works from stored numbers; :func:`latex_means_table_from_results` builds the
    arguments from test results.
    """
    ids = list(range(len(run_names))) if run_ids is None else list(run_ids)
    names = _check_names(run_names, len(ids), "run names")
    if len(set(ids)) != len(ids):
        raise ValueError("run_ids must be unique")
    if not measures:
        raise ValueError("measures must name at least one measure")
    if digits < 0:
        raise ValueError(f"digits must be >= 0; got {digits}")
    missing = [m for m in measures if m not in means or m not in top_groups]
    if missing:
        raise ValueError(f"means and top_groups need an entry for every measure; missing: {missing}")
    best: dict[str, Hashable | None] = {}
    for measure in measures:
        lower = lower_is_better if isinstance(lower_is_better, bool) else lower_is_better[measure]
        present = [run_id for run_id in ids if run_id in means[measure]]
        sign = 1.0 if lower else -1.0
        best[measure] = min(present, key=lambda r: sign * means[measure][r]) if present else None

    legend = "Bold: best run; $^\\dagger$: not significantly different from the best run."
    lines = [
        "% " + legend + (" " + latex_escape(note) if note else ""),
        r"\begin{tabular}{l" + "r" * len(measures) + "}",
        r"\hline",
        " & ".join(["Run", *(latex_escape(m) for m in measures)]) + r" \\",
        r"\hline",
    ]
    for run_id, name in zip(ids, names):
        cells = [latex_escape(name)]
        for measure in measures:
            if run_id not in means[measure]:
                cells.append("--")
                continue
            text = f"{means[measure][run_id]:.{digits}f}"
            if run_id == best[measure]:
                text = rf"\textbf{{{text}}}"
            if run_id in top_groups[measure]:
                text += r"$^\dagger$"
            cells.append(text)
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\hline", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def latex_means_table_from_results(
    results: Mapping[str, TukeyHSDResult],
    run_names: Sequence[str],
    alpha: float = SIGNIFICANCE_LEVEL,
    lower_is_better: bool | Mapping[str, bool] = True,
    digits: int = 4,
) -> str:
    """:func:`latex_means_table` for Tukey HSD results over the same runs, top groups at ``alpha``."""
    if not results:
        raise ValueError("results must name at least one measure")
    n_runs = {result.n_runs for result in results.values()}
    if len(n_runs) != 1:
        raise ValueError("all results must be for the same runs")
    measures = list(results)
    groups = {}
    for measure in measures:
        lower = lower_is_better if isinstance(lower_is_better, bool) else lower_is_better[measure]
        groups[measure] = set(results[measure].top_group(alpha, lower_is_better=lower))
    settings = "; ".join(f"{m}: B={results[m].n_permutations}, seed={results[m].seed}" for m in measures)
    return latex_means_table(
        run_names,
        measures,
        {m: dict(enumerate(results[m].means.tolist())) for m in measures},
        groups,
        list(range(n_runs.pop())),
        lower_is_better=lower_is_better,
        digits=digits,
        note=f"Randomised Tukey HSD, alpha={alpha}. {settings}",
    )
