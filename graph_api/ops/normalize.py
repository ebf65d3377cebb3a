"""Attribute normalization: an op with every attribute in one canonical form, so that shape
rules, the reference interpreter and lowerings read plain numbers and never defaults of their
own.

``normalize_op`` fills in the schema's defaults, spells case-free strings (``auto_pad``) as the
schema does, and runs the kind's own ``normalize`` (windows: per-spatial-dim lists trimmed to
the src's rank and ``auto_pad`` resolved to explicit pads, ``graph_api/ops/_window.py``).

Example:
    >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
    >>> x = LogicalTensor(0, DataType.f32, (1, 3, 7, 7)); w = LogicalTensor(1, DataType.f32, (8, 3, 3, 3))
    >>> y = LogicalTensor(2, DataType.f32, None)
    >>> op = Op(0, OpKind.Convolution, [x, w], [y], {"strides": [2, 2], "dilations": [1, 1], "pads_begin": [],
    ...     "pads_end": [], "auto_pad": "same_upper", "data_format": "NCX", "weights_format": "OIX"})
    >>> n = normalize_op(op, [x.shape, w.shape])
    >>> n.attrs["pads_begin"], n.attrs["pads_end"], n.attrs["auto_pad"], n.attrs["groups"]
    ([1, 1], [1, 1], 'None', 1)
"""
from __future__ import annotations

from ..logical_tensor import GraphError
from ..op import Op
from .registry import RuleError, op_def


def normalize_op(op: Op, input_shapes=None) -> Op:
    """``op`` with normalized attributes (``op`` itself when they already are); ``input_shapes``
    (a shape or None per input) lets shape-dependent attributes resolve. GraphError naming the
    op when an attribute cannot be normalized.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, None)
        >>> normalize_op(Op(0, OpKind.SoftMax, [x], [y])).attrs
        {'axis': 1, 'mode': 'none'}
    """
    record = op_def(op.kind)
    attrs = {}
    for name, spec in record.schema.attrs.items():
        if name in op.attrs:
            value = op.attrs[name]
            if spec.fold_case and isinstance(value, str):
                value = next((a for a in spec.allowed if a.upper() == value.upper()), value)
            attrs[name] = value
        elif spec.default is not None:
            attrs[name] = list(spec.default) if isinstance(spec.default, (list, tuple)) else spec.default
    attrs.update((k, v) for k, v in op.attrs.items() if k not in attrs)
    if record.normalize is not None:
        shapes = list(input_shapes) if input_shapes is not None else [t.shape for t in op.inputs]
        shapes = [tuple(s) if s is not None else None for s in shapes]
        try:
            attrs = record.normalize(attrs, shapes)
        except RuleError as e:
            raise GraphError(f"op {op.id} ({op.kind.value}): {e}") from None
    if attrs == op.attrs:
        return op
    return Op(op.id, op.kind, op.inputs, op.outputs, attrs, op.name, op.covers)
