"""run_onnx_node's own implementations: integer shape arithmetic in numpy, equal to onnx's
reference implementation (and onnxruntime's integer semantics), without building one."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from tilefuse.graph_api import GraphError  # noqa: E402
from tilefuse.graph_api.onnx import node as onnx_node  # noqa: E402
from tilefuse.graph_api.onnx.node import run_onnx_node, wildcard_attrs  # noqa: E402

A = np.array([[7, -7, 6, -6, 0, 5]], np.int64)
B = np.array([[2], [-2], [3]], np.int64)          # broadcasts against A's row


@pytest.mark.parametrize("op, attrs", [("Add", {}), ("Sub", {}), ("Mul", {}), ("Div", {}), ("Mod", {}),
                                       ("Mod", {"fmod": 1})])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_integer_arithmetic_matches_onnx_without_a_reference_evaluator(op, attrs, dtype, monkeypatch):
    node = helper.make_node(op, ["a", "b"], ["y"], **attrs)
    a, b = A.astype(dtype), B.astype(dtype)
    want = ReferenceEvaluator(node).run(None, {"a": a, "b": b})[0]
    monkeypatch.setattr(onnx_node, "_evaluator", lambda *args: pytest.fail("built a reference evaluator"))
    (got,) = run_onnx_node(wildcard_attrs(node, 17), [a, b])
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_integer_division_truncates_toward_zero_as_onnxruntime_does():
    node = helper.make_node("Div", ["a", "b"], ["y"])
    (got,) = run_onnx_node(wildcard_attrs(node, 17), [np.array([7, -7, 7, -7], np.int64), np.array([2, 2, -2, -2])])
    assert got.tolist() == [3, -3, -3, 3]


@pytest.mark.parametrize("op", ["Div", "Mod"])
def test_an_integer_zero_divisor_is_refused(op):
    node = helper.make_node(op, ["a", "b"], ["y"])
    with pytest.raises(GraphError, match=f"ONNX {op} node 'y': integer division by zero"):
        run_onnx_node(wildcard_attrs(node, 17), [np.array([4, 5], np.int64), np.array([2, 0], np.int64)])


@pytest.mark.parametrize("start, limit, delta", [(0, 128, 1), (5, -7, -3), (3, 3, 1), (9, 2, 1), (-4, 11, 4)])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16])
def test_an_integer_range_matches_onnx_without_a_reference_evaluator(start, limit, delta, dtype, monkeypatch):
    node = helper.make_node("Range", ["start", "limit", "delta"], ["y"])
    inputs = [np.array(v, dtype) for v in (start, limit, delta)]
    want = ReferenceEvaluator(node).run(None, dict(zip(["start", "limit", "delta"], inputs)))[0]
    monkeypatch.setattr(onnx_node, "_evaluator", lambda *args: pytest.fail("built a reference evaluator"))
    (got,) = run_onnx_node(wildcard_attrs(node, 17), inputs)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_an_integer_range_with_a_zero_delta_is_refused_and_a_float_range_runs_in_onnx():
    node = helper.make_node("Range", ["start", "limit", "delta"], ["y"])
    with pytest.raises(GraphError, match="ONNX Range node 'y': delta is zero"):
        run_onnx_node(wildcard_attrs(node, 17), [np.array(v, np.int64) for v in (0, 4, 0)])
    (got,) = run_onnx_node(wildcard_attrs(node, 17), [np.array(v, np.float32) for v in (0.5, 2.0, 0.5)])
    assert got.dtype == np.float32 and got.tolist() == [0.5, 1.0, 1.5]


def test_floats_and_mixed_dtypes_still_run_onnx_s_reference_implementation():
    node = helper.make_node("Div", ["a", "b"], ["y"])
    (got,) = run_onnx_node(wildcard_attrs(node, 17), [np.array([1.0, -3.0], np.float32), np.array([2.0, 2.0], np.float32)])
    np.testing.assert_array_equal(got, np.array([0.5, -1.5], np.float32))
    with pytest.raises(GraphError, match="reference implementation of Add failed"):
        run_onnx_node(wildcard_attrs(helper.make_node("Add", ["a", "b"], ["y"]), 17),
                      [np.array([1], np.int64), np.array(["x"], object)])
