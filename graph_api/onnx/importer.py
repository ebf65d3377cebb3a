"""ONNX models as graphs: ``from_onnx(path_or_model) -> Graph``.

How a model becomes a graph:

* graph inputs become variable logical tensors; their shapes must be static (a symbolic dim is
  a GraphError unless ``input_shapes`` gives it);
* initializers become constant logical tensors whose values are bound (``Graph.bind_constant``);
* ``Constant`` nodes, and every node whose inputs are all known when the model is imported
  (``Shape`` of a static shape, ``ConstantOfShape``, the Gather/Concat/Unsqueeze chains that
  exporters use to compute shapes, ...), are evaluated at import and disappear;
* every other node is mapped onto our op kinds by ``graph_api.onnx.ops`` (its table
  ``ONNX_OPS`` lists the ONNX ops, opsets 13 and later, older ones where their semantics are
  the same or the difference is handled); output shapes come from our shape rules, which
  follow onnxruntime where onnx's shape inference differs (MaxPool's ceil_mode); a graph
  output's shape must have the dims the model declares for it, else a GraphError (not checked
  when ``input_shapes`` changes a declared input dim);
* a node the mapping does not cover (an unknown op, or attributes it does not handle) becomes a
  Wildcard carrying the ONNX node, with a warning naming it; the reference interpreter runs it
  through onnx's reference implementation (``graph_api.onnx.node``), so the model still runs.

Operands that fix a shape (Reshape's shape, Slice's starts, Pad's pads, a reduction's axes, ...)
must be known at import; one computed from a graph input is a dynamic shape, a GraphError
(``OnnxInputValueNeeded`` names the input: pass its value with ``constant_inputs``).

Example:
    >>> import numpy as np
    >>> import pytest; onnx = pytest.importorskip("onnx")   # the example needs onnx
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    >>> w = numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
    >>> nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    >>> model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w]))
    >>> g = from_onnx(model)
    >>> [op.kind.value for op in g.ops], g.get_output_ports()[0].shape
    (['MatMul', 'ReLU'], (2, 4))
"""
from __future__ import annotations

import contextlib
import functools
import mmap
import operator
import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from .. import reference
from ..caller_warnings import warned_at_caller
from ..graph import Graph
from ..limits import check_tensor_bytes
from ..logical_tensor import DataType, GraphError, LogicalTensor
from ..op import OpKind
from .builder import (ONNX_DTYPES, Builder, Node, OnnxDynamicShape, OnnxRefused, OnnxUnsupported, Unread,
                      _type_name, data_type)
from .node import check_onnx_node, run_onnx_node, wildcard_attrs
from .ops import ONNX_OPS
from .skeleton import skeleton
from .weights import ModelWeights, split_weights

# nodes never evaluated at import, even with constant inputs: their values differ from run to run
_RANDOM_OPS = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                         "Bernoulli"})


@dataclass(frozen=True)
class LoadedModel:
    """A model read for import: its ModelProto (when read from a file or bytes, without the
    data of its large initializers), those initializers' data (``weights.ModelWeights``; None:
    all in the proto) and how errors name it."""
    proto: object
    where: str
    weights: ModelWeights | None = None
    checked: set = field(default_factory=set, compare=False, repr=False)    # see check_model


