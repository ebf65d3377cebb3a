"""Building a partition's kernel: lowering to a compute DAG, the template of its class, the
config a ``ConfigSource`` chooses, and the caches in front of LLVM.

``build_partition`` is the compile policy of ``Partition.compile``:
- the config comes from ``configs`` (a ``schedule.ConfigSource``), else from the innermost
  source made active with ``schedule.using_configs`` (``autotune.apply_history_best``), else
  the template's default;
- built kernels are kept in a bounded in-process LRU cache by partition signature and config,
  and in a ``tensorir.runtime.KernelCache`` (``kernel_cache``, else the config source when it
  is one, as ``autotune.HistoryBest`` is) so another process skips LLVM.

Example:
    >>> # kernel, arg_positions, shapes, config = build_partition(p, inputs, configs=None)
"""
from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os

from tilefuse.schedule import template_for
from tilefuse.schedule.config_source import ConfigSource, active_sources
from tilefuse.tensorir.runtime import artifact
from tilefuse.tensorir.runtime.kernel_cache import KernelCache, LRUCache, cache_key

from .lowering import placeholder_for, lower_op

MEMORY_CACHE_SIZE = 1024
"""Built kernels kept in process (a model's distinct partitions fit many times over)."""

_built = LRUCache(MEMORY_CACHE_SIZE)


def clear_memory_cache() -> None:
    """Forget the kernels built in this process (as a new process would start).

    Example:
        >>> clear_memory_cache()
    """
    _built.clear()


def build_partition(partition, inputs, configs: ConfigSource | None = None,
                    kernel_cache: KernelCache | None = None):
    """(kernel, argument positions, output shapes, config) for ``partition`` compiled with the
    input logical tensors ``inputs`` (in port order). ``config`` is the one a source chose, or
    None for the template's default. Argument positions are ("in" | "out", port index).

    Example:
        >>> # kernel, args, shapes, config = build_partition(p, p.get_input_ports())
    """
    sources = [configs] if configs is not None else list(reversed(active_sources()))
    if kernel_cache is None:
        kernel_cache = next((s for s in sources if isinstance(s, KernelCache)), None)
    signature = partition_signature(partition, inputs)
    if not sources and kernel_cache is None:          # the default config: no lowering to look it up
        built = _built.get((signature, None))
        if built is not None:
            return (*built, None)
    env, outs = lower_partition(partition, inputs)
    template = template_for(outs)
    config = next((c for c in (s.config_for(template) for s in sources) if c is not None), None)
    key = _workload(signature, config)
    built = _built.get(key)
    if kernel_cache is not None:            # the persistent cache gets what this process built too
        stored_key = cache_key(key)
        blob = kernel_cache.cached_kernel(stored_key)
        if built is None:
            built = _thaw(blob)
            blob = None if built is None else blob       # unusable here: replaced below
        if blob is None:
            built = built or _build(partition, env, outs, template, config)
            kernel_cache.cache_kernel(stored_key, _freeze(built))
    built = built or _build(partition, env, outs, template, config)
    _built.put(key, built)
    return (*built, config)


def build_partitions(partitions, configs: ConfigSource | None = None, kernel_cache: KernelCache | None = None,
                     workers: int | None = None) -> int:
    """Build the kernels of ``partitions`` that no cache holds yet (each distinct one once) in
    ``workers`` forked processes (default: the CPUs this process may use), and keep them in
    this process's cache, where ``build_partition`` then finds them; returns how many were
    built. Configs are chosen here, as ``build_partition`` chooses them. A kernel a worker
    could not build (an error, a worker that died) is left to ``build_partition``, which
    builds it (or raises) in this process. Nothing happens with fewer than two to build.

    Example:
        >>> # build_partitions([p for p in graph.get_partitions() if p.is_supported()])
    """
    sources = [configs] if configs is not None else list(reversed(active_sources()))
    if kernel_cache is None:
        kernel_cache = next((s for s in sources if isinstance(s, KernelCache)), None)
    jobs = {}
    for partition in partitions:
        inputs = partition.get_input_ports()
        signature = partition_signature(partition, inputs)
        config = None
        if sources or kernel_cache is not None:
            config = next((c for c in (s.config_for(template_for(lower_partition(partition, inputs)[1]))
                                       for s in sources) if c is not None), None)
        key = _workload(signature, config)
        if key in jobs or _built.get(key) is not None or \
                (kernel_cache is not None and kernel_cache.cached_kernel(cache_key(key)) is not None):
            continue
        jobs[key] = (partition, config)
    workers = min(len(os.sched_getaffinity(0)) if workers is None else workers, len(jobs))
    if workers < 2:
        return 0
    global _JOBS
    _JOBS = list(jobs.values())
    built = 0
    try:
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            for key, blob in zip(jobs, pool.map(_build_job, range(len(_JOBS)))):
                thawed = _thaw(blob)
                if thawed is not None:
                    _built.put(key, thawed)
                    built += 1
    except concurrent.futures.process.BrokenProcessPool:
        pass                            # a worker died: what is missing is built here
    finally:
        _JOBS = []
    return built


