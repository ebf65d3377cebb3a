import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tilefuse.graph_api import GraphError  # noqa: E402
from tilefuse.graph_api.onnx import importer  # noqa: E402
from tilefuse.graph_api.onnx.importer import import_onnx  # noqa: E402
from tilefuse.graph_api.onnx.skeleton import SKELETON_ELEMENTS, skeleton  # noqa: E402


def _dense_model(batch="batch", out_shape=None):
    """x (batch, 64) @ w (64, 128) + b, reshaped by a small shape initializer."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32), "w")
    b = numpy_helper.from_array(np.arange(128, dtype=np.float32), "b")
    shape = numpy_helper.from_array(np.array([-1, 2, 64], np.int64), "shape")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Reshape", ["a", "shape"], ["y"])]
    return helper.make_model(helper.make_graph(nodes, "dense", [x], [y], [w, b, shape]),
                             opset_imports=[helper.make_opsetid("", 17)])


def test_the_skeleton_describes_large_initializers_by_type_and_keeps_small_ones_with_values():
    model = _dense_model()
    small = skeleton(model, {"x": (3, 64)})
    assert 64 * 128 > SKELETON_ELEMENTS >= 128
    assert [t.name for t in small.graph.initializer] == ["b", "shape"]
    w = next(vi for vi in small.graph.input if vi.name == "w")
    assert w.type.tensor_type.elem_type == TensorProto.FLOAT
    assert [d.dim_value for d in w.type.tensor_type.shape.dim] == [64, 128]
    assert [d.dim_value for d in small.graph.input[0].type.tensor_type.shape.dim] == [3, 64]
    inferred = onnx.shape_inference.infer_shapes(small, strict_mode=True, data_prop=True)
    y = next(vi for vi in list(inferred.graph.value_info) + list(inferred.graph.output) if vi.name == "y")
    assert [d.dim_value for d in y.type.tensor_type.shape.dim] == [3, 2, 64]   # Reshape read "shape"'s values
    assert len(model.graph.initializer) == 3 and model.graph.input[0].type.tensor_type.shape.dim[0].dim_param


def test_onnx_checks_and_infers_on_the_skeleton_only(monkeypatch):
    sizes = []
    real_check, real_infer = onnx.checker.check_model, onnx.shape_inference.infer_shapes

    def check(model, *args, **kwargs):
        sizes.append(model.ByteSize())
        return real_check(model, *args, **kwargs)

    def infer(model, *args, **kwargs):
        sizes.append(model.ByteSize())
        return real_infer(model, *args, **kwargs)
    monkeypatch.setattr(onnx.checker, "check_model", check)
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", infer)
    model = _dense_model()
    imp = import_onnx(model, input_shapes={"x": (5, 64)})
    assert len(sizes) == 2 and max(sizes) < 2000 < model.ByteSize()
    (port,) = imp.graph.get_output_ports()
    assert port.shape == (5, 2, 64)


def test_a_damaged_large_initializer_is_still_refused_by_the_import():
    model = _dense_model()
    model.graph.initializer[0].raw_data = model.graph.initializer[0].raw_data[:-4]
    with pytest.raises(GraphError, match="initializer 'w' cannot be read"):
        import_onnx(model, input_shapes={"x": (2, 64)})


def test_bound_dims_that_contradict_a_declared_input_leave_the_declared_outputs_out_of_the_check():
    model = _dense_model(batch=2, out_shape=[2, 2, 64])
    assert len(skeleton(model, {"x": (2, 64)}).graph.output) == 1
    assert len(skeleton(model, {"x": (4, 64)}).graph.output) == 0
    imp = import_onnx(model, input_shapes={"x": (4, 64)})
    assert imp.graph.get_output_ports()[0].shape == (4, 2, 64)


@pytest.mark.parametrize("dims, message", [((2.5, 64), "sequence of whole numbers"), ((-1, 64), "negative dim"),
                                           ("ab", "sequence of whole numbers")])
def test_given_input_shapes_must_be_whole_non_negative_numbers(dims, message):
    with pytest.raises(GraphError, match=message):
        import_onnx(_dense_model(), input_shapes={"x": dims})


def test_a_model_with_nothing_to_leave_out_is_its_own_skeleton():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    assert skeleton(model) is model and importer.skeleton is skeleton
