"""``autotune profile MODEL``: the slowest partitions as a table, named by their ONNX nodes, the
trace kept with -o; bad models, options and outputs are one line and exit 2. Also ``autotune
graph`` names ops by their ONNX nodes and draws no empty partition, and ``autotune --version``."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tilefuse  # noqa: E402
from tilefuse.autotune.cli_io import EXIT_BAD_INPUT, EXIT_OK  # noqa: E402
from tilefuse.graph_api import machine  # noqa: E402
from test_cli import run  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def dense_onnx(path, batch=4):
    """/layer0/MatMul, /layer0/Add, /layer0/Relu, then /head/MatMul on x[batch, 16]."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype("float32"), n)
             for n, s in [("w", (16, 16)), ("b", (16,)), ("v", (16, 4))]]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="/layer0/MatMul"),
             helper.make_node("Add", ["m", "b"], ["a"], name="/layer0/Add"),
             helper.make_node("Relu", ["a"], ["r"], name="/layer0/Relu"),
             helper.make_node("MatMul", ["r", "v"], ["y"], name="/head/MatMul")]
    graph = helper.make_graph(nodes, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.fixture(autouse=True)
def known_peaks(monkeypatch):
    monkeypatch.setattr(machine, "_peaks", {n: (100.0, 10.0) for n in range(1, 1025)})


def test_profile_prints_the_slowest_partitions_by_their_onnx_nodes_and_keeps_the_trace(tmp_path):
    model, trace = dense_onnx(tmp_path / "dense.onnx"), tmp_path / "trace.json"
    code, out, err = run(["profile", model, "--runs", 4, "-o", trace])
    assert code == EXIT_OK, err
    lines = out.splitlines()
    assert lines[0].startswith(f"{model} (x 4x16): 4 run(s), median ") and "peaks 100.0 GFLOPS (FMA), 10.0 GB/s" \
        in lines[0]
    assert lines[1].split() == ["#", "partition", "ops", "output", "median", "us", "time", "GFLOPS", "GB/s", "share",
                                "of", "peak"]
    rows = [line.split() for line in lines[3:5]]
    assert sorted(r[1] for r in rows) == ["/head/MatMul", "/layer0/MatMul+2"]
    assert {r[2] for r in rows} == {"MatMul", "MatMul+Add+ReLU"}
    events = json.loads(trace.read_text())
    assert lines[-1] == f"trace: {trace} ({len(events)} events)"
    assert sum(e["cat"] == "Node" for e in events) == 4 * 2 and all(e["ph"] == "X" for e in events)


def test_profile_top_limits_the_table(tmp_path):
    code, out, _ = run(["profile", dense_onnx(tmp_path / "dense.onnx"), "--runs", 2, "--top", 1])
    assert code == EXIT_OK and len(out.splitlines()) == 4 and "trace:" not in out


def test_profile_binds_a_symbolic_batch_with_batch_or_shape(tmp_path):
    model = dense_onnx(tmp_path / "dense.onnx", batch="batch")
    for flags, shape in ((["--batch", "3"], "3x16"), (["--shape", "x=5x16"], "5x16"), (["--shape", "2x16"], "2x16")):
        code, out, err = run(["profile", model, "--runs", 1, *flags])
        assert code == EXIT_OK, err
        assert out.splitlines()[0].startswith(f"{model} (x {shape}): 1 run(s)")


def symbolic_onnx(path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("argv, message", [
    (["profile", "{dir}/missing.onnx"], "no model file"),
    (["profile", "{dir}"], "is a folder, not a model file"),
    (["profile", "{dir}/junk.onnx"], "not a usable model"),
    (["profile", "{dir}/symbolic.onnx"], "input 'x' has a symbolic dim 0 ('batch'; shape batchx3): give its shape "
                                         "with --shape x=Nx3 (or --batch N)"),
    (["profile", "{dir}/symbolic.onnx", "--shape", "x=2x4"], "dim 1 of input 'x' is 3 in the model"),
    (["profile", "{dir}/dense.onnx", "-o", "{dir}/no/trace.json"], "no folder"),
    (["profile", "{dir}/dense.onnx", "-o", "{dir}"], "a folder, not a file name"),
    (["profile", "{dir}/dense.onnx", "--db", "{dir}/none.db"], "no tuning database there"),
    (["profile", "{dir}/dense.onnx", "--runs", "0"], "must be at least 1"),
])
def test_profile_bad_input_is_one_line_and_exit_2(tmp_path, argv, message):
    dense_onnx(tmp_path / "dense.onnx")
    symbolic_onnx(tmp_path / "symbolic.onnx")
    (tmp_path / "junk.onnx").write_text("not a model")
    code, out, err = run([a.format(dir=tmp_path) for a in argv])
    assert code == EXIT_BAD_INPUT and message in err and not out
    lines = err.strip().splitlines()
    assert lines[0].startswith("autotune: error: ") and "Traceback" not in err
    assert len(lines) == 1 or lines[1].startswith("usage: ")         # argparse's errors show the usage


def test_graph_names_ops_by_their_onnx_nodes_and_draws_no_empty_partition(tmp_path):
    out = tmp_path / "g.dot"
    code, stdout, err = run(["graph", dense_onnx(tmp_path / "dense.onnx"), "-o", out])
    assert code == EXIT_OK, err
    text = out.read_text()
    for name in ("/layer0/MatMul", "/layer0/Add", "/layer0/Relu", "/head/MatMul"):
        assert f"\\n{name}\"" in text
    assert "MatMul_1" not in text
    clusters = text.count("subgraph cluster_")
    assert clusters == 2 and stdout.endswith(f"{clusters} partition(s) of {tmp_path / 'dense.onnx'}\n")
    for block in text.split("subgraph cluster_")[1:]:
        assert " [label=" in block.split("}")[0]            # every cluster holds an op


def test_version_is_the_packages():
    done = subprocess.run([sys.executable, "-m", "tilefuse.autotune", "--version"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == f"autotune (tilefuse {tilefuse.__version__})"
