"""Framework-free scoring core for STC-3 / DialEval Dialogue Quality and Nugget Detection.

Everything here imports NumPy and SciPy only, never Django: the server, the offline
``score`` command, the tests and the benchmarks all compute their numbers through it.
"""

from scoring.config import PRESETS, STC3, TaskConfig
from scoring.evaluate import Result, evaluate
from scoring.formats import Gold, Run, ValidationFailed, load_gold, load_run, parse_json
from scoring.measures import MEASURES, Measure

__all__ = [
    "MEASURES",
    "PRESETS",
    "STC3",
    "Gold",
    "Measure",
    "Result",
    "Run",
    "TaskConfig",
    "ValidationFailed",
    "evaluate",
    "load_gold",
    "load_run",
    "parse_json",
]
