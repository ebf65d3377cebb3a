"""Executors: where measurement jobs run, each in a process that may crash or hang.

An executor runs a list of calls ``(fn, args)`` -- ``fn`` a picklable top-level function --
and returns one ``JobResult`` per call, in order. A call that raises gives an ``"exception"``
result; a call that kills its process (a segfault in generated code) gives ``"crash"``; a call
still running after ``timeout`` seconds gives ``"timeout"``. Only that call fails: the dead or
hung process is killed and replaced, and the other calls go on.

* ``LocalExecutor(workers)`` - a pool of worker subprocesses on this machine, reused across
  calls (starting one costs a Python start and the imports, about half a second), started
  with ``subprocess`` (not ``fork``: the parent may hold LLVM, OpenMP or Dask threads) so
  they also work inside daemonic processes such as Dask workers;
* ``DaskExecutor(address)`` - the calls go to a Dask distributed cluster; on each Dask worker
  a call runs in a child process of the worker (through a ``LocalExecutor``), so a crash or a
  hang costs that child, never the Dask worker.

``run(calls, timeout, parallel=True)`` spreads the calls over all workers;
``parallel=False`` runs them one at a time (on one worker locally; one per host with Dask)
so that timed runs do not disturb each other.

Example:
    >>> with LocalExecutor(workers=2) as ex:                          # doctest: +SKIP
    ...     [r.value for r in ex.run([(pow, (2, 5)), (pow, (3, 2))], timeout=10)]
    [32, 9]
"""
from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

STARTUP_TIMEOUT = 120.0      # seconds a new worker may take to import its modules
_ERROR_KINDS = (None, "exception", "timeout", "crash")


@dataclass(frozen=True)
class JobResult:
    """The outcome of one call: ``value`` when ``error`` is None, else ``error`` in
    "exception", "timeout", "crash" and a ``message`` saying what happened. ``seconds`` is the
    call's wall time (in the worker for a finished call, else as seen by the executor).

    Example:
        >>> JobResult(value=3).ok, JobResult(error="crash", message="SIGSEGV").ok
        (True, False)
    """
    value: object = None
    error: str | None = None
    message: str = ""
    seconds: float = 0.0

    def __post_init__(self):
        if self.error not in _ERROR_KINDS:
            raise ValueError(f"JobResult error must be one of {_ERROR_KINDS}, got {self.error!r}")

    @property
    def ok(self) -> bool:
        """True when the call returned a value."""
        return self.error is None


def describe_exception(err: BaseException, limit: int = 4000) -> str:
    """``Type: message`` on the first line, then the traceback (cut to ``limit`` characters).

    Example:
        >>> try:
        ...     int("x")
        ... except ValueError as e:
        ...     describe_exception(e).splitlines()[0]
        "ValueError: invalid literal for int() with base 10: 'x'"
    """
    head = f"{type(err).__name__}: {err}"
    tb = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    text = head + "\n" + tb
    return text if len(text) <= limit else text[:limit] + "\n... (cut)"


