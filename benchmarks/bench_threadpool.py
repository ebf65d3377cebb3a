"""Benchmark of the native parallel-for runtime (tensorir/runtime/threadpool).

Prints
  * launch latency: microseconds per tilefuse_parallel_for of an empty body, measured
    by a native loop of launches (no ctypes overhead), median over many batches;
    also the latency of a launch after the workers went to sleep in the futex;
  * speedup of a compute-bound body (dependent FMA chain per element) on all
    threads vs 1 thread (best of interleaved runs; the box may be shared).

Run:  python benchmarks/bench_threadpool.py
"""
from __future__ import annotations

import ctypes
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from tilefuse.tensorir.runtime import threadpool  # noqa: E402
from tilefuse.tensorir.runtime.jit import jit_ir  # noqa: E402

BENCH_IR = r"""
declare void @tilefuse_parallel_for(ptr, ptr, i64)
declare double @llvm.fmuladd.f64(double, double, double)

define internal void @empty_body(i64 %b, i64 %e, ptr %c) {
  ret void
}

; for (r = 0; r < reps; r++) tilefuse_parallel_for(empty_body, NULL, n);
define void @launch_many(i64 %reps, i64 %n) {
entry:
  br label %loop
loop:
  %r = phi i64 [ 0, %entry ], [ %r1, %loop ]
  call void @tilefuse_parallel_for(ptr @empty_body, ptr null, i64 %n)
  %r1 = add i64 %r, 1
  %done = icmp eq i64 %r1, %reps
  br i1 %done, label %exit, label %loop
exit:
  ret void
}

; closure {double *out, i64 iters}
; for (i = b; i < e; i++) { x = i; iters times x = x * 0.9999999 + 1e-7; out[i] = x; }
define internal void @fma_body(i64 %b, i64 %e, ptr %c) {
entry:
  %out = load ptr, ptr %c
  %pi = getelementptr ptr, ptr %c, i64 1
  %iters = load i64, ptr %pi
  %empty = icmp sge i64 %b, %e
  br i1 %empty, label %exit, label %outer
outer:
  %i = phi i64 [ %b, %entry ], [ %i1, %outer.end ]
  %x0 = sitofp i64 %i to double
  br label %inner
inner:
  %k = phi i64 [ 0, %outer ], [ %k1, %inner ]
  %x = phi double [ %x0, %outer ], [ %x1, %inner ]
  %x1 = call double @llvm.fmuladd.f64(double %x, double 0.9999999, double 1.0e-7)
  %k1 = add i64 %k, 1
  %kd = icmp uge i64 %k1, %iters
  br i1 %kd, label %outer.end, label %inner
outer.end:
  %p = getelementptr double, ptr %out, i64 %i
  store double %x1, ptr %p
  %i1 = add i64 %i, 1
  %done = icmp eq i64 %i1, %e
  br i1 %done, label %exit, label %outer
exit:
  ret void
}

define void @fma(ptr %c, i64 %n) {
  call void @tilefuse_parallel_for(ptr @fma_body, ptr %c, i64 %n)
  ret void
}
"""


def compile_bench():
    threadpool.ensure_runtime()
    engine = jit_ir(BENCH_IR, "bench_threadpool")     # loaded as kernels are: the pool resolves by name
    i64 = ctypes.c_int64
    launch_many = ctypes.CFUNCTYPE(None, i64, i64)(engine.address("launch_many"))
    fma = ctypes.CFUNCTYPE(None, ctypes.c_void_p, i64)(engine.address("fma"))
    return engine, launch_many, fma


def launch_latency_us(launch_many, nthreads: int, batches=200, reps=2000) -> float:
    threadpool.set_num_threads(nthreads)
    launch_many(reps, nthreads)  # warm up (starts the workers)
    times = []
    for _ in range(batches):
        t0 = time.perf_counter_ns()
        launch_many(reps, nthreads)
        times.append((time.perf_counter_ns() - t0) / reps / 1e3)
    return statistics.median(times)


def sleeping_launch_us(launch_many, nthreads: int, samples=100) -> float:
    """One launch (through ctypes) after the workers have gone to sleep."""
    threadpool.set_num_threads(nthreads)
    launch_many(1, nthreads)
    times = []
    for _ in range(samples):
        time.sleep(0.005)  # > 1 ms spin budget: workers are in FUTEX_WAIT
        t0 = time.perf_counter_ns()
        launch_many(1, nthreads)
        times.append((time.perf_counter_ns() - t0) / 1e3)
    return statistics.median(times)


def fma_times_s(fma, nthreads_list, n=4096, iters=20000, repeats=9) -> list[float]:
    """Best-of-``repeats`` time per thread count; runs are interleaved so that a burst of
    load from other processes hits all configurations alike."""
    out = np.zeros(n)
    closure = (ctypes.c_int64 * 2)(out.ctypes.data, iters)
    best = [float("inf")] * len(nthreads_list)
    for _ in range(repeats):
        for k, nt in enumerate(nthreads_list):
            threadpool.set_num_threads(nt)
            fma(ctypes.addressof(closure), n)  # warm-up launch at this thread count
            t0 = time.perf_counter()
            fma(ctypes.addressof(closure), n)
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def main() -> None:
    _engine, launch_many, fma = compile_bench()
    all_threads = os.cpu_count() or 1
    print(f"threads: {all_threads}")
    hot = launch_latency_us(launch_many, all_threads)
    inline = launch_latency_us(launch_many, 1)
    print(f"launch+join latency, empty body, workers spinning: {hot:.2f} us (median)")
    print(f"  (1 thread, inline call for reference:             {inline:.3f} us)")
    cold = sleeping_launch_us(launch_many, all_threads)
    base = sleeping_launch_us(launch_many, 1)
    print(f"launch from futex sleep, incl. ctypes call: {cold:.1f} us "
          f"(1-thread ctypes baseline {base:.1f} us)")
    t1, tn = fma_times_s(fma, [1, all_threads])
    print(f"compute-bound FMA body: 1 thread {t1 * 1e3:.1f} ms, "
          f"{all_threads} threads {tn * 1e3:.1f} ms, speedup {t1 / tn:.2f}x")


if __name__ == "__main__":
    main()
