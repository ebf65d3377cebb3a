"""The tuning loop: for each task, a tuner proposes configs, workers measure them, every
measurement goes to the database and the JSON-lines log at once, and the tuner learns.

``tune(tasks, trials=..., db=..., log=..., tuner=..., seed=...)`` splits the trial count and
the time budget over the tasks by weight (what one task leaves unused goes to the next),
measures the default config first (the baseline of the report) and the template's
``starting_points`` (its other algorithms at their rule-based settings) in the first batch,
resumes from the records already in the database for this CPU (they count toward the trials,
so running the same command again measures nothing new; no candidate is measured twice, even by
several tuners on one database: each batch is claimed in the database before it is measured,
and configs another tuner has measured or claimed are left to it), times the default again at
the head and the tail of every batch (the ``Yardstick``: a shared machine's speed drifts, 1.5x
for minutes on a busy VM, so each candidate is ranked by its cost over the default's around
it, times the median of the default's timings; those records are re-timings, not trials),
catches the log up with
the database's records of each task (a log write that failed, or a kill between the two
writes, leaves the log short until the next run), warm-starts the xgb model with the records
of earlier tasks of the same template (transfer learning), and stops a task early when its
best cost has not improved for ``early_stopping`` trials. Last, the default and the search's
few best configs are measured again in turn (``CHECK_ROUNDS`` rounds): the fastest of them
becomes the workload's pick (``Database.pick``, what ``HistoryBest`` compiles with) only when
it beats the default there; else the default does. The spread of those rounds is the noise.
How each of those timings is taken is ``timing``'s business.
"""
from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np

from tilefuse.schedule.space import Config

from .database import Database, Pick
from .executor import default_executor
from .features import features_of, features_on
from .log import append_records
from .measure import MeasureError, MeasureOptions, measure_batch
from .record import Record, config_key, first_measurements
from .target import current_target
from .task import Task
from .timing import CHECK_ROUNDS, Yardstick, result_cost, rounds_in_turn, spread
from .tuner import TUNERS, EarlyStopping, make_tuner


@dataclass
class TaskReport:
    """How tuning one task went: trials measured now (``trials``) and before (``resumed``),
    errors per kind with the first message of each (``messages`` keeps them all), the default
    and best mean costs in seconds, the best config, and why tuning stopped.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> A = placeholder((1000,), name="A"); task = Task(compute((1000,), lambda i: A[i] * 2.0, name="B"))
        >>> report = TaskReport(task, default_cost=2e-6, best_cost=1e-6)
        >>> report.speedup, report.gflops(report.best_cost), report.applied
        (2.0, 1.0, '')
    """
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
    pick: Pick | None = None

    @property
    def applied(self) -> str:
        """"tuned" when one of the search's best configs beat the default side by side (and is
        what the task compiles with), "default" when none did, "" when there was no check.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> A = placeholder((8,), name="A"); task = Task(compute((8,), lambda i: A[i] * 2.0, name="B"))
            >>> other = dict(task.space.get(1).values)
            >>> TaskReport(task, pick=Pick(other, 2e-6, 1e-6, 0.01)).applied
            'tuned'
            >>> TaskReport(task, pick=Pick(other, 2e-6, 3e-6, 0.01)).applied
            'default'
        """
        if self.pick is None:
            return ""
        return "tuned" if self.pick.config != dict(self.task.template.default_config().values) and \
            self.pick.tuned_cost < self.pick.default_cost else "default"

    @property
    def speedup(self) -> float:
        """Default cost over best cost (nan when either is unknown)."""
        if math.isfinite(self.default_cost) and math.isfinite(self.best_cost) and self.best_cost > 0:
            return self.default_cost / self.best_cost
        return math.nan

    def gflops(self, cost: float) -> float:
        """The task's flop count over ``cost`` seconds, in GFLOPS (nan without flops or cost)."""
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


SCHEDULERS = ("gradient", "sequential")