def _check_calls(calls, timeout) -> list:
    calls = list(calls)
    for c in calls:
        if not (isinstance(c, tuple) and len(c) == 2 and callable(c[0]) and isinstance(c[1], tuple)):
            raise TypeError(f"each call must be a (function, args tuple) pair, got {c!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return calls


class Executor:
    """Runs calls in processes that may die; see the module docstring. Use as a context
    manager, or call ``close()``.

    Example:
        >>> issubclass(LocalExecutor, Executor)
        True
    """

    def run(self, calls, timeout: float, parallel: bool = True) -> list[JobResult]:
        """One JobResult per ``(fn, args)`` call, in order; ``parallel=False`` runs them one
        at a time.

        Example:
            >>> class InProcess(Executor):       # an executor of one's own: calls run here, unguarded
            ...     def run(self, calls, timeout, parallel=True):
            ...         return [JobResult(value=fn(*args)) for fn, args in calls]
            >>> [r.value for r in InProcess().run([(pow, (2, 3)), (max, (1, 5))], timeout=10)]
            [8, 5]
        """
        raise NotImplementedError

    def close(self) -> None:
        """Stop the workers this executor started.

        Example:
            >>> Executor().close()
        """

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------------------- local workers

_BOOT = ("import sys, json; sys.path[:0] = json.loads(sys.argv[3]); "
         "from tilefuse.autotune.executor import _worker_main; _worker_main(int(sys.argv[1]), int(sys.argv[2]))")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class _Worker:
    """One worker subprocess, the two pipes to it and a log of its stdout/stderr."""

    def __init__(self):
        child_in, self_out = os.pipe()
        self_in, child_out = os.pipe()
        self.log = tempfile.TemporaryFile()
        paths = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(child_in), str(child_out), json.dumps(paths)],
                pass_fds=(child_in, child_out), stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        except BaseException:
            for fd in (self_out, self_in):
                os.close(fd)
            self.log.close()
            raise
        finally:
            os.close(child_in)
            os.close(child_out)
        self.inbox = Connection(self_in, writable=False)
        self.outbox = Connection(self_out, readable=False)
        self.state = "starting"              # starting -> idle <-> busy
        self.deadline = time.monotonic() + STARTUP_TIMEOUT
        self.job: int | None = None
        self.sent_at = 0.0

    def send(self, index: int, call, timeout: float) -> None:
        self.outbox.send(call)
        self.state, self.job = "busy", index
        self.sent_at = time.monotonic()
        self.deadline = self.sent_at + timeout

    def log_tail(self, size: int = 2000) -> str:
        try:
            self.log.seek(0, os.SEEK_END)
            end = self.log.tell()
            self.log.seek(max(0, end - size))
            return self.log.read().decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""

    def death_message(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        what = (f"worker process killed by {_signal_name(-code)}" if code < 0
                else f"worker process exited with code {code}")
        tail = self.log_tail()
        return what + (f"; its last output:\n{tail}" if tail else "")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for c in (self.inbox, self.outbox):
            c.close()
        self.log.close()


def _kill_all(workers: list) -> None:
    for w in workers:
        if w is not None:
            try:
                w.kill()
            except OSError:
                pass


class LocalExecutor(Executor):
    """A pool of ``workers`` subprocesses (default: the number of CPUs) on this machine.

    Workers start on first use and are reused; a worker that crashes or times out is
    replaced. ``run(..., parallel=False)`` always uses the first worker, so per-process caches
    (a task's inputs and reference output) stay warm across timed runs.

    Example:
        >>> with LocalExecutor(workers=1) as ex:                          # doctest: +SKIP
        ...     ex.run([(divmod, (7, 0))], timeout=5)[0].error
        'exception'
    """

    def __init__(self, workers: int | None = None):
        if workers is None:
            workers = os.cpu_count() or 1
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be a positive int, got {workers!r}")
        self.workers = workers
        self._slots: list[_Worker | None] = [None] * workers
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _kill_all, self._slots)

    def __repr__(self):
        alive = sum(w is not None for w in self._slots)
        return f"LocalExecutor(workers={self.workers}, {alive} running)"

    def worker_pids(self) -> list[int | None]:
        """The process id of each worker slot (None when not started).

        Example:
            >>> LocalExecutor(workers=2).worker_pids()
            [None, None]
        """
        return [None if w is None else w.proc.pid for w in self._slots]

    def run(self, calls, timeout: float, parallel: bool = True) -> list[JobResult]:
        """Run ``calls`` (``(fn, args)`` pairs) and return their results in order.

        Example:
            >>> LocalExecutor(1).run([(len, ("abc",))], timeout=0)
            Traceback (most recent call last):
            ...
            ValueError: timeout must be a positive number of seconds, got 0
        """
        calls = _check_calls(calls, timeout)
        if not calls:
            return []
        with self._lock:
            return self._run(calls, timeout, parallel)

    def _run(self, calls, timeout, parallel):
        n = min(self.workers if parallel else 1, len(calls))
        for s in range(n):
            if self._slots[s] is None:
                self._slots[s] = _Worker()
        results: list[JobResult | None] = [None] * len(calls)
        queue = deque(range(len(calls)))
        try:
            while queue or any(self._slots[s].state == "busy" for s in range(n)):
                for s in range(n):
                    w = self._slots[s]
                    if w.state == "idle" and queue:
                        index = queue.popleft()
                        try:
                            w.send(index, calls[index], timeout)
                        except (BrokenPipeError, ConnectionError, OSError):
                            queue.appendleft(index)        # it died while idle: start again
                            w.kill()
                            self._slots[s] = _Worker()
                        except Exception as err:           # the call itself does not pickle
                            results[index] = JobResult(error="exception",
                                                       message=f"the call could not be sent: {describe_exception(err)}")
                            w.state, w.job = "idle", None
                waiting = [self._slots[s] for s in range(n) if self._slots[s].state != "idle"]
                if not waiting:
                    continue
                now = time.monotonic()
                ready = wait([w.inbox for w in waiting], timeout=max(0.0, min(w.deadline for w in waiting) - now))
                for w in waiting:
                    s = self._slots.index(w)
                    if w.inbox in ready:
                        self._receive(s, w, results)
                    elif time.monotonic() >= w.deadline:
                        if w.state == "starting":
                            w.kill()
                            self._slots[s] = None
                            raise RuntimeError(f"a measurement worker did not start within {STARTUP_TIMEOUT:g} s")
                        results[w.job] = JobResult(
                            error="timeout", seconds=time.monotonic() - w.sent_at,
                            message=f"no result within the timeout of {timeout:g} s; the worker was killed and replaced")
                        w.kill()
                        self._slots[s] = _Worker()
        finally:
            for s in range(n):       # interrupted: a busy worker would answer a later run
                w = self._slots[s]
                if w is not None and w.state == "busy":
                    w.kill()
                    self._slots[s] = None
        return results

    def _receive(self, s: int, w: _Worker, results: list) -> None:
        try:
            message = w.inbox.recv()
        except (EOFError, OSError):
            dead = w.death_message()
            w.kill()
            if w.state == "starting":
                self._slots[s] = None
                raise RuntimeError(f"a measurement worker failed to start: {dead}") from None
            results[w.job] = JobResult(error="crash", message=dead, seconds=time.monotonic() - w.sent_at)
            self._slots[s] = _Worker()
            return
        except Exception as err:    # a result that does not unpickle here
            results[w.job] = JobResult(error="exception", seconds=time.monotonic() - w.sent_at,
                                       message=f"the result could not be received: {describe_exception(err)}")
            w.state, w.job = "idle", None
            return
        if w.state == "starting":
            w.state = "idle"
            return
        kind, payload, seconds = message
        results[w.job] = (JobResult(value=payload, seconds=seconds) if kind == "ok"
                          else JobResult(error="exception", message=payload, seconds=seconds))
        w.state, w.job = "idle", None

    def close(self) -> None:
        """Kill the worker processes (new ones start if the executor is used again).

        Example:
            >>> LocalExecutor(workers=1).close()
        """
        with self._lock:
            _kill_all(self._slots)
            for s in range(len(self._slots)):
                self._slots[s] = None


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:      # the parent died: a hung worker must not outlive it
            os._exit(3)


