"""``autotune tune``: tune every task of a graph, check the picks in the model, and print a
row per task (or a JSON summary).

Example:
    >>> from tilefuse.autotune.model_check import ModelCheck, WorkloadCheck
    >>> print(model_check_line(ModelCheck(1e-4, 0.9e-4, 0.9e-4, 0.01, [WorkloadCheck("k", "dense", 1, 5e-5, 4e-5, True)])))
    in the model (steps summed): default 0.100 ms, every pick 0.090 ms (1.11x, ±1%); 0 of 1 tuned pick(s) dropped
"""
from __future__ import annotations

import contextlib
import math
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tilefuse.tensorir.errors import TilefuseError
from tilefuse.tensorir.runtime.cache_lines import flushes_here

from .cli_io import (EXIT_BUDGET_EXHAUSTED, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNUSABLE, BadInput, finite_or_none,
                     first_line, format_seconds, format_table, load_graph, ms_text, number_text, open_database,
                     print_json, shorten)
from .cli_shapes import ShapeRequest
from .executor import DaskExecutor, executor_from
from .extract import extract_tasks
from .measure import MeasureOptions
from .model_check import check_in_model
from .record import ERROR_KINDS
from .target import current_target
from .timing import FLUSHED_REPEATS, flushes_by_default, weight_bytes
from .tune import tune

LOG_DIR = "tuning_logs"

@dataclass(frozen=True)
class TaskSummary:
    """One row of the ``tune`` table: a task with every measurement of it on this CPU that the
    run used (resumed ones and new ones), so running the same command again shows the same
    row. Costs are mean seconds per run; ``errors`` counts failed measurements per kind,
    ``first_errors`` keeps the first line of the first message of each kind and ``messages``
    every (kind, message).

    Example:
        >>> s = TaskSummary("dense", "0a1b", "complex", 1, 2_000_000, 16, 16, 0, 2e-4, 1e-4)
        >>> s.speedup, round(s.gflops(s.best_cost), 1)
        (2.0, 20.0)
    """
    name: str
    key: str
    template: str
    weight: int
    flop: int
    trials: int
    new_trials: int
    resumed_trials: int
    default_cost: float
    best_cost: float
    best_config: dict | None = None
    errors: dict = field(default_factory=dict)
    first_errors: dict = field(default_factory=dict)
    messages: tuple = ()
    stopped: str = ""
    seconds: float = 0.0
    shape: tuple = ()
    applied: str = ""
    checked_speedup: float = math.nan
    noise: float = math.nan
    dropped_in_model: bool = False

    @property
    def check(self) -> str:
        """The final side-by-side check as the "checked" column shows it: what the task
        compiles with, the default's time over the tuned config's, and the rounds' noise: of
        the kernels timed alone, or, marked "in the model", of the model's steps when the check
        in the model dropped the pick.

        Example:
            >>> TaskSummary("t", "k", "complex", 1, 0, 1, 1, 0, 2e-3, 1e-3, applied="tuned",
            ...             checked_speedup=1.9, noise=0.03).check
            'tuned 1.90x ±3%'
            >>> TaskSummary("t", "k", "complex", 1, 0, 1, 1, 0, 2e-3, 1e-3, applied="default",
            ...             checked_speedup=0.61, noise=0.02, dropped_in_model=True).check
            'default 0.61x ±2% in the model'
        """
        if not self.applied:
            return "-"
        noise = number_text(self.noise * 100, ".0f", "%")
        text = f"{self.applied} {number_text(self.checked_speedup, '.2f', 'x')} {'' if noise == '-' else '±'}{noise}"
        return text + (" in the model" if self.dropped_in_model else "")

    @property
    def label(self) -> str:
        """The task's name and output shape, as the table shows it (names repeat, shapes tell
        the tasks apart).

        Example:
            >>> TaskSummary("dense", "k", "complex", 1, 0, 0, 0, 0, 1.0, 1.0, shape=(32, 128)).label
            'dense 32x128'
        """
        shape = "x".join(str(n) for n in self.shape)
        return f"{shorten(self.name)} {shape}" if shape else shorten(self.name)

    @property
    def speedup(self) -> float:
        """Default cost over tuned cost (nan when either is unknown).

        Example:
            >>> TaskSummary("t", "k", "injective", 1, 0, 0, 0, 0, math.inf, math.inf).speedup
            nan
        """
        if math.isfinite(self.default_cost) and math.isfinite(self.best_cost) and self.best_cost > 0:
            return self.default_cost / self.best_cost
        return math.nan

    @property
    def tuned(self) -> bool:
        """True when some config of the task was measured successfully.

        Example:
            >>> TaskSummary("t", "k", "injective", 1, 0, 4, 4, 0, 1e-3, 1e-3).tuned
            True
        """
        return math.isfinite(self.best_cost)

    def gflops(self, cost: float) -> float:
        """The task's flops over ``cost`` seconds, in GFLOPS (nan when unknown).

        Example:
            >>> TaskSummary("t", "k", "complex", 1, 10**9, 1, 1, 0, 0.5, 0.5).gflops(0.5)
            2.0
        """
        if not self.flop or not math.isfinite(cost) or cost <= 0:
            return math.nan
        return self.flop / cost / 1e9

    def to_json(self, verbose: bool = False) -> dict:
        """A JSON-ready dict (milliseconds; null for unknown numbers); ``verbose`` adds every
        error message.

        Example:
            >>> TaskSummary("t", "k", "complex", 1, 0, 1, 1, 0, 2e-3, 1e-3).to_json()["tuned_ms"]
            1.0
        """
        data = {
            "name": self.name, "key": self.key, "template": self.template, "weight": self.weight,
            "flop": self.flop, "trials": self.trials, "new_trials": self.new_trials,
            "resumed_trials": self.resumed_trials,
            "default_ms": finite_or_none(self.default_cost * 1e3),
            "tuned_ms": finite_or_none(self.best_cost * 1e3),
            "default_gflops": finite_or_none(self.gflops(self.default_cost)),
            "tuned_gflops": finite_or_none(self.gflops(self.best_cost)),
            "speedup": finite_or_none(self.speedup), "best_config": self.best_config,
            "errors": {kind: self.errors.get(kind, 0) for kind in ERROR_KINDS},
            "first_errors": dict(self.first_errors), "stopped": self.stopped,
            "seconds": self.seconds, "shape": list(self.shape), "applied": self.applied or None,
            "checked_speedup": finite_or_none(self.checked_speedup), "noise": finite_or_none(self.noise),
            "dropped_in_model": self.dropped_in_model,
        }
        if verbose:
            data["messages"] = [{"kind": kind, "message": message} for kind, message in self.messages]
        return data


