#!/usr/bin/env python3
"""Reliability report: hostile uploads, injected faults and load against real servers, in one table.

Sets everything up itself, on loopback only, and removes it afterwards: a scratch database on
the shared PostgreSQL (``--database``, dropped and re-created), gunicorn (``gunicorn.conf.py``:
a worker per core, 2 threads each) with its leaderboard cache in Redis, Celery workers
(``--pool=solo``) on queues of their own, and, for the database restart, a private PostgreSQL
cluster on a free port (the shared server is never stopped). Scoring limits are short (4 s hard
limit, 1 s grace) so dead attempts go stale in seconds.

1. Hostile inputs: every case of ``tests/hostile_corpus.py`` plus malformed requests, uploaded
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
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import statistics_burst, trust_probes, upload_memory  # noqa: E402  (the report runs their probes)
from tests.conftest import reachable  # noqa: E402
from tests.hostile_corpus import CASES, CORPUS_MAX_BYTES, KIND_CASES  # noqa: E402
from tests.workers import (  # noqa: E402
    BROKERS,
    FAULT_LIMITS,
    VECTORS_PER_SCORE,
    LoadResult,
    Process,
    Reply,
    big_gold,
    big_run,
    call,
    count_rows,
    drop_database,
    free_port,
    kind_gold,
    looks_like_traceback,
    manage,
    multipart,
    new_queue,
    postgres_bin,
    postgres_restart_drill,
    queue_length,
    read_load_processes,
    remove_queue,
    scratch_database,
    seed_site,
    send_case,
    site_env,
    start_gunicorn,
    start_worker,
    upload,
    wait_until,
)

TEAMS, UPLOADS_PER_TEAM, DAILY_QUOTA = 20, 5, 3
BOARD_RUNS = 500
BIG_DIALOGUES = 20_000
JSON_TARGET_P95 = 0.200
CACHE_DB = 12


def say(message: str) -> None:
    print(f"[reliability] {message}", flush=True)


@dataclass
class Fault:
    name: str
    ok: bool
    outcome: str


@dataclass
class Tally:
    inputs_tried: int = 0
    rejected_correctly: int = 0
    rejection_problems: list[str] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    accepted: set[int] = field(default_factory=set)  # runs answered 202 (or made to be scored) in the scratch db
    tracebacks: int = 0
    unclean: int = 0
    quota_violations: int = 0
    lost: int = 0
    duplicates: int = 0
    phantoms: int = 0
    drill_accepted: int = 0
    load_rows: list[tuple[str, str]] = field(default_factory=list)
    targets_missed: list[str] = field(default_factory=list)
    targets_judged: list[str] = field(default_factory=list)
    names_tried: int = 0
    names_refused: int = 0
    name_problems: list[str] = field(default_factory=list)
    trust_rows: list[tuple[str, str]] = field(default_factory=list)  # issue 11's probes
    trust_problems: int = 0
    kind_inputs: int = 0  # KIND_CASES sent (issue 24)

    def trust(self, name: str, row: tuple[str, int]) -> None:
        text, problems = row
        self.trust_rows.append((name, text))
        self.trust_problems += problems

    def see(self, reply: Reply) -> Reply:
        if looks_like_traceback(reply):
            self.tracebacks += 1
        return reply


# The database, straight ----------------------------------------------------------------------------

class Database:
    def __init__(self, url: str) -> None:
        import psycopg

        self.url = url
        self.connection = psycopg.connect(url, autocommit=True)

    def one(self, query: str, *params: Any) -> Any:
        row = self.connection.execute(query, params).fetchone()
        return None if row is None else (row[0] if len(row) == 1 else row)

    def all(self, query: str, *params: Any) -> list[tuple]:
        return self.connection.execute(query, params).fetchall()

    def sql(self, query: str, *params: Any) -> list[tuple]:
        """Any statement: the rows of a query, nothing for an UPDATE."""
        cursor = self.connection.execute(query, params)
        return cursor.fetchall() if cursor.description else []

    def status(self, run_id: int) -> str:
        return self.one("SELECT status FROM tasks_run WHERE id = %s", run_id)

    def wait_status(self, run_id: int, wanted: set[str], timeout: float, *processes: Process,
                    interval: float = 0.05) -> str:
        wait_until(f"run {run_id} to be {sorted(wanted)}", lambda: self.status(run_id) in wanted, timeout,
                   *processes, interval=interval)
        return self.status(run_id)

    def close(self) -> None:
        self.connection.close()


# A site: gunicorn and workers on one broker ---------------------------------------------------------

class Site:
    """gunicorn and Celery workers sharing one database, one broker queue and one upload folder."""

    def __init__(self, label: str, env: dict[str, str], broker_url: str, queue: str, work_dir: Path) -> None:
        self.label, self.env, self.broker_url, self.queue, self.work_dir = label, env, broker_url, queue, work_dir
        self.processes: list[Process] = []
        self.base_url = ""

    def worker(self, node: str) -> Process:
        worker = start_worker(self.env, self.queue, node, self.work_dir / f"{self.label}-{node}.log")
        self.processes.append(worker)
        worker.wait_for_log(" ready.")
        return worker

    def web(self, env: dict[str, str] | None = None, name: str = "web", workers: int | None = None,
            threads: int | None = None) -> str:
        port = free_port()
        web = start_gunicorn(env or self.env, port, self.work_dir / f"{self.label}-{name}.log", workers, threads)
        self.processes.append(web)
        base_url = f"http://127.0.0.1:{port}"
        wait_until(f"{name} to answer", lambda: call(f"{base_url}/healthz").status == 200, 45, web)
        if not self.base_url:
            self.base_url = base_url
        return base_url

    def requeue_stuck(self) -> list[int]:
        answer = manage(self.env, "requeue_stuck").strip()
        return [int(run_id) for run_id in answer.split(": ", 1)[1].split(", ")] if ": " in answer else []

    def close(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        remove_queue(self.broker_url, self.queue)


@contextmanager
def site(label: str, base_env: dict[str, str], broker: str, work_dir: Path) -> Iterator[Site]:
    _, _, broker_url = BROKERS[broker]
    queue = new_queue(f"evalserver-reliability-{label}")
    env = {**base_env, "CELERY_BROKER_URL": broker_url, "EVALSERVER_TEST_QUEUE": queue}
    current = Site(label, env, broker_url, queue, work_dir)
    try:
        yield current
    finally:
        current.close()


# 1. Hostile inputs ---------------------------------------------------------------------------------------

def stored_files(upload_dir: Path) -> list[str]:
    return sorted(str(path) for path in upload_dir.rglob("*") if path.is_file())


def hostile_inputs(tally: Tally, base_url: str, db: Database, token: str, upload_dir: Path) -> None:
    from tests.workers import big_gold as gold_of

    gold = gold_of(30)
    slug = "corpus"
    url = f"{base_url}/api/v1/tasks/{slug}/runs/"

    def quota_used() -> int:
        return call(f"{base_url}/api/v1/tasks/{slug}/my-runs/", token).json()["quota"]["total_used"]

    def judged(name: str, send: Any, status: int, fragments: list[str], min_errors: int = 1) -> None:
        before_rows, before_files, before_quota = count_rows(db.url), stored_files(upload_dir), quota_used()
        reply = tally.see(send())
        problems = []
        if reply.status != status:
            problems.append(f"status {reply.status}, expected {status}: {reply.body[:200]!r}")
        else:
            try:
                errors = reply.json()["errors"]
            except (ValueError, KeyError):
                errors = []
                problems.append(f"no JSON errors: {reply.body[:200]!r}")
            if len(errors) < min_errors:
                problems.append(f"{len(errors)} errors listed, expected at least {min_errors}")
            problems += [f"missing message {fragment!r}" for fragment in fragments
                         if not any(fragment in line for line in errors)]
            if any(len(line) >= 400 for line in errors):
                problems.append("an error line of 400 characters or more")
        if looks_like_traceback(reply):
            problems.append("a traceback was shown")
        if count_rows(db.url) != before_rows:
            problems.append("table rows changed")
        if stored_files(upload_dir) != before_files:
            problems.append("stored files changed")
        if quota_used() != before_quota:
            problems.append("quota used")
        tally.inputs_tried += 1
        if problems:
            tally.rejection_problems.append(f"{name}: {'; '.join(problems)}")
        else:
            tally.rejected_correctly += 1

    for case in CASES:
        content = case.build(gold)
        judged(case.name, lambda case=case, content=content: send_case(url, token, case.transport, case.fields,
                                                                       case.filename, content),
               case.status, case.expect, case.min_errors)
    valid = big_run(gold)
    body, content_type = multipart({"name": "ok"}, "run.json", valid)
    no_file, no_file_type = multipart({"name": "no-file"}, "run.json", b"")
    no_file = no_file.replace(b'name="file"', b'name="attachment"')
    requests = [
        ("no token", lambda: call(url, None, body, content_type), 401, ["credentials were not provided"]),
        ("wrong token", lambda: call(url, "0" * 40, body, content_type), 401, ["Invalid token"]),
        ("GET on the upload URL", lambda: call(url, token), 405, ['Method "GET" not allowed']),
        ("JSON body instead of multipart", lambda: call(url, token, valid, "application/json"), 415,
         ["Content-Type 'application/json' is not accepted here"]),
        ("multipart without the file field", lambda: call(url, token, no_file, no_file_type), 400,
         ["file: missing"]),
        ("truncated multipart body", lambda: call(url, token, body[: len(body) // 2], content_type), 400, []),
        ("unknown task", lambda: call(f"{base_url}/api/v1/tasks/no-such-task/runs/", token, body, content_type),
         404, []),
    ]
    for name, send, status, fragments in requests:
        judged(name, send, status, fragments)


def kind_inputs(tally: Tally, base_url: str, db: Database, token: str, upload_dir: Path,
                slugs: dict[str, str]) -> None:
    """Issue 24: KIND_CASES of tests/hostile_corpus.py over HTTP, to a task of each kind (huge
    integers, unpaired surrogates, nuggets per response, alternatives per nugget, the nugget work
    budget): a 400 with the exact messages, no row, file or quota changed."""
    from tests.workers import big_gold as gold_of

    golds = {"stc3": gold_of(30), "response": kind_gold("response"), "metric": kind_gold("metric")}
    for case in KIND_CASES:
        slug = slugs[case.kind]

        def quota_used(slug: str = slug) -> tuple[int, int]:
            # A task without phases has no quota ("quota": null): its runs are counted too.
            mine = call(f"{base_url}/api/v1/tasks/{slug}/my-runs/", token).json()
            return (mine.get("quota") or {}).get("total_used", 0), len(mine.get("runs") or [])

        content = case.build(golds[case.kind])
        before_rows, before_files, before_quota = count_rows(db.url), stored_files(upload_dir), quota_used()
        reply = tally.see(send_case(f"{base_url}/api/v1/tasks/{slug}/runs/", token, "multipart", {}, "run.json",
                                    content))
        problems = []
        if reply.status != case.status:
            problems.append(f"status {reply.status}, expected {case.status}: {reply.body[:200]!r}")
        else:
            errors = reply.json().get("errors", [])
            problems += [f"missing message {fragment!r}" for fragment in case.expect
                         if not any(fragment in line for line in errors)]
        if count_rows(db.url) != before_rows:
            problems.append("table rows changed")
        if stored_files(upload_dir) != before_files:
            problems.append("stored files changed")
        if quota_used() != before_quota:
            problems.append("quota used")
        tally.inputs_tried += 1
        tally.kind_inputs += 1
        if problems:
            tally.rejection_problems.append(f"{case.kind}: {case.name}: {'; '.join(problems)}")
        else:
            tally.rejected_correctly += 1


class Browser:
    """A signed-in (or not) browser: cookies and the CSRF token, one request per connection."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, fields: dict[str, str] | None = None) -> Reply:
        import http.client
        from urllib.parse import urlencode, urlsplit

        parts = urlsplit(self.base_url)
        headers = {"Connection": "close", "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
                   "Referer": self.base_url + path}
        body = None
        if fields is not None:
            body = urlencode({**fields, "csrfmiddlewaretoken": self.cookies.get("csrftoken", "")}).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            for name, value in response.getheaders():
                if name.lower() == "set-cookie":
                    key, _, rest = value.partition("=")
                    self.cookies[key.strip()] = rest.split(";", 1)[0]
            return Reply(response.status, data, {k.lower(): v for k, v in response.getheaders()}, 0.0)
        finally:
            connection.close()

    def sign_in(self, path: str, username: str, password: str) -> Reply:
        self.request("GET", path)
        return self.request("POST", path, {"username": username, "password": password, "next": "/admin/"})


