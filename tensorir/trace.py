"""Running a list of passes, traced on request, in the way of Halide's lowering log: one line
per pass on stderr (the pipeline, the pass, its milliseconds, the IR's size before and after)
and, at level 2, the IR after each pass. Both pipelines run their passes through ``run``: the
loop passes (``tensorir.pipeline``) and the graph passes (``graph_api.passes``).

``trace`` is False or 0 (off), True or 1 (times), 2 or ``"ir"`` (times and the IR after each
pass), or None: the environment variable ``TILEFUSE_TRACE`` then decides (``1`` or ``times``,
``2`` or ``ir``; unset, empty or ``0``: off).

Example:
    >>> import sys
    >>> def double(x): return x * 2
    >>> run([double, double], 3, pipeline="demo", size=lambda x: x, unit="units", trace=True,
    ...     stream=sys.stdout)                                  # doctest: +ELLIPSIS
    [tilefuse] demo             double ... ms  units 3 -> 6
    [tilefuse] demo             double ... ms  units 6 -> 12
    12
"""
from __future__ import annotations

import os
import sys
import time

LEVELS = {"": 0, "0": 0, "false": 0, "off": 0, "no": 0,
          "1": 1, "true": 1, "on": 1, "yes": 1, "times": 1,
          "2": 2, "ir": 2}
"""The values of ``TILEFUSE_TRACE`` (case aside) and the level each means."""


def trace_level(trace=None) -> int:
    """0 (off), 1 (times) or 2 (times and the IR after each pass) for a ``trace`` argument;
    None reads ``TILEFUSE_TRACE``; ValueError for a value that means none of them.

    Example:
        >>> trace_level(False), trace_level(True), trace_level("ir"), trace_level(2)
        (0, 1, 2, 2)
    """
    if trace is None:
        trace = os.environ.get("TILEFUSE_TRACE", "")
    if isinstance(trace, bool):
        return int(trace)
    if isinstance(trace, int) and trace in (0, 1, 2):
        return trace
    level = LEVELS.get(str(trace).strip().lower())
    if level is None:
        raise ValueError(f"trace level {trace!r}: expected 0, 1 ('times') or 2 ('ir'), or True/False")
    return level


def run(passes, ir, *, pipeline: str, size, unit: str, show=str, trace=None, check=None, stream=None):
    """``ir`` after each of ``passes`` in order. When tracing, a line per pass on ``stream``
    (stderr by default): ``pipeline``, the pass's name, its milliseconds and ``size`` of the
    IR before and after (counted in ``unit``); at level 2 then ``show(ir)``. ``check(ir,
    after)``, when given, runs on the input (``after`` None) and after each pass, outside the
    timing.

    Example:
        >>> run([str.upper], "ab", pipeline="demo", size=len, unit="chars", trace=False)
        'AB'
    """
    level = trace_level(trace)
    if check is not None:
        check(ir, None)
    if not level and check is None:
        for p in passes:
            ir = p(ir)
        return ir
    out = stream if stream is not None else sys.stderr
    for p in passes:
        before = size(ir) if level else None
        start = time.perf_counter()
        ir = p(ir)
        ms = (time.perf_counter() - start) * 1e3
        if level:
            name = getattr(p, "__name__", repr(p))
            print(f"[tilefuse] {pipeline:<16} {name:<32}{ms:8.2f} ms  {unit} {before} -> {size(ir)}", file=out)
            if level >= 2:
                print(show(ir), file=out)
                print(file=out)
            out.flush()
        if check is not None:
            check(ir, p)
    return ir
