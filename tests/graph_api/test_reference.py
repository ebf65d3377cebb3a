"""The numpy reference interpreter (graph_api.reference) against independent computations written
here: closed formulas per element, slow loop-based convolution / pooling, and small hand-checked
vectors (some taken from oneDNN's own unit tests)."""
import itertools
import math
import random

import numpy as np
import pytest

from tilefuse.graph_api.logical_tensor import DataType, GraphError, LogicalTensor
from tilefuse.graph_api.op import Op, OpKind
from tilefuse.graph_api.reference import SUPPORTED_KINDS, evaluate, run

RNG = np.random.default_rng(0)


# --------------------------------------------------------------------------- helpers

def _dt(arr) -> DataType:
    return DataType.of_numpy(np.asarray(arr).dtype)


def make_op(kind, inputs, attrs=None, out_shapes=(None,), out_dtypes=None, op_id=7):
    """An op whose input logical tensors describe ``inputs`` (ids 0..n-1) and whose outputs
    (ids 100..) have the given shapes (None: unknown rank) and dtypes (default: input 0's)."""
    ins = [LogicalTensor(i, _dt(a), np.shape(a)) for i, a in enumerate(inputs)]
    if out_dtypes is None:
        out_dtypes = [ins[0].dtype if ins else DataType.f32] * len(out_shapes)
    outs = [LogicalTensor(100 + i, d, s) for i, (s, d) in enumerate(zip(out_shapes, out_dtypes))]
    return Op(op_id, kind, ins, outs, attrs or {})


def ev(kind, inputs, attrs=None, **kw):
    inputs = [np.asarray(a) for a in inputs]
    return evaluate(make_op(kind, inputs, attrs, **kw), inputs)


def ev1(kind, inputs, attrs=None, **kw):
    return ev(kind, inputs, attrs, **kw)[0]


def rand(*shape, lo=-3.0, hi=3.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def close(got, want, rtol=1e-5, atol=1e-5):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


def per_element(fn, x):
    return np.array([fn(float(v)) for v in np.asarray(x).reshape(-1)]).reshape(np.shape(x))


# --------------------------------------------------------------------------- element-wise unary

def _sigmoid(v):
    return 1 / (1 + math.exp(-v))


def _softplus(v, beta=1.0):
    return math.log(1 + math.exp(beta * v)) / beta


UNARY_CASES = [
    (OpKind.Abs, {}, abs),
    (OpKind.Exp, {}, math.exp),
    (OpKind.Log, {}, math.log),
    (OpKind.ReLU, {}, lambda v: max(v, 0.0)),
    (OpKind.Sigmoid, {}, _sigmoid),
    (OpKind.Sqrt, {}, math.sqrt),
    (OpKind.Square, {}, lambda v: v * v),
    (OpKind.Tanh, {}, math.tanh),
    (OpKind.Reciprocal, {}, lambda v: 1 / v),
    (OpKind.Mish, {}, lambda v: v * math.tanh(math.log(1 + math.exp(v)))),
    (OpKind.HardSwish, {}, lambda v: v * min(max(v + 3, 0), 6) / 6),
    (OpKind.Clamp, {"min": -0.5, "max": 1.25}, lambda v: min(max(v, -0.5), 1.25)),
    (OpKind.Elu, {"alpha": 0.7}, lambda v: v if v > 0 else 0.7 * (math.exp(v) - 1)),
    (OpKind.LeakyReLU, {"alpha": 0.1}, lambda v: v if v >= 0 else 0.1 * v),
    (OpKind.HardSigmoid, {"alpha": 0.2, "beta": 0.5}, lambda v: min(max(0.2 * v + 0.5, 0), 1)),
    (OpKind.SoftPlus, {}, _softplus),
    (OpKind.SoftPlus, {"beta": 2.5}, lambda v: _softplus(v, 2.5)),
    (OpKind.GELU, {}, lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2)))),
    (OpKind.GELU, {"mode": "gelu_erf"}, lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2)))),
    (OpKind.GELU, {"mode": "gelu_tanh"},
     lambda v: 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))),
    (OpKind.Pow, {"beta": 3.0}, lambda v: v ** 3),
    (OpKind.Pow, {"beta": 0.5}, lambda v: v ** 0.5),
]


@pytest.mark.parametrize("kind,attrs,fn", UNARY_CASES, ids=lambda c: getattr(c, "value", None))
def test_unary(kind, attrs, fn):
    positive = kind in (OpKind.Log, OpKind.Sqrt) or (kind is OpKind.Pow and attrs["beta"] == 0.5)
    x = rand(3, 4, 5, lo=0.05 if positive else -4.0, hi=4.0)
    if kind is OpKind.Reciprocal:
        x = np.where(np.abs(x) < 0.1, 0.5, x).astype(np.float32)
    got = ev1(kind, [x], attrs, out_shapes=[x.shape])
    assert got.dtype == np.float32 and got.shape == x.shape
    close(got, per_element(fn, x), rtol=2e-6, atol=1e-6)


def test_round_is_half_to_even_like_onednn_nearbyint():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49, 2.51, -3.7], np.float32)
    close(ev1(OpKind.Round, [x]), [0, 2, 2, 0, -2, -2, 0, 3, -4])


def test_unary_keeps_f16_output_dtype():
    x = rand(4, 4).astype(np.float16)
    got = ev1(OpKind.Tanh, [x], out_shapes=[(4, 4)])
    assert got.dtype == np.float16
    close(got, np.tanh(x.astype(np.float64)), rtol=1e-3, atol=1e-3)


def test_gelu_rejects_unknown_mode():
    with pytest.raises(GraphError, match=r"op 7 \(GELU\).*mode"):
        ev(OpKind.GELU, [rand(2)], {"mode": "erf"})


def test_clamp_requires_min_and_max():
    with pytest.raises(GraphError, match=r"op 7 \(Clamp\): missing required attribute 'max'"):
        ev(OpKind.Clamp, [rand(2)], {"min": 0.0})


# --------------------------------------------------------------------------- element-wise binary

BINARY_CASES = [
    (OpKind.Add, lambda a, b: a + b),
    (OpKind.Subtract, lambda a, b: a - b),
    (OpKind.Multiply, lambda a, b: a * b),
    (OpKind.Divide, lambda a, b: a / b),
    (OpKind.Maximum, max),
    (OpKind.Minimum, min),
    (OpKind.SquaredDifference, lambda a, b: (a - b) ** 2),
]


def _broadcast_loop(fn, a, b):
    shape = np.broadcast_shapes(a.shape, b.shape)
    out = np.empty(shape)
    for idx in np.ndindex(*shape):
        ia = tuple(i if d != 1 else 0 for i, d in zip(idx[len(idx) - a.ndim:], a.shape))
        ib = tuple(i if d != 1 else 0 for i, d in zip(idx[len(idx) - b.ndim:], b.shape))
        out[idx] = fn(float(a[ia]), float(b[ib]))
    return out


@pytest.mark.parametrize("kind,fn", BINARY_CASES, ids=lambda c: getattr(c, "value", None))
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (2, 1, 5)),
                                    ((), (2, 2))])
