"""Pictures for the ``autotune`` command: tuning curves (best cost so far against trial
number, one line per task), bench latency bars, and graphs rendered by Graphviz.

matplotlib is an optional extra (``pip install -e '.[plot]'``): it is imported only inside
the functions that draw, so everything else works without it, and a missing matplotlib is a
``MissingPlotTool`` with the install command. The numbers a picture shows are computed by
plain functions first (``tuning_curves``, ``latency_bars``), so tests and other tools can
read exactly what is drawn. Graphs are drawn by Graphviz's ``dot`` program (a subprocess,
with a timeout) when it is on PATH; DOT text needs nothing.

Example:
    >>> from tilefuse.autotune.record import Record
    >>> records = [Record.create("wk1", "dense", "complex", {"t": t}, costs=[c], timestamp=t)
    ...            for t, c in enumerate([3e-3, 4e-3, 1e-3])]
    >>> [curve.best_ms() for curve in tuning_curves(records)]
    [(3.0, 3.0, 1.0)]
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:      # matplotlib draws it
    ...     draw_tuning_curves(tuning_curves(records), Path(folder) / "curve.png")
    'ms'
"""
from __future__ import annotations

import io
import math
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tilefuse.tensorir.errors import TilefuseError

from .record import first_measurements

MATPLOTLIB_MISSING = "matplotlib is not installed: pip install -e '.[plot]' (or pip install 'matplotlib>=3.7')"
GRAPHVIZ_MISSING = ("Graphviz is not installed (no `dot` program on PATH): apt install graphviz "
                    "(or brew install graphviz); `-o GRAPH.dot` writes the DOT text without it")
DOT_TEXT_SUFFIXES = (".dot", ".gv")
GRAPHVIZ_FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf"}
DOT_TIMEOUT = 60.0


class PlotError(TilefuseError, ValueError):
    """A picture that cannot be drawn or written; the message names the file and the cause.

    Example:
        >>> str(PlotError("curve.xyz: unknown image format"))
        'curve.xyz: unknown image format'
    """


class MissingPlotTool(PlotError):
    """The drawing tool a picture needs (matplotlib, Graphviz's ``dot``) is not installed; the
    message says how to install it.

    Example:
        >>> issubclass(MissingPlotTool, PlotError)
        True
    """


# ---------------------------------------------------------------------------- tuning curves

@dataclass(frozen=True)
class TuningCurve:
    """The best cost so far of one task (a workload on one target) after each of its trials,
    in measurement order: ``best_costs[k]`` is the least mean cost in seconds of the ok
    measurements among trials ``1..trials[k]`` (infinity while none succeeded; a failed
    measurement is a trial that improves nothing). ``flop`` is the task's flop count, 0 when
    unknown.

    Example:
        >>> curve = TuningCurve("dense 8x8", "wk1", "tk", (1, 2, 3), (math.inf, 2e-3, 1e-3), flop=2_000_000)
        >>> curve.best_ms(), curve.best_gflops()
        ((nan, 2.0, 1.0), (nan, 1.0, 2.0))
    """
    label: str
    workload_key: str
    target_key: str
    trials: tuple
    best_costs: tuple
    flop: int = 0

    def best_ms(self) -> tuple:
        """The best cost so far in milliseconds (nan before the first success).

        Example:
            >>> TuningCurve("t", "wk", "tk", (1, 2), (math.inf, 5e-4)).best_ms()
            (nan, 0.5)
        """
        return tuple(c * 1e3 if math.isfinite(c) else math.nan for c in self.best_costs)

    def best_gflops(self) -> tuple:
        """The best throughput so far in GFLOPS (nan before the first success or without a
        flop count).

        Example:
            >>> TuningCurve("t", "wk", "tk", (1,), (0.5,), flop=10**9).best_gflops()
            (2.0,)
        """
        return tuple(self.flop / c / 1e9 if self.flop and math.isfinite(c) and c > 0 else math.nan
                     for c in self.best_costs)

    def improvements(self) -> list:
        """Indexes of the trials that lowered the best cost (where the curve steps down).

        Example:
            >>> TuningCurve("t", "wk", "tk", (1, 2, 3, 4), (math.inf, 3.0, 3.0, 1.0)).improvements()
            [1, 3]
        """
        found, best = [], math.inf
        for index, cost in enumerate(self.best_costs):
            if cost < best:
                found.append(index)
                best = cost
        return found