def staff_and_sign_in(tally: Tally, base_url: str, slug: str, bare: dict[str, str], root: dict[str, str]) -> None:
    """Issue 24: a staff account without permissions is no organiser (hidden pages are 404s), and
    the admin's sign-in takes the sign-in limit (125 wrong passwords for a superuser answered 200)."""
    bare_browser = Browser(base_url)
    signed = bare_browser.sign_in("/accounts/login/", bare["username"], bare["password"])
    pages = {path: bare_browser.request("GET", path).status
             for path in (f"/organiser/{slug}/", f"/organiser/{slug}/runs.zip", f"/organiser/{slug}/results.csv",
                          f"/organiser/{slug}/preview/")}
    admin_index = bare_browser.request("GET", "/admin/").status
    wrong = [status for status, in_ in pages.items() if in_ != 404]
    problems = int(signed.status != 302) + len(wrong) + int(admin_index != 200)
    tally.trust("staff without permissions (organiser pages of a task it does not organise)", (
        f"signed in: {signed.status == 302}; " + ", ".join(f"{path.rsplit(slug, 1)[1] or '/'} {status}"
                                                           for path, status in pages.items())
        + f" (each must be 404); /admin/ {admin_index} (its empty index)", problems))
    attacker = Browser(base_url)
    statuses = Counter(attacker.sign_in("/admin/login/", root["username"], f"guess-{k}").status
                       for k in range(125))
    right = attacker.sign_in("/admin/login/", root["username"], root["password"])
    # The participants' sign-in above used one attempt of this address's limit.
    ok = statuses.get(200, 0) <= 10 and statuses.get(429, 0) >= 114 and right.status == 429
    tally.trust("brute force on /admin/login/ (125 wrong passwords for a superuser, then the right one)", (
        f"wrong: {dict(sorted(statuses.items()))}; the right one: {right.status} (must be 429 while limited)",
        int(not ok)))


