"""The order the suite's tests are handed to pytest-xdist's processes (issue 38, item 6): the tests
marked slow first, each group in its collection order, so that the sweeps of a minute or more
start while both processes are free (tests/conftest.py, ``slow_first``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import DATABASE_TESTS_ONLY

ROOT = Path(__file__).resolve().parent.parent


def collected(*paths: str) -> list[str]:
    """The test ids pytest would run, in its order, for these files (one process, nothing run)."""
    answer = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", *paths],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={k: v for k, v in os.environ.items() if k != DATABASE_TESTS_ONLY})
    assert answer.returncode == 0, answer.stdout[-3000:] + answer.stderr[-3000:]
    return [line for line in answer.stdout.splitlines() if "::" in line]


def test_the_tests_marked_slow_are_queued_first_in_file_order() -> None:
    ids = collected("tests/test_hostile_parameters.py")
    hostile = "tests/test_hostile_parameters.py::"
    # The file defines the four shards, five quick tests, the admin sweep between the fourth and
    # the fifth: the two sweeps come first. The quick ones keep pytest-django's order (the tests
    # that use the database first, in file order; then the one that does not).
    assert ids[:5] == [f"{hostile}test_no_hostile_request_is_a_server_error[{shard}]" for shard in range(4)] + [
        f"{hostile}test_no_hostile_admin_request_is_a_server_error"]
    assert ids[5:] == [hostile + name for name in (
        "test_a_token_with_a_nul_character_is_refused_by_name",
        "test_a_sign_up_link_naming_a_task_with_a_nul_character_names_no_task", "test_the_api_docs_answer_only_get",
        "test_a_statistics_address_with_a_nul_character_is_a_404_that_says_so",
        "test_an_id_beyond_64_bits_in_the_admin_is_a_400_naming_the_parameter",
        "test_the_parameters_come_from_the_views")]


def test_the_documentation_commands_are_queued_with_the_sweeps() -> None:
    """About 80 s, the longest single test of CI: last in the queue, it ran alone at the end."""
    ids = collected("tests/test_hostile_parameters.py", "tests/test_readme_commands.py")
    assert ids[5] == "tests/test_readme_commands.py::test_every_readme_command_works_as_written"
    assert all("test_hostile_parameters.py::test_no_hostile" in test for test in ids[:5])
    assert not any("test_no_hostile" in test or "works_as_written" in test for test in ids[6:])


def test_the_tests_that_empty_the_database_stay_last_even_when_slow() -> None:
    """The worker drills commit for real (a transactional database, emptied after each, the data
    migrations' rows with it): pytest-django runs them after the tests that roll back, and so does
    this order, although they are marked slow."""
    ids = collected("tests/test_integration_celery.py", "tests/test_hostile_parameters.py")
    drills = [index for index, test in enumerate(ids) if test.startswith("tests/test_integration_celery.py::")]
    hostile = [index for index, test in enumerate(ids) if test.startswith("tests/test_hostile_parameters.py::")]
    assert len(drills) >= 3 and len(hostile) == 11
    assert max(hostile) < min(drills)
    assert all("test_no_hostile" in ids[index] for index in hostile[:5])