def _worker_main(read_fd: int, write_fd: int) -> None:
    """The loop of a worker subprocess: receive ``(fn, args)``, answer ``("ok", value,
    seconds)`` or ``("exception", message, seconds)``; stop at end of input."""
    import faulthandler
    faulthandler.enable(all_threads=False)      # a segfault leaves a traceback in the log
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the parent, which kills us
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    import importlib
    for module in ("numpy", "tilefuse.schedule", "tilefuse.autotune.measure"):   # warm what measurement jobs need
        importlib.import_module(module)
    from tilefuse.tensorir.runtime.threadpool import ensure_runtime
    ensure_runtime()
    outbox.send(("ready", os.getpid(), 0.0))
    while True:
        try:
            data = inbox.recv_bytes()
        except (EOFError, OSError):
            break
        start = time.perf_counter()
        try:
            fn, args = pickle.loads(data)
            reply = ("ok", fn(*args), time.perf_counter() - start)
        except BaseException as err:
            reply = ("exception", describe_exception(err), time.perf_counter() - start)
        try:
            outbox.send(reply)
        except Exception as err:
            outbox.send(("exception", f"the result could not be sent back: {describe_exception(err)}", reply[2]))
    os._exit(0)


_default_lock = threading.Lock()
_default: LocalExecutor | None = None


def default_executor() -> LocalExecutor:
    """The process-wide LocalExecutor (started on first use, stopped at exit).

    Example:
        >>> default_executor() is default_executor()
        True
    """
    global _default
    with _default_lock:
        if _default is None:
            _default = LocalExecutor()
        return _default


# ---------------------------------------------------------------------------- Dask

_remote = threading.local()


def _isolated_call(fn, args, timeout):
    """On a Dask worker: run ``fn(*args)`` in a child process of the worker."""
    executor = getattr(_remote, "executor", None)
    if executor is None:
        executor = _remote.executor = LocalExecutor(workers=1)
    return executor.run([(fn, args)], timeout, parallel=False)[0]


def _dask_address(address: str) -> str:
    if not isinstance(address, str):
        raise TypeError(f"a Dask address must be a string, got {type(address).__name__}")
    rest = address[len("dask://"):] if address.startswith("dask://") else address
    scheme = ""
    if "://" in rest:
        scheme, rest = rest.split("://", 1)
        if scheme not in ("tcp", "tls", "inproc", "ws", "wss"):
            raise ValueError(f"unsupported Dask address scheme in {address!r}")
        scheme += "://"
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"a Dask address must look like dask://HOST:PORT, got {address!r}")
    return (scheme or "tcp://") + rest


