#!/usr/bin/env python3
"""Memory per upload and leaderboard readers during hostile uploads (issue 11, defect 4).

    .venv/bin/python benchmarks/upload_memory.py             # both parts, about 3 minutes
    .venv/bin/python benchmarks/upload_memory.py --no-server # memory table only
    .venv/bin/python benchmarks/upload_memory.py --no-before # skip the old path (it takes ~1 GB)
    .venv/bin/python benchmarks/upload_memory.py --kinds     # part 3 alone: every kind, web and worker
    .venv/bin/python benchmarks/upload_memory.py --kinds --kind metric   # part 3, the metric kind alone

1. **Memory per upload.** Each case is validated in a child process of its own, as an upload is
   (``check_run_shape``, then ``parse_json`` and ``load_run`` against a 4,000-dialogue STC-3
   gold), and the child reports its peak resident memory above what it held before it read
   the file (``VmHWM`` after resetting it through ``/proc/self/clear_refs``, minus ``VmRSS``):
   the file's own bytes count. "before" is the old path, the parser without the shape check.
   Hostile cases fill the file to just under the 32 MiB limit. Target: peak extra memory at
   most 10x the file size.
2. **Readers during hostile uploads.** gunicorn as configured (``gunicorn.conf.py``) on a
   scratch PostgreSQL database with a filled board; the leaderboard JSON's p95 latency with
   nobody uploading, then while 4 clients send 31 MB hostile files one after another; also the
   peak memory of the gunicorn processes. Target: p95 at most 2x idle.
3. **Every kind, web and worker** (issue 28, item 4). A large valid run of each kind, in a child
   process of its own with the kind's gold loaded and warmed by a small run (validated, and for
   the worker scored, so the gold's lookups, prepared references and the pipeline are there
   before, as in a process that has served an upload of the task): the web process's
   part of an upload (``check_run_file``, ``parse_json``, ``parse_run``: the upload is answered
   202 and scored later) and the worker's (``parse_json``, ``parse_run``, ``score``), peak extra
   memory as in part 1 and its ratio to the file. The response runs have long responses (3,000
   characters); POSSCORE's case is smaller because spaCy tags about 20,000 tokens a second.
   Target: at most 10x the file for every kind and both processes.

   Measured (``--kinds``, 2026-11-26, load average 9-11 on 2 shared cores; peak extra MB, x file):
   DQ/ND 4.8 MB: web 33 (6.9x), worker 33 (6.9x). Response, BLEU and deltaBLEU, 30.3 MB: web 71
   (2.3x), worker 117 (3.9x; 1,466 MB, 48.8x, before scoring in blocks). Response with POSSCORE,
   3.0 MB: web 6 (2.0x), worker 139 (45.9x; 2,194 MB before spaCy's batches were bounded by
   characters): a fixed ~120 MB for one spaCy batch of TAG_BATCH_CHARS, not growing with the run.
   Metric, 200,000 responses, 7.1 MB: web 80 (11.3x), worker 81 (11.4x): the parsed JSON itself,
   a dict per entry (about 270 bytes for 35 bytes of file). Read a piece at a time since
   (``Kind.parse_run_file``; ``--kinds --kind metric``, 2026-11-27, load average 6.6-8.1): web 8 MB
   (1.1x, 0.8 s), worker 51 MB (7.2x); the whole document parsed first, same run: 84 MB (11.9x, 0.5 s).

Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 32 * 1024 * 1024
FILL = LIMIT - 1024 * 1024  # 31 MiB: under the limit with room for the multipart envelope
MEMORY_TARGET = 10.0
READER_TARGET = 2.0


def _status(field: str) -> int:
    """A ``/proc/self/status`` figure in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(mode: str, gold_path: str, run_path: str) -> None:
    """Validate one file as an upload is validated; print peak extra bytes, seconds and outcome."""
    import gc

    from scoring.kinds.stc3.formats import Gold, check_run_shape, load_run
    from scoring.validation import ValidationFailed, parse_json

    gold = Gold.from_bytes(Path(gold_path).read_bytes())
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    baseline = _status("VmRSS")
    started = time.perf_counter()
    content = Path(run_path).read_bytes()
    try:
        if mode == "after":
            check_run_shape(content, gold)
        run = load_run(parse_json(content), gold)
        outcome = f"valid ({run.dialogue_index.size} dialogues)"
    except ValidationFailed as error:
        outcome = f"refused: {error.errors[0][:70]}"
    except RecursionError:
        outcome = "RecursionError"
    seconds = time.perf_counter() - started
    print(json.dumps({"peak": _status("VmHWM") - baseline, "seconds": seconds, "outcome": outcome}))


