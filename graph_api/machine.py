"""What this machine can do, measured in the run that reports against it: the FMA peak
(GFLOPS of independent vector multiply-adds on every thread of the pool, no memory traffic)
and the copy bandwidth (GB/s, bytes read plus bytes written, of a parallel vector copy of an
array far larger than the caches). Machines of one kind vary and a virtual machine's memory
speed moves over minutes, so kernels are reported as a share of numbers taken the same day:
``peaks()`` measures both once per process (the profiler's reference, ``graph_api.profiler``).

Run: ``python benchmarks/machine.py`` prints both.
"""
from __future__ import annotations

import time

import numpy as np

from tilefuse.schedule import build, create_schedule
from tilefuse.tensorir import compute, placeholder
from tilefuse.tensorir.runtime.kernel import ArgSpec, compile_llvm
from tilefuse.tensorir.runtime.target import Target
from tilefuse.tensorir.runtime.threadpool import get_num_threads, run_threads, running_threads

ACCUMULATORS = 16       # independent FMA chains per thread: enough to cover the FMA latency twice
ITERATIONS = 200_000    # trips of the chain loop per thread and call
COPY_BYTES = 512 << 20  # far past any last-level cache
PEAKS_COPY_BYTES = 128 << 20    # what peaks() copies: past the last-level caches of most CPUs, 256 MB in all


def _fma_ir(lanes: int) -> str:
    """LLVM IR of ``fma_peak(closure, threads)``: each of ``threads`` chunks runs
    ``ACCUMULATORS`` chains of ``ITERATIONS`` vector FMAs on values read from the closure
    (so nothing folds) and stores their sum back (so nothing is dropped)."""
    vec = f"<{lanes} x float>"
    chains = range(ACCUMULATORS)
    phis = "\n".join(f"  %acc{k} = phi {vec} [%a, %entry], [%next{k}, %loop]" for k in chains)
    fmas = "\n".join(f"  %next{k} = call {vec} @llvm.fma.v{lanes}f32({vec} %acc{k}, {vec} %m, {vec} %a)"
                     for k in chains)
    sums = "\n".join(f"  %sum{k + 1} = fadd {vec} %sum{k}, %next{k}" for k in chains)
    return f"""
declare void @tilefuse_parallel_for(ptr, ptr, i64)
declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})

define internal void @chains(i64 %begin, i64 %end, ptr %closure) {{
entry:
  %mp = getelementptr i8, ptr %closure, i64 0
  %m = load {vec}, ptr %mp, align 4
  %ap = getelementptr i8, ptr %closure, i64 64
  %a = load {vec}, ptr %ap, align 4
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i.next, %loop]
{phis}
{fmas}
  %i.next = add i64 %i, 1
  %done = icmp eq i64 %i.next, {ITERATIONS}
  br i1 %done, label %exit, label %loop
exit:
  %sum0 = fadd {vec} %a, %a
{sums}
  %slot = mul i64 %begin, 64
  %at = add i64 %slot, 128
  %out = getelementptr i8, ptr %closure, i64 %at
  store {vec} %sum{ACCUMULATORS}, ptr %out, align 4
  ret void
}}

define i32 @fma_peak(ptr %closure, i64 %threads) {{
entry:
  call void @tilefuse_parallel_for(ptr @chains, ptr %closure, i64 %threads)
  ret i32 0
}}
"""


def _best_seconds(call, repeat: int) -> float:
    """The least wall time of ``repeat`` calls of ``call``, after one untimed call."""
    call()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def fma_peak_gflops(repeat: int = 20) -> float:
    """The best GFLOPS (a multiply-add counts 2) of ``repeat`` calls that run independent
    vector FMAs on every thread the pool uses.

    Example:
        >>> fma_peak_gflops(repeat=2) > 1
        True
    """
    lanes = Target.host().lanes("float32")
    threads = running_threads()
    closure = np.zeros(128 + 64 * threads + 64, np.uint8)
    closure[:64].view(np.float32)[:] = 0.9999999        # multiplier: the chains converge, never overflow
    closure[64:128].view(np.float32)[:] = 1e-3
    kernel = compile_llvm("fma_peak", [ArgSpec("closure", "uint8", closure.shape, written=True),
                                       ArgSpec("threads", "int64", None)], _fma_ir(lanes))
    best = _best_seconds(lambda: kernel(closure, threads), repeat)
    return threads * ITERATIONS * ACCUMULATORS * lanes * 2 / best / 1e9


def copy_bandwidth_gbs(nbytes: int = COPY_BYTES, repeat: int = 5) -> float:
    """The best GB/s (bytes read plus bytes written) of ``repeat`` parallel, vectorized copies
    of a float32 array of ``nbytes``.

    Example:
        >>> copy_bandwidth_gbs(1 << 20, repeat=2) > 0.1
        True
    """
    lanes = Target.host().lanes("float32")
    count = nbytes // 4 // (lanes * 64) * (lanes * 64)
    source = placeholder((count,), name="source")
    copy = compute((count,), lambda i: source[i], name="copy")
    s = create_schedule(copy)
    outer, inner = s[copy].split(copy.op.axis[0], factor=lanes * 64)
    _, inner = s[copy].split(inner, factor=lanes)       # vectors, in runs of 64 per parallel iteration
    s[copy].parallel(outer)
    s[copy].vectorize(inner)
    kernel = build(s, [source, copy])
    a, b = np.ones(count, np.float32), np.empty(count, np.float32)
    return 2 * a.nbytes / _best_seconds(lambda: kernel(a, b), repeat) / 1e9


_peaks = {}


def peaks(threads: int | None = None) -> tuple:
    """(FMA peak GFLOPS, copy GB/s) of this host on ``threads`` threads (None: the process's
    count), measured at the first call for that count (a few tenths of a second; the copy of
    ``PEAKS_COPY_BYTES``) and kept for the process.

    Example:
        >>> gflops, gbs = peaks()
        >>> gflops > 1 and gbs > 0.1, peaks() == (gflops, gbs)
        (True, True)
    """
    threads = threads or get_num_threads()
    if threads not in _peaks:
        with run_threads(threads):
            _peaks[threads] = (fma_peak_gflops(), copy_bandwidth_gbs(PEAKS_COPY_BYTES, repeat=3))
    return _peaks[threads]