def load_model(model) -> LoadedModel:
    """A path, serialized bytes or a ModelProto read for import (a ``LoadedModel`` is itself).
    A file's and bytes' large initializers are left where they lie (``weights.split_weights``)
    and read once each as the import needs them; only the rest goes through protobuf.

    Example:
        >>> import numpy as np
        >>> from onnx import helper, numpy_helper
        >>> w = numpy_helper.from_array(np.ones((64, 128), np.float32), "w")
        >>> loaded = load_model(helper.make_model(helper.make_graph([], "g", [], [], [w])).SerializeToString())
        >>> loaded.where, loaded.proto.graph.initializer[0].raw_data, loaded.weights.array("w").shape
        ('ONNX model bytes (32799 bytes)', b'', (64, 128))
        >>> load_model("examples/resnet_block.onnx").weights is None      # every weight small: all in the proto
        True
    """
    import onnx
    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise GraphError(f"no ONNX model file {path!r}")
        where = f"ONNX model file {path!r}"
        return _read(lambda: _load_file(path, where), f"{where} is not a readable ONNX model",
                     keep=(OSError, MemoryError))   # a file that cannot be read says so itself
    if isinstance(model, (bytes, bytearray)):
        where = f"ONNX model bytes ({len(model)} bytes)"
        data = bytes(model)
        return _read(lambda: split_model(data, where, data), f"{where} is not a readable ONNX model",
                     keep=(OSError, MemoryError))
    if isinstance(model, onnx.ModelProto):
        if _negative_dims(model):        # the caller's proto is left as it is
            model = onnx.ModelProto.FromString(model.SerializeToString())
            _unknown_negative_dims(model)
        return LoadedModel(model, f"ONNX model {model.graph.name or '(unnamed graph)'!r}")
    raise TypeError(f"from_onnx takes a path, bytes or an onnx.ModelProto, got {type(model).__name__}")


def split_model(data, where: str, source, path: str | None = None) -> LoadedModel:
    """Serialized model ``data`` (bytes or a buffer) parsed without the data of its large
    initializers (``weights.split_weights``), which ``source`` keeps (``weights.ModelWeights``:
    the bytes, or the model file open, named ``path``); ``where`` names it in errors.

    Example:
        >>> import numpy as np
        >>> from onnx import helper, numpy_helper
        >>> w = numpy_helper.from_array(np.ones((64, 128), np.float32), "w")
        >>> data = helper.make_model(helper.make_graph([], "g", [], [], [w])).SerializeToString()
        >>> sorted(split_model(data, "m", data).weights.stored)
        ['w']
    """
    import onnx
    small, stored = split_weights(data)
    proto = onnx.load_from_string(small)
    _unknown_negative_dims(proto)
    return LoadedModel(proto, where, ModelWeights(source, stored, path) if stored else None)


def _declared_dims(proto):
    """Every dim the graph's inputs, outputs and value infos declare."""
    for vi in (*proto.graph.input, *proto.graph.output, *proto.graph.value_info):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            yield from vi.type.tensor_type.shape.dim


def _negative_dims(proto) -> bool:
    return any(d.HasField("dim_value") and d.dim_value < 0 for d in _declared_dims(proto))


def _unknown_negative_dims(proto) -> None:
    """A declared dim of -1 (paddle2onnx's spelling of a dynamic dim: PaddleOCR's models) made
    an unknown dim, as onnxruntime reads it, in ``proto`` itself."""
    for d in _declared_dims(proto):
        if d.HasField("dim_value") and d.dim_value < 0:
            d.Clear()


def _load_file(path: str, where: str) -> LoadedModel:
    """The model file at ``path``, scanned through a read-only map (only the pages around the
    fields decoded are read), its large weights left in the file, kept open to read them."""
    from onnx import external_data_helper
    f = open(path, "rb")
    try:
        if os.fstat(f.fileno()).st_size == 0:
            loaded = split_model(b"", where, f, path)
        else:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                loaded = split_model(mapped, where, f, path)
        external_data_helper.load_external_data_for_model(loaded.proto, os.path.dirname(os.path.abspath(path)))
    except BaseException:
        f.close()
        raise
    if loaded.weights is None:
        f.close()
    return loaded


def _check(model, where: str, path=None, input_shapes=None) -> None:
    """onnx's full checker (the model's structure, then strict shape inference) on the
    skeleton of ``model`` (``skeleton``: its weights left out, ``input_shapes`` bound, graph
    outputs without a declared shape left out, as onnxruntime does not insist on one); what it
    finds is a GraphError naming ``where``. A skeleton over protobuf's 2 GB limit is checked
    from the model's file when it is the model itself."""
    import onnx
    checked = skeleton(model, input_shapes)
    too_big = checked.ByteSize() > onnx.checker.MAXIMUM_PROTOBUF
    if too_big and (path is None or checked is not model):
        return              # only its file could be checked, and there is none (or it is not the skeleton)
    _read(lambda: onnx.checker.check_model(path if too_big else checked, full_check=True),
          f"{where} fails onnx's checker")


