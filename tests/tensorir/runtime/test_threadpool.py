"""Tests of the native parallel-for runtime (tensorir/runtime/threadpool.{ll,py}).

The kernels below are written in textual LLVM IR, compiled to object code and loaded as
kernels are (``jit.jit_ir``: ``tilefuse_parallel_for`` is resolved through the loader's
registered symbols) and called through ctypes, which releases the GIL.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tilefuse.tensorir.runtime import threadpool
from tilefuse.tensorir.runtime.jit import jit_ir
from threads_testing import run_on_threads

KERNELS_IR = r"""
declare void @tilefuse_parallel_for(ptr, ptr, i64)
declare i64 @pthread_self()
declare double @llvm.fmuladd.f64(double, double, double)

; ---- mark: closure {i64 *counts, i64 *begins, i64 *ends} --------------------
; for (i = b; i < e; i++) { atomic counts[i] += 1; begins[i] = b; ends[i] = e; }
define internal void @mark_body(i64 %b, i64 %e, ptr %c) {
entry:
  %counts = load ptr, ptr %c
  %pb = getelementptr ptr, ptr %c, i64 1
  %begins = load ptr, ptr %pb
  %pe = getelementptr ptr, ptr %c, i64 2
  %ends = load ptr, ptr %pe
  %empty = icmp sge i64 %b, %e
  br i1 %empty, label %exit, label %loop
loop:
  %i = phi i64 [ %b, %entry ], [ %i1, %loop ]
  %pc = getelementptr i64, ptr %counts, i64 %i
  %old = atomicrmw add ptr %pc, i64 1 monotonic
  %pbi = getelementptr i64, ptr %begins, i64 %i
  store i64 %b, ptr %pbi
  %pei = getelementptr i64, ptr %ends, i64 %i
  store i64 %e, ptr %pei
  %i1 = add i64 %i, 1
  %done = icmp eq i64 %i1, %e
  br i1 %done, label %exit, label %loop
exit:
  ret void
}

define void @mark(ptr %c, i64 %n) {
  call void @tilefuse_parallel_for(ptr @mark_body, ptr %c, i64 %n)
  ret void
}

; ---- tids: closure {i64 *tids, double *out} ---------------------------------
; for (i = b; i < e; i++) { x = i; 2e6 times x = x * 0.999999 + 1e-6; out[i] = x;
;                           tids[i] = pthread_self(); }
define internal void @tid_body(i64 %b, i64 %e, ptr %c) {
entry:
  %tids = load ptr, ptr %c
  %po = getelementptr ptr, ptr %c, i64 1
  %out = load ptr, ptr %po
  %empty = icmp sge i64 %b, %e
  br i1 %empty, label %exit, label %outer
outer:
  %i = phi i64 [ %b, %entry ], [ %i1, %outer.end ]
  %x0 = sitofp i64 %i to double
  br label %inner
inner:
  %k = phi i64 [ 0, %outer ], [ %k1, %inner ]
  %x = phi double [ %x0, %outer ], [ %x1, %inner ]
  %x1 = call double @llvm.fmuladd.f64(double %x, double 0.999999, double 1.0e-6)
  %k1 = add i64 %k, 1
  %kd = icmp eq i64 %k1, 2000000
  br i1 %kd, label %outer.end, label %inner
outer.end:
  %pout = getelementptr double, ptr %out, i64 %i
  store double %x1, ptr %pout
  %self = call i64 @pthread_self()
  %pt = getelementptr i64, ptr %tids, i64 %i
  store i64 %self, ptr %pt
  %i1 = add i64 %i, 1
  %done = icmp eq i64 %i1, %e
  br i1 %done, label %exit, label %outer
exit:
  ret void
}

define void @tids(ptr %c, i64 %n) {
  call void @tilefuse_parallel_for(ptr @tid_body, ptr %c, i64 %n)
  ret void
}

