"""The bundled example: build kernels for this CPU, check them against numpy, time them.

1. ``y = exp(a) * b + c`` fused into one pass over 4M floats (vectorized, parallel);
2. a 512x512x512 matmul tiled into a register block, vectorized and parallel;
3. the example graph ``mlp.json`` (oneDNN's graph format): loaded, partitioned by operator
   class, every partition compiled with its template, run and checked against the numpy
   reference interpreter.
"""
import time
from pathlib import Path

import numpy as np

from tilefuse.graph_api import compile_graph, load_json, reference

from tilefuse.schedule import build, create_schedule, lower
from tilefuse.tensorir import compute, exp, placeholder, reduce_axis, sum


def best_of(fn, repeat=20):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def fused_elementwise(n=1 << 22):
    A, B, C = (placeholder((n,), name=name) for name in "ABC")
    Y = compute((n,), lambda i: exp(A[i]) * B[i] + C[i], name="Y")
    s = create_schedule(Y)
    outer, inner = s[Y].split(Y.op.axis[0], factor=64)
    vo, vi = s[Y].split(inner, factor=16)
    s[Y].unroll(vo); s[Y].vectorize(vi); s[Y].parallel(outer)
    f = build(s, [A, B, C, Y], name="exp_mul_add")
    a, b, c = (np.random.rand(n).astype("float32") for _ in range(3))
    y = np.empty(n, "float32")
    f(a, b, c, y)
    np.testing.assert_allclose(y, np.exp(a) * b + c, rtol=1e-5)
    ours, theirs = best_of(lambda: f(a, b, c, y)), best_of(lambda: np.exp(a) * b + c)
    print(f"y = exp(a)*b + c, {n} floats: tilefuse {ours*1e3:.2f} ms, numpy {theirs*1e3:.2f} ms "
          f"({theirs/ours:.2f}x)")


def matmul(n=512):
    A, B = placeholder((n, n), name="A"), placeholder((n, n), name="B")
    k = reduce_axis((0, n), name="k")
    C = compute((n, n), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")
    s = create_schedule(C)
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 6, 64)
    s[C].reorder(io, jo, k, ii, ji)
    s[C].unroll(ii); s[C].vectorize(ji); s[C].parallel(io)
    print("\n".join(str(lower(s, [A, B, C], name="matmul")).splitlines()[:14]) + "\n  ...")
    f = build(s, [A, B, C], name="matmul")
    a, b = np.random.rand(n, n).astype("float32"), np.random.rand(n, n).astype("float32")
    c = np.empty((n, n), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)
    ours, theirs = best_of(lambda: f(a, b, c)), best_of(lambda: a @ b)
    gflops = 2 * n ** 3 / 1e9
    print(f"matmul {n}^3: tilefuse {gflops/ours:.1f} GFLOPS, numpy {gflops/theirs:.1f} GFLOPS "
          f"({theirs/ours:.2f}x)")


def example_graph(path=Path(__file__).with_name("mlp.json")):
    graph = load_json(path)
    for p in graph.get_partitions():
        print(f"partition {p.id} ({p.get_kind()}): {' + '.join(op.kind.value for op in p.get_ops())}")
    compiled = compile_graph(graph)
    rng = np.random.default_rng(0)
    feeds = {t.id: rng.standard_normal(t.shape).astype("float32") for t in graph.get_input_ports()}
    got, want = compiled.run(feeds), reference.run(graph, feeds)
    for tid in want:
        np.testing.assert_allclose(got[tid], want[tid], rtol=1e-4, atol=1e-5)
    ours, theirs = best_of(lambda: compiled.run(feeds)), best_of(lambda: reference.run(graph, feeds))
    print(f"{path.name}: tilefuse {ours*1e3:.3f} ms, numpy reference interpreter {theirs*1e3:.3f} ms")


if __name__ == "__main__":
    fused_elementwise()
    matmul()
    example_graph()
    print("all results match numpy")
