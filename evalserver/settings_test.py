"""Settings for the test suite: the production settings with plain-HTTP test clients allowed."""

from evalserver.settings import *  # noqa: F403

SECURE = False
SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
SECURE_SSL_REDIRECT = False
SECURE_HSTS_SECONDS = 0

# The suite's own cache is a fresh local-memory one per test (tests/conftest.py); with it, the task
# lookups are read from the database, as before the embedded default's shared file cache. Tests
# of the cached lookups switch them on.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "evalserver-tests"}}
EVALSERVER_CACHE_TASK_LOOKUPS = env_bool("EVALSERVER_CACHE_TASK_LOOKUPS", default=False)  # noqa: F405
