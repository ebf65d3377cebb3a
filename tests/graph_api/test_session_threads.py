"""One session run from several threads at once, over shapes it must compile as it goes (a
symbolic batch and height, one compiled shape kept): every run gives onnxruntime's result and
none hangs. Compiles never fork worker processes while other threads run (a fork copies only the
calling thread, and a lock another one held stays held in the child)."""
import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tilefuse.graph_api import InferenceSession, build  # noqa: E402
from tilefuse.graph_api.build import kernel_job  # noqa: E402
from tilefuse.graph_api.pipeline import partition  # noqa: E402
from graph_building import mlp  # noqa: E402

SHAPES = [(1, 4, 7, 9), (2, 4, 7, 9), (1, 4, 5, 9), (3, 4, 6, 9), (2, 4, 8, 9), (1, 4, 9, 9)]


def conv_model():
    """x[n, 4, h, 9] -> Conv 3x3 (pads 1) + bias -> Relu -> transposed to [n, h, 9, 3]."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((3, 4, 3, 3)).astype("float32"), "w")
    b = numpy_helper.from_array(rng.standard_normal(3).astype("float32"), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 3, 1])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, "h", 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "h", 9, 3])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_threads_running_new_shapes_on_one_session_get_onnxruntime_results():
    model = conv_model()
    session = InferenceSession(model, max_compiled_shapes=1)
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {s: np.random.default_rng(sum(s)).standard_normal(s).astype("float32") for s in SHAPES}
    wanted = {s: reference.run(None, {"x": x})[0] for s, x in feeds.items()}
    failures = []

    def runs(k):
        try:
            for i in range(len(SHAPES)):
                shape = SHAPES[(k + i) % len(SHAPES)]
                (got,) = session.run(None, {"x": feeds[shape]})
                if got.shape != wanted[shape].shape or not np.allclose(got, wanted[shape], rtol=1e-4, atol=1e-4):
                    failures.append(f"thread {k}, shape {shape}: wrong result")
        except Exception as err:        # noqa: BLE001 - reported below with the thread that met it
            failures.append(f"thread {k}: {type(err).__name__}: {err}")

    threads = [threading.Thread(target=runs, args=(k,), daemon=True) for k in range(4)]   # a hang fails, not blocks
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not [t for t in threads if t.is_alive()], "a run never returned"
    assert failures == []


def test_compiles_build_in_this_process_while_other_threads_run(monkeypatch):
    jobs = [kernel_job(p, []) for p in partition(mlp(batch=3, sizes=(9, 11, 5)).finalize()).partitions
            if p.is_supported()]
    build.clear_memory_cache()

    def no_fork(*args, **kwargs):
        raise AssertionError("forked worker processes while another thread ran")
    monkeypatch.setattr(build.concurrent.futures, "ProcessPoolExecutor", no_fork)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        built = build.build_all(jobs, workers=2)
    finally:
        stop.set()
        other.join()
    assert len(built) == len(jobs) and all(b.kernel is not None for b in built)


def test_a_second_sessions_thread_count_leaves_the_firsts_alone():
    """In a fresh process (no pool worker yet): a session of 1 thread runs after a session of 2
    was made, and no worker thread starts; the session of 2 then starts one. (Before sessions
    had counts of their own, the second session's count was the process's, and the first
    session's run started a worker.)"""
    import subprocess
    import sys
    from pathlib import Path
    code = """if True:
        import numpy as np
        from tilefuse.graph_api import InferenceSession, SessionOptions
        from tilefuse.tensorir.runtime import threadpool
        def options(n):
            made = SessionOptions(); made.intra_op_num_threads = n; return made
        one = InferenceSession("examples/resnet_block.onnx", options(1))
        two = InferenceSession("examples/resnet_block.onnx", options(2))
        x = {"input": np.ones((1, 16, 32, 32), "float32")}
        one.run(None, x)
        print(threadpool._pool_num_workers(), end=" ")
        two.run(None, x)
        print(threadpool._pool_num_workers())
    """
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "TILEFUSE_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "1"]
