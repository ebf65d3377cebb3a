"""Helpers shared by the schedule tests: random inputs, build-and-run, a matmul algorithm."""
from __future__ import annotations

import numpy as np

from tilefuse.schedule import build
from tilefuse.tensorir import compute, placeholder, reduce_axis
from tilefuse.tensorir import sum as rsum

RNG = np.random.default_rng(1234)


def rand(shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def run(s, args, inputs, out_shape, out_dtype="float32", fill=None):
    """Build ``s`` and run it on ``inputs``; the output starts as ``fill`` (by default a value
    no kernel writes by accident: NaN, 123 or True) so unwritten elements show."""
    f = build(s, args)
    if fill is None:
        fill = np.nan if np.dtype(out_dtype).kind == "f" else (True if out_dtype == "bool" else 123)
    out = np.full(out_shape, fill, out_dtype)
    f(*inputs, out)
    return out


def assert_close(actual, expected):
    # float mul+add may be contracted to an FMA: equal up to one rounding
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)


def matmul(n, k, m, constant_b: bool = False):
    A = placeholder((n, k), "float32", name="A")
    B = placeholder((k, m), "float32", name="B", constant=constant_b)
    r = reduce_axis((0, k), name="r")
    C = compute((n, m), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C, r
