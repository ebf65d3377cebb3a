"""The tuned picks checked where they run: in the model, between their neighbours.

A kernel measured alone runs again and again on data its own last call left in cache, with
the worker threads awake. In a model it runs once between other kernels: its inputs were
written by the kernel before it (on whichever core ran that part), its threads may have gone
to sleep, its weights are among everything else's. A config that wins alone can lose there:
a transpose made parallel hands its output to the other core's cache, a matmul without
packed weights reads them from L2 instead of L1. On small kernels (a few microseconds) such
effects decide.

``check_in_model(graph, db)`` compiles the graph with the default configs and with the
database's picks and times every step of both (``CompiledGraph.step_times``), the two
engines taking turns in rounds after a pause and a warm-up, as ``autotune bench`` does
(``timing.time_steps``). Each
workload's time in the model is the sum of its partitions' steps (the best round's median of
each). A tuned pick that is ``MARGIN`` slower there than the default becomes the default
(``Database.set_pick``, with the costs in the model). Steps interact (a pick can
slow its neighbour down), so the check repeats on the graph as it now compiles until it
keeps every pick it meets (at most ``PASSES`` times). Last, the whole run decides: of the
sets of picks the passes measured, the one that ran fastest against the default of its own
pass is kept (a later pass within ``MARGIN`` of it first), if that is ``MARGIN`` faster than
its default; else none is. A pass's drops may be the noise of a busy machine (a pass met by
another tenant's burst measures every step 10x slower): a set of picks once measured 1.8x
faster as a whole is not given up for a later pass that measured no gain.

The times are the steps' kernel times summed (each step's best-round median): the run's
time less what Python spends between the steps, which ``autotune bench`` includes; on a
small model that is most of a run.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from tilefuse import graph_api
from tilefuse.schedule.config_source import FixedConfigs

from .database import Database, Pick
from .dispatch import HistoryBest, tuned_tasks
from .extract import tasks_by_workload
from .target import current_target
from .timing import STEP_ROUND_SECONDS, STEP_ROUNDS, time_steps

MARGIN = 0.01
"""A pick is dropped when its workload's steps take this much more time than the default's (its
kernel check found it faster: a tie in the model keeps it), and every pick when the whole run
is not this much faster than the default one."""
PASSES = 3
"""How many times the check runs again after it dropped picks (the neighbours of a dropped pick
are measured anew)."""


@dataclass(frozen=True)
class WorkloadCheck:
    """One tuned workload in the model: its partitions' steps summed, seconds per run, with
    the default configs and with its pick; ``kept``: whether the pick stays.

    Example:
        >>> WorkloadCheck("k", "matmul+add", 7, 5e-5, 4e-5, True).speedup
        1.25
    """
    key: str
    name: str
    partitions: int
    default_seconds: float
    tuned_seconds: float
    kept: bool

    @property
    def speedup(self) -> float:
        """The default's time in the model over the pick's."""
        return self.default_seconds / self.tuned_seconds if self.tuned_seconds > 0 else math.nan


@dataclass
class ModelCheck:
    """What ``check_in_model`` found: the whole run's seconds (its steps summed) with the
    default configs and with every pick (``default_seconds``, ``tuned_seconds``: its first
    pass), and with the default configs and the picks it kept (``checked_default_seconds``,
    ``checked_seconds``: the pass that measured the set kept, the first when it is every pick;
    when none is kept, the last pass's default, twice; passes meet the machine at different
    moments, so only times of one pass compare); that pass's spread of the rounds (how far the
    median round lies above the best one); and each tuned workload (``workloads``): a kept one
    as that pass measured it, a dropped one as last measured. No tuned pick: the times are nan
    and ``workloads`` is empty.

    Example:
        >>> ModelCheck(1e-3, 1.2e-3, 0.9e-3, 0.02, checked_default_seconds=1e-3).dropped
        []
    """
    default_seconds: float = math.nan
    tuned_seconds: float = math.nan
    checked_seconds: float = math.nan
    spread: float = math.nan
    workloads: list = field(default_factory=list)
    checked_default_seconds: float = math.nan

    @property
    def dropped(self) -> list:
        """The workloads whose pick became the default."""
        return [w for w in self.workloads if not w.kept]

    def to_json(self) -> dict:
        """A JSON-ready dict (milliseconds per run; null for unknown numbers).

        Example:
            >>> ModelCheck().to_json()["workloads"]
            []
        """
        def ms(seconds):
            return seconds * 1e3 if math.isfinite(seconds) else None
        return {"default_ms": ms(self.default_seconds), "tuned_ms": ms(self.tuned_seconds),
                "checked_default_ms": ms(self.checked_default_seconds), "checked_ms": ms(self.checked_seconds),
                "spread": self.spread if math.isfinite(self.spread) else None,
                "workloads": [{"key": w.key, "name": w.name, "partitions": w.partitions,
                               "default_ms": w.default_seconds * 1e3, "tuned_ms": w.tuned_seconds * 1e3,
                               "kept": w.kept} for w in self.workloads]}


def random_feeds(ports, seed: int = 0) -> dict:
    """Seeded random arrays for graph input ports (logical tensors): standard normal floats
    (bfloat16 too), integers 0 or 1 (valid ids, token types and masks for any vocabulary:
    onnxruntime refuses a Gather index past its table, such as token type 3 of 2), random
    booleans.

    Example:
        >>> from tilefuse.graph_api import DataType, LogicalTensor
        >>> feeds = random_feeds([LogicalTensor(0, DataType.f32, (2, 3))], seed=1)
        >>> feeds[0].shape, feeds[0].dtype
        ((2, 3), dtype('float32'))
    """
    rng = np.random.default_rng(seed)
    feeds = {}
    for port in ports:
        dtype = port.dtype.numpy
        if dtype.kind == "f" or dtype == graph_api.DataType.bf16.numpy:     # ml_dtypes' bfloat16 is kind "V"
            feeds[port.id] = rng.standard_normal(port.shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[port.id] = rng.integers(0, 2, port.shape).astype(bool)
        else:
            feeds[port.id] = rng.integers(0, 2, port.shape).astype(dtype)
    return feeds


def check_in_model(graph, db, seed: int = 0, rounds: int = STEP_ROUNDS, round_seconds: float = STEP_ROUND_SECONDS,
                   margin: float = MARGIN) -> ModelCheck:
    """Time ``graph`` (finalized) step by step with the default configs and with ``db``'s
    picks (a Database or a path), and make the default the pick of every tuned workload that
    is ``margin`` slower in the model (see the module's docstring); the feeds are random
    (``seed``). ``rounds`` and ``round_seconds``: how the steps are timed (``timing.time_steps``).
    """
    if not isinstance(db, Database):
        with Database(db) as database:
            return check_in_model(graph, database, seed, rounds, round_seconds, margin)
    database = db
    target = current_target()
    workloads = tasks_by_workload(graph)        # key -> (task, partition indices)
    check = ModelCheck()
    default = _compile(graph, FixedConfigs(lambda template: None))      # not an active source's
    feeds = random_feeds(default.input_ports, seed)
    passes = []             # each pass: (its WorkloadChecks by key, default s, tuned s, spread)
    measured = {}           # key -> its WorkloadCheck, as last measured
    originals = {}          # key -> its pick before the check (None: its best record decided)
    for attempt in range(PASSES + 1):
        picks = HistoryBest(database)
        tuned_keys = [t.key for t in tuned_tasks([task for task, _ in workloads.values()], picks)]
        if not tuned_keys:          # none (left): the graph compiles as the default one
            break
        for key in tuned_keys:
            originals.setdefault(key, (database.pick(key, target.key), picks.config_for(workloads[key][0].template)))
        tuned = _compile(graph, picks)
        steps, noise = time_steps({"default": default, "tuned": tuned}, feeds, rounds, round_seconds)
        this_pass = {}
        for key in tuned_keys:
            task, indices = workloads[key]
            costs = [sum(steps[name].get(k, 0.0) for k in indices) for name in ("default", "tuned")]
            this_pass[key] = WorkloadCheck(key, task.name, len(indices), *costs, costs[1] <= costs[0] * (1 + margin))
        measured.update(this_pass)
        passes.append((this_pass, *(sum(steps[name].values()) for name in ("default", "tuned")), noise))
        losing = [key for key in tuned_keys if not measured[key].kept]
        if not losing or attempt == PASSES:
            break
        _drop(database, target.key, losing, measured, workloads, noise)
    if not passes:
        return check
    check.default_seconds, check.tuned_seconds = passes[0][1:3]
    # the set of picks whose pass ran fastest against its default (the later one within margin of
    # it: it dropped the picks that lost alone), if that is margin faster: one pass's drops may
    # be a busy machine's noise, and the whole run is what counts
    ratios = [tuned / default if default > 0 else math.inf for _, default, tuned, _ in passes]
    best = max(k for k, r in enumerate(ratios) if r <= min(ratios) * (1 + margin))
    chosen = passes[best] if ratios[best] <= 1 - margin else None
    last = passes[-1]
    kept = chosen[0] if chosen else {}
    check.checked_default_seconds, check.checked_seconds, check.spread = \
        (chosen[1], chosen[2], chosen[3]) if chosen else (last[1], last[1], last[3])
    for key, (original, config) in originals.items():
        if key in kept:             # as measured in the chosen pass; a later pass's drop undone
            w = measured[key] = replace(kept[key], kept=True)
            database.set_pick(key, target.key, original or Pick(dict(config.values), w.default_seconds,
                                                                  w.tuned_seconds, check.spread))
        elif measured[key].kept:    # kept by its last pass, but not in the set that ran fastest
            _drop(database, target.key, [key], measured, workloads, check.spread)
    check.workloads = [measured[key] for key in originals]
    return check


def _drop(database: Database, target_key: str, keys, measured: dict, workloads: dict, spread: float) -> None:
    """Make the default the pick of each workload in ``keys``, with its costs as measured in
    the model, and mark it dropped in ``measured``."""
    for key in keys:
        w = measured[key] = replace(measured[key], kept=False)
        database.set_pick(key, target_key, Pick(dict(workloads[key][0].template.default_config().values),
                                                w.default_seconds, w.tuned_seconds, spread))


def _compile(graph, configs):
    """``graph`` compiled with ``configs`` (a ConfigSource), quietly: a workload without a
    record compiles with its default, as intended here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return graph_api.compile_graph(graph, configs=configs)
