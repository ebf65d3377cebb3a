"""The reference interpreter's backward ops (elementwise gradients, SoftMax/LogSoftmax and
BiasAdd backward) against finite differences and per-element closed forms written here, and
its pooling with negative (cropping) pads, softmax stats and exact nearest interpolation."""
import math

import numpy as np
import pytest

from tilefuse.graph_api.logical_tensor import GraphError
from tilefuse.graph_api.op import OpKind
from test_reference import close, ev, ev1, per_element, rand

# kind, attrs, forward (per element, float), reads "src" or "dst"
GRADS = [
    (OpKind.ReLUBackward, {"use_dst": False}, lambda v: max(v, 0.0), "src"),
    (OpKind.ReLUBackward, {}, lambda v: max(v, 0.0), "dst"),
    (OpKind.SigmoidBackward, {"use_dst": False}, lambda v: 1 / (1 + math.exp(-v)), "src"),
    (OpKind.SigmoidBackward, {}, lambda v: 1 / (1 + math.exp(-v)), "dst"),
    (OpKind.TanhBackward, {"use_dst": False}, math.tanh, "src"),
    (OpKind.TanhBackward, {"use_dst": True}, math.tanh, "dst"),
    (OpKind.EluBackward, {"alpha": 0.5, "use_dst": False}, lambda v: v if v > 0 else 0.5 * math.expm1(v), "src"),
    (OpKind.EluBackward, {"alpha": 0.5}, lambda v: v if v > 0 else 0.5 * math.expm1(v), "dst"),
    (OpKind.GELUBackward, {}, lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))), "src"),
    (OpKind.GELUBackward, {"mode": "gelu_tanh"},
     lambda v: 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))), "src"),
    (OpKind.HardSigmoidBackward, {"alpha": 0.25, "beta": 0.5}, lambda v: min(max(0.25 * v + 0.5, 0), 1), "src"),
    (OpKind.HardSwishBackward, {}, lambda v: v * min(max(v + 3, 0), 6) / 6, "src"),
    (OpKind.MishBackward, {}, lambda v: v * math.tanh(math.log1p(math.exp(v))), "src"),
    (OpKind.SoftPlusBackward, {"beta": -1.0}, lambda v: -math.log1p(math.exp(-v)), "src"),
    (OpKind.SqrtBackward, {"use_dst": False}, math.sqrt, "src"),
    (OpKind.SqrtBackward, {}, math.sqrt, "dst"),
    (OpKind.AbsBackward, {}, abs, "src"),
    (OpKind.ClampBackward, {"min": -1.0, "max": 2.0, "use_dst": False}, lambda v: min(max(v, -1.0), 2.0), "src"),
    (OpKind.ClampBackward, {"min": -1.0, "max": 2.0}, lambda v: min(max(v, -1.0), 2.0), "dst"),
]


@pytest.mark.parametrize("kind, attrs, forward, reads", GRADS,
                         ids=[f"{g[0].value}-{g[3]}-{g[1].get('mode', '')}" for g in GRADS])
def test_eltwise_backward_is_the_derivative(kind, attrs, forward, reads):
    src = rand(4, 9, lo=0.1 if kind is OpKind.SqrtBackward else -4.0, hi=4.0)
    for kink in (0.0, -1.0, 2.0, -3.0, 3.0, -2.0):        # keep the finite difference off the kinks
        src = np.where(np.abs(src - kink) < 1e-3, kink + 0.01, src).astype(np.float32)
    dd = rand(4, 9)
    x, eps = src.astype(np.float64), 1e-6
    want = dd * (per_element(forward, x + eps) - per_element(forward, x - eps)) / (2 * eps)
    data = per_element(forward, x).astype(np.float32) if reads == "dst" else src
    close(ev1(kind, [data, dd], attrs), want, rtol=1e-4, atol=1e-5)


