#!/usr/bin/env python3
"""Page load times of two running servers on the same database, measured in one run (issue 30:
"no page may get slower"): each page is fetched from one server and then the other, in turn, so
that the shared machine's noise falls on both alike; prints the median per page and its ratio.

Start the servers yourself, e.g. this branch and a copy of main (``git archive main | tar -x -C
DIR``), both with the same ``EVALSERVER_VAR_DIR`` (after ``manage.py demo``) and
``WEB_CONCURRENCY=1``, then:

    .venv/bin/python benchmarks/page_times.py http://127.0.0.1:8730 http://127.0.0.1:8731 --rounds 30

Pages are fetched anonymously, plus as ``--user`` (password ``--password``) for the run pages
and My team. Uses only the standard library.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import re
import statistics
import time
import urllib.parse
import urllib.request

PUBLIC = ["/", "/tasks/stc3-demo/", "/tasks/stc3-demo/?phase=development&show=all", "/tasks/stc3-demo/statistics/",
          "/tasks/response-demo/?phase=development", "/tasks/metric-demo/", "/tasks/response-demo/data/"]


def opener_for(base: str, user: str | None, password: str) -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    if user:
        form = opener.open(f"{base}/accounts/login/").read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        body = urllib.parse.urlencode({"username": user, "password": password, "csrfmiddlewaretoken": token}).encode()
        opener.open(urllib.request.Request(f"{base}/accounts/login/", data=body, headers={"Referer": base + "/"}))
    return opener


def fetch(opener: urllib.request.OpenerDirector, url: str) -> float:
    started = time.perf_counter()
    with opener.open(url) as response:
        response.read()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("new")
    parser.add_argument("old")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--user", default="alice")
    parser.add_argument("--password", default="demo-pass-123")
    parser.add_argument("--signed-in", nargs="*", default=["/team/", "/runs/5/", "/runs/17/"])
    args = parser.parse_args()
    plans = [(path, None) for path in PUBLIC] + [(path, args.user) for path in args.signed_in]
    openers = {(base, user): opener_for(base, user, args.password) for base in (args.new, args.old)
               for user in {None, args.user}}
    print(f"{'page':<52} {'new (ms)':>9} {'old (ms)':>9} {'new/old':>8}")
    ratios = []
    for path, user in plans:
        times: dict[str, list[float]] = {args.new: [], args.old: []}
        for base in (args.new, args.old):  # warm each server's caches first: a reader's second visit
            fetch(openers[(base, user)], base + path)
        for _ in range(args.rounds):
            for base in (args.new, args.old):
                times[base].append(fetch(openers[(base, user)], base + path))
        new, old = statistics.median(times[args.new]), statistics.median(times[args.old])
        ratios.append(new / old)
        label = path + (f" ({user})" if user else "")
        print(f"{label:<52} {new * 1000:9.1f} {old * 1000:9.1f} {new / old:8.2f}")
    print(f"median ratio new/old over {len(ratios)} pages: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
