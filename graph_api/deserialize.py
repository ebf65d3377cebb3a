"""Read oneDNN's graph JSON dump format into a ``Graph`` (``graph_api.serialize`` writes it).

Example:
    >>> import io
    >>> text = ('{"graph": [{"id": 0, "kind": "ReLU", "attrs": {}, "inputs": [{"id": 0, "dtype": "f32", '
    ...         '"shape": [2], "stride": [1], "layout_type": "strided"}], "outputs": [{"id": 1, '
    ...         '"dtype": "f32", "shape": [2], "stride": [1], "layout_type": "strided"}]}]}')
    >>> [op.kind.value for op in load_json(io.StringIO(text)).ops]
    ['ReLU']
"""
from __future__ import annotations

import json
import os

from .graph import Graph
from .logical_tensor import GraphError, LogicalTensor
from .op import Op, OpKind
from .ops.schema import get_schema


def load_json(source) -> Graph:
    """A finalized Graph from a oneDNN graph JSON file (a path or an open text file). Bad JSON,
    missing fields, unknown op kinds and invalid ops raise GraphError naming the file and the op.

    Example:
        >>> import io
        >>> load_json(io.StringIO('{"graph": [{"id": 3, "kind": "Foo", "inputs": [], "outputs": []}]}'))
        Traceback (most recent call last):
        ...
        tilefuse.graph_api.logical_tensor.GraphError: <stream>: op 3: unknown op kind 'Foo'
    """
    if isinstance(source, (str, os.PathLike)):
        name = str(source)
        try:
            with open(source, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise GraphError(f"{name}: cannot read: {e}") from None
        except UnicodeDecodeError as e:
            raise GraphError(f"{name}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    else:
        name, text = getattr(source, "name", "<stream>"), source.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise GraphError(f"{name}: invalid JSON: {e}") from None
    except RecursionError:
        raise GraphError(f"{name}: invalid JSON: nested too deeply") from None
    try:
        return _graph_from_dict(data)
    except GraphError as e:
        raise GraphError(f"{name}: {e}") from None


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
