"""Property tests: random shapes, random splits and random legal annotations (vectorize, unroll,
parallel, and for reductions a random loop order); every built kernel agrees with numpy."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilefuse.schedule import build, create_schedule
from tilefuse.tensorir import compute, placeholder, reduce_axis, sum as rsum

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

extents = st.integers(1, 40)
factors = st.integers(1, 20)


def random_splits(data, stage, axes):
    """Split some of ``axes`` by factor or nparts; sometimes split the inner part again."""
    for ax in axes:
        if not data.draw(st.booleans(), label=f"split {ax.name}"):
            continue
        key = data.draw(st.sampled_from(["factor", "nparts"]), label="by")
        _, inner = stage.split(ax, **{key: data.draw(factors, label=key)})
        if inner.dom_extent > 1 and data.draw(st.integers(0, 3), label="nested") == 0:
            stage.split(inner, factor=data.draw(st.integers(1, inner.dom_extent), label="inner factor"))


def random_order(data, stage):
    leaves = list(stage.leaf_iter_vars)
    perm = data.draw(st.permutations(range(len(leaves))), label="order")
    stage.reorder(*[leaves[p] for p in perm])


def random_annotations(data, stage):
    """At most one vectorized, one unrolled and one parallel loop, each on a legal axis."""
    leaves = list(stage.leaf_iter_vars)
    used = set()

    def pick(kind, ok):
        options = [a for a in leaves if a.uid not in used and ok(a)]
        if not options or not data.draw(st.booleans(), label=kind):
            return
        axis = data.draw(st.sampled_from(options), label=f"{kind} axis")
        used.add(axis.uid)
        getattr(stage, kind)(axis)

    pick("vectorize", lambda a: a.kind == "data" and a.dom_extent <= 64)
    pick("unroll", lambda a: a.dom_extent <= 16)
    pick("parallel", lambda a: a.kind == "data")


def rng_of(data):
    return np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))


# ---------------------------------------------------------------------- (a) elementwise chain

@SETTINGS
@given(data=st.data(), shape=st.lists(extents, min_size=1, max_size=3))
def test_elementwise_chain_with_broadcast(data, shape):
    ndim = len(shape)
    d = data.draw(st.integers(0, ndim - 1), label="broadcast axis")
    A = placeholder(tuple(shape), "float32", name="A")
    V = placeholder((shape[d],), "float32", name="V")
    T = compute(tuple(shape), lambda *idx: A[idx] * V[idx[d]] + 1.0, name="T")
    B = compute(tuple(shape), lambda *idx: T[idx] * 0.5 - A[idx], name="B")
    s = create_schedule(B)
    for t in (T, B):
        random_splits(data, s[t], t.op.axis)
        random_annotations(data, s[t])
    t_in_args = data.draw(st.booleans(), label="T in args")
    args = [A, V, T, B] if t_in_args else [A, V, B]
    f = build(s, args)

    rng = rng_of(data)
    a = rng.standard_normal(shape).astype("float32")
    v = rng.standard_normal(shape[d]).astype("float32")
    t = np.full(shape, np.nan, "float32")
    b = np.full(shape, np.nan, "float32")
    f(*([a, v, t, b] if t_in_args else [a, v, b]))
    bshape = [1] * ndim
    bshape[d] = shape[d]
    t_ref = a * v.reshape(bshape) + np.float32(1)
    if t_in_args:
        np.testing.assert_allclose(t, t_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b, t_ref * np.float32(0.5) - a, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------- (b) row reduction

@SETTINGS
@given(data=st.data(), shape=st.lists(extents, min_size=1, max_size=3))
def test_row_sum_over_last_axis(data, shape):
    ndim = len(shape)
    A = placeholder(tuple(shape), "float32", name="A")
    r = reduce_axis((0, shape[-1]), name="r")
    C = compute(tuple(shape[:-1]), lambda *idx: rsum(A[tuple(idx) + (r,)], axis=r), name="C")
    s = create_schedule(C)
    random_splits(data, s[C], list(C.op.axis) + [r])
    if data.draw(st.booleans(), label="reorder"):
        random_order(data, s[C])
    random_annotations(data, s[C])
    f = build(s, [A, C])

    a = rng_of(data).standard_normal(shape).astype("float32")
    c = np.full(shape[:-1], np.nan, "float32")
    f(a, c)
    np.testing.assert_allclose(c, a.sum(axis=ndim - 1), rtol=1e-5, atol=1e-5 * shape[-1])


# ---------------------------------------------------------------------- (c) matmul

@SETTINGS
@given(data=st.data(), n=extents, k=extents, m=extents,
       ti=factors, tj=factors, tk=factors)
def test_matmul_tiled(data, n, k, m, ti, tj, tk):
    A = placeholder((n, k), "float32", name="A")
    B = placeholder((k, m), "float32", name="B")
    r = reduce_axis((0, k), name="r")
    C = compute((n, m), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C")
    s = create_schedule(C)
    st_c = s[C]
    io, jo, ii, ji = st_c.tile(*C.op.axis, ti, tj)
    ko, ki = st_c.split(r, factor=tk)
    order = data.draw(st.sampled_from([
        (io, jo, ko, ii, ki, ji),   # reduce between the tile loops
        (io, jo, ii, ji, ko, ki),   # reduce innermost
        (io, jo, ko, ki, ii, ji),   # whole reduce outside the inner tile
        (ko, io, jo, ii, ki, ji),   # a reduce loop outermost
    ]), label="order")
    st_c.reorder(*order)
    if data.draw(st.booleans(), label="vectorize ji"):
        st_c.vectorize(ji)
    if ti <= 16 and data.draw(st.booleans(), label="unroll ii"):
        st_c.unroll(ii)
    if data.draw(st.booleans(), label="parallel io"):
        st_c.parallel(io)
    f = build(s, [A, B, C])

    rng = rng_of(data)
    a = rng.standard_normal((n, k)).astype("float32")
    b = rng.standard_normal((k, m)).astype("float32")
    c = np.full((n, m), np.nan, "float32")
    f(a, b, c)
    expected = a.astype("float64") @ b.astype("float64")
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5 * k)
