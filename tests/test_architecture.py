"""The layers import downwards only, with no import circle (docs/architecture.md): ``scoring``
never imports Django or the server, ``tasks`` never imports ``leaderboard``, and the modules of
the project form no cycle, counting function-local imports too (they may not hide one)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("scoring", "tasks", "leaderboard", "evalserver")


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules (and top-level foreign packages) a file imports, at any depth."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            while name and name not in modules and "." in name:
                name = name.rsplit(".", 1)[0]
            found.add(name)
    return found


def test_layers_import_downwards_only() -> None:
    modules = project_modules()
    for name, path in modules.items():
        used = imports(path, modules)
        forbidden = ("django", "rest_framework", "celery", *PACKAGES[1:])
        if name.startswith("scoring"):
            assert not {u for u in used if u.split(".")[0] in forbidden}, name
        if name.startswith("tasks"):
            assert not {u for u in used if u.startswith("leaderboard")}, name


def test_no_import_circle_among_the_projects_modules() -> None:
    modules = project_modules()
    graph = {name: {u for u in imports(path, modules) if u in modules and u != name} for name, path in modules.items()}
    # A package's __init__ importing its own submodules is how packages are built, not a circle.
    for name in graph:
        graph[name] = {u for u in graph[name] if not u.startswith(name + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import circle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert len(graph) > 40
