"""tensorir.ops.elementwise against numpy, built with the template for the DAG and with the
default schedule, on shapes that do not divide the vector widths."""
import math

import numpy as np
import pytest

from ops_testing import check, rand
from tilefuse.tensorir import DTypeError, placeholder
from tilefuse.tensorir import ops

SHAPE = (7, 37)
erf = np.vectorize(math.erf)


def softplus_ref(x, beta=1.0):
    return np.logaddexp(0.0, beta * x.astype(np.float64)) / beta


UNARY = [
    ("abs", ops.abs, {}, np.abs),
    ("neg", ops.neg, {}, np.negative),
    ("erf", ops.erf, {}, erf),
    ("exp", ops.exp, {}, np.exp),
    ("log", ops.log, {}, np.log),
    ("sqrt", ops.sqrt, {}, np.sqrt),
    ("square", ops.square, {}, np.square),
    ("reciprocal", ops.reciprocal, {}, np.reciprocal),
    ("relu", ops.relu, {}, lambda x: np.maximum(x, 0)),
    ("leaky_relu", ops.leaky_relu, {"alpha": 0.1}, lambda x: np.where(x >= 0, x, 0.1 * x)),
    ("elu", ops.elu, {"alpha": 1.5}, lambda x: np.where(x >= 0, x, 1.5 * np.expm1(x))),
    ("gelu_erf", ops.gelu, {}, lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2)))),
    ("gelu_tanh", ops.gelu, {"mode": "gelu_tanh"},
     lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    ("sigmoid", ops.sigmoid, {}, lambda x: 1 / (1 + np.exp(-x))),
    ("tanh", ops.tanh, {}, np.tanh),
    ("hardsigmoid", ops.hardsigmoid, {"alpha": 0.2, "beta": 0.5}, lambda x: np.clip(0.2 * x + 0.5, 0, 1)),
    ("hardswish", ops.hardswish, {}, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("hardswish_tails", ops.hardswish, {}, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("mish", ops.mish, {}, lambda x: x * np.tanh(softplus_ref(x))),
    ("softplus", ops.softplus, {}, softplus_ref),
    ("softplus_beta", ops.softplus, {"beta": -2.0}, lambda x: softplus_ref(x, -2.0)),
    ("clamp", ops.clamp, {"min": -0.5, "max": 1.25}, lambda x: np.clip(x, -0.5, 1.25)),
    ("pow", ops.pow, {"beta": 3.0}, lambda x: x ** 3),
    ("pow_square", ops.pow, {"beta": 2.0}, lambda x: x ** 2),
]


@pytest.mark.parametrize("label, fn, attrs, ref", UNARY, ids=[u[0] for u in UNARY])
def test_unary(label, fn, attrs, ref):
    x = placeholder(SHAPE, name="x")
    a = rand(SHAPE) * 4
    if label in ("log", "sqrt"):
        a = np.abs(a) + 0.01
    if label == "softplus":
        a[0, :4] = [100.0, -100.0, 30.0, -30.0]     # no overflow either way
    if label == "hardswish_tails":
        a[0, :6] = [-3.0, 3.0, -2.9999998, 2.9999998, 1e30, -1e30]     # its corners and tails
    y = fn(x, **attrs)
    assert y.op.tag not in ("injective", "reduction", "complex", "opaque")
    expected = ref(a.astype(np.float64))
    check(y, {x: a}, expected, template="injective", rtol=2e-5, atol=2e-6)


def test_activations_divide_nothing_and_gelu_tanh_takes_one_exp():
    """hardswish is ONNX's x * clip(x / 6 + 0.5, 0, 1): a multiply-add where (x + 3) / 6 took a
    division; gelu_tanh is x * sigmoid(2u), equal to 0.5 x (1 + tanh(u)): one exp, no tanh."""
    from tilefuse.tensorir.expr import Call, Div
    from tilefuse.tensorir.walk import walk
    x = placeholder(SHAPE, name="x")
    for y in (ops.hardswish(x), ops.gelu(x, mode="gelu_tanh")):
        assert not any(isinstance(node, Div) for node in walk(y.op.body))
    assert [n.name for n in walk(ops.gelu(x, mode="gelu_tanh").op.body) if isinstance(n, Call)] == ["sigmoid"]


def test_relu_keeps_nan_and_works_on_ints():
    x = placeholder((37,), name="x")
    a = rand(37)
    a[3] = np.nan
    check(ops.relu(x), {x: a}, np.maximum(a, 0))
    xi = placeholder((13,), "int32", name="xi")
    ai = np.arange(-6, 7, dtype="int32")
    check(ops.relu(xi), {xi: ai}, np.maximum(ai, 0))
    check(ops.abs(xi), {xi: ai}, np.abs(ai))


TIES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.49999997, 3.7, -3.7, 1e8 + 1, 0.0,
                 8388609.0, -7.5, np.nan, np.inf, -np.inf], "float32")


