"""InferenceSession: onnxruntime's calls by name on the bundled models, symbolic dims bound per
run with an LRU of compiled shapes, clear refusals of bad feeds, and saved sessions that load
in a fresh process without LLVM and refuse damaged files or files for another CPU."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tilefuse.graph_api import GraphError, InferenceSession, load_compiled  # noqa: E402
from tilefuse.graph_api import session as session_module  # noqa: E402
from host_vectors import ABSENT_FEATURE  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
RNG = np.random.default_rng(7)


def dynamic_batch_model(features=13, classes=5):
    """x[batch, features] -> MatMul, Add, Relu -> y, and Softmax -> p; batch is symbolic."""
    w = numpy_helper.from_array(RNG.standard_normal((features, classes)).astype("float32"), "w")
    b = numpy_helper.from_array(RNG.standard_normal(classes).astype("float32"), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"]), helper.make_node("Softmax", ["y"], ["p"], axis=-1)]
    graph = helper.make_graph(nodes, "dynamic", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                               ["batch", features])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", classes]),
                               helper.make_tensor_value_info("p", TensorProto.FLOAT, ["batch", classes])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def ort_session(model):
    data = model if isinstance(model, (str, Path)) else model.SerializeToString()
    return ort.InferenceSession(str(data) if isinstance(data, Path) else data, providers=["CPUExecutionProvider"])


def random_feeds(session):
    return {i.name: RNG.standard_normal([d if isinstance(d, int) else 2 for d in i.shape]).astype("float32")
            for i in session.get_inputs()}


@pytest.mark.parametrize("name", ["resnet_block", "transformer_encoder"])
def test_bundled_models_run_by_name_like_onnxruntime(name):
    path = EXAMPLES / f"{name}.onnx"
    ours, theirs = InferenceSession(str(path)), ort_session(str(path))
    assert [(a.name, a.shape, a.type) for a in ours.get_inputs()] == \
        [(a.name, a.shape, a.type) for a in theirs.get_inputs()]
    assert [a.name for a in ours.get_outputs()] == [a.name for a in theirs.get_outputs()]
    feeds = random_feeds(theirs)
    for got, want in zip(ours.run(None, feeds), theirs.run(None, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    last = ours.get_outputs()[-1].name
    (only,) = ours.run([last], feeds)
    np.testing.assert_allclose(only, theirs.run([last], feeds)[0], rtol=1e-4, atol=1e-4)


def test_a_symbolic_batch_is_bound_per_run_and_compiled_shapes_are_kept():
    model = dynamic_batch_model()
    ours, theirs = InferenceSession(model), ort_session(model)
    assert ours.get_inputs()[0].shape == ["batch", 13] and ours.get_outputs()[1].shape == ["batch", 5]
    assert ours.compiled_shapes == []                       # nothing known to compile for yet
    for batch in (1, 4, 1):
        x = RNG.standard_normal((batch, 13)).astype("float32")
        y, p = ours.run(["y", "p"], {"x": x})
        want_y, want_p = theirs.run(["y", "p"], {"x": x})
        np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(p, want_p, rtol=1e-5, atol=1e-5)
    assert ours.compiled_shapes == [((4, 13),), ((1, 13),)]  # least recently run first


def test_the_lru_keeps_at_most_max_compiled_shapes():
    ours = InferenceSession(dynamic_batch_model(), max_compiled_shapes=2)
    for batch in (1, 2, 3, 2):
        ours.run(None, {"x": np.ones((batch, 13), "float32")})
    assert ours.compiled_shapes == [((3, 13),), ((2, 13),)]
    with pytest.raises(ValueError, match="max_compiled_shapes"):
        InferenceSession(dynamic_batch_model(), max_compiled_shapes=0)


def test_bad_feeds_are_refused_naming_the_input():
    ours = InferenceSession(dynamic_batch_model())
    x = np.ones((2, 13), "float32")
    cases = [({"x": x[:, :4]}, r"input 'x' dim 1 must be 13"),
             ({"x": x[None]}, r"input 'x' must have rank 2"),
             ({"x": x.astype("float64")}, r"input 'x' must be tensor\(float\), got float64"),
             ({"x": x, "z": x}, r"no input named \['z'\]; the inputs are \['x'\]"),
             ({}, r"missing input\(s\) \['x'\]")]
    for feeds, message in cases:
        with pytest.raises(GraphError, match=message):
            ours.run(None, feeds)
    with pytest.raises(GraphError, match=r"no output named \['q'\]"):
        ours.run(["q"], {"x": x})
    with pytest.raises(TypeError, match="takes a dict"):
        ours.run(None, [x])


def test_one_dim_name_bound_to_two_sizes_in_one_run_is_refused():
    nodes = [helper.make_node("Add", ["a", "b"], ["c"])]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n", 3]) for n in "ab"]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs,
                                                [helper.make_tensor_value_info("c", TensorProto.FLOAT, ["n", 3])]),
                              opset_imports=[helper.make_opsetid("", 17)])
    ours = InferenceSession(model)
    with pytest.raises(GraphError, match=r"input 'b' dim 0 \('n'\) is 4, but 'n' is 2 in another input"):
        ours.run(None, {"a": np.ones((2, 3), "float32"), "b": np.ones((4, 3), "float32")})
    (c,) = ours.run(None, {"a": np.ones((4, 3), "float32"), "b": np.ones((4, 3), "float32")})
    np.testing.assert_array_equal(c, np.full((4, 3), 2.0))


def test_a_onednn_json_graph_runs_by_tensor_ids_as_names():
    ours = InferenceSession(str(EXAMPLES / "mlp.json"))
    assert all(a.name.isdigit() and a.type == "tensor(float)" for a in ours.get_inputs())
    from tilefuse.graph_api import compile_graph, load_json
    graph = load_json(str(EXAMPLES / "mlp.json"))
    feeds = {a.name: RNG.standard_normal(a.shape).astype("float32") for a in ours.get_inputs()}
    want = compile_graph(graph).run({int(name): value for name, value in feeds.items()})
    got = ours.run(None, feeds)
    assert [o.name for o in ours.get_outputs()] == [str(tid) for tid in want]
    for g, w in zip(got, want.values()):
        np.testing.assert_array_equal(g, w)


RUN_WITHOUT_LLVM = textwrap.dedent("""
    import sys, numpy as np
    from tilefuse.graph_api import InferenceSession, load_compiled
    session = load_compiled(sys.argv[1]) if sys.argv[1].endswith(".tfm") else InferenceSession(sys.argv[1])
    feeds = dict(np.load(sys.argv[2]))
    for k, y in enumerate(session.run(None, feeds)):
        np.save(f"{sys.argv[3]}{k}.npy", y)
    loaded = sorted(m for m in sys.modules if m.startswith("llvmlite.binding."))   # ffi maps the library
    assert not loaded, f"a process that only runs kernels loaded {loaded}"
