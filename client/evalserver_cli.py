#!/usr/bin/env python3
"""Command-line client for the DialEval evaluation server (NTCIR STC-3 / DialEval shared tasks).

A single file that needs only the Python standard library (3.8 or later): download it from the
server (``/client/evalserver_cli.py``) or copy it, then

    python evalserver_cli.py --server https://eval.example.org submit TASK run.json --wait

The API token comes from ``--token`` or the environment variable ``EVALSERVER_TOKEN``; the server
from ``--server`` or ``EVALSERVER_URL``. Exit status: 0 ok, 1 the run failed scoring, 2 invalid
input or a request the server rejected, 3 network or server error. See ``--help`` of each command.
"""

from __future__ import annotations

import argparse
import base64
import builtins
import hashlib
import http.client
import json
import math
import os
import platform
import re
import socket
import ssl
import sys
import tempfile
import textwrap
import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urljoin, urlsplit
from urllib.request import getproxies, proxy_bypass

if TYPE_CHECKING:  # annotations only: never evaluated, so Python 3.8 does not need these at runtime
    from collections.abc import Callable, Iterator

__version__ = "1.0.0"

DEFAULT_SERVER = "http://127.0.0.1:8000"
DEFAULT_MAX_SIZE = 32 * 1024 * 1024  # the server's default EVALSERVER_RUN_MAX_BYTES
DEFAULT_TIMEOUT = 60.0
CHUNK_SIZE = 64 * 1024
MAX_REDIRECTS = 5
REDIRECTS = (301, 302, 303, 307, 308)
FINISHED = ("done", "failed")

EXIT_OK, EXIT_RUN_FAILED, EXIT_INVALID, EXIT_NETWORK, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

SCOPES = {"full": "the whole gold set",
          "live": "the live subset of the gold; scores on the whole set come when the results are published"}


class CliError(Exception):
    """A problem to report in a few lines on stderr, ending the program with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_INVALID, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.details = details or []


class ApiError(CliError):
    """The server answered with an HTTP error status."""

    def __init__(self, status: int, reason: str, url: str, errors: list[str], hint: str = "",
                 retry_after: int | None = None) -> None:
        exit_code = EXIT_INVALID if 400 <= status < 500 and status != 408 else EXIT_NETWORK
        what = "the server rejected the request" if exit_code == EXIT_INVALID else "the server failed"
        details = list(errors) + ([hint] if hint else [])
        super().__init__(f"{what} (HTTP {status} {reason}, {url}):", exit_code, details)
        self.status = status
        self.errors = errors
        self.retry_after = retry_after


# Output ------------------------------------------------------------------------------------

# C0 controls but newline and tab, DEL and the C1 controls: a server's text (a run name, an error,
# a note) could otherwise move the cursor, rewrite the screen or, with OSC 52, write to the
# user's clipboard. Shown escaped, as JSON writes them.
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` with every terminal control character written as ``\\u001b`` and the like."""
    return _TERMINAL_CONTROLS.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def print(*values: Any, **options: Any) -> None:  # noqa: A001
    """Everything this module prints passes through here: text from the server reaches the
    terminal without its control characters (the progress bar writes to its stream itself)."""
    builtins.print(*(terminal_safe(str(value)) for value in values), **options)


