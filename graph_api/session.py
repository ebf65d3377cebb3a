"""Sessions shaped like onnxruntime's: a model compiled once, run by input and output names.

``InferenceSession(model)`` takes an ONNX model (a path, serialized bytes or an
``onnx.ModelProto``), a oneDNN Graph JSON file (``.json``) or a finalized ``Graph``. Switching
from onnxruntime is one line::

    sess = InferenceSession("model.onnx")                # was onnxruntime.InferenceSession(...)
    [y] = sess.run(None, {"x": x})

* ``get_inputs()`` / ``get_outputs()`` describe the model's tensors as ``NodeArg``s (``name``,
  ``shape`` with symbolic dims as strings, ``type`` spelled as onnxruntime does,
  ``tensor(float)``). A oneDNN graph's tensors are named by their ids (``"0"``).
* A symbolic dim (``"batch"``) is bound at each run from the feeds: the model is compiled for
  each new set of input shapes, and the compiled graphs are kept in an LRU of
  ``max_compiled_shapes``. A dim name bound to two sizes in one feed, a wrong rank, a wrong
  static dim or a wrong dtype is a GraphError naming the input.
* ``configs``: a ``schedule.ConfigSource`` (``autotune.HistoryBest("tuning.db")``, or use
  ``autotune.InferenceSession(model, db=...)``); ``strict``: refuse a model with ops the
  compiler does not handle; ``num_threads``: the process's thread pool size
  (``tensorir.runtime.set_num_threads``); ``target``: the machine to generate code for (a
  ``Target`` or its spelling, ``"llvm -mcpu=skylake-avx512"``; default this host): a session
  for a target whose features this host lacks can be saved here and loaded there.

``save(path)`` writes the session as one file (``SAVE_MAGIC``, the format version, a JSON
header with the target, the inputs and outputs, then the compiled graphs: kernels' object
code, packed constants, and for a model with symbolic dims the model itself, so new shapes
can still be compiled; a sha256 of it all). ``load_compiled(path)`` returns a session that
runs it with no LLVM compile and no tuning database; a file whose code needs features this
host lacks (it names them), of another format version, one that is truncated or altered, or
whose header does not describe what it compiled is refused with a GraphError naming it. A
saved file holds pickled objects: load only files you trust, as with any pickle.

The file is mapped, and the weights are used where they lie in it (each array's data starts
at a multiple of ``BUFFER_ALIGN``): no copy, so the weights are page cache that processes
loading one file share (resnet50: 45 MB private memory after loading, against 145 MB when
copied; loading 0.35 s, against 0.39 to 0.61 s). ``save`` never writes a file in place: it
writes a temporary file beside ``path`` and renames it over ``path`` (``tensorir.runtime.
atomic_file``), so saving over the file a session was loaded from, from this process or
another, leaves that session on the old file's bytes, and a failed save leaves the old file as
it was. Another program that rewrites a loaded file in place (``cp new.tfm model.tfm``,
``truncate``, an editor saving in place) would change the bytes under the map: each run first
checks the file's size and modification time (``mapped_file.SessionFile``) and refuses with a
GraphError naming it once they changed, so the session never reads a cut or altered file (a
file modified in the last ``RECENT_SECONDS``, whose time a write in the same clock tick would
not change, is read into memory instead of mapped). A rewrite during a run is not caught:
replace a file others may be running by renaming a new one over it (``mv``, or ``save``).

Example:
    >>> import numpy as np
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
    >>> x = LogicalTensor(0, DataType.f32, (2,)); y = LogicalTensor(1, DataType.f32, (2,))
    >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
    >>> sess = InferenceSession(g)
    >>> [(a.name, a.shape, a.type) for a in sess.get_inputs()]
    [('0', [2], 'tensor(float)')]
    >>> sess.run(None, {"0": np.array([-1, 2], "float32")})[0].tolist()
    [0.0, 2.0]
"""
from __future__ import annotations

import collections
import hashlib
import json
import os
import pickle
import struct
import threading
from dataclasses import dataclass

import numpy as np

from tilefuse.tensorir.runtime.artifact import read_envelope
from tilefuse.tensorir.runtime.atomic_file import atomic_write
from tilefuse.tensorir.runtime.target import Target, as_target
from tilefuse.tensorir.runtime.threadpool import set_num_threads