def test_binary(kind, fn, shapes):
    a, b = rand(*shapes[0]), rand(*shapes[1])
    if kind is OpKind.Divide:
        b = np.where(np.abs(b) < 0.2, 1.0, b).astype(np.float32)
    close(ev1(kind, [a, b]), _broadcast_loop(fn, a, b))


def test_binary_auto_broadcast_none_requires_equal_shapes():
    a, b = rand(2, 3), rand(3)
    close(ev1(OpKind.Add, [a, rand(2, 3) * 0], {"auto_broadcast": "none"}), a)
    with pytest.raises(GraphError, match=r"op 7 \(Add\).*auto_broadcast"):
        ev(OpKind.Add, [a, b], {"auto_broadcast": "none"})
    with pytest.raises(GraphError, match=r"op 7 \(Multiply\).*do not broadcast"):
        ev(OpKind.Multiply, [rand(2, 3), rand(4)])
    with pytest.raises(GraphError, match="auto_broadcast"):
        ev(OpKind.Add, [a, b], {"auto_broadcast": "bidirectional"})


def test_add_s32():
    a = np.array([[1, 2], [3, 4]], np.int32)
    b = np.array([10, -20], np.int32)
    got = ev1(OpKind.Add, [a, b])
    assert got.dtype == np.int32
    assert got.tolist() == [[11, -18], [13, -16]]


def test_greater_equal_outputs_boolean():
    a = np.array([[1.0, 2.0, 3.0]], np.float32)
    b = np.array([[2.0], [1.0]], np.float32)
    got = ev1(OpKind.GreaterEqual, [a, b], out_dtypes=[DataType.boolean])
    assert got.dtype == np.bool_
    assert got.tolist() == [[False, True, True], [True, True, True]]


def test_pow_legacy_two_input_form():
    a, b = rand(2, 3, lo=0.1, hi=2), rand(3, lo=-2, hi=2)
    close(ev1(OpKind.Pow, [a, b]), _broadcast_loop(lambda u, v: u ** v, a, b))


def test_select_broadcasts_cond_one_way():
    cond = np.array([True, False, True])
    a, b = rand(2, 1, 3), rand(4, 1)
    want = np.empty((2, 4, 3))
    for i, j, k in np.ndindex(2, 4, 3):
        want[i, j, k] = a[i, 0, k] if cond[k] else b[j, 0]
    close(ev1(OpKind.Select, [cond, a, b], out_dtypes=[DataType.f32]), want)
    with pytest.raises(GraphError, match=r"op 7 \(Select\).*cond"):
        ev(OpKind.Select, [np.ones((5, 2, 4, 3), bool), a, b], out_dtypes=[DataType.f32])


# --------------------------------------------------------------------------- bias add / prelu

@pytest.mark.parametrize("fmt", ["NCX", "NXC", None])
def test_bias_add(fmt):
    x = rand(2, 3, 4, 5)
    c_axis = 1 if fmt == "NCX" else 3
    bias = rand(x.shape[c_axis])
    want = np.empty(x.shape)
    for idx in np.ndindex(*x.shape):
        want[idx] = x[idx] + bias[idx[c_axis]]
    attrs = {} if fmt is None else {"data_format": fmt}
    close(ev1(OpKind.BiasAdd, [x, bias], attrs), want)
    with pytest.raises(GraphError, match=r"op 7 \(BiasAdd\).*bias length"):
        ev(OpKind.BiasAdd, [x, rand(7)], attrs)


@pytest.mark.parametrize("fmt,per_channel", [("NCX", True), ("NXC", True), ("NCX", False), (None, None)])
def test_prelu_1d_slope(fmt, per_channel):
    x = rand(2, 3, 4, 3)
    axis = 3 if (fmt != "NCX" or per_channel is False) else 1
    slope = rand(x.shape[axis])
    want = np.empty(x.shape)
    for idx in np.ndindex(*x.shape):
        want[idx] = x[idx] if x[idx] >= 0 else slope[idx[axis]] * x[idx]
    attrs = {}
    if fmt is not None:
        attrs = {"data_format": fmt, "per_channel_broadcast": per_channel}
    close(ev1(OpKind.PReLU, [x, slope], attrs), want)


def test_prelu_nd_slope_broadcasts_from_the_right():
    x, slope = rand(2, 3, 4), rand(3, 1)
    want = np.where(x >= 0, x, np.broadcast_to(slope, x.shape) * x)
    close(ev1(OpKind.PReLU, [x, slope]), want)


# --------------------------------------------------------------------------- matmul

def _matmul_loop(a, b):
    m, k = a.shape
    k2, n = b.shape
    assert k == k2
    return np.array([[sum(float(a[i, p]) * float(b[p, j]) for p in range(k)) for j in range(n)]
                     for i in range(m)])


def test_matmul_2d_with_transposes_and_bias():
    a, b, bias = rand(4, 3), rand(5, 3), rand(5)
    want = _matmul_loop(a, b.T) + bias
    close(ev1(OpKind.MatMul, [a, b, bias], {"transpose_b": True}), want)
    close(ev1(OpKind.MatMul, [a.T.copy(), b.T.copy()], {"transpose_a": True}), _matmul_loop(a, b.T))


def test_matmul_batch_broadcast():
    a, b = rand(2, 1, 3, 4), rand(3, 4, 2)
    got = ev1(OpKind.MatMul, [a, b])
    assert got.shape == (2, 3, 3, 2)
    for i, j in np.ndindex(2, 3):
        close(got[i, j], _matmul_loop(a[i, 0], b[j]))


def test_matmul_1d_operands():
    v, m, w = rand(3), rand(3, 4), rand(4)
    close(ev1(OpKind.MatMul, [v, m]), _matmul_loop(v[None, :], m)[0])
    close(ev1(OpKind.MatMul, [m, w]), _matmul_loop(m, w[:, None])[:, 0])
    dot = ev1(OpKind.MatMul, [w, w], {"transpose_a": True, "transpose_b": True})
    assert dot.shape == ()
    close(dot, sum(float(x) * float(x) for x in w))
    batched = ev1(OpKind.MatMul, [v, rand(2, 3, 5)])
    assert batched.shape == (2, 5)


def test_matmul_bad_shapes():
    with pytest.raises(GraphError, match=r"op 7 \(MatMul\): incompatible shapes"):
        ev(OpKind.MatMul, [rand(2, 3), rand(4, 2)])
    with pytest.raises(GraphError, match=r"op 7 \(MatMul\): bias shape"):
        ev(OpKind.MatMul, [rand(2, 3), rand(3, 4), rand(3)])
    with pytest.raises(GraphError, match=r"op 7 \(MatMul\): expects 2 or 3 inputs, got 1"):
        ev(OpKind.MatMul, [rand(2, 3)])


# --------------------------------------------------------------------------- convolution

