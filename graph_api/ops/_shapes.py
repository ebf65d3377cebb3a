"""Helpers the op families' shape rules share. A rule takes the (normalized) op and its input
shapes and returns one shape (or None: unknown) per output; it raises ``RuleError`` when the
inputs do not fit, which shape inference reports naming the op.

Example:
    >>> broadcast_shapes((8, 1, 3), (5, 1))
    (8, 5, 3)
"""
from __future__ import annotations

from .registry import RuleError
from .schema import get_attr

def _require(cond, msg):
    if not cond:
        raise RuleError(msg)


def _shape_axis(axis: int, ndim: int, what="axis") -> int:
    _require(-ndim <= axis < ndim, f"{what} {axis} is out of range for rank {ndim}")
    return axis + ndim if axis < 0 else axis


def broadcast_shapes(a, b) -> tuple:
    """numpy broadcasting of two shapes (oneDNN's ``auto_broadcast=numpy``).

    Example:
        >>> broadcast_shapes((8, 1, 3), (5, 1))
        (8, 5, 3)
    """
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        _require(x == y or x == 1 or y == 1, f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def _one_way(src, dst, what):
    ok = len(src) <= len(dst) and all(s in (1, d) for s, d in zip(src[::-1], dst[::-1]))
    _require(ok, f"{what} shape {list(src)} does not broadcast to {list(dst)}")


def _split_data(shape, fmt):
    """(N, C, spatial) of a data tensor in NCX or NXC."""
    _require(len(shape) >= 2, f"data tensor needs rank >= 2, got shape {list(shape)}")
    return (shape[0], shape[1], list(shape[2:])) if fmt == "NCX" else (shape[0], shape[-1], list(shape[1:-1]))


def _join_data(n, c, sp, fmt):
    return (n, c, *sp) if fmt == "NCX" else (n, *sp, c)


def _split_weights(shape, fmt):
    """(O, I, spatial) of a weights tensor in OIX, XIO, IOX or XOI."""
    _require(len(shape) >= 2, f"weights need rank >= 2, got shape {list(shape)}")
    if fmt in ("OIX", "IOX"):
        o, i, sp = shape[0], shape[1], list(shape[2:])
        return (i, o, sp) if fmt == "IOX" else (o, i, sp)
    o, i, sp = shape[-1], shape[-2], list(shape[:-2])
    return (i, o, sp) if fmt == "XOI" else (o, i, sp)


def _positive(shape):
    _require(all(d > 0 for d in shape), f"inferred output shape {list(shape)} has a non-positive dim")
    return shape


def _channels(op, s):
    return _split_data(s[0], get_attr(op, "data_format"))[1]


def _identity(op, s):
    return [s[0]] * len(op.outputs)


def _same_shapes(op, s):
    """diff_src of an elementwise backward op: the shape of its two (equal-shaped) inputs."""
    _require(tuple(s[0]) == tuple(s[1]), f"inputs of shapes {list(s[0])} and {list(s[1])} must have the same shape")
    return [s[0]]


def _checked_axis_identity(op, s):
    _shape_axis(get_attr(op, "axis"), len(s[0]))
    return [s[0]]