class DaskExecutor(Executor):
    """Runs calls on a Dask distributed cluster at ``address`` (``dask://HOST:PORT`` or a
    Dask address such as ``tcp://HOST:PORT``).

    Each call runs in a child process of a Dask worker, so a crash or hang is recorded and the
    Dask worker lives on. With ``parallel=True`` as many calls run as the cluster has worker
    threads; with ``parallel=False`` one call runs at a time on each host. Kernels are
    compiled and timed on the workers' CPUs: use hosts with the CPU tuned for. ``grace`` adds
    seconds to ``timeout`` for the scheduler's round trip and a worker child's start.

    Example:
        >>> ex = DaskExecutor("dask://127.0.0.1:8786")                  # doctest: +SKIP
    """

    def __init__(self, address: str, grace: float = 60.0, connect_timeout: float = 30.0):
        self.address = _dask_address(address)
        try:
            from distributed import Client
        except ImportError:
            raise ImportError("DaskExecutor needs dask.distributed: pip install distributed") from None
        self.grace = float(grace)
        try:
            self.client = Client(self.address, timeout=connect_timeout, set_as_default=False)
        except (OSError, TimeoutError) as err:
            raise ConnectionError(f"cannot reach the Dask scheduler at {self.address}: {err}") from None

    def __repr__(self):
        return f"DaskExecutor({self.address!r})"

    def _workers(self) -> dict[str, dict]:
        workers = self.client.scheduler_info(n_workers=-1)["workers"]
        if not workers:
            raise RuntimeError(f"the Dask cluster at {self.address} has no workers")
        return workers

    def run(self, calls, timeout: float, parallel: bool = True) -> list[JobResult]:
        """Run ``calls`` on the cluster; see the class docstring.

        One JobResult per call, in order, as ``LocalExecutor.run`` (no example here: it needs a
        running Dask cluster).
        """
        from distributed import wait as dask_wait
        calls = _check_calls(calls, timeout)
        if not calls:
            return []
        workers = self._workers()
        if parallel:
            lanes = {None: [None] * max(1, sum(info.get("nthreads", 1) for info in workers.values()))}
        else:
            lanes = {}
            for addr, info in workers.items():
                lanes.setdefault(info.get("host", addr), []).append(addr)
        free = {lane: (len(addrs) if parallel else 1) for lane, addrs in lanes.items()}
        results: list[JobResult | None] = [None] * len(calls)
        queue = deque(range(len(calls)))
        flying: dict = {}           # future -> (index, lane, deadline, start)
        try:
            while queue or flying:
                for lane in lanes:
                    while queue and free[lane] > 0:
                        index = queue.popleft()
                        fn, args = calls[index]
                        where = {} if lane is None else {"workers": lanes[lane], "allow_other_workers": False}
                        future = self.client.submit(_isolated_call, fn, args, timeout, pure=False, **where)
                        now = time.monotonic()
                        flying[future] = (index, lane, now + timeout + self.grace, now)
                        free[lane] -= 1
                deadline = min(d for _, _, d, _ in flying.values())
                try:
                    with self.client.as_current():
                        done = dask_wait(list(flying), timeout=max(0.01, deadline - time.monotonic()),
                                         return_when="FIRST_COMPLETED").done
                except TimeoutError:
                    done = set()
                now = time.monotonic()
                for future in list(flying):
                    index, lane, deadline, start = flying[future]
                    if future in done:
                        results[index] = self._collect(future, now - start)
                    elif now >= deadline:
                        future.cancel()
                        results[index] = JobResult(
                            error="timeout", seconds=now - start,
                            message=f"no result from the Dask cluster within {timeout:g} s (+{self.grace:g} s grace)")
                    else:
                        continue
                    del flying[future]
                    free[lane] += 1
        finally:
            for future in flying:
                future.cancel()
        return results

    @staticmethod
    def _collect(future, seconds: float) -> JobResult:
        try:
            return future.result()
        except Exception as err:
            # the Dask worker itself died (KilledWorker) or the cluster lost the task
            name = type(err).__name__
            kind = "crash" if name in ("KilledWorker", "CommClosedError", "CancelledError",
                                       "FutureCancelledError") else "exception"
            return JobResult(error=kind, message=describe_exception(err), seconds=seconds)

    def close(self) -> None:
        """Disconnect from the cluster (the cluster keeps running).

        Leaving a ``with DaskExecutor(address) as ex:`` block calls it.
        """
        self.client.close()


def executor_from(spec: str | None) -> Executor:
    """The executor named by ``spec``: None or "local" (the shared LocalExecutor) or
    "dask://HOST:PORT". Anything else is a ValueError.

    Example:
        >>> executor_from("local") is default_executor()
        True
        >>> executor_from("ssh://box")
        Traceback (most recent call last):
        ...
        ValueError: unknown executor 'ssh://box'; expected 'local' or 'dask://HOST:PORT'
    """
    if spec is None or spec == "local":
        return default_executor()
    if isinstance(spec, str) and spec.startswith("dask://"):
        return DaskExecutor(spec)
    raise ValueError(f"unknown executor {spec!r}; expected 'local' or 'dask://HOST:PORT'")
