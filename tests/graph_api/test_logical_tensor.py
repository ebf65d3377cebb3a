"""LogicalTensor, DataType and Op: construction, normalisation and bad input."""
import numpy as np
import pytest

from tilefuse.graph_api import DataType, GraphError, LayoutType, LogicalTensor, Op, OpKind, PropertyType
from tilefuse.graph_api.logical_tensor import INT64_MIN


def test_unknown_dims_and_rank():
    t = LogicalTensor(0, "f32", (2, INT64_MIN, 3))
    assert t.shape == (2, -1, 3) and not t.is_known() and t.strides is None
    assert LogicalTensor(1, DataType.f32, None).ndim is None
    with pytest.raises(GraphError, match="logical tensor 0: shape .* is not fully known"):
        t.get_mem_size()


def test_equality_is_by_content_and_strings_are_parsed():
    a = LogicalTensor(3, "s8", [4, 5], "strided", "constant")
    b = LogicalTensor(3, DataType.s8, (4, 5), LayoutType.strided, PropertyType.constant)
    assert a == b and hash(a) == hash(b) and a.get_mem_size() == 20 and a.strides == (5, 1)
    assert a != LogicalTensor(3, DataType.s8, (4, 6), property_type="constant")


def test_undef_layout_drops_the_sentinel_stride():
    t = LogicalTensor(7, "f32", [], "undef", "host_scalar", [INT64_MIN])
    assert t.shape == () and t.strides is None and t.property_type is PropertyType.host_scalar
    assert t.with_shape(()).layout_type is LayoutType.strided


def test_bad_tensors():
    with pytest.raises(GraphError, match="unknown data type 'f128'"):
        LogicalTensor(0, "f128", (1,))
    with pytest.raises(GraphError, match="negative dim -3"):
        LogicalTensor(0, "f32", (2, -3))
    with pytest.raises(GraphError, match="id must be a non-negative int"):
        LogicalTensor(-1, "f32", (1,))
    with pytest.raises(GraphError, match="unknown layout type"):
        LogicalTensor(0, "f32", (1,), "blocked")


def test_data_types_map_to_numpy():
    assert DataType.of_numpy(np.float32) is DataType.f32 and DataType.boolean.numpy == np.dtype(bool)
    assert DataType.bf16.numpy.name == "bfloat16" and DataType.of_numpy(DataType.bf16.numpy) is DataType.bf16
    with pytest.raises(GraphError, match="f8_e4m3 has no numpy equivalent"):
        DataType.f8_e4m3.numpy


def test_op_kinds_and_bad_ops():
    x, y = LogicalTensor(0, "f32", (2,)), LogicalTensor(1, "f32", (2,))
    op = Op(4, "ReLU", [x], [y])
    assert op.kind is OpKind.ReLU and op.name == "ReLU_4"
    with pytest.raises(GraphError, match="unknown op kind 'Relu'"):
        Op(0, "Relu", [x], [y])
    with pytest.raises(GraphError, match="op 0 \\(ReLU\\): inputs and outputs must be LogicalTensors"):
        Op(0, OpKind.ReLU, [np.zeros(2)], [y])