def nugget_memory_rows(tally: Tally) -> None:
    """Issue 24: worker memory and time of scoring a response run's nuggets, a process per case
    (benchmarks/nugget_memory.py): the largest run the limits accept, and 7,500 one-character
    nuggets scored without the upload's limits (the batches alone); target <= 10x (file + gold)."""
    import json as json_module
    import subprocess

    problems = 0
    parts = []
    for case, extra in (("largest-accepted-1", []), ("one-char-nuggets-7500", ["--unchecked"]),
                        ("one-char-nuggets-7500", []), ("alternatives-6000", [])):
        done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "nugget_memory.py"), "--case", case, *extra],
                              capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": "0"})
        result = json_module.loads(done.stdout.strip().splitlines()[-1])
        budget_mb = 10 * (result["run_bytes"] + result["gold_bytes"]) / 2**20
        if result["refused"]:
            parts.append(f"{case}: refused at upload ({result['refused']})")
            continue
        over = result["added_mb"] > budget_mb
        problems += int(over)
        parts.append(f"{case}{' unchecked' if extra else ''}: +{result['added_mb']} MB (target <= "
                     f"{budget_mb:.1f} MB), {result['seconds']} s")
    tally.trust("nugget scoring memory (worker, per run)", ("; ".join(parts), problems))


