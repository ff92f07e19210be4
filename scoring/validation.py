"""The validation toolkit every kind's formats share: one error type carrying every problem with
its JSON path, a bounded collector of problems, JSON parsing that names what is wrong, a scan
that bounds a file's work before it is parsed, and the id and text rules.

Framework-free (NumPy and orjson): the kinds' ``formats`` modules build on it, never on each
other.
"""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import orjson

MAX_ERRORS = 1000
MAX_TEXT_CHARS = 10_000

class ValidationFailed(ValueError):
    """A file failed validation; ``errors`` lists every problem as ``"<json path>: <problem>"``."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(f"{len(errors)} problem(s): " + "; ".join(errors[:5]))
        self.errors = errors


class Problems:
    """Collects problems up to MAX_ERRORS and counts the rest, so a hostile file cannot flood memory."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.dropped = 0

    def add(self, path: str, problem: str) -> None:
        if len(self.lines) < MAX_ERRORS:
            self.lines.append(f"{path}: {problem}" if path else problem)
        else:
            self.dropped += 1

    def __bool__(self) -> bool:
        return bool(self.lines)

    def raise_if_any(self) -> None:
        if self.lines:
            lines = list(self.lines)
            if self.dropped:
                lines.append(f"... and {self.dropped} more problem(s) not listed")
            raise ValidationFailed(lines)


class HugeInteger:
    """An integer literal of more digits than Python converts to an ``int`` (4,300 by default,
    ``sys.get_int_max_str_digits``): JSON allows any length, and converting one costs time that
    grows with the square of its length. ``parse_json`` leaves it as this, so that validation
    names where it is (``value is too large``) instead of the parser failing with a ValueError
    (an HTTP 500 on every upload path)."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"<an integer of {self.digits:,} digits>"


def _parse_int(text: str) -> int | HugeInteger:
    digits = len(text) - text.startswith("-")
    limit = sys.get_int_max_str_digits()
    return HugeInteger(digits) if limit and digits > limit else int(text)


def surrogate_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored or encoded, if it holds an unpaired surrogate (``"\\ud800"``
    in JSON: half of a UTF-16 pair, which no UTF-8 file can hold); None if it has none."""
    if text.isascii():
        return None
    for position, character in enumerate(text):
        if "\ud800" <= character <= "\udfff":
            return (f"contains an unpaired surrogate U+{ord(character):04X} at position {position} "
                    "(half of a UTF-16 pair: not a character)")
    return None


def quoted(value: object) -> str:
    """A value as it should appear in an error message: short, one line, no control characters."""
    try:
        text = json.dumps(value, ensure_ascii=True) if isinstance(value, str) else repr(value)
    except RecursionError:  # orjson accepts ~1,000 levels of nesting, more than repr() can show
        text = f"<a {type(value).__name__} nested too deeply to show>"
    return text if len(text) <= 60 else text[:57] + "..."


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector.

    A run or gold file is hundreds of thousands of small containers without cycles; while
    they are built, the collector would walk them again and again for nothing (it more
    than doubled parse and load times in measurements).
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def parse_json(data: bytes | str, what: str = "file") -> object:
    """Decode a UTF-8 JSON document, turning every failure into a ``ValidationFailed`` message.

    orjson parses valid files several times faster than the standard library; anything it
    refuses is parsed again by the standard library, which lets NaN, Infinity and 1e400
    through (so validation can name where they are). A key repeated inside one object keeps
    its last value, as in most JSON parsers (RFC 8259 leaves this to the parser).
    """
    if not data or data.isspace():
        raise ValidationFailed([f"{what} is empty"])
    if isinstance(data, bytes) and data.startswith(b"\xef\xbb\xbf"):
        raise ValidationFailed([f"{what} starts with a UTF-8 byte-order mark; save it as UTF-8 without BOM"])
    with gc_paused():
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        if isinstance(data, bytes):
            refuse_other_encoding(data, what)
            try:
                data = data.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValidationFailed([f"{what} is not valid UTF-8 (byte {error.start}: {error.reason})"]) from None
        try:
            return json.loads(data, parse_int=_parse_int)
        except json.JSONDecodeError as error:
            raise ValidationFailed(
                [f"{what} is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"]
            ) from None
        except RecursionError:
            raise ValidationFailed([f"{what} is nested too deeply to be a run or gold file"]) from None


