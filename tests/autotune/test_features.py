"""Feature vectors of lowered candidates: fixed length, meaningful entries, differences
between configs, clear errors."""
import math

import numpy as np
import pytest

from tilefuse.autotune.features import (FEATURE_DOCS, FEATURE_NAMES, FeatureError, config_feature_names,
                               config_features, feature_names_of, features_of, loop_features)
from tilefuse.schedule import ScheduleError, create_schedule, lower, template_for
from tilefuse.schedule.space import Config, ConfigError, ConfigSpace
from tilefuse.tensorir import compute, exp, if_then_else, placeholder, reduce_axis, sum as rsum
from tilefuse.tensorir import max as rmax
from tilefuse.tensorir import expr as E
from tilefuse.tensorir import stmt as S


def log(x):
    return math.log2(1 + x)


def feature(x, name):
    return x[FEATURE_NAMES.index(name)]


def matmul(n, k, m):
    A, B = placeholder((n, k), name="A"), placeholder((k, m), name="B")
    r = reduce_axis((0, k), name="r")
    return A, B, compute((n, m), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C")


def injective():
    A, b = placeholder((37, 19), name="A"), placeholder((19,), name="b")
    return compute((37, 19), lambda i, j: exp(A[i, j]) * b[j], name="T")


def softmax():
    X = placeholder((9, 77), name="X")
    rm, rs = reduce_axis((0, 77), name="rm"), reduce_axis((0, 77), name="rs")
    M = compute((9,), lambda i: rmax(X[i, rm], axis=rm), name="M")
    Ex = compute((9, 77), lambda i, j: exp(X[i, j] - M[i]), name="E")
    Sm = compute((9,), lambda i: rsum(Ex[i, rs], axis=rs), name="S")
    return compute((9, 77), lambda i, j: Ex[i, j] / Sm[i], name="Y")


def dense_bias_relu():
    X, W, bias = placeholder((13, 30), name="X"), placeholder((70, 30), name="W"), placeholder((70,), name="bias")
    r = reduce_axis((0, 30), name="r")
    D = compute((13, 70), lambda i, j: rsum(X[i, r] * W[j, r], axis=r), name="D")
    Bs = compute((13, 70), lambda i, j: D[i, j] + bias[j], name="B")
    return compute((13, 70), lambda i, j: if_then_else(Bs[i, j] > 0.0, Bs[i, j], 0.0), name="Y")


def conv2d():
    ci, h, w, co = 3, 9, 11, 5
    I, W = placeholder((1, ci, h, w), name="I"), placeholder((co, ci, 3, 3), name="W")
    P = compute((1, ci, h + 2, w + 2), lambda n, c, y, x: if_then_else(
        (y >= 1) & (y <= h) & (x >= 1) & (x <= w), I[n, c, y - 1, x - 1], 0.0), name="P")
    rc, ry, rx = reduce_axis((0, ci), name="rc"), reduce_axis((0, 3), name="ry"), reduce_axis((0, 3), name="rx")
    return compute((1, co, h, w), lambda n, f, y, x: rsum(P[n, rc, y + ry, x + rx] * W[f, rc, ry, rx],
                                                            axis=[rc, ry, rx]), name="O")


def opaque():
    A = placeholder((8, 9), name="A")
    r = reduce_axis((0, 9), name="r")
    B = compute((8,), lambda i: rsum(A[i, r], axis=r), name="B")
    return compute((8, 9), lambda i, j: A[i, j] - B[i], name="C", tag="opaque")


# ------------------------------------------------------------------------------ shape


def test_names_are_unique_and_documented():
    assert len(set(FEATURE_NAMES)) == len(FEATURE_NAMES) == len(FEATURE_DOCS)
    assert all(FEATURE_DOCS[n] for n in FEATURE_NAMES)


@pytest.mark.parametrize("make, kind", [(injective, "injective"), (softmax, "reduction"),
                                        (lambda: matmul(29, 45, 83)[2], "complex"),
                                        (dense_bias_relu, "complex"), (conv2d, "complex"),
                                        (opaque, "opaque")])
def test_length_is_fixed_across_templates_and_configs(make, kind):
    t = template_for(make())
    assert t.name == kind
    configs = t.space.sample(6, seed=0) + [t.default_config()]
    for cfg in configs:
        x = loop_features(lower(t.apply(cfg), t.args))
        assert x.shape == (len(FEATURE_NAMES),) and x.dtype == np.float64
        assert np.all(np.isfinite(x))
        assert feature(x, "store0.instances") > 0 and feature(x, "func.stores") >= 1
        full = features_of(t, cfg)
        assert full.shape == (len(feature_names_of(t)),)
        np.testing.assert_array_equal(full[:len(FEATURE_NAMES)], x)


def test_configs_of_a_matmul_space_that_are_searched_have_their_own_loop_features():
    t = template_for(matmul(64, 48, 80)[2])
    searched = [i for i in range(len(t.space)) if t.space.searchable(i)]     # distinct kernels
    sample = np.random.default_rng(0).choice(searched, 300, replace=False)
    rows = {loop_features(lower(t.apply(t.space.get(int(i))), t.args)).tobytes() for i in sample}
    assert len(rows) == len(sample)


def test_tile_sizes_change_the_loop_features_not_only_the_knobs():
    t = template_for(matmul(64, 48, 80)[2])
    base = dict(t.default_config().values, tile_i=4, pack=True)
    narrow = loop_features(lower(t.apply(Config(dict(base, tile_j=16))), t.args))
    wide = loop_features(lower(t.apply(Config(dict(base, tile_j=64))), t.args))
    assert feature(narrow, "store0.vector_lanes") == pytest.approx(log(16))
    assert feature(wide, "store0.vector_lanes") == pytest.approx(log(64))
    # the accumulator tile is the local allocation: tile_i x tile_j floats
    assert feature(narrow, "func.alloc_local_max_bytes") == pytest.approx(log(4 * 16 * 4))
    assert feature(wide, "func.alloc_local_max_bytes") == pytest.approx(log(4 * 64 * 4))


# ------------------------------------------------------------------------------ meaning


def test_vectorized_parallel_elementwise():
    A = placeholder((1024,), name="A")
    B = compute((1024,), lambda i: A[i] * 2.0, name="B")
    s = create_schedule(B)
    outer, lanes = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(lanes)
    s[B].parallel(outer)
    x = loop_features(lower(s, [A, B]))
    assert feature(x, "store0.instances") == pytest.approx(log(1024))
    assert feature(x, "store0.vector_lanes") == pytest.approx(log(16))
    assert feature(x, "store0.vector_innermost") == 1
    assert feature(x, "store0.parallel_product") == pytest.approx(log(64))
    assert feature(x, "store0.float_mul") == pytest.approx(log(1024))
    assert feature(x, "store0.write_stride_vector_class") == 1
    assert feature(x, "store0.load_stride_vector_class") == 1
    assert feature(x, "store0.loads_vector_contiguous") == 1
    # 16 floats per vector loop: 64 bytes, one cache line; the whole array: 4 KiB, 64 lines
    assert feature(x, "store0.write_bytes_inner1") == pytest.approx(log(64))
    assert feature(x, "store0.write_lines_inner1") == pytest.approx(log(1))
    assert feature(x, "store0.write_bytes_all") == pytest.approx(log(4096))
    assert feature(x, "store0.write_lines_all") == pytest.approx(log(64))
    assert feature(x, "func.outer_parallel_extent") == pytest.approx(log(64))
    assert feature(x, "func.work_per_task") == pytest.approx(log(16))


def test_transposed_read_is_strided_along_the_inner_loop():
    A = placeholder((48, 64), name="A")
    B = compute((64, 48), lambda i, j: A[j, i], name="B")
    x = loop_features(lower(create_schedule(B), [A, B]))
    assert feature(x, "store0.write_stride_inner_class") == 1
    assert feature(x, "store0.load_stride_inner_class") == 2
    assert feature(x, "store0.load_stride_inner") == pytest.approx(log(64))
    assert feature(x, "store0.loads_inner_strided") == 1
    # 48 rows of A, one line each, over the inner loop
    assert feature(x, "store0.load_lines_inner1") == pytest.approx(log(48))
    assert feature(x, "store0.vector_lanes") == 0 and feature(x, "store0.write_stride_vector_class") == -1


def test_naive_matmul_accumulation_features():
    n, k, m = 16, 32, 24
    A, B, C = matmul(n, k, m)
    x = loop_features(lower(create_schedule(C), [A, B, C]))
    assert feature(x, "func.stores") == 2                       # init and update
    assert feature(x, "store0.instances") == pytest.approx(log(n * m * k))
    assert feature(x, "store1.instances") == pytest.approx(log(n * m))
    assert feature(x, "store0.is_update") == 1 and feature(x, "store1.is_update") == 0
    assert feature(x, "store0.float_fma") == pytest.approx(log(n * m * k))
    assert feature(x, "store0.flops") == pytest.approx(log(2 * n * m * k))
    assert feature(x, "store0.float_mul") == 0 and feature(x, "store0.float_addsub") == 0
    # C[i, j] does not move along r: reused on every iteration of the innermost loop
    assert feature(x, "store0.write_reuse_depth") == 0
    assert feature(x, "store0.write_reuse_count") == pytest.approx(log(k))
    # loads: C (reuse), A[i, r] (contiguous), B[r, j] (stride m) along r
    assert feature(x, "store0.loads") == 3
    assert feature(x, "store0.loads_inner_reuse") == 1
    assert feature(x, "store0.loads_inner_contiguous") == 1
    assert feature(x, "store0.loads_inner_strided") == 1
    assert feature(x, "store0.loads_bytes_all") == pytest.approx(log(4 * (n * m + n * k + k * m)))


def test_fused_and_split_index_keeps_its_true_stride_and_tails_are_guarded():
    t = template_for(injective())   # A[(f) // 19, (f') % 19] after fusing and splitting
    x = loop_features(lower(t.apply(t.default_config()), t.args))
    assert feature(x, "store0.write_stride_vector_class") == 1
    assert feature(x, "store0.load_stride_vector_class") == 1
    assert feature(x, "store0.transcendental") > 0
    assert feature(x, "func.guards") >= 1
    assert feature(x, "func.stores") >= 2


def test_let_bound_index_is_followed():
    buf = E.Buffer("A", (64,), "float32")
    i, x_var = E.Var("i"), E.Var("x")
    body = S.For(i, E.Const(0, "int64"), E.Const(16, "int64"), "serial",
                 S.LetStmt(x_var, i * 4, S.BufferStore(buf, E.Const(1.0, "float32"), (x_var,))))
    x = loop_features(S.PrimFunc("f", (buf,), body))
    assert feature(x, "store0.write_stride_inner") == pytest.approx(log(4))
    assert feature(x, "store0.write_stride_inner_class") == 2


def test_global_allocation_is_counted():
    t = template_for(matmul(64, 48, 80)[2])
    packed = loop_features(lower(t.apply(Config(dict(t.default_config().values, pack=True))), t.args))
    plain = loop_features(lower(t.apply(Config(dict(t.default_config().values, pack=False))), t.args))
    assert feature(packed, "func.alloc_global_bytes") > 0 and feature(plain, "func.alloc_global_bytes") == 0


# ------------------------------------------------------------------------------ knobs


def test_config_features_encode_each_kind_of_knob():
    s = ConfigSpace()
    s.define_split("tile", 64, num_outputs=3, policy="power2")
    s.define_knob("vector", [0, 8, 16])
    s.define_knob("parallel", [False, True])
    s.define_knob("order", ["ij", "ji"])
    s.define_reorder("perm", 3)
    s.define_annotate("ann", 2, ["none", "unroll", "vectorize"])
    names = config_feature_names(s)
    assert names == ["tile[1]", "tile[2]", "vector", "parallel", "order=ij", "order=ji",
                     "perm[0]", "perm[1]", "perm[2]",
                     "ann[0]=none", "ann[0]=unroll", "ann[0]=vectorize",
                     "ann[1]=none", "ann[1]=unroll", "ann[1]=vectorize"]
    cfg = Config({"tile": [-1, 4, 2], "vector": 16, "parallel": True, "order": "ji",
                  "perm": [2, 0, 1], "ann": ["unroll", "none"]})
    x = config_features(s, cfg)
    assert x.shape == (len(names),)
    expected = [log(4), log(2), log(16), 1, 0, 1, 2, 0, 1, 0, 1, 0, 1, 0, 0]
    np.testing.assert_allclose(x, expected)


def test_config_features_reject_a_foreign_config():
    s = ConfigSpace()
    s.define_knob("vector", [8, 16])
    with pytest.raises(ConfigError):
        config_features(s, Config({"vector": 4}))


# ------------------------------------------------------------------------------ errors


def test_loop_features_needs_a_primfunc():
    with pytest.raises(TypeError, match="PrimFunc"):
        loop_features("for i in range(3)")


def test_features_of_a_config_outside_the_space_is_a_config_error():
    t = template_for(injective())
    with pytest.raises(ConfigError):
        features_of(t, Config({"vector": 3, "unroll": 1, "parallel": False}))


class _BrokenTemplate:
    """A real template whose schedule fails for unroll == 8."""

    def __init__(self, template):
        self.inner = template
        self.space = template.space
        self.args = template.args

    def apply(self, cfg):
        if cfg["unroll"] == 8:
            raise ScheduleError("cannot unroll by 8 here")
        return self.inner.apply(cfg)


def test_a_schedule_that_fails_is_a_feature_error_naming_the_config():
    t = _BrokenTemplate(template_for(injective()))
    good = Config({"vector": 16, "unroll": 4, "parallel": False})
    bad = Config({"vector": 16, "unroll": 8, "parallel": False})
    assert features_of(t, good).shape == (len(FEATURE_NAMES) + len(config_feature_names(t.space)),)
    with pytest.raises(FeatureError, match='"unroll":8') as info:
        features_of(t, bad)
    assert isinstance(info.value, ValueError) and isinstance(info.value.__cause__, ScheduleError)


def test_prefetches_count_their_executions_and_how_far_ahead_they_fetch():
    A, B = placeholder((8, 256), name="A"), placeholder((256, 32), name="B")
    r = reduce_axis((0, 256), name="r")
    C = compute((8, 32), lambda i, j: rsum(A[i, r] * B[r, j], axis=r), name="C")

    def features(ahead):
        s = create_schedule(C)
        io, ii = s[C].split(C.op.axis[0], factor=4)
        s[C].reorder(io, r, ii, C.op.axis[1])
        s[C].unroll(ii)
        if ahead:
            s[C].prefetch(B, r, ahead)
        x = loop_features(lower(s, [A, B, C]))
        return 2 ** feature(x, "func.prefetches") - 1, 2 ** feature(x, "func.prefetch_ahead_bytes") - 1
    assert features(0) == (0, 0)
    # 2 row tiles x 256 steps x 32 columns, the 4 unrolled rows fetching once: B is 128 bytes a row
    fetches, ahead = features(8)
    assert round(fetches) == 2 * 256 * 32 and round(ahead) == 8 * 128
    assert round(features(16)[1]) == 16 * 128


def test_features_on_workers_match_and_a_failed_job_is_a_feature_error():
    from tilefuse.autotune.executor import Executor, JobResult, LocalExecutor
    from tilefuse.autotune.features import features_on
    A = placeholder((300,), name="A")
    t = template_for(compute((300,), lambda i: A[i] * 2.0 + 1.0, name="B"))
    configs = [t.space.get(0), t.space.get(len(t.space) - 1)]
    with LocalExecutor(workers=2) as pool:
        rows = features_on(pool, t, configs)
    assert all(np.array_equal(row, features_of(t, c)) for row, c in zip(rows, configs))

    class Dying(Executor):
        def run(self, calls, timeout, parallel=True):
            return [JobResult(value=fn(*args)) for fn, args in calls[:1]] + \
                   [JobResult(error="crash", message="killed by SIGSEGV") for _ in calls[1:]]
    first, second = features_on(Dying(), t, configs)
    assert np.array_equal(first, features_of(t, configs[0]))
    assert isinstance(second, FeatureError) and "crash" in str(second) and "SIGSEGV" in str(second)
    assert features_on(Dying(), t, []) == []