def summarize(report, prior_records, dropped_in_model: bool = False) -> TaskSummary:
    """The TaskSummary of a ``TaskReport`` whose run resumed from ``prior_records`` (the
    task's records on this CPU before the run; empty without resume): its errors are those of
    the prior records plus the new ones. ``dropped_in_model``: the check in the model made
    its pick the default (the report's pick holds the costs there).

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.autotune.record import Record
        >>> from tilefuse.autotune.task import Task
        >>> from tilefuse.autotune.tune import TaskReport
        >>> A = placeholder((8,), name="A"); task = Task(compute((8,), lambda i: A[i] * 2.0, name="B"))
        >>> report = TaskReport(task, trials=2, resumed=1, default_cost=2e-3, best_cost=1e-3)
        >>> crashed = Record.create(task.key, task.name, "injective", {}, error_kind="crash", error_msg="SIGSEGV")
        >>> s = summarize(report, [crashed]); s.trials, s.speedup, s.errors, s.shape
        (3, 2.0, {'crash': 1}, (8,))
    """
    errors, first, messages = Counter(), {}, []
    for record in prior_records:
        if record.error_kind is not None:
            errors[record.error_kind] += 1
            first.setdefault(record.error_kind, first_line(record.error_msg))
            messages.append((record.error_kind, record.error_msg))
    for kind, message in report.messages:
        first.setdefault(kind, first_line(message))
        messages.append((kind, message))
    errors.update(report.errors)
    task = report.task
    return TaskSummary(task.name, task.key, task.template_name, task.weight, task.flop,
                       report.trials + report.resumed, report.trials, report.resumed,
                       report.default_cost, report.best_cost, report.best_config, dict(errors),
                       first, tuple(messages), report.stopped, report.seconds,
                       tuple(int(n) for n in task.outputs[0].shape), report.applied,
                       report.pick.speedup if report.pick is not None else math.nan,
                       report.pick.spread if report.pick is not None else math.nan, dropped_in_model)


