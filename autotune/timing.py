"""How tilefuse times things: the one place of the autotuner's timing methodology.

Every timing the tuner, the check in the model and ``autotune bench`` take follows these rules:

* kernel calls (``time_calls``): ``repeat`` costs, each the mean of ``number`` calls, grown
  until a repeat lasts ``min_repeat_ms``; a candidate whose repeat exceeds ``give_up`` stops
  being timed. A candidate is called as a compiled graph calls it (``call_as_in_graph``:
  packed weights packed once) and, with the weights flushed (``time_as_in_graph``), each cost
  is one call right after its weights and scratch were pushed out of the caches;
* cache flushing: by default when a model's weights are more than the last-level cache holds
  (``flushes_by_default``), then ``FLUSHED_REPEATS`` single calls per candidate;
* a measurement's cost is the mean of its repeats (``result_cost``); within a batch, the
  candidates are ranked against the default config timed around them (``Yardstick``); one
  stops being timed past ``HOPELESS`` times the default's cost;
* configs measured in turn (``rounds_in_turn``): each config once per round, a round's cost
  the median of its calls, the best round the config's cost (``CHECK_ROUNDS`` rounds in
  tuning's final check);
* whole engines (compiled graphs, onnxruntime): each turn after a pause and a warm-up
  (``settle``), in interleaved blocks (``time_in_blocks``, ``autotune bench``) or in rounds of
  step times (``time_steps``, the check in the model); the best block's or round's median;
  ``autotune perf`` times blocks of a duration (``engine_blocks.timed_runs``) in each engine's
  own process, and reports percentiles of every run;
* noise: how far the median lies above the best (``spread``).

Example:
    >>> spread([1.0, 1.5, 1.0, 1.25, 3.0])
    0.25
"""
from __future__ import annotations

import math
import statistics
import time

import numpy as np

from tilefuse.tensorir.dtype import itemsize
from tilefuse.tensorir.runtime.cache_lines import flush_from_caches, flushes_here, last_level_cache_bytes
from tilefuse.tensorir.runtime.prepacked import PrepackedKernel
from tilefuse.tensorir.runtime.scratch import scratch_used_by

from .engine_blocks import PAUSE, WARMUP, settle, timed_runs  # noqa: F401  (timing's names too)


def spread(seconds) -> float:
    """How far the median of ``seconds`` lies above the least of them, as a share of it: the
    noise of a set of timings.

    Example:
        >>> spread([2.0, 3.0, 2.5])
        0.25
    """
    return statistics.median(seconds) / min(seconds) - 1


# ---------------------------------------------------------------------------- kernel calls

def time_calls(fn, number: int = 1, repeat: int = 3, min_repeat_ms: float = 0,
               clock=time.perf_counter, flush=None, give_up: float | None = None) -> tuple[float, ...]:
    """Time ``fn()``: ``repeat`` costs, each the mean seconds of ``number`` calls in a row.
    While a repeat lasts less than ``min_repeat_ms``, it is thrown away and ``number`` grows
    (to what should last that long, at least 1.6 times more) for it and the repeats after.
    With ``flush`` (a function), each cost is one call right after ``flush()`` (untimed).
    With ``give_up`` (seconds), the costs so far are returned as soon as one exceeds it: a
    candidate that slow is out of the running, and its other repeats would cost the most time.

    Example:
        >>> ticks = iter(range(1000))
        >>> time_calls(lambda: None, number=2, repeat=3, clock=lambda: next(ticks))
        (0.5, 0.5, 0.5)
        >>> time_calls(lambda: None, repeat=3, clock=lambda: next(ticks), give_up=0.5)
        (1.0,)
    """
    if flush is not None:
        costs = []
        for _ in range(repeat):
            flush()
            start = clock()
            fn()
            costs.append(clock() - start)
            if give_up is not None and costs[-1] > give_up:
                break
        return tuple(costs)
    costs = []
    for _ in range(repeat):
        while True:
            start = clock()
            for _ in range(number):
                fn()
            elapsed = clock() - start
            if elapsed * 1000 >= min_repeat_ms:
                break
            per_call = max(elapsed / number, 1e-9)
            number = max(math.ceil(min_repeat_ms / 1000 / per_call), math.ceil(number * 1.618))
        costs.append(elapsed / number)
        if give_up is not None and costs[-1] > give_up:
            break
    return tuple(costs)


