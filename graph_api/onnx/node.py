"""One ONNX node carried by a Wildcard op, and its evaluation by onnx's reference implementation.

The ONNX importer maps every ONNX op it knows onto our op kinds; an op it does not know becomes
a Wildcard whose attributes hold the node itself (``wildcard_attrs``). The reference interpreter
runs such a Wildcard with ``run_onnx_node``, through ``onnx.reference.ReferenceEvaluator`` (onnx
is imported only then).

Example:
    >>> import numpy as np
    >>> import pytest; onnx = pytest.importorskip("onnx")   # the example needs onnx
    >>> from onnx import helper
    >>> attrs = wildcard_attrs(helper.make_node("Softsign", ["x"], ["y"]), 13)
    >>> attrs["onnx_op_type"], run_onnx_node(attrs, [np.array([1.0, -3.0], np.float32)])[0].tolist()
    ('Softsign', [0.5, -0.75])
"""
from __future__ import annotations

import base64
import functools

import numpy as np

from ..logical_tensor import GraphError


def wildcard_attrs(node, opset: int, implicit=()) -> dict:
    """The attributes of a Wildcard standing for the ONNX NodeProto ``node`` of a model whose
    opset (for the node's domain) is ``opset``: the serialized node (base64 text, so graphs stay
    JSON-serializable), its domain, its op type and the opset. ``implicit`` lists (name, ONNX
    element type, shape) of the enclosing graph's tensors the node's subgraphs read (If, Loop,
    Scan): the Wildcard takes them after the node's own inputs, and the attributes then hold a
    one-node model that declares them as inputs.

    Example:
        >>> import pytest; onnx = pytest.importorskip("onnx")   # the example needs onnx
        >>> from onnx import helper
        >>> sorted(wildcard_attrs(helper.make_node("LRN", ["x"], ["y"], size=3), 9))
        ['onnx_domain', 'onnx_node', 'onnx_op_type', 'onnx_opset']
    """
    attrs = {"onnx_node": base64.b64encode(node.SerializeToString()).decode("ascii"),
             "onnx_domain": node.domain or "", "onnx_op_type": node.op_type, "onnx_opset": int(opset)}
    if implicit:
        from onnx import helper
        names = [n for n in node.input if n]
        inputs = [helper.make_empty_tensor_value_info(n) for n in dict.fromkeys(names)]
        inputs += [helper.make_tensor_value_info(n, elem, shape) for n, elem, shape in implicit if n not in names]
        graph = helper.make_graph([node], "wildcard", inputs,
                                  [helper.make_empty_tensor_value_info(n) for n in node.output if n])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid(node.domain or "", int(opset))])
        attrs["onnx_model"] = base64.b64encode(model.SerializeToString()).decode("ascii")
        attrs["onnx_implicit_inputs"] = [n for n, _, _ in implicit]
    return attrs


@functools.lru_cache(maxsize=256)
def _node(node_text: str):
    import onnx
    node = onnx.NodeProto()
    node.ParseFromString(base64.b64decode(node_text))
    return node


@functools.lru_cache(maxsize=256)
def _evaluator(node_text: str, domain: str, opset: int, model_text: str | None = None):
    import onnx
    from onnx.reference import ReferenceEvaluator
    node = onnx.NodeProto()
    node.ParseFromString(base64.b64decode(node_text))
    if model_text is None:
        return node, ReferenceEvaluator(node, opsets={domain: opset})
    model = onnx.ModelProto()
    model.ParseFromString(base64.b64decode(model_text))
    return node, ReferenceEvaluator(model)


TRIAL_ELEMENTS = 1 << 20
"""``check_onnx_node`` runs a node on sample inputs only when they hold at most this many
elements in all."""


