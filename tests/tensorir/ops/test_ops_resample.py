"""tensorir.ops.resample: Interpolate against a loop reference built from oneDNN's documented
coordinate transformation, nearest and linear, NCX and NXC, sizes and scales; Resize against
ONNX's formulas in float64, every coordinate transformation and nearest mode."""
import itertools
import math

import numpy as np
import pytest

from tilefuse.tensorir.errors import Unsupported

from host_vectors import LANES
from ops_testing import check, from_ncx, rand, to_ncx
from tilefuse.schedule import lower, template_for
from tilefuse.tensorir import placeholder
from tilefuse.tensorir import ops
from tilefuse.tensorir.expr import Max, Min, Select
from tilefuse.tensorir.stmt import For
from tilefuse.tensorir.walk import walk


def ref_interpolate(x, sizes, mode, coordinate_mode, data_format):
    x = to_ncx(x, data_format).astype(np.float64)
    n, c, *ins = x.shape
    y = np.zeros((n, c, *sizes))
    for o in itertools.product(*[range(v) for v in sizes]):
        corners = []
        for oo, i, out in zip(o, ins, sizes):
            if mode == "nearest":
                corners.append([(min(math.floor((oo + 0.5) * i / out), i - 1), 1.0)])
                continue
            if coordinate_mode == "align_corners":
                s = 0.0 if out == 1 else oo * (i - 1) / (out - 1)
            else:
                s = (oo + 0.5) * i / out - 0.5
            s = min(max(s, 0.0), i - 1)
            lo = math.floor(s)
            hi = min(lo + 1, i - 1)
            corners.append([(lo, 1 - (s - lo)), (hi, s - lo)])
        for combo in itertools.product(*corners):
            weight = np.prod([wt for _, wt in combo])
            y[(slice(None), slice(None), *o)] += weight * x[(slice(None), slice(None), *[p for p, _ in combo])]
    return from_ncx(y, data_format)


CASES = [
    # shape, mode, sizes, scales, coordinate mode, data format
    ((2, 3, 7, 13), "nearest", [13, 7], None, "half_pixel", "NCX"),
    ((2, 7, 13, 3), "nearest", None, [1.5, 0.5], "half_pixel", "NXC"),
    ((2, 3, 7, 13), "linear", [13, 5], None, "half_pixel", "NCX"),
    ((2, 7, 13, 3), "bilinear", [6, 37], None, "align_corners", "NXC"),
    ((2, 3, 7, 13), "linear", [7, 1], None, "align_corners", "NCX"),
    ((1, 2, 5, 4, 6), "trilinear", None, [2.0, 0.5, 1.0], "half_pixel", "NCX"),
    ((2, 3, 21), "nearest", None, [0.809524], "half_pixel", "NCX"),      # the conformance pattern's scale
    ((2, 3, 21), "linear", [21], None, "half_pixel", "NCX"),              # identity
]


@pytest.mark.parametrize("shape, mode, sizes, scales, coordinate_mode, data_format", CASES)
def test_interpolate(shape, mode, sizes, scales, coordinate_mode, data_format):
    x = placeholder(shape, name="x")
    xv = rand(shape)
    y = ops.interpolate(x, mode, sizes=sizes, scales=scales, coordinate_transformation_mode=coordinate_mode,
                        data_format=data_format)
    spatial = list(y.shape[2:]) if data_format == "NCX" else list(y.shape[1:-1])
    if scales:
        in_sp = shape[2:] if data_format == "NCX" else shape[1:-1]
        assert spatial == [int(np.float32(i) * np.float32(s)) for i, s in zip(in_sp, scales)]
    else:
        assert spatial == sizes
    check(y, {x: xv}, ref_interpolate(xv, spatial, mode, coordinate_mode, data_format), template="injective",
          rtol=1e-5, atol=1e-5)


def test_interpolate_rejects_bad_attributes():
    x = placeholder((1, 2, 5, 5))
    with pytest.raises(ValueError, match="exactly one of"):
        ops.interpolate(x, "linear", data_format="NCX")
    with pytest.raises(ValueError, match="exactly one of"):
        ops.interpolate(x, "linear", sizes=[3, 3], scales=[2.0, 2.0], data_format="NCX")
    with pytest.raises(ValueError, match="sizes"):
        ops.interpolate(x, "linear", sizes=[3], data_format="NCX")
    with pytest.raises(ValueError, match="mode"):
        ops.interpolate(x, "cubic", sizes=[3, 3], data_format="NCX")
    with pytest.raises(Unsupported, match="nearest.*half_pixel"):
        ops.interpolate(x, "nearest", sizes=[3, 3], coordinate_transformation_mode="align_corners")
    with pytest.raises(ValueError, match="not positive"):
        ops.interpolate(x, "nearest", scales=[0.1, 1.0], data_format="NCX")
    with pytest.raises(ValueError, match="rank >= 3"):
        ops.interpolate(placeholder((4, 4)), "nearest", sizes=[2])


# ---------------------------------------------------------------------------- ONNX Resize

def _onnx_coordinate(o, n_in, n_out, scale, mode):
    """ONNX's x_original, in float64, straight from the operator's definition."""
    if mode == "asymmetric":
        return o / scale
    if mode == "align_corners":
        return 0.0 if n_out == 1 else o * (n_in - 1) / (n_out - 1)
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if n_out > 1 else 0.0
    if mode == "half_pixel_symmetric":
        adjustment = n_out / (scale * n_in)
        return n_in / 2 * (1 - adjustment) + (o + 0.5) / scale - 0.5
    return (o + 0.5) / scale - 0.5


