"""Winograd convolutions in the complex template (schedule/templates/winograd.py): which
convolutions match, the "winograd" knob they (and only they) get, Winograd builds that equal
the direct convolution and numpy on shapes the tiles and panels do not divide (with bias,
residual and activation epilogues), the filters packed by numpy once per weight array, the
artifact round trip, and the ``Schedule.redefine`` primitive it rests on."""
import hashlib
import json
import struct

import numpy as np
import pytest

from tilefuse.schedule import ScheduleError, build, create_schedule, template_for
from tilefuse.schedule.space import Config
from tilefuse.schedule.templates.winograd import TILE_SIZES, default_winograd, winograd_operands
from tilefuse.tensorir import compute, ops, placeholder, reduce_axis, sum as rsum
from tilefuse.tensorir.expr import Reduce
from tilefuse.tensorir.intrinsics import cast
from tilefuse.tensorir.runtime.artifact import MAGIC, dumps, loads
from tilefuse.tensorir.runtime.prepacked import PrepackedKernel, WinogradFilters
from tilefuse.tensorir.tensor import ComputeOp, post_order
from threads_testing import run_on_threads

RNG = np.random.default_rng(77)


def _anchor(y):
    """The one multiply-accumulate op under ``y``."""
    found = [op for op in post_order([y]) if isinstance(op, ComputeOp) and isinstance(op.body, Reduce)]
    assert len(found) == 1
    return found[0]


def _conv(x_shape, w_shape, strides=(1, 1), pads=(1, 1), dilations=(1, 1), groups=1, data_format="NXC",
          weights_format="XIO", dtype="float32", constant=True):
    x = placeholder(x_shape, dtype, name="x")
    w = placeholder(w_shape, dtype, name="w", constant=constant)
    return ops.conv(x, w, list(strides), list(pads), list(pads), list(dilations), groups=groups,
                    data_format=data_format, weights_format=weights_format)


# ---------------------------------------------------------------- which convolutions match

@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("fmt", ["XIO", "OIX"])
@pytest.mark.parametrize("pads", [1, 0])
def test_constant_weight_channels_last_3x3_convolutions_match(fmt, pads, stride):
    y = _conv((2, 9, 7, 4), (3, 3, 4, 6) if fmt == "XIO" else (6, 4, 3, 3), pads=(pads, pads), weights_format=fmt,
              strides=(stride, stride))
    operands = winograd_operands(_anchor(y))
    assert operands is not None
    padded, weights, got_fmt, got_stride = operands
    assert got_fmt == fmt and weights.name == "w" and got_stride == stride
    if pads:
        assert padded.name == "conv_pad" and padded.shape == (2, 11, 9, 4)
    else:
        assert padded.name == "x" and padded.shape == (2, 9, 7, 4)       # no padding stage: the input itself


def _matmul_with_constant_weights():
    A, W = placeholder((4, 6), name="A"), placeholder((6, 5), name="W", constant=True)
    r = reduce_axis((0, 6), name="r")
    return compute((4, 5), lambda i, j: rsum(A[i, r] * W[r, j], axis=r), name="C")


NOT_WINOGRAD = {
    "stride 3": lambda: _conv((1, 8, 8, 4), (3, 3, 4, 6), strides=(3, 3)),
    "stride 1x2": lambda: _conv((1, 8, 8, 4), (3, 3, 4, 6), strides=(1, 2)),
    "stride 2 dilation 2": lambda: _conv((1, 9, 9, 4), (3, 3, 4, 6), strides=(2, 2), dilations=(2, 2)),
    "dilation 2": lambda: _conv((1, 8, 8, 4), (3, 3, 4, 6), dilations=(2, 2)),
    "5x5": lambda: _conv((1, 8, 8, 4), (5, 5, 4, 6), pads=(2, 2)),
    "3x1": lambda: _conv((1, 8, 8, 4), (3, 1, 4, 6), pads=(1, 0)),
    "groups 2": lambda: _conv((1, 8, 8, 4), (3, 3, 2, 6), groups=2),
    "NCX": lambda: _conv((1, 4, 8, 8), (6, 4, 3, 3), data_format="NCX", weights_format="OIX"),
    "weights not constant": lambda: _conv((1, 8, 8, 4), (3, 3, 4, 6), constant=False),
    "float64": lambda: _conv((1, 8, 8, 4), (3, 3, 4, 6), dtype="float64"),
    "1-D": lambda: _conv((1, 8, 4), (3, 4, 6), strides=(1,), pads=(1,), dilations=(1,)),
    "3-D": lambda: _conv((1, 5, 5, 5, 4), (3, 3, 3, 4, 6), strides=(1,) * 3, pads=(1,) * 3, dilations=(1,) * 3),
    "matmul": _matmul_with_constant_weights,
}


