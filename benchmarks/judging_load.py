#!/usr/bin/env python3
"""Judging under load on the embedded default (issue 40, done means): 20 assessors saving at once
through the judging page, the p95 of a save, and the judgements lost when the server is killed
with -9 in the middle of the campaign (must be 0).

Sets everything up in a temporary ``EVALSERVER_VAR_DIR`` (its own SQLite database, the embedded
default): a DQ/ND task, a campaign of ``--dialogues`` dialogues judged ``-k`` times, ``--assessors``
assessors with passwords. Starts gunicorn as ``dev.py serve`` does (``gunicorn.conf.py``: its web
processes, the scoring and statistics workers) and every assessor, a thread with its own session,
signs in and then, ``--answers`` times: loads its next item (GET) and saves a whole answer (one
POST, as the page's script sends it, asking for JSON). The POST's time, from sending to the reply's
last byte, is the save time. Then the assessors go on and the server's processes are all killed
with SIGKILL mid-stream; every answer acknowledged before (a 200 with ``"saved": true``) must be in
the database after the server is started again, read by a separate process.

    .venv/bin/python benchmarks/judging_load.py
    .venv/bin/python benchmarks/judging_load.py --assessors 20 --answers 15 --kill-after 3

Measured 2026-11-29: the figures are in docs/organisers/campaigns.md.
"""

from __future__ import annotations

import argparse
import json
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
from pathlib import Path

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


