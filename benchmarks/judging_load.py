#!/usr/bin/env python3
"""Judging under load on the embedded default (issue 40, done means): 20 assessors saving at once
through the judging page, the p95 of a save, and the judgements lost when the server is killed
with -9 in the middle of the campaign (must be 0).

Sets everything up in a temporary ``EVALSERVER_VAR_DIR`` (its own SQLite database, the embedded
default): a DQ/ND task, a campaign of ``--dialogues`` dialogues judged ``-k`` times, ``--assessors``
assessors with passwords. Starts gunicorn as ``dev.py serve`` does (``gunicorn.conf.py``: its web
processes, the scoring and statistics workers) and every assessor, a process of its own with its
own connection and cookies (as twenty browsers on twenty machines; threads of one process would
queue for its interpreter lock), signs in, loads its first item and then, ``--answers`` times,
saves a whole answer as the page's script does: one POST asking for JSON, then a GET of the next
item the reply names. The POST's time, from sending to the reply's last byte, is the save time.
Then the assessors go on and the server's processes are all killed with SIGKILL mid-stream; every
answer acknowledged before (a 200 with ``"saved": true``) must be in the database after the server
is started again, read by a separate process.

    .venv/bin/python benchmarks/judging_load.py
    .venv/bin/python benchmarks/judging_load.py --assessors 20 --answers 15 --kill-after 3

Measured 2026-11-29: the figures are in docs/organisers/campaigns.md.
"""

from __future__ import annotations

import argparse
import http.client
import http.cookies
import json
import multiprocessing
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
PASSWORD = "judge-pass-1"  # noqa: S105 (made-up accounts of a throwaway database)
TARGET_MS = 100.0
SETUP = """
import django, orjson
django.setup()
from django.contrib.auth import get_user_model
from campaigns.assignment import open_campaign
from campaigns.building import Plan, create_campaign
from tasks.organising import create_task
n, assessors, k = {dialogues}, {assessors}, {k}
users = get_user_model()
names = [f"judge{{i:02d}}" for i in range(1, assessors + 1)]
for name in names:
    users.objects.create_user(name, password="{password}")
task = create_task("judging-bench", "stc3", "Judging benchmark")
dialogues = [{{"id": f"d{{i}}", "turns": [{{"sender": "customer", "utterances": [f"My order {{i}} is late."]}},
              {{"sender": "helpdesk", "utterances": ["Sorry, let me check."]}},
              {{"sender": "customer", "utterances": ["Thanks."]}}]}} for i in range(n)]
campaign = create_campaign(task, Plan(name="bench", kind="dialogues", per_item=k, dialogues=orjson.dumps(dialogues),
                                      assessors=names))
open_campaign(campaign)
print(campaign.pk)
"""
SAVED = """
import django, json
django.setup()
from campaigns.models import Judgement
rows = Judgement.objects.select_related("assessor__user", "item")
print(json.dumps(sorted([row.assessor.user.username, row.item.assignments.get(assessor=row.assessor).position]
                        for row in rows)))
"""


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def descendants(pid: int) -> list[int]:
    found, pending = [], [pid]
    while pending:
        parent = pending.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            pending += children
    return found


