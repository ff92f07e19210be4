"""The reader-load generator: closed loops of leaderboard readers (plain, gzip, revalidating) in
threads or processes, with their latencies and statuses.
"""

from __future__ import annotations

import gzip
import http.client
import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

# Reader load ------------------------------------------------------------------------------------------

@dataclass
class LoadResult:
    latencies: list[float] = field(default_factory=list)  # request sent to the last byte of the body read
    statuses: Counter = field(default_factory=Counter)
    wall_seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    # The reader's own decompression of each answer (0 when it had none), after its latency's clock
    # stopped: one per latency, in the same order.
    decoding: list[float] = field(default_factory=list)

    def merge(self, other: LoadResult) -> None:
        self.latencies += other.latencies
        self.decoding += other.decoding
        self.statuses += other.statuses
        self.failures += other.failures[:5]

    def percentile_with_decoding(self, fraction: float) -> float:
        """As ``percentile``, of each answer's latency plus the reader's decompression of it."""
        ordered = sorted(latency + decoding for latency, decoding in zip(self.latencies, self.decoding, strict=True))
        return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)] if ordered else math.nan

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    @property
    def throughput(self) -> float:
        return self.requests / self.wall_seconds if self.wall_seconds else 0.0

    def percentile(self, fraction: float) -> float:
        """Nearest rank, in seconds."""
        ordered = sorted(self.latencies)
        return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)] if ordered else math.nan


CLIENTS = ("plain", "gzip", "revalidating")


def _reader(host: str, port: int, paths: list[str], count: int, timeout: float, result: LoadResult,
            lock: threading.Lock, check: Callable[[bytes], bool] | None, pause: float, client: str) -> None:
    """One reader: ``count`` GETs over a kept-alive connection (re-opened when the server closes
    it), ``pause`` seconds apart (0: the next as soon as the last is answered).

    ``client``: ``plain`` asks for the identity encoding and never revalidates (the worst case);
    ``gzip`` sends ``Accept-Encoding: gzip`` and decompresses, as browsers, curl --compressed
    and HTTP libraries do; ``revalidating`` also sends back the last ETag of each path
    (``If-None-Match``), as a browser refreshing a page does, and counts a 304 as an answer.

    A latency is the time from sending the request to reading the body's last byte (a browser's
    ``responseStart`` to ``responseEnd``, which also stop before decoding). The decompression that
    follows is timed apart (``LoadResult.decoding``): a reader's own CPU, which on this one machine
    is taken from the server being measured (2.1 ms for a 500-run board's JSON, at 350 answers a
    second 0.7 of the 2 cores), and which ``percentile_with_decoding`` adds back.
    """
    connection = None
    local = LoadResult()
    etags: dict[str, str] = {}
    for number in range(count):
        if number and pause:
            time.sleep(pause)
        path = paths[number % len(paths)]
        headers = {"Accept": "application/json, text/html"}
        if client in ("gzip", "revalidating"):
            headers["Accept-Encoding"] = "gzip"
        if client == "revalidating" and path in etags:
            headers["If-None-Match"] = etags[path]
        started = time.perf_counter()
        answered, decoding = None, 0.0
        try:
            if connection is None:
                connection = http.client.HTTPConnection(host, port, timeout=timeout)
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            body = response.read()
            answered = time.perf_counter()
            status = response.status
            if response.getheader("content-encoding", "") == "gzip":
                body = gzip.decompress(body)
                decoding = time.perf_counter() - answered
            if response.getheader("etag"):
                etags[path] = response.getheader("etag")
            if response.getheader("connection", "").lower() == "close":
                connection.close()
                connection = None
            if status == 200 and check is not None and not check(body):
                status = -1
                local.failures.append(f"{path}: unexpected body {body[:200]!r}")
        except (OSError, http.client.HTTPException) as error:
            if connection is not None:
                connection.close()
            connection = None
            status = 0
            local.failures.append(f"{path}: {type(error).__name__}: {error}")
        local.latencies.append((answered or time.perf_counter()) - started)
        local.decoding.append(decoding)
        local.statuses[status] += 1
    if connection is not None:
        connection.close()
    with lock:
        result.merge(local)


def read_load(base_url: str, paths: list[str], readers: int, requests_per_reader: int, timeout: float = 30,
              check: Callable[[bytes], bool] | None = None, pause: float = 0.0, client: str = "plain") -> LoadResult:
    """``readers`` threads at once, each sending ``requests_per_reader`` GETs one after another."""
    if client not in CLIENTS:
        raise ValueError(f"client must be one of {', '.join(CLIENTS)}")
    parts = urlsplit(base_url)
    result, lock = LoadResult(), threading.Lock()
    threads = [threading.Thread(target=_reader, args=(parts.hostname, parts.port, paths[i % len(paths):]
                                                      + paths[:i % len(paths)], requests_per_reader, timeout,
                                                      result, lock, check, pause, client), daemon=True)
               for i in range(readers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=(timeout + pause) * requests_per_reader + 30)
    result.wall_seconds = time.perf_counter() - started
    return result


def _read_load_process(args: tuple) -> LoadResult:
    base_url, paths, readers, count, timeout, pause, client = args
    return read_load(base_url, paths, readers, count, timeout, pause=pause, client=client)


def read_load_processes(base_url: str, paths: list[str], readers: int, requests_per_reader: int,
                        processes: int = 4, timeout: float = 30, pause: float = 0.0,
                        client: str = "plain") -> LoadResult:
    """As ``read_load``, with the readers spread over client processes, so that one client's GIL
    does not become the bottleneck being measured."""
    import multiprocessing

    shares = [readers // processes + (1 if i < readers % processes else 0) for i in range(processes)]
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    with context.Pool(processes) as pool:
        parts = pool.map(_read_load_process, [(base_url, paths, share, requests_per_reader, timeout, pause, client)
                                              for share in shares if share])
    total = LoadResult(wall_seconds=time.perf_counter() - started)
    for part in parts:
        total.merge(part)
    return total
