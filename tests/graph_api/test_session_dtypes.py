"""The element types ONNX models carry, run by InferenceSession on shapes that do not divide
the templates' tiles, checked against numpy (and onnxruntime where it takes the type)."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tilefuse.graph_api import GraphError, InferenceSession  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
ROWS, K, COLS = 5, 37, 13        # odd sizes: no tile divides them


def model(nodes, inputs: dict, output_type: int, initializers=()) -> bytes:
    """A model of ``nodes`` with graph inputs ``{name: (elem_type, shape)}`` and output y."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
                              [helper.make_tensor_value_info("y", output_type, None)],
                              [numpy_helper.from_array(v, n) for n, v in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def run(model_bytes: bytes, feeds: dict):
    """(output, the messages of the warnings the session raised)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, = InferenceSession(model_bytes).run(None, feeds)
    return out, [str(w.message) for w in caught]


def values(shape, dtype, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(dtype)


def compiled(caught: list) -> bool:
    """No op was left to the reference interpreter."""
    return not [w for w in caught if "reference interpreter" in w]


@pytest.mark.parametrize("dtype, elem", [(np.float16, TensorProto.FLOAT16), (BF16, TensorProto.BFLOAT16)])
def test_half_floats_compile_computing_in_float32(dtype, elem):
    """MatMul, Add and Relu in float16 or bfloat16 (ml_dtypes' array type): inputs converted to
    float32 as they enter, the output converted back; within one rounding of numpy in float32."""
    x, w = values((ROWS, K), dtype), values((K, COLS), dtype, 1)
    b = values((COLS,), dtype, 2)
    m = model([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["r"]),
               helper.make_node("Relu", ["r"], ["y"])],
              {"x": (elem, [ROWS, K])}, elem, [("w", w), ("b", b)])
    out, caught = run(m, {"x": x})
    assert compiled(caught), caught
    want = np.maximum(x.astype(np.float32) @ w.astype(np.float32) + b.astype(np.float32), 0)
    assert out.dtype == dtype and out.shape == (ROWS, COLS)
    ulp = 2.0 ** -10 if dtype == np.float16 else 2.0 ** -7
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=ulp, atol=ulp)


def test_float16_convolution_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    x = values((1, 7, 13, 11), np.float16)
    w, b = values((19, 7, 3, 3), np.float16, 1), values((19,), np.float16, 2)
    m = model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
               helper.make_node("Sigmoid", ["c"], ["y"])],
              {"x": (TensorProto.FLOAT16, [1, 7, 13, 11])}, TensorProto.FLOAT16, [("w", w), ("b", b)])
    out, caught = run(m, {"x": x})
    assert compiled(caught), caught
    want, = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_a_half_float_feed_of_the_wrong_type_is_refused():
    m = model([helper.make_node("Relu", ["x"], ["y"])], {"x": (TensorProto.BFLOAT16, [ROWS, K])},
              TensorProto.BFLOAT16)
    x = values((ROWS, K), BF16)
    with pytest.raises(GraphError, match="must be tensor\\(bfloat16\\), got float32"):
        run(m, {"x": x.astype(np.float32)})


@pytest.mark.parametrize("dtype, elem", [(np.uint32, TensorProto.UINT32), (np.uint64, TensorProto.UINT64)])
def test_unsigned_integers_compile_with_unsigned_semantics(dtype, elem):
    """Values above the signed maximum: a signed compare or conversion would get them wrong."""
    top = np.iinfo(dtype).max
    x = np.random.default_rng(0).integers(0, top, (ROWS, K), dtype=dtype, endpoint=True)
    x[0, :3] = (top, top // 2 + 1, 0)
    c = np.full((K,), top // 2, dtype)
    m = model([helper.make_node("Greater", ["x", "c"], ["g"]), helper.make_node("Where", ["g", "x", "c"], ["h"]),
               helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT)],
              {"x": (elem, [ROWS, K])}, TensorProto.FLOAT, [("c", c)])
    out, caught = run(m, {"x": x})
    assert compiled(caught), caught
    np.testing.assert_array_equal(out, np.maximum(x, c).astype(np.float32))


def test_float64_compiles_dense_layers_as_onnxruntime_runs_them():
    """What sklearn-onnx exports: float64 MatMul, Add, Relu (and Gemm, Softmax), compiled."""
    ort = pytest.importorskip("onnxruntime")
    x, w, b = values((ROWS, K), np.float64), values((K, COLS), np.float64, 1), values((COLS,), np.float64, 2)
    m = model([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["r"]),
               helper.make_node("Relu", ["r"], ["g"]), helper.make_node("Gemm", ["g", "v"], ["s"], transB=1),
               helper.make_node("Softmax", ["s"], ["y"])],
              {"x": (TensorProto.DOUBLE, [ROWS, K])}, TensorProto.DOUBLE,
              [("w", w), ("b", b), ("v", values((K, COLS), np.float64, 3))])
    out, caught = run(m, {"x": x})
    assert compiled(caught), caught
    want, = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-15)


def test_float64_convolution_compiles():
    """A 3x3 convolution (the default direct template: Winograd is float32 only) against numpy."""
    x = values((1, 7, 13, 11), np.float64)
    w, b = values((19, 7, 3, 3), np.float64, 1), values((19,), np.float64, 2)
    m = model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])],
              {"x": (TensorProto.DOUBLE, [1, 7, 13, 11])}, TensorProto.DOUBLE, [("w", w), ("b", b)])
    out, caught = run(m, {"x": x})
    assert compiled(caught), caught
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), (2, 3))
    np.testing.assert_allclose(out, np.einsum("nchwij,ocij->nohw", windows, w) + b[:, None, None], rtol=1e-12)
