"""The benchmarks import the project and what they share with the tests (``devtools``) as installed
packages: none imports ``tests`` or puts the repository on ``sys.path`` (issue 38, item 6), and every
one starts (its ``--help``), or, for the report's parts that have no command of their own, imports."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))
# The sys.path entries a benchmark may add: its own folder (a sibling benchmark imported from a
# subprocess) and an old tree's copy it compares with (tukey_recombined.py --against).
ALLOWED_PATHS = {'str(ROOT / "benchmarks")', "str(folder)"}


def _path_inserts(tree: ast.AST, source: str) -> list[str]:
    return [ast.get_source_segment(source, node.args[-1]) or "" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("insert", "append")
            and ast.get_source_segment(source, node.func.value) == "sys.path"]


def _imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_benchmark_or_devtools_module_reaches_into_tests_or_sys_path():
    files = BENCHMARKS + sorted((ROOT / "devtools").rglob("*.py"))
    assert len(BENCHMARKS) > 20 and any(path.name == "processes.py" for path in files)
    found = {}
    for path in files:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        problems = [f"imports {name}" for name in sorted(_imported(tree) & {"tests", "pytest"})]
        problems += [f"adds {where} to sys.path" for where in _path_inserts(tree, source) if where not in ALLOWED_PATHS]
        if problems:
            found[str(path.relative_to(ROOT))] = problems
    assert found == {}


def test_the_checker_sees_what_it_forbids():
    source = 'import sys\nfrom tests.workers import x\nsys.path.insert(0, str(ROOT))\nsys.path.insert(0, str(folder))\n'
    tree = ast.parse(source)
    assert _imported(tree) == {"sys", "tests"}
    assert _path_inserts(tree, source) == ["str(ROOT)", "str(folder)"]


@pytest.mark.slow
@pytest.mark.parametrize("path", BENCHMARKS, ids=[path.stem for path in BENCHMARKS])
def test_every_benchmark_starts(path: Path, tmp_path: Path):
    # This checkout's packages first, as ``pip install -e .`` maps them in a checkout of its own
    # (a worktree sharing another checkout's environment would otherwise import that one's code);
    # run from elsewhere, so that nothing leans on the working directory.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, str(path), "--help"]
    if "__main__" not in path.read_text(encoding="utf-8"):  # a part of the reliability report
        command = [sys.executable, "-c", f"import {path.stem}"]
        env["PYTHONPATH"] += os.pathsep + str(path.parent)
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    if command[-1] == "--help":
        assert "usage:" in done.stdout.lower(), done.stdout[-500:]
