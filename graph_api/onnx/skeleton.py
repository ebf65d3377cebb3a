"""A model's skeleton: what onnx's checker and shape inference need of it, without its weights.

Both take a whole ``ModelProto`` and start by serializing it for their C++ side, which parses
it again (shape inference also serializes its result, which Python parses back). A 440 MB
BERT-base paid about 6 s of session start for that, twice over. The skeleton keeps every
node, input, output, value_info, function and opset of the model, and every small
initializer (``SKELETON_ELEMENTS`` elements or fewer: the shape vectors, axes and scalars
that data propagation reads); each larger initializer becomes a graph input of its type and
shape, which is all either of them reads of it. Input dims may be bound at the same time
(a symbolic batch given for one compile), and graph outputs declared without a shape are left
out (the checker insists on one, which onnxruntime does not: they become intermediate values,
whose types shape inference still reports). Bound dims that contradict an input's declared
static ones leave out every declared output and value_info: they describe other inputs. The initializers' own data is read by the
importer, which refuses a damaged one itself.

Example:
    >>> import numpy as np
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 512])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    >>> w = numpy_helper.from_array(np.ones((512, 512), np.float32), "w")
    >>> model = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [w]))
    >>> small = skeleton(model, {"x": (2, 512)})
    >>> [i.name for i in small.graph.input], len(small.graph.initializer), len(small.graph.output)
    (['x', 'w'], 0, 0)
    >>> small.ByteSize() < 200 < model.ByteSize()
    True
"""
from __future__ import annotations

import math

SKELETON_ELEMENTS = 4096
"""Initializers of at most this many elements stay in the skeleton with their values."""


def skeleton(model, input_shapes: dict | None = None):
    """The skeleton of ``model`` (see the module docstring), with the graph inputs named in
    ``input_shapes`` given those shapes; ``model`` itself when there is nothing to leave out
    or change. ``model`` is never modified.

    Example:
        >>> from onnx import TensorProto, helper
        >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
        >>> model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x],
        ...                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]))
        >>> skeleton(model) is model
        True
    """
    from onnx import ModelProto, TensorProto, helper
    input_shapes = input_shapes or {}
    graph = model.graph
    large = [t for t in graph.initializer if _elements(t) > SKELETON_ELEMENTS]
    shapeless = {vi.name for vi in graph.output
                 if vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape")}
    if not large and not shapeless and not input_shapes:
        return model
    out = ModelProto()
    _copy_fields(model, out, skip={"graph"})
    resized = any(not _agrees(vi, input_shapes[vi.name]) for vi in graph.input if vi.name in input_shapes)
    _copy_fields(graph, out.graph, skip={"initializer", "input", "output"} | ({"value_info"} if resized else set()))
    out.graph.initializer.extend(t for t in graph.initializer if _elements(t) <= SKELETON_ELEMENTS)
    out.graph.input.extend(graph.input)
    out.graph.output.extend(vi for vi in graph.output if vi.name not in shapeless and not resized)
    listed = {vi.name for vi in graph.input}
    out.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type or TensorProto.UNDEFINED, list(t.dims))
                           for t in large if t.name not in listed)
    for vi in out.graph.input:
        if vi.name in input_shapes and vi.type.HasField("tensor_type"):
            vi.type.tensor_type.shape.Clear()
            for n in input_shapes[vi.name]:
                vi.type.tensor_type.shape.dim.add().dim_value = int(n)
    return out


def _agrees(vi, shape) -> bool:
    """Whether ``shape`` has every static dim graph input ``vi`` declares."""
    if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
        return True
    dims = vi.type.tensor_type.shape.dim
    return len(dims) == len(shape) and all(not d.HasField("dim_value") or d.dim_value == n for d, n in zip(dims, shape))


def _elements(tensor) -> int:
    return math.prod(int(d) for d in tensor.dims)


def _copy_fields(source, target, skip: set) -> None:
    """Every field ``source`` has set, except those named in ``skip``, copied into ``target``
    (a message of the same type)."""
    for field, value in source.ListFields():
        if field.name in skip:
            continue
        if field.is_repeated:
            getattr(target, field.name).extend(value)
        elif field.message_type is not None:
            getattr(target, field.name).CopyFrom(value)
        else:
            setattr(target, field.name, value)
