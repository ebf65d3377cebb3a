"""The xgb tuner against numpy/OpenBLAS and the template defaults, in one run.

1. matmul 1024^3 float32;
2. dense + bias + ReLU, M=128 K=768 N=3072 (weights [N, K], constant as in a compiled
   graph: packed once, outside the timed calls) against numpy's unfused x @ w.T + b then
   maximum.

Each workload is tuned with ``autotune.tune`` (xgb tuner, TRIALS trials, seed 0, a fresh
in-memory database); then the default and the tuned configs are built and timed here, beside
numpy, as medians of repeated runs. Ratios are numpy's time over ours (above 1: we are faster).
Run: ``python benchmarks/bench_autotune.py [TRIALS]`` (default 256; about 5 minutes per
workload on 2 cores).
"""
from common import median_seconds, unset_openblas_overrides

unset_openblas_overrides()

import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from tilefuse import autotune  # noqa: E402
from tilefuse.schedule import Config  # noqa: E402
from tilefuse.tensorir import compute, placeholder, reduce_axis, sum  # noqa: E402
from tilefuse.tensorir.ops.elementwise import relu  # noqa: E402

RNG = np.random.default_rng(0)


def timed(fn):
    return median_seconds(fn, repeat=11, min_seconds=0.5)


def matmul(n=1024):
    A, B = placeholder((n, n), name="A"), placeholder((n, n), name="B")
    k = reduce_axis((0, n), name="k")
    C = compute((n, n), lambda i, j: sum(A[i, k] * B[k, j], axis=k), name="C")
    a, b = RNG.random((n, n), dtype=np.float32), RNG.random((n, n), dtype=np.float32)
    return "matmul 1024^3", C, [a, b], lambda: a @ b


def dense(m=128, k=768, n=3072):
    X = placeholder((m, k), name="X")
    W, Bias = placeholder((n, k), name="W", constant=True), placeholder((n,), name="Bias", constant=True)
    r = reduce_axis((0, k), name="r")
    D = compute((m, n), lambda i, j: sum(X[i, r] * W[j, r], axis=r), name="D")
    Y = relu(compute((m, n), lambda i, j: D[i, j] + Bias[j], name="biased"), name="Y")
    x, w, b = (RNG.standard_normal(s).astype("float32") for s in ((m, k), (n, k), (n,)))
    return "dense+bias+ReLU 128x768x3072", Y, [x, w, b], lambda: np.maximum(x @ w.T + b, 0)


def bench(title, out, inputs, numpy_fn, trials):
    task = autotune.Task(out)
    start = time.perf_counter()
    options = autotune.MeasureOptions(repeat=5, min_repeat_ms=50, timeout=60)
    (report,) = autotune.tune([task], trials=trials, tuner="xgb", seed=0, options=options)
    tuning = time.perf_counter() - start
    want = numpy_fn()
    rows = {"numpy": timed(numpy_fn)}
    for name, cfg in (("default", task.template.default_config()), ("tuned", Config(report.best_config))):
        kernel = task.template.build(cfg)
        got = np.empty(out.shape, "float32")
        kernel(*inputs, got)
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
        rows[f"tilefuse {name}"] = timed(lambda: kernel(*inputs, got))
    print(f"{title}: {report.trials} trials in {tuning:.0f} s, errors {dict(report.errors) or 'none'}, "
          f"best {report.best_config}")
    for name, t in rows.items():
        print(f"  {name:20} {t * 1e3:8.3f} ms {task.flop / t / 1e9:8.1f} GFLOPS   "
              f"{rows['numpy'] / t:5.2f}x numpy")


if __name__ == "__main__":
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    for make in (matmul, dense):
        bench(*make(), trials)
