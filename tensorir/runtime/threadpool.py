"""The native parallel-for runtime: a pthread pool written in LLVM IR (``threadpool.ll``).

Generated kernels outline each ``parallel`` loop body into
``void body(int64_t begin, int64_t end, void *closure)`` and call::

    void tilefuse_parallel_for(void (*body)(int64_t, int64_t, void *),
                               void *closure, int64_t n);

which runs ``body`` over ``[0, n)`` in contiguous static chunks, one per thread
(the calling thread takes chunk 0), and returns when all chunks are done.  A
nested or concurrent call (the pool is busy) runs ``body(0, n, closure)``
serially on the calling thread; ``n <= 0`` does nothing.

The pool has one thread count, read at each launch: the process's (``set_num_threads``),
or, while runs are inside ``run_threads(n)``, theirs. Runs asking for the same count
share the pool at once; a run asking for another count waits until they are done, so a
session's runs always launch with its own count, whatever other sessions ask for.

:func:`ensure_runtime` loads the pool's code once per process (``jit.jit_ir``) and
registers ``tilefuse_parallel_for`` (and ``tilefuse_scratch``, ``scratch.py``) with
``object_loader.register_symbol``, so kernels loaded afterwards resolve them by name.
Call it before loading any kernel that references them.
"""
from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

from .abi import PARALLEL_FOR
from .scratch import SCRATCH, callback_address
from ..settings import positive_setting
from .jit import jit_ir
from .object_loader import register_symbol

__all__ = ["ensure_runtime", "set_num_threads", "get_num_threads", "parallel_for_address", "run_threads"]

_IR_PATH = Path(__file__).with_name("threadpool.ll")
_EXPORTED = (PARALLEL_FOR,)

_lock = threading.Lock()
_engine = None                                # the pool's loaded code: kept alive (and leaked) for the process lifetime
_parallel_for_addr: int | None = None
_native_set_num_threads = None                # ctypes function, once compiled
_native_count = None                          # the count last given to it (each call costs ~0.5 us)
_native_num_workers = None                    # ctypes function, once compiled
_num_threads: int | None = None               # None until first asked: read env lazily
_runs = threading.Condition()                 # guards the three below and every native count change
_running = 0                                  # runs inside run_threads now
_running_threads = 0                          # the count they launch with (when _running)
_inside = threading.local()                   # depth of run_threads in this thread


def _reset_lock_in_child() -> None:
    # A fork while another thread held the lock must not leave the child's copy locked.
    # (The native pool resets itself through its own atfork handler.)
    global _lock, _runs, _running, _inside
    _lock = threading.Lock()
    _runs, _running, _inside = threading.Condition(), 0, threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_lock_in_child)


def _default_num_threads() -> int:
    env = os.environ.get("TILEFUSE_NUM_THREADS")
    if env is None or env.strip() == "":
        return os.cpu_count() or 1
    return positive_setting("TILEFUSE_NUM_THREADS", env)


def ensure_runtime() -> None:
    """Compile the thread pool once per process and register its symbols.

    Idempotent and thread-safe.  Worker threads are not created here but by the
    first parallel launch that needs them.

    Example:
        >>> ensure_runtime()
        >>> ensure_runtime()          # second call is a no-op
        >>> parallel_for_address() != 0
        True
    """
    global _engine, _parallel_for_addr, _native_set_num_threads, _native_num_workers
    if _parallel_for_addr is not None:
        return
    with _lock:
        if _parallel_for_addr is not None:
            return
        nthreads = _get_num_threads_locked()   # a bad $TILEFUSE_NUM_THREADS raises here
        engine = jit_ir(_IR_PATH.read_text(), "tilefuse_threadpool")
        # Worker threads execute this engine's code until the process exits, so it must
        # never be freed -- not even by module teardown at interpreter shutdown.
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(engine))
        for name in _EXPORTED:
            register_symbol(name, engine.address(name))
        register_symbol(SCRATCH, callback_address())
        setter = ctypes.CFUNCTYPE(None, ctypes.c_int32)(engine.address("tilefuse_set_num_threads"))
        _engine = engine
        with _runs:
            _native_set_num_threads = setter
            _set_native_count(_running_threads if _running else nthreads)
        _native_num_workers = ctypes.CFUNCTYPE(ctypes.c_int32)(
            engine.address("tilefuse_pool_num_workers"))
        _parallel_for_addr = engine.address(PARALLEL_FOR)


def _get_num_threads_locked() -> int:
    global _num_threads
    if _num_threads is None:
        _num_threads = _default_num_threads()
    return _num_threads


