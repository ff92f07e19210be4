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
* LaTeX escapes ``& % $ # _ { } ~ ^ \\`` and ``< > |``; a name with characters pdflatex cannot
  print (Chinese, Greek, ...) is written ``\\evalname{name}{ASCII fallback}``, which xelatex and
  lualatex print as the name and pdflatex as the fallback (``latex_name``).
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from scoring.stats import SIGNIFICANCE_LEVEL, TukeyHSDResult

__all__ = [
    "DiscpowerFiles",
    "csv_cell",
    "csv_text",
    "discpower_files",
    "kendall_csv",
    "latex_escape",
    "latex_means_table",
    "latex_means_table_from_results",
    "latex_means_tables",
    "latex_name",
    "matrix_csv",
    "mean_rank_csv",
    "pvalue_csv",
    "pvalue_lines",
    "teams_csv",
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
    """Discpower's p-value file: one line ``run_a run_b absdiff p`` per run pair (i < j),
    ``absdiff = |mean_a - mean_b|``, as Discpower's Random-test writes it, so scripts written for
    its output read ours. Which run is higher is in :func:`pvalue_csv`.

    Space-separated, so whitespace in run names becomes ``_``.
    """
    names = _whitespace_free_names(_check_result_names(result, run_names))
    return "".join(f"{names[i]} {names[j]} {_number(abs(d))} {_number(p)}\n" for i, j, d, p in result.pairs())


def pvalue_csv(run_names: Sequence[str], result: TukeyHSDResult, *, guard_formulas: bool = True) -> str:
    """CSV ``run_a,run_b,diff,p,effect_size,mc_se,higher``, one row per run pair (i < j):
    ``diff = mean_a - mean_b`` keeps its sign, and ``higher`` names the run with the higher
    mean (empty when the means are equal), which the text file's absolute difference drops."""
    names = _check_result_names(result, run_names)
    rows: list[list[Any]] = [["run_a", "run_b", "diff", "p", "effect_size", "mc_se", "higher"]]
    for i, j, diff, p in result.pairs():
        higher = names[i] if diff > 0 else names[j] if diff < 0 else ""
        rows.append([names[i], names[j], float(diff), float(p), float(result.effect_sizes[i, j]),
                     float(result.mc_standard_errors[i, j]), higher])
    return csv_text(rows, guard_formulas)


def kendall_csv(taus: Iterable[Mapping[str, Any]], titles: Mapping[str, str] | None = None, *,
                guard_formulas: bool = True) -> str:
    """Kendall's tau-b between the run rankings of every pair of measures, as
    ``scoring.stats.meta_evaluate`` stores them (``a``, ``b``, ``tau``, ``low``, ``high``,
    ``level``, ``n_resamples``, ``seed``): CSV ``measure_a,measure_b,title_a,title_b,tau,low,high,
    level,n_resamples,seed``, the interval empty where none was computed."""
    titles = titles or {}
    rows: list[list[Any]] = [["measure_a", "measure_b", "title_a", "title_b", "tau", "low", "high", "level",
                              "n_resamples", "seed"]]
    for tau in taus:
        rows.append([tau["a"], tau["b"], titles.get(tau["a"], tau["a"]), titles.get(tau["b"], tau["b"]),
                     *(None if tau.get(name) is None else float(tau[name]) for name in ("tau", "low", "high", "level")),
                     *(None if tau.get(name) is None else int(tau[name]) for name in ("n_resamples", "seed"))])
    return csv_text(rows, guard_formulas)


def mean_rank_csv(run_names: Sequence[str], measures: Sequence[str], ranks: Mapping[str, Mapping[int, float]],
                  run_ids: Sequence[int], *, guard_formulas: bool = True) -> str:
    """The mean-rank table: CSV ``run,<measure>,...``, one row per run (in ``run_ids`` order,
    labelled by the parallel ``run_names``), ``ranks[measure][run_id]`` its mean rank over the
    items (``scoring.stats.mean_ranks``; empty where the run has none)."""
    names = _check_names(run_names, len(run_ids), "run names")
    rows: list[list[Any]] = [["run", *measures]]
    for run_id, name in zip(run_ids, names):
        rows.append([name, *(None if run_id not in ranks.get(m, {}) else float(ranks[m][run_id]) for m in measures)])
    return csv_text(rows, guard_formulas)


def teams_csv(teams: Iterable[tuple[str, bool, Sequence[str]]], *, guard_formulas: bool = True) -> str:
    """Runs per team: CSV ``team,baseline,runs,labels``, one row per ``(team, is_baseline,
    run labels)`` in the given order (baselines apart from a team of the same name), ``labels``
    the team's run labels joined by ``"; "``."""
    rows: list[list[Any]] = [["team", "baseline", "runs", "labels"]]
    for team, is_baseline, labels in teams:
        rows.append([team, bool(is_baseline), len(labels), "; ".join(labels)])
    return csv_text(rows, guard_formulas)


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters (``& % $ # _ { } ~ ^ \\ < > |``); newlines become spaces."""
    return str(text).translate(_LATEX_SPECIAL)


# What pdflatex prints with its default set-up (UTF-8 input, OT1 or T1 fonts): printable ASCII
# and the Latin-1 letters. Anything else (Chinese, Greek, emoji) stops it with "Unicode character
# ... not set up for use with LaTeX".
def _pdflatex_prints(char: str) -> bool:
    code = ord(char)
    return 0x20 <= code < 0x7F or (0xC0 <= code <= 0xFF and char not in "×÷")


# Defined (if the document has not) before the first table that needs it: xelatex and lualatex
# print the name itself, pdflatex the ASCII fallback. Skipped branches are not expanded, so pdflatex
# never meets the characters it cannot print.
LATEX_NAME_MACRO = (r"\providecommand{\evalname}[2]{\ifdefined\XeTeXversion#1\else"
                    r"\ifdefined\directlua#1\else#2\fi\fi}")


def latex_name(text: str, note: str = "") -> str:
    r"""``text`` escaped for LaTeX; a name pdflatex cannot print is written ``\evalname{name}{fallback}``
    (see :data:`LATEX_NAME_MACRO`), the fallback being the name with accents dropped and every
    other character it cannot print replaced by ``?``, followed by `` (note)`` if any was."""
    text = str(text).translate({ord("\n"): " ", ord("\r"): " ", ord("\t"): " "})
    if all(_pdflatex_prints(char) for char in text):
        return latex_escape(text)
    fallback, lost = [], False
    for char in text:
        if _pdflatex_prints(char):
            fallback.append(char)
            continue
        folded = "".join(c for c in unicodedata.normalize("NFKD", char) if _pdflatex_prints(c))
        if not folded:
            lost = True
            if fallback and fallback[-1] == "?":
                continue
            folded = "?"
        fallback.append(folded)
    plain = "".join(fallback) + (f" ({note})" if lost and note else "")
    return rf"\evalname{{{latex_escape(text)}}}{{{latex_escape(plain)}}}"


def _latex_rows(
    ids: Sequence[Hashable],
    names: Sequence[str],
    measures: Sequence[str],
    means: Mapping[str, Mapping[Hashable, float]],
    top_groups: Mapping[str, Collection[Hashable]],
    lower_is_better: bool | Mapping[str, bool],
    digits: int,
) -> list[str]:
    best: dict[str, Hashable | None] = {}
    for measure in measures:
        lower = lower_is_better if isinstance(lower_is_better, bool) else lower_is_better[measure]
        present = [run_id for run_id in ids if run_id in means[measure]]
        sign = 1.0 if lower else -1.0
        best[measure] = min(present, key=lambda r: sign * means[measure][r]) if present else None
    lines = []
    for run_id, name in zip(ids, names):
        cells = [name]
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
    return lines


def _check_latex_arguments(run_names: Sequence[str], ids: list[Hashable], measures: Sequence[str],
                           means: Mapping[str, Any], top_groups: Mapping[str, Any], digits: int) -> list[str]:
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
    return names


def _header_rows(measures: Sequence[str], headers: Mapping[str, str] | None,
                 subgroups: Mapping[str, str] | None) -> list[str]:
    r"""The heading rows: subgroups (``\multicolumn`` over their measures) if any, then the measures."""
    rows = []
    if subgroups and any(subgroups.get(m) for m in measures):
        spans: list[list[Any]] = []
        for measure in measures:
            name = subgroups.get(measure, "")
            if spans and spans[-1][0] == name:
                spans[-1][1] += 1
            else:
                spans.append([name, 1])
        rows.append(" & ".join(["", *(rf"\multicolumn{{{n}}}{{c}}{{{latex_name(name)}}}" if name else
                                      " & ".join([""] * n) for name, n in spans)]) + r" \\")
    titles = [latex_name(headers.get(m, m) if headers else m) for m in measures]
    rows.append(" & ".join(["Run", *titles]) + r" \\")
    return rows


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
    headers: Mapping[str, str] | None = None,
    subgroups: Mapping[str, str] | None = None,
) -> str:
    """A LaTeX ``tabular`` of mean scores: one row per run, one column per measure.

    Rows follow ``run_ids`` (default ``0..len(run_names)-1``), labelled by the parallel
    ``run_names`` (:func:`latex_name`: a name pdflatex cannot print comes with a fallback).
    ``means[measure][run_id]`` is the run's mean (a missing run gets an en dash);
    ``top_groups[measure]`` holds the run ids not significantly different from the best run
    (best included), e.g. ``TukeyHSDResult.top_group``. Per measure the best mean is bold
    (lowest, or highest where ``lower_is_better`` is False; one flag or one per measure) and
    every top-group run gets ``$^\\dagger$``. ``headers`` maps a measure to its column heading
    (default: the measure itself), ``subgroups`` to a heading over a run of columns. A leading
    LaTeX comment gives the legend and ``note``. Works from stored numbers;
    :func:`latex_means_table_from_results` builds the arguments from test results and
    :func:`latex_means_tables` splits many measures into tables that fit a page.
    """
    ids = list(range(len(run_names))) if run_ids is None else list(run_ids)
    names = _check_latex_arguments(run_names, ids, measures, means, top_groups, digits)
    legend = "Bold: best run; $^\\dagger$: not significantly different from the best run."
    rendered = [latex_name(name) for name in names]
    lines = ["% " + legend + (" " + latex_escape(note) if note else "")]
    if any(name.startswith(r"\evalname") for name in rendered):
        lines.append(LATEX_NAME_MACRO)
    lines += [r"\begin{tabular}{l" + "r" * len(measures) + "}", r"\hline",
              *_header_rows(measures, headers, subgroups), r"\hline",
              *_latex_rows(ids, rendered, measures, means, top_groups, lower_is_better, digits),
              r"\hline", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


# Columns of numbers per table: at 4 decimals with a dagger about 1.5 cm each, so seven and a
# 4 cm column of run names fit the 15-16 cm text width of A4 and letter papers (ACL, ACM, LNCS).
LATEX_MAX_COLUMNS = 7
# Names longer than this wrap in a 4 cm column instead of widening the table.
_LATEX_LONG_NAME = 28


def latex_means_tables(
    run_names: Sequence[str],
    measures: Sequence[str],
    means: Mapping[str, Mapping[Hashable, float]],
    top_groups: Mapping[str, Collection[Hashable]],
    run_ids: Sequence[Hashable] | None = None,
    *,
    lower_is_better: bool | Mapping[str, bool] = True,
    digits: int = 4,
    note: str = "",
    headers: Mapping[str, str] | None = None,
    groups: Mapping[str, str] | None = None,
    subgroups: Mapping[str, str] | None = None,
    name_notes: Sequence[str] | None = None,
    descriptions: Mapping[str, str] | None = None,
    max_columns: int = LATEX_MAX_COLUMNS,
    rank_by: Mapping[str, tuple[Mapping[Hashable, float], bool]] | None = None,
) -> str:
    """:func:`latex_means_table` split so that each ``tabular`` fits a page: one table per measure
    group (``groups`` maps a measure to its group's title), cut into tables of at most
    ``max_columns`` measures (whole subgroups where they fit). A run without any value in a table
    is left out of it. ``name_notes[k]`` is what a run's pdflatex fallback adds when characters of
    its name are lost (its id on the board, say); ``descriptions`` says in a comment above each
    table what its columns are. ``rank_by`` maps a group's title to ``(figures, lower_is_better)``:
    the figure of each run id (the board's headline measure, shown in the table or not) orders the
    rows of the group's tables, best first in that direction, runs without one last, ties by name;
    other tables keep ``run_ids``' order.
    One leading comment gives the legend, ``note`` and how names
    outside pdflatex's characters are typeset."""
    ids = list(range(len(run_names))) if run_ids is None else list(run_ids)
    names = _check_latex_arguments(run_names, ids, measures, means, top_groups, digits)
    if max_columns < 1:
        raise ValueError(f"max_columns must be >= 1; got {max_columns}")
    notes = list(name_notes) if name_notes is not None else [""] * len(ids)
    if len(notes) != len(ids):
        raise ValueError(f"{len(notes)} name notes given for {len(ids)} runs")
    rendered = [latex_name(name, note) for name, note in zip(names, notes)]
    chunks: list[tuple[str, list[str]]] = []
    for title in dict.fromkeys((groups or {}).get(m, "") for m in measures):
        in_group = [m for m in measures if (groups or {}).get(m, "") == title]
        blocks: list[list[str]] = []
        for measure in in_group:
            name = (subgroups or {}).get(measure, "")
            if blocks and name and (subgroups or {}).get(blocks[-1][0], "") == name:
                blocks[-1].append(measure)
            else:
                blocks.append([measure])
        current: list[str] = []
        for block in blocks:
            while len(block) > max_columns:  # a subgroup wider than a table is cut
                if current:
                    chunks.append((title, current))
                    current = []
                chunks.append((title, block[:max_columns]))
                block = block[max_columns:]
            if len(current) + len(block) > max_columns:
                chunks.append((title, current))
                current = []
            current += block
        if current:
            chunks.append((title, current))
    legend = "Bold: best run; $^\\dagger$: not significantly different from the best run."
    lines = ["% " + legend + (" " + latex_escape(note) if note else "")]
    if any(name.startswith(r"\evalname") for name in rendered):
        lines += ["% Some names have characters pdflatex cannot print: they are written \\evalname{name}{fallback}.",
                  "% xelatex or lualatex print the name (load a font that has its characters, e.g.",
                  "% \\usepackage{xeCJK} for Chinese, Japanese or Korean); pdflatex prints the ASCII fallback.",
                  LATEX_NAME_MACRO]
    name_column = r"p{4cm}" if any(len(name) > _LATEX_LONG_NAME for name in names) else "l"
    for number, (title, chunk) in enumerate(chunks, start=1):
        keep = [k for k, run_id in enumerate(ids) if any(run_id in means[m] for m in chunk)]
        if title in (rank_by or {}):
            figures, lower = (rank_by or {})[title]
            sign = 1.0 if lower else -1.0
            keep.sort(key=lambda k: (ids[k] not in figures, sign * figures.get(ids[k], 0.0), names[k]))
        lines += ["", f"% Table {number} of {len(chunks)}" + (f": {latex_escape(title)}" if title else "")]
        for measure in chunk:
            if descriptions and descriptions.get(measure):
                heading = (headers or {}).get(measure, measure)
                above = (subgroups or {}).get(measure, "")
                lines.append(f"% {latex_escape(heading)}{f' ({latex_escape(above)})' if above else ''}: "
                             f"{latex_escape(descriptions[measure])}")
        lines += [
                  r"\begin{tabular}{" + name_column + "r" * len(chunk) + "}", r"\hline",
                  *_header_rows(chunk, headers, subgroups), r"\hline",
                  *_latex_rows([ids[k] for k in keep], [rendered[k] for k in keep], chunk, means, top_groups,
                               lower_is_better, digits),
                  r"\hline", r"\end{tabular}"]
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