def _ref_resize(x, sizes, scales, mode, ctm, nearest_mode):
    y = x.astype(np.float64)
    rounding = {"floor": np.floor, "ceil": np.ceil, "round_prefer_floor": lambda q: np.ceil(q - 0.5),
                "round_prefer_ceil": lambda q: np.floor(q + 0.5)}[nearest_mode]
    for axis, (n_in, n_out) in enumerate(zip(x.shape, sizes)):
        scale = scales[axis] if scales else n_out / n_in
        if n_in == n_out and scale == 1:
            continue
        q = np.array([_onnx_coordinate(o, n_in, n_out, scale, ctm) for o in range(n_out)])
        if mode == "nearest":
            y = np.take(y, np.clip(rounding(q), 0, n_in - 1).astype(int), axis=axis)
            continue
        left = np.floor(q)
        w = (q - left).reshape([-1 if k == axis else 1 for k in range(y.ndim)])
        left = left.astype(int)
        y = np.take(y, np.clip(left, 0, n_in - 1), axis=axis) * (1 - w) + \
            np.take(y, np.clip(left + 1, 0, n_in - 1), axis=axis) * w
    return y


RESIZE_CASES = [   # src shape, sizes, scales, mode, coordinate transformation, nearest mode
    ((1, 2, 7, 9), (1, 2, 14, 18), None, "nearest", "asymmetric", "floor"),
    ((1, 2, 7, 9), (1, 2, 14, 27), [1, 1, 2.0, 3.0], "nearest", "half_pixel", "round_prefer_floor"),
    ((1, 2, 7, 9), (1, 2, 10, 5), None, "nearest", "align_corners", "round_prefer_ceil"),
    ((1, 3, 8, 6), (1, 3, 3, 13), None, "nearest", "pytorch_half_pixel", "ceil"),
    ((1, 2, 7, 9), (1, 2, 14, 18), None, "linear", "half_pixel", "round_prefer_floor"),
    ((1, 2, 7, 9), (1, 2, 12, 4), None, "linear", "align_corners", "round_prefer_floor"),
    ((2, 2, 5, 6), (2, 2, 9, 14), None, "linear", "half_pixel_symmetric", "round_prefer_floor"),
    ((1, 2, 9, 7), (1, 2, 3, 21), [1, 1, 0.3333333, 3.0], "linear", "asymmetric", "round_prefer_floor"),
    ((3, 5), (3, 1), None, "linear", "pytorch_half_pixel", "round_prefer_floor"),       # a single output
    ((2, 4, 6), (4, 2, 6), None, "nearest", "half_pixel", "round_prefer_floor"),         # leading axes
]


@pytest.mark.parametrize("shape, sizes, scales, mode, ctm, nearest", RESIZE_CASES)
def test_resize_against_onnx_formulas(shape, sizes, scales, mode, ctm, nearest):
    x = placeholder(shape, name="x")
    xv = rand(shape)
    y = ops.resize(x, sizes, scales, mode, ctm, nearest)
    assert y.shape == tuple(sizes) and y.op.tag == "resize"
    check(y, {x: xv}, _ref_resize(xv, sizes, scales, mode, ctm, nearest), template="injective",
          rtol=1e-5, atol=1e-5)


def test_resize_interior_reads_without_select_or_gather():
    x = placeholder((1, 4, 20, 5 * LANES), name="x")                              # 10 vectors per output row
    y = ops.resize(x, (1, 4, 40, 10 * LANES), None, "linear", "half_pixel")
    t = template_for(y)
    func = lower(t.apply(t.default_config()), t.args)
    loops = [n for n in walk(func.body) if isinstance(n, For)]
    rows = [n for n in loops if n.var.name == "ax2" and n.extent.value == 38]     # all but the first and last
    vectors = [n for n in walk(rows[0]) if isinstance(n, For) and n.var.name == "ax3.outer"]
    assert [v.extent.value for v in vectors] == [8]                                # all but the first and last
    # the interior's reads are linear in the lane (a wide load and a shuffle, no gather); the
    # clamps and selects that gather stay in the border rows and vectors
    assert not any(isinstance(n, (Select, Max, Min)) for n in walk(vectors[0]))
    assert "shufflevector" in t.build(t.default_config()).source("llvm")
    nearest = ops.resize(x, (1, 4, 40, 10 * LANES), [1, 1, 2.0, 2.0], "nearest", "asymmetric", "floor")
    t = template_for(nearest)
    assert "masked.gather" not in t.build(t.default_config()).source("llvm")


def test_resize_rejects_what_it_does_not_compile():
    x = placeholder((1, 2, 4, 4))
    with pytest.raises(Unsupported, match="cubic"):
        ops.resize(x, (1, 2, 8, 8), None, "cubic")
    with pytest.raises(ValueError, match="sizes"):
        ops.resize(x, (8, 8), None, "nearest")
    with pytest.raises(ValueError, match="scales"):
        ops.resize(x, (1, 2, 8, 8), [1, 1, 2], "nearest")
    with pytest.raises(ValueError, match="nearest_mode"):
        ops.resize(x, (1, 2, 8, 8), None, "nearest", nearest_mode="round")