from .compiled_graph import CompiledGraph
from .compiler import compile_graph
from .deserialize import load_json
from .graph import Graph
from .limits import checked_array
from .mapped_file import SessionFile
from .logical_tensor import DataType, GraphError

MAX_COMPILED_SHAPES = 8
"""Compiled shapes a session with symbolic dims keeps (least recently run dropped first)."""

SAVE_MAGIC = b"TILEFUSE-MODEL\n"
SAVE_FORMAT = 1
BUFFER_ALIGN = 64
"""Where each array's data starts in a saved file (a multiple of it), so a mapped file's arrays
are aligned as kernels need them."""
_PREFIX = struct.Struct("<IQ")
_LENGTHS = struct.Struct("<QQ")
_LENGTH = struct.Struct("<Q")

_ORT_TYPES = {DataType.f32: "float", DataType.f16: "float16", DataType.s32: "int32", DataType.s64: "int64",
              DataType.s8: "int8", DataType.u8: "uint8", DataType.boolean: "bool", DataType.bf16: "bfloat16"}


@dataclass(frozen=True)
class NodeArg:
    """A model input or output: ``name``, ``shape`` (ints; a symbolic dim as its name, an
    unknown one as None) and ``type`` as onnxruntime spells it (``tensor(float)``).

    Example:
        >>> NodeArg("x", ["batch", 3], "tensor(float)").shape
        ['batch', 3]
    """
    name: str
    shape: list
    type: str


