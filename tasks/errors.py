"""What the server answers when it cannot do what it was asked: ``Rejected``, and which database
errors are a passing state rather than a bug.

Imported by the middleware, the API, the views and the workers; it imports nothing of the
project, so any module may use it.
"""

from __future__ import annotations

from django.db import InterfaceError, OperationalError

# A database restart or a cut connection: worth trying again, never the request's fault.
TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)


class Rejected(Exception):
    """A request that cannot be carried out; ``errors`` says every reason, ``status`` the HTTP code,
    ``retry_after`` (seconds) when trying again later will do."""

    def __init__(self, errors: list[str], status: int = 400, retry_after: int | None = None) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors
        self.status = status
        self.retry_after = retry_after