def check_model(loaded: LoadedModel, path=None, input_shapes=None) -> None:
    """onnx's checker on ``loaded``'s model with ``input_shapes`` bound (``_check``), once per
    set of shapes: a session checks the model it opens, and its import for the same shapes
    does not check it again (20 ms of BERT's warm start).

    Example:
        >>> loaded = load_model("examples/resnet_block.onnx")
        >>> check_model(loaded); loaded.checked
        {()}
    """
    shapes = tuple(sorted((input_shapes or {}).items()))
    if shapes not in loaded.checked:
        _check(loaded.proto, loaded.where, path, input_shapes)
        loaded.checked.add(shapes)


def _read(read, problem: str, keep=(MemoryError,)):
    """``read()``, with whatever protobuf, onnx or numpy raise on damaged input (DecodeError, a
    truncated file, data of the wrong size, indices out of range, ...) as a GraphError that
    starts with ``problem``; the exceptions in ``keep`` stay what they are."""
    try:
        return read()
    except keep:
        raise
    except Exception as e:          # the libraries raise several unrelated kinds
        raise GraphError(f"{problem}: {type(e).__name__}: {e}") from e


def _default_opset(model) -> int:
    """The version of the default opset the model imports; a GraphError when it imports none, or
    one newer than this onnx defines (its operators' meaning is unknown here)."""
    from onnx.defs import onnx_opset_version
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            if int(imp.version) > onnx_opset_version():
                raise GraphError(f"the model imports opset {imp.version} of the default ONNX domain; the newest this "
                                 f"onnx defines is {onnx_opset_version()}")
            return int(imp.version)
    raise GraphError("the model imports no version of the default ONNX opset (domain '')")


def _onnx_types(model, input_shapes=None) -> dict:
    """name -> (elem type, static shape or None) from onnx's shape inference (with data
    propagation) on the skeleton of ``model`` with ``input_shapes`` bound; what it cannot infer
    is missing."""
    import onnx
    model = skeleton(model, input_shapes)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as e:      # onnx raises several kinds; the import goes on without its shapes
        warnings.warn(f"onnx shape inference failed ({e}); using tilefuse's shape rules only", stacklevel=3)
        inferred = model
    types = {}
    g = inferred.graph
    for vi in list(g.value_info) + list(g.output) + list(g.input):
        if not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        shape = None
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shape = tuple(int(d.dim_value) for d in tt.shape.dim)
        types[vi.name] = (tt.elem_type or None, shape)
    return types


def _given_shape(name: str, dims) -> tuple:
    """A shape given in ``input_shapes``: a sequence of non-negative whole numbers."""
    try:
        shape = tuple(operator.index(d) for d in dims)
    except TypeError:
        raise GraphError(f"input_shapes[{name!r}] must be a sequence of whole numbers, got {dims!r}") from None
    if any(d < 0 for d in shape):
        raise GraphError(f"input_shapes[{name!r}] has a negative dim: {shape}")
    return shape


def _input_shape(vi, input_shapes: dict) -> tuple:
    if vi.name in input_shapes:
        return input_shapes[vi.name]
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        raise GraphError(f"graph input {vi.name!r} has no shape (unknown rank); give it with "
                         f"input_shapes={{{vi.name!r}: (...)}}")
    dims = []
    for k, d in enumerate(tt.shape.dim):
        if not d.HasField("dim_value"):
            what = repr(d.dim_param) if d.dim_param else "unknown"
            raise GraphError(f"graph input {vi.name!r} has a dynamic dim {k} ({what}); tilefuse compiles static "
                             f"shapes: give it with input_shapes={{{vi.name!r}: (...)}}")
        dims.append(int(d.dim_value))
    return tuple(dims)


