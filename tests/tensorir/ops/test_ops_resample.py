"""tensorir.ops.resample (Interpolate) against a loop reference built from oneDNN's documented
coordinate transformation, nearest and linear, NCX and NXC, sizes and scales."""
import itertools
import math

import numpy as np
import pytest

from tensorir.errors import Unsupported

from ops_testing import check, from_ncx, rand, to_ncx
from tensorir import placeholder
from tensorir import ops


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