def check_onnx_node(attrs: dict, inputs: list, label: str, output_shapes=None) -> None:
    """Refuse, with a GraphError naming ``label``, an ONNX node (a Wildcard's ``attrs``) that
    onnx's reference implementation cannot run: an op it does not know, or one that fails on
    sample inputs. ``inputs`` has per input (see ``run_onnx_node``) its value when it is known
    at import, else (numpy dtype, shape), shape None when unknown; ``output_shapes`` the shapes
    the outputs will have (an unknown one None). The node runs on sample values (zeros, then
    ones: an index or count may need either) when every input shape is known, inputs and
    outputs are small, and no output of unknown size comes from known integers (counts or
    shapes, which may make it huge); a node that fails on both is refused, so nothing is left
    for ``run`` to discover.

    Example:
        >>> import pytest; onnx = pytest.importorskip("onnx")   # the example needs onnx
        >>> from onnx import helper
        >>> check_onnx_node(wildcard_attrs(helper.make_node("Softsign", ["x"], ["y"]), 13),
        ...                 [(np.dtype("float32"), (2, 3))], "Softsign node 'y'")
        >>> check_onnx_node(wildcard_attrs(helper.make_node("Hardmax", ["x"], ["y"], axis=9), 13),
        ...                 [(np.dtype("float32"), (2, 3))], "Hardmax node 'y'")
        Traceback (most recent call last):
        tilefuse.graph_api.logical_tensor.GraphError: ONNX Hardmax node 'y' cannot run in onnx's reference implementation: ...
    """
    what = f"ONNX {label}"
    try:
        _evaluator(attrs["onnx_node"], attrs.get("onnx_domain", ""), int(attrs["onnx_opset"]), attrs.get("onnx_model"))
    except ImportError:
        raise GraphError(f"{what} needs the onnx package to run") from None
    except Exception as e:      # onnx raises anything for a node it cannot build
        raise GraphError(f"{what} has no implementation in onnx's reference evaluator: {_first_line(e)}") from None
    specs = [(v.dtype, v.shape) if isinstance(v, np.ndarray) else v for v in inputs]
    if any(shape is None or any(not isinstance(d, int) or d < 0 for d in shape) for _, shape in specs):
        return
    known = [shape for shape in output_shapes or () if shape is not None]
    if len(known) < len(output_shapes or ()) and \
            any(isinstance(v, np.ndarray) and v.dtype.kind in "iu" for v in inputs):
        return          # an output of unknown size from known counts or shapes: it may be huge
    if sum(int(np.prod(shape, dtype=object)) for _, shape in specs) + \
            sum(int(np.prod(shape, dtype=object)) for shape in known) > TRIAL_ELEMENTS:
        return
    failure = None
    for fill in (0, 1):
        sample = [v if isinstance(v, np.ndarray) else _filled(dtype, shape, fill) for v, (dtype, shape) in zip(inputs, specs)]
        try:
            run_onnx_node(attrs, sample)
            return
        except GraphError as e:
            failure = failure or e
    raise GraphError(f"{what} cannot run in onnx's reference implementation: {failure}") from None


_AXIS_INDEXED = frozenset({"GatherElements", "ScatterElements", "Scatter"})
_POINT_INDEXED = frozenset({"GatherND", "ScatterND"})


def _axis(node) -> int:
    """A NodeProto's ``axis`` attribute (0 when absent)."""
    return next((a.i for a in node.attribute if a.name == "axis"), 0)


def _check_indices(node, inputs: list) -> None:
    """GraphError for indices out of range in the ops that index their data input with their
    second one (onnx's reference implementation wraps them around, where the operators define
    them as an error)."""
    if node.op_type not in _AXIS_INDEXED | _POINT_INDEXED or len(inputs) < 2:
        return
    data, indices = np.asarray(inputs[0]), np.asarray(inputs[1])
    if indices.size == 0 or indices.dtype.kind not in "iu":
        return
    if node.op_type in _AXIS_INDEXED:
        axis = _axis(node)
        if not -data.ndim <= axis < data.ndim:
            return                      # onnx's own check says so
        bounds = data.shape[axis]
    else:
        if any(a.name == "batch_dims" and a.i for a in node.attribute) or indices.ndim == 0 or \
                indices.shape[-1] > data.ndim:
            return
        bounds = np.array(data.shape[:indices.shape[-1]])
    if np.any(indices < -bounds) or np.any(indices >= bounds):
        raise GraphError(f"ONNX {node.op_type} node {node.output[0]!r}: indices out of range for data of shape "
                         f"{list(data.shape)} (from {int(indices.min())} to {int(indices.max())})")


def _gather_elements(node, inputs: list) -> list:
    """ONNX GatherElements: ``numpy.take_along_axis`` with negative indices counted from the end.
    onnx's reference implementation fails on 2-D data with more than 32 rows along the axis
    ("cannot reshape array of size 1 into shape (1,128)": BERT's token-type-id buffer)."""
    data, indices = np.asarray(inputs[0]), np.asarray(inputs[1]).astype(np.int64)
    axis = _axis(node)
    if not -data.ndim <= axis < data.ndim or indices.ndim != data.ndim:
        raise GraphError(f"ONNX GatherElements node {node.output[0]!r}: axis {axis} or indices of rank "
                         f"{indices.ndim} do not fit data of shape {list(data.shape)}")
    axis %= data.ndim
    for k, (n, m) in enumerate(zip(indices.shape, data.shape)):
        if k != axis and n != m:
            raise GraphError(f"ONNX GatherElements node {node.output[0]!r}: indices of shape {list(indices.shape)} "
                             f"differ from data of shape {list(data.shape)} outside axis {axis}")
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    return [np.take_along_axis(data, indices, axis)]


