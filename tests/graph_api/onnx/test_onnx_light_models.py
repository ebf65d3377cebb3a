"""The ``light`` real models the onnx package ships (``onnx/backend/test/data/light``: the
structure of alexnet, resnet50, densenet121, shufflenet, vgg19, ... with weights made by
ConstantOfShape) import, partition into compiled partitions only, compile and run, matching
their stored outputs with onnx's tolerances (rtol 1e-3, atol 1e-7) on the input onnx's runner
feeds them. Every model the installed onnx ships is run.
"""
from __future__ import annotations

import os
import warnings

import pytest

onnx = pytest.importorskip("onnx")
from onnx.backend.test.runner import Runner  # noqa: E402

from tilefuse.graph_api import compile_graph  # noqa: E402
from tilefuse.graph_api.onnx import import_onnx  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = sorted(f[len("light_"):-len(".onnx")] for f in os.listdir(LIGHT)
                if f.startswith("light_") and f.endswith(".onnx")) if os.path.isdir(LIGHT) else []


def _model(name):
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"the installed onnx has no {path}")
    return onnx.load(path)


def _imported(model):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        imp = import_onnx(model)
    assert not [str(w.message) for w in caught if "Wildcard" in str(w.message)]
    assert not imp.wildcards
    return imp


def test_the_installed_onnx_ships_the_light_models():
    assert {"bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
            "squeezenet", "vgg19", "zfnet512"} <= set(MODELS)


@pytest.mark.parametrize("name", MODELS)
def test_light_model_runs_and_matches_its_stored_output(name):
    model = _model(name)
    imp = _imported(model)
    partitions = imp.graph.get_partitions()
    assert partitions and all(p.is_supported() for p in partitions)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = compile_graph(imp.graph)
    assert not [str(w.message) for w in caught if "reference interpreter" in str(w.message)]
    initializers = {t.name for t in model.graph.initializer}
    (name_in, tid), = imp.inputs
    vi = next(v for v in model.graph.input if v.name == name_in and v.name not in initializers)
    x = Runner.generate_dummy_data(vi, seed=0, name=name, random=False)     # what onnx's runner feeds
    (_, out_id), = imp.outputs
    got = compiled.run({tid: x})[out_id]
    expected = onnx.numpy_helper.to_array(onnx.load_tensor(os.path.join(LIGHT, f"light_{name}_output_0.pb")))
    Runner.assert_similar_outputs([expected], [got], rtol=1e-3, atol=1e-7)