def test_eltwise_backward_kinks_are_onednns():
    x = np.array([-3.0, -1.0, 0.0, 1.0, 3.0], np.float32)
    dd = np.full(5, 2.0, np.float32)
    close(ev1(OpKind.ReLUBackward, [x, dd]), [0, 0, 0, 2, 2])
    close(ev1(OpKind.AbsBackward, [x, dd]), [-2, -2, 0, 2, 2])
    close(ev1(OpKind.ClampBackward, [x, dd], {"min": -1.0, "max": 1.0}), [0, 0, 2, 0, 0])
    close(ev1(OpKind.HardSwishBackward, [x, dd]), [0, 1 / 3, 1, 5 / 3, 2])
    close(ev1(OpKind.HardSigmoidBackward, [x, dd], {"alpha": 0.5, "beta": 0.5}), [0, 0, 1, 0, 0])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_and_log_softmax_backward_are_jacobian_products(axis):
    x, dd = rand(3, 4, 5).astype(np.float64), rand(3, 4, 5)
    y = (np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True)).astype(np.float32)
    want = np.zeros_like(x)
    moved_y, moved_dd = np.moveaxis(y, axis, -1), np.moveaxis(dd, axis, -1)
    moved_want = np.moveaxis(want, axis, -1)
    for idx in np.ndindex(moved_y.shape[:-1]):
        s = moved_y[idx].astype(np.float64)
        jac = np.diag(s) - np.outer(s, s)                 # d softmax_i / d x_j
        moved_want[idx] = jac.T @ moved_dd[idx]
    close(ev1(OpKind.SoftMaxBackward, [dd, y], {"axis": axis}), want, rtol=1e-5, atol=1e-6)
    want_log = np.zeros_like(x)
    moved_log = np.moveaxis(want_log, axis, -1)
    for idx in np.ndindex(moved_y.shape[:-1]):
        s = moved_y[idx].astype(np.float64)
        jac = np.eye(len(s)) - np.outer(np.ones(len(s)), s)     # d log softmax_i / d x_j
        moved_log[idx] = jac.T @ moved_dd[idx]
    close(ev1(OpKind.LogSoftmaxBackward, [dd, np.log(y)], {"axis": axis}), want_log, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", [OpKind.BiasAddBackward, OpKind.BiasAddBackprop])
def test_bias_add_backward(kind):
    dd = rand(2, 3, 4, 5)
    close(ev1(kind, [dd], {"data_format": "NCX"}, out_shapes=[(3,)]), dd.astype(np.float64).sum(axis=(0, 2, 3)))
    close(ev1(kind, [dd], {}, out_shapes=[(5,)]), dd.astype(np.float64).sum(axis=(0, 1, 2)))


def test_backward_errors():
    with pytest.raises(GraphError, match=r"op 7 \(ReLUBackward\): expects 2 inputs"):
        ev(OpKind.ReLUBackward, [rand(3)])
    with pytest.raises(GraphError, match=r"op 7 \(TanhBackward\): src/dst shape \(3,\) and diff_dst shape"):
        ev(OpKind.TanhBackward, [rand(3), rand(4)])
    with pytest.raises(GraphError, match=r"op 7 \(SoftMaxBackward\): axis 2 is out of range"):
        ev(OpKind.SoftMaxBackward, [rand(3, 4), rand(3, 4)], {"axis": 2})
    with pytest.raises(GraphError, match=r"op 7 \(BiasAddBackward\): diff_dst must have at least 2 dims"):
        ev(OpKind.BiasAddBackward, [rand(3)])


def test_pooling_with_negative_pads_crops_the_src():
    x = rand(1, 2, 9, 8)
    attrs = {"kernel": [2, 2], "strides": [2, 2], "pads_begin": [1, -1], "pads_end": [-1, 1], "data_format": "NCX",
             "exclude_pad": True}
    cropped = x[:, :, :-1, 1:]
    want = ev1(OpKind.AvgPool, [cropped], {**attrs, "pads_begin": [1, 0], "pads_end": [0, 1]})
    close(ev1(OpKind.AvgPool, [x], attrs), want)
    want_max = ev1(OpKind.MaxPool, [cropped], {**attrs, "pads_begin": [1, 0], "pads_end": [0, 1]})
    close(ev1(OpKind.MaxPool, [x], {k: v for k, v in attrs.items() if k != "exclude_pad"}), want_max)
    with pytest.raises(GraphError, match="crop away all"):
        ev(OpKind.AvgPool, [x], {**attrs, "pads_begin": [-5, 0], "pads_end": [-4, 0]})


def test_softmax_stats_of_an_all_minus_inf_row_is_minus_inf():
    x = np.array([[-np.inf, -np.inf], [0.0, 1.0]], np.float32)
    dst, stats = ev(OpKind.SoftMax, [x], {"axis": 1, "mode": "inf_as_zero"}, out_shapes=[(2, 2), (2, 1)])
    close(dst[1], [1 / (1 + math.e), math.e / (1 + math.e)])
    assert stats[0, 0] == -np.inf and dst[0].tolist() == [0, 0]
    close(stats[1], [math.log(1 + math.e)])


def test_interpolate_nearest_index_is_exact_and_scales_multiply_in_f32():
    x = np.arange(21, dtype=np.float32).reshape(1, 1, 21)
    got = ev1(OpKind.Interpolate, [x], {"mode": "nearest", "scales": [0.809524], "data_format": "NCX"})
    want = [math.floor((o + 0.5) * 21 / 17) for o in range(17)]
    assert got.reshape(-1).tolist() == want
    # 3 -> 2: o = 1 maps to exactly (1.5) * 3 / 2 = 2.25 -> 2; 6 -> 4: o = 1 maps to 2.25 -> 2
    assert ev1(OpKind.Interpolate, [np.arange(6, dtype=np.float32).reshape(1, 1, 6)],
               {"mode": "nearest", "sizes": [4], "data_format": "NCX"}).reshape(-1).tolist() == [0, 2, 3, 5]


def test_batch_norm_training_backward_is_the_gradient_of_the_training_forward():
    x, dd, gamma = rand(2, 3, 4).astype(np.float64), rand(2, 3, 4).astype(np.float64), rand(3).astype(np.float64)
    eps, axes = 0.0625, (0, 2)

    def loss(x, gamma):
        m, v = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
        return (dd * gamma.reshape(1, 3, 1) * (x - m) / np.sqrt(v + eps)).sum()
    want_dx, want_dg = np.zeros_like(x), np.zeros_like(gamma)
    for target, f, out in ((x, lambda v: loss(v, gamma), want_dx), (gamma, lambda v: loss(x, v), want_dg)):
        for idx in np.ndindex(target.shape):
            step = np.zeros_like(target)
            step[idx] = 1e-6
            out[idx] = (f(target + step) - f(target - step)) / 2e-6
    ins = [v.astype(np.float32) for v in (x, dd, x.mean(axis=axes), x.var(axis=axes), gamma)]
    dx, dg, db = ev(OpKind.BatchNormTrainingBackward, ins, {"epsilon": eps, "data_format": "NCX"},
                    out_shapes=[(2, 3, 4), (3,), (3,)])
    close(dx, want_dx, rtol=1e-4, atol=1e-4)
    close(dg, want_dg, rtol=1e-4, atol=1e-4)
    close(db, dd.sum(axis=axes), rtol=1e-5, atol=1e-5)
    dx_only = ev1(OpKind.BatchNormTrainingBackward, ins[:4], {"epsilon": eps, "data_format": "NCX"})
    close(dx_only, dx / gamma.reshape(1, 3, 1).astype(np.float32), rtol=1e-4, atol=1e-4)
    with pytest.raises(GraphError, match=r"BatchNormTrainingBackward\): variance shape"):
        ev(OpKind.BatchNormTrainingBackward, ins[:3] + [ins[3][:2]], {"epsilon": eps, "data_format": "NCX"})