def measure(mode: str, gold_path: Path, run_path: Path) -> dict:
    completed = subprocess.run([sys.executable, __file__, "--child", mode, str(gold_path), str(run_path)],
                               capture_output=True, text=True, cwd=ROOT, timeout=600)
    if completed.returncode:
        return {"peak": float("nan"), "seconds": float("nan"), "outcome": f"crashed: {completed.stderr[-200:]}"}
    return json.loads(completed.stdout.strip().splitlines()[-1])


def cases(gold: list) -> dict[str, bytes]:
    """The hostile shapes of the issue at 31 MiB, a legitimate large run, and the heaviest file
    the shape check lets through (as many empty objects as the value budget allows, in the
    fewest bytes)."""
    import orjson

    from devtools.workers import big_run, hostile_run_files
    from scoring.kinds.stc3 import STC3, load_gold
    from scoring.kinds.stc3.formats import run_value_budget

    legit = big_run(gold)
    with_test_data = orjson.dumps([{**dialogue, "annotations": None, **estimate}
                                   for dialogue, estimate in zip(gold, orjson.loads(legit), strict=True)])
    budget = run_value_budget(load_gold(gold, STC3))
    per_entry = (budget // len(gold) - 3) // 2 - 1  # tokens per entry: 2 per empty object, 3 more
    heaviest = b"[" + b",".join(b'{"id":"%s","x":[%s]}' % (dialogue["id"].encode(), b",".join([b"{}"] * per_entry))
                                for dialogue in gold) + b"]"
    return {
        "valid run, 4,000 dialogues": legit,
        "valid run with the test data's turns": with_test_data,
        **hostile_run_files(gold[0]["id"], FILL),
        "empty objects under a key, within the value budget": heaviest,
        "short strings under a key, within the value budget": b"[" + b",".join(
            b'{"id":"%s","x":[%s]}' % (dialogue["id"].encode(), b",".join([b'"ab"'] * per_entry * 2))
            for dialogue in gold) + b"]",
    }


def memory_table(skip_before: bool) -> tuple[list[str], bool]:
    import orjson

    from devtools.workers import big_gold
    from scoring.kinds.stc3 import STC3, load_gold

    gold = big_gold(4000)
    ok = True
    lines = ["| case | file MB | before: peak extra MB (x file) | after: peak extra MB (x file) | after: s | "
             "after: outcome |", "|---|---:|---:|---:|---:|---|"]
    with tempfile.TemporaryDirectory(prefix="upload-memory-") as folder:
        gold_path = Path(folder, "gold.npz")
        gold_path.write_bytes(load_gold(gold, STC3).to_bytes())
        for name, content in cases(gold).items():
            run_path = Path(folder, "run.json")
            run_path.write_bytes(content)
            size = len(content)
            after = measure("after", gold_path, run_path)
            before = None if skip_before else measure("before", gold_path, run_path)
            ratio = after["peak"] / size
            ok &= ratio <= MEMORY_TARGET
            before_text = "-" if before is None else f"{before['peak'] / 1e6:,.0f} ({before['peak'] / size:.1f}x)"
            lines.append(f"| {name} | {size / 1e6:.1f} | {before_text} | {after['peak'] / 1e6:,.1f} ({ratio:.1f}x)"
                         f"{'' if ratio <= MEMORY_TARGET else ' MISSED'} | {after['seconds']:.2f} | "
                         f"{after['outcome']} |")
            print(lines[-1], flush=True)
    del orjson
    return lines, ok


def _processes_peak(pid: int) -> int:
    """Sum of VmHWM of a process and its children (gunicorn's master and workers)."""
    from devtools.workers import children

    total = 0
    for member in [pid, *children(pid)]:
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def _uploader(base: str, token: str, content: bytes, stop, answers) -> None:
    """One client sending the same hostile file again and again until told to stop; told 503,
    it waits as ``Retry-After`` says, as the command-line client and well-behaved scripts do."""
    from devtools.workers import upload

    while not stop.is_set():
        reply = upload(base, "mem", token, content, "hostile", timeout=120)
        answers.put(reply.status)
        if reply.status == 503:
            stop.wait(float(reply.headers.get("retry-after", "5")))


def reader_table(postgres: str) -> tuple[list[str], bool]:
    from devtools.workers import (
        big_gold,
        call,
        drop_database,
        free_port,
        hostile_run_files,
        read_load,
        read_load_processes,
        scratch_database,
        seed_site,
        site_env,
        start_gunicorn,
        wait_until,
    )

    name = f"upload_memory_{os.getpid()}"
    database_url = scratch_database(postgres, name)
    work = Path(tempfile.mkdtemp(prefix="upload-memory-site-"))
    web = None
    try:
        env = site_env(database_url, work / "var")
        site = seed_site(env, {"slug": "mem", "dialogues": 1000, "teams": 4, "board": 30})
        port = free_port()
        web = start_gunicorn(env, port, work / "gunicorn.log")
        base = f"http://127.0.0.1:{port}"
        wait_until("gunicorn to answer", lambda: call(f"{base}/healthz").status == 200, 45, web)
        paths = ["/api/v1/tasks/mem/leaderboard/"]
        read_load(base, paths, 2, 20)  # warm-up
        idle = read_load_processes(base, paths, 4, 60, processes=2)
        shapes = hostile_run_files(big_gold(1000)[0]["id"], FILL)
        hostile = [shapes[name] for name in ("empty objects [{},{},...]", "deep nesting [[[[...",
                                             "long list of numbers in one entry", "many keys in one object")]
        tokens = list(site["tokens"].values())
        # Uploaders and readers in processes of their own: in one process the uploaders' work
        # (building and sending 31 MB bodies) would hold the readers' interpreter lock and be
        # measured as server latency.
        context = multiprocessing.get_context("spawn")
        stop = context.Event()
        answers = context.Queue()
        uploaders = [context.Process(target=_uploader, args=(base, tokens[number], hostile[number], stop, answers),
                                     daemon=True) for number in range(4)]
        for process in uploaders:
            process.start()
        time.sleep(3.0)  # the uploads are being sent and validated
        busy = read_load_processes(base, paths, 4, 60, processes=2)
        stop.set()
        statuses: list[int] = []
        for process in uploaders:
            process.join(timeout=180)
        while not answers.empty():
            statuses.append(answers.get())
        peak = _processes_peak(web.process.pid)
        ratio = busy.percentile(0.95) / idle.percentile(0.95)
        ok = ratio <= READER_TARGET and idle.statuses.get(200, 0) == idle.requests \
            and busy.statuses.get(200, 0) == busy.requests
        lines = ["| readers of the leaderboard JSON | requests | p50 ms | p95 ms | non-200 |",
                 "|---|---:|---:|---:|---:|",
                 f"| idle | {idle.requests} | {idle.percentile(0.5) * 1000:.1f} | {idle.percentile(0.95) * 1000:.1f} | "
                 f"{idle.requests - idle.statuses.get(200, 0)} |",
                 f"| 4 clients uploading 31 MB hostile files | {busy.requests} | {busy.percentile(0.5) * 1000:.1f} | "
                 f"{busy.percentile(0.95) * 1000:.1f} | {busy.requests - busy.statuses.get(200, 0)} |",
                 "",
                 f"p95 busy / idle: {ratio:.2f}x (target <= {READER_TARGET:.0f}x)"
                 f"{'' if ratio <= READER_TARGET else ' MISSED'}",
                 f"hostile uploads answered: {len(statuses)}, statuses {dict(Counter(statuses))}; peak memory of "
                 f"gunicorn (master + workers, VmHWM): {peak / 1e6:,.0f} MB"]
        return lines, ok
    finally:
        if web is not None:
            web.stop()
        drop_database(postgres, name)


# Part 3: every kind, the web process's part of an upload and the worker's -----------------------

def _kind_case_files(folder: Path, only: str | None = None) -> list[tuple[str, str, dict, Path, Path, Path]]:
    """(label, kind, task configuration, gold bytes, a small warm-up run, the measured run);
    ``only``: that kind's cases alone."""

    def write(name: str, content: bytes) -> Path:
        path = Path(folder, name)
        path.write_bytes(content)
        return path

    cases = []
    if only in (None, "stc3"):
        cases.append(_stc3_case(write))
    if only in (None, "response"):
        cases += _response_cases(write)
    if only in (None, "metric"):
        cases.append(_metric_case(write))
    return cases


def _stc3_case(write: Callable[[str, bytes], Path]) -> tuple[str, str, dict, Path, Path, Path]:
    import orjson

    from devtools.workers import big_gold, big_run
    from scoring.kinds import get_kind

    stc3_gold = big_gold(4000)
    stc3 = get_kind("stc3")
    stc3_config = dict(stc3.presets[stc3.default_preset])
    legit = big_run(stc3_gold)
    with_turns = orjson.dumps([{**dialogue, "annotations": None, **estimate}
                               for dialogue, estimate in zip(stc3_gold, orjson.loads(legit), strict=True)])
    stc3_bytes = write("stc3-gold.bin", stc3.compile_gold(stc3_gold, stc3.config(stc3_config)).to_bytes())
    small = write("stc3-small.json", big_run(stc3_gold, seed=2))
    return ("DQ/ND, 4,000 dialogues with the test data's turns", "stc3", stc3_config, stc3_bytes, small,
            write("stc3-run.json", with_turns))


def _response_cases(write: Callable[[str, bytes], Path]) -> list[tuple[str, str, dict, Path, Path, Path]]:
    import random

    import orjson

    from scoring.kinds import get_kind

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from response_speed import _sentence, _vocabulary, make_files

    cases = []
    words = _vocabulary()

    def long_response(rng: random.Random) -> str:
        parts: list[str] = []
        while sum(len(part) + 1 for part in parts) < 3000:
            parts.append(_sentence(rng, words))
        return " ".join(parts)[:3000]

    response = get_kind("response")
    for label, n_items, config in (("response, BLEU and deltaBLEU, 10,000 responses of 3,000 characters", 10_000,
                                    response.presets["bleu-only"]),
                                   ("response, BLEU, deltaBLEU and POSSCORE, 1,000 responses of 3,000 characters",
                                    1_000, response.presets["response"])):
        gold, short = make_files(n_items, 7)
        rng = random.Random(3)
        run = [{"id": entry["id"], "response": long_response(rng)} for entry in gold]
        compiled = response.compile_gold(gold, response.config(config))
        tag = "posscore" if "posscore" in config["measures"] else "bleu"
        cases.append((label, "response", dict(config), write(f"response-{tag}-gold.bin", compiled.to_bytes()),
                      write(f"response-{tag}-small.json", orjson.dumps(short[:50])),
                      write(f"response-{tag}-run.json", orjson.dumps(run))))
    return cases


def _metric_case(write: Callable[[str, bytes], Path]) -> tuple[str, str, dict, Path, Path, Path]:
    import orjson

    from fixtures import metric_demo
    from scoring.kinds import get_kind

    metric = get_kind("metric")
    metric_config = dict(metric.presets[metric.default_preset])
    metric_gold = metric_demo.generate_gold(20_000, 10, seed=3, texts=False)
    runs = metric_demo.generate_runs(metric_gold, seed=3)
    compiled = metric.compile_gold(metric_gold, metric.config(metric_config))
    return ("metric, 200,000 responses (20,000 contexts x 10 systems)", "metric", metric_config,
            write("metric-gold.bin", compiled.to_bytes()), write("metric-small.json", orjson.dumps(runs["coarse"])),
            write("metric-run.json", orjson.dumps(runs["close"])))


def kind_child(stage: str, kind_name: str, config_json: str, gold_path: str, small_path: str, run_path: str) -> None:
    """One kind's upload in this process: ``web`` validates it as the web process does, ``worker``
    scores it as the worker does; prints the peak extra bytes and the seconds."""
    import gc

    from scoring.kinds import get_kind
    from scoring.validation import parse_json

    kind = get_kind(kind_name)
    config = kind.config(json.loads(config_json))
    gold = kind.gold_from_bytes(Path(gold_path).read_bytes())
    # A process serves many uploads against its cached gold: what the gold builds at the first
    # (lookups by id, BLEU tables, the pipeline) is the gold's, not the upload's.
    warm = Path(small_path).read_bytes()
    kind.check_run_file(warm, gold)
    parsed = kind.parse_run_file(warm, gold, config, allow_missing=True)
    if stage == "worker":
        kind.score(parsed, gold, config)
    del parsed
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    baseline = _status("VmRSS")
    started = time.perf_counter()
    content = Path(run_path).read_bytes()
    if stage == "web":
        # As tasks.submissions does it: the shape, then the kind reads the bytes.
        kind.check_run_file(content, gold)
        kind.parse_run_file(content, gold, config)
    elif stage == "web-whole":
        # The path before issue 28's item 4, for comparison: the whole document parsed first.
        kind.check_run_file(content, gold)
        kind.parse_run(parse_json(content, "file"), gold, config)
    else:
        result = kind.score(kind.parse_run_file(content, gold, config), gold, config)
        assert result.n_items > 0
    seconds = time.perf_counter() - started
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps({"peak": _status("VmHWM") - baseline, "seconds": seconds, "children": children}))


