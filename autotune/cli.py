"""The ``autotune`` command: tune the partitions of a model graph, look at and move tuning
records, and time the compiled graph with and without them.

Subcommands (``autotune SUBCOMMAND --help`` for the options)::

    autotune tune GRAPH --trials N [--tuner xgb|random|grid] [--db tuning.db] [--log PATH]
                  [--time-budget 10m] [--executor local|dask://HOST:PORT] [--seed S]
                  [--resume/--no-resume] [--early-stopping N] [--min-repeat-ms MS]
                  [--cache-flush/--no-cache-flush] [--timeout 10s] [--json] [--verbose]
    autotune best [--db PATH] [--missing GRAPH] [--json]
    autotune show LOG [--json]
    autotune export [--db PATH] LOG [--workload KEY]
    autotune import LOG [--db PATH]
    autotune bench GRAPH [--db PATH] [--repeat N] [--seed S] [--json] [--plot IMAGE]
    autotune plot LOG_OR_DB -o IMAGE [--workload KEY_PREFIX]
    autotune graph GRAPH -o PICTURE [--timeout 60s]

``plot`` and ``bench --plot`` draw with matplotlib, an optional extra (``pip install -e
'.[plot]'``); IMAGE is a .png, .svg or .pdf file. ``graph`` writes the graph's DOT text
(``-o g.dot``) or has Graphviz's ``dot`` program draw it (``-o g.svg``, ``.png``, ``.pdf``).

Exit codes (the same for every subcommand):

* 0 - done;
* 1 - done, but the result is not usable as it stands (the reason on stderr): ``tune`` found
  no working config for any task (every measurement failed, see the error table), ``best
  --missing`` found workloads without a record, ``bench`` saw the tuned graph compute other
  outputs than the default one;
* 2 - bad input, with a message on stderr: a missing or corrupt graph, log or database file,
  an unknown option or tuner, a bad ``--time-budget`` or ``--executor``, a database or log
  that cannot be written (the database keeps every measurement; the next ``tune`` writes the
  ones its log lacks), a picture that cannot be written or drawn (``plot``, ``bench --plot``:
  matplotlib not installed; ``graph``: Graphviz not installed), a log or database with no
  record to plot;
* 3 - ``tune`` ran out of ``--time-budget`` before any task was tuned (no task got one
  successful measurement, now or in an earlier run);
* 130 - interrupted (Ctrl-C); what was measured is saved, the same command resumes.

This module, ``session`` and ``model_check`` are the modules of ``autotune`` that import
``graph_api`` (the application on top of both). GRAPH is a oneDNN Graph JSON file (.json) or an ONNX model (.onnx, read by
``graph_api.from_onnx``: initializers are bound constants, so ``bench`` feeds random arrays
only to the model's data inputs); ``load_graph`` picks the reader by file suffix.

Example:
    >>> parse_duration("1h30m"), parse_duration("90s"), parse_duration("2.5")
    (5400.0, 90.0, 2.5)
    >>> # main(["tune", "examples/mlp.json", "--trials", "64"])   -> 0, prints the task table
    >>> # main(["plot", "tuning_logs/mlp.jsonl", "-o", "curve.png"])   -> 0, one line per task
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import sqlite3
import statistics
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from tilefuse import graph_api

from . import plots
from .database import Database, TuningDatabaseError
from .dispatch import HistoryBest, MissingRecordWarning
from .executor import DaskExecutor, executor_from
from .extract import extract_tasks
from .log import LogWriteError, export_log, import_log, read_log
from .measure import MeasureOptions, compare_outputs, weight_bytes, weights_outgrow_caches
from .model_check import PAUSE, WARMUP, check_in_model, random_feeds, settle
from .plots import PlotError
from .record import ERROR_KINDS, first_measurements
from .target import current_target
from .tune import SCHEDULERS, tune
from .tuner import TUNERS
from tilefuse.tensorir.runtime.cache_lines import flushes_here
from tilefuse.tensorir.errors import TilefuseError

EXIT_OK = 0
EXIT_UNUSABLE = 1
EXIT_BAD_INPUT = 2
EXIT_BUDGET_EXHAUSTED = 3
EXIT_INTERRUPTED = 130

DEFAULT_DB = "tuning.db"
DEFAULT_MIN_REPEAT_MS = 10.0
DEFAULT_TIMEOUT = 10.0
LOG_DIR = "tuning_logs"


class BadInput(TilefuseError, ValueError):
    """Input the command cannot use (a file, an option); ``main`` prints it and exits with 2.

    Example:
        >>> str(BadInput("no such file: x.json"))
        'no such file: x.json'
    """


# ---------------------------------------------------------------------------- inputs

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([hms])")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str) -> float:
    """Seconds of a duration written as seconds (``"90"``, ``"0.5"``) or with units h, m, s
    in that order (``"10m"``, ``"1h30m"``, ``"90s"``). Zero, negative or anything else is a
    ValueError.

    Example:
        >>> parse_duration("10m"), parse_duration("0.001")
        (600.0, 0.001)
        >>> parse_duration("ten minutes")
        Traceback (most recent call last):
        ...
        ValueError: bad duration 'ten minutes': use seconds (90, 0.5) or units h/m/s (10m, 1h30m, 90s)
    """
    if not isinstance(text, str):
        raise TypeError(f"a duration is a str like '10m', got {type(text).__name__}")
    compact = text.strip().lower().replace(" ", "")
    if re.fullmatch(r"\d+(\.\d*)?|\.\d+", compact):
        seconds = float(compact)
    else:
        parts = _DURATION_PART.findall(compact)
        units = [unit for _, unit in parts]
        if (not parts or "".join(n + u for n, u in parts) != compact or len(set(units)) != len(units)
                or units != sorted(units, key="hms".index)):
            raise ValueError(f"bad duration {text!r}: use seconds (90, 0.5) or units h/m/s "
                             f"(10m, 1h30m, 90s)")
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if not seconds > 0 or not math.isfinite(seconds):
        raise ValueError(f"a duration must be more than 0 seconds, got {text!r}")
    return seconds


def _read_onednn_json(path: Path):
    return graph_api.load_json(path)


def _read_onnx(path: Path):
    """The graph of an ONNX model file (initializers become bound constants), via
    ``graph_api.from_onnx``; a file onnx cannot parse or check is a BadInput naming it."""
    try:
        import onnx
    except ImportError:
        raise BadInput(f"{path}: reading ONNX models needs the onnx package (pip install onnx)") from None
    try:
        model = onnx.load(str(path))
    except Exception as err:                 # protobuf's DecodeError and friends: not an ONNX file
        raise BadInput(f"{path}: not a readable ONNX model: {_first_line(str(err)) or type(err).__name__}") from None
    if not model.graph.node:                 # an empty (or non-ONNX but parseable) file
        raise BadInput(f"{path}: not an ONNX model with a graph (no nodes)")
    from_onnx = getattr(graph_api, "from_onnx", None)
    if from_onnx is None:
        raise BadInput(f"{path}: ONNX models are not supported by this graph_api (no from_onnx); "
                       f"export the model as a oneDNN Graph JSON file (.json)")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            graph = from_onnx(model)
    except graph_api.GraphError:
        raise
    except (ValueError, TypeError, onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        raise BadInput(f"{path}: cannot import the ONNX model: {_first_line(str(err))}") from None
    for w in caught:                         # e.g. ops with no mapping, run by the reference interpreter
        print(f"autotune: warning: {path}: {w.message}", file=sys.stderr)
    return graph


# suffix -> reader of a finalized graph_api.Graph
GRAPH_READERS = {".json": _read_onednn_json, ".onnx": _read_onnx}


def load_graph(path) -> "graph_api.Graph":
    """The finalized graph in the file ``path``, read by the reader of its suffix
    (``GRAPH_READERS``: ``.json`` is oneDNN Graph JSON, ``.onnx`` an ONNX model read by
    ``graph_api.from_onnx``). A missing, unreadable or invalid file, or an unknown suffix, is
    a BadInput naming the file.

    Example:
        >>> [p.get_kind() for p in load_graph("examples/mlp.json").get_partitions()]   # doctest: +SKIP
        ['complex', 'complex', 'complex', 'reduction']
        >>> load_graph("model.pb")
        Traceback (most recent call last):
        ...
        tilefuse.autotune.cli.BadInput: model.pb: unknown graph format '.pb'; expected one of .json, .onnx
    """
    path = Path(path)
    reader = GRAPH_READERS.get(path.suffix.lower())
    if reader is None:
        raise BadInput(f"{path}: unknown graph format {path.suffix!r}; expected one of "
                       f"{', '.join(sorted(GRAPH_READERS))}")
    if not path.exists():
        raise BadInput(f"{path}: no such graph file")
    if not path.is_file():
        raise BadInput(f"{path}: not a file")
    try:
        return reader(path)
    except graph_api.GraphError as err:
        raise BadInput(f"{path}: not a usable graph: {err}") from None


def open_database(path, must_exist: bool) -> Database:
    """The tuning database at ``path``; with ``must_exist`` a missing file is a BadInput
    (commands that only read must not leave an empty database behind a typo). A file that
    is not a tuning database is a BadInput too.

    Example:
        >>> open_database("no/such/tuning.db", must_exist=True)
        Traceback (most recent call last):
        ...
        tilefuse.autotune.cli.BadInput: no tuning database at no/such/tuning.db (run `autotune tune` or `autotune import` first, or pass --db)
    """
    path = os.fspath(path)
    if must_exist and not os.path.exists(path):
        raise BadInput(f"no tuning database at {path} (run `autotune tune` or `autotune import` "
                       f"first, or pass --db)")
    if os.path.isdir(path):
        raise BadInput(f"{path} is a directory, not a tuning database file")
    try:
        return Database(path)
    except TuningDatabaseError as err:
        raise BadInput(str(err)) from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _executor_spec(text: str) -> str:
    if text != "local" and not (text.startswith("dask://") and len(text) > len("dask://")):
        raise argparse.ArgumentTypeError(f"expected 'local' or 'dask://HOST:PORT', got {text!r}")
    return text


# ---------------------------------------------------------------------------- formatting

def format_table(headers, rows, right=()) -> str:
    """A plain-text table: columns padded to their widest cell, those whose index is in
    ``right`` aligned right, a dashed rule under the headers.

    Example:
        >>> print(format_table(["task", "ms"], [["dense", "0.25"], ["softmax", "1.5"]], right={1}))
        task       ms
        -------  ----
        dense    0.25
        softmax   1.5
    """
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[k]) for row in cells) for k in range(len(headers))]

    def line(row):
        return "  ".join(c.rjust(w) if k in right else c.ljust(w)
                         for k, (c, w) in enumerate(zip(row, widths))).rstrip()
    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths)] + [line(r) for r in cells[1:]])


def _ms(seconds: float) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    ms = seconds * 1e3
    return f"{ms:.3f}" if ms < 100 else f"{ms:.1f}"


def _num(value: float, spec: str, suffix: str = "") -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:{spec}}{suffix}"


def _finite_or_none(value: float):
    return value if value is not None and math.isfinite(value) else None


def format_seconds(seconds: float) -> str:
    """A short human duration.

    Example:
        >>> format_seconds(0.001), format_seconds(4.25), format_seconds(135), format_seconds(7322)
        ('0.001 s', '4.2 s', '2m15s', '2h02m')
    """
    if seconds < 60:
        return f"{seconds:.2g} s" if seconds < 1 else f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def _short(name: str, width: int = 40) -> str:
    return name if len(name) <= width else name[:width - 3] + "..."


def _first_line(message: str) -> str:
    lines = (message or "").strip().splitlines()
    return lines[0] if lines else "(no message)"


def _print_json(data) -> None:
    print(json.dumps(data, indent=2, sort_keys=False, allow_nan=False))


# ---------------------------------------------------------------------------- tune

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

    @property
    def check(self) -> str:
        """The final side-by-side check as the "checked" column shows it: what the task
        compiles with, the default's time over the tuned config's, and the rounds' noise
        (the kernel's, or the model's when the check in the model dropped the pick).

        Example:
            >>> TaskSummary("t", "k", "complex", 1, 0, 1, 1, 0, 2e-3, 1e-3, applied="tuned",
            ...             checked_speedup=1.9, noise=0.03).check
            'tuned 1.90x ±3%'
        """
        if not self.applied:
            return "-"
        return f"{self.applied} {self.checked_speedup:.2f}x ±{self.noise * 100:.0f}%"

    @property
    def label(self) -> str:
        """The task's name and output shape, as the table shows it (names repeat, shapes tell
        the tasks apart).

        Example:
            >>> TaskSummary("dense", "k", "complex", 1, 0, 0, 0, 0, 1.0, 1.0, shape=(32, 128)).label
            'dense 32x128'
        """
        shape = "x".join(str(n) for n in self.shape)
        return f"{_short(self.name)} {shape}" if shape else _short(self.name)

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
            "default_ms": _finite_or_none(self.default_cost * 1e3),
            "tuned_ms": _finite_or_none(self.best_cost * 1e3),
            "default_gflops": _finite_or_none(self.gflops(self.default_cost)),
            "tuned_gflops": _finite_or_none(self.gflops(self.best_cost)),
            "speedup": _finite_or_none(self.speedup), "best_config": self.best_config,
            "errors": {kind: self.errors.get(kind, 0) for kind in ERROR_KINDS},
            "first_errors": dict(self.first_errors), "stopped": self.stopped,
            "seconds": self.seconds, "shape": list(self.shape), "applied": self.applied or None,
            "checked_speedup": _finite_or_none(self.checked_speedup), "noise": _finite_or_none(self.noise),
        }
        if verbose:
            data["messages"] = [{"kind": kind, "message": message} for kind, message in self.messages]
        return data


def summarize(report, prior_records) -> TaskSummary:
    """The TaskSummary of a ``TaskReport`` whose run resumed from ``prior_records`` (the
    task's records on this CPU before the run; empty without resume): its errors are those of
    the prior records plus the new ones.

    Example:
        >>> # summarize(tune([task], ...)[0], db.records(task.key, target.key))
    """
    errors, first, messages = Counter(), {}, []
    for record in prior_records:
        if record.error_kind is not None:
            errors[record.error_kind] += 1
            first.setdefault(record.error_kind, _first_line(record.error_msg))
            messages.append((record.error_kind, record.error_msg))
    for kind, message in report.messages:
        first.setdefault(kind, _first_line(message))
        messages.append((kind, message))
    errors.update(report.errors)
    task = report.task
    return TaskSummary(task.name, task.key, task.template_name, task.weight, task.flop,
                       report.trials + report.resumed, report.trials, report.resumed,
                       report.default_cost, report.best_cost, report.best_config, dict(errors),
                       first, tuple(messages), report.stopped, report.seconds,
                       tuple(int(n) for n in task.outputs[0].shape), report.applied,
                       report.pick.speedup if report.pick is not None else math.nan,
                       report.pick.spread if report.pick is not None else math.nan)


def _errors_cell(summary: TaskSummary) -> str:
    parts = [f"{kind} {summary.errors[kind]}" for kind in ERROR_KINDS if summary.errors.get(kind)]
    return ", ".join(parts) if parts else "0"


def tune_table(summaries, verbose: bool = False) -> str:
    """The end-of-run table: one row per task (its trials and their share of the run's, what
    it compiles with after the side-by-side check), then the first message of each error kind
    of each task (``verbose``: every message in full).

    Example:
        >>> s = TaskSummary("dense", "0a1b", "complex", 1, 2_000_000, 16, 16, 0, 2e-4, 1e-4,
        ...                 errors={"timeout": 1}, first_errors={"timeout": "ran over 10 s"})
        >>> print(tune_table([s]))
        task   template  weight  trials  share  default ms  tuned ms  default GFLOPS  tuned GFLOPS  speedup  checked  errors
        -----  --------  ------  ------  -----  ----------  --------  --------------  ------------  -------  -------  ---------
        dense  complex        1      16   100%       0.200     0.100            10.0          20.0    2.00x        -  timeout 1
        <BLANKLINE>
        errors (first message of each kind; --verbose shows all):
          dense  timeout: ran over 10 s
    """
    headers = ["task", "template", "weight", "trials", "share", "default ms", "tuned ms", "default GFLOPS",
               "tuned GFLOPS", "speedup", "checked", "errors"]
    total = sum(s.trials for s in summaries) or 1
    rows = [[s.label, s.template, s.weight, s.trials, f"{100 * s.trials / total:.0f}%", _ms(s.default_cost),
             _ms(s.best_cost), _num(s.gflops(s.default_cost), ".1f"), _num(s.gflops(s.best_cost), ".1f"),
             _num(s.speedup, ".2f", "x"), s.check, _errors_cell(s)] for s in summaries]
    text = format_table(headers, rows, right=set(range(2, 11)))
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
    keeps) or, on a terminal, one bar line updated in place.

    Example:
        >>> import io
        >>> class _Task: name = "dense"; key = "0a1b"
        >>> class _Report: task = _Task(); best_cost = 1e-4; default_cost = 2e-4; errors = {}
        >>> out = io.StringIO(); ProgressPrinter(out, [_Task()], tty=False)(_Report(), 8, 16)
        >>> out.getvalue()
        '[1/1] dense: 8/16 trials, best 0.100 ms (default 0.200 ms), errors 0\\n'
    """

    def __init__(self, stream, tasks, tty: bool | None = None):
        self.stream = stream
        self.index = {task.key: k for k, task in enumerate(tasks)}
        self.count = len(tasks)
        self.tty = stream.isatty() if tty is None else tty
        self._open_bar = False

    def __call__(self, report, done: int, planned: int) -> None:
        position = f"[{self.index.get(report.task.key, 0) + 1}/{self.count}]"
        errors = sum(report.errors.values())
        best = f"best {_ms(report.best_cost)} ms (default {_ms(report.default_cost)} ms)"
        if not self.tty:
            print(f"{position} {_short(report.task.name)}: {done}/{planned} trials, {best}, errors {errors}",
                  file=self.stream, flush=True)
            return
        columns = shutil.get_terminal_size((100, 20)).columns
        filled = int(20 * min(done, planned) / max(planned, 1))
        bar = "#" * filled + "." * (20 - filled)
        text = f"{position} {_short(report.task.name, 30)} [{bar}] {done}/{planned} {best} err {errors}"
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
    """``autotune tune``: tune every task of a graph, then print the table (or JSON).

    Example:
        >>> # main(["tune", "examples/mlp.json", "--trials", "64", "--time-budget", "10m"])
    """
    graph_path = Path(args.graph)
    graph = load_graph(graph_path)
    tasks = extract_tasks(graph)
    log = Path(args.log) if args.log else Path(LOG_DIR) / f"{graph_path.stem}.jsonl"
    if log.is_dir():
        raise BadInput(f"--log {log} is a directory; give a file path such as {log / graph_path.stem}.jsonl")
    chatter = sys.stderr if args.json else sys.stdout
    if not tasks:
        print(f"{graph_path}: no partition to tune (every op runs in the reference interpreter)",
              file=sys.stderr)
        if args.json:
            _print_json({"graph": str(graph_path), "status": "nothing to tune", "exit_code": EXIT_OK,
                         "tasks": []})
        return EXIT_OK
    try:
        if args.cache_flush and not flushes_here():
            raise BadInput(f"--cache-flush: this CPU ({current_target().cpu}) cannot flush cache lines; "
                           f"flushing needs an x86 CPU")
        flush = weights_outgrow_caches(tasks) and flushes_here() if args.cache_flush is None else args.cache_flush
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
        budget = "" if args.time_budget is None else f", time budget {format_seconds(args.time_budget)}"
        print(f"tuning {len(tasks)} task(s) of {graph_path} on {target.cpu}: {args.tuner} ({args.scheduler}), {args.trials} "
              f"trials{budget}, seed {args.seed}, db {args.db}, log {log}", file=chatter, flush=True)
        if flush:
            why = "" if args.cache_flush else (f" (the model's {weight_bytes(tasks) / 2**20:.0f} MiB of weights do not "
                                               f"fit in the caches; --no-cache-flush to time them cached)")
            print(f"each kernel's weights are flushed from the caches before each timed call{why}",
                  file=chatter, flush=True)
        progress = ProgressPrinter(chatter, tasks)
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
    summaries = [summarize(r, prior[r.task.key]) for r in reports]
    code, status = _tune_exit(summaries, reports)
    new = sum(s.new_trials for s in summaries)
    resumed = sum(s.resumed_trials for s in summaries)
    if args.json:
        _print_json({
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
        early = Counter(s.stopped for s in summaries if s.stopped not in ("trials", "space exhausted"))
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
        print(f"autotune: warning: the picks were not checked in the model: {_first_line(str(err))}", file=sys.stderr)
        return None


def model_check_line(model) -> str:
    """What the check in the model found, in a sentence: the whole run with the default
    configs, with every pick and with the picks kept, and the picks dropped.

    Example:
        >>> from tilefuse.autotune.model_check import ModelCheck, WorkloadCheck
        >>> print(model_check_line(ModelCheck(1e-4, 1.1e-4, 1e-4, 0.02, [WorkloadCheck("k", "matmul", 2, 4e-5, 5e-5, False)])))
        in the model: default 0.100 ms, tuned 0.110 ms, kept 0.100 ms (±2%); 1 of 1 tuned pick(s) dropped (slower there): matmul
        >>> print(model_check_line(ModelCheck(1e-4, 0.9e-4, 0.8e-4, 0.02, [WorkloadCheck("k", "matmul", 2, 4e-5, 5e-5, False)], 1.05e-4)))
        in the model: default 0.100 ms, tuned 0.090 ms; 1 of 1 tuned pick(s) dropped (slower there): matmul; measured again: default 0.105 ms, kept 0.080 ms (±2%)
    """
    dropped = model.dropped
    names = f" (slower there): {', '.join(_short(w.name, 24) for w in dropped)}" if dropped else ""
    again = model.checked_default_seconds
    if math.isnan(again) or again == model.default_seconds:     # one pass
        return (f"in the model: default {_ms(model.default_seconds)} ms, tuned {_ms(model.tuned_seconds)} ms, kept "
                f"{_ms(model.checked_seconds)} ms (±{model.spread:.0%}); {len(dropped)} of {len(model.workloads)} "
                f"tuned pick(s) dropped{names}")
    return (f"in the model: default {_ms(model.default_seconds)} ms, tuned {_ms(model.tuned_seconds)} ms; "
            f"{len(dropped)} of {len(model.workloads)} tuned pick(s) dropped{names}; measured again: default "
            f"{_ms(again)} ms, kept {_ms(model.checked_seconds)} ms (±{model.spread:.0%})")


# ---------------------------------------------------------------------------- best

def cmd_best(args) -> int:
    """``autotune best``: the best record per workload on this CPU, or (``--missing GRAPH``)
    the graph's workloads without one (exit 1 when there are any).

    Example:
        >>> # main(["best", "--db", "tuning.db", "--missing", "examples/mlp.json"])  -> 0 or 1
    """
    target = current_target()
    with open_database(args.db, must_exist=True) as db:
        if args.missing:
            tasks = extract_tasks(load_graph(args.missing))
            missing = set(db.missing([t.key for t in tasks]))
            rows = [t for t in tasks if t.key in missing]
            if args.json:
                _print_json({"graph": args.missing, "db": args.db, "target": {"cpu": target.cpu, "key": target.key},
                             "workloads": len(tasks),
                             "missing": [{"name": t.name, "template": t.template_name, "weight": t.weight,
                                          "key": t.key} for t in rows]})
            else:
                print(f"{len(rows)} of {len(tasks)} workload(s) of {args.missing} have no record for "
                      f"{target.cpu} in {args.db}")
                if rows:
                    print(format_table(["task", "template", "weight", "key"],
                                       [[_short(t.name), t.template_name, t.weight, t.key[:16]] for t in rows],
                                       right={2}))
            if not rows:
                return EXIT_OK
            print(f"autotune: {len(rows)} workload(s) of {args.missing} have no record on this CPU "
                  f"({target.cpu}) in {args.db}; `autotune tune {args.missing}` tunes them", file=sys.stderr)
            return EXIT_UNUSABLE
        best = db.best_all(target.key)
    records = list(best.values())
    if args.json:
        _print_json({"db": args.db, "target": {"cpu": target.cpu, "key": target.key},
                     "best": [{"workload_key": r.workload_key, "name": r.task_name, "template": r.template,
                               "mean_ms": r.mean_cost * 1e3, "config": r.config, "timestamp": r.timestamp}
                              for r in records]})
        return EXIT_OK
    print(f"best records for {target.cpu} in {args.db}: {len(records)} workload(s)")
    if records:
        print(format_table(["task", "template", "mean ms", "key", "config"],
                           [[_short(r.task_name), r.template, _ms(r.mean_cost), r.workload_key[:16],
                             json.dumps(r.config, sort_keys=True, separators=(",", ":"))] for r in records],
                           right={2}))
    return EXIT_OK


# ---------------------------------------------------------------------------- logs

def _read_log_or_fail(path):
    try:
        return read_log(path)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such log file") from None
    except OSError as err:
        raise BadInput(f"{path}: cannot read: {err.strerror or err}") from None


def _report_problems(path, problems) -> None:
    for line, reason in problems:
        print(f"{path}:{line}: skipped: {reason}", file=sys.stderr)


def cmd_show(args) -> int:
    """``autotune show``: the records of a JSON-lines log; unreadable lines go to stderr.

    Example:
        >>> # main(["show", "tuning_logs/mlp.jsonl", "--json"])
    """
    contents = _read_log_or_fail(args.log)
    _report_problems(args.log, contents.problems)
    records = contents.records
    if args.json:
        _print_json({"log": args.log, "records": [r.to_json() for r in records],
                     "problems": [{"line": line, "reason": reason} for line, reason in contents.problems]})
        return EXIT_OK
    rows = [[k + 1, _short(r.task_name, 32), r.template, _ms(r.mean_cost) if r.is_ok else r.error_kind,
             r.target_cpu, json.dumps(r.config, sort_keys=True, separators=(",", ":"))]
            for k, r in enumerate(records)]
    if rows:
        print(format_table(["#", "task", "template", "ms / error", "cpu", "config"], rows, right={0, 3}))
    ok = sum(r.is_ok for r in records)
    skipped = f"; {len(contents.problems)} unreadable line(s) skipped (see stderr)" if contents.problems else ""
    print(f"{len(records)} record(s) in {args.log}: {ok} ok, {len(records) - ok} error(s){skipped}")
    return EXIT_OK


def _workload_key(db: Database, key: str) -> str:
    keys = sorted({w.key for w in db.workloads()})
    if key in keys:
        return key
    found = [k for k in keys if k.startswith(key)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise BadInput(f"no workload {key!r} in {db.path} (`autotune best` lists them)")
    raise BadInput(f"workload prefix {key!r} is ambiguous in {db.path}: {', '.join(k[:16] for k in found)}")


def cmd_export(args) -> int:
    """``autotune export``: append the database's records (all CPUs) to a log, skipping those
    it already holds.

    Example:
        >>> # main(["export", "--db", "tuning.db", "out.jsonl", "--workload", "b47aec8a"])
    """
    with open_database(args.db, must_exist=True) as db:
        key = _workload_key(db, args.workload) if args.workload is not None else None
        total = len(db.records(workload_key=key))
        if os.path.isdir(args.log):
            raise BadInput(f"{args.log} is a directory, not a log file")
        try:
            written = export_log(db, args.log, workload_key=key)
        except OSError as err:
            raise BadInput(f"{args.log}: cannot write: {err.strerror or err}") from None
    which = f" of workload {key[:16]}" if key else ""
    print(f"exported {written} of {total} record(s){which} from {args.db} to {args.log} "
          f"({total - written} already there)")
    return EXIT_OK


def cmd_import(args) -> int:
    """``autotune import``: add a log's records to the database (created when missing);
    importing the same log again adds nothing.

    Example:
        >>> # main(["import", "tuning_logs/mlp.jsonl", "--db", "tuning.db"])
    """
    if not os.path.exists(args.log):
        raise BadInput(f"{args.log}: no such log file")
    if os.path.isdir(args.log):
        raise BadInput(f"{args.log} is a directory, not a log file")
    with open_database(args.db, must_exist=False) as db:
        try:
            imported, skipped, problems = import_log(db, args.log)
        except OSError as err:
            raise BadInput(f"{args.log}: cannot read: {err.strerror or err}") from None
    _report_problems(args.log, problems)
    unreadable = f"; {len(problems)} unreadable line(s) skipped (see stderr)" if problems else ""
    print(f"imported {imported} record(s) from {args.log} into {args.db} ({skipped} already there){unreadable}")
    return EXIT_OK


# ---------------------------------------------------------------------------- plot

SQLITE_HEADER = b"SQLite format 3\x00"
PROBLEMS_SHOWN = 10


def is_sqlite_file(path) -> bool:
    """True when the file at ``path`` starts with the sqlite header (a tuning database),
    whatever its suffix; a file that cannot be read is a BadInput.

    Example:
        >>> import tempfile; log = Path(tempfile.mkdtemp()) / "t.jsonl"
        >>> _ = log.write_text("{}"); is_sqlite_file(log)
        False
    """
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError as err:
        raise BadInput(f"{path}: cannot read: {err.strerror or err}") from None


def _report_first_problems(path, problems) -> None:
    _report_problems(path, problems[:PROBLEMS_SHOWN])
    if len(problems) > PROBLEMS_SHOWN:
        print(f"{path}: ... and {len(problems) - PROBLEMS_SHOWN} more unreadable line(s)", file=sys.stderr)


def read_tuning_records(path) -> tuple[list, dict]:
    """(records, workload descriptions by key) of a tuning log or database: a file that starts
    with the sqlite header is read as a database (its workloads describe each task: output
    shape, flop count), anything else as a JSON-lines log (no descriptions; unreadable lines
    are reported on stderr and skipped). A missing file, or one without a readable record, is
    a BadInput.

    Example:
        >>> # records, descriptions = read_tuning_records("tuning.db")
        >>> read_tuning_records("no/such.jsonl")
        Traceback (most recent call last):
        ...
        tilefuse.autotune.cli.BadInput: no/such.jsonl: no such tuning log or database
    """
    if not os.path.exists(path):
        raise BadInput(f"{path}: no such tuning log or database")
    if os.path.isdir(path):
        raise BadInput(f"{path} is a directory, not a tuning log or database")
    if is_sqlite_file(path):
        with open_database(path, must_exist=True) as db:
            records = db.records()
            descriptions = {w.key: w.description for w in db.workloads()}
        unreadable = ""
    else:
        contents = _read_log_or_fail(path)
        _report_first_problems(path, contents.problems)
        records, descriptions = list(contents.records), {}
        unreadable = f" ({len(contents.problems)} unreadable line(s), see above)" if contents.problems else ""
    if not records:
        raise BadInput(f"{path}: no tuning records to plot{unreadable}")
    return records, descriptions


def _select_workloads(records, prefix, path) -> list:
    if prefix is None:
        return records
    chosen = [r for r in records if r.workload_key.startswith(prefix)]
    if not chosen:
        raise BadInput(f"{path}: no workload with a key starting {prefix!r} (`autotune show` or "
                       f"`autotune best` lists the keys)")
    return chosen


def prepare_image(path, option: str) -> None:
    """Check, before any slow work, that an image can be written at ``path``: the file is
    writable, matplotlib is installed and the suffix is an image format it writes (a PlotError,
    exit 2, otherwise; ``option`` names the command-line option in the message).

    Example:
        >>> prepare_image("/no/such/folder/curve.png", "-o")
        Traceback (most recent call last):
        ...
        tilefuse.autotune.plots.PlotError: -o /no/such/folder/curve.png: cannot write: No such file or directory
    """
    try:
        plots.check_writable(path)
        plots.image_format(path)
    except plots.MissingPlotTool:
        raise
    except PlotError as err:
        raise PlotError(f"{option} {err}") from None


def cmd_plot(args) -> int:
    """``autotune plot``: the best cost so far against trial number, one line per task, from a
    tuning log or database, drawn into an image.

    Example:
        >>> # main(["plot", "tuning.db", "-o", "curve.png", "--workload", "b47aec8a"])
    """
    records, descriptions = read_tuning_records(args.source)
    records = _select_workloads(records, args.workload, args.source)
    prepare_image(args.output, "-o")
    curves = plots.tuning_curves(records, descriptions)
    unit = plots.draw_tuning_curves(curves, args.output, title=f"{Path(args.source).name}: best so far per task")
    trials = first_measurements(records)       # the default timed again around each batch is no trial
    failed = sum(not r.is_ok for r in trials)
    print(f"wrote {args.output}: {len(curves)} task(s), {len(trials)} trial(s) ({failed} failed), "
          f"best so far in {unit}")
    return EXIT_OK


# ---------------------------------------------------------------------------- bench

def _compile(graph, db=None):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = graph_api.compile_graph(graph, configs=None if db is None else HistoryBest(db))
    missing = [w for w in caught if issubclass(w.category, MissingRecordWarning)]
    for w in caught:
        print(f"autotune: warning: {w.message}", file=sys.stderr)
    return compiled, missing


def onnxruntime_runner(path, feeds):
    """A function that runs the ONNX model at ``path`` once in onnxruntime (CPU) on ``feeds``
    (arrays by graph input id, as ``random_feeds`` makes them, passed by the model's input
    names), after a warm-up run; None when onnxruntime is not installed, and None with a
    warning on stderr when it cannot run the model.

    Example:
        >>> # run = onnxruntime_runner("examples/resnet_block.onnx", feeds); run()   # one inference
    """
    try:
        import onnxruntime
    except ImportError:
        return None
    try:
        from tilefuse.graph_api.onnx import import_onnx
        with warnings.catch_warnings():          # load_graph reported them already
            warnings.simplefilter("ignore")
            names = {tid: name for name, tid in import_onnx(str(path)).inputs if tid is not None}
        unnamed = sorted(set(feeds) - set(names))
        if unnamed:
            raise ValueError(f"graph input(s) {unnamed} match no input of the model")
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        model_feeds = {names[tid]: array for tid, array in feeds.items()}
        session.run(None, model_feeds)           # warm-up, and the check that it runs
    except Exception as err:                     # onnxruntime's own errors, a feed it lacks
        print(f"autotune: warning: {path}: onnxruntime cannot run the model, so it is not timed: "
              f"{_first_line(str(err)) or type(err).__name__}", file=sys.stderr)
        return None
    return lambda: session.run(None, model_feeds)


FLUSHED_REPEATS = 10
"""Timed calls per candidate under ``tune --cache-flush``: one call each, after its weights are
flushed from the caches."""
BENCH_BLOCKS = 5
"""``bench`` times each engine in at least this many blocks, the engines taking turns."""
BENCH_BLOCK_SECONDS = 0.15
"""About how long one engine's block lasts at most (at least one run): a slow model's runs are
spread over many short blocks, so that a slow spell of the machine (another tenant's burst,
a second or so) falls on every engine alike, not on one engine's long block."""
BENCH_PAUSE, BENCH_WARMUP = PAUSE, WARMUP
"""Seconds of sleep before each block, then of untimed runs (at least one): as the check in the
model waits (``model_check.PAUSE``, ``model_check.WARMUP``)."""


def time_interleaved(runners: dict, repeat: int, blocks: int = BENCH_BLOCKS, pause: float = BENCH_PAUSE,
                     warmup: float = BENCH_WARMUP) -> dict:
    """{name: seconds of each run}: ``repeat`` timed runs per runner in ``blocks`` blocks, the
    runners taking turns block by block so that drift (other work, clock changes) hits them
    all alike; before each block a ``pause``, then untimed runs for ``warmup`` seconds (at
    least one).

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
            for _ in range(runs):
                start = time.perf_counter()
                run_once()
                times[name].append(time.perf_counter() - start)
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


def _bench_rows(stats: dict, speedup: dict, noise: dict) -> list:
    rows = [[name, _ms(s["median"]), _ms(s["min"]), f"±{noise[name]:.0%}"] for name, s in stats.items()]
    return rows + [["speedup", f"{speedup['median']:.2f}x", f"{speedup['min']:.2f}x", ""]]


def _draw_bench(args, stats: dict, chatter) -> None:
    bars = plots.latency_bars(stats)
    title = f"{Path(args.graph).name} on {current_target().cpu}: {args.repeat} runs each"
    plots.draw_latency_bars(bars, args.plot, title=title)
    print(f"wrote {args.plot}: {', '.join(b.label for b in bars)}", file=chatter)


def cmd_bench(args) -> int:
    """``autotune bench``: end-to-end latency of the compiled graph with default configs and
    with the database's best configs, side by side (median and best of ``--repeat`` runs), and
    of onnxruntime on an ONNX model when it is installed; ``--plot`` draws them as bars.

    Example:
        >>> # main(["bench", "examples/mlp.json", "--db", "tuning.db", "--repeat", "50"])
        >>> # main(["bench", "examples/resnet_block.onnx", "--plot", "bench.png"])
    """
    if args.plot is not None:
        prepare_image(args.plot, "--plot")
    graph = load_graph(args.graph)
    with open_database(args.db, must_exist=True) as db:
        default, _ = _compile(graph)
        tuned, missing = _compile(graph, db=db)
        tasks = extract_tasks(graph)
        absent = set(db.missing([t.key for t in tasks]))
    feeds = random_feeds(tuned.input_ports, args.seed)
    want, got = default.run(feeds), tuned.run(feeds)     # also the warm-up runs
    mismatched = [tid for tid in want if compare_outputs([got[tid]], [want[tid]], [str(tid)], 1e-3, 1e-4)]
    runners = {"default": lambda: default.run(feeds), "tuned": lambda: tuned.run(feeds)}
    if Path(args.graph).suffix.lower() == ".onnx":
        reference = onnxruntime_runner(args.graph, feeds)
        if reference is not None:
            runners["onnxruntime"] = reference
        elif args.plot is not None:
            print("autotune: note: onnxruntime is not timed, so the chart has no onnxruntime bar "
                  "(pip install onnxruntime)", file=sys.stderr)
    slowest = 0.0
    for run_once in runners.values():
        started = time.perf_counter()
        run_once()
        slowest = max(slowest, time.perf_counter() - started)
    times = time_interleaved(runners, args.repeat, bench_blocks(args.repeat, slowest))  # drift hits all alike
    stats = {name: {"median": statistics.median(t), "min": min(t)} for name, t in times.items()}
    noise = {name: s["median"] / s["min"] - 1 for name, s in stats.items()}     # the spread of the runs
    speedup = {k: stats["default"][k] / stats["tuned"][k] for k in ("median", "min")}
    partitions = sum(t.weight for t in tasks)
    untuned = sum(t.weight for t in tasks if t.key in absent)
    if args.json:
        data = {"graph": args.graph, "db": args.db, "repeat": args.repeat, "seed": args.seed,
                "partitions": partitions, "untuned_partitions": untuned,
                "missing": [{"name": t.name, "key": t.key} for t in tasks if t.key in absent]}
        data.update({f"{name}_ms": {k: v * 1e3 for k, v in s.items()} for name, s in stats.items()})
        data.update(noise=noise, speedup=speedup, outputs_match=not mismatched)
        _print_json(data)
    else:
        print(f"{args.graph}: {partitions} compiled partition(s), {partitions - untuned} with a tuned "
              f"config in {args.db}, {args.repeat} runs each on {current_target().cpu}")
        print(format_table(["", "median ms", "min ms", "noise"], _bench_rows(stats, speedup, noise), right={1, 2, 3}))
    if args.plot is not None:
        _draw_bench(args, stats, sys.stderr if args.json else sys.stdout)
    if missing:
        print(f"autotune: {len(missing)} workload(s) ran with default configs "
              f"(`autotune best --missing {args.graph} --db {args.db}` lists them)", file=sys.stderr)
    if mismatched:
        print(f"autotune: the tuned graph's outputs {mismatched} differ from the default graph's",
              file=sys.stderr)
        return EXIT_UNUSABLE
    return EXIT_OK


# ---------------------------------------------------------------------------- graph

def cmd_graph(args) -> int:
    """``autotune graph``: the graph of a model with its partitions as clusters, as DOT text
    (``-o g.dot``) or drawn by Graphviz (``-o g.svg``, ``.png``, ``.pdf``).

    Example:
        >>> # main(["graph", "examples/resnet_block.onnx", "-o", "resnet_block.svg"])
    """
    graph = load_graph(args.graph)
    written = plots.write_graph_picture(graph.to_dot(), args.output, timeout=args.timeout)
    print(f"wrote {args.output} ({written}): {len(graph.get_partitions())} partition(s) of {args.graph}")
    return EXIT_OK


# ---------------------------------------------------------------------------- command line

class _Parser(argparse.ArgumentParser):
    """argparse that raises BadInput (exit 2 from ``main``) instead of exiting."""

    def error(self, message):
        raise BadInput(f"{self.prog}: {message}\n{self.format_usage().rstrip()}")


def build_parser() -> argparse.ArgumentParser:
    """The ``autotune`` argument parser (subcommands tune, best, show, export, import, bench,
    plot, graph).

    Example:
        >>> build_parser().parse_args(["tune", "g.json", "--trials", "8"]).time_budget is None
        True
    """
    parser = _Parser(prog="autotune", description="Tune, inspect and use tilefuse tuning records.",
                     epilog="exit codes: 0 done, 1 not usable (see the subcommand), 2 bad input, "
                            "3 time budget exhausted before any task was tuned, 130 interrupted")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def db_option(p):
        p.add_argument("--db", default=DEFAULT_DB, metavar="PATH",
                       help=f"tuning database (sqlite; default {DEFAULT_DB})")

    p = commands.add_parser("tune", help="tune every task (partition workload) of a graph",
                            description="Tune every task of GRAPH and print a table per task.")
    p.add_argument("graph", metavar="GRAPH", help="oneDNN Graph JSON (.json) or ONNX model (.onnx)")
    p.add_argument("--trials", type=_positive_int, required=True, metavar="N",
                   help="measurements in all, over all tasks, as the scheduler shares them (resumed ones count)")
    p.add_argument("--tuner", choices=sorted(TUNERS), default="xgb", help="search strategy (default xgb)")
    p.add_argument("--scheduler", choices=list(SCHEDULERS), default="gradient",
                   help="which task the next batch goes to: gradient (the largest expected gain of the "
                        "model's time, after each task's default) or sequential (task after task, by weight); "
                        "default gradient")
    db_option(p)
    p.add_argument("--log", metavar="PATH", help=f"JSON-lines log (default {LOG_DIR}/<graph stem>.jsonl)")
    p.add_argument("--time-budget", type=_duration, metavar="DURATION",
                   help="wall-time bound of the whole run: 90, 90s, 10m, 1h30m")
    p.add_argument("--executor", type=_executor_spec, default="local", metavar="SPEC",
                   help="where candidates build and run: local (default) or dask://HOST:PORT")
    p.add_argument("--seed", type=int, default=0, help="seed of the tuner (default 0)")
    p.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                   help="start from the database's records of each task on this CPU (default on)")
    p.add_argument("--early-stopping", type=_positive_int, metavar="N",
                   help="stop a task after N measurements without improvement")
    p.add_argument("--min-repeat-ms", type=_non_negative_float, default=DEFAULT_MIN_REPEAT_MS, metavar="MS",
                   help="time each candidate in repeats of at least MS milliseconds (runs are "
                        f"averaged; steadier costs for small kernels; default {DEFAULT_MIN_REPEAT_MS:g})")
    p.add_argument("--timeout", type=_duration, default=DEFAULT_TIMEOUT, metavar="DURATION",
                   help=f"build, and run, time allowed per candidate (default {DEFAULT_TIMEOUT:g} s)")
    p.add_argument("--cache-flush", action=argparse.BooleanOptionalAction, default=None,
                   help=f"push each kernel's weights out of the caches before each timed call "
                        f"({FLUSHED_REPEATS} single calls per candidate): they come from memory, as in a "
                        f"model whose weights do not fit in the caches, while its data inputs stay cached "
                        f"(default: when the model's weights are more than the last-level cache holds)")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of the table")
    p.add_argument("--verbose", action="store_true", help="print every error message")
    p.set_defaults(run=cmd_tune)

    p = commands.add_parser("best", help="best record per workload for this CPU",
                            description="The best record per workload for this CPU; with --missing "
                                        "GRAPH, the graph's workloads without one (exit 1 if any).")
    db_option(p)
    p.add_argument("--missing", metavar="GRAPH", help="list GRAPH's workloads with no record for this CPU")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_best)

    p = commands.add_parser("show", help="the records of a JSON-lines log")
    p.add_argument("log", metavar="LOG")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=cmd_show)

    p = commands.add_parser("export", help="append database records to a log")
    db_option(p)
    p.add_argument("log", metavar="LOG")
    p.add_argument("--workload", metavar="KEY", help="only this workload (a key or a unique prefix)")
    p.set_defaults(run=cmd_export)

    p = commands.add_parser("import", help="add a log's records to the database (idempotent)")
    p.add_argument("log", metavar="LOG")
    db_option(p)
    p.set_defaults(run=cmd_import)

    p = commands.add_parser("bench", help="latency of the compiled graph, default vs tuned (vs onnxruntime)")
    p.add_argument("graph", metavar="GRAPH")
    db_option(p)
    p.add_argument("--repeat", type=_positive_int, default=30, metavar="N", help="timed runs of each (default 30)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input feeds (default 0)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--plot", metavar="IMAGE",
                   help="also draw the latencies as bars into IMAGE (.png, .svg, .pdf; needs matplotlib)")
    p.set_defaults(run=cmd_bench)

    p = commands.add_parser("plot", help="best cost so far against trial number, one line per task",
                            description="Draw the best cost so far (ms, or GFLOPS when the database knows "
                                        "every task's flop count) against trial number, one line per task, "
                                        "from a tuning log or database. Needs matplotlib.")
    p.add_argument("source", metavar="LOG_OR_DB", help="JSON-lines tuning log or sqlite tuning database")
    p.add_argument("-o", "--output", required=True, metavar="IMAGE", help="image to write (.png, .svg, .pdf)")
    p.add_argument("--workload", metavar="KEY_PREFIX", help="only the workloads whose key starts so")
    p.set_defaults(run=cmd_plot)

    p = commands.add_parser("graph", help="the graph with its partitions, as DOT text or a picture",
                            description="Write the graph of a model with its partitions as clusters: DOT text "
                                        "(.dot, .gv), or a picture drawn by Graphviz's dot (.svg, .png, .pdf).")
    p.add_argument("graph", metavar="GRAPH", help="oneDNN Graph JSON (.json) or ONNX model (.onnx)")
    p.add_argument("-o", "--output", required=True, metavar="PICTURE", help="g.dot, g.svg, g.png or g.pdf")
    p.add_argument("--timeout", type=_duration, default=plots.DOT_TIMEOUT, metavar="DURATION",
                   help=f"time allowed to Graphviz (default {plots.DOT_TIMEOUT:g} s)")
    p.set_defaults(run=cmd_graph)
    return parser


def main(argv=None) -> int:
    """Run the ``autotune`` command with ``argv`` (default: ``sys.argv[1:]``); returns the exit
    code (see the module docstring). Bad input is reported on stderr, never as a traceback.

    Example:
        >>> main(["tune", "missing.json", "--trials", "4"])
        2
    """
    parser = build_parser()
    args = None
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as stop:                       # --help, --version
            return stop.code if isinstance(stop.code, int) else EXIT_OK
        return args.run(args)
    except (BadInput, TuningDatabaseError, PlotError) as err:   # each names its file and the fix
        print(f"autotune: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except LogWriteError as err:                     # the db kept every record; the next tune catches up
        print(f"autotune: error: {err}; the tuning database keeps every measurement, and the next "
              f"`autotune tune` of this model writes the missing ones to the log", file=sys.stderr)
        return EXIT_BAD_INPUT
    except sqlite3.DatabaseError as err:             # damage sqlite met after the open's check
        where = getattr(args, "db", None) or "?"
        print(f"autotune: error: tuning database {where}: {err}; if it is damaged, move it away and rebuild it "
              f"from the tuning logs with `autotune import LOG --db {where}`", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("autotune: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:                              # `autotune show LOG | head`
        try:                                             # no second error when Python flushes stdout
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return EXIT_UNUSABLE