def tune(tasks, trials: int | None = 64, db=None, log=None, tuner: str = "xgb", seed: int = 0,
         time_budget: float | None = None, executor=None, options: MeasureOptions | None = None,
         early_stopping: int | None = None, batch_size: int = 8, resume: bool = True,
         progress=None, scheduler: str = "gradient") -> list[TaskReport]:
    """Tune ``tasks`` (Tasks, or tensors / lists of tensors made into Tasks) with ``trials``
    measurements in all (None: as many as ``time_budget`` allows); returns one TaskReport per task.

    ``scheduler``: "gradient" (each task's default first, then batch after batch to the task
    with the largest expected gain, ``task_priority``) or "sequential" (one task after the
    other, the trials and the time budget shared by weight). ``db``: a Database or a path
    (default: an in-memory database); ``log``: a JSON-lines file to append every record to
    (None: no log); ``tuner``: "xgb", "random" or "grid"; ``time_budget``: seconds for the
    whole run (None: unbounded); ``executor``: from ``executor_from`` (default: the local
    process pool); ``progress``: a function called as ``progress(report, done, planned)`` after
    every batch of the task of ``report``, ``done`` the run's trials so far (every task's,
    resumed ones included) and ``planned`` its ``trials`` (None: bounded by the time budget).

    Example:
        >>> tune([], trials=None)
        Traceback (most recent call last):
        ...
        ValueError: trials=None (as many as the time allows) needs a time_budget
    """
    tasks = [t if isinstance(t, Task) else Task(t) for t in tasks]
    if trials is None and time_budget is None:
        raise ValueError("trials=None (as many as the time allows) needs a time_budget")
    if trials is not None and (isinstance(trials, bool) or not isinstance(trials, int) or trials < 0):
        raise ValueError(f"trials must be a non-negative int, got {trials!r}")
    if time_budget is not None and not time_budget > 0:
        raise ValueError(f"time_budget must be positive seconds, got {time_budget!r}")
    if tuner not in TUNERS:
        raise ValueError(f"unknown tuner {tuner!r}; expected one of {sorted(TUNERS)}")
    if scheduler not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {scheduler!r}; expected one of {list(SCHEDULERS)}")
    database, owned = _open(db)
    reports = [TaskReport(task) for task in tasks]
    notify = None if progress is None else \
        (lambda report: progress(report, sum(r.resumed + r.trials for r in reports), trials))
    setting = _Setting(database, log, tuner, executor, MeasureOptions() if options is None else options,
                       early_stopping, batch_size, resume, notify, current_target(),
                       None if time_budget is None else time.monotonic() + time_budget)
    limit = math.inf if trials is None else trials
    try:
        if scheduler == "sequential":
            _tune_in_turn(tasks, reports, limit, time_budget, seed, setting)
        else:
            _tune_by_gain(tasks, reports, limit, seed, setting)
    finally:
        if owned:
            database.close()
    return reports


@dataclass
class _Setting:
    """What every task's run shares."""
    database: Database
    log: object
    tuner: str
    executor: object
    options: MeasureOptions
    early_stopping: int | None
    batch_size: int
    resume: bool
    progress: object
    target: object
    deadline: float | None


def _tune_in_turn(tasks, reports, trials, time_budget, seed, setting) -> None:
    """The sequential scheduler: each task to the end of its share (what one leaves goes to
    the next)."""
    planned = _shares(tasks, trials)
    time_shares = _shares(tasks, time_budget) if time_budget is not None else [None] * len(tasks)
    carry_trials, carry_time = 0.0, 0.0
    done_by_template: dict = {}
    for k, (task, report) in enumerate(zip(tasks, reports)):
        budget = planned[k] + carry_trials
        budget = int(round(budget)) if math.isfinite(budget) else budget
        seconds = None if time_shares[k] is None else time_shares[k] + carry_time
        started = time.monotonic()
        earlier = done_by_template.setdefault(_template_signature(task), [])
        run = _tune_one(task, report, seconds, setting, seed + k, budget > 0,
                        _transfer(earlier) if setting.tuner == "xgb" else None)
        earlier.append(_drive(run, lambda: budget - report.resumed - report.trials, report))
        report.seconds = time.monotonic() - started
        carry_trials = max(0.0, planned[k] + carry_trials - report.trials - report.resumed)
        if seconds is not None:
            carry_time = max(0.0, seconds - report.seconds)


