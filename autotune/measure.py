"""Measuring candidate configs of a task: build, check and time each one in a worker process.

``measure_batch(task, configs, options, executor)`` returns one ``MeasureResult`` per config,
in order. It runs in two phases, both on the executor's worker processes (never in the
caller's process):

1. build - every candidate is scheduled, lowered and compiled by LLVM, in parallel over the
   workers; the kernel's object code comes back as bytes. An exception is a ``"compile"``
   error.
2. run - the kernels are timed one at a time (with nothing else running on the executor's
   workers, so concurrent work does not disturb the timings): each is loaded from its bytes,
   called once on random inputs (``random_inputs(task, options.seed)``) and its outputs are
   compared with those of the task's default config (a mismatch is ``"wrong_answer"``, never a
   best), called once more to warm up, then timed with ``number``/``repeat``/``min_repeat_ms``
   as in TVM (``timing.time_as_in_graph``, which also flushes the weights when asked). An exception is
   a ``"runtime"`` error.

In either phase a worker killed by a signal gives ``"crash"`` and one still busy after
``options.timeout`` seconds gives ``"timeout"``; the worker is replaced and the other
candidates go on.

Example:
    >>> from tilefuse.tensorir import placeholder, compute
    >>> from tilefuse.autotune.task import Task
    >>> A = placeholder((1024,), name="A"); B = compute((1024,), lambda i: A[i] * 2.0, name="B")
    >>> task = Task(B)
    >>> results = measure_batch(task, task.space.sample(2), MeasureOptions(repeat=2))  # doctest: +SKIP
    >>> [r.error_kind for r in results], len(results[0].costs)                        # doctest: +SKIP
    ([None, None], 2)
"""
from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field

import numpy as np

from tilefuse.schedule.space import Config
from tilefuse.tensorir.runtime import artifact
from tilefuse.tensorir.runtime.kernel import Kernel
from tilefuse.tensorir.runtime.prepacked import PrepackedKernel
from tilefuse.tensorir.runtime.target import Target

from .executor import Executor, JobResult, default_executor
from .record import ERROR_KINDS
from .task import Task, random_inputs
from .timing import constant_inputs, time_as_in_graph
from tilefuse.tensorir.errors import TilefuseError


class MeasureError(TilefuseError, RuntimeError):
    """Measuring could not start: the task's default config, the reference that candidates
    are checked against, does not build."""


