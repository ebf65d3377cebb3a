"""The profiler: a session with enable_profiling writes onnxruntime's Chrome-trace format, one
event per partition run carrying the ONNX node names it covers, its shapes, its time and what
that makes of the machine's peaks; the FLOP estimates are those of the ops."""
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tilefuse.graph_api import DataType, InferenceSession, LogicalTensor, Op, OpKind, SessionOptions  # noqa: E402
from tilefuse.graph_api import machine  # noqa: E402
from tilefuse.graph_api.profiler import Profiler, op_flop, top_partitions  # noqa: E402

PEAKS = (100.0, 10.0)


def dense_model(batch=4, width=32, depth=2):
    """Dense layers /layer{k}/MatMul, /Add, /Relu on x[batch, width]."""
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for k in range(depth):
        inits += [numpy_helper.from_array(rng.standard_normal((width, width)).astype("float32"), f"w{k}"),
                  numpy_helper.from_array(rng.standard_normal(width).astype("float32"), f"b{k}")]
        nodes += [helper.make_node("MatMul", [prev, f"w{k}"], [f"m{k}"], name=f"/layer{k}/MatMul"),
                  helper.make_node("Add", [f"m{k}", f"b{k}"], [f"a{k}"], name=f"/layer{k}/Add"),
                  helper.make_node("Relu", [f"a{k}"], [f"y{k}"], name=f"/layer{k}/Relu")]
        prev = f"y{k}"
    graph = helper.make_graph(nodes, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [batch, width])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def known_peaks(monkeypatch):
    """The peaks the shares are of, given (no measurement in the tests)."""
    monkeypatch.setattr(machine, "_peaks", {n: PEAKS for n in range(1, 1025)})


def profiled(tmp_path, model, runs: int):
    options = SessionOptions()
    options.enable_profiling, options.profile_file_prefix = True, str(tmp_path / "dense")
    sess = InferenceSession(model, options)
    x = np.ones((4, 32), "float32")
    for _ in range(runs):
        sess.run(None, {"x": x})
    path = sess.end_profiling()
    assert path.startswith(str(tmp_path / "dense_")) and path.endswith(".json")
    assert sess.end_profiling() == ""           # profiling has ended
    with open(path) as f:
        return json.load(f), sess


def test_the_trace_is_onnxruntimes_format_with_one_event_per_partition_run(tmp_path, known_peaks):
    events, sess = profiled(tmp_path, dense_model(), runs=3)
    assert isinstance(events, list)
    for e in events:
        assert set(e) == {"cat", "name", "ph", "ts", "dur", "pid", "tid", "args"} and e["ph"] == "X"
        assert isinstance(e["ts"], int) and isinstance(e["dur"], int) and e["dur"] >= 0
    names = [(e["cat"], e["name"]) for e in events]
    assert names[:2] == [("Session", "compile"), ("Session", "session_initialization")]
    assert events[0]["args"] == {"input_shapes": [[4, 32]], "level": "ORT_ENABLE_ALL"}
    assert names.count(("Session", "model_run")) == 3
    nodes = [e for e in events if e["cat"] == "Node"]
    assert len(nodes) == 3 * 2                  # two partitions, each a MatMul with its Add and Relu
    first = nodes[0]["args"]
    assert first["nodes"] == ["/layer0/MatMul", "/layer0/Add", "/layer0/Relu"]
    assert nodes[0]["name"] == "/layer0/MatMul+2" and nodes[1]["args"]["nodes"][0] == "/layer1/MatMul"
    assert first["op_name"] == "MatMul+Add+ReLU" and first["runs"] == "kernel"
    assert first["input_type_shape"][0] == {"float": [4, 32]} and first["output_type_shape"] == [{"float": [4, 32]}]
    assert first["flop"] == 2 * 4 * 32 * 32 + 2 * 4 * 32
    assert first["bytes"] == 4 * (4 * 32 + 32 * 32 + 32 + 4 * 32)
    run = next(e for e in events if e["name"] == "model_run")
    assert (run["args"]["peak_gflops"], run["args"]["peak_gbs"]) == PEAKS
    for e in nodes:             # the rates and shares are of the event's own time (dur is rounded to a us)
        a, slowest, fastest = e["args"], (e["dur"] + 0.5) / 1e6, max(e["dur"] - 0.5, 1e-3) / 1e6
        assert a["flop"] / slowest / 1e9 - 1e-3 <= a["gflops"] <= a["flop"] / fastest / 1e9 + 1e-3
        assert a["fma_share"] == pytest.approx(a["gflops"] / PEAKS[0], rel=1e-2, abs=1e-4)
        assert a["bandwidth_share"] == pytest.approx(a["gbs"] / PEAKS[1], rel=1e-2, abs=1e-4)
        assert a["bound"] == ("fma" if a["flop"] / a["bytes"] >= PEAKS[0] / PEAKS[1] else "memory")
    runs = [e for e in events if e["name"] == "model_run"]
    for run, (a, b) in zip(runs, zip(nodes[::2], nodes[1::2])):       # a run's steps lie within it
        assert run["ts"] <= a["ts"] <= b["ts"] <= run["ts"] + run["dur"]


