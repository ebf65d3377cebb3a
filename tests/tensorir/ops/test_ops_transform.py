"""tensorir.ops.transform against numpy, built with the template for the DAG and with the
default schedule."""
import numpy as np
import pytest

from ops_testing import check, rand, run_both
from tilefuse.tensorir import placeholder
from tilefuse.tensorir import ops


@pytest.mark.parametrize("shape, new_shape, special_zero, expected_shape", [
    ((7, 13), [13, 7], False, (13, 7)),
    ((2, 3, 37), [0, -1], True, (2, 111)),
    ((3, 1, 37), [37, 3], False, (37, 3)),
    ((111,), [3, 1, 37, 1], False, (3, 1, 37, 1)),
    ((7, 13), [7, 13], False, (7, 13)),
    ((5, 6, 7), [1, 0, 5, -1], True, (1, 6, 5, 7)),
])
def test_reshape(shape, new_shape, special_zero, expected_shape):
    x = placeholder(shape, name="x")
    xv = rand(shape)
    y = ops.reshape(x, new_shape, special_zero=special_zero)
    assert y.shape == expected_shape and y.op.tag == "reshape"
    check(y, {x: xv}, xv.reshape(expected_shape), template="injective", rtol=0, atol=0)


def test_reshape_bad_shapes():
    x = placeholder((7, 13))
    with pytest.raises(ValueError, match="StaticReshape.*shape.*elements"):
        ops.reshape(x, [7, 12])
    with pytest.raises(ValueError, match="StaticReshape.*more than one -1"):
        ops.reshape(x, [-1, -1])
    with pytest.raises(ValueError, match="StaticReshape.*-1"):
        ops.reshape(x, [-1, 5])
    with pytest.raises(ValueError, match="StaticReshape.*shape"):
        ops.reshape(x, [91, -2])
    with pytest.raises(ValueError, match="StaticReshape.*zero-size|StaticReshape.*elements"):
        ops.reshape(x, [0, 91])                       # special_zero=False: a real 0


@pytest.mark.parametrize("shape, order", [((7, 13), [1, 0]), ((2, 7, 13), [2, 0, 1]), ((3, 5, 7, 13), [0, -1, 1, 2]),
                                          ((3, 5, 7), [])])
def test_transpose(shape, order):
    x = placeholder(shape, name="x")
    xv = rand(shape)
    y = ops.transpose(x, order)
    check(y, {x: xv}, np.transpose(xv, order or None), template="injective", rtol=0, atol=0)
    with pytest.raises(ValueError, match="StaticTranspose.*order"):
        ops.transpose(x, [0] * len(shape))


@pytest.mark.parametrize("shapes, axis", [([(7, 13), (7, 5), (7, 1)], 1), ([(3, 13), (4, 13)], -2),
                                          ([(2, 3, 5), (2, 3, 5)], 2), ([(37,)], 0)])
def test_concat(shapes, axis):
    xs = [placeholder(s, name=f"x{k}") for k, s in enumerate(shapes)]
    xvs = [rand(s) for s in shapes]
    y = ops.concat(xs, axis=axis)
    check(y, dict(zip(xs, xvs)), np.concatenate(xvs, axis=axis), template="injective", rtol=0, atol=0)


def test_concat_bad_inputs():
    with pytest.raises(ValueError, match="Concat.*src_1"):
        ops.concat([placeholder((7, 13)), placeholder((6, 13))], axis=1)
    with pytest.raises(ValueError, match="Concat.*axis"):
        ops.concat([placeholder((7, 13)), placeholder((7, 13))], axis=2)
    with pytest.raises(TypeError, match="Concat.*dtype"):
        ops.concat([placeholder((7, 13)), placeholder((7, 13), "float64")], axis=0)
    with pytest.raises(ValueError, match="Concat.*at least one"):
        ops.concat([], axis=0)


def test_reorder_identity_and_a_chain_of_transforms():
    x = placeholder((2, 3, 37), "int32", name="x")
    xv = np.arange(2 * 3 * 37, dtype="int32").reshape(2, 3, 37)
    check(ops.reorder(x), {x: xv}, xv, template="injective")
    check(ops.identity(x), {x: xv}, xv)
    y = ops.transpose(ops.reshape(ops.concat([x, x], axis=1), [4, -1, 37]), [2, 0, 1])
    expected = np.transpose(np.concatenate([xv, xv], axis=1).reshape(4, -1, 37), [2, 0, 1])
    check(y, {x: xv}, expected, template="injective")


def test_gen_index():
    x = placeholder((3, 5, 7), name="x")
    y = ops.gen_index(x, axis=-2)
    expected = np.broadcast_to(np.arange(5, dtype="int32").reshape(1, 5, 1), (3, 5, 7))
    name, got_t, got_d = run_both(y, {})
    assert name == "injective" and y.dtype == "int32"
    np.testing.assert_array_equal(got_t, expected)
    np.testing.assert_array_equal(got_d, expected)
    with pytest.raises(ValueError, match="GenIndex.*axis"):
        ops.gen_index(x, axis=3)