def _number(name, value, minimum, integer):
    if isinstance(value, bool) or not isinstance(value, (int, float) if not integer else int):
        raise TypeError(f"MeasureOptions.{name} must be {'an int' if integer else 'a number'}, got {value!r}")
    if not value >= minimum or (not integer and not math.isfinite(value)):
        raise ValueError(f"MeasureOptions.{name} must be >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class MeasureOptions:
    """How candidates are measured.

    * ``number`` - runs averaged into one cost; grown until a repeat lasts ``min_repeat_ms``;
    * ``repeat`` - costs measured per candidate (each the mean of ``number`` runs);
    * ``min_repeat_ms`` - the least duration of one repeat, in milliseconds (0: no minimum);
    * ``timeout`` - seconds allowed to build one candidate, and again to run it;
    * ``flush_cache`` - push the kernel's weights (its constant inputs, packed or not) and
      its scratch buffers (a padded input, Winograd's transformed tiles) out of every cache
      level before each timed call (one call per cost then: ``number`` and
      ``min_repeat_ms`` do not apply), as in a whole model whose other layers pushed them
      out, while its data inputs stay where its last call left them, as a layer's inputs
      are in the cache the layer before wrote them to (TVM's ``enable_cpu_cache_flush``
      spares the first argument for the same reason); a kernel without weights is timed
      as usual;
    * ``check`` - compare outputs with the default config's (relative ``rtol`` of each value
      and of the output's root mean square, absolute ``atol``; exact for integer outputs;
      ``compare_outputs``) on random inputs drawn with ``seed``.

    Example:
        >>> MeasureOptions(repeat=5).repeat
        5
        >>> MeasureOptions(number=0)
        Traceback (most recent call last):
        ...
        ValueError: MeasureOptions.number must be >= 1, got 0
    """
    number: int = 1
    repeat: int = 3
    min_repeat_ms: float = 0
    timeout: float = 10.0
    check: bool = True
    flush_cache: bool = False
    rtol: float = 1e-3
    atol: float = 1e-4
    seed: int = 0

    def __post_init__(self):
        _number("number", self.number, 1, True)
        _number("repeat", self.repeat, 1, True)
        _number("min_repeat_ms", self.min_repeat_ms, 0, False)
        _number("timeout", self.timeout, 0, False)
        _number("rtol", self.rtol, 0, False)
        _number("atol", self.atol, 0, False)
        _number("seed", self.seed, 0, True)
        if self.timeout == 0:
            raise ValueError("MeasureOptions.timeout must be > 0")
        for name in ("check", "flush_cache"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"MeasureOptions.{name} must be a bool, got {getattr(self, name)!r}")
        if self.repeat * self.min_repeat_ms / 1000 >= self.timeout:
            raise ValueError(f"MeasureOptions: repeat * min_repeat_ms ({self.repeat} x {self.min_repeat_ms} ms) "
                             f"does not fit in the timeout of {self.timeout} s")


@dataclass(frozen=True)
class MeasureResult:
    """The measurement of one config: ``costs`` in seconds per run (one per repeat) when
    ``error_kind`` is None, else the error kind ("compile", "runtime", "timeout", "crash",
    "wrong_answer") and ``error_msg`` (first line ``Type: message``, then details).

    Example:
        >>> r = MeasureResult({"tile": 4}, costs=(2e-3, 1e-3, 3e-3))
        >>> r.ok, r.cost, r.best_cost
        (True, 0.002, 0.001)
        >>> MeasureResult({}, error_kind="crash", error_msg="SIGSEGV").cost
        inf
    """
    config: dict
    costs: tuple = ()
    error_kind: str | None = None
    error_msg: str = ""
    build_seconds: float = 0.0
    timestamp: float = field(default_factory=time.time)

    def __post_init__(self):
        if self.error_kind is not None and self.error_kind not in ERROR_KINDS:
            raise ValueError(f"error_kind must be None or one of {ERROR_KINDS}, got {self.error_kind!r}")
        if self.error_kind is None and not self.costs:
            raise ValueError("a MeasureResult without an error needs costs")
        object.__setattr__(self, "costs", tuple(float(c) for c in self.costs))

    @property
    def ok(self) -> bool:
        """True when the candidate was measured (no error)."""
        return self.error_kind is None

    @property
    def cost(self) -> float:
        """The mean cost in seconds; infinity for an error (so an error is never a best)."""
        return sum(self.costs) / len(self.costs) if self.ok else math.inf

    @property
    def best_cost(self) -> float:
        """The smallest cost in seconds; infinity for an error."""
        return min(self.costs) if self.ok else math.inf

    def to_dict(self) -> dict:
        """A JSON-able dict (``from_dict`` reads it back).

        Example:
            >>> r = MeasureResult({"a": 1}, costs=(1.0,), timestamp=5.0)
            >>> MeasureResult.from_dict(r.to_dict()) == r
            True
        """
        d = asdict(self)
        d["costs"] = list(self.costs)
        return d

    @staticmethod
    def from_dict(d: dict) -> "MeasureResult":
        """The MeasureResult of ``to_dict`` output.

        Example:
            >>> MeasureResult.from_dict({"config": {"a": 1}, "error_kind": "crash"}).error_kind
            'crash'
        """
        return MeasureResult(dict(d["config"]), tuple(d.get("costs", ())), d.get("error_kind"),
                             d.get("error_msg", ""), float(d.get("build_seconds", 0.0)),
                             float(d.get("timestamp", 0.0)))


# ---------------------------------------------------------------------------- pieces run in workers

def build_candidate(task: Task, config: Config) -> Kernel:
    """The default builder: ``task.template.build(config)`` (lower + LLVM for the host; a
    ``PrepackedKernel`` when the task has constant inputs: packed once, so timed calls run the
    kernel alone, as compiled graphs do).

    A builder is any picklable top-level function ``(task, config) -> Kernel``.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> A = placeholder((64,), name="A"); task = Task(compute((64,), lambda i: A[i] * 2.0, name="B"))
        >>> type(build_candidate(task, task.template.default_config())).__name__
        'Kernel'
    """
    return task.template.build(config)


def compare_outputs(got, expected, names, rtol: float, atol: float) -> str | None:
    """None when every output matches, else a message about the first that does not.
    Floats match within ``atol + rtol * (|expected| + rms)`` (NaN matches NaN), ``rms`` the
    root mean square of the output's finite expected values: a long sum's rounding error
    scales with the terms summed, not with a result that cancels to near zero, and another
    summation order (a Winograd convolution's) must not fail where the values are small.
    Others match exactly.

    Example:
        >>> compare_outputs([np.array([1.0, 2.5])], [np.array([1.0, 2.0])], ["C"], 1e-3, 1e-4)
        "output C: 1 of 2 elements differ from the default config's result (rtol=0.001, atol=0.0001); first at index (1,): expected 2.0, got 2.5"
    """
    for g, e, name in zip(got, expected, names):
        if np.issubdtype(e.dtype, np.floating):
            finite = e[np.isfinite(e)]
            rms = float(np.sqrt(np.mean(np.square(finite, dtype=np.float64)))) if finite.size else 0.0
            bad = ~np.isclose(g, e, rtol=rtol, atol=atol + rtol * rms, equal_nan=True)
        else:
            bad = g != e
        if bad.any():
            where = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), e.shape))
            return (f"output {name}: {int(bad.sum())} of {bad.size} elements differ from the default config's "
                    f"result (rtol={rtol:g}, atol={atol:g}); first at index {where}: "
                    f"expected {e[where].item()!r}, got {g[where].item()!r}")
    return None


