"""A session's profile: every run as Chrome-trace events, in the format onnxruntime's profiler
writes (a JSON list of ``{"cat", "name", "ph": "X", "ts", "dur", "pid", "tid", "args"}``, times
in microseconds from the session's start; chrome://tracing and Perfetto open it).

Events: ``session_initialization`` (cat "Session": the compile of the shapes known at start),
``compile`` (cat "Session": each compile of a set of input shapes, at start or in a run that
brings new ones), per run ``model_run`` (cat "Session"; its args hold the peaks shares are of), and per step of
the run one event of cat "Node": the partition's kernel (or its reference-interpreter run) timed
alone. Its ``name`` is the partition's first ONNX node name (``+N`` for the others: a name
in parentheses, an op no node of the model made, comes after them); ``args``:

* ``nodes``: the ONNX node names the partition covers (a model's ops carry their node's
  name, ``/layer1/conv1/Conv``; an op a pass made is named after the node it stands for, a
  layout transpose ``(layout transpose)``), ``op_name``: their kinds;
* ``partition``, ``kind``, ``runs`` ("kernel" or "reference"), ``provider``;
* ``input_type_shape`` / ``output_type_shape`` as onnxruntime writes them
  (``[{"float": [1, 64, 56, 56]}]``);
* ``flop``, ``bytes``: estimates, not counts (``partition_cost``), and what they make of the
  step's time: ``gflops`` and ``fma_share`` (of the FMA peak), ``gbs`` and
  ``bandwidth_share`` (of the copy bandwidth), ``bound``: which of the two the roofline
  model says limits the step ("fma" when its FLOPs per byte reach the peaks' ratio, else
  "memory"). The peaks are measured once per process (``machine.peaks``) or given. A
  step whose data stays in the caches can pass 100% of a bandwidth measured on arrays far
  larger than them.

Example:
    >>> import json, os, tempfile
    >>> import numpy as np
    >>> from tilefuse.graph_api import InferenceSession
    >>> from tilefuse.graph_api.session_options import SessionOptions
    >>> options = SessionOptions(); options.enable_profiling = True
    >>> options.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "block")
    >>> sess = InferenceSession("examples/resnet_block.onnx", sess_options=options)
    >>> _ = sess.run(None, {"input": np.ones((1, 16, 32, 32), "float32")})
    >>> events = json.load(open(sess.end_profiling()))
    >>> [e["name"] for e in events if e["cat"] == "Node"][0], sorted(events[-1]["args"])[:4]
    ('(layout transpose)', ['bandwidth_share', 'bound', 'bytes', 'flop'])
"""
from __future__ import annotations

import json
import math
import os
import threading
import time
import weakref

from .logical_tensor import DataType
from .op import OpKind
from .ops.attention import read_shapes
from .ops.schema import get_attr

ORT_TYPES = {DataType.f32: "float", DataType.f64: "double", DataType.f16: "float16", DataType.s32: "int32", DataType.s64: "int64",
             DataType.s8: "int8", DataType.u8: "uint8", DataType.boolean: "bool", DataType.bf16: "bfloat16",
             DataType.u32: "uint32", DataType.u64: "uint64"}
"""Data types as onnxruntime spells them (``tensor(float)`` in a NodeArg, ``float`` in a profile)."""

_MULTIPLY_ADDS = {OpKind.MatMul, OpKind.Convolution, OpKind.ConvTranspose, OpKind.ScaledDotProductAttention}


