"""Part 3 of the reliability report: the upload rush near a deadline and readers of the
leaderboard (Python readers and wrk), judged against the latency targets.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from pathlib import Path

from benchmarks.reliability_site import DAILY_QUOTA, JSON_TARGET_P95, TEAMS, UPLOADS_PER_TEAM, Database, Site, Tally
from devtools.workers import (  # noqa: E402
    LoadResult,
    Process,
    Reply,
    big_gold,
    big_run,
    call,
    read_load_processes,
    upload,
    wait_until,
)

# 3. Load ---------------------------------------------------------------------------------------------------

def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def describe(result: LoadResult) -> str:
    answered = {status: count for status, count in result.statuses.items() if status in (200, 304)}
    others = {status: count for status, count in result.statuses.items() if status not in (200, 304)}
    kinds = ", ".join(f"{count} x {status}" for status, count in sorted(answered.items()))
    return (f"{result.requests} requests, {result.throughput:.0f}/s, p50 {ms(result.percentile(0.5))}, "
            f"p95 {ms(result.percentile(0.95))}, {kinds}" + (f", NOT ANSWERED: {others}" if others else ""))


WRK_SCRIPT = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRK %d %d %d %d %d %d\\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(95), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout + e.status))
end
"""


def wrk_load(url: str, connections: int, seconds: int, headers: dict[str, str],
             work_dir: Path) -> tuple[str, float] | None:
    """Saturate ``url`` with ``connections`` keep-alive connections from wrk, a C load generator that
    needs little CPU, so that the figure is the server's and not the Python readers' (which share
    the same two cores). None when wrk is not installed (Debian package ``wrk``)."""
    import subprocess

    if shutil.which("wrk") is None:
        return None
    script = work_dir / "report.lua"
    script.write_text(WRK_SCRIPT)
    command = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s", "-s", str(script)]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    output = subprocess.run([*command, url], capture_output=True, text=True, timeout=seconds + 60).stdout
    line = next((line for line in output.splitlines() if line.startswith("WRK ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no summary: {output[-300:]!r}")
    requests, duration, p50, p95, p99, errors = (int(value) for value in line.split()[1:])
    return (f"{requests} requests, {requests / (duration / 1e6):.0f}/s, p50 {p50 / 1000:.0f} ms, "
            f"p95 {p95 / 1000:.0f} ms, p99 {p99 / 1000:.0f} ms, errors or non-2xx/3xx: {errors}"), p95 / 1e6


def upload_rush(tally: Tally, site: Site, db: Database, tokens: dict[str, str], worker: Process) -> None:
    import orjson

    from fixtures.synthetic import generate_run

    gold = big_gold(300)
    teams = sorted(tokens)[:TEAMS]
    contents = {(team, k): orjson.dumps(generate_run(gold, "noisy", noise=0.1 + 0.15 * k, seed=100 * i + k))
                for i, team in enumerate(teams) for k in range(UPLOADS_PER_TEAM)}
    gate = threading.Barrier(len(contents))
    replies: dict[tuple[str, int], Reply] = {}
    lock = threading.Lock()

    def send(key: tuple[str, int]) -> None:
        gate.wait(timeout=60)
        reply = upload(site.base_url, "rel", tokens[key[0]], contents[key], f"{key[0]}-{key[1]}")
        with lock:
            replies[key] = reply

    threads = [threading.Thread(target=send, args=(key,)) for key in contents]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    answered = time.monotonic() - started
    for reply in replies.values():
        tally.see(reply)
    statuses = Counter(reply.status for reply in replies.values())
    accepted = [reply.json()["id"] for reply in replies.values() if reply.status == 202]
    tally.accepted.update(accepted)
    for team in teams:
        got = sum(replies[(team, k)].status == 202 for k in range(UPLOADS_PER_TEAM))
        refused = [replies[(team, k)] for k in range(UPLOADS_PER_TEAM) if replies[(team, k)].status == 429]
        if got != DAILY_QUOTA or len(refused) != UPLOADS_PER_TEAM - DAILY_QUOTA or not all(
                "quota" in reply.json()["errors"][0] for reply in refused):
            tally.quota_violations += 1
    stored = db.one("SELECT count(*) FROM tasks_run r JOIN tasks_phase p ON p.id = r.phase_id JOIN tasks_task t "
                    "ON t.id = r.task_id WHERE t.slug = 'rel' AND r.name NOT LIKE 'board-%%' "
                    "AND r.name <> 'seed-run'")
    if stored != len(accepted):
        tally.quota_violations += abs(stored - len(accepted))
    wait_until("every accepted run to be scored", lambda: not db.one(
        "SELECT count(*) FROM tasks_run WHERE id = ANY(%s) AND status <> 'done'", accepted), 120, worker)
    scored = time.monotonic() - started
    other = {status: count for status, count in statuses.items() if status not in (202, 429)} or "none"
    latencies = sorted(reply.seconds for reply in replies.values())
    rush = LoadResult(latencies=latencies)
    tally.load_rows.append((
        f"{TEAMS} teams x {UPLOADS_PER_TEAM} simultaneous uploads, quota {DAILY_QUOTA}/day",
        f"{statuses.get(202, 0)} accepted (202), {statuses.get(429, 0)} refused (429), other {other}; "
        f"answers p50 {ms(rush.percentile(0.5))}, "
        f"p95 {ms(rush.percentile(0.95))}, all in {answered:.1f} s; all {len(accepted)} scored {scored:.1f} s "
        f"after the first upload"))


def _verdict(tally: Tally, label: str, p95: float, judged: str) -> str:
    """The JSON target is judged on one kind of reader (gzip, from wrk when installed)."""
    if label != judged:
        return ""
    tally.targets_judged.append(label)
    if p95 > JSON_TARGET_P95:
        tally.targets_missed.append(f"leaderboard JSON ({label}) p95 {ms(p95)} > {ms(JSON_TARGET_P95)}")
    return f" (target p95 <= {ms(JSON_TARGET_P95)}: {'met' if p95 <= JSON_TARGET_P95 else 'MISSED'})"


def board_load(tally: Tally, site: Site, db: Database, late_token: str, worker: Process, quick: bool) -> None:
    json_path, page_path = "/api/v1/tasks/rel/leaderboard/", "/tasks/rel/"
    board = call(site.base_url + json_path).json()
    rows = len(board["runs"])
    readers = 50
    count = 10 if quick else 40
    # Saturated: each reader asks again as soon as it is answered (a closed loop: latency is then
    # readers / throughput, so this measures the server's capacity). Three kinds of client:
    # "plain" asks for the identity encoding (645 kB a body for 500 runs; the worst case), "gzip"
    # accepts gzip like browsers and HTTP libraries do, "revalidating" also sends back the ETag
    # (a browser refreshing the page). Paced: each pauses 0.5 s between requests, like people
    # refreshing a page near a deadline. The JSON target is judged on the gzip readers.
    runs = [("saturated, plain", dict(client="plain")),
            ("saturated, gzip", dict(client="gzip")),
            ("saturated, gzip + ETag revalidation", dict(client="revalidating")),
            ("paced 0.5 s, plain", dict(client="plain", pause=0.5))]
    # wrk (when installed) measures the server alone: the Python readers above spend about as
    # much CPU as the server on the same two cores, so their latencies are partly their own.
    etag = call(site.base_url + json_path).headers.get("etag", "")
    wrk_runs = [("wrk, 50 connections, plain", {}),
                ("wrk, 50 connections, gzip", {"Accept-Encoding": "gzip"}),
                ("wrk, 50 connections, gzip + If-None-Match", {"Accept-Encoding": "gzip", "If-None-Match": etag})]
    judged = "wrk, 50 connections, gzip" if shutil.which("wrk") else "saturated, gzip"
    for label, options in runs:
        result = read_load_processes(site.base_url, [json_path], readers, count, processes=4, **options)
        p95 = result.percentile(0.95)
        tally.unclean += result.statuses.get(0, 0)
        tally.load_rows.append((f"leaderboard JSON, {rows} runs, {readers} readers, {label}",
                                describe(result) + _verdict(tally, label, p95, judged)))
    for label, headers in wrk_runs:
        measured = wrk_load(site.base_url + json_path, readers, 5 if quick else 15, headers, site.work_dir)
        if measured is not None:
            tally.load_rows.append((f"leaderboard JSON, {rows} runs, {label}",
                                    measured[0] + _verdict(tally, label, measured[1], judged)))
    if judged not in tally.targets_judged:  # wrk failed, say: a target nobody measured is not met
        tally.targets_missed.append(f"leaderboard JSON p95 target not measured ({judged} gave no figure)")
    page_load = read_load_processes(site.base_url, [page_path], readers, 4 if quick else 10, processes=4,
                                    timeout=180, client="gzip")
    tally.unclean += page_load.statuses.get(0, 0)
    tally.load_rows.append((f"leaderboard page (HTML), {rows} runs, {readers} readers, saturated",
                            describe(page_load)))
    measured = wrk_load(site.base_url + page_path, readers, 5 if quick else 15, {"Accept-Encoding": "gzip"},
                        site.work_dir)
    if measured is not None:
        tally.load_rows.append((f"leaderboard page (HTML), {rows} runs, wrk, 50 connections", measured[0]))
    # A new score reaches the cached JSON at once: its cache key follows the task's scores.
    reply = tally.see(upload(site.base_url, "rel", late_token, big_run(big_gold(300), seed=555), "late-run"))
    if reply.status != 202:
        raise RuntimeError(f"late upload answered {reply.status}: {reply.body[:300]!r}")
    run_id = reply.json()["id"]
    tally.accepted.add(run_id)
    db.wait_status(run_id, {"done"}, 30, worker)
    done_at = time.monotonic()
    wait_until("the new run on the leaderboard JSON",
               lambda: any(entry["id"] == run_id for entry in call(site.base_url + json_path).json()["runs"]), 10)
    tally.load_rows.append(("new score on the cached leaderboard JSON",
                            f"shown {ms(time.monotonic() - done_at)} after the run was done ({rows + 1} runs)"))
