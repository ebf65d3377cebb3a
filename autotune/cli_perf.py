"""``autotune perf``: an ONNX model's latency percentiles, throughput, compile time and peak
memory with tilefuse, and the same with onnxruntime and OpenVINO where they are installed.

Each engine runs in a process of its own (``perf_worker``), so the peak RSS it reports is that
engine's (plus Python and numpy, printed once apart). The engines take turns block by block
(``BLOCK_SECONDS`` of timed runs, each block after ``PAUSE`` of sleep and ``WARMUP`` of untimed
runs, as ``bench`` times engines: ``timing``) until each has ``--duration`` of timed runs, so a
slow spell of a shared machine falls on all of them alike. Random feeds, the same for every
engine; ``--shape``/``--batch`` bind a symbolic batch. onnxruntime and openvino are optional:
one missing, or refusing the model, is a note on stderr and a row less.

Example:
    >>> compare_engines("openvino, onnxruntime")
    ['openvino', 'onnxruntime']
    >>> summary([0.001, 0.002, 0.003, 0.004])["p50_ms"]
    2.5
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import pickle
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from .cli_io import EXIT_OK, BadInput, finite_or_none, first_line, format_table, number_text, print_json
from .cli_shapes import ShapeRequest, add_shape_options
from .model_check import random_feeds
from .target import current_target
from .timing import BENCH_BLOCK_SECONDS, PAUSE, WARMUP

COMPARABLE = {"onnxruntime": "onnxruntime", "openvino": "openvino"}
"""Engines ``--compare`` takes -> the package each needs."""
BLOCK_SECONDS = BENCH_BLOCK_SECONDS
WORKER = Path(__file__).with_name("perf_worker.py")
WORKER_START = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
"""Runs the worker's file as a script without putting its folder on ``sys.path`` (its
neighbours would shadow top-level modules) and without importing the package."""
DEFAULT_DB = "tuning.db"


def compare_engines(text: str) -> list:
    """The engines of a ``--compare`` value (comma-separated, in order, once each); an
    unknown one is an ArgumentTypeError.

    Example:
        >>> compare_engines("tensorrt")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: unknown engine 'tensorrt'; --compare takes onnxruntime, openvino
    """
    names = []
    for name in (part.strip().lower() for part in text.split(",")):
        if name not in COMPARABLE:
            raise argparse.ArgumentTypeError(f"unknown engine {name!r}; --compare takes {', '.join(COMPARABLE)}")
        if name not in names:
            names.append(name)
    return names


def summary(times) -> dict:
    """Latency percentiles (ms), the mean and the throughput (runs a second, one stream) of
    the seconds of each run.

    Example:
        >>> s = summary([0.01] * 99 + [0.11]); s["p50_ms"], s["p99_ms"] > s["p90_ms"], round(s["runs_per_second"], 1)
        (10.0, True, 90.9)
    """
    array = np.asarray(times, dtype=np.float64)
    p50, p90, p99 = np.percentile(array, [50, 90, 99]) * 1e3
    return {"p50_ms": float(p50), "p90_ms": float(p90), "p99_ms": float(p99), "mean_ms": float(array.mean() * 1e3),
            "runs_per_second": float(len(array) / array.sum()), "runs": len(array)}


class EngineStopped(RuntimeError):
    """An engine's process ended before it answered (a crash in the engine)."""


class EngineProcess:
    """An engine loaded in a ``perf_worker`` process: ``load`` it, time ``block``s, ``end``
    it (its peak RSS), or ``close`` it whatever state it is in.

    Example:
        >>> EngineProcess("tilefuse").name
        'tilefuse'
    """

    def __init__(self, name: str):
        self.name = name
        self.process = None
        self.before = 0

    def _ask(self, message):
        try:
            pickle.dump(message, self.process.stdin)
            self.process.stdin.flush()
            return pickle.load(self.process.stdout)
        except (EOFError, BrokenPipeError, pickle.UnpicklingError):
            code = self.process.wait()
            raise EngineStopped(f"{self.name}'s process stopped (exit code {code})") from None

    def load(self, model: str, feeds: dict, threads: int, db) -> tuple:
        """Start the process, load the model and run it once: (seconds, the run's outputs,
        notes), or an EngineStopped naming the engine's error."""
        self.process = subprocess.Popen([sys.executable, "-c", WORKER_START, str(WORKER)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE)
        answer = self._ask({"engine": self.name, "model": model, "feeds": feeds, "threads": threads, "db": db})
        if answer[0] == "error":
            self.close()
            raise EngineStopped(f"{self.name} cannot run the model: {answer[1]}")
        _, seconds, self.before, outputs, notes = answer
        return seconds, outputs, notes

    def block(self, seconds: float) -> list:
        """The seconds of each run of a block: after ``PAUSE`` and ``WARMUP``, runs for ``seconds``."""
        return self._ask(("block", seconds, PAUSE, WARMUP))[1]

    def end(self) -> int:
        """The process's peak RSS in bytes; the process ends."""
        rss = self._ask(("end",))[1]
        self.close()
        return rss

    def close(self) -> None:
        """End the process (killed when it does not end within 10 s)."""
        if self.process is None:
            return
        for stream in (self.process.stdin, self.process.stdout):
            stream.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


def _model_inputs(path: Path, args) -> tuple:
    """({input name: static shape}, {input name: numpy dtype}) of the model, its shapes bound
    by ``--shape``/``--batch``."""
    import onnx
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:                 # protobuf's DecodeError and friends: not an ONNX file
        raise BadInput(f"{path}: not a readable ONNX model: {first_line(str(err)) or type(err).__name__}") from None
    if not model.graph.node:
        raise BadInput(f"{path}: not an ONNX model with a graph (no nodes)")
    shapes = ShapeRequest.of(args).bind(model, path)
    types = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.input if vi.name in shapes}
    try:
        dtypes = {name: np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t)) for name, t in types.items()}
    except (KeyError, TypeError, ValueError) as err:
        raise BadInput(f"{path}: an input's data type has no numpy equivalent: {err}") from None
    return shapes, dtypes


