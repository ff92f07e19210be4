"""The header's *Judging* link, for people who judge in an open campaign (asked lazily: a page
that never renders the header pays no query)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from campaigns.models import Assessor, Campaign


def judging(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)

    def judges() -> bool:
        return bool(user is not None and user.is_authenticated
                    and Assessor.objects.filter(user=user, campaign__state=Campaign.OPEN).exists())

    return {"judging_open": SimpleLazyObject(judges)}
