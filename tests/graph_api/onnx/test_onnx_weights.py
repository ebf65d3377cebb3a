import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tilefuse.graph_api import GraphError, InferenceSession  # noqa: E402
from tilefuse.graph_api.onnx.importer import import_onnx, load_model  # noqa: E402
from tilefuse.graph_api.onnx.weights import MalformedModel, ModelWeights, split_weights  # noqa: E402

RNG = np.random.default_rng(7)
WEIGHTS = {
    "w32": RNG.standard_normal((96, 80)).astype(np.float32),
    "w16": RNG.standard_normal((70, 70)).astype(np.float16),
    "i64": RNG.integers(-9, 9, (5000,)).astype(np.int64),
    "i8": RNG.integers(-100, 100, (64, 65)).astype(np.int8),
    "small": RNG.standard_normal((80,)).astype(np.float32),
}


def _model(weights=WEIGHTS, batch="batch"):
    """y = (x @ w32 + small), the other weights summed in, plus a big Constant node left alone."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 96])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 80])
    constant = numpy_helper.from_array(np.full((50, 100), 0.5, np.float32), "c")
    nodes = [helper.make_node("MatMul", ["x", "w32"], ["h"]), helper.make_node("Add", ["h", "small"], ["a"]),
             helper.make_node("Constant", [], ["big_constant"], value=constant),
             helper.make_node("ReduceSum", ["big_constant"], ["s"], keepdims=0),
             helper.make_node("Add", ["a", "s"], ["y"])]
    inits = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    return helper.make_model(helper.make_graph(nodes, "weights", [x], [y], inits),
                             opset_imports=[helper.make_opsetid("", 17)])


def test_the_split_keeps_every_field_but_the_large_raw_data_and_reads_each_weight_back_exactly():
    data = _model().SerializeToString()
    small, stored = split_weights(data)
    assert sorted(stored) == ["i64", "i8", "w16", "w32"]          # "small" (80 elements) stays in the proto
    proto = onnx.load_from_string(small)
    assert len(small) < 25_000 < len(data)          # the Constant node keeps its 20 KB tensor
    assert [n.op_type for n in proto.graph.node] == [n.op_type for n in _model().graph.node]
    weights = ModelWeights(data, stored)
    for tensor in proto.graph.initializer:
        assert (tensor.raw_data == b"") == (tensor.name in stored)
        if tensor.name in stored:
            got = weights.array(tensor.name)
            assert got.dtype == WEIGHTS[tensor.name].dtype and got.ctypes.data % 64 == 0
            np.testing.assert_array_equal(got, WEIGHTS[tensor.name])
    weights.fill(proto)
    assert proto.SerializeToString() == data                  # nothing else was changed


def test_a_model_file_imports_as_onnx_reads_it_and_runs_as_onnxruntime_does(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    x = RNG.standard_normal((3, 96)).astype(np.float32)
    ort = pytest.importorskip("onnxruntime")
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = InferenceSession(str(path)).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("cut", [5, 100, -3])
def test_malformed_bytes_are_a_graph_error_naming_the_model(tmp_path, cut):
    data = _model().SerializeToString()
    bad = data[:cut] if cut > 0 else data[:cut]
    with pytest.raises(MalformedModel):
        split_weights(data[:-3])
    path = tmp_path / "bad.onnx"
    path.write_bytes(bad)
    for source in (bad, str(path)):
        with pytest.raises(GraphError, match="is not a readable ONNX model"):
            load_model(source)


def test_a_raw_data_of_the_wrong_size_is_refused_when_read():
    model = _model()
    model.graph.initializer[0].raw_data = model.graph.initializer[0].raw_data[:-4]
    with pytest.raises(GraphError, match="initializer 'w32' cannot be read: 30716 bytes of data for dims"):
        import_onnx(model.SerializeToString(), input_shapes={"x": (2, 96)})


def test_a_file_renamed_over_the_model_leaves_a_session_reading_the_old_one(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    session = InferenceSession(str(path))
    x = RNG.standard_normal((2, 96)).astype(np.float32)
    first = session.run(None, {"x": x})[0]
    other = dict(WEIGHTS, w32=np.zeros((96, 80), np.float32))
    onnx.save(_model(other), tmp_path / "new.onnx")
    os.replace(tmp_path / "new.onnx", path)
    again = session.run(None, {"x": np.concatenate([x, x])})[0]      # a new shape: imported again
    np.testing.assert_allclose(again[:2], first, rtol=1e-5, atol=1e-5)


def test_a_file_changed_in_place_under_a_session_is_refused_at_the_next_import(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    session = InferenceSession(str(path))
    session.run(None, {"x": np.ones((1, 96), np.float32)})
    with open(path, "r+b") as f:
        f.seek(-100, os.SEEK_END)
        f.write(b"\0" * 10)
    os.utime(path, ns=(1, 1))
    with pytest.raises(GraphError, match="was changed in place since it was opened"):
        session.run(None, {"x": np.ones((2, 96), np.float32)})


@pytest.mark.parametrize("source", ["file", "bytes"])
def test_weights_read_ahead_are_the_weights_and_no_thread_outlives_the_reading(tmp_path, source):
    data = _model().SerializeToString()
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    stored = split_weights(data)[1]
    weights = ModelWeights(open(path, "rb"), stored, str(path)) if source == "file" else ModelWeights(data, stored)
    before = threading.active_count()
    with weights.reading_ahead():
        got = {name: weights.array(name) for name in stored}
    assert threading.active_count() == before
    for name, array in got.items():
        assert array.ctypes.data % 64 == 0 and array.flags.writeable
        np.testing.assert_array_equal(array, WEIGHTS[name])
    assert weights.array("w32") is not got["w32"]        # read again, outside: an array of its own
    weights.close()


def test_a_file_changed_in_place_before_its_weights_are_read_ahead_is_refused_with_no_thread_left(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    loaded = load_model(str(path))
    with open(path, "r+b") as f:
        f.seek(-100, os.SEEK_END)
        f.write(b"\0" * 10)
    os.utime(path, ns=(1, 1))
    before = threading.active_count()
    with pytest.raises(GraphError, match="was changed in place since it was opened"):
        import_onnx(loaded, input_shapes={"x": (2, 96)})
    assert threading.active_count() == before
    loaded.weights.close()


def test_an_import_that_fails_leaves_no_reading_thread_so_a_cold_compile_may_fork_its_workers(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    before = threading.active_count()
    with pytest.raises(GraphError, match="dynamic dim"):
        import_onnx(str(path))                      # refused after the weights began to be read
    assert threading.active_count() == before
    import_onnx(str(path), input_shapes={"x": (2, 96)})
    assert threading.active_count() == before


PEAK = textwrap.dedent("""
    import sys, numpy as np
    def peak():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) * 1024
    from tilefuse.graph_api import InferenceSession
    x = np.ones((1, 1024), np.float32)
    InferenceSession(sys.argv[1]).run(None, {"x": x})      # compiles everything that costs memory once
    before = peak()
    InferenceSession(sys.argv[2]).run(None, {"x": x})
    print(peak() - before)
""")


def test_importing_a_model_holds_its_weights_about_twice_at_most(tmp_path):
    def model(n):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])
        names = [f"w{k}" for k in range(n)]
        nodes = [helper.make_node("MatMul", ["x" if k == 0 else f"h{k - 1}", w], [f"h{k}" if k < n - 1 else "y"])
                 for k, w in enumerate(names)]
        inits = [numpy_helper.from_array(RNG.standard_normal((1024, 1024)).astype(np.float32) / 32, w)
                 for w in names]
        return helper.make_model(helper.make_graph(nodes, "deep", [x], [y], inits),
                                 opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model(1), tmp_path / "one.onnx")
    onnx.save(model(48), tmp_path / "big.onnx")         # 192 MiB of weights
    done = subprocess.run([sys.executable, "-c", PEAK, tmp_path / "one.onnx", tmp_path / "big.onnx"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    grown = int(done.stdout.split()[-1])
    assert grown < 2.3 * 48 * 4 * 2 ** 20, f"peak grew {grown / 2 ** 20:.0f} MiB for 192 MiB of weights"