@pytest.mark.parametrize("case", list(NOT_WINOGRAD))
def test_other_multiply_accumulates_do_not_match_nor_get_the_knob(case):
    y = NOT_WINOGRAD[case]()
    assert winograd_operands(_anchor(y)) is None
    t = template_for(y)
    assert "winograd" not in t.space.knobs and "winograd" not in t.default_config().values


def test_matching_convolutions_get_the_knob_and_default_to_the_direct_convolution():
    y = ops.relu(_conv((1, 8, 8, 4), (3, 3, 4, 6)))
    t = template_for(y)
    assert t.name == "complex" and t.winograd is not None
    assert t.space.knobs["winograd"].candidates == (0, *TILE_SIZES) == (0, 2, 3, 4)
    assert t.default_config()["winograd"] == 0
    assert all(cfg["winograd"] in (0, 2, 3, 4) for cfg in t.space.sample(5))


@pytest.mark.parametrize("shape, expected", [
    ((1, 56, 56, 64, 64), (4, True)),       # 196 tiles of 4x4; 590 KiB of filters, 6x less than the tiles
    ((1, 28, 28, 128, 128), (4, False)),    # 49 tiles: the 2.4 MB of filters outweigh them
    ((1, 14, 14, 256, 256), (2, False)),    # 16 tiles of 4x4, 49 of 2x2
    ((8, 7, 7, 512, 512), (2, False)),      # a batch's tiles count: 8 x 16
    ((1, 7, 7, 512, 512), (0, False)),      # at most 16 tiles: direct
    ((1, 224, 224, 3, 64), (0, False)),     # 3 input channels
    ((1, 160, 160, 96, 8), (0, False)),     # 8 output channels
])
def test_the_default_takes_winograd_where_its_tiles_serve_enough_products(shape, expected):
    n, h, w, c, o = shape
    y = _conv((n, h, w, c), (3, 3, c, o))
    assert default_winograd(winograd_operands(_anchor(y)), y.shape) == expected
    cfg = template_for(y).default_config()
    assert (cfg["winograd"], cfg["winograd_fused"]) == expected
    strided = _conv((n, 2 * h, 2 * w, c), (3, 3, c, o), strides=(2, 2))     # never at stride 2
    assert default_winograd(winograd_operands(_anchor(strided)), strided.shape) == (0, False)


@pytest.mark.parametrize("shape, expected", [((1, 30, 29, 24, 20), (4, True)),    # 8 x 8 tiles, a row of 30 by 4
                                             ((2, 15, 13, 32, 40), (2, True)),
                                             ((1, 14, 13, 96, 80), (2, False))])
def test_the_default_winograd_build_matches_numpy_on_rows_its_tiles_do_not_divide(shape, expected):
    n, h, w, c, o = shape
    x, b = placeholder((n, h, w, c), name="x"), placeholder((o,), name="b", constant=True)
    wt = placeholder((3, 3, c, o), name="w", constant=True)
    t = template_for(ops.relu(ops.conv(x, wt, [1, 1], [1, 1], [1, 1], [1, 1], bias=b)))
    cfg = t.default_config()
    assert (cfg["winograd"], cfg["winograd_fused"]) == expected and t.space.searchable(t.space.index_of(cfg))
    arrays = {"x": RNG.standard_normal(x.shape).astype("float32"), "w": RNG.standard_normal(wt.shape).astype("float32"),
              "b": RNG.standard_normal(o).astype("float32")}
    want = np.maximum(_reference(arrays["x"], arrays["w"], "XIO", (1, 1), (1, 1)) + arrays["b"], 0)
    out = np.full(want.shape, np.nan, "float32")
    t.build(cfg)(*(arrays[a.name] for a in t.args[:-1]), out)
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-4 * np.abs(want).max())


