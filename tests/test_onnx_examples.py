"""The bundled ONNX models are what their generator writes, they are small, onnxruntime runs
them and agrees with onnx's reference evaluator, and tilefuse computes the same outputs."""
import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MODEL_FILES = ["resnet_block.onnx", "transformer_encoder.onnx"]


def _generator():
    spec = importlib.util.spec_from_file_location("make_onnx_models", EXAMPLES / "make_onnx_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _without_weights(model):
    """The model's bytes with every initializer's data cleared (structure, names, attributes,
    shapes and dtypes stay)."""
    stripped = onnx.ModelProto()
    stripped.CopyFrom(model)
    for init in stripped.graph.initializer:
        init.ClearField("raw_data")
    return stripped.SerializeToString()


def _feeds(model, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


@pytest.fixture(scope="module")
def generated():
    module = _generator()
    return {name: module.MODELS[name]() for name in MODEL_FILES}


@pytest.mark.parametrize("name", MODEL_FILES)
def test_committed_model_is_what_the_generator_writes(name, generated):
    committed = onnx.load(str(EXAMPLES / name))
    fresh = generated[name]
    # the same graph, byte for byte, apart from the weights' data ...
    assert _without_weights(committed) == _without_weights(fresh)
    # ... and the same weights (exactly, unless numpy's random stream changed a last bit)
    for a, b in zip(committed.graph.initializer, fresh.graph.initializer):
        np.testing.assert_allclose(numpy_helper.to_array(a), numpy_helper.to_array(b), rtol=1e-6, err_msg=a.name)
    assert (EXAMPLES / name).stat().st_size < 500 * 1024
    assert committed.opset_import[0].version == 17
    onnx.checker.check_model(committed, full_check=True)


def test_generator_checks_its_arguments():
    with pytest.raises(ValueError, match="not a multiple of heads"):
        _generator().transformer_encoder(d_model=10, heads=4)


def test_models_have_the_promised_structure(generated):
    resnet = [n.op_type for n in generated["resnet_block.onnx"].graph.node]
    assert resnet == ["Conv", "BatchNormalization", "Relu", "Conv", "BatchNormalization", "Add", "Relu",
                      "GlobalAveragePool", "Flatten", "Gemm"]
    encoder = [n.op_type for n in generated["transformer_encoder.onnx"].graph.node]
    assert encoder.count("LayerNormalization") == 4 and encoder.count("Softmax") == 2
    assert encoder.count("MatMul") == 2 * 8 and encoder.count("Erf") == 2


@pytest.mark.parametrize("name", MODEL_FILES)
def test_onnxruntime_runs_the_model_like_the_onnx_reference(name):
    ort = pytest.importorskip("onnxruntime")
    path = EXAMPLES / name
    model = onnx.load(str(path))
    feeds = _feeds(model)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    out_shapes = [[d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.output]
    assert [list(a.shape) for a in got] == out_shapes
    for a, b in zip(got, want):
        assert np.all(np.isfinite(a)) and np.std(a) > 1e-2         # not a constant or blown-up output
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", MODEL_FILES)
def test_tilefuse_computes_what_onnxruntime_computes(name):
    from tilefuse import graph_api
    ort = pytest.importorskip("onnxruntime")
    path = EXAMPLES / name
    model = onnx.load(str(path))
    feeds = _feeds(model, seed=3)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    graph = graph_api.from_onnx(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # every op has a mapping: no Wildcard, no reference fallback
        compiled = graph_api.compile_graph(graph)
    assert len(compiled.input_ports) == 1, "initializers are bound constants, only the data is fed"
    port = compiled.input_ports[0]
    got = compiled.run({port.id: next(iter(feeds.values()))})
    assert len(compiled.output_ids) == 1
    np.testing.assert_allclose(got[compiled.output_ids[0]], want[0], rtol=1e-3, atol=1e-4)