@dataclass(frozen=True)
class OnnxImport:
    """An imported model: the graph and how the model's named inputs and outputs map to it.

    ``inputs``: (name, tensor id) of the graph inputs fed at run time, in the model's order
    (initializers and ``constant_inputs`` excluded; an input no node reads has id None).
    ``outputs``: (name, tensor id) in the model's order; the id is None for an output known at
    import with no element (its value is in ``constant_outputs``). ``wildcards``: the ONNX
    nodes that became Wildcards.

    Example:
        >>> imp = import_onnx("examples/resnet_block.onnx")
        >>> imp.inputs, imp.outputs, imp.wildcards        # names -> tensor ids of imp.graph
        ([('input', 0)], [('logits', 32)], [])
    """
    graph: Graph
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    constant_outputs: dict = field(default_factory=dict)
    wildcards: list = field(default_factory=list)


def import_onnx(model, constant_inputs: dict | None = None, input_shapes: dict | None = None) -> OnnxImport:
    """Import an ONNX model (a path, serialized bytes, an ``onnx.ModelProto`` or a
    ``LoadedModel``, which may be imported again: for other input shapes) as a finalized
    graph with its input and output names (see the module docstring and ``OnnxImport``).
    ``constant_inputs`` maps graph input names to values the model is specialized for (they
    become bound constants); ``input_shapes`` gives the shapes of graph inputs whose dims are
    symbolic. Raises GraphError for a model tilefuse cannot take (a data type it lacks, a
    dynamic shape, a tensor used before it is produced); an op it does not map is a Wildcard.

    Example:
        >>> from onnx import TensorProto, helper
        >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
        >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        >>> model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
        >>> imp = import_onnx(model, input_shapes={"x": (2, 3)})
        >>> y_port, = imp.graph.get_output_ports()
        >>> imp.outputs == [("y", y_port.id)], y_port.shape
        (True, (2, 3))
        >>> import_onnx(model)
        Traceback (most recent call last):
        ...
        tilefuse.graph_api.logical_tensor.GraphError: ...graph input 'x' has a dynamic dim 0 ...
    """
    path = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
    loaded = load_model(model)
    where = loaded.where
    try:
        with loaded.weights.reading_ahead() if loaded.weights is not None else contextlib.nullcontext():
            return _import(loaded, path, constant_inputs, input_shapes)
    except GraphError as e:             # every refusal names the model
        if e.args and isinstance(e.args[0], str) and where not in e.args[0]:
            e.args = (f"{where}: {e.args[0]}", *e.args[1:])
        raise
    finally:
        if loaded is not model and loaded.weights is not None:     # read here: the file goes
            loaded.weights.close()