""")


@pytest.mark.parametrize("start", ["load_compiled", "warm disk cache", "cold"])
def test_kernels_run_in_a_fresh_process_that_never_maps_llvm(tmp_path, start):
    # LLVM's library costs a process 40 MB: a saved session, or a model whose kernels the disk
    # cache holds, loads and runs them with the object loader and never maps LLVM (the
    # runtime's own code and the host's description were recorded by the first process); a
    # cold process on an empty cache builds its kernels in forked workers and the runtime's
    # code and the host's description in a forked child, so it does not map LLVM either
    path = EXAMPLES / "resnet_block.onnx"
    feeds = random_feeds(ort_session(str(path)))
    np.savez(tmp_path / "feeds.npz", **feeds)
    env = {**os.environ, "TILEFUSE_CACHE_DIR": str(tmp_path / "cache")}
    first = textwrap.dedent(f"""
        import numpy as np
        from tilefuse.graph_api import InferenceSession
        from tilefuse.tensorir.runtime import cache_lines
        cache_lines.flushes_here() and cache_lines._compiled()
        session = InferenceSession({str(path)!r})
        for k, y in enumerate(session.run(None, dict(np.load({str(tmp_path / "feeds.npz")!r})))):
            np.save({str(tmp_path)!r} + f"/want{{k}}.npy", y)
        session.save({str(tmp_path / "model.tfm")!r})
    """)
    if start == "cold":
        for k, y in enumerate(InferenceSession(str(path)).run(None, feeds)):
            np.save(tmp_path / f"want{k}.npy", y)
    else:
        subprocess.run([sys.executable, "-c", first], check=True, cwd=REPO, env=env, timeout=300)
    model = tmp_path / "model.tfm" if start == "load_compiled" else path
    done = subprocess.run([sys.executable, "-c", RUN_WITHOUT_LLVM, model, tmp_path / "feeds.npz", tmp_path / "out"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    wanted = sorted(tmp_path.glob("want*.npy"))
    assert wanted
    for k in range(len(wanted)):
        np.testing.assert_array_equal(np.load(tmp_path / f"out{k}.npy"), np.load(tmp_path / f"want{k}.npy"))


def test_a_saved_dynamic_session_keeps_its_shapes_and_compiles_new_ones(tmp_path):
    session = InferenceSession(dynamic_batch_model())
    x1, x3 = np.ones((1, 13), "float32"), np.ones((3, 13), "float32")
    want1, want3 = session.run(None, {"x": x1}), session.run(None, {"x": x3})
    session.save(tmp_path / "dynamic.tfm")
    again = load_compiled(tmp_path / "dynamic.tfm")
    assert again.compiled_shapes == [((1, 13),), ((3, 13),)] and again.get_inputs()[0].shape == ["batch", 13]
    for x, want in ((x1, want1), (x3, want3)):
        for got, w in zip(again.run(None, {"x": x}), want):
            np.testing.assert_array_equal(got, w)
    assert again.run(["y"], {"x": np.ones((5, 13), "float32")})[0].shape == (5, 5)   # from the model it kept


def test_a_saved_static_session_has_only_its_shape(tmp_path):
    session = InferenceSession(str(EXAMPLES / "resnet_block.onnx"))
    session.save(tmp_path / "static.tfm")
    again = load_compiled(tmp_path / "static.tfm")
    (x,) = again.get_inputs()
    with pytest.raises(GraphError, match="must be 1"):
        again.run(None, {x.name: np.ones([2] + x.shape[1:], "float32")})


def test_damaged_files_and_files_for_another_cpu_are_refused(tmp_path, monkeypatch):
    session = InferenceSession(dynamic_batch_model())
    session.run(None, {"x": np.ones((2, 13), "float32")})
    path = tmp_path / "model.tfm"
    session.save(path)
    data = path.read_bytes()
    cases = {"truncated": (data[: len(data) // 2], "checksum mismatch"),
             "altered": (data[:200] + bytes([data[200] ^ 1]) + data[201:], "checksum mismatch"),
             "short": (data[:20], "truncated"),
             "not ours": (b"PK\x03\x04 a zip file", "not a saved tilefuse session"),
             "newer": (data[:len(session_module.SAVE_MAGIC)] + bytes([9]) + data[len(session_module.SAVE_MAGIC) + 1:],
                       "saved tilefuse session format version 9; this tilefuse reads version 2")}
    for name, (content, message) in cases.items():
        bad = tmp_path / f"{name.replace(' ', '_')}.tfm"
        bad.write_bytes(content)
        with pytest.raises(GraphError, match=f"{bad}.*{message}|{message}"):
            load_compiled(bad)
    with pytest.raises(GraphError, match="cannot read saved session"):
        load_compiled(tmp_path / "missing.tfm")


@pytest.mark.skipif(ABSENT_FEATURE is None, reason="this host has every feature LLVM knows")
def test_a_session_for_features_this_host_lacks_is_saved_here_and_refused_here(tmp_path):
    target = f"llvm -mattr=+{ABSENT_FEATURE}"
    session = InferenceSession(dynamic_batch_model(), target=target)
    with pytest.raises(GraphError, match=f"cannot run here: .*lacks: {ABSENT_FEATURE}"):
        session.run(None, {"x": np.ones((2, 13), "float32")})        # compiled, never run
    session.save(tmp_path / "model.tfm")
    with pytest.raises(GraphError, match=f"model.tfm cannot run here: .*lacks: {ABSENT_FEATURE}"):
        load_compiled(tmp_path / "model.tfm")


def test_a_broadcast_feed_over_the_size_limit_is_refused_before_any_copy(monkeypatch):
    monkeypatch.setenv("TILEFUSE_MAX_TENSOR_BYTES", str(1 << 30))
    session = InferenceSession(dynamic_batch_model())
    huge = np.broadcast_to(np.ones((1, 13), "float32"), (10 ** 8, 13))     # 5.2 GB of view over 52 bytes
    with pytest.raises(GraphError, match=r"input 'x' of shape \(100000000, 13\) needs 4\.8 GiB, over the limit"):
        session.run(None, {"x": huge})
    (y, p) = session.run(None, {"x": np.broadcast_to(np.ones((1, 13), "float32"), (3, 13))})    # small: fine
    assert y.shape == p.shape == (3, 5)


def test_a_feed_in_any_memory_order_gives_the_same_outputs():
    session = InferenceSession(dynamic_batch_model())
    x = np.random.default_rng(3).standard_normal((4, 13)).astype("float32")
    want = session.run(None, {"x": x})
    wide = np.zeros((4, 26), "float32")
    wide[:, 1::2] = x
    for fed in (np.asfortranarray(x), wide[:, 1::2]):
        got = session.run(None, {"x": fed})
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
    with pytest.raises(GraphError, match=r"input 'x' must be tensor\(float\), got float64"):
        session.run(None, {"x": np.asfortranarray(x, "float64")})


def _paddle_style_model():
    """Input dims as paddle2onnx writes them (PaddleOCR): -1 for the batch, '?' for both H and W."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, "?", "?"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 3, "?", "?"])
    scale = numpy_helper.from_array(np.array([0.5, 1.5, -2.0], "float32").reshape(1, 3, 1, 1), "scale")
    graph = helper.make_graph([helper.make_node("Mul", ["x", "scale"], ["y"])], "paddle", [x], [y], [scale])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("given", ["proto", "bytes"])
def test_a_dim_of_minus_one_and_dims_named_question_mark_are_unknown_as_onnxruntime_reads_them(given):
    model = _paddle_style_model()
    before = model.SerializeToString()
    ours = InferenceSession(model if given == "proto" else before)
    theirs = ort_session(model)
    assert [i.shape for i in ours.get_inputs()] == [i.shape for i in theirs.get_inputs()] == [[None, 3, "?", "?"]]
    x = RNG.standard_normal((2, 3, 48, 192)).astype("float32")       # H and W differ: '?' is no one symbol
    np.testing.assert_allclose(ours.run(None, {"x": x})[0], theirs.run(None, {"x": x})[0], rtol=1e-6)
    assert model.SerializeToString() == before                        # the caller's proto is not touched
    with pytest.raises(GraphError, match="dim 1 must be 3"):
        ours.run(None, {"x": np.ones((1, 4, 5, 5), "float32")})