def _errors_cell(summary: TaskSummary) -> str:
    parts = [f"{kind} {summary.errors[kind]}" for kind in ERROR_KINDS if summary.errors.get(kind)]
    return ", ".join(parts) if parts else "0"


TABLE_LEGEND = ("% trials: the task's share of the run's trials; % time: its share of the model's kernel time "
                "(weight x default ms)\nspeedup: the search's best over the default, each kernel timed alone; "
                "checked: what the task compiles with after the default and the search's best were timed again "
                "in turn (\"in the model\": the check in the model dropped the pick), and the noise of those rounds")
NOISY = 0.25
"""Rounds whose median lies this much above the best one were timed on a busy machine."""


def tune_table(summaries, verbose: bool = False) -> str:
    """The end-of-run table: one row per task (its trials and their share of the run's, its
    share of the model's kernel time, what it compiles with after the side-by-side check),
    the legend of the columns, a note on checks a busy machine made noisy, then the first
    message of each error kind of each task (``verbose``: every message in full).

    Example:
        >>> s = TaskSummary("dense", "0a1b", "complex", 1, 2_000_000, 16, 16, 0, 2e-4, 1e-4,
        ...                 errors={"timeout": 1}, first_errors={"timeout": "ran over 10 s"})
        >>> print(tune_table([s]))      # doctest: +NORMALIZE_WHITESPACE
        task   template  weight  trials  % trials  % time  default ms  tuned ms  default GFLOPS  tuned GFLOPS  speedup  checked  errors
        -----  --------  ------  ------  --------  ------  ----------  --------  --------------  ------------  -------  -------  ---------
        dense  complex        1      16      100%    100%       0.200     0.100            10.0          20.0    2.00x        -  timeout 1
        % trials: ...
        <BLANKLINE>
        errors (first message of each kind; --verbose shows all):
          dense  timeout: ran over 10 s
    """
    headers = ["task", "template", "weight", "trials", "% trials", "% time", "default ms", "tuned ms", "default GFLOPS",
               "tuned GFLOPS", "speedup", "checked", "errors"]
    total = sum(s.trials for s in summaries) or 1
    model_time = sum(s.weight * s.default_cost for s in summaries if math.isfinite(s.default_cost))
    rows = [[s.label, s.template, s.weight, s.trials, f"{100 * s.trials / total:.0f}%",
             number_text(100 * s.weight * s.default_cost / model_time if model_time else math.nan, ".0f", "%"),
             ms_text(s.default_cost), ms_text(s.best_cost), number_text(s.gflops(s.default_cost), ".1f"),
             number_text(s.gflops(s.best_cost), ".1f"), number_text(s.speedup, ".2f", "x"), s.check, _errors_cell(s)]
            for s in summaries]
    text = format_table(headers, rows, right=set(range(2, 12))) + "\n" + TABLE_LEGEND
    noisy = [s for s in summaries if math.isfinite(s.noise) and s.noise > NOISY]
    if noisy:
        text += (f"\nnoisy: the checks of {len(noisy)} task(s) varied by more than {NOISY:.0%} between rounds (up to "
                 f"±{max(s.noise for s in noisy):.0%}): the machine was busy, so their picks are uncertain")
    failing = [s for s in summaries if s.errors]
    if failing:
        width = max(len(s.label) for s in failing)
        if verbose:
            text += "\n\nerrors (all messages):"
            for s in failing:
                for kind, message in s.messages:
                    body = "\n".join("      " + line for line in (message or "(no message)").rstrip().splitlines())
                    text += f"\n  {s.label}  {kind}:\n{body}"
        else:
            text += "\n\nerrors (first message of each kind; --verbose shows all):"
            for s in failing:
                for kind in ERROR_KINDS:
                    if kind in s.first_errors:
                        text += f"\n  {s.label.ljust(width)}  {kind}: {s.first_errors[kind]}"
    return text


