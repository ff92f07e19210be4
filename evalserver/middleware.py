"""A database outage on an HTML page: a 503 page saying so, instead of the generic 500 page."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from tasks.services import TRANSIENT_DB_ERRORS

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
