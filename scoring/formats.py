"""Reading and validating STC-3 gold files and runs into arrays ready for vectorised scoring.

Validation reports *every* problem with its JSON path (``[12].nugget[3]: ...``), up to
``MAX_ERRORS`` lines, and raises ``ValidationFailed`` carrying them all. Nothing is scored
from a file with any error.

Rules (also in the README):
- a run or gold file is a JSON list of objects, UTF-8 without a byte-order mark;
- dialogue ids are non-empty strings or integers (an integer is read as its decimal string, so
  ``17`` and ``"17"`` are the same dialogue), unique; a run's ids must all be in the gold, and a
  run must cover every gold dialogue unless ``allow_missing`` is given; keys other than those
  read (``id``, ``turns``, ``annotations``, ``quality``, ``nugget``, ``sender``) are ignored;
- run values are finite numbers >= 0 (not NaN, Infinity, strings, booleans or null); a label
  left out counts as 0; each distribution is normalised by its sum, so probabilities and
  annotator counts both work, but an all-zero distribution is an error;
- a distribution whose values are not whole numbers (so not counts) and whose sum is further
  than ``SUM_TOLERANCE`` from 1 (so not probabilities) is scored after normalisation but
  reported as a warning, because it usually means a bug in the participant's export;
- a gold annotates the subtasks that any of its annotations labels, and every annotation must
  label all of them;
- gold annotators may differ in number between dialogues (each dialogue is normalised on its
  own), and the gold then carries a warning saying how the counts vary.
"""

from __future__ import annotations

import gc
import io
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter

import numpy as np
import orjson

from scoring.config import TaskConfig

MAX_ERRORS = 1000
SUM_TOLERANCE = 0.01
CUSTOMER, HELPDESK = "customer", "helpdesk"
_NUMBER_TYPES = (int, float)