@pytest.mark.parametrize("shape, indices, axis", [((5, 37), [[3, -1], [0, 4]], 0), ((7, 13, 3), [12, -13, 5], 1),
                                                  ((7, 13), [-1, 0, 6], -1)])
@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
def test_gather(shape, indices, axis, index_dtype):
    x = placeholder(shape, name="x")
    i = placeholder(np.shape(indices), index_dtype, name="i")
    xv, iv = rand(shape), np.asarray(indices, index_dtype)
    y = ops.gather(x, i, axis=axis)
    check(y, {x: xv, i: iv}, np.take(xv, iv, axis=axis), template="injective", rtol=0, atol=0)


def test_gather_with_a_scalar_index_under_a_masked_vector_loop():
    x = placeholder((5, 4), name="x")
    i = placeholder((), "int64", name="i")
    xv = rand((5, 4))
    check(ops.gather(x, i, axis=0), {x: xv, i: np.array(-2)}, xv[-2], rtol=0, atol=0)


def test_gather_bad_arguments():
    with pytest.raises(TypeError, match="Gather: indices must be int32 or int64"):
        ops.gather(placeholder((3,)), placeholder((2,)))
    with pytest.raises(ValueError, match="Gather.*axis"):
        ops.gather(placeholder((3,)), placeholder((2,), "int64"), axis=1)


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1, -2], [100, 0], [2, 1], [3, -4]), ([-5], [-1], None, None), ([-1000, 5], [1000, -1000], [0, 1], [1, -2]),
    ([2], [2], [1], [1])])
def test_slice(starts, ends, axes, steps):
    x = placeholder((7, 13, 5), name="x")
    xv = rand((7, 13, 5))
    index = [slice(None)] * 3
    for k, (s, e) in enumerate(zip(starts, ends)):
        index[axes[k] if axes else k] = slice(s, e, steps[k] if steps else 1)
    y = ops.slice(x, starts, ends, axes, steps)
    check(y, {x: xv}, xv[tuple(index)], rtol=0, atol=0)


def test_slice_bad_arguments():
    x = placeholder((7, 13))
    with pytest.raises(ValueError, match="Slice: attribute steps has a 0"):
        ops.slice(x, [0], [3], [0], [0])
    with pytest.raises(ValueError, match="Slice: axis 1 appears twice"):
        ops.slice(x, [0, 1], [3, 4], [1, -1])
    with pytest.raises(ValueError, match="Slice.*differ in length"):
        ops.slice(x, [0, 1], [3])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads_begin, pads_end", [([1, 2], [3, 0]), ([2, -1], [7, 1]), ([-1, 0], [2, -2]),
                                                  ([0, 9], [0, 11])])
def test_pad(mode, pads_begin, pads_end):
    x = placeholder((5, 4), name="x")
    xv = rand((5, 4))
    y = ops.pad(x, pads_begin, pads_end, mode, 1.5)
    crop = tuple(slice(max(-b, 0), n - max(-e, 0)) for b, e, n in zip(pads_begin, pads_end, (5, 4)))
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(pads_begin, pads_end)]
    extra = {"constant_values": 1.5} if mode == "constant" else {}
    check(y, {x: xv}, np.pad(xv[crop], widths, mode=mode, **extra), template="injective", rtol=0, atol=0)


def test_pad_ints_bools_and_bad_arguments():
    x = placeholder((3,), "int32", name="x")
    check(ops.pad(x, [2], [1], value=7), {x: np.arange(3, dtype="int32")}, [7, 7, 0, 1, 2, 7])
    b = placeholder((2,), "bool", name="b")
    check(ops.pad(b, [1], [0], value=1), {b: np.array([False, False])}, [True, False, False])
    with pytest.raises(ValueError, match="Pad: attribute mode"):
        ops.pad(x, [1], [1], mode="symmetric")
    with pytest.raises(ValueError, match="Pad.*crop more"):
        ops.pad(x, [-2], [-2])
    with pytest.raises(ValueError, match="Pad: mode edge cannot pad an empty dimension"):
        ops.pad(x, [-3], [1], mode="edge")
    with pytest.raises(ValueError, match="Pad: attribute pads_begin"):
        ops.pad(x, [1, 1], [1])


@pytest.mark.parametrize("shape, target", [((7, 1, 13), [2, 1, 5, 1]), ((7, 13), [7, 13]), ((1,), [3, 37])])
def test_expand(shape, target):
    x = placeholder(shape, name="x")
    xv = rand(shape)
    y = ops.expand(x, target)
    check(y, {x: xv}, np.broadcast_to(xv, np.broadcast_shapes(shape, tuple(target))), template="injective",
          rtol=0, atol=0)
    with pytest.raises(ValueError, match="Expand.*do not broadcast"):
        ops.expand(placeholder((3,)), [2, 4])