def kinds_table(only: str | None = None) -> tuple[list[str], bool]:
    from scoring.kinds import get_kind
    from scoring.kinds.base import Kind

    ok = True
    lines = ["| kind and run | file MB | process | peak extra MB | x file | s |", "|---|---:|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="upload-memory-kinds-") as folder:
        for label, kind_name, config, gold_path, small_path, run_path in _kind_case_files(Path(folder), only):
            size = run_path.stat().st_size
            # A kind that reads a run's bytes a piece at a time (its own parse_run_file) is also
            # measured the way it was read before (the whole document parsed first).
            pieces = type(get_kind(kind_name)).parse_run_file is not Kind.parse_run_file
            for stage in ("web", "worker", *(["web-whole"] if pieces else [])):
                completed = subprocess.run(
                    [sys.executable, __file__, "--kind-child", stage, kind_name, json.dumps(config), str(gold_path),
                     str(small_path), str(run_path)],
                    capture_output=True, text=True, cwd=ROOT, timeout=3600)
                if completed.returncode:
                    ok = False
                    lines.append(f"| {label} | {size / 1e6:.1f} | {stage} | crashed: "
                                 f"{completed.stderr.strip().splitlines()[-1][:80]} | | |")
                else:
                    figures = json.loads(completed.stdout.strip().splitlines()[-1])
                    ratio = figures["peak"] / size
                    judged = stage != "web-whole"  # the old path, shown for comparison only
                    ok &= ratio <= MEMORY_TARGET or not judged
                    verdict = "" if ratio <= MEMORY_TARGET or not judged else " MISSED"
                    process = "web, whole document first (before)" if stage == "web-whole" else stage
                    lines.append(f"| {label} | {size / 1e6:.1f} | {process} | {figures['peak'] / 1e6:,.0f} | "
                                 f"{ratio:.1f}x{verdict} | {figures['seconds']:.1f} |")
                print(lines[-1], flush=True)
    load = os.getloadavg()
    lines.append("")
    lines.append(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores; POSSCORE "
                 "tagged in the worker's own process (the scoring core's default of one tagging process), so all its "
                 "memory is counted")
    return lines, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=3, metavar=("MODE", "GOLD", "RUN"), help=argparse.SUPPRESS)
    parser.add_argument("--kind-child", nargs=6, help=argparse.SUPPRESS)
    parser.add_argument("--kinds", action="store_true", help="part 3 alone: every kind, web and worker")
    parser.add_argument("--no-kinds", action="store_true", help="skip part 3")
    parser.add_argument("--kind", choices=("stc3", "response", "metric"), help="part 3: this kind's cases alone")
    parser.add_argument("--no-before", action="store_true", help="skip the old path (parser without the check)")
    parser.add_argument("--no-server", action="store_true", help="skip the readers part (needs PostgreSQL)")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    options = parser.parse_args(argv)
    if options.child:
        child(*options.child)
        return 0
    if options.kind_child:
        kind_child(*options.kind_child)
        return 0
    if options.kinds:
        lines, ok = kinds_table(options.kind)
        print("\n".join(["", *lines]))
        return 0 if ok else 1
    lines, ok = memory_table(options.no_before)
    print("\n".join(["", *lines]))
    if not options.no_server:
        reader_lines, reader_ok = reader_table(options.postgres)
        print("\n".join(["", *reader_lines]))
        ok &= reader_ok
    if not options.no_kinds:
        kind_lines, kinds_ok = kinds_table()
        print("\n".join(["", *kind_lines]))
        ok &= kinds_ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
