"""Sessions shaped like onnxruntime's: a model compiled once, run by input and output names.

``InferenceSession(path_or_bytes, sess_options=None, providers=None, provider_options=None)``
takes an ONNX model (a path, serialized bytes or an ``onnx.ModelProto``), a oneDNN Graph JSON
file (``.json``) or a finalized ``Graph``, with onnxruntime's options
(``graph_api.session_options``: ``SessionOptions``, ``RunOptions``, the CPU provider; a missing
file is a FileNotFoundError, ``ModelFileNotFound``, a folder a GraphError). Switching from
onnxruntime is one line::

    sess = InferenceSession("model.onnx", providers=["CPUExecutionProvider"])   # was onnxruntime's
    [y] = sess.run(None, {"x": x})

* ``get_modelmeta()``, ``get_providers()``, ``get_provider_options()``,
  ``get_session_options()`` answer as onnxruntime's do; ``end_profiling()`` writes the profile
  of a session made with ``enable_profiling`` (``graph_api.profiler``) and returns its path
  ("" when it does not profile, as onnxruntime does).
* Each session runs with its own thread count (``intra_op_num_threads``, or ``num_threads``):
  its runs launch parallel loops with it, whatever other sessions ask for
  (``tensorir.runtime.threadpool.run_threads``).
* The warnings of a compile (ops left to the reference interpreter, workloads without a
  tuning record: one warning for them all) point at the line that made the session or ran
  it (``caller_warnings``).

* ``get_inputs()`` / ``get_outputs()`` describe the model's tensors as ``NodeArg``s (``name``,
  ``shape`` with symbolic dims as strings, ``type`` spelled as onnxruntime does,
  ``tensor(float)``). A oneDNN graph's tensors are named by their ids (``"0"``).
* A symbolic dim (``"batch"``) is bound at each run from the feeds: the model is compiled for
  each new set of input shapes, and the compiled graphs are kept in an LRU of
  ``max_compiled_shapes``. A dim name bound to two sizes in one feed, a wrong rank, a wrong
  static dim or a wrong dtype is a GraphError naming the input.
* ``configs``: a ``schedule.ConfigSource`` (``autotune.HistoryBest("tuning.db")``, or use
  ``autotune.InferenceSession(model, db=...)``); ``strict``: refuse a model with ops the
  compiler does not handle; ``num_threads``: this session's thread count (as
  ``intra_op_num_threads``); ``target``: the machine to generate code for (a
  ``Target`` or its spelling, ``"llvm -mcpu=skylake-avx512"``; default this host): a session
  for a target whose features this host lacks can be saved here and loaded there.

``save(path)`` writes the session as one file (``SAVE_MAGIC``, the format version, a JSON
header with the target, the inputs and outputs, then the compiled graphs: kernels' object
code, packed constants, and for a model with symbolic dims the model itself, so new shapes
can still be compiled; a sha256 of it all). An array several compiled shapes hold alike (the
packed weights) is written once (format 2; format 1 files still load). ``load_compiled(path)``
returns a session that runs it with no LLVM compile and no tuning database (LLVM is still
needed to run a shape it was not saved with: that shape is compiled from the saved model); a file whose code needs features this
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
import functools
import hashlib
import json
import os
import pickle
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from hashlib import blake2b

import numpy as np

from tilefuse.tensorir.runtime.artifact import read_envelope
from tilefuse.tensorir.runtime.atomic_file import atomic_write
from tilefuse.tensorir.runtime.target import Target, as_target
from tilefuse.tensorir.runtime.threadpool import run_threads

from .caller_warnings import warned_at_caller
from .compiled_graph import CompiledGraph
from .compiler import compile_graph
from .deserialize import load_json
from .graph import Graph
from .limits import checked_array
from .logical_tensor import GraphError
from .mapped_file import SessionFile
from .profiler import ORT_TYPES, Profiler
from .session_options import (GRAPH_PASSES, GraphOptimizationLevel, OptionError, RunOptions, SessionOptions,
                              checked_providers)

MAX_COMPILED_SHAPES = 8
"""Compiled shapes a session with symbolic dims keeps (least recently run dropped first)."""

SAVE_MAGIC = b"TILEFUSE-MODEL\n"
SAVE_FORMAT = 2
"""2: arrays held alike by several compiled shapes written once (a table maps the payload's
buffers to them); 1: each buffer written where it occurs (still read)."""
SAVE_FORMATS = (1, 2)
BUFFER_ALIGN = 64
"""Where each array's data starts in a saved file (a multiple of it), so a mapped file's arrays
are aligned as kernels need them."""
_PREFIX = struct.Struct("<IQ")
_LENGTHS = struct.Struct("<QQ")
_LENGTH = struct.Struct("<Q")



class ModelFileNotFound(GraphError, FileNotFoundError):
    """No model file at the path a session was given."""


@dataclass(frozen=True)
class ModelMetadata:
    """onnxruntime's ``ModelMetadata`` of a session's model (empty strings where the model has
    none: a oneDNN graph has only its name).

    Example:
        >>> ModelMetadata(graph_name="g").custom_metadata_map
        {}
    """
    producer_name: str = ""
    graph_name: str = ""
    domain: str = ""
    description: str = ""
    graph_description: str = ""
    version: int = 0
    custom_metadata_map: dict = field(default_factory=dict)


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

    def __init__(self, path_or_bytes, sess_options: SessionOptions | None = None, providers=None,
                 provider_options=None, *, configs=None, strict: bool = False, num_threads: int | None = None,
                 max_compiled_shapes: int = MAX_COMPILED_SHAPES, target=None):
        if isinstance(max_compiled_shapes, bool) or not isinstance(max_compiled_shapes, int) or max_compiled_shapes < 1:
            raise ValueError(f"max_compiled_shapes must be a positive int, got {max_compiled_shapes!r}")
        self._providers = checked_providers(providers, provider_options)
        self._configs, self._strict, self._max = configs, strict, max_compiled_shapes
        self._target = as_target(target)
        self._take_options(sess_options, num_threads)
        self._level = self._options.graph_optimization_level
        started = time.perf_counter()
        self._source = _source_of(path_or_bytes)
        self._meta = self._source.meta
        self._inputs, self._outputs = self._source.signature()
        self._compiled = collections.OrderedDict()     # input shapes -> _Compiled, least recently run first
        self._lock = threading.Lock()
        self._file = None               # a loaded session's SessionFile
        shapes = self._source.static_shapes
        if shapes is not None:          # nothing symbolic: compile now, as onnxruntime does, and let the
            source, self._source = self._source, _Saved()     # model go (the compiled graph holds what it runs)
            self._compiled[shapes] = self._compile(source, shapes, self._severity)
        if self._profiler is not None:
            self._profiler.span("Session", "session_initialization", started, time.perf_counter() - started,
                                {"compiled_shapes": [[list(s) for s in k] for k in self._compiled]})

    def _take_options(self, sess_options, num_threads) -> None:
        """Keep ``sess_options`` (None: the defaults) and what follows from them: the thread
        count (``num_threads``, when given, must agree), the profiler, the log level."""
        if sess_options is None:
            sess_options = SessionOptions()
        if not isinstance(sess_options, SessionOptions):
            raise OptionError(f"sess_options must be a tilefuse SessionOptions (onnxruntime's fields that tilefuse "
                              f"honours: {sorted(SessionOptions._CHECKS)}), got {type(sess_options).__module__}."
                              f"{type(sess_options).__name__}")
        threads = sess_options.intra_op_num_threads or None
        if num_threads is not None:
            if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
                raise OptionError(f"num_threads must be an int >= 1, got {num_threads!r}")
            if threads is not None and threads != num_threads:
                raise OptionError(f"num_threads={num_threads} and intra_op_num_threads={threads} disagree; give one")
            threads = num_threads
        self._options, self._threads = sess_options, threads
        self._severity, self._logid = sess_options.log_severity_level, sess_options.logid
        self._profiler = Profiler(sess_options.profile_file_prefix, threads=threads) \
            if sess_options.enable_profiling else None

    def _compile(self, source, shapes: tuple, severity: int) -> "_Compiled":
        """``source`` compiled for ``shapes`` at this session's optimization level, its warnings
        told at the caller (none at severity 3 and 4), the compile told on stderr at 0 and 1."""
        started = time.perf_counter()
        compiled = warned_at_caller(source.compile, shapes, self._configs, self._strict, self._target, self._level,
                                    quiet=severity >= 3)
        if self._profiler is not None:
            self._profiler.span("Session", "compile", started, time.perf_counter() - started,
                                {"input_shapes": [list(s) for s in shapes], "level": self._level.name})
        if severity <= 1:
            steps = compiled.graph.steps
            tag = f" [{self._logid}]" if self._logid else ""
            print(f"tilefuse{tag}: compiled for input shapes {[list(s) for s in shapes]} in "
                  f"{time.perf_counter() - started:.2f} s at {self._level.name}: {len(steps)} partition(s), "
                  f"{sum(s.kernel is not None for s in steps)} compiled", file=sys.stderr)
        return compiled

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

    def run(self, output_names, input_feed: dict, run_options: RunOptions | None = None) -> list[np.ndarray]:
        """The outputs named in ``output_names`` (None: all, in the model's order) computed from
        ``input_feed`` ({input name: array}), as a list. ``run_options``: a ``RunOptions``
        (its log level for a compile this run does, ``logid`` in the profile, ``terminate``
        checked before each step; what a run cannot honour is refused, ``RunOptions.check``).

        Example:
            >>> sess = InferenceSession("examples/resnet_block.onnx")
            >>> logits, = sess.run(["logits"], {"input": np.ones((1, 16, 32, 32), "float32")})
            >>> logits.shape, logits.dtype
            ((1, 10), dtype('float32'))
        """
        stop = None
        if run_options is not None:
            if not isinstance(run_options, RunOptions):
                raise OptionError(f"run_options must be a tilefuse RunOptions, got {type(run_options).__module__}."
                                  f"{type(run_options).__name__}")
            run_options.check()
            stop = run_options.check
        names = [o.name for o in self._outputs] if output_names is None else list(output_names)
        known = {o.name for o in self._outputs}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise GraphError(f"run: no output named {unknown}; the outputs are {sorted(known)}")
        arrays = self._checked_feeds(input_feed)
        key = tuple(a.shape for a in arrays)
        if self._file is not None:
            self._file.check()          # never read a mapped file rewritten in place (a new shape reads its model)
        compiled = self._compiled_for(key, self._severity if run_options is None else run_options.log_severity_level)
        feeds = [arrays[k] for k in compiled.fed]
        profiler = self._profiler
        with run_threads(self._threads):
            if profiler is None:
                results = compiled.graph.run(feeds, stop)
            else:
                started = time.perf_counter()
                results, log = compiled.graph.profile(feeds, stop)
                seconds = time.perf_counter() - started
        if profiler is not None:
            profiler.run(compiled.graph, log, started, seconds, run_options.logid if run_options else self._logid)
        return [compiled.constant_outputs[n] if n in compiled.constant_outputs else results[compiled.output_ids[n]]
                for n in names]

    def get_modelmeta(self) -> ModelMetadata:
        """The model's metadata, as onnxruntime's ``get_modelmeta`` gives it.

        Example:
            >>> InferenceSession("examples/resnet_block.onnx").get_modelmeta().graph_name
            'resnet_block'
        """
        return self._meta

    def get_providers(self) -> list[str]:
        """The providers the session runs with: ``["CPUExecutionProvider"]``.

        Example:
            >>> InferenceSession("examples/resnet_block.onnx").get_providers()
            ['CPUExecutionProvider']
        """
        return list(self._providers)

    def get_provider_options(self) -> dict:
        """Each provider's options (the CPU provider takes none).

        Example:
            >>> InferenceSession("examples/resnet_block.onnx").get_provider_options()
            {'CPUExecutionProvider': {}}
        """
        return {name: {} for name in self._providers}

    def get_session_options(self) -> SessionOptions:
        """The ``SessionOptions`` the session was made with.

        Example:
            >>> InferenceSession("examples/resnet_block.onnx", num_threads=1).get_session_options().log_severity_level
            2
        """
        return self._options

    def end_profiling(self) -> str:
        """Stop profiling and write the profile (``graph_api.profiler``): its path, "" when
        the session does not profile (or no longer does), as onnxruntime answers.

        Example:
            >>> InferenceSession("examples/resnet_block.onnx").end_profiling()
            ''
        """
        profiler, self._profiler = self._profiler, None
        return "" if profiler is None else profiler.write()

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
            array = input_feed[arg.name]
            if type(array) is not np.ndarray or not array.flags.c_contiguous:     # may copy: not over the limit
                array = checked_array(f"input {arg.name!r}", array)
            want = _array_dtype(arg.type)
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
                if isinstance(dim, str) and dim != ANONYMOUS_DIM and bound.setdefault(dim, n) != n:
                    raise GraphError(f"input {arg.name!r} dim {k} ({dim!r}) is {n}, but {dim!r} is {bound[dim]} in "
                                     f"another input of this run")
            arrays.append(array)
        return arrays

    def _compiled_for(self, key: tuple, severity: int) -> "_Compiled":
        with self._lock:
            compiled = self._compiled.get(key)
            if compiled is not None:
                self._compiled.move_to_end(key)
                return compiled
        if not self._source.can_compile:
            raise GraphError(f"this saved session holds no compiled graph for input shapes {[list(s) for s in key]} "
                             f"and no model to compile one from (it has {[[list(s) for s in k] for k in self._compiled]})")
        compiled = self._compile(self._source, key, severity)
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
                                "max": self._max, "strict": self._strict, "target": self._target,
                                "level": self._level, "meta": self._meta}, protocol=5,
                               buffer_callback=buffers.append)
        raw, order = _distinct([b.raw() for b in buffers])
        digest = hashlib.sha256()
        with atomic_write(path) as f:       # never in place: a session loaded from path maps it
            def write(data):
                digest.update(data)
                f.write(data)
            write(SAVE_MAGIC + _PREFIX.pack(SAVE_FORMAT, len(header)) + header)
            write(_LENGTHS.pack(len(payload), len(raw)) + b"".join(_LENGTH.pack(len(r)) for r in raw) +
                  _LENGTH.pack(len(order)) + b"".join(_LENGTH.pack(k) for k in order) + payload)
            for r in raw:
                write(bytes(-f.tell() % BUFFER_ALIGN))
                write(r)
            f.write(digest.digest())


def load_compiled(path, sess_options: SessionOptions | None = None) -> InferenceSession:
    """The session ``InferenceSession.save`` wrote to ``path``, run with no LLVM compile and no
    tuning database (a model with symbolic dims compiles shapes it was not saved with, which
    needs LLVM); GraphError naming the file when it cannot be used here. The file is mapped,
    not read: its constants are used where they lie; a run after another program rewrote the file
    in place is a GraphError naming it (see the module docstring; ``save`` never does that).
    ``sess_options``: its threads, profiling and log level; its ``graph_optimization_level``,
    when set, must be the one the file was compiled at.

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
    version = SAVE_FORMAT
    if len(data) >= len(SAVE_MAGIC) + _PREFIX.size and _PREFIX.unpack_from(data, len(SAVE_MAGIC))[0] in SAVE_FORMATS:
        version = _PREFIX.unpack_from(data, len(SAVE_MAGIC))[0]       # an older format this tilefuse still reads
    header, body, end = read_envelope(data, SAVE_MAGIC, version, "saved tilefuse session", where, GraphError)
    try:
        target, inputs, outputs = _checked_header(header)
        payload, buffers = _sections(body, end, version)
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
    session._providers = checked_providers(None, None)
    session._take_options(sess_options, None)
    session._level = state.get("level", GraphOptimizationLevel.ORT_ENABLE_ALL)
    session._meta = state.get("meta", ModelMetadata())
    if "graph_optimization_level" in session._options.set_fields and \
            session._options.graph_optimization_level != session._level:
        raise OptionError(f"{where} was compiled at {session._level.name}; a loaded session keeps it (its "
                          f"sess_options ask for {session._options.graph_optimization_level.name})")
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


def _distinct(raw: list) -> tuple:
    """(the distinct buffers of ``raw``, by content, in first-seen order; the index in them
    of each buffer of ``raw``).

    Example:
        >>> _distinct([memoryview(b"ab"), memoryview(b"cd"), memoryview(b"ab")])[1]
        [0, 1, 0]
    """
    first, distinct, order = {}, [], []
    for r in raw:
        key = (r.nbytes, blake2b(r).digest())
        if key not in first:
            first[key] = len(distinct)
            distinct.append(r)
        order.append(first[key])
    return distinct, order


def _sections(body: memoryview, at: int, version: int = SAVE_FORMAT) -> tuple:
    """(payload, buffers) of a saved file's ``body`` after its header, which ends at ``at``:
    views into the file, each buffer where ``save`` aligned it (in format 2, each of the
    payload's buffers is one of the distinct buffers written, by the table after their sizes)."""
    payload_size, count = _LENGTHS.unpack_from(body, at)
    at += _LENGTHS.size
    sizes = [_LENGTH.unpack_from(body, at + k * _LENGTH.size)[0] for k in range(count)]
    at += count * _LENGTH.size
    order = list(range(count))
    if version >= 2:
        (uses,) = _LENGTH.unpack_from(body, at)
        if uses > len(body):
            raise ValueError("the buffer table is longer than the file")
        order = [_LENGTH.unpack_from(body, at + _LENGTH.size * (1 + k))[0] for k in range(uses)]
        at += _LENGTH.size * (1 + uses)
        if any(k >= count for k in order):
            raise ValueError("the buffer table names a buffer that is not in the file")
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
    return payload, [buffers[k] for k in order]


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
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise ModelFileNotFound(f"no model file {path!r}")
        if os.path.isdir(path):
            raise GraphError(f"{path!r} is a folder, not a model file (an ONNX model, or a oneDNN Graph .json)")
        if path.endswith(".json"):
            return _GraphSource(load_json(path), owned=True)
    return _OnnxSource.of(model)


class _GraphSource:
    """A oneDNN graph (its shapes are static): tensors named by their ids."""

    can_compile = True

    def __init__(self, graph: Graph, owned: bool):
        if not graph.is_finalized:
            raise GraphError("InferenceSession takes a finalized Graph; call graph.finalize() first")
        self.graph, self.owned = graph, owned      # owned: loaded here, so its weights may go once packed
        self.meta = ModelMetadata()

    @property
    def static_shapes(self):
        return tuple(tuple(t.shape) for t in self._inputs())

    def _inputs(self):
        bound = self.graph.constant_values
        return [t for t in self.graph.get_input_ports() if t.id not in bound]

    def signature(self):
        def arg(t):
            return NodeArg(str(t.id), list(t.shape), f"tensor({ORT_TYPES.get(t.dtype, t.dtype.value)})")
        return [arg(t) for t in self._inputs()], [arg(t) for t in self.graph.get_output_ports()]

    def compile(self, shapes, configs, strict, target, level) -> _Compiled:
        order = {t.id: k for k, t in enumerate(self._inputs())}
        policy, passes = GRAPH_PASSES[level]
        compiled = compile_graph(self.graph, configs=configs, strict=strict, target=target, owned=self.owned,
                                 policy=policy, passes=passes)
        return _Compiled(compiled, [order[t.id] for t in compiled.input_ports],
                         {str(tid): tid for tid in compiled.output_ids}, {})

    def saved(self):
        return _Saved()


class _OnnxSource:
    """An ONNX model, kept while it has symbolic dims (each new shape compiles from it): its
    proto without the large weights, which stay in the model's file (or bytes) until an import
    reads them."""

    can_compile = True

    def __init__(self, loaded, inputs, outputs):
        self.loaded = loaded            # importer.LoadedModel; pickled whole, as one ModelProto's bytes
        self.inputs, self.outputs = inputs, outputs

    @classmethod
    def of(cls, model) -> "_OnnxSource":
        from .onnx.importer import check_model, load_model
        path = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
        loaded = load_model(model)
        proto, where = loaded.proto, loaded.where
        check_model(loaded, path)
        initializers = {t.name for t in proto.graph.initializer}
        inputs = [_node_arg(vi, where) for vi in proto.graph.input if vi.name not in initializers]
        outputs = [_node_arg(vi, where) for vi in proto.graph.output]
        source = cls(loaded, inputs, outputs)
        source.meta = ModelMetadata(proto.producer_name, proto.graph.name, proto.domain, proto.doc_string,
                                    proto.graph.doc_string, proto.model_version,
                                    {p.key: p.value for p in proto.metadata_props})
        return source

    def __reduce_ex__(self, protocol):
        """The model whole, as one ModelProto's bytes (the weights put back into a copy: the
        pickle stands alone); out of band with pickle protocol 5, so that a saved session's
        file holds them as a buffer its loader maps instead of copying and parsing."""
        import onnx
        proto = self.loaded.proto
        if self.loaded.weights is not None:
            proto = onnx.ModelProto()
            proto.CopyFrom(self.loaded.proto)
            self.loaded.weights.fill(proto)
        data = proto.SerializeToString()
        blob = pickle.PickleBuffer(data) if protocol >= 5 else data
        return _OnnxSource.__new__, (_OnnxSource,), dict(self.__dict__, loaded=(blob, self.loaded.where))

    def __setstate__(self, state):
        """The model back from its bytes (a mapped buffer of a saved file): its large weights
        stay in them (``weights.split_weights``), read when a new shape is imported."""
        from .onnx.importer import split_model
        blob, where = state["loaded"]
        data = memoryview(blob).cast("B")
        self.__dict__.update(state, loaded=split_model(data, where, data))

    @property
    def static_shapes(self):
        if all(arg.shape is not None and all(isinstance(d, int) for d in arg.shape) for arg in self.inputs):
            return tuple(tuple(arg.shape) for arg in self.inputs)
        return None

    def signature(self):
        return self.inputs, self.outputs

    def compile(self, shapes, configs, strict, target, level) -> _Compiled:
        from .onnx.importer import import_onnx
        bound = None if self.static_shapes is not None else \
            {arg.name: shape for arg, shape in zip(self.inputs, shapes)}     # this run's shapes
        imp = import_onnx(self.loaded, input_shapes=bound)
        if self.static_shapes is not None:  # compiled once: the model (its weights are copied) goes now
            if self.loaded.weights is not None:
                self.loaded.weights.close()
            self.loaded = None
        policy, passes = GRAPH_PASSES[level]
        compiled = compile_graph(imp.graph, configs=configs, strict=strict, target=target, owned=True, policy=policy,
                                 passes=passes)
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


ANONYMOUS_DIM = "?"     # paddle2onnx names every unknown dim so (PaddleOCR's H and W): not one symbol


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


@functools.cache
def _array_dtype(ort_type: str) -> np.dtype:
    """The numpy dtype of arrays of an input of ``ort_type`` ("tensor(float)": float32)."""
    return np.dtype(_numpy_type(ort_type))


def _numpy_type(ort_type: str):
    name = ort_type[len("tensor("):-1]
    return {"float": "float32", "double": "float64", "string": "object"}.get(name, name)
