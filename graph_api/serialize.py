"""Write oneDNN's graph JSON dump format (the inputs of benchdnn's graph driver);
``graph_api.deserialize`` reads it.

A file holds ``version``, ``engine_kind``, ``fpmath_mode``, optional ``input_ports`` and
``output_ports`` and ``graph``: a list of ops ``{id, name, kind, attrs, inputs, outputs}`` where
``attrs`` maps a name to ``{type, value}`` and each tensor is ``{id, dtype, shape, stride,
layout_type, property_type}``. Unknown dims are written as INT64_MIN (oneDNN's convention) and an
unknown rank as ``"shape": null`` (our extension: oneDNN has no spelling for it).

Example:
    >>> import io
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, load_json
    >>> g = Graph()
    >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
    >>> _ = g.add_op(Op(0, OpKind.Elu, [x], [y], {"alpha": 0.5})); g.finalize()
    >>> g2 = load_json(io.StringIO(graph_to_json(g)))
    >>> g2.ops[0].attrs, g2.tensor(1).shape
    ({'alpha': 0.5}, (2, 3))
"""
from __future__ import annotations

import json

import numpy as np

from .logical_tensor import INT64_MIN, LayoutType, LogicalTensor
from .op import Op
from .ops.schema import get_schema

FORMAT_VERSION = "3.0.0"


def graph_to_json(graph) -> str:
    """The graph in oneDNN's JSON dump format; ``load_json`` reads it back to an equal graph.

    Example:
        >>> import json
        >>> from tilefuse.graph_api import Graph
        >>> sorted(json.loads(graph_to_json(Graph("cpu", "bf16"))))
        ['engine_kind', 'fpmath_mode', 'fpmath_mode_apply_to_int', 'graph', 'input_ports', 'output_ports', 'version']
    """
    data = {
        "version": FORMAT_VERSION,
        "engine_kind": graph.engine_kind,
        "fpmath_mode": graph.fpmath_mode,
        "fpmath_mode_apply_to_int": "true" if graph.fpmath_mode_apply_to_int else "false",
        "input_ports": [t.id for t in graph.get_input_ports()],
        "output_ports": [t.id for t in graph.get_output_ports()],
        "graph": [_op_to_dict(op) for op in graph.ops],
    }
    return json.dumps(data, indent=2)


# ---- writing helpers ---------------------------------------------------------------------------------

def _op_to_dict(op: Op) -> dict:
    specs = get_schema(op.kind).attrs
    attrs = {}
    for name, value in op.attrs.items():
        type_ = specs[name].type if name in specs else _guess_type(value)
        attrs[name] = {"type": type_, "value": _json_value(type_, value)}
    return {"id": op.id, "name": op.name, "kind": op.kind.value, "attrs": attrs,
            "inputs": [_tensor_to_dict(t) for t in op.inputs], "outputs": [_tensor_to_dict(t) for t in op.outputs]}


def _tensor_to_dict(t: LogicalTensor) -> dict:
    shape = None if t.shape is None else [d if d >= 0 else INT64_MIN for d in t.shape]
    if t.layout_type is LayoutType.strided and t.strides is not None:
        stride = list(t.strides)
    else:
        stride = [] if shape is None else [INT64_MIN] * len(shape)
    return {"id": t.id, "dtype": t.dtype.value, "shape": shape, "stride": stride,
            "layout_type": t.layout_type.value, "property_type": t.property_type.value}


def _guess_type(value) -> str:
    if isinstance(value, (list, tuple)):
        return "f32[]" if any(isinstance(x, (float, np.floating)) for x in value) else "s64[]"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, str):
        return "string"
    return "f32" if isinstance(value, (float, np.floating)) else "s64"


def _json_value(type_: str, value):
    if type_.endswith("[]"):
        return [_json_value(type_[:-2], x) for x in value]
    return {"bool": lambda v: int(bool(v)), "s64": int, "f32": float, "string": str}[type_](value)
