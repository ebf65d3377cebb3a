"""What the ``autotune`` subcommands share: the exit codes, ``BadInput``, reading the files a
command names (a graph, a tuning database, a log), and the tables and numbers they print.

Example:
    >>> print(format_table(["task", "ms"], [["dense", ms_text(2.5e-4)]], right={1}))
    task      ms
    -----  -----
    dense  0.250
"""
from __future__ import annotations

import json
import math
import os
import sys
import warnings
from pathlib import Path

from tilefuse import graph_api
from tilefuse.tensorir.errors import TilefuseError

from .database import Database, TuningDatabaseError, starts_like_sqlite
from .log import read_log

EXIT_OK = 0
EXIT_UNUSABLE = 1
EXIT_BAD_INPUT = 2
EXIT_BUDGET_EXHAUSTED = 3
EXIT_INTERRUPTED = 130


class BadInput(TilefuseError, ValueError):
    """Input the command cannot use (a file, an option); ``main`` prints it and exits with 2.

    Example:
        >>> str(BadInput("no such file: x.json"))
        'no such file: x.json'
    """


def _read_onednn_json(path: Path, shapes=None):
    if shapes:
        raise BadInput(f"{path}: --shape and --batch apply to ONNX models; a oneDNN Graph JSON file has static shapes")
    return graph_api.load_json(path)


def _read_onnx(path: Path, shapes=None):
    """The graph of an ONNX model file (initializers become bound constants), via
    ``graph_api.from_onnx``, its inputs' shapes bound by ``shapes`` (a ``cli_shapes.ShapeRequest``,
    also when empty: a symbolic dim left is a BadInput that names ``--shape``); a file onnx
    cannot parse or check is a BadInput naming it."""
    try:
        import onnx
    except ImportError:
        raise BadInput(f"{path}: reading ONNX models needs the onnx package (pip install onnx)") from None
    try:
        model = onnx.load(str(path))
    except Exception as err:                 # protobuf's DecodeError and friends: not an ONNX file
        raise BadInput(f"{path}: not a readable ONNX model: {first_line(str(err)) or type(err).__name__}") from None
    if not model.graph.node:                 # an empty (or non-ONNX but parseable) file
        raise BadInput(f"{path}: not an ONNX model with a graph (no nodes)")
    from_onnx = getattr(graph_api, "from_onnx", None)
    if from_onnx is None:
        raise BadInput(f"{path}: ONNX models are not supported by this graph_api (no from_onnx); "
                       f"export the model as a oneDNN Graph JSON file (.json)")
    input_shapes = shapes.bind(model, path) if shapes is not None else None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            graph = from_onnx(model, input_shapes=input_shapes)
    except graph_api.GraphError:
        raise
    except (ValueError, TypeError, onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        raise BadInput(f"{path}: cannot import the ONNX model: {first_line(str(err))}") from None
    for w in caught:                         # e.g. ops with no mapping, run by the reference interpreter
        print(f"autotune: warning: {path}: {w.message}", file=sys.stderr)
    return graph


# suffix -> reader of a finalized graph_api.Graph
GRAPH_READERS = {".json": _read_onednn_json, ".onnx": _read_onnx}


def load_graph(path, shapes=None) -> "graph_api.Graph":
    """The finalized graph in the file ``path``, read by the reader of its suffix
    (``GRAPH_READERS``: ``.json`` is oneDNN Graph JSON, ``.onnx`` an ONNX model read by
    ``graph_api.from_onnx``), an ONNX model's input shapes bound by ``shapes`` (a
    ``cli_shapes.ShapeRequest``: ``--shape`` and ``--batch``). A missing, unreadable or invalid
    file, an unknown suffix, or shapes that do not fit the model, is a BadInput naming the file.

    Example:
        >>> [p.get_kind() for p in load_graph("examples/mlp.json").get_partitions()]   # doctest: +SKIP
        ['complex', 'complex', 'complex', 'reduction']
        >>> load_graph("model.pb")
        Traceback (most recent call last):
        ...
        tilefuse.autotune.cli_io.BadInput: model.pb: unknown graph format '.pb'; expected one of .json, .onnx
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
        return reader(path, shapes)
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
        tilefuse.autotune.cli_io.BadInput: no tuning database at no/such/tuning.db (run `autotune tune` or `autotune import` first, or pass --db)
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


def ms_text(seconds: float) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    ms = seconds * 1e3
    return f"{ms:.3f}" if ms < 100 else f"{ms:.1f}"


def number_text(value: float, spec: str, suffix: str = "") -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:{spec}}{suffix}"


def finite_or_none(value: float):
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


def shorten(name: str, width: int = 40) -> str:
    return name if len(name) <= width else name[:width - 3] + "..."


def first_line(message: str) -> str:
    lines = (message or "").strip().splitlines()
    return lines[0] if lines else "(no message)"


def print_json(data) -> None:
    print(json.dumps(data, indent=2, sort_keys=False, allow_nan=False))


def is_sqlite_file(path) -> bool:
    """True when the file at ``path`` starts with the sqlite header (a tuning database),
    whatever its suffix; a file that cannot be read is a BadInput.

    Example:
        >>> import tempfile; log = Path(tempfile.mkdtemp()) / "t.jsonl"
        >>> _ = log.write_text("{}"); is_sqlite_file(log)
        False
    """
    try:
        return starts_like_sqlite(path)
    except OSError as err:
        raise BadInput(f"{path}: cannot read: {err.strerror or err}") from None


def read_log_or_fail(path):
    """The contents of the JSON-lines log ``path``; a BadInput (one line) for a missing or
    unreadable file, or one with lines of which none is a record (not a log at all: a README,
    a binary file). An empty log has no records and is fine.

    Example:
        >>> import os, tempfile
        >>> text = os.path.join(tempfile.mkdtemp(), "notes.txt")
        >>> _ = open(text, "w").write("# a title\\nsome prose\\n")
        >>> read_log_or_fail(text)
        Traceback (most recent call last):
        ...
        tilefuse.autotune.cli_io.BadInput: ...notes.txt: not a tuning log: none of its 2 line(s) is a record (line 1: not valid JSON ...)
    """
    if os.path.isfile(path) and is_sqlite_file(path):
        raise BadInput(f"{path} is a tuning database, not a log (its records: `autotune best --db {path}`, "
                       f"or `autotune export --db {path} OUT.jsonl`)")
    try:
        contents = read_log(path)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such log file") from None
    except OSError as err:
        raise BadInput(f"{path}: cannot read: {err.strerror or err}") from None
    if contents.problems and not contents.records:
        line, reason = contents.problems[0]
        raise BadInput(f"{path}: not a tuning log: none of its {len(contents.problems)} line(s) is a record "
                       f"(line {line}: {reason})")
    return contents


def report_problems(path, problems) -> None:
    for line, reason in problems:
        print(f"{path}:{line}: skipped: {reason}", file=sys.stderr)
