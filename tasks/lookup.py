"""A task and its phases for read-heavy pages, from the cache, renewed whenever either changes.

Every leaderboard request (page, JSON, CSV, statistics) starts by finding the task and choosing
a phase. With the board itself cached, those two SQL queries were most of a request's cost, so
they are cached too, under a key that carries a random *generation token*:

* a reader takes the task's current token, then the entry stored under it;
* a writer (a saved or deleted task or phase, or new scores: ``tasks.changes.touch_scores``) sets a
  fresh token, and another once its transaction commits.

A reader that loaded the old rows just before a commit stores them under the old token, which
nobody asks for any more, so no stale entry can outlive a change; and a token that was evicted
is replaced by a new one, never reused. ``ROUTE_SECONDS`` bounds how long a change that
bypasses the model layer (a raw ``QuerySet.update()`` of a task or phase) can go unseen.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from tasks import cachekeys
from tasks.cachekeys import ROUTE_SECONDS, TOKEN_SECONDS
from tasks.models import Phase, Task

_token_key = cachekeys.task_token
SLUG_LENGTH = Task._meta.get_field("slug").max_length  # the longest slug a task can have


def cached_task(slug: str) -> tuple[Task, list[Phase]] | None:
    """The task with this slug and its phases (in start order), or None if there is none.

    Straight from the database unless ``EVALSERVER_CACHE_TASK_LOOKUPS`` (a cache shared by every
    process, so that a worker's renewal reaches the web processes).
    """
    if len(slug) > SLUG_LENGTH:
        return None  # no task can have it: nothing asked of the database or the cache
    if not settings.EVALSERVER_CACHE_TASK_LOOKUPS:
        return _load(slug)
    token = cache.get(_token_key(slug))
    if token is None:
        # No token yet (the task's first request of the day, or evicted): the rows from the
        # database, not cached (a writer may have changed them before a token existed to renew),
        # and a token only for a task that exists, so that requests for made-up slugs leave
        # nothing in the cache (each was a day-long entry, and a 300-character slug a key
        # longer than memcached takes).
        found = _load(slug)
        if found is not None:
            cache.add(_token_key(slug), uuid.uuid4().hex, TOKEN_SECONDS)
        return found
    key = cachekeys.task_route(slug, token)
    found = cache.get(key)
    if found is None:
        found = _load(slug)
        if found is None:
            return None  # not cached: a task created a moment later must be found at once
        cache.set(key, found, ROUTE_SECONDS)
    return found


def _load(slug: str) -> tuple[Task, list[Phase]] | None:
    task = Task.objects.filter(slug=slug).first()
    return None if task is None else (task, list(task.phases.all()))


def forget_task(slug: str) -> None:
    """Give the task a new generation token now, and again once the current transaction commits.

    The second token is the one that matters: a reader between the first and the commit still
    sees the old rows and may cache them under the first token. The first one makes the change
    visible at once to the writer's own connection (inside the transaction, which is where a
    test that never commits reads from).
    """
    cache.set(_token_key(slug), uuid.uuid4().hex, TOKEN_SECONDS)
    transaction.on_commit(lambda: cache.set(_token_key(slug), uuid.uuid4().hex, TOKEN_SECONDS))
