"""Big synthetic data made fast (gold files, runs, hostile run files) and filling a leaderboard
with scored runs.
"""

from __future__ import annotations

from typing import Any

# Big synthetic data, fast --------------------------------------------------------------------------

_BASE_CACHE: dict[tuple[int, int], list] = {}


def big_gold(n_dialogues: int, seed: int = 7, base: int = 1000) -> list[dict[str, Any]]:
    """A gold of ``n_dialogues`` made of ``base`` generated dialogues repeated under new ids:
    scoring cost grows with the number of dialogues, not with their variety, and generating
    20,000 dialogues one by one takes 12 s where this takes a fraction of a second."""
    from fixtures.synthetic import generate_gold

    key = (min(base, n_dialogues), seed)
    if key not in _BASE_CACHE:
        _BASE_CACHE[key] = generate_gold(key[0], seed=seed)
    pattern = _BASE_CACHE[key]
    return [{**pattern[i % len(pattern)], "id": str(5 * 10**15 + i)} for i in range(n_dialogues)]


def big_run(gold: list[dict[str, Any]], noise: float = 0.3, seed: int = 1, base: int = 1000) -> bytes:
    """A noisy run for a gold made by ``big_gold`` (the same repetition), as upload bytes."""
    import orjson

    from fixtures.synthetic import generate_run

    pattern = generate_run(gold[:base], "noisy", noise=noise, seed=seed)
    return orjson.dumps([{**pattern[i % len(pattern)], "id": dialogue["id"]} for i, dialogue in enumerate(gold)])


def hostile_run_files(first_id: str, size: int) -> dict[str, bytes]:
    """The hostile shapes of issue 11 (defect 4), each filled to ``size`` bytes: what the shape
    check must refuse before the parser builds anything (``benchmarks/upload_memory.py``)."""
    def fill(prefix: bytes, unit: bytes, suffix: bytes) -> bytes:
        return prefix + unit * ((size - len(prefix) - len(suffix)) // len(unit)) + suffix

    entry = b'[{"id":"' + first_id.encode() + b'","x":'
    return {
        "empty objects [{},{},...]": fill(b"[", b"{},", b"{}]"),
        "empty lists [[],[],...]": fill(b"[", b"[],", b"[]]"),
        "deep nesting [[[[...": fill(b"", b"[", b""),
        'deep objects {"a":{"a":...': fill(b"", b'{"a":', b"1"),
        "long list of numbers in one entry": fill(entry + b"[", b"1.5,", b"1]}]"),
        "long list of short strings": fill(entry + b"[", b'"ab",', b'"ab"]}]'),
        "huge string": fill(entry + b'"', b"a", b'"}]'),
        "many keys in one object": entry + b"{" + b",".join(b'"k%d":1' % i for i in range(size // 13)) + b"}}]",
    }


# Filling a leaderboard --------------------------------------------------------------------------

def fill_board(task: Any, count: int, teams: list[Any], phase: Any = None, seed: int = 3) -> list[int]:
    """Add ``count`` public, scored runs to a task's board by copying the scores of a run already
    scored (one Score and its 21 vectors each), every number moved a little so that ranks differ.

    Real scoring of 500 runs takes minutes; what a board's readers cost depends on its rows.
    """
    from datetime import timedelta

    import numpy as np
    from django.db import transaction
    from django.utils import timezone

    from tasks.changes import touch_scores
    from tasks.models import Run, Score, ScoreVector

    template = (Score.objects.filter(run__task=task, run__status=Run.DONE, scope=Score.FULL,
                                     gold_version=task.latest_gold())
                .select_related("run").order_by("-run__is_baseline", "pk").last())
    if template is None:
        raise RuntimeError(f"task {task.slug} has no scored run to copy")
    vectors = list(template.vectors.all())
    rng = np.random.default_rng(seed)
    now = timezone.now()
    with transaction.atomic():
        runs = Run.objects.bulk_create([Run(
            task=task, team=teams[number % len(teams)], phase=phase, name=f"board-{number:04d}",
            description="copied scores for a full board", file_sha256=template.run.file_sha256,
            file_size=template.run.file_size, original_filename="board.json", parts=template.run.parts,
            status=Run.DONE, gold_version=template.gold_version, attempts=1,
            created_at=now - timedelta(days=2), queued_at=now, started_at=now, finished_at=now)
            for number in range(count)])
        factors = np.clip(rng.normal(1.0, 0.08, size=count), 0.5, 1.5)
        scores = Score.objects.bulk_create([Score(run=run, gold_version=template.gold_version, scope=Score.FULL,
                                                  summary=_scaled(template.summary, float(factor)))
                                            for run, factor in zip(runs, factors, strict=True)])
        ScoreVector.objects.bulk_create([
            ScoreVector(score=score, key=vector.key, mean=min(1.0, vector.mean * float(factor)),
                        values=np.clip(vector.array() * float(factor), 0.0, 1.0).tobytes())
            for score, factor in zip(scores, factors, strict=True) for vector in vectors], batch_size=2000)
        touch_scores(task)
    return [run.pk for run in runs]


def _scaled(summary: dict[str, Any], factor: float) -> dict[str, Any]:
    """A copied summary with every headline figure scaled (distances, so at most 1)."""
    return {**summary, "measures": {key: min(1.0, value * factor) for key, value in summary["measures"].items()}}
