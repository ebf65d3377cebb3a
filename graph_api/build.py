"""Building the kernels of a graph's partitions: kernel jobs, and a map over caches and workers.

A ``KernelJob`` is one compiler partition (``ir_partition.IRPartition``) to build: its
signature, its compute DAG (the partition lowered once, when something first needs it), the
template of its class, the config a ``ConfigSource`` chose (None: the template's default) and
the target. ``kernel_job`` makes one; ``build_all`` builds a list of them:

1. each job's workload (signature, config and target) is looked up in the in-process LRU cache, then
   in the persistent caches (``kernel_caches``: ``kernel_cache``, else a config source that is
   one, as ``autotune.HistoryBest`` is; then the disk cache of ``tensorir.runtime.disk_cache``),
   so another process skips LLVM;
2. the distinct workloads no cache holds are built, in forked worker processes when there are
   two or more and no other thread runs in this process (a job a worker could not build is
   built again here, and raises here);
3. what was built goes into the in-process cache and into each persistent cache that lacked it.

Example:
    >>> from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind
    >>> from tilefuse.graph_api.pipeline import partition
    >>> x = LogicalTensor(0, DataType.f32, (4, 8)); y = LogicalTensor(1, DataType.f32, (4, 8))
    >>> g = Graph(); _ = g.add_op(Op(0, OpKind.Sigmoid, [x], [y])); g.finalize()
    >>> jobs = [kernel_job(p, []) for p in partition(g).partitions]
    >>> [(b.arg_positions, b.output_shapes) for b in build_all(jobs)]
    [([('in', 0), ('out', 0)], [(4, 8)])]
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import multiprocessing
import os
import threading
import warnings
from dataclasses import dataclass

from tilefuse.schedule import template_for
from tilefuse.schedule.config_source import sourced_config
from tilefuse.tensorir.runtime import artifact
from tilefuse.tensorir.runtime.disk_cache import default_kernel_cache
from tilefuse.tensorir.runtime.kernel_cache import KernelCache, LRUCache, cache_key
from tilefuse.tensorir.runtime.target import as_target

from .ir_partition import lower_partition
from .progress import kernel_progress

MEMORY_CACHE_SIZE = 1024
"""Built kernels kept in process (a model's distinct partitions fit many times over)."""

_built = LRUCache(MEMORY_CACHE_SIZE)


def clear_memory_cache() -> None:
    """Forget the kernels built in this process (as a new process would start).

    Example:
        >>> clear_memory_cache()
    """
    _built.clear()


@dataclass
class Built:
    """A built partition: its kernel, the port each kernel argument is ("in" | "out", port
    index; so one kernel serves every partition of the same signature) and its output shapes."""
    kernel: object
    arg_positions: list
    output_shapes: list


def kernel_caches(sources: list, kernel_cache: KernelCache | None = None) -> list:
    """The persistent kernel caches a compile reads, in order: ``kernel_cache``, else the first
    config source that is one (``autotune.HistoryBest`` keeps the kernels it chose configs
    for); then the disk cache (``tensorir.runtime.disk_cache``: ``$TILEFUSE_CACHE_DIR``, unless
    it is ``off``).

    Example:
        >>> from tilefuse.tensorir.runtime.disk_cache import DiskKernelCache
        >>> caches = kernel_caches([], DiskKernelCache("/tmp/first"))
        >>> caches[0], type(caches[-1]).__name__
        (DiskKernelCache('/tmp/first'), 'DiskKernelCache')
    """
    first = kernel_cache if kernel_cache is not None else \
        next((s for s in sources if isinstance(s, KernelCache)), None)
    return [c for c in (first, default_kernel_cache()) if c is not None]


class KernelJob:
    """One partition to build, lowered at most once (``dag``): for the config sources when
    they are asked, else by whoever builds it.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> from tilefuse.graph_api.ir import GraphIR
        >>> from tilefuse.graph_api.ir_partition import partition_ir
        >>> x = LogicalTensor(0, DataType.f32, (16,)); y = LogicalTensor(1, DataType.f32, (16,))
        >>> (p,) = partition_ir(GraphIR([Op(0, OpKind.Exp, [x], [y])])).partitions
        >>> job = kernel_job(p, [])
        >>> job.config is None, type(job.template).__name__
        (True, 'InjectiveTemplate')
    """

    def __init__(self, partition, config=None, target=None):
        self.partition = partition
        self.signature = partition_signature(partition)
        self.config = config
        self.target = as_target(target)
        self._dag = None
        self._template = None

    @property
    def dag(self) -> tuple:
        """(tensor by logical tensor id, the output tensors) of the lowered partition."""
        if self._dag is None:
            self._dag = lower_partition(self.partition, self.partition.input_ports)
        return self._dag

    @property
    def template(self):
        """The template of the partition's compute DAG."""
        if self._template is None:
            self._template = template_for(self.dag[1], self.target)
        return self._template

    @property
    def workload(self) -> tuple:
        """What the kernel is built from: the signature and the config's JSON (None: the
        default)."""
        return self.signature, None if self.config is None else self.config.to_json()

    @property
    def key(self) -> tuple:
        """The in-process cache's key: the workload and the target's key."""
        return self.workload, self.target.key

    @property
    def cache_key(self) -> str:
        """The persistent kernel cache's key: what hashes the workload and the target."""
        return cache_key(self.workload, self.target)

    def build(self) -> Built:
        """Lower (if not yet), schedule with the config and compile with LLVM."""
        env, outs = self.dag
        template = self.template
        config = template.default_config() if self.config is None else self.config
        name = "partition_" + hashlib.sha1(repr(self.key).encode()).hexdigest()[:12]
        kernel = template.build(config, name=name)   # constant inputs prepacked
        position = {id(env[p.id].op): ("in", k) for k, p in enumerate(self.partition.input_ports)}
        position.update({id(t.op): ("out", k) for k, t in enumerate(outs)})
        return Built(kernel, [position[id(t.op)] for t in template.args], [tuple(t.shape) for t in outs])


def kernel_job(partition, sources: list, target=None) -> KernelJob:
    """The job of building ``partition`` for ``target`` (a ``Target``, its spelling, or None:
    the host), its config chosen by the first of ``sources`` that has one (the partition is
    lowered for them to see its template); none: the default.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> from tilefuse.graph_api.ir import GraphIR
        >>> from tilefuse.graph_api.ir_partition import partition_ir
        >>> from tilefuse.schedule.config_source import FixedConfigs
        >>> x = LogicalTensor(0, DataType.f32, (16,)); y = LogicalTensor(1, DataType.f32, (16,))
        >>> (p,) = partition_ir(GraphIR([Op(0, OpKind.Exp, [x], [y])])).partitions
        >>> kernel_job(p, [FixedConfigs(lambda t: t.default_config())]).config is not None
        True
    """
    job = KernelJob(partition, target=target)
    if sources:
        job.config = sourced_config(job.template, sources)
    return job


def build_all(jobs: list, kernel_caches: list = (), workers: int | None = None) -> list:
    """The ``Built`` of every job, in order: from the in-process cache, else from the first of
    ``kernel_caches`` that holds it, else built (each distinct workload once; in ``workers``
    forked processes when two or more are missing, default: the CPUs this process may use).
    What a cache lacks (or holds unusable) it gets. See the module's docstring and example."""
    results: list = [None] * len(jobs)
    missing: dict = {}          # key -> the indices of its jobs, for what no cache holds
    lacking: dict = {}          # key -> the caches that lack it (or hold it unusable)
    for k, job in enumerate(jobs):
        built = _built.get(job.key)
        if job.key in lacking:
            pass
        elif built is None:
            built = _from_caches(job, kernel_caches, lacking.setdefault(job.key, []))
        else:                   # built in this process: the persistent caches may still lack it
            lacking[job.key] = [c for c in kernel_caches if not _holds(c, job.cache_key)]
        if built is None:
            missing.setdefault(job.key, []).append(k)
        else:
            _built.put(job.key, built)
            results[k] = built
    firsts = [jobs[indices[0]] for indices in missing.values()]
    if firsts:
        with kernel_progress(len(firsts)) as bar:
            for job, built, indices in zip(firsts, _build_in_workers(firsts, workers, bar), missing.values()):
                if built is None:
                    built = job.build()
                    bar.update()
                _built.put(job.key, built)
                for k in indices:
                    results[k] = built
    for job, built in zip(jobs, results):   # the caches get what they lacked
        for cache in lacking.pop(job.key, ()):
            cache.cache_kernel(job.cache_key, _freeze(built))
    return results


def _holds(cache, key: str) -> bool:
    """Whether ``cache`` has an entry under ``key`` (``has_kernel`` where it has one: no read)."""
    has = getattr(cache, "has_kernel", None)
    return has(key) if has is not None else cache.cached_kernel(key) is not None


def _from_caches(job: KernelJob, caches, lacking: list) -> Built | None:
    """``job``'s kernel from the first of ``caches`` that holds a usable one; the caches asked
    before it are added to ``lacking``. An entry that cannot be used here (damaged, or made for
    another target or format) is warned about, and replaced once the kernel is built."""
    for cache in caches:
        blob = cache.cached_kernel(job.cache_key)
        built = _thaw(blob, job.target)
        if built is not None:
            return built
        if blob is not None:
            warnings.warn(f"{cache!r}: the kernel cached under {job.cache_key[:16]}... cannot be used here "
                          f"(damaged, or another target's); building it again", stacklevel=4)
        lacking.append(cache)
    return None


def _build_in_workers(jobs: list, workers: int | None, bar) -> list:
    """Each job built in a forked worker process (None where one could not build it or died;
    ``bar`` advanced per kernel built), or all None with fewer than two jobs or workers, or
    when other threads run in this process:
    a fork copies only the calling thread, and a lock another thread held at that moment (the
    allocator's, LLVM's, the import system's) stays held in the child forever."""
    workers = min(len(os.sched_getaffinity(0)) if workers is None else workers, len(jobs))
    if workers < 2 or threading.active_count() > 1:
        return [None] * len(jobs)
    try:   # a forked worker inherits the jobs (initargs are not pickled with fork)
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                                    initializer=_take_jobs, initargs=(jobs,)) as pool:
            built = []
            for blob in pool.map(_build_job, range(len(jobs))):
                built.append(_thaw(blob))
                bar.update(built[-1] is not None)
            return built
    except concurrent.futures.process.BrokenProcessPool:
        return [None] * len(jobs)       # a worker died: what is missing is built here