# 4. Confusable names ---------------------------------------------------------------------------------------

def _form_post(base_url: str, path: str, body: bytes, content_type: str) -> Reply:
    """A form POST as a browser sends it: the CSRF cookie and token from a GET of the same page."""
    import http.client
    import re
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request("GET", path, headers={"Connection": "close"})
        page = connection.getresponse()
        cookie = next((value.split(";", 1)[0] for name, value in page.getheaders()
                       if name.lower() == "set-cookie" and value.startswith("csrftoken=")), "")
        match = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.read())
    finally:
        connection.close()
    if not cookie or match is None:
        raise RuntimeError(f"no CSRF token on {path}")
    if content_type.startswith("multipart/"):
        boundary = content_type.split("boundary=", 1)[1]
        body = (f'--{boundary}\r\nContent-Disposition: form-data; name="csrfmiddlewaretoken"\r\n\r\n'.encode()
                + match.group(1) + b"\r\n" + body)
    else:
        body = b"csrfmiddlewaretoken=" + match.group(1) + b"&" + body
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    started = time.perf_counter()
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": content_type, "Cookie": cookie,
                                                             "Connection": "close"})
        response = connection.getresponse()
        return Reply(response.status, response.read(), {k.lower(): v for k, v in response.getheaders()},
                     time.perf_counter() - started)
    finally:
        connection.close()


def _raw_multipart(fields: dict[str, bytes], content: bytes) -> tuple[bytes, str]:
    """A multipart body whose text fields are sent as raw bytes (``multipart`` encodes them as UTF-8)."""
    boundary = "----evalserver-names"
    head = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
                    + value + b"\r\n" for name, value in fields.items())
    part = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="run.json"\r\n'
            "Content-Type: application/json\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
    return head + part, f"multipart/form-data; boundary={boundary}"