class ProgressPrinter:
    """The ``progress`` callback of ``tune``: after every batch, one plain line (a log that CI
    keeps) or, on a terminal, one bar line updated in place. A line names the task of the
    batch with its own trials and best cost, then the run's trials: done of planned, or, with
    no trial count (``planned`` None), done; with a ``time_budget`` (seconds from when the
    printer is made), the time left too.

    Example:
        >>> import io
        >>> class _Task: name = "dense"; key = "0a1b"
        >>> class _Report: task = _Task(); best_cost = 1e-4; default_cost = 2e-4; errors = {}; trials = 6; resumed = 2
        >>> out = io.StringIO(); ProgressPrinter(out, [_Task()], tty=False)(_Report(), 20, 64)
        >>> out.getvalue()
        '[1/1] dense: 8 trials, best 0.100 ms (default 0.200 ms), errors 0; run: 20/64 trials\\n'
        >>> out = io.StringIO(); ProgressPrinter(out, [_Task()], tty=False, time_budget=95.9)(_Report(), 20, None)
        >>> out.getvalue()
        '[1/1] dense: 8 trials, best 0.100 ms (default 0.200 ms), errors 0; run: 20 trials, 1m35s left\\n'
    """

    def __init__(self, stream, tasks, tty: bool | None = None, time_budget: float | None = None):
        self.stream = stream
        self.index = {task.key: k for k, task in enumerate(tasks)}
        self.count = len(tasks)
        self.tty = stream.isatty() if tty is None else tty
        self.budget = time_budget
        self.deadline = None if time_budget is None else time.monotonic() + time_budget
        self._open_bar = False

    def _run_part(self, done: int, planned: int | None) -> str:
        parts = [f"{done}/{planned} trials" if planned is not None else f"{done} trials"]
        if self.deadline is not None:
            parts.append(f"{format_seconds(max(0.0, self.deadline - time.monotonic()))} left")
        return ", ".join(parts)

    def _share_done(self, done: int, planned: int | None) -> float:
        if planned is not None:
            return min(done, planned) / max(planned, 1)
        return min(1.0, max(0.0, 1 - (self.deadline - time.monotonic()) / self.budget)) if self.budget else 0.0

    def __call__(self, report, done: int, planned: int | None) -> None:
        position = f"[{self.index.get(report.task.key, 0) + 1}/{self.count}]"
        errors = sum(report.errors.values())
        best = f"best {ms_text(report.best_cost)} ms (default {ms_text(report.default_cost)} ms)"
        own = report.trials + report.resumed
        if not self.tty:
            print(f"{position} {shorten(report.task.name)}: {own} trial{'s' * (own != 1)}, {best}, errors {errors}; "
                  f"run: {self._run_part(done, planned)}", file=self.stream, flush=True)
            return
        columns = shutil.get_terminal_size((100, 20)).columns
        filled = int(20 * self._share_done(done, planned))
        bar = "#" * filled + "." * (20 - filled)
        text = (f"[{bar}] {self._run_part(done, planned)} | {position} {shorten(report.task.name, 30)} "
                f"{own} trial{'s' * (own != 1)}, {best} err {errors}")
        self.stream.write("\r" + text[:columns - 1] + "\x1b[K")
        self.stream.flush()
        self._open_bar = True

    def finish(self) -> None:
        """End the bar line (nothing to do for plain lines).

        Example:
            >>> import io; ProgressPrinter(io.StringIO(), [], tty=True).finish()
        """
        if self._open_bar:
            self.stream.write("\n")
            self.stream.flush()
            self._open_bar = False


def _tune_exit(summaries, reports) -> tuple[int, str]:
    if not summaries or any(s.tuned for s in summaries):
        return EXIT_OK, "done"
    if any(r.stopped == "time budget" for r in reports):
        return EXIT_BUDGET_EXHAUSTED, "time budget exhausted before any task was tuned"
    return EXIT_UNUSABLE, "no task has a working config: every measurement failed"


