"""End-to-end latency of the bundled ONNX models (``examples/resnet_block.onnx``,
``examples/transformer_encoder.onnx``) in one run, side by side:

* onnxruntime (CPU provider, default intra-op threads): the anchor, ratios are against it;
* torch, where installed: the same ONNX graph run op by op with ``torch.nn.functional``
  (``TorchOnnxModule``, a small translation of the ops these models use; eager, no_grad);
* tilefuse with the templates' default configs (``compile_graph(import_onnx(path).graph)``),
  fed by input name, each input random of its declared type;
* tilefuse tuned: ``autotune.tune(extract_tasks(graph), ...)`` with ``--trials`` measurements
  per task (xgb tuner) into a database under /tmp, then ``compile_graph(graph, configs=HistoryBest(db))``.

Every engine's output is checked against onnxruntime's before it is timed. The floor of the
ONNX issue is tuned tilefuse within 1.5x of onnxruntime; a model above it (or every model with
``--profile``) gets a per-partition breakdown of the tuned graph: each step of the
``CompiledGraph`` timed alone, the largest first, so the time can be traced to a partition.

Run: ``python benchmarks/bench_onnx.py [--trials 32] [--db /tmp/tilefuse_bench_onnx.db]
[--no-tune] [--profile] [--models resnet_block transformer_encoder]``; ``--models`` also takes
the light real models the onnx package ships (``--no-tune --models shufflenet densenet121``). The database persists
between runs, so a second run resumes and only re-times.
"""
from bench_session import measure
from common import (light_models, median_seconds, model_path, step_kinds, timed_interleaved,
                    unset_openblas_overrides)

unset_openblas_overrides()

import argparse  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MODELS = ("resnet_block", "transformer_encoder")
FLOOR = 1.5                                     # tuned tilefuse vs onnxruntime, from the issue
DEFAULT_DB = "/tmp/tilefuse_bench_onnx.db"


def busy_cpus(seconds: float = 0.5) -> float:
    """How many CPUs other processes keep busy, sampled over ``seconds`` from /proc/stat
    while this process sleeps (nan where /proc/stat is missing).

    Example:
        >>> busy_cpus(0.01) >= 0 or math.isnan(busy_cpus(0.01))
        True
    """
    def sample():
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        return sum(fields[:3]) + sum(fields[5:8]), sum(fields[:8])     # busy, total (jiffies)
    try:
        busy0, total0 = sample()
        time.sleep(seconds)
        busy1, total1 = sample()
    except OSError:
        return math.nan
    return (os.cpu_count() or 1) * (busy1 - busy0) / max(total1 - total0, 1)


# ---------------------------------------------------------------------------- torch anchor