def op_flop(op) -> int:
    """An estimate of an op's floating-point operations: 2 per multiply-add of a MatMul, a
    convolution or an attention's two products, one per element of the largest of its inputs
    and outputs for any other op (0 where a shape is unknown).

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> a = LogicalTensor(0, DataType.f32, (4, 8)); b = LogicalTensor(1, DataType.f32, (8, 2))
        >>> op_flop(Op(0, OpKind.MatMul, [a, b], [LogicalTensor(2, DataType.f32, (4, 2))]))
        128
    """
    tensors = op.inputs + op.outputs
    if not all(t.is_known() for t in tensors):
        return 0
    sizes = [math.prod(t.shape) for t in tensors]
    if op.kind not in _MULTIPLY_ADDS or len(op.inputs) < 2 or not op.outputs:
        return max(sizes, default=0)
    data, weights, out = op.inputs[0].shape, op.inputs[1].shape, op.outputs[0].shape
    if op.kind is OpKind.ScaledDotProductAttention:     # (..., Sq, Sk) scores, each a row of D then of Dv
        query, _, value = read_shapes(op)
        return 2 * (math.prod(out) // max(value[-1], 1)) * value[-2] * (query[-1] + value[-1])
    if op.kind is OpKind.MatMul:
        k = data[-2] if get_attr(op, "transpose_a") and len(data) > 1 else data[-1]
        return 2 * math.prod(out) * k
    channels_first = get_attr(op, "data_format") == "NCX"
    if op.kind is OpKind.Convolution:       # each output element: the weights of one output channel
        channels = out[1] if channels_first else out[-1]
        return 2 * math.prod(out) * math.prod(weights) // max(channels, 1)
    channels = data[1] if channels_first else data[-1]      # ConvTranspose: each input element scattered
    return 2 * math.prod(data) * math.prod(weights) // max(channels, 1)


def multiply_add_flop(ops) -> int:
    """The flops of the multiply-adds among ``ops`` (MatMul, convolutions, attention: what
    the FMA peak is a peak of), ``op_flop`` summed; elementwise ops count nothing.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> a = LogicalTensor(0, DataType.f32, (4, 8)); b = LogicalTensor(1, DataType.f32, (8, 2))
        >>> c, d = LogicalTensor(2, DataType.f32, (4, 2)), LogicalTensor(3, DataType.f32, (4, 2))
        >>> multiply_add_flop([Op(0, OpKind.MatMul, [a, b], [c]), Op(1, OpKind.ReLU, [c], [d])])
        128
    """
    return sum(op_flop(op) for op in ops if op.kind in _MULTIPLY_ADDS)


def partition_cost(step) -> dict:
    """What the profile says of a step (``graph_api.steps.Step``) besides its time: its
    ``nodes``, ``op_name``, ``kind``, ``runs``, the ``input_type_shape`` and
    ``output_type_shape`` of its ports, ``flop`` (``op_flop`` summed) and ``bytes`` (its
    ports' data read and written once: inputs, weights included, and outputs).

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> from tilefuse.graph_api.ir import GraphIR
        >>> from tilefuse.graph_api.ir_partition import partition_ir
        >>> from tilefuse.graph_api.steps import Step
        >>> t = [LogicalTensor(i, DataType.f32, (3,)) for i in range(2)]
        >>> cost = partition_cost(Step.interpreted(0, partition_ir(GraphIR([Op(0, OpKind.Abs, t[:1], t[1:],
        ...                                                                     name="/abs")])).partitions[0]))
        >>> cost["nodes"], cost["flop"], cost["bytes"], cost["input_type_shape"]
        (['/abs'], 3, 24, [{'float': [3]}])
    """
    made = {t.id for op in step.ops for t in op.outputs}
    inputs = {t.id: t for op in step.ops for t in op.inputs if t.id not in made}
    outputs = {t.id: t for op in step.ops for t in op.outputs if t.id in set(step.output_ids)}

    def typed(tensors):
        return [{ORT_TYPES.get(t.dtype, t.dtype.value): list(t.shape) if t.is_known() else None} for t in tensors]

    def size(tensors):
        return sum(math.prod(t.shape) * t.dtype.itemsize for t in tensors if t.is_known())
    names = list(dict.fromkeys(name for op in step.ops for name in op.covers))
    return {"nodes": sorted(names, key=lambda name: name.startswith("(")),       # the model's nodes first
            "op_name": "+".join(dict.fromkeys(op.kind.value for op in step.ops)),
            "partition": step.index, "kind": step.kind, "runs": "reference" if step.kernel is None else "kernel",
            "input_type_shape": typed(inputs.values()), "output_type_shape": typed(outputs.values()),
            "flop": sum(op_flop(op) for op in step.ops), "bytes": size(inputs.values()) + size(outputs.values())}


class Profiler:
    """The events of one session (see the module docstring), written by ``write``.
    ``peaks``: (FMA GFLOPS, copy GB/s) to report shares against; None: ``machine.peaks(threads)``
    at the first run recorded (``threads``: the session's thread count; None, the process's).

    Example:
        >>> profiler = Profiler("/tmp/example", peaks=(100.0, 10.0))
        >>> profiler.span("Session", "session_initialization", profiler.now(), 0.002)
        >>> [(e["name"], e["dur"]) for e in profiler.events]
        [('session_initialization', 2000)]
    """

    def __init__(self, prefix: str, peaks=None, threads: int | None = None):
        self.prefix, self.peaks, self.threads = prefix, peaks, threads
        self.events = []
        self.started = time.perf_counter()
        self.wall = time.localtime()
        self._lock = threading.Lock()
        self._costs = weakref.WeakKeyDictionary()      # compiled graph -> {partition index: partition_cost}

    def now(self) -> float:
        """The clock events are timed with (``time.perf_counter``).

        Example:
            >>> Profiler("p").now() > 0
            True
        """
        return time.perf_counter()

    def span(self, cat: str, name: str, started: float, seconds: float, args: dict | None = None) -> None:
        """Add one complete event (ph "X") that began at ``started`` (``now()``'s clock).

        Example:
            >>> profiler = Profiler("p"); profiler.span("Session", "model_run", profiler.now(), 1e-3, {"logid": ""})
            >>> profiler.events[0]["ph"], profiler.events[0]["args"]
            ('X', {'logid': ''})
        """
        event = {"cat": cat, "pid": os.getpid(), "tid": threading.get_native_id(),
                 "dur": round(seconds * 1e6), "ts": round((started - self.started) * 1e6), "ph": "X",
                 "name": name, "args": args or {}}
        with self._lock:
            self.events.append(event)

    def run(self, graph, log: list, started: float, seconds: float, logid: str = "") -> None:
        """Add a run of ``graph`` (a ``CompiledGraph``): ``model_run`` and one event per entry
        of ``log`` ((partition index, started, seconds), as ``CompiledGraph.profile`` gives it).

        Example:
            >>> import numpy as np
            >>> from tilefuse.graph_api import compile_graph, load_json
            >>> graph = compile_graph(load_json("examples/mlp.json"))
            >>> _, log = graph.profile([np.ones(t.shape, "float32") for t in graph.input_ports])
            >>> profiler = Profiler("p", peaks=(100.0, 10.0)); profiler.run(graph, log, log[0][1], 1e-3)
            >>> [e["args"]["op_name"] for e in profiler.events[1:]]
            ['MatMul+Add+ReLU', 'MatMul+Add+ReLU', 'MatMul+Add', 'SoftMax']
        """
        if self.peaks is None:
            from .machine import peaks
            self.peaks = peaks(self.threads)
        gflops_peak, gbs_peak = self.peaks
        self.span("Session", "model_run", started, seconds,
                  {"peak_gflops": round(gflops_peak, 1), "peak_gbs": round(gbs_peak, 1),
                   **({"logid": logid} if logid else {})})
        costs = self._costs.get(graph)
        if costs is None:
            costs = self._costs[graph] = {step.index: partition_cost(step) for step in graph.steps}
        for index, begun, spent in log:
            cost = costs[index]
            nodes = cost["nodes"]
            gflops, gbs = cost["flop"] / spent / 1e9 if spent else 0.0, cost["bytes"] / spent / 1e9 if spent else 0.0
            fma, memory = gflops / gflops_peak, gbs / gbs_peak
            self.span("Node", nodes[0] + (f"+{len(nodes) - 1}" if len(nodes) > 1 else ""), begun, spent,
                      {**cost, "provider": "CPUExecutionProvider", "gflops": round(gflops, 3),
                       "gbs": round(gbs, 3), "fma_share": round(fma, 4), "bandwidth_share": round(memory, 4),
                       "bound": "fma" if cost["flop"] * gbs_peak >= cost["bytes"] * gflops_peak else "memory"})

    def write(self, path: str | None = None) -> str:
        """Write the events as JSON to ``path`` (default: the prefix, the start's date and
        time, ``.json``, as onnxruntime names its profiles); returns the path.

        Example:
            >>> import tempfile
            >>> profiler = Profiler(tempfile.mkdtemp() + "/run")
            >>> profiler.write().endswith(".json")
            True
        """
        if path is None:
            path = f"{self.prefix}_{time.strftime('%Y-%m-%d_%H-%M-%S', self.wall)}.json"
        with self._lock:
            events = list(self.events)
        with open(path, "w") as f:
            f.write("[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n")
        return path


def top_partitions(events: list, top: int = 10) -> list:
    """The partitions of a profile's "Node" events by their median time, most first, at most
    ``top``: dicts with ``name``, ``runs`` (its events), ``median_us`` (their lower median),
    ``args`` (of the event with that time: its rates and shares are those of the median run)
    and ``time_share`` (of the partitions' medians summed).

    Example:
        >>> events = [{"cat": "Node", "name": "a", "dur": 3, "args": {"partition": 0}},
        ...           {"cat": "Node", "name": "b", "dur": 1, "args": {"partition": 1}},
        ...           {"cat": "Node", "name": "a", "dur": 5, "args": {"partition": 0}}]
        >>> [(p["name"], p["runs"], p["median_us"], p["time_share"]) for p in top_partitions(events)]
        [('a', 2, 3, 0.75), ('b', 1, 1, 0.25)]
    """
    by_partition = {}
    for event in events:
        if event.get("cat") == "Node":
            by_partition.setdefault(event["args"]["partition"], []).append(event)
    rows = []
    for group in by_partition.values():
        middle = sorted(group, key=lambda e: e["dur"])[(len(group) - 1) // 2]
        rows.append({"name": middle["name"], "args": middle["args"], "runs": len(group), "median_us": middle["dur"]})
    total = sum(row["median_us"] for row in rows) or 1
    for row in rows:
        row["time_share"] = row["median_us"] / total
    rows.sort(key=lambda r: -r["median_us"])
    return rows[:top]
