"""The shape of the package, as executable rules: the modules sit in layers and every import points down (no
import circle), nothing imports a family's `family.py` (only the family table loads it, by name), the training
engine sits below everything but `utils`/`errors`, and the launchers read the plan's units.

The import graph is read from the source (the AST), not by importing: every `import` and `from ... import`
of a module counts, at module level, inside a function or under `if TYPE_CHECKING:` (a type-only import is a
dependency too). Relative imports are resolved, and `from pkg import name` is an import of `pkg.name` when that
is a module, else of `pkg`.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from repro.paths import REPO_DIR

PACKAGES = ("repro", "benchmarks", "tests")
FAMILY_MODULE = re.compile(r"^repro\.families\.\w+\.family$")
FAMILY_PATH = re.compile(r"^repro\.families\.\w+\.family(\.\w+)*$")  # the module or a name in it, as a string
# the one module that may load a family.py: by name, through importlib
FAMILY_TABLE = "repro.families"


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO_DIR).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules(package: str) -> dict[str, Path]:
    """Every module of a top-level package of the checkout: dotted name -> file."""
    return {_module_name(p): p for p in sorted((REPO_DIR / package).rglob("*.py")) if ".venv" not in p.parts}


@cache
def _known() -> frozenset[str]:
    return frozenset(name for package in PACKAGES for name in modules(package))


def _imports(tree: ast.AST):
    """Every import node of a module: at module level, in a function, under `if TYPE_CHECKING:`."""
    return (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))


def _target(name: str) -> str | None:
    """The innermost module of the checkout that `import name` loads (None: outside the checkout)."""
    while name and name not in _known():
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path) -> dict[str, int]:
    """{imported module of the checkout: line of its first import} for one module."""
    is_package = path.name == "__init__.py"
    found: dict[str, int] = {}
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                pkg = ".".join(base + ([node.module] if node.module else []))
            else:
                pkg = node.module or ""
            for alias in node.names:
                sub = f"{pkg}.{alias.name}"
                names.append(sub if sub in _known() else pkg)
        for name in names:
            target = _target(name)
            if target is not None and target != module:
                found.setdefault(target, node.lineno)
    return found


def import_graph(package: str) -> dict[str, dict[str, int]]:
    """module -> {module of the same package it imports: line}."""
    graph = {}
    for module, path in modules(package).items():
        graph[module] = {t: line for t, line in imports_of(module, path).items() if t.split(".")[0] == package}
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as one closed path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_closed_path(graph, c) for c in sorted(components)]


def _closed_path(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """A shortest circle through the component's first module, by breadth-first search inside it."""
    start, inside = component[0], set(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, v, start]
                if w in inside and w not in parents:
                    parents[w] = v
                    nxt.append(w)
        frontier = nxt
    return component


def _describe(graph: dict[str, dict[str, int]], path: list[str]) -> str:
    steps = [f"{a} (line {graph[a][b]})" for a, b in zip(path, path[1:])]
    return " -> ".join(steps + [path[-1]])


# --- the graph reader itself ----------------------------------------------------------------------


def test_the_graph_reader_resolves_relative_and_submodule_imports_and_counts_type_checking(tmp_path, monkeypatch):
    import tests.test_architecture as arch

    pkg = tmp_path / "pkgx"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import b\n"
        "from .sub import c\n"
        "if TYPE_CHECKING:\n"
        "    from pkgx import d\n"
        "def f():\n"
        "    import pkgx.sub.e\n"
    )
    for name in ("b.py", "sub/c.py", "d.py", "sub/e.py"):
        (pkg / name).write_text("")
    (pkg / "b.py").write_text("from pkgx.a import f\n")
    monkeypatch.setattr(arch, "REPO_DIR", tmp_path)
    arch.modules.cache_clear()
    arch._known.cache_clear()
    monkeypatch.setattr(arch, "PACKAGES", ("pkgx",))
    try:
        graph = arch.import_graph("pkgx")
        assert set(graph["pkgx.a"]) == {"pkgx.b", "pkgx.sub.c", "pkgx.d", "pkgx.sub.e"}  # d: type-only, an edge too
        assert arch.cycles(graph) == [["pkgx.a", "pkgx.b", "pkgx.a"]]
    finally:
        arch.modules.cache_clear()
        arch._known.cache_clear()