class TorchOnnxModule:
    """An ONNX graph run op by op with torch functions (the ops of the bundled models: Conv,
    BatchNormalization, Relu, Add, Sub, Mul, Div, Erf, GlobalAveragePool, Flatten, Gemm,
    MatMul, Reshape, Transpose, Softmax, LayerNormalization). Initializers become torch
    tensors once; ``__call__(feeds)`` takes and returns numpy arrays by ONNX name. An op
    outside that list is a NotImplementedError naming it, raised when the module is built.

    Example:
        >>> import onnx, torch
        >>> h = onnx.helper
        >>> g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
        ...                  [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        ...                  [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
        >>> TorchOnnxModule(h.make_model(g))({"x": np.array([-1.0, 2.0], "float32")})["y"].tolist()
        [0.0, 2.0]
    """

    def __init__(self, model):
        import onnx
        import torch
        from onnx import numpy_helper
        self.torch = torch
        self.F = torch.nn.functional
        self.consts = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in model.graph.initializer}
        self.nodes = [(n.op_type, list(n.input), list(n.output),
                       {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}) for n in model.graph.node]
        self.inputs = [v.name for v in model.graph.input if v.name not in self.consts]
        self.outputs = [v.name for v in model.graph.output]
        unknown = sorted({op for op, *_ in self.nodes if not hasattr(self, "_op_" + op)})
        if unknown:
            raise NotImplementedError(f"no torch translation for ONNX op(s) {', '.join(unknown)}")
        self.runs = [(getattr(self, "_op_" + op), ins, outs, attrs) for op, ins, outs, attrs in self.nodes]

    def forward(self, tensors: dict) -> dict:
        """Run on torch tensors by name; returns the graph outputs by name."""
        values = {**self.consts, **tensors}
        for fn, ins, outs, attrs in self.runs:
            values[outs[0]] = fn([values[name] for name in ins], attrs)
        return {name: values[name] for name in self.outputs}

    def __call__(self, feeds: dict) -> dict:
        with self.torch.no_grad():
            out = self.forward({k: self.torch.from_numpy(v) for k, v in feeds.items()})
        return {k: v.numpy() for k, v in out.items()}

    def _op_Conv(self, x, a):
        pads = a.get("pads", [0] * 4)
        if pads[:2] != pads[2:]:
            raise NotImplementedError("asymmetric Conv pads")
        return self.F.conv2d(x[0], x[1], x[2] if len(x) > 2 else None, stride=a.get("strides", 1),
                             padding=pads[:2], dilation=a.get("dilations", 1), groups=a.get("group", 1))

    def _op_BatchNormalization(self, x, a):
        return self.F.batch_norm(x[0], x[3], x[4], x[1], x[2], False, 0.0, a.get("epsilon", 1e-5))

    def _op_Relu(self, x, a):
        return self.F.relu(x[0])

    def _op_Add(self, x, a):
        return x[0] + x[1]

    def _op_Sub(self, x, a):
        return x[0] - x[1]

    def _op_Mul(self, x, a):
        return x[0] * x[1]

    def _op_Div(self, x, a):
        return x[0] / x[1]

    def _op_Erf(self, x, a):
        return self.torch.erf(x[0])

    def _op_GlobalAveragePool(self, x, a):
        return x[0].mean(dim=tuple(range(2, x[0].dim())), keepdim=True)

    def _op_Flatten(self, x, a):
        axis = a.get("axis", 1)
        return x[0].reshape(int(np.prod(x[0].shape[:axis])), -1)

    def _op_Gemm(self, x, a):
        A = x[0].T if a.get("transA", 0) else x[0]
        B = x[1].T if a.get("transB", 0) else x[1]
        y = a.get("alpha", 1.0) * (A @ B)
        return y + a.get("beta", 1.0) * x[2] if len(x) > 2 else y

    def _op_MatMul(self, x, a):
        return self.torch.matmul(x[0], x[1])

    def _op_Reshape(self, x, a):
        return x[0].reshape([int(n) for n in x[1].tolist()])

    def _op_Transpose(self, x, a):
        return x[0].permute(*a.get("perm", range(x[0].dim() - 1, -1, -1)))

    def _op_Softmax(self, x, a):
        return self.torch.softmax(x[0], dim=a.get("axis", -1))

    def _op_LayerNormalization(self, x, a):
        axis = a.get("axis", -1) % x[0].dim()
        return self.F.layer_norm(x[0], x[0].shape[axis:], x[1], x[2] if len(x) > 2 else None, a.get("epsilon", 1e-5))


# ---------------------------------------------------------------------------- tilefuse

def _compile(graph, db=None):
    from tilefuse import autotune
    from tilefuse import graph_api
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = graph_api.compile_graph(graph, configs=None if db is None else autotune.HistoryBest(db))
    for w in caught:
        print(f"  warning: {str(w.message)[:200]}", file=sys.stderr)
    return compiled


