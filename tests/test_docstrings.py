"""Docstring examples are real: no public module, class or function docstring of the packages has
a ``>>> #`` line, a comment standing where an example's code should be (a comment that explains
a line goes after that line's code). The files are read with ``ast``, nothing is imported.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tilefuse", "tensorir", "schedule", "graph_api", "autotune")

def _public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _docstrings(body: list, prefix: str = ""):
    """(name, docstring) of every public class and function in ``body``, in source order, and
    of those nested in them."""
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and _public(node.name):
            yield prefix + node.name, ast.get_docstring(node, clean=False)
            yield from _docstrings(node.body, f"{prefix}{node.name}.")


def placeholders(source: str, path: str = "<source>") -> list[str]:
    """``path name: line`` of each ``>>> #`` line in the public docstrings of ``source``."""
    if ">>> #" not in source:       # most files: no need to parse
        return []
    tree = ast.parse(source, path)
    public_module = all(_public(part) for part in Path(path).with_suffix("").parts)
    found = []
    module = [("module", ast.get_docstring(tree, clean=False))] if public_module else []
    for name, doc in module + list(_docstrings(tree.body)):
        if doc is None:
            continue
        for line in doc.splitlines():
            if line.strip().startswith(">>> #"):
                found.append(f"{path} {name}: {line.strip()}")
    return found


def _files():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path


def test_no_placeholder_examples():
    found = [hit for name, path in _files() for hit in placeholders(path.read_text(), name)]
    assert not found, "docstring lines '>>> #' stand for examples; write a real one or none:\n" + "\n".join(found)


def test_what_counts_as_a_placeholder():
    source = '''"""Module.

    >>> # f(x)
"""
def f(x):
    """Public.

        >>> f(1)  # a comment after code is fine
        >>> #   g(x) -> 2
    """
def _g(x):
    """Private.

        >>> # g(x)
    """
class C:
    def m(self):
        """A public method.

            >>> # C().m()
        """
'''
    assert placeholders(source, "pkg/mod.py") == [
        "pkg/mod.py module: >>> # f(x)", "pkg/mod.py f: >>> #   g(x) -> 2", "pkg/mod.py C.m: >>> # C().m()"]
    assert placeholders(source, "pkg/_private.py") == [
        "pkg/_private.py f: >>> #   g(x) -> 2", "pkg/_private.py C.m: >>> # C().m()"]