class InferenceSession:
    """A compiled model run by names (see the module docstring).

    Example:
        >>> sess = InferenceSession("examples/resnet_block.onnx")
        >>> [y.shape for y in sess.run(None, {"input": np.zeros((1, 16, 32, 32), "float32")})]
        [(1, 10)]
    """

    def __init__(self, model, configs=None, strict: bool = False, num_threads: int | None = None,
                 max_compiled_shapes: int = MAX_COMPILED_SHAPES, target=None):
        if num_threads is not None:
            set_num_threads(num_threads)
        if isinstance(max_compiled_shapes, bool) or not isinstance(max_compiled_shapes, int) or max_compiled_shapes < 1:
            raise ValueError(f"max_compiled_shapes must be a positive int, got {max_compiled_shapes!r}")
        self._configs, self._strict, self._max = configs, strict, max_compiled_shapes
        self._target = as_target(target)
        self._source = _source_of(model)
        self._inputs, self._outputs = self._source.signature()
        self._compiled = collections.OrderedDict()     # input shapes -> _Compiled, least recently run first
        self._lock = threading.Lock()
        self._file = None               # a loaded session's SessionFile
        shapes = self._source.static_shapes
        if shapes is not None:          # nothing symbolic: compile now, as onnxruntime does, and let the
            source, self._source = self._source, _Saved()     # model go (the compiled graph holds what it runs)
            self._compiled[shapes] = source.compile(shapes, configs, strict, self._target)

    def get_inputs(self) -> list[NodeArg]:
        """The inputs to feed, in the model's order.

        Example:
            >>> [(i.name, i.shape, i.type) for i in InferenceSession("examples/resnet_block.onnx").get_inputs()]
            [('input', [1, 16, 32, 32], 'tensor(float)')]
        """
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        """The outputs, in the model's order.

        Example:
            >>> [(o.name, o.shape) for o in InferenceSession("examples/resnet_block.onnx").get_outputs()]
            [('logits', [1, 10])]
        """
        return list(self._outputs)

    @property
    def compiled_shapes(self) -> list[tuple]:
        """The input shapes compiled for now, least recently run first.

        Example:
            >>> InferenceSession("examples/resnet_block.onnx").compiled_shapes
            [((1, 16, 32, 32),)]
        """
        return list(self._compiled)

    def run(self, output_names, input_feed: dict, run_options=None) -> list[np.ndarray]:
        """The outputs named in ``output_names`` (None: all, in the model's order) computed from
        ``input_feed`` ({input name: array}), as a list; ``run_options`` is accepted for
        onnxruntime's signature and ignored.

        Example:
            >>> sess = InferenceSession("examples/resnet_block.onnx")
            >>> logits, = sess.run(["logits"], {"input": np.ones((1, 16, 32, 32), "float32")})
            >>> logits.shape, logits.dtype
            ((1, 10), dtype('float32'))
        """
        names = [o.name for o in self._outputs] if output_names is None else list(output_names)
        known = {o.name for o in self._outputs}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise GraphError(f"run: no output named {unknown}; the outputs are {sorted(known)}")
        arrays = self._checked_feeds(input_feed)
        key = tuple(a.shape for a in arrays)
        compiled = self._compiled_for(key)
        if self._file is not None:
            self._file.check()          # never read a mapped file rewritten in place
        results = compiled.graph.run([arrays[k] for k in compiled.fed])
        return [compiled.constant_outputs[n] if n in compiled.constant_outputs else results[compiled.output_ids[n]]
                for n in names]

    def _checked_feeds(self, input_feed) -> list[np.ndarray]:
        """The feeds as arrays in input order, each checked against its NodeArg."""
        if not isinstance(input_feed, dict):
            raise TypeError(f"run takes a dict {{input name: array}}, got {type(input_feed).__name__}")
        names = [i.name for i in self._inputs]
        unknown = [k for k in input_feed if k not in names]
        missing = [n for n in names if n not in input_feed]
        if unknown or missing:
            what = f"no input named {unknown}" if unknown else f"missing input(s) {missing}"
            raise GraphError(f"run: {what}; the inputs are {names}")
        arrays, bound = [], {}
        for arg in self._inputs:
            array = checked_array(f"input {arg.name!r}", input_feed[arg.name])    # no copy over the limit
            want = np.dtype(_numpy_type(arg.type))
            if array.dtype != want:
                raise GraphError(f"input {arg.name!r} must be {arg.type}, got {array.dtype}")
            if arg.shape is None:       # rank unknown: the feed gives it
                arrays.append(array)
                continue
            if array.ndim != len(arg.shape):
                raise GraphError(f"input {arg.name!r} must have rank {len(arg.shape)} (shape {arg.shape}), got "
                                 f"shape {list(array.shape)}")
            for k, (dim, n) in enumerate(zip(arg.shape, array.shape)):
                if isinstance(dim, int) and dim != n:
                    raise GraphError(f"input {arg.name!r} dim {k} must be {dim} (shape {arg.shape}), got shape "
                                     f"{list(array.shape)}")
                if isinstance(dim, str) and bound.setdefault(dim, n) != n:
                    raise GraphError(f"input {arg.name!r} dim {k} ({dim!r}) is {n}, but {dim!r} is {bound[dim]} in "
                                     f"another input of this run")
            arrays.append(array)
        return arrays

    def _compiled_for(self, key: tuple) -> "_Compiled":
        with self._lock:
            compiled = self._compiled.get(key)
            if compiled is not None:
                self._compiled.move_to_end(key)
                return compiled
        if not self._source.can_compile:
            raise GraphError(f"this saved session holds no compiled graph for input shapes {[list(s) for s in key]} "
                             f"and no model to compile one from (it has {[[list(s) for s in k] for k in self._compiled]})")
        compiled = self._source.compile(key, self._configs, self._strict, self._target)
        with self._lock:
            self._compiled[key] = compiled
            while len(self._compiled) > self._max:
                self._compiled.popitem(last=False)
        return compiled

    def save(self, path) -> None:
        """Write the session to ``path`` (see the module docstring); ``load_compiled`` reads it.

        Example:
            >>> import tempfile, os
            >>> sess = InferenceSession("examples/resnet_block.onnx")
            >>> x = {"input": np.ones((1, 16, 32, 32), "float32")}
            >>> with tempfile.TemporaryDirectory() as folder:
            ...     sess.save(os.path.join(folder, "resnet_block.tfm"))
            ...     again = load_compiled(os.path.join(folder, "resnet_block.tfm"))
            ...     bool(np.array_equal(again.run(None, x)[0], sess.run(None, x)[0]))
            True
        """
        target = self._target
        header = json.dumps({"target": {"cpu": target.cpu, "features": target.features, "triple": target.triple,
                                        "key": target.key},
                             "inputs": [vars(a) for a in self._inputs],
                             "outputs": [vars(a) for a in self._outputs]}).encode()
        buffers = []                    # the arrays' data, written apart so that loading maps them in place
        payload = pickle.dumps({"source": self._source.saved(), "compiled": dict(self._compiled),
                                "max": self._max, "strict": self._strict, "target": self._target}, protocol=5,
                               buffer_callback=buffers.append)
        raw = [b.raw() for b in buffers]
        digest = hashlib.sha256()
        with atomic_write(path) as f:       # never in place: a session loaded from path maps it
            def write(data):
                digest.update(data)
                f.write(data)
            write(SAVE_MAGIC + _PREFIX.pack(SAVE_FORMAT, len(header)) + header)
            write(_LENGTHS.pack(len(payload), len(raw)) + b"".join(_LENGTH.pack(len(r)) for r in raw) + payload)
            for r in raw:
                write(bytes(-f.tell() % BUFFER_ALIGN))
                write(r)
            f.write(digest.digest())