def _import(loaded: LoadedModel, path, constant_inputs, input_shapes) -> OnnxImport:
    import onnx
    model, where, weights = loaded.proto, loaded.where, loaded.weights
    constant_inputs = dict(constant_inputs or {})
    input_shapes = {name: _given_shape(name, dims) for name, dims in (input_shapes or {}).items()}
    known_inputs = {vi.name for vi in model.graph.input}
    for name in list(constant_inputs) + list(input_shapes):
        if name not in known_inputs:
            raise GraphError(f"{name!r} is not a graph input of the model (inputs: {sorted(known_inputs)})")
    check_model(loaded, path, input_shapes)
    if model.functions:
        from onnx import inliner
        model = inliner.inline_local_functions(model)
    opset = _default_opset(model)
    graph_proto = model.graph
    initializers = {t.name: t for t in graph_proto.initializer}
    b = Builder(opset, _onnx_types(model, input_shapes))
    for name, t in initializers.items():    # the stored ones read when a node needs them (read ahead meanwhile)
        b.values[name] = Unread(functools.partial(weights.array, name)) if weights is not None and name in weights \
            else _read(lambda: onnx.numpy_helper.to_array(t), f"initializer {name!r} cannot be read")
    for sparse in graph_proto.sparse_initializer:
        b.values[sparse.values.name] = _read(lambda: _dense(sparse),
                                             f"initializer {sparse.values.name!r} cannot be read")
    inputs, resized = [], False
    for vi in graph_proto.input:
        if vi.name in initializers:
            continue
        if not vi.type.HasField("tensor_type"):
            raise GraphError(f"graph input {vi.name!r} is not a tensor (sequences, maps and optionals are not "
                             f"supported)")
        dt = data_type(vi.type.tensor_type.elem_type, f"graph input {vi.name!r}")
        if vi.name in constant_inputs:
            value = np.array(constant_inputs[vi.name], dt.numpy)      # ours: bound without another copy
            b.values[vi.name] = value
            continue
        shape = _input_shape(vi, input_shapes)
        resized = resized or not _agrees(_declared_shape(vi), shape)
        check_tensor_bytes(f"graph input {vi.name!r}", shape, dt.itemsize)
        b.tensors[vi.name] = b.new_tensor(dt, shape)
        b.graph_inputs.add(vi.name)
        inputs.append(vi.name)
    domains = {imp.domain: int(imp.version) for imp in model.opset_import}
    wildcards = []
    for proto in graph_proto.node:
        node_opset = domains.get(proto.domain, opset) if proto.domain not in ("", "ai.onnx") else opset
        node = Node.of(proto, node_opset)
        for name in node.outputs:
            if name and (name in b.values or name in b.tensors):
                raise GraphError(f"{node.label} writes {name!r}, which is already a graph input, initializer or "
                                 f"another node's output (every tensor has one producer)")
        if proto.op_type == "Constant" and proto.domain in ("", "ai.onnx"):
            b.values[node.outputs[0]] = _constant_value(node)
            continue
        convert = ONNX_OPS.get(node.op_type) if proto.domain in ("", "ai.onnx") else None
        implicit = [n for n in dict.fromkeys(_outer_names(proto)) if n not in node.inputs]
        present = [n for n in node.inputs if n] + implicit
        for n in present:
            if n not in b.values and n not in b.tensors:
                raise GraphError(f"{node.label} reads {n!r}, which is no graph input, initializer or output of an "
                                 f"earlier node (missing input, or nodes out of order)")
        b.values.read(present)
        if proto.op_type not in _RANDOM_OPS and all(n in b.values for n in present) and \
                not (proto.op_type == "Dropout" and _training(node, b)):
            _fold(b, node, convert, lambda: wildcard_attrs(proto, node_opset, _typed(b, implicit)), implicit)
            continue
        results = None
        if convert is not None:
            try:
                results = convert(b, node)
            except (OnnxUnsupported, GraphError, ValueError, TypeError, KeyError, IndexError) as e:
                b.discard()
                if isinstance(e, (OnnxDynamicShape, OnnxRefused)):
                    raise
                why = f"ONNX {node.label}: {e}"
        else:
            where = node.op_type if proto.domain in ("", "ai.onnx") else f"{proto.domain}.{node.op_type}"
            why = f"ONNX op {where} ({node.label}) is not mapped to tilefuse ops"
        if results is None:
            attrs = wildcard_attrs(proto, node_opset, _typed(b, implicit))
            outputs = [n for n in node.outputs if n]
            for name in outputs:            # before the trial run allocates them
                _check_output_size(b, node, name)
            check_onnx_node(attrs, [_trial_input(b, n) for n in present], node.label,
                            [b.onnx_types.get(n, (None, None))[1] for n in outputs])
            warnings.warn(f"{why}; it runs as a Wildcard (onnx's reference implementation)", stacklevel=2)
            results = b.wildcard(node, attrs, implicit)
            wildcards.append(node.label)
        b.commit(node)
        _bind_outputs(b, node, results)
    return _finish(b, graph_proto, inputs, wildcards, check_shapes=not resized)


