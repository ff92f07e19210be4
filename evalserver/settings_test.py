"""Settings for the test suite: the production settings with plain-HTTP test clients allowed, and
every place the server writes in a folder of the test run's own.

The production default for all of them is the checkout's ``var/``, which a running demo uses:
tests that wrote there replaced its ``demo-logins.txt`` (a test user is also called alice), after
which the README's upload answered 401 (issue 37). So, before the production settings are read,
``EVALSERVER_VAR_DIR`` names a new temporary folder, and the variables that could place a part of
the server elsewhere (uploads, static files, the blob cache, an object store) are dropped, so all
of it lands there too, whatever the developer's shell has set. A process a test starts inherits
the run's folder (``RUN_DIR_VARIABLE`` marks it), unless the test gives it a folder of its own.
"""

import atexit
import os
import shutil
import tempfile

RUN_DIR_VARIABLE = "EVALSERVER_TEST_RUN_DIR"
# What the production settings would otherwise place outside the run's folder (the database is
# Django's separate test database; the cache is replaced below).
RELOCATED = ("EVALSERVER_UPLOAD_DIR", "EVALSERVER_BLOB_CACHE_DIR", "STATIC_ROOT", "EVALSERVER_STORAGE_URL")

if os.environ.get(RUN_DIR_VARIABLE):
    # A process started by a test: the folders are the test's choice (the run's by inheritance).
    os.environ.setdefault("EVALSERVER_VAR_DIR", os.environ[RUN_DIR_VARIABLE])
else:
    _run_dir = tempfile.mkdtemp(prefix="evalserver-tests-")
    atexit.register(shutil.rmtree, _run_dir, ignore_errors=True)
    os.environ[RUN_DIR_VARIABLE] = os.environ["EVALSERVER_VAR_DIR"] = _run_dir
    for _name in RELOCATED:
        os.environ.pop(_name, None)
    # Numba's compiled kernels (6 s each to compile) are kept between runs, in a folder only test
    # runs use: not the server's var/numba-cache, and not compiled again by every run.
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), f"evalserver-tests-numba-{os.getuid()}")

from evalserver.settings import *  # noqa: E402, F403

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
