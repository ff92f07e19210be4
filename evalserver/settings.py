"""Settings, read from environment variables (see docs/operators/configuration.md).

Every variable has an embedded default that needs no running service: SQLite in ``var/``,
runs scored by a background worker beside gunicorn (or in-process), a cache in files in ``var/``.
``DATABASE_URL``, ``CELERY_BROKER_URL`` and ``CACHE_URL`` switch to PostgreSQL, Redis or RabbitMQ.
Bad values fail loudly at start.
"""

from __future__ import annotations

import os
import re
import secrets
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()

# Tiny env helpers: a value that cannot be read stops the start with ImproperlyConfigured naming
# the variable and what it accepts. (django-environ's env.bool reads anything it does not know,
# "ture" say, as false: secure cookies and HSTS silently off.)
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use one of {', '.join(TRUE_WORDS)} "
                               f"or {', '.join(FALSE_WORDS)} (any case)")


def env_int(name: str, default: int, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from None
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        bounds = (f"from {minimum} to {maximum}" if minimum is not None and maximum is not None
                  else f"at least {minimum}" if minimum is not None else f"at most {maximum}")
        raise ImproperlyConfigured(f"{name}={raw!r} is out of range: use a whole number {bounds}")
    return value


def env_float(name: str, default: float, minimum: float, maximum: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None
    if not minimum <= value <= maximum:  # also refuses nan and inf
        raise ImproperlyConfigured(f"{name}={raw!r} is out of range: use a number from {minimum:g} to {maximum:g}")
    return value


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    if raw.strip() not in choices:
        raise ImproperlyConfigured(f"{name}={raw!r} is not one of {', '.join(choices)}")
    return raw.strip()


_RATE = re.compile(r"[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)")


def env_rate(name: str, default: str) -> str:
    """A rate limit ``N/period`` that both django-ratelimit and DRF's throttles read."""
    value = env.str(name, default=default).strip()
    if not _RATE.fullmatch(value):
        raise ImproperlyConfigured(f"{name}={value!r} is not a rate; use N/s, N/m, N/h or N/d "
                                   "(also N/min, N/hour, N/day), N at least 1")
    return value


def env_storage(name: str) -> dict:
    """The blob store's backend (``tasks.blobs``) from ``s3://BUCKET?endpoint_url=...&region_name=...``
    (``addressing_style=path|virtual`` too); unset or empty: the local filesystem under ``MEDIA_ROOT``."""
    raw = env.str(name, default="").strip()
    if not raw:
        return {"BACKEND": "evalserver.storage.BlobFileSystemStorage"}
    parts = urlsplit(raw)
    if parts.scheme != "s3" or not parts.netloc or parts.path not in ("", "/"):
        raise ImproperlyConfigured(f"{name}={raw!r} is not s3://BUCKET?endpoint_url=http://HOST:PORT "
                                   "(leave it unset for files on the local disk)")
    options: dict = {"bucket_name": parts.netloc}
    for key, values in parse_qs(parts.query, keep_blank_values=True).items():
        if key not in STORAGE_URL_OPTIONS:
            raise ImproperlyConfigured(f"{name}: unknown option {key!r} (known: {', '.join(STORAGE_URL_OPTIONS)})")
        if len(values) != 1 or not values[0]:
            raise ImproperlyConfigured(f"{name}: option {key!r} needs exactly one value")
        options[key] = values[0]
    if "endpoint_url" in options and urlsplit(options["endpoint_url"]).scheme not in ("http", "https"):
        raise ImproperlyConfigured(f"{name}: endpoint_url {options['endpoint_url']!r} is not an http(s) URL")
    if options.get("addressing_style", "path") not in ("path", "virtual"):
        raise ImproperlyConfigured(f"{name}: addressing_style is path or virtual, not {options['addressing_style']!r}")
    if "endpoint_url" in options:
        # MinIO and most self-hosted services answer path-style requests (http://host/bucket/key).
        options.setdefault("addressing_style", "path")
    return {"BACKEND": "evalserver.objectstorage.PrivateS3Storage", "OPTIONS": options}


STORAGE_URL_OPTIONS = ("endpoint_url", "region_name", "addressing_style")


def env_networks(name: str) -> tuple[IPv4Network | IPv6Network, ...]:
    """Comma-separated IP addresses or CIDR networks (``10.0.0.5, 172.16.0.0/12, ::1``)."""
    networks = []
    for item in env.str(name, default="").split(","):
        if item.strip():
            try:
                networks.append(ip_network(item.strip(), strict=False))
            except ValueError:
                raise ImproperlyConfigured(f"{name}: {item.strip()!r} is not an IP address or network "
                                           "(e.g. 10.0.0.5 or 172.16.0.0/12)") from None
    return tuple(networks)


VAR_DIR = Path(env.str("EVALSERVER_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DJANGO_DEBUG", default=False)

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
    "django.contrib.humanize",  # thousands separators in pages (intcomma)
    "rest_framework",
    # Only for the migration that moved its clear-text tokens into knox as hashes (its table is empty).
    "rest_framework.authtoken",
    "knox",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "tasks",
    "leaderboard",
    # The kinds' server halves (kinds/<kind>/): pages, jobs, models and commands of one kind.
    "kinds.response",
    # Annotation campaigns: assessors judge items on the server (issue 40).
    "campaigns",
    # E-mail notifications, announcements and the outbox (notices/).
    "notices",
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
    "tasks.phaseclock.PhaseClockMiddleware",
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
                "campaigns.context.judging",  # the header's Judging link (annotation campaigns)
            ],
            # Django's floatformat, the same text several times faster (evalserver/numbers.py).
            "builtins": ["evalserver.numbers"],
        },
    },
]
WSGI_APPLICATION = "evalserver.wsgi.application"