def load_compiled(path) -> InferenceSession:
    """The session ``InferenceSession.save`` wrote to ``path``, run with no LLVM compile and no
    tuning database (a model with symbolic dims compiles shapes it was not saved with, which
    needs LLVM); GraphError naming the file when it cannot be used here. The file is mapped,
    not read: its constants are used where they lie; a run after another program rewrote the file
    in place is a GraphError naming it (see the module docstring; ``save`` never does that).

    Example:
        >>> load_compiled(__file__)
        Traceback (most recent call last):
        ...
        tilefuse.graph_api.logical_tensor.GraphError: ...session.py: not a saved tilefuse session
    """
    where = os.fspath(path)
    try:
        held = SessionFile.open(where)
    except OSError as err:
        raise GraphError(f"cannot read saved session {where}: {err.strerror or err}") from None
    data = held.data
    header, body, end = read_envelope(data, SAVE_MAGIC, SAVE_FORMAT, "saved tilefuse session", where, GraphError)
    try:
        target, inputs, outputs = _checked_header(header)
        payload, buffers = _sections(body, end)
    except (ValueError, KeyError, TypeError, struct.error) as err:
        raise GraphError(f"{where}: corrupt header ({err})") from None
    why = target.cannot_run_here()
    if why is not None:
        raise GraphError(f"{where} cannot run here: {why}; compile the model for this host")
    try:
        state = pickle.loads(payload, buffers=buffers)
    except pickle.UnpicklingError as err:
        raise GraphError(f"{where}: {err}") from None
    session = InferenceSession.__new__(InferenceSession)
    session._configs, session._strict, session._max = None, state["strict"], state["max"]
    session._target = state["target"]
    session._source = state["source"]
    session._inputs, session._outputs = inputs, outputs
    session._compiled = collections.OrderedDict(state["compiled"])
    session._lock = threading.Lock()
    session._file = held
    try:
        _check_header_matches(session, target)
    except ValueError as err:
        raise GraphError(f"{where}: corrupt header ({err})") from None
    return session


_TARGET_KEYS = {"cpu", "features", "triple", "key"}
_ARG_KEYS = {"name", "shape", "type"}


def _checked_header(header: dict) -> tuple:
    """(target, inputs, outputs) of a saved file's header, its structure checked: ValueError
    (or KeyError, TypeError) saying what is wrong, never a header taken on trust.

    Example:
        >>> _checked_header({"target": {}, "inputs": [], "outputs": []})
        Traceback (most recent call last):
        ...
        ValueError: the target must be an object with keys ['cpu', 'features', 'key', 'triple'], got {}
    """
    if set(header) != {"target", "inputs", "outputs"}:
        raise ValueError(f"the header must have keys ['inputs', 'outputs', 'target'], got {sorted(header)}")
    target = header["target"]
    if not isinstance(target, dict) or set(target) != _TARGET_KEYS or \
            not all(isinstance(v, str) for v in target.values()):
        raise ValueError(f"the target must be an object with keys {sorted(_TARGET_KEYS)}, got {target!r:.200}")
    args = []
    for side in ("inputs", "outputs"):
        if not isinstance(header[side], list):
            raise ValueError(f"{side} must be a list, got {header[side]!r:.200}")
        for a in header[side]:
            if not isinstance(a, dict) or set(a) != _ARG_KEYS or not isinstance(a["name"], str) or \
                    not (a["shape"] is None or isinstance(a["shape"], list) and all(
                        d is None or isinstance(d, str) or isinstance(d, int) and not isinstance(d, bool) and d >= 0
                        for d in a["shape"])) or \
                    not (isinstance(a["type"], str) and a["type"].startswith("tensor(") and a["type"].endswith(")")):
                raise ValueError(f"each of {side} must be {{name: str, shape: [int, str or null] or null, "
                                 f"type: 'tensor(...)'}}, got {a!r:.200}")
            np.dtype(_numpy_type(a["type"]))        # TypeError for a type no array has
        names = [a["name"] for a in header[side]]
        if len(set(names)) != len(names):
            raise ValueError(f"{side} named twice: {names}")
        args.append([NodeArg(**a) for a in header[side]])
    return Target.of(target["cpu"], target["features"], target["triple"]), args[0], args[1]