def test_the_starting_points_are_winograd_at_each_tile_size_and_allowed_by_the_rules():
    t = template_for(ops.relu(_conv((1, 8, 8, 4), (3, 3, 4, 6))))
    default = t.default_config()
    points = t.starting_points()
    assert [(p["winograd"], p["winograd_fused"]) for p in points] == [(2, False), (2, True), (3, False), (3, True),
                                                                      (4, False), (4, True)]
    for p in points:
        assert t.space.searchable(t.space.index_of(p)) and not p["pack"] and p["unroll_k"] == 1
        assert p["prefetch"] == 2048                # the transformed filters fetched ahead
        own = ("winograd", "pack", "winograd_fused", "tile_i", "unroll_k", "prefetch")
        assert {k: v for k, v in p.values.items() if k not in own} == \
            {k: v for k, v in default.values.items() if k not in own}
    # rows of 4, 3 and 2 tiles
    assert [p["tile_i"] for p in points] == [default["tile_i"], 4, default["tile_i"], 1, default["tile_i"], 2]
    strided = template_for(_conv((1, 16, 16, 4), (3, 3, 4, 6), strides=(2, 2)))      # an 8 x 8 output
    assert [(p["winograd"], p["winograd_fused"], p["tile_i"]) for p in strided.starting_points()][1::2] == \
        [(2, True, 4), (3, True, 1), (4, True, 2)]
    assert template_for(NOT_WINOGRAD["stride 1x2"]()).starting_points() == []
    assert template_for(_matmul_with_constant_weights()).starting_points() == []


# ---------------------------------------------------------------- numerics

def _reference(x, w, fmt, pads_begin, pads_end, stride=1):
    """The convolution in float64 by numpy."""
    wx = (w if fmt == "XIO" else w.transpose(2, 3, 1, 0)).astype(np.float64)
    xp = np.pad(x.astype(np.float64), ((0, 0), (pads_begin[0], pads_end[0]), (pads_begin[1], pads_end[1]), (0, 0)))
    h, ww = (xp.shape[1] - 3) // stride + 1, (xp.shape[2] - 3) // stride + 1
    out = np.zeros((x.shape[0], h, ww, wx.shape[3]))
    for k in range(3):
        for l in range(3):
            out += np.einsum("nhwc,co->nhwo", xp[:, k:k + stride * (h - 1) + 1:stride,
                                                 l:l + stride * (ww - 1) + 1:stride], wx[k, l])
    return out


# name: (N, H, W, C, O, weights format, pads_begin, pads_end, epilogue, stride)
CASES = {
    "plain": (2, 13, 11, 5, 19, "XIO", (1, 1), (1, 1), "none", 1),
    "bias_relu": (1, 7, 7, 16, 32, "OIX", (1, 1), (1, 1), "bias_relu", 1),
    "residual": (2, 13, 11, 5, 19, "XIO", (1, 1), (1, 1), "bias_add_relu", 1),
    "uneven_pads": (1, 9, 10, 3, 8, "OIX", (0, 1), (2, 0), "none", 1),
    "stride_2": (2, 13, 11, 5, 19, "XIO", (1, 1), (1, 1), "bias_add_relu", 2),
    "stride_2_uneven_pads": (1, 14, 9, 3, 8, "OIX", (0, 1), (1, 0), "bias_relu", 2),
}


