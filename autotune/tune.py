"""The tuning loop: for each task, a tuner proposes configs, workers measure them, every
measurement goes to the database and the JSON-lines log at once, and the tuner learns.

``tune(tasks, trials=..., db=..., log=..., tuner=..., seed=...)`` splits the trial count and
the time budget over the tasks by weight (what one task leaves unused goes to the next),
measures the default config first (the baseline of the report), resumes from the records
already in the database for this CPU (they count toward the trials, so running the same
command again measures nothing new; no config is measured twice, even by several tuners on
one database: each batch is claimed in the database before it is measured, and configs another
tuner has measured or claimed are left to it), catches the log up with the database's records
of each task (a log write that failed, or a kill between the two writes, leaves the log short
until the next run), warm-starts the xgb
model with the records of earlier tasks of the same template (transfer learning), and stops
a task early when its best cost has not improved for ``early_stopping`` trials.

Example:
    >>> # reports = tune([Task(C)], trials=32, db="tuning.db", log="tuning_logs/mm.jsonl", seed=0)
    >>> # reports[0].speedup
"""
from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from schedule.space import Config

from .database import Database
from .features import features_of
from .log import append_records
from .measure import MeasureError, MeasureOptions, measure_batch
from .record import Record, config_key
from .target import current_target
from .task import Task
from .tuner import TUNERS, EarlyStopping, make_tuner


@dataclass
class TaskReport:
    """How tuning one task went: trials measured now (``trials``) and before (``resumed``),
    errors per kind with the first message of each (``messages`` keeps them all), the default
    and best mean costs in seconds, the best config, and why tuning stopped."""
    task: Task
    trials: int = 0
    resumed: int = 0
    errors: Counter = field(default_factory=Counter)
    first_error: dict = field(default_factory=dict)
    messages: list = field(default_factory=list)
    default_cost: float = math.inf
    best_cost: float = math.inf
    best_config: dict | None = None
    stopped: str = "not started"
    seconds: float = 0.0

    @property
    def speedup(self) -> float:
        """Default cost over best cost (nan when either is unknown).

        Example:
            >>> # report.speedup -> 1.8
        """
        if math.isfinite(self.default_cost) and math.isfinite(self.best_cost) and self.best_cost > 0:
            return self.default_cost / self.best_cost
        return math.nan

    def gflops(self, cost: float) -> float:
        """The task's flop count over ``cost`` seconds, in GFLOPS (nan without flops or cost).

        Example:
            >>> # report.gflops(report.best_cost)
        """
        if not self.task.flop or not math.isfinite(cost) or cost <= 0:
            return math.nan
        return self.task.flop / cost / 1e9


def _open(db) -> tuple[Database, bool]:
    if db is None:
        return Database(":memory:"), True
    if isinstance(db, Database):
        return db, False
    return Database(db), True


def _shares(tasks, total: float) -> list[float]:
    weights = [t.weight for t in tasks]
    return [total * w / sum(weights) for w in weights]


def tune(tasks, trials: int = 64, db=None, log=None, tuner: str = "xgb", seed: int = 0,
         time_budget: float | None = None, executor=None, options: MeasureOptions | None = None,
         early_stopping: int | None = None, batch_size: int = 8, resume: bool = True,
         progress=None) -> list[TaskReport]:
    """Tune ``tasks`` (Tasks, or tensors / lists of tensors made into Tasks) with ``trials``
    measurements in all, shared by weight; returns one TaskReport per task.

    ``db``: a Database or a path (default: an in-memory database); ``log``: a JSON-lines file
    to append every record to (None: no log); ``tuner``: "xgb", "random" or "grid";
    ``time_budget``: seconds for the whole run (None: unbounded); ``executor``: from
    ``executor_from`` (default: the local process pool); ``progress``: a function called as
    ``progress(report, done, planned)`` after every batch.

    Example:
        >>> # tune([Task(C)], trials=16, db="tuning.db", tuner="random", seed=1)[0].best_config
    """
    tasks = [t if isinstance(t, Task) else Task(t) for t in tasks]
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 0:
        raise ValueError(f"trials must be a non-negative int, got {trials!r}")
    if time_budget is not None and not time_budget > 0:
        raise ValueError(f"time_budget must be positive seconds, got {time_budget!r}")
    if tuner not in TUNERS:
        raise ValueError(f"unknown tuner {tuner!r}; expected one of {sorted(TUNERS)}")
    database, owned = _open(db)
    options = MeasureOptions() if options is None else options
    target = current_target()
    deadline = None if time_budget is None else time.monotonic() + time_budget
    reports = [TaskReport(task) for task in tasks]
    planned = _shares(tasks, trials)
    time_shares = _shares(tasks, time_budget) if time_budget is not None else [None] * len(tasks)
    carry_trials, carry_time = 0.0, 0.0
    done_by_template: dict = {}
    try:
        for k, (task, report) in enumerate(zip(tasks, reports)):
            budget = int(round(planned[k] + carry_trials))
            seconds = None if time_shares[k] is None else time_shares[k] + carry_time
            started = time.monotonic()
            earlier = done_by_template.setdefault(_template_signature(task), [])
            earlier.append(_tune_one(task, report, budget, seconds, deadline, database, log, tuner, seed + k,
                                     executor, options, early_stopping, batch_size, resume, progress, target,
                                     _transfer(earlier) if tuner == "xgb" else None))
            report.seconds = time.monotonic() - started
            carry_trials = max(0.0, planned[k] + carry_trials - report.trials - report.resumed)
            if seconds is not None:
                carry_time = max(0.0, seconds - report.seconds)
    finally:
        if owned:
            database.close()
    return reports


