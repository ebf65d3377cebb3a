"""Helpers the op families' lowerings share: checked input counts and attributes read for
``tensorir.ops``.

Example:
    >>> _CASE_FREE
    ('rounding_type', 'auto_broadcast')
"""
from __future__ import annotations

from ..logical_tensor import GraphError
from ..op import Op
from .schema import get_attr

_CASE_FREE = ("rounding_type", "auto_broadcast")   # oneDNN accepts any letter case


def _attrs(op, *names):
    return {n: (get_attr(op, n).lower() if n in _CASE_FREE else get_attr(op, n)) for n in names}


def _inputs(op: Op, xs: list, *counts: int) -> list:
    if len(xs) not in counts:
        raise GraphError(f"op {op.id} ({op.kind.value}): expected {' or '.join(map(str, counts))} inputs, "
                         f"got {len(xs)}")
    return xs
