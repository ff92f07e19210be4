"""Every command the README and the documentation site show works as written (issue 17, item 2;
issue 38, item 3).

The ``sh`` blocks of README.md and of every page of the site (``docs/``, in the order of
``mkdocs.yml``'s navigation) are parsed here, so a command added to or changed in any of them is
tested without touching this file; plain and ``console`` blocks are synopses (``score RUN.json
GOLD.json [--alpha A] ...``) and transcripts, and are not run. The commands run in that order,
README first, in one bash session (a reader's terminal: ``export`` and variables carry over); a
command shown again on a later page (the same text) is run once, where it first appears. They run
on what a newcomer has:

* a fresh copy of the repository (the files git tracks or would track, as they are in the
  working tree, so an uncommitted README change is what is tested), with its own empty ``var/``:
  a new SQLite database, no demo yet;
* ``python3`` on the ``PATH`` is a bare Python, with no Django, and there is no ``python``
  command at all (a fresh Debian); no ``DATABASE_URL``, ``EVALSERVER_*`` or ``DJANGO_*``
  variables; ``curl`` fails on an HTTP error (a ``.curlrc`` with ``fail``), as a reader would
  see an error answer as a failure;
* ``.venv`` is made before the run as ``dev.py`` would make it, without downloading anything:
  a virtualenv whose site-packages path leads to the packages of the Python running this test,
  and ``dev.py``'s stamp of the installed ``pyproject.toml``, so that ``dev.py`` does not install.

Two kinds of commands are not run as a plain step, each named here and required to be in the
documents (an entry they dropped fails the test):

* ``SERVERS``: ``python3 dev.py serve`` serves until stopped: the test starts it in the
  background, waits until it answers, runs the rest, and stops it. It listens on a free port,
  which replaces ``127.0.0.1:8000`` in every command (another server may hold 8000);
* ``NOT_RUN``: ``python3 dev.py test`` runs the whole suite, this test included; it is exactly
  the command CI runs (``.ci/run``), which the test checks. The reliability page's reruns take
  minutes (the suite runs those tests itself).

A command works when it exits with status 0 (and says nothing of a Python traceback).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import IN_CI

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
RUNNABLE_LANGUAGES = ("sh",)
README_ADDRESS = "127.0.0.1:8000"
SERVERS = {"python3 dev.py serve"}
NOT_RUN = {
    "python3 dev.py test": "runs the whole suite, this test included; .ci/run runs exactly this command",
    "DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalserver_faults .venv/bin/pytest -q tests/test_faults.py "
    "tests/test_load.py": "the fault and load tests, which the suite runs itself (marked slow and services)",
    ".venv/bin/python benchmarks/reliability_report.py": "the reliability report takes about 6 minutes",
    ".venv/bin/python benchmarks/reliability_report.py --quick": "the quick report still takes about 5 minutes",
}
SERVER_START_SECONDS = 420
SCRIPT_SECONDS = 900


@dataclass(frozen=True)
class Command:
    text: str  # as written, continuation lines joined with their backslashes
    line: int  # where it starts in its document
    source: str = "README.md"  # the document, relative to the repository


def readme_commands(text: str, source: str = "README.md") -> list[Command]:
    """The commands of a document's runnable blocks, in order: comment-only and blank lines
    dropped, a line ending in a backslash joined with the next (as the shell does)."""
    commands: list[Command] = []
    language = None
    pending: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        fence = re.match(r"^```\s*(\S*)", line)
        if fence:
            if language is not None and pending:
                raise ValueError(f"{source}:{start}: a command ends with a backslash at the end of its block")
            language = None if language is not None else fence.group(1)
            continue
        if language not in RUNNABLE_LANGUAGES:
            continue
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            start = number
        pending.append(line)
        if not line.endswith("\\"):
            commands.append(Command("\n".join(pending), start, source))
            pending = []
    return commands


def site_pages(mkdocs_yml: str) -> list[str]:
    """The pages of the site in the order of its navigation (``nav:`` in mkdocs.yml), as paths
    under docs/. mkdocs build --strict (tests/test_docs_site.py) fails on a page left out of it."""
    nav = mkdocs_yml.split("\nnav:\n", 1)[1]
    return re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?(\S+\.md)\s*$", nav, re.MULTILINE)


def unique_commands(documents: list[tuple[str, str]]) -> list[Command]:
    """Every document's commands in order, a command whose text was already collected left out:
    a page may repeat the README's first upload, which is run once, where it first appears."""
    seen: set[str] = set()
    commands = []
    for source, text in documents:
        for command in readme_commands(text, source):
            if command.text not in seen:
                seen.add(command.text)
                commands.append(command)
    return commands


