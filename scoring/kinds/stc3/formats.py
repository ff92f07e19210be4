"""Reading and validating STC-3 gold files and runs into arrays ready for vectorised scoring.

Validation reports *every* problem with its JSON path (``[12].nugget[3]: ...``), up to
``MAX_ERRORS`` lines, and raises ``ValidationFailed`` carrying them all. Nothing is scored
from a file with any error.

Rules (also in docs/participants/runs.md):
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

Each rule about values is written once, in ``RULES`` (:mod:`scoring.kinds.stc3.rules`): a fast path
for valid files and a careful path that words every problem both evaluate that table.

Modules, one job each; every name below is importable from here as before the split:

* :mod:`scoring.kinds.stc3.arrays`: ``Gold`` and ``Run``, how both paths build them, ``restrict``;
* :mod:`scoring.kinds.stc3.rules`: ``RULES``, each rule written once, and how they are evaluated;
* :mod:`scoring.kinds.stc3.facts`: what the rules see;
* :mod:`scoring.kinds.stc3.careful`: the careful path, wording every problem;
* :mod:`scoring.kinds.stc3.fast`: the fast paths for valid files;
* this module: the entry points ``load_gold``, ``load_run`` and ``check_run_shape``.

A test that replaces a path (``_load_gold_fast``, ``_load_run_checked``, ...) to watch ``load_gold`` or
``load_run`` sets it here, where they read it; the careful path reads ``_report`` in
:mod:`scoring.kinds.stc3.careful`.
"""

from __future__ import annotations

# Names outside the entry points are imported for the modules, benchmarks, tests and pages that read
# them from here (noqa: re-exported, not used here).
from scoring.kinds.stc3.arrays import CUSTOMER, HELPDESK, SUM_TOLERANCE, Gold, Run, restrict  # noqa: F401
from scoring.kinds.stc3.careful import _load_gold_checked, _load_run_checked
from scoring.kinds.stc3.config import TaskConfig
from scoring.kinds.stc3.fast import _load_gold_fast, _load_run_fast
from scoring.kinds.stc3.rules import RULES, Rule  # noqa: F401
from scoring.validation import (  # noqa: F401
    EXTRA_ENTRIES,
    VALUE_ALLOWANCE,
    ValidationFailed,
    check_shape,
    gc_paused,
    refuse_other_encoding,
)


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


def check_run_shape(data: bytes, gold: Gold, what: str = "file") -> None:
    """Refuse, before it is parsed, a run file whose structure no run of ``gold`` can have.

    Raises ``ValidationFailed`` with one line saying which bound was passed and where; returns
    quietly otherwise (the parser and the validators then find every other problem). Time and
    memory are linear in the bytes read and stop at the first bound passed: the temporary
    arrays are those of one 1 MiB chunk.
    """
    refuse_other_encoding(data, what)  # its brackets would be counted, but its problem is its encoding
    check_shape(data, gold.n_dialogues + EXTRA_ENTRIES, run_value_budget(gold), what,
                gold_dialogues=gold.n_dialogues)


def load_gold(data: object, config: TaskConfig) -> Gold:
    """Validate a parsed gold file and count the annotators' labels; raise ``ValidationFailed``."""
    with gc_paused():
        fast = _load_gold_fast(data, config)
    return fast if fast is not None else _load_gold_checked(data, config)


def load_run(data: object, gold: Gold, allow_missing: bool = False) -> Run:
    """Validate a parsed run against the gold; raise ``ValidationFailed`` listing every problem."""
    with gc_paused():
        fast = _load_run_fast(data, gold, allow_missing)
    return fast if fast is not None else _load_run_checked(data, gold, allow_missing)