def confusable_names(tally: Tally, base_url: str, db: Database, token: str, team: str, upload_dir: Path,
                     worker: Process) -> None:
    """Hostile run and team names over HTTP: each refused with the expected status and a message
    naming the character (or the invalid UTF-8), and no row or file stored."""
    from urllib.parse import quote

    slug = "corpus-free"
    gold = big_gold(30)
    url = f"{base_url}/api/v1/tasks/{slug}/runs/"
    # An existing run name to imitate (a real upload, followed like every accepted run).
    reply = tally.see(upload(base_url, slug, token, big_run(gold, seed=91), "Aurora-1"))
    if reply.status != 202:
        raise RuntimeError(f"upload of the run to imitate answered {reply.status}: {reply.body[:300]!r}")
    tally.accepted.add(reply.json()["id"])
    db.wait_status(reply.json()["id"], {"done"}, 60, worker)
    content = big_run(gold, seed=92)
    # The team to imitate: ``team`` (e.g. "Free 01"); its look-alike with a Cyrillic e (U+0435).
    lookalike = team.replace("e", "\u0435", 1)
    if lookalike == team:
        raise RuntimeError(f"team name {team!r} has no 'e' to imitate")

    def api(name: bytes) -> Reply:
        body, content_type = _raw_multipart({"name": name}, content)
        return call(url, token, body, content_type)

    def sign_up(team_name: bytes) -> Reply:
        body = (b"username=" + quote(f"names-{uuid4_hex()}").encode() + b"&email=names%40example.org"
                b"&password1=a-long-pass-123&password2=a-long-pass-123&team_name=" + team_name)
        return _form_post(base_url, "/accounts/signup/", body, "application/x-www-form-urlencoded")

    cases = [
        ("run name with U+202E (API)", lambda: api("my\u202erun".encode()), 400,
         "name: contains U+202E RIGHT-TO-LEFT OVERRIDE at position 3"),
        ("run name with U+200B (API)", lambda: api("my\u200brun".encode()), 400,
         "name: contains U+200B ZERO WIDTH SPACE at position 3"),
        ("run name with U+FEFF (API)", lambda: api("\ufeffrun".encode()), 400,
         "name: contains U+FEFF ZERO WIDTH NO-BREAK SPACE at position 1"),
        ("run name, Cyrillic look-alike of 'Aurora-1' (API)", lambda: api("\u0410urora-1".encode()), 409,
         "can be mistaken for your team's run 'Aurora-1'"),
        ("run name, invalid UTF-8 (API, multipart)", lambda: api(b"run\xff\xfe"), 400,
         "name: not valid UTF-8 at position 4"),
        ("team name with U+202E (sign-up)", lambda: sign_up(quote("Team\u202eX").encode()), 400,
         "Contains U+202E RIGHT-TO-LEFT OVERRIDE at position 5"),
        (f"team name, Cyrillic look-alike of {team!r} (sign-up)", lambda: sign_up(quote(lookalike).encode()), 400,
         f"can be mistaken for the existing team &#x27;{team}&#x27;"),
        ("team name, invalid UTF-8 (sign-up, urlencoded)", lambda: sign_up(b"Team%FFX"), 400,
         "Not valid UTF-8 at position 5"),
    ]
    for name, send, status, fragment in cases:
        before_rows, before_files = count_rows(db.url), stored_files(upload_dir)
        reply = tally.see(send())
        text = reply.body.decode("utf-8", errors="replace")
        problems = []
        if reply.status != status:
            problems.append(f"status {reply.status}, expected {status}")
        if fragment not in text:
            problems.append(f"missing message {fragment!r}: {text[:300]!r}")
        if looks_like_traceback(reply):
            problems.append("a traceback was shown")
        if count_rows(db.url) != before_rows:
            problems.append("table rows changed")
        if stored_files(upload_dir) != before_files:
            problems.append("stored files changed")
        tally.names_tried += 1
        if problems:
            tally.name_problems.append(f"{name}: {'; '.join(problems)}")
        else:
            tally.names_refused += 1


def uuid4_hex() -> str:
    import uuid

    return uuid.uuid4().hex[:12]


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
    rows = [("hostile inputs tried", f"{tally.inputs_tried} ({len(CASES)} files of tests/hostile_corpus.py, "
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