def documented_commands() -> list[Command]:
    """The commands of README.md, then of the site's pages in navigation order."""
    documents = [("README.md", README.read_text())]
    documents += [(f"docs/{page}", (DOCS / page).read_text()) for page in site_pages(MKDOCS.read_text())]
    return unique_commands(documents)


def test_the_readme_parser_joins_continuations_and_skips_synopses_and_comments() -> None:
    text = ("intro\n```sh\n# a comment\nfirst --a \\\n      --b   # trailing\n\nsecond\n```\n"
            "```\nsynopsis RUN.json [--x]\n```\n```python\nprint(1)\n```\n```sh\nthird\n```\n")
    assert readme_commands(text) == [Command("first --a \\\n      --b   # trailing", 4), Command("second", 7),
                                     Command("third", 16)]
    with pytest.raises(ValueError, match="README.md:3: a command ends with a backslash"):
        readme_commands("```sh\nx\nfirst \\\n```\n")
    with pytest.raises(ValueError, match="docs/cli.md:3: a command ends with a backslash"):
        readme_commands("```sh\nx\nfirst \\\n```\n", "docs/cli.md")


def test_the_pages_are_read_in_navigation_order_and_a_repeated_command_runs_once() -> None:
    nav = ("site_name: x\nnav:\n  - Home: index.md\n  - Participants:\n      - participants/index.md\n"
           "      - Runs, validation: participants/runs.md\n  - Tools: cli.md\n")
    assert site_pages(nav) == ["index.md", "participants/index.md", "participants/runs.md", "cli.md"]
    readme = "```sh\nfirst\nsecond --x \\\n  --y\n```\n"
    page = "intro\n\n```sh\nsecond --x \\\n  --y\nthird\nfirst   # again, with a comment\n```\n"
    assert unique_commands([("README.md", readme), ("docs/p.md", page)]) == [
        Command("first", 2), Command("second --x \\\n  --y", 3), Command("third", 6, "docs/p.md"),
        Command("first   # again, with a comment", 7, "docs/p.md")]
    # The real site: every page in the navigation exists, and the README comes first.
    pages = site_pages(MKDOCS.read_text())
    assert {"index.md", "participants/index.md", "organisers/index.md", "operators/index.md",
            "developers/index.md", "cli.md", "reliability.md"} <= set(pages)
    assert all((DOCS / page).is_file() for page in pages)
    assert documented_commands()[0].source == "README.md"