class Browser:
    """One assessor's browser as far as the server can tell: one kept-alive HTTP connection and its
    cookies. ``http.client``, not requests: the load generator shares the server's cores, and
    requests spent about 3 ms of CPU per answer in it (more than a third of a save's own cost),
    all of it under one interpreter lock for the twenty assessors."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.cookies: dict[str, str] = {}

    def send(self, method: str, path: str, form: dict[str, str] | None = None,
             accept: str = "text/html") -> tuple[int, str, str]:
        """(status, content type, body) of one request, the connection opened again if the server closed it."""
        headers = {"Accept": accept, "Referer": f"http://127.0.0.1:{self.port}/"}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        body = urllib.parse.urlencode(form) if form is not None else None
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        for attempt in (1, 2):
            try:
                self.connection.request(method, path, body=body, headers=headers)
                response = self.connection.getresponse()
                text = response.read().decode("utf-8")
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.connection.close()  # a kept-alive connection the server closed: once more on a new one
                if attempt == 2:
                    raise
        for header in response.headers.get_all("Set-Cookie") or []:
            for name, morsel in http.cookies.SimpleCookie(header).items():
                self.cookies[name] = morsel.value
        return response.status, response.headers.get("Content-Type", ""), text


def assessor(port: int, name: str, campaign: int, answers: int, phases: Any, results: Any,
             together: Any, stop: Any) -> None:
    """One person judging, in a process of its own (so that twenty assessors do not queue for one
    interpreter lock, as threads would): sign in, then for each phase the parent announces, save
    answers and report the save times, the positions acknowledged and the CPU this process spent."""
    browser = Browser(port)
    status, _, page = browser.send("GET", "/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    status, _, _ = browser.send("POST", "/accounts/login/", {"username": name, "password": PASSWORD,
                                                            "csrfmiddlewaretoken": token})
    if status != 302:
        raise RuntimeError(f"{name} could not sign in: {status}")
    results.put(("ready", name))  # signed in (password hashing is not the server's judging work)
    rng = random.Random(name)
    item: str | None = None  # the item on this assessor's page (HTML), when it is known
    while True:
        phase = phases.get()
        if phase is None:
            return
        times: list[float] = []
        acknowledged: list[int] = []
        failures = 0
        cpu = time.process_time()
        done = 0
        limit = 10**6 if phase == "until-stopped" else answers
        while done < limit and not stop.is_set():
            try:
                if item is None:  # the first item, or after a failure: load the page
                    item = browser.send("GET", f"/campaigns/{campaign}/judge/")[2]
                page, item = item, None
                action = re.search(r'action="(/campaigns/\d+/judge/(\d+)/)"', page)
                if action is None:
                    break  # the queue is done
                data = {"csrfmiddlewaretoken": re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1),
                        "shown": re.search(r'name="shown" value="([^"]+)"', page).group(1),
                        "A": "1", "E": "0", "S": "-1"}
                for field, value in re.findall(r'name="(nugget-\d+)" value="([^"]+)"', page):
                    data.setdefault(field, value)
                if phase == "together":
                    together.wait(timeout=120)
                elif phase == "paced":
                    time.sleep(rng.uniform(0.5, 2.0))
                started = time.perf_counter()
                status, kind, text = browser.send("POST", action.group(1), data, accept="application/json")
                elapsed = time.perf_counter() - started
                reply = json.loads(text) if kind.startswith("application/json") else {}
                if status == 200 and reply.get("saved") is True:
                    acknowledged.append(int(action.group(2)))
                    times.append(elapsed)
                    # The page's script then loads the next item's page, which the reply names.
                    item = browser.send("GET", reply["next"])[2]
                else:
                    failures += 1
                done += 1
            except (OSError, http.client.HTTPException, AttributeError, ValueError, threading.BrokenBarrierError):
                failures += 1  # the server is down (killed): try again a little later
                browser.connection.close()
                time.sleep(0.2)
        results.put((name, phase, times, acknowledged, failures, time.process_time() - cpu))


class Assessors:
    """The assessors' processes, told phase by phase what to do."""

    def __init__(self, port: int, names: list[str], campaign: int, answers: int) -> None:
        context = multiprocessing.get_context("fork")
        self.together = context.Barrier(len(names))
        self.stop = context.Event()
        self.results = context.Queue()
        self.queues = {name: context.Queue() for name in names}
        self.processes = [context.Process(target=assessor, daemon=True, args=(
            port, name, campaign, answers, self.queues[name], self.results, self.together, self.stop))
            for name in names]
        for process in self.processes:
            process.start()
        for _ in names:
            self.results.get(timeout=120)

    def run(self, phase: str) -> list[tuple[str, str, list[float], list[int], int, float]]:
        """Start a phase for every assessor; their reports once each has finished it."""
        self.stop.clear()
        for queue in self.queues.values():
            queue.put(phase)
        return [self.results.get(timeout=600) for _ in self.queues]

    def start(self, phase: str) -> None:
        self.stop.clear()
        for queue in self.queues.values():
            queue.put(phase)

    def finish(self) -> list[tuple[str, str, list[float], list[int], int, float]]:
        self.stop.set()
        return [self.results.get(timeout=600) for _ in self.queues]

    def close(self) -> None:
        for queue in self.queues.values():
            queue.put(None)
        for process in self.processes:
            process.join(timeout=30)