_JOBS: list = []
"""The (partition, config) pairs ``build_partitions`` hands its forked workers, by index."""


def _build_job(index: int) -> bytes | None:
    """In a worker: the artifact of job ``index`` built, or None when it cannot be built."""
    partition, config = _JOBS[index]
    try:
        env, outs = lower_partition(partition, partition.get_input_ports())
        return _freeze(_build(partition, env, outs, template_for(outs), config))
    except Exception:       # noqa: BLE001 - build_partition builds it again in the parent and raises there
        return None


def _workload(signature, config) -> tuple:
    """What a kernel is built from: the partition's signature and its config's JSON (None:
    the default); the in-process cache's key, and what the persistent cache's key hashes."""
    return signature, None if config is None else config.to_json()


def lower_partition(partition, inputs):
    """(tensor by logical tensor id, the output tensors): the partition's ops lowered to a
    tensorir compute DAG over one placeholder per input port.

    Example:
        >>> # env, outs = lower_partition(p, p.get_input_ports())
    """
    env = {port.id: placeholder_for(t) for port, t in zip(partition.input_ports, inputs)}
    for op in partition.ops:
        for t, out in zip(op.outputs, lower_op(op, [env[t.id] for t in op.inputs])):
            env[t.id] = out
    return env, [env[p.id] for p in partition.output_ports]


def partition_signature(partition, inputs):
    """Structural key: op kinds, attributes, wiring with local tensor numbers and output data
    types, and the input metadata (constant inputs are prepacked); the same partition
    anywhere compiles once.

    Example:
        >>> # partition_signature(p, p.get_input_ports())
    """
    local = {}
    for p in partition.input_ports:
        local.setdefault(p.id, len(local))
    for op in partition.ops:
        for t in op.outputs:
            local.setdefault(t.id, len(local))
    ops = tuple((op.kind.value, json.dumps(op.attrs, sort_keys=True, default=str),
                 tuple(local[t.id] for t in op.inputs),
                 tuple((local[t.id], t.dtype.value) for t in op.outputs))
                for op in partition.ops)
    outs = tuple(local[t.id] for t in partition.output_ports)
    return ops, outs, tuple((t.dtype.value, t.shape, p.property_type.value)
                            for p, t in zip(partition.input_ports, inputs))


def _build(partition, env, out_tensors, template, config):
    """(kernel, argument positions, output shapes)."""
    config = template.default_config() if config is None else config
    kernel = template.build(config, name=f"partition_{partition.id}")   # constant inputs prepacked
    # arguments as port positions, so a cached kernel serves any partition of this shape
    position = {id(env[p.id].op): ("in", k) for k, p in enumerate(partition.input_ports)}
    position.update({id(t.op): ("out", k) for k, t in enumerate(out_tensors)})
    return kernel, [position[id(t.op)] for t in template.args], [tuple(t.shape) for t in out_tensors]


def _freeze(built) -> bytes:
    """A built partition as a kernel artifact whose metadata holds the argument positions and
    output shapes."""
    kernel, arg_positions, shapes = built
    return artifact.dumps(kernel, {"args": arg_positions, "shapes": shapes})


def _thaw(blob: bytes | None):
    """The built tuple from ``_freeze``'s artifact; None for no blob or one that cannot be
    used here (another target or format version, damaged): it is rebuilt then."""
    if blob is None:
        return None
    try:
        kernel, meta = artifact.loads(blob, "cached kernel")
        return kernel, [(role, k) for role, k in meta["args"]], [tuple(s) for s in meta["shapes"]]
    except (artifact.ArtifactError, KeyError, TypeError, ValueError):
        return None
