"""Backward (gradient) ops of the oneDNN graph op set that numpy semantics fix exactly: the
elementwise activations' backward ops, SoftMaxBackward, LogSoftmaxBackward, BiasAddBackward
and BatchNormTrainingBackward.

An elementwise backward op takes ``data`` (the forward op's src, or its dst when
``use_dst=True``, oneDNN's default where the op has that attribute) and ``diff_dst`` of the
same shape, and returns ``diff_src = diff_dst * f'(...)`` in one compute; the formulas and the
comparisons at the kinks are oneDNN's (``src/common/math_utils.hpp``).

Example:
    >>> from tilefuse.tensorir import placeholder
    >>> y = placeholder((7, 13), name="y"); dy = placeholder((7, 13), name="dy")
    >>> dx = tanh_backward(y, dy)
    >>> dx.shape, dx.op.tag
    ((7, 13), 'tanh_backward')
"""
from __future__ import annotations

import math

from .. import intrinsics as ti
from ..reduce import reduce_axis
from ..reduce import sum as rsum
from ..tensor import Tensor, compute
from ._common import (FORMATS, channel_axis, check_choice, check_float, check_number, check_same_dtype, fconst,
                      normalize_axis)
from .elementwise import _softplus
from .nn import _row_reduce

__all__ = ["relu_backward", "sigmoid_backward", "tanh_backward", "elu_backward", "gelu_backward",
           "hardsigmoid_backward", "hardswish_backward", "mish_backward", "softplus_backward", "sqrt_backward",
           "abs_backward", "clamp_backward", "softmax_backward", "log_softmax_backward", "bias_add_backward",
           "batch_norm_backward"]


def _check_use_dst(op: str, use_dst) -> bool:
    if not isinstance(use_dst, bool):
        raise ValueError(f"{op}: attribute use_dst must be a bool, got {use_dst!r}")
    return use_dst


def _eltwise_backward(op: str, data: Tensor, diff_dst: Tensor, grad, name) -> Tensor:
    """``grad(v, dd)`` per element, ``v`` from ``data`` and ``dd`` from ``diff_dst``."""
    check_float(op, "src/dst", data)
    check_float(op, "diff_dst", diff_dst)
    check_same_dtype(op, src=data, diff_dst=diff_dst)
    if data.shape != diff_dst.shape:
        raise ValueError(f"{op}: src/dst {data.shape} and diff_dst {diff_dst.shape} must have the same shape")
    tag = op.replace("Backward", "").lower() + "_backward"
    return compute(data.shape, lambda *i: grad(data[i], diff_dst[i]), name=name or tag, tag=tag)


def _c(v, value):
    return fconst(value, v.dtype)


def relu_backward(data: Tensor, diff_dst: Tensor, use_dst: bool = True, name: str | None = None) -> Tensor:
    """ReLUBackward: ``diff_dst`` where ``data > 0``, else 0 (``data`` is ReLU's dst or src:
    both are positive at the same places).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> relu_backward(placeholder((3,)), placeholder((3,))).op.tag
        'relu_backward'
    """
    _check_use_dst("ReLUBackward", use_dst)
    return _eltwise_backward("ReLUBackward", data, diff_dst,
                             lambda v, dd: ti.if_then_else(v > _c(v, 0), dd, _c(v, 0)), name)


def sigmoid_backward(data: Tensor, diff_dst: Tensor, use_dst: bool = True, name: str | None = None) -> Tensor:
    """SigmoidBackward: ``diff_dst * s * (1 - s)`` with ``s = data`` (Sigmoid's dst, when
    ``use_dst``) or ``s = sigmoid(data)``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> sigmoid_backward(placeholder((3,)), placeholder((3,)), use_dst=False).shape
        (3,)
    """
    use_dst = _check_use_dst("SigmoidBackward", use_dst)

    def grad(v, dd):
        s = v if use_dst else ti.sigmoid(v)
        return dd * s * (_c(v, 1) - s)
    return _eltwise_backward("SigmoidBackward", data, diff_dst, grad, name)