def set_num_threads(n: int) -> None:
    """Set how many threads (including the caller) parallel loops use.

    Takes effect at the next ``tilefuse_parallel_for`` call, also after the pool
    has started: missing workers are created on demand, surplus ones stay idle.

    Example:
        >>> before = get_num_threads()
        >>> set_num_threads(2)
        >>> get_num_threads()
        2
        >>> set_num_threads(0)
        Traceback (most recent call last):
        ...
        ValueError: number of threads must be >= 1, got 0
        >>> set_num_threads(before)
    """
    global _num_threads
    n = int(n)
    if n < 1:
        raise ValueError(f"number of threads must be >= 1, got {n}")
    if n > 2**31 - 1:
        raise ValueError(f"number of threads too large: {n}")
    with _lock:
        _num_threads = n
        with _runs:
            if not _running:     # runs keep theirs until done
                _set_native_count(n)


def get_num_threads() -> int:
    """The number of threads parallel loops use (including the caller).

    Defaults to ``$TILEFUSE_NUM_THREADS`` if set, else ``os.cpu_count()``.

    Example:
        >>> get_num_threads() >= 1
        True
    """
    with _lock:
        return _get_num_threads_locked()


def _check_count(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"number of threads must be an int, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"number of threads must be >= 1, got {n}")
    if n > 2**31 - 1:
        raise ValueError(f"number of threads too large: {n}")
    return n


def run_threads(n: int | None = None) -> "_Launching":
    """Parallel loops launched inside use ``n`` threads (None: the process's count,
    ``get_num_threads()``), whatever other threads ask for: runs asking for the same count
    enter together; one asking for another waits until they have left. Nested in this
    thread, the outer count holds. The process's count comes back when the last run leaves.

    Example:
        >>> before = get_num_threads()
        >>> with run_threads(1):
        ...     set_num_threads(2)        # the process's count: for runs that start later
        ...     running_threads()
        1
        >>> running_threads() == get_num_threads() == 2
        True
        >>> set_num_threads(before)
    """
    return _Launching(get_num_threads() if n is None else _check_count(n))


class _Launching:
    """``run_threads``' block (a class, not a generator: a session's run enters one, and a
    generator's block cost it 2 us more)."""
    __slots__ = ("want", "depth")

    def __init__(self, want: int):
        self.want, self.depth = want, 0

    def __enter__(self) -> None:
        global _running, _running_threads
        self.depth = getattr(_inside, "depth", 0)
        if self.depth:                  # nested: already launching with this thread's count
            _inside.depth = self.depth + 1
            return
        want = self.want
        with _runs:
            while _running and _running_threads != want:
                _runs.wait()
            if not _running:
                _running_threads = want
                _set_native_count(want)
            _running += 1
        _inside.depth = 1

    def __exit__(self, *exc) -> None:
        global _running
        _inside.depth = self.depth
        if self.depth:
            return
        with _runs:
            _running -= 1
            if not _running:
                _set_native_count(_num_threads)     # set_num_threads writes it before taking _runs
                _runs.notify_all()


def _set_native_count(n: int) -> None:
    """Give the native pool the count its launches use (under ``_runs``), when it has another."""
    global _native_count
    if _native_set_num_threads is not None and n != _native_count:
        _native_set_num_threads(n)
        _native_count = n


def running_threads() -> int:
    """The count parallel loops launch with now: that of the runs inside ``run_threads``,
    else the process's.

    Example:
        >>> running_threads() == get_num_threads()
        True
    """
    process = get_num_threads()
    with _runs:
        return _running_threads if _running else process


def parallel_for_address() -> int:
    """Address of the native ``tilefuse_parallel_for`` (compiles the runtime if needed).

    Example:
        >>> import ctypes
        >>> BODY = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
        >>> pfor = ctypes.CFUNCTYPE(None, BODY, ctypes.c_void_p, ctypes.c_int64)(parallel_for_address())
        >>> seen = []
        >>> before = get_num_threads()
        >>> set_num_threads(1)            # a Python body needs the GIL: keep it serial here
        >>> pfor(BODY(lambda b, e, c: seen.append((b, e))), None, 5)
        >>> seen
        [(0, 5)]
        >>> set_num_threads(before)
    """
    ensure_runtime()
    assert _parallel_for_addr is not None
    return _parallel_for_addr


def _pool_num_workers() -> int:
    """Worker threads started so far in this process (0 before the first launch
    and in a freshly forked child).  For tests and diagnostics."""
    ensure_runtime()
    return _native_num_workers()
