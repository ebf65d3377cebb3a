"""Graph ops -> tensorir compute definitions (the op library ``tensorir.ops``).

``lower_op(op, inputs)`` returns the op's output tensors built on the tensorir tensors of its
inputs: the op's attributes are normalized (``graph_api.ops.normalize_op``), then its kind's
``lower`` in the op registry builds them; ``LOWERED_KINDS`` lists the kinds that have one.
``op_class(op)`` derives the op's operator class from those compute bodies rather than from a
table: the highest class among the stages it builds (complex > reduction > injective); an op
whose lowering raises ``Unsupported`` (a kind, attribute value or data type without a compute
definition) is opaque and runs in the reference interpreter. Any other error propagates.

Example:
    >>> from tilefuse.graph_api import LogicalTensor, OpKind
    >>> x = LogicalTensor(0, DataType.f32, (7, 13)); y = LogicalTensor(1, DataType.f32, (7, 13))
    >>> OpKind.ConvTranspose in LOWERED_KINDS, op_class(Op(0, OpKind.SoftMax, [x], [y], {"axis": -1}))
    (True, 'reduction')
"""
from __future__ import annotations

from tilefuse.tensorir import placeholder
from tilefuse.tensorir.errors import Unsupported
from tilefuse.tensorir.runtime.lru import LRUCache
from tilefuse.tensorir.tensor import ComputeOp, post_order

from .fusion import dominant_class
from .logical_tensor import DataType, LogicalTensor, PropertyType
from .op import Op
from .ops import REGISTRY, normalize_op, op_def

COMPILED_DTYPES = {DataType.f32, DataType.f64, DataType.s32, DataType.s64, DataType.s8, DataType.u8, DataType.u32,
                   DataType.u64, DataType.boolean}

LOWERED_KINDS: frozenset = frozenset(k for k, d in REGISTRY.items() if d.lower is not None)
"""The op kinds ``lower_op`` builds compute definitions for."""


def lower_op(op: Op, inputs: list) -> list:
    """The op's outputs as tensorir tensors computed from ``inputs`` (tensorir tensors).

    Example:
        >>> from tilefuse.graph_api import LogicalTensor, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
        >>> [t.shape for t in lower_op(Op(0, OpKind.ReLU, [x], [y]), [placeholder_for(x)])]
        [(2, 3)]
    """
    lowering = op_def(op.kind).lower
    try:
        if lowering is None:
            raise Unsupported("no compute definition; it runs in the reference interpreter")
        out = lowering(normalize_op(op, [x.shape for x in inputs]), list(inputs))
    except Unsupported as err:
        raise Unsupported(f"op {op.id} ({op.kind.value}): {err}") from None
    except Exception as err:             # a bug or bad input: it propagates, naming the op
        err.add_note(f"while lowering op {op.id} ({op.kind.value})")
        raise
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return outs[:len(op.outputs)]


def placeholder_for(t: LogicalTensor):
    """A tensorir placeholder shaped and typed like logical tensor ``t`` (shape known, dtype
    compiled), named after its id.

    Example:
        >>> placeholder_for(LogicalTensor(3, DataType.f32, (2, 5))).name
        't3'
    """
    if not t.is_known():
        raise Unsupported(f"logical tensor {t.id} has unknown shape {t.shape}")
    if t.dtype not in COMPILED_DTYPES:
        raise Unsupported(f"logical tensor {t.id}: data type {t.dtype.value} is not compiled")
    return placeholder(t.shape, t.dtype.numpy.name, name=f"t{t.id}",
                       constant=t.property_type is PropertyType.constant)


def op_class(op: Op) -> str:
    """The operator class of a graph op, from the compute bodies it lowers to. Ops alike in
    kind, lowering, attributes and tensor shapes, types and properties lower alike, so each
    such signature is lowered once a process (a transformer's layers repeat theirs).

    Example:
        >>> from tilefuse.graph_api import LogicalTensor, OpKind
        >>> a = LogicalTensor(0, DataType.f32, (4, 8)); b = LogicalTensor(1, DataType.f32, (8, 3))
        >>> c = LogicalTensor(2, DataType.f32, (4, 3))
        >>> op_class(Op(0, OpKind.MatMul, [a, b], [c]))
        'complex'
    """
    try:
        signature = (op.kind, op_def(op.kind).lower, repr(sorted(op.attrs.items())),
                     tuple((t.shape, t.dtype, t.property_type) for t in op.inputs),
                     tuple((t.shape, t.dtype) for t in op.outputs))
        hash(signature)
    except TypeError:          # an unhashable shape: classify it alone
        return _lowered_class(op)
    found = _CLASSES.get(signature)
    if found is None:
        found = _lowered_class(op)
        _CLASSES.put(signature, found)
    return found


_CLASSES = LRUCache(4096)     # op signature -> class (sessions may compile in threads)


def _lowered_class(op: Op) -> str:
    """``op_class`` computed: the op lowered onto placeholders."""
    from tilefuse.schedule.templates import op_class as compute_class
    if any(t.dtype not in COMPILED_DTYPES for t in op.outputs):
        return "opaque"      # its lowering could not name the output's element type
    try:
        outs = lower_op(op, [placeholder_for(t) for t in op.inputs])
    except Unsupported:
        return "opaque"
    if len(outs) != len(op.outputs) or any(o.shape != t.shape for o, t in zip(outs, op.outputs) if t.is_known()):
        return "opaque"      # an output the lowering does not compute, or computes in another shape
    if any(t.dtype in COMPILED_DTYPES and o.dtype != t.dtype.numpy.name for o, t in zip(outs, op.outputs)):
        return "opaque"      # e.g. a dtype the op's lowering does not produce
    return dominant_class({compute_class(c) for c in post_order(outs) if isinstance(c, ComputeOp)})