class Assessor(threading.Thread):
    """One person judging: sign in, then load an item and save an answer, again and again."""

    def __init__(self, base: str, name: str, campaign: int, answers: int, go: threading.Event,
                 together: threading.Barrier | None = None, think: tuple[float, float] | None = None) -> None:
        super().__init__(daemon=True)
        self.base, self.name, self.campaign, self.answers, self.go = base, name, campaign, answers, go
        self.together = together  # every assessor saves at the same moment, round after round
        # Or each reads the item for a random time in this range (seconds) before saving.
        self.think = think
        self.random = random.Random(name)
        self.session = requests.Session()
        self.times: list[float] = []
        self.acknowledged: list[int] = []
        self.failures = 0
        self.stop = threading.Event()

    def sign_in(self) -> None:
        page = self.session.get(f"{self.base}/accounts/login/", timeout=30)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        answer = self.session.post(f"{self.base}/accounts/login/", timeout=30, allow_redirects=False,
                                   data={"username": self.name, "password": PASSWORD, "csrfmiddlewaretoken": token})
        if answer.status_code != 302:
            raise RuntimeError(f"{self.name} could not sign in: {answer.status_code}")

    def one(self) -> bool:
        page = self.session.get(f"{self.base}/campaigns/{self.campaign}/judge/", timeout=30)
        action = re.search(r'action="(/campaigns/\d+/judge/(\d+)/)"', page.text)
        if action is None:
            return False  # the queue is done
        data = {"csrfmiddlewaretoken": re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1),
                "shown": re.search(r'name="shown" value="([^"]+)"', page.text).group(1), "A": "1", "E": "0", "S": "-1"}
        for field in re.findall(r'name="(nugget-\d+)" value="([^"]+)"', page.text):
            data.setdefault(field[0], field[1])
        if self.together is not None:
            self.together.wait(timeout=120)
        elif self.think is not None:
            time.sleep(self.random.uniform(*self.think))
        started = time.perf_counter()
        answer = self.session.post(self.base + action.group(1), data=data, timeout=30,
                                   headers={"Accept": "application/json", "Referer": self.base + "/"})
        elapsed = time.perf_counter() - started
        if answer.status_code == 200 and answer.json().get("saved") is True:
            self.acknowledged.append(int(action.group(2)))
            self.times.append(elapsed)
        else:
            self.failures += 1
        return True

    def run(self) -> None:
        self.go.wait()
        done = 0
        while not self.stop.is_set() and done < self.answers:
            try:
                if not self.one():
                    return
            except (requests.RequestException, AttributeError):
                self.failures += 1  # the server is down (killed): try again a little later
                time.sleep(0.2)
                continue
            done += 1


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
    base = f"http://127.0.0.1:{port}"
    server = start_server(env, port, log)
    say(f"gunicorn as dev.py serve starts it, on SQLite in {work}/var; campaign {campaign}")
    try:
        # One assessor alone first: the time of a save with nobody else on the server.
        alone = Assessor(base, "judge01", campaign, args.answers, threading.Event())
        alone.sign_in()
        alone.go.set()
        alone.run()
        solo = [value * 1000 for value in alone.times]
        print(f"one assessor alone: {len(solo)} saves, p50 {percentile(solo, 0.5):.1f} ms, "
              f"p95 {percentile(solo, 0.95):.1f} ms", flush=True)
        go = threading.Event()
        together = threading.Barrier(args.assessors)
        people = [Assessor(base, f"judge{number:02d}", campaign, args.answers, go, together)
                  for number in range(1, args.assessors + 1)]
        for person in people:
            person.sign_in()
            person.start()
        processes = [server.pid, *descendants(server.pid)]
        cpu_before = cpu_seconds(processes)
        cpu_each = {pid: cpu_seconds([pid]) for pid in processes}
        client_cpu = time.process_time()
        go.set()
        for person in people:
            person.join()
        cpu = cpu_seconds(processes) - cpu_before
        client = (time.process_time() - client_cpu) * 1000 / max(1, len(people) * args.answers)
        times = [value * 1000 for person in people for value in person.times]
        p50, p95 = percentile(times, 0.5), percentile(times, 0.95)
        print(f"{args.assessors} assessors saving at once, {args.answers} rounds: {len(times)} saves, "
              f"p50 {p50:.1f} ms, p95 {p95:.1f} ms, max {max(times):.1f} ms "
              f"(target p95 <= {TARGET_MS:.0f} ms: {'met' if p95 <= TARGET_MS else 'MISSED'}); "
              f"{sum(person.failures for person in people)} refused", flush=True)
        # What the server's processes spent, whatever else runs on the machine: a page load and a
        # save per answer. On an idle machine with C cores, 20 saves at once end after about
        # 20 x (CPU of a save) / C.
        print(f"server CPU: {cpu * 1000 / max(1, len(times)):.1f} ms per answer (its page and its save) over "
              f"{len(times)} answers, by process {split(processes, cpu_each)}; this program's own CPU (the "
              f"assessors' side, on the same cores): {client:.1f} ms per answer"
              f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
        # The same people judging at a pace: each reads an item for 0.5 to 2 s (a real assessor takes
        # 10 s or more on a dialogue), so that saves meet at random, not all at the same instant.
        go = threading.Event()
        paced = [Assessor(base, person.name, campaign, args.answers, go, think=(0.5, 2.0)) for person in people]
        for person, old in zip(paced, people, strict=True):
            person.session = old.session
            person.start()
        go.set()
        for person in paced:
            person.join()
        times = [value * 1000 for person in paced for value in person.times]
        print(f"{args.assessors} assessors judging at once, each reading an item 0.5-2 s: {len(times)} saves, "
              f"p50 {percentile(times, 0.5):.1f} ms, p95 {percentile(times, 0.95):.1f} ms, max {max(times):.1f} ms",
              flush=True)
        before = {(person.name, position) for person in people + paced for position in person.acknowledged}
        # Go on judging, and kill every process of the server with SIGKILL in the middle of it.
        go = threading.Event()
        first, people = people, [Assessor(base, person.name, campaign, 10_000, go) for person in people]
        for person, old in zip(people, first, strict=True):
            person.session = old.session  # still signed in
            person.start()
        go.set()
        time.sleep(args.kill_after)
        victims = [server.pid, *descendants(server.pid)]
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        server.wait()
        for person in people:
            person.stop.set()
        for person in people:
            person.join(timeout=60)
        acknowledged = before | {(person.name, position) for person in people for position in person.acknowledged}
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
