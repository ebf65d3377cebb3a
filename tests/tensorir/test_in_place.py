"""Which outputs may be computed over an input (tensorir.in_place), and kernels run that way: a
residual added in a convolution's epilogue, on shapes that do not divide the tiles, under every
sampled config of the complex template."""
import numpy as np
import pytest

from tilefuse.schedule import build, create_schedule, lower, template_for
from tilefuse.tensorir import cast, compute, exp, if_then_else, placeholder, reduce_axis, sum as rsum
from tilefuse.tensorir.in_place import in_place_inputs


def _lowered(outputs, args, tile=None):
    s = create_schedule(outputs)
    if tile is not None:
        tile(s)
    return lower(s, args)


def test_elementwise_outputs_may_take_either_input():
    A, B = placeholder((5, 7), name="A"), placeholder((5, 7), name="B")
    C = compute((5, 7), lambda i, j: exp(A[i, j]) + B[i, j], name="C")
    assert in_place_inputs(_lowered(C, [A, B, C])) == {2: (0, 1)}


def test_split_and_vectorized_loops_still_read_the_element_they_store():
    A = placeholder((37,), name="A")
    C = compute((37,), lambda i: A[i] * 2.0, name="C")

    def tile(s):
        outer, inner = s[C].split(C.op.axis[0], factor=8)      # 37 = 4 x 8 + 5: a guarded tail
        s[C].vectorize(inner)
        s[C].parallel(outer)
    assert in_place_inputs(_lowered(C, [A, C], tile)) == {1: (0,)}


@pytest.mark.parametrize("case", ["other index", "broadcast", "other shape", "other dtype", "read twice",
                                  "stage at root", "reduction"])
def test_inputs_read_elsewhere_are_never_shared(case):
    A = placeholder((6, 6), name="A")
    if case == "other index":           # C[i, j] reads A[j, i]: an element another store overwrote
        C = compute((6, 6), lambda i, j: A[j, i] + 1.0, name="C")
    elif case == "broadcast":
        A = placeholder((6,), name="A")
        C = compute((6, 6), lambda i, j: A[j] + 1.0, name="C")
    elif case == "other shape":
        C = compute((6, 5), lambda i, j: A[i, j] + 1.0, name="C")
    elif case == "other dtype":
        A = placeholder((6, 6), "int32", name="A")
        C = compute((6, 6), lambda i, j: cast("float32", A[i, j]), name="C")
    elif case == "read twice":          # its own element and a neighbour's
        C = compute((6, 6), lambda i, j: A[i, j] + A[i, (j + 1) % 6], name="C")
    elif case == "stage at root":       # T reads A, C reads T: A is read by another store than C's
        T = compute((6, 6), lambda i, j: A[i, j] * 2.0, name="T")
        C = compute((6, 6), lambda i, j: T[i, j] + 1.0, name="C")
    else:                               # C reads itself (it accumulates)
        r = reduce_axis((0, 6), name="r")
        C = compute((6, 6), lambda i, j: rsum(A[i, r] * A[r, j], axis=r), name="C")
    assert in_place_inputs(_lowered(C, [A, C])) == {}


def test_a_convolutions_residual_is_shared_under_every_sampled_config():
    # NHWC 3x3 convolution of 9 x 11 x 13 into 21 channels (no tile size divides them) plus a
    # residual, relu: the output may be the residual's array, never the data's
    rng = np.random.default_rng(0)
    X, W = placeholder((1, 11, 13, 9), name="X"), placeholder((3, 3, 9, 21), name="W", constant=True)
    R = placeholder((1, 9, 11, 21), name="R")
    ry, rx, rc = reduce_axis((0, 3), name="ry"), reduce_axis((0, 3), name="rx"), reduce_axis((0, 9), name="rc")
    conv = compute((1, 9, 11, 21), lambda n, h, w, o: rsum(X[n, h + ry, w + rx, rc] * W[ry, rx, rc, o],
                                                           axis=[ry, rx, rc]), name="conv", tag="conv")
    S = compute((1, 9, 11, 21), lambda n, h, w, o: conv[n, h, w, o] + R[n, h, w, o], name="S")
    Y = compute((1, 9, 11, 21), lambda n, h, w, o: if_then_else(S[n, h, w, o] > 0.0, S[n, h, w, o], 0.0), name="Y")
    t = template_for(Y)
    assert t.name == "complex"
    x, w, res = (rng.standard_normal(p.shape).astype("float32") for p in (X, W, R))
    want = np.maximum(sum(np.einsum("nhwc,co->nhwo", x[:, dy:dy + 9, dx:dx + 11], w[dy, dx])
                          for dy in range(3) for dx in range(3)) + res, 0)
    searchable = [i for i in range(len(t.space)) if t.space.searchable(i)]
    picked = np.random.default_rng(1).choice(searchable, 12, replace=False)
    for cfg in [t.default_config()] + [t.space.get(int(i)) for i in picked]:
        kernel = t.build(cfg)
        assert kernel.in_place == [(3, 2)], cfg
        out = res.copy()
        kernel(x, w, out, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(cfg))