def named_feeds(shapes: dict, dtypes: dict, seed: int) -> dict:
    """Seeded random arrays by input name, as ``model_check.random_feeds`` makes them.

    Example:
        >>> f = named_feeds({"x": (2, 3)}, {"x": np.dtype("float32")}, 0); f["x"].shape, f["x"].dtype
        ((2, 3), dtype('float32'))
    """
    ports = [SimpleNamespace(id=name, shape=shape, dtype=SimpleNamespace(numpy=dtypes[name]))
             for name, shape in shapes.items()]
    return random_feeds(ports, seed)


def _available(engines, chatter) -> list:
    found = []
    for name in engines:
        if name != "tilefuse" and importlib.util.find_spec(COMPARABLE[name]) is None:
            print(f"autotune: note: {name} is not installed, so it is not compared (pip install {COMPARABLE[name]})",
                  file=chatter)
        else:
            found.append(name)
    return found


def _database(args):
    """The tuning database tilefuse compiles with: ``--db``, else ``DEFAULT_DB`` when it
    exists, else None (default configs)."""
    if args.db is not None:
        if not os.path.isfile(args.db):
            raise BadInput(f"--db {args.db}: no such tuning database")
        return args.db
    return DEFAULT_DB if os.path.isfile(DEFAULT_DB) else None


def output_difference(ours, theirs) -> float:
    """The largest difference between two engines' outputs (lists of arrays), each relative to
    the largest magnitude of our output; inf when their number or shapes differ.

    Example:
        >>> output_difference([np.array([1.0, -4.0])], [np.array([1.0, -3.0])])
        0.25
    """
    if len(ours) != len(theirs) or any(np.shape(a) != np.shape(b) for a, b in zip(ours, theirs)):
        return math.inf
    worst = 0.0
    for a, b in zip(ours, theirs):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        if a.size:
            worst = max(worst, float(np.abs(a - b).max()) / max(float(np.abs(a).max()), 1e-30))
    return worst


AGREEMENT = 1e-3
"""An engine whose outputs differ from tilefuse's by more than this (relative to the output's
largest magnitude) is reported: it may compute something else, and its times compare nothing."""


def _load_all(names, model, feeds, threads, db, opened) -> dict:
    """{name: (process, compile seconds, outputs)} of the engines that load the model, one at
    a time (a compile does not share the machine with another's); the others noted on stderr."""
    loaded = {}
    for name in names:
        engine = EngineProcess(name)
        opened.append(engine)
        try:
            seconds, outputs, notes = engine.load(model, feeds, threads, db if name == "tilefuse" else None)
        except EngineStopped as err:
            if name == "tilefuse":
                raise BadInput(f"{model}: {err}") from None
            print(f"autotune: note: {err}; it is not compared", file=sys.stderr)
            continue
        for kind, (count, first) in notes.items():
            print(f"autotune: {name}: {count} {kind}(s), the first: {first_line(first)}", file=sys.stderr)
        loaded[name] = (engine, seconds, outputs)
    return loaded


def _time_in_turns(loaded: dict, duration: float) -> dict:
    """{name: seconds of each timed run}: blocks of the engines in turn until each has
    ``duration`` seconds of timed runs."""
    times = {name: [] for name in loaded}
    while min(sum(t) for t in times.values()) < duration:
        for name, (engine, _, _) in loaded.items():
            times[name] += engine.block(min(BLOCK_SECONDS, max(duration - sum(times[name]), 0.0)))
    return times


def _rows(results: dict) -> list:
    ours = results["tilefuse"]["p50_ms"]
    return [[name, f"{r['compile_seconds']:.2f}", f"{r['peak_rss_mib']:.0f}", f"{r['p50_ms']:.3f}",
             f"{r['p90_ms']:.3f}", f"{r['p99_ms']:.3f}", f"{r['runs_per_second']:.0f}", r["runs"],
             f"{r['p50_ms'] / ours:.2f}x", "-" if name == "tilefuse" else number_text(r["max_difference"], ".1e")]
            for name, r in results.items()]