class Case:
    """A convolution with its epilogue, its template, random inputs, the numpy reference and
    the direct (winograd 0) build's output."""

    def __init__(self, name):
        n, h, w, c, o, fmt, pb, pe, epilogue, stride = CASES[name]
        self.fmt = fmt
        x = placeholder((n, h, w, c), name="x")
        wt = placeholder((3, 3, c, o) if fmt == "XIO" else (o, c, 3, 3), name="w", constant=True)
        b = placeholder((o,), name="b", constant=epilogue == "bias_relu") if epilogue != "none" else None
        y = ops.conv(x, wt, [stride, stride], list(pb), list(pe), [1, 1], weights_format=fmt, bias=b)
        self.arrays = {"x": RNG.standard_normal(x.shape).astype("float32"),
                       "w": RNG.standard_normal(wt.shape).astype("float32")}
        self.want = _reference(self.arrays["x"], self.arrays["w"], fmt, pb, pe, stride)
        if b is not None:
            self.arrays["b"] = RNG.standard_normal(o).astype("float32")
            self.want = self.want + self.arrays["b"]
        if epilogue == "bias_relu":
            y = ops.relu(y)
            self.want = np.maximum(self.want, 0)
        elif epilogue == "bias_add_relu":
            r = placeholder(y.shape, name="r")
            y = ops.relu(ops.add(y, r))
            self.arrays["r"] = RNG.standard_normal(y.shape).astype("float32")
            self.want = np.maximum(self.want + self.arrays["r"], 0)
        assert self.want.shape == y.shape
        self.y, self.pads, self.stride = y, (pb, pe), stride
        self.t = template_for(y)
        assert self.t.winograd is not None
        self.inputs = [self.arrays[a.name] for a in self.t.args[:-1]]
        self.direct = self.run(self.build(0))
        self._builds = {}

    def config(self, m, **knobs):
        return Config({**self.t.default_config().values, "unroll_k": 1, **knobs, "winograd": m})

    def build(self, m, **knobs):
        return self.t.build(self.config(m, **knobs))

    def cached_build(self, m):
        if m not in self._builds:
            self._builds[m] = self.build(m)
        return self._builds[m]

    def run(self, f, inputs=None):
        out = np.full(self.y.shape, np.nan, "float32")
        f(*(inputs or self.inputs), out)
        return out

    def check(self, got, want=None, direct=None):
        want = self.want if want is None else want
        direct = self.direct if direct is None else direct
        scale = np.abs(want).max()
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * scale)
        np.testing.assert_allclose(got, direct, rtol=0, atol=1e-4 * scale)


_CASES = {}


def _case(name) -> Case:
    if name not in _CASES:
        _CASES[name] = Case(name)
    return _CASES[name]


@pytest.fixture(scope="module", autouse=True)
def _forget_cases():
    yield
    _CASES.clear()


@pytest.mark.parametrize("name", list(CASES))
def test_the_direct_build_matches_numpy(name):
    case = _case(name)
    np.testing.assert_allclose(case.direct, case.want, rtol=0, atol=1e-5 * np.abs(case.want).max())


@pytest.mark.parametrize("m", TILE_SIZES)
@pytest.mark.parametrize("name", list(CASES))
def test_winograd_matches_the_direct_convolution_and_numpy(name, m):
    case = _case(name)
    f = case.cached_build(m)
    assert isinstance(f, PrepackedKernel)
    winos = [(k, positions) for k, positions in f.packs if isinstance(k, WinogradFilters)]
    assert len(winos) == 1                                     # numpy transforms the filters: no pack kernel
    wino, positions = winos[0]
    assert positions == [[a.name for a in case.t.args].index("w")]
    tj = case.config(m)["tile_j"]
    assert (wino.m, wino.block, wino.weights_format, wino.stride) == (m, tj, case.fmt, case.stride)
    assert wino.args[-1].shape in [tuple(a.shape) for a in f.main.args]
    case.check(case.run(f))


@pytest.mark.parametrize("m, knobs", [(4, {"tile_i": 4, "tile_j": 16, "order": "ji"}),       # 19 = 16 + 3
                                      (2, {"tile_i": 1, "tile_j": 48, "order": "ij", "pack": False}),
                                      (2, {"tile_i": 16, "tile_j": 8, "order": "ji"}),
                                      (4, {"tile_i": 7, "tile_j": 64, "order": "ij"})])