def test_run_options_logid_tags_the_run(tmp_path, known_peaks):
    from tilefuse.graph_api import RunOptions
    options = SessionOptions()
    options.enable_profiling, options.profile_file_prefix = True, str(tmp_path / "p")
    sess = InferenceSession(dense_model(), options)
    tagged = RunOptions()
    tagged.logid = "request 9"
    sess.run(None, {"x": np.ones((4, 32), "float32")}, tagged)
    events = json.load(open(sess.end_profiling()))
    assert [e["args"].get("logid") for e in events if e["name"] == "model_run"] == ["request 9"]


def test_peaks_are_measured_once_per_thread_count():
    first = machine.peaks(1)
    assert first[0] > 1 and first[1] > 0.1 and machine.peaks(1) is first


@pytest.mark.parametrize("op, flop", [
    (Op(0, OpKind.MatMul, [LogicalTensor(0, DataType.f32, (2, 3, 5)), LogicalTensor(1, DataType.f32, (5, 7))],
        [LogicalTensor(2, DataType.f32, (2, 3, 7))]), 2 * 2 * 3 * 7 * 5),
    (Op(0, OpKind.MatMul, [LogicalTensor(0, DataType.f32, (5, 3)), LogicalTensor(1, DataType.f32, (5, 7))],
        [LogicalTensor(2, DataType.f32, (3, 7))], {"transpose_a": True}), 2 * 3 * 7 * 5),
    (Op(0, OpKind.Convolution, [LogicalTensor(0, DataType.f32, (1, 4, 8, 8)),
                                LogicalTensor(1, DataType.f32, (6, 2, 3, 3))],
        [LogicalTensor(2, DataType.f32, (1, 6, 6, 6))], {"data_format": "NCX", "weights_format": "OIX", "groups": 2}),
     2 * (6 * 6 * 6) * (2 * 3 * 3)),
    (Op(0, OpKind.ScaledDotProductAttention, [LogicalTensor(0, DataType.f32, (2, 3, 5, 8)),
                                              LogicalTensor(1, DataType.f32, (2, 3, 7, 8)),
                                              LogicalTensor(2, DataType.f32, (2, 3, 7, 4))],
        [LogicalTensor(3, DataType.f32, (2, 3, 5, 4))]), 2 * (2 * 3 * 5 * 7) * (8 + 4)),
    (Op(0, OpKind.ScaledDotProductAttention, [LogicalTensor(0, DataType.f32, (2, 5, 3, 8)),     # heads split
                                              LogicalTensor(1, DataType.f32, (2, 7, 3, 8)),     # and merged
                                              LogicalTensor(2, DataType.f32, (2, 7, 3, 4))],    # by orders
        [LogicalTensor(3, DataType.f32, (2, 5, 3, 4))],
        {"query_order": [0, 2, 1, 3], "key_order": [0, 2, 1, 3], "value_order": [0, 2, 1, 3],
         "dst_order": [0, 2, 1, 3]}), 2 * (2 * 3 * 5 * 7) * (8 + 4)),
    (Op(0, OpKind.Add, [LogicalTensor(0, DataType.f32, (4, 8)), LogicalTensor(1, DataType.f32, (8,))],
        [LogicalTensor(2, DataType.f32, (4, 8))]), 32),
    (Op(0, OpKind.ReLU, [LogicalTensor(0, DataType.f32, None)], [LogicalTensor(1, DataType.f32, None)]), 0)])
def test_flop_estimates(op, flop):
    assert op_flop(op) == flop


