"""Compiling a whole graph: the pipeline from a finalized graph to a ``CompiledGraph``.

``compile_graph`` runs, in order:

1. ``pipeline.partition``: the graph through the graph pipeline (shapes, normalization, the
   passes) and cut into the compiler's partitions, a ``PartitionedGraph(ir, partitions)``;
2. per partition: a view (a lone reshape, or a slice that is a contiguous block of its input:
   no kernel, ``view_of``), the reference interpreter (unsupported), or a kernel job
   (``build.kernel_job``: the partition lowered once, its template and the config a
   ``ConfigSource`` chose);
3. ``build.build_all(jobs)``: every job's kernel, from the caches or built (in worker
   processes);
4. the steps (``steps.Step``), then ``after_build.AFTER_BUILD``: concat in place, settle
   constants, memory plan;
5. ``CompiledGraph``: what runs and pickles.

Example:
    >>> import numpy as np
    >>> from tilefuse.graph_api import load_json
    >>> compiled = compile_graph(load_json("examples/mlp.json"))
    >>> [step.kind for step in compiled.steps]
    ['complex', 'complex', 'complex', 'reduction']
    >>> feeds = {t.id: np.ones(t.shape, "float32") for t in compiled.input_ports}
    >>> [y.shape for y in compiled.run(feeds).values()]
    [(32, 10)]
"""
from __future__ import annotations

import warnings

from tilefuse.schedule.config_source import config_sources
from tilefuse.tensorir.errors import Unsupported
from tilefuse.tensorir.runtime.target import as_target

from .after_build import Program, run_after_build
from .caller_warnings import warned_at_caller
from .build import build_all, kernel_caches, kernel_job
from .compiled_graph import CompiledGraph
from .logical_tensor import GraphError
from .op import OpKind
from .ops.movement import slice_view
from .pipeline import partition
from .passes import DEFAULT
from .passes.dead_code import default_outputs
from .passes.half_floats import converts_at_edge
from .engine import Engine
from .steps import Step


def compile_graph(graph, engine: Engine | None = None, configs=None, kernel_cache=None,
                  strict: bool = False, target=None, *, owned: bool = False, policy: str = "fusion",
                  passes=DEFAULT) -> CompiledGraph:
    """Compile every supported partition of a finalized graph (the steps are the module's).

    ``target``: the machine to generate code for (a ``tensorir.runtime.target.Target`` or its
    spelling, ``"llvm -mcpu=skylake-avx512"``), default the engine's, which defaults to this
    host. A graph compiled for a target whose features this host lacks can be pickled or saved
    and run where they are (its constant partitions then run, and its weights are packed, at
    the first run there), never here: ``run`` refuses it naming the missing features.

    ``configs`` is a ``schedule.ConfigSource``: each partition's template gets the config it
    chooses, or its default config where it has none. ``autotune.HistoryBest(db)`` chooses the
    best config recorded for each workload on this CPU (warning about every workload without a
    record; ``strict=True``: raising ``autotune.MissingTuningRecord`` instead) and keeps the
    compiled kernels in the database. Without ``configs``, the source made active by
    ``autotune.apply_history_best`` (``schedule.using_configs``) is used, else the defaults. Its warnings point at the caller's
    line (``caller_warnings``): the workloads without a record as one warning.
    ``kernel_cache``: a ``tensorir.runtime.KernelCache`` (default: the config source when it is
    one); under it, kernels are kept on disk for other processes (``tensorir.runtime.disk_cache``,
    in ``$TILEFUSE_CACHE_DIR``; ``off`` turns it off). Ops without a compiled kernel (an unsupported kind or attribute, an ONNX Wildcard)
    run in the numpy reference interpreter with a warning naming them; with ``strict=True``
    such a graph is refused instead (``Unsupported``, naming the ops). ``owned``: the graph is
    the compile's to empty (a session's own import), so each weight is dropped once packed.
    ``policy`` and ``passes``: how ``pipeline.partition`` optimizes and cuts the graph (the
    default: every pass, ops fused; "debug": no pass, each op alone).

    Example:
        >>> import numpy as np
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> x = LogicalTensor(0, DataType.f32, (2, 3)); y = LogicalTensor(1, DataType.f32, (2, 3))
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.ReLU, [x], [y])); g.finalize()
        >>> compile_graph(g).run({0: np.array([[-1, 2, -3], [4, -5, 6]], "float32")})[1].tolist()
        [[0.0, 2.0, 0.0], [4.0, 0.0, 6.0]]
    """
    return warned_at_caller(_compile_graph, graph, engine, configs, kernel_cache, strict, target, owned, policy,
                            passes)