def conv_loop(x, w, strides, dil, pb, pe, groups, bias=None):
    """Direct convolution, NCX src and OIX weights (OC, IC/groups, K...)."""
    n, c = x.shape[:2]
    oc, icg = w.shape[:2]
    ks, sp = w.shape[2:], x.shape[2:]
    out_sp = [(i + b + e - (d * (k - 1) + 1)) // s + 1 for i, b, e, d, k, s in zip(sp, pb, pe, dil, ks, strides)]
    ocg = oc // groups
    y = np.zeros((n, oc) + tuple(out_sp))
    for b_, o_c in itertools.product(range(n), range(oc)):
        g = o_c // ocg
        for o in np.ndindex(*out_sp):
            acc = 0.0 if bias is None else float(bias[o_c])
            for ic in range(icg):
                for k in np.ndindex(*ks):
                    pos = [oo * s + kk * d - p for oo, s, kk, d, p in zip(o, strides, k, dil, pb)]
                    if all(0 <= q < m for q, m in zip(pos, sp)):
                        acc += float(x[(b_, g * icg + ic) + tuple(pos)]) * float(w[(o_c, ic) + k])
            y[(b_, o_c) + o] = acc
    return y


def conv_transpose_loop(x, w, strides, dil, pb, pe, groups, opad, bias=None):
    """Transposed convolution, NCX src and canonical OIX weights (OC/groups, IC, K...)."""
    n, c = x.shape[:2]
    ocg = w.shape[0]
    icg = c // groups
    ks, sp = w.shape[2:], x.shape[2:]
    out_sp = [s * (i - 1) + d * (k - 1) + 1 + op - b - e
              for i, s, d, k, op, b, e in zip(sp, strides, dil, ks, opad, pb, pe)]
    y = np.zeros((n, ocg * groups) + tuple(out_sp))
    if bias is not None:
        y += bias.reshape((1, -1) + (1,) * len(sp))
    for b_, ic in itertools.product(range(n), range(c)):
        g = ic // icg
        for i in np.ndindex(*sp):
            for o_c, k in itertools.product(range(ocg), np.ndindex(*ks)):
                pos = [ii * s + kk * d - p for ii, s, kk, d, p in zip(i, strides, k, dil, pb)]
                if all(0 <= q < m for q, m in zip(pos, out_sp)):
                    y[(b_, g * ocg + o_c) + tuple(pos)] += float(x[(b_, ic) + i]) * float(w[(o_c, ic) + k])
    return y


def to_nxc(a):
    return np.moveaxis(a, 1, -1).copy()


def from_nxc(a):
    return np.moveaxis(a, -1, 1)


def oix_to(w, fmt):
    nd = w.ndim
    sp = tuple(range(2, nd))
    perm = {"OIX": (0, 1) + sp, "XIO": sp + (1, 0), "XOI": sp + (0, 1), "IOX": (1, 0) + sp}[fmt]
    return np.transpose(w, perm).copy()


CONV_CASES = [
    # spatial, c, oc, kernel, strides, dilations, pads_begin, pads_end, groups
    ((7,), 4, 6, (3,), (2,), (1,), (1,), (0,), 2),
    ((6, 5), 3, 4, (3, 2), (1, 2), (1, 1), (1, 0), (1, 1), 1),
    ((7, 6), 4, 4, (2, 3), (2, 1), (2, 1), (0, 2), (1, 0), 4),
    ((4, 5, 4), 2, 3, (2, 2, 3), (1, 2, 1), (1, 1, 2), (0, 1, 1), (1, 0, 2), 1),
]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("fmt,wfmt", [("NCX", "OIX"), ("NXC", "XIO"), ("NCX", "XIO"), ("NXC", "OIX")])
@pytest.mark.parametrize("with_bias", [False, True])
def test_convolution_against_loops(case, fmt, wfmt, with_bias):
    sp, c, oc, ks, s, d, pb, pe, g = case
    x = rand(2, c, *sp)
    w = rand(oc, c // g, *ks)
    bias = rand(oc) if with_bias else None
    want = conv_loop(x, w, s, d, pb, pe, g, bias)
    attrs = {"strides": list(s), "dilations": list(d), "pads_begin": list(pb), "pads_end": list(pe),
             "groups": g, "data_format": fmt, "weights_format": wfmt}
    xin = to_nxc(x) if fmt == "NXC" else x
    ins = [xin, oix_to(w, wfmt)] + ([bias] if with_bias else [])
    got = ev1(OpKind.Convolution, ins, attrs)
    close(from_nxc(got) if fmt == "NXC" else got, want, rtol=1e-5, atol=1e-4)


def test_convolution_defaults_are_nxc_and_xio():
    x, w = rand(1, 5, 5, 3), rand(3, 3, 3, 2)     # NXC src, XIO weights
    attrs = {"strides": [1, 1], "dilations": [1, 1], "pads_begin": [0, 0], "pads_end": [0, 0]}
    want = conv_loop(from_nxc(x), np.transpose(w, (3, 2, 0, 1)), [1, 1], [1, 1], [0, 0], [0, 0], 1)
    close(from_nxc(ev1(OpKind.Convolution, [x, w], attrs)), want, atol=1e-4)


@pytest.mark.parametrize("auto_pad,stride,want_out", [
    ("same_upper", 1, 7), ("same_lower", 1, 7), ("SAME_UPPER", 2, 4), ("valid", 2, 3), ("None", 1, 5)])
def test_convolution_auto_pad(auto_pad, stride, want_out):
    x, w = rand(1, 2, 7), rand(3, 2, 3)
    attrs = {"strides": [stride], "dilations": [1], "pads_begin": [0], "pads_end": [0],
             "data_format": "NCX", "weights_format": "OIX", "auto_pad": auto_pad}
    got = ev1(OpKind.Convolution, [x, w], attrs)
    assert got.shape == (1, 3, want_out)
    n = 7
    need = max((-(-n // stride) - 1) * stride + 3 - n, 0)
    if auto_pad.lower() in ("valid", "none"):
        pb = pe = 0
    else:
        pb = need // 2 if auto_pad.lower() == "same_upper" else (need + 1) // 2
        pe = need - pb
    close(got, conv_loop(x, w, [stride], [1], [pb], [pe], 1), atol=1e-4)


def test_convolution_errors():
    attrs = {"strides": [1, 1], "dilations": [1, 1], "pads_begin": [0, 0], "pads_end": [0, 0],
             "data_format": "NCX", "weights_format": "OIX"}
    with pytest.raises(GraphError, match=r"op 7 \(Convolution\).*channels"):
        ev(OpKind.Convolution, [rand(1, 4, 5, 5), rand(2, 3, 3, 3)], attrs)
    with pytest.raises(GraphError, match=r"op 7 \(Convolution\): missing required attribute 'dilations'"):
        ev(OpKind.Convolution, [rand(1, 3, 5, 5), rand(2, 3, 3, 3)],
           {k: v for k, v in attrs.items() if k != "dilations"})
    with pytest.raises(GraphError, match=r"'strides'.*2 entries"):
        ev(OpKind.Convolution, [rand(1, 3, 5, 5), rand(2, 3, 3, 3)], {**attrs, "strides": [1]})
    with pytest.raises(GraphError, match="must be non-negative"):
        ev(OpKind.Convolution, [rand(1, 3, 5, 5), rand(2, 3, 3, 3)], {**attrs, "pads_end": [0, -1]})
    with pytest.raises(GraphError, match="weights_format"):
        ev(OpKind.Convolution, [rand(1, 3, 5, 5), rand(2, 3, 3, 3)], {**attrs, "weights_format": "IOX"})


CONVT_CASES = [
    # spatial, c, oc, kernel, strides, dilations, pads_begin, pads_end, groups, output_padding
    ((4,), 4, 6, (3,), (2,), (1,), (1,), (0,), 2, (1,)),
    ((3, 4), 2, 3, (3, 2), (2, 1), (1, 2), (1, 0), (0, 1), 1, (1, 0)),
    ((3, 3), 4, 2, (2, 2), (1, 2), (1, 1), (0, 0), (0, 0), 2, (0, 0)),
    ((2, 3, 2), 2, 2, (2, 2, 2), (2, 1, 2), (1, 1, 1), (0, 1, 0), (1, 0, 0), 1, (0, 0, 1)),
]


@pytest.mark.parametrize("case", CONVT_CASES)
@pytest.mark.parametrize("fmt,wfmt", [("NCX", "OIX"), ("NXC", "XIO"), ("NCX", "IOX"), ("NXC", "XOI")])
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv_transpose_against_loops(case, fmt, wfmt, with_bias):
    sp, c, oc, ks, s, d, pb, pe, g, opad = case
    x = rand(2, c, *sp)
    w = rand(oc // g, c, *ks)                     # canonical OIX: (OC/groups, IC, K...)
    bias = rand(oc) if with_bias else None
    want = conv_transpose_loop(x, w, s, d, pb, pe, g, opad, bias)
    attrs = {"strides": list(s), "dilations": list(d), "pads_begin": list(pb), "pads_end": list(pe),
             "groups": g, "data_format": fmt, "weights_format": wfmt, "output_padding": list(opad)}
    xin = to_nxc(x) if fmt == "NXC" else x
    ins = [xin, oix_to(w, wfmt)] + ([bias] if with_bias else [])
    got = ev1(OpKind.ConvTranspose, ins, attrs)
    close(from_nxc(got) if fmt == "NXC" else got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_transpose_is_the_adjoint_of_convolution(groups):
    """<conv(x, w), y> == <x, conv_transpose(y, w)> with w read as IOX by the transpose."""
    x, w = rand(2, 4, 7, 6), rand(6, 4 // groups, 3, 2)
    common = {"strides": [2, 1], "dilations": [1, 2], "pads_begin": [1, 0], "pads_end": [1, 1],
              "groups": groups, "data_format": "NCX"}
    y_shape = ev1(OpKind.Convolution, [x, w], {**common, "weights_format": "OIX"}).shape
    y = rand(*y_shape)
    conv = ev1(OpKind.Convolution, [x, w], {**common, "weights_format": "OIX"})
    back = ev1(OpKind.ConvTranspose, [y, w], {**common, "weights_format": "IOX", "output_padding": [0, 0]})
    assert back.shape == x.shape
    close(np.vdot(conv.astype(np.float64), y), np.vdot(x.astype(np.float64), back), rtol=1e-4)


def test_conv_transpose_same_upper_gives_stride_times_input():
    x, w = rand(1, 2, 5), rand(3, 2, 4)
    attrs = {"strides": [2], "dilations": [1], "pads_begin": [0], "pads_end": [0],
             "data_format": "NCX", "weights_format": "OIX", "auto_pad": "same_upper"}
    got = ev1(OpKind.ConvTranspose, [x, w], attrs)
    assert got.shape == (1, 3, 10)
    close(got, conv_transpose_loop(x, w, [2], [1], [1], [1], 1, [0]), atol=1e-4)


# --------------------------------------------------------------------------- pooling

def pool_loop(x, kernel, strides, dil, pb, pe, kind, exclude_pad=False, rounding="floor"):
    """NCX pooling by loops. oneDNN runs rounding_type=ceil AvgPool as an exclude-padding average."""
    sp = x.shape[2:]
    out_sp = []
    for i, k, s, d, b, e in zip(sp, kernel, strides, dil, pb, pe):
        span = i + b + e - (d * (k - 1) + 1)
        out_sp.append((math.ceil(span / s) if rounding == "ceil" else span // s) + 1)
    y = np.zeros(x.shape[:2] + tuple(out_sp))
    for n, c in np.ndindex(*x.shape[:2]):
        for o in np.ndindex(*out_sp):
            vals = []
            for k in np.ndindex(*kernel):
                pos = [oo * s + kk * d - b for oo, s, kk, d, b in zip(o, strides, k, dil, pb)]
                if all(0 <= q < m for q, m in zip(pos, sp)):
                    vals.append(float(x[(n, c) + tuple(pos)]))
            if kind == "max":
                y[(n, c) + o] = max(vals)
            else:
                denom = len(vals) if (exclude_pad or rounding == "ceil") else math.prod(kernel)
                y[(n, c) + o] = sum(vals) / denom
    return y


POOL_CASES = [
    # spatial, kernel, strides, dilations, pads_begin, pads_end, rounding
    ((9,), (3,), (2,), (1,), (1,), (1,), "floor"),
    ((7, 6), (3, 2), (2, 2), (1, 1), (1, 0), (1, 1), "floor"),
    ((7, 6), (3, 2), (2, 2), (1, 1), (1, 0), (0, 0), "ceil"),
    ((8, 7), (2, 3), (3, 2), (2, 1), (0, 1), (1, 1), "ceil"),
    ((5, 4, 6), (2, 2, 3), (2, 1, 2), (1, 1, 1), (1, 0, 1), (0, 1, 1), "floor"),
    ((5, 4, 6), (2, 3, 2), (2, 2, 2), (1, 1, 1), (0, 1, 0), (0, 0, 0), "ceil"),
]


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
def test_maxpool_against_loops(case, fmt):
    sp, k, s, d, pb, pe, rounding = case
    x = rand(2, 3, *sp)
    attrs = {"kernel": list(k), "strides": list(s), "dilations": list(d), "pads_begin": list(pb),
             "pads_end": list(pe), "rounding_type": rounding, "data_format": fmt}
    got = ev1(OpKind.MaxPool, [to_nxc(x) if fmt == "NXC" else x], attrs)
    close(from_nxc(got) if fmt == "NXC" else got, pool_loop(x, k, s, d, pb, pe, "max", rounding=rounding))


@pytest.mark.parametrize("case", [c for c in POOL_CASES if all(v == 1 for v in c[3])])
@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
@pytest.mark.parametrize("exclude_pad", [False, True])
def test_avgpool_against_loops(case, fmt, exclude_pad):
    sp, k, s, _, pb, pe, rounding = case
    x = rand(2, 3, *sp)
    attrs = {"kernel": list(k), "strides": list(s), "pads_begin": list(pb), "pads_end": list(pe),
             "exclude_pad": exclude_pad, "rounding_type": rounding, "data_format": fmt}
    got = ev1(OpKind.AvgPool, [to_nxc(x) if fmt == "NXC" else x], attrs)
    want = pool_loop(x, k, s, [1] * len(k), pb, pe, "avg", exclude_pad, rounding)
    close(from_nxc(got) if fmt == "NXC" else got, want)


def test_avgpool_small_hand_example():
    x = np.arange(1, 6, dtype=np.float32).reshape(1, 1, 5)      # [1 2 3 4 5]
    base = {"kernel": [2], "strides": [2], "pads_begin": [1], "pads_end": [0], "data_format": "NCX"}
    # windows over [pad 1 2 3 4 5]: (pad,1) (2,3) (4,5)
    close(ev1(OpKind.AvgPool, [x], {**base, "exclude_pad": False}), [[[0.5, 2.5, 4.5]]])
    close(ev1(OpKind.AvgPool, [x], {**base, "exclude_pad": True}), [[[1.0, 2.5, 4.5]]])
    # ceil: a 4th window (pad past the end) is not created here; with pads_end 1 it is: (.., 5, pad)
    got = ev1(OpKind.AvgPool, [x], {**base, "pads_begin": [0], "exclude_pad": False, "rounding_type": "ceil"})
    close(got, [[[1.5, 3.5, 5.0]]])
    close(ev1(OpKind.MaxPool, [x], {**base, "pads_begin": [0], "rounding_type": "ceil"}), [[[2, 4, 5]]])


def test_pool_defaults_and_auto_pad():
    x = rand(1, 5, 5, 2)                          # NXC by default
    attrs = {"kernel": [3, 3], "strides": [2, 2], "pads_begin": [0, 0], "pads_end": [0, 0],
             "auto_pad": "same_upper"}
    got = ev1(OpKind.MaxPool, [x], attrs)
    assert got.shape == (1, 3, 3, 2)
    close(from_nxc(got), pool_loop(from_nxc(x), [3, 3], [2, 2], [1, 1], [1, 1], [1, 1], "max"))
    with pytest.raises(GraphError, match=r"op 7 \(AvgPool\): missing required attribute 'exclude_pad'"):
        ev(OpKind.AvgPool, [x], attrs)


# --------------------------------------------------------------------------- normalization

@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
def test_batchnorm_inference(fmt):
    x = rand(2, 3, 4, 5)
    c_axis = 1 if fmt == "NCX" else 3
    c = x.shape[c_axis]
    gamma, beta, mean, var = rand(c), rand(c), rand(c), rand(c, lo=0.1, hi=2)
    want = np.empty(x.shape)
    for idx in np.ndindex(*x.shape):
        ch = idx[c_axis]
        want[idx] = gamma[ch] * (x[idx] - mean[ch]) / math.sqrt(var[ch] + 1e-3) + beta[ch]
    got = ev1(OpKind.BatchNormInference, [x, gamma, beta, mean, var], {"epsilon": 1e-3, "data_format": fmt})
    close(got, want)
    with pytest.raises(GraphError, match=r"op 7 \(BatchNormInference\): expects 5 inputs, got 4"):
        ev(OpKind.BatchNormInference, [x, gamma, beta, mean], {"epsilon": 1e-3})


def _moments(rows):
    rows = [float(v) for v in rows]
    mu = sum(rows) / len(rows)
    return mu, sum((v - mu) ** 2 for v in rows) / len(rows)


@pytest.mark.parametrize("begin", [-1, 1, -2])
def test_layernorm_with_stats(begin):
    x = rand(2, 3, 4)
    b = begin % 3
    norm_shape = x.shape[b:]
    gamma, beta = rand(*norm_shape), rand(*norm_shape)
    flat_x = x.reshape(int(np.prod(x.shape[:b])), -1)
    want, means, vars_ = np.empty(flat_x.shape), [], []
    for r, row in enumerate(flat_x):
        mu, var = _moments(row)
        means.append(mu)
        vars_.append(var)
        want[r] = (row - mu) / math.sqrt(var + 1e-5) * gamma.reshape(-1) + beta.reshape(-1)
    gamma_in = gamma.reshape(-1) if b == 2 else gamma
    beta_in = beta.reshape(-1) if b == 2 else beta
    outs = ev(OpKind.LayerNorm, [x, gamma_in, beta_in], {"begin_norm_axis": begin},
              out_shapes=[x.shape, x.shape[:b], x.shape[:b]])
    close(outs[0], want.reshape(x.shape))
    close(outs[1], np.reshape(means, x.shape[:b]))
    close(outs[2], np.reshape(vars_, x.shape[:b]))


def test_layernorm_without_affine_and_defaults():
    x = rand(3, 5)
    want = np.array([[(v - _moments(r)[0]) / math.sqrt(_moments(r)[1] + 1e-5) for v in r] for r in x])
    close(ev1(OpKind.LayerNorm, [x], {"use_affine": False, "keep_stats": False}), want)
    with pytest.raises(GraphError, match=r"op 7 \(LayerNorm\): keep_stats=True \(the default\) needs 3 outputs"):
        ev(OpKind.LayerNorm, [x], {"use_affine": False})
    with pytest.raises(GraphError, match="use_affine=True needs gamma and beta"):
        ev(OpKind.LayerNorm, [x], {"keep_stats": False})


@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
def test_groupnorm(fmt):
    x = rand(2, 6, 3, 2)                          # NCX view
    groups = 3
    gamma, beta = rand(6), rand(6)
    want = np.empty(x.shape)
    means = np.empty((2, groups))
    for n, g in np.ndindex(2, groups):
        chans = range(g * 2, g * 2 + 2)
        mu, var = _moments(x[n, g * 2:g * 2 + 2].reshape(-1))
        means[n, g] = mu
        for ch in chans:
            want[n, ch] = (x[n, ch] - mu) / math.sqrt(var + 1e-5) * gamma[ch] + beta[ch]
    xin = to_nxc(x) if fmt == "NXC" else x
    outs = ev(OpKind.GroupNorm, [xin, gamma, beta], {"groups": groups, "data_format": fmt},
              out_shapes=[xin.shape, (2, groups), (2, groups)])
    close(from_nxc(outs[0]) if fmt == "NXC" else outs[0], want)
    close(outs[1], means)
    with pytest.raises(GraphError, match="not divisible"):
        ev(OpKind.GroupNorm, [xin, gamma, beta], {"groups": 4, "data_format": fmt, "keep_stats": False})


def test_rmsnorm():
    x, gamma = rand(2, 3, 8), rand(8)
    want = np.empty(x.shape)
    rrms = np.empty((2, 3))
    for i, j in np.ndindex(2, 3):
        ms = sum(float(v) ** 2 for v in x[i, j]) / 8
        rrms[i, j] = 1 / math.sqrt(ms + 1e-6)
        want[i, j] = x[i, j] * rrms[i, j] * gamma
    outs = ev(OpKind.RMSNorm, [x, gamma], {"epsilon": 1e-6}, out_shapes=[x.shape, (2, 3)])
    close(outs[0], want)
    close(outs[1], rrms)
    close(ev1(OpKind.RMSNorm, [x]), want / gamma, rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- softmax

def _softmax_loop(x, axis, log=False):
    y = np.empty(x.shape)
    moved = np.moveaxis(x, axis, -1)
    out = np.moveaxis(y, axis, -1)
    for idx in np.ndindex(*moved.shape[:-1]):
        row = [float(v) for v in moved[idx]]
        m = max(row)
        s = sum(math.exp(v - m) for v in row)
        out[idx] = [(v - m - math.log(s)) if log else math.exp(v - m) / s for v in row]
    return y


@pytest.mark.parametrize("axis", [None, 0, 2, -1, -3])
def test_softmax(axis):
    x = rand(3, 4, 5) * 4
    attrs = {} if axis is None else {"axis": axis}
    close(ev1(OpKind.SoftMax, [x], attrs), _softmax_loop(x, 1 if axis is None else axis))


@pytest.mark.parametrize("axis", [None, 1, -2])
def test_logsoftmax(axis):
    x = rand(3, 4, 5) * 4
    attrs = {} if axis is None else {"axis": axis}
    close(ev1(OpKind.LogSoftmax, [x], attrs), _softmax_loop(x, -1 if axis is None else axis, log=True))


def test_softmax_inf_as_zero_and_stats():
    x = np.array([[-np.inf, -np.inf, -np.inf], [0.0, 1.0, -np.inf]], np.float32)
    got = ev1(OpKind.SoftMax, [x], {"axis": 1, "mode": "inf_as_zero"})
    close(got, [[0, 0, 0], [1 / (1 + math.e), math.e / (1 + math.e), 0]])
    assert np.isnan(ev1(OpKind.SoftMax, [x], {"axis": 1})[0]).all()
    y = rand(2, 3)
    dst, stats = ev(OpKind.SoftMax, [y], {"axis": 1}, out_shapes=[(2, 3), (2, 1)],
                    out_dtypes=[DataType.f32, DataType.f32])
    close(stats[:, 0], [max(r) + math.log(sum(math.exp(v - max(r)) for v in r)) for r in y.tolist()])


# --------------------------------------------------------------------------- reductions

REDUCE_CASES = [
    (OpKind.ReduceSum, sum),
    (OpKind.ReduceMean, lambda v: sum(v) / len(v)),
    (OpKind.ReduceMax, max),
    (OpKind.ReduceMin, min),
    (OpKind.ReduceProd, math.prod),
    (OpKind.ReduceL1, lambda v: sum(abs(a) for a in v)),
    (OpKind.ReduceL2, lambda v: math.sqrt(sum(a * a for a in v))),
]


def _reduce_loop(fn, x, axes, keep):
    axes = sorted(a % x.ndim for a in axes)
    rest = [i for i in range(x.ndim) if i not in axes]
    out_shape = [1 if i in axes else x.shape[i] for i in range(x.ndim)] if keep else [x.shape[i] for i in rest]
    out = np.empty([x.shape[i] for i in rest])
    for idx in np.ndindex(*out.shape):
        vals = []
        for red in np.ndindex(*[x.shape[a] for a in axes]):
            full = [0] * x.ndim
            for i, v in zip(rest, idx):
                full[i] = v
            for a, v in zip(axes, red):
                full[a] = v
            vals.append(float(x[tuple(full)]))
        out[idx] = fn(vals)
    return out.reshape(out_shape)


@pytest.mark.parametrize("kind,fn", REDUCE_CASES, ids=lambda c: getattr(c, "value", None))
@pytest.mark.parametrize("axes,keep", [([1], False), ([0, 2], True), ([-1], False), ([0, 1, 2], False)])
def test_reduce_axes_attribute(kind, fn, axes, keep):
    x = rand(3, 4, 2, lo=0.5, hi=1.5) if kind is OpKind.ReduceProd else rand(3, 4, 2)
    close(ev1(kind, [x], {"axes": axes, "keep_dims": keep}), _reduce_loop(fn, x, axes, keep))


def test_reduce_axes_input_and_errors():
    x = rand(2, 3, 4)
    axes = np.array([2, -3], np.int32)
    close(ev1(OpKind.ReduceSum, [x, axes], {"keep_dims": True}), _reduce_loop(sum, x, [2, 0], True))
    with pytest.raises(GraphError, match=r"op 7 \(ReduceMax\): exactly one of the attribute 'axes'"):
        ev(OpKind.ReduceMax, [x])
    with pytest.raises(GraphError, match=r"exactly one of the attribute 'axes'"):
        ev(OpKind.ReduceMax, [x, axes], {"axes": [0]})
    close(ev1(OpKind.ReduceMin, [x, np.array([], np.int32)]), x)     # empty axes input: identity
    with pytest.raises(GraphError, match="repeat"):
        ev(OpKind.ReduceMean, [x], {"axes": [1, -2]})
    with pytest.raises(GraphError, match="out of range"):
        ev(OpKind.ReduceMean, [x], {"axes": [3]})


# --------------------------------------------------------------------------- data movement

def test_static_reshape():
    x = rand(2, 3, 4)
    got = ev1(OpKind.StaticReshape, [x], {"shape": [0, -1], "special_zero": True})
    assert got.shape == (2, 12) and np.array_equal(got.reshape(-1), x.reshape(-1))
    assert ev1(OpKind.StaticReshape, [x], {"shape": [0, -1, 2], "special_zero": True}).shape == (2, 6, 2)
    empty = np.zeros((0, 3), np.float32)
    assert ev1(OpKind.StaticReshape, [empty], {"shape": [0, 5], "special_zero": False}).shape == (0, 5)
    with pytest.raises(GraphError, match=r"op 7 \(StaticReshape\): cannot reshape"):
        ev(OpKind.StaticReshape, [x], {"shape": [4, 0, 6], "special_zero": False})
    with pytest.raises(GraphError, match=r"cannot reshape"):
        ev(OpKind.StaticReshape, [x], {"shape": [3, 0, -1], "special_zero": True})
    with pytest.raises(GraphError, match="more than one -1"):
        ev(OpKind.StaticReshape, [x], {"shape": [-1, -1], "special_zero": True})
    with pytest.raises(GraphError, match="special_zero"):
        ev(OpKind.StaticReshape, [x], {"shape": [24]})


def test_static_reshape_special_zero_copies_src_dims():
    x = rand(2, 3, 4)
    got = ev1(OpKind.StaticReshape, [x], {"shape": [0, 0, 2, 2], "special_zero": True})
    assert got.shape == (2, 3, 2, 2)
    assert np.array_equal(got.reshape(-1), x.reshape(-1))


def test_static_transpose():
    x = rand(2, 3, 4)
    got = ev1(OpKind.StaticTranspose, [x], {"order": [2, -3, 1]})
    assert got.shape == (4, 2, 3)
    for i, j, k in np.ndindex(2, 3, 4):
        assert got[k, i, j] == x[i, j, k]
    assert ev1(OpKind.StaticTranspose, [x], {"order": []}).shape == (4, 3, 2)
    with pytest.raises(GraphError, match="permutation"):
        ev(OpKind.StaticTranspose, [x], {"order": [0, 0, 1]})


def test_concat():
    a, b, c = rand(2, 1, 3), rand(2, 4, 3), rand(2, 2, 3)
    got = ev1(OpKind.Concat, [a, b, c], {"axis": -2})
    assert got.shape == (2, 7, 3)
    assert np.array_equal(got[:, 0], a[:, 0]) and np.array_equal(got[:, 1:5], b) and np.array_equal(got[:, 5:], c)
    with pytest.raises(GraphError, match="do not match"):
        ev(OpKind.Concat, [a, rand(3, 1, 3)], {"axis": 1})


def test_typecast_and_reorder():
    x = rand(3, 3)
    h = ev1(OpKind.TypeCast, [x], out_dtypes=[DataType.f16])
    assert h.dtype == np.float16 and np.array_equal(h, x.astype(np.float16))
    back = ev1(OpKind.TypeCast, [h], out_dtypes=[DataType.f32])
    assert back.dtype == np.float32
    r = ev1(OpKind.Reorder, [x])
    assert np.array_equal(r, x) and r is not x
    with pytest.raises(GraphError, match=r"op 7 \(TypeCast\): input and output must have different"):
        ev(OpKind.TypeCast, [x])


def test_dropout_inference_is_identity_with_mask():
    x = rand(2, 5)
    seed, offset, p = np.array(1, np.int64), np.array(2, np.int64), np.array(0.5, np.float32)
    dst, mask = ev(OpKind.Dropout, [x, seed, offset, p], out_shapes=[x.shape, x.shape],
                   out_dtypes=[DataType.f32, DataType.u8])
    assert np.array_equal(dst, x) and mask.dtype == np.uint8 and (mask == 1).all()
    assert np.array_equal(ev1(OpKind.Dropout, [x]), x)


def test_end_has_no_outputs_and_gen_index():
    assert ev(OpKind.End, [rand(2)], out_shapes=()) == []
    got = ev1(OpKind.GenIndex, [rand(2, 3)], {"axis": 1}, out_dtypes=[DataType.s32])
    assert got.dtype == np.int32 and got.tolist() == [[0, 1, 2], [0, 1, 2]]


# --------------------------------------------------------------------------- interpolate

def test_interpolate_nearest_matches_onednn_unit_test():
    # oneDNN tests/.../test_interpolate.cpp, InterpolateForwardNearest
    x = np.array([-2.0, -1.5, -1.0, -0.5], np.float32).reshape(1, 1, 2, 2)
    got = ev1(OpKind.Interpolate, [x], {"mode": "nearest", "sizes": [3, 3], "data_format": "NCX",
                                        "coordinate_transformation_mode": "half_pixel"})
    close(got.reshape(-1), [-2.0, -1.5, -1.5, -1.0, -0.5, -0.5, -1.0, -0.5, -0.5])


def _linear_1d(row, out_n, align):
    n = len(row)
    res = []
    for o in range(out_n):
        s = (o * (n - 1) / (out_n - 1) if out_n > 1 else 0.0) if align else (o + 0.5) * n / out_n - 0.5
        s = min(max(s, 0.0), n - 1)
        lo = int(math.floor(s))
        hi = min(lo + 1, n - 1)
        res.append(row[lo] * (1 - (s - lo)) + row[hi] * (s - lo))
    return res


@pytest.mark.parametrize("mode", ["linear", "bilinear"])
@pytest.mark.parametrize("ctm", ["half_pixel", "align_corners"])
@pytest.mark.parametrize("fmt", ["NCX", "NXC"])
def test_interpolate_bilinear(mode, ctm, fmt):
    x = rand(1, 2, 3, 4)
    sizes = [5, 3]
    tmp = np.array([[[_linear_1d(list(map(float, r)), sizes[1], ctm == "align_corners") for r in img]
                     for img in ch] for ch in x])          # along W
    want = np.moveaxis(np.array([[[_linear_1d(list(col), sizes[0], ctm == "align_corners")
                                   for col in np.asarray(img).T] for img in ch] for ch in tmp]), -1, -2)
    attrs = {"mode": mode, "sizes": sizes, "coordinate_transformation_mode": ctm, "data_format": fmt}
    got = ev1(OpKind.Interpolate, [to_nxc(x) if fmt == "NXC" else x], attrs)
    close(from_nxc(got) if fmt == "NXC" else got, want)


def test_interpolate_sizes_input_and_scales():
    x = rand(1, 1, 4)
    by_input = ev1(OpKind.Interpolate, [x, np.array([8], np.int32)],
                   {"mode": "nearest", "sizes": [8], "data_format": "NCX"})
    by_scale = ev1(OpKind.Interpolate, [x], {"mode": "nearest", "scales": [2.0], "data_format": "NCX"})
    close(by_input, np.repeat(x, 2, axis=2))
    close(by_scale, by_input)
    assert ev1(OpKind.Interpolate, [x], {"mode": "linear", "scales": [1.6], "data_format": "NCX"}).shape == (1, 1, 6)
    for attrs in ({}, {"sizes": [8], "scales": [2.0]}):
        with pytest.raises(GraphError, match=r"op 7 \(Interpolate\): exactly one of .*'sizes' and 'scales'"):
            ev(OpKind.Interpolate, [x], {"mode": "nearest", "data_format": "NCX", **attrs})
    with pytest.raises(GraphError, match="'mode'"):
        ev(OpKind.Interpolate, [x], {"mode": "cubic", "sizes": [8], "data_format": "NCX"})


# --------------------------------------------------------------------------- quantization

def test_quantize_dequantize_per_tensor():
    x = np.array([-1.0, 0.0, 0.25, 0.75, 1.25, 100.0, -100.0], np.float32)
    q = ev1(OpKind.Quantize, [x], {"scales": [0.5], "zps": [10]}, out_dtypes=[DataType.u8])
    assert q.dtype == np.uint8
    # x / 0.5 + 10 = [8, 10, 10.5, 11.5, 12.5, 210, -190] -> half to even, saturated
    assert q.tolist() == [8, 10, 10, 12, 12, 210, 0]
    d = ev1(OpKind.Dequantize, [q], {"scales": [0.5], "zps": [10]}, out_dtypes=[DataType.f32])
    assert d.dtype == np.float32
    close(d, [(v - 10) * 0.5 for v in q.tolist()])
    s8 = ev1(OpKind.Quantize, [x], {"scales": [0.5]}, out_dtypes=[DataType.s8])
    assert s8.tolist() == [-2, 0, 0, 2, 2, 127, -128]


def test_quantize_per_channel():
    x = rand(2, 3, 2)
    scales, zps = [0.1, 0.2, 0.05], [0, 3, -2]
    q = ev1(OpKind.Quantize, [x], {"qtype": "per_channel", "axis": 1, "scales": scales, "zps": zps},
            out_dtypes=[DataType.s8])
    want = np.empty(x.shape)
    for i, c, j in np.ndindex(*x.shape):
        want[i, c, j] = min(max(round(float(x[i, c, j]) / scales[c] + zps[c]), -128), 127)
    close(q, want)
    d = ev1(OpKind.Dequantize, [q], {"qtype": "per_channel", "axis": -2, "scales": scales, "zps": zps},
            out_dtypes=[DataType.f32])
    close(d, (want - np.array(zps).reshape(1, 3, 1)) * np.array(scales).reshape(1, 3, 1))
    with pytest.raises(GraphError, match="per_channel"):
        ev(OpKind.Quantize, [x], {"qtype": "per_channel", "scales": [0.1, 0.2]}, out_dtypes=[DataType.s8])
    with pytest.raises(GraphError, match="3 scales but 2 zero points"):
        ev(OpKind.Quantize, [x], {"qtype": "per_channel", "scales": scales, "zps": [0, 1]},
           out_dtypes=[DataType.s8])
    with pytest.raises(GraphError, match="per_tensor needs one scale"):
        ev(OpKind.Dequantize, [q], {"scales": scales}, out_dtypes=[DataType.f32])


# --------------------------------------------------------------------------- evaluate errors

def test_unimplemented_kind():
    x = rand(2)
    for kind in (OpKind.Wildcard, OpKind.MaxPoolBackward):
        op = make_op(kind, [x])
        with pytest.raises(GraphError, match=rf"^op 7 \({kind.value}\): the reference interpreter does "
                                             r"not implement this op$"):
            evaluate(op, [x])


def test_wrong_input_count_and_shape_mismatch():
    x = rand(2, 3)
    op = make_op(OpKind.Add, [x, x])
    with pytest.raises(GraphError, match=r"op 7 \(Add\): was given 1 input arrays for its 2 inputs"):
        evaluate(op, [x])
    with pytest.raises(GraphError, match=r"op 7 \(ReLU\): expects 1 inputs, got 2"):
        ev(OpKind.ReLU, [x, x])
    with pytest.raises(GraphError, match=r"op 7 \(Add\): input 1 \(tensor 1\) has shape \(3, 2\)"):
        evaluate(op, [x, x.T])
    bad_out = Op(3, OpKind.ReLU, [LogicalTensor(0, DataType.f32, (2, 3))], [LogicalTensor(1, DataType.f32, (3, 2))])
    with pytest.raises(GraphError, match=r"op 3 \(ReLU\): output 0 \(tensor 1\) has shape \(2, 3\)"):
        evaluate(bad_out, [x])


def test_supported_kinds_cover_the_brief():
    wanted = {"Abs", "Add", "Subtract", "Multiply", "Divide", "Maximum", "Minimum", "Pow", "SquaredDifference",
              "BiasAdd", "Clamp", "Elu", "Exp", "GELU", "HardSigmoid", "HardSwish", "LeakyReLU", "Log", "Mish",
              "ReLU", "Round", "Sigmoid", "SoftPlus", "Sqrt", "Square", "Tanh", "Reciprocal", "PReLU", "MatMul",
              "Convolution", "ConvTranspose", "MaxPool", "AvgPool", "BatchNormInference", "LayerNorm",
              "GroupNorm", "RMSNorm", "SoftMax", "LogSoftmax", "ReduceL1", "ReduceL2", "ReduceMax", "ReduceMean",
              "ReduceMin", "ReduceProd", "ReduceSum", "StaticReshape", "StaticTranspose", "Concat", "TypeCast",
              "Reorder", "Select", "Dropout", "GreaterEqual", "Interpolate", "End", "Quantize", "Dequantize"}
    assert wanted <= {k.value for k in SUPPORTED_KINDS}


# --------------------------------------------------------------------------- run

def _mlp_graph():
    """x(2,3) @ w(3,4) -> + b(4) -> ReLU -> SoftMax(axis=-1); tensor ids 0..7."""
    f32 = DataType.f32
    x, w, b = LogicalTensor(0, f32, (2, 3)), LogicalTensor(1, f32, (3, 4), property_type="constant"), \
        LogicalTensor(2, f32, (4,))
    mm, add, relu, sm = (LogicalTensor(i, f32, (2, 4)) for i in (3, 4, 5, 6))
    ops = [Op(10, OpKind.MatMul, [x, w], [mm]),
           Op(11, OpKind.Add, [mm, b], [add]),
           Op(12, OpKind.ReLU, [add], [relu]),
           Op(13, OpKind.SoftMax, [relu], [sm], {"axis": -1})]
    return ops


def _mlp_expected(xv, wv, bv):
    h = _matmul_loop(xv, wv) + bv
    h = np.maximum(h, 0)
    return _softmax_loop(h, -1)


@pytest.mark.parametrize("seed", range(4))
def test_run_shuffled_list(seed):
    ops = _mlp_graph()
    random.Random(seed).shuffle(ops)
    xv, wv, bv = rand(2, 3), rand(3, 4), rand(4)
    out = run(ops, {0: xv, 1: wv, 2: bv})
    assert list(out) == [6]
    assert out[6].dtype == np.float32
    close(out[6], _mlp_expected(xv, wv, bv))


class _GraphLike:
    def __init__(self, ops):
        self.ops = ops

    def topological_ops(self):
        return list(self.ops)


def test_run_graph_object_and_end_and_multiple_outputs():
    ops = _mlp_graph()
    f32 = DataType.f32
    relu = ops[2].outputs[0]
    extra = LogicalTensor(8, f32, (2, 4))
    ops.append(Op(14, OpKind.Exp, [relu], [extra]))
    ops.append(Op(15, OpKind.End, [ops[0].outputs[0]], []))
    xv, wv, bv = rand(2, 3), rand(3, 4), rand(4)
    out = run(_GraphLike(ops), {0: xv, 1: wv, 2: bv})
    assert set(out) == {3, 6, 8}
    close(out[3], _matmul_loop(xv, wv))
    close(out[8], np.exp(np.maximum(_matmul_loop(xv, wv) + bv, 0)))


def test_run_missing_feed():
    ops = _mlp_graph()
    with pytest.raises(GraphError, match=r"tensor 2 \(input 1 of op 11 \(Add\)\) has no feed"):
        run(ops, {0: rand(2, 3), 1: rand(3, 4)})


def test_run_cycle():
    f32 = DataType.f32
    a, b, c = (LogicalTensor(i, f32, (2,)) for i in range(3))
    ops = [Op(0, OpKind.Add, [a, c], [b]), Op(1, OpKind.ReLU, [b], [c])]
    with pytest.raises(GraphError, match=r"cycle: op 0 \(Add\) waits for tensor 2"):
        run(ops, {0: rand(2)})


def test_run_bad_feeds():
    ops = _mlp_graph()
    good = {0: rand(2, 3), 1: rand(3, 4), 2: rand(4)}
    with pytest.raises(GraphError, match=r"tensor 0 .*op 10 \(MatMul\).*dtype float64.*f32"):
        run(ops, {**good, 0: good[0].astype(np.float64)})
    with pytest.raises(GraphError, match=r"tensor 2 .*shape \(5,\)"):
        run(ops, {**good, 2: rand(5)})
    with pytest.raises(GraphError, match=r"tensor 3 is produced by op 10"):
        run(ops, {**good, 3: rand(2, 4)})
    with pytest.raises(GraphError, match=r"feed for tensor 99"):
        run(ops, {**good, 99: rand(1)})


def test_run_duplicate_producer_and_op_errors_surface():
    f32 = DataType.f32
    a, b = LogicalTensor(0, f32, (2,)), LogicalTensor(1, f32, (2,))
    with pytest.raises(GraphError, match="tensor 1 is produced by both op 0 and op 1"):
        run([Op(0, OpKind.ReLU, [a], [b]), Op(1, OpKind.Exp, [a], [b])], {0: rand(2)})
    with pytest.raises(GraphError, match=r"op 5 \(Wildcard\): the reference interpreter does not implement"):
        run([Op(5, OpKind.Wildcard, [a], [b])], {0: rand(2)})
    with pytest.raises(GraphError, match="expects Ops"):
        run(["not an op"], {})


def test_run_f16_graph_keeps_dtypes():
    f16 = DataType.f16
    a, b, c = (LogicalTensor(i, f16, (3,)) for i in range(3))
    ops = [Op(0, OpKind.Multiply, [a, b], [c])]
    av, bv = rand(3).astype(np.float16), rand(3).astype(np.float16)
    out = run(ops, {0: av, 1: bv})
    assert out[2].dtype == np.float16
    close(out[2], av.astype(np.float64) * bv, rtol=1e-3, atol=1e-3)
