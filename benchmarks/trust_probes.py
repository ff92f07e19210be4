"""Rows of the reliability report for the trust defects of issue 11, run against a live site.

Each probe returns ``(row text, problems)``: problems counts what must be zero (the report fails
on any). The long-running ones (memory per upload, burst statistics) live in their own
benchmarks and are called from here with their own sites.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from devtools.workers import PYTHON, ROOT, Process, big_run, call, queue_length, upload, wait_until

NON_FINITE = re.compile(rb"\b(NaN|-?Infinity|inf|nan)\b")


def _with_first_distribution(content: bytes, values_text: str) -> bytes:
    """The run with its first dialogue's quality.A written as ``values_text`` (JSON text, so that
    integers of any size are written as they are, not as floats)."""
    run = orjson.loads(content)
    run[0]["quality"]["A"] = {"__marker__": 0}
    text = json.dumps(run, separators=(",", ":"))
    return text.replace('{"__marker__":0}', values_text, 1).encode()


def overflow(base_url: str, slug: str, token: str, gold: list, wait_done: Callable[[int], str],
             scratch: Path) -> tuple[str, int]:
    """Values each finite whose sum overflows: scored exactly as the same ratio in small numbers,
    never NaN; a value too large to be a number is refused at upload, naming where it is."""
    problems: list[str] = []
    base = big_run(gold, seed=71)
    files = {
        "1:1": _with_first_distribution(base, '{"2":1,"1":1}'),
        "1e308 twice": _with_first_distribution(base, '{"2":1e308,"1":1e308}'),
        "10**308 twice": _with_first_distribution(base, '{"2":' + str(10**308) + ',"1":' + str(10**308) + '}'),
    }
    scores: dict[str, Any] = {}
    for label, content in files.items():
        reply = upload(base_url, slug, token, content, f"overflow-{label.replace(' ', '-').replace('*', '')}")
        if reply.status != 202:
            problems.append(f"{label}: upload answered {reply.status}")
            continue
        run_id = reply.json()["id"]
        status = wait_done(run_id)
        detail = call(f"{base_url}/api/v1/runs/{run_id}/", token)
        if status != "done":
            problems.append(f"{label}: run ended {status} ({detail.json().get('errors')})")
        if NON_FINITE.search(detail.body):
            problems.append(f"{label}: a non-finite number in the run's JSON")
        scores[label] = detail.json().get("scores")
    if len({json.dumps(value, sort_keys=True) for value in scores.values()}) != 1:
        problems.append("the overflowing runs did not score exactly as the 1:1 run")
    huge = _with_first_distribution(base, '{"2":' + str(10**400) + ',"1":1}')
    reply = upload(base_url, slug, token, huge, "overflow-10-400")
    errors = reply.json().get("errors", []) if reply.status == 400 else []
    if not any(line.startswith('[0].quality.A["2"]') for line in errors):
        problems.append(f"10**400: answered {reply.status} {errors[:2]}, expected 400 naming [0].quality.A[\"2\"]")
    board = call(f"{base_url}/api/v1/tasks/{slug}/leaderboard/")
    if NON_FINITE.search(board.body):
        problems.append("a non-finite number on the leaderboard JSON")
    # The offline command on the same file: exit 0, strict JSON (NaN refused by the parser).
    gold_path, run_path = scratch / "overflow-gold.json", scratch / "overflow-run.json"
    gold_path.write_bytes(orjson.dumps(gold))
    run_path.write_bytes(files["1e308 twice"])
    command = subprocess.run([PYTHON, str(ROOT / "manage.py"), "score", str(run_path), str(gold_path)], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    try:
        offline = json.loads(command.stdout, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
        if command.returncode or not math.isfinite(offline["quality"]["A"]["rsnod"]):
            problems.append(f"score command: exit {command.returncode}")
    except ValueError as error:
        problems.append(f"score command printed no strict JSON ({error}; exit {command.returncode})")
    text = ("two 1e308 and two 10**308 values in one distribution: scored exactly as 1:1, no NaN in the run, the "
            "board or `score`; 10**400 refused naming its place")
    return (text if not problems else f"{text}; PROBLEMS: {'; '.join(problems)}"), len(problems)


def requeue_backlog(base_url: str, slug: str, token: str, gold: list, broker_url: str, queue: str,
                    requeue: Callable[[], list[int]], sql: Callable[..., Any],
                    start_worker: Callable[[], Process]) -> tuple[str, list[int], int]:
    """Eight runs waiting in the broker with no worker: requeue_stuck (celery beat, every
    minute) sends nothing while their last send is fresh, each once when it is stale, and a
    worker then scores each exactly once. Returns the row, the run ids and the problems."""
    problems: list[str] = []
    ids: list[int] = []
    for seed in range(8):
        reply = upload(base_url, slug, token, big_run(gold, seed=300 + seed), f"backlog-{seed}")
        if reply.status != 202:
            return f"upload answered {reply.status}", ids, 1
        ids.append(reply.json()["id"])
    wait_until("the backlog in the broker", lambda: queue_length(broker_url, queue) >= 8, 30)
    sent_before = queue_length(broker_url, queue)
    # Queued long enough to look lost, but sent a moment ago: requeue must leave them alone.
    sql("UPDATE tasks_run SET queued_at = now() - interval '10 minutes' WHERE id = ANY(%s)", ids)
    fresh = [requeue() for _ in range(3)]
    after_fresh = queue_length(broker_url, queue)
    if any(fresh) or after_fresh != sent_before:
        problems.append(f"fresh backlog re-sent: {fresh}, {sent_before} -> {after_fresh} messages")
    sql("UPDATE tasks_run SET last_sent_at = now() - interval '10 minutes' WHERE id = ANY(%s)", ids)
    stale = requeue()
    after_stale = queue_length(broker_url, queue)
    if sorted(stale) != sorted(ids) or after_stale != sent_before + 8 or requeue():
        problems.append(f"stale backlog: re-sent {stale}, {after_fresh} -> {after_stale} messages")
    worker = start_worker()
    started = time.monotonic()
    wait_until("the backlog to be scored", lambda: sql(
        "SELECT count(*) FROM tasks_run WHERE id = ANY(%s) AND status <> 'done'", ids)[0][0] == 0, 180, worker)
    twice = sql("SELECT count(*) FROM (SELECT run_id FROM tasks_score WHERE run_id = ANY(%s) GROUP BY run_id, "
                "gold_version_id, scope HAVING count(*) > 1) AS twice", ids)[0][0]
    if twice:
        problems.append(f"{twice} runs scored twice")
    text = (f"8 runs queued without a worker ({sent_before} messages); 3 requeue calls while fresh: "
            f"+{after_fresh - sent_before} messages; once stale: +{after_stale - after_fresh}, then none; a worker "
            f"scored all 8 once in {time.monotonic() - started:.1f} s")
    return (text if not problems else f"{text}; PROBLEMS: {'; '.join(problems)}"), ids, len(problems)


def leak(base_url: str, env: dict[str, str]) -> tuple[str, int]:
    """A task with development, test (live subset) and unpublished final phases, runs of three
    teams (one hidden) and statistics, built in the site's database; then every board path x
    every class of ``?phase=`` value over HTTP (``devtools.workers.leak_probe``): no 5xx, a 404 for
    every value that names no phase, and no whole-set test mean or per-dialogue test score."""
    env = {key: value for key, value in env.items() if key != "CELERY_BROKER_URL"}  # scored in-process
    spec = json.dumps({"slug": "leak", "base_url": base_url})
    completed = subprocess.run([PYTHON, "-m", "devtools.workers", "leak", spec], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=900)
    if completed.returncode:
        return f"the probe failed: {completed.stderr[-500:]}", 1
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    text = (f"{found['requests']} anonymous requests (11 board paths x {found['requests'] // 11} ?phase= classes) "
            f"searched for {found['forbidden']} whole-set test means and {found['per_dialogue']} per-dialogue test "
            f"scores: {len(found['problems'])} problems")
    shown = "; ".join(found["problems"][:5])
    return (text if not found["problems"] else f"{text}: {shown}"), len(found["problems"])


def table_lines(lines: Iterable[str]) -> str:
    """A benchmark's markdown table squeezed into one report cell."""
    return " / ".join(line.strip("| ") for line in lines if not line.startswith("|---"))