_worker_jobs: list = []
"""In a build worker process only: the jobs its pool was made for."""


def _take_jobs(jobs: list) -> None:
    global _worker_jobs
    _worker_jobs = jobs


def _build_job(index: int) -> bytes | None:
    """In a worker: the artifact of job ``index`` built, or None when it cannot be built."""
    try:
        return _freeze(_worker_jobs[index].build())
    except Exception:       # noqa: BLE001 - build_all builds it again in the parent and raises there
        return None


def partition_signature(partition):
    """Structural key: op kinds, attributes, wiring with local tensor numbers and output data
    types, and the input ports' metadata (constant inputs are prepacked); the same partition
    anywhere compiles once.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor, Op, OpKind
        >>> from tilefuse.graph_api.ir import GraphIR
        >>> from tilefuse.graph_api.ir_partition import partition_ir
        >>> def relu(first_id):
        ...     x = LogicalTensor(first_id, DataType.f32, (8,)); y = LogicalTensor(first_id + 1, DataType.f32, (8,))
        ...     return partition_ir(GraphIR([Op(first_id, OpKind.ReLU, [x], [y])])).partitions[0]
        >>> partition_signature(relu(0)) == partition_signature(relu(10))
        True
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
    return ops, outs, tuple((t.dtype.value, t.shape, t.property_type.value) for t in partition.input_ports)


def _freeze(built: Built) -> bytes:
    """A built partition as a kernel artifact whose metadata holds the argument positions and
    output shapes."""
    return artifact.dumps(built.kernel, {"args": built.arg_positions, "shapes": built.output_shapes})


def _thaw(blob: bytes | None, target=None) -> Built | None:
    """The ``Built`` of ``_freeze``'s artifact; None for no blob or one that cannot be used
    here (compiled for another target than ``target``, when given; another format version;
    damaged): it is rebuilt then."""
    if blob is None:
        return None
    try:
        kernel, meta = artifact.loads(blob, "cached kernel")
        built = Built(kernel, [(role, k) for role, k in meta["args"]], [tuple(s) for s in meta["shapes"]])
    except (artifact.ArtifactError, KeyError, TypeError, ValueError):
        return None
    return built if target is None or kernel.target == target else None
