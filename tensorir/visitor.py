"""Traversals that treat node classes differently: ``Visitor`` dispatches each node to
``visit_<ClassName>`` and keeps the stack of enclosing loops; ``Mutator`` rebuilds what its
methods change. Code generation, the loop passes, the simplifier, the printer, the verifier
and the tuner's features subclass them; queries that treat every node alike (every variable,
every load) use the functions of ``walk.py``.

Example:
    >>> from tilefuse.tensorir.expr import Buffer, const, var
    >>> from tilefuse.tensorir.stmt import BufferStore, For
    >>> A = Buffer("A", (4, 4), "float32"); i, j = var("i"), var("j")
    >>> nest = For(i, const(0), const(4), "serial", For(j, const(0), const(4), "vectorized",
    ...            BufferStore(A, const(0.0), (i, j))))
    >>> class Depths(Visitor):
    ...     def visit_BufferStore(self, s):
    ...         print([loop.var.name for loop in self.loops])
    >>> Depths().visit(nest)
    ['i', 'j']
"""
from __future__ import annotations

from contextlib import contextmanager

from .node import Node, children, map_children

_METHODS: dict = {}     # (visitor class, node class) -> the name of the method that visits it


class Visitor:
    """Calls ``visit_<ClassName>(node, *args)`` for each node it is given, the method of the
    nearest base class of the node that has one (``visit_BinaryOp`` serves ``Add`` and ``Mul``),
    or ``generic_visit`` (which visits the children) when there is none. ``self.loops`` holds the For
    nodes around the node being visited, outermost first; a subclass that handles ``For``
    itself enters the loop with ``with self.inside(loop):``.

    Example:
        >>> from tilefuse.tensorir.expr import const
        >>> class Consts(Visitor):
        ...     def __init__(self):
        ...         super().__init__(); self.seen = []
        ...     def visit_Const(self, e):
        ...         self.seen.append(e.value)
        >>> v = Consts(); v.visit(const(1) + const(2) * 3); v.seen
        [1, 2, 3]
    """

    def __init__(self):
        self.loops: list = []          # the For nodes around the node being visited

    def visit(self, node: Node, *args):
        """Dispatch ``node`` to its ``visit_`` method.

        Example:
            >>> from tilefuse.tensorir.stmt import SeqStmt
            >>> Visitor().visit(SeqStmt(())) is None
            True
        """
        key = (type(self), type(node))
        name = _METHODS.get(key)
        if name is None:
            name = _METHODS[key] = next((f"visit_{c.__name__}" for c in type(node).__mro__
                                         if hasattr(self, f"visit_{c.__name__}")), "generic_visit")
        return getattr(self, name)(node, *args)

    def generic_visit(self, node: Node, *args):
        """Visit the children of ``node`` in field order.

        Example:
            >>> from tilefuse.tensorir.stmt import SeqStmt
            >>> Visitor().generic_visit(SeqStmt(())) is None
            True
        """
        for child in children(node):
            self.visit(child, *args)

    @contextmanager
    def inside(self, loop):
        """``loop`` is on the loop stack for the duration of the block.

        Example:
            >>> from tilefuse.tensorir.expr import const, var
            >>> from tilefuse.tensorir.stmt import For, SeqStmt
            >>> v = Visitor(); loop = For(var("i"), const(0), const(2), "serial", SeqStmt(()))
            >>> with v.inside(loop):
            ...     len(v.loops)
            1
        """
        self.loops.append(loop)
        try:
            yield loop
        finally:
            self.loops.pop()

    def visit_For(self, loop, *args):
        self.visit(loop.min, *args)
        self.visit(loop.extent, *args)
        with self.inside(loop):
            self.visit(loop.body, *args)


class Mutator(Visitor):
    """A Visitor whose ``visit`` returns a node: ``generic_visit`` rebuilds a node from its
    visited children (the node itself when none changed). Inputs are never mutated.

    Example:
        >>> from tilefuse.tensorir.expr import Const, const
        >>> class Double(Mutator):
        ...     def visit_Const(self, e):
        ...         return Const(e.value * 2, e.dtype)
        >>> str(Double().visit(const(1) + 2))
        '2 + 4'
    """

    def generic_visit(self, node: Node, *args) -> Node:
        return map_children(node, lambda child: self.visit(child, *args))

    def visit_For(self, loop, *args) -> Node:
        lo, extent = self.visit(loop.min, *args), self.visit(loop.extent, *args)
        with self.inside(loop):
            body = self.visit(loop.body, *args)
        if lo is loop.min and extent is loop.extent and body is loop.body:
            return loop
        return type(loop)(loop.var, lo, extent, loop.kind, body)
