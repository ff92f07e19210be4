"""The layers import downwards only, with no import circle (docs/architecture.md): ``scoring``
never imports Django or the server, ``tasks`` never imports ``leaderboard``, and the modules of
the project form no cycle, counting function-local imports too (they may not hide one)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("scoring", "tasks", "leaderboard", "kinds", "evalserver", "campaigns")


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _absolute(node: ast.ImportFrom, path: Path) -> str | None:
    """The absolute module an ``from ... import`` names, relative ones resolved against the file's
    package (``from .kind import X`` in ``scoring/kinds/stc3/formats.py`` is ``scoring.kinds.stc3.kind``)."""
    if node.level == 0:
        return node.module
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
    return ".".join([*base, node.module] if node.module else base) or None


def _string_imports(tree: ast.AST) -> list[str]:
    """Modules loaded by name with a literal string: ``import_module("x.y")``, ``__import__("x")``.
    The registry's ``"x.y:Class"`` paths reach ``import_module`` through a variable and are not
    followed: the registry is the one sanctioned way to name a kind by string."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        first = node.args[0]
        if name in ("import_module", "__import__") and isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.append(first.value)
    return found


def imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules (and top-level foreign packages) a file imports, at any depth: plain,
    relative and by a literal string."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = _string_imports(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and (module := _absolute(node, path)):
            names += [module] + [f"{module}.{alias.name}" for alias in node.names]
    found = set()
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
        if name.startswith(("tasks", "leaderboard", "evalserver")):
            # Annotation campaigns sit above the generic apps (they link in through tasks.hooks).
            assert not {u for u in used if u.startswith("campaigns")}, name


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


# Every folder of scoring/kinds/ is a kind: a fourth one is held to the same rules without
# anyone remembering to add it here.
KIND_PACKAGES = tuple(sorted(path.parent.name for path in (ROOT / "scoring" / "kinds").glob("*/__init__.py")))


def _kind_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["scoring", "kinds"] and parts[2] in KIND_PACKAGES else None


def test_each_kind_is_one_package_with_the_same_file_names() -> None:
    """One home per kind (Django's ``db/backends/<vendor>/``): ``scoring/kinds/<kind>/`` holds its
    adapter ``kind.py`` and its ``formats.py``; nothing of a kind lives at ``scoring/`` top level."""
    from scoring.kinds import BUILT_IN

    assert set(KIND_PACKAGES) == set(BUILT_IN), "every kind package is registered, every registered kind has one"
    for kind in KIND_PACKAGES:
        home = ROOT / "scoring" / "kinds" / kind
        assert (home / "kind.py").is_file() and (home / "formats.py").is_file(), kind
    top = {path.stem for path in (ROOT / "scoring").glob("*.py")}
    assert top == {"__init__", "cli", "compare", "exports", "offline", "report", "significance", "validation"}, top
    # judgements/: human judgements (agreement, files, gold), which serve every kind and are none.
    homes = ("kinds", "stats", "judgements", "__pycache__")
    assert not [path for path in (ROOT / "scoring").iterdir() if path.is_dir() and path.name not in homes]


# Modules that serve every kind and so may name none (the registry's strings excepted): a kind's
# part of an offline command lives in its own ``offline`` module (scoring.kinds.OFFLINE).
KIND_FREE = ("scoring", "scoring.validation", "scoring.exports", "scoring.report", "scoring.kinds",
             "scoring.kinds.base", "scoring.significance", "scoring.compare", "scoring.cli", "scoring.offline")
KIND_FREE_PACKAGES = ("scoring.stats",)


def test_no_kind_imports_another_kinds_private_names_and_the_core_names_no_kind() -> None:
    """A kind may use another's public functions (the metrics track's baselines are response
    measures), never its private names; the shared toolkit (``scoring.validation``), the
    statistics and the exports name no kind; the kind interface names none either."""
    modules = project_modules()
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _kind_of(name)
        named = [(module, node.names) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and (module := _absolute(node, path))]
        named += [(module, []) for module in _string_imports(tree)]
        for module, aliases in named:
            other = _kind_of(module)
            if own and other and other != own:
                private = [alias.name for alias in aliases if alias.name.startswith("_")]
                assert not private, f"{name} imports {private} of the {other} kind"
            if name in KIND_FREE or name.startswith(KIND_FREE_PACKAGES):
                assert other is None, f"{name} imports the {other} kind ({module})"


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


def test_the_import_reader_sees_relative_string_and_nested_imports(tmp_path: Path) -> None:
    """The rules above are only as good as the reader of imports: a relative import, an import by a
    literal string and an import inside a function each count (planted in a file of a package)."""
    package = tmp_path / "scoring" / "kinds" / "stc3"
    package.mkdir(parents=True)
    planted = package / "planted.py"
    planted.write_text("from ..response import kind\n"
                       "from . import formats\n"
                       "import importlib\n"
                       "def later():\n"
                       "    from leaderboard import board\n"
                       "    return importlib.import_module('tasks.access'), board\n", encoding="utf-8")
    modules = {"scoring.kinds.response.kind": planted, "scoring.kinds.stc3.formats": planted,
               "leaderboard.board": planted, "tasks.access": planted}
    import tests.test_architecture as rules

    saved = rules.ROOT
    rules.ROOT = tmp_path
    try:
        found = rules.imports(planted, modules)
    finally:
        rules.ROOT = saved
    assert {"scoring.kinds.response.kind", "scoring.kinds.stc3.formats", "leaderboard.board",
            "tasks.access"} <= found, found



# A module fits in one reader's head: at most this many lines (issue 38.1). The client's single
# file is exempt by design: participants download it alone.
MAX_MODULE_LINES = 600
SIZE_EXEMPT = {"client/evalserver_cli.py"}


def test_no_module_is_longer_than_a_reader_can_hold() -> None:
    folders = (*PACKAGES, "benchmarks", "fixtures", "client", "devtools")
    paths = [path for folder in folders for path in (ROOT / folder).rglob("*.py") if "migrations" not in path.parts]
    paths += [path for path in (ROOT / "tests").rglob("*.py") if not path.name.startswith(("test_", "conftest"))]
    too_long = []
    for path in paths:
        name = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if name in SIZE_EXEMPT:
            continue
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{name}: {lines} lines (at most {MAX_MODULE_LINES}: split it along its sections)")
    assert not too_long, "\n".join(too_long)
