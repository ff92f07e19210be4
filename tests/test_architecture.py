"""The layers import downwards only, with no import circle (docs/architecture.md): ``scoring``
never imports Django or the server, ``tasks`` never imports ``leaderboard``, and the modules of
the project form no cycle, counting function-local imports too (they may not hide one)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("scoring", "tasks", "leaderboard", "kinds", "evalserver")


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


KIND_PACKAGES = ("stc3", "response", "metric")


def _kind_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["scoring", "kinds"] and parts[2] in KIND_PACKAGES else None


def test_each_kind_is_one_package_with_the_same_file_names() -> None:
    """One home per kind (Django's ``db/backends/<vendor>/``): ``scoring/kinds/<kind>/`` holds its
    adapter ``kind.py`` and its ``formats.py``; nothing of a kind lives at ``scoring/`` top level."""
    for kind in KIND_PACKAGES:
        home = ROOT / "scoring" / "kinds" / kind
        assert (home / "kind.py").is_file() and (home / "formats.py").is_file(), kind
    top = {path.stem for path in (ROOT / "scoring").glob("*.py")}
    assert top == {"__init__", "cli", "compare", "exports", "report", "significance", "validation"}, top
    assert not [path for path in (ROOT / "scoring").iterdir() if path.is_dir() and path.name not in ("kinds", "stats",
                                                                                                     "__pycache__")]


def test_no_kind_imports_another_kinds_private_names_and_the_core_names_no_kind() -> None:
    """A kind may use another's public functions (the metrics track's baselines are response
    measures), never its private names; the shared toolkit (``scoring.validation``), the
    statistics and the exports name no kind; the kind interface names none either."""
    modules = project_modules()
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _kind_of(name)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
                continue
            other = _kind_of(node.module)
            if own and other and other != own:
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                assert not private, f"{name} imports {private} of the {other} kind"
            if name in ("scoring", "scoring.validation", "scoring.stats", "scoring.exports", "scoring.report",
                        "scoring.kinds", "scoring.kinds.base"):
                assert other is None, f"{name} imports the {other} kind ({node.module})"


def test_the_registry_imports_a_kind_only_when_asked_for_it() -> None:
    """Asking for the DQ/ND kind never loads the response kind's libraries (spaCy, sacrebleu)."""
    import subprocess
    import sys

    code = ("import sys; from scoring.kinds import get_kind; get_kind('stc3'); "
            "print(sorted(m for m in sys.modules if m.startswith(('scoring.kinds.response', 'spacy', 'sacrebleu'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_generic_apps_import_no_kind() -> None:
    """``tasks``, ``leaderboard`` and ``evalserver`` ask the kind interface and the hooks
    (``tasks.hooks``), never a kind's package or a kind's app (``kinds/<kind>/``); a kind's app may
    use the generic apps."""
    modules = project_modules()
    for name, path in modules.items():
        if not name.startswith(("tasks", "leaderboard", "evalserver")):
            continue
        used = imports(path, modules)
        assert not [u for u in used if _kind_of(u) or u.startswith("kinds")], (name, sorted(used))