def start_server(env: dict[str, str], port: int, log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        server = subprocess.Popen([PYTHON, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"), "--chdir", str(ROOT),
                                   "--bind", f"127.0.0.1:{port}", "evalserver.wsgi"], cwd=ROOT, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return server
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise RuntimeError("the server did not start:\n" + log.read_text()[-2000:])


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of these processes so far (/proc/PID/stat, clock ticks)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def split(processes: list[int], before: dict[int, float]) -> str:
    """Each web process's share of the server's CPU since ``before`` (an uneven split is a core idle)."""
    shares = []
    for pid in processes:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_text()
        except OSError:
            continue
        if "gunicorn" in command and pid != processes[0]:
            shares.append(f"web {cpu_seconds([pid]) - before.get(pid, 0.0):.1f} s")
    return ", ".join(shares)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assessors", type=int, default=20)
    parser.add_argument("--answers", type=int, default=15, help="answers each assessor saves for the timing")
    parser.add_argument("--dialogues", type=int, default=600)
    parser.add_argument("-k", type=int, default=2)
    parser.add_argument("--kill-after", type=float, default=3.0, help="seconds of judging before the kill -9")
    args = parser.parse_args(argv)
    queue = args.dialogues * args.k // max(1, args.assessors)
    if args.assessors < 1 or args.answers < 1 or 3 * args.answers > queue:
        # Alone, together and at a pace, each --answers from judge01's queue: one that runs dry
        # leaves the others waiting for it at the start of every round.
        parser.error(f"each assessor's queue holds about {queue} items (--dialogues x -k / --assessors); "
                     f"the three timed phases need 3 x --answers = {3 * args.answers}")
    work = Path(tempfile.mkdtemp(prefix="judging-load-"))
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("CELERY_", "EVALSERVER_", "DJANGO_", "CACHE_URL", "DATABASE_URL"))}
    env.update(EVALSERVER_VAR_DIR=str(work / "var"), DJANGO_SECURE="false", PYTHONPATH=str(ROOT),
               DJANGO_SETTINGS_MODULE="evalserver.settings",
               EVALSERVER_LOGIN_RATE="10000/m")  # twenty people signing in from one address at once
    subprocess.run([PYTHON, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([PYTHON, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    campaign = int(subprocess.run([PYTHON, "-c", SETUP.format(dialogues=args.dialogues, assessors=args.assessors,
                                                               k=args.k, password=PASSWORD)],
                                  cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout.split()[-1])
    port, log = free_port(), work / "server.log"
    server = start_server(env, port, log)
    say(f"gunicorn as dev.py serve starts it, on SQLite in {work}/var; campaign {campaign}")
    try:
        # One assessor alone first: the time of a save with nobody else on the server.
        alone = Assessors(port, ["judge01"], campaign, args.answers)
        solo = [value * 1000 for report in alone.run("free") for value in report[2]]
        alone.close()
        print(f"one assessor alone: {len(solo)} saves, p50 {percentile(solo, 0.5):.1f} ms, "
              f"p95 {percentile(solo, 0.95):.1f} ms", flush=True)
        names = [f"judge{number:02d}" for number in range(1, args.assessors + 1)]
        people = Assessors(port, names, campaign, args.answers)
        processes = [server.pid, *descendants(server.pid)]
        cpu_before = cpu_seconds(processes)
        cpu_each = {pid: cpu_seconds([pid]) for pid in processes}
        reports = people.run("together")
        cpu = cpu_seconds(processes) - cpu_before
        times = [value * 1000 for report in reports for value in report[2]]
        client = sum(report[5] for report in reports) * 1000 / max(1, len(times))
        p50, p95 = percentile(times, 0.5), percentile(times, 0.95)
        print(f"{args.assessors} assessors saving at once, {args.answers} rounds: {len(times)} saves, "
              f"p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {max(times):.1f} ms "
              f"(target p95 <= {TARGET_MS:.0f} ms: {'met' if p95 <= TARGET_MS else 'MISSED'}); "
              f"{sum(report[4] for report in reports)} refused", flush=True)
        # What the server's processes spent, whatever else runs on the machine. On an idle machine
        # with C cores, 20 saves at once end after about 20 x (CPU of an answer) / C.
        print(f"server CPU: {cpu * 1000 / max(1, len(times)):.1f} ms per answer (its save and its next item) over "
              f"{len(times)} answers, by process {split(processes, cpu_each)}; the assessors' processes (on the "
              f"same cores): {client:.1f} ms per answer; load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores", flush=True)
        # The same people judging at a pace: each reads an item for 0.5 to 2 s (a real assessor takes
        # 10 s or more on a dialogue), so that saves meet at random, not all at the same instant.
        paced = people.run("paced")
        times = [value * 1000 for report in paced for value in report[2]]
        print(f"{args.assessors} assessors judging at once, each reading an item 0.5-2 s: {len(times)} saves, "
              f"p50 {percentile(times, 0.5):.1f} ms, p95 {percentile(times, 0.95):.1f} ms, max {max(times):.1f} ms",
              flush=True)
        before = {(report[0], position) for report in reports + paced for position in report[3]}
        # Go on judging, and kill every process of the server with SIGKILL in the middle of it.
        people.start("until-stopped")
        time.sleep(args.kill_after)
        victims = [server.pid, *descendants(server.pid)]
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        server.wait()
        last = people.finish()
        people.close()
        acknowledged = before | {(report[0], position) for report in last for position in report[3]}
        server = start_server(env, port, log)
        saved = {tuple(pair) for pair in json.loads(subprocess.run(
            [PYTHON, "-c", SAVED], cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout)}
        lost = acknowledged - saved
        print(f"killed {len(victims)} server processes with SIGKILL after {args.kill_after:g} s of judging: "
              f"{len(acknowledged)} answers acknowledged in all, {len(saved)} in the database after the restart, "
              f"{len(lost)} lost (must be 0); {len(saved - acknowledged)} saved whose reply never arrived", flush=True)
        return 1 if lost else 0
    finally:
        for pid in [server.pid, *descendants(server.pid)]:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        server.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