def best_so_far(records) -> tuple:
    """The least mean cost (seconds) after each record, in the given order; infinity until the
    first ok one. Failed records keep the best as it was.

    Example:
        >>> from tilefuse.autotune.record import Record
        >>> rs = [Record.create("w", "t", "x", {}, error_kind="crash"),
        ...       Record.create("w", "t", "x", {}, costs=[2.0]), Record.create("w", "t", "x", {}, costs=[3.0])]
        >>> best_so_far(rs)
        (inf, 2.0, 2.0)
    """
    best, found = math.inf, []
    for record in records:
        if record.is_ok:
            best = min(best, record.mean_cost)
        found.append(best)
    return tuple(found)


def _output_shape(description: dict) -> str:
    """'8x16' from a workload description's first output (see ``Task.describe``), or ''."""
    try:
        return "x".join(str(int(n)) for n in description["outputs"][0]["shape"])
    except (KeyError, IndexError, TypeError, ValueError):
        return ""


def _flop(description: dict) -> int:
    flop = description.get("flop") if isinstance(description, dict) else None
    return flop if isinstance(flop, int) and not isinstance(flop, bool) and flop > 0 else 0


def _labels(groups: list, descriptions: dict) -> list:
    """One legend label per (workload_key, target_key, records) group: the task name and
    output shape, with the key's start when names repeat and the CPU when targets differ."""
    labels = []
    for key, _, records in groups:
        shape = _output_shape(descriptions.get(key, {}))
        name = records[0].task_name or key[:12]
        labels.append(f"{name} {shape}" if shape else name)
    keys_of: dict = {}
    for label, (key, _, _) in zip(labels, groups):
        keys_of.setdefault(label, set()).add(key)
    if any(len(keys) > 1 for keys in keys_of.values()):     # one name, several workloads
        labels = [f"{label} [{key[:8]}]" for label, (key, _, _) in zip(labels, groups)]
    if len({target for _, target, _ in groups}) > 1:
        labels = [f"{label} @ {records[0].target_cpu}" for label, (_, _, records) in zip(labels, groups)]
    return labels


def tuning_curves(records, descriptions: dict | None = None) -> list:
    """One ``TuningCurve`` per task (workload and target) of ``records``, each in measurement
    order (by timestamp; stored order on a tie) and of its trials only (``first_measurements``:
    not the default timed again around each batch), the tasks in the order of their first
    measurement. ``descriptions`` maps workload keys to their descriptions (the database's
    workloads, ``Task.describe()``): they give the output shape in the label and the flop
    count.

    Example:
        >>> from tilefuse.autotune.record import Record
        >>> rs = [Record.create("wk1", "dense", "complex", {"t": 1}, costs=[2e-3], timestamp=2.0),
        ...       Record.create("wk1", "dense", "complex", {"t": 2}, error_kind="crash", timestamp=1.0)]
        >>> curve, = tuning_curves(rs, {"wk1": {"flop": 4_000_000, "outputs": [{"shape": [8, 8]}]}})
        >>> curve.label, curve.trials, curve.best_costs, curve.best_gflops()
        ('dense 8x8', (1, 2), (inf, 0.002), (nan, 2.0))
    """
    descriptions = descriptions or {}
    grouped: dict = {}
    for record in sorted(records, key=lambda r: r.timestamp):     # stable: stored order on a tie
        grouped.setdefault((record.workload_key, record.target_key), []).append(record)
    groups = [(key, target, first_measurements(rs)) for (key, target), rs in grouped.items()]
    return [TuningCurve(label, key, target, tuple(range(1, len(rs) + 1)), best_so_far(rs),
                        _flop(descriptions.get(key, {})))
            for label, (key, target, rs) in zip(_labels(groups, descriptions), groups)]


def curve_unit(curves) -> str:
    """'GFLOPS' when every curve has a flop count, else 'ms' (one unit per picture).

    Example:
        >>> curve_unit([TuningCurve("a", "k", "t", (1,), (1.0,), flop=10)]), curve_unit([])
        ('GFLOPS', 'ms')
    """
    return "GFLOPS" if curves and all(c.flop for c in curves) else "ms"


# ---------------------------------------------------------------------------- matplotlib