def constant_inputs(task) -> list[int]:
    """The positions in ``task.args`` of its constant inputs (weights).

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.autotune.task import Task
        >>> x = placeholder((4,), name="x"); w = placeholder((4,), name="w", constant=True)
        >>> constant_inputs(Task(compute((4,), lambda i: x[i] * w[i], name="y")))
        [1]
    """
    return [k for k, t in enumerate(task.inputs) if t.op.tag == "constant"]


def call_as_in_graph(kernel, arrays, constants=()):
    """(a function that runs ``kernel`` on ``arrays`` as a compiled graph runs it, the arrays
    of weights it reads): a ``PrepackedKernel``'s main kernel on the weights packed once here
    (a graph packs its constant weights when it is compiled; the prepacked kernel's own call
    would look up its packs on every call, a microsecond a small kernel never pays in a
    model). The weights are the arrays at positions ``constants`` the call reads, and the
    packed ones.

    Example:
        >>> import numpy as np
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.autotune.task import Task
        >>> x = placeholder((4,), name="x"); w = placeholder((4,), name="w", constant=True)
        >>> task = Task(compute((4,), lambda i: x[i] * w[i], name="y"))
        >>> arrays = [np.full(4, 2, "float32"), np.full(4, 3, "float32"), np.zeros(4, "float32")]
        >>> call, weights = call_as_in_graph(task.template.build(), arrays, constant_inputs(task))
        >>> call(); arrays[2], weights[0] is arrays[1]
        (array([6., 6., 6., 6.], dtype=float32), True)
    """
    if not isinstance(kernel, PrepackedKernel):
        return (lambda: kernel(*arrays)), [arrays[k] for k in constants]
    packed = kernel.pack(arrays)
    main, args = kernel.main, [arrays[k] if role == "arg" else packed[k] for role, k in kernel.main_args]
    weights = [packed[k] if role != "arg" else arrays[k] for role, k in kernel.main_args
               if role != "arg" or k in constants]
    return (lambda: main(*args)), weights


def time_as_in_graph(kernel, arrays, constants, options, give_up: float | None = None) -> tuple[float, ...]:
    """``time_calls`` of ``kernel`` on ``arrays`` called as a compiled graph calls it
    (``call_as_in_graph``), as ``options`` (``MeasureOptions``) say: with ``flush_cache``, its
    weights (the arrays at positions ``constants``, or their packs) and its scratch buffers are
    pushed out of every cache level before each timed call, while its data inputs stay where
    its last call left them; a kernel without weights is timed as usual. Finding its scratch
    calls the kernel once more, a warm-up right before timing (idle pool threads wake slowly).

    Example:
        >>> import numpy as np
        >>> from types import SimpleNamespace
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.autotune.task import Task
        >>> x = placeholder((4,), name="x"); task = Task(compute((4,), lambda i: x[i] + 1.0, name="y"))
        >>> options = SimpleNamespace(number=1, repeat=2, min_repeat_ms=0, flush_cache=True)
        >>> arrays = [np.ones(4, "float32"), np.zeros(4, "float32")]
        >>> len(time_as_in_graph(task.template.build(), arrays, constant_inputs(task), options))
        2
    """
    call, weights = call_as_in_graph(kernel, arrays, constants)
    scratch = scratch_used_by(call)
    flush = (lambda: flush_from_caches(*weights, scratch)) if options.flush_cache and weights else None
    return time_calls(call, options.number, options.repeat, options.min_repeat_ms, flush=flush, give_up=give_up)


# ---------------------------------------------------------------------------- cache flushing

FLUSHED_REPEATS = 10
"""Timed calls per candidate under ``tune --cache-flush``: one call each, after its weights are
flushed from the caches."""


