"""The package's imports point one way, down the layers listed here, with no cycle and no hidden import.

`LAYERS` is the one place the allowed order is written: a unit (a top-level module or
package of `ctxwarden`) may import units of lower layers only — never a higher layer, nor
a sibling in its own layer. Every import counts: at module level, under `if TYPE_CHECKING`,
and inside functions. Inside functions a ctxwarden import is refused outright (it hides a
dependency from readers and the type checker), except in the command-line entry point,
which loads its commands lazily to keep `--help` fast. docs/architecture.md shows the same
order; a test there checks it against this list.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "ctxwarden"

LAYERS: list[tuple[str, ...]] = [
    ("errors",),
    ("core",),
    ("trace",),
    ("admit", "clip", "fold"),
    ("curate",),
    ("thread",),
    ("stack",),
    ("report",),
    ("session",),
    ("replay",),
    ("demo",),
    ("bench",),
    ("ctxwarden",),
    ("cli",),
    ("__main__",),
]
"""Bottom to top. `ctxwarden` is the package's own `__init__` (the public API)."""

LAZY_IMPORTS_ALLOWED = frozenset({"ctxwarden.cli", "ctxwarden.cli.trace_command"})
"""Modules that may import ctxwarden inside functions: the CLI entry point, to keep `--help` fast."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _target(module: str, is_package: bool, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The ctxwarden modules `node` imports (a `from pkg import sub` names the submodule when there is one)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.split(".")[0] == "ctxwarden"]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    if base.split(".")[0] != "ctxwarden":
        return []
    found = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES]
    return found or [base]


def _imports() -> list[tuple[str, str, bool, int]]:
    """(importer, imported, inside a function, line) for every ctxwarden import in the package."""
    edges = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        inside: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                inside |= {id(child) for child in ast.walk(node) if child is not node}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _target(module, path.name == "__init__.py", node):
                    edges.append((module, target, id(node) in inside, node.lineno))
    return edges


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "ctxwarden"


RANK = {unit: rank for rank, layer in enumerate(LAYERS) for unit in layer}


def test_every_unit_has_a_layer() -> None:
    units = {_unit(module) for module in MODULES}
    assert sorted(units - set(RANK)) == [], "add the new package or module to LAYERS"
    assert sorted(set(RANK) - units) == [], "LAYERS names a unit that no longer exists"


def test_imports_point_down_the_layers() -> None:
    upward = [
        f"{importer} (line {line}) imports {imported}: {_unit(importer)} is not above {_unit(imported)}"
        for importer, imported, _local, line in _imports()
        if _unit(importer) != _unit(imported) and RANK[_unit(imported)] >= RANK[_unit(importer)]
    ]
    assert upward == []


def test_no_function_local_imports_of_ctxwarden() -> None:
    hidden = [
        f"{importer} (line {line}) imports {imported} inside a function"
        for importer, imported, local, line in _imports()
        if local and importer not in LAZY_IMPORTS_ALLOWED
    ]
    assert hidden == []


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph`, if it has one."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


@pytest.mark.parametrize("level", ["package", "module"])
def test_no_import_cycle(level: str) -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for importer, imported, _local, _line in _imports():
        if level == "package" and _unit(importer) != _unit(imported):
            graph[_unit(importer)].add(_unit(imported))
        elif level == "module" and importer != imported and not importer.startswith(f"{imported}."):
            graph[importer].add(imported)  # a module importing its own package's __init__ is not a cycle of modules
    assert _cycle(graph) is None


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """The walk finds imports inside functions and resolves relative ones (so the tests above can fail)."""
    source = "from .. import stack\n\ndef f():\n    from ctxwarden.report import build\n"
    tree = ast.parse(source)
    nodes = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert _target("ctxwarden.fold.engine", False, nodes[0]) == ["ctxwarden.stack"]
    assert _target("ctxwarden.fold.engine", False, nodes[1]) == ["ctxwarden.report.build"]