def _tune_by_gain(tasks, reports, trials, seed, setting) -> None:
    """The gradient scheduler: every task's baseline (its default) first, then each batch to
    the live task of highest ``task_priority``, until the trials or the time run out."""
    runs, earlier_by_template = {}, {}
    for k, (task, report) in enumerate(zip(tasks, reports)):
        started = time.monotonic()
        earlier = earlier_by_template.setdefault(_template_signature(task), [])
        run = _tune_one(task, report, None, setting, seed + k, trials > 0,
                        _transfer([r.tuner for r in earlier]) if setting.tuner == "xgb" else None)
        state = _ScheduledRun(run, report)
        if state.advance(None):
            runs[k] = state
            earlier.append(state)
        report.seconds += time.monotonic() - started
    while runs:
        used = sum(r.resumed + r.trials for r in reports)
        out_of_time = setting.deadline is not None and time.monotonic() >= setting.deadline
        if used >= trials or out_of_time:
            for k, state in runs.items():
                state.report.stopped = "time budget" if out_of_time else "trials"
                state.finish()
            break
        k = max(runs, key=lambda k: runs[k].priority())
        at = time.monotonic()
        if not runs[k].advance(min(setting.batch_size, trials - used)):
            del runs[k]
        reports[k].seconds += time.monotonic() - at


class _ScheduledRun:
    """A task's run under the gradient scheduler: its generator, report, and its best cost
    after each measurement (what its priority reads)."""

    def __init__(self, run, report: TaskReport):
        self.run, self.report, self.tuner = run, report, None
        self.bests: list[float] = []

    def advance(self, grant) -> bool:
        """Let the run measure up to ``grant`` trials (None: its baseline); False once it ended."""
        try:
            self.tuner = self.run.send(grant) if grant is not None else next(self.run)
        except StopIteration as stop:
            self.tuner = stop.value
            return False
        self.bests += [self.report.best_cost] * max(1, self.report.trials + self.report.resumed - len(self.bests))
        return True

    def priority(self) -> float:
        """The task's ``task_priority`` now."""
        return task_priority(self.report.task.weight, self.report.best_cost, self.bests)

    def finish(self) -> None:
        """End the run (the caller has set ``report.stopped``): its check against the default."""
        try:
            self.run.send(0)
        except StopIteration as stop:
            self.tuner = stop.value


def _drive(run, grant, report):
    """Run a task's generator to its end, granting ``grant()`` trials (at most a batch each
    time); returns its tuner."""
    state = _ScheduledRun(run, report)
    live = state.advance(None)
    while live:
        left = grant()
        if left <= 0:
            report.stopped = "trials"
            state.finish()
            break
        live = state.advance(left)
    return state.tuner


PRIOR_GAIN = 0.05
"""The share of its best cost one trial of a task with few measurements is assumed to save,
shrinking as 1/trials: so every task gets tried before the gradients decide."""
WINDOW = 8
"""The trials over which a task's recent gain (its backward gradient) is measured."""


def task_priority(weight: int, best_cost: float, bests: list) -> float:
    """How much end-to-end time one more trial of a task is expected to save (seconds per
    trial): its weight times the larger of what its last trials saved per trial (up to
    ``WINDOW`` of them: Ansor's backward gradient) and an optimistic prior, a ``PRIOR_GAIN``
    share of its best cost shrinking as 1/trials. ``bests``: the best cost after each of its
    measurements. A task without a working config comes first.

    Example:
        >>> flat, improving = [1.0] * 20, [2.0] * 12 + [1.0] * 8
        >>> task_priority(1, 1.0, improving) > task_priority(1, 1.0, flat)
        True
        >>> task_priority(3, 1.0, flat) > task_priority(1, 1.0, flat)
        True
    """
    if not math.isfinite(best_cost):
        return math.inf
    gain = best_cost * PRIOR_GAIN / (len(bests) + 1)
    window = min(WINDOW, len(bests) - 1)
    if window > 0 and math.isfinite(bests[-window - 1]):
        gain = max(gain, (bests[-window - 1] - bests[-1]) / window)
    return weight * gain


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


