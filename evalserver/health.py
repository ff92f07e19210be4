"""``/healthz``: can the server do its work? Used by load balancers, docker-compose and operators.

Four checks, each answered by name: ``database`` (a query), ``broker`` (a connection to Celery's
broker; "not used" without one), ``storage`` (the blob store: a listing of the bucket, or the
local folder writable) and ``workers`` (a live heartbeat, ``tasks.heartbeats``, from each kind of
background process the configuration needs: Celery workers with a broker, the embedded scoring
and statistics workers without one; "not used" when runs are scored in the request's process).
200 when every check passes, else 503 with ``failed`` naming the checks that did not.

``?check=database,broker,storage`` runs only those: a web process's own health (the docker-compose
health check, a load balancer), which must not take the site's pages out of rotation because the
workers are down, while uploads queue safely for them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from tasks import blobs, heartbeats

NOT_USED = "not used"
log = logging.getLogger(__name__)


class Unhealthy(Exception):
    """A failed check in the server's own words (a dependency's own message may name hosts and
    accounts, and /healthz is public: only its type is shown, the rest goes to the log)."""


def database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return "ok"


def broker() -> str:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return NOT_USED
    from evalserver.celery import app

    with app.connection_for_write() as link:
        link.ensure_connection(max_retries=1, timeout=2)
    return "ok"


def storage() -> str:
    if blobs.is_local():
        root = Path(settings.MEDIA_ROOT)
        root.mkdir(parents=True, exist_ok=True)
        if not os.access(root, os.W_OK | os.X_OK):
            raise Unhealthy(f"the blob store's folder is not writable by the server (uid {os.getuid()})")
        return "ok"
    blobs.storage().listdir("")  # one request: the bucket exists and the credentials read it
    return "ok"


def needed_workers() -> list[str]:
    """The background processes this configuration relies on, by ``tasks.heartbeats`` role."""
    needed = []
    if settings.EVALSERVER_SCORING_MODE == "celery":
        needed.append("celery")
    elif settings.EVALSERVER_SCORING_MODE == "worker":
        needed.append("scoring")
    if settings.EVALSERVER_STATISTICS_MODE == "worker":
        needed.append("statistics")
    elif settings.EVALSERVER_STATISTICS_MODE == "celery" and "celery" not in needed:
        needed.append("celery")
    return needed


def workers() -> str:
    needed = needed_workers()
    if not needed:
        return NOT_USED
    missing = [role for role in needed if not heartbeats.alive(role)]
    if missing:
        seconds = heartbeats.dead_after().total_seconds()
        raise Unhealthy(f"no {' or '.join(missing)} worker has sent a heartbeat in the last {seconds:.0f} s")
    return "ok"


CHECKS: dict[str, Callable[[], str]] = {"database": database, "broker": broker, "storage": storage,
                                        "workers": workers}


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    asked = [name.strip() for name in request.GET.get("check", "").split(",") if name.strip()] or list(CHECKS)
    unknown = [name for name in asked if name not in CHECKS]
    if unknown:
        return JsonResponse({"errors": [f"unknown check {', '.join(map(repr, unknown))}; the checks are "
                                        f"{', '.join(CHECKS)}"]}, status=400)
    answer: dict[str, object] = {}
    failed = []
    for name in asked:
        try:
            answer[name] = CHECKS[name]()
        except Exception as error:  # any failure of a dependency means "not healthy": say which and why
            answer[name] = str(error) if isinstance(error, Unhealthy) else f"failed ({type(error).__name__})"
            log.warning("/healthz: %s failed: %s", name, error)
            failed.append(name)
            if name == "database":
                connection.close()
    if failed:
        return JsonResponse({"status": "error", "failed": failed, **answer}, status=503)
    return JsonResponse({"status": "ok", **answer})
