"""Settings, read from environment variables (see README, "Configuration").

Every variable has an embedded default that needs no running service: SQLite in ``var/``,
Celery tasks run in-process, a local-memory cache. ``DATABASE_URL``, ``CELERY_BROKER_URL``
and ``CACHE_URL`` switch to PostgreSQL, Redis or RabbitMQ. Bad values fail loudly at start.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

VAR_DIR = Path(env.str("EVALSERVER_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env.bool("DJANGO_DEBUG", default=False)

# Numba caches the compiled significance-test kernel (6 s to compile) here, a folder the server
# can always write to, whoever it runs as.
os.environ.setdefault("NUMBA_CACHE_DIR", str(VAR_DIR / "numba-cache"))


def _secret_key() -> str:
    """Use DJANGO_SECRET_KEY; without it, a random key kept in var/ so sessions survive restarts."""
    key = env.str("DJANGO_SECRET_KEY", default="")
    if key:
        if len(key) < 50 or len(set(key)) < 5:
            raise ImproperlyConfigured("DJANGO_SECRET_KEY must be at least 50 characters with 5 different ones")
        return key
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])
SITE_NAME = env.str("EVALSERVER_SITE_NAME", default="DialEval server")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "tasks",
    "leaderboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "evalserver.middleware.RequestBodyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A database outage on an HTML page: 503 "try again in a minute", not the generic 500 page.
    "evalserver.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "evalserver.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "evalserver.context.site",
            ],
        },
    },
]
WSGI_APPLICATION = "evalserver.wsgi.application"

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Uploads and the in-process worker write at the same time; wait for the lock instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update({"timeout": 20, "transaction_mode": "IMMEDIATE"})
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DATABASE_CONN_MAX_AGE", default=60))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://evalserver")}
# Leaderboard requests find their task and phases in the cache (tasks.lookup) only when every
# process shares it: a worker's new scores must renew the entry the web processes read. A
# local-memory cache is per process, so by default it is used only with a shared cache.
EVALSERVER_CACHE_TASK_LOOKUPS = env.bool(
    "EVALSERVER_CACHE_TASK_LOOKUPS",
    default=not CACHES["default"]["BACKEND"].endswith(("LocMemCache", "DummyCache")))

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(VAR_DIR / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "evalserver.storage.StaticStorage"
                    if not DEBUG else "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Uploaded runs live here, outside the static root, under names made from their hashes.
MEDIA_ROOT = Path(env.str("EVALSERVER_UPLOAD_DIR", default=str(VAR_DIR / "uploads")))

RUN_UPLOAD_MAX_BYTES = env.int("EVALSERVER_RUN_MAX_BYTES", default=32 * 1024 * 1024)
if RUN_UPLOAD_MAX_BYTES < 1024:
    raise ImproperlyConfigured("EVALSERVER_RUN_MAX_BYTES must be at least 1024")
# Run uploads validated at once per web process (each takes a core and up to several times its size
# in memory); one leaves gunicorn's second thread to readers. An upload that finds every slot taken
# waits this long, then gets 503 with Retry-After; one over 4 MiB does not wait, because waiting
# holds a thread (tasks.services.validation_slot; benchmarks/upload_memory.py).
EVALSERVER_VALIDATION_SLOTS = env.int("EVALSERVER_VALIDATION_SLOTS", default=1)
if EVALSERVER_VALIDATION_SLOTS < 1:
    raise ImproperlyConfigured("EVALSERVER_VALIDATION_SLOTS must be at least 1")
EVALSERVER_VALIDATION_WAIT_SECONDS = env.float("EVALSERVER_VALIDATION_WAIT_SECONDS", default=20.0)
if not 0 <= EVALSERVER_VALIDATION_WAIT_SECONDS <= 600:
    raise ImproperlyConfigured("EVALSERVER_VALIDATION_WAIT_SECONDS must be between 0 and 600")
# Django refuses request bodies past this size before a view sees them.
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 4 * 1024 * 1024

# Celery. Without CELERY_BROKER_URL tasks run in-process right after the upload commits,
# so the quickstart needs no broker; with Redis or RabbitMQ a separate worker scores runs.
CELERY_TASK_ALWAYS_EAGER = not env.str("CELERY_BROKER_URL", default="")
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="") or "memory://"
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env.int("EVALSERVER_SCORING_SOFT_TIME_LIMIT", default=120)
CELERY_TASK_TIME_LIMIT = env.int("EVALSERVER_SCORING_TIME_LIMIT", default=180)
# A run "scoring" for longer than the hard limit plus this grace belongs to a dead worker.
EVALSERVER_STALE_GRACE_SECONDS = env.int("EVALSERVER_STALE_GRACE_SECONDS", default=30)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600, "max_retries": 2}
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5}
CELERY_WORKER_SEND_TASK_EVENTS = False
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULE = {
    "requeue-stuck-runs": {"task": "tasks.jobs.requeue_stuck_runs_task", "schedule": 60.0},
}
# Significance statistics after scores change: "celery" (a debounced job), "thread" (in the web
# process, for the broker-less default), "sync" (at once, for tests) or "off".
EVALSERVER_STATISTICS_MODE = env.str("EVALSERVER_STATISTICS_MODE",
                                     default="thread" if CELERY_TASK_ALWAYS_EAGER else "celery")
if EVALSERVER_STATISTICS_MODE not in ("celery", "thread", "sync", "off"):
    raise ImproperlyConfigured("EVALSERVER_STATISTICS_MODE must be celery, thread, sync or off")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "tasks.api.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer",
                                 "rest_framework.renderers.BrowsableAPIRenderer"],

}
SPECTACULAR_SETTINGS = {
    "TITLE": "DialEval evaluation server API",
    "DESCRIPTION": "Upload STC-3 / DialEval runs, follow their scoring and read public leaderboards.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and Redoc served from this server, not from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # the upload page's script reads it to send the token
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# HTTPS-only cookies, redirect and HSTS: on by default whenever DEBUG is off, so a deployment is
# secure unless someone opts out. The local quickstart (dev.py serve, plain HTTP on 127.0.0.1)
# and the test settings turn it off.
SECURE = env.bool("DJANGO_SECURE", default=not DEBUG)
if SECURE:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS = env.int("DJANGO_HSTS_SECONDS", default=31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("DJANGO_HSTS_PRELOAD", default=True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # health checks come over plain HTTP from inside

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("EVALSERVER_LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# Rate limits (requests per period): uploads per user, and sign-in attempts per address.
EVALSERVER_UPLOAD_RATE = env.str("EVALSERVER_UPLOAD_RATE", default="30/min")
EVALSERVER_LOGIN_RATE = env.str("EVALSERVER_LOGIN_RATE", default="10/m")
EVALSERVER_SIGNUP_RATE = env.str("EVALSERVER_SIGNUP_RATE", default="5/h")
# Sign-up: open to everyone, or not at all (organisers then use create_participant);
# new teams may need an organiser's approval before they can submit to tasks that ask for it.
EVALSERVER_SIGNUP_OPEN = env.bool("EVALSERVER_SIGNUP_OPEN", default=True)
EVALSERVER_TEAMS_NEED_APPROVAL = env.bool("EVALSERVER_TEAMS_NEED_APPROVAL", default=False)
