"""tensorir.ops.backward against numpy: each elementwise backward op against a central finite
difference of its forward op (and, at the kinks, oneDNN's comparisons), softmax and
log-softmax backward against their Jacobians, BiasAddBackward against a sum."""
import math

import numpy as np
import pytest

from ops_testing import check, rand
from tilefuse.tensorir import placeholder
from tilefuse.tensorir import ops

SHAPE = (7, 13)


def _erf(v):
    return np.vectorize(math.erf)(v)


# name, backward fn, attrs, forward (numpy, float64), which input the op reads ("src" or "dst")
CASES = [
    ("relu", ops.relu_backward, {"use_dst": True}, lambda x: np.maximum(x, 0), "dst"),
    ("relu", ops.relu_backward, {"use_dst": False}, lambda x: np.maximum(x, 0), "src"),
    ("sigmoid", ops.sigmoid_backward, {"use_dst": True}, lambda x: 1 / (1 + np.exp(-x)), "dst"),
    ("sigmoid", ops.sigmoid_backward, {"use_dst": False}, lambda x: 1 / (1 + np.exp(-x)), "src"),
    ("tanh", ops.tanh_backward, {"use_dst": True}, np.tanh, "dst"),
    ("tanh", ops.tanh_backward, {"use_dst": False}, np.tanh, "src"),
    ("elu", ops.elu_backward, {"alpha": 0.7, "use_dst": True}, lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)), "dst"),
    ("elu", ops.elu_backward, {"alpha": 0.7, "use_dst": False}, lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)),
     "src"),
    ("gelu", ops.gelu_backward, {"mode": "gelu_erf"}, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), "src"),
    ("gelu", ops.gelu_backward, {"mode": "gelu_tanh"},
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), "src"),
    ("hardsigmoid", ops.hardsigmoid_backward, {"alpha": 0.3, "beta": 0.4}, lambda x: np.clip(0.3 * x + 0.4, 0, 1),
     "src"),
    ("hardswish", ops.hardswish_backward, {}, lambda x: x * np.clip(x + 3, 0, 6) / 6, "src"),
    ("mish", ops.mish_backward, {}, lambda x: x * np.tanh(np.logaddexp(0, x)), "src"),
    ("softplus", ops.softplus_backward, {"beta": 1.0}, lambda x: np.logaddexp(0, x), "src"),
    ("softplus", ops.softplus_backward, {"beta": -1.5}, lambda x: np.logaddexp(0, -1.5 * x) / -1.5, "src"),
    ("sqrt", ops.sqrt_backward, {"use_dst": True}, np.sqrt, "dst"),
    ("sqrt", ops.sqrt_backward, {"use_dst": False}, np.sqrt, "src"),
    ("abs", ops.abs_backward, {}, np.abs, "src"),
    ("clamp", ops.clamp_backward, {"min": -0.5, "max": 0.8, "use_dst": True}, lambda x: np.clip(x, -0.5, 0.8), "dst"),
    ("clamp", ops.clamp_backward, {"min": -0.5, "max": 0.8, "use_dst": False}, lambda x: np.clip(x, -0.5, 0.8),
     "src"),
]


@pytest.mark.parametrize("name, fn, attrs, forward, reads", CASES,
                         ids=[f"{c[0]}-{'-'.join(f'{k}={v}' for k, v in c[2].items())}" for c in CASES])
def test_eltwise_backward_is_the_derivative(name, fn, attrs, forward, reads):
    low = 0.2 if name == "sqrt" else -4.0
    src = rand(SHAPE, "float64", low, 4.0)
    # keep clear of the kinks, where a finite difference straddles two pieces
    kinks = {"relu": [0], "elu": [0], "hardsigmoid": [-0.4 / 0.3, 0.6 / 0.3], "hardswish": [-3, 3], "abs": [0],
             "clamp": [-0.5, 0.8]}.get(name, [])
    for k in kinks:
        src = np.where(np.abs(src - k) < 1e-3, k + 0.01, src)
    dd = rand(SHAPE, "float64")
    eps = 1e-6
    want = dd * (forward(src + eps) - forward(src - eps)) / (2 * eps)
    data = forward(src) if reads == "dst" else src
    d, g = placeholder(SHAPE, "float64", name="data"), placeholder(SHAPE, "float64", name="dd")
    y = fn(d, g, **attrs)
    assert y.op.tag == f"{name}_backward"
    check(y, {d: data, g: dd}, want, template="injective", rtol=1e-5, atol=1e-6)


