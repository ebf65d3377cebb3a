"""tensorir against numpy, side by side in one run.

1. fused elementwise ``y = exp(a) * b + c`` on 4M float32 (one pass, vectorized, parallel)
   against numpy's three passes (as written, and with preallocated outputs);
2. a 1024^3 float32 matmul scheduled with split/reorder/unroll/vectorize/parallel only, as
   written and with B repacked into column panels by a compute stage, against numpy's
   OpenBLAS; and the best kernel on one thread to show the thread pool's speedup.

Run: ``python benchmarks/bench_tensorir.py``
"""
from common import median_seconds, unset_openblas_overrides

unset_openblas_overrides()

import numpy as np  # noqa: E402

from tilefuse.schedule import build, create_schedule  # noqa: E402
from tilefuse.tensorir import compute, exp, placeholder, reduce_axis, sum  # noqa: E402
from tilefuse.tensorir.runtime import threadpool  # noqa: E402


def bench_elementwise(n=1 << 22):
    A, B, C = (placeholder((n,), name=name) for name in "ABC")
    Y = compute((n,), lambda i: exp(A[i]) * B[i] + C[i], name="Y")
    s = create_schedule(Y)
    outer, inner = s[Y].split(Y.op.axis[0], factor=64)
    vo, vi = s[Y].split(inner, factor=16)
    s[Y].unroll(vo); s[Y].vectorize(vi); s[Y].parallel(outer)
    f = build(s, [A, B, C, Y], name="exp_mul_add")
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(n).astype("float32") for _ in range(3))
    y, t = np.empty(n, "float32"), np.empty(n, "float32")
    f(a, b, c, y)
    np.testing.assert_allclose(y, np.exp(a) * b + c, rtol=1e-5, atol=1e-6)

    def numpy_out():
        np.exp(a, out=t); np.multiply(t, b, out=t); np.add(t, c, out=t)

    ours = median_seconds(lambda: f(a, b, c, y))
    naive = median_seconds(lambda: np.exp(a) * b + c)
    prealloc = median_seconds(numpy_out)
    best = min(naive, prealloc)
    gbs = 4 * n * 4 / ours / 1e9
    print(f"exp(a)*b+c, {n} float32")
    print(f"  tilefuse          {ours*1e3:8.3f} ms  ({gbs:.1f} GB/s of the 16 bytes/element it must move)")
    print(f"  numpy (as written){naive*1e3:8.3f} ms")
    print(f"  numpy (out=)      {prealloc*1e3:8.3f} ms")
    print(f"  ratio numpy_best/tilefuse = {best/ours:.2f}x  (floor: >= 1.00)")


def plain_matmul(n, ti, tj):
    """C = A @ B tiled into a ti x tj register block: loops (i.o, j.o, k, i.i unrolled,
    j.i vectorized), i.o parallel."""
    A, B = placeholder((n, n), name="A"), placeholder((n, n), name="B")
    k = reduce_axis((0, n), name="k")
    C = compute((n, n), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")
    s = create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.op.axis, ti, tj)
    s[C].reorder(io, jo, k, ii, ji)
    s[C].unroll(ii); s[C].vectorize(ji); s[C].parallel(io)
    return build(s, [A, B, C], name="matmul")


def packed_matmul(n, ti, tj):
    """The same, with B first copied into tj-wide column panels Bp[n/tj][k][tj] (its own
    stage, as oneDNN prepacks weights) so the k loop reads B contiguously."""
    A, B = placeholder((n, n), name="A"), placeholder((n, n), name="B")
    Bp = compute((n // tj, n, tj), lambda jo, k, ji: B[k, jo * tj + ji], name="Bp")
    k = reduce_axis((0, n), name="k")
    C = compute((n, n), lambda i, j: sum(A[i, k] * Bp[j // tj, k, j % tj], axis=k), name="C")
    s = create_schedule(C)
    s[Bp].vectorize(Bp.op.axis[2]); s[Bp].parallel(Bp.op.axis[0])
    io, jo, ii, ji = s[C].tile(*C.op.axis, ti, tj)
    s[C].reorder(io, jo, k, ii, ji)
    s[C].unroll(ii); s[C].vectorize(ji); s[C].parallel(io)
    return build(s, [A, B, C], name="matmul_packed")


def bench_matmul(n=1024):
    candidates = [("plain", plain_matmul, 8, 32), ("plain", plain_matmul, 6, 64),
                  ("packed B", packed_matmul, 12, 32), ("packed B", packed_matmul, 8, 32),
                  ("packed B", packed_matmul, 6, 64)]
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    c, ref = np.empty((n, n), "float32"), a @ b
    flops = 2 * n ** 3
    numpy_t = median_seconds(lambda: np.matmul(a, b, out=ref), repeat=15, min_seconds=0.5)
    print(f"matmul {n}x{n}x{n} float32 (split/reorder/unroll/vectorize/parallel only)")
    print(f"  numpy/OpenBLAS            {flops/numpy_t/1e9:8.1f} GFLOPS")
    best = None
    for label, make, ti, tj in candidates:
        f = make(n, ti, tj)
        f(a, b, c)
        np.testing.assert_allclose(c, ref, rtol=1e-3)
        t = median_seconds(lambda: f(a, b, c), repeat=15, min_seconds=0.5)
        print(f"  tilefuse {label:8} {ti:2}x{tj:<3} {flops/t/1e9:8.1f} GFLOPS  ({numpy_t/t:.2f}x numpy)")
        if best is None or t < best[0]:
            best = (t, f, f"{label} {ti}x{tj}")
    t, f, which = best
    threads = threadpool.get_num_threads()
    threadpool.set_num_threads(1)
    try:
        single = median_seconds(lambda: f(a, b, c), repeat=7, min_seconds=0.5)
    finally:
        threadpool.set_num_threads(threads)
    print(f"  best ({which}): {flops/t/1e9:.1f} GFLOPS = {numpy_t/t:.2f}x numpy (floor: >= 0.25)")
    print(f"  same kernel on 1 thread {flops/single/1e9:.1f} GFLOPS: {threads} threads give {single/t:.2f}x")


if __name__ == "__main__":
    bench_elementwise()
    bench_matmul()