# Bounding the work per upload ------------------------------------------------------------
# orjson builds a Python object for every JSON value before any check runs: 31 MB of ``{},``
# become ten million dicts (about 1 GB). ``check_run_shape`` reads the bytes first, with NumPy
# in 1 MiB chunks, and refuses a file whose *structure* cannot be a run of this gold before
# anything is built: more entries than the gold has dialogues, nesting deeper than any run,
# or more containers and values than a run of this gold needs several times over. It counts
# brackets and commas outside strings (escapes included) and does not check the grammar,
# so a file with NaN, Infinity or a syntax error still reaches the parser, which names the
# problem; whatever the parser builds before it stops is within the bounds checked here.
# Why not a streaming parser (ijson with its yajl2 C backend installs here): yajl stops at NaN
# or Infinity, which the validators must find and name, leaving the rest of such a file
# unchecked before the standard library's parser builds it; and it hands Python one event per
# token (about 600,000 for a valid 4,000-dialogue run), where this scan takes 0.02 s for that
# run and 0.03-0.3 s for 32 MB (benchmarks/upload_memory.py).

MAX_DEPTH = 32  # a run needs 4 levels (list, dialogue, quality, dimension); keys not read may add some
EXTRA_ENTRIES = 100  # past the gold's count, so that a few duplicates or strays are still named one by one
VALUE_ALLOWANCE = 4  # a run may carry keys the scorer does not read (the test data's turns, say)
# What the parser allocates, at most, per object or list (an empty dict and its slot in a list)
# and per other value (a float or an int and its slot); a file may cost this many times its size.
# (a string value costs STRING_EXTRA more; keys cost little, the parser keeps one copy of each).
CONTAINER_BYTES, VALUE_BYTES, STRING_EXTRA = 88, 32, 28
MEMORY_FACTOR = 8
_SCAN_CHUNK = 1 << 16  # the scan's temporary arrays take about 50 bytes per byte of a chunk
_STRUCTURE = np.zeros(256, dtype=np.int8)
_STRUCTURE[[ord("["), ord("{")]] = 1
_STRUCTURE[[ord("]"), ord("}")]] = -1
_IS_SEPARATOR = np.zeros(256, dtype=bool)
_IS_SEPARATOR[[ord("["), ord("{"), ord("]"), ord("}"), ord(","), ord(":")]] = True


