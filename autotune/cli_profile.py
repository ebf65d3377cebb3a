"""``autotune profile MODEL``: where a model's time goes. The model runs ``--runs`` times in an
``InferenceSession`` with profiling on (``graph_api.profiler``: one Chrome-trace event per
partition run, as onnxruntime's profiler writes them), and the partitions that took the most
time are printed as a table: their ONNX nodes, output shape, median time, share of the run,
GFLOPS and GB/s, and the share of the FMA peak or of the copy bandwidth (measured on this
machine once, before the first run is reported) that those make. ``-o trace.json`` keeps the
trace (chrome://tracing, Perfetto, or ``json.load``). ``--db``: the tuning database whose
best configs the session compiles with (default: the templates' defaults).

Example:
    >>> from types import SimpleNamespace
    >>> cmd_profile(SimpleNamespace(graph="no/such/model.onnx", db=None, output=None, runs=3, top=10, seed=0))
    Traceback (most recent call last):
    ...
    tilefuse.autotune.cli_io.BadInput: no/such/model.onnx: no model file 'no/such/model.onnx'
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
from types import SimpleNamespace

import numpy as np

from tilefuse import graph_api
from tilefuse.graph_api.onnx.importer import load_model
from tilefuse.graph_api.profiler import top_partitions
from tilefuse.graph_api.session_options import SessionOptions

from .cli_io import EXIT_OK, BadInput, format_table, shorten
from .cli_shapes import ShapeRequest, add_shape_options
from .database import TuningDatabaseError
from .model_check import random_feeds
from .session import InferenceSession

DEFAULT_RUNS = 10
DEFAULT_TOP = 15


def add_profile_command(commands, positive_int) -> None:
    """Add ``profile`` to the ``autotune`` subcommands (``positive_int``: the parser's type for
    counts).

    Example:
        >>> import argparse
        >>> commands = argparse.ArgumentParser().add_subparsers()
        >>> add_profile_command(commands, int)
        >>> commands.choices["profile"].parse_args(["m.onnx", "-o", "t.json"]).runs
        10
    """
    p = commands.add_parser("profile", help="where a model's time goes: its partitions, slowest first",
                            description="Run MODEL with profiling on and print its slowest partitions: their "
                                        "ONNX nodes, shapes, times and share of this machine's FMA peak or copy "
                                        "bandwidth; -o keeps the Chrome trace (onnxruntime's profile format).")
    p.add_argument("graph", metavar="MODEL", help="ONNX model (.onnx) or oneDNN Graph JSON (.json)")
    p.add_argument("-o", "--output", metavar="TRACE", help="write the profile as a Chrome-trace JSON file")
    p.add_argument("--runs", type=positive_int, default=DEFAULT_RUNS, metavar="N",
                   help=f"profiled runs (default {DEFAULT_RUNS}; the table shows each partition's median)")
    p.add_argument("--top", type=positive_int, default=DEFAULT_TOP, metavar="N",
                   help=f"partitions in the table (default {DEFAULT_TOP})")
    p.add_argument("--db", metavar="PATH", help="compile with this tuning database's best configs "
                                                "(default: the templates' default configs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input feeds (default 0)")
    add_shape_options(p)
    p.set_defaults(run=cmd_profile)


def input_shapes(args, session) -> dict:
    """{input name: shape} the model is profiled with: the shapes it declares, with
    ``--shape`` and ``--batch`` applied to an ONNX model's (``cli_shapes``); a symbolic dim left
    is a BadInput naming it.

    Example:
        >>> input_shapes(None, graph_api.InferenceSession("examples/resnet_block.onnx"))
        {'input': (1, 16, 32, 32)}
    """
    request = ShapeRequest.of(args)
    if request or not all(arg.shape is not None and all(isinstance(d, int) for d in arg.shape)
                          for arg in session.get_inputs()):
        if not str(args.graph).endswith(".onnx"):
            raise BadInput(f"{args.graph}: --shape and --batch take an ONNX model")
        return request.bind(load_model(args.graph).proto, args.graph)
    return {arg.name: tuple(arg.shape) for arg in session.get_inputs()}


def cmd_profile(args) -> int:
    """``autotune profile`` (see the module docstring).

    Example:
        >>> from types import SimpleNamespace
        >>> cmd_profile(SimpleNamespace(graph="README.md", db=None, output=None, runs=3, top=10, seed=0))
        Traceback (most recent call last):
        ...
        tilefuse.autotune.cli_io.BadInput: README.md: not a usable model: ONNX model file 'README.md' is not a readable ONNX model: ...
    """
    if args.output is not None:
        folder = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(folder):
            raise BadInput(f"-o {args.output}: no folder {folder}")
        if os.path.isdir(args.output):
            raise BadInput(f"-o {args.output}: a folder, not a file name")
    if args.db is not None and not os.path.isfile(args.db):
        raise BadInput(f"--db {args.db}: no tuning database there")
    with tempfile.TemporaryDirectory(prefix="autotune-profile-") as scratch:
        options = SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(scratch, "profile")
        try:
            session = InferenceSession(args.graph, options, db=args.db)
        except FileNotFoundError as err:
            raise BadInput(f"{args.graph}: {err}") from None
        except (graph_api.GraphError, TuningDatabaseError) as err:
            raise BadInput(f"{args.graph}: not a usable model: {err}") from None
        shapes = input_shapes(args, session)
        ports = [SimpleNamespace(id=arg.name, shape=shapes[arg.name], dtype=SimpleNamespace(numpy=_numpy(arg.type)))
                 for arg in session.get_inputs()]
        feeds = random_feeds(ports, args.seed)
        for _ in range(args.runs):
            session.run(None, feeds)
        trace = session.end_profiling()
        with open(trace) as f:
            events = json.load(f)
        if args.output is not None:
            shutil.copyfile(trace, args.output)
    print(profile_report(args.graph, shapes, events, args.top))
    if args.output is not None:
        print(f"trace: {args.output} ({len(events)} events)")
    return EXIT_OK


def profile_report(model: str, shapes: dict, events: list, top: int) -> str:
    """The table ``autotune profile`` prints for a profile's ``events``: a line on the runs and
    the peaks, then the ``top`` partitions by time.

    Example:
        >>> events = [{"cat": "Session", "name": "model_run", "dur": 120, "args": {"peak_gflops": 100.0,
        ...            "peak_gbs": 10.0}},
        ...           {"cat": "Node", "name": "/fc/MatMul", "dur": 100, "args": {"partition": 0,
        ...            "op_name": "MatMul", "output_type_shape": [{"float": [1, 10]}], "gflops": 2.0, "gbs": 1.0,
        ...            "fma_share": 0.02, "bandwidth_share": 0.1, "bound": "memory", "nodes": ["/fc/MatMul"]}}]
        >>> print(profile_report("m.onnx", {"x": (1, 4)}, events, 5))
        m.onnx (x 1x4): 1 run(s), median 0.120 ms; peaks 100.0 GFLOPS (FMA), 10.0 GB/s (copy)
        #  partition   ops     output  median us  time  GFLOPS  GB/s  share of peak
        -  ----------  ------  ------  ---------  ----  ------  ----  -------------
        1  /fc/MatMul  MatMul  1x10        100.0  100%     2.0   1.0     10% memory
    """
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    peaks = runs[0]["args"] if runs else {}
    median_ms = statistics.median(e["dur"] for e in runs) / 1e3 if runs else float("nan")
    inputs = ", ".join(f"{name} {'x'.join(map(str, shape))}" for name, shape in shapes.items())
    head = (f"{model} ({inputs}): {len(runs)} run(s), median {median_ms:.3f} ms; peaks "
            f"{peaks.get('peak_gflops', float('nan')):.1f} GFLOPS (FMA), {peaks.get('peak_gbs', float('nan')):.1f} "
            f"GB/s (copy)")
    rows = []
    for rank, row in enumerate(top_partitions(events, top), 1):
        args = row["args"]
        out = args.get("output_type_shape") or [{"": []}]
        shape = "x".join(map(str, next(iter(out[0].values())) or []))
        share = args.get("fma_share" if args.get("bound") == "fma" else "bandwidth_share", 0)
        rows.append([str(rank), shorten(row["name"], 44), shorten(args.get("op_name", ""), 28), shape,
                     f"{row['median_us']:.1f}", f"{row['time_share']:.0%}", f"{args.get('gflops', 0):.1f}",
                     f"{args.get('gbs', 0):.1f}", f"{share:.0%} {args.get('bound', '')}"])
    table = format_table(["#", "partition", "ops", "output", "median us", "time", "GFLOPS", "GB/s", "share of peak"],
                         rows, right={4, 5, 6, 7, 8})
    return f"{head}\n{table}"


def _numpy(ort_type: str) -> np.dtype:
    name = ort_type[len("tensor("):-1]
    return np.dtype({"float": "float32", "double": "float64"}.get(name, name))

