"""Activations as the epilogue of the complex template's kernels (a GEMM, 1x1 and 3x3
convolutions): sigmoid, SiLU, hard-swish, GELU (erf and tanh) and ReLU against numpy, on
shapes that no register tile divides, with outputs that push exp past overflow and underflow
(|y| up to 1e30), infinite and NaN, for the host and for an AVX2 target (code without
AVX-512's reciprocal estimate), which this host runs where it can."""
import math

import numpy as np
import pytest

from tilefuse.schedule import template_for
from tilefuse.tensorir import compute, placeholder, reduce_axis, sum as rsum
from tilefuse.tensorir.ops import elementwise, window
from tilefuse.tensorir.runtime.target import Target

AVX2 = Target.parse("llvm -mcpu=haswell") if Target.host().triple.startswith("x86_64") else None
TARGETS = [None, pytest.param(AVX2, id="avx2", marks=pytest.mark.skipif(
    AVX2 is None or AVX2.cannot_run_here() is not None, reason="the host cannot run AVX2 code"))]

#: per channel, added to the product: exp's overflow and underflow, infinities, NaN
SPECIAL_BIASES = [np.inf, -np.inf, np.nan, 1e30, -1e30, 100.0, -100.0, 88.0, -88.0, -87.3, 17.4, -17.4]


def _erf(y):
    return np.frompyfunc(math.erf, 1, 1)(y).astype(np.float64)


#: name: (the epilogue on a tensor, numpy's in float64)
ACTIVATIONS = {
    "sigmoid": (elementwise.sigmoid, lambda y: 1 / (1 + np.exp(-y))),
    "silu": (lambda t: elementwise.multiply(t, elementwise.sigmoid(t)), lambda y: y / (1 + np.exp(-y))),
    "hardswish": (elementwise.hardswish, lambda y: y * np.clip(y / 6 + 0.5, 0, 1)),
    "gelu_erf": (lambda t: elementwise.gelu(t, "gelu_erf"), lambda y: 0.5 * y * (1 + _erf(y / math.sqrt(2)))),
    "gelu_tanh": (lambda t: elementwise.gelu(t, "gelu_tanh"),
                  lambda y: 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y ** 3)))),
    "relu": (elementwise.relu, lambda y: np.maximum(y, 0)),
}


def gemm(rows, k, columns):
    """Weights (rows, k) times data (k, columns) plus a bias per row: a 1x1 NCHW convolution
    as the graph flattens it; numpy's product in float64."""
    W, X = placeholder((rows, k), name="W", constant=True), placeholder((k, columns), name="X")
    B = placeholder((rows, 1), name="B", constant=True)
    r = reduce_axis((0, k), name="r")
    P = compute((rows, columns), lambda i, j: rsum(W[i, r] * X[r, j], axis=r), name="P")
    Y = elementwise.add(P, B)
    return Y, lambda w, x, b: w.astype(np.float64) @ x + b


def conv(channels_in, channels_out, size, kernel, width):
    """An NCHW convolution with bias (pads of kernel // 2); numpy's answer in float64."""
    X = placeholder((1, channels_in, size, width), name="X")
    W = placeholder((channels_out, channels_in, kernel, kernel), name="W", constant=True)
    B = placeholder((channels_out,), name="B", constant=True)
    pad = kernel // 2
    Y = window.conv(X, W, [1, 1], [pad, pad], [pad, pad], [1, 1], data_format="NCX", weights_format="OIX", bias=B)

    def reference(w, x, b):
        padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        out = np.zeros((1, channels_out, size, width))
        for dy in range(kernel):
            for dx in range(kernel):
                out += np.einsum("oi,nihw->nohw", w[:, :, dy, dx], padded[:, :, dy:dy + size, dx:dx + width])
        return out + b[None, :, None, None]
    return Y, reference


ANCHORS = {
    "gemm 45x20x301": lambda: gemm(45, 20, 301),
    "conv1x1 16->40 13x17": lambda: conv(16, 40, 13, 1, 17),
    "conv3x3 8->24 11x9": lambda: conv(8, 24, 11, 3, 9),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("anchor", list(ANCHORS))
def test_activation_epilogues_match_numpy_at_every_value(anchor, activation, target):
    Y, reference = ANCHORS[anchor]()
    epilogue, numpy_activation = ACTIVATIONS[activation]
    out_tensor = epilogue(Y)
    t = template_for(out_tensor, target)
    cfg = t.default_config()
    rng = np.random.default_rng(len(anchor))
    values = {p.name: rng.standard_normal(p.shape).astype(np.float32) for p in t.args[:-1]}
    bias = values["B"].reshape(-1) * 4              # most outputs in (-10, 10): the polynomials' range
    bias[:len(SPECIAL_BIASES)] = SPECIAL_BIASES
    values["B"] = bias.reshape(values["B"].shape)
    with np.errstate(all="ignore"):
        y = reference(values["W"], values["X"], values["B"])
        want = numpy_activation(y)
    out = np.full(out_tensor.shape, 7.0, np.float32)
    t.build(cfg)(*[values[p.name] for p in t.args[:-1]], out)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(out), nan), f"NaN unlike numpy at {np.argwhere(np.isnan(out) != nan)[:5]}"
    np.testing.assert_allclose(out[~nan], want[~nan], rtol=1e-5, atol=1e-5, err_msg=str(cfg))
    saturated = np.abs(y) >= 1e29                   # exp(-y) overflows or underflows, y exact in float32
    assert saturated.sum() >= 2 * Y.shape[-1]
    np.testing.assert_array_equal(out[saturated], want[saturated].astype(np.float32))
