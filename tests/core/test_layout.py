"""The package's folders are its layers, read from its own imports (``ast``, every import: module level, inside
functions, under ``if TYPE_CHECKING``): core/ at the bottom, then render/, then the faces ipython/ and server/,
then the top-level modules. An import points down or sideways within a layer, never up; core/ imports no face's
library; and nothing anywhere imports in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from harness import ROOT

PACKAGE = ROOT / "tfgpu_magic"

# Lower numbers are lower layers. The top-level modules (the package's hooks, api.py, cli.py) may use all below.
RANKS = {"core": 0, "render": 1, "ipython": 2, "server": 2}
TOP = 3
# The libraries of the faces: the core and the renderers work without any of them.
FACE_LIBRARIES = {"IPython", "ipywidgets", "ipykernel", "comm", "tornado", "jupyter_server", "traitlets"}
ALLOWED_LIBRARIES = {
    "core": set(),
    "render": set(),
    "ipython": {"IPython", "ipywidgets", "ipykernel", "comm", "traitlets"},
    "server": {"tornado", "jupyter_server", "traitlets"},
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(root: Path) -> dict[str, set[str]]:
    """Every module of the package -> every name it imports (this package's modules resolved to the module, a
    library to its top-level name)."""
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {alias.name if alias.name.startswith(root.name) else alias.name.split(".")[0]
                          for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if not target.startswith(root.name):
                    found.add(target.split(".")[0])
                    continue
                for alias in node.names:  # `from . import syntax` imports the module syntax
                    found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target)
        graph[name] = found - {name}
    return graph


def layer(module: str, package: str) -> str | None:
    """The folder (layer) a module is in; None for the top-level modules."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in RANKS) else None


def rank(module: str, package: str) -> int:
    return RANKS.get(layer(module, package), TOP)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def problems(graph: dict[str, set[str]], package: str) -> list[str]:
    said = [f"import circle: {' -> '.join(c)}" for c in circles(graph)]
    for module, targets in sorted(graph.items()):
        here = layer(module, package)
        for target in sorted(targets):
            if target.startswith(package):
                there = layer(target, package)
                if rank(target, package) > rank(module, package) or (
                        here in RANKS and there in RANKS and rank(target, package) == rank(module, package)
                        and here != there):
                    said.append(f"{module} imports {target}: {there or 'the top level'} is not below {here}")
            elif here in ALLOWED_LIBRARIES and target in FACE_LIBRARIES - ALLOWED_LIBRARIES[here]:
                said.append(f"{module} imports {target}, a face's library, from {here}/")
    return said


def test_the_package_keeps_its_layers_and_has_no_import_circle():
    graph = imports_of(PACKAGE)
    assert {layer(m, "tfgpu_magic") for m in graph} >= {"core", "render", "ipython", "server"}
    assert len(graph) > 30 and sum(map(len, graph.values())) > 100  # the reading found the package's imports
    assert problems(graph, "tfgpu_magic") == []


@pytest.mark.parametrize("extra, says", [
    # A circle inside one layer, the kind the magics and commands had.
    ({"tfgpu_magic.core.plan": {"tfgpu_magic.core.control"}}, "import circle"),
    # Upward: the core reaching a renderer, a renderer reaching a face.
    ({"tfgpu_magic.core.live": {"tfgpu_magic.render.views"}}, "is not below core"),
    ({"tfgpu_magic.render.text": {"tfgpu_magic.ipython.syntax"}}, "is not below render"),
    # Sideways between faces, and a core module reaching the top level (the old `from . import warn`).
    ({"tfgpu_magic.server.gpus": {"tfgpu_magic.ipython.context"}}, "is not below server"),
    ({"tfgpu_magic.core.runtime": {"tfgpu_magic"}}, "the top level is not below core"),
    # A face's library in the core.
    ({"tfgpu_magic.core.saved": {"IPython"}}, "a face's library, from core/"),
])
def test_the_check_fails_on_each_kind_of_fault(extra, says):
    graph = {m: set(t) for m, t in imports_of(PACKAGE).items()}
    for module, targets in extra.items():
        graph[module] |= targets
    found = problems(graph, "tfgpu_magic")
    assert any(says in p for p in found), found


def test_a_function_level_import_counts(tmp_path):
    package = tmp_path / "pkg"
    (package / "core").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "core" / "__init__.py").write_text("")
    (package / "core" / "a.py").write_text("def f():\n    from . import b\n")
    (package / "core" / "b.py").write_text("from typing import TYPE_CHECKING\n"
                                           "if TYPE_CHECKING:\n    from .a import f\n")
    assert circles(imports_of(package)) == [["pkg.core.a", "pkg.core.b"]]
