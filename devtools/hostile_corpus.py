"""A corpus of hostile or broken run uploads, each with what the server must say about it.

Every case is a function of the gold (so ids can be real) returning the bytes to upload, the
multipart filename, extra form fields, the expected HTTP status and fragments that must appear
in the listed errors. ``tests/test_hostile_uploads.py`` and ``benchmarks/reliability_report.py``
both use it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from fixtures.synthetic import generate_run

# The upload limit the corpus is run with: above the 10 MB key case, below the oversized file.
CORPUS_MAX_BYTES = 12 * 1024 * 1024


@dataclass
class Case:
    name: str
    build: Callable[[list], bytes]
    expect: list[str]
    status: int = 400
    filename: str = "run.json"
    fields: dict[str, str] = field(default_factory=dict)
    min_errors: int = 1
    # How the request is sent: "multipart" (a form with the file), "chunked" (the same form with
    # Transfer-Encoding: chunked and no Content-Length), "json" (the file as an application/json
    # body), "no-file" (the form without its file), "many-files" (the file and 120 more).
    transport: str = "multipart"
    # What the web form says instead, where it differs from the API (None: the same; "skip":
    # the case does not apply to the form). Both read the request with one function
    # (tasks.submissions.submission_from_request), so only how a missing file is told differs.
    web_expect: list[str] | str | None = None
    web_status: int | None = None


def _run(gold: list) -> list[dict[str, Any]]:
    return generate_run(gold, "noisy", noise=0.3, seed=1)


def _edit(change: Callable[[list[dict[str, Any]], list], Any]) -> Callable[[list], bytes]:
    def build(gold: list) -> bytes:
        run = _run(gold)
        change(run, gold)
        return json.dumps(run, allow_nan=True).encode()
    return build


def _raw(text: str | bytes) -> Callable[[list], bytes]:
    return lambda gold: text.encode() if isinstance(text, str) else text


def _valid(gold: list) -> bytes:
    return orjson.dumps(_run(gold))


def _nested(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _first_customer_turn(run: list) -> dict:
    return run[0]["nugget"][0]


def _replace_value(text_value: str) -> Callable[[list], bytes]:
    """Put a literal (NaN, 1e400, ...) where the first quality value is, at the text level."""
    def build(gold: list) -> bytes:
        run = _run(gold)
        run[0]["quality"]["A"]["2"] = "__HOLE__"
        return json.dumps(run).replace('"__HOLE__"', text_value).encode()
    return build


CASES: list[Case] = [
    Case("empty file", _raw(b""), ["file is empty"]),
    Case("only whitespace", _raw(b"  \n\t "), ["file is empty"]),
    Case("not json", _raw("this is not json"), ["not valid JSON"]),
    Case("truncated json", lambda gold: _valid(gold)[:-10], ["not valid JSON"]),
    Case("json with a BOM", lambda gold: b"\xef\xbb\xbf" + _valid(gold), ["byte-order mark"]),
    Case("utf-16", lambda gold: _valid(gold).decode().encode("utf-16"),
         ["file is not UTF-8 (looks like UTF-16, little-endian, with a byte-order mark)"]),
    Case("utf-16 without BOM", lambda gold: _valid(gold).decode().encode("utf-16-le"),
         ["file is not UTF-8 (looks like UTF-16, little-endian, without a byte-order mark); save it as UTF-8"]),
    Case("utf-16 big-endian without BOM", lambda gold: _valid(gold).decode().encode("utf-16-be"),
         ["file is not UTF-8 (looks like UTF-16, big-endian, without a byte-order mark)"]),
    Case("utf-32 without BOM", lambda gold: _valid(gold).decode().encode("utf-32-le"),
         ["file is not UTF-8 (looks like UTF-32, little-endian, without a byte-order mark)"]),
    Case("latin-1 bytes", _raw(b'[{"id": "caf\xe9"}]'), ["not valid UTF-8"]),
    Case("top-level object", _raw('{"runs": []}'), ["expected a JSON list of dialogues, got an object"]),
    Case("top-level string", _raw('"hello"'), ["expected a JSON list of dialogues, got str"]),
    Case("top-level number", _raw("42"), ["expected a JSON list of dialogues, got int"]),
    Case("top-level null", _raw("null"), ["expected a JSON list of dialogues, got NoneType"]),
    Case("empty list", _raw("[]"), ["the list of dialogues is empty"]),
    Case("deeply nested arrays", _raw("[" * 100_000 + "]" * 100_000), ["nested too deeply"]),
    Case("deeply nested objects", _raw('{"a":' * 50_000 + "1" + "}" * 50_000), ["nested too deeply"]),
    Case("entries are not objects", _raw('[1, "two", null, []]'), ["[0]: expected an object, got int",
                                                                    "[3]: expected an object, got list"],
         min_errors=4),
    Case("huge number", _replace_value("1e400"), ['[0].quality.A["2"]: value inf is not a finite number']),
    Case("huge integer", _replace_value("1" + "0" * 400), ['[0].quality.A["2"]: value is too large']),
    Case("NaN literal", _replace_value("NaN"), ['[0].quality.A["2"]: value nan is not a finite number']),
    Case("Infinity literal", _replace_value("Infinity"), ['[0].quality.A["2"]: value inf is not a finite number']),
    Case("negative Infinity", _replace_value("-Infinity"), ['[0].quality.A["2"]: value -inf is not a finite number']),
    Case("negative value", _replace_value("-0.25"), ['[0].quality.A["2"]: value -0.25 is negative']),
    Case("string as number", _replace_value('"0.5"'), ['[0].quality.A["2"]: value "0.5" is a str, not a number']),
    Case("boolean as number", _replace_value("true"), ['[0].quality.A["2"]: value True is a boolean, not a number']),
    Case("null as number", _replace_value("null"), ['[0].quality.A["2"]: value None is null, not a number']),
    Case("list as number", _replace_value("[0.5]"), ['[0].quality.A["2"]: value [0.5] is a list, not a number']),
    Case("all-zero distribution", _edit(lambda run, gold: run[1]["quality"].__setitem__(
        "S", dict.fromkeys(("2", "1", "0", "-1", "-2"), 0))), ["[1].quality.S: all values are 0"]),
    Case("duplicate ids", _edit(lambda run, gold: run.append(dict(run[0]))),
         ["[30].id: duplicate dialogue id", "(first at [0])"]),
    Case("ids of another task", _edit(lambda run, gold: [entry.__setitem__("id", f"other-{i}")
                                                         for i, entry in enumerate(run[:3])]),
         ['[0].id: dialogue "other-0" is not in the gold data of this task', "the run misses 3 of the 30"],
         min_errors=4),
    Case("missing dialogues", _edit(lambda run, gold: run.__delitem__(slice(0, 5))),
         ["$: the run misses 5 of the 30 gold dialogue(s)"]),
    Case("extra dialogues", _edit(lambda run, gold: run.append({**run[0], "id": "9999999999999999"})),
         ['[30].id: dialogue "9999999999999999" is not in the gold data of this task']),
    # Whole-number ids are accepted (read as their decimal strings, as in some STC-3 files), so a
    # number the gold lacks is an unknown dialogue; a fraction is no id at all.
    Case("id is an unknown number", _edit(lambda run, gold: run[0].__setitem__("id", 12345)),
         ['[0].id: dialogue "12345" is not in the gold data of this task']),
    Case("id is a fraction", _edit(lambda run, gold: run[0].__setitem__("id", 1.5)),
         ["[0].id: must be a non-empty string or an integer, got 1.5"]),
    Case("missing id", _edit(lambda run, gold: run[0].pop("id")), ["[0].id: missing or not a non-empty string"]),
    Case("nugget list too short", _edit(lambda run, gold: run[2]["nugget"].pop()),
         ["[2].nugget: has "]),
    Case("nugget list too long", _edit(lambda run, gold: run[2]["nugget"].append({"HNUG": 1})),
         ["[2].nugget: has "]),
    Case("helpdesk label on a customer turn", _edit(lambda run, gold: run[0]["nugget"].__setitem__(0, {"HNUG": 1.0})),
         ['[0].nugget[0]: label "HNUG" is not allowed on a customer turn']),
    Case("unknown nugget type", _edit(lambda run, gold: run[0]["nugget"].__setitem__(0, {"XNUG": 1.0})),
         ['[0].nugget[0]: unknown nugget type "XNUG"']),
    Case("unknown scale label", _edit(lambda run, gold: run[0]["quality"]["A"].__setitem__("3", 0.1)),
         ['[0].quality.A: unknown label "3" (allowed: 2, 1, 0, -1, -2)']),
    Case("unknown dimension", _edit(lambda run, gold: run[0]["quality"].__setitem__("Z", {"2": 1})),
         ['[0].quality: unknown dimension "Z"']),
    Case("missing dimension", _edit(lambda run, gold: run[0]["quality"].pop("E")),
         ['[0].quality: missing dimension "E"']),
    Case("quality is a list", _edit(lambda run, gold: run[0].__setitem__("quality", [1, 2])),
         ["[0].quality: expected an object of dimensions, got list"]),
    Case("mixed subtasks", _edit(lambda run, gold: run[4].pop("nugget")),
         ["[4]: missing 'nugget' (other dialogues of this run have it)"]),
    Case("no subtask at all", _edit(lambda run, gold: [entry.pop(key) for entry in run
                                                       for key in ("quality", "nugget")]),
         ["nothing to score"]),
    Case("control characters in keys", _edit(lambda run, gold: run[0]["quality"]["A"].__setitem__("\x00\x1b[31m", 1)),
         ['[0].quality.A: unknown label "\\u0000\\u001b[31m"']),
    Case("10 MB string key", _edit(lambda run, gold: run[0]["quality"]["A"].__setitem__("x" * 10_000_000, 1)),
         ['[0].quality.A: unknown label "xxxxxxxx']),
    Case("many errors at once", _edit(lambda run, gold: [entry["quality"]["A"].__setitem__("2", -1)
                                                         for entry in run]),
         ['[0].quality.A["2"]: value -1 is negative', '[29].quality.A["2"]: value -1 is negative'],
         min_errors=30),
    Case("file over the size limit", lambda gold: b"[" + b" " * CORPUS_MAX_BYTES + b"]",
         ["over the limit of"], status=413),
    Case("path traversal in the filename", _raw("[1]"), ["[0]: expected an object, got int"],
         filename="../../../../tmp/evil.json"),
    Case("HTML in the name", _valid, ["name: contains U+0000 NULL at position 12"],
         fields={"name": "<b>bold</b>\x00", "description": "<script>alert(1)</script>"}),
    Case("name too long", _valid, ["name: at most 100 characters (got 101)"], fields={"name": "n" * 101}),
    Case("description too long", _valid, ["description: at most 5000 characters (got 5001)"],
         fields={"description": "d" * 5001}),
    Case("priority not a number", _valid, ["priority: expected a whole number"], fields={"priority": "first"}),
    Case("priority out of range", _valid, ["priority: must be a whole number from 1"], fields={"priority": "0"}),
    Case("public not a boolean", _valid, ["public: expected true or false"], fields={"public": "maybe"}),
    # Issue 11: the shape of the file is bounded before anything is parsed.
    Case("empty objects filling the file", _raw(b"[" + b"{}," * 3_000_000 + b"{}]"),
         ["$: the run has more than 130 entries (entry [130] starts at line 1 column 392) but the gold has 30 "
          "dialogues"]),
    Case("deep nesting under a key not read", _edit(lambda run, gold: run[0].__setitem__("x", _nested(40))),
         ["file is nested too deeply to be a run: more than 32 levels"]),
    Case("a long list under a key not read", _edit(lambda run, gold: run[3].__setitem__("x", [0] * 2_000_000)),
         ["file holds more than ", "keep only the keys the scorer reads"]),
    Case("many keys in one object", _edit(lambda run, gold: run[3].__setitem__(
        "x", {f"k{i}": 1 for i in range(500_000)})), ["file holds more than "]),
    # Issue 11: requests the server cannot read get a precise answer, never an HTML page or "file: missing".
    Case("2,000 form fields", _valid, ["the request has more than 1000 form fields; an upload takes at most 7 "
                                         "(file, priority, public, name, description, phase and team)"],
         fields={f"field{i}": "x" for i in range(2000)}),
    Case("too many files", _valid, ["the request has more than 100 files; send one run file"],
         transport="many-files"),
    Case("chunked upload without a length", _valid, ["send the file with a Content-Length header"], status=411,
         transport="chunked"),
    Case("file sent as a JSON body", _valid, ["Content-Type 'application/json' is not accepted here: send the run "
                                              "as multipart/form-data"], status=415, transport="json",
         web_expect=["file: choose a run file to upload"], web_status=400),
    Case("no file field", _valid, ["file: missing; send the run as a multipart field named 'file'"],
         transport="no-file", web_expect=["file: choose a run file to upload"]),
]



# Cases of every task kind (issue 24): each builds its file from the gold of a task of that kind
# (tests/test_hostile_uploads.py makes the tasks: stc3 from fixtures.synthetic, response from
# fixtures.response_demo, metric from fixtures.metric_demo) and is uploaded through the API and
# the web form. Huge integers were 500s on every path; the nugget cases made the scoring worker
# allocate gigabytes; an unpaired surrogate failed at scoring, and again at every re-score.
HUGE_INTEGER = "1" + "0" * 5000  # past Python's 4,300-digit int-from-string limit
TOO_LARGE = "1" + "0" * 400  # an int, beyond the largest double


@dataclass
class KindCase:
    kind: str
    name: str
    build: Callable[[list], bytes]
    expect: list[str]
    status: int = 400


def _first_value_as(text_value: str) -> Callable[[list], bytes]:
    """The stc3 run with its first quality value written as ``text_value`` (JSON text)."""
    return _replace_value(text_value)


def _stc3_id(gold: list) -> bytes:
    run = _run(gold)
    run[0]["id"] = "__HOLE__"
    return json.dumps(run).replace('"__HOLE__"', HUGE_INTEGER).encode()


def _response_run(gold: list) -> list[dict[str, Any]]:
    return [{"id": item["id"], "response": "I am sorry to hear that. Try restarting it."} for item in gold]


def _response_edit(change: Callable[[list[dict[str, Any]]], Any]) -> Callable[[list], bytes]:
    def build(gold: list) -> bytes:
        run = _response_run(gold)
        change(run)
        return json.dumps(run).replace('"__HOLE__"', HUGE_INTEGER).encode()
    return build


def _many_nuggets(count: int) -> Callable[[list[dict[str, Any]]], None]:
    def change(run: list[dict[str, Any]]) -> None:
        run[0]["response"] = "a" * count
        run[0]["nuggets"] = [{"text": "a", "act": "Opinion"} for _ in range(count)]
    return change


def _many_alternatives(run: list[dict[str, Any]]) -> None:
    run[0]["response"] = "I am sorry. Try again."
    run[0]["nuggets"] = [{"text": "I am sorry.", "act": "Apology", "same": [f"Sorry {k}." for k in range(6000)]},
                         {"text": "Try again.", "act": "Recommendation"}]


def _over_budget(run: list[dict[str, Any]]) -> None:
    # Within both limits, but 2 x 5,101 variants of 9,900 characters: 101 million > 50 million.
    for entry in run[:2]:
        nuggets = [{"text": f"{k:02d}" + "b" * 97, "act": "Opinion", "same": [f"w{k}x{j}" for j in range(50)]}
                   for k in range(100)]
        entry["response"] = "".join(nugget["text"] for nugget in nuggets)
        entry["nuggets"] = nuggets


def _metric_edit(value_text: str) -> Callable[[list], bytes]:
    def build(gold: list) -> bytes:
        run = [{"id": response["id"], "score": 0.5} for context in gold for response in context["responses"]]
        run[0]["score"] = "__HOLE__"
        return json.dumps(run).replace('"__HOLE__"', value_text).encode()
    return build


KIND_CASES: list[KindCase] = [
    KindCase("stc3", "integer of 5,001 digits as a value", _first_value_as(HUGE_INTEGER),
             ['[0].quality.A["2"]: value is too large to be a number']),
    KindCase("stc3", "integer of 5,001 digits as an id", _stc3_id,
             ["[0].id: must be a non-empty string or an integer, got <an integer of 5,001 digits>"]),
    KindCase("response", "integer of 5,001 digits as a response", _response_edit(
        lambda run: run[0].__setitem__("response", "__HOLE__")),
             ["[0].response: must be a string, not <an integer of 5,001 digits>"]),
    KindCase("response", "integer of 5,001 digits as an id",
             _response_edit(lambda run: run[1].__setitem__("id", "__HOLE__")),
             ["[1].id: must be a non-empty string or an integer, not <an integer of 5,001 digits>"]),
    KindCase("response", "unpaired surrogate in a response", lambda gold: json.dumps(_response_run(gold)).replace(
        "I am sorry", "I am \\ud800sorry", 1).encode(),
             ["[0].response: contains an unpaired surrogate U+D800 at position 5 (half of a UTF-16 pair: "
              "not a character)"]),
    KindCase("response", "unpaired surrogate in a nugget", lambda gold: json.dumps(
        [{**entry, "nuggets": [{"text": "__NUGGET__", "act": "Apology"}]} if k == 0 else entry
         for k, entry in enumerate(_response_run(gold))]).replace(
        '"__NUGGET__"', '"I am sorry\\udfff to hear that. Try restarting it."').encode(),
             ["[0].nuggets[0].text: contains an unpaired surrogate U+DFFF at position 10"]),
    KindCase("response", "101 one-character nuggets", _response_edit(_many_nuggets(101)),
             ["[0].nuggets: has 101 nuggets; at most 100 are allowed per response"]),
    # The audit's 7,500 (on a larger gold) passed the file's shape bound; on 30 items it stops there.
    KindCase("response", "7,500 one-character nuggets", _response_edit(_many_nuggets(7500)),
             ["file holds more than 17680 objects, lists and values"]),
    KindCase("response", "6,000 alternatives for one nugget", _response_edit(_many_alternatives),
             ["[0].nuggets[0]: has 6000 alternatives (diff and same together); at most 50 are allowed"]),
    KindCase("response", "nugget work over the run's budget", _response_edit(_over_budget),
             ["nugget scores of this run would cover 101,004,616 characters of variant responses",
              "at most 50,000,000 are allowed; the costliest response is [0]"]),
    KindCase("metric", "score of 10**400", _metric_edit(TOO_LARGE),
             ["[0].score: is too large to be a number, got " + "1" + "0" * 56 + "..."]),
    KindCase("metric", "score of 5,001 digits", _metric_edit(HUGE_INTEGER),
             ["[0].score: is too large to be a number, got <an integer of 5,001 digits>"]),
]
