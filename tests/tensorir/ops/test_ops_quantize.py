"""tensorir.ops.quantize against numpy: round half to even, saturation, per-tensor and
per-channel scales and zero points, and back."""
import numpy as np
import pytest

from ops_testing import check, rand
from tilefuse.tensorir import placeholder
from tilefuse.tensorir import ops


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("qtype, axis", [("per_tensor", 1), ("per_channel", 1), ("per_channel", -1)])
def test_quantize_and_dequantize(dtype, qtype, axis):
    shape = (7, 5, 37) if qtype == "per_tensor" else (7, 5, 3)   # few channels: each has its own select
    n = shape[axis] if qtype == "per_channel" else 1
    rng = np.random.default_rng(3)
    scales = list(rng.uniform(0.01, 0.05, n))
    zps = list(rng.integers(0, 20, n)) if dtype == "uint8" else list(rng.integers(-5, 5, n))
    zps = [int(z) for z in zps]
    xv = rng.uniform(-4, 4, shape).astype(np.float32)     # its own draws: saturation must happen
    x = placeholder(shape, name="x")
    q = ops.quantize(x, scales, zps, qtype, axis, dtype)
    view = [1] * len(shape)
    if qtype == "per_channel":
        view[axis] = -1
    s, z = np.reshape(scales, view), np.reshape(zps, view)
    info = np.iinfo(dtype)
    want = np.clip(np.rint(xv.astype(np.float64) / s + z), info.min, info.max).astype(dtype)
    assert (want == info.max).any() and (want == info.min).any()       # saturation is exercised
    check(q, {x: xv}, want, template="injective", atol=1)
    qv = want
    p = placeholder(shape, dtype, name="q")
    check(ops.dequantize(p, scales, zps, qtype, axis), {p: qv}, (qv.astype(np.float64) - z) * s,
          template="injective", rtol=1e-6, atol=1e-6)


def test_quantize_rounds_ties_to_even():
    x = placeholder((6,), name="x")
    xv = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 300.0], np.float32)
    check(ops.quantize(x, [1.0]), {x: xv}, np.array([0, 2, 2, 0, -2, 127], np.int8))


def test_quantize_rejects_bad_attributes():
    x = placeholder((2, 3))
    with pytest.raises(ValueError, match="per_tensor.*one scale"):
        ops.quantize(x, [0.1, 0.2])
    with pytest.raises(ValueError, match="per_channel.*3 scales"):
        ops.quantize(x, [0.1, 0.2], qtype="per_channel", axis=1)
    with pytest.raises(ValueError, match="2 scales but 1 zero points"):
        ops.quantize(x, [0.1, 0.2], [0], qtype="per_channel", axis=0)
    with pytest.raises(ValueError, match="non-zero"):
        ops.quantize(x, [0.0])
    with pytest.raises(ValueError, match="dst dtype"):
        ops.quantize(x, [0.1], dtype="int32")
    with pytest.raises(TypeError, match="Dequantize.*int8 or uint8"):
        ops.dequantize(x, [0.1])
    with pytest.raises(TypeError, match="Quantize.*float"):
        ops.quantize(placeholder((2,), "int32"), [0.1])


@pytest.mark.parametrize("qtype, axis, zps_dtype", [("per_tensor", 1, None), ("per_channel", 1, "int32"),
                                                    ("per_channel", -1, "uint8")])
def test_dynamic_quantize_and_dequantize_read_scales_from_tensors(qtype, axis, zps_dtype):
    shape = (7, 5, 13)
    n = shape[axis] if qtype == "per_channel" else 1
    rng = np.random.default_rng(5)
    sv = rng.uniform(0.01, 0.05, n).astype("float32")
    zv = None if zps_dtype is None else rng.integers(0, 9, n).astype(zps_dtype)
    x, s = placeholder(shape, name="x"), placeholder((n,), name="s")
    z = None if zps_dtype is None else placeholder((n,), zps_dtype, name="z")
    xv = rand(shape, "float32", -3, 3)
    feeds = {x: xv, s: sv, **({z: zv} if z is not None else {})}
    view = [1] * len(shape)
    if qtype == "per_channel":
        view[axis] = -1
    sc = sv.astype(np.float64).reshape(view)
    zc = 0 if zv is None else zv.astype(np.float64).reshape(view)
    want = np.clip(np.rint(xv / sc + zc), -128, 127).astype("int8")
    check(ops.dynamic_quantize(x, s, z, qtype, axis), feeds, want, template="injective", atol=1)
    q = placeholder(shape, "int8", name="q")
    feeds_dq = {q: want, s: sv, **({z: zv} if z is not None else {})}
    check(ops.dynamic_dequantize(q, s, z, qtype, axis), feeds_dq, (want - zc) * sc, rtol=1e-6, atol=1e-6)


def test_dynamic_quantize_rejects_bad_tensors():
    x = placeholder((2, 3))
    with pytest.raises(ValueError, match="scales must hold 3 value"):
        ops.dynamic_quantize(x, placeholder((2,)), qtype="per_channel", axis=1)
    with pytest.raises(ValueError, match="scales must hold 1 value"):
        ops.dynamic_quantize(x, placeholder((3,)))
    with pytest.raises(TypeError, match="zps must be an int8, uint8 or int32"):
        ops.dynamic_dequantize(placeholder((2, 3), "int8"), placeholder((1,)), placeholder((1,)))
    with pytest.raises(ValueError, match="qtype"):
        ops.dynamic_dequantize(placeholder((2, 3), "int8"), placeholder((1,)), qtype="per_group")
