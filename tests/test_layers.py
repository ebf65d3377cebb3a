"""The layer table, read from the source: tilefuse.tensorir <- tilefuse.schedule <-
tilefuse.graph_api <- tilefuse.autotune, each package's folder at the repository's root.

Each package imports only the packages below it, by their installed names (never a bare
``tensorir`` or ``schedule``: PyPI has an unrelated ``schedule``); graph_api does not touch llvmlite (native
code is the business of tensorir); and no two modules import each other, directly or around
a longer circle, except the loop-IR printer (nodes print themselves through it, and it reads
the nodes). Imports inside functions count: a lazy import that points up is still one.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ["tensorir", "schedule", "graph_api", "autotune"]
LAYERS = [f"tilefuse.{folder}" for folder in FOLDERS]
FORBIDDEN = {"tilefuse.graph_api": {"llvmlite"}}
CIRCLES_ALLOWED = [{"tilefuse.tensorir.printer", "tilefuse.tensorir.expr", "tilefuse.tensorir.stmt"}]


def _module_name(path: Path) -> str:
    """The installed name of a package file: graph_api/ops/__init__.py is tilefuse.graph_api.ops."""
    parts = ["tilefuse", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> str:
    """The package a module name belongs to (its first two parts under tilefuse, else its first)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "tilefuse" else parts[0]


def _imports(path: Path) -> list[tuple[str, int]]:
    """(absolute module name, line) of every import in the file, resolving relative ones."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((base, node.lineno))
            found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return found


def _sources():
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def _upward_imports(path: Path, own: str) -> list[str]:
    """What ``path``, a file of layer ``own``, imports from above its layer or from what
    its layer must not touch."""
    above = set(LAYERS[LAYERS.index(own) + 1:]) | FORBIDDEN.get(own, set())
    return [f"{path.name}:{line} imports {name}, above or outside {own}"
            for name, line in _imports(path) if _layer(name) in above]


def _dynamic_imports(path: Path) -> list[tuple[str, int]]:
    """(module name, line) of every ``__import__("...")``, ``import_module("...")`` or
    ``pytest.importorskip("...")`` call."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in ("__import__", "import_module", "importorskip"):
                found.append((node.args[0].value, node.lineno))
    return found


def _bare_imports(path: Path) -> list[str]:
    """Imports of a package by its folder's name instead of its installed one."""
    return [f"{path.name}:{line} imports {name}, not tilefuse.{name}"
            for name, line in _imports(path) + _dynamic_imports(path) if name.split(".")[0] in FOLDERS]


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down(path):
    assert _upward_imports(path, f"tilefuse.{path.relative_to(ROOT).parts[0]}") == []


def _python_files_outside_packages():
    skip = {".venv", ".git", "build"}
    return sorted(p for p in ROOT.rglob("*.py") if not skip & set(p.relative_to(ROOT).parts))


@pytest.mark.parametrize("path", _python_files_outside_packages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_imports_the_installed_names(path):
    assert _bare_imports(path) == []


def _module_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in _sources()}
    graph = {}
    for name, path in modules.items():
        graph[name] = {m for m, _ in _imports(path) if m in modules and m != name}
    return graph


def _circles(graph) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v); on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop(); on_stack.discard(w); group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in graph:
        if v not in index:
            visit(v)
    return groups


def _without_packages(graph) -> dict[str, set[str]]:
    """A package's ``__init__`` re-exports its modules; an import of the package stands for
    the modules it names, so edges into ``__init__`` files are left out of the circle test."""
    packages = {name for name in graph
                if (ROOT / name.removeprefix("tilefuse.").replace(".", "/") / "__init__.py").exists()}
    return {name: deps - packages for name, deps in graph.items() if name not in packages}


def test_no_import_circles_between_modules():
    circles = [c for c in _circles(_without_packages(_module_graph())) if not any(c <= a for a in CIRCLES_ALLOWED)]
    assert not circles, "modules that import each other: " + "; ".join(" <-> ".join(sorted(c)) for c in circles)


def test_the_layer_check_sees_upward_and_lazy_imports(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "schedule").mkdir()
    probe = tmp_path / "schedule" / "probe.py"
    probe.write_text("import numpy\nfrom tilefuse.tensorir import expr\ndef f():\n    from tilefuse.graph_api.op import Op\n")
    assert _upward_imports(probe, "tilefuse.schedule") == [
        "probe.py:4 imports tilefuse.graph_api.op, above or outside tilefuse.schedule",
        "probe.py:4 imports tilefuse.graph_api.op.Op, above or outside tilefuse.schedule"]
    probe.write_text("import llvmlite.binding\nfrom ..graph_api import compile_graph\n")
    assert _upward_imports(probe, "tilefuse.graph_api") == [
        "probe.py:1 imports llvmlite.binding, above or outside tilefuse.graph_api"]
    assert _upward_imports(probe, "tilefuse.schedule") == [
        "probe.py:2 imports tilefuse.graph_api, above or outside tilefuse.schedule",
        "probe.py:2 imports tilefuse.graph_api.compile_graph, above or outside tilefuse.schedule"]


def test_the_name_check_sees_bare_package_names(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    probe = tmp_path / "probe.py"
    probe.write_text("import schedule\nfrom tilefuse.schedule import build\nfrom graph_api.op import Op\n"
                     "ops = __import__('tensorir.ops', fromlist=['nn'])\n")
    assert _bare_imports(probe) == ["probe.py:1 imports schedule, not tilefuse.schedule",
                                    "probe.py:3 imports graph_api.op, not tilefuse.graph_api.op",
                                    "probe.py:3 imports graph_api.op.Op, not tilefuse.graph_api.op.Op",
                                    "probe.py:4 imports tensorir.ops, not tilefuse.tensorir.ops"]


def test_the_circle_check_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [{"a", "b", "c"}]
