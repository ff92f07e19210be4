"""Judgements as a CSV table (a crowdsourcing platform's or a spreadsheet's export): read into
the same judgements as the JSON file says, and every problem named by its line in the table."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from scoring.judgements import agreement_cli, gold_cli
from scoring.judgements.formats import load_items, load_judgements
from scoring.judgements.tables import csv_lines, records_from_csv
from scoring.validation import ValidationFailed
from tests.judgements.test_commands import run_command

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "organisers" / "examples"


def as_csv(rows: list[list[object]]) -> bytes:
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue().encode()


def test_the_examples_as_a_table_are_the_same_judgements() -> None:
    """The stc3 example written as a campaign's CSV export (item, assessor, check, seconds, the
    dimensions, nugget labels space-separated) reads as the JSON file does."""
    records = json.loads((EXAMPLES / "stc3-judgements.json").read_text())
    table = [["item", "assessor", "check", "seconds", "A", "E", "S", "nugget"]]
    table += [[r["item"], r["assessor"], "no", f"{r['seconds']:.3f}", *(r["quality"][d] for d in "AES"),
               " ".join(r["nugget"])] for r in records]
    items = load_items(json.loads((EXAMPLES / "dialogues.json").read_text()), "stc3")
    from_table = load_judgements(records_from_csv(as_csv(table), "stc3"), "stc3", items)
    from_json = load_judgements(records, "stc3", items)
    assert from_table.judgements == from_json.judgements and from_table.check_items == frozenset()


def test_values_tables_with_extra_columns_and_a_byte_order_mark() -> None:
    data = "\ufeff" + "WorkerId,item,assessor,appropriateness,Comment\nW1,r1,ann,4,ok\nW2,r1,bo,5,\n"
    records = records_from_csv(data.encode(), "metric")
    assert records == [{"item": "r1", "assessor": "ann", "values": {"appropriateness": 4}},
                       {"item": "r1", "assessor": "bo", "values": {"appropriateness": 5}}]
    assert records_from_csv(b"item,assessor,rating,check\nc1#0,x,2,yes\n", "response") == [
        {"item": "c1#0", "assessor": "x", "values": {"rating": 2}, "check": True}]


def test_unreadable_tables() -> None:
    for data, kind, message in [
        (b"", "metric", "CSV file: no header line"),
        (b"item,who,appropriateness\n", "metric", "CSV file: the header has no column assessor (it has item, who, "
                                                  "appropriateness)"),
        (b"item,assessor\nd1,a\n", "stc3", "CSV file: the header has no column A, E, S or nugget"),
        (b"item,assessor,appropriateness\n\n", "metric", "CSV file: no judgement under the header"),
        (b"item,assessor,appropriateness\n\xff,a,1\n", "metric",
         "CSV file: not UTF-8 (byte 31 is not a UTF-8 character)"),
    ]:
        with pytest.raises(ValidationFailed) as caught:
            records_from_csv(data, kind)
        assert caught.value.errors[0].startswith(message), caught.value.errors


def test_problems_are_named_by_line(tmp_path: Path) -> None:
    data = (b"item,assessor,A,E,S,nugget,seconds,check\n"
            b"d2,ana,2,2,1,CNUG0 HNUG*,12,no\n"
            b"\n"
            b"d2,ben,2,1,7,CNUG0 HNUG* HNUG,9,no\n"
            b'd2,chen,"2",2,2,"CNUG0\nHNUG",x,maybe\n'
            b"d9,dan,0,0,0,CNUG0 HNUG,1,no\n")
    items = load_items(json.loads((EXAMPLES / "dialogues.json").read_text()), "stc3")
    with pytest.raises(ValidationFailed) as caught:
        load_judgements(records_from_csv(data, "stc3"), "stc3", items)
    assert csv_lines(caught.value.errors, data) == [
        "line 4, S: value 7 is off the scale (allowed: -2, -1, 0, 1, 2)",
        "line 4, nugget: has 3 label(s) for a dialogue of 2 turn(s): one label per turn",
        'line 6, seconds: must be a finite number of seconds >= 0, not "x"',  # the quoted cell spans lines 5-6
        'line 6, check: must be true (a check item) or false, not "maybe"',
        'line 7, item: unknown item "d9" (not in the items file)']
    path = tmp_path / "judged.csv"
    path.write_bytes(data)
    status, out, err = run_command(agreement_cli.main, [str(path), "--kind", "stc3", "--items",
                                                        str(EXAMPLES / "dialogues.json")])
    assert status == 2 and out == "" and err.splitlines()[0] == f"{path}: line 4, S: value 7 is off the scale " \
                                                                 "(allowed: -2, -1, 0, 1, 2)"


def test_gold_from_a_table(tmp_path: Path) -> None:
    path = tmp_path / "ratings.csv"
    path.write_bytes(b"item,assessor,rating\nc1#0,x,5\nc1#0,y,4\n")
    gold = [{"id": "c1", "references": [{"text": "Turn left."}, {"text": "No idea.", "weight": 0.5}]}]
    (tmp_path / "gold.json").write_text(json.dumps(gold))
    status, _, err = run_command(gold_cli.main, [str(path), "--kind", "response", "--items",
                                                 str(tmp_path / "gold.json"), "-o", str(tmp_path / "out.json")])
    assert status == 0, err
    assert json.loads((tmp_path / "out.json").read_text())[0]["references"][0]["weight"] == 0.75
