"""Precise answers to requests refused before or outside a view: too many form fields or files, a
body too large or sent without a length, and the last-resort 400 and 500 handlers.

Every answer under ``/api/`` is ``{"errors": ["..."]}`` JSON; pages get the same sentences in
HTML. The API's own exception handler (``tasks.api.exception_handler``) uses ``request_problem``
too, so a problem reads the same whichever layer met it.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views.defaults import page_not_found

from tasks.submissions import TEXT_FIELDS

log = logging.getLogger(__name__)

# The fields a run upload takes, from the one list the upload reads (tasks.submissions).
UPLOAD_FIELDS = ", ".join(("file", *TEXT_FIELDS[:-1])) + f" and {TEXT_FIELDS[-1]}"


def request_problem(exception: BaseException) -> tuple[int, str] | None:
    """The status and sentence for a request Django refused while reading its body, or None."""
    if isinstance(exception, TooManyFieldsSent):
        return 400, (f"the request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} form fields; an upload "
                     f"takes at most {1 + len(TEXT_FIELDS)} ({UPLOAD_FIELDS})")
    if isinstance(exception, TooManyFilesSent):
        return 400, (f"the request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES} files; send one run "
                     "file in the field named 'file'")
    if isinstance(exception, RequestDataTooBig):
        return 413, (f"the form fields other than the file are over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} "
                     "bytes; send the run as a file part named 'file', not as a text field")
    if isinstance(exception, SuspiciousOperation):
        return 400, f"the request was refused as malformed: {exception}"[:300]
    return None


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def problem_response(request: HttpRequest, status: int, message: str, title: str = "Request refused") -> HttpResponse:
    if is_api(request):
        return JsonResponse({"errors": [message]}, status=status)
    return HttpResponse(render_to_string("400.html", {"title": title, "errors": [message]}, request=request),
                        status=status)


def bad_request(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    """``handler400``: Django calls it for a SuspiciousOperation raised anywhere (a middleware
    reading the body included), where the API's exception handler may never run."""
    status, message = request_problem(exception) if exception is not None and request_problem(exception) else (
        400, "the request could not be read")
    return problem_response(request, status, message)


def not_found(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    """``handler404``: JSON under /api/ (a 404 raised by a view the API's handler never saw, or a
    path the API's catch-all route does not take), the site's 404 page elsewhere."""
    if is_api(request):
        return JsonResponse({"errors": ["no such API endpoint; see /api/v1/docs/"]}, status=404)
    return page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: JSON under /api/, the 500 page elsewhere. Never a traceback."""
    if is_api(request):
        return JsonResponse({"errors": ["internal error; the organisers have been told"]}, status=500)
    return HttpResponse(render_to_string("500.html"), status=500)