; ---- nested: outer closure {i64 *out, i64 m}; inner closure {i64 *row, i64 i}
; outer: for (i = b; i < e; i++) parallel_for(inner, {out + i*m, i}, m)
; inner: for (j = b; j < e; j++) atomic row[j] += i*m + j + 1
define internal void @inner_body(i64 %b, i64 %e, ptr %c) {
entry:
  %row = load ptr, ptr %c
  %pr = getelementptr ptr, ptr %c, i64 1
  %r = load i64, ptr %pr
  %pm = getelementptr ptr, ptr %c, i64 2
  %m = load i64, ptr %pm
  %rm = mul i64 %r, %m
  %base = add i64 %rm, 1
  %empty = icmp sge i64 %b, %e
  br i1 %empty, label %exit, label %loop
loop:
  %j = phi i64 [ %b, %entry ], [ %j1, %loop ]
  %v = add i64 %base, %j
  %p = getelementptr i64, ptr %row, i64 %j
  %old = atomicrmw add ptr %p, i64 %v monotonic
  %j1 = add i64 %j, 1
  %done = icmp eq i64 %j1, %e
  br i1 %done, label %exit, label %loop
exit:
  ret void
}

define internal void @outer_body(i64 %b, i64 %e, ptr %c) {
entry:
  %cl = alloca [3 x i64]
  %out = load ptr, ptr %c
  %pm = getelementptr ptr, ptr %c, i64 1
  %m = load i64, ptr %pm
  %empty = icmp sge i64 %b, %e
  br i1 %empty, label %exit, label %loop
loop:
  %i = phi i64 [ %b, %entry ], [ %i1, %loop ]
  %off = mul i64 %i, %m
  %row = getelementptr i64, ptr %out, i64 %off
  store ptr %row, ptr %cl
  %c1 = getelementptr i64, ptr %cl, i64 1
  store i64 %i, ptr %c1
  %c2 = getelementptr i64, ptr %cl, i64 2
  store i64 %m, ptr %c2
  call void @tilefuse_parallel_for(ptr @inner_body, ptr %cl, i64 %m)
  %i1 = add i64 %i, 1
  %done = icmp eq i64 %i1, %e
  br i1 %done, label %exit, label %loop
exit:
  ret void
}

