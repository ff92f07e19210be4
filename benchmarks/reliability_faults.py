"""Part 2 of the reliability report: a worker killed or hung mid-scoring and the broker down at
upload time; every accepted run must end scored exactly once.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.reliability_site import Database, Fault, Site, Tally
from devtools.workers import (  # noqa: E402
    FAULT_LIMITS,
    VECTORS_PER_SCORE,
    Process,
    big_gold,
    big_run,
    free_port,
    queue_length,
    upload,
)

# 2. Faults ------------------------------------------------------------------------------------------------

def scored_once(db: Database, run_id: int) -> list[str]:
    status, attempts = db.one("SELECT status, attempts FROM tasks_run WHERE id = %s", run_id)
    problems = [] if status == "done" else [f"run {run_id} is {status}"]
    scopes = [row[0] for row in db.all("SELECT s.scope FROM tasks_score s JOIN tasks_run r ON r.id = s.run_id "
                                       "WHERE s.run_id = %s AND s.gold_version_id = r.gold_version_id", run_id)]
    if "full" not in scopes or len(scopes) != len(set(scopes)):
        problems.append(f"run {run_id} has scores {scopes}")
    vectors = db.one("SELECT count(*) FROM tasks_scorevector v JOIN tasks_score s ON s.id = v.score_id "
                     "WHERE s.run_id = %s AND s.scope = 'full'", run_id)
    if vectors != VECTORS_PER_SCORE:
        problems.append(f"run {run_id} has {vectors} vectors")
    return problems


def caught_mid_scoring(tally: Tally, site: Site, db: Database, token: str, worker: Process, act: Any,
                       gold: list) -> int:
    """Upload a 20,000-dialogue run and ``act`` (kill, pause) the moment its status says scoring."""
    for attempt in range(3):
        reply = tally.see(upload(site.base_url, "big", token, big_run(gold, noise=0.2 + 0.1 * attempt,
                                                                       seed=attempt + 40), f"big-{attempt}",
                                 timeout=120))
        if reply.status != 202:
            raise RuntimeError(f"big upload answered {reply.status}: {reply.body[:300]!r}")
        run_id = reply.json()["id"]
        tally.accepted.add(run_id)
        db.wait_status(run_id, {"scoring", "done", "failed"}, 60, worker, interval=0.002)
        act()
        if db.status(run_id) == "scoring" and not db.one("SELECT count(*) FROM tasks_score WHERE run_id = %s",
                                                           run_id):
            return run_id
    raise RuntimeError("three times the fault came after the end of scoring")


def stale_wait(db: Database, run_id: int) -> None:
    limit = float(FAULT_LIMITS["EVALSERVER_SCORING_TIME_LIMIT"]) + float(FAULT_LIMITS["EVALSERVER_STALE_GRACE_SECONDS"])
    age = db.one("SELECT EXTRACT(EPOCH FROM now() - started_at) FROM tasks_run WHERE id = %s", run_id)
    time.sleep(max(0.0, limit - float(age) + 0.3))


def fault_kill(tally: Tally, site: Site, db: Database, token: str, gold: list, broker: str) -> Process:
    """SIGKILL the worker mid-scoring; a new worker (and, on Redis, requeue_stuck) must finish the run."""
    first = site.worker("doomed")
    run_id = caught_mid_scoring(tally, site, db, token, first, first.kill, gold)
    killed = time.monotonic()
    second = site.worker("after-kill")
    how = "redelivered at once, retried when the dead attempt went stale"
    early: list[int] = []
    requeued: list[int] = []
    if broker == "redis":
        early = site.requeue_stuck()
        stale_wait(db, run_id)
        requeued = site.requeue_stuck()
        how = f"requeue_stuck once stale (before: {len(early)} re-sent, then {requeued})"
    status = db.wait_status(run_id, {"done", "failed"}, 40, second)
    took = time.monotonic() - killed
    attempts = db.one("SELECT attempts FROM tasks_run WHERE id = %s", run_id)
    problems = scored_once(db, run_id) + ([] if attempts >= 2 else [f"attempts {attempts}"])
    if broker == "redis" and (early or requeued != [run_id]):
        problems.append(f"requeue_stuck re-sent {early} before and {requeued} after the claim went stale")
    tally.faults.append(Fault(f"worker SIGKILL mid-scoring ({broker})", not problems and status == "done",
                              f"run {status} {took:.1f} s after the kill, attempts {attempts}; {how}"
                              + (f"; PROBLEMS: {problems}" if problems else "")))
    return second


def fault_hung(tally: Tally, site: Site, db: Database, token: str, gold: list) -> Process:
    """A worker stops (SIGSTOP) while scoring: past the time limit requeue_stuck hands the run to another
    worker; the hung one, resumed, must not write its late result."""
    hung = site.worker("hung")
    run_id = caught_mid_scoring(tally, site, db, token, hung, hung.pause, gold)
    paused = time.monotonic()
    other = site.worker("takes-over")
    early = site.requeue_stuck()
    stale_wait(db, run_id)
    requeued = site.requeue_stuck()
    status = db.wait_status(run_id, {"done", "failed"}, 40, other)
    took = time.monotonic() - paused
    finished = db.one("SELECT finished_at FROM tasks_run WHERE id = %s", run_id)
    hung.resume()
    hung.wait_for_log("skipped: another attempt took the run over", timeout=40)
    late_write = db.one("SELECT finished_at FROM tasks_run WHERE id = %s", run_id) != finished
    attempts = db.one("SELECT attempts FROM tasks_run WHERE id = %s", run_id)
    problems = scored_once(db, run_id) + (["the late attempt wrote"] if late_write else [])
    tally.faults.append(Fault("worker hung past the time limit (SIGSTOP, redis)", not problems and not early
                              and requeued == [run_id],
                              f"requeue_stuck re-sent it once stale ({len(early)} before); run {status} "
                              f"{took:.1f} s after the hang, attempts {attempts}; late result refused"
                              + (f"; PROBLEMS: {problems}" if problems else "")))
    hung.stop()
    return other


def fault_broker_down(tally: Tally, site: Site, db: Database, token: str, broker: str, worker: Process) -> None:
    """Uploads through a web process whose broker address is dead: accepted and kept, or refused;
    an accepted run is scored once requeue_stuck runs with the broker back."""
    dead_url = ("amqp://guest:guest@127.0.0.1:{}//" if broker == "rabbitmq"
                else "redis://127.0.0.1:{}/13").format(free_port())
    dead_web = site.web({**site.env, "CELERY_BROKER_URL": dead_url}, name="dead-broker-web", workers=1, threads=2)
    gold = big_gold(30)
    reply = tally.see(upload(dead_web, "corpus-free", token, big_run(gold, seed=61), f"broker-down-{broker}"))
    if reply.status == 202:
        run_id = reply.json()["id"]
        tally.accepted.add(run_id)
        queued = db.status(run_id)
        on_queue = queue_length(site.broker_url, site.queue)
        # celery beat runs requeue_stuck every minute and re-sends runs queued for two minutes:
        # age the run instead of waiting.
        db.one("UPDATE tasks_run SET queued_at = now() - interval '3 minutes' WHERE id = %s RETURNING id", run_id)
        requeued = site.requeue_stuck()
        status = db.wait_status(run_id, {"done", "failed"}, 30, worker)
        problems = scored_once(db, run_id)
        tally.faults.append(Fault(f"broker down at upload ({broker})", not problems and queued == "queued"
                                  and on_queue == 0 and requeued == [run_id],
                                  f"accepted (202 in {reply.seconds:.1f} s), kept queued, {status} after "
                                  f"requeue_stuck" + (f"; PROBLEMS: {problems}" if problems else "")))
    else:
        clean = reply.status in (503,) and "errors" in reply.body.decode(errors="replace")
        tally.faults.append(Fault(f"broker down at upload ({broker})", clean,
                                  f"refused with {reply.status}: {reply.body[:120]!r}"))