def weight_bytes(tasks) -> int:
    """The bytes of weights a run of the model the ``tasks`` come from reads: each task's
    constant inputs, as many times as its weight (how many partitions share it).

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.autotune.task import Task
        >>> x = placeholder((4,), name="x"); w = placeholder((4,), name="w", constant=True)
        >>> weight_bytes([Task(compute((4,), lambda i: x[i] * w[i], name="y"), weight=3)])
        48
    """
    return sum(task.weight * sum(math.prod(task.inputs[k].shape) * itemsize(task.inputs[k].dtype)
                                 for k in constant_inputs(task)) for task in tasks)


def weights_outgrow_caches(tasks, cache_bytes: int | None = None) -> bool:
    """Whether the weights of the model the ``tasks`` come from are more than the last-level
    cache holds (``cache_bytes``, default this machine's; False when it is unknown): then
    each layer's weights come from memory in every run of the model, as ``flush_cache``
    measures them.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.autotune.task import Task
        >>> x = placeholder((4,), name="x"); w = placeholder((4,), name="w", constant=True)
        >>> task = Task(compute((4,), lambda i: x[i] * w[i], name="y"))
        >>> weights_outgrow_caches([task], cache_bytes=8), weights_outgrow_caches([task], cache_bytes=1 << 20)
        (True, False)
    """
    if cache_bytes is None:
        cache_bytes = last_level_cache_bytes()
    return cache_bytes is not None and weight_bytes(tasks) > cache_bytes


def flushes_by_default(tasks) -> bool:
    """Whether the candidates of ``tasks`` are timed with their weights flushed when nobody
    says: when the model's weights outgrow the last-level cache and this CPU can flush cache
    lines.

    Example:
        >>> flushes_by_default([])
        False
    """
    return weights_outgrow_caches(tasks) and flushes_here()


# ---------------------------------------------------------------------------- configs in turn

CHECK_ROUNDS = 3
"""Rounds of tuning's final check: the default and the search's best configs measured in turn,
this many times."""


def result_cost(result) -> float:
    """The cost a measurement ranks by: the mean of ``costs`` for a success, ``inf`` for an
    error (or a result without usable costs).

    Example:
        >>> from tilefuse.autotune.measure import MeasureResult
        >>> result_cost(MeasureResult({}, costs=(2e-3, 4e-3))), result_cost(MeasureResult({}, error_kind="crash"))
        (0.003, inf)
    """
    costs = tuple(getattr(result, "costs", ()) or ())
    if getattr(result, "error_kind", None) is not None or not costs:
        return math.inf
    mean = float(sum(costs)) / len(costs)
    return mean if math.isfinite(mean) and mean > 0 else math.inf


def round_cost(result) -> float:
    """A round of ``rounds_in_turn``: the median of its timed calls, so that one call the
    machine interrupted (a neighbour's burst doubles a call on a shared VM) does not decide the
    round; ``inf`` for an error.

    Example:
        >>> from tilefuse.autotune.measure import MeasureResult
        >>> round_cost(MeasureResult({}, costs=(1e-3, 1e-3, 9e-3)))
        0.001
    """
    if not math.isfinite(result_cost(result)):
        return math.inf
    return float(np.median(result.costs))


def rounds_in_turn(measure, configs, rounds: int) -> list[list[float]]:
    """Time ``configs`` in turn, each once per round for ``rounds`` rounds, in one call of
    ``measure`` (a function from a list of configs to their measurements, in order, such as
    ``measure_batch`` of a task: so all of them meet the same machine); per config, the cost
    of each of its rounds in seconds (``round_cost``).

    Example:
        >>> from tilefuse.autotune.measure import MeasureResult
        >>> cost = {"a": 1e-3, "b": 2e-3}
        >>> def measure(batch):
        ...     return [MeasureResult({}, costs=(cost[c] * (k + 1),)) for k, c in enumerate(batch)]
        >>> rounds_in_turn(measure, ["a", "b"], 2)
        [[0.001, 0.003], [0.004, 0.008]]
    """
    configs = list(configs)
    results = measure(configs * rounds)
    return [[round_cost(r) for r in results[k::len(configs)]] for k in range(len(configs))]


# ---------------------------------------------------------------------------- the yardstick

