"""``autotune bench``: the compiled graph's latency with the default configs and with the
database's picks (and onnxruntime's on an ONNX model), timed side by side as ``timing.time_in_blocks``
times engines, and its outputs checked as tuning checks them.

Example:
    >>> print(format_table(["", "median ms", "min ms", "noise"], _bench_rows(
    ...     {"default": {"median": 2e-3, "min": 1.6e-3}, "tuned": {"median": 1e-3, "min": 1e-3}},
    ...     {"median": 2.0, "min": 1.6}, {"default": 0.25, "tuned": 0.0}), right={1, 2, 3}))
             median ms  min ms  noise
    -------  ---------  ------  -----
    default      2.000   1.600   ±25%
    tuned        1.000   1.000    ±0%
    speedup      2.00x   1.60x
"""
from __future__ import annotations

import statistics
import sys
import warnings
from pathlib import Path

from tilefuse import graph_api

from . import plots
from .cli_io import (EXIT_OK, EXIT_UNUSABLE, first_line, format_table, load_graph, ms_text, open_database,
                     print_json)
from .cli_pictures import prepare_image
from .cli_shapes import ShapeRequest
from .dispatch import HistoryBest, MissingRecordWarning, tuned_tasks
from .extract import extract_tasks
from .measure import compare_outputs
from .model_check import random_feeds
from .target import current_target
from .timing import spread, time_in_blocks

def _compile(graph, db=None):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = graph_api.compile_graph(graph, configs=None if db is None else HistoryBest(db))
    missing = [w for w in caught if issubclass(w.category, MissingRecordWarning)]
    for w in caught:
        print(f"autotune: warning: {w.message}", file=sys.stderr)
    return compiled, missing


def onnxruntime_runner(path, feeds, shapes=None):
    """A function that runs the ONNX model at ``path`` once in onnxruntime (CPU) on ``feeds``
    (arrays by graph input id, as ``random_feeds`` makes them for the graph imported with
    ``shapes``, a ``cli_shapes.ShapeRequest``, passed by the model's input names), after a
    warm-up run; None when onnxruntime is not installed, and None with a warning on stderr
    when it cannot run the model.
    """
    try:
        import onnxruntime
    except ImportError:
        return None
    try:
        import onnx

        from tilefuse.graph_api.onnx import import_onnx
        with warnings.catch_warnings():          # load_graph reported them already
            warnings.simplefilter("ignore")
            bound = shapes.bind(onnx.load(str(path)), path) if shapes is not None else None
            names = {tid: name for name, tid in import_onnx(str(path), input_shapes=bound).inputs if tid is not None}
        unnamed = sorted(set(feeds) - set(names))
        if unnamed:
            raise ValueError(f"graph input(s) {unnamed} match no input of the model")
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        model_feeds = {names[tid]: array for tid, array in feeds.items()}
        session.run(None, model_feeds)           # warm-up, and the check that it runs
    except Exception as err:                     # onnxruntime's own errors, a feed it lacks
        print(f"autotune: warning: {path}: onnxruntime cannot run the model, so it is not timed: "
              f"{first_line(str(err)) or type(err).__name__}", file=sys.stderr)
        return None
    return lambda: session.run(None, model_feeds)


def _bench_rows(stats: dict, speedup: dict, noise: dict) -> list:
    rows = [[name, ms_text(s["median"]), ms_text(s["min"]), f"±{noise[name]:.0%}"] for name, s in stats.items()]
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
        >>> from types import SimpleNamespace
        >>> cmd_bench(SimpleNamespace(graph="no/such/model.onnx", plot=None, db="tuning.db"))
        Traceback (most recent call last):
        ...
        tilefuse.autotune.cli_io.BadInput: no/such/model.onnx: no such graph file
    """
    if args.plot is not None:
        prepare_image(args.plot, "--plot")
    shapes = ShapeRequest.of(args)
    graph = load_graph(args.graph, shapes)
    with open_database(args.db, must_exist=True) as db:
        default, _ = _compile(graph)
        tuned, missing = _compile(graph, db=db)
        tasks = extract_tasks(graph)
        absent = set(db.missing([t.key for t in tasks]))
        picked = {t.key for t in tuned_tasks(tasks, db)}
    feeds = random_feeds(tuned.input_ports, args.seed)
    want, got = default.run(feeds), tuned.run(feeds)     # also the warm-up runs
    mismatched = [tid for tid in want if compare_outputs([got[tid]], [want[tid]], [str(tid)], 1e-3, 1e-4)]
    runners = {"default": lambda: default.run(feeds), "tuned": lambda: tuned.run(feeds)}
    if Path(args.graph).suffix.lower() == ".onnx":
        reference = onnxruntime_runner(args.graph, feeds, shapes)
        if reference is not None:
            runners["onnxruntime"] = reference
        elif args.plot is not None:
            print("autotune: note: onnxruntime is not timed, so the chart has no onnxruntime bar "
                  "(pip install onnxruntime)", file=sys.stderr)
    times = time_in_blocks(runners, args.repeat)
    stats = {name: {"median": statistics.median(t), "min": min(t)} for name, t in times.items()}
    noise = {name: spread(t) for name, t in times.items()}     # the spread of the runs
    speedup = {k: stats["default"][k] / stats["tuned"][k] for k in ("median", "min")}
    partitions = sum(t.weight for t in tasks)
    untuned = sum(t.weight for t in tasks if t.key in absent)
    tuned_partitions = sum(t.weight for t in tasks if t.key in picked)
    if args.json:
        data = {"graph": args.graph, "db": args.db, "repeat": args.repeat, "seed": args.seed,
                "partitions": partitions, "workloads": len(tasks), "tuned_partitions": tuned_partitions,
                "tuned_workloads": len(picked), "untuned_partitions": untuned,
                "missing": [{"name": t.name, "key": t.key} for t in tasks if t.key in absent]}
        data.update({f"{name}_ms": {k: v * 1e3 for k, v in s.items()} for name, s in stats.items()})
        data.update(noise=noise, speedup=speedup, outputs_match=not mismatched)
        print_json(data)
    else:
        print(f"{args.graph}: {partitions} compiled partition(s) of {len(tasks)} workload(s); {tuned_partitions} "
              f"partition(s) of {len(picked)} workload(s) compile with a tuned config from {args.db}, the others "
              f"with their default ({untuned} without a record); {args.repeat} runs each on {current_target().cpu}")
        print(format_table(["", "median ms", "min ms", "noise"], _bench_rows(stats, speedup, noise), right={1, 2, 3}))
    if args.plot is not None:
        _draw_bench(args, stats, sys.stderr if args.json else sys.stdout)
    if missing:
        print(f"autotune: {len(absent)} workload(s) ran with default configs "
              f"(`autotune best --missing {args.graph} --db {args.db}` lists them)", file=sys.stderr)
    if mismatched:
        print(f"autotune: the tuned graph's outputs {mismatched} differ from the default graph's",
              file=sys.stderr)
        return EXIT_UNUSABLE
    return EXIT_OK
