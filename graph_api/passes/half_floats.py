"""Half-precision floats (f16, bf16) computed in f32.

The kernels have no 16-bit float arithmetic (most CPUs have none either: x86 converts with F16C
and computes in f32), so a graph of f16 or bf16 tensors is rewritten to compute in f32 and
convert only at its edges: each half-float graph input is cast to f32 where it enters, each
half-float output is cast back from the f32 value that computes it, and each half-float
constant's value is converted to f32 here, once. Every tensor in between is f32 (a Cast or
TypeCast to a half float inside the graph becomes a Cast to f32: its rounding is not kept).
The ports keep their ids and types. The edge casts (``converts_at_edge``) are numpy
conversions the compiled graph runs as it reads its feeds and returns its outputs.

Example:
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
    >>> x = LogicalTensor(0, DataType.f16, (2, 3)); y = LogicalTensor(1, DataType.f16, (2, 3))
    >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
    >>> [(op.kind.value, op.inputs[0].dtype.value, op.outputs[0].dtype.value)
    ...  for op in compute_half_floats_in_f32(g).topological_ops()]
    [('Cast', 'f16', 'f32'), ('ReLU', 'f32', 'f32'), ('Cast', 'f32', 'f16')]
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import GraphIR
from ..logical_tensor import DataType, LogicalTensor
from ..op import Op, OpKind
from ._util import FreshIds, as_ir, clone_op, frozen, output_ids

HALF_FLOATS = frozenset({DataType.f16, DataType.bf16})
_CASTS = (OpKind.Cast, OpKind.TypeCast)


def compute_half_floats_in_f32(graph) -> GraphIR:
    """``graph`` computing its f16 and bf16 tensors in f32, converting at its inputs and
    outputs (the module's docstring has an example); the graph itself when it has none."""
    graph = as_ir(graph, "compute_half_floats_in_f32")
    tensors = graph.tensors
    if not any(t.dtype in HALF_FLOATS for t in tensors.values()):
        return graph
    fresh, values, outputs = FreshIds(graph), graph.constant_values, set(output_ids(graph))
    wide: dict[int, LogicalTensor] = {}          # tensor id -> the f32 tensor ops use in its place
    new_values, entry, exit_ = {}, [], []
    for tid, t in tensors.items():
        if t.dtype not in HALF_FLOATS:
            continue
        if tid in values:
            wide[tid] = _f32(t)
            new_values[tid] = frozen(np.asarray(values[tid]).astype(np.float32))
        elif graph.producer(tid) is None:
            wide[tid] = _f32(fresh.variable(t))
            entry.append(Op(fresh.op_id(), OpKind.Cast, [t], [wide[tid]], {"to": DataType.f32.value}))
        elif tid in outputs:
            wide[tid] = _f32(fresh.variable(t))
            exit_.append(Op(fresh.op_id(), OpKind.Cast, [wide[tid]], [t], {"to": t.dtype.value}))
        else:
            wide[tid] = _f32(t)
    ops = [_widened(op, wide) for op in graph.ops]
    return graph.with_ops(entry + ops + exit_, new_values)


def converts_at_edge(op: Op) -> bool:
    """True for a Cast between a half float and f32: what ``compute_half_floats_in_f32`` adds
    at a graph's edges, run as a numpy conversion.

    Example:
        >>> from tilefuse.graph_api import LogicalTensor
        >>> x, y = LogicalTensor(0, DataType.f16, (2,)), LogicalTensor(1, DataType.f32, (2,))
        >>> converts_at_edge(Op(0, OpKind.Cast, [x], [y], {"to": "f32"}))
        True
    """
    if op.kind is not OpKind.Cast or len(op.inputs) != 1 or len(op.outputs) != 1:
        return False
    types = {op.inputs[0].dtype, op.outputs[0].dtype}
    return len(types) == 2 and types <= HALF_FLOATS | {DataType.f32}


def _f32(t: LogicalTensor) -> LogicalTensor:
    return dataclasses.replace(t, dtype=DataType.f32)


def _widened(op: Op, wide: dict) -> Op:
    """``op`` reading and writing the f32 tensors of ``wide`` (an End keeps reading the ports)."""
    ins = op.inputs if op.kind is OpKind.End else [wide.get(t.id, t) for t in op.inputs]
    outs = [wide.get(t.id, t) for t in op.outputs]
    if op.kind in _CASTS and op.outputs[0].id in wide:
        return clone_op(op, kind=OpKind.Cast, inputs=ins, outputs=outs, attrs={"to": DataType.f32.value})
    return clone_op(op, inputs=ins, outputs=outs)
