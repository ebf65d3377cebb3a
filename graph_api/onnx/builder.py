"""What the ONNX converters build with: the ``Builder`` that emits checked ops into a graph,
ONNX ``Node`` views, element types and the importer's errors.

Example:
    >>> data_type(1, "input 'x'")
    <DataType.f32: 'f32'>
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Graph
from ..logical_tensor import DataType, GraphError, LogicalTensor, PropertyType
from ..op import Op, OpKind
from ..ops.schema import validate_op
from ..shape_inference import infer_op_shapes

# ONNX TensorProto element types -> our data types
ONNX_DTYPES = {1: DataType.f32, 11: DataType.f64, 10: DataType.f16, 16: DataType.bf16, 6: DataType.s32, 7: DataType.s64,
               3: DataType.s8, 2: DataType.u8, 12: DataType.u32, 13: DataType.u64, 9: DataType.boolean}
_ONNX_TYPE_NAMES = {1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32", 7: "INT64", 8: "STRING",
                    9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64", 14: "COMPLEX64",
                    15: "COMPLEX128", 16: "BFLOAT16"}
class OnnxUnsupported(Exception):
    """A node the mapping does not cover (the reason is the message); it becomes a Wildcard."""


class OnnxRefused(GraphError):
    """A node the model cannot run with: it breaks the ONNX operator's own rules (an attribute
    out of range, operands that contradict each other), or neither tilefuse nor onnx's reference
    implementation computes it as the operator defines. The model is refused, not run by a
    fallback."""


class OnnxDynamicShape(GraphError):
    """An operand that fixes a shape (Reshape's shape, Pad's pads, ...) is computed at run time."""


class OnnxInputValueNeeded(OnnxDynamicShape):
    """An operand that fixes a shape comes from a graph input: a dynamic shape. ``input_name``
    names the input; ``import_onnx(..., constant_inputs={name: value})`` specializes the model
    for that value."""

    def __init__(self, message: str, input_name: str):
        super().__init__(message)
        self.input_name = input_name


def _type_name(elem_type: int) -> str:
    return _ONNX_TYPE_NAMES.get(elem_type, f"type {elem_type}")


def data_type(elem_type: int, what: str) -> DataType:
    """Our data type of an ONNX element type; GraphError naming ``what`` for one we lack.

    Example:
        >>> data_type(7, "input 'n'")
        <DataType.s64: 's64'>
    """
    try:
        return ONNX_DTYPES[elem_type]
    except KeyError:
        supported = ", ".join(_type_name(k) for k in ONNX_DTYPES)
        raise GraphError(f"{what} has data type {_type_name(elem_type)}, which tilefuse does not support "
                         f"(supported: {supported})") from None


@dataclass
class Node:
    """One ONNX node as the converters see it: inputs and outputs by name ('' for an absent
    optional one), attributes as Python values, and the opset of its domain.

    Example:
        >>> import pytest; onnx = pytest.importorskip("onnx")   # the example needs onnx
        >>> from onnx import helper
        >>> n = Node.of(helper.make_node("Flatten", ["x"], ["y"], axis=2), 13)
        >>> n.op_type, n.attrs, n.label
        ('Flatten', {'axis': 2}, "Flatten node 'y'")
    """
    op_type: str
    name: str
    inputs: list
    outputs: list
    attrs: dict
    opset: int
    proto: object = None

    @staticmethod
    def of(proto, opset: int) -> "Node":
        from onnx import helper
        attrs = {}
        for a in proto.attribute:
            value = helper.get_attribute_value(a)
            if isinstance(value, bytes):
                value = value.decode("utf-8")
            elif isinstance(value, list) and value and isinstance(value[0], bytes):
                value = [v.decode("utf-8") for v in value]
            attrs[a.name] = value
        return Node(proto.op_type, proto.name, list(proto.input), list(proto.output), attrs, opset, proto)

    @property
    def label(self) -> str:
        name = self.name or (self.outputs[0] if self.outputs else "")
        return f"{self.op_type} node {name!r}"

    def input(self, i: int) -> str:
        """The name of input ``i``, '' when absent."""
        return self.inputs[i] if i < len(self.inputs) else ""

    def attr(self, name: str, default=None):
        return self.attrs.get(name, default)

    def required(self, name: str):
        """Attribute ``name``; GraphError naming the node when it is missing."""
        if name not in self.attrs:
            raise GraphError(f"{self.label} has no attribute {name!r}, which it needs")
        return self.attrs[name]


class Unread:
    """A value of ``KnownValues`` not read yet: ``read()`` reads it."""

    __slots__ = ("read",)

    def __init__(self, read):
        self.read = read


class KnownValues(dict):
    """The values known at import by ONNX name (``Builder.values``). One entered as an
    ``Unread`` is read when it is first looked up: a model's large weights are read ahead
    while the graph is built (``weights.ModelWeights.reading_ahead``), each waited for only
    when a node needs its value.

    Example:
        >>> values = KnownValues(w=Unread(lambda: np.ones(2)))
        >>> "w" in values, values["w"].tolist()
        (True, [1.0, 1.0])
    """

    def __getitem__(self, name: str):
        value = super().__getitem__(name)
        if type(value) is Unread:
            value = value.read()
            self[name] = value
        return value

    def read(self, names) -> None:
        """Read those of ``names`` not read yet (a node's inputs before it is converted: a
        weight that cannot be read is the model's error, never taken for the node's).

        Example:
            >>> values = KnownValues(w=Unread(lambda: np.ones(2)))
            >>> values.read(["w", "x"]); type(dict.get(values, "w")).__name__
            'ndarray'
        """
        for name in names:
            if type(self.get(name)) is Unread:
                self[name] = dict.__getitem__(self, name).read()


class Builder:
    """The graph under construction: ONNX names bound to logical tensors (or to values known
    at import), fresh tensor and op ids, and the ops of the node being converted (committed to
    the graph only when the whole node converts).

    Example:
        >>> b = Builder(13, {})
        >>> b.values["w"] = np.zeros((2, 3), np.float32)             # an initializer
        >>> y = b.op(OpKind.ReLU, [b.tensor("w")])
        >>> y.shape, y.dtype.value, b.shape("w"), b.op(OpKind.Slice, [y], {"starts": [0], "ends": [0]}).shape
        ((2, 3), 'f32', (2, 3), (0, 3))
        >>> b.commit(); [op.kind.value for op in b.graph.ops]
        ['ReLU']
        >>> b.value("x", "the shape of a Reshape node")
        Traceback (most recent call last):
        ...
        tilefuse.graph_api.onnx.builder.OnnxDynamicShape: the shape of a Reshape node ('x') is computed at run time ...
    """

    def __init__(self, opset: int, onnx_types: dict):
        self.opset = opset
        self.onnx_types = onnx_types            # name -> (elem type, shape or None) from onnx's inference
        self.graph = Graph()
        self.tensors: dict[str, LogicalTensor] = {}
        self.values = KnownValues()
        self.graph_inputs: set[str] = set()
        self.bound: dict[int, np.ndarray] = {}
        self.folds: dict = {}                   # what a fold computed from -> its results (importer._fold)
        self._pending: list[Op] = []
        self._next_tensor = 0
        self._next_op = 0

    # ---- names -------------------------------------------------------------------------------

    def has_value(self, name: str) -> bool:
        return name in self.values

    def value(self, name: str, what: str) -> np.ndarray:
        """The value of ``name`` known at import (an initializer, a Constant, a folded node);
        OnnxInputValueNeeded / GraphError when it is computed at run time."""
        if name in self.values:
            return self.values[name]
        if name in self.graph_inputs:
            raise OnnxInputValueNeeded(f"{what} comes from graph input {name!r} (a dynamic shape); tilefuse needs "
                                       f"it when the model is imported: pass constant_inputs={{{name!r}: value}}",
                                       name)
        raise OnnxDynamicShape(f"{what} ({name!r}) is computed at run time (a dynamic shape); tilefuse needs it "
                               f"when the model is imported")

    def tensor(self, name: str) -> LogicalTensor:
        """The logical tensor of ``name`` (a value known at import becomes a bound constant)."""
        if name in self.tensors:
            return self.tensors[name]
        if name in self.values:
            t = self.constant(self.values[name], what=f"tensor {name!r}")
            self.tensors[name] = t
            return t
        raise GraphError(f"tensor {name!r} is used before any node produces it and is no graph input or "
                         f"initializer")

    def shape(self, name: str) -> tuple:
        """The static shape of ``name``; OnnxUnsupported when it is unknown."""
        if name in self.values:
            return tuple(self.values[name].shape)
        t = self.tensor(name)
        if not t.is_known():
            raise OnnxUnsupported(f"the shape of {name!r} is unknown")
        return t.shape

    def dtype(self, name: str) -> DataType:
        if name in self.values:
            return DataType.of_numpy(self.values[name].dtype)
        return self.tensor(name).dtype

    # ---- emission ----------------------------------------------------------------------------

    def _tensor_id(self) -> int:
        self._next_tensor += 1
        return self._next_tensor - 1

    def new_tensor(self, dtype: DataType, shape, constant: bool = False) -> LogicalTensor:
        prop = PropertyType.constant if constant else PropertyType.variable
        return LogicalTensor(self._tensor_id(), dtype, None if shape is None else tuple(shape), property_type=prop)

    def constant(self, array, dtype: DataType | None = None, what: str = "a constant") -> LogicalTensor:
        """A new constant logical tensor bound to ``array``."""
        array = np.asarray(array)
        if not array.flags.c_contiguous:                  # kernels read C-contiguous arrays
            array = np.ascontiguousarray(array)
        if dtype is not None:
            array = array.astype(dtype.numpy)
        try:
            dt = DataType.of_numpy(array.dtype)
        except GraphError:
            raise GraphError(f"{what} has numpy dtype {array.dtype}, which tilefuse does not support") from None
        t = self.new_tensor(dt, array.shape, constant=True)
        self.bound[t.id] = array
        return t

    def as_tensor(self, x) -> LogicalTensor:
        return x if isinstance(x, LogicalTensor) else self.constant(x)

    def op(self, kind: OpKind, inputs, attrs: dict | None = None, dtypes=None, n_out: int = 1):
        """Add an op of ``kind`` on ``inputs`` (logical tensors or arrays); its outputs (one
        tensor, or a list when ``n_out > 1``) have our inferred shapes and ``dtypes`` (default:
        input 0's). An output of zero elements is returned as its (empty) value instead."""
        inputs = [self.as_tensor(x) for x in inputs]
        if dtypes is None:
            dtypes = [inputs[0].dtype] * n_out
        elif isinstance(dtypes, DataType):
            dtypes = [dtypes] * n_out
        self._next_op += 1
        op = Op(self._next_op, kind, inputs, [self.new_tensor(d, None) for d in dtypes], attrs or {})
        validate_op(op)
        shapes = infer_op_shapes(op, [t.shape for t in inputs])
        outs = [self.new_tensor(d, s) for d, s in zip(dtypes, shapes)]
        op = Op(op.id, kind, inputs, outs, op.attrs)
        results = [np.empty(t.shape, t.dtype.numpy) if t.is_known() and 0 in t.shape else t for t in outs]
        if any(isinstance(r, LogicalTensor) for r in results):
            self._pending.append(op)
        return results if n_out > 1 else results[0]

    def wildcard(self, node: Node, attrs: dict, implicit=()) -> list:
        """A Wildcard op for ``node`` (reading also the ``implicit`` names its subgraphs use);
        output types and shapes from onnx's shape inference."""
        ins = [self.tensor(n) for n in node.inputs if n] + [self.tensor(n) for n in implicit]
        outs = []
        for name in node.outputs:
            if not name:
                continue
            elem, shape = self.onnx_types.get(name, (None, None))
            dt = DataType.undef if elem is None else data_type(elem, f"output {name!r} of {node.label}")
            outs.append(self.new_tensor(dt, shape))
        self._next_op += 1
        self._pending.append(Op(self._next_op, OpKind.Wildcard, ins, outs, attrs, name=node.name or None))
        it = iter(outs)
        return [next(it) if name else None for name in node.outputs]

    def discard(self) -> list[Op]:
        ops, self._pending = self._pending, []
        return ops

    def commit(self, node: Node | None = None) -> None:
        """Add the pending ops to the graph, each named after ``node`` (the ONNX node they
        convert: its name, else its type and first output), as profiles and pictures show them."""
        for op in self.discard():
            if node is not None:
                op.name = node.name or f"{node.op_type}({node.outputs[0] if node.outputs else ''})"
            self.graph.add_op(op)


