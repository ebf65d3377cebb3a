"""How an engine is timed in a block, the part of ``timing`` that imports nothing but the
standard library: ``perf_worker`` loads this file alone (by path) in a process of its own,
so that an engine's memory is not the compiler's.

Each block: a pause, a warm-up (``settle``), then timed runs (``timed_runs``).

Example:
    >>> calls = []
    >>> settle(lambda: calls.append(1), pause=0, warmup=0)
    >>> len(timed_runs(lambda: calls.append(1), runs=3)), len(calls)
    (3, 4)
"""
from __future__ import annotations

import time

PAUSE = 0.05
"""Seconds of sleep before each engine's turn: the worker threads an engine leaves spinning after
a call (onnxruntime's, OpenBLAS's, ours) go back to sleep, so on a machine with few cores they
do not halve the speed of the engine timed next."""
WARMUP = 0.02
"""Seconds of untimed runs after each pause (at least one): the sleeping worker threads and idle
cores take a few runs to wake, and a small model's first runs after a pause can be 10x its
steady latency."""


def settle(run_once, pause: float = PAUSE, warmup: float = WARMUP) -> None:
    """Sleep ``pause`` seconds, then call ``run_once`` for ``warmup`` seconds (at least once):
    what an engine does before it is timed, so that another's spinning threads have settled
    and its own sleeping ones are awake.

    Example:
        >>> calls = []; settle(lambda: calls.append(1), pause=0, warmup=0); calls
        [1]
    """
    time.sleep(pause)
    started = time.perf_counter()
    run_once()
    while time.perf_counter() - started < warmup:
        run_once()


def timed_runs(run_once, runs: int | None = None, seconds: float | None = None) -> list:
    """Seconds of each of ``runs`` calls of ``run_once``, or of as many calls as fit in
    ``seconds`` (at least one).

    Example:
        >>> len(timed_runs(lambda: None, runs=4)), len(timed_runs(lambda: None, seconds=0)) >= 1
        (4, True)
    """
    times = []
    started = time.perf_counter()
    while (len(times) < runs) if runs is not None else (not times or time.perf_counter() - started < seconds):
        start = time.perf_counter()
        run_once()
        times.append(time.perf_counter() - start)
    return times
