#!/usr/bin/env python3
"""Upload to stored score while statistics compute, in the documented production shape (issue 43,
item 3; ``docs/operators/deployment.md`` and ``docs/capacity.md`` quote its figures).

The production shape as the operators' page starts it: gunicorn (``gunicorn.conf.py``), a scratch
PostgreSQL database, Redis as broker (database 13, queues of its own) and shared cache (database 9),
files in an S3 bucket (moto's server), and the Celery workers given by ``--shape``:

- ``docs``: the worker commands of the page's "Without Docker" section, read from the page (two
  workers: ``-Q celery --concurrency=2`` for scoring, ``-Q celery-heavy --concurrency=1``);
- ``both``: ``celery -A evalserver.celery worker``, one worker for both queues (the page before
  issue 43, and what the audit ran).

Statistics are real (no planted delay): ``--boards`` DQ/ND boards of ``--board-runs`` runs x 390
dialogues each (scores copied from one scored run, ``devtools.workers.fill_board``); one upload to each
asks for its statistics, as in a round where several tasks take runs at once. Once a computation
has started, ``--probes`` DQ/ND runs of 390 dialogues are uploaded to a third task, one every
``--every`` seconds, each timed from the start of its upload to its stored score (``Run.finished_at``
in the database; the probes' own statistics are asked for too, as every scored run's are).

    .venv/bin/python benchmarks/scoring_beside_statistics.py                # both shapes
    .venv/bin/python benchmarks/scoring_beside_statistics.py --shape docs --probes 4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from capacity import CACHE_DB, Site, gold_of, run_content, upload_all, wait_scored  # noqa: E402

from devtools.workers import (  # noqa: E402
    PYTHON,
    ObjectStore,
    Process,
    deployment_page_workers,
    documented_worker_argv,
    drop_database,
    reachable,  # noqa: E402
    scratch_database,
    wait_until,
)

SHAPES = {"docs": "the operators' page: one worker per queue",
          "both": "one worker for both queues (celery -A evalserver.celery worker)"}


def say(message: str) -> None:
    print(f"[scoring-beside-statistics] {message}", flush=True)


def seed(boards: int, board_runs: int) -> dict[str, Any]:
    """Inside Django (``python benchmarks/scoring_beside_statistics.py seed B N``)."""
    import django
    import orjson

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from devtools.workers import fill_board
    from tasks import jobs, organising, submissions
    from tasks.models import Team
    from tasks.tokens import issue_token

    call_command("migrate", verbosity=0, interactive=False)
    user = get_user_model().objects.create_user("bench", password=uuid.uuid4().hex)
    team = Team.objects.create(name="Bench", slug="bench")
    team.members.add(user)
    gold = gold_of("stc3")
    others = [Team.objects.create(name=f"Archive {number:02d}", slug=f"archive-{number:02d}") for number in range(10)]
    slugs = [f"board-{number}" for number in range(boards)] + ["probe"]
    for slug in slugs:
        task = organising.create_task(slug, title=slug, kind="stc3")
        organising.load_gold_version(task, orjson.dumps(gold), "gold.json")
        jobs.score_run(submissions.submit_run(task, user, submissions.Submission(
            content=run_content("stc3", gold, 0), filename="seed.json", name="seed-run")).pk)
        if slug != "probe":
            fill_board(task, board_runs, others)
    return {"token": issue_token(user), "slugs": slugs}


def worker_commands(shape: str) -> list[str]:
    if shape == "both":
        return ["celery -A evalserver.celery worker"]
    return deployment_page_workers((ROOT / "docs/operators/deployment.md").read_text())


def measure(site: Site, token: str, slugs: list[str], shape: str, probes: int, every: float,
            round_number: int) -> dict[str, Any]:
    gold = gold_of("stc3")
    env_extra = {"EVALSERVER_STATISTICS_DEBOUNCE_SECONDS": "1"}
    workers = []
    for number, command in enumerate(worker_commands(shape)):
        node = f"{shape}{number}-{uuid.uuid4().hex[:4]}"
        env = {**site.env(node, "celery"), **env_extra}
        workers.append(Process(f"worker {node}", documented_worker_argv(command, site.queue, node), env,
                               site.work / f"{node}.log"))
    site.processes.extend(workers)
    for worker in workers:
        worker.wait_for_log(" ready.", timeout=120)

    def computing() -> int:
        return site.rows("SELECT count(*) FROM leaderboard_statisticsstate WHERE claim_token <> ''")[0][0]

    boards = [slug for slug in slugs if slug != "probe"]
    offset = 1000 * round_number
    # One upload per board: scored, each asks for its board's statistics.
    wait_scored(site, [upload_all(site, token, slug, [run_content("stc3", gold, offset + index)], f"{shape}-load",
                                  clients=1)[0] for index, slug in enumerate(boards)])
    wait_until("a statistics computation to start", lambda: computing() > 0, 300, *workers, interval=0.05)
    timings: list[dict[str, Any]] = []
    lock = threading.Lock()

    def probe(number: int) -> None:
        content = run_content("stc3", gold, offset + 100 + number)
        began = time.time()
        run_id = upload_all(site, token, "probe", [content], f"{shape}-probe-{number}", clients=1)[0]
        busy = computing()
        wait_scored(site, [run_id], timeout=900)
        finished = site.rows("SELECT extract(epoch FROM finished_at), extract(epoch FROM started_at) "
                             "FROM tasks_run WHERE id = %s", (run_id,))[0]
        with lock:
            timings.append({"seconds": float(finished[0]) - began, "scoring": float(finished[0]) - float(finished[1]),
                            "statistics_computing_at_upload": busy})

    threads = []
    for number in range(probes):
        thread = threading.Thread(target=probe, args=(number,))
        thread.start()
        threads.append(thread)
        time.sleep(every)
    for thread in threads:
        thread.join()
    site.stop(workers)
    seconds = sorted(item["seconds"] for item in timings)
    return {"shape": shape, "workers": worker_commands(shape), "probes": len(timings),
            "upload_to_score_median": round(statistics.median(seconds), 2),
            "upload_to_score_max": round(seconds[-1], 2),
            "upload_to_score_all": [round(value, 1) for value in seconds],
            "scoring_median": round(statistics.median(item["scoring"] for item in timings), 2),
            "statistics_computing_at_uploads": [item["statistics_computing_at_upload"] for item in timings],
            "load": round(os.getloadavg()[0], 2)}


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "seed":
        print(json.dumps(seed(int(sys.argv[2]), int(sys.argv[3]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server URL")
    parser.add_argument("--database", default="evalserver_beside_statistics", help="scratch database")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--shape", choices=[*SHAPES, "all"], default="all")
    parser.add_argument("--boards", type=int, default=2, help="boards whose statistics compute at once")
    parser.add_argument("--board-runs", type=int, default=40, help="runs on each of those boards")
    parser.add_argument("--probes", type=int, default=6, help="timed uploads per shape")
    parser.add_argument("--every", type=float, default=4.0, help="seconds between timed uploads")
    args = parser.parse_args()
    if not reachable(5432) or not reachable(6379):
        say("needs PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379")
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    import redis

    redis.Redis(port=6379, db=CACHE_DB).flushdb()
    work = Path(tempfile.mkdtemp(prefix="evalserver-beside-statistics-"))
    store = ObjectStore(work / "moto.log")
    database_url = scratch_database(args.server, args.database)
    site = Site(work, database_url, args.broker, store)
    results = []
    try:
        say(f"seeding {args.boards} boards of {args.board_runs} runs x 390 dialogues")
        env = {key: value for key, value in site.env("seed", "off").items() if key != "CELERY_BROKER_URL"}
        completed = subprocess.run([PYTHON, str(Path(__file__).resolve()), "seed", str(args.boards),
                                    str(args.board_runs)], cwd=ROOT, env=env, capture_output=True, text=True,
                                   timeout=1800)
        if completed.returncode:
            raise RuntimeError(completed.stderr[-3000:])
        seeded = json.loads(completed.stdout.strip().splitlines()[-1])
        site.start_web("celery")
        for number, shape in enumerate(SHAPES if args.shape == "all" else [args.shape]):
            say(f"{shape}: {SHAPES[shape]}")
            row = measure(site, seeded["token"], seeded["slugs"], shape, args.probes, args.every, number + 1)
            results.append(row)
            say(f"  upload to stored score: median {row['upload_to_score_median']} s, max "
                f"{row['upload_to_score_max']} s, all {row['upload_to_score_all']} (scoring itself: median "
                f"{row['scoring_median']} s; statistics computing at each upload: "
                f"{row['statistics_computing_at_uploads']}; load {row['load']})")
    finally:
        site.close()
        store.stop()
        drop_database(args.server, args.database)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"cores": os.cpu_count(), "boards": args.boards, "board_runs": args.board_runs,
                      "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