def model_feeds(model, shapes: dict, seed: int = 0) -> dict:
    """Random feeds for a model's data inputs, each of its declared element type: floats from
    a standard normal, integers 0 or 1 (valid ids and masks for any vocabulary), bools at
    random.

    Example:
        >>> import onnx
        >>> h = onnx.helper
        >>> g = h.make_graph([], "g", [h.make_tensor_value_info("ids", onnx.TensorProto.INT64, [2, 3])], [])
        >>> f = model_feeds(h.make_model(g), {"ids": (2, 3)})["ids"]
        >>> f.dtype, f.shape
        (dtype('int64'), (2, 3))
    """
    from onnx import helper
    rng = np.random.default_rng(seed)
    types = {v.name: np.dtype(helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)) for v in model.graph.input}
    feeds = {}
    for name, shape in shapes.items():
        dtype = types[name]
        if dtype.kind == "f":
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[name] = rng.random(shape) > 0.5
        else:
            feeds[name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


def tune_graph(graph, name: str, trials_per_task: int, db_path: str) -> float:
    """Tune every task of ``graph`` with ``trials_per_task`` measurements each (shared by
    weight) into the database ``db_path``; returns the seconds it took (resumed records count,
    so a second run is quick).

    Example:
        >>> # tune_graph(graph_api.from_onnx("examples/resnet_block.onnx"), "resnet_block", 16, "/tmp/t.db")
    """
    from tilefuse import autotune
    tasks = autotune.extract_tasks(graph)
    started = time.monotonic()
    reports = autotune.tune(tasks, trials=trials_per_task * sum(t.weight for t in tasks), db=db_path,
                            log=f"/tmp/tilefuse_bench_onnx_{name}.jsonl", tuner="xgb", seed=0)
    seconds = time.monotonic() - started
    for r in reports:
        print(f"    {r.task.name[:44]:44} x{r.task.weight}  {r.trials + r.resumed:3d} trials  "
              f"default {r.default_cost * 1e3:8.3f} ms  tuned {r.best_cost * 1e3:8.3f} ms  ({r.speedup:.2f}x)")
    return seconds


def partition_profile(compiled, feeds: dict) -> list:
    """(step seconds, kernel seconds, step) for every step ``compiled`` runs, each timed on the
    values a full run gives it, the slowest step first. Each step is timed where the run
    reaches it: later steps reuse the memory plan's blocks, so the inputs of an early step
    are gone (or hold another tensor's bits, denormals included) once the run is over. The
    planned memory is put back after the timing, so a step that writes in place feeds the
    next step what one run would. The step time is what ``CompiledGraph.run`` pays for the
    partition (output allocation and the kernel call); the kernel time is the native call
    alone (nan for a partition run by the reference interpreter).

    Example:
        >>> # for step_s, kernel_s, step in partition_profile(compiled, feeds)[:5]: print(step.kind, step_s)
    """
    values = dict(compiled.bound)
    values.update({k: np.asarray(v) for k, v in feeds.items()})
    arena = compiled.memory.arena()
    blocks = list({id(a.base): a.base for a in arena.values() if a.base is not None}.values())
    slices = compiled._concat_slices(values, arena)
    rows = []
    for step in compiled._run_steps:
        kept = [block.copy() for block in blocks]
        step_seconds = median_seconds(lambda: step.run(values, slices, arena), repeat=7, min_seconds=0.1)
        kernel_seconds = math.nan
        if step.kernel is not None:
            outputs = {tid: np.empty(shape, dtype) for tid, shape, dtype in step.outputs}
            args = [outputs[key] if written else values[key] for written, key in step.args]
            kernel_seconds = median_seconds(lambda: step.kernel(*args), repeat=7, min_seconds=0.1)
        for block, copy in zip(blocks, kept):
            np.copyto(block, copy)
        values.update(step.run(values, slices, arena))
        rows.append((step_seconds, kernel_seconds, step))
    return sorted(rows, key=lambda row: -row[0])


def _describe(step) -> str:
    ops = [op.kind.value for op in step.ops]
    shapes = "x".join(str(n) for n in step.ops[-1].outputs[0].shape or ()) if step.ops else ""
    kinds = "+".join(ops) if len(ops) <= 6 else "+".join(ops[:5]) + f"+...({len(ops)} ops)"
    where = "view" if step.view is not None else "compiled" if step.kernel is not None else "REFERENCE (numpy)"
    return f"{step.kind:10} {where:8} {kinds} -> {shapes}"


# ---------------------------------------------------------------------------- one model

def parse_shape(text: str) -> tuple[int, ...]:
    """``1x3x640x640`` as a tuple of ints.

    Example:
        >>> parse_shape("1x3x48x320")
        (1, 3, 48, 320)
    """
    return tuple(int(v) for v in text.lower().split("x"))


def bench_model(name: str, args) -> dict:
    """Time one bundled model on every engine; returns {engine: seconds}."""
    import onnx
    import onnxruntime
    path = model_path(name)
    model = onnx.load(str(path))
    constant = {i.name for i in model.graph.initializer}
    shapes = {v.name: args.shape if args.shape and not all(d.dim_value for d in v.type.tensor_type.shape.dim)
              else tuple(d.dim_value for d in v.type.tensor_type.shape.dim)
              for v in model.graph.input if v.name not in constant}
    feeds = model_feeds(model, shapes)
    print(f"\n{name} ({path.stat().st_size / 1024:.0f} KB, {len(model.graph.node)} ONNX nodes, input "
          f"{' '.join('x'.join(map(str, v.shape)) for v in feeds.values())})")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)[0]
    engines = {f"onnxruntime {onnxruntime.__version__}": lambda: session.run(None, feeds)}
    try:
        import torch
        module = TorchOnnxModule(model)
        np.testing.assert_allclose(module(feeds)[model.graph.output[0].name], want, rtol=1e-3, atol=1e-3)
        tfeeds = {k: torch.from_numpy(v) for k, v in feeds.items()}

        def torch_run():
            with torch.no_grad():
                module.forward(tfeeds)
        engines[f"torch {torch.__version__} (op by op, {torch.get_num_threads()} threads)"] = torch_run
    except ImportError:
        print("  torch: not installed, skipped")
    except NotImplementedError as err:
        print(f"  torch: skipped: {err}")

    from tilefuse.graph_api.onnx import import_onnx
    started = time.monotonic()
    imp = import_onnx(str(path), input_shapes=shapes)
    graph = imp.graph
    default = _compile(graph)
    compile_seconds = time.monotonic() - started
    tf_feeds = {tid: feeds[name] for name, tid in imp.inputs if tid is not None}
    out_id = dict(imp.outputs)[model.graph.output[0].name]
    np.testing.assert_allclose(default.run(tf_feeds)[out_id], want, rtol=1e-3, atol=1e-3)
    kinds = step_kinds(default)
    print(f"  tilefuse: {len(kinds)} partitions ({', '.join(f'{kinds.count(k)} {k}' for k in sorted(set(kinds)))}), "
          f"import + compile {compile_seconds:.1f} s")
    engines["tilefuse default configs"] = lambda: default.run(tf_feeds)
    compiled = default
    if not args.no_tune:
        print(f"  tuning ({args.trials} trials per task, xgb, db {args.db}):")
        seconds = tune_graph(graph, name, args.trials, args.db)
        print(f"  tuned in {seconds:.0f} s")
        tuned = _compile(graph, db=args.db)
        np.testing.assert_allclose(tuned.run(tf_feeds)[out_id], want, rtol=1e-3, atol=1e-3)
        engines["tilefuse tuned"] = lambda: tuned.run(tf_feeds)
        compiled = tuned
    rows = timed_interleaved(engines, args.rounds)
    _print_rows(rows)
    with tempfile.TemporaryDirectory() as tmp:       # each in a process of its own; tilefuse's kernel cache empty
        np.savez(Path(tmp) / "feeds.npz", **feeds)
        fresh = {engine: measure(mode, path, Path(tmp) / "saved.tfm", Path(tmp) / "feeds.npz", Path(tmp) / "kernels")
                 for engine, mode in (("onnxruntime", "onnxruntime"), ("tilefuse", "cold"))}
    rows["peak RSS MB"] = {engine: r["peak_mb"] for engine, r in fresh.items()}
    rows["cold open s"] = {engine: r["open"] for engine, r in fresh.items()}
    print(f"  in fresh processes: peak RSS tilefuse {fresh['tilefuse']['peak_mb']:.0f} MB, onnxruntime "
          f"{fresh['onnxruntime']['peak_mb']:.0f} MB ({fresh['tilefuse']['peak_mb'] / fresh['onnxruntime']['peak_mb']:.2f}x); "
          f"import + compile {fresh['tilefuse']['open']:.1f} s, onnxruntime's session {fresh['onnxruntime']['open']:.1f} s")
    ours = rows.get("tilefuse tuned", rows["tilefuse default configs"])
    anchor = next(iter(rows.values()))
    verdict = "within" if ours <= FLOOR * anchor else "ABOVE"
    print(f"  floor: tilefuse {'tuned' if not args.no_tune else 'default'} is {ours / anchor:.2f}x onnxruntime's "
          f"latency ({verdict} the {FLOOR}x floor)")
    if args.profile or ours > FLOOR * anchor:
        profile = partition_profile(compiled, tf_feeds)
        steps = sum(row[0] for row in profile)
        kernels = sum(row[1] for row in profile if math.isfinite(row[1]))
        print(f"  per partition, each step timed alone: steps sum to {steps * 1e3:.3f} ms, their native kernels "
              f"to {kernels * 1e3:.3f} ms, end to end {ours * 1e3:.3f} ms (the rest: CompiledGraph.run's loop)")
        print(f"    {'step us':>8} {'kernel us':>9} {'share':>6}  partition")
        for step_seconds, kernel_seconds, step in profile[:args.top]:
            kernel = f"{kernel_seconds * 1e6:9.1f}" if math.isfinite(kernel_seconds) else f"{'-':>9}"
            print(f"    {step_seconds * 1e6:8.1f} {kernel} {step_seconds / steps * 100:5.1f}%  {_describe(step)}")
    return rows


