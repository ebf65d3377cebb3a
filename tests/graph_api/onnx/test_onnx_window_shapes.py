"""graph_api.onnx: how ConvTranspose and the pools turn ONNX's output_shape, auto_pad and
ceil_mode into explicit pads, checked against onnxruntime (sweeps through the shape rules and
the reference interpreter, a few cases compiled), and graph outputs whose computed shape
contradicts the shape the model declares, refused at import."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tilefuse.graph_api import GraphError, OpKind, reference  # noqa: E402
from tilefuse.graph_api.onnx import import_onnx  # noqa: E402
from tilefuse.graph_api.onnx.backend import prepare  # noqa: E402

RNG = np.random.default_rng(7)


def _model(nodes, x_shape, outputs, initializers=(), out_shape=None, opset=19):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))
    ys = [helper.make_tensor_value_info(y, TensorProto.FLOAT, out_shape) for y in outputs]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], ys, list(initializers)),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _onnxruntime(model, x):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


def _interpreted(model, x):
    """The model imported (each node one of our ops, no Wildcard), its output shapes from our
    shape rules and its values from the reference interpreter."""
    imp = import_onnx(model)
    assert OpKind.Wildcard not in {op.kind for op in imp.graph.ops}
    (_, x_id), = imp.inputs
    values = reference.run(imp.graph, {**imp.graph.constant_values, x_id: x})
    shapes = [imp.graph.tensors[tid].shape for _, tid in imp.outputs]
    return shapes, [values[tid] for _, tid in imp.outputs]


def _compiled(model, x):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no Wildcard, nothing left to the interpreter
        return prepare(model).run([x])


def _check(model, x, got, atol=1e-5):
    want = _onnxruntime(model, x)
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol)


# ---------------------------------------------------------------------------- ConvTranspose

def _conv_transpose(w, k, s, d, variants):
    """One model: a ConvTranspose node per variant (attributes) over the same x and weights."""
    weights = numpy_helper.from_array(RNG.uniform(-1, 1, (2, 3, k)).astype(np.float32), "w")
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], [f"y{i}"], kernel_shape=[k], strides=[s],
                              dilations=[d], **attrs) for i, attrs in enumerate(variants)]
    return _model(nodes, (1, 2, w), [f"y{i}" for i in range(len(variants))], [weights])


def _conv_transpose_variants(w, k, s, d):
    full = s * (w - 1) + (k - 1) * d + 1
    variants = [{"output_shape": [t]} for t in range(full - 3, full + s)]       # crops, exact, extensions
    variants += [{"output_shape": [t], "auto_pad": a} for t in (full - 1, full - 2, full + s - 1)
                 for a in ("SAME_UPPER", "SAME_LOWER", "VALID")]
    variants += [{"output_shape": [full - 1], "pads": [2, 0]},                  # pads ignored
                 {"output_shape": [full - 3], "output_padding": [s - 1]}]
    variants += [{"auto_pad": a} for a in ("SAME_UPPER", "SAME_LOWER")]
    variants += [{"output_padding": [p], "pads": [1, 0]} for p in range(s)]
    return variants


def test_conv_transpose_output_shape_splits_the_crop_as_onnxruntime():
    # the case: 17 elements cropped to 15, one at each end (not both at the end)
    model = _conv_transpose(7, 3, 2, 2, [{"output_shape": [15]}])
    x = RNG.uniform(-1, 1, (1, 2, 7)).astype(np.float32)
    op, = import_onnx(model).graph.ops
    assert (op.attrs["pads_begin"], op.attrs["pads_end"]) == ([1], [1])
    _check(model, x, _compiled(model, x))


@pytest.mark.parametrize("w", range(5, 10))
def test_conv_transpose_sweep_matches_onnxruntime(w):
    for k, s, d in itertools.product(range(2, 5), range(1, 4), range(1, 3)):
        model = _conv_transpose(w, k, s, d, _conv_transpose_variants(w, k, s, d))
        x = RNG.uniform(-1, 1, (1, 2, w)).astype(np.float32)
        shapes, values = _interpreted(model, x)
        assert shapes == [v.shape for v in values]
        _check(model, x, values)


def test_conv_transpose_sweep_compiled_cases():
    for w, k, s, d in ((5, 3, 2, 1), (8, 4, 3, 2), (9, 2, 1, 2)):
        model = _conv_transpose(w, k, s, d, _conv_transpose_variants(w, k, s, d)[:9])
        x = RNG.uniform(-1, 1, (1, 2, w)).astype(np.float32)
        _check(model, x, _compiled(model, x))


# ---------------------------------------------------------------------------- pools

def _pool(op, w, variants):
    nodes = [helper.make_node(op, ["x"], [f"y{i}"], **attrs) for i, attrs in enumerate(variants)]
    return _model(nodes, (1, 2, w), [f"y{i}" for i in range(len(variants))])


def _pool_variants(op, w):
    """auto_pad VALID, SAME_UPPER, SAME_LOWER with and without ceil_mode, and dilations (MaxPool),
    count_include_pad (AveragePool); SAME only where onnxruntime's padding is not negative (a
    kernel at least the stride), windows that fit the input."""
    out = []
    for k, s, d, auto, ceil, extra in itertools.product(
            range(1, 5), range(1, 4), (1, 2), ("VALID", "SAME_UPPER", "SAME_LOWER"), (0, 1),
            ({}, {"count_include_pad": 1}) if op == "AveragePool" else ({},)):
        if (op == "AveragePool" and d > 1) or (k - 1) * d + 1 > w or (auto != "VALID" and k < s):
            continue
        out.append({"kernel_shape": [k], "strides": [s], "auto_pad": auto, "ceil_mode": ceil,
                    **({"dilations": [d]} if d > 1 else {}), **extra})
    return out


def test_average_pool_valid_ceil_mode_keeps_onnxruntimes_last_window():
    # the case: 10 elements, windows of 3 every 2: the fifth starts at 8, inside the input
    model = _pool("AveragePool", 10, [{"kernel_shape": [3], "strides": [2], "auto_pad": "VALID", "ceil_mode": 1}])
    x = RNG.uniform(-1, 1, (1, 2, 10)).astype(np.float32)
    assert import_onnx(model).graph.tensors[import_onnx(model).outputs[0][1]].shape == (1, 2, 5)
    got = _compiled(model, x)
    assert got[0].shape == (1, 2, 5)
    np.testing.assert_allclose(got[0][..., 4], x[..., 8:].mean(axis=-1), rtol=1e-6)     # padding not counted
    _check(model, x, got)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("w", [5, 6, 9, 10])
def test_pool_auto_pad_and_ceil_mode_sweep_matches_onnxruntime(op, w):
    model = _pool(op, w, _pool_variants(op, w))
    x = RNG.uniform(-1, 1, (1, 2, w)).astype(np.float32)
    shapes, values = _interpreted(model, x)
    assert shapes == [v.shape for v in values]
    _check(model, x, values)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_auto_pad_and_ceil_mode_compiled(op):
    variants = [{"kernel_shape": [3], "strides": [2], "auto_pad": a, "ceil_mode": 1} for a in ("VALID", "SAME_LOWER")]
    variants += [{"kernel_shape": [2], "strides": [3], "auto_pad": "VALID", "ceil_mode": 1}]
    if op == "AveragePool":
        variants.append({"kernel_shape": [4], "strides": [3], "auto_pad": "VALID", "ceil_mode": 1,
                         "count_include_pad": 1})
    model = _pool(op, 10, variants)
    x = RNG.uniform(-1, 1, (1, 2, 10)).astype(np.float32)
    _check(model, x, _compiled(model, x))


def test_pool_same_with_a_negative_total_or_dilations_matches_onnxruntime():
    """SAME pads as onnxruntime computes them: the kernel not dilated, a negative total kept (the
    windows start after the input's begin: k=1, s=3 over 9 reads 1, 4, 7 under SAME_UPPER), and
    the output counted with the dilated kernel (k=2, s=3, d=2 over 9: 2 windows, not 3). MaxPool
    without dilations and a negative total is left out: onnxruntime refuses its pads."""
    variants = {"AveragePool": [], "MaxPool": []}
    for k, s, d, auto in itertools.product((1, 2, 3), (2, 3, 4), (1, 2, 3), ("SAME_UPPER", "SAME_LOWER")):
        for op in variants:
            if (op == "MaxPool" and d == 1 and k < s) or (k - 1) * d + 1 > 9 + (-(-9 // s) - 1) * s + k - 9:
                continue
            variants[op].append({"kernel_shape": [k], "strides": [s], "auto_pad": auto,
                                 **({"dilations": [d]} if d > 1 else {})})
    x = RNG.uniform(-1, 1, (1, 2, 9)).astype(np.float32)
    for op, chosen in variants.items():
        model = _pool(op, 9, chosen)
        shapes, values = _interpreted(model, x)
        assert shapes == [v.shape for v in values]
        _check(model, x, values)
        _check(model, x, _compiled(model, x))


def test_a_pool_window_larger_than_the_padded_input_is_refused_at_import():
    # onnxruntime computes (2 - 3) / 2 + 1 in floats and truncates it to 1 window; the operator's
    # floor((2 - 3) / 2 + 1) = 0: the model defines no output
    model = _pool("AveragePool", 2, [{"kernel_shape": [3], "strides": [2]}])
    with pytest.raises(GraphError, match="AveragePool node 'y0': along spatial axis 0 the window \\(3 taps 1 apart\\) "
                                         "is larger than the padded input"):
        import_onnx(model)
    # under ceil_mode the spec's ceil((1 - 2) / 2 + 1) = 1 window, cut by the input's end
    model = _pool("MaxPool", 1, [{"kernel_shape": [2], "strides": [2], "ceil_mode": 1}])
    x = RNG.uniform(-1, 1, (1, 2, 1)).astype(np.float32)
    _check(model, x, _compiled(model, x))


MAX_POOL_INDICES = [
    ((2, 3, 11), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ((2, 3, 9, 7), {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 0, 1], "storage_order": 1}),
    ((1, 2, 11, 5), {"kernel_shape": [3, 2], "ceil_mode": 1, "pads": [2, 1, 1, 0]}),
    ((1, 2, 13, 9), {"kernel_shape": [2, 3], "strides": [3, 2], "dilations": [2, 3], "storage_order": 1}),
    ((1, 3, 9, 11), {"kernel_shape": [2, 1], "strides": [3, 1], "dilations": [2, 3], "auto_pad": "SAME_UPPER"}),
    ((1, 1, 3, 2), {"kernel_shape": [3, 1], "strides": [2, 3], "auto_pad": "SAME_UPPER"}),
    ((2, 3, 5, 4, 4), {"kernel_shape": [2, 2, 3], "strides": [2, 3, 1], "auto_pad": "SAME_LOWER", "storage_order": 1}),
    ((1, 2, 5, 7, 6), {"kernel_shape": [2, 3, 2], "pads": [0, 1, 1, 1, 1, 0], "ceil_mode": 1, "strides": [2, 2, 2]}),
    # windows of padding only (taps at -1 and 2 over 1 row): onnxruntime's position -1 on each axis
    ((2, 2, 1, 3), {"kernel_shape": [2, 1], "strides": [3, 1], "dilations": [3, 1], "ceil_mode": 1,
                    "pads": [1, 0, 1, 0], "storage_order": 1}),
    ((1, 2, 1, 3, 2), {"kernel_shape": [2, 1, 1], "strides": [3, 1, 1], "dilations": [3, 1, 1], "ceil_mode": 1,
                       "pads": [1, 0, 0, 1, 0, 0]}),
]


@pytest.mark.parametrize("shape, attrs", MAX_POOL_INDICES, ids=lambda v: str(v).replace(" ", ""))
def test_max_pool_indices_compile_and_equal_onnxruntime(shape, attrs):
    """MaxPool's Indices output compiles (MaxPoolIndices, no Wildcard) and equals onnxruntime's:
    flat over n, c and the spatial position row-major, or column-major with storage_order=1."""
    model = helper.make_model(helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("i", TensorProto.INT64, None)]), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    assert [op.kind for op in import_onnx(model).graph.ops][:2] == [OpKind.MaxPool, OpKind.MaxPoolIndices]
    x = RNG.uniform(-1, 1, shape).astype(np.float32)
    got, want = _compiled(model, x), _onnxruntime(model, x)
    assert [g.shape for g in got] == [w.shape for w in want] and got[1].dtype == np.int64
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_conv_transpose_same_with_dilations_compiles_and_equals_onnxruntime():
    weights = numpy_helper.from_array(RNG.uniform(-1, 1, (3, 2, 3, 2)).astype(np.float32), "w")
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], [f"y{i}"], strides=s, dilations=d, auto_pad=a)
             for i, (s, d, a) in enumerate(itertools.product(([2, 2], [1, 3]), ([2, 3], [3, 1]),
                                                             ("SAME_UPPER", "SAME_LOWER")))]
    model = _model(nodes, (1, 3, 5, 7), [f"y{i}" for i in range(len(nodes))], [weights])
    x = RNG.uniform(-1, 1, (1, 3, 5, 7)).astype(np.float32)
    _check(model, x, _compiled(model, x))


# ---------------------------------------------------------------------------- declared output shapes

def test_an_output_shape_that_contradicts_the_declared_one_is_refused_at_import():
    # onnx's shape inference (which its checker runs) counts a last window starting in the end
    # padding, onnxruntime does not: the model declares 4 elements, it computes 3
    pool = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2], strides=[2], pads=[0, 1], ceil_mode=1)
    model = _model([pool], (1, 2, 6), ["y"], out_shape=[1, 2, 4])
    assert _onnxruntime(model, np.zeros((1, 2, 6), np.float32))[0].shape == (1, 2, 3)
    with pytest.raises(GraphError, match=r"^ONNX model 'g': graph output 'y' is declared with shape \[1, 2, 4\], "
                                         r"but the model computes \[1, 2, 3\]$"):
        import_onnx(model)
    with pytest.raises(GraphError, match="declared with shape"):
        prepare(model)
    model = _model([pool], (1, 2, 6), ["y"], out_shape=["n", 2, 4])
    with pytest.raises(GraphError, match=r"declared with shape \['\?', 2, 4\], but the model computes \[1, 2, 3\]"):
        import_onnx(model)


def test_declared_output_shapes_that_agree_or_leave_dims_open_are_accepted():
    relu = [helper.make_node("Relu", ["x"], ["y"])]
    for declared in ([2, 3], ["batch", 3], None):
        import_onnx(_model(relu, (2, 3), ["y"], out_shape=declared))
    # an input given another shape than the declared one: the declarations describe other inputs
    imp = import_onnx(_model(relu, (2, 3), ["y"], out_shape=[2, 3]), input_shapes={"x": (4, 3)})
    assert imp.graph.tensors[imp.outputs[0][1]].shape == (4, 3)
