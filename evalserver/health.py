"""``/healthz``: is the database reachable? Used by docker-compose and load balancers."""

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as error:  # any database failure means "not healthy"; say which
        return JsonResponse({"status": "error", "database": type(error).__name__}, status=503)
    return JsonResponse({"status": "ok", "database": "ok"})
