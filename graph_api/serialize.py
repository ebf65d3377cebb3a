"""Read and write oneDNN's graph JSON dump format (the inputs of benchdnn's graph driver).

A file holds ``version``, ``engine_kind``, ``fpmath_mode``, optional ``input_ports`` and
``output_ports`` and ``graph``: a list of ops ``{id, name, kind, attrs, inputs, outputs}`` where
``attrs`` maps a name to ``{type, value}`` and each tensor is ``{id, dtype, shape, stride,
layout_type, property_type}``. Unknown dims are written as INT64_MIN (oneDNN's convention) and an
unknown rank as ``"shape": null`` (our extension: oneDNN has no spelling for it).

Example:
    >>> import io
    >>> from graph_api import DataType, LogicalTensor, Op, OpKind
    >>> g = Graph()
    >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
    >>> _ = g.add_op(Op(0, OpKind.Elu, [x], [y], {"alpha": 0.5})); g.finalize()
    >>> g2 = load_json(io.StringIO(graph_to_json(g)))
    >>> g2.ops[0].attrs, g2.tensor(1).shape
    ({'alpha': 0.5}, (2, 3))
"""
from __future__ import annotations

import json
import os

import numpy as np

from .graph import Graph
from .logical_tensor import INT64_MIN, GraphError, LayoutType, LogicalTensor
from .op import Op, OpKind
from .schema import get_schema

FORMAT_VERSION = "3.0.0"


def load_json(source) -> Graph:
    """A finalized Graph from a oneDNN graph JSON file (a path or an open text file). Bad JSON,
    missing fields, unknown op kinds and invalid ops raise GraphError naming the file and the op.

    Example:
        >>> import io
        >>> load_json(io.StringIO('{"graph": [{"id": 3, "kind": "Foo", "inputs": [], "outputs": []}]}'))
        Traceback (most recent call last):
        ...
        graph_api.logical_tensor.GraphError: <stream>: op 3: unknown op kind 'Foo'
    """
    if isinstance(source, (str, os.PathLike)):
        name = str(source)
        try:
            with open(source, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise GraphError(f"{name}: cannot read: {e}") from None
    else:
        name, text = getattr(source, "name", "<stream>"), source.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise GraphError(f"{name}: invalid JSON: {e}") from None
    try:
        return _graph_from_dict(data)
    except GraphError as e:
        raise GraphError(f"{name}: {e}") from None


def graph_to_json(graph: Graph) -> str:
    """The graph in oneDNN's JSON dump format; ``load_json`` reads it back to an equal graph.

    Example:
        >>> import json
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


# ---- reading -----------------------------------------------------------------------------------------

def _graph_from_dict(data) -> Graph:
    if not isinstance(data, dict):
        raise GraphError(f"top level must be a JSON object, got {type(data).__name__}")
    if not isinstance(data.get("graph"), list):
        raise GraphError("missing field 'graph' (a list of ops)")
    apply_to_int = str(data.get("fpmath_mode_apply_to_int", "false")).lower() == "true"
    g = Graph(data.get("engine_kind", "cpu"), data.get("fpmath_mode", "strict"), apply_to_int)
    for position, d in enumerate(data["graph"]):
        g.add_op(_op_from_dict(d, position))
    g.finalize()
    for key in ("input_ports", "output_ports"):
        ports = data.get(key, [])
        if not isinstance(ports, list):
            raise GraphError(f"{key} must be a list of logical tensor ids, got {ports!r}")
        missing = [p for p in ports if not isinstance(p, int) or p not in g.tensors]
        if missing:
            raise GraphError(f"{key} names logical tensors that no op uses: {missing}")
    return g


def _op_from_dict(d, position: int) -> Op:
    if not isinstance(d, dict):
        raise GraphError(f"op #{position} must be a JSON object")
    where = f"op {d.get('id', '#' + str(position))}"
    for key in ("id", "kind", "inputs", "outputs"):
        if key not in d:
            raise GraphError(f"{where}: missing field {key!r}")
    try:
        kind = OpKind.parse(d["kind"])
    except GraphError as e:
        raise GraphError(f"{where}: {e}") from None
    where = f"{where} ({kind.value})"
    try:
        attrs = _attrs_from_dict(d.get("attrs", {}), kind)
        inputs = [_tensor_from_dict(t) for t in d["inputs"]]
        outputs = [_tensor_from_dict(t) for t in d["outputs"]]
        return Op(d["id"], kind, inputs, outputs, attrs, d.get("name"))
    except (GraphError, TypeError, ValueError) as e:
        raise GraphError(f"{where}: {e}") from None


def _tensor_from_dict(t) -> LogicalTensor:
    if not isinstance(t, dict):
        raise GraphError(f"a logical tensor must be a JSON object, got {t!r}")
    for key in ("id", "dtype", "shape"):
        if key not in t:
            raise GraphError(f"logical tensor {t.get('id', '?')}: missing field {key!r}")
    layout = t.get("layout_type", "strided")
    strides = t.get("stride")
    if strides is not None and not isinstance(strides, list):
        raise GraphError(f"logical tensor {t['id']}: stride must be a list, got {strides!r}")
    if layout != "strided" or not isinstance(t["shape"], list) or len(strides or ()) != len(t["shape"]):
        strides = None
    return LogicalTensor(t["id"], t["dtype"], t["shape"], layout, t.get("property_type", "undef"), strides)


def _attrs_from_dict(attrs, kind: OpKind) -> dict:
    if not isinstance(attrs, dict):
        raise GraphError(f"attrs must be a JSON object, got {attrs!r}")
    schema, out = get_schema(kind), {}
    for name, entry in attrs.items():
        if not isinstance(entry, dict) or "type" not in entry or "value" not in entry:
            raise GraphError(f"attribute {name!r} must be {{\"type\": ..., \"value\": ...}}, got {entry!r}")
        declared = entry["type"]
        spec = schema.attrs.get(name)
        if spec is not None and spec.type != declared:
            raise GraphError(f"attribute {name!r} is declared {declared} but oneDNN defines it as {spec.type}")
        out[name] = _attr_value(name, declared, entry["value"])
    return out


def _attr_value(name: str, type_: str, v):
    if type_.endswith("[]"):
        if not isinstance(v, list):
            raise GraphError(f"attribute {name!r} of type {type_} needs a list, got {v!r}")
        return [_attr_value(name, type_[:-2], x) for x in v]
    if type_ == "bool" and (v in (0, 1) or str(v).lower() in ("true", "false")):
        return v if isinstance(v, bool) else (str(v).lower() == "true" if isinstance(v, str) else bool(v))
    if type_ == "s64" and isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer():
        return int(v)
    if type_ == "f32" and isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if type_ == "string" and isinstance(v, str):
        return v
    if type_ not in ("bool", "s64", "f32", "string"):
        raise GraphError(f"attribute {name!r} has unknown type {type_!r}")
    raise GraphError(f"attribute {name!r} of type {type_} has a bad value {v!r}")


# ---- writing -----------------------------------------------------------------------------------------

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