# --- the rules --------------------------------------------------------------------------------------


def test_no_module_of_repro_imports_itself_in_a_circle():
    graph = import_graph("repro")
    found = cycles(graph)
    assert found == [], "import circles (module-level, in a function or type-only):\n" + "\n".join(
        _describe(graph, c) for c in found
    )


# The layers of repro, bottom first: a module imports from its own layer or below, never above (type-only imports
# included). The family table is schema, under the specs it validates; `families.base` (the interface a family
# gives and a unit runs through) sits on the specs; a family's own modules are behaviour, above the plan.
LAYERS = (
    ("repro", "repro.errors", "repro.log", "repro.utils", "repro.paths", "repro.terminal", "repro.load"),
    ("repro.train", "repro.nn", "repro.metrics", "repro.data", "repro.memory", "repro.monitor", "repro.submit"),
    ("repro.datasets", "repro.families", "repro.design"),
    ("repro.specs",),
    # families.base trains through shared_training, which stores in weights_store (which reads results' git commit)
    (
        "repro.families.base",
        "repro.results",
        "repro.variants",
        "repro.completion",
        "repro.weights_store",
        "repro.shared_training",
    ),
    ("repro.complexity", "repro.fingerprint", "repro.timing"),
    ("repro.run",),
    ("repro.launch", "repro.weights"),
    ("repro.report", "repro.families.*"),
    ("repro.cli", "repro.__main__"),
)


def layer_of(module: str) -> int:
    """The layer of a module: that of the longest name of LAYERS it is or lies under (`repro.families.*`: a
    family's package)."""
    if module.startswith("repro.families.") and not module.startswith("repro.families.base"):
        return next(i for i, names in enumerate(LAYERS) if "repro.families.*" in names)
    found = [(len(n), i) for i, names in enumerate(LAYERS) for n in names if module == n or module.startswith(n + ".")]
    assert found, f"{module} is in no layer of LAYERS: add it where it belongs"
    return max(found)[1]


def test_every_import_points_down_the_layers():
    graph = import_graph("repro")
    found = [
        f"{module}:{line}: imports {target} (layer {layer_of(target)}, above its own {layer_of(module)})"
        for module, targets in graph.items()
        for target, line in targets.items()
        if layer_of(target) > layer_of(module)
    ]
    assert found == [], "imports that point up (docs/architecture.md):\n" + "\n".join(found)


def test_the_spec_schema_takes_the_family_table_only_where_it_checks_a_spec():
    """specs.py imports the family table inside the functions that check a spec against it, never at module level;
    the table imports nothing of the toolkit but `errors` (the recipe reader it loads on demand sits lower still)."""
    path = modules("repro")["repro.specs"]
    top = [
        node
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, (ast.Import, ast.ImportFrom)) and "families" in ast.unparse(node)
    ]
    assert top == [], [ast.unparse(n) for n in top]
    table = import_graph("repro")["repro.families"]
    assert set(table) <= {"repro.errors", "repro.names", "repro.train.recipe"}, table


def test_the_launchers_read_the_plans_units():
    """`launch/` imports nothing of the family table or a family's package (only `families.base`, the interface a
    unit runs through) and nothing of `run.py` but the plan's types: what a unit needs, the plan resolved once."""
    graph = import_graph("repro")
    found = []
    for module, path in modules("repro").items():
        if not module.startswith("repro.launch"):
            continue
        for target, line in graph[module].items():
            if target.startswith("repro.families") and target != "repro.families.base":
                found.append(f"{module}:{line}: imports {target}")
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "repro.run":
                found += [
                    f"{module}:{node.lineno}: {a.name} from repro.run"
                    for a in node.names
                    if a.name not in ("Plan", "Unit")
                ]
            if isinstance(node, ast.Import) and any(a.name == "repro.run" for a in node.names):
                found.append(f"{module}:{node.lineno}: import repro.run")
            if isinstance(node, ast.ImportFrom) and node.module == "repro" and any(a.name == "run" for a in node.names):
                found.append(f"{module}:{node.lineno}: from repro import run")
    assert found == [], "\n".join(found)


