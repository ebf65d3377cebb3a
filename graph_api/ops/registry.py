"""The op registry: one ``OpDef`` record per op kind, declared by its family module
(``graph_api/ops/<family>.py``) and looked up by the drivers (``validate_op``, shape
inference, the reference interpreter, lowering).

Example:
    >>> import tilefuse.graph_api.ops
    >>> d = op_def("MaxPool")
    >>> d.kind.value, d.shape is not None, d.reference is not None, d.lower is not None
    ('MaxPool', True, True, True)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..logical_tensor import GraphError
from ..op import OpKind


class RuleError(Exception):
    """An op's attributes or input shapes break one of its rules (a shape rule or the
    attribute normalization); the drivers turn it into a GraphError naming the op."""


@dataclass(frozen=True)
class OpDef:
    """Everything one op kind means:

    * ``schema``: its inputs, outputs, attributes and data types (``schema.OpSchema``);
    * ``normalize(attrs, input_shapes) -> attrs``: kind-specific normalization after the
      schema defaults are filled in (e.g. ``auto_pad`` resolved to explicit pads), or None;
    * ``shape(op, input_shapes) -> [shape or None per output]``: the shape rule, or None;
    * ``reference(op, arrays) -> [array per output]``: the numpy meaning, or None;
    * ``lower(op, tensors) -> tensor or [tensors]``: the tensorir compute definition, or None
      (the op then runs in the reference interpreter).

    ``shape``, ``reference`` and ``lower`` receive ops already normalized (``normalize_op``).

    Example:
        >>> import tilefuse.graph_api.ops
        >>> op_def("Convolution").schema.attrs["groups"].default
        1
    """
    kind: OpKind
    schema: object
    normalize: Callable | None = None
    shape: Callable | None = None
    reference: Callable | None = None
    lower: Callable | None = None


REGISTRY: dict[OpKind, OpDef] = {}
"""Every defined op kind's record, filled in when ``graph_api.ops`` is imported."""


def define(schema, *, normalize=None, shape=None, reference=None, lower=None) -> OpDef:
    """Register the record of ``schema.kind``; defining a kind twice is an error.

    Example:
        >>> import tilefuse.graph_api.ops
        >>> define(op_def("ReLU").schema)
        Traceback (most recent call last):
        ...
        tilefuse.graph_api.logical_tensor.GraphError: op kind ReLU is defined twice
    """
    if schema.kind in REGISTRY:
        raise GraphError(f"op kind {schema.kind.value} is defined twice")
    record = OpDef(schema.kind, schema, normalize, shape, reference, lower)
    REGISTRY[schema.kind] = record
    return record


def op_def(kind) -> OpDef:
    """The record of an op kind (an OpKind or its spelling).

    Example:
        >>> import tilefuse.graph_api.ops
        >>> op_def(OpKind.Add).lower is not None
        True
    """
    kind = OpKind.parse(kind)
    try:
        return REGISTRY[kind]
    except KeyError:
        raise GraphError(f"op kind {kind.value} has no definition in graph_api.ops") from None
