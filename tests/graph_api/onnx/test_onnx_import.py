"""graph_api.onnx: every mapped ONNX op on a tiny model against onnxruntime (onnx's
ReferenceEvaluator when onnxruntime is missing), both compiled (inputs fed at run time) and
folded at import (all inputs initializers: evaluated by our reference interpreter); constant
folding of shape computations; unknown ops as Wildcards; and the errors for models we cannot
take."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tilefuse.graph_api import GraphError, OpKind, compile_graph, from_onnx, reference  # noqa: E402
from tilefuse.graph_api.onnx.backend import prepare  # noqa: E402
from tilefuse.graph_api.onnx import OnnxInputValueNeeded, import_onnx, importer  # noqa: E402
from tilefuse.graph_api.onnx.ops import ONNX_OPS  # noqa: E402
from tilefuse.tensorir.errors import Unsupported  # noqa: E402

RNG = np.random.default_rng(7)


def f32(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape).astype(np.float32)


def i64(values):
    return np.asarray(values, np.int64)


@dataclass
class Case:
    """One ONNX node: ``inputs`` (name, array; None: an absent optional input), attributes,
    opset, the inputs that must be initializers (shape operands), the output count."""
    id: str
    op: str
    inputs: list
    attrs: dict = field(default_factory=dict)
    opset: int = 17
    constants: tuple = ()
    outputs: int = 1
    rtol: float = 1e-5
    atol: float = 1e-6
    onnx_infers_shape: bool = True      # False: onnx's shape inference disagrees with onnxruntime,
                                        # so the model declares no output shape


X = f32(2, 3, 5)
POS = f32(2, 3, 5, low=0.1, high=3.0)
IMG = f32(1, 4, 7, 6)
CASES = [Case(op, op, [("x", X)]) for op in ("Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Erf", "HardSwish",
                                              "Round", "Identity", "Softplus")]
CASES += [Case(op, op, [("x", POS)]) for op in ("Log", "Sqrt", "Reciprocal")]
CASES += [
    Case("Mish", "Mish", [("x", X)], opset=18),
    Case("LeakyRelu", "LeakyRelu", [("x", X)], {"alpha": 0.2}),
    Case("Elu", "Elu", [("x", X)], {"alpha": 0.7}),
    Case("HardSigmoid", "HardSigmoid", [("x", X)], {"alpha": 0.3, "beta": 0.4}),
    Case("Gelu-tanh", "Gelu", [("x", X)], {"approximate": "tanh"}, opset=20),
    Case("Gelu", "Gelu", [("x", X)], opset=20),
    Case("PRelu", "PRelu", [("x", X), ("slope", f32(5))]),
    Case("Add-broadcast", "Add", [("a", X), ("b", f32(3, 1))]),
    Case("Sub", "Sub", [("a", X), ("b", f32(5))]),
    Case("Mul", "Mul", [("a", X), ("b", f32(2, 1, 1))]),
    Case("Div", "Div", [("a", X), ("b", POS)]),
    Case("Pow-constant-exponent", "Pow", [("x", POS), ("y", np.array(1.5, np.float32))], constants=("y",)),
    Case("Pow-tensor-exponent", "Pow", [("x", POS), ("y", f32(5))]),
    Case("Pow-int64-exponent", "Pow", [("x", X), ("y", i64([[1], [2], [3]]))]),
    Case("Min", "Min", [("a", X), ("b", f32(5)), ("c", f32(3, 1))]),
    Case("Max", "Max", [("a", X), ("b", f32(5))]),
    Case("Max-one-input", "Max", [("a", X)]),
    Case("Sum", "Sum", [("a", X), ("b", f32(5)), ("c", X)]),
    Case("Mean", "Mean", [("a", X), ("b", f32(3, 5))]),
    Case("Clip-constant", "Clip", [("x", X), ("lo", np.array(-0.5, np.float32)), ("hi", np.array(1, np.float32))],
         constants=("lo", "hi")),
    Case("Clip-tensors", "Clip", [("x", X), ("lo", np.array(-0.5, np.float32)), ("hi", np.array(1, np.float32))]),
    Case("Clip-max-only", "Clip", [("x", X), ("lo", None), ("hi", np.array(0.3, np.float32))], constants=("hi",)),
    Case("Clip-min-above-max", "Clip", [("x", X), ("lo", np.array(1, np.float32)), ("hi", np.array(0, np.float32))],
         constants=("lo", "hi")),
    Case("Clip-opset6", "Clip", [("x", X)], {"min": -0.25, "max": 0.5}, opset=6),
    Case("Where", "Where", [("c", RNG.random((2, 3, 5)) > 0.5), ("a", f32(5)), ("b", f32(3, 1))]),
    Case("Where-int64", "Where", [("c", RNG.random((3, 1)) > 0.5), ("a", i64([[7, -3, 2**40]])), ("b", i64([5]))]),
    Case("Equal-float", "Equal", [("a", np.round(X)), ("b", np.round(f32(3, 1)))]),
    Case("Equal-int64", "Equal", [("a", i64([[1, 2, 3], [3, 2, 1]])), ("b", i64([3, 2, 0]))]),
    Case("Equal-bool", "Equal", [("a", RNG.random((4, 1)) > 0.5), ("b", RNG.random(3) > 0.5)]),
    Case("Greater", "Greater", [("a", X), ("b", f32(5))]),
    Case("Greater-int64", "Greater", [("a", i64([[1, 2**40, 3]])), ("b", i64([[3], [2**40 - 1]]))]),
    Case("Less", "Less", [("a", X), ("b", f32(3, 1))]),
    Case("GreaterOrEqual", "GreaterOrEqual", [("a", np.round(X)), ("b", np.round(f32(5)))]),
    Case("GreaterOrEqual-int64", "GreaterOrEqual", [("a", i64([[1, 2, 3]])), ("b", i64([[3], [2]]))]),
    Case("LessOrEqual-int64", "LessOrEqual", [("a", i64([[1, 2, 3]])), ("b", i64([[3], [2]]))]),
    Case("LessOrEqual", "LessOrEqual", [("a", np.round(X)), ("b", np.round(f32(3, 1)))]),
    Case("And", "And", [("a", RNG.random((2, 3, 5)) > 0.5), ("b", RNG.random((3, 1)) > 0.5)]),
    Case("Or", "Or", [("a", RNG.random((2, 3, 5)) > 0.5), ("b", RNG.random(5) > 0.5)]),
    Case("Xor", "Xor", [("a", RNG.random((2, 3, 5)) > 0.5), ("b", RNG.random((2, 3, 5)) > 0.5)]),
    Case("Not", "Not", [("x", RNG.random((2, 3, 5)) > 0.5)]),
    Case("IsNaN", "IsNaN", [("x", np.where(RNG.random((2, 3, 5)) > 0.7, np.nan, X).astype(np.float32))]),
    Case("MatMul", "MatMul", [("a", X), ("b", f32(5, 4))]),
    Case("MatMul-1d", "MatMul", [("a", f32(5)), ("b", f32(2, 5, 3))]),
    Case("Gemm", "Gemm", [("a", f32(5, 3)), ("b", f32(4, 5)), ("c", f32(4))],
         {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}),
    Case("Gemm-bias", "Gemm", [("a", f32(3, 5)), ("b", f32(5, 4)), ("c", f32(3, 1))]),
    Case("Gemm-no-c", "Gemm", [("a", f32(3, 5)), ("b", f32(5, 4))], {"alpha": 3.0}),
    Case("Conv-same-lower-groups", "Conv", [("x", IMG), ("w", f32(6, 2, 3, 2)), ("b", f32(6))],
         {"auto_pad": "SAME_LOWER", "strides": [2, 1], "group": 2}, rtol=1e-4, atol=1e-5),
    Case("Conv-pads-dilations-1d", "Conv", [("x", f32(2, 3, 11)), ("w", f32(4, 3, 3))],
         {"pads": [2, 1], "strides": [2], "dilations": [2]},
         rtol=1e-4, atol=1e-5),
    Case("ConvTranspose-output-shape", "ConvTranspose", [("x", IMG), ("w", f32(4, 3, 3, 3)), ("b", f32(3))],
         {"strides": [2, 2], "output_shape": [16, 13]}, rtol=1e-4, atol=1e-5),
    Case("ConvTranspose-group-pads", "ConvTranspose", [("x", IMG), ("w", f32(4, 1, 2, 3))],
         {"group": 2, "pads": [1, 0, 0, 1], "output_padding": [1, 0], "strides": [2, 1]}, rtol=1e-4, atol=1e-5),
    Case("ConvTranspose-same-upper", "ConvTranspose", [("x", IMG), ("w", f32(4, 2, 3, 3))],
         {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, rtol=1e-4, atol=1e-5),
    Case("BatchNormalization", "BatchNormalization",
         [("x", IMG), ("s", f32(4)), ("b", f32(4)), ("m", f32(4)), ("v", f32(4, low=0.5, high=2))],
         {"epsilon": 1e-3}, rtol=1e-4, atol=1e-5),
    Case("LayerNormalization-stats", "LayerNormalization", [("x", X), ("s", f32(3, 5)), ("b", f32(3, 5))],
         {"axis": 1}, outputs=3, rtol=1e-4, atol=1e-5),
    Case("LayerNormalization-broadcast-scale", "LayerNormalization", [("x", X), ("s", f32(5))], {"axis": -2},
         rtol=1e-4, atol=1e-5),
    Case("Softmax", "Softmax", [("x", X)], {"axis": 1}, opset=13),
    Case("Softmax-opset11", "Softmax", [("x", X)], {"axis": 1}, opset=11),
    Case("LogSoftmax", "LogSoftmax", [("x", X)], {"axis": 0}, opset=13, rtol=1e-4, atol=1e-5),
    Case("ReduceSum", "ReduceSum", [("x", X), ("axes", i64([0, -1]))], opset=13, constants=("axes",)),
    Case("ReduceSum-empty-axes", "ReduceSum", [("x", X), ("axes", i64([]))], {"keepdims": 0}, opset=13,
         constants=("axes",)),
    Case("ReduceSum-noop", "ReduceSum", [("x", X), ("axes", i64([]))], {"noop_with_empty_axes": 1}, opset=13,
         constants=("axes",)),
    Case("ReduceMean", "ReduceMean", [("x", X), ("axes", i64([1]))], {"keepdims": 0}, opset=18, constants=("axes",)),
    Case("ReduceMax-opset13", "ReduceMax", [("x", X)], {"axes": [2]}, opset=13),
    Case("ReduceMin", "ReduceMin", [("x", X)], {"axes": [0, 1], "keepdims": 0}, opset=13),
    Case("ReduceL2", "ReduceL2", [("x", X)], {"axes": [-1]}, opset=13),
    Case("ReduceL1", "ReduceL1", [("x", X)], {"axes": [1]}, opset=13),
    Case("ReduceProd", "ReduceProd", [("x", POS)], {"axes": [1]}, opset=13),
    Case("ReduceSum-empty-set", "ReduceSum", [("x", np.zeros((2, 0, 3), np.float32)), ("axes", i64([1]))],
         opset=13, constants=("axes",)),
    Case("GlobalAveragePool", "GlobalAveragePool", [("x", IMG)]),
    Case("GlobalMaxPool", "GlobalMaxPool", [("x", IMG)]),
    Case("MaxPool-ceil", "MaxPool", [("x", IMG)], {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 0, 1],
                                                    "ceil_mode": 1}, onnx_infers_shape=False),
    Case("MaxPool-same-upper", "MaxPool", [("x", IMG)], {"kernel_shape": [3, 3], "strides": [2, 2],
                                                         "auto_pad": "SAME_UPPER"}),
    Case("AveragePool-include-pad-ceil", "AveragePool", [("x", IMG)],
         {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 0], "ceil_mode": 1, "count_include_pad": 1}),
    Case("AveragePool-exclude-pad", "AveragePool", [("x", IMG)],
         {"kernel_shape": [2, 3], "pads": [1, 1, 0, 1]}),
    Case("AveragePool-dilations", "AveragePool", [("x", IMG)],
         {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 0, 1, 1]}, opset=19),
    Case("LRN", "LRN", [("x", IMG)], {"size": 3, "alpha": 0.01, "beta": 0.6, "bias": 1.5}, rtol=1e-4, atol=1e-5),
    Case("Transpose", "Transpose", [("x", X)], {"perm": [2, 0, 1]}),
    Case("Transpose-default", "Transpose", [("x", X)]),
    Case("Reshape", "Reshape", [("x", X), ("shape", i64([0, -1]))], constants=("shape",)),
    Case("Flatten", "Flatten", [("x", X)], {"axis": -1}),
    Case("Squeeze", "Squeeze", [("x", f32(2, 1, 3, 1)), ("axes", i64([-1]))], opset=13, constants=("axes",)),
    Case("Squeeze-opset11-all", "Squeeze", [("x", f32(2, 1, 3, 1))], opset=11),
    Case("Unsqueeze", "Unsqueeze", [("x", X), ("axes", i64([0, -1]))], opset=13, constants=("axes",)),
    Case("Unsqueeze-opset11", "Unsqueeze", [("x", X)], {"axes": [1]}, opset=11),
    Case("Concat", "Concat", [("a", X), ("b", f32(2, 1, 5)), ("c", np.zeros((2, 0, 5), np.float32))], {"axis": 1}),
    Case("Split-num-outputs", "Split", [("x", f32(7, 3))], {"num_outputs": 3}, opset=18, outputs=3),
    Case("Split-sizes", "Split", [("x", X), ("split", i64([1, 4]))], {"axis": -1}, opset=13, constants=("split",),
         outputs=2),
    Case("Split-opset11", "Split", [("x", X)], {"axis": 1, "split": [2, 1]}, opset=11, outputs=2),
    Case("Slice", "Slice", [("x", X), ("s", i64([-1, 1])), ("e", i64([-100, 9])), ("a", i64([2, 1])),
                            ("t", i64([-2, 1]))], constants=("s", "e", "a", "t")),
    Case("Slice-opset9", "Slice", [("x", X)], {"starts": [1], "ends": [3], "axes": [1]}, opset=9),
    Case("Gather-runtime", "Gather", [("x", X), ("i", i64([[2, -1], [0, 1]]))], {"axis": 2}),
    Case("Gather-constant-scalar", "Gather", [("x", X), ("i", np.array(-1, np.int64))], {"axis": 1},
         constants=("i",)),
    Case("Gather-constant-descending", "Gather", [("x", X), ("i", i64([4, 2, 0]))], {"axis": 2}, constants=("i",)),
    Case("Gather-constant-any", "Gather", [("x", X), ("i", i64([1, 1, 0]))], {"axis": 1}, constants=("i",)),
    Case("GatherND-constant", "GatherND", [("x", X), ("i", i64([[[1, 2], [0, -1]], [[1, 0], [0, 2]]]))],
         constants=("i",)),
    Case("GatherND-constant-points", "GatherND", [("x", X), ("i", i64([[1, 2, 4], [0, -1, 0]]))], constants=("i",)),
    Case("GatherND-bool", "GatherND", [("x", RNG.random((3, 4)) > 0.5), ("i", i64([[2], [0], [1]]))],
         constants=("i",)),
    Case("Expand", "Expand", [("x", f32(3, 1)), ("shape", i64([2, 1, 4]))], constants=("shape",)),
    Case("Pad-reflect", "Pad", [("x", X), ("p", i64([0, 1, 2, 0, 2, -1]))], {"mode": "reflect"}, opset=13,
         constants=("p",)),
    Case("Pad-constant-axes", "Pad", [("x", X), ("p", i64([1, 2])), ("v", np.array(0.5, np.float32)),
                                      ("a", i64([-1]))], opset=18, constants=("p", "v", "a")),
    Case("Pad-opset2", "Pad", [("x", X)], {"pads": [0, 0, 1, 0, 1, 0], "mode": "edge"}, opset=2),
    Case("Cast-float-to-int", "Cast", [("x", X * 3)], {"to": TensorProto.INT32}),
    Case("Cast-int-to-float", "Cast", [("x", i64([[-3, 0, 7]]))], {"to": TensorProto.FLOAT}),
    Case("CastLike", "CastLike", [("x", X), ("like", np.zeros(1, np.int64))]),
    Case("Dropout-mask", "Dropout", [("x", X)], opset=13, outputs=2),
    Case("Shape", "Shape", [("x", X)], {"start": 1}, opset=15),
    Case("Size", "Size", [("x", X)]),
    Case("ConstantOfShape", "ConstantOfShape", [("s", i64([2, 3]))],
         {"value": numpy_helper.from_array(np.array([1.5], np.float32))}, constants=("s",)),
]


def _resize_case(mode, ctm, nearest="round_prefer_floor", scales=None, sizes=None, x=IMG, axes=None):
    inputs = [("x", x), ("roi", None), ("scales", None if scales is None else np.array(scales, np.float32))]
    if sizes is not None:
        inputs.append(("sizes", i64(sizes)))
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm, "nearest_mode": nearest}
    if axes is not None:
        attrs["axes"] = axes
    what = f"scales{scales}" if scales is not None else f"sizes{sizes}"
    return Case(f"Resize-{mode}-{ctm}-{nearest if mode == 'nearest' else ''}-{what}".replace(" ", ""), "Resize",
                inputs, attrs, opset=18 if axes is not None else 13, constants=("scales", "sizes"))


RESIZE_COORDINATES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric")
CASES += [_resize_case("nearest", ctm, nearest, scales=[1, 1, 2, 1.5])
          for ctm in RESIZE_COORDINATES for nearest in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")]
CASES += [_resize_case("linear", ctm, scales=[1, 1, 2, 3]) for ctm in RESIZE_COORDINATES]
CASES += [_resize_case("linear", ctm, sizes=[1, 4, 5, 11]) for ctm in RESIZE_COORDINATES]    # down and up
CASES += [_resize_case("nearest", "asymmetric", "floor", sizes=[1, 2, 3, 12]),                # channels too
          _resize_case("linear", "half_pixel", scales=[0.5, 3.0], axes=[2, 3]),
          _resize_case("nearest", "half_pixel", scales=[1, 1, 0.6, 0.5])]


def _value_info(name, array):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape)


def make_model(case: Case, fold: bool = False):
    present = [(n, a) for n, a in case.inputs if a is not None]
    constant = {n for n, _ in present} if fold else set(case.constants)
    node = helper.make_node(case.op, [n if a is not None else "" for n, a in case.inputs],
                            [f"y{k}" for k in range(case.outputs)], **case.attrs)
    graph = helper.make_graph([node], case.id, [_value_info(n, a) for n, a in present if n not in constant],
                              [helper.make_empty_tensor_value_info(f"y{k}") for k in range(case.outputs)],
                              [numpy_helper.from_array(a, n) for n, a in present if n in constant])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 8
    feeds = {n: a for n, a in present if n not in constant}
    model = onnx.shape_inference.infer_shapes(model)
    if not case.onnx_infers_shape:
        for vi in model.graph.output:
            vi.type.tensor_type.ClearField("shape")
    return model, feeds


def expected_outputs(model, feeds):
    try:
        import onnxruntime
    except ImportError:
        from onnx.reference import ReferenceEvaluator
        return ReferenceEvaluator(model).run(None, feeds)
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3          # no warnings about old opsets on stderr
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def test_every_mapped_op_has_a_case():
    assert set(ONNX_OPS) == {c.op for c in CASES}


@pytest.mark.parametrize("fold", [False, True], ids=["compiled", "folded-at-import"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op_matches_onnxruntime(case, fold):
    model, feeds = make_model(case, fold)
    want = expected_outputs(model, feeds)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rep = prepare(model)
        got = rep.run([feeds[vi.name] for vi in model.graph.input])
    assert not [str(w.message) for w in caught if "Wildcard" in str(w.message) or "reference" in str(w.message)]
    if fold:
        assert all(op.kind is OpKind.Identity for imp, _ in rep._built.values() for op in imp.graph.ops)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol)


# ---------------------------------------------------------------------------- folding, structure

def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _float_input(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def test_shape_computations_fold_into_a_static_reshape():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.int64))),
             helper.make_node("Gather", ["s", "zero"], ["n"]),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Constant", [], ["minus1"], value_ints=[-1]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    model = _model(nodes, [_float_input("x", [2, 3, 4])], [_float_input("y", None)],
                   [numpy_helper.from_array(i64([0]), "axes")])
    g = from_onnx(model)
    assert [(op.kind, op.attrs["shape"]) for op in g.ops] == [(OpKind.StaticReshape, [2, -1])]
    x = f32(2, 3, 4)
    out, = compile_graph(g).run({g.get_input_ports()[0].id: x}).values()
    np.testing.assert_array_equal(out, x.reshape(2, 12))


def test_a_fold_repeated_on_the_same_values_is_computed_once(monkeypatch):
    def layer(k):           # x reshaped to (batch, -1) from its own shape: the same folds in every layer
        return [helper.make_node("Shape", [f"h{k}"], [f"s{k}"]),
                helper.make_node("Gather", [f"s{k}", "zero"], [f"n{k}"], axis=0),
                helper.make_node("Unsqueeze", [f"n{k}", "axes"], [f"u{k}"]),
                helper.make_node("Concat", [f"u{k}", "minus1"], [f"shape{k}"], axis=0),
                helper.make_node("Reshape", [f"h{k}", f"shape{k}"], [f"r{k}"]),
                helper.make_node("Relu", [f"r{k}"], [f"h{k + 1}"])]
    nodes = [helper.make_node("Identity", ["x"], ["h0"])] + [n for k in range(3) for n in layer(k)]
    nodes.append(helper.make_node("Mul", ["n0", "two"], ["n_twice"]))        # another op on a folded value
    inits = [numpy_helper.from_array(v, name) for name, v in
             (("zero", i64(0)), ("axes", i64([0])), ("minus1", i64([-1])), ("two", i64(2)))]
    model = _model(nodes, [_float_input("x", [2, 12])],
                   [_float_input("h3", None), helper.make_tensor_value_info("n_twice", TensorProto.INT64, [])], inits)
    computed = []
    real = importer._folded
    monkeypatch.setattr(importer, "_folded", lambda b, node, *args: (computed.append(node.op_type),
                                                                      real(b, node, *args))[1])
    imp = import_onnx(model)
    assert computed == ["Gather", "Unsqueeze", "Concat", "Mul"]     # each Shape is known; the rest once each
    reshapes = [op.attrs["shape"] for op in imp.graph.ops if op.kind is OpKind.StaticReshape]
    assert reshapes == [[2, -1]] * 3
    x = f32(2, 12)
    outputs = compile_graph(imp.graph).run({imp.inputs[0][1]: x})
    np.testing.assert_array_equal(outputs[dict(imp.outputs)["h3"]], np.maximum(x, 0))
    assert outputs[dict(imp.outputs)["n_twice"]].tolist() == 4


def test_a_repeated_fold_gives_each_output_an_array_of_its_own():
    from tilefuse.graph_api.onnx.builder import Builder, Node
    b = Builder(17, {})
    b.values["a"] = i64([[1, 2, 3]])
    for out in ("y1", "y2", "y3"):
        node = Node.of(helper.make_node("Transpose", ["a"], [out]), 17)
        importer._fold(b, node, ONNX_OPS["Transpose"], lambda: pytest.fail("ran onnx's implementation"))
    assert len(b.folds) == 1 and b.values["y2"].tolist() == b.values["y3"].tolist() == [[1], [2], [3]]
    assert not np.shares_memory(b.values["y2"], b.values["y3"])
    (kept,) = b.folds.values()
    assert not any(np.shares_memory(b.values[y], v) for y in ("y2", "y3") for v in kept)
    bare = Node("Transpose", "", ["a"], ["y4"], {}, 17)             # no NodeProto to key it by: folded alone
    importer._fold(b, bare, ONNX_OPS["Transpose"], lambda: pytest.fail("ran onnx's implementation"))
    assert b.values["y4"].tolist() == [[1], [2], [3]] and len(b.folds) == 1


def test_initializers_are_bound_constants_and_graph_outputs_are_produced_once():
    w = f32(3, 4)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"]),
             helper.make_node("Identity", ["x"], ["x_copy"])]
    model = _model(nodes, [_float_input("x", [2, 3])],
                   [_float_input("h", [2, 4]), _float_input("y", [2, 4]), _float_input("x_copy", [2, 3]),
                    _float_input("y", [2, 4])], [numpy_helper.from_array(w, "w")])
    imp = import_onnx(model)
    g = imp.graph
    (w_id,) = [tid for tid, v in g.constant_values.items() if v.shape == (3, 4)]
    np.testing.assert_array_equal(g.constant_values[w_id], w)
    assert g.tensor(w_id).property_type.value == "constant"
    names = [n for n, _ in imp.outputs]
    assert names == ["h", "y", "x_copy", "y"] and imp.outputs[1][1] == imp.outputs[3][1]
    assert {t.id for t in g.get_output_ports()} == {tid for _, tid in imp.outputs}
    x = f32(2, 3)
    out = prepare(model).run([x])
    np.testing.assert_allclose(out[0], x @ w, rtol=1e-5)
    np.testing.assert_allclose(out[1], np.maximum(x @ w, 0), rtol=1e-5)
    np.testing.assert_array_equal(out[2], x)


def test_zero_size_outputs_are_known_at_import():
    nodes = [helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=0)]
    model = _model(nodes, [_float_input("x", [3, 2])], [_float_input("a", [3, 2]), _float_input("b", [0, 2])],
                   [numpy_helper.from_array(i64([3, 0]), "sizes")])
    imp = import_onnx(model)
    assert imp.constant_outputs["b"].shape == (0, 2) and imp.outputs[1] == ("b", None)
    a, b = prepare(model).run([np.ones((3, 2), np.float32)])
    assert a.shape == (3, 2) and b.shape == (0, 2)


# ---------------------------------------------------------------------------- Wildcards

def test_an_unknown_op_becomes_a_wildcard_that_runs_through_onnx():
    nodes = [helper.make_node("Softsign", ["x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    model = _model(nodes, [_float_input("x", [2, 5])], [_float_input("y", None)], opset=13)
    with pytest.warns(UserWarning, match="ONNX op Softsign .* Wildcard"):
        imp = import_onnx(model)
    wildcard, relu = imp.graph.topological_ops()
    assert wildcard.kind is OpKind.Wildcard and wildcard.attrs["onnx_op_type"] == "Softsign"
    assert wildcard.outputs[0].shape == (2, 5) and relu.outputs[0].shape == (2, 5)
    x = f32(2, 5)
    with pytest.warns(UserWarning, match="reference interpreter: Wildcard"):
        compiled = compile_graph(imp.graph)
    with pytest.raises(Unsupported, match=r"strict: 1 op\(s\) would run in the numpy reference interpreter.*Wildcard"):
        compile_graph(imp.graph, strict=True)
    (_, out_id), = imp.outputs
    np.testing.assert_allclose(compiled.run({imp.inputs[0][1]: x})[out_id], np.maximum(x / (1 + np.abs(x)), 0),
                               rtol=1e-6)
    np.testing.assert_allclose(reference.evaluate(wildcard, [x])[0], x / (1 + np.abs(x)), rtol=1e-6)


def test_unmapped_attributes_and_other_domains_become_wildcards():
    nodes = [helper.make_node("GatherND", ["x", "at"], ["y"]),
             helper.make_node("LabelEncoder", ["at"], ["z"], domain="ai.onnx.ml", keys_int64s=[1, 3],
                              values_int64s=[7, 8], default_int64=-1)]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [_float_input("x", [1, 4, 4]), helper.make_tensor_value_info("at", TensorProto.INT64, [2, 2])],
        [_float_input("y", None), helper.make_tensor_value_info("z", TensorProto.INT64, None)]),
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 2)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        imp = import_onnx(model)
    messages = " | ".join(str(w.message) for w in caught)
    assert "GatherND node 'y': GatherND with batch_dims or indices computed at run time" in messages
    assert "ai.onnx.ml.LabelEncoder" in messages
    assert [op.kind for op in imp.graph.ops] == [OpKind.Wildcard, OpKind.Wildcard]
    assert len(imp.wildcards) == 2
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4)
    at = np.array([[0, 1], [0, 3]], np.int64)
    y, z = _run(model, x, at)
    np.testing.assert_array_equal(y, [[4, 5, 6, 7], [12, 13, 14, 15]])
    np.testing.assert_array_equal(z, [[-1, 7], [-1, 8]])


def test_a_wildcard_that_cannot_run_is_refused_at_import():
    unknown = helper.make_model(helper.make_graph(
        [helper.make_node("Foo", ["x"], ["z"], domain="com.example")], "g", [_float_input("x", [2])],
        [_float_input("z", None)]), opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # refused, not announced as a Wildcard first
        with pytest.raises(GraphError, match="ONNX Foo node 'z' has no implementation in onnx's reference evaluator: "
                                             ".*'Foo' from domain 'com.example' is unknown"):
            from_onnx(unknown)
    no_coefficients = helper.make_model(helper.make_graph(
        [helper.make_node("LinearRegressor", ["x"], ["z"], domain="ai.onnx.ml")], "g", [_float_input("x", [2, 3])],
        [_float_input("z", None)]), opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 1)])
    with pytest.raises(GraphError, match="ONNX LinearRegressor node 'z' cannot run in onnx's reference implementation"):
        from_onnx(no_coefficients)


def test_a_plain_wildcard_still_has_no_reference_semantics():
    from tilefuse.graph_api import DataType, LogicalTensor, Op
    x, y = LogicalTensor(0, DataType.f32, (2,)), LogicalTensor(1, DataType.f32, (2,))
    with pytest.raises(GraphError, match="does not implement this op"):
        reference.evaluate(Op(3, OpKind.Wildcard, [x], [y]), [np.zeros(2, np.float32)])


# ---------------------------------------------------------------------------- bad models

def test_a_node_reading_an_unknown_tensor_is_an_error(monkeypatch):
    model = _model([helper.make_node("Relu", ["nowhere"], ["y"])], [_float_input("x", [2])], [_float_input("y", None)])
    with pytest.raises(GraphError, match="(?s)fails onnx's checker: .*input 'nowhere' of node.*Relu"):
        from_onnx(model)
    monkeypatch.setattr(importer, "_check", lambda *args: None)     # what a model onnx cannot check meets
    with pytest.raises(GraphError, match="reads 'nowhere', which is no graph input"):
        from_onnx(model)


def test_an_unsupported_data_type_is_an_error():
    x = helper.make_tensor_value_info("x", TensorProto.INT16, [2])
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [x])
    with pytest.raises(GraphError, match="graph input 'x' has data type INT16, which tilefuse does not support"):
        from_onnx(model)


def test_a_dynamic_input_shape_is_an_error_unless_given():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_float_input("x", ["N", 3])], [_float_input("y", None)])
    with pytest.raises(GraphError, match=r"graph input 'x' has a dynamic dim 0 \('N'\).*input_shapes"):
        from_onnx(model)
    g = from_onnx(model, input_shapes={"x": (4, 3)})
    assert g.ops[0].outputs[0].shape == (4, 3)
    with pytest.raises(GraphError, match="'y' is not a graph input"):
        from_onnx(model, input_shapes={"y": (4, 3)})


def test_a_shape_from_a_graph_input_needs_its_value():
    shape = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
    model = _model([helper.make_node("Reshape", ["x", "shape"], ["y"])], [_float_input("x", [2, 6]), shape],
                   [_float_input("y", None)])
    with pytest.raises(OnnxInputValueNeeded, match="graph input 'shape'.*constant_inputs") as err:
        from_onnx(model)
    assert err.value.input_name == "shape"
    g = from_onnx(model, constant_inputs={"shape": [3, 4]})
    assert g.ops[0].outputs[0].shape == (3, 4)


def test_bad_arguments():
    with pytest.raises(GraphError, match="no ONNX model file"):
        from_onnx("/nonexistent/model.onnx")
    with pytest.raises(TypeError, match="takes a path, bytes or an onnx.ModelProto"):
        from_onnx(42)
    model = helper.make_model(helper.make_graph([], "g", [], []), opset_imports=[helper.make_opsetid("x.y", 1)])
    with pytest.raises(GraphError, match="imports no version of the default ONNX opset"):
        from_onnx(model)
    future = _model([helper.make_node("Relu", ["x"], ["y"])], [_float_input("x", [2])], [_float_input("y", [2])],
                    opset=99)             # onnxruntime refuses it too: no release defines opset 99
    with pytest.raises(GraphError, match="imports opset 99 of the default ONNX domain; the newest this onnx defines"):
        from_onnx(future)


def test_damaged_model_files_and_bytes_are_a_graph_error_naming_them(tmp_path):
    model = _model([helper.make_node("Neg", ["x"], ["y"])], [_float_input("x", [3])], [_float_input("y", None)])
    data = model.SerializeToString()
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(data[:len(data) // 2])
    with pytest.raises(GraphError, match=r"ONNX model file '.*truncated\.onnx' is not a readable ONNX model"):
        from_onnx(truncated)
    with pytest.raises(GraphError, match=r"ONNX model bytes \(7 bytes\) is not a readable ONNX model"):
        from_onnx(b"\xff\xff\xff\xff\xff\xff\xff")


def test_malformed_graphs_are_a_graph_error_naming_the_node_or_tensor(monkeypatch):
    x, y = _float_input("x", [2, 3]), _float_input("y", None)
    two_outputs = _model([helper.make_node("Relu", ["x"], ["y", "z"])], [x], [y])
    with pytest.raises(GraphError, match="(?s)fails onnx's checker: .*output size 2.*OpType: Relu"):
        from_onnx(two_outputs)
    monkeypatch.setattr(importer, "_check", lambda *args: None)     # our own checks, behind onnx's
    with pytest.raises(GraphError, match="Relu node 'y' declares 2 outputs, but Relu has 1 here"):
        from_onnx(two_outputs)
    twice = _model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])], [x], [y])
    with pytest.raises(GraphError, match="Neg node 'y' writes 'y', which is already .* one producer"):
        from_onnx(twice)
    over_input = _model([helper.make_node("Relu", ["x"], ["x"])], [x], [x])
    with pytest.raises(GraphError, match="writes 'x', which is already a graph input"):
        from_onnx(over_input)
    short = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[3, 4], raw_data=b"\0" * 8)
    with pytest.raises(GraphError, match="initializer 'w' cannot be read"):
        from_onnx(_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [short]))
    values = numpy_helper.from_array(np.ones(2, np.float32), "s")
    indices = numpy_helper.from_array(np.array([1, 99], np.int64), "s_indices")
    model = _model([helper.make_node("Add", ["x", "s"], ["y"])], [x], [y])
    model.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [3]))
    with pytest.raises(GraphError, match="initializer 's' cannot be read: IndexError"):
        from_onnx(model)


def _with_empty_perm(node):
    node.attribute.append(helper.make_attribute("perm", [], attr_type=onnx.AttributeProto.INTS))
    return node


def test_nodes_that_break_their_operators_rules_are_refused_not_run_by_the_fallback():
    x, y = _float_input("x", [1, 3, 6, 6]), _float_input("y", None)
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    cases = [
        (_model([helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=5)], [x], [y], opset=13),
         r"ReduceMean node 'y': keepdims=5; it must be 0 or 1"),
        (_model([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[2, 2])], [x], [y], [w]),
         r"kernel_shape \[2, 2\] contradicts the weights' spatial shape \[3, 3\]"),
        (_model([helper.make_node("Split", ["x", "s"], ["a", "b"], axis=2)], [x],
                [_float_input("a", None), _float_input("b", None)],
                [numpy_helper.from_array(np.array([-1, 7], np.int64), "s")]),
         r"split sizes \[-1, 7\] do not cover"),
        (_model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], pads=[2, 0, 0, 0])], [x], [y]),
         r"pads \[2, 0, 0, 0\] must be smaller than the kernel \[2, 2\]"),
        (_model([helper.make_node("Relu", ["x"], ["y"])], [x], [helper.make_tensor_value_info("y", TensorProto.DOUBLE,
                                                                                            None)]),
         r"graph output 'y' is declared DOUBLE, but the model computes f32"),
        (_model([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="cubic",       # 7.5 columns from 5
                                  coordinate_transformation_mode="align_corners")], [_float_input("x", [1, 1, 2, 5])],
                [y], [numpy_helper.from_array(np.array([1, 1, 2, 1.5], np.float32), "s")], opset=19),
         r"cubic mode with align_corners and scale 1.5 on an axis of 5 is not supported"),
        (_model([helper.make_node("Resize", ["x", "", "", "z"], ["y"], mode="cubic",   # 2 rows onto 1, by sizes
                                  coordinate_transformation_mode="pytorch_half_pixel")],
                [_float_input("x", [1, 2, 2, 3])], [y],
                [numpy_helper.from_array(np.array([1, 2, 1, 4], np.int64), "z")], opset=19),
         r"cubic mode with pytorch_half_pixel onto a length of 1 from an axis of 2 is not supported"),
        (_model([_with_empty_perm(helper.make_node("Transpose", ["x"], ["y"]))], [x], [y]),
         r"Transpose node 'y': perm \[\] has 0 values for an input of rank 4"),
        (_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 1], output_padding=[2, 0])],
                [x], [y], [w]),
         r"output_padding \[2, 0\] must be less than the stride or dilation \(strides \[2, 1\]"),
    ]
    for model, message in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(GraphError, match=rf"^ONNX model 'g': .*{message}"):
                from_onnx(model)


def test_a_layer_normalization_with_a_negative_epsilon_runs_as_onnxruntime_does():
    # onnx sets no bound on epsilon; our LayerNorm refuses a negative one (a GraphError), so the
    # node runs in onnx's reference implementation: NaN where variance + epsilon < 0
    x = f32(2, 4)
    model = _model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], epsilon=-1.0)],
                   [_float_input("x", [2, 4])], [_float_input("y", [2, 4])],
                   [numpy_helper.from_array(np.ones(4, np.float32), "g"),
                    numpy_helper.from_array(np.zeros(4, np.float32), "b")])
    with pytest.warns(UserWarning, match=r"LayerNorm\): epsilon must be a non-negative number, got -1.0.*Wildcard"):
        rep = prepare(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # NaN from sqrt
        got = rep.run([x])[0]
    np.testing.assert_allclose(got, expected_outputs(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_a_wildcard_output_over_the_size_limit_is_refused_before_its_trial_run(monkeypatch):
    import tracemalloc
    monkeypatch.setenv("TILEFUSE_MAX_TENSOR_BYTES", str(32 << 20))
    repeats = numpy_helper.from_array(np.array([4096, 4096], np.int64), "r")
    model = _model([helper.make_node("Tile", ["x", "r"], ["y"])], [_float_input("x", [2, 2])],
                   [_float_input("y", None)], [repeats], opset=13)
    tracemalloc.start()
    try:
        with pytest.raises(GraphError, match="over the limit"):
            from_onnx(model)
        assert tracemalloc.get_traced_memory()[1] < 64 << 20          # nothing of 256 MiB was allocated
    finally:
        tracemalloc.stop()


def test_paths_and_bytes_load(tmp_path):
    model = _model([helper.make_node("Neg", ["x"], ["y"])], [_float_input("x", [3])], [_float_input("y", None)])
    path = tmp_path / "neg.onnx"
    onnx.save(model, str(path))
    for source in (path, str(path), model.SerializeToString()):
        assert [op.kind for op in from_onnx(source).ops] == [OpKind.Neg]


# ---------------------------------------------------------------------------- older opsets, control flow, dead code

def _run(model, *inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return prepare(model).run(list(inputs))


def test_opsets_before_7_broadcast_the_second_operand_at_axis():
    x, bias = f32(2, 3, 4), f32(3)
    model = _model([helper.make_node("Add", ["x", "b"], ["y"], broadcast=1, axis=1)],
                   [_float_input("x", [2, 3, 4]), _float_input("b", [3])], [_float_input("y", [2, 3, 4])], opset=6)
    np.testing.assert_allclose(_run(model, x, bias)[0], x + bias[None, :, None], rtol=1e-6)


def test_opset_1_spellings_of_concat_pad_and_cast():
    x = f32(2, 3)
    nodes = [helper.make_node("Concat", ["x", "x"], ["c"]),                    # axis 1 by default before opset 4
             helper.make_node("Pad", ["c"], ["p"], paddings=[0, 1, 0, 2], value=9.0),
             helper.make_node("Cast", ["p"], ["y"], to="INT32")]
    model = helper.make_model(helper.make_graph(nodes, "g", [_float_input("x", [2, 3])],
                                                [helper.make_tensor_value_info("y", TensorProto.INT32, [2, 9])]),
                              opset_imports=[helper.make_opsetid("", 1)])
    model.ir_version = 3
    imp = import_onnx(model)
    assert [op.kind for op in imp.graph.topological_ops()] == [OpKind.Concat, OpKind.Pad, OpKind.Cast]
    expected = np.pad(np.concatenate([x, x], axis=1), [(0, 0), (1, 2)], constant_values=9).astype(np.int32)
    np.testing.assert_array_equal(_run(model, x)[0], expected)


def test_training_mode_dropout_and_batchnorm_of_old_opsets_are_refused():
    # neither we nor onnx's reference implementation (nor onnxruntime) run is_test=0
    for node, opset in ((helper.make_node("Dropout", ["x"], ["y"], is_test=0), 6),
                        (helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], is_test=0), 6)):
        inputs = [_float_input("x", [2, 3])] + [_float_input(n, [3]) for n in node.input[1:]]
        model = _model([node], inputs, [_float_input("y", [2, 3])], opset=opset)
        with pytest.raises(GraphError, match=f"ONNX {node.op_type} node 'y' cannot run in onnx's reference"):
            import_onnx(model)
    model = _model([helper.make_node("Dropout", ["x"], ["y"], is_test=1)], [_float_input("x", [2, 3])],
                   [_float_input("y", [2, 3])], opset=6)
    x = f32(2, 3)
    np.testing.assert_array_equal(_run(model, x)[0], x)


def test_a_control_flow_wildcard_reads_the_tensors_its_branches_use():
    then_graph = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [_float_input("t", [2, 3])])
    else_graph = helper.make_graph([helper.make_node("Relu", ["x"], ["e"])], "else", [], [_float_input("e", [2, 3])])
    nodes = [helper.make_node("Exp", ["x0"], ["x"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then_graph, else_branch=else_graph)]
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    model = _model(nodes, [_float_input("x0", [2, 3]), cond], [_float_input("y", [2, 3])], opset=13)
    with pytest.warns(UserWarning, match="ONNX op If"):
        imp = import_onnx(model)
    wildcard = imp.graph.topological_ops()[-1]
    assert wildcard.kind is OpKind.Wildcard and len(wildcard.inputs) == 2       # cond, and x from the branches
    x0 = f32(2, 3)
    np.testing.assert_allclose(_run(model, x0, np.array(True))[0], -np.exp(x0), rtol=1e-6)
    np.testing.assert_allclose(_run(model, x0, np.array(False))[0], np.exp(x0), rtol=1e-6)


def test_ops_no_graph_output_needs_are_dropped():
    nodes = [helper.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2),
             helper.make_node("Exp", ["b"], ["unused"]), helper.make_node("Relu", ["a"], ["y"])]
    model = _model(nodes, [_float_input("x", [2, 4])], [_float_input("y", [2, 2])], opset=18)
    g = from_onnx(model)
    assert [op.kind for op in g.topological_ops()] == [OpKind.Slice, OpKind.ReLU]


def test_huge_shapes_are_refused_with_their_name_and_size_before_any_allocation(monkeypatch):
    x, y = _float_input("x", [2, 3]), _float_input("y", None)
    shape = numpy_helper.from_array(np.array([10 ** 6, 10 ** 6], np.int64), "shape")
    huge = _model([helper.make_node("ConstantOfShape", ["shape"], ["c"]), helper.make_node("Neg", ["x"], ["y"])],
                  [x], [y, _float_input("c", None)], [shape])
    with pytest.raises(GraphError, match=r"ConstantOfShape node 'c'.*output 'c' of shape \(1000000, 1000000\) "
                                         r"needs 3\.6 TiB, over the limit"):
        from_onnx(huge)
    expand = _model([helper.make_node("Expand", ["x", "shape3"], ["y"])], [_float_input("x", [1, 3])], [y],
                    [numpy_helper.from_array(np.array([10 ** 7, 10 ** 6, 3], np.int64), "shape3")])
    with pytest.raises(GraphError, match=r"Expand node 'y'.*needs .* TiB, over the limit"):
        from_onnx(expand)
    big_input = _model([helper.make_node("Neg", ["x"], ["y"])], [_float_input("x", [10 ** 6, 10 ** 6])], [y])
    with pytest.raises(GraphError, match=r"graph input 'x' of shape \(1000000, 1000000\) needs 3\.6 TiB"):
        from_onnx(big_input)
    monkeypatch.setenv("TILEFUSE_MAX_TENSOR_BYTES", "16")
    with pytest.raises(GraphError, match=r"graph input 'x' of shape \(2, 3\) needs 24 bytes, over the limit of "
                                         r"16 bytes \(TILEFUSE_MAX_TENSOR_BYTES\)"):
        from_onnx(_model([helper.make_node("Neg", ["x"], ["y"])], [x], [y]))
    monkeypatch.setenv("TILEFUSE_MAX_TENSOR_BYTES", "lots")
    with pytest.raises(GraphError, match="must be a positive whole number, got 'lots'"):
        from_onnx(_model([helper.make_node("Neg", ["x"], ["y"])], [x], [y]))


@pytest.mark.parametrize("op, indices, attrs", [("GatherElements", [[0, 7, 1], [1, 0, 2]], {"axis": 1}),
                                                ("GatherElements", [[0, -4, 1], [1, 0, 2]], {"axis": 1}),
                                                ("GatherND", [[1, 3]], {})])
def test_a_wildcard_that_indexes_out_of_range_is_an_error_at_run_not_a_wrapped_result(op, indices, attrs):
    data = _float_input("d", [2, 3])
    index = helper.make_tensor_value_info("i", TensorProto.INT64, list(np.shape(indices)))
    model = _model([helper.make_node(op, ["d", "i"], ["y"], **attrs)], [data, index], [_float_input("y", None)])
    d = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(GraphError, match=f"ONNX {op} node 'y': indices out of range for data of shape \\[2, 3\\]"):
        _run(model, d, np.array(indices, np.int64))
    inside = np.array(indices, np.int64) % np.array(d.shape[1] if op == "GatherElements" else d.shape)
    want = np.take_along_axis(d, inside, axis=1) if op == "GatherElements" else d[tuple(inside.T)]
    np.testing.assert_array_equal(_run(model, d, inside)[0], want)


def test_gather_elements_over_a_broadcast_buffer_folds_at_import():
    """BERT's token-type ids: a zero buffer expanded to (1, 128), gathered along its row by
    position (onnx's reference GatherElements fails past 32 rows: "cannot reshape array of size
    1 into shape (1,128)")."""
    zeros = numpy_helper.from_array(np.array([0], np.int64))
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["buffer"], value=zeros),
             helper.make_node("Expand", ["buffer", "shape"], ["rows"]),
             helper.make_node("GatherElements", ["rows", "positions"], ["types"], axis=1),
             helper.make_node("Cast", ["types"], ["typesf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "typesf"], ["y"])]
    positions = np.arange(128, dtype=np.int64)[::-1].reshape(1, 128).copy()
    model = _model(nodes, [_float_input("x", [1, 128])], [_float_input("y", [1, 128])],
                   [numpy_helper.from_array(np.array([1, 128], np.int64), "shape"),
                    numpy_helper.from_array(positions, "positions")])
    graph = from_onnx(model)
    assert [op.kind for op in graph.ops] == [OpKind.Add]
    x = f32(1, 128)
    got = compile_graph(graph, strict=True).run({graph.get_input_ports()[0].id: x})
    np.testing.assert_array_equal(next(iter(got.values())), x)


def test_gather_elements_at_run_time_takes_along_the_axis_with_negative_indices():
    data, idx = f32(3, 40), RNG.integers(-40, 40, (3, 50))
    node = helper.make_node("GatherElements", ["d", "i"], ["y"], axis=1)
    model = _model([node], [_float_input("d", [3, 40]), helper.make_tensor_value_info("i", TensorProto.INT64, [3, 50])],
                   [_float_input("y", [3, 50])])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, = prepare(model).run([data, idx])
    np.testing.assert_array_equal(got, np.take_along_axis(data, np.where(idx < 0, idx + 40, idx), 1))


def test_an_attention_mask_from_int64_ids_compiles_with_no_fallback():
    """The mask chain transformers exports: int64 attention_mask -> bool -> reshaped and expanded
    over the query axis -> And with a causal triangle -> Where into the scores -> Softmax; all of
    it compiled (strict), and equal to onnxruntime's, padding included."""
    batch, seq = 2, 37
    causal = np.tril(np.ones((seq, seq), bool))
    nodes = [helper.make_node("Cast", ["attention_mask"], ["keep"], to=TensorProto.BOOL),
             helper.make_node("Reshape", ["keep", "rows"], ["keep4"]),
             helper.make_node("Expand", ["keep4", "full"], ["keep_all"]),
             helper.make_node("And", ["keep_all", "causal"], ["allowed"]),
             helper.make_node("Not", ["allowed"], ["blocked"]),
             helper.make_node("Where", ["blocked", "lowest", "scores"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["probs"], axis=-1)]
    model = _model(nodes, [helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [batch, seq]),
                           _float_input("scores", [batch, 4, seq, seq])],
                   [_float_input("probs", [batch, 4, seq, seq])],
                   [numpy_helper.from_array(np.array([batch, 1, 1, seq], np.int64), "rows"),
                    numpy_helper.from_array(np.array([batch, 1, seq, seq], np.int64), "full"),
                    numpy_helper.from_array(causal, "causal"),
                    numpy_helper.from_array(np.array(np.finfo(np.float32).min, np.float32), "lowest")])
    mask = np.ones((batch, seq), np.int64)
    mask[1, 30:] = 0                    # the second sequence is padded
    scores = f32(batch, 4, seq, seq)
    imp = import_onnx(model)
    assert not imp.wildcards
    compiled = compile_graph(imp.graph, strict=True)
    ids = dict(imp.inputs)
    got = compiled.run({ids["attention_mask"]: mask, ids["scores"]: scores})[dict(imp.outputs)["probs"]]
    want, = expected_outputs(model, {"attention_mask": mask, "scores": scores})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_loaded_model_is_checked_once_per_set_of_input_shapes(monkeypatch):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    loaded = importer.load_model(model.SerializeToString())
    checked = []
    real = importer._check
    monkeypatch.setattr(importer, "_check", lambda *args: (checked.append(args[3]), real(*args))[1])
    importer.check_model(loaded)                        # a session checks the model it opens
    for shapes in ({"x": (2, 3)}, {"x": (2, 3)}, {"x": (4, 3)}):
        import_onnx(loaded, input_shapes=shapes)
    assert checked == [None, {"x": (2, 3)}, {"x": (4, 3)}]