# An empty DATABASE_URL (``DATABASE_URL= python manage.py ...``) means the default, not an error.
DATABASES = {"default": env.db_url_config(env.str("DATABASE_URL", default="") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Uploads, the web processes and the background scoring worker write at the same time; wait for
    # the lock (SQLite's busy timeout, in seconds) instead of failing. Write-ahead logging lets
    # readers go on while one process writes: in the default rollback journal a scoring run's
    # write blocked every board reader of the other processes. synchronous=NORMAL is what SQLite
    # recommends with WAL (durable at each checkpoint; a power cut may lose the last commits, a
    # crashed process loses nothing).
    DATABASES["default"].setdefault("OPTIONS", {}).update({
        "timeout": 20, "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"})
elif env.bool("DATABASE_SERVER_SIDE_BINDING", default=True):
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("server_side_binding", True)
# Each web thread keeps its connection between requests (a minute by default), on SQLite too: opening
# one per request (connect, the PRAGMAs above, close) was 15% of a judging server's CPU with 20
# assessors saving at once (benchmarks/judging_load.py, sampled with py-spy).
DATABASES["default"].setdefault("CONN_MAX_AGE", env_int("DATABASE_CONN_MAX_AGE", default=60, minimum=0))
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Without CACHE_URL: files in var/cache, a cache every process of the machine shares (gunicorn's
# web processes, the background scoring worker, management commands) with no service to run, so
# that a new score renews what every web process reads. A local-memory cache (locmemcache://)
# is per process: each would then read the task and its phases from the database at every
# request, which was most of a board request's cost (issue 28, benchmarks/embedded_serve.py).
CACHES = {"default": env.cache("CACHE_URL", default=f"filecache://{VAR_DIR / 'cache'}")}
if CACHES["default"]["BACKEND"].endswith("FileBasedCache"):
    # Boards, their JSON bodies and rendered sections per sort and view: room for many tasks
    # before Django culls a third of the entries.
    CACHES["default"].setdefault("OPTIONS", {}).setdefault("MAX_ENTRIES", 5000)
# Leaderboard requests find their task and phases in the cache (tasks.lookup) only when every
# process shares it: a worker's new scores must renew the entry the web processes read. A
# local-memory cache is per process, so then it is not used for them.
EVALSERVER_CACHE_TASK_LOOKUPS = env_bool(
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
# Every stored file (runs, gold, data files, pools, vector tables) goes through one blob store
# (tasks.blobs): MEDIA_ROOT on the local disk, or a private S3-compatible bucket shared by hosts
# that share no disk: EVALSERVER_STORAGE_URL=s3://BUCKET?endpoint_url=http://HOST:PORT, with
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in the environment.
STORAGES["blobs"] = env_storage("EVALSERVER_STORAGE_URL")
# With object storage, large files a process reads from disk (pools, vector tables) are copied
# here once, by checksum, and checked against it; the folder may be emptied at any time.
EVALSERVER_BLOB_CACHE_DIR = Path(env.str("EVALSERVER_BLOB_CACHE_DIR", default=str(VAR_DIR / "blob-cache")))

RUN_UPLOAD_MAX_BYTES = env_int("EVALSERVER_RUN_MAX_BYTES", default=32 * 1024 * 1024, minimum=1024)
# Run uploads validated at once per web process (each takes a core and up to several times its size
# in memory); one leaves gunicorn's second thread to readers. An upload that finds every slot taken
# waits this long, then gets 503 with Retry-After; one over 4 MiB does not wait, because waiting
# holds a thread (tasks.submissions.validation_slot; benchmarks/upload_memory.py).
EVALSERVER_VALIDATION_SLOTS = env_int("EVALSERVER_VALIDATION_SLOTS", default=1, minimum=1, maximum=64)
EVALSERVER_VALIDATION_WAIT_SECONDS = env_float("EVALSERVER_VALIDATION_WAIT_SECONDS", 20.0, 0.0, 600.0)
# The largest file organisers may add to a task's data section (admin or add_data_file).
EVALSERVER_DATA_FILE_MAX_BYTES = env_int("EVALSERVER_DATA_FILE_MAX_BYTES", default=256 * 1024 * 1024, minimum=1024)
# Django refuses request bodies past this size before a view sees them.
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 4 * 1024 * 1024

# Celery. Without CELERY_BROKER_URL tasks run in-process right after the upload commits,
# so the quickstart needs no broker; with Redis or RabbitMQ a separate worker scores runs.
CELERY_TASK_ALWAYS_EAGER = not env.str("CELERY_BROKER_URL", default="")
# In-process (no broker): a named in-memory transport; kombu warned "No hostname was supplied" at
# every job for the bare "memory://".
IN_PROCESS_BROKER_URL = "memory://localhost/"
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="") or IN_PROCESS_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = False
# Two queues: scoring and light jobs on EVALSERVER_QUEUE, and heavy jobs (statistics, vBLEU pool
# jobs: tasks marked heavy=True) on the same name with "-heavy" (evalserver.celery.route), so a
# long pool job never waits in front of an upload's scoring, provided each queue has its own workers
# (`-Q celery` and `-Q celery-heavy`, as every documented start does). A worker started without -Q
# takes both and warns that scoring can wait behind statistics (evalserver.celery).
CELERY_TASK_DEFAULT_QUEUE = env.str("EVALSERVER_QUEUE", default="celery")
CELERY_TASK_ROUTES = ("evalserver.celery.route",)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("EVALSERVER_SCORING_SOFT_TIME_LIMIT", default=120, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("EVALSERVER_SCORING_TIME_LIMIT", default=180, minimum=1)
# A run "scoring" for longer than the hard limit plus this grace belongs to a dead worker.
EVALSERVER_STALE_GRACE_SECONDS = env_int("EVALSERVER_STALE_GRACE_SECONDS", default=30, minimum=0)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600, "max_retries": 2}
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5}
CELERY_WORKER_SEND_TASK_EVENTS = False
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULE = {
    "requeue-stuck-runs": {"task": "tasks.jobs.requeue_stuck_runs_task", "schedule": 60.0},
    # Statistics whose job was lost (broker restarted) or whose computing worker died.
    "statistics-sweep": {"task": "leaderboard.jobs.statistics_sweep_task", "schedule": 60.0},
    # Pool jobs whose message was lost or whose worker died: sent again, or failed with a reason.
    "pool-jobs-sweep": {"task": "kinds.response.extension_jobs.sweep_pool_jobs_task", "schedule": 60.0},
    # Phases that open and end, scheduled publications (tasks.phaseclock): recorded within seconds.
    "phase-clock": {"task": "tasks.phaseclock.phase_clock_task", "schedule": 15.0},
    # E-mails whose send failed and is due again (notices.outbox): new ones are sent at once.
    "notices-outbox": {"task": "notices.jobs.send_notices_task", "schedule": 60.0},
}
# The phase clock (tasks.phaseclock): "celery" (beat, above), "thread" (a daemon thread of each web
# process, for the broker-less default) or "off" (tests; the rules themselves follow the clock).
EVALSERVER_PHASE_CLOCK_MODE = env_choice("EVALSERVER_PHASE_CLOCK_MODE",
                                         "thread" if CELERY_TASK_ALWAYS_EAGER else "celery",
                                         ("celery", "thread", "off"))
# How an uploaded run is scored: "celery" (a job on the broker, for a Celery worker), "worker" (the
# broker-less background worker, ``manage.py scoring_worker``, which takes queued runs from the
# database: gunicorn.conf.py starts one beside the web server when there is no broker, so an
# upload is answered at once) or "inline" (right after the upload commits, in the same process:
# management commands and the test suite, which then see the run scored).
EVALSERVER_SCORING_MODE = env_choice("EVALSERVER_SCORING_MODE", "inline" if CELERY_TASK_ALWAYS_EAGER else "celery",
                                     ("celery", "worker", "inline"))
# The background worker keeps a claim alive by writing Run.heartbeat_at this often; a claim whose
# heartbeat is older than the lease belongs to a worker that died (the server was stopped or
# killed mid-scoring) and is taken over at once by the next worker, not after the time limit.
EVALSERVER_SCORING_HEARTBEAT_SECONDS = env_float("EVALSERVER_SCORING_HEARTBEAT_SECONDS", 5.0, 0.1, 600.0)
EVALSERVER_SCORING_LEASE_SECONDS = env_float("EVALSERVER_SCORING_LEASE_SECONDS", 30.0, 1.0, 3600.0)
# Every background process (scoring, statistics and Celery workers) writes a heartbeat row this often,
# busy or idle (tasks.heartbeats); /healthz and /metrics count one silent for three beats as gone.
EVALSERVER_WORKER_HEARTBEAT_SECONDS = env_float("EVALSERVER_WORKER_HEARTBEAT_SECONDS", 10.0, 0.1, 600.0)
# The background worker's CPU priority (nice value, 0-19): its work (loading spaCy at start, scoring,
# the statistics it computes in a thread) shares the machine with the web processes, and a reader
# waiting for a page should not wait behind it. With the cores free it runs at full speed all the
# same: niceness only decides who runs first when both want the CPU (issue 28, item 1).
EVALSERVER_SCORING_WORKER_NICE = env_int("EVALSERVER_SCORING_WORKER_NICE", default=10, minimum=0, maximum=19)
# POSSCORE tags a run's responses with spaCy; a scoring worker that is not a daemonic Celery
# child (the embedded background worker, a solo Celery worker) forks this many tagging processes
# for a run of at least 512 distinct responses (scoring.kinds.response.set_tagging_processes). One
# process tagged 543-782 responses a second on this project's 2-core machine, two 989 (issue 28's
# audit, benchmarks/response_speed.py); with the models' products on NumPy's BLAS (nlp.load_pipeline)
# a response costs half the CPU (1,389 per CPU-second). Tagging is spaCy's tok2vec, nothing left to
# skip without changing the tags, so the default is to use both cores.
EVALSERVER_TAGGING_PROCESSES = env_int("EVALSERVER_TAGGING_PROCESSES", default=min(2, os.cpu_count() or 1),
                                       minimum=1, maximum=64)
# Long pool work (kinds.response.extension_jobs: storing a dialogue pool, extending a gold with vBLEU references):
# "celery" (a job on the broker, in its own module: CELERY_IMPORTS), "thread" (a thread of the web
# process, for the broker-less default, so the request returns at once and the page shows the
# progress) or "sync" (in the request, for tests).
EVALSERVER_POOL_JOB_MODE = env_choice("EVALSERVER_POOL_JOB_MODE", "thread" if CELERY_TASK_ALWAYS_EAGER else "celery",
                                      ("celery", "thread", "sync"))
CELERY_IMPORTS = ("kinds.response.extension_jobs", "tasks.phaseclock")
# A pool of 10^6 pairs is ~100-200 MB; an index build and a rater training take minutes.
EVALSERVER_POOL_MAX_BYTES = env_int("EVALSERVER_POOL_MAX_BYTES", default=1024 * 1024 * 1024, minimum=1024)
EVALSERVER_POOL_JOB_TIME_LIMIT = env_int("EVALSERVER_POOL_JOB_TIME_LIMIT", default=3600, minimum=10)
# Significance statistics after scores change: "celery" (a debounced job), "worker" (the broker-less
# background statistics worker, ``manage.py statistics_worker``, which takes the requests from the
# database: gunicorn.conf.py starts one and sets this mode when there is no broker), "thread" (a
# timer thread of the process that scored, for ``runserver`` and commands without a broker),
# "sync" (at once, for tests) or "off".
EVALSERVER_STATISTICS_MODE = env_choice("EVALSERVER_STATISTICS_MODE",
                                        "thread" if CELERY_TASK_ALWAYS_EAGER else "celery",
                                        ("celery", "worker", "thread", "sync", "off"))
# The statistics worker's CPU priority (nice value, 0-19): below the scoring worker's, so that when
# both want a core a run being scored goes first (issue 28, item 2), and far below the web
# processes'. With a core free it computes at full speed all the same.
EVALSERVER_STATISTICS_WORKER_NICE = env_int("EVALSERVER_STATISTICS_WORKER_NICE", default=19, minimum=0, maximum=19)
# A board's statistics are computed once its scores have been quiet this long (a burst of scored
# runs shares one computation), in the celery and thread modes alike (leaderboard.scheduling).
EVALSERVER_STATISTICS_DEBOUNCE_SECONDS = env_float("EVALSERVER_STATISTICS_DEBOUNCE_SECONDS", 5.0, 0.0, 3600.0)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tasks.tokens.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "tasks.api.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer",
                                 "rest_framework.renderers.BrowsableAPIRenderer"],

}
# API tokens (knox): stored as SHA-512 digests; they last until regenerated or revoked, as before.
REST_KNOX = {"TOKEN_TTL": None, "AUTO_REFRESH": False, "AUTH_HEADER_PREFIX": "Token"}
SPECTACULAR_SETTINGS = {
    "TITLE": "DialEval evaluation server API",
    "DESCRIPTION": "Upload STC-3 / DialEval runs, follow their scoring and read public leaderboards.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and Redoc served from this server, not from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The enum hook is drf-spectacular's default; ours adds the 500 and 503 any operation can answer.
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "evalserver.apischema.common_answers"],
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # the upload page's script reads it to send the token
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# HTTPS-only cookies, redirect and HSTS: on by default whenever DEBUG is off, so a deployment is
# secure unless someone opts out. The local quickstart (dev.py serve, plain HTTP on 127.0.0.1)
# and the test settings turn it off.
SECURE = env_bool("DJANGO_SECURE", default=not DEBUG)
if SECURE:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
    SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", default=31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", default=True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # Health checks and Prometheus scrapes come over plain HTTP from inside (/metrics needs its token).
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]