def _build_job(task: Task, config_values: dict, builder) -> tuple[bytes, float]:
    start = time.perf_counter()
    kernel = builder(task, Config(config_values))
    if not isinstance(kernel, (Kernel, PrepackedKernel)):
        raise TypeError(f"builder {getattr(builder, '__name__', builder)} returned "
                        f"{type(kernel).__name__}, not a Kernel")
    return artifact.dumps(kernel), time.perf_counter() - start


_references: OrderedDict = OrderedDict()    # in a worker: (inputs, expected outputs) per task


def _inputs_and_reference(task: Task, reference_blob: bytes | None, seed: int):
    blob_id = hashlib.sha256(reference_blob).hexdigest() if reference_blob is not None else None
    key = (task.key, seed, blob_id)
    if key in _references:
        _references.move_to_end(key)
        return _references[key]
    arrays = random_inputs(task, seed)
    inputs = arrays[:len(task.inputs)]
    expected = None
    if reference_blob is not None:
        reference, _ = artifact.loads(reference_blob, source=f"default-config kernel of task {task.name}")
        try:
            reference(*arrays)
        except Exception as err:
            raise RuntimeError(f"the default config (the reference) failed to run: {type(err).__name__}: {err}") from err
        expected = [a.copy() for a in arrays[len(inputs):]]
    _references[key] = (inputs, expected)
    while len(_references) > 2:
        _references.popitem(last=False)
    return inputs, expected


def _run_job(task: Task, blob: bytes, reference_blob: bytes | None, options: MeasureOptions,
             target_key: str, give_up: float | None = None) -> tuple[str, object]:
    here = Target.host()
    if here.key != target_key:
        raise RuntimeError(f"this runner's CPU ({here.cpu}) is not the target tuned for (key {target_key})")
    kernel, _ = artifact.loads(blob, source=f"candidate kernel of task {task.name}")
    inputs, expected = _inputs_and_reference(task, reference_blob if options.check else None, options.seed)
    arrays = random_inputs(task, options.seed)   # fresh arrays: a kernel cannot spoil the cached ones
    kernel(*arrays)
    if expected is not None:
        mismatch = compare_outputs(arrays[len(inputs):], expected, [t.name for t in task.outputs],
                                   options.rtol, options.atol)
        if mismatch:
            return "wrong_answer", mismatch
    return "ok", time_as_in_graph(kernel, arrays, constant_inputs(task), options, give_up)


# ---------------------------------------------------------------------------- the parent's side

_reference_blobs: OrderedDict = OrderedDict()   # (task key, default, builder) -> default-config kernel bytes