def _print_rows(rows: dict) -> None:
    anchor = next(iter(rows.values()))
    width = max(len(k) for k in rows)
    print(f"  {'engine':{width}}  {'ms':>8}  vs onnxruntime")
    for engine, seconds in rows.items():
        print(f"  {engine:{width}}  {seconds * 1e3:8.3f}  {seconds / anchor:5.2f}x")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=32, help="tuning measurements per task (default 32)")
    parser.add_argument("--db", default=DEFAULT_DB, help=f"tuning database (default {DEFAULT_DB})")
    parser.add_argument("--no-tune", action="store_true", help="default configs only")
    parser.add_argument("--profile", action="store_true", help="per-partition times even within the floor")
    parser.add_argument("--top", type=int, default=12, help="partitions shown in a profile (default 12)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds, best kept (default 5)")
    parser.add_argument("--models", nargs="+", default=list(MODELS),
                        help="bundled examples (default), light models of the onnx package (e.g. shufflenet; all: "
                             "the examples and every light model) or "
                             ".onnx files (such as those pip packages ship)")
    parser.add_argument("--shape", type=parse_shape, default=None,
                        help="the data input's shape where the model leaves dims symbolic, e.g. 1x3x640x640")
    args = parser.parse_args(argv)
    known = set(MODELS) | set(light_models())
    if args.models == ["all"]:
        args.models = list(MODELS) + light_models()
    for name in args.models:
        if name not in known and not name.endswith(".onnx"):
            parser.error(f"unknown model {name!r}: one of {sorted(known)} or a path to an .onnx file")
    others = busy_cpus()
    print(f"{os.cpu_count()} CPUs ({others:.1f} kept busy by other processes); ratios are latency over "
          f"onnxruntime's (lower is better)")
    if others > 0.3:
        print("  warning: the machine is shared right now; parallel kernels (ours, onnxruntime's, torch's) "
              "slow down a lot when a CPU is taken")
    started = time.monotonic()
    results = {Path(name).stem[:26] if name.endswith(".onnx") else name: bench_model(name, args) for name in args.models}
    print(f"\nsummary (ms; ratio vs onnxruntime), whole run {time.monotonic() - started:.0f} s")
    extras = {model: {k: rows.pop(k) for k in ("peak RSS MB", "cold open s") if k in rows}
              for model, rows in results.items()}
    engines = list(dict.fromkeys(k for rows in results.values() for k in rows))
    width = max(len(e) for e in engines)
    print(f"  {'engine':{width}}  " + "  ".join(f"{m:>26}" for m in results))
    for engine in engines:
        cells = []
        for rows in results.values():
            anchor = next(iter(rows.values()))
            t = rows.get(engine, math.nan)
            cells.append(f"{t * 1e3:>15.3f} ({t / anchor:5.2f}x)" if math.isfinite(t) else f"{'-':>26}")
        print(f"  {engine:{width}}  " + "  ".join(f"{c:>26}" for c in cells))
    for what, unit in (("peak RSS MB", "MB"), ("cold open s", "s")):
        for engine in ("onnxruntime", "tilefuse"):
            cells = []
            for model in results:
                got = extras[model].get(what, {})
                value, anchor = got.get(engine, math.nan), got.get("onnxruntime", math.nan)
                cells.append(f"{value:>15.1f} ({value / anchor:5.2f}x)" if math.isfinite(value) else f"{'-':>26}")
            label = f"{engine} {'peak RSS MB' if unit == 'MB' else 'import+compile s' if engine == 'tilefuse' else 'session s'}"
            print(f"  {label:{width}}  " + "  ".join(f"{c:>26}" for c in cells))
    ratios = [rows.get("tilefuse tuned", rows.get("tilefuse default configs")) / next(iter(rows.values()))
              for rows in results.values() if "tilefuse default configs" in rows]
    if ratios:
        print(f"  geomean latency vs onnxruntime: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}x over "
              f"{len(ratios)} models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