def warn(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def human_size(size: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{int(size)} B"


class Progress:
    """``[#####     ] 48% 1.2/2.5 MB`` on one line of stderr, redrawn at most ten times a second."""

    WIDTH = 30

    def __init__(self, total: int, enabled: bool, stream: Any = None) -> None:
        self.total = max(total, 1)
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.sent = 0
        self.last_draw = 0.0
        self.drawn = False

    def update(self, count: int) -> None:
        self.sent += count
        now = time.monotonic()
        if self.enabled and (now - self.last_draw >= 0.1 or self.sent >= self.total):
            self.last_draw = now
            self.draw()

    def draw(self) -> None:
        fraction = min(self.sent / self.total, 1.0)
        filled = int(self.WIDTH * fraction)
        unit, scale = ("MB", 1e6) if self.total >= 1e6 else ("kB", 1e3)
        self.stream.write(f"\r[{'#' * filled}{' ' * (self.WIDTH - filled)}] {int(fraction * 100):3d}% "
                          f"{self.sent / scale:.1f}/{self.total / scale:.1f} {unit}")
        self.stream.flush()
        self.drawn = True

    def finish(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


def render_table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    """Columns padded to their widest cell; the columns in ``right`` (numbers) right-aligned."""
    right = right or set()
    widths = [max([len(header)] + [len(row[i]) for row in rows]) for i, header in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
                         for i, cell in enumerate(cells)).rstrip()

    return "\n".join([line(headers), line(["-" * width for width in widths])] + [line(row) for row in rows])


def clip(text: Any, width: int) -> str:
    text = " ".join(str(text if text is not None else "").split())
    return text if len(text) <= width else text[:width - 3] + "..."


def number(value: Any, digits: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return f"{value:.{digits}f}"


def timestamp(value: Any) -> str:
    """``2025-03-01T12:34:56.789+00:00`` as ``2025-03-01 12:34`` (the server keeps times in UTC)."""
    return str(value)[:16].replace("T", " ") if value else "-"


# Scores ------------------------------------------------------------------------------------

def measure_info(data: Any) -> dict[str, dict[str, Any]]:
    """What the server says each measure key means (``measures`` of a run, a list of runs or a
    board: title, direction, whether official), by key, in the server's order."""
    measures = data.get("measures") if isinstance(data, dict) else None
    return {entry["key"]: entry for entry in measures or () if isinstance(entry, dict) and "key" in entry}


def score_keys(score_summaries: list[Any], all_measures: bool, info: dict[str, dict[str, Any]]) -> list[str]:
    """Measure keys present in any of the summaries, in the server's order; without
    ``all_measures`` only the official ones of each group, unless a group has none."""
    present: list[str] = []
    for scores in score_summaries:
        measures = scores.get("measures") if isinstance(scores, dict) else None
        present += [key for key in (measures if isinstance(measures, dict) else ()) if key not in present]
    order = {key: position for position, key in enumerate(info)}
    present.sort(key=lambda key: order.get(key, len(order)))
    if all_measures:
        return present
    groups: dict[str, list[str]] = {}
    for key in present:
        groups.setdefault(str(info.get(key, {}).get("group", "")), []).append(key)
    keys = []
    for group_keys in groups.values():
        official = [key for key in group_keys if info.get(key, {}).get("official")]
        keys += official or group_keys
    return keys


def score_value(scores: Any, key: str) -> Any:
    measures = scores.get("measures") if isinstance(scores, dict) else None
    return measures.get(key) if isinstance(measures, dict) else None


def short_key(key: str, info: dict[str, dict[str, Any]]) -> str:
    """Column header: the server's short title with dots for spaces (``A.RSNOD``; a header
    stays one word for ``awk``), else the key."""
    return str(info.get(key, {}).get("short_title") or key).replace(" ", ".")


def direction(key: str, info: dict[str, dict[str, Any]]) -> str:
    higher = info.get(key, {}).get("higher_is_better")
    return "" if higher is None else ("higher is better" if higher else "lower is better")


def scores_table(scores: dict[str, Any], info: dict[str, dict[str, Any]], digits: int) -> str:
    keys = score_keys([scores], True, info)
    rows = [[key, str(info.get(key, {}).get("title", "")), number(score_value(scores, key), digits),
             direction(key, info)] for key in keys]
    return render_table(["measure", "", "value", ""], rows, {2})


def run_report(run: dict[str, Any], base_url: str, digits: int) -> str:
    team = run.get("team") or ("baseline" if run.get("is_baseline") else "-")
    lines = [f"run {run.get('id')}  {team} / {run.get('name') or '-'}",
             f"task:        {run.get('task') or '-'}"
             + (f" (phase {run['phase']})" if run.get("phase") else "")
             + (f", gold version {run['gold_version']}" if run.get("gold_version") is not None else ""),
             f"status:      {run.get('status')}",
             f"submitted:   {timestamp(run.get('submitted_at'))} UTC"
             + (f", finished {timestamp(run['finished_at'])} UTC" if run.get("finished_at") else "")]
    if run.get("priority") is not None:
        lines.append(f"priority:    {run['priority']}")
    if "is_public" in run:
        lines.append(f"public:      {'yes' if run['is_public'] else 'no'}")
    if run.get("withdrawn"):
        lines.append("withdrawn:   yes")
    if run.get("late_note"):  # submitted after its phase's end under its team's extension
        lines.append(f"late:        {run['late_note']}")
    if run.get("uploaded_on_behalf"):
        lines.append(f"uploaded:    {run['uploaded_on_behalf']}")
    if run.get("description"):
        lines.append(f"description: {clip(run['description'], 200)}")
    if run.get("url"):
        lines.append(f"url:         {urljoin(base_url + '/', run['url'])}")
    for title in ("warnings", "errors"):
        entries = run.get(title) or []
        if entries:
            lines.append(f"{title} ({len(entries)}):")
            lines += [f"  {entry}" for entry in entries]
    scores = run.get("scores")
    if isinstance(scores, dict):
        scope = run.get("scores_scope")
        lines += ["", f"scores over {scores.get('n_items', '?')} items"
                  + (f" ({SCOPES.get(scope, scope)})" if scope else ""), "",
                  scores_table(scores, measure_info(run), digits)]
    elif run.get("status") == "done":
        lines += ["", "scores: not visible yet (hidden until the organisers publish the results)"]
    return "\n".join(lines)


def quota_line(quota: Any, submissions: Any = None) -> str:
    """The quota left, or why none applies: the server's ``submissions`` says whether runs are
    accepted (a task without phases accepts them at any time, with no quota)."""
    if not isinstance(quota, dict):
        if isinstance(submissions, dict) and submissions.get("open"):
            return f"quota: none; {submissions.get('reason') or 'runs are accepted now'}"
        if isinstance(submissions, dict):
            return f"submissions closed: {submissions.get('reason') or 'no phase is open'}"
        return "quota: none applies now (no submission phase is open, or you are not in a team)"
    return (f"quota ({quota.get('phase')} phase): {quota.get('daily_remaining')} of {quota.get('daily_limit')} runs "
            f"left today (resets {timestamp(quota.get('daily_resets_at'))} UTC), "
            f"{quota.get('total_remaining')} of {quota.get('total_limit')} left in the phase "
            f"(ends {timestamp(quota.get('phase_ends_at'))} UTC)")


# HTTP --------------------------------------------------------------------------------------

class Response:
    def __init__(self, status: int, reason: str, headers: Any, body: bytes, url: str) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        self.url = url

    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise CliError(f"the server sent something that is not JSON (HTTP {self.status}, {self.url}); "
                           "is --server the evaluation server?", EXIT_NETWORK) from None


Body = tuple  # (length, factory of an iterator of chunks): a factory, so a redirect can send it again


class Client:
    """http.client with the token, timeouts, chunked sending for a progress bar, safe redirects and
    the environment's proxies (``https_proxy``, ``http_proxy``, ``no_proxy``)."""

    def __init__(self, server: str, token: str | None, timeout: float) -> None:
        self.base = server
        self.token = token
        self.timeout = timeout
        self.user_agent = f"evalserver-cli/{__version__} (Python {platform.python_version()})"

    def url(self, path: str) -> str:
        return urljoin(self.base + "/", path) if path.startswith(("/", "http://", "https://")) else \
            f"{self.base}/{path}"

    def get_json(self, path: str, authenticated: bool = True) -> Any:
        response = self.request("GET", path, authenticated=authenticated)
        return response.json()

    def get_public_json(self, path: str) -> Any:
        """A public page, with the token when there is one (organisers see more); a stale token in
        the environment should not hide a public page, so a refused token is dropped."""
        try:
            return self.get_json(path, authenticated=bool(self.token))
        except ApiError as error:
            if error.status != 401 or not self.token:
                raise
            warn(f"warning: the server refused your token ({'; '.join(error.errors)}); showing the public view")
            return self.get_json(path, authenticated=False)

    def request(self, method: str, path: str, body: Body | None = None, content_type: str = "",
                authenticated: bool = True, progress: Callable[[int], Progress] | None = None,
                sink: Callable[[Any], None] | None = None) -> Response:
        """``sink``: reads a successful answer's body itself (a download, in chunks); the
        Response then has an empty body."""
        url = self.url(path)
        send_token = authenticated and bool(self.token)
        for _ in range(MAX_REDIRECTS + 1):
            response = self._send(method, url, body, content_type, send_token, progress, sink)
            location = response.headers.get("Location")
            if response.status not in REDIRECTS or not location:
                if response.status >= 400:
                    raise api_error(response)
                if response.status >= 300:
                    raise CliError(f"unexpected HTTP {response.status} {response.reason} from {url}", EXIT_NETWORK)
                return response
            target = urljoin(url, location)
            if send_token and not same_origin(url, target):
                raise CliError(f"{url} redirects to {target}, another server; your token was not sent there. "
                               f"If that is the right server, use --server {origin(target)}", EXIT_NETWORK)
            if urlsplit(url).scheme == "http" and urlsplit(target).scheme == "https" and send_token:
                warn(f"note: the server redirects to HTTPS; use --server {origin(target)} so that your token "
                     "never travels over plain HTTP")
            if response.status == 303:
                method, body, content_type = "GET", None, ""
            # 301/302/307/308 repeat the request, upload included: the file is read again.
            url = target
        raise CliError(f"too many redirects (more than {MAX_REDIRECTS}), last {url}", EXIT_NETWORK)

    def _send(self, method: str, url: str, body: Body | None, content_type: str, send_token: bool,
              progress: Callable[[int], Progress] | None, sink: Callable[[Any], None] | None = None) -> Response:
        parts = urlsplit(url)
        connection, target, headers = self._connection(parts)
        headers.update({"Accept": "application/json", "User-Agent": self.user_agent})
        if send_token:
            headers["Authorization"] = f"Token {self.token}"
        if body is not None:
            headers["Content-Type"] = content_type
            headers["Content-Length"] = str(body[0])
        bar = progress(body[0]) if progress and body is not None else None
        try:
            try:
                connection.putrequest(method, target, skip_accept_encoding=True)
                for name, value in headers.items():
                    connection.putheader(name, value)
                connection.endheaders()
                if body is not None:
                    for chunk in body[1]():
                        connection.send(chunk)
                        if bar:
                            bar.update(len(chunk))
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                # The server may answer (413, 401) without reading the whole upload and close the
                # connection: its answer, if it arrived, says more than the broken pipe.
                if bar:
                    bar.finish()
                try:
                    answer = connection.getresponse()
                    return Response(answer.status, answer.reason, answer.headers, answer.read(), url)
                except (OSError, http.client.HTTPException):
                    raise CliError(f"the server closed the connection during the upload to {url} (the file may "
                                   "be over the server's size limit)", EXIT_NETWORK) from None
            if bar:
                bar.finish()
            answer = connection.getresponse()
            if sink is not None and 200 <= answer.status < 300:
                sink(answer)
                return Response(answer.status, answer.reason, answer.headers, b"", url)
            return Response(answer.status, answer.reason, answer.headers, answer.read(), url)
        except (socket.timeout, TimeoutError):  # noqa: UP041  Python < 3.10: socket.timeout is not TimeoutError
            raise CliError(f"no answer from {url} within {self.timeout:g} s (--timeout); the server may be "
                           "overloaded or unreachable", EXIT_NETWORK) from None
        except ConnectionRefusedError:
            raise CliError(f"cannot connect to {url}: connection refused; is the server running, and is "
                           "--server (or EVALSERVER_URL) right?", EXIT_NETWORK) from None
        except socket.gaierror as error:
            raise CliError(f"cannot connect to {url}: unknown host {parts.hostname!r} ({error.strerror})",
                           EXIT_NETWORK) from None
        except ssl.SSLCertVerificationError as error:
            raise CliError(f"the certificate of {url} cannot be verified ({error.verify_message}); if the server "
                           "uses a private certificate authority, set SSL_CERT_FILE to its certificate",
                           EXIT_NETWORK) from None
        except ssl.SSLError as error:
            raise CliError(f"TLS error talking to {url}: {error}", EXIT_NETWORK) from None
        except (OSError, http.client.HTTPException) as error:
            raise CliError(f"network error talking to {url}: {describe(error)}", EXIT_NETWORK) from None
        finally:
            if bar:
                bar.finish()
            connection.close()

    def _connection(self, parts: Any) -> tuple[http.client.HTTPConnection, str, dict[str, str]]:
        """The connection, the request target and headers for the proxy, if the environment names one."""
        host = parts.hostname or ""
        port = parts.port or default_port(parts.scheme)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        proxy = proxy_for(parts.scheme, host)
        proxy_headers = {}
        if proxy is not None and proxy.username:
            credentials = f"{unquote(proxy.username)}:{unquote(proxy.password or '')}"
            proxy_headers["Proxy-Authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
        if parts.scheme == "https":
            context = ssl.create_default_context()
            if proxy is None:
                return http.client.HTTPSConnection(host, port, timeout=self.timeout, context=context), target, {}
            connection = http.client.HTTPSConnection(proxy.hostname or "", proxy.port or 8080, timeout=self.timeout,
                                                     context=context)
            connection.set_tunnel(host, port, headers=proxy_headers)  # TLS end to end through CONNECT
            return connection, target, {}
        if proxy is None:
            return http.client.HTTPConnection(host, port, timeout=self.timeout), target, {}
        connection = http.client.HTTPConnection(proxy.hostname or "", proxy.port or 8080, timeout=self.timeout)
        return connection, parts.geturl(), proxy_headers


def proxy_for(scheme: str, host: str) -> Any:
    """The proxy from the environment for this URL, or None (always None for this machine)."""
    if host in ("localhost", "::1") or host.startswith("127.") or proxy_bypass(host):
        return None
    proxy = getproxies().get(scheme)
    if not proxy:
        return None
    parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return parts if parts.hostname else None


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def same_origin(old: str, new: str) -> bool:
    """Whether a redirect may carry the token: same scheme, host and port, or the upgrade from
    http to https on the standard ports of the same host."""
    a, b = urlsplit(old), urlsplit(new)
    if (a.hostname or "").lower() != (b.hostname or "").lower():
        return False
    if a.scheme == b.scheme:
        return (a.port or default_port(a.scheme)) == (b.port or default_port(b.scheme))
    return a.scheme == "http" and b.scheme == "https" and a.port in (None, 80) and b.port in (None, 443)


def default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def describe(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


def hint_for(status: int, url: str) -> str:
    if status == 401:
        return "check your token (--token or EVALSERVER_TOKEN); it is shown on the server's 'My team' page"
    if status == 404 and "/api/v1/tasks/" in url:
        return "the 'tasks' command lists the tasks"
    if status == 404 and "/api/v1/runs/" in url:
        return "the 'runs' command lists your team's runs"
    return ""


def api_error(response: Response) -> ApiError:
    """Every line of the server's ``{"errors": [...]}``, else its ``detail``, else the status line."""
    errors: list[str] = []
    try:
        data = json.loads(response.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        data = None
    if isinstance(data, dict) and isinstance(data.get("errors"), list):
        errors = [str(line) for line in data["errors"]]
    elif isinstance(data, dict) and data.get("detail"):
        errors = [str(data["detail"])]
    if not errors:
        errors = [f"HTTP {response.status} {response.reason}"]
    hint = hint_for(response.status, response.url)
    retry = response.headers.get("Retry-After")
    if response.status in (429, 503) and retry:
        hint = f"try again in {retry} s"
    seconds = int(retry) if retry and retry.strip().isdigit() else None
    return ApiError(response.status, response.reason, response.url, errors, hint, seconds)


# Multipart upload --------------------------------------------------------------------------

def form_name(text: str) -> bytes:
    """A filename or field name for a Content-Disposition header, escaped as browsers do (HTML
    form submission: ``"`` CR LF as %22 %0D %0A; the backslash too, which some parsers unescape)."""
    for char, escape in (("\\", "%5C"), ('"', "%22"), ("\r", "%0D"), ("\n", "%0A")):
        text = text.replace(char, escape)
    return text.encode("utf-8", "replace")


def multipart_body(fields: list[tuple[str, str]], path: str, size: int) -> tuple[str, Body]:
    """``multipart/form-data`` with the text ``fields`` and the file at ``path`` as ``file``; the
    file is read in chunks while sending, so memory stays small and the progress is real."""
    boundary = f"evalserver-{uuid.uuid4().hex}"
    marker = boundary.encode()
    head = b""
    for name, value in fields:
        data = value.encode("utf-8")
        if marker in data:  # a uuid4 in the text: vanishingly unlikely, but it would cut the part short
            raise CliError(f"{name}: contains the multipart boundary; please change it")
        head += (b"--" + marker + b'\r\nContent-Disposition: form-data; name="' + form_name(name)
                 + b'"\r\n\r\n' + data + b"\r\n")
    head += (b"--" + marker + b'\r\nContent-Disposition: form-data; name="file"; filename="'
             + form_name(os.path.basename(path)) + b'"\r\nContent-Type: application/json\r\n\r\n')
    tail = b"\r\n--" + marker + b"--\r\n"

    def chunks() -> Iterator[bytes]:
        yield head
        remaining = size
        with open(path, "rb") as handle:
            while remaining > 0:
                data = handle.read(min(CHUNK_SIZE, remaining))
                if not data:
                    raise CliError(f"{path}: the file got shorter while it was being sent")
                remaining -= len(data)
                yield data
        yield tail

    return f"multipart/form-data; boundary={boundary}", (len(head) + size + len(tail), chunks)


def parse_size(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*", text, re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (examples: 33554432, 32MiB, 50MB, 500k)")
    value, unit = float(match.group(1)), (match.group(2) or "b").lower().rstrip("b")
    scale = {"": 1, "k": 1000, "m": 1000 ** 2, "g": 1000 ** 3, "ki": 1024, "mi": 1024 ** 2, "gi": 1024 ** 3}[unit]
    if not math.isfinite(value * scale):  # int() of an infinite float raises OverflowError, not ValueError
        raise argparse.ArgumentTypeError(f"{text[:40]!r}{'...' if len(text) > 40 else ''} is too large a size")
    return int(value * scale)


def check_run_file(path: str, max_size: int) -> int:
    """The file's size, after checking that it exists, is a file we can read and is under the limit."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.read(1)
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{path}: is a directory, not a run file") from None
    except PermissionError:
        raise CliError(f"{path}: cannot be read (permission denied)") from None
    except OSError as error:
        raise CliError(f"{path}: cannot be read ({describe(error)})") from None
    if not os.path.isfile(path):
        raise CliError(f"{path}: not a regular file")
    if size > max_size:
        raise CliError(f"{path}: {size} bytes ({human_size(size)}) is over the limit of {max_size} bytes "
                       f"({human_size(max_size)}); pass --max-size if the server accepts more")
    return size


# Commands ----------------------------------------------------------------------------------

def task_path(task: str, tail: str) -> str:
    return f"/api/v1/tasks/{quote(task, safe='')}/{tail}"


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def wait_for_run(client: Client, run_id: int, max_wait: float) -> dict[str, Any]:
    """Poll a run until it is done or failed: at once, then every 1, 2, 3, 5, 5, ... 10 s. Brief
    network or server failures (a restart) are retried; a rejected request is not."""
    delays = [1, 2, 3, 5, 5, 5, 10]
    started = time.monotonic()
    last_status = None
    failures = 0
    polls = 0
    while True:
        try:
            run = client.get_json(f"/api/v1/runs/{run_id}/")
            failures = 0
        except CliError as error:
            if error.exit_code != EXIT_NETWORK or failures >= 5:
                raise
            failures += 1
            warn(f"warning: {error.message} (retrying)")
            run = None
        if run is not None:
            status = run.get("status")
            if status in FINISHED:
                return run
            if status != last_status:
                warn(f"run {run_id}: {status}")
                last_status = status
        if max_wait and time.monotonic() - started > max_wait:
            raise CliError(f"run {run_id} is still {last_status or 'unknown'} after {max_wait:g} s; check again "
                           f"later with: status {run_id} --wait", EXIT_NETWORK)
        time.sleep(delays[min(polls, len(delays) - 1)])
        polls += 1


def finish_run(run: dict[str, Any], client: Client, args: argparse.Namespace) -> int:
    if args.json:
        print_json(run)
    else:
        print(run_report(run, client.base, args.digits))
    return EXIT_RUN_FAILED if run.get("status") == "failed" else EXIT_OK


BUSY_RETRIES = 10


def command_submit(args: argparse.Namespace, client: Client) -> int:
    size = check_run_file(args.run_file, args.max_size)
    description = args.description
    if args.description_file:
        try:
            with open(args.description_file, encoding="utf-8-sig") as handle:
                description = handle.read()
        except (OSError, UnicodeDecodeError) as error:
            raise CliError(f"{args.description_file}: cannot be read as UTF-8 text ({describe(error)})") from None
    fields = [("public", "false" if args.private else "true")]
    if args.name is not None:
        fields.append(("name", args.name))
    if description is not None:
        fields.append(("description", description))
    if args.priority is not None:
        fields.append(("priority", str(args.priority)))
    if args.phase is not None:
        fields.append(("phase", args.phase))
    if args.team is not None:
        fields.append(("team", args.team))
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    attempt = 0
    while True:
        content_type, body = multipart_body(fields, args.run_file, size)
        try:
            response = client.request("POST", task_path(args.task, "runs/"), body, content_type,
                                      progress=lambda total: Progress(total, show))
            break
        except ApiError as error:
            # 503 with Retry-After: the server is validating other uploads and stored nothing.
            if error.status != 503 or error.retry_after is None or attempt >= BUSY_RETRIES:
                raise
            attempt += 1
            wait = min(max(error.retry_after, 1), 120)
            warn(f"the server is busy ({error.errors[0] if error.errors else 'HTTP 503'}); sending the file again "
                 f"in {wait} s (try {attempt} of {BUSY_RETRIES})")
            time.sleep(wait)
    created = response.json()
    run_id = created.get("id")
    if not isinstance(run_id, int):
        raise CliError(f"the server accepted the upload but sent no run id ({response.url})", EXIT_NETWORK)
    for line in created.get("warnings") or []:
        warn(f"warning: {line}")
    if created.get("identical_note"):
        # The server compares the file with the team's own earlier runs only (SHA-256).
        warn(f"note: {created['identical_note']}")
    if "quota" in created:
        warn(quota_line(created.get("quota"), created.get("submissions")))
    url = client.url(created.get("url") or f"/api/v1/runs/{run_id}/")
    if not args.wait:
        if args.json:
            print_json(created)
        else:
            print(f"run {run_id} {created.get('status', 'queued')}")
            print(f"url: {url}")
            warn(f"follow it with: {os.path.basename(sys.argv[0]) or 'evalserver_cli.py'} status {run_id} --wait")
        return EXIT_OK
    if not args.json:
        print(f"run {run_id} {created.get('status', 'queued')}")
        print(f"url: {url}", flush=True)
    try:
        run = wait_for_run(client, run_id, args.max_wait)
    except KeyboardInterrupt:
        raise CliError(f"stopped waiting; run {run_id} is still scored on the server: status {run_id} --wait",
                       EXIT_INTERRUPTED) from None
    if not args.json:
        print()
    return finish_run(run, client, args)


def command_status(args: argparse.Namespace, client: Client) -> int:
    if args.wait:
        try:
            run = wait_for_run(client, args.run_id, args.max_wait)
        except KeyboardInterrupt:
            raise CliError("stopped waiting", EXIT_INTERRUPTED) from None
    else:
        run = client.get_json(f"/api/v1/runs/{args.run_id}/")
    return finish_run(run, client, args)


def run_name(run: dict) -> str:
    """A run's name for a table, clipped; a late run (after the phase's end, under its team's
    extension) says so, as the board does."""
    return clip(run.get("name"), 30) + (" (late)" if run.get("late") else "")


def command_runs(args: argparse.Namespace, client: Client) -> int:
    data = client.get_json(task_path(args.task, "my-runs/"))
    if args.json:
        print_json(data)
        return EXIT_OK
    runs = [run for run in data.get("runs") or [] if isinstance(run, dict)]
    if args.phase is not None:
        # Runs of different phases are scored against different gold: --phase keeps one phase's.
        phases = sorted({str(run.get("phase")) for run in runs if run.get("phase")})
        runs = [run for run in runs if run.get("phase") == args.phase]
        if not runs:
            print(f"your team has no runs of {args.task} in the phase {args.phase!r}"
                  + (f" (your runs are in: {', '.join(phases)})" if phases else ""))
    elif not runs:
        print(f"your team has no runs of {args.task} yet")
    if runs:
        info = measure_info(data)
        keys = score_keys([run.get("scores") for run in runs], args.all, info)
        headers = (["id", "name", "phase", "status", "pri", "public", "submitted (UTC)"]
                   + [short_key(key, info) for key in keys])
        rows = [[str(run.get("id")), run_name(run),
                 clip(run.get("phase") or "-", 20),
                 str(run.get("status")), str(run["priority"]) if run.get("priority") is not None else "-",
                 "yes" if run.get("is_public") else "no", timestamp(run.get("submitted_at"))]
                + [number(score_value(run.get("scores"), key), args.digits) for key in keys] for run in runs]
        print(render_table(headers, rows, {0} | set(range(7, len(headers)))))
    print(quota_line(data.get("quota"), data.get("submissions")))
    return EXIT_OK


def resolve_sort_key(requested: str | None, keys: list[str], info: dict[str, dict[str, Any]]) -> str | None:
    """The measure key ``--sort`` names: the key itself, its end (``A.rsnod`` for
    ``quality.A.rsnod``) or its column header (``A.RSNOD``), case aside."""
    if not requested:
        return keys[0] if keys else None
    wanted = requested.lower().replace(" ", ".")
    for key in keys:
        if wanted in (key.lower(), short_key(key, info).lower()) or key.lower().endswith("." + wanted):
            return key
    raise CliError(f"--sort {requested}: no such measure on this board; choose one of: "
                   + (", ".join(keys) or "(none: the board is empty)"))


def command_leaderboard(args: argparse.Namespace, client: Client) -> int:
    path = task_path(args.task, "leaderboard/") + (f"?phase={quote(args.phase, safe='')}" if args.phase else "")
    data = client.get_public_json(path)
    if args.json:
        print_json(data)
        return EXIT_OK
    runs = [run for run in data.get("runs") or [] if isinstance(run, dict)]
    info = measure_info(data)
    all_keys = score_keys([run.get("scores") for run in runs], True, info)
    sort_key = resolve_sort_key(args.sort, all_keys, info)
    keys = score_keys([run.get("scores") for run in runs], args.all, info)
    if sort_key and sort_key not in keys:
        keys.insert(0, sort_key)
    print(f"{data.get('task')}: {data.get('title')}  (phase {data.get('phase') or '-'}, gold version "
          f"{data.get('gold_version') if data.get('gold_version') is not None else '-'}, "
          f"scores on {SCOPES.get(data.get('scope'), data.get('scope') or '-')})")
    if data.get("note"):
        print(f"note: {data['note']}")
    if not runs:
        print("no scored runs on the board yet")
        return EXIT_OK
    told = direction(sort_key, info) if sort_key else ""
    print(f"sorted by {sort_key}" + (f"; {told}" if told else ""))
    sign = -1.0 if sort_key and info.get(sort_key, {}).get("higher_is_better") else 1.0

    def order(run: dict[str, Any]) -> tuple:
        value = score_value(run.get("scores"), sort_key) if sort_key else None
        return (not isinstance(value, (int, float)), sign * value if isinstance(value, (int, float)) else 0.0,
                run.get("id") or 0)

    rows = []
    for run in sorted(runs, key=order):
        rank = (run.get("ranks") or {}).get(sort_key) if sort_key else None
        team = "(baseline)" if run.get("is_baseline") else run.get("team")
        rows.append([str(rank) if rank is not None else "-", str(run.get("id")), clip(team, 20),
                     run_name(run),
                     str(run["priority"]) if run.get("priority") is not None else "-"]
                    + [number(score_value(run.get("scores"), key), args.digits) for key in keys])
    headers = ["rank", "id", "team", "run", "pri"] + [short_key(key, info) for key in keys]
    print(render_table(headers, rows, {0, 1} | set(range(5, len(headers)))))
    return EXIT_OK


SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


# Names Windows keeps for devices, whatever the extension: writing "con.txt" writes to the console.
WINDOWS_DEVICES = {"con", "prn", "aux", "nul"} | {f"{port}{n}" for port in ("com", "lpt") for n in range(1, 10)}


def safe_data_name(name: Any) -> str:
    """A file name from the server, checked before anything is written under it: letters, digits,
    '.', '-' and '_', no '..', no '.' at the end, no directories, no Windows device name (the
    server allows no other names)."""
    text = str(name)
    if not SAFE_NAME.fullmatch(text) or ".." in text or text.endswith(".") \
            or text.split(".")[0].lower() in WINDOWS_DEVICES:
        raise CliError(f"the server listed a file named {text[:80]!r}, which is not a safe file name; nothing was "
                       "written under it", EXIT_NETWORK)
    return text


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK_SIZE), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_file(client: Client, path: str, target: str, size: int, sha256: str, show: bool) -> None:
    """Download to ``target`` through a temporary file beside it, checked against the listed size
    and SHA-256 before it takes the target's place: an interrupted or corrupted download never
    looks like a complete file. No more than the listed size is written (a server that sends
    more is stopped at one byte past it). The temporary file's name starts with a dot, which no
    listed name does: it cannot replace a listed file (``x.txt.part`` beside ``x.txt``)."""
    handle_number, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".part",
                                                dir=os.path.dirname(target) or ".")
    handle = os.fdopen(handle_number, "wb")
    digest = hashlib.sha256()
    bar = Progress(size, show)

    def sink(answer: Any) -> None:
        while True:
            chunk = answer.read(min(CHUNK_SIZE, size + 1 - bar.sent))
            if not chunk:
                break
            digest.update(chunk)
            handle.write(chunk)
            bar.update(len(chunk))
            if bar.sent > size:
                raise CliError(f"{os.path.basename(target)}: the server sent more than the {size} bytes it "
                               "listed; stopped, nothing kept", EXIT_NETWORK)
        bar.finish()

    try:
        client.request("GET", path, authenticated=bool(client.token), sink=sink)
        handle.close()
        if bar.sent != size or digest.hexdigest() != sha256:
            raise CliError(f"{os.path.basename(target)}: the download does not match the listing ({bar.sent} of "
                           f"{size} bytes, or another SHA-256); try again", EXIT_NETWORK)
        os.replace(temporary, target)
    finally:
        handle.close()
        if os.path.exists(temporary):
            os.remove(temporary)


def command_data(args: argparse.Namespace, client: Client) -> int:
    query = f"?phase={quote(args.phase, safe='')}" if args.phase else ""
    listing = client.get_public_json(task_path(args.task, "data/") + query)
    if args.json:
        print_json(listing)
        return EXIT_OK
    phase = listing.get("phase") if isinstance(listing.get("phase"), dict) else None
    files = [entry for entry in listing.get("files") or [] if isinstance(entry, dict)]
    where = f"phase {phase.get('name')}" if phase else "no phases"
    gold = listing.get("gold_version")
    print(f"{listing.get('task')}: data of {where}" + (f", gold version {gold}" if gold is not None else ""))
    for note in listing.get("notes") or []:
        print(f"note: {note}")
    if args.list:
        rows = [[str(entry.get("name")), human_size(entry.get("size") or 0), "yes" if entry.get("available") else "no",
                 clip(entry.get("title"), 40)] for entry in files]
        print(render_table(["file", "size", "available", "what"], rows, {1}))
        if not listing.get("available") and listing.get("reason"):
            print(f"not available: {listing['reason']}")
        return EXIT_OK
    if args.out:
        folder = args.out
    else:  # one folder name made of the task's and the phase's names, nothing else
        parts = [str(listing.get("task") or args.task), str(phase.get("name")) if phase else "", "data"]
        folder = re.sub(r"[^A-Za-z0-9._-]", "_", "-".join(part for part in parts if part)).lstrip(".") or "data"
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as error:  # a file of that name, or a folder it may not write in
        raise CliError(f"--out {folder}: cannot make the folder ({error.strerror or error})") from None
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    refused = []
    for entry in files:
        name = safe_data_name(entry.get("name"))
        if not entry.get("available"):
            refused.append(name)
            continue
        target = os.path.join(folder, name)
        size, sha256 = int(entry.get("size") or 0), str(entry.get("sha256") or "")
        if os.path.isfile(target) and os.path.getsize(target) == size and sha256_of(target) == sha256:
            print(f"{target}: up to date ({human_size(size)})")
            continue
        download_file(client, task_path(args.task, f"data/{quote(name)}") + query, target, size, sha256, show)
        print(f"{target}: {human_size(size)}, SHA-256 checked")
    if refused:
        raise CliError(f"not downloaded: {', '.join(refused)}", EXIT_INVALID,
                       [str(listing.get("reason") or "not available to you")])
    return EXIT_OK


def command_tasks(args: argparse.Namespace, client: Client) -> int:
    data = client.get_public_json("/api/v1/tasks/")
    if args.json:
        print_json(data)
        return EXIT_OK
    tasks = [task for task in data.get("tasks") or [] if isinstance(task, dict)]
    if not tasks:
        print("no public tasks")
        return EXIT_OK
    print(render_table(["task", "title"], [[str(task.get("slug")), clip(task.get("title"), 70)] for task in tasks]))
    return EXIT_OK


# Command line ------------------------------------------------------------------------------

EPILOG = """\
environment:
  EVALSERVER_URL    the server (default %(default_server)s); --server wins
  EVALSERVER_TOKEN  your API token (shown on the server's 'My team' page); --token wins.
                    Prefer the variable: a --token on the command line is visible to other
                    users of the machine in the process list.

exit status:
  0 ok, 1 the run failed scoring, 2 invalid input or a request the server rejected,
  3 network or server error (or --max-wait reached), 130 interrupted

examples:
  export EVALSERVER_URL=https://eval.example.org EVALSERVER_TOKEN=...
  %(prog)s tasks
  %(prog)s submit stc3-zh TEAM-run1.json --name TEAM-run1 --priority 1 --wait
  %(prog)s status 42
  %(prog)s runs stc3-zh
  %(prog)s leaderboard stc3-zh --sort nugget.jsd
  %(prog)s data stc3-zh --out stc3-zh-data
"""


def seconds(text: str) -> float:
    """A duration: a finite number of seconds, 0 or more (float() also reads nan and inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of seconds, 0 or more")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


def add_common_options(parser: argparse.ArgumentParser, top: bool) -> None:
    """Options accepted before and after the command; after the command they are defaults-free
    (SUPPRESS), so they override the top-level ones only when given."""
    default = (lambda value: value) if top else (lambda value: argparse.SUPPRESS)
    group = parser.add_argument_group("connection and output")
    group.add_argument("--server", metavar="URL", default=default(None),
                       help=f"server URL (default: $EVALSERVER_URL or {DEFAULT_SERVER})")
    group.add_argument("--token", metavar="TOKEN", default=default(None),
                       help="API token (default: $EVALSERVER_TOKEN)")
    group.add_argument("--timeout", metavar="SECONDS", type=seconds, default=default(DEFAULT_TIMEOUT),
                       help=f"network timeout of each request (default {DEFAULT_TIMEOUT:g})")
    group.add_argument("--digits", metavar="N", type=int, default=default(4),
                       help="decimals shown for scores (default 4)")


def build_parser() -> argparse.ArgumentParser:
    prog = os.path.basename(sys.argv[0]) or "evalserver_cli.py"
    parser = argparse.ArgumentParser(
        prog=prog, description="Submit runs to a DialEval / STC-3 evaluation server, follow their scoring, "
                               "read the leaderboard and download a task's data.",
        epilog=EPILOG % {"prog": prog, "default_server": DEFAULT_SERVER},
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_common_options(parser, top=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    def about(text: str, *examples: str) -> str:
        return (textwrap.fill(text, 78) + "\n\nexample" + ("s" if len(examples) > 1 else "") + ":\n"
                + "\n".join(f"  {prog} {example}" for example in examples))

    def command(name: str, help_text: str, description: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=description,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        add_common_options(sub, top=False)
        return sub

    submit = command("submit", "upload a run file", about(
        "Upload a run (a JSON file) to a task. The file is checked here (exists, readable, under --max-size), "
        "then validated completely by the server, which lists every problem (exit status 2). A valid run is "
        "queued for scoring; --wait waits for the scores (exit status 1 if scoring fails).",
        "submit stc3-zh TEAM-run1.json --name TEAM-run1 --priority 1 --wait",
        "submit stc3-zh TEAM-run2.json --description-file method.txt --private",
        "submit stc3-zh TEAM-test-run1.json --phase test --priority 1",
        "submit stc3-zh emailed-run.json --team Aurora --phase test   # an organiser, for a team"))
    submit.add_argument("task", metavar="TASK", help="the task's short name (see the 'tasks' command)")
    submit.add_argument("run_file", metavar="RUN.json", help="the run file")
    submit.add_argument("--name", help="run name shown on the leaderboard (default: the file name)")
    described = submit.add_mutually_exclusive_group()
    described.add_argument("--description", metavar="TEXT", help="a description of the method")
    described.add_argument("--description-file", metavar="FILE", help="read the description from a UTF-8 file")
    submit.add_argument("--priority", metavar="K", type=positive_int,
                        help="1 for your primary run, 2, 3, ... for the others")
    submit.add_argument("--phase", metavar="NAME",
                        help="the phase the run is for, by its name (needed while several phases of the task are "
                             "open; default: the only open one)")
    submit.add_argument("--team", metavar="TEAM",
                        help="organisers of the task only: upload the run on behalf of this team (its name or short "
                             "name); the run follows the team's phase, extension and quota and records who uploaded it")
    submit.add_argument("--private", action="store_true",
                        help="keep the run off the public leaderboard (your team and the organisers see it)")
    submit.add_argument("--wait", action="store_true", help="wait for the scores and print them")
    submit.add_argument("--max-wait", metavar="SECONDS", type=seconds, default=0,
                        help="with --wait, give up after this long (exit status 3; default: no limit)")
    submit.add_argument("--max-size", metavar="SIZE", type=parse_size, default=DEFAULT_MAX_SIZE,
                        help="refuse larger files before sending, e.g. 50MB, 64MiB or bytes "
                             "(default 32MiB, the server's default limit)")
    shown = submit.add_mutually_exclusive_group()
    shown.add_argument("--progress", action="store_const", const=True, default=None,
                       help="show the upload progress bar on stderr (default: only when stderr is a terminal)")
    shown.add_argument("--no-progress", dest="progress", action="store_const", const=False,
                       help="never show the progress bar")
    submit.add_argument("--json", action="store_true",
                        help="print the server's JSON answer (with --wait: the finished run) instead of text")
    submit.set_defaults(handler=command_submit)

    status = command("status", "show a run's status, errors, warnings and scores", about(
        "Show a run of your team: status (queued, scoring, done, failed), errors, warnings and scores. "
        "Exit status 1 when the run failed.", "status 42", "status 42 --wait --json"))
    status.add_argument("run_id", metavar="RUN_ID", type=positive_int, help="the run's number")
    status.add_argument("--wait", action="store_true", help="wait until the run is done or failed")
    status.add_argument("--max-wait", metavar="SECONDS", type=seconds, default=0,
                        help="with --wait, give up after this long (exit status 3; default: no limit)")
    status.add_argument("--json", action="store_true", help="print the server's JSON instead of text")
    status.set_defaults(handler=command_status)

    runs = command("runs", "list your team's runs of a task and the quota", about(
        "List your team's runs of a task, newest first, with the phase each was submitted to, the official "
        "measures (all of them with --all) and the submission quota left. Columns carry the server's short "
        "titles ('A.RSNOD' is the measure quality.A.rsnod).", "runs stc3-zh", "runs stc3-zh --phase test"))
    runs.add_argument("task", metavar="TASK", help="the task's short name")
    runs.add_argument("--all", action="store_true", help="show every measure, not only the official ones")
    runs.add_argument("--phase", metavar="NAME", help="only the runs of this phase (exactly its name); each run "
                                                      "is scored against its own phase's gold")
    runs.add_argument("--json", action="store_true", help="print the server's JSON instead of a table")
    runs.set_defaults(handler=command_runs)

    board = command("leaderboard", "show a task's public leaderboard", about(
        "Show a task's public leaderboard, best first by the chosen measure (in its direction, which the "
        "server states: lower is better for a distance, higher for BLEU), with the server's rank by that "
        "measure (ties share a rank). No token needed. Columns carry the server's short titles.",
        "leaderboard stc3-zh", "leaderboard stc3-zh --sort nugget.jsd --all"))
    board.add_argument("task", metavar="TASK", help="the task's short name")
    board.add_argument("--sort", metavar="MEASURE",
                       help="a measure key, its last parts or its short title, e.g. quality.A.rsnod, "
                            "A.rsnod, A.RSNOD, nugget.jsd, bleu (default: the board's first column)")
    board.add_argument("--phase", metavar="NAME", help="a phase's board (default: the open or latest phase)")
    board.add_argument("--all", action="store_true", help="show every measure, not only the official ones")
    board.add_argument("--json", action="store_true", help="print the server's JSON (unsorted) instead of a table")
    board.set_defaults(handler=command_leaderboard)

    data = command("data", "download a task's data: participants' data, run format, sample run, files", about(
        "Download the data section of a task (of its open phase, or --phase): the participants' data (the items "
        "without any annotation), the run format, a sample run and the organisers' files, into --out (default "
        "TASK-PHASE-data). Each file is checked against the size and SHA-256 the server lists; files already "
        "there and identical are not downloaded again. A phase's data may be kept for registered teams: then "
        "pass your token (exit status 2 names what you could not download, and why).",
        "data stc3-zh", "data stc3-zh --phase test --out test-data", "data stc3-zh --list"))
    data.add_argument("task", metavar="TASK", help="the task's short name")
    data.add_argument("--phase", metavar="NAME", help="a phase's data (default: the open or latest phase)")
    data.add_argument("--out", metavar="DIR", help="where to save the files (default: TASK-PHASE-data)")
    data.add_argument("--list", action="store_true", help="only list the files")
    data.add_argument("--json", action="store_true", help="print the server's listing (JSON) and download nothing")
    shown_data = data.add_mutually_exclusive_group()
    shown_data.add_argument("--progress", action="store_const", const=True, default=None,
                            help="show download progress on stderr (default: only when stderr is a terminal)")
    shown_data.add_argument("--no-progress", dest="progress", action="store_const", const=False,
                            help="never show progress")
    data.set_defaults(handler=command_data)

    tasks = command("tasks", "list the tasks", about("List the tasks you can see.", "tasks"))
    tasks.add_argument("--json", action="store_true", help="print the server's JSON instead of a table")
    tasks.set_defaults(handler=command_tasks)
    return parser


def server_url(value: str | None) -> str:
    server = (value or os.environ.get("EVALSERVER_URL") or DEFAULT_SERVER).strip()
    if "://" not in server:
        server = f"http://{server}"
    if re.search(r"[\x00-\x20\x7f]", server):
        raise CliError(f"--server {server!r}: a URL has no spaces or control characters")
    try:
        parts = urlsplit(server)
    except ValueError as error:  # an unclosed [IPv6 address
        raise CliError(f"--server {server}: {error}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(f"--server {server}: expected a URL such as https://eval.example.org")
    try:
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number or out of range)
    except ValueError as error:
        raise CliError(f"--server {server}: the port is not a number from 0 to 65535 ({error})") from None
    try:
        parts.hostname.encode("idna")
    except UnicodeError:
        raise CliError(f"--server {server}: the host name is not valid (each dot-separated part "
                       "1 to 63 characters)") from None
    return server.rstrip("/")


def api_token(value: str | None, required: bool) -> str | None:
    token = (value if value is not None else os.environ.get("EVALSERVER_TOKEN", "")).strip()
    if token.lower().startswith("token "):  # pasted with the header's prefix
        token = token[len("token "):].strip()
    if not token:
        if required:
            raise CliError("no API token: pass --token or set EVALSERVER_TOKEN (the token is shown on the "
                           "server's 'My team' page)")
        return None
    if not re.fullmatch(r"[\x21-\x7e]+", token):
        raise CliError("the API token contains spaces or characters a token never has; copy it again")
    return token


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # team names in any script on any console
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    args = build_parser().parse_args(argv)
    try:
        needs_token = args.command in ("submit", "status", "runs")
        client = Client(server_url(args.server), api_token(args.token, needs_token), args.timeout)
        if args.timeout <= 0:
            raise CliError("--timeout must be more than 0")  # 0 is a duration, not a network timeout
        if not 0 <= args.digits <= 15:
            raise CliError("--digits must be from 0 to 15")
        return args.handler(args, client)
    except CliError as error:
        warn(f"error: {error.message}")
        for line in error.details:
            warn(f"  {line}")
        return error.exit_code
    except KeyboardInterrupt:
        warn("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into head
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
