"""vBLEU from the web (issue 15): what the background job with its progress costs over the command.

    .venv/bin/python benchmarks/pool_job.py                          # 200,000 pairs, 1,000 items, twice
    .venv/bin/python benchmarks/pool_job.py --pairs 1000000 --rounds 1

Sets up the embedded default in a scratch ``EVALSERVER_VAR_DIR`` (SQLite, no broker): a response
task whose gold has ``--items`` items made like ``benchmarks/vbleu_speed.py``'s (same generator,
same pool). Then, in turns, in one process:

* **command**: ``kinds.response.extension_jobs.build_vbleu_version`` from the pool file, without progress (what
  ``manage.py build_vbleu`` does, minus its terminal bar);
* **job**: the same pool uploaded (``submit_pool_job``, which keeps the upload first) and built
  by the job in a thread of this process (``EVALSERVER_POOL_JOB_MODE=thread``: the quickstart's
  web server), its progress written to the database, while this thread reads the job's state
  every 0.5 s as the page does; from the upload until the state says done.

Both extend version 1 with the same settings; the new versions must hold the same bytes. Prints
each round's wall times, the job/command ratio (the figure to compare: the machine may be
shared), the job's stage times and how many progress reads saw the job running.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200_000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="pool-job-bench-"))
    os.environ.update(EVALSERVER_VAR_DIR=str(workdir / "var"), DJANGO_SETTINGS_MODULE="evalserver.settings",
                      EVALSERVER_STATISTICS_MODE="off", EVALSERVER_POOL_JOB_MODE="thread", DJANGO_SECURE="false")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("CELERY_BROKER_URL", None)
    import django

    django.setup()
    import orjson
    from django.core.files import File
    from django.core.management import call_command

    from benchmarks.vbleu_speed import Generator, write_pool
    from kinds.response.extension_jobs import build_vbleu_version, submit_pool_job
    from kinds.response.models import PoolJob
    from kinds.response.views import job_state
    from scoring.kinds.response import vbleu
    from scoring.kinds.response.nlp import load_pipeline, pipeline_vectors
    from tasks.models import GoldVersion
    from tasks.organising import create_task, load_gold_version

    call_command("migrate", verbosity=0)
    generator = Generator(pipeline_vectors(load_pipeline()), args.seed)
    pool_path = workdir / "pool.jsonl"
    write_pool(pool_path, generator, args.pairs)
    utterances, responses = generator.pairs(args.items)
    gold = [{"id": f"i{n}", "context": [{"sender": "user", "text": utterance}],
             "references": [{"text": response, "weight": 1.0}]} for n, (utterance, response) in
            enumerate(zip(utterances, responses))]
    task = create_task("bench", "response", "Benchmark", kind="response")
    load_gold_version(task, orjson.dumps(gold), "gold.json")
    retrieval, rater = vbleu.RetrievalSettings(), vbleu.RaterSettings()
    options = {"from_version": 1, "label": "", "phases": [], "name": "pool.jsonl",
               "retrieval": retrieval.to_dict(), "rater": rater.to_dict()}

    def command() -> tuple[float, GoldVersion]:
        start = time.perf_counter()
        built = build_vbleu_version(task, pool_path, from_version=1, retrieval=retrieval, rater=rater)
        return time.perf_counter() - start, built.version

    def job() -> tuple[float, GoldVersion, PoolJob, int, int]:
        start = time.perf_counter()
        with pool_path.open("rb") as stream:
            created = submit_pool_job(user=None, task=task, upload=File(stream, name="pool.jsonl"), options=options)
        reads = running = 0
        while True:
            current = PoolJob.objects.get(pk=created.pk)
            state = job_state(current)
            reads += 1
            running += any(stage["state"] == "running" for stage in state["stages"])
            if current.finished:
                break
            time.sleep(0.5)
        seconds = time.perf_counter() - start
        if current.status != PoolJob.DONE:
            raise SystemExit(f"the job failed: {current.errors}")
        return seconds, current.version, current, reads, running

    load = os.getloadavg()
    print(f"Pool of {args.pairs:,} pairs ({pool_path.stat().st_size / 1024**2:,.0f} MB), {args.items:,} items; "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores\n")
    print("| round | command (s) | job, upload to done (s) | job / command | progress reads (running) |")
    print("|---:|---:|---:|---:|---|")
    ratios = []
    last_job = None
    for number in range(1, args.rounds + 1):
        command_seconds, command_version = command()
        job_seconds, job_version, last_job, reads, running = job()
        assert job_version.sha256 == command_version.sha256, "the job and the command made different golds"
        ratios.append(job_seconds / command_seconds)
        print(f"| {number} | {command_seconds:.1f} | {job_seconds:.1f} | {ratios[-1]:.3f} | {reads} ({running}) |")
    print("\nStages of the last job (s): " + ", ".join(f"{stage} {seconds:.1f}" for stage, seconds in
                                                      last_job.stages_done))
    print(f"Median job / command: {sorted(ratios)[len(ratios) // 2]:.3f}; the same gold bytes every round.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