def cmd_tune(args) -> int:
    """``autotune tune``: tune every task of a graph, then print the table (or JSON)."""
    if args.trials is None and args.time_budget is None:
        raise BadInput("tune: give --trials N, --time-budget DURATION (as many trials as fit), or both")
    graph_path = Path(args.graph)
    graph = load_graph(graph_path, ShapeRequest.of(args))
    tasks = extract_tasks(graph)
    log = Path(args.log) if args.log else Path(LOG_DIR) / f"{graph_path.stem}.jsonl"
    if log.is_dir():
        raise BadInput(f"--log {log} is a directory; give a file path such as {log / graph_path.stem}.jsonl")
    chatter = sys.stderr if args.json else sys.stdout
    if not tasks:
        print(f"{graph_path}: no partition to tune (every op runs in the reference interpreter)",
              file=sys.stderr)
        if args.json:
            print_json({"graph": str(graph_path), "status": "nothing to tune", "exit_code": EXIT_OK,
                        "tasks": []})
        return EXIT_OK
    try:
        if args.cache_flush and not flushes_here():
            raise BadInput(f"--cache-flush: this CPU ({current_target().cpu}) cannot flush cache lines; "
                           f"flushing needs an x86 CPU")
        flush = flushes_by_default(tasks) if args.cache_flush is None else args.cache_flush
        options = MeasureOptions(min_repeat_ms=args.min_repeat_ms, timeout=args.timeout, flush_cache=flush,
                                 repeat=FLUSHED_REPEATS if flush else MeasureOptions.repeat)
    except ValueError as err:
        raise BadInput(f"--min-repeat-ms / --timeout: {err}") from None
    try:            # before any measurement: a record must never reach the db but not the log
        log.parent.mkdir(parents=True, exist_ok=True)
        existed = log.exists()
        with open(log, "a", encoding="utf-8"):
            pass
        if not existed:             # created when the first record is written
            log.unlink()
    except OSError as err:
        raise BadInput(f"--log {log}: cannot write: {err.strerror or err}") from None
    target = current_target()
    with contextlib.ExitStack() as cleanup:
        try:
            executor = executor_from(args.executor)
        except (ValueError, TypeError, ImportError, ConnectionError, OSError) as err:
            raise BadInput(f"--executor {args.executor}: {err}") from None
        if isinstance(executor, DaskExecutor):          # the local pool is shared; it stops at exit
            cleanup.callback(executor.close)
        db = cleanup.enter_context(open_database(args.db, must_exist=False))
        prior = {t.key: (db.records(t.key, target.key) if args.resume else []) for t in tasks}
        bounds = ([] if args.trials is None else [f"{args.trials} trials"]) + \
            ([] if args.time_budget is None else [f"time budget {format_seconds(args.time_budget)}"])
        print(f"tuning {len(tasks)} task(s) of {graph_path} on {target.cpu}: {args.tuner} ({args.scheduler}), "
              f"{', '.join(bounds)}, seed {args.seed}, db {args.db}, log {log}", file=chatter, flush=True)
        if flush:
            why = "" if args.cache_flush else (f" (the model's {weight_bytes(tasks) / 2**20:.0f} MiB of weights do not "
                                               f"fit in the caches; --no-cache-flush to time them cached)")
            print(f"each kernel's weights are flushed from the caches before each timed call{why}",
                  file=chatter, flush=True)
        progress = ProgressPrinter(chatter, tasks, time_budget=args.time_budget)
        cleanup.callback(progress.finish)
        started = time.monotonic()
        try:
            reports = tune(tasks, trials=args.trials, db=db, log=log, tuner=args.tuner, seed=args.seed,
                           scheduler=args.scheduler,
                           time_budget=args.time_budget, executor=executor, options=options,
                           early_stopping=args.early_stopping, resume=args.resume, progress=progress)
        except KeyboardInterrupt:
            progress.finish()
            print(f"autotune: interrupted; every finished measurement is saved in {args.db} and {log}: "
                  f"run the same command again to resume", file=sys.stderr)
            return EXIT_INTERRUPTED
        seconds = time.monotonic() - started
        model = None
        if any(r.trials for r in reports):      # a run that measured nothing leaves the picks as they are
            model = _check_in_model(graph, db, chatter)
            for report in reports:          # as the check in the model left them
                report.pick = db.pick(report.task.key, target.key)
    dropped = {w.key for w in model.dropped} if model is not None else set()
    summaries = [summarize(r, prior[r.task.key], r.task.key in dropped) for r in reports]
    code, status = _tune_exit(summaries, reports)
    new = sum(s.new_trials for s in summaries)
    resumed = sum(s.resumed_trials for s in summaries)
    if args.json:
        print_json({
            "graph": str(graph_path), "db": str(args.db), "log": str(log), "tuner": args.tuner,
            "seed": args.seed, "trials": args.trials, "time_budget": args.time_budget,
            "target": {"cpu": target.cpu, "key": target.key}, "status": status, "exit_code": code,
            "new_trials": new, "resumed_trials": resumed, "seconds": seconds,
            "tasks": [s.to_json(args.verbose) for s in summaries],
            "model_check": model.to_json() if model is not None else None})
    else:
        print(tune_table(summaries, args.verbose))
        if model is not None and model.workloads:
            print("\n" + model_check_line(model))
        print(f"\n{new} new measurement(s), {resumed} resumed from {args.db}, in {format_seconds(seconds)}; "
              f"records in {args.db} and {log}")
        expected = ("trials", "space exhausted") + (("time budget",) if args.trials is None else ())
        early = Counter(s.stopped for s in summaries if s.stopped not in expected)   # a budget alone ends by time
        if early:
            print("stopped before their trials: " + ", ".join(f"{n} task(s) by {why}" for why, n in early.items()))
    if code != EXIT_OK:
        print(f"autotune: {status}" + (" (raise --time-budget)" if code == EXIT_BUDGET_EXHAUSTED else ""),
              file=sys.stderr)
    return code


