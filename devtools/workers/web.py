"""HTTP calls that never raise: ``Reply``, ``call``, uploads (multipart or raw) and telling a
traceback from a clean refusal.
"""

from __future__ import annotations

import http.client
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# HTTP -----------------------------------------------------------------------------------------------

@dataclass
class Reply:
    status: int  # 0: no HTTP answer at all (connection refused or reset)
    body: bytes
    headers: dict[str, str]
    seconds: float

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


def multipart(fields: dict[str, str], filename: str, content: bytes) -> tuple[bytes, str]:
    boundary = f"----evalserver-{uuid.uuid4().hex}"
    head = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
                    for name, value in fields.items())
    part = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
            "Content-Type: application/json\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
    return head + part, f"multipart/form-data; boundary={boundary}"


def send_case(url: str, token: str, transport: str, fields: dict[str, str], filename: str,
              content: bytes) -> Reply:
    """An upload sent over HTTP the way a hostile corpus case says (``Case.transport``)."""
    if transport == "json":
        return call(url, token, content, "application/json")
    body, content_type = multipart(fields, filename, content)
    boundary = content_type.split("boundary=", 1)[1]
    if transport == "no-file":
        body = body.replace(b'name="file"', b'name="attachment"', 1)
    elif transport == "many-files":
        extra = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="extra"; filename="x{i}.json"\r\n'
                         f"Content-Type: application/json\r\n\r\n[]\r\n".encode() for i in range(120))
        body = extra + body
    elif transport == "chunked":
        # As curl -H 'Transfer-Encoding: chunked' sends it: no Content-Length at all.
        parts = urlsplit(url)
        started = time.perf_counter()
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            connection.putrequest("POST", parts.path)
            connection.putheader("Authorization", f"Token {token}")
            connection.putheader("Content-Type", content_type)
            connection.putheader("Transfer-Encoding", "chunked")
            connection.endheaders()
            connection.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
            response = connection.getresponse()
            return Reply(response.status, response.read(), {k.lower(): v for k, v in response.getheaders()},
                         time.perf_counter() - started)
        except OSError:
            return Reply(0, b"", {}, time.perf_counter() - started)
        finally:
            connection.close()
    return call(url, token, body, content_type)


def call(url: str, token: str | None = None, body: bytes | None = None, content_type: str | None = None,
         timeout: float = 60, accept: str = "application/json") -> Reply:
    """One request on a fresh connection; HTTP errors and refused connections are answers, not exceptions."""
    parts = urlsplit(url)
    headers = {"Accept": accept, "Connection": "close"}
    if token:
        headers["Authorization"] = f"Token {token}"
    if content_type:
        headers["Content-Type"] = content_type
    started = time.perf_counter()
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        connection.request("POST" if body is not None else "GET", parts.path + (f"?{parts.query}" if parts.query
                                                                                 else ""), body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        return Reply(response.status, data, {k.lower(): v for k, v in response.getheaders()},
                     time.perf_counter() - started)
    except (OSError, http.client.HTTPException) as error:
        return Reply(0, f"{type(error).__name__}: {error}".encode(), {}, time.perf_counter() - started)
    finally:
        connection.close()


def upload(base_url: str, slug: str, token: str, content: bytes, name: str, timeout: float = 60) -> Reply:
    body, content_type = multipart({"name": name, "description": "reliability test run"}, f"{name}.json", content)
    return call(f"{base_url}/api/v1/tasks/{slug}/runs/", token, body, content_type, timeout=timeout)


def upload_patiently(base_url: str, slug: str, token: str, content: bytes, name: str, timeout: float = 60,
                     tries: int = 10) -> Reply:
    """``upload``, sent again as a client should when the server answers 503 with Retry-After
    (it is validating other uploads and stored nothing)."""
    for _ in range(tries):
        reply = upload(base_url, slug, token, content, name, timeout=timeout)
        retry = reply.headers.get("retry-after", "")
        if reply.status != 503 or not retry.isdigit():
            return reply
        time.sleep(min(int(retry), 30))
    return reply


def looks_like_traceback(reply: Reply) -> bool:
    text = reply.body[:20000].decode(errors="replace")
    return "Traceback (most recent call last)" in text or "technical_500" in text or 'id="traceback"' in text
