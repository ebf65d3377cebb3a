"""Plain functions over a node tree that treat every node kind alike: ``walk`` (every node),
``walk_distinct``, ``statements``, ``rewrite`` (bottom-up with one function), ``substitute``,
``reads_var``, ``free_vars``. For queries and substitutions; a traversal that does something
different per node class, or needs the enclosing loops, subclasses ``visitor.Visitor`` or
``visitor.Mutator`` instead. Both read the tree through ``node.children`` and ``map_children``.
"""
from __future__ import annotations

from .expr import Expr, Var
from .node import Node, children, map_children


def walk(node: Node):
    """Yield ``node`` and every node below it, parents before children.

    Example:
        >>> from tilefuse.tensorir.expr import const
        >>> len(list(walk(const(1) + 2)))
        3
    """
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        below = children(n)
        if below:
            below.reverse()
            stack += below


def walk_distinct(node: Node):
    """Yield each distinct node object under ``node`` (itself included) once, parents before
    children: a subtree that several parents share (an unrolled loop's copies share their
    body) is walked once, where ``walk`` walks it under every parent.

    Example:
        >>> from tilefuse.tensorir.expr import var
        >>> i = var("i"); e = i * 2
        >>> len(list(walk(e + e))), len(list(walk_distinct(e + e)))
        (7, 4)
    """
    seen = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        below = children(n)
        if below:
            below.reverse()
            stack += below


def statements(node: Node):
    """Yield ``node`` and every statement below it, parents before children, without entering
    expressions (which hold no statements).

    Example:
        >>> from tilefuse.tensorir.expr import Buffer, const
        >>> from tilefuse.tensorir.stmt import BufferStore, SeqStmt
        >>> A = Buffer("A", (2,), "float32")
        >>> seq = SeqStmt((BufferStore(A, const(1.0), (const(0),)), BufferStore(A, const(2.0), (const(1),))))
        >>> [type(s).__name__ for s in statements(seq)]
        ['SeqStmt', 'BufferStore', 'BufferStore']
    """
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        below = [c for c in children(n) if not isinstance(c, Expr)]
        below.reverse()
        stack += below


def rewrite(node: Node, fn) -> Node:
    """Rebuild ``node`` bottom-up, replacing each rebuilt node ``n`` with ``fn(n)``.

    ``fn`` returns its argument to keep a node. The input is never mutated.

    Example:
        >>> from tilefuse.tensorir.expr import Const, const
        >>> e = rewrite(const(1) + 2, lambda n: Const(n.value * 10, n.dtype) if isinstance(n, Const) else n)
        >>> str(e)
        '10 + 20'
    """
    return fn(map_children(node, lambda c: rewrite(c, fn)))


def substitute(node: Node, mapping: dict) -> Node:
    """Replace variables by expressions; ``mapping`` maps Var (or its uid) to Expr.

    Example:
        >>> from tilefuse.tensorir.expr import var
        >>> i = var("i")
        >>> str(substitute(i * 2, {i: i + 1}))
        '(i + 1) * 2'
    """
    by_uid = {(k.uid if isinstance(k, Var) else k): v for k, v in mapping.items()}
    if not by_uid:
        return node

    def replace(n):
        if isinstance(n, Var):
            return by_uid.get(n.uid, n)
        return n
    return rewrite(node, replace)


def reads_var(node: Node, var: Var) -> bool:
    """Whether ``var`` occurs anywhere in ``node``.

    Example:
        >>> from tilefuse.tensorir.expr import var
        >>> i, j = var("i"), var("j")
        >>> reads_var(i * 2 + 1, i), reads_var(i * 2 + 1, j)
        (True, False)
    """
    return any(isinstance(n, Var) and n.uid == var.uid for n in walk(node))

def free_vars(node: Node) -> list[Var]:
    """Variables used in ``node`` and not bound inside it (by a loop, a let or a reducer), in
    order of first use.

    Example:
        >>> from tilefuse.tensorir.expr import var
        >>> [v.name for v in free_vars(var("a") + var("b"))]
        ['a', 'b']
    """
    found: dict[int, Var] = {}
    bound: set[int] = set()
    for n in walk_distinct(node):       # a shared subtree adds nothing the second time
        for f in type(n).binders:
            b = getattr(n, f)
            for v in (b if isinstance(b, tuple) else (b,)):
                if isinstance(v, Var):
                    bound.add(v.uid)
        if isinstance(n, Var) and n.uid not in bound:
            found.setdefault(n.uid, n)
    return [v for uid, v in found.items() if uid not in bound]