def _tune_one(task, report, seconds, setting, seed, baseline, transfer):
    """Tune one task, as a generator: it measures the baseline (the default config, when
    ``baseline``), yields its tuner, and is then sent the trials it may measure next (a batch
    at most; 0 ends it, the caller having set ``report.stopped``), yielding after each batch;
    at the end it checks the best config against the default. Returns its tuner (an xgb
    tuner's measurements warm-start later tasks)."""
    database, log, target = setting.database, setting.log, setting.target
    database.add_workload(task.key, task.name, task.template_name, task.describe())
    if log is not None:     # what reached the db but not the log (a failed log write, a kill) goes first
        append_records(log, database.records(task.key, target.key), skip_present=True)
    extra = {"transfer": transfer, "featurize_many": lambda configs: features_on(
        setting.executor or default_executor(), task.template, configs, setting.options.timeout)} \
        if setting.tuner == "xgb" else {}
    tuner = make_tuner(setting.tuner, task.space, featurize=lambda cfg: features_of(task.template, cfg),
                       seed=seed, **extra)
    tuner.start_with(task.template.starting_points())
    default = task.template.default_config()
    default_key = config_key(dict(default.values))
    stick, trials = Yardstick(default_key), []       # trials: the task's first measurements of configs
    if setting.resume:
        old = database.records(task.key, target.key)
        stick.note(old)
        trials = first_measurements(old)
        if trials:
            tuner.update([Config(r.config) for r in trials],
                         [_on_scale(r, stick.cost(r.config_key, r.mean_cost)) for r in trials])
            report.resumed = len(trials)
            _note_best(report, trials, stick)
    stopper = EarlyStopping(setting.early_stopping) if setting.early_stopping else None
    started = time.monotonic()

    def out_of_time():
        now = time.monotonic()
        return (seconds is not None and now - started >= seconds) or \
            (setting.deadline is not None and now >= setting.deadline)
    report.stopped = "trials"
    first = baseline and not math.isfinite(report.default_cost)     # the baseline always
    while True:
        if out_of_time():
            report.stopped = "time budget"
            break
        if stopper is not None and stopper.should_stop:
            report.stopped = "early stopping"
            break
        if first:
            batch = [default]        # the baseline first: the report's "default" column
        else:
            grant = yield tuner
            if not grant:
                break
            if not tuner.has_next():
                report.stopped = "space exhausted"
                break
            batch = tuner.next_batch(min(setting.batch_size, grant))
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
        timed = batch if default in batch else [default, *batch, default]   # the yardstick around the batch
        try:
            try:
                results = measure_batch(task, timed, setting.options, setting.executor, give_up=stick.give_up)
            except MeasureError as err:
                report.errors["compile"] += 1
                report.first_error.setdefault("compile", str(err))
                report.messages.append(("compile", str(err)))
                report.stopped = "default config failed"
                break
            records = [_record(task, cfg, res, target) for cfg, res in zip(timed, results)]
            database.add_many(records)      # ends the claims
        finally:
            database.release(task.key, target.key, keys)
        if log is not None:
            append_records(log, records)
        stick.note(records)
        if timed is not batch:
            results, records = results[1:-1], records[1:-1]
        tuner.update(batch, [_on_scale(res, stick.cost(key, result_cost(res))) for key, res in zip(keys, results)])
        report.trials += len(batch)
        for res in results:
            if res.error_kind is not None:
                report.errors[res.error_kind] += 1
                report.first_error.setdefault(res.error_kind, res.error_msg.splitlines()[0] if res.error_msg else "")
                report.messages.append((res.error_kind, res.error_msg))
        trials += records
        _note_best(report, trials, stick)
        if stopper is not None:
            stopper.record_results(results)
        if setting.progress is not None:
            setting.progress(report)
    stick = Yardstick(default_key)          # every record again, in order: other tuners' too
    stick.note(everything := database.records(task.key, target.key))
    _note_best(report, first_measurements(everything), stick)
    report.pick = database.pick(task.key, target.key)
    if report.trials or report.pick is None:
        _check_against_default(task, report, default, database, setting.options, setting.executor, target,
                               lambda r: stick.cost(r.config_key, r.mean_cost))
    return tuner