def tanh_backward(data: Tensor, diff_dst: Tensor, use_dst: bool = True, name: str | None = None) -> Tensor:
    """TanhBackward: ``diff_dst * (1 - t) * (1 + t)`` with ``t = data`` (Tanh's dst, when
    ``use_dst``) or ``t = tanh(data)``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> tanh_backward(placeholder((3,)), placeholder((3,))).op.tag
        'tanh_backward'
    """
    use_dst = _check_use_dst("TanhBackward", use_dst)

    def grad(v, dd):
        t = v if use_dst else ti.tanh(v)
        return dd * (_c(v, 1) - t) * (_c(v, 1) + t)
    return _eltwise_backward("TanhBackward", data, diff_dst, grad, name)


def elu_backward(data: Tensor, diff_dst: Tensor, alpha: float, use_dst: bool = True,
                 name: str | None = None) -> Tensor:
    """EluBackward: ``diff_dst`` where ``data > 0``, else ``diff_dst * (dst + alpha)`` (from
    Elu's dst, when ``use_dst``) or ``diff_dst * alpha * exp(src)``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> elu_backward(placeholder((3,)), placeholder((3,)), alpha=1.0, use_dst=False).op.tag
        'elu_backward'
    """
    alpha = check_number("EluBackward", "alpha", alpha)
    use_dst = _check_use_dst("EluBackward", use_dst)

    def grad(v, dd):
        slope = v + _c(v, alpha) if use_dst else _c(v, alpha) * ti.exp(v)
        return ti.if_then_else(v > _c(v, 0), dd, dd * slope)
    return _eltwise_backward("EluBackward", data, diff_dst, grad, name)


def gelu_backward(src: Tensor, diff_dst: Tensor, mode: str = "gelu_erf", name: str | None = None) -> Tensor:
    """GELUBackward from GELU's src. ``gelu_erf``: ``diff_dst * (Phi(x) + x * phi(x))`` (the
    normal distribution's cdf and density); ``gelu_tanh``: the derivative of the tanh
    approximation, ``0.5 (1 + t) (1 + x (1 - t) g')`` with ``t = tanh(g)``, ``g = sqrt(2/pi)
    (x + 0.044715 x^3)``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> gelu_backward(placeholder((3,)), placeholder((3,)), mode="gelu_tanh").op.tag
        'gelu_backward'
    """
    mode = {"erf": "gelu_erf", "tanh": "gelu_tanh"}.get(mode, mode)
    check_choice("GELUBackward", "mode", mode, ("gelu_erf", "gelu_tanh"))

    def grad(v, dd):
        if mode == "gelu_erf":
            u = v * _c(v, 1 / math.sqrt(2))
            density = u * _c(v, 2 / math.sqrt(math.pi)) * ti.exp(_c(v, 0) - u * u)
            return dd * _c(v, 0.5) * (_c(v, 1) + ti.erf(u) + density)
        k, fit = math.sqrt(2 / math.pi), 0.044715
        sq = v * v
        t = ti.tanh(_c(v, k) * v * (_c(v, 1) + _c(v, fit) * sq))
        dg = _c(v, k) * (_c(v, 1) + _c(v, 3 * fit) * sq)
        return dd * _c(v, 0.5) * (_c(v, 1) + t) * (_c(v, 1) + v * (_c(v, 1) - t) * dg)
    return _eltwise_backward("GELUBackward", src, diff_dst, grad, name)


def hardsigmoid_backward(src: Tensor, diff_dst: Tensor, alpha: float, beta: float,
                         name: str | None = None) -> Tensor:
    """HardSigmoidBackward: ``diff_dst * alpha`` where ``0 < alpha * src + beta < 1``, else 0.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> hardsigmoid_backward(placeholder((3,)), placeholder((3,)), alpha=0.2, beta=0.5).shape
        (3,)
    """
    alpha = check_number("HardSigmoidBackward", "alpha", alpha)
    beta = check_number("HardSigmoidBackward", "beta", beta)

    def grad(v, dd):
        a = _c(v, alpha) * v + _c(v, beta)
        return ti.if_then_else((a > _c(v, 0)) & (a < _c(v, 1)), dd * _c(v, alpha), _c(v, 0))
    return _eltwise_backward("HardSigmoidBackward", src, diff_dst, grad, name)


