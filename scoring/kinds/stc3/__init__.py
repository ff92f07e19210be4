"""NTCIR-14 STC-3 / DialEval Dialogue Quality and Nugget Detection (TASK-SPEC.md): distributions of
annotators' labels per dialogue, scored with RSNOD, NMD, JSD, RNSS, NVD and SNOD.

- ``config``: the task's labels, scales and presets;
- ``formats``: gold files and runs, validated into arrays;
- ``measures``: the distance measures between distributions;
- ``evaluate``: a run's scores on a gold;
- ``baselines``: the uniform and popularity runs;
- ``kind``: the adapter to the kind interface.
"""

from scoring.kinds.stc3.config import PRESETS, STC3, TaskConfig
from scoring.kinds.stc3.evaluate import Result, evaluate
from scoring.kinds.stc3.formats import Gold, Run, load_gold, load_run
from scoring.kinds.stc3.measures import MEASURES, Measure

__all__ = ["MEASURES", "PRESETS", "STC3", "Gold", "Measure", "Result", "Run", "TaskConfig", "evaluate", "load_gold",
           "load_run"]