def test_winograd_with_other_register_tiles_and_orders(m, knobs):
    case = _case("plain")
    f = case.build(m, **knobs)
    wino = next(k for k, _ in f.packs if isinstance(k, WinogradFilters))
    assert wino.block == knobs["tile_j"]
    assert wino.args[-1].shape == (m + 2, m + 2, -(-19 // knobs["tile_j"]), 5, knobs["tile_j"])
    case.check(case.run(f))


@pytest.mark.parametrize("fused", [False, True])
def test_winograd_products_fetch_the_transformed_filters_ahead(fused):
    from tilefuse.schedule import lower
    from tilefuse.tensorir.stmt import Prefetch
    from tilefuse.tensorir.walk import walk
    case = _case("plain")
    cfg = case.config(4, tile_i=4, tile_j=16, prefetch=2048, winograd_fused=fused)
    fetches = [n for n in walk(lower(case.t.apply(cfg), case.t.args).body) if isinstance(n, Prefetch)]
    # one per channel step of the products: a channel's row of a 16-wide panel is 64 bytes, 2048 are 32 rows
    assert len(fetches) == 1 and fetches[0].buffer.name.endswith("wino_filter")
    assert str(fetches[0].indices[3]) == "c + 32"
    case.check(case.run(case.t.build(cfg)))


@pytest.mark.parametrize("m", TILE_SIZES)
@pytest.mark.parametrize("name", list(CASES))
def test_fused_winograd_matches_the_direct_convolution_and_numpy(name, m):
    case = _case(name)
    case.check(case.run(case.build(m, winograd_fused=True, tile_i=4, tile_j=16)))


def test_fused_winograd_carries_each_row_of_tiles_through_every_stage_in_one_parallel_iteration():
    from tilefuse.schedule import lower
    case = _case("plain")                            # 2 images of 13 rows: 4 rows of 4x4 tiles each
    cfg = case.config(4, winograd_fused=True, pack=False, tile_i=1)
    assert case.t.space.searchable(case.t.space.index_of(cfg))
    text = str(lower(case.t.apply(cfg), case.t.args))
    parallel = [line.strip() for line in text.splitlines() if "parallel" in line]
    assert parallel == ["parallel (ax0.ax1.outer.fused, 0, 8) {"]
    inside = text.split(parallel[0])[1]
    tiles_per_row = 3                                 # 11 columns in tiles of 4
    for stage, shape in (("conv_wino_in", (6, 6, tiles_per_row, 5)), ("conv_wino_product", (6, 6, 3, 19)),
                         ("conv_wino_rows", (4, 6, 3, 19))):
        assert f"allocate {stage}[{', '.join(map(str, shape))}]" in inside
    space = case.t.space
    assert not space.searchable(space.index_of(case.config(0, winograd_fused=True)))
    assert not space.searchable(space.index_of(case.config(4, winograd_fused=True, pack=False, tile_i=2)))
    assert space.searchable(space.index_of(case.config(2, winograd_fused=True, pack=False, tile_i=2)))   # 6 tiles


def test_the_filters_are_transformed_once_per_weight_array_and_again_for_new_ones():
    case = _case("plain")
    f = case.cached_build(4)
    case.check(case.run(f))
    packed = f._cached[1]
    x2 = RNG.standard_normal(case.arrays["x"].shape).astype("float32")
    out = case.run(f, [x2, case.arrays["w"]])                      # the same weights: not packed again
    assert f._cached[1] is packed
    want = _reference(x2, case.arrays["w"], "XIO", *case.pads)
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-4 * np.abs(want).max())
    w2 = RNG.standard_normal(case.arrays["w"].shape).astype("float32")
    out = case.run(f, [x2, w2])                                     # other weights: packed again
    assert f._cached[1] is not packed
    want = _reference(x2, w2, "XIO", *case.pads)
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-4 * np.abs(want).max())


# ---------------------------------------------------------------- artifacts

def _header(blob):
    at = len(MAGIC)
    _, size = struct.unpack_from("<IQ", blob, at)
    return json.loads(blob[at + 12:at + 12 + size])