def _figure_class():
    """matplotlib's Figure, with the Agg backend (no display needed); MissingPlotTool when
    matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingPlotTool(MATPLOTLIB_MISSING) from None
    return Figure


def image_format(path) -> str:
    """The image format matplotlib writes for ``path``'s suffix ('png', 'svg', 'pdf', ...);
    MissingPlotTool without matplotlib, PlotError for a suffix it cannot write.

    Example:
        >>> image_format("curve.png"), image_format("curve.SVG")
        ('png', 'svg')
    """
    _figure_class()
    from matplotlib.backend_bases import FigureCanvasBase
    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in formats:
        raise PlotError(f"{path}: unknown image format {Path(path).suffix or '(no suffix)'!r}; "
                        f"use .png, .svg or .pdf")
    return suffix


def write_bytes(path, data: bytes) -> None:
    """Write ``data`` to ``path`` in one go; PlotError naming the file when it cannot be written.

    Example:
        >>> import tempfile; path = Path(tempfile.mkdtemp()) / "x.bin"
        >>> write_bytes(path, b"ok"); path.read_bytes()
        b'ok'
    """
    try:
        Path(path).write_bytes(data)
    except OSError as err:
        raise PlotError(f"{path}: cannot write: {err.strerror or err}") from None


def _save(figure, path) -> None:
    buffer = io.BytesIO()
    figure.savefig(buffer, format=image_format(path), dpi=120, bbox_inches="tight")
    write_bytes(path, buffer.getvalue())


def _plain_log_scale(axes) -> None:
    """A log y axis whose ticks read 0.004, not 4x10^-3 (minor ones labelled only while they
    fit: on an axis of about two decades or less)."""
    from matplotlib.ticker import LogFormatter

    class PlainLogFormatter(LogFormatter):      # LogFormatter's choice of ticks, written plainly
        def __call__(self, value, pos=None):
            return f"{value:g}" if super().__call__(value, pos) else ""

    axes.set_yscale("log")
    axes.yaxis.set_major_formatter(PlainLogFormatter())
    axes.yaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))


def draw_tuning_curves(curves, path, title: str = "") -> str:
    """Draw the curves (best so far against trial number, a step down where a trial improved
    on the best) into the image ``path`` (.png, .svg, .pdf); returns the unit of the y axis
    (log scale): 'GFLOPS' when every curve has a flop count, else 'ms'.

    Example:
        >>> import tempfile; path = Path(tempfile.mkdtemp()) / "curve.png"
        >>> draw_tuning_curves([TuningCurve("dense", "wk1", "tk", (1, 2), (2e-3, 1e-3))], path)
        'ms'
        >>> path.read_bytes()[:4]
        b'\\x89PNG'
    """
    figure = _figure_class()(figsize=(8, 4.8))
    axes = figure.subplots()
    unit = curve_unit(curves)
    if len(curves) > 10:
        import matplotlib
        colors = matplotlib.colormaps["tab20"]
        axes.set_prop_cycle(color=[colors(k % 20) for k in range(len(curves))])
    for curve in curves:
        values = curve.best_gflops() if unit == "GFLOPS" else curve.best_ms()
        failed = "" if any(math.isfinite(c) for c in curve.best_costs) else " (every trial failed)"
        axes.plot(curve.trials, values, drawstyle="steps-post", marker="o", markersize=3,
                  markevery=curve.improvements(), label=curve.label + failed)
    _plain_log_scale(axes)                   # tasks of very different sizes share the axis
    if unit == "ms":
        axes.set_ylabel("best mean ms so far (lower is better)")
    else:
        axes.set_ylabel("best GFLOPS so far (higher is better)")
    axes.set_xlabel("trial (measurement order)")
    axes.set_title(title)
    axes.grid(True, which="both", alpha=0.3)
    if curves:
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    _save(figure, path)
    return unit


# ---------------------------------------------------------------------------- bench bars

@dataclass(frozen=True)
class LatencyBar:
    """One bar of the bench chart: a way of running the model and its latency in ms (the bar
    is the median, a tick marks the best run).

    Example:
        >>> LatencyBar("tuned", 1.5, 1.25).label
        'tuned'
    """
    label: str
    median_ms: float
    min_ms: float


def latency_bars(stats: dict) -> list:
    """The bars of ``{name: {"median": seconds, "min": seconds}}`` (bench's timings), in order.

    Example:
        >>> latency_bars({"default": {"median": 2e-3, "min": 1e-3}, "tuned": {"median": 1e-3, "min": 5e-4}})
        [LatencyBar(label='default', median_ms=2.0, min_ms=1.0), LatencyBar(label='tuned', median_ms=1.0, min_ms=0.5)]
    """
    return [LatencyBar(name, s["median"] * 1e3, s["min"] * 1e3) for name, s in stats.items()]


def draw_latency_bars(bars, path, title: str = "") -> list:
    """Draw one bar per ``LatencyBar`` (median ms, labelled with its value; a black tick at the
    best run) into the image ``path``; returns the bars drawn.

    Example:
        >>> import tempfile; path = Path(tempfile.mkdtemp()) / "bench.svg"
        >>> [b.label for b in draw_latency_bars([LatencyBar("default", 2.0, 1.8), LatencyBar("tuned", 1.0, 0.9)], path)]
        ['default', 'tuned']
    """
    figure = _figure_class()(figsize=(1.6 * len(bars) + 2.5, 4.2))
    axes = figure.subplots()
    places = list(range(len(bars)))
    drawn = axes.bar(places, [b.median_ms for b in bars], color=[f"C{k}" for k in places],
                     tick_label=[b.label for b in bars])
    axes.bar_label(drawn, labels=[f"{b.median_ms:.3g}" for b in bars], padding=2)
    axes.scatter(places, [b.min_ms for b in bars], marker="_", s=400, color="black", zorder=3,
                 label="best run")
    axes.set_ylabel("latency, ms (bar: median; lower is better)")
    axes.set_ylim(0, max((b.median_ms for b in bars), default=1.0) * 1.15)
    axes.set_title(title, fontsize="medium")
    axes.legend(loc="upper right", fontsize="small")
    _save(figure, path)
    return list(bars)


# ---------------------------------------------------------------------------- graphs

def render_dot(dot_text: str, fmt: str, timeout: float = DOT_TIMEOUT) -> bytes:
    """The picture of DOT text drawn by Graphviz's ``dot`` in ``fmt`` ('svg', 'png', 'pdf').
    MissingPlotTool when ``dot`` is not on PATH; PlotError when it fails or runs longer than
    ``timeout`` seconds.

    Example:
        >>> import pytest
        >>> _ = shutil.which("dot") or pytest.skip("Graphviz's dot is not installed")
        >>> render_dot("digraph G { a -> b }", "svg")[:5]
        b'<?xml'
    """
    program = shutil.which("dot")
    if program is None:
        raise MissingPlotTool(GRAPHVIZ_MISSING)
    try:
        done = subprocess.run([program, f"-T{fmt}"], input=dot_text.encode("utf-8"), capture_output=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise PlotError(f"Graphviz dot ran longer than {timeout:g} s; write the DOT text with "
                        f"-o GRAPH.dot, or raise --timeout") from None
    except OSError as err:
        raise PlotError(f"cannot run Graphviz dot ({program}): {err.strerror or err}") from None
    if done.returncode != 0 or not done.stdout:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise PlotError(f"Graphviz dot failed (exit {done.returncode}): "
                        f"{message[0] if message else 'no output'}")
    return done.stdout


def write_graph_picture(dot_text: str, path, timeout: float = DOT_TIMEOUT) -> str:
    """Write a graph's DOT text to ``path``: the text itself for .dot/.gv, else the picture
    Graphviz draws for .svg/.png/.pdf; returns the format written ('dot', 'svg', ...). An
    unknown suffix is a PlotError; see ``render_dot`` for the others.

    Example:
        >>> import tempfile; path = Path(tempfile.mkdtemp()) / "g.dot"
        >>> write_graph_picture("digraph G { a -> b }", path), path.read_text()[:7]
        ('dot', 'digraph')
    """
    suffix = Path(path).suffix.lower()
    if suffix in DOT_TEXT_SUFFIXES:
        write_bytes(path, dot_text.encode("utf-8"))
        return "dot"
    fmt = GRAPHVIZ_FORMATS.get(suffix)
    if fmt is None:
        known = ", ".join(DOT_TEXT_SUFFIXES + tuple(GRAPHVIZ_FORMATS))
        raise PlotError(f"{path}: unknown graph picture format {suffix or '(no suffix)'!r}; use one of {known}")
    write_bytes(path, render_dot(dot_text, fmt, timeout))
    return fmt


def check_writable(path) -> None:
    """PlotError unless a file can be written at ``path`` (a directory, a missing folder or no
    permission are refused), checked before any slow work; leaves no new file behind.

    Example:
        >>> import tempfile; check_writable(Path(tempfile.mkdtemp()) / "curve.png")
        >>> check_writable("/no/such/folder/curve.png")
        Traceback (most recent call last):
        ...
        tilefuse.autotune.plots.PlotError: /no/such/folder/curve.png: cannot write: No such file or directory
    """
    if os.path.isdir(path):
        raise PlotError(f"{path} is a directory; give a file path such as {Path(path) / 'picture.png'}")
    existed = os.path.exists(path)
    try:
        with open(path, "ab"):
            pass
        if not existed:
            os.unlink(path)
    except OSError as err:
        raise PlotError(f"{path}: cannot write: {err.strerror or err}") from None
