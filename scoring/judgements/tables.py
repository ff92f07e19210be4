"""Judgements as a CSV table, the shape crowdsourcing platforms and spreadsheets export (and a
campaign's CSV export): read into the records of a judgements file, then validated by
``scoring.judgements.formats.load_judgements`` like any other, every problem named by its line.

Columns (a header line first; other columns are ignored, so a platform's own columns may stay):

* ``item``, ``assessor`` (required); ``seconds`` and ``check`` (``yes``/``no``, ``true``/``false``,
  ``1``/``0``) optional, a blank cell meaning none;
* stc3: ``A``, ``E``, ``S`` (the task's quality dimensions) and ``nugget`` (the turns' labels
  separated by spaces, in turn order); a judgement of one part only leaves the other's cells blank;
* response: ``rating``; metric: one column per dimension.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence

from scoring.judgements.formats import APPROPRIATENESS, REFERENCE_RATING, Dimension, stc3_dimensions
from scoring.kinds.stc3.config import STC3, TaskConfig
from scoring.validation import ValidationFailed

TRUE, FALSE = ("yes", "true", "1"), ("no", "false", "0", "")
_POSITION = re.compile(r"^\[(\d+)\]")


def _number(text: str) -> object:
    """A cell as the number it writes (``"4"`` -> 4, ``"12.5"`` -> 12.5), else the text itself, so
    that validation names the value as the file gave it."""
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return text
        return value if math.isfinite(value) else text


def records_from_csv(data: bytes, kind: str, dimensions: Sequence[Dimension] | None = None,
                     config: TaskConfig = STC3) -> list[dict]:
    """The CSV table's rows as judgement records (``load_judgements``'s input). Raises
    ``ValidationFailed`` for a table that cannot be read (encoding, header)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValidationFailed([f"CSV file: not UTF-8 (byte {error.start + 1} is not a UTF-8 character)"]) from None
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows or not any(cell.strip() for cell in rows[0]):
        raise ValidationFailed(["CSV file: no header line (item, assessor, then the dimensions)"])
    header = [cell.strip() for cell in rows[0]]
    if kind == "stc3":
        names = [dimension.name for dimension in stc3_dimensions(config)]
    elif kind == "response":
        names = [REFERENCE_RATING.name]
    else:
        names = [dimension.name for dimension in (dimensions or (APPROPRIATENESS,))]
    wanted = ["item", "assessor"] + (names if kind != "stc3" else [])
    missing = [name for name in wanted if name not in header]
    if kind == "stc3" and not ({"nugget", *names} & set(header)):
        missing.append(f"{', '.join(names)} or nugget")
    if missing:
        raise ValidationFailed([f"CSV file: the header has no column {', '.join(missing)} (it has "
                                f"{', '.join(header) or 'nothing'})"])
    column = {name: header.index(name) for name in header if name}
    records = []
    for cells in rows[1:]:
        if not any(cell.strip() for cell in cells):
            continue  # a blank line, as spreadsheets leave at the end

        def cell(name: str, cells: list[str] = cells) -> str | None:
            at = column.get(name)
            return cells[at].strip() if at is not None and at < len(cells) else None

        record: dict = {"item": cell("item") or None, "assessor": cell("assessor") or None}
        seconds = cell("seconds")
        if seconds:
            record["seconds"] = _number(seconds)
        check = cell("check")
        if check is not None:
            record["check"] = True if check.lower() in TRUE else False if check.lower() in FALSE else check
        if kind == "stc3":
            quality = {name: _number(value) for name in names if (value := cell(name))}
            if quality:
                record["quality"] = quality
            nugget = cell("nugget")
            if nugget:
                record["nugget"] = nugget.split()
        else:
            record["values"] = {name: _number(value) for name in names if (value := cell(name))}
        records.append(record)
    if not records:
        raise ValidationFailed(["CSV file: no judgement under the header"])
    return records


def csv_lines(errors: list[str], data: bytes) -> list[str]:
    """Problems of records read from a CSV table, ``[i].quality.A: ...`` said as ``line N, A: ...``
    (line 1 is the header; blank lines count, as an editor numbers them)."""
    reader = csv.reader(io.StringIO(data.decode("utf-8-sig", errors="replace"), newline=""))
    # A quoted cell may span lines: the reader's line number is the row's last physical line.
    lines = [reader.line_num for row in reader if reader.line_num > 1 and any(cell.strip() for cell in row)]
    out = []
    for error in errors:
        found = _POSITION.match(error)
        if found and int(found.group(1)) < len(lines):
            rest = error[found.end():].lstrip(".")
            rest = re.sub(r"^(quality|values)\.", "", rest)
            out.append(f"line {lines[int(found.group(1))]}" + (", " if not rest.startswith(":") else "") + rest)
        else:
            out.append(error)
    return out