def test_a_winograd_kernel_round_trips_through_an_artifact():
    case = _case("residual")
    f = case.cached_build(2)
    blob = dumps(f, {"what": "winograd"})
    entries = [e for e in _header(blob)["prepacked"]["numpy_packs"] if e is not None]
    wino = next(k for k, _ in f.packs if isinstance(k, WinogradFilters))
    assert {"kind": "winograd_filters", **wino.recipe()} in entries
    again, meta = loads(blob)
    assert meta == {"what": "winograd"} and isinstance(again, PrepackedKernel)
    assert again.main_args == f.main_args and [p for _, p in again.packs] == [p for _, p in f.packs]
    loaded = [k for k, _ in again.packs]
    assert [type(k) for k in loaded] == [type(k) for k, _ in f.packs]
    loaded_wino = next(k for k in loaded if isinstance(k, WinogradFilters))
    assert loaded_wino.recipe() == wino.recipe() and loaded_wino.args == wino.args
    got = case.run(again)
    np.testing.assert_array_equal(got, case.run(f))
    case.check(got)
    assert hashlib.sha256(dumps(again, {"what": "winograd"})).digest() == hashlib.sha256(blob).digest()


# ---------------------------------------------------------------- large buffers, threads

def test_a_winograd_kernel_with_large_intermediates_runs_from_several_threads():
    x = placeholder((1, 24, 24, 32), name="x")
    w = placeholder((3, 3, 32, 32), name="w", constant=True)
    y = ops.relu(ops.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1]))
    t = template_for(y)
    f = t.build(Config({**t.default_config().values, "winograd": 4}))
    assert "tilefuse_scratch" in f.main.source("llvm")        # the transformed tiles: 36 x 36 x 32 floats
    wv = RNG.standard_normal(w.shape).astype("float32")
    inputs = [RNG.standard_normal(x.shape).astype("float32") for _ in range(3)]
    wants = [np.maximum(_reference(xv, wv, "XIO", (1, 1), (1, 1)), 0) for xv in inputs]
    f(inputs[0], wv, np.empty(y.shape, "float32"))           # pack once, before the threads share it

    def body(k):
        for _ in range(5):
            out = np.full(y.shape, np.nan, "float32")
            f(inputs[k], wv, out)
            np.testing.assert_allclose(out, wants[k], rtol=0, atol=1e-4 * np.abs(wants[k]).max())
    run_on_threads(body, 3)


# ---------------------------------------------------------------- Schedule.redefine

def _chain():
    A = placeholder((8,), name="A")
    B = compute((8,), lambda i: A[i] * 4.0, name="B")
    C = compute((8,), lambda i: B[i] + 1.0, name="C")
    return A, B, C


def _run(s, args, *inputs):
    out = np.full(args[-1].shape, np.nan, "float32")
    build(s, args)(*inputs, out)
    return out


def test_redefine_computes_the_stage_by_the_equivalent_and_inserts_its_producers():
    A, B, C = _chain()
    twice = compute((8,), lambda i: A[i] * 2.0, name="twice")
    plus = compute((8,), lambda i: twice[i] + twice[i], name="plus")         # producers of producers
    s = create_schedule(C)
    s.redefine(B, compute((8,), lambda i: plus[i] * 1.0 + 0.0))
    assert [st.op.name for st in s.stages] == ["twice", "plus", "B", "C"]
    a = np.arange(8, dtype="float32")
    np.testing.assert_array_equal(_run(s, [A, C], a), a * 4 + 1)


def test_redefine_changes_what_the_stage_computes():
    A, B, C = _chain()
    s = create_schedule(C)
    s.redefine(B, compute((8,), lambda i: A[i] * 3.0))          # not equivalent: shows the body is taken
    a = np.arange(8, dtype="float32")
    np.testing.assert_array_equal(_run(s, [A, C], a), a * 3 + 1)


