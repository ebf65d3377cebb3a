"""A float Divide by a bound constant becomes a Multiply by the constant's reciprocal.

A vector division has a throughput of one per 10-16 cycles on the cores we run on (``vdivps``
on AVX-512, one divider a core) where a multiply issues twice a cycle. In a kernel's epilogue
that is most of its cost: GELU as exporters write it divides by sqrt(2) (``Div -> Erf -> Add
-> Mul -> Mul``), and ConvNeXt's 3136x96 by 96x384 dense layer with that GELU took 894 us
dividing against 803 us multiplying (612 us with no activation). ``x / c`` and ``x * (1 / c)``
differ by at most an ulp or two (the reciprocal is rounded once, from float64), as with
onnxruntime's and OpenVINO's fused GELU, which multiply by 1/sqrt(2).

Only float32 constants all of whose values have a normal, finite reciprocal are rewritten (a
zero, infinite, NaN or subnormal divisor keeps its division's exact meaning). The constant is
a new one, so others reading the divisor are untouched.

Example:
    >>> import numpy as np
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType
    >>> f = DataType.f32
    >>> x, c = LogicalTensor(0, f, (2, 3)), LogicalTensor(1, f, (), property_type=PropertyType.constant)
    >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Divide, [x, c], [LogicalTensor(2, f, (2, 3))]))
    >>> g.bind_constant(1, np.float32(4.0)); g.finalize()
    >>> ir = multiply_by_reciprocals(g)
    >>> [op.kind.value for op in ir.ops], float(ir.constant_values[ir.ops[0].inputs[1].id])
    (['Multiply'], 0.25)
"""
from __future__ import annotations

import numpy as np

from ..ir import GraphIR
from ..logical_tensor import DataType
from ..op import OpKind
from ._util import FreshIds, as_ir, clone_op, frozen

_SMALLEST_NORMAL = np.finfo(np.float32).tiny


def multiply_by_reciprocals(graph) -> GraphIR:
    """A new IR in which each float32 Divide by a bound constant with normal, finite
    reciprocals is a Multiply by them (see the module docstring); the input graph is not
    modified.

    Example:
        >>> from tilefuse.graph_api import Graph
        >>> g = Graph(); g.finalize(); multiply_by_reciprocals(g).ops
        []
    """
    graph = as_ir(graph, "multiply_by_reciprocals")
    values = graph.constant_values
    fresh = FreshIds(graph)
    ops, new_values, reciprocals = [], {}, {}
    for op in graph.ops:
        divisor = op.inputs[1] if op.kind is OpKind.Divide and len(op.inputs) == 2 else None
        inverse = _reciprocal(values.get(divisor.id)) if divisor is not None and divisor.dtype is DataType.f32 \
            and op.inputs[0].dtype is DataType.f32 else None
        if inverse is None:
            ops.append(op)
            continue
        if divisor.id not in reciprocals:        # one constant per divisor, however many divide by it
            reciprocals[divisor.id] = fresh.constant(divisor, divisor.shape)
            new_values[reciprocals[divisor.id].id] = frozen(inverse)
        ops.append(clone_op(op, kind=OpKind.Multiply, inputs=[op.inputs[0], reciprocals[divisor.id]]))
    return graph.with_ops(ops, new_values) if reciprocals else graph


def _reciprocal(value) -> np.ndarray | None:
    """1 / ``value`` as float32 rounded once from float64, or None when some value has no
    normal finite reciprocal (or ``value`` is None)."""
    if value is None:
        return None
    value = np.asarray(value)
    if value.dtype != np.float32 or not np.isfinite(value).all():
        return None
    if not value.size or not (value != 0).all():
        return None
    with np.errstate(over="ignore"):        # a subnormal's reciprocal overflows to inf: refused below
        inverse = (1.0 / value.astype(np.float64)).astype(np.float32)
    return inverse if np.isfinite(inverse).all() and (np.abs(inverse) >= _SMALLEST_NORMAL).all() else None