define void @nested(ptr %c, i64 %n) {
  call void @tilefuse_parallel_for(ptr @outer_body, ptr %c, i64 %n)
  ret void
}
"""

KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)
_engines = []   # loaded code of this test module stays alive for the whole session


def _jit(ir_text: str):
    threadpool.ensure_runtime()
    engine = jit_ir(ir_text, "threadpool_test_kernels")
    _engines.append(engine)
    return engine


class Kernels:
    def __init__(self):
        engine = _jit(KERNELS_IR)
        self.mark_fn = KERNEL(engine.address("mark"))
        self.tids_fn = KERNEL(engine.address("tids"))
        self.nested_fn = KERNEL(engine.address("nested"))

    def mark(self, n: int):
        """counts, begins, ends per index of [0, n)."""
        counts, begins, ends = (np.zeros(max(n, 1), np.int64) for _ in range(3))
        closure = (ctypes.c_void_p * 3)(counts.ctypes.data, begins.ctypes.data, ends.ctypes.data)
        self.mark_fn(ctypes.addressof(closure), n)
        return counts[:n], begins[:n], ends[:n]

    def tids(self, n: int):
        tids = np.zeros(n, np.int64)
        out = np.zeros(n, np.float64)
        closure = (ctypes.c_void_p * 2)(tids.ctypes.data, out.ctypes.data)
        self.tids_fn(ctypes.addressof(closure), n)
        return tids, out

    def nested(self, n: int, m: int):
        out = np.zeros(n * m, np.int64)
        closure = (ctypes.c_int64 * 2)(out.ctypes.data, m)
        self.nested_fn(ctypes.addressof(closure), n)
        return out.reshape(n, m)


@pytest.fixture(scope="module")
def kernels():
    return Kernels()


@pytest.fixture(autouse=True)
def _restore_threads():
    before = threadpool.get_num_threads()
    yield
    threadpool.set_num_threads(before)


def check_chunks(counts, begins, ends, n, max_chunks):
    """Every index once, chunks contiguous, balanced and covering [0, n)."""
    assert (counts == 1).all()
    if n == 0:
        return
    idx = np.arange(n)
    assert (begins <= idx).all() and (idx < ends).all()
    starts = np.unique(begins)
    stops = np.unique(ends)
    assert len(starts) == len(stops) <= max_chunks
    assert starts[0] == 0 and stops[-1] == n
    assert (stops[:-1] == starts[1:]).all()
    for s, e in zip(starts, stops):            # each chunk's indices carry its bounds
        assert (begins[s:e] == s).all() and (ends[s:e] == e).all()
    sizes = stops - starts
    assert sizes.max() - sizes.min() <= 1      # static, balanced split
    return len(starts)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 1000, 10**6])
def test_every_index_once(kernels, n):
    threadpool.set_num_threads(2)
    for _ in range(3):
        counts, begins, ends = kernels.mark(n)
        nchunks = check_chunks(counts, begins, ends, n, max_chunks=2)
        if n >= 2:
            assert nchunks == 2


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 5000), threads=st.integers(1, 4))
def test_chunks_property(kernels, n, threads):
    threadpool.set_num_threads(threads)
    counts, begins, ends = kernels.mark(n)
    nchunks = check_chunks(counts, begins, ends, n, max_chunks=threads)
    if n >= 1:
        assert nchunks == min(n, threads)


def test_two_threads_used(kernels):
    threadpool.set_num_threads(2)
    tids, out = kernels.tids(2)
    assert tids[0] != tids[1]
    assert (tids != 0).all()
    assert np.isfinite(out).all()


def test_caller_runs_chunk0(kernels):
    threadpool.set_num_threads(2)
    tids, _ = kernels.tids(2)
    libc = ctypes.CDLL(None)
    libc.pthread_self.restype = ctypes.c_uint64
    assert np.uint64(tids[0]) == np.uint64(libc.pthread_self())


def test_nested(kernels):
    threadpool.set_num_threads(2)
    for n, m in [(1, 1), (2, 3), (5, 7), (64, 1000)]:
        out = kernels.nested(n, m)
        expected = np.arange(n * m, dtype=np.int64).reshape(n, m) + 1
        np.testing.assert_array_equal(out, expected)


def test_concurrent_python_threads(kernels):
    threadpool.set_num_threads(2)

    def worker(seed):
        for k in range(200):
            n = 1 + (seed * 7919 + k * 104729) % 20000
            counts, begins, ends = kernels.mark(n)
            check_chunks(counts, begins, ends, n, max_chunks=2)
            out = kernels.nested(4, 100)
            assert (out == np.arange(400).reshape(4, 100) + 1).all()
    run_on_threads(worker, 3)


def _run_with_timeout(fn, timeout=60.0):
    """Run fn in a daemon thread so that a deadlock fails the test instead of hanging."""
    errors = []

    def target():
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "tilefuse_parallel_for deadlocked"
    assert not errors, errors


def test_wakeup_from_futex_sleep(kernels):
    """Launch after pauses around the ~1 ms spin budget, so that workers are asleep,
    just falling asleep or still spinning: no wake-up may be lost."""
    threadpool.set_num_threads(2)
    rng = np.random.default_rng(0)

    def body():
        for pause in rng.uniform(0.0, 2.5e-3, size=300):
            time.sleep(pause)
            n = int(rng.integers(2, 5000))
            check_chunks(*kernels.mark(n), n, max_chunks=2)

    _run_with_timeout(body)


def test_idle_workers_sleep(kernels):
    """After ~1 ms of spinning the workers block in the futex: the process burns
    (almost) no CPU while idle."""
    threadpool.set_num_threads(2)
    kernels.mark(1000)
    time.sleep(0.05)
    cpu0 = time.process_time()
    time.sleep(0.3)
    assert time.process_time() - cpu0 < 0.05


def test_set_num_threads_one_and_back(kernels):
    threadpool.set_num_threads(2)
    assert check_chunks(*kernels.mark(1000), 1000, 2) == 2
    threadpool.set_num_threads(1)
    assert threadpool.get_num_threads() == 1
    assert check_chunks(*kernels.mark(1000), 1000, 1) == 1
    threadpool.set_num_threads(3)                       # grows the running pool
    assert check_chunks(*kernels.mark(1000), 1000, 3) == 3
    assert threadpool._pool_num_workers() >= 2
    threadpool.set_num_threads(2)                       # surplus worker stays idle
    assert check_chunks(*kernels.mark(1000), 1000, 2) == 2
    tids, _ = kernels.tids(2)
    assert tids[0] != tids[1]


def test_set_num_threads_invalid():
    with pytest.raises(ValueError):
        threadpool.set_num_threads(0)
    with pytest.raises(ValueError):
        threadpool.set_num_threads(-3)


def test_default_num_threads_from_env(monkeypatch):
    monkeypatch.setenv("TILEFUSE_NUM_THREADS", "5")
    assert threadpool._default_num_threads() == 5
    monkeypatch.delenv("TILEFUSE_NUM_THREADS")
    import os
    assert threadpool._default_num_threads() == (os.cpu_count() or 1)
    monkeypatch.setenv("TILEFUSE_NUM_THREADS", "0")
    with pytest.raises(ValueError):
        threadpool._default_num_threads()


def test_ensure_runtime_idempotent_and_threadsafe():
    addrs = []
    ts = [threading.Thread(target=lambda: addrs.append(threadpool.parallel_for_address()))
          for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    threadpool.ensure_runtime()
    assert len(set(addrs)) == 1 and addrs[0] == threadpool.parallel_for_address() != 0


def _child_main(kernels_obj):
    assert threadpool._pool_num_workers() == 0   # the atfork handler reset the pool
    counts, begins, ends = kernels_obj.mark(100_000)
    check_chunks(counts, begins, ends, 100_000, max_chunks=2)
    tids, _ = kernels_obj.tids(2)           # a fresh pool must start in the child
    assert tids[0] != tids[1]
    assert threadpool._pool_num_workers() == 1
    out = kernels_obj.nested(8, 50)
    assert (out == np.arange(400).reshape(8, 50) + 1).all()


@pytest.mark.parametrize("use_pool_right_before_fork", [False, True])
def test_fork_child_restarts_pool(kernels, use_pool_right_before_fork):
    threadpool.set_num_threads(2)
    tids, _ = kernels.tids(2)
    assert tids[0] != tids[1]                # the parent's pool is running
    if use_pool_right_before_fork:
        kernels.mark(10_000)                 # workers are still spinning at fork time
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=_child_main, args=(kernels,))
    proc.start()
    proc.join(timeout=60)
    if proc.is_alive():
        proc.kill()
        proc.join()
        pytest.fail("forked child deadlocked in tilefuse_parallel_for")
    assert proc.exitcode == 0
    counts, begins, ends = kernels.mark(1000)  # parent's pool still fine
    check_chunks(counts, begins, ends, 1000, max_chunks=2)


def test_run_threads_launches_with_its_count_whatever_the_process_asks(kernels):
    threadpool.set_num_threads(2)
    with threadpool.run_threads(1):
        threadpool.set_num_threads(3)                   # for runs that start later
        assert check_chunks(*kernels.mark(1000), 1000, 1) == 1
        with threadpool.run_threads(2):                 # nested: the outer count holds
            assert check_chunks(*kernels.mark(1000), 1000, 1) == 1
    assert check_chunks(*kernels.mark(1000), 1000, 3) == 3
    with threadpool.run_threads():                      # None: the process's count
        assert threadpool.running_threads() == 3
    threadpool.set_num_threads(2)
    with pytest.raises(ValueError, match=">= 1"):
        with threadpool.run_threads(0):
            pass


def test_runs_with_the_same_count_share_the_pool_and_another_count_waits(kernels):
    threadpool.set_num_threads(2)
    inside, release, entered = threading.Event(), threading.Event(), []

    def holder():
        with threadpool.run_threads(1):
            inside.set()
            release.wait(30)
            entered.append(("holder leaves", check_chunks(*kernels.mark(500), 500, 1)))

    def other(count):
        with threadpool.run_threads(count):
            entered.append((count, check_chunks(*kernels.mark(500), 500, count)))
    first = threading.Thread(target=holder)
    first.start()
    inside.wait(30)
    same, different = threading.Thread(target=other, args=(1,)), threading.Thread(target=other, args=(2,))
    different.start()
    same.start()
    same.join(30)
    time.sleep(0.05)
    assert entered == [(1, 1)]                          # the count-2 run waits for the count-1 runs
    release.set()
    for t in (first, different):
        t.join(30)
    assert entered == [(1, 1), ("holder leaves", 1), (2, 2)]