class ValidationFailed(ValueError):
    """A file failed validation; ``errors`` lists every problem as ``"<json path>: <problem>"``."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(f"{len(errors)} problem(s): " + "; ".join(errors[:5]))
        self.errors = errors


class _Problems:
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


def _label(value: object) -> str:
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
            _refuse_other_encoding(data, what)
            try:
                data = data.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValidationFailed([f"{what} is not valid UTF-8 (byte {error.start}: {error.reason})"]) from None
        try:
            return json.loads(data)
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


def run_value_budget(gold: Gold) -> int:
    """How many containers and separators (``[``, ``{``, ``,``) a run of this gold may hold.

    A run needs about ``8 + dims * (scale + 1)`` per dialogue and ``labels + 2`` per turn;
    ``VALUE_ALLOWANCE`` times that leaves room for keys the scorer ignores.
    """
    config = gold.config
    labels = max(len(config.customer_nugget_types), len(config.helpdesk_nugget_types))
    needed = (gold.n_dialogues * (8 + len(config.quality_dimensions) * (len(config.quality_scale) + 1))
              + int(gold.turn_counts.sum()) * (labels + 2))
    return VALUE_ALLOWANCE * needed + 10_000


def _where(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"line {line} column {column}"


def check_run_shape(data: bytes, gold: Gold, what: str = "file") -> None:
    """Refuse, before it is parsed, a run file whose structure no run of ``gold`` can have.

    Raises ``ValidationFailed`` with one line saying which bound was passed and where; returns
    quietly otherwise (the parser and the validators then find every other problem). Time and
    memory are linear in the bytes read and stop at the first bound passed: the temporary
    arrays are those of one 1 MiB chunk.
    """
    _refuse_other_encoding(data, what)  # its brackets would be counted, but its problem is its encoding
    check_shape(data, gold.n_dialogues + EXTRA_ENTRIES, run_value_budget(gold), what,
                gold_dialogues=gold.n_dialogues)


def check_shape(data: bytes, entry_limit: int, budget: int, what: str = "file", max_depth: int = MAX_DEPTH,
                gold_dialogues: int | None = None) -> None:
    """The scan behind ``check_run_shape``, with its bounds given: at most ``entry_limit`` entries
    in a top-level list, ``budget`` containers and commas (``[``, ``{``, ``,`` outside strings)
    and ``max_depth`` levels of nesting."""
    gold_dialogues = entry_limit if gold_dialogues is None else gold_dialogues
    view = np.frombuffer(data, dtype=np.uint8)
    start = len(data) - len(data.lstrip())
    top_is_list = data[start:start + 1] == b"["
    in_string = False
    backslashes = 0  # backslashes just before the chunk (an odd count escapes its first byte)
    depth = 0
    entries = 0  # commas directly inside the top-level list
    values = 0
    opens = 0  # objects and lists, the costliest values to build
    quote_count = colons = 0
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
        quote_count += int(quotes.size)
        if not separators.size:
            continue
        kinds = chunk[separators]
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
                > MEMORY_FACTOR * view.size + (1 << 20)):
            where = _where(data, chunk_start + int(separators[-1]))
            raise ValidationFailed([f"{what} has too many objects, lists and values for its size (about {opens} "
                                    f"objects and lists and {values + counted.size - opens} values before "
                                    f"{where}, in {view.size} bytes): parsing it would take more than "
                                    f"{MEMORY_FACTOR} times its size in memory; a run's objects hold numbers"])
        if values + counted.size > budget:
            where = _where(data, chunk_start + int(separators[counted[budget - values]]))
            needed = max(1, (budget - 10_000) // VALUE_ALLOWANCE)
            raise ValidationFailed([f"{what} holds more than {budget} objects, lists and values (at {where}); a "
                                    f"run of this task's {gold_dialogues} dialogues needs about {needed}: keep "
                                    "only the keys the scorer reads (id, quality, nugget)"])
        values += int(counted.size)
        depth = int(depths[-1])


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


def _refuse_other_encoding(data: bytes, what: str) -> None:
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


def _entries(data: object, problems: _Problems) -> list[tuple[int, str, dict]]:
    """Top-level checks shared by gold and runs: a list of objects with unique ids.

    Returns ``(position in the file, canonical id, entry)`` for every usable entry.
    """
    if not isinstance(data, list):
        kind = "an object" if isinstance(data, dict) else type(data).__name__
        problems.add("$", f"expected a JSON list of dialogues, got {kind}")
        return []
    if not data:
        problems.add("$", "the list of dialogues is empty")
    entries = []
    first_seen: dict[str, int] = {}
    for position, entry in enumerate(data):
        if not isinstance(entry, dict):
            problems.add(f"[{position}]", f"expected an object, got {type(entry).__name__}")
            continue
        raw_id = entry.get("id")
        dialogue_id = canonical_id(raw_id)
        if dialogue_id is None:
            problems.add(f"[{position}].id", "missing or not a non-empty string or integer" if raw_id is None
                         else f"must be a non-empty string or an integer, got {_label(raw_id)}")
            continue
        if dialogue_id in first_seen:
            problems.add(f"[{position}].id", f"duplicate dialogue id {_label(dialogue_id)} "
                                             f"(first at [{first_seen[dialogue_id]}])")
            continue
        first_seen[dialogue_id] = position
        entries.append((position, dialogue_id, entry))
    return entries


def _fast_ids(data: list) -> list[str] | None:
    """Every entry's canonical id, or None if any is unusable (the careful validator then words it)."""
    ids = list(map(itemgetter("id"), data))
    kinds = set(map(type, ids))
    if kinds != {str}:
        if not kinds <= {str, int}:
            return None
        ids = list(map(canonical_id, ids))
        if None in ids:
            return None
    return ids


@dataclass
class Gold:
    """Gold annotations as label-count arrays, one row per dialogue or per turn.

    Turns are stored per side: ``customer_counts[t]`` is the annotators' label counts for the
    t-th customer turn of the whole file, ``customer_dialogue[t]`` the index of its dialogue.
    """

    config: TaskConfig
    dialogue_ids: list[str]
    annotators: np.ndarray
    turn_counts: np.ndarray
    turn_is_customer: np.ndarray
    quality_counts: dict[str, np.ndarray] | None
    customer_dialogue: np.ndarray
    customer_counts: np.ndarray | None
    helpdesk_dialogue: np.ndarray
    helpdesk_counts: np.ndarray | None
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.index = {dialogue_id: position for position, dialogue_id in enumerate(self.dialogue_ids)}

    @property
    def turn_dialogue(self) -> np.ndarray:
        """The dialogue index of every turn, in file order."""
        return np.repeat(np.arange(self.n_dialogues), self.turn_counts)

    def side_turn_numbers(self, side: str) -> np.ndarray:
        """For each turn of one side, its position among all turns of its dialogue."""
        offsets = np.concatenate(([0], np.cumsum(self.turn_counts)[:-1]))
        is_side = self.turn_is_customer if side == CUSTOMER else ~self.turn_is_customer
        return np.flatnonzero(is_side) - offsets[self.turn_dialogue[is_side]]

    @property
    def n_dialogues(self) -> int:
        return len(self.dialogue_ids)

    @property
    def has_quality(self) -> bool:
        return self.quality_counts is not None

    @property
    def has_nugget(self) -> bool:
        return self.customer_counts is not None

    def subset(self, dialogue_index: np.ndarray) -> Gold:
        """The gold restricted to some dialogues (indices in ascending order), turns kept in order."""
        dialogue_index = np.asarray(dialogue_index, dtype=np.int64)
        if dialogue_index.size and np.any(np.diff(dialogue_index) <= 0):
            raise ValueError("dialogue_index must be strictly increasing")
        renumber = np.full(self.n_dialogues, -1, dtype=np.int64)
        renumber[dialogue_index] = np.arange(dialogue_index.size)
        keep_customer = renumber[self.customer_dialogue] >= 0
        keep_helpdesk = renumber[self.helpdesk_dialogue] >= 0
        keep_turn = renumber[self.turn_dialogue] >= 0
        return Gold(
            config=self.config,
            dialogue_ids=[self.dialogue_ids[i] for i in dialogue_index],
            annotators=self.annotators[dialogue_index],
            turn_counts=self.turn_counts[dialogue_index],
            turn_is_customer=self.turn_is_customer[keep_turn],
            quality_counts=None if self.quality_counts is None
            else {dim: counts[dialogue_index] for dim, counts in self.quality_counts.items()},
            customer_dialogue=renumber[self.customer_dialogue[keep_customer]],
            customer_counts=None if self.customer_counts is None else self.customer_counts[keep_customer],
            helpdesk_dialogue=renumber[self.helpdesk_dialogue[keep_helpdesk]],
            helpdesk_counts=None if self.helpdesk_counts is None else self.helpdesk_counts[keep_helpdesk],
            warnings=list(self.warnings),
        )

    def to_bytes(self) -> bytes:
        """A compact binary form (NumPy .npz) for storing in a database column."""
        arrays: dict[str, np.ndarray] = {
            "config": np.array(json.dumps(self.config.to_dict())),
            "warnings": np.array(json.dumps(self.warnings)),
            "dialogue_ids": np.array(self.dialogue_ids, dtype=np.str_),
            "annotators": self.annotators,
            "turn_counts": self.turn_counts,
            "turn_is_customer": self.turn_is_customer,
            "customer_dialogue": self.customer_dialogue,
            "helpdesk_dialogue": self.helpdesk_dialogue,
        }
        if self.quality_counts is not None:
            for dim_index, dim in enumerate(self.config.quality_dimensions):
                arrays[f"quality_{dim_index}"] = self.quality_counts[dim]
        if self.customer_counts is not None:
            arrays["customer_counts"] = self.customer_counts
            arrays["helpdesk_counts"] = self.helpdesk_counts
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Gold:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            config = TaskConfig.from_dict(json.loads(str(arrays["config"])))
            quality = None
            if "quality_0" in arrays:
                quality = {dim: arrays[f"quality_{i}"] for i, dim in enumerate(config.quality_dimensions)}
            return cls(
                config=config,
                dialogue_ids=[str(x) for x in arrays["dialogue_ids"]],
                annotators=arrays["annotators"],
                turn_counts=arrays["turn_counts"],
                turn_is_customer=arrays["turn_is_customer"],
                quality_counts=quality,
                customer_dialogue=arrays["customer_dialogue"],
                customer_counts=arrays["customer_counts"] if "customer_counts" in arrays else None,
                helpdesk_dialogue=arrays["helpdesk_dialogue"],
                helpdesk_counts=arrays["helpdesk_counts"] if "helpdesk_counts" in arrays else None,
                warnings=json.loads(str(arrays["warnings"])),
            )


def _scale_lookup(scale: Iterable[str]) -> dict[object, int]:
    """Map each scale label to its bin; gold files write ``2`` or ``"2"``, so accept both."""
    lookup: dict[object, int] = {}
    for position, label in enumerate(scale):
        lookup[label] = position
        try:
            lookup[int(label)] = position
        except ValueError:
            pass
    return lookup


def load_gold(data: object, config: TaskConfig) -> Gold:
    """Validate a parsed gold file and count the annotators' labels; raise ``ValidationFailed``."""
    with gc_paused():
        fast = _load_gold_fast(data, config)
    return fast if fast is not None else _load_gold_checked(data, config)


def _load_gold_checked(data: object, config: TaskConfig) -> Gold:
    """The label-by-label validator: slower, but it finds and words every problem."""
    problems = _Problems()
    entries = _entries(data, problems)
    dims = config.quality_dimensions
    scale_index = _scale_lookup(config.quality_scale)
    side_types = {CUSTOMER: config.customer_nugget_types, HELPDESK: config.helpdesk_nugget_types}
    side_index = {side: {label: i for i, label in enumerate(types)} for side, types in side_types.items()}
    n_scale = len(config.quality_scale)

    # First pass: which subtasks does this gold annotate? Those that any annotation labels; every
    # annotation must then label them all (as for runs, where one dialogue's subtask binds all).
    annotation_objects = [annotation for _, _, entry in entries if isinstance(entry.get("annotations"), list)
                          for annotation in entry["annotations"] if isinstance(annotation, dict)]
    if annotation_objects:
        has_quality = any(annotation.get("quality") is not None for annotation in annotation_objects)
        has_nugget = any(annotation.get("nugget") is not None for annotation in annotation_objects)
        if not (has_quality or has_nugget):
            problems.add("$", "no annotation has 'quality' or 'nugget': nothing to score against")
    else:
        has_quality = has_nugget = True  # nothing to go by: the missing annotations are reported below

    ids: list[str] = []
    annotator_counts: list[int] = []
    turn_counts: list[int] = []
    turn_is_customer: list[bool] = []
    quality_flat: dict[str, list[int]] = {dim: [] for dim in dims}
    side_flat: dict[str, list[int]] = {CUSTOMER: [], HELPDESK: []}
    side_dialogue: dict[str, list[int]] = {CUSTOMER: [], HELPDESK: []}
    side_turns_so_far = {CUSTOMER: 0, HELPDESK: 0}

    for position, dialogue_id, entry in entries:
        path = f"[{position}]"
        start_problems = len(problems.lines) + problems.dropped
        turns = entry.get("turns")
        senders: list[str] = []
        if not isinstance(turns, list) or not turns:
            problems.add(f"{path}.turns", "missing or not a non-empty list of turns")
        else:
            for turn_no, turn in enumerate(turns):
                sender = turn.get("sender") if isinstance(turn, dict) else None
                if not isinstance(sender, str) or sender not in side_index:
                    problems.add(f"{path}.turns[{turn_no}].sender",
                                 f"expected 'customer' or 'helpdesk', got {_label(sender)}")
                senders.append(sender if isinstance(sender, str) else None)  # a list or dict is unhashable
        annotations = entry.get("annotations")
        if not isinstance(annotations, list) or not annotations:
            problems.add(f"{path}.annotations", "missing or not a non-empty list of annotations")
            continue
        dialogue_quality: dict[str, list[int]] = {dim: [] for dim in dims}
        dialogue_turn_labels: list[list[int]] = [[] for _ in senders]
        for ann_no, annotation in enumerate(annotations):
            ann_path = f"{path}.annotations[{ann_no}]"
            if not isinstance(annotation, dict):
                problems.add(ann_path, f"expected an object, got {type(annotation).__name__}")
                continue
            if has_quality:
                quality = annotation.get("quality")
                if not isinstance(quality, dict):
                    problems.add(f"{ann_path}.quality", "missing or not an object")
                else:
                    for dim in quality.keys() - set(dims):
                        problems.add(f"{ann_path}.quality", f"unknown dimension {_label(dim)} "
                                                            f"(allowed: {', '.join(dims)})")
                    for dim in dims:
                        value = quality.get(dim)
                        bin_no = (scale_index.get(value) if isinstance(value, str | int | float)
                                  and not isinstance(value, bool) else None)
                        if bin_no is None:
                            problems.add(f"{ann_path}.quality.{dim}",
                                         "missing" if value is None else f"unknown scale label {_label(value)} "
                                         f"(allowed: {', '.join(config.quality_scale)})")
                        else:
                            dialogue_quality[dim].append(bin_no)
            if has_nugget:
                nugget = annotation.get("nugget")
                if not isinstance(nugget, list):
                    problems.add(f"{ann_path}.nugget", "missing or not a list")
                elif len(nugget) != len(senders):
                    problems.add(f"{ann_path}.nugget", f"has {len(nugget)} labels but the dialogue has "
                                                       f"{len(senders)} turns")
                else:
                    for turn_no, (label, sender) in enumerate(zip(nugget, senders, strict=True)):
                        lookup = side_index.get(sender)
                        if lookup is None:
                            continue  # the bad sender is reported already
                        bin_no = lookup.get(label) if isinstance(label, str) else None
                        if bin_no is None:
                            problems.add(f"{ann_path}.nugget[{turn_no}]",
                                         _nugget_label_problem(label, sender, side_index))
                        else:
                            dialogue_turn_labels[turn_no].append(bin_no)
        if len(problems.lines) + problems.dropped > start_problems:
            continue
        dialogue_no = len(ids)
        ids.append(dialogue_id)
        annotator_counts.append(len(annotations))
        turn_counts.append(len(senders))
        turn_is_customer.extend(sender == CUSTOMER for sender in senders)
        for dim in dims if has_quality else ():
            quality_flat[dim].extend(dialogue_no * n_scale + b for b in dialogue_quality[dim])
        # Turns are recorded even in a gold without nugget labels (labels is then empty), as the
        # fast path does: customer_dialogue / helpdesk_dialogue describe the turns, not the labels.
        for sender, labels in zip(senders, dialogue_turn_labels, strict=True):
            width = len(side_types[sender])
            row = side_turns_so_far[sender]
            side_flat[sender].extend(row * width + b for b in labels)
            side_dialogue[sender].append(dialogue_no)
            side_turns_so_far[sender] += 1
    problems.raise_if_any()

    n = len(ids)
    quality_counts = None
    if has_quality:
        quality_counts = {
            dim: np.bincount(np.asarray(quality_flat[dim], dtype=np.int64), minlength=n * n_scale)
            .reshape(n, n_scale).astype(np.float64)
            for dim in dims
        }
    side_counts: dict[str, np.ndarray | None] = {CUSTOMER: None, HELPDESK: None}
    if has_nugget:
        for sender, types in side_types.items():
            rows = side_turns_so_far[sender]
            side_counts[sender] = (
                np.bincount(np.asarray(side_flat[sender], dtype=np.int64), minlength=rows * len(types))
                .reshape(rows, len(types)).astype(np.float64)
            )
    annotators = np.asarray(annotator_counts, dtype=np.int64)
    warnings = _annotator_warnings(annotators)
    return Gold(
        config=config,
        dialogue_ids=ids,
        annotators=annotators,
        turn_counts=np.asarray(turn_counts, dtype=np.int64),
        turn_is_customer=np.asarray(turn_is_customer, dtype=bool),
        quality_counts=quality_counts,
        customer_dialogue=np.asarray(side_dialogue[CUSTOMER], dtype=np.int64),
        customer_counts=side_counts[CUSTOMER],
        helpdesk_dialogue=np.asarray(side_dialogue[HELPDESK], dtype=np.int64),
        helpdesk_counts=side_counts[HELPDESK],
        warnings=warnings,
    )


def _nugget_label_problem(label: object, sender: str, side_index: dict[str, dict[str, int]]) -> str:
    allowed = ", ".join(side_index[sender])
    other = HELPDESK if sender == CUSTOMER else CUSTOMER
    if isinstance(label, str) and label in side_index[other]:
        return f"label {_label(label)} is not allowed on a {sender} turn (allowed: {allowed})"
    return f"unknown nugget type {_label(label)} (allowed on a {sender} turn: {allowed})"


@dataclass
class Run:
    """A validated run, aligned with the gold.

    ``dialogue_index`` lists the gold dialogues the run covers, ascending. ``quality[dim]`` has
    one row per covered dialogue; ``customer``/``helpdesk`` one row per turn of the covered
    dialogues, in the gold's order. Rows are the run's raw values (normalised when scored).
    """

    dialogue_index: np.ndarray
    quality: dict[str, np.ndarray] | None
    customer: np.ndarray | None
    helpdesk: np.ndarray | None
    n_missing: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def has_quality(self) -> bool:
        return self.quality is not None

    @property
    def has_nugget(self) -> bool:
        return self.customer is not None


def _distribution(
    values: object, path: str, labels: tuple[str, ...], lookup: dict[str, int], row: np.ndarray,
    problems: _Problems, label_problem=None,
) -> None:
    """Copy one ``{label: number}`` object into ``row``, reporting unknown labels and bad values."""
    if not isinstance(values, dict):
        problems.add(path, f"expected an object of label: value, got {type(values).__name__}")
        return
    problems_before = len(problems.lines) + problems.dropped
    for label, value in values.items():
        column = lookup.get(label)
        if column is None:
            problems.add(path, label_problem(label) if label_problem else
                         f"unknown label {_label(label)} (allowed: {', '.join(labels)})")
            continue
        if type(value) not in _NUMBER_TYPES:
            kind = "a boolean" if isinstance(value, bool) else "null" if value is None else f"a {type(value).__name__}"
            problems.add(f'{path}["{label}"]', f"value {_label(value)} is {kind}, not a number")
            continue
        try:
            number = float(value)
        except OverflowError:
            problems.add(f'{path}["{label}"]', "value is too large to be a number")
            continue
        if not math.isfinite(number):
            problems.add(f'{path}["{label}"]', f"value {_label(value)} is not a finite number")
        elif number < 0:
            problems.add(f'{path}["{label}"]', f"value {_label(value)} is negative")
        else:
            row[column] = number
    # Checked here rather than only in _finish_run, which is not reached when any other problem
    # was found: every problem of the file must be reported at once.
    if len(problems.lines) + problems.dropped == problems_before and not row.any():
        problems.add(path, "all values are 0: a distribution needs a positive total")


def load_run(data: object, gold: Gold, allow_missing: bool = False) -> Run:
    """Validate a parsed run against the gold; raise ``ValidationFailed`` listing every problem."""
    with gc_paused():
        fast = _load_run_fast(data, gold, allow_missing)
    return fast if fast is not None else _load_run_checked(data, gold, allow_missing)


def _load_run_checked(data: object, gold: Gold, allow_missing: bool = False) -> Run:
    """The value-by-value validator: slower, but it finds and words every problem."""
    config = gold.config
    problems = _Problems()
    entries = _entries(data, problems)
    dims = config.quality_dimensions
    scale = config.quality_scale
    scale_lookup = {label: i for i, label in enumerate(scale)}
    side_types = {CUSTOMER: config.customer_nugget_types, HELPDESK: config.helpdesk_nugget_types}
    side_lookup = {side: {label: i for i, label in enumerate(types)} for side, types in side_types.items()}

    has_quality = any(entry.get("quality") is not None for _, _, entry in entries)
    has_nugget = any(entry.get("nugget") is not None for _, _, entry in entries)
    if entries and not (has_quality or has_nugget):
        problems.add("$", "no dialogue has 'quality' or 'nugget': nothing to score")
    if has_quality and not gold.has_quality:
        problems.add("$", "the run has 'quality' estimates but the gold has no quality annotations")
        has_quality = False
    if has_nugget and not gold.has_nugget:
        problems.add("$", "the run has 'nugget' estimates but the gold has no nugget annotations")
        has_nugget = False

    n = gold.n_dialogues
    quality = {dim: np.zeros((n, len(scale))) for dim in dims} if has_quality else None
    # Turn rows of the full gold; each dialogue's turns of one side are contiguous and in order.
    side_rows = {CUSTOMER: np.zeros((len(gold.customer_dialogue), len(side_types[CUSTOMER]))),
                 HELPDESK: np.zeros((len(gold.helpdesk_dialogue), len(side_types[HELPDESK])))}
    side_start = {CUSTOMER: np.searchsorted(gold.customer_dialogue, np.arange(n)),
                  HELPDESK: np.searchsorted(gold.helpdesk_dialogue, np.arange(n))}
    side_label_problem = {
        side: (lambda label, side=side: _nugget_label_problem(label, side, side_lookup)) for side in side_lookup
    }
    senders_of = _senders_by_dialogue(gold)
    covered = np.zeros(n, dtype=bool)
    position_of = np.full(n, -1, dtype=np.int64)

    for position, dialogue_id, entry in entries:
        path = f"[{position}]"
        dialogue_no = gold.index.get(dialogue_id)
        if dialogue_no is None:
            problems.add(f"{path}.id", f"dialogue {_label(dialogue_id)} is not in the gold data of this task")
            continue
        covered[dialogue_no] = True
        position_of[dialogue_no] = position
        if has_quality:
            estimate = entry.get("quality")
            if estimate is None:
                problems.add(path, "missing 'quality' (other dialogues of this run have it)")
            elif not isinstance(estimate, dict):
                problems.add(f"{path}.quality", f"expected an object of dimensions, got {type(estimate).__name__}")
            else:
                for dim in estimate.keys() - set(dims):
                    problems.add(f"{path}.quality", f"unknown dimension {_label(dim)} (allowed: {', '.join(dims)})")
                for dim in dims:
                    if dim not in estimate:
                        problems.add(f"{path}.quality", f"missing dimension {_label(dim)}")
                        continue
                    _distribution(estimate[dim], f"{path}.quality.{dim}", scale, scale_lookup,
                                  quality[dim][dialogue_no], problems)
        if has_nugget:
            estimate = entry.get("nugget")
            senders = senders_of[dialogue_no]
            if estimate is None:
                problems.add(path, "missing 'nugget' (other dialogues of this run have it)")
            elif not isinstance(estimate, list):
                problems.add(f"{path}.nugget", f"expected a list with one object per turn, got "
                                               f"{type(estimate).__name__}")
            elif len(estimate) != len(senders):
                problems.add(f"{path}.nugget", f"has {len(estimate)} entries but dialogue {_label(dialogue_id)} "
                                               f"has {len(senders)} turns")
            else:
                seen = {CUSTOMER: 0, HELPDESK: 0}
                for turn_no, (turn_estimate, sender) in enumerate(zip(estimate, senders, strict=True)):
                    row = side_rows[sender][side_start[sender][dialogue_no] + seen[sender]]
                    seen[sender] += 1
                    _distribution(turn_estimate, f"{path}.nugget[{turn_no}]", side_types[sender],
                                  side_lookup[sender], row, problems, side_label_problem[sender])

    return _finish_run(gold, quality, side_rows, covered, position_of, has_nugget, allow_missing, problems,
                       bool(entries))


def _finish_run(
    gold: Gold, quality: dict[str, np.ndarray] | None, side_rows: dict[str, np.ndarray], covered: np.ndarray,
    position_of: np.ndarray, has_nugget: bool, allow_missing: bool, problems: _Problems, any_entries: bool = True,
) -> Run:
    """Checks that need the whole run (coverage, sums), then the rows of the covered dialogues."""
    n = gold.n_dialogues
    dims = gold.config.quality_dimensions
    missing = np.flatnonzero(~covered)
    if missing.size and any_entries and not allow_missing:
        shown = ", ".join(_label(gold.dialogue_ids[i]) for i in missing[:10])
        more = f" and {missing.size - 10} more" if missing.size > 10 else ""
        problems.add("$", f"the run misses {missing.size} of the {n} gold dialogue(s): {shown}{more} "
                          "(official scoring needs every dialogue)")
    if any_entries and not covered.any():
        problems.add("$", "no dialogue of the run is in the gold data of this task")
    problems.raise_if_any()

    dialogue_index = np.flatnonzero(covered)
    keep = {CUSTOMER: covered[gold.customer_dialogue], HELPDESK: covered[gold.helpdesk_dialogue]}
    # Where each row came from in the file, so sum checks can name a JSON path.
    blocks: list[tuple[np.ndarray, Callable[[int], str]]] = []
    if quality is not None:
        for dim in dims:
            quality[dim] = quality[dim][dialogue_index]
            blocks.append((quality[dim],
                           lambda row, dim=dim: f"[{position_of[dialogue_index[row]]}].quality.{dim}"))
    if has_nugget:
        for side, dialogue_of_row in ((CUSTOMER, gold.customer_dialogue), (HELPDESK, gold.helpdesk_dialogue)):
            side_rows[side] = side_rows[side][keep[side]]
            turn_numbers = gold.side_turn_numbers(side)[keep[side]]
            rows_dialogue = dialogue_of_row[keep[side]]
            blocks.append((side_rows[side], lambda row, rows_dialogue=rows_dialogue, turn_numbers=turn_numbers:
                           f"[{position_of[rows_dialogue[row]]}].nugget[{turn_numbers[row]}]"))
    warnings = _check_sums(blocks, problems)
    problems.raise_if_any()
    if missing.size:
        warnings.insert(0, f"{missing.size} of the {n} gold dialogue(s) are missing from the run; "
                           f"scored on the {dialogue_index.size} it contains")
    return Run(
        dialogue_index=dialogue_index,
        quality=quality,
        customer=side_rows[CUSTOMER] if has_nugget else None,
        helpdesk=side_rows[HELPDESK] if has_nugget else None,
        n_missing=int(missing.size),
        warnings=warnings,
    )


def _senders_by_dialogue(gold: Gold) -> list[list[str]]:
    """Each dialogue's turn senders in order."""
    bounds = np.concatenate(([0], np.cumsum(gold.turn_counts))).tolist()
    labels = np.where(gold.turn_is_customer, CUSTOMER, HELPDESK).tolist()
    return [labels[bounds[d]:bounds[d + 1]] for d in range(gold.n_dialogues)]


def _check_sums(blocks: list[tuple[np.ndarray, Callable[[int], str]]], problems: _Problems) -> list[str]:
    """All-zero rows are errors; sums that are neither ~1 nor whole-number counts are warnings."""
    suspicious: list[str] = []
    n_suspicious = 0
    for rows, path_of in blocks:
        if not rows.size:
            continue
        with np.errstate(over="ignore"):  # two values of 1e308: the sum is infinite, the row is fine
            sums = rows.sum(axis=1)
        for row in np.flatnonzero(sums == 0):
            problems.add(path_of(row), "all values are 0: a distribution needs a positive total")
        counts = np.all(rows == np.floor(rows), axis=1)
        odd = np.flatnonzero(~counts & (np.abs(sums - 1.0) > SUM_TOLERANCE) & (sums > 0))
        n_suspicious += odd.size
        suspicious.extend(f"{path_of(row)} (sum {_sum_label(sums[row])})"
                          for row in odd[: max(0, 5 - len(suspicious))])
    if not n_suspicious:
        return []
    return [f"{n_suspicious} distribution(s) sum to neither 1 (probabilities) nor whole counts; they were "
            f"normalised by their sums, which may hide a mistake: " + ", ".join(suspicious)
            + (" ..." if n_suspicious > len(suspicious) else "")]


def _sum_label(total: float) -> str:
    """A row's sum for a message: an overflowed sum is said in words, never as ``inf``."""
    return f"{total:.6g}" if math.isfinite(total) else "over 1.8e308"


# Fast paths ---------------------------------------------------------------------------------
# Valid files are the common case, and going through them label by label in Python costs
# most of the scoring time. The fast paths below pull every label or value out with flat
# comprehensions and check them with NumPy; at the first sign of anything unusual they
# return None and the validators above run instead, which find and word every problem.
# tests/test_formats.py checks that both paths give identical arrays.

_FAST_PATH_MISS = (KeyError, TypeError, AttributeError, IndexError, ValueError, OverflowError)


def _load_gold_fast(data: object, config: TaskConfig) -> Gold | None:
    try:
        return _gold_fast(data, config)
    except _FAST_PATH_MISS:
        return None


def _gold_fast(data: object, config: TaskConfig) -> Gold | None:
    if not isinstance(data, list) or not data:
        return None
    customer_types, helpdesk_types = config.customer_nugget_types, config.helpdesk_nugget_types
    if set(customer_types) & set(helpdesk_types):
        return None
    ids = _fast_ids(data)
    if ids is None or "" in ids or len(set(ids)) != len(ids):
        return None
    senders = [[turn["sender"] for turn in entry["turns"]] for entry in data]
    annotations = list(map(itemgetter("annotations"), data))
    turn_counts = np.array([len(turns) for turns in senders], dtype=np.int64)
    annotators = np.array([len(labels) for labels in annotations], dtype=np.int64)
    flat_senders = list(chain.from_iterable(senders))
    if (type(data[0]["turns"]) is not list or type(annotations[0]) is not list or turn_counts.min() == 0
            or annotators.min() == 0 or not set(flat_senders) <= {CUSTOMER, HELPDESK}):
        return None
    if set(map(type, annotations)) != {list}:
        return None
    everyone = list(chain.from_iterable(annotations))
    if set(map(type, everyone)) != {dict}:
        return None
    has_quality = everyone[0].get("quality") is not None
    has_nugget = everyone[0].get("nugget") is not None
    if not (has_quality or has_nugget):
        return None
    n = len(ids)
    annotation_dialogue = np.repeat(np.arange(n), annotators)

    quality_counts = None
    if has_quality:
        dims, scale = config.quality_dimensions, config.quality_scale
        scale_index = _scale_lookup(scale)
        qualities = list(map(itemgetter("quality"), everyone))
        if set(map(type, qualities)) != {dict} or set(map(len, qualities)) != {len(dims)}:
            return None
        quality_counts = {}
        for dim in dims:
            values = list(map(itemgetter(dim), qualities))
            if bool in set(map(type, values)):
                return None  # True == 1 would otherwise pass for the label "1"
            found = list(map(scale_index.get, values))
            if None in found:
                return None
            codes = np.array(found, dtype=np.int64)
            quality_counts[dim] = (np.bincount(annotation_dialogue * len(scale) + codes, minlength=n * len(scale))
                                   .reshape(n, len(scale)).astype(np.float64))

    is_customer = np.array([sender == CUSTOMER for sender in flat_senders], dtype=bool)
    customer_counts = helpdesk_counts = None
    if has_nugget:
        nuggets = list(map(itemgetter("nugget"), everyone))
        if set(map(type, nuggets)) != {list}:
            return None
        lengths = np.array([len(labels) for labels in nuggets], dtype=np.int64)
        if not np.array_equal(lengths, turn_counts[annotation_dialogue]):
            return None
        combined = {label: i for i, label in enumerate(customer_types + helpdesk_types)}
        # A label that is not a string either is not found (None) or is unhashable (TypeError).
        flat_labels = list(chain.from_iterable(nuggets))
        found = list(map(combined.get, flat_labels))
        if None in found:
            return None
        codes = np.array(found, dtype=np.int64)
        # The gold turn each label belongs to: annotation k of dialogue d labels turns
        # turn_start[d] .. turn_start[d] + turns[d] - 1, in order.
        turn_start = np.concatenate(([0], np.cumsum(turn_counts)[:-1]))
        label_start = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        within = np.arange(codes.size) - np.repeat(label_start, lengths)
        label_turn = np.repeat(turn_start[annotation_dialogue], lengths) + within
        label_is_customer = codes < len(customer_types)
        if not np.array_equal(label_is_customer, is_customer[label_turn]):
            return None
        side_row = np.where(is_customer, np.cumsum(is_customer) - 1, np.cumsum(~is_customer) - 1)
        n_customer, n_helpdesk = int(is_customer.sum()), int((~is_customer).sum())
        customer_counts = (np.bincount(side_row[label_turn[label_is_customer]] * len(customer_types)
                                       + codes[label_is_customer], minlength=n_customer * len(customer_types))
                           .reshape(n_customer, len(customer_types)).astype(np.float64))
        helpdesk_codes = codes[~label_is_customer] - len(customer_types)
        helpdesk_counts = (np.bincount(side_row[label_turn[~label_is_customer]] * len(helpdesk_types)
                                       + helpdesk_codes, minlength=n_helpdesk * len(helpdesk_types))
                           .reshape(n_helpdesk, len(helpdesk_types)).astype(np.float64))
    elif any(annotation.get("nugget") is not None for annotation in everyone):
        return None
    if not has_quality and any(annotation.get("quality") is not None for annotation in everyone):
        return None

    turn_dialogue = np.repeat(np.arange(n), turn_counts)
    return Gold(
        config=config,
        dialogue_ids=ids,
        annotators=annotators,
        turn_counts=turn_counts,
        turn_is_customer=is_customer,
        quality_counts=quality_counts,
        customer_dialogue=turn_dialogue[is_customer],
        customer_counts=customer_counts,
        helpdesk_dialogue=turn_dialogue[~is_customer],
        helpdesk_counts=helpdesk_counts,
        warnings=_annotator_warnings(annotators),
    )


def _annotator_warnings(annotators: np.ndarray) -> list[str]:
    if not annotators.size or annotators.min() == annotators.max():
        return []
    spread = Counter(annotators.tolist()).most_common()
    return ["annotator counts differ between dialogues ("
            + ", ".join(f"{count} annotators in {dialogues} dialogue(s)" for count, dialogues in spread)
            + "); each dialogue's labels are normalised by its own count"]


def _values_fast(distributions: list, labels: tuple[str, ...]) -> np.ndarray | None:
    """Rows of ``{label: number}`` objects as an array, or None if anything needs a closer look."""
    allowed = set(labels)
    if set(map(type, distributions)) - {dict} or not all(map(allowed.issuperset, distributions)):
        return None
    flat = [values.get(label, 0) for values in distributions for label in labels]  # a missing label is 0
    if set(map(type, flat)) - {float, int}:
        return None
    rows = np.array(flat, dtype=np.float64).reshape(len(distributions), len(labels))
    # A row is all zeros exactly when its largest value is 0 (values are >= 0); max, unlike sum,
    # cannot overflow, so this path agrees with the careful one on rows of values near 1.8e308.
    if not np.isfinite(rows).all() or (rows < 0).any() or (rows.max(axis=1) <= 0).any():
        return None
    return rows


def _load_run_fast(data: object, gold: Gold, allow_missing: bool) -> Run | None:
    try:
        return _run_fast(data, gold, allow_missing)
    except _FAST_PATH_MISS:
        return None


def _run_fast(data: object, gold: Gold, allow_missing: bool) -> Run | None:
    if not isinstance(data, list) or not data:
        return None
    config = gold.config
    n = gold.n_dialogues
    ids = _fast_ids(data)
    if ids is None:
        return None
    found = list(map(gold.index.get, ids))
    if None in found:
        return None
    index = np.array(found, dtype=np.int64)
    if np.unique(index).size != index.size or (index.size != n and not allow_missing):
        return None
    has_quality = data[0].get("quality") is not None
    has_nugget = data[0].get("nugget") is not None
    if (not (has_quality or has_nugget) or (has_quality and not gold.has_quality)
            or (has_nugget and not gold.has_nugget)):
        return None
    covered = np.zeros(n, dtype=bool)
    covered[index] = True
    position_of = np.full(n, -1, dtype=np.int64)
    position_of[index] = np.arange(index.size)

    quality = None
    if has_quality:
        dims = config.quality_dimensions
        estimates = list(map(itemgetter("quality"), data))
        if set(map(type, estimates)) != {dict} or set(map(len, estimates)) != {len(dims)}:
            return None
        quality = {}
        for dim in dims:
            rows = _values_fast(list(map(itemgetter(dim), estimates)), config.quality_scale)
            if rows is None:
                return None
            quality[dim] = np.zeros((n, rows.shape[1]))
            quality[dim][index] = rows
    elif any(entry.get("quality") is not None for entry in data):
        return None

    side_types = {CUSTOMER: config.customer_nugget_types, HELPDESK: config.helpdesk_nugget_types}
    side_rows = {CUSTOMER: np.zeros((len(gold.customer_dialogue), len(side_types[CUSTOMER]))),
                 HELPDESK: np.zeros((len(gold.helpdesk_dialogue), len(side_types[HELPDESK])))}
    if has_nugget:
        estimates = list(map(itemgetter("nugget"), data))
        if set(map(type, estimates)) != {list}:
            return None
        lengths = np.array(list(map(len, estimates)), dtype=np.int64)
        if not np.array_equal(lengths, gold.turn_counts[index]):
            return None
        # Gold turn of every estimate, in the run's order.
        turn_start = np.concatenate(([0], np.cumsum(gold.turn_counts)[:-1]))
        estimate_start = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        gold_turn = (np.repeat(turn_start[index], lengths) + np.arange(lengths.sum())
                     - np.repeat(estimate_start, lengths))
        turn_estimates = list(chain.from_iterable(estimates))
        is_customer = gold.turn_is_customer
        side_row = np.where(is_customer, np.cumsum(is_customer) - 1, np.cumsum(~is_customer) - 1)
        for side, on_side in ((CUSTOMER, is_customer[gold_turn]), (HELPDESK, ~is_customer[gold_turn])):
            positions = np.flatnonzero(on_side)
            rows = _values_fast([turn_estimates[i] for i in positions.tolist()], side_types[side])
            if rows is None:
                return None
            side_rows[side][side_row[gold_turn[positions]]] = rows
    elif any(entry.get("nugget") is not None for entry in data):
        return None
    return _finish_run(gold, quality, side_rows, covered, position_of, has_nugget, allow_missing, _Problems())


def restrict(run: Run, gold: Gold, dialogue_index: np.ndarray) -> tuple[Run, Gold]:
    """A run and its gold cut down to some gold dialogues (ascending indices into ``gold``).

    Used for the live leaderboard of a test phase, which scores a fixed subset of the test
    dialogues; the run must cover all of them.
    """
    dialogue_index = np.asarray(dialogue_index, dtype=np.int64)
    position = np.full(gold.n_dialogues, -1, dtype=np.int64)
    position[run.dialogue_index] = np.arange(run.dialogue_index.size)
    rows = position[dialogue_index]
    if (rows < 0).any():
        raise ValueError("the run does not cover every dialogue of the subset")
    covered_gold = gold.subset(run.dialogue_index) if run.n_missing else gold
    keep = np.zeros(covered_gold.n_dialogues, dtype=bool)
    keep[rows] = True
    subset = Run(
        dialogue_index=np.arange(dialogue_index.size),
        quality=None if run.quality is None else {dim: values[rows] for dim, values in run.quality.items()},
        customer=None if run.customer is None else run.customer[keep[covered_gold.customer_dialogue]],
        helpdesk=None if run.helpdesk is None else run.helpdesk[keep[covered_gold.helpdesk_dialogue]],
        warnings=list(run.warnings),
    )
    return subset, covered_gold.subset(rows)
