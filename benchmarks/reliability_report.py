#!/usr/bin/env python3
"""Reliability report: hostile uploads, injected faults and load against real servers, in one table.

Sets everything up itself, on loopback only, and removes it afterwards: a scratch database on
the shared PostgreSQL (``--database``, dropped and re-created), gunicorn (``gunicorn.conf.py``:
a worker per core, 2 threads each) with its leaderboard cache in Redis, Celery workers
(``--pool=solo``) on queues of their own, and, for the database restart, a private PostgreSQL
cluster on a free port (the shared server is never stopped). Scoring limits are short (4 s hard
limit, 1 s grace) so dead attempts go stale in seconds.

1. Hostile inputs: every case of ``devtools/hostile_corpus.py`` plus malformed requests, uploaded
   over HTTP; a case passes when the status and the listed messages are the expected ones, no
   traceback is shown, and no table row, stored file or quota changed.
2. Faults: a worker SIGKILLed mid-scoring (RabbitMQ and Redis), a worker hung past the time
   limit (SIGSTOP), the broker unreachable at upload time (both brokers), PostgreSQL restarted
   under traffic with a run being scored. Every accepted run must end scored exactly once.
3. Load: 20 teams x 5 simultaneous uploads near a deadline (quota 3 a day), then 50 concurrent
   readers of the leaderboard JSON and page with 500 runs on the board: Python readers (plain,
   gzip, revalidating, paced) and, when Debian's ``wrk`` is installed, wrk, which measures the
   server without a load generator competing for the same two cores.

4. Confusable names: run and team names with a RIGHT-TO-LEFT OVERRIDE, a zero-width space, a
   Cyrillic look-alike of an existing name, and bytes that are not UTF-8 (multipart and
   urlencoded), sent over HTTP to the API and the sign-up form; each must be refused with a
   message naming the character (or the invalid UTF-8), and nothing stored.
5. The trust probes of issue 11 (``benchmarks/trust_probes.py``): no whole-set or per-dialogue test
   score before publication on any board path with any ``?phase=`` value, overflowing values scored
   without NaN, ``requeue_stuck`` under a backlog, memory per upload and readers during hostile
   uploads (``benchmarks/upload_memory.py``), a burst of 10 uploads in 5 s ending with statistics over
   every run (``benchmarks/statistics_burst.py``).
6. Issue 24: the hostile corpus's KIND_CASES to a task of each kind (huge integers, unpaired
   surrogates, nuggets per response, alternatives per nugget, the nugget work budget); a staff
   account without permissions kept out of a task's organiser pages; 125 wrong passwords on the
   admin's sign-in; worker memory of scoring nuggets (``benchmarks/nugget_memory.py``).

Prints one table. Exit status 1 (and FAIL in the table) when a must-be-zero figure is not zero,
a fault was not recovered or a target was missed (or could not be measured), 2 when the set-up
failed.

The parts live in siblings, one job each: ``reliability_site`` (the tally, the database, a site),
``reliability_inputs`` (parts 1, 4 and 6), ``reliability_faults`` (part 2), ``reliability_load`` (part 3);
this script accounts, prints the table and runs them in order.

    .venv/bin/python benchmarks/reliability_report.py            # about 5 minutes
    .venv/bin/python benchmarks/reliability_report.py --quick    # fewer requests, about 3 minutes
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
from benchmarks import statistics_burst, trust_probes, upload_memory  # noqa: E402  (the report runs their probes)
from benchmarks.reliability_faults import fault_broker_down, fault_hung, fault_kill  # noqa: E402
from benchmarks.reliability_inputs import (  # noqa: E402
    confusable_names,
    hostile_inputs,
    kind_inputs,
    nugget_memory_rows,
    staff_and_sign_in,
    uuid4_hex,
)
from benchmarks.reliability_load import (  # noqa: E402, F401  (wrk_load: benchmarks/embedded_serve.py reads it here)
    board_load,
    upload_rush,
    wrk_load,
)
from benchmarks.reliability_site import (  # noqa: E402
    BIG_DIALOGUES,
    BOARD_RUNS,
    CACHE_DB,
    DAILY_QUOTA,
    TEAMS,
    Database,
    Fault,
    Tally,
    say,
    site,
)
from devtools.hostile_corpus import CASES, CORPUS_MAX_BYTES  # noqa: E402
from devtools.workers import (  # noqa: E402
    BROKERS,
    FAULT_LIMITS,
    VECTORS_PER_SCORE,
    big_gold,
    drop_database,
    new_queue,
    postgres_bin,
    postgres_restart_drill,
    reachable,  # noqa: E402
    scratch_database,
    seed_site,
    site_env,
)

# Accounting -----------------------------------------------------------------------------------------------

def account(tally: Tally, db: Database) -> None:
    for run_id in sorted(tally.accepted):
        if db.status(run_id) != "done":
            tally.lost += 1
    tally.duplicates = db.one("SELECT count(*) FROM (SELECT 1 FROM tasks_score GROUP BY run_id, gold_version_id, "
                              "scope HAVING count(*) > 1) AS twice") + db.one(
        "SELECT count(*) FROM (SELECT s.id FROM tasks_score s LEFT JOIN tasks_scorevector v ON v.score_id = s.id "
        "GROUP BY s.id HAVING count(v.id) <> %s) AS odd", VECTORS_PER_SCORE)
    # A participant's run that no 202 answer announced: stored behind the participant's back.
    tally.phantoms = db.one("SELECT count(*) FROM tasks_run WHERE NOT is_baseline AND name NOT LIKE 'board-%%' "
                            "AND name <> 'seed-run' AND NOT (id = ANY(%s))", sorted(tally.accepted))


def table(tally: Tally, drill: Any, args: argparse.Namespace, wall: float) -> tuple[str, bool]:
    faults_ok = all(fault.ok for fault in tally.faults)
    must_be_zero = {
        "inputs not rejected correctly": tally.inputs_tried - tally.rejected_correctly,
        "runs lost": tally.lost + (drill.lost if drill else 0),
        "duplicates (second score, odd vector count, run without a 202)": tally.duplicates + tally.phantoms,
        "quota violations": tally.quota_violations,
        "tracebacks or dropped connections shown": tally.tracebacks + tally.unclean + (drill.unclean if drill else 0)
        + (drill.failed_after if drill else 0),
        "hostile names not refused precisely, or something stored": tally.names_tried - tally.names_refused,
        "trust probes: problems (leak, overflow, memory, burst statistics, requeue)": tally.trust_problems,
    }
    rows = [("hostile inputs tried", f"{tally.inputs_tried} ({len(CASES)} files of devtools/hostile_corpus.py, "
                                     f"{tally.kind_inputs} of its KIND_CASES to stc3, response and metric tasks, "
                                     f"{tally.inputs_tried - len(CASES) - tally.kind_inputs} malformed requests)"),
            ("rejected correctly", f"{tally.rejected_correctly} (expected status and messages; no row, file or "
                                   "quota changed)"),
            ("confusable names", f"{tally.names_refused}/{tally.names_tried} refused with a precise message, "
                                 "nothing stored (RLO, zero-width, BOM, Cyrillic look-alikes of a run and a team, "
                                 "invalid UTF-8 in multipart and urlencoded forms; API and sign-up)"),
            *tally.trust_rows,
            ("faults injected", str(len(tally.faults)))]
    rows += [(f"- {fault.name}", ("" if fault.ok else "NOT RECOVERED: ") + fault.outcome) for fault in tally.faults]
    rows.append(("runs accepted and followed", str(len(tally.accepted) + (len(drill.accepted) if drill else 0))))
    rows += [(f"{name} (must be 0)", str(value)) for name, value in must_be_zero.items()]
    rows += [(f"load: {name}", value) for name, value in tally.load_rows]
    # Every target counts: a missed latency target fails the report like a lost run.
    ok = faults_ok and not any(must_be_zero.values()) and not tally.targets_missed
    width = max(len(name) for name, _ in rows)
    kind_of_run = "inputs-only" if args.inputs_only else "quick" if args.quick else "full"
    lines = [f"Reliability report ({kind_of_run} run, {os.cpu_count()} cores, "
             f"{wall:.0f} s): {'PASS' if ok else 'FAIL'}", "",
             f"| {'check'.ljust(width)} | result |", f"|{'-' * (width + 2)}|--------|"]
    lines += [f"| {name.ljust(width)} | {value} |" for name, value in rows]
    if tally.rejection_problems:
        lines += ["", "inputs not rejected correctly:", *[f"  {line}" for line in tally.rejection_problems]]
    if tally.name_problems:
        lines += ["", "hostile names not refused correctly:", *[f"  {line}" for line in tally.name_problems]]
    if tally.targets_missed:
        lines += ["", "targets missed (FAIL): " + "; ".join(tally.targets_missed)]
    return "\n".join(lines), ok


# Main -------------------------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer reader requests and a shorter outage")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432", help="server URL, no database")
    parser.add_argument("--database", default="evalserver_reliability",
                        help="scratch database (dropped and re-created)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database and the temporary folder")
    parser.add_argument("--inputs-only", action="store_true",
                        help="hostile inputs (every kind), staff and sign-in probes and nugget memory only: no load, "
                             "faults, leak probe or burst (a few minutes; what issue 24 changed)")
    return parser.parse_args(argv)


def _interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for name, port in (("PostgreSQL", 5432), ("Redis", 6379), ("RabbitMQ", 5672)):
        if not reachable(port):
            say(f"{name} is not reachable on 127.0.0.1:{port}")
            return 2
    signal.signal(signal.SIGTERM, _interrupt)
    work_dir = Path(tempfile.mkdtemp(prefix="evalserver-reliability-"))
    started = time.monotonic()
    try:
        database_url = scratch_database(args.postgres, args.database)
        tally, drill = run(args, work_dir, database_url)
    except KeyboardInterrupt:
        say("interrupted")
        return 2
    except RuntimeError as error:
        say(f"failed: {error}")
        return 2
    finally:
        if args.keep:
            say(f"kept {work_dir} and database {args.database}")
        else:
            drop_database(args.postgres, args.database)
            shutil.rmtree(work_dir, ignore_errors=True)
    text, ok = table(tally, drill, args, time.monotonic() - started)
    print()
    print(text)
    return 0 if ok else 1


def run(args: argparse.Namespace, work_dir: Path, database_url: str) -> tuple[Tally, Any]:
    var_dir = work_dir / "var"
    base_env = site_env(database_url, var_dir, queue="unused", CACHE_URL=f"rediscache://127.0.0.1:6379/{CACHE_DB}",
                        **FAULT_LIMITS)
    base_env.pop("CELERY_BROKER_URL", None)
    # The report's own cache database starts empty: rate-limit counters of an earlier run in the
    # same hour would otherwise refuse this run's sign-ups (429 instead of the checked answer).
    import redis

    redis.Redis(host="127.0.0.1", port=6379, db=CACHE_DB).flushdb()
    say(f"scratch database {args.database}, files in {work_dir}; seeding three tasks")
    bare = {"username": "vera", "password": uuid4_hex()}
    root = {"username": "root", "password": uuid4_hex()}
    corpus = seed_site(base_env, {"slug": "corpus", "dialogues": 30, "teams": 1, "phase": {"daily_quota": 5},
                                  "bare_staff": bare, "superuser": root})
    kind_slugs = {"stc3": "corpus"}
    for kind in ("response", "metric"):
        kind_slugs[kind] = seed_site(base_env, {"slug": f"corpus-{kind}", "kind": kind,
                                                "member": "corpus-u01"})["task"]
    free = seed_site(base_env, {"slug": "corpus-free", "dialogues": 30, "teams": 1, "team_prefix": "Free"})
    load = seed_site(base_env, {"slug": "rel", "dialogues": 300, "teams": TEAMS + 1, "team_prefix": "Load",
                                "phase": {"daily_quota": DAILY_QUOTA, "ends_in": 900},
                                "board": BOARD_RUNS - TEAMS * DAILY_QUOTA - 1})
    big = seed_site(base_env, {"slug": "big", "dialogues": BIG_DIALOGUES, "teams": 1, "team_prefix": "Big"})
    big_token = next(iter(big["tokens"].values()))
    gold = big_gold(BIG_DIALOGUES)
    tally = Tally()
    db = Database(database_url)
    upload_dir = var_dir / "uploads"
    try:
        with site("redis", base_env, "redis", work_dir) as redis_site:
            worker = redis_site.worker("main")
            redis_site.web()
            say("1. hostile inputs")
            # The corpus's oversized file is sized for a 12 MiB limit; the 20,000-dialogue runs are 17 MB.
            corpus_web = redis_site.web({**redis_site.env, "EVALSERVER_RUN_MAX_BYTES": str(CORPUS_MAX_BYTES)},
                                        name="corpus-web", workers=2, threads=2)
            hostile_inputs(tally, corpus_web, db, next(iter(corpus["tokens"].values())), upload_dir)
            say(f"   {tally.rejected_correctly}/{tally.inputs_tried} rejected correctly")
            say("1. hostile inputs of every kind (issue 24)")
            kind_inputs(tally, corpus_web, db, next(iter(corpus["tokens"].values())), upload_dir, kind_slugs)
            say(f"   {tally.rejected_correctly}/{tally.inputs_tried} rejected correctly")
            say("6. staff without permissions; brute force on the admin's sign-in (issue 24)")
            staff_and_sign_in(tally, corpus_web, "corpus", bare, root)
            # The probes below sign in from this address too: the brute force's counters go.
            for key in redis.Redis(host="127.0.0.1", port=6379, db=CACHE_DB).scan_iter(match="*rl:*"):
                redis.Redis(host="127.0.0.1", port=6379, db=CACHE_DB).delete(key)
            if args.inputs_only:
                say("5. nugget scoring memory (a process per case, issue 24)")
                nugget_memory_rows(tally)
                return tally, None
            say("4. confusable names")
            free_team, free_token = next(iter(free["tokens"].items()))
            confusable_names(tally, redis_site.base_url, db, free_token, free_team, upload_dir, worker)
            say(f"   {tally.names_refused}/{tally.names_tried} refused correctly")
            say("5. leak probe: every board path x every ?phase= class")
            tally.trust("test scores before publication (leak probe)", trust_probes.leak(redis_site.base_url,
                                                                                         redis_site.env))
            # Its runs were made in the database by the probe, not announced by a 202: followed too.
            tally.accepted.update(row[0] for row in db.all("SELECT id FROM tasks_run WHERE name LIKE 'leak-run-%%'"))
            say("5. overflowing values")
            tally.trust("overflow", trust_probes.overflow(
                redis_site.base_url, "corpus-free", free_token, big_gold(30),
                lambda run_id: db.wait_status(run_id, {"done", "failed"}, 60, worker), work_dir))
            tally.accepted.update(row[0] for row in db.all("SELECT id FROM tasks_run WHERE name LIKE 'overflow-%%'"))
            say("3. load: the upload rush")
            load_tokens = dict(sorted(load["tokens"].items()))
            upload_rush(tally, redis_site, db, load_tokens, worker)
            say("3. load: readers of a full board")
            board_load(tally, redis_site, db, load_tokens[sorted(load_tokens)[-1]], worker, args.quick)
            say("2. faults over Redis: hung worker, killed worker, broker down")
            worker.stop()
            other = fault_hung(tally, redis_site, db, big_token, gold)
            other.stop()
            survivor = fault_kill(tally, redis_site, db, big_token, gold, "redis")
            fault_broker_down(tally, redis_site, db, next(iter(free["tokens"].values())), "redis", survivor)
        with site("backlog", base_env, "redis", work_dir) as backlog_site:
            say("5. requeue_stuck under a backlog")
            backlog_site.web(workers=1, threads=2)
            free_team, free_token = next(iter(free["tokens"].items()))
            text, ids, problems = trust_probes.requeue_backlog(
                backlog_site.base_url, "corpus-free", free_token, big_gold(30), backlog_site.broker_url,
                backlog_site.queue, backlog_site.requeue_stuck, db.sql, lambda: backlog_site.worker("backlog"))
            tally.trust("requeue_stuck under a backlog", (text, problems))
            tally.accepted.update(ids)
        with site("rabbitmq", base_env, "rabbitmq", work_dir) as rabbit_site:
            rabbit_site.web(workers=2, threads=2)
            say("2. faults over RabbitMQ: killed worker, broker down")
            survivor = fault_kill(tally, rabbit_site, db, big_token, gold, "rabbitmq")
            fault_broker_down(tally, rabbit_site, db, next(iter(free["tokens"].values())), "rabbitmq", survivor)
        account(tally, db)
    finally:
        db.close()
    say("5. nugget scoring memory (a process per case, issue 24)")
    nugget_memory_rows(tally)
    say("5. memory per upload (a process per case) and readers during hostile uploads")
    lines, ok = upload_memory.memory_table(skip_before=True)
    tally.trust("memory per upload (target <= 10x the file)", (trust_probes.table_lines(lines), int(not ok)))
    lines, ok = upload_memory.reader_table(args.postgres)
    tally.trust("readers during 4 hostile uploads (target p95 <= 2x idle)",
                (trust_probes.table_lines(lines), int(not ok)))
    say("5. burst statistics: 10 uploads in 5 s, gunicorn + PostgreSQL + a Celery worker")
    shape, burst = statistics_burst.run_burst(f"{args.postgres}/{args.database}_burst", BROKERS["redis"][2])
    tally.trust("burst statistics (10 uploads in 5 s)",
                (f"{shape}: " + "; ".join(" ".join(line.split()) for line in burst.lines()), int(not burst.passed)))
    drill = None
    if postgres_bin() is None:
        tally.faults.append(Fault("PostgreSQL restart under traffic", False, "initdb/pg_ctl not installed"))
    else:
        say("2. faults: PostgreSQL restart under traffic, on a private cluster")
        outage = 3.0 if args.quick else 5.0
        drill = postgres_restart_drill(work_dir / "pg", BROKERS["redis"][2], new_queue("evalserver-reliability-pg"),
                                       outage=outage, readers_per_path=1 if args.quick else 3, fast=False,
                                       big_dialogues=BIG_DIALOGUES, log=say)
        during = sum(drill.during.values())
        refused = sum(count for (_, status, _), count in drill.during.items() if status not in (200, 202))
        kinds: Counter = Counter()
        for (_, status, _), count in drill.during.items():
            if status not in (200, 202):
                kinds[status] += count
        ok = drill.unclean == 0 and drill.failed_after == 0 and drill.lost == 0 and drill.processes_kept
        tally.faults.append(Fault(
            "PostgreSQL restart under traffic (private cluster)", ok,
            f"down {drill.outage_seconds:.1f} s with a 20,000-dialogue run being scored; {during} requests, "
            f"{refused} refused cleanly ({dict(kinds)}: JSON errors from the API, the error page elsewhere), "
            f"{drill.unclean} unclean; healthy {drill.recovery_seconds:.1f} s after the restart, no process "
            f"restarted: {drill.processes_kept}; {len(drill.accepted)} runs accepted around it, all scored: "
            f"{drill.lost == 0}; left 'scoring' by the cut and re-sent by requeue_stuck: {drill.requeued or 'none'}"))
    return tally, drill


if __name__ == "__main__":
    sys.exit(main())
