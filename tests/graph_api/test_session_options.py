"""onnxruntime's InferenceSession arguments where users type them: providers, SessionOptions
(optimization levels that give onnxruntime's results, log levels, threads), RunOptions honoured
or refused, model metadata, missing files and folders."""
import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilefuse  # noqa: E402
from tilefuse.graph_api import (GraphError, GraphOptimizationLevel, InferenceSession, RunOptions,  # noqa: E402
                                SessionOptions, load_compiled)
from tilefuse.graph_api.passes.layout import LAYOUT_TRANSPOSE  # noqa: E402
from tilefuse.graph_api.session_options import OptionError  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RESNET = str(EXAMPLES / "resnet_block.onnx")
FEED = {"input": np.random.default_rng(3).standard_normal((1, 16, 32, 32)).astype("float32")}


def options(**fields) -> SessionOptions:
    made = SessionOptions()
    for name, value in fields.items():
        setattr(made, name, value)
    return made


def test_tilefuse_exports_the_session_and_its_options():
    assert tilefuse.InferenceSession is InferenceSession
    assert tilefuse.SessionOptions is SessionOptions and tilefuse.RunOptions is RunOptions
    assert tilefuse.get_available_providers() == ["CPUExecutionProvider"]


@pytest.mark.parametrize("providers, provider_options", [
    (None, None), (["CPUExecutionProvider"], None), ([("CPUExecutionProvider", {})], None),
    (("CPUExecutionProvider",), [{}]), ([], None)])
def test_the_cpu_provider_is_accepted_in_each_of_onnxruntimes_spellings(providers, provider_options):
    sess = InferenceSession(RESNET, None, providers, provider_options)
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert sess.get_provider_options() == {"CPUExecutionProvider": {}}


@pytest.mark.parametrize("providers, provider_options, message", [
    (["CUDAExecutionProvider"], None, "'CUDAExecutionProvider' is not available: tilefuse runs on the CPU only"),
    (["CUDAExecutionProvider", "CPUExecutionProvider"], None, "CUDAExecutionProvider"),
    ([("OpenVINOExecutionProvider", {"device_type": "CPU"})], None, "OpenVINOExecutionProvider"),
    ([("CPUExecutionProvider", {"use_arena": "0"})], None, r"options \['use_arena'\]"),
    (["CPUExecutionProvider"], [{"use_arena": "0"}], r"options \['use_arena'\]"),
    (["CPUExecutionProvider"], [{}, {}], "one dict per provider"),
    ("CPUExecutionProvider", None, "must be a list"),
    (None, [{}], "provider_options without providers"),
    ([3], None, "a provider is a name")])
def test_other_providers_and_provider_options_are_refused_clearly(providers, provider_options, message):
    with pytest.raises(OptionError, match=message) as caught:
        InferenceSession(RESNET, providers=providers, provider_options=provider_options)
    assert isinstance(caught.value, GraphError)


def test_session_options_refuse_unknown_fields_and_bad_values():
    made = SessionOptions()
    with pytest.raises(OptionError, match="SessionOptions has no field 'inter_op_num_threads'; tilefuse's are "):
        made.inter_op_num_threads = 1
    for field, value in [("intra_op_num_threads", -1), ("intra_op_num_threads", 1.5), ("enable_profiling", 1),
                         ("log_severity_level", 5), ("graph_optimization_level", 7), ("profile_file_prefix", None)]:
        with pytest.raises(OptionError, match=field):
            setattr(made, field, value)
    assert made.set_fields == set()


def test_onnxruntimes_own_option_objects_are_refused_naming_ours():
    with pytest.raises(OptionError, match="sess_options must be a tilefuse SessionOptions"):
        InferenceSession(RESNET, ort.SessionOptions())
    with pytest.raises(OptionError, match="run_options must be a tilefuse RunOptions"):
        InferenceSession(RESNET).run(None, FEED, ort.RunOptions())


def test_onnxruntimes_optimization_level_enum_is_read_by_name():
    made = options(graph_optimization_level=ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED)
    assert made.graph_optimization_level is GraphOptimizationLevel.ORT_ENABLE_EXTENDED


@pytest.mark.parametrize("model", ["resnet_block", "transformer_encoder"])
def test_every_optimization_level_gives_onnxruntimes_results(model):
    path = str(EXAMPLES / f"{model}.onnx")
    reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = {i.name: np.random.default_rng(1).standard_normal(i.shape).astype("float32")
            for i in reference.get_inputs()}
    want = reference.run(None, feed)
    steps = {}
    for level in GraphOptimizationLevel:
        sess = InferenceSession(path, options(graph_optimization_level=level))
        for got, expected in zip(sess.run(None, feed), want):
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
        (compiled,) = sess._compiled.values()
        steps[level] = compiled.graph.steps
    ops = sum(len(step.ops) for step in steps[GraphOptimizationLevel.ORT_DISABLE_ALL])
    assert len(steps[GraphOptimizationLevel.ORT_DISABLE_ALL]) == ops          # each op alone: no fusion
    assert len(steps[GraphOptimizationLevel.ORT_ENABLE_BASIC]) < ops
    if model == "resnet_block":         # the channels-last plan runs at LAYOUT and ALL only
        def transposes(level):
            return sum(op.name == LAYOUT_TRANSPOSE for step in steps[level] for op in step.ops)
        assert transposes(GraphOptimizationLevel.ORT_ENABLE_EXTENDED) == 0
        assert transposes(GraphOptimizationLevel.ORT_ENABLE_ALL) > 0


