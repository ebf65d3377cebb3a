"""``autotune plot`` and ``autotune graph``: tuning curves and a model's partitions as pictures
(matplotlib and Graphviz draw them), and the checks a picture's path passes before any slow work.

Example:
    >>> import tempfile; log = Path(tempfile.mkdtemp()) / "t.jsonl"
    >>> _ = log.write_text("{}"); is_sqlite_file(log)
    False
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from . import plots
from .cli_io import (EXIT_OK, BadInput, is_sqlite_file, load_graph, open_database, read_log_or_fail,
                     report_problems)
from .cli_shapes import ShapeRequest
from .plots import PlotError
from .record import first_measurements

PROBLEMS_SHOWN = 10


def _report_first_problems(path, problems) -> None:
    report_problems(path, problems[:PROBLEMS_SHOWN])
    if len(problems) > PROBLEMS_SHOWN:
        print(f"{path}: ... and {len(problems) - PROBLEMS_SHOWN} more unreadable line(s)", file=sys.stderr)


def read_tuning_records(path) -> tuple[list, dict]:
    """(records, workload descriptions by key) of a tuning log or database: a file that starts
    with the sqlite header is read as a database (its workloads describe each task: output
    shape, flop count), anything else as a JSON-lines log (no descriptions; unreadable lines
    are reported on stderr and skipped). A missing file, or one without a readable record, is
    a BadInput.

    Example:
        >>> read_tuning_records("no/such.jsonl")
        Traceback (most recent call last):
        ...
        tilefuse.autotune.cli_io.BadInput: no/such.jsonl: no such tuning log or database
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
        contents = read_log_or_fail(path)
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
        >>> from types import SimpleNamespace
        >>> cmd_plot(SimpleNamespace(source="no/such/tuning.db", output="curve.png", workload=None))
        Traceback (most recent call last):
        ...
        tilefuse.autotune.cli_io.BadInput: no/such/tuning.db: no such tuning log or database
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


def cmd_graph(args) -> int:
    """``autotune graph``: the graph of a model with its partitions as clusters, as DOT text
    (``-o g.dot``) or drawn by Graphviz (``-o g.svg``, ``.png``, ``.pdf``).

    Example:
        >>> from types import SimpleNamespace
        >>> cmd_graph(SimpleNamespace(graph="model.pb", output="graph.svg", timeout=60))
        Traceback (most recent call last):
        ...
        tilefuse.autotune.cli_io.BadInput: model.pb: unknown graph format '.pb'; expected one of .json, .onnx
    """
    graph = load_graph(args.graph, ShapeRequest.of(args))
    written = plots.write_graph_picture(graph.to_dot(), args.output, timeout=args.timeout)
    drawn = sum(1 for p in graph.get_partitions() if p.get_ops())      # as graph_to_dot draws them
    print(f"wrote {args.output} ({written}): {drawn} partition(s) of {args.graph}")
    return EXIT_OK