def _check_output_size(b: Builder, node: Node, name: str, shape=None, itemsize: int = 0) -> None:
    """The size limit on output ``name`` of ``node``: of ``shape``, or, when it is None, of the
    shape onnx's inference gave it (nothing to check when neither is known)."""
    if shape is None:
        elem, shape = b.onnx_types.get(name, (None, None))
        itemsize = itemsize or getattr(ONNX_DTYPES.get(elem), "itemsize", 0)
    if shape is not None:
        check_tensor_bytes(f"{node.label}'s output {name!r}", shape, itemsize or 4)


def _dense(sparse) -> np.ndarray:
    import onnx
    values = onnx.numpy_helper.to_array(sparse.values)
    indices = onnx.numpy_helper.to_array(sparse.indices)
    dense = np.zeros(tuple(sparse.dims), values.dtype)
    if indices.ndim == 1:
        dense.reshape(-1)[indices] = values
    else:
        dense[tuple(indices.T)] = values
    return dense


def _training(node: Node, b: Builder) -> bool:
    mode = node.input(2)
    return bool(mode) and mode in b.values and bool(np.asarray(b.values[mode]).reshape(-1)[0])


def _constant_value(node: Node) -> np.ndarray:
    import onnx
    a = node.attrs
    if "value" in a:
        return onnx.numpy_helper.to_array(a["value"])
    if "sparse_value" in a:
        return _dense(a["sparse_value"])
    for name, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                        ("value_ints", np.int64)):
        if name in a:
            return np.asarray(a[name], dtype)
    raise GraphError(f"{node.label}: Constant with attributes {sorted(a)} is not supported (strings are not)")


def _outer_names(proto) -> list[str]:
    """The names the subgraphs of a node (If, Loop, Scan) read from the enclosing graph."""
    from onnx import AttributeProto

    def used(graph, defined: set) -> list[str]:
        defined = defined | {v.name for v in graph.input} | {t.name for t in graph.initializer}
        names = []
        for n in graph.node:
            names += [i for i in n.input if i and i not in defined]
            for a in n.attribute:
                for g in ([a.g] if a.type == AttributeProto.GRAPH else list(a.graphs)):
                    names += used(g, defined)
            defined = defined | set(n.output)
        return names
    names = []
    for a in proto.attribute:
        for g in ([a.g] if a.type == AttributeProto.GRAPH else list(a.graphs)):
            names += used(g, set())
    return names


_ELEM_TYPES = {dt: elem for elem, dt in ONNX_DTYPES.items()}


def _trial_input(b: Builder, name: str):
    """What ``check_onnx_node`` knows of input ``name``: its value, or (numpy dtype, shape or
    None)."""
    if name in b.values:
        return b.values[name]
    t = b.tensor(name)
    if t.dtype is DataType.undef or not t.is_known():
        return (None, None)
    return (np.dtype(t.dtype.numpy), tuple(t.shape))


def _typed(b: Builder, names) -> list:
    """(name, ONNX element type, shape) of each name, for a Wildcard's implicit inputs."""
    out = []
    for n in names:
        if n in b.values:
            v = b.values[n]
            out.append((n, _ELEM_TYPES.get(DataType.of_numpy(v.dtype), 0), tuple(v.shape)))
        else:
            t = b.tensor(n)
            out.append((n, _ELEM_TYPES.get(t.dtype, 0), t.shape))
    return out


FOLD_KEY_ELEMENTS = 4096
"""A fold is looked up among the earlier ones only when its inputs hold at most this many
elements each (comparing larger ones costs about what folding again does)."""


def _fold(b: Builder, node: Node, convert, attrs, implicit=()) -> None:
    """Evaluate a node whose inputs are all known now, with our reference interpreter on the
    ops it maps to (or onnx's reference implementation, with the Wildcard attributes
    ``attrs()`` gives, for an op we do not map). A fold of the same op on the same values as an
    earlier one takes copies of its results: exported transformers compute the same shapes in
    every layer (ViT-B/16: 731 folds of 52 kinds)."""
    for name in filter(None, node.outputs):   # what onnx's shape inference knows, before computing it
        _check_output_size(b, node, name)
    inputs = [b.values[n] for n in node.inputs if n] + [b.values[n] for n in implicit]
    key = _fold_key(node, inputs)
    if key in b.folds:
        outs = [v if v is None else v.copy() for v in b.folds[key]]
    else:
        outs = _folded(b, node, convert, attrs, implicit, inputs)
        if key is not None:
            b.folds[key] = [v if v is None else v.copy() for v in outs]
    for name, v in zip(node.outputs, outs):
        if name and v is not None:
            b.values[name] = v


