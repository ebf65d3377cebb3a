"""The ``autotune`` command: tune the partitions of a model graph, look at and move tuning
records, and time the compiled graph with and without them.

Subcommands (``autotune SUBCOMMAND --help`` for the options)::

    autotune tune GRAPH [--trials N] [--time-budget 10m] [--shape [NAME=]DIMS]... [--batch N]
                  [--tuner xgb|random|grid] [--db tuning.db] [--log PATH]
                  [--executor local|dask://HOST:PORT] [--seed S]
                  [--resume/--no-resume] [--early-stopping N] [--min-repeat-ms MS]
                  [--cache-flush/--no-cache-flush] [--timeout 10s] [--json] [--verbose]
    autotune best [--db PATH] [--missing GRAPH [--shape ...] [--batch N]] [--json]
    autotune show LOG [--json]
    autotune export [--db PATH] LOG [--workload KEY]
    autotune import LOG [--db PATH]
    autotune bench GRAPH [--shape ...] [--batch N] [--db PATH] [--repeat N] [--seed S] [--json]
                   [--plot IMAGE]
    autotune plot LOG_OR_DB -o IMAGE [--workload KEY_PREFIX]
    autotune graph GRAPH -o PICTURE [--shape ...] [--batch N] [--timeout 60s]
    autotune perf MODEL [--shape ...] [--batch N] [--threads N] [--duration 10s]
                  [--compare onnxruntime,openvino] [--db PATH] [--seed S] [--json]
    autotune profile MODEL [--shape ...] [--batch N] [-o TRACE] [--runs N] [--top N] [--db PATH] [--seed S]
    autotune cache info [--dir FOLDER] [--top N] [--json]
    autotune cache clear [--dir FOLDER]
    autotune --version

``tune`` takes ``--trials``, ``--time-budget`` or both (a budget alone: as many trials as fit).
An ONNX model with symbolic dims (an exported batch or sequence) is compiled for the shapes
``--shape NAME=1x3x224x224`` (repeatable; ``--shape 1x3x224x224`` for a model with one input)
and ``--batch N`` (the symbolic first dim of every other input) give: ``cli_shapes``. With no
arguments, ``autotune`` prints its help on stderr and exits 2 (no command ran).

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

This module parses the command line and runs the subcommand; each group of subcommands has
its module: ``cli_tune`` (tune), ``cli_records`` (best, show, export, import), ``cli_bench``
(bench), ``cli_pictures`` (plot, graph), ``cli_perf`` (perf, its engines in ``perf_worker``
processes), ``cli_profile`` (profile), ``cli_cache`` (cache info, cache clear), ``cli_shapes``
(--shape, --batch); ``cli_io`` holds what they share (exit codes,
``BadInput``, reading graphs and databases, tables). The ``cli_*`` modules, ``session`` and
``model_check`` are the modules of ``autotune`` that import ``graph_api`` (the application on
top of both). GRAPH is a oneDNN Graph JSON file (.json) or an ONNX model (.onnx, read by
``graph_api.from_onnx``: initializers are bound constants, so ``bench`` feeds random arrays
only to the model's data inputs); ``cli_io.load_graph`` picks the reader by file suffix.

Example:
    >>> parse_duration("1h30m"), parse_duration("90s"), parse_duration("2.5")
    (5400.0, 90.0, 2.5)
    >>> main(["best", "--db", "no/such/tuning.db"])      # the message on stderr
    2
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sqlite3
import sys

from tilefuse import __version__

from . import plots
from .cli_bench import cmd_bench
from .cli_cache import cmd_cache_clear, cmd_cache_info
from .cli_perf import add_perf_parser
from .cli_io import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNUSABLE, BadInput
from .cli_pictures import cmd_graph, cmd_plot
from .cli_profile import add_profile_command
from .cli_records import cmd_best, cmd_export, cmd_import, cmd_show
from .cli_shapes import add_shape_options
from .cli_tune import LOG_DIR, cmd_tune
from .database import TuningDatabaseError
from .log import LogWriteError
from .plots import PlotError
from .timing import FLUSHED_REPEATS
from .tune import SCHEDULERS
from .tuner import TUNERS

DEFAULT_DB = "tuning.db"
DEFAULT_MIN_REPEAT_MS = 10.0
DEFAULT_TIMEOUT = 10.0


# ---------------------------------------------------------------------------- option values

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
    parser.add_argument("--version", action="version", version=f"autotune (tilefuse {__version__})")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def db_option(p):
        p.add_argument("--db", default=DEFAULT_DB, metavar="PATH",
                       help=f"tuning database (sqlite; default {DEFAULT_DB})")

    p = commands.add_parser("tune", help="tune every task (partition workload) of a graph",
                            description="Tune every task of GRAPH and print a table per task.")
    p.add_argument("graph", metavar="GRAPH", help="oneDNN Graph JSON (.json) or ONNX model (.onnx)")
    p.add_argument("--trials", type=_positive_int, metavar="N",
                   help="measurements in all, over all tasks, as the scheduler shares them (resumed ones count); "
                        "without it, --time-budget alone bounds the run")
    p.add_argument("--tuner", choices=sorted(TUNERS), default="xgb", help="search strategy (default xgb)")
    p.add_argument("--scheduler", choices=list(SCHEDULERS), default="gradient",
                   help="which task the next batch goes to: gradient (the largest expected gain of the "
                        "model's time, after each task's default) or sequential (task after task, by weight); "
                        "default gradient")
    db_option(p)
    p.add_argument("--log", metavar="PATH", help=f"JSON-lines log (default {LOG_DIR}/<graph stem>.jsonl)")
    p.add_argument("--time-budget", type=_duration, metavar="DURATION",
                   help="wall-time bound of the whole run: 90, 90s, 10m, 1h30m (give it, --trials, or both)")
    add_shape_options(p)
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
    add_shape_options(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.set_defaults(run=cmd_best)

    p = commands.add_parser("show", help="the records of a JSON-lines log")
    p.add_argument("log", metavar="LOG", help="a JSON-lines tuning log, as tune writes it")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
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
    p.add_argument("graph", metavar="GRAPH", help="oneDNN Graph JSON (.json) or ONNX model (.onnx)")
    db_option(p)
    add_shape_options(p)
    p.add_argument("--repeat", type=_positive_int, default=30, metavar="N", help="timed runs of each (default 30)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input feeds (default 0)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON document (milliseconds, noise, speedup, partitions) instead of the table")
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
    add_shape_options(p)
    p.add_argument("--timeout", type=_duration, default=plots.DOT_TIMEOUT, metavar="DURATION",
                   help=f"time allowed to Graphviz (default {plots.DOT_TIMEOUT:g} s)")
    p.set_defaults(run=cmd_graph)

    p = commands.add_parser("cache", help="the disk cache of compiled kernels: info, clear",
                            description="Compiles keep their kernels in a disk cache ($TILEFUSE_CACHE_DIR, else "
                                        "$XDG_CACHE_HOME/tilefuse, else ~/.cache/tilefuse; 'off' turns it off), "
                                        "so a new process skips LLVM for kernels it built before.")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=_Parser)
    for name, run, text in (("info", cmd_cache_info, "where the cache is, its size and its entries"),
                            ("clear", cmd_cache_clear, "remove every entry")):
        q = actions.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        q.add_argument("--dir", metavar="FOLDER", help="the cache in FOLDER (default: the one compiles use)")
        if name == "info":
            q.add_argument("--top", type=_positive_int, default=20, metavar="N", help="entries listed (default 20)")
            q.add_argument("--json", action="store_true", help="everything as JSON")
        q.set_defaults(run=run)
    add_profile_command(commands, _positive_int)
    add_perf_parser(commands, duration=_duration, count=_positive_int)
    return parser


def main(argv=None) -> int:
    """Run the ``autotune`` command with ``argv`` (default: ``sys.argv[1:]``); returns the exit
    code (see the module docstring). Bad input is reported on stderr, never as a traceback.

    Example:
        >>> main(["tune", "missing.json", "--trials", "4"])
        2
    """
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:            # no command ran: the help, and exit 2 so that `autotune $EMPTY` in a script fails
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
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
