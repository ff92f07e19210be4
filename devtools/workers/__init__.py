"""Machinery shared by the fault and load tests and ``benchmarks/reliability_report.py``.

Real processes (Celery workers, gunicorn, a private PostgreSQL cluster) with their output in log
files, big synthetic data made fast, HTTP calls that never raise, a reader-load generator and a
``seed`` command that builds a site in a fresh database. Free of pytest, so that the report can
use it: failures raise ``RuntimeError`` with the end of the process's log.

    python -m devtools.workers seed SPEC.json   # what the report and the PostgreSQL test run

Modules, one job each; every public name is importable from ``devtools.workers`` as before the split:

* :mod:`devtools.workers.processes`: server processes (Celery, gunicorn, an S3 store), shared settings;
* :mod:`devtools.workers.brokers`: queues, the test process as a publisher, the runs' fate;
* :mod:`devtools.workers.postgres`: a private PostgreSQL cluster and scratch databases;
* :mod:`devtools.workers.data`: big synthetic data and filling a leaderboard;
* :mod:`devtools.workers.web`: HTTP calls that never raise;
* :mod:`devtools.workers.load`: the reader-load generator;
* :mod:`devtools.workers.drill`: PostgreSQL restarted under traffic;
* :mod:`devtools.workers.leak`: the leak probe;
* :mod:`devtools.workers.seeding`: seeding a site, counting rows, ``main`` (``__main__`` runs it).

The names here are re-exports: a test that replaces one sets it on the module that reads it.
"""

# Re-exported for the tests and benchmarks that import them from here (noqa: not used here).
from devtools.workers.brokers import (  # noqa: F401
    new_queue,
    publishing_to,
    queue_length,
    remove_queue,
    run_state,
    scored_once,
    wait_for_status,
    worker_env,
)
from devtools.workers.data import big_gold, big_run, fill_board, hostile_run_files  # noqa: F401
from devtools.workers.drill import RestartDrill, Traffic, children, clean_failure, postgres_restart_drill  # noqa: F401
from devtools.workers.leak import (  # noqa: F401
    LEAK_PROBE_MEASURE,
    forbidden_test_numbers,
    leak_probe,
    leak_probe_paths,
    leak_probe_phase_values,
    number_forms,
    statistics_numbers,
)
from devtools.workers.load import CLIENTS, LoadResult, read_load, read_load_processes  # noqa: F401
from devtools.workers.postgres import PrivatePostgres, drop_database, postgres_bin, scratch_database  # noqa: F401
from devtools.workers.processes import (  # noqa: F401
    BROKERS,
    FAULT_LIMITS,
    PYTHON,
    ROOT,
    S3_CREDENTIALS,
    START_TIMEOUT,
    VECTORS_PER_SCORE,
    ObjectStore,
    Process,
    compose_workers,
    deployment_page_workers,
    documented_worker_argv,
    free_port,
    local_files,
    manage,
    process_alive,
    queue_settings_module,
    reachable,
    site_env,
    start_gunicorn,
    start_worker,
    wait_until,
)
from devtools.workers.seeding import count_rows, kind_gold, leak_site, main, seed, seed_site  # noqa: F401
from devtools.workers.web import Reply, call, looks_like_traceback, multipart, send_case, upload, upload_patiently  # noqa: F401