def _folded(b: Builder, node: Node, convert, attrs, implicit, inputs) -> list:
    """The values of a fold's outputs (None for an absent or unknown one)."""
    outs = None
    if convert is not None and not implicit:
        try:
            results = convert(b, node)
            env = dict(b.bound)
            for op in b.discard():
                for t, v in zip(op.outputs, reference.evaluate(op, [env[t.id] for t in op.inputs])):
                    env[t.id] = v
            outs = [env[r.id] if isinstance(r, LogicalTensor) else r for r in results]
        except OnnxRefused:
            raise
        except (OnnxUnsupported, GraphError, ValueError, TypeError, KeyError, IndexError):
            b.discard()
    if outs is None:
        it = iter(run_onnx_node(attrs(), inputs))
        outs = [next(it) if n else None for n in node.outputs]
    return [None if v is None else np.asarray(v) for v in outs]


def _fold_key(node: Node, inputs: list) -> tuple | None:
    """What a fold computes from: the node's op, opset, attributes, which inputs and outputs it
    has, and its inputs' values; None when an input is large or holds objects, or the node
    carries no NodeProto."""
    proto = node.proto
    if proto is None:
        return None
    values = []
    for v in inputs:
        v = np.asarray(v)
        if v.size > FOLD_KEY_ELEMENTS or v.dtype.hasobject:
            return None
        values.append((v.dtype.str, v.shape, v.tobytes()))
    return (proto.domain, proto.op_type, node.opset, tuple(a.SerializeToString() for a in proto.attribute),
            tuple(bool(n) for n in proto.input), tuple(bool(n) for n in proto.output), tuple(values))


def _bind_outputs(b: Builder, node: Node, results) -> None:
    if len(results) < len([n for n in node.outputs if n]):
        raise GraphError(f"{node.label} declares {len(node.outputs)} outputs, but {node.op_type} has "
                         f"{len(results)} here")
    for name, r in zip(node.outputs, results):
        if not name:
            continue
        if r is None:
            raise GraphError(f"{node.label}: output {name!r} is not supported")
        if isinstance(r, LogicalTensor):
            _check_against_onnx(b, node, name, r)
            _check_output_size(b, node, name, r.shape if r.is_known() else None, r.dtype.itemsize)
            b.tensors[name] = r
        else:
            r = np.asarray(r)                 # a broadcast view (ConstantOfShape) is not allocated yet
            _check_output_size(b, node, name, r.shape, r.dtype.itemsize)
            b.values[name] = r


def _check_against_onnx(b: Builder, node: Node, name: str, t: LogicalTensor) -> None:
    """The data type must be onnx's; shapes are ours: onnx's shape inference and its reference
    implementation disagree at times (MaxPool's ceil_mode), ours follows onnxruntime."""
    elem, _ = b.onnx_types.get(name, (None, None))
    if elem in ONNX_DTYPES and t.dtype is not DataType.undef and ONNX_DTYPES[elem] is not t.dtype:
        raise GraphError(f"{node.label}: output {name!r} has data type {t.dtype.value} here but onnx infers "
                         f"{_type_name(elem)}")


def _declared_shape(vi) -> tuple:
    """The dims a value info declares, each an int or None (a named or unknown dim); () when it
    declares no shape."""
    tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
    if tt is None or not tt.HasField("shape"):
        return ()
    return tuple(int(d.dim_value) if d.HasField("dim_value") else None for d in tt.shape.dim)


