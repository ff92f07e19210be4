"""A database outage on an HTML page: a 503 page saying so, instead of the generic 500 page."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.urls import Resolver404, resolve

from evalserver.errors import problem_response
from tasks.errors import TRANSIENT_DB_ERRORS, Rejected
from tasks.hooks import large_files_of
from tasks.submissions import LARGE_UPLOAD_BYTES, upload_size_problem, validation_slot

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 30
API_MESSAGE = "the database is unavailable at the moment; please try again in a minute"


class DatabaseUnavailableMiddleware:
    """Turn ``OperationalError``/``InterfaceError`` raised by a view into ``503`` with ``Retry-After``.

    The database is down or restarting: a temporary state, not a bug, so the page says so and
    is logged as one line, without a traceback. ``503.html`` is rendered without the request,
    so no context processor runs (the user and the session would need the database that just
    failed). API views never get here: DRF's exception handler (``tasks.api.exception_handler``)
    answers them with 503 JSON first; anything under ``/api/`` that still does gets the same JSON.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, TRANSIENT_DB_ERRORS):
            return None
        log.error("database unavailable (%s %s): %s: %s", request.method, request.path,
                  type(exception).__name__, " ".join(str(exception).split()))  # one line, no traceback
        if request.path.startswith("/api/"):
            response: HttpResponse = JsonResponse({"errors": [API_MESSAGE]}, status=503)
        else:
            response = HttpResponse(render_to_string("503.html"), status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response


class RequestBodyMiddleware:
    """Refuse, before anything reads the body, a request body the server cannot take.

    * ``Transfer-Encoding: chunked`` without ``Content-Length``: Django reads a body only up to
      ``Content-Length``, so such an upload would arrive empty and be told "file: missing".
      It gets ``411 Length Required`` saying what to do instead.
    * A run upload (web form or API) whose ``Content-Length`` is over the upload limit
      (``tasks.submissions.upload_size_problem``): ``413`` at once, before the CSRF check would
      read the whole body to find its token.
    * A large run upload (over ``LARGE_UPLOAD_BYTES``) when the process's validation slots are
      taken: ``503`` with ``Retry-After`` (``tasks.submissions.validation_slot``), before the body is
      parsed.
    """

    UPLOAD_URLS = ("upload", "api-upload")

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method in ("POST", "PUT", "PATCH"):
            chunked = "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
            length = request.META.get("CONTENT_LENGTH") or ""
            if chunked and not length.strip():
                return problem_response(request, 411, "the request has no Content-Length (it was sent with "
                                        "Transfer-Encoding: chunked); send the file with a Content-Length "
                                        "header, as curl -F and the command-line client do", "Length required")
            try:
                size = int(length or 0)
            except ValueError:
                return problem_response(request, 400, "Content-Length: not a number of bytes")
            too_large = upload_size_problem(size, whole_request=True)
            if too_large and self._is_upload(request):
                return problem_response(request, 413, too_large, "Upload too large")
            too_large = self._pool_size_problem(request, size)
            if too_large:
                return problem_response(request, 413, too_large, "Upload too large")
            if request.method == "POST" and size > LARGE_UPLOAD_BYTES and self._is_upload(request):
                return self._upload(request, size)
        return self.get_response(request)

    # Views that take large files (a vBLEU pool and its ratings) declare how many
    # (``accepts_large_files``), each at most EVALSERVER_POOL_MAX_BYTES; the rest of a form is small.
    FORM_SLACK_BYTES = 64 * 1024

    def _pool_size_problem(self, request: HttpRequest, size: int) -> str:
        if size <= settings.EVALSERVER_POOL_MAX_BYTES:
            return ""
        try:
            files = large_files_of(resolve(request.path_info))
        except Resolver404:
            return ""
        limit = files * settings.EVALSERVER_POOL_MAX_BYTES + self.FORM_SLACK_BYTES
        if not files or size <= limit:
            return ""
        return (f"the request has {size:,} bytes; a pool{' and its ratings' if files > 1 else ''} may have at most "
                f"{settings.EVALSERVER_POOL_MAX_BYTES:,} bytes each (EVALSERVER_POOL_MAX_BYTES)")

    def _is_upload(self, request: HttpRequest) -> bool:
        try:
            return resolve(request.path_info).url_name in self.UPLOAD_URLS
        except Resolver404:
            return False

    def _upload(self, request: HttpRequest, size: int) -> HttpResponse:
        """Take a validation slot before a large body is read: receiving 32 MiB and parsing the
        multipart form is most of such an upload's work, and the thread it holds is one readers
        need. Refused, the body is read and dropped (so that the client, still sending, gets the
        answer) and nothing else is done."""
        try:
            with validation_slot(size):
                return self.get_response(request)
        except Rejected as busy:
            if busy.status != 503:
                raise
            stream, left = request.META.get("wsgi.input"), size
            while stream is not None and left > 0:
                chunk = stream.read(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)
            response = problem_response(request, 503, busy.errors[0], "Server busy")
            response["Retry-After"] = str(busy.retry_after)
            return response