def test_top_partitions_rank_by_median_and_keep_the_median_runs_numbers():
    events = [{"cat": "Node", "name": n, "dur": d, "args": {"partition": p, "gflops": d}}
              for n, p, d in [("a", 0, 10), ("b", 1, 50), ("a", 0, 1000), ("a", 0, 12), ("b", 1, 40)]]
    rows = top_partitions(events + [{"cat": "Session", "name": "model_run", "dur": 5, "args": {}}], top=5)
    assert [(r["name"], r["runs"], r["median_us"], r["args"]["gflops"]) for r in rows] == \
        [("b", 2, 40, 40), ("a", 3, 12, 12)]
    assert sum(r["time_share"] for r in rows) == pytest.approx(1)
    assert top_partitions(events, top=1)[0]["name"] == "b" and top_partitions([], 3) == []


def test_a_profiler_writes_the_path_it_is_given(tmp_path):
    profiler = Profiler(str(tmp_path / "unused"), peaks=PEAKS)
    profiler.span("Session", "x", profiler.now(), 0.5)
    path = profiler.write(str(tmp_path / "trace.json"))
    assert json.load(open(path))[0]["dur"] == 500000


def test_folded_and_recognised_ops_keep_the_nodes_they_stand_for(tmp_path, known_peaks):
    from pathlib import Path
    options = SessionOptions()
    options.enable_profiling, options.profile_file_prefix = True, str(tmp_path / "block")
    model = Path(__file__).resolve().parents[2] / "examples" / "resnet_block.onnx"
    sess = InferenceSession(str(model), options)
    sess.run(None, {"input": np.ones((1, 16, 32, 32), "float32")})
    nodes = [e["args"]["nodes"] for e in json.load(open(sess.end_profiling())) if e["cat"] == "Node"]
    assert ["conv0_2", "bn0_7", "relu0_8"] in nodes             # the batch norm folded into the weights
    assert ["conv1_10", "bn1_15", "residual_16", "relu1_17"] in nodes
    assert sorted(n for group in nodes for n in group if not n.startswith("(")) == \
        sorted(node.name for node in onnx.load(str(model)).graph.node)      # every node, once


def test_a_layer_norm_written_op_by_op_covers_each_of_its_nodes():
    from tilefuse.graph_api.passes import recognize_norms
    from tilefuse.graph_api import from_onnx
    names = ["/ln/ReduceMean", "/ln/Sub", "/ln/Pow", "/ln/ReduceMean_1", "/ln/Add", "/ln/Sqrt", "/ln/Div"]
    two = numpy_helper.from_array(np.array(2.0, "float32"), "two")
    eps = numpy_helper.from_array(np.array(1e-5, "float32"), "eps")
    axes = numpy_helper.from_array(np.array([-1], "int64"), "axes")
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"], name=names[0]),
             helper.make_node("Sub", ["x", "m"], ["d"], name=names[1]),
             helper.make_node("Pow", ["d", "two"], ["p"], name=names[2]),
             helper.make_node("ReduceMean", ["p", "axes"], ["v"], name=names[3]),
             helper.make_node("Add", ["v", "eps"], ["ve"], name=names[4]),
             helper.make_node("Sqrt", ["ve"], ["s"], name=names[5]),
             helper.make_node("Div", ["d", "s"], ["y"], name=names[6])]
    graph = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], [two, eps, axes])
    g = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    (norm,) = [op for op in recognize_norms(g).ops if op.kind is OpKind.LayerNorm]
    assert set(norm.covers) == set(names)


def test_a_run_that_brings_new_shapes_shows_its_compile(tmp_path, known_peaks):
    model = dense_model()
    for tensor in (model.graph.input[0], model.graph.output[0]):
        tensor.type.tensor_type.shape.dim[0].dim_param = "batch"
    options = SessionOptions()
    options.enable_profiling, options.profile_file_prefix = True, str(tmp_path / "p")
    sess = InferenceSession(model, options)
    for n in (2, 3, 2):
        sess.run(None, {"x": np.ones((n, 32), "float32")})
    events = json.load(open(sess.end_profiling()))
    assert [e["args"]["input_shapes"] for e in events if e["name"] == "compile"] == [[[2, 32]], [[3, 32]]]
    assert [e["args"]["input_type_shape"][0]["float"][0] for e in events if e["cat"] == "Node"] == [2, 2, 3, 3, 2, 2]
