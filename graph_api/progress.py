"""A progress bar for compiles a person waits for: on standard error, only in a terminal, and
only once the compile has run for ``SHOW_AFTER_SECONDS`` (a warm start or a small model never
shows one; a pipe, a log file or a test run never does).

tqdm draws it: it sizes the bar to the terminal, rates and estimates the time left, and
redraws at a bounded rate, which a hand-written bar would all have to repeat.
"""
from __future__ import annotations

import functools
import sys

SHOW_AFTER_SECONDS = 2.0


def kernel_progress(total: int):
    """A bar over ``total`` kernels to compile (a ``tqdm``), to use as a context manager and
    advance with ``update()`` per kernel built; it draws nothing where standard error is not a
    terminal. tqdm is imported here, by a compile with kernels to build: a warm start has none
    and does without its import (15 ms).

    Example:
        >>> with kernel_progress(68) as bar:      # here standard error is no terminal
        ...     _ = bar.update()
        >>> bar.total, bar.disable
        (68, True)
    """
    return _bar_type()(total=total, desc="tilefuse: compiling kernels", unit="kernel", delay=SHOW_AFTER_SECONDS,
                       leave=False, file=sys.stderr, disable=not _terminal(sys.stderr), dynamic_ncols=True)


@functools.cache
def _bar_type() -> type:
    from tqdm import tqdm

    class Bar(tqdm):
        """tqdm without its monitor thread: the kernel builds fork worker processes, and a fork
        with another thread running is refused (``build._build_in_workers``)."""
        monitor_interval = 0
    return Bar


def _terminal(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:        # a closed stream
        return False