def _template_signature(task: Task):
    """Tasks whose feature rows line up: the same template and the same knobs."""
    return task.template_name, tuple((name, len(k.candidates)) for name, k in task.space.knobs.items())


def _record(task: Task, config: Config, result, target) -> Record:
    return Record.create(task.key, task.name, task.template_name, dict(config.values), costs=result.costs,
                         error_kind=result.error_kind, error_msg=result.error_msg or "",
                         build_seconds=result.build_seconds, target=target, timestamp=result.timestamp)


def _transfer(earlier: list):
    """(features, costs, groups) of what the ``earlier`` xgb tuners measured (their cached
    feature rows), one group per task, or None."""
    rows, costs, groups = [], [], []
    for g, tuner in enumerate(earlier):
        x, c = tuner.training_set()
        rows += x
        costs += c
        groups += [g] * len(x)
    if not rows:
        return None
    return np.array(rows), np.array(costs), np.array(groups)


def _tune_one(task, report, budget, seconds, deadline, database, log, tuner_name, seed, executor, options,
              early_stopping, batch_size, resume, progress, target, transfer):
    """Tune one task; returns its tuner (an xgb tuner's measurements warm-start later tasks)."""
    database.add_workload(task.key, task.name, task.template_name, task.describe())
    if log is not None:     # what reached the db but not the log (a failed log write, a kill) goes first
        append_records(log, database.records(task.key, target.key), skip_present=True)
    extra = {"transfer": transfer} if tuner_name == "xgb" else {}
    tuner = make_tuner(tuner_name, task.space, featurize=lambda cfg: features_of(task.template, cfg),
                       seed=seed, **extra)
    default = task.template.default_config()
    if resume:
        old = [r for r in database.records(task.key, target.key)]
        if old:
            tuner.update([Config(r.config) for r in old], old)
            report.resumed = len(old)
            _note_best(report, old, default)
    stopper = EarlyStopping(early_stopping) if early_stopping else None
    started = time.monotonic()

    def out_of_time():
        now = time.monotonic()
        return (seconds is not None and now - started >= seconds) or (deadline is not None and now >= deadline)
    report.stopped = "trials"
    first = not math.isfinite(report.default_cost)
    while (first and budget > 0) or report.resumed + report.trials < budget:   # the baseline always
        if out_of_time():
            report.stopped = "time budget"
            break
        if stopper is not None and stopper.should_stop:
            report.stopped = "early stopping"
            break
        if first:
            batch = [default]        # the baseline first: the report's "default" column
        else:
            if not tuner.has_next():
                report.stopped = "space exhausted"
                break
            batch = tuner.next_batch(min(batch_size, budget - report.resumed - report.trials))
            if not batch:
                report.stopped = "space exhausted"
                break
        keys = [config_key(dict(cfg.values)) for cfg in batch]
        granted = set(database.claim(task.key, target.key, keys))
        first = False
        if len(granted) < len(batch):       # measured or being measured by another tuner on this db
            batch = [cfg for cfg, key in zip(batch, keys) if key in granted]
            keys = [key for key in keys if key in granted]
            if not batch:
                continue
        try:
            try:
                results = measure_batch(task, batch, options, executor)
            except MeasureError as err:
                report.errors["compile"] += 1
                report.first_error.setdefault("compile", str(err))
                report.messages.append(("compile", str(err)))
                report.stopped = "default config failed"
                break
            records = [_record(task, cfg, res, target) for cfg, res in zip(batch, results)]
            database.add_many(records)      # ends the claims
        finally:
            database.release(task.key, target.key, keys)
        if log is not None:
            append_records(log, records)
        tuner.update(batch, results)
        report.trials += len(batch)
        for res in results:
            if res.error_kind is not None:
                report.errors[res.error_kind] += 1
                report.first_error.setdefault(res.error_kind, res.error_msg.splitlines()[0] if res.error_msg else "")
                report.messages.append((res.error_kind, res.error_msg))
        _note_best(report, records, default)
        if stopper is not None:
            stopper.record_results(results)
        if progress is not None:
            progress(report, report.resumed + report.trials, budget)
    _note_best(report, database.records(task.key, target.key), default)   # other tuners' records too
    return tuner


def _note_best(report: TaskReport, records, default: Config) -> None:
    default_key = config_key(dict(default.values))
    for r in records:
        if not r.is_ok:
            continue
        if r.config_key == default_key and not math.isfinite(report.default_cost):
            report.default_cost = r.mean_cost
        if r.mean_cost < report.best_cost:
            report.best_cost, report.best_config = r.mean_cost, dict(r.config)