def cmd_perf(args) -> int:
    """``autotune perf``: time the model with tilefuse and the ``--compare`` engines (see the
    module docstring); print a row per engine, or JSON.

    Example:
        >>> cmd_perf(SimpleNamespace(model="model.json"))
        Traceback (most recent call last):
        ...
        tilefuse.autotune.cli_io.BadInput: model.json: perf runs ONNX models (.onnx)
    """
    path = Path(args.model)
    if path.suffix.lower() != ".onnx":
        raise BadInput(f"{path}: perf runs ONNX models (.onnx)")
    if not path.is_file():
        raise BadInput(f"{path}: no such model file")
    shapes, dtypes = _model_inputs(path, args)
    db = _database(args)
    threads = args.threads or len(os.sched_getaffinity(0))
    feeds = named_feeds(shapes, dtypes, args.seed)
    names = _available(["tilefuse", *(args.compare or [])], sys.stderr)
    opened = []
    try:
        loaded = _load_all(names, str(path.resolve()), feeds, threads, db and os.path.abspath(db), opened)
        times = _time_in_turns(loaded, args.duration)
        rss = {name: engine.end() for name, (engine, _, _) in loaded.items()}
    except EngineStopped as err:
        raise BadInput(f"{path}: {err}") from None
    finally:
        for engine in opened:
            engine.close()
    base = loaded["tilefuse"][0].before
    ours = loaded["tilefuse"][2]
    results = {name: {"compile_seconds": loaded[name][1], "peak_rss_mib": rss[name] / 2**20, **summary(t),
                      "max_difference": output_difference(ours, loaded[name][2])} for name, t in times.items()}
    for name, r in results.items():
        if name != "tilefuse" and r["max_difference"] > AGREEMENT:
            print(f"autotune: warning: {name}'s outputs differ from tilefuse's by up to {r['max_difference']:.2g} "
                  f"of their largest magnitude", file=sys.stderr)
    inputs = ", ".join(f"{name} {'x'.join(map(str, shape))}" for name, shape in shapes.items())
    if args.json:
        print_json({"model": str(path), "inputs": {n: list(s) for n, s in shapes.items()}, "threads": threads,
                    "duration": args.duration, "db": db, "cpu": current_target().cpu,
                    "python_numpy_rss_mib": base / 2**20,
                    "engines": {name: {**r, "max_difference": finite_or_none(r["max_difference"])}
                                for name, r in results.items()}})
        return EXIT_OK
    print(f"{path} ({inputs}) on {current_target().cpu}, {threads} thread(s); tilefuse "
          f"{'with the picks of ' + db if db else 'with default configs (no tuning database)'}")
    print(f"each engine {args.duration:g} s of timed runs, in blocks of {BLOCK_SECONDS:g} s taking turns, each after "
          f"a {PAUSE * 1e3:.0f} ms pause and {WARMUP * 1e3:.0f} ms of untimed runs")
    print(format_table(["engine", "compile s", "peak RSS MiB", "p50 ms", "p90 ms", "p99 ms", "runs/s", "runs",
                        "p50 / tilefuse", "outputs vs tilefuse"], _rows(results), right=set(range(1, 10))))
    print(f"compile s: load, compile and first run; peak RSS: the engine's own process (Python and numpy "
          f"alone: {base / 2**20:.0f} MiB); runs/s: one stream, runs over their seconds; outputs: the largest "
          f"difference, relative to the output's largest magnitude")
    return EXIT_OK


def add_perf_parser(commands, duration, count) -> None:
    """Add the ``perf`` subcommand to ``commands`` (argparse subparsers); ``duration`` and
    ``count`` parse a duration and a positive whole number.

    Example:
        >>> p = argparse.ArgumentParser(); add_perf_parser(p.add_subparsers(), float, int)
        >>> p.parse_args(["perf", "m.onnx", "--compare", "onnxruntime"]).compare
        ['onnxruntime']
    """
    p = commands.add_parser("perf", help="latency percentiles, throughput, compile time and peak memory, "
                                         "beside onnxruntime and OpenVINO",
                            description="Time an ONNX model with tilefuse (and --compare engines), each in a "
                                        "process of its own, in interleaved blocks.")
    p.add_argument("model", metavar="MODEL", help="an ONNX model (.onnx)")
    add_shape_options(p)
    p.add_argument("--threads", type=count, metavar="N",
                   help="threads of every engine (default: the CPUs this process may run on)")
    p.add_argument("--duration", type=duration, default=10.0, metavar="DURATION",
                   help="timed runs per engine: 10s (default), 1m, 0.5")
    p.add_argument("--compare", type=compare_engines, metavar="ENGINES",
                   help="also time these, where installed: onnxruntime, openvino (comma-separated)")
    p.add_argument("--db", metavar="PATH",
                   help=f"tuning database whose picks tilefuse compiles with (default {DEFAULT_DB} when it exists)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input feeds (default 0)")
    p.add_argument("--json", action="store_true", help="print a JSON document instead of the table")
    p.set_defaults(run=cmd_perf)