def _check_in_model(graph, db, chatter):
    """``check_in_model`` on the tuned graph, or None (with the reason on stderr) when the
    graph does not compile or run; the picks it drops are in the database."""
    print("checking the picks in the model (default and tuned, step by step, side by side)", file=chatter, flush=True)
    try:
        return check_in_model(graph, db)
    except (TilefuseError, ValueError, TypeError, MemoryError) as err:
        print(f"autotune: warning: the picks were not checked in the model: {first_line(str(err))}", file=sys.stderr)
        return None


def _ratio(default: float, tuned: float) -> float:
    return default / tuned if tuned > 0 else math.nan


def model_check_line(model) -> str:
    """What the check in the model found, in a sentence: the steps' kernel times summed with
    the default configs and with every pick, the picks dropped, and, when the set kept is not
    every pick, the pass that measured it (the default and the picks kept side by side); a
    note when the rounds were noisy.

    Example:
        >>> from tilefuse.autotune.model_check import ModelCheck, WorkloadCheck
        >>> print(model_check_line(ModelCheck(1e-4, 1.1e-4, 1e-4, 0.02, [WorkloadCheck("k", "matmul", 2, 4e-5, 5e-5, False)], 1e-4)))
        in the model (steps summed): default 0.100 ms, every pick 0.110 ms (0.91x, ±2%); 1 of 1 tuned pick(s) dropped (slower there): matmul
        >>> print(model_check_line(ModelCheck(1e-4, 1.05e-4, 0.8e-4, 0.02, [WorkloadCheck("k", "matmul", 2, 4e-5, 5e-5, False),
        ...       WorkloadCheck("j", "softmax", 1, 2e-5, 1e-5, True)], 1.1e-4)))
        in the model (steps summed): default 0.100 ms, every pick 0.105 ms; 1 of 2 tuned pick(s) dropped (slower there): matmul; the 1 kept, measured again: default 0.110 ms, kept 0.080 ms (1.38x, ±2%)
    """
    dropped = model.dropped
    names = f" (slower there): {', '.join(shorten(w.name, 24) for w in dropped)}" if dropped else ""
    noisy = " (the machine was busy: these times are uncertain)" if model.spread > NOISY else ""
    head = f"in the model (steps summed): default {ms_text(model.default_seconds)} ms, every pick {ms_text(model.tuned_seconds)} ms"
    tally = f"{len(dropped)} of {len(model.workloads)} tuned pick(s) dropped{names}"
    whole = f"{number_text(_ratio(model.default_seconds, model.tuned_seconds), '.2f', 'x')}, ±{model.spread:.0%}"
    if not dropped or len(dropped) == len(model.workloads):     # the first pass's set, or none
        return f"{head} ({whole}){noisy}; {tally}"
    kept = len(model.workloads) - len(dropped)
    again = f"{number_text(_ratio(model.checked_default_seconds, model.checked_seconds), '.2f', 'x')}, ±{model.spread:.0%}"
    return (f"{head}; {tally}; the {kept} kept, measured again: default {ms_text(model.checked_default_seconds)} ms, "
            f"kept {ms_text(model.checked_seconds)} ms ({again}){noisy}")
