"""Settings for the test suite: the production settings with plain-HTTP test clients allowed."""

from evalserver.settings import *  # noqa: F403

SECURE = False
SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
SECURE_SSL_REDIRECT = False
SECURE_HSTS_SECONDS = 0