def hardswish_backward(src: Tensor, diff_dst: Tensor, name: str | None = None) -> Tensor:
    """HardSwishBackward: ``diff_dst * (2 x + 3) / 6`` for ``-3 < x < 3``, ``diff_dst`` for
    ``x >= 3``, else 0.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> hardswish_backward(placeholder((3,)), placeholder((3,))).op.tag
        'hardswish_backward'
    """
    def grad(v, dd):
        inner = dd * (_c(v, 2) * v + _c(v, 3)) / _c(v, 6)
        outer = ti.if_then_else(v >= _c(v, 3), dd, _c(v, 0))
        return ti.if_then_else((v < _c(v, 3)) & (v > _c(v, -3)), inner, outer)
    return _eltwise_backward("HardSwishBackward", src, diff_dst, grad, name)


def mish_backward(src: Tensor, diff_dst: Tensor, name: str | None = None) -> Tensor:
    """MishBackward: ``diff_dst * (t + x * sigmoid(x) * (1 - t^2))`` with ``t =
    tanh(softplus(x))``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> mish_backward(placeholder((3,)), placeholder((3,))).op.tag
        'mish_backward'
    """
    def grad(v, dd):
        t = ti.tanh(_softplus(v, 1.0))
        return dd * (t + v * ti.sigmoid(v) * (_c(v, 1) - t * t))
    return _eltwise_backward("MishBackward", src, diff_dst, grad, name)


def softplus_backward(src: Tensor, diff_dst: Tensor, beta: float = 1.0, name: str | None = None) -> Tensor:
    """SoftPlusBackward: ``diff_dst * sigmoid(beta * x)``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> softplus_backward(placeholder((3,)), placeholder((3,)), beta=-1.0).op.tag
        'softplus_backward'
    """
    beta = check_number("SoftPlusBackward", "beta", beta)
    if beta == 0:
        raise ValueError("SoftPlusBackward: attribute beta must be non-zero")
    return _eltwise_backward("SoftPlusBackward", src, diff_dst,
                             lambda v, dd: dd * ti.sigmoid(v * _c(v, beta) if beta != 1 else v), name)


def sqrt_backward(data: Tensor, diff_dst: Tensor, use_dst: bool = True, name: str | None = None) -> Tensor:
    """SqrtBackward: ``diff_dst / (2 * dst)`` (``use_dst``) or ``diff_dst / (2 * sqrt(src))``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> sqrt_backward(placeholder((3,)), placeholder((3,))).op.tag
        'sqrt_backward'
    """
    use_dst = _check_use_dst("SqrtBackward", use_dst)
    return _eltwise_backward("SqrtBackward", data, diff_dst,
                             lambda v, dd: dd / (_c(v, 2) * (v if use_dst else ti.sqrt(v))), name)


def abs_backward(src: Tensor, diff_dst: Tensor, name: str | None = None) -> Tensor:
    """AbsBackward: ``diff_dst * sign(src)`` (0 at 0).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> abs_backward(placeholder((3,)), placeholder((3,))).op.tag
        'abs_backward'
    """
    def grad(v, dd):
        zero = _c(v, 0)
        return ti.if_then_else(v > zero, dd, ti.if_then_else(v < zero, zero - dd, zero))
    return _eltwise_backward("AbsBackward", src, diff_dst, grad, name)