def _check_header_matches(session: InferenceSession, target: Target) -> None:
    """ValueError unless the header's target, inputs and outputs are those of what the file
    compiled (an edited header with its checksum recomputed would otherwise fail at run)."""
    held = session._target
    if (held.cpu, held.features, held.triple) != (target.cpu, target.features, target.triple):
        raise ValueError(f"the header's target {target} is not the compiled code's {held}")
    if session._source.can_compile and session._source.signature() != (session._inputs, session._outputs):
        raise ValueError("the header's inputs and outputs are not the saved model's")
    outputs = [o.name for o in session._outputs]
    for shapes, compiled in session._compiled.items():
        if len(shapes) != len(session._inputs) or any(k >= len(shapes) for k in compiled.fed):
            raise ValueError(f"{len(session._inputs)} inputs in the header, but a compiled graph takes "
                             f"{len(shapes)}")
        for arg, shape in zip(session._inputs, shapes):
            if arg.shape is not None and (len(arg.shape) != len(shape) or any(
                    isinstance(d, int) and d != n for d, n in zip(arg.shape, shape))):
                raise ValueError(f"input {arg.name!r} has shape {arg.shape} in the header, but a graph is "
                                 f"compiled for {list(shape)}")
        missing = [n for n in outputs if n not in compiled.output_ids and n not in compiled.constant_outputs]
        if missing:
            raise ValueError(f"no compiled output named {missing}")


def _sections(body: memoryview, at: int) -> tuple:
    """(payload, buffers) of a saved file's ``body`` after its header, which ends at ``at``:
    views into the file, each buffer where ``save`` aligned it."""
    payload_size, count = _LENGTHS.unpack_from(body, at)
    at += _LENGTHS.size
    sizes = [_LENGTH.unpack_from(body, at + k * _LENGTH.size)[0] for k in range(count)]
    at += count * _LENGTH.size
    payload = body[at:at + payload_size]
    at += payload_size
    buffers = []
    for size in sizes:
        at += -at % BUFFER_ALIGN
        if at + size > len(body):
            raise ValueError("a buffer runs past the end of the file")
        buffers.append(body[at:at + size])
        at += size
    if len(payload) != payload_size or at != len(body):
        raise ValueError("the sections do not fill the file")
    return payload, buffers


@dataclass
class _Compiled:
    """A model compiled for one set of input shapes: the compiled graph, the inputs it is fed
    (positions in the session's input order), its output ids by name, and outputs known at
    import by name."""
    graph: CompiledGraph
    fed: list
    output_ids: dict
    constant_outputs: dict


def _source_of(model):
    if isinstance(model, Graph):
        return _GraphSource(model, owned=False)
    if isinstance(model, (str, os.PathLike)) and os.fspath(model).endswith(".json"):
        return _GraphSource(load_json(os.fspath(model)), owned=True)
    return _OnnxSource.of(model)