CHECK_CANDIDATES = 3
"""The search's best configs (distinct, other than the default) that the final check measures
again: one batch of the search may have met a quiet machine and another a busy one, so the
search's single best is partly the luck of its batch."""
CHECK_MARGIN = 0.01
"""The tuned config is applied only when its best round is at least this much below the default's."""


def _check_against_default(task, report, default, database, options, executor, target, cost) -> None:
    """Measure the default and the search's ``CHECK_CANDIDATES`` best configs in turn
    (``CHECK_ROUNDS`` rounds, each config once per round, so all of them meet the same
    machine) and keep the one to compile with as the workload's pick: the candidate with the
    best round (the median of the round's calls), when that beats the default's by
    ``CHECK_MARGIN``; else the default.
    The noise is how far a median round lies above the best one, the largest of them."""
    if report.best_config is None or not math.isfinite(report.default_cost):
        return
    candidates = _best_configs(task, database.records(task.key, target.key, ok_only=True), default,
                               CHECK_CANDIDATES, cost)
    if not candidates:
        report.pick = Pick(dict(default.values), report.default_cost, report.best_cost, 0.0)
    else:
        group = [default, *candidates]
        try:
            costs = rounds_in_turn(lambda batch: measure_batch(task, batch, options, executor), group,
                                   CHECK_ROUNDS)
        except MeasureError:
            return
        if not all(math.isfinite(c) for c in costs[0]):
            return                              # the default did not run: nothing to compare with
        best_of = [min(c) for c in costs]       # the best round of each, as benchmarks compare
        noise = max(spread(c) for c, b in zip(costs, best_of) if math.isfinite(b) and b > 0)
        fastest = min(range(1, len(group)), key=lambda k: best_of[k])
        faster = math.isfinite(best_of[fastest]) and best_of[fastest] <= best_of[0] * (1 - CHECK_MARGIN)
        report.pick = Pick(dict((group[fastest] if faster else default).values), best_of[0], best_of[fastest],
                           noise)
    database.set_pick(task.key, target.key, report.pick)


def _best_configs(task, records, default: Config, count: int, cost=lambda r: r.mean_cost) -> list[Config]:
    """Up to ``count`` distinct configs of ``records`` (ok ones) other than ``default`` that
    are points of the task's space (a record from before the space changed is not), the least
    ``cost`` (a record's, in seconds) first."""
    default_key, seen, found = config_key(dict(default.values)), set(), []
    for r in sorted(records, key=cost):
        if len(found) == count:
            break
        if r.config_key == default_key or r.config_key in seen:
            continue
        seen.add(r.config_key)
        config = Config(dict(r.config))
        try:
            task.space.index_of(config)
        except ValueError:
            continue
        found.append(config)
    return found


def _on_scale(result, cost: float):
    """``result`` with its costs scaled so that their mean is ``cost`` (an error as it is)."""
    raw = result_cost(result)
    if not (math.isfinite(raw) and math.isfinite(cost)) or raw == cost:
        return result
    return replace(result, costs=tuple(c * cost / raw for c in result.costs))


def _note_best(report: TaskReport, trials, stick: Yardstick) -> None:
    """Set the report's default cost (the yardstick's reference, else the default's record),
    best cost and best config from the ok records of ``trials``, on the yardstick's scale."""
    report.best_cost, report.best_config = math.inf, None
    if stick.defaults:
        report.default_cost = stick.reference
    for r in trials:
        if not r.is_ok:
            continue
        cost = stick.cost(r.config_key, r.mean_cost)
        if r.config_key == stick.default_key and not stick.defaults:
            report.default_cost = cost
        if cost < report.best_cost:
            report.best_cost, report.best_config = cost, dict(r.config)