def clamp_backward(data: Tensor, diff_dst: Tensor, min: float, max: float, use_dst: bool = True,  # noqa: A002
                   name: str | None = None) -> Tensor:
    """ClampBackward: ``diff_dst`` where ``min < data < max``, else 0 (``data`` is Clamp's dst
    or src; the strict comparisons make both give the same).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> clamp_backward(placeholder((3,)), placeholder((3,)), min=0.0, max=6.0).op.tag
        'clamp_backward'
    """
    lo, hi = check_number("ClampBackward", "min", min), check_number("ClampBackward", "max", max)
    if lo > hi:
        raise ValueError(f"ClampBackward: attribute min={lo} is greater than max={hi}")
    _check_use_dst("ClampBackward", use_dst)
    return _eltwise_backward("ClampBackward", data, diff_dst, lambda v, dd: ti.if_then_else(
        (v > _c(v, lo)) & (v < _c(v, hi)), dd, _c(v, 0)), name)


# ---------------------------------------------------------------------------- softmax, bias

def _pair(op: str, diff_dst: Tensor, dst: Tensor, axis: int) -> int:
    check_float(op, "diff_dst", diff_dst)
    check_float(op, "dst", dst)
    check_same_dtype(op, diff_dst=diff_dst, dst=dst)
    if diff_dst.shape != dst.shape:
        raise ValueError(f"{op}: diff_dst {diff_dst.shape} and dst {dst.shape} must have the same shape")
    return normalize_axis(op, "axis", axis, dst.ndim)


def softmax_backward(diff_dst: Tensor, dst: Tensor, axis: int = 1, name: str | None = None) -> Tensor:
    """SoftMaxBackward: ``diff_src = dst * (diff_dst - sum(diff_dst * dst, axis))``.

    Stages: the row sum (reduction), the elementwise result.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> dx = softmax_backward(placeholder((7, 37), name="dy"), placeholder((7, 37), name="y"), axis=-1)
        >>> dx.op.tag, sorted(t.name for t in dx.op.input_tensors)
        ('softmax_backward', ['dy', 'softmax_backward_sum', 'y'])
    """
    op = "SoftMaxBackward"
    axis = _pair(op, diff_dst, dst, axis)
    base, tag = name or "softmax_backward", "softmax_backward"
    s = _row_reduce(diff_dst, axis, rsum, lambda v, i: v * dst[i], base + "_sum", tag)
    row = lambda i: i[:axis] + i[axis + 1:]  # noqa: E731
    return compute(dst.shape, lambda *i: dst[i] * (diff_dst[i] - s[row(i)]), name=base, tag=tag)


def log_softmax_backward(diff_dst: Tensor, dst: Tensor, axis: int = -1, name: str | None = None) -> Tensor:
    """LogSoftmaxBackward: ``diff_src = diff_dst - exp(dst) * sum(diff_dst, axis)``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> log_softmax_backward(placeholder((7, 37)), placeholder((7, 37))).op.tag
        'log_softmax_backward'
    """
    op = "LogSoftmaxBackward"
    axis = _pair(op, diff_dst, dst, axis)
    base, tag = name or "log_softmax_backward", "log_softmax_backward"
    s = _row_reduce(diff_dst, axis, rsum, lambda v, i: v, base + "_sum", tag)
    row = lambda i: i[:axis] + i[axis + 1:]  # noqa: E731
    return compute(dst.shape, lambda *i: diff_dst[i] - ti.exp(dst[i]) * s[row(i)], name=base, tag=tag)


def bias_add_backward(diff_dst: Tensor, data_format: str = "NXC", name: str | None = None) -> Tensor:
    """BiasAddBackward: ``diff_bias[c]``, the sum of ``diff_dst`` over every axis but the channel
    axis (axis 1 for ``NCX``, the last for ``NXC``).

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> db = bias_add_backward(placeholder((2, 5, 7)), data_format="NCX")
        >>> db.shape, db.op.tag
        ((5,), 'bias_add_backward')
    """
    op = "BiasAddBackward"
    check_float(op, "diff_dst", diff_dst)
    check_choice(op, "data_format", data_format, FORMATS)
    if diff_dst.ndim < 2:
        raise ValueError(f"BiasAddBackward: diff_dst must have at least 2 dimensions, got shape {diff_dst.shape}")
    c = channel_axis(data_format, diff_dst.ndim)
    return _channel_sum(diff_dst, c, lambda i: diff_dst[i], name or "bias_add_backward", "bias_add_backward")