def test_round_half_to_even_by_default_and_half_away_from_zero():
    x = placeholder(TIES.shape, name="x")
    check(ops.round(x), {x: TIES}, np.rint(TIES), template="injective", rtol=0, atol=0)
    a64 = TIES.astype(np.float64)
    away = np.sign(a64) * np.floor(np.abs(a64) + 0.5)       # exact in float64
    check(ops.round(x, mode="half_away_from_zero"), {x: TIES}, away, rtol=0, atol=0)
    with pytest.raises(ValueError, match="Round.*mode"):
        ops.round(x, mode="up")


BINARY = [
    ("add", ops.add, np.add), ("subtract", ops.subtract, np.subtract), ("multiply", ops.multiply, np.multiply),
    ("divide", ops.divide, np.divide), ("maximum", ops.maximum, np.maximum),
    ("minimum", ops.minimum, np.minimum), ("pow", ops.pow, np.power),
    ("squared_difference", ops.squared_difference, lambda a, b: (a - b) ** 2),
    ("greater_equal", ops.greater_equal, np.greater_equal),
]


@pytest.mark.parametrize("label, fn, ref", BINARY, ids=[b[0] for b in BINARY])
def test_binary_broadcasts_like_numpy(label, fn, ref):
    a_shape, b_shape = (7, 1, 13), (5, 1)
    a, b = placeholder(a_shape, name="a"), placeholder(b_shape, name="b")
    av, bv = rand(a_shape), rand(b_shape)
    if label == "pow":
        av = np.abs(av) + 0.1
    if label == "greater_equal":
        bv[0, 0] = av[0, 0, 0]                       # a tie
    y = fn(a, b)
    assert y.shape == (7, 5, 13)
    check(y, {a: av, b: bv}, ref(av, bv), template="injective", rtol=1e-5, atol=1e-6)


def test_binary_on_equal_shapes_and_auto_broadcast_none():
    a, b = placeholder((37,), "int32", name="a"), placeholder((37,), "int32", name="b")
    av, bv = np.arange(37, dtype="int32"), np.arange(37, dtype="int32")[::-1].copy()
    check(ops.add(a, b, auto_broadcast="none"), {a: av, b: bv}, av + bv)
    with pytest.raises(ValueError, match="Add.*auto_broadcast"):
        ops.add(a, placeholder((1,), "int32"), auto_broadcast="none")
    with pytest.raises(ValueError, match="Multiply.*broadcast"):
        ops.multiply(placeholder((7, 3)), placeholder((4,)))
    with pytest.raises(TypeError, match="Add.*float64"):
        ops.add(placeholder((3,)), placeholder((3,), "float64"))


def test_select_broadcasts_cond_one_way():
    cond, a, b = placeholder((13,), "bool", name="cond"), placeholder((7, 13), name="a"), placeholder((1,), name="b")
    cv, av, bv = rand(13) > 0, rand((7, 13)), rand(1)
    check(ops.select(cond, a, b), {cond: cv, a: av, b: bv}, np.where(cv, av, bv), template="injective")
    with pytest.raises(ValueError, match="Select.*cond"):
        ops.select(placeholder((2, 7, 13), "bool"), a, b)
    with pytest.raises(TypeError, match="Select.*bool"):
        ops.select(a, a, b)