def _family_imports(path: Path) -> list[str]:
    """`file:line: what` for each import of a family.py, and each module path naming one (e.g. for importlib)."""
    module = _module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = [
        f"{path.relative_to(REPO_DIR)}:{line}: imports {target}"
        for target, line in imports_of(module, path).items()
        if FAMILY_MODULE.match(target)
    ]
    out += [
        f"{path.relative_to(REPO_DIR)}:{node.lineno}: names {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and FAMILY_PATH.match(node.value)
    ]
    return out


def test_nothing_but_the_family_table_imports_a_family_module():
    found = [
        line
        for package in PACKAGES
        for module, path in modules(package).items()
        if module != FAMILY_TABLE
        for line in _family_imports(path)
    ]
    assert found == [], "family.py is loaded by the family table only (import build.py and the others):\n" + (
        "\n".join(found)
    )


# repro.train: the engine every family trains with. It may use the small utilities and nothing above them,
# so a family, the launcher or the report can import it without pulling in the rest of the toolkit. The
# utilities themselves (errors, utils, log: the run's log file) import nothing of repro but each other.
UTILITIES = ("repro.utils", "repro.errors", "repro.log")
TRAIN_MAY_IMPORT = ("repro.train", *UTILITIES)


def test_the_utilities_import_nothing_of_the_toolkit_above_them():
    graph = import_graph("repro")
    found = [
        f"{module}:{line}: imports {target}"
        for module in UTILITIES
        for target, line in graph.get(module, {}).items()
        if target not in UTILITIES
    ]
    assert found == [], "\n".join(found)


def test_the_training_engine_imports_nothing_above_utils_and_errors():
    graph = import_graph("repro")
    found = [
        f"{module}:{line}: imports {target}"
        for module, targets in graph.items()
        if module == "repro.train" or module.startswith("repro.train.")
        for target, line in targets.items()
        if not any(target == allowed or target.startswith(allowed + ".") for allowed in TRAIN_MAY_IMPORT)
    ]
    assert found == [], "\n".join(found)


@cache
def _defined(path: Path) -> set[str]:
    """The names a module defines at module level (functions, classes, assignments; also under if/try)."""
    names: set[str] = set()
    stack = list(ast.parse(path.read_text(encoding="utf-8"), str(path)).body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            stack += [n for part in ("body", "orelse", "finalbody", "handlers") for n in getattr(node, part, [])]
        elif isinstance(node, ast.ExceptHandler):
            stack += node.body
    return names


def test_names_are_imported_from_the_module_that_defines_them():
    """A module re-exports nothing (a package's __init__ may gather names): a utility is imported from
    `repro.utils`, not through `repro.results` or `repro.metrics.files` that happen to import it."""
    repro = modules("repro")
    found = []
    for package in PACKAGES:
        for path in modules(package).values():
            for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                source = node.module if isinstance(node, ast.ImportFrom) and not node.level else None
                if source not in repro or repro[source].name == "__init__.py":
                    continue
                for alias in node.names:
                    if alias.name not in _defined(repro[source]) and f"{source}.{alias.name}" not in _known():
                        found.append(f"{path.relative_to(REPO_DIR)}:{node.lineno}: {alias.name} from {source}")
    assert found == [], "\n".join(found)


def test_submission_checks_need_no_scorer():
    """`repro submit` checks a file's format and ids; it imports nothing of repro.metrics (the scorers)."""
    found = [
        f"{module}:{line}: imports {target}"
        for module, targets in import_graph("repro").items()
        if module.startswith("repro.submit")
        for target, line in targets.items()
        if target == "repro.metrics" or target.startswith("repro.metrics.")
    ]
    assert found == [], "\n".join(found)