def test_redefine_reuses_stages_the_schedule_has_and_keeps_readers():
    A = placeholder((8,), name="A")
    P = compute((8,), lambda i: A[i] + 1.0, name="P")
    B = compute((8,), lambda i: P[i] * 4.0, name="B")
    C = compute((8,), lambda i: B[i] - P[i], name="C")
    s = create_schedule(C)
    Q = compute((8,), lambda i: P[i] * 2.0, name="Q")
    s.redefine(B, compute((8,), lambda i: Q[i] * 2.0))
    assert [st.op.name for st in s.stages] == ["P", "Q", "B", "C"]
    a = np.arange(8, dtype="float32")
    np.testing.assert_array_equal(_run(s, [A, C], a), (a + 1) * 4 - (a + 1))


def test_a_redefined_stage_with_a_reduction_can_then_be_scheduled():
    A = placeholder((8, 6), name="A")
    r = reduce_axis((0, 6), name="r")
    B = compute((8,), lambda i: rsum(A[i, r], axis=r), name="B")
    C = compute((8,), lambda i: B[i] * 2.0, name="C")
    s = create_schedule(C)
    D = compute((8, 6), lambda i, j: A[i, 5 - j], name="D")          # the same sum, reversed
    r2 = reduce_axis((0, 6), name="r2")
    s.redefine(B, compute((8,), lambda i: rsum(D[i, r2], axis=r2)))
    assert [ax.name for ax in s[B].reduce_axis] == ["r2"]
    s[B].split(s[B].op.axis[0], factor=4)                             # split after redefining: allowed
    a = RNG.standard_normal((8, 6)).astype("float32")
    np.testing.assert_allclose(_run(s, [A, C], a), 2 * a.sum(axis=1), rtol=1e-6, atol=1e-6)


def test_redefine_refuses_equivalents_of_another_shape_or_type_and_placeholders():
    A, B, C = _chain()
    s = create_schedule(C)
    with pytest.raises(ScheduleError, match="redefine B"):
        s.redefine(B, compute((9,), lambda i: A[i % 8] * 4.0))
    with pytest.raises(ScheduleError, match="redefine B"):
        s.redefine(B, compute((8, 1), lambda i, j: A[i] * 4.0))
    with pytest.raises(ScheduleError, match="redefine B"):
        s.redefine(B, compute((8,), lambda i: cast("float64", A[i]) * 4.0))
    with pytest.raises(ScheduleError, match="redefine B"):
        s.redefine(B, placeholder((8,), name="P"))
    assert [st.op.name for st in s.stages] == ["B", "C"]             # nothing changed
    a = np.arange(8, dtype="float32")
    np.testing.assert_array_equal(_run(s, [A, C], a), a * 4 + 1)


@pytest.mark.parametrize("how", ["split", "fuse", "compute_at", "compute_inline", "reorder", "vectorize"])
def test_redefine_refuses_a_stage_already_split_fused_or_moved(how):
    A = placeholder((4, 8), name="A")
    B = compute((4, 8), lambda i, j: A[i, j] * 4.0, name="B")
    C = compute((4, 8), lambda i, j: B[i, j] + 1.0, name="C")
    s = create_schedule(C)
    if how == "split":
        s[B].split(B.op.axis[1], factor=4)
    elif how == "fuse":
        s[B].fuse(*B.op.axis)
    elif how == "compute_at":
        s[B].compute_at(s[C], C.op.axis[0])
    elif how == "reorder":
        s[B].reorder(B.op.axis[1], B.op.axis[0])
    elif how == "vectorize":
        s[B].vectorize(B.op.axis[1])
    else:
        s[B].compute_inline()
    with pytest.raises(ScheduleError, match="before the stage's loops are split"):
        s.redefine(B, compute((4, 8), lambda i, j: A[i, j] * 4.0))


def test_redefine_refuses_an_equivalent_that_reads_the_stage_or_its_readers():
    A = placeholder((8,), name="A")
    B = compute((8,), lambda i: A[i] * 4.0, name="B")
    C = compute((8,), lambda i: B[i] + 1.0, name="C")
    s = create_schedule(C)
    with pytest.raises(ScheduleError, match="reads B itself"):
        s.redefine(B, compute((8,), lambda i: B[i] * 1.0))
    with pytest.raises(ScheduleError, match="reads B itself"):
        s.redefine(B, compute((8,), lambda i: C[i] * 1.0))
    assert [st.op.name for st in s.stages] == ["B", "C"]