def _builder_id(builder) -> str:
    return f"{getattr(builder, '__module__', '?')}.{getattr(builder, '__qualname__', repr(builder))}"


def _as_config(task: Task, config) -> Config:
    if isinstance(config, dict):
        config = Config(config)
    if not isinstance(config, Config):
        raise TypeError(f"configs must be Config objects or dicts, got {type(config).__name__}")
    task.space.index_of(config)     # ConfigError (a ValueError) naming what is wrong
    return config


def measure_batch(task: Task, configs, options: MeasureOptions | None = None,
                  executor: Executor | None = None, *, builder=build_candidate,
                  give_up: float | None = None) -> list[MeasureResult]:
    """Build, check and time ``configs`` of ``task``; one MeasureResult per config, in order
    (a config listed several times is built once and timed at each of its places, in turn;
    the default config is built once per task and builder, and its kernel kept for the next
    batches: the candidates' reference, and the tuner's yardstick).

    ``executor`` defaults to the shared ``LocalExecutor``; ``builder`` (a picklable top-level
    function ``(task, config) -> Kernel``, default ``build_candidate``) builds each candidate
    and the default config. ``give_up`` (seconds): a config stops being timed once one of its
    repeats took longer (``timing.time_calls``), so it has fewer costs. Raises MeasureError when
    checking is on and the default config does not build; ValueError for a config that is not
    in the task's space (the module's docstring has an example).
    """
    if not isinstance(task, Task):
        raise TypeError(f"measure_batch needs a Task, got {type(task).__name__}")
    options = MeasureOptions() if options is None else options
    if not isinstance(options, MeasureOptions):
        raise TypeError(f"options must be MeasureOptions, got {type(options).__name__}")
    if not callable(builder):
        raise TypeError(f"builder must be a function (task, config) -> Kernel, got {builder!r}")
    configs = [_as_config(task, c) for c in configs]
    if not configs:
        return []
    executor = default_executor() if executor is None else executor

    default = task.template.default_config()
    ref_key = (task.key, default.to_json(), _builder_id(builder))  # the key alone misses constant weights
    known = _reference_blobs.get(ref_key)       # the default's kernel, as an earlier batch built it
    to_build = [c for c in dict.fromkeys(configs) if not (c == default and known is not None)]
    if options.check and known is None and default not in to_build:
        to_build.append(default)                # the reference the candidates are checked against
    calls = [(_build_job, (task, c.values, builder)) for c in to_build]
    built = dict(zip(to_build, executor.run(calls, options.timeout, parallel=True) if calls else []))
    if known is None and default in built and built[default].ok:
        known = _reference_blobs[ref_key] = built[default].value[0]
        while len(_reference_blobs) > 32:
            _reference_blobs.popitem(last=False)
    if options.check and known is None:
        made = built[default]
        raise MeasureError(f"task {task.name}: the default config, which candidates are checked against, "
                           f"failed to build ({made.error}): {made.message}")
    if known is not None and default not in built:          # timed again (the tuner's yardstick): not rebuilt
        built[default] = JobResult(value=(known, 0.0))
    reference_blob = known if options.check else None

    results: list[MeasureResult | None] = [None] * len(configs)
    runs, run_at = [], []
    for i, (config, made) in enumerate(zip(configs, (built[c] for c in configs))):
        if made.ok:
            runs.append((_run_job, (task, made.value[0], reference_blob, options, task.target.key, give_up)))
            run_at.append(i)
        else:
            kind = "compile" if made.error == "exception" else made.error
            results[i] = MeasureResult(config.values, (), kind, made.message, made.seconds)
    for i, ran in zip(run_at, executor.run(runs, options.timeout, parallel=False)):
        build_seconds = built[configs[i]].value[1]
        if not ran.ok:
            kind = "runtime" if ran.error == "exception" else ran.error
            results[i] = MeasureResult(configs[i].values, (), kind, ran.message, build_seconds)
        elif ran.value[0] == "ok":
            results[i] = MeasureResult(configs[i].values, ran.value[1], None, "", build_seconds)
        else:
            results[i] = MeasureResult(configs[i].values, (), "wrong_answer", ran.value[1], build_seconds)
    return results