def _integer_arithmetic(node, inputs: list):
    """ONNX Add, Sub, Mul, Div and Mod of two integer tensors, in numpy, as onnxruntime computes
    them: Div truncates toward zero, Mod takes the divisor's sign (the dividend's with fmod=1);
    a zero divisor is refused. None for other dtypes (onnx's reference implementation runs
    them). The shape arithmetic of exported models (ViT's patch grid: 64 folds) took a
    reference evaluator of its own each, about 1 ms apiece."""
    a, b = (np.asarray(v) for v in inputs[:2])
    if len(inputs) != 2 or a.dtype.kind not in "iu" or b.dtype != a.dtype:
        return None
    if node.op_type in ("Div", "Mod") and np.any(b == 0):
        raise GraphError(f"ONNX {node.op_type} node {node.output[0]!r}: integer division by zero")
    if node.op_type == "Div":
        quotient = np.floor_divide(a, b)
        return [np.where((np.mod(a, b) != 0) & ((a < 0) != (b < 0)), quotient + 1, quotient).astype(a.dtype)]
    if node.op_type == "Mod":
        fmod = any(attr.name == "fmod" and attr.i for attr in node.attribute)
        return [(np.fmod if fmod else np.mod)(a, b).astype(a.dtype)]
    op = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[node.op_type]
    return [op(a, b).astype(a.dtype)]


def _integer_range(node, inputs: list):
    """ONNX Range of integers: ``numpy.arange``, as onnx's reference implementation computes it;
    a zero delta is refused. None for other dtypes (onnx's reference implementation runs them).
    The position ids of BERT, GPT-2, T5 and MiniLM come from a Range folded at import, which
    took 40-120 ms of their warm start in importing onnx's reference implementation and building
    an evaluator."""
    values = [np.asarray(v) for v in inputs]
    if len(values) != 3 or any(v.size != 1 or v.dtype != values[0].dtype for v in values) or \
            values[0].dtype.kind not in "iu":
        return None
    start, limit, delta = (v.item() for v in values)
    if delta == 0:
        raise GraphError(f"ONNX Range node {node.output[0]!r}: delta is zero")
    return [np.arange(start, limit, delta).astype(values[0].dtype)]


# ops whose onnx reference implementation fails where the operator is defined, or costs a
# reference evaluator for what numpy does at once: ours instead (None: onnx's after all)
_OWN_IMPLEMENTATIONS = {"GatherElements": _gather_elements, "Range": _integer_range, **dict.fromkeys(
    ("Add", "Sub", "Mul", "Div", "Mod"), _integer_arithmetic)}


def _filled(dtype, shape, fill) -> np.ndarray:
    if dtype == object:
        return np.full(shape, str(fill), dtype=object)
    return np.full(shape, fill, dtype=dtype)


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def run_onnx_node(attrs: dict, inputs: list) -> list:
    """Run the ONNX node of a Wildcard's ``attrs`` (see ``wildcard_attrs``) on ``inputs`` (the
    arrays of the node's present inputs, in order, then of its implicit inputs); returns its
    present outputs. GraphError when onnx is missing or its reference implementation fails.

    Example:
        >>> import numpy as np
        >>> from onnx import helper
        >>> attrs = wildcard_attrs(helper.make_node("TopK", ["x", "k"], ["values", ""]), 13)   # no indices asked for
        >>> run_onnx_node(attrs, [np.array([3.0, 1.0, 2.0], np.float32), np.array([2])])
        [array([3., 2.], dtype=float32)]
    """
    try:
        node = _node(attrs["onnx_node"])
    except ImportError:
        raise GraphError(f"ONNX op {attrs.get('onnx_op_type')} needs the onnx package to run") from None
    names = [n for n in node.input if n] + list(attrs.get("onnx_implicit_inputs", ()))
    if len(names) != len(inputs):
        raise GraphError(f"ONNX node {node.op_type} takes {len(names)} inputs, got {len(inputs)}")
    _check_indices(node, inputs)
    own = _OWN_IMPLEMENTATIONS.get(node.op_type) if not node.domain else None
    outs = own(node, inputs) if own is not None else None
    if outs is not None:
        return outs
    try:
        _, evaluator = _evaluator(attrs["onnx_node"], attrs.get("onnx_domain", ""), int(attrs["onnx_opset"]),
                                  attrs.get("onnx_model"))
    except ImportError:
        raise GraphError(f"ONNX op {attrs.get('onnx_op_type')} needs the onnx package to run") from None
    try:
        outs = evaluator.run(None, dict(zip(names, inputs)))
    except Exception as e:      # onnx's implementations raise anything
        raise GraphError(f"onnx's reference implementation of {node.op_type} failed: {_first_line(e)}") from None
    present = [k for k, n in enumerate(node.output) if n]
    return [np.asarray(outs[k]) for k in present]