HOPELESS = 4.0
"""A candidate stops being timed once one of its repeats takes this many times the default's
reference cost (``Yardstick.reference``): resnet50's searches meet many configs 10-60 times
slower than the default, and their ten repeats with the weights flushed took most of a batch's
timing."""


class Yardstick:
    """The default config timed at the head and the tail of each batch, and what the other
    configs cost relative to it. ``note(records)`` reads records in measurement order: each
    record of another config than the default (``default_key``) gets the ratio of its cost to
    the lesser of the default's timings just before and just after it (one of the two may
    have met a burst of the machine's neighbours: the lesser makes no candidate look faster
    than it is). ``cost(key, raw)`` is config ``key``'s ratio times ``reference``, the median
    of the default's timings, so that a batch a slow spell of the machine met ranks as the
    others do; a config without a ratio (no default timed around it) keeps its ``raw`` cost.
    Replaying a task's records gives again the costs its run ranked by.

    Example:
        >>> from tilefuse.autotune.record import Record
        >>> def timed(knob, cost): return Record.create("w", "t", "x", {"k": knob}, costs=[cost])
        >>> stick = Yardstick(timed(0, 1.0).config_key)
        >>> stick.note([timed(0, 1.0), timed(1, 0.9), timed(0, 1.0),      # a steady batch
        ...             timed(0, 1.6), timed(2, 1.2), timed(0, 1.6),      # a slow spell
        ...             timed(0, 1.0), timed(3, 0.5), timed(0, 2.5)])     # a burst at the tail
        >>> stick.reference, [round(stick.cost(timed(k, 0).config_key, 9.0), 6) for k in (1, 2, 3, 4)]
        (1.3, [1.17, 0.975, 0.65, 9.0])
        >>> stick.give_up
        5.2
    """

    def __init__(self, default_key: str):
        self.default_key = default_key
        self.defaults: list[float] = []
        self.ratios: dict[str, float] = {}
        self._before = None             # the default's last timing
        self._waiting: list = []        # the ok records since then

    def note(self, records) -> None:
        """Read ``records`` (of this task, in measurement order)."""
        for r in records:
            if r.config_key != self.default_key:
                if r.is_ok:
                    self._waiting.append(r)
                continue
            timing = r.mean_cost if r.is_ok and r.mean_cost > 0 else None
            if timing is not None:
                self.defaults.append(timing)
                self.ratios[r.config_key] = 1.0
            self._settle(timing)
            self._before = timing
        self._settle(None)          # the last ones, with the timing before them (none after yet)

    def _settle(self, after) -> None:
        around = [t for t in (self._before, after) if t is not None]
        for r in self._waiting:
            if around:
                self.ratios.setdefault(r.config_key, r.mean_cost / min(around))
        self._waiting = []

    @property
    def reference(self) -> float:
        """The median of the default's timings (inf before the first)."""
        return float(np.median(self.defaults)) if self.defaults else math.inf

    @property
    def give_up(self) -> float | None:
        """The seconds past which a candidate's repeat ends its timing: ``HOPELESS`` times the
        reference (None before the default's first timing)."""
        return HOPELESS * self.reference if self.defaults else None

    def cost(self, key: str, raw: float) -> float:
        """Config ``key``'s cost on the scale of ``reference`` (``raw`` when it has no ratio)."""
        ratio = self.ratios.get(key)
        return raw if ratio is None else ratio * self.reference


# ---------------------------------------------------------------------------- whole engines

# PAUSE, WARMUP and settle live in engine_blocks, which imports nothing of tilefuse (perf's
# engine processes load it alone); they are this module's as well.


BENCH_BLOCKS = 5
"""``bench`` times each engine in at least this many blocks, the engines taking turns."""
BENCH_BLOCK_SECONDS = 0.15
"""About how long one engine's block lasts at most (at least one run): a slow model's runs are
spread over many short blocks, so that a slow spell of the machine (another tenant's burst,
a second or so) falls on every engine alike, not on one engine's long block."""