class _GraphSource:
    """A oneDNN graph (its shapes are static): tensors named by their ids."""

    can_compile = True

    def __init__(self, graph: Graph, owned: bool):
        if not graph.is_finalized:
            raise GraphError("InferenceSession takes a finalized Graph; call graph.finalize() first")
        self.graph, self.owned = graph, owned      # owned: loaded here, so its weights may go once packed

    @property
    def static_shapes(self):
        return tuple(tuple(t.shape) for t in self._inputs())

    def _inputs(self):
        bound = self.graph.constant_values
        return [t for t in self.graph.get_input_ports() if t.id not in bound]

    def signature(self):
        def arg(t):
            return NodeArg(str(t.id), list(t.shape), f"tensor({_ORT_TYPES.get(t.dtype, t.dtype.value)})")
        return [arg(t) for t in self._inputs()], [arg(t) for t in self.graph.get_output_ports()]

    def compile(self, shapes, configs, strict, target) -> _Compiled:
        order = {t.id: k for k, t in enumerate(self._inputs())}
        compiled = compile_graph(self.graph, configs=configs, strict=strict, target=target, owned=self.owned)
        return _Compiled(compiled, [order[t.id] for t in compiled.input_ports],
                         {str(tid): tid for tid in compiled.output_ids}, {})

    def saved(self):
        return _Saved()


class _OnnxSource:
    """An ONNX model, kept serialized while it has symbolic dims (each new shape compiles from
    it)."""

    can_compile = True

    def __init__(self, proto, where: str, inputs, outputs):
        self.proto, self.where = proto, where        # the ModelProto; its bytes once pickled
        self.inputs, self.outputs = inputs, outputs

    @classmethod
    def of(cls, model) -> "_OnnxSource":
        from .onnx.importer import _check, _load
        path = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
        proto, where = _load(model)
        _check(proto, where, path)
        initializers = {t.name for t in proto.graph.initializer}
        inputs = [_node_arg(vi, where) for vi in proto.graph.input if vi.name not in initializers]
        outputs = [_node_arg(vi, where) for vi in proto.graph.output]
        return cls(proto, where, inputs, outputs)

    def __getstate__(self):
        return dict(self.__dict__, proto=self.proto.SerializeToString())

    def __setstate__(self, state):
        import onnx
        proto = onnx.ModelProto()
        proto.ParseFromString(state["proto"])
        self.__dict__.update(state, proto=proto)

    @property
    def static_shapes(self):
        if all(arg.shape is not None and all(isinstance(d, int) for d in arg.shape) for arg in self.inputs):
            return tuple(tuple(arg.shape) for arg in self.inputs)
        return None

    def signature(self):
        return self.inputs, self.outputs

    def compile(self, shapes, configs, strict, target) -> _Compiled:
        import onnx
        from .onnx.importer import import_onnx
        proto = self.proto
        if self.static_shapes is None:      # the shapes of this run, so onnx's shape inference knows them too
            proto = onnx.ModelProto()
            proto.CopyFrom(self.proto)
            for vi in proto.graph.input:
                for arg, shape in zip(self.inputs, shapes):
                    if vi.name == arg.name:
                        vi.type.tensor_type.shape.Clear()
                        for n in shape:
                            vi.type.tensor_type.shape.dim.add().dim_value = n
        imp = import_onnx(proto)
        if self.static_shapes is not None:  # compiled once: the model (its weights are copied) goes now
            self.proto = proto = None
        compiled = compile_graph(imp.graph, configs=configs, strict=strict, target=target, owned=True)
        position = {name: k for k, (name, _) in enumerate(imp.inputs)}
        by_id = {tid: name for name, tid in imp.inputs if tid is not None}
        return _Compiled(compiled, [position[by_id[t.id]] for t in compiled.input_ports],
                         {name: tid for name, tid in imp.outputs if tid is not None}, dict(imp.constant_outputs))

    def saved(self):
        """What a saved session keeps to compile new shapes: the model while it has symbolic
        dims, else nothing."""
        return self if self.static_shapes is None else _Saved()


class _Saved:
    """The source of a saved session that holds only its compiled shapes."""

    can_compile = False
    static_shapes = None

    def saved(self):
        return self


def _node_arg(vi, where: str) -> NodeArg:
    import onnx
    if not vi.type.HasField("tensor_type"):
        raise GraphError(f"{where}: {vi.name!r} is not a tensor (sequences, maps and optionals are not supported)")
    tt = vi.type.tensor_type
    dims = None
    if tt.HasField("shape"):
        dims = [int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
    elem = onnx.TensorProto.DataType.Name(tt.elem_type).lower() if tt.elem_type else "undefined"
    return NodeArg(vi.name, dims, f"tensor({elem})")


def _numpy_type(ort_type: str):
    name = ort_type[len("tensor("):-1]
    return {"float": "float32", "double": "float64", "string": "object"}.get(name, name)