def test_every_exception_is_still_in_the_documents() -> None:
    commands = {command.text.split("#")[0].strip() for command in documented_commands()}
    assert SERVERS <= commands, SERVERS - commands
    assert set(NOT_RUN) <= commands, set(NOT_RUN) - commands
    ci = (ROOT / ".ci" / "run").read_text()
    assert any(line.strip().startswith("python3 dev.py test") for line in ci.splitlines())


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason}, and CI=true forbids skipping")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def fresh_copy(target: Path) -> None:
    """The repository as a fresh clone of the working tree has it: tracked and untracked (not
    ignored) files, nothing from .venv, var/ or caches."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def prepared_virtualenv(clone: Path) -> None:
    """``.venv`` as ``dev.py`` leaves it, made without a download: the packages are those of the
    Python running this test (its site-packages directory on the new one's path, without running
    its ``.pth`` files, so no editable install of another checkout is imported), and dev.py's
    stamp says ``pyproject.toml`` is installed."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(str(clone / ".venv"))
    site_packages = Path(sysconfig.get_paths(vars={"base": str(clone / ".venv"),
                                                   "platbase": str(clone / ".venv")})["purelib"])
    site_packages.mkdir(parents=True, exist_ok=True)
    (site_packages / "_installed_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    stamp = hashlib.sha256((clone / "pyproject.toml").read_bytes()).hexdigest()
    (clone / ".venv" / ".installed-pyproject-sha256").write_text(stamp)


def bare_python_path(home: Path) -> str:
    """A PATH with ``python3`` the Python this venv was made from (no packages of ours) and the
    system's tools, without any ``python``."""
    bin_dir = home / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    system = [path for path in ("/usr/local/bin", "/usr/bin", "/bin") if Path(path).is_dir()]
    for folder in system:
        if (Path(folder) / "python").exists():
            # A machine with python-is-python3: hide it, so that the README must say python3.
            shadow = bin_dir / "python"
            shadow.write_text("#!/bin/sh\necho 'python: command not found (a fresh Debian has only python3)' >&2\n"
                              "exit 127\n")
            shadow.chmod(0o755)
            break
    return os.pathsep.join([str(bin_dir), *system])


# The command's exit status, on a line of its own (its output may not end with a newline).
STATUS = 'readme_status=$?; printf \'\\n@@@ status %s\\n\' "$readme_status"'


def shell_script(commands: list[Command], port: int) -> str:
    """One bash session: each command as written (the address replaced), with markers around it;
    the server started in the background and waited for."""
    lines = ["set -o pipefail"]
    for index, command in enumerate(commands):
        text = command.text.replace(README_ADDRESS, f"127.0.0.1:{port}")
        head = command.text.split("#")[0].strip()
        lines.append(f"printf '\\n@@@ start {index}\\n'")
        if head in NOT_RUN:
            lines.append(f"echo '@@@ skipped {index}'")
            continue
        if head in SERVERS:
            lines += [
                f"{text.split('#')[0].strip()} 127.0.0.1:{port} > server.log 2>&1 &",
                "echo $! > server.pid",
                f"for _ in $(seq {SERVER_START_SECONDS}); do",
                f"  if curl -s -o /dev/null http://127.0.0.1:{port}/healthz; then break; fi",
                "  if ! kill -0 $(cat server.pid) 2>/dev/null; then echo 'the server stopped:'; tail -n 40 server.log;"
                " echo '@@@ status 1'; exit 1; fi",
                "  sleep 1",
                "done",
                f"curl -s -o /dev/null http://127.0.0.1:{port}/healthz",
                STATUS,
            ]
            continue
        lines += [text, STATUS]
    return "\n".join(lines) + "\n"


@pytest.mark.slow  # about 80 s in CI: queued with the other sweeps (tests/conftest.py, slow_first)
def test_every_readme_command_works_as_written(tmp_path: Path) -> None:
    for tool in ("git", "curl", "bash"):
        if shutil.which(tool) is None:
            _unavailable(f"{tool} is not installed")
    if sys.prefix == sys.base_prefix:
        _unavailable("the tests do not run in a virtualenv, whose packages the fresh copy's .venv would use")
    commands = documented_commands()
    assert len(commands) >= 15, "the documents' sh blocks were not found"
    clone, home = tmp_path / "clone", tmp_path / "home"
    clone.mkdir()
    home.mkdir()
    fresh_copy(clone)
    prepared_virtualenv(clone)
    (home / ".curlrc").write_text("fail\n")
    port = free_port()
    env = {"HOME": str(home), "CURL_HOME": str(home), "PATH": bare_python_path(home), "LANG": "C.UTF-8",
           "TMPDIR": str(tmp_path), "TERM": "dumb"}
    script = shell_script(commands, port)
    (tmp_path / "readme.sh").write_text(script)
    process = subprocess.Popen(["bash", str(tmp_path / "readme.sh")], cwd=clone, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=SCRIPT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        output, _ = process.communicate()
        pytest.fail(f"the documents' commands took more than {SCRIPT_SECONDS} s:\n{output.decode()[-4000:]}")
    finally:
        server = clone / "server.pid"
        if server.exists():  # the server this test started, by its process id
            try:
                os.kill(int(server.read_text()), signal.SIGTERM)
            except ProcessLookupError:
                pass
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    text = output.decode("utf-8", "replace")
    parts = re.split(r"^@@@ start (\d+)\n", text, flags=re.MULTILINE)
    results: dict[int, tuple[str, str]] = {}
    for index, body in zip(parts[1::2], parts[2::2], strict=True):
        status = re.search(r"^@@@ (status (\d+)|skipped \d+)$", body, re.MULTILINE)
        results[int(index)] = (status.group(2) or "skipped" if status else "missing", body)
    problems = []
    for index, command in enumerate(commands):
        status, body = results.get(index, ("not reached", ""))
        if status not in ("0", "skipped") or "Traceback (most recent call last)" in body:
            problems.append(f"{command.source}:{command.line}: {shlex.quote(command.text)} -> {status}\n{body[-3000:]}")
    server_log = clone / "server.log"
    if problems and server_log.exists():
        problems.append("server log:\n" + server_log.read_text()[-3000:])
    assert not problems, "\n\n".join(problems[:3])
    # What the commands left behind, as the README says.
    assert (clone / "var" / "demo-logins.txt").exists()
    assert sorted(path.name for path in (clone / "var" / "demo" / "data").iterdir()) == [
        "format.json", "participant-data.json", "sample-run.json"]
    assert (clone / "participant-data.json").read_bytes() == (
        clone / "var" / "demo" / "data" / "participant-data.json").read_bytes()
