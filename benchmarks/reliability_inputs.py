"""Parts 1 and 4 of the reliability report: hostile inputs of every kind over HTTP, staff and
sign-in probes, nugget scoring memory, and confusable names.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.reliability_site import Database, Tally
from devtools.hostile_corpus import CASES, KIND_CASES  # noqa: E402
from devtools.workers import (  # noqa: E402
    ROOT,
    Process,
    Reply,
    big_gold,
    big_run,
    call,
    count_rows,
    kind_gold,
    looks_like_traceback,
    multipart,
    send_case,
    upload,
)

# 1. Hostile inputs ---------------------------------------------------------------------------------------

def stored_files(upload_dir: Path) -> list[str]:
    return sorted(str(path) for path in upload_dir.rglob("*") if path.is_file())


def hostile_inputs(tally: Tally, base_url: str, db: Database, token: str, upload_dir: Path) -> None:
    from devtools.workers import big_gold as gold_of

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
    """Issue 24: KIND_CASES of devtools/hostile_corpus.py over HTTP, to a task of each kind (huge
    integers, unpaired surrogates, nuggets per response, alternatives per nugget, the nugget work
    budget): a 400 with the exact messages, no row, file or quota changed."""
    from devtools.workers import big_gold as gold_of

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
