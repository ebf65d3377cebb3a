"""The base of every IR node: small immutable dataclasses with structural hashing.

Nodes are frozen dataclasses with ``__slots__``. Two nodes are *the same* when they have the
same type and the same fields, compared recursively (``same``). Variables carry a unique id,
so two variables that share a name are still different. Passes never mutate a node; they
build new ones with ``map_children``.
"""
from __future__ import annotations

import dataclasses
import functools


class Node:
    """Base class of expression and statement nodes."""

    __slots__ = ("_hash",)
    # Fields that bind a name (a loop variable, a reduce axis, an allocated buffer): never
    # rewritten by ``map_children``.
    binders: tuple[str, ...] = ()

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            h = hash((type(self).__name__,) + tuple(_hashable(getattr(self, f)) for f in field_names(type(self))))
            object.__setattr__(self, "_hash", h)
            return h


def _hashable(value):
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


@functools.lru_cache(maxsize=None)
def field_names(cls) -> tuple[str, ...]:
    """Names of the dataclass fields of node class ``cls``.

    Example:
        >>> from tilefuse.tensorir.expr import Add
        >>> field_names(Add)
        ('a', 'b', 'dtype')
    """
    return tuple(f.name for f in dataclasses.fields(cls))


@functools.lru_cache(maxsize=None)
def child_fields(cls) -> tuple[str, ...]:
    """Fields of ``cls`` that may hold child nodes (everything but binders and plain data)."""
    return tuple(f for f in field_names(cls) if f not in cls.binders and f not in ("dtype", "name", "uid", "kind"))


def same(a, b) -> bool:
    """Structural equality of two nodes (or tuples of nodes, or plain values).

    Example:
        >>> from tilefuse.tensorir.expr import const
        >>> same(const(1) + 2, const(1) + 2)
        True
    """
    if a is b:
        return True
    if isinstance(a, Node):
        if type(a) is not type(b) or hash(a) != hash(b):
            return False
        return all(same(getattr(a, f), getattr(b, f)) for f in field_names(type(a)))
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return type(a) is type(b) and a == b


def map_children(node: Node, fn) -> Node:
    """Rebuild ``node`` with ``fn`` applied to each child node; returns ``node`` if nothing changed.

    Example:
        >>> from tilefuse.tensorir.expr import const
        >>> e = const(1) + const(2)
        >>> str(map_children(e, lambda c: const(5)))
        '5 + 5'
    """
    cls = type(node)
    changes = None
    for f in child_fields(cls):
        value = getattr(node, f)
        if isinstance(value, Node):
            new = fn(value)
        elif isinstance(value, tuple) and value:
            new = tuple([fn(v) if isinstance(v, Node) else v for v in value])
            if all(x is y for x, y in zip(new, value)):
                continue
        else:
            continue
        if new is not value:
            if changes is None:
                changes = {}
            changes[f] = new
    if changes is None:
        return node
    return cls(*[changes[f] if f in changes else getattr(node, f) for f in field_names(cls)])


def children(node: Node) -> list:
    """The child nodes of ``node`` in field order.

    Example:
        >>> from tilefuse.tensorir.expr import const
        >>> [str(c) for c in children(const(1) + 2)]
        ['1', '2']
    """
    found = []
    for f in child_fields(type(node)):
        value = getattr(node, f)
        if isinstance(value, Node):
            found.append(value)
        elif isinstance(value, tuple):
            found += [v for v in value if isinstance(v, Node)]
    return found


class IdentityMemo:
    """A pure function of immutable nodes whose results are remembered by the identity of its
    arguments. The memo keeps each argument, so no id is reused while it lives: make one per
    pass or code generator, not one for the life of the process.

    Example:
        >>> from tilefuse.tensorir.expr import const
        >>> calls = []
        >>> count_children = IdentityMemo(lambda n: calls.append(n) or len(list(children(n))))
        >>> e = const(1) + 2
        >>> count_children(e), count_children(e), len(calls)
        (2, 2, 1)
    """

    def __init__(self, fn):
        self.fn = fn
        self._results: dict = {}     # ids of the arguments -> (the arguments, the result)

    def __call__(self, *args):
        key = tuple(map(id, args))
        hit = self._results.get(key)
        if hit is None:
            hit = self._results[key] = (args, self.fn(*args))
        return hit[1]