def time_interleaved(runners: dict, repeat: int, blocks: int = BENCH_BLOCKS, pause: float = PAUSE,
                     warmup: float = WARMUP) -> dict:
    """{name: seconds of each run}: ``repeat`` timed runs per runner in ``blocks`` blocks, the
    runners taking turns block by block so that drift (other work, clock changes) hits them
    all alike; before each block a ``pause``, then untimed runs for ``warmup`` seconds (at
    least one; ``settle``).

    Example:
        >>> times = time_interleaved({"a": lambda: None, "b": lambda: None}, repeat=3, pause=0, warmup=0)
        >>> sorted(times), [len(t) for t in times.values()]
        (['a', 'b'], [3, 3])
    """
    times = {name: [] for name in runners}
    blocks = max(1, min(blocks, repeat))
    for block in range(blocks):
        runs = repeat // blocks + (1 if block < repeat % blocks else 0)
        for name, run_once in runners.items():
            settle(run_once, pause, warmup)
            times[name] += timed_runs(run_once, runs=runs)
    return times


def bench_blocks(repeat: int, run_seconds: float) -> int:
    """How many blocks ``bench`` times ``repeat`` runs of ``run_seconds`` each in: at least
    ``BENCH_BLOCKS``, more when a block would last longer than ``BENCH_BLOCK_SECONDS``, at most
    one per run.

    Example:
        >>> bench_blocks(30, 50e-6), bench_blocks(60, 0.045), bench_blocks(3, 1.0)
        (5, 18, 3)
    """
    return max(min(BENCH_BLOCKS, repeat), min(repeat, math.ceil(repeat * run_seconds / BENCH_BLOCK_SECONDS)))


def time_in_blocks(runners: dict, repeat: int) -> dict:
    """{name: seconds of each run}: each runner run once (the slowest run sets the number of
    blocks, ``bench_blocks``), then ``repeat`` timed runs of each in interleaved blocks
    (``time_interleaved``), as ``autotune bench`` times engines.

    Example:
        >>> times = time_in_blocks({"a": lambda: None, "b": lambda: None}, repeat=2)
        >>> [len(t) for t in times.values()]
        [2, 2]
    """
    slowest = 0.0
    for run_once in runners.values():
        started = time.perf_counter()
        run_once()
        slowest = max(slowest, time.perf_counter() - started)
    return time_interleaved(runners, repeat, bench_blocks(repeat, slowest))     # drift hits all alike


STEP_ROUNDS = 5
"""Rounds of the check in the model: each engine timed once per round, the engines taking turns."""
STEP_ROUND_SECONDS = 0.2
"""About how long each engine runs in a round (at least ``STEP_MIN_RUNS`` runs)."""
STEP_MIN_RUNS = 3


def time_steps(engines: dict, feeds: dict, rounds: int = STEP_ROUNDS,
               round_seconds: float = STEP_ROUND_SECONDS) -> tuple[dict, float]:
    """({engine: {step index: seconds}}, spread) of compiled graphs ``engines`` (by name) on
    ``feeds``: each step's median over a round's runs (``step_times``), the best round of each;
    the engines take turns, each after a pause and a warm-up (``settle``). The spread is how
    far a whole run's median round lies above its best one (the larger of the engines).

    Example:
        >>> class Engine:                      # a compiled graph of two steps, 1 ms and 2 ms
        ...     def run(self, feeds): pass
        ...     def step_times(self, feeds, runs): return {0: [1e-3] * runs, 1: [2e-3] * runs}
        >>> time_steps({"default": Engine()}, {}, rounds=2, round_seconds=0)
        ({'default': {0: 0.001, 1: 0.002}}, 0.0)
    """
    started = time.perf_counter()
    first = next(iter(engines.values()))
    first.run(feeds)
    runs = max(STEP_MIN_RUNS, int(round_seconds / max(time.perf_counter() - started, 1e-6)))
    medians = {name: [] for name in engines}
    for _ in range(rounds):
        for name, engine in engines.items():
            settle(lambda: engine.run(feeds), PAUSE, WARMUP)
            times = engine.step_times(feeds, runs)
            medians[name].append({index: statistics.median(seconds) for index, seconds in times.items()})
    best = {name: {index: min(r[index] for r in rounds_) for index in rounds_[0]} for name, rounds_ in medians.items()}
    return best, max([0.0] + [spread([sum(r.values()) for r in rounds_]) for rounds_ in medians.values()])