# /metrics (Prometheus' text format) answers only requests with "Authorization: Bearer <this token>";
# empty: /metrics is off (403). At least 32 characters: it guards the queue and worker figures.
EVALSERVER_METRICS_TOKEN = env.str("EVALSERVER_METRICS_TOKEN", default="").strip()
if EVALSERVER_METRICS_TOKEN and len(EVALSERVER_METRICS_TOKEN) < 32:
    raise ImproperlyConfigured("EVALSERVER_METRICS_TOKEN must be at least 32 characters (python3 -c "
                               "'import secrets; print(secrets.token_urlsafe(32))' makes one)")

LOG_LEVEL = env_choice("EVALSERVER_LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
if CELERY_TASK_ALWAYS_EAGER:
    # Without a broker, jobs run in the process that sends them (``serve``, the organisers'
    # commands), and Celery logged every one at INFO on their console ("Task ... succeeded in
    # 0.4s: 'skipped: not queued ...'", 11 lines for one load_gold), which read like errors.
    # A job's failure is still logged (ERROR); a Celery worker with a broker keeps its own logging.
    LOGGING["loggers"]["celery.app.trace"] = {"level": "WARNING"}

# Email (password resets): printed on the console unless an SMTP server is named.
EMAIL_HOST = env.str("EVALSERVER_EMAIL_HOST", default="").strip()
EMAIL_BACKEND = ("django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST
                 else "django.core.mail.backends.console.EmailBackend")
EMAIL_PORT = env_int("EVALSERVER_EMAIL_PORT", default=587, minimum=1, maximum=65535)
EMAIL_HOST_USER = env.str("EVALSERVER_EMAIL_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EVALSERVER_EMAIL_PASSWORD", default="")
EMAIL_USE_TLS = env_bool("EVALSERVER_EMAIL_STARTTLS", default=True)
EMAIL_USE_SSL = env_bool("EVALSERVER_EMAIL_SSL", default=False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    if os.environ.get("EVALSERVER_EMAIL_STARTTLS", "").strip():
        raise ImproperlyConfigured("EVALSERVER_EMAIL_STARTTLS and EVALSERVER_EMAIL_SSL are both true; choose one "
                                   "(STARTTLS on port 587, or TLS from the start on port 465)")
    EMAIL_USE_TLS = False  # SSL asked for: STARTTLS was only the default
EMAIL_TIMEOUT = env_int("EVALSERVER_EMAIL_TIMEOUT", default=10, minimum=1, maximum=300)
DEFAULT_FROM_EMAIL = env.str("EVALSERVER_EMAIL_FROM", default="DialEval server <noreply@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
# Notifications by e-mail (notices.outbox): who sends the outbox. "celery" (with a broker: a job once
# an e-mail is recorded, and beat every minute for retries), "worker" (the broker-less default:
# ``manage.py notices_worker``, which gunicorn.conf.py starts beside the scoring worker) or "off"
# (nobody: ``manage.py send_notices`` sends what is due, as the tests do).
EVALSERVER_NOTICE_MODE = env_choice("EVALSERVER_NOTICE_MODE", "worker" if CELERY_TASK_ALWAYS_EAGER else "celery",
                                    ("celery", "worker", "off"))
# The server's address as readers reach it: the links in e-mails, written by a background process
# that has no request to take it from.
EVALSERVER_SITE_URL = env.str("EVALSERVER_SITE_URL", default="http://127.0.0.1:8000").strip().rstrip("/")
if urlsplit(EVALSERVER_SITE_URL).scheme not in ("http", "https") or not urlsplit(EVALSERVER_SITE_URL).netloc:
    raise ImproperlyConfigured(f"EVALSERVER_SITE_URL={EVALSERVER_SITE_URL!r} is not an http(s) address such as "
                               "https://eval.example.org")
PASSWORD_RESET_TIMEOUT = env_int("EVALSERVER_PASSWORD_RESET_SECONDS", default=3 * 24 * 3600, minimum=300)
EVALSERVER_PASSWORD_RESET_RATE = env_rate("EVALSERVER_PASSWORD_RESET_RATE", default="5/h")

# Rate limits (requests per period): uploads per user, and sign-in attempts per address.
# The address is the client's own (evalserver.clientip): X-Forwarded-For is believed only as far
# as it was written by these proxies (addresses or CIDR networks; empty: the TCP peer is the client).
EVALSERVER_TRUSTED_PROXIES = env_networks("EVALSERVER_TRUSTED_PROXIES")
RATELIMIT_IP_META_KEY = "evalserver.clientip.client_ip"
EVALSERVER_UPLOAD_RATE = env_rate("EVALSERVER_UPLOAD_RATE", default="30/min")
EVALSERVER_LOGIN_RATE = env_rate("EVALSERVER_LOGIN_RATE", default="10/m")
EVALSERVER_SIGNUP_RATE = env_rate("EVALSERVER_SIGNUP_RATE", default="5/h")
# Join codes tried by signed-in accounts (tasks.teams.team_join), per account and per address:
# the code is all that stands between a guesser and a team's hidden runs.
EVALSERVER_JOIN_RATE = env_rate("EVALSERVER_JOIN_RATE", default="10/h")
# Sign-up: open to everyone, or not at all (organisers then use create_participant);
# new teams may need an organiser's approval before they can submit to tasks that ask for it.
EVALSERVER_SIGNUP_OPEN = env_bool("EVALSERVER_SIGNUP_OPEN", default=True)
EVALSERVER_TEAMS_NEED_APPROVAL = env_bool("EVALSERVER_TEAMS_NEED_APPROVAL", default=False)