def _agrees(declared: tuple, shape) -> bool:
    """Whether ``shape`` has the dims ``declared`` fixes (nothing declared: any shape)."""
    if not declared or shape is None:
        return True
    return len(declared) == len(shape) and all(d is None or d == s for d, s in zip(declared, shape))


def _check_declared_shape(vi, shape) -> None:
    """A graph output's computed shape must agree with the dims the model declares: a model's
    declared static shape is a promise to its caller, which a different result would break.
    (Not checked when ``input_shapes`` changed a declared input dim: then the declarations
    describe other inputs.)"""
    declared = _declared_shape(vi)
    if not _agrees(declared, shape):
        shown = [d if d is not None else "?" for d in declared]
        raise GraphError(f"graph output {vi.name!r} is declared with shape {shown}, but the model computes "
                         f"{list(shape)}")


def _finish(b: Builder, graph_proto, inputs: list, wildcards: list, check_shapes: bool = True) -> OnnxImport:
    consumed = {t.id for op in b.graph.ops for t in op.inputs}
    outputs, constant_outputs, done = [], {}, {}
    for vi in graph_proto.output:
        name = vi.name
        if name in done:
            outputs.append((name, done[name]))
            continue
        if check_shapes:
            _check_declared_shape(vi, b.values[name].shape if name in b.values else b.tensor(name).shape)
        if name in b.values and b.values[name].size == 0:       # nothing to compute
            constant_outputs[name] = b.values[name]
            outputs.append((name, None))
            done[name] = None
            continue
        t = b.tensor(name)
        declared = vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0
        if declared and t.dtype is not DataType.undef and ONNX_DTYPES.get(declared) is not t.dtype:
            raise GraphError(f"graph output {name!r} is declared {_type_name(declared)}, but the model computes "
                             f"{t.dtype.value}")
        if b.graph.producer(t.id) is None or t.id in consumed or t.id in {i for _, i in outputs if i is not None}:
            t = b.op(OpKind.Identity, [t])        # a graph output must be produced and read by no op
            b.commit()
        outputs.append((name, t.id))
        done[name] = t.id
    graph = b.graph
    needed = {tid for _, tid in outputs if tid is not None}
    live = []
    for op in reversed(graph.topological_ops()):     # ops no graph output depends on are dropped
        if any(t.id in needed for t in op.outputs):
            live.append(op)
            needed.update(t.id for t in op.inputs)
    if len(live) < len(graph.ops):
        graph = graph.rebuilt(live[::-1])
    for tid, value in b.bound.items():      # the importer's own arrays: handed over, not copied
        if tid in graph.tensors and graph.producer(tid) is None:
            graph.bind_constant(tid, value, copy=False)
    graph.finalize()
    ids = [(name, b.tensors[name].id if b.tensors[name].id in graph.tensors else None) for name in inputs]
    return OnnxImport(graph, ids, outputs, constant_outputs, wildcards)


def from_onnx(model, constant_inputs: dict | None = None, input_shapes: dict | None = None) -> Graph:
    """The finalized graph of an ONNX model (a path, serialized bytes or an ``onnx.ModelProto``);
    see ``import_onnx`` for the arguments (and for the model's input and output names as tensor
    ids) and the module docstring for the mapping. The inputs to feed are the input ports that
    have no bound value.

    Example:
        >>> import numpy as np
        >>> from tilefuse.graph_api import reference
        >>> g = from_onnx("examples/resnet_block.onnx")
        >>> x_port, = [t for t in g.get_input_ports() if t.id not in g.constant_values]   # the others: weights
        >>> x_port.shape
        (1, 16, 32, 32)
        >>> x = np.random.rand(*x_port.shape).astype(np.float32)
        >>> outputs = reference.run(g, {**g.constant_values, x_port.id: x})   # compiled: compile_graph(g).run({x_port.id: x})
        >>> [(tid, value.shape) for tid, value in outputs.items()]
        [(32, (1, 10))]
    """
    return warned_at_caller(import_onnx, model, constant_inputs, input_shapes).graph