def _where(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"line {line} column {column}"


def _structure(data: bytes) -> Iterator[tuple[int, np.ndarray, np.ndarray, int]]:
    """The bytes as the scan sees them, ``_SCAN_CHUNK`` at a time: per chunk, its offset, the
    offsets in it of the separators ``[ { ] } , :`` outside strings (escapes included), their
    bytes, and how many real (unescaped) quotes it holds. ``check_shape`` and
    ``list_entry_bounds`` read the same view."""
    view = np.frombuffer(data, dtype=np.uint8)
    in_string = False
    backslashes = 0  # backslashes just before the chunk (an odd count escapes its first byte)
    for chunk_start in range(0, view.size, _SCAN_CHUNK):
        chunk = view[chunk_start:chunk_start + _SCAN_CHUNK]
        quotes = np.flatnonzero(chunk == 34)  # '"'
        is_backslash = chunk == 92
        if quotes.size and (backslashes or is_backslash.any()):
            # A quote is escaped when an odd number of backslashes precede it.
            last_other = np.where(is_backslash, -1, np.arange(chunk.size, dtype=np.int32))
            np.maximum.accumulate(last_other, out=last_other)
            before = quotes - 1
            run = np.where(before >= 0, before - last_other[np.maximum(before, 0)], 0)
            run = np.where((before < 0) | (last_other[np.maximum(before, 0)] < 0), run + backslashes, run)
            quotes = quotes[run % 2 == 0]
        if is_backslash[-1]:
            trailing = chunk.size - 1 - int(np.flatnonzero(~is_backslash)[-1]) if (~is_backslash).any() else chunk.size
            backslashes = trailing + (backslashes if trailing == chunk.size else 0)
        else:
            backslashes = 0
        separators = np.flatnonzero(_IS_SEPARATOR[chunk])
        if separators.size:
            # A separator is inside a string when an odd number of real quotes precede it.
            inside = (np.searchsorted(quotes, separators) + in_string) % 2 == 1
            separators = separators[~inside]
        in_string = bool((quotes.size + in_string) % 2)
        yield chunk_start, separators, chunk[separators], int(quotes.size)


def check_shape(data: bytes, entry_limit: int, budget: int, what: str = "file", max_depth: int = MAX_DEPTH,
                gold_dialogues: int | None = None) -> None:
    """The scan behind ``check_run_shape``, with its bounds given: at most ``entry_limit`` entries
    in a top-level list, ``budget`` containers and commas (``[``, ``{``, ``,`` outside strings)
    and ``max_depth`` levels of nesting."""
    gold_dialogues = entry_limit if gold_dialogues is None else gold_dialogues
    size = len(data)
    start = len(data) - len(data.lstrip())
    top_is_list = data[start:start + 1] == b"["
    depth = 0
    entries = 0  # commas directly inside the top-level list
    values = 0
    opens = 0  # objects and lists, the costliest values to build
    quote_count = colons = 0
    for chunk_start, separators, kinds, quotes in _structure(data):
        quote_count += quotes
        if not separators.size:
            continue
        is_colon = kinds == 58  # ':' ends a key: its string is a key, not a value
        colons += int(np.count_nonzero(is_colon))
        separators = separators[~is_colon]
        if not separators.size:
            continue
        steps = _STRUCTURE[kinds[~is_colon]].astype(np.int32)
        depths = depth + np.cumsum(steps)
        deep = np.flatnonzero(depths > max_depth)
        if deep.size:
            where = _where(data, chunk_start + int(separators[deep[0]]))
            raise ValidationFailed([f"{what} is nested too deeply to be a run: more than {max_depth} levels at "
                                    f"{where} (a run needs 4)"])
        if depths.min() < 0:
            return  # more closing than opening brackets: not JSON, and the parser stops there
        if top_is_list:
            top_commas = np.flatnonzero((steps == 0) & (depths == 1))
            # The k-th comma of the top-level list starts entry [k].
            if entries + top_commas.size >= entry_limit > 0:
                first_over = top_commas[entry_limit - entries - 1]
                where = _where(data, chunk_start + int(separators[first_over]) + 1)
                raise ValidationFailed([f"$: the run has more than {entry_limit} entries (entry [{entry_limit}] "
                                        f"starts at {where}) but the gold has {gold_dialogues} dialogues; "
                                        "nothing after it was read"])
            entries += int(top_commas.size)
        counted = np.flatnonzero(steps >= 0)
        opens += int(np.count_nonzero(steps > 0))
        string_values = max(0, quote_count // 2 - colons)
        if (opens * CONTAINER_BYTES + (values + counted.size - opens) * VALUE_BYTES + string_values * STRING_EXTRA
                > MEMORY_FACTOR * size + (1 << 20)):
            where = _where(data, chunk_start + int(separators[-1]))
            raise ValidationFailed([f"{what} has too many objects, lists and values for its size (about {opens} "
                                    f"objects and lists and {values + counted.size - opens} values before "
                                    f"{where}, in {size} bytes): parsing it would take more than "
                                    f"{MEMORY_FACTOR} times its size in memory; a run's objects hold numbers"])
        if values + counted.size > budget:
            where = _where(data, chunk_start + int(separators[counted[budget - values]]))
            needed = max(1, (budget - 10_000) // VALUE_ALLOWANCE)
            raise ValidationFailed([f"{what} holds more than {budget} objects, lists and values (at {where}); a "
                                    f"run of this task's {gold_dialogues} dialogues needs about {needed}: keep "
                                    "only the keys the scorer reads (id, quality, nugget)"])
        values += int(counted.size)
        depth = int(depths[-1])


# Reading a large list a piece at a time ------------------------------------------------------
# A run of many small entries costs far more as Python objects than as bytes: 200,000 metric
# scores of 35 bytes each became 270 bytes each as a list of dicts (11x the file, issue 28).
# ``list_entry_bounds`` finds the entries with the scan above, and ``list_entries`` parses
# them with orjson a piece at a time, so that a validator can keep only what it needs (a score
# per response) while the list goes by. Splitting a valid list at its top-level commas gives
# exactly the entries parsing it whole gives; a piece that does not parse on its own means the
# file is not valid JSON (or has NaN or 1e400), and the caller then parses the whole file with
# ``parse_json``, which names the problem as it always did.
JSON_WHITESPACE = b" \t\r\n"
LIST_PIECE_BYTES = 1 << 16  # about 2,000 metric entries: 0.5 MB as dicts


class UnsplitList(Exception):
    """A piece of a list did not parse on its own: parse the whole document instead."""


def list_entry_bounds(data: bytes, max_depth: int = MAX_DEPTH) -> np.ndarray | None:
    """Where the entries of a top-level JSON list are, without parsing it: the offsets of its
    opening bracket, of the commas between its entries and of its closing bracket, so that entry
    k is ``data[bounds[k] + 1:bounds[k + 1]]`` (an empty list gives two bounds and one blank
    entry: see ``list_entries``). None unless the bytes are JSON whitespace, ``[``, balanced
    brackets nested at most ``max_depth`` levels, ``]`` and JSON whitespace: the caller then
    parses the whole document. The grammar inside the entries is the parser's to check."""
    start = len(data) - len(data.lstrip(JSON_WHITESPACE))
    if data[start:start + 1] != b"[":
        return None
    depth = 0
    commas: list[np.ndarray] = []
    end = None
    for chunk_start, separators, kinds, _ in _structure(data):
        structural = kinds != 58  # ':' changes no depth
        separators, kinds = separators[structural], kinds[structural]
        if not separators.size:
            continue
        steps = _STRUCTURE[kinds].astype(np.int32)
        depths = depth + np.cumsum(steps)
        if depths.max() > max_depth:
            return None
        closed = np.flatnonzero(depths <= 0)
        last = int(closed[0]) if closed.size else separators.size
        top = np.flatnonzero((steps[:last] == 0) & (depths[:last] == 1))
        commas.append(chunk_start + separators[top].astype(np.int64))
        if closed.size:
            end = chunk_start + int(separators[last])
            break
        depth = int(depths[-1])
    # A list closed by "}" is not JSON; nor is anything but whitespace after it.
    if end is None or data[end:end + 1] != b"]" or data[end + 1:].strip(JSON_WHITESPACE):
        return None
    return np.concatenate([[start], *commas, [end]]).astype(np.int64)


def list_entries(data: bytes, bounds: np.ndarray, piece_bytes: int | None = None) -> Iterator[object]:
    """The entries ``bounds`` (from ``list_entry_bounds``) delimit, parsed by orjson about
    ``piece_bytes`` (default ``LIST_PIECE_BYTES``) of the file at a time, each piece dropped once
    its entries are handed on. ``UnsplitList`` when a piece is not valid JSON on its own: parse
    the whole file instead, which then fails and says why."""
    piece_bytes = piece_bytes or LIST_PIECE_BYTES
    count = list_length(data, bounds)
    first = 0
    while first < count:
        # The entries that start within piece_bytes of this one (at least one).
        stop = int(np.searchsorted(bounds, bounds[first] + piece_bytes, side="right")) - 1
        stop = min(count, max(first + 1, stop))
        try:
            parsed = orjson.loads(b"[" + data[bounds[first] + 1:bounds[stop]] + b"]")
        except orjson.JSONDecodeError:
            raise UnsplitList from None
        if len(parsed) != stop - first:  # a blank entry alone in its piece ("[1,,2]") parses as none
            raise UnsplitList
        yield from parsed
        first = stop


def list_length(data: bytes, bounds: np.ndarray) -> int:
    """How many entries the list ``bounds`` delimit has (0 for ``[]``)."""
    if len(bounds) == 2 and not data[bounds[0] + 1:bounds[1]].strip(JSON_WHITESPACE):
        return 0
    return len(bounds) - 1


_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32, little-endian, with a byte-order mark"),
         (b"\x00\x00\xfe\xff", "UTF-32, big-endian, with a byte-order mark"),
         (b"\xff\xfe", "UTF-16, little-endian, with a byte-order mark"),
         (b"\xfe\xff", "UTF-16, big-endian, with a byte-order mark"))


def _other_encoding(data: bytes) -> str | None:
    """The encoding a file that is not UTF-8 JSON seems to be in, from its byte-order mark or,
    without one, from where its first characters' zero bytes are (JSON starts with ASCII, which
    UTF-16 and UTF-32 write with zero bytes beside it; RFC 4627, section 3)."""
    for mark, name in _BOMS:
        if data.startswith(mark):
            return name
    head = data[:4]
    if len(head) < 2 or b"\x00" not in head:
        return None
    if len(head) == 4 and head[:3] == b"\x00\x00\x00":
        return "UTF-32, big-endian, without a byte-order mark"
    if len(head) == 4 and head[1:] == b"\x00\x00\x00":
        return "UTF-32, little-endian, without a byte-order mark"
    if head[0] == 0 and head[1] != 0:
        return "UTF-16, big-endian, without a byte-order mark"
    if head[0] != 0 and head[1] == 0:
        return "UTF-16, little-endian, without a byte-order mark"
    return None


def refuse_other_encoding(data: bytes, what: str) -> None:
    encoding = _other_encoding(data)
    if encoding:
        raise ValidationFailed([f"{what} is not UTF-8 (looks like {encoding}); save it as UTF-8 without a "
                                "byte-order mark"])


# An integer id is read as its decimal string; longer ones are not ids but mistakes.
_MAX_ID_DIGITS = 40


def canonical_id(value: object) -> str | None:
    """A dialogue id as the string it is compared by, or None if it cannot be an id.

    STC-3 files write ids as strings (``"3718912216646049"``); an integer written without quotes
    (``3718912216646049``) means the same dialogue and is read as its decimal string, so a gold
    and a run match whichever way each writes them. Floats, booleans, empty strings and
    anything else are not ids.
    """
    if type(value) is str:
        return value or None
    if type(value) is int and -(10**_MAX_ID_DIGITS) < value < 10**_MAX_ID_DIGITS:
        return str(value)
    return None


def check_text(value: object, path: str, problems: Problems, limit: int = MAX_TEXT_CHARS) -> str | None:
    """A non-empty string without NUL (PostgreSQL cannot store one), at most ``limit`` characters;
    or None after recording why not. The text rule of every kind that reads texts."""
    if not isinstance(value, str):
        problems.add(path, f"must be a string, not {quoted(value)}")
        return None
    if not value.strip():
        problems.add(path, "must not be empty")
        return None
    if "\x00" in value:
        problems.add(path, "must not contain NUL characters")
        return None
    surrogate = surrogate_problem(value)
    if surrogate:  # accepted, it failed at scoring with UnicodeEncodeError, and again at every re-score
        problems.add(path, surrogate)
        return None
    if len(value) > limit:
        problems.add(path, f"is {len(value)} characters long; at most {limit} are allowed")
        return None
    return value