def _channel_sum(like: Tensor, c: int, term, name: str, tag: str) -> Tensor:
    """``out[ch] = sum of term(index)`` over every index of ``like``'s shape with channel ``ch``
    (axis ``c``)."""
    others = [d for d in range(like.ndim) if d != c]

    def body(ch):
        rs = [reduce_axis((0, like.shape[d]), name=f"r{d}") for d in others]
        index = list(rs)
        index.insert(c, ch)
        return rsum(term(tuple(index)), axis=rs)
    return compute((like.shape[c],), body, name=name, tag=tag)


def batch_norm_backward(x: Tensor, diff_dst: Tensor, mean: Tensor, variance: Tensor, gamma: Tensor | None = None,
                        epsilon: float = 1e-5, data_format: str = "NXC", name: str | None = None):
    """BatchNormTrainingBackward: with ``r = 1 / sqrt(variance + epsilon)`` per channel and ``M``
    the elements per channel, ``diff_beta = sum(diff_dst)``, ``diff_gamma = r * sum(diff_dst *
    (x - mean))`` and ``diff_src = gamma * r * (diff_dst - diff_beta / M - (x - mean) * r *
    diff_gamma / M)`` (``gamma`` 1 when absent); sums over every axis but the channel axis.
    Returns ``(diff_src, diff_gamma, diff_beta)``.

    Example:
        >>> from tilefuse.tensorir import placeholder
        >>> x = placeholder((2, 5, 7)); p = [placeholder((5,)) for _ in range(3)]
        >>> dx, dg, db = batch_norm_backward(x, placeholder((2, 5, 7)), *p, data_format="NCX")
        >>> dx.shape, dg.shape, dx.op.tag
        ((2, 5, 7), (5,), 'batch_norm_backward')
    """
    op = "BatchNormTrainingBackward"
    check_float(op, "src", x)
    check_choice(op, "data_format", data_format, FORMATS)
    eps = check_number(op, "epsilon", epsilon)
    if x.ndim < 2:
        raise ValueError(f"BatchNormTrainingBackward: src must have rank >= 2, got shape {x.shape}")
    check_float(op, "diff_dst", diff_dst)
    check_same_dtype(op, src=x, diff_dst=diff_dst)
    if diff_dst.shape != x.shape:
        raise ValueError(f"BatchNormTrainingBackward: src {x.shape} and diff_dst {diff_dst.shape} differ in shape")
    c = channel_axis(data_format, x.ndim)
    channels = x.shape[c]
    params = {"mean": mean, "variance": variance, **({"gamma": gamma} if gamma is not None else {})}
    for arg, t in params.items():
        check_float(op, arg, t)
        check_same_dtype(op, src=x, **{arg: t})
        if t.shape != (channels,):
            raise ValueError(f"BatchNormTrainingBackward: {arg} must be 1-D with {channels} elements (the channels of "
                             f"src {x.shape} in {data_format}), got shape {t.shape}")
    base, tag = name or "batch_norm_backward", "batch_norm_backward"
    count = fconst(math.prod(x.shape) // channels, x.dtype)
    diff_beta = _channel_sum(x, c, lambda i: diff_dst[i], base + "_diff_beta", tag)
    centered = _channel_sum(x, c, lambda i: diff_dst[i] * (x[i] - mean[i[c]]), base + "_sum", tag)

    def rstd(ch):
        return ti.rsqrt(variance[ch] + fconst(eps, x.dtype))
    diff_gamma = compute((channels,), lambda ch: centered[ch] * rstd(ch), name=base + "_diff_gamma", tag=tag)

    def body(*i):
        ch = i[c]
        r = rstd(ch)
        scale = r if gamma is None else gamma[ch] * r
        return scale * (diff_dst[i] - diff_beta[ch] / count - (x[i] - mean[ch]) * r * diff_gamma[ch] / count)
    return compute(x.shape, body, name=base, tag=tag), diff_gamma, diff_beta