def unsupported_model():
    """y = Relu(x) then an op tilefuse leaves to onnx's reference implementation (a warning)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="/relu"),
             helper.make_node("Hardmax", ["r"], ["y"], name="/hardmax", axis=-1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_log_severity_error_silences_the_warnings_of_a_compile_and_info_reports_it(capsys):
    with pytest.warns(UserWarning) as loud:
        InferenceSession(unsupported_model())
    assert loud and all(w.filename == __file__ for w in loud)      # at the line that made the session
    import warnings
    with warnings.catch_warnings(record=True) as quiet:
        warnings.simplefilter("always")
        InferenceSession(unsupported_model(), options(log_severity_level=3))
    assert quiet == []
    capsys.readouterr()
    with pytest.warns(UserWarning):
        InferenceSession(unsupported_model(), options(log_severity_level=1, logid="mine"))
    assert "tilefuse [mine]: compiled for input shapes [[2, 3]]" in capsys.readouterr().err


def test_run_options_terminate_and_what_a_run_cannot_honour_are_refused():
    sess = InferenceSession(RESNET)
    stopped = RunOptions()
    stopped.terminate = True
    with pytest.raises(GraphError, match="run terminated: RunOptions.terminate is set"):
        sess.run(None, FEED, stopped)
    fetches = RunOptions()
    fetches.only_execute_path_to_fetches = True
    with pytest.raises(OptionError, match="only_execute_path_to_fetches"):
        sess.run(None, FEED, fetches)
    entries = RunOptions()
    entries.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    with pytest.raises(OptionError, match=r"run config entries \['memory.enable_memory_arena_shrinkage'\]"):
        sess.run(None, FEED, entries)
    with pytest.raises(OptionError, match="RunOptions has no field 'run_tag'"):
        RunOptions().run_tag = "x"
    plain = RunOptions()
    plain.logid = "request 1"
    np.testing.assert_array_equal(sess.run(None, FEED, plain)[0], sess.run(None, FEED)[0])


def test_terminate_set_during_a_run_stops_it_before_the_next_step():
    sess = InferenceSession(RESNET)
    (compiled,) = sess._compiled.values()
    calls = []

    def stop():
        calls.append(1)
        if len(calls) == 3:
            raise GraphError("run terminated: RunOptions.terminate is set")
    with pytest.raises(GraphError, match="terminated"):
        compiled.graph.run([FEED["input"]], stop)
    assert len(calls) == 3
    flipped = RunOptions()            # another thread sets terminate while the run is in its third step
    checks = []

    def check():
        checks.append(1)
        if len(checks) == 3:
            flipped.terminate = True
        RunOptions.check(flipped)
    object.__setattr__(flipped, "check", check)
    with pytest.raises(GraphError, match="terminated"):
        sess.run(None, FEED, flipped)
    assert len(checks) == 3 < len(compiled.graph.steps) + 1


def test_a_session_with_a_thread_count_of_its_own_runs_right_and_reports_its_options():
    sess = InferenceSession(RESNET, options(intra_op_num_threads=1))
    assert sess.get_session_options().intra_op_num_threads == 1
    np.testing.assert_allclose(sess.run(None, FEED)[0], InferenceSession(RESNET).run(None, FEED)[0], rtol=1e-5,
                               atol=1e-6)
    with pytest.raises(OptionError, match="disagree"):
        InferenceSession(RESNET, options(intra_op_num_threads=1), num_threads=2)
    with pytest.raises(OptionError, match="num_threads must be an int >= 1"):
        InferenceSession(RESNET, num_threads=0)


def test_model_metadata_is_onnxruntimes():
    model = onnx.load(RESNET)
    model.producer_name, model.model_version, model.doc_string = "exporter", 7, "a block"
    onnx.helper.set_model_props(model, {"author": "us"})
    meta = InferenceSession(model.SerializeToString()).get_modelmeta()
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).get_modelmeta()
    assert (meta.producer_name, meta.graph_name, meta.description, meta.version, meta.custom_metadata_map) == \
        (want.producer_name, want.graph_name, want.description, want.version, want.custom_metadata_map)
    assert InferenceSession(str(EXAMPLES / "mlp.json")).get_modelmeta().graph_name == ""


def test_a_missing_file_is_file_not_found_and_a_folder_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model file") as caught:
        InferenceSession(str(tmp_path / "missing.onnx"))
    assert isinstance(caught.value, GraphError)
    with pytest.raises(GraphError, match="is a folder, not a model file"):
        InferenceSession(tmp_path)
    with pytest.raises(FileNotFoundError):
        InferenceSession(str(tmp_path / "missing.json"))


def test_a_loaded_session_takes_options_but_keeps_its_optimization_level(tmp_path):
    path = tmp_path / "block.tfm"
    InferenceSession(RESNET, options(graph_optimization_level=GraphOptimizationLevel.ORT_ENABLE_BASIC)).save(path)
    loaded = load_compiled(path, options(intra_op_num_threads=1, enable_profiling=True,
                                         profile_file_prefix=str(tmp_path / "p")))
    loaded.run(None, FEED)
    assert os.path.exists(loaded.end_profiling())
    assert loaded.get_modelmeta().graph_name == "resnet_block"
    with pytest.raises(OptionError, match="was compiled at ORT_ENABLE_BASIC"):
        load_compiled(path, options(graph_optimization_level=GraphOptimizationLevel.ORT_ENABLE_ALL))


def test_end_profiling_of_a_session_that_does_not_profile_is_empty():
    assert InferenceSession(RESNET).end_profiling() == ""