def test_kinks_follow_onednn():
    x = np.array([-3.0, -1.0, 0.0, 1.0, 3.0], np.float32)
    dd = np.full(5, 2.0, np.float32)
    d, g = placeholder((5,), name="d"), placeholder((5,), name="g")
    check(ops.relu_backward(d, g, use_dst=False), {d: x, g: dd}, [0, 0, 0, 2, 2])
    check(ops.abs_backward(d, g), {d: x, g: dd}, [-2, -2, 0, 2, 2])
    check(ops.hardswish_backward(d, g), {d: x, g: dd}, [0, 2 * 1 / 6, 2 * 3 / 6, 2 * 5 / 6, 2])
    check(ops.clamp_backward(d, g, min=-1.0, max=1.0), {d: x, g: dd}, [0, 0, 2, 0, 0])
    check(ops.elu_backward(d, g, alpha=0.5, use_dst=False), {d: x, g: dd}, 2 * np.where(x > 0, 1, 0.5 * np.exp(x)),
          rtol=1e-6)
    check(ops.hardsigmoid_backward(d, g, alpha=0.5, beta=0.5), {d: x, g: dd}, [0, 0, 1, 0, 0])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_backward(axis):
    shape = (5, 7, 13)
    x, dd = rand(shape, "float64"), rand(shape, "float64")
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    y = e / e.sum(axis=axis, keepdims=True)
    want = y * (dd - (dd * y).sum(axis=axis, keepdims=True))     # J^T dd of softmax
    g, d = placeholder(shape, "float64", name="dd"), placeholder(shape, "float64", name="y")
    check(ops.softmax_backward(g, d, axis=axis), {g: dd, d: y}, want, rtol=1e-10, atol=1e-10)
    logy = np.log(y)
    want_log = dd - y * dd.sum(axis=axis, keepdims=True)          # J^T dd of log-softmax
    check(ops.log_softmax_backward(g, d, axis=axis), {g: dd, d: logy}, want_log, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("shape, data_format", [((2, 5, 7, 3), "NCX"), ((2, 7, 3, 5), "NXC"), ((13, 37), "NXC")])
def test_bias_add_backward(shape, data_format):
    dd = rand(shape)
    c = 1 if data_format == "NCX" else len(shape) - 1
    g = placeholder(shape, name="dd")
    y = ops.bias_add_backward(g, data_format=data_format)
    axes = tuple(a for a in range(len(shape)) if a != c)
    check(y, {g: dd}, dd.astype(np.float64).sum(axis=axes), template="reduction", rtol=1e-5, atol=1e-5)


def test_backward_rejects_bad_inputs():
    a, b = placeholder((3, 4)), placeholder((3, 5))
    with pytest.raises(ValueError, match="ReLUBackward.*same shape"):
        ops.relu_backward(a, b)
    with pytest.raises(TypeError, match="TanhBackward.*float"):
        ops.tanh_backward(placeholder((3, 4), "int32"), placeholder((3, 4), "int32"))
    with pytest.raises(ValueError, match="use_dst must be a bool"):
        ops.sqrt_backward(a, a, use_dst=1)
    with pytest.raises(ValueError, match="ClampBackward.*greater"):
        ops.clamp_backward(a, a, min=2.0, max=1.0)
    with pytest.raises(ValueError, match="GELUBackward.*mode"):
        ops.gelu_backward(a, a, mode="exact")
    with pytest.raises(ValueError, match="SoftMaxBackward.*axis"):
        ops.softmax_backward(a, a, axis=2)
    with pytest.raises(ValueError, match="BiasAddBackward.*2 dimensions"):
        ops.bias_add_backward(placeholder((4,)))


def _bn_loss_gradients(x, dd, gamma, eps, c):
    """d/dx, d/dgamma, d/dbeta of sum(dd * batchnorm(x)) with the batch's own statistics, by
    central differences (float64)."""
    axes = tuple(a for a in range(x.ndim) if a != c)
    view = [1] * x.ndim
    view[c] = -1

    def loss(x, gamma, beta):
        m, v = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
        return (dd * (gamma.reshape(view) * (x - m) / np.sqrt(v + eps) + beta.reshape(view))).sum()

    def numeric(f, a):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            step = np.zeros_like(a)
            step[idx] = 1e-6
            g[idx] = (f(a + step) - f(a - step)) / 2e-6
        return g
    beta = np.zeros_like(gamma)
    return (numeric(lambda v: loss(v, gamma, beta), x), numeric(lambda v: loss(x, v, beta), gamma),
            numeric(lambda v: loss(x, gamma, v), beta))


@pytest.mark.parametrize("shape, data_format, with_gamma", [((3, 4, 5), "NCX", True), ((2, 3, 5, 4), "NXC", False)])
def test_batch_norm_backward_is_the_training_gradient(shape, data_format, with_gamma):
    c = 1 if data_format == "NCX" else len(shape) - 1
    channels = shape[c]
    xv, dd = rand(shape, "float64"), rand(shape, "float64")
    gv = rand((channels,), "float64") if with_gamma else np.ones(channels)
    axes = tuple(a for a in range(len(shape)) if a != c)
    mean, var = xv.mean(axis=axes), xv.var(axis=axes)
    want_dx, want_dg, want_db = _bn_loss_gradients(xv, dd, gv, 0.01, c)
    x, g, m, v = (placeholder(a.shape, "float64", name=n) for a, n in ((xv, "x"), (dd, "dd"), (mean, "m"), (var, "v")))
    feeds = {x: xv, g: dd, m: mean, v: var}
    gamma = None
    if with_gamma:
        gamma = placeholder((channels,), "float64", name="gamma")
        feeds[gamma] = gv
    dx, dg, db = ops.batch_norm_backward(x, g, m, v, gamma, epsilon=0.01, data_format=data_format)
    check(dx, feeds, want_dx, rtol=1e-6, atol=1e-6)
    check(dg, feeds, want_dg, rtol=1e-6, atol=1e-6)
    check(db, {g: dd}, want_db, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="BatchNormTrainingBackward.*variance"):
        ops.batch_norm_backward(x, g, m, placeholder((channels + 1,), "float64"), data_format=data_format)