@pytest.mark.parametrize("data_format", ["NCX", "NXC"])
def test_bias_add(data_format):
    shape = (2, 5, 7, 13) if data_format == "NCX" else (2, 7, 13, 5)
    x, b = placeholder(shape, name="x"), placeholder((5,), name="b")
    xv, bv = rand(shape), rand(5)
    expected = xv + (bv.reshape(1, 5, 1, 1) if data_format == "NCX" else bv)
    check(ops.bias_add(x, b, data_format=data_format), {x: xv, b: bv}, expected, template="injective")
    with pytest.raises(ValueError, match="BiasAdd.*bias"):
        ops.bias_add(x, placeholder((7,)), data_format=data_format)


@pytest.mark.parametrize("slope_shape, per_channel, data_format, view", [
    ((5,), True, "NCX", (1, 5, 1, 1)),
    ((5,), True, "NXC", (5,)),
    ((13,), False, "NCX", (13,)),
    ((7, 1), True, "NCX", (7, 1)),
])
def test_prelu_broadcast_rules(slope_shape, per_channel, data_format, view):
    shape = (2, 5, 7, 13) if data_format == "NCX" else (2, 7, 13, 5)
    x, s = placeholder(shape, name="x"), placeholder(slope_shape, name="slope")
    xv, sv = rand(shape), rand(slope_shape)
    expected = np.where(xv >= 0, xv, sv.reshape(view) * xv)
    y = ops.prelu(x, s, data_format=data_format, per_channel_broadcast=per_channel)
    check(y, {x: xv, s: sv}, expected, template="injective")


def test_prelu_rejects_a_slope_that_does_not_match():
    with pytest.raises(ValueError, match="PReLU.*slope"):
        ops.prelu(placeholder((2, 5, 7)), placeholder((6,)), data_format="NCX")


def test_typecast():
    x = placeholder((37,), name="x")
    xv = rand(37) * 10
    check(ops.typecast(x, "float64"), {x: xv}, xv.astype("float64"), rtol=0, atol=0)
    check(ops.typecast(x, "int32"), {x: xv}, xv.astype("int32"))
    xi = placeholder((13,), "int32", name="xi")
    check(ops.typecast(xi, "float32"), {xi: np.arange(13, dtype="int32")}, np.arange(13, dtype="float32"))
    with pytest.raises(ValueError, match="TypeCast"):
        ops.typecast(x, "complex64")


def test_an_elementwise_chain_is_injective_and_float64_works():
    x, b = placeholder((3, 7, 13), "float64", name="x"), placeholder((13,), "float64", name="b")
    xv, bv = rand((3, 7, 13), "float64"), rand(13, "float64")
    y = ops.hardswish(ops.clamp(ops.multiply(ops.add(x, b), x), min=-2.0, max=2.0))
    v = np.clip((xv + bv) * xv, -2, 2)
    check(y, {x: xv, b: bv}, v * np.clip(v + 3, 0, 6) / 6, template="injective", rtol=1e-12, atol=1e-12)


def test_bad_attributes_and_dtypes_raise():
    x = placeholder((3,), name="x")
    with pytest.raises(ValueError, match="GELU.*mode"):
        ops.gelu(x, mode="fast")
    with pytest.raises(ValueError, match="Elu.*alpha"):
        ops.elu(x, alpha=-1.0)
    with pytest.raises(ValueError, match="SoftPlus.*beta"):
        ops.softplus(x, beta=0.0)
    with pytest.raises(ValueError, match="Clamp.*min"):
        ops.clamp(x, min=2.0, max=1.0)
    with pytest.raises(ValueError, match="LeakyReLU.*alpha"):
        ops.leaky_relu(x, alpha="0.1")
    with pytest.raises(TypeError, match="Exp.*float"):
        ops.exp(placeholder((3,), "int32"))
    with pytest.raises(TypeError, match="Sigmoid.*Tensor"):
        ops.sigmoid(np.zeros(3))
    assert issubclass(DTypeError, TypeError)


def test_neg_on_ints_and_bad_dtypes():
    x = placeholder((5,), "int32", name="x")
    check(ops.neg(x), {x: np.arange(-2, 3, dtype="int32")}, [2, 1, 0, -1, -2])
    with pytest.raises(TypeError, match="Neg: src must have a signed dtype"):
        ops.neg(placeholder((3,), "uint8"))
    with pytest.raises(TypeError, match="Erf.*float"):
        ops.erf(placeholder((3,), "int32"))