def _compile_graph(graph, engine, configs, kernel_cache, strict, target, owned, policy, passes) -> CompiledGraph:
    """``compile_graph``'s work, its warnings raised where they arise."""
    engine = Engine(target=target) if engine is None else engine
    if target is not None and as_target(target) != engine.target:
        raise GraphError(f"compile_graph: target {as_target(target)} differs from the engine's {engine.target}")
    partitioned = partition(graph, policy, passes)
    ir, partitions = partitioned.ir, partitioned.partitions
    bound = {**graph.constant_values, **ir.constant_values}    # folded constants are inputs too
    fallback = [f"{op.kind.value} (op {op.id})" for p in partitions if not p.is_supported() for op in p.ops
                if not converts_at_edge(op) and op.kind is not OpKind.End]   # half floats converted at the edges
    if strict and fallback:
        raise Unsupported(f"strict: {len(fallback)} op(s) would run in the numpy reference interpreter, not "
                          f"compiled: {', '.join(fallback)}")
    output_ids = default_outputs(graph)        # End ops name the outputs where there are any
    graph_outputs = set(output_ids)
    views = [view_of(p, graph_outputs) for p in partitions]
    sources = config_sources(configs)
    jobs = {k: kernel_job(p, sources, engine.target) for k, (p, view) in enumerate(zip(partitions, views))
            if view is None and p.is_supported()}
    built = dict(zip(jobs, build_all(list(jobs.values()), kernel_caches(sources, kernel_cache))))
    steps = [Step.viewing(k, p, views[k]) if views[k] is not None else
             Step.compiled(k, p, built[k], jobs[k].config) if k in built else Step.interpreted(k, p)
             for k, p in enumerate(partitions)]
    if fallback:
        warnings.warn(f"running {len(fallback)} op(s) in the numpy reference interpreter: "
                      f"{', '.join(fallback)}", stacklevel=2)
    chosen_configs = {job.signature: job.config for job in jobs.values()}
    described = ir.tensors                  # with the shapes inferred
    outputs = [described.get(tid) or graph.tensor(tid) for tid in output_ids]
    input_ports = [t for t in graph.get_input_ports() if t.id not in bound]
    limits = index_limits(graph, {t.id for t in input_ports})
    if owned:       # ours to empty: each weight is dropped once packed, so weights are held about once
        graph.release_constant_values()
    del partitioned, ir, partitions, jobs, built
    program = run_after_build(Program(steps, bound, output_ids, runs_here=engine.target.cannot_run_here() is None))
    return CompiledGraph(program, input_ports, outputs, chosen_configs, engine, strict, limits)


def index_limits(graph, fed: set) -> dict:
    """{input id: (n, what)} for the fed inputs that a Gather takes as indices along an axis of
    length n (the embedding lookup of ids, token types and positions): the run refuses a value
    outside [-n, n), as onnxruntime does, where a kernel would clamp it. Indices a graph
    computes are not checked.

    Example:
        >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
        >>> table = LogicalTensor(0, DataType.f32, (2, 4)); ids = LogicalTensor(1, DataType.s64, (3,))
        >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Gather, [table, ids], [LogicalTensor(2, DataType.f32, (3, 4))],
        ...                              {"axis": 0}, name="embed")); g.finalize()
        >>> index_limits(g, {0, 1})
        {1: (2, "Gather 'embed' (axis 0)")}
    """
    limits = {}
    for op in graph.ops:
        if op.kind is not OpKind.Gather or len(op.inputs) < 2 or op.inputs[1].id not in fed:
            continue
        data = op.inputs[0]
        if not data.is_known():
            continue
        axis = op.attrs.get("axis", 0)
        axis = axis + len(data.shape) if axis < 0 else axis
        what = f"Gather {op.name!r} (axis {axis})" if op.name else f"Gather (op {op.id}, axis {axis})"
        n = int(data.shape[axis])
        if op.inputs[1].id not in limits or n < limits[op.inputs[1].id][0]:
            limits[op.inputs[1].id] = (n, what)
    return limits


def view_of(partition, graph_outputs: set):
    """(input id, output id, numpy index, shape) when ``partition`` is a lone StaticReshape or a
    lone Slice whose output is a view of its input (``slice_view``), and its output no graph
    output (the caller owns those); else None."""
    ops = partition.ops
    if len(ops) != 1 or not ops[0].outputs or ops[0].outputs[0].id in graph_outputs or \
            not ops[0].outputs[0].is_known():
        return None
    op = ops[0]
    if op.kind is OpKind.StaticReshape:
        index = ()
    elif op.kind is OpKind.Slice:
        index = slice_view(op)
    else:
        return None
    return None if index is None else (op.inputs[0].id, op.outputs[0].id, index, tuple(op.outputs[0].shape))
