"""``--shape`` and ``--batch`` (``cli_shapes``): the shapes a command compiles an exported
model with a symbolic batch for, and the one-line refusals of shapes that do not fit."""
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

from tilefuse.autotune.cli_io import EXIT_BAD_INPUT, EXIT_OK, BadInput
from tilefuse.autotune.cli_shapes import ShapeRequest, parse_shape
from tilefuse.autotune.database import Database

from test_cli import run


def symbolic_model(path, dims=("batch", 16), second=None):
    """x[dims] @ w(16x8) -> relu -> y; ``second``: the dims of a second input added to y's rows."""
    rng = np.random.default_rng(0)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    if second is not None:
        inputs.append(helper.make_tensor_value_info("bias", TensorProto.FLOAT, list(second)))
        nodes[-1] = helper.make_node("Relu", ["h"], ["r"])
        nodes.append(helper.make_node("Add", ["r", "bias"], ["y"]))
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_shape_values_parse_or_name_the_mistake():
    assert parse_shape("x=1x3x224x224") == ("x", (1, 3, 224, 224))
    assert parse_shape("2x16") == (None, (2, 16)) and parse_shape("ids=7") == ("ids", (7,))
    for bad in ("x=1x0", "x=", "=2x3", "x=1,3", "x=1.5x2", "x=-1x2", "x=batchx2", ""):
        with pytest.raises(BadInput, match="whole numbers of at least 1 joined by x"):
            parse_shape(bad)


def test_bind_applies_shape_and_batch_to_the_declared_inputs(tmp_path):
    model = onnx.load(symbolic_model(tmp_path / "m.onnx", second=("batch", 8)))
    assert ShapeRequest(batch=3).bind(model, "m") == {"x": (3, 16), "bias": (3, 8)}
    assert ShapeRequest(("x=2x16",), batch=2).bind(model, "m") == {"x": (2, 16), "bias": (2, 8)}
    assert ShapeRequest(("x=2x16", "bias=2x8")).bind(model, "m") == {"x": (2, 16), "bias": (2, 8)}
    static = onnx.load(symbolic_model(tmp_path / "s.onnx", dims=(4, 16)))
    assert ShapeRequest().bind(static, "s") == {"x": (4, 16)} == ShapeRequest(("4x16",)).bind(static, "s")


@pytest.mark.parametrize("options, message", [
    (["--shape", "y=2x16"], "--shape y=2x16: the model has no input 'y' (its inputs: x, bias)"),
    (["--shape", "2x16"], "the model has 2 inputs (x, bias); name the input, as in --shape x=2x16"),
    (["--shape", "x=2x16x1", "--batch", "2"], "input 'x' has 2 dims (batchx16), not 3"),
    (["--shape", "x=2x15", "--batch", "2"], "dim 1 of input 'x' is 16 in the model"),
    (["--shape", "x=2x16", "--shape", "x=3x16"], "input 'x' has a --shape already"),
    (["--shape", "x=2x16"], "input 'bias' has a symbolic dim 0 ('batch'; shape batchx8): give its shape with "
                            "--shape bias=Nx8 (or --batch N)"),
    ([], "input 'x' has a symbolic dim 0 ('batch'; shape batchx16): give its shape with --shape x=Nx16"),
    (["--batch", "2", "--shape", "x=3x16"], "--batch 2 and --shape x=3x16 disagree on the first dim of input 'x'"),
    (["--batch", "0"], "expected a whole number of at least 1, got '0'"),
    (["--batch", "two"], "expected a whole number of at least 1, got 'two'"),
    (["--shape", "x=2xa"], "the dims must be whole numbers"),
])
@pytest.mark.parametrize("command", ["tune", "bench", "best", "graph"])
def test_shapes_that_do_not_fit_are_one_line_and_exit_2(tmp_path, command, options, message):
    model = symbolic_model(tmp_path / "m.onnx", second=("batch", 8))
    argv = {"tune": ["tune", model, "--trials", "1"], "bench": ["bench", model, "--db", tmp_path / "t.db"],
            "best": ["best", "--missing", model, "--db", tmp_path / "t.db"],
            "graph": ["graph", model, "-o", tmp_path / "g.dot"]}[command]
    Database(tmp_path / "t.db").close()
    code, out, err = run(argv + options)
    lines = err.splitlines()
    assert code == EXIT_BAD_INPUT and message in lines[0], err
    assert len(lines) == 1 or lines[1].startswith("usage:")     # argparse's refusals: the usage follows


def test_batch_needs_a_symbolic_first_dim_and_json_graphs_take_no_shape(tmp_path):
    static = symbolic_model(tmp_path / "s.onnx", dims=(4, 16))
    code, _, err = run(["graph", static, "-o", tmp_path / "g.dot", "--batch", "2"])
    assert code == EXIT_BAD_INPUT and "--batch 2: no input has a symbolic first dim to bind (inputs: x 4x16)" in err
    code, _, err = run(["graph", static, "-o", tmp_path / "g.dot", "--shape", "x=8x16"])
    assert code == EXIT_BAD_INPUT and "dim 0 of input 'x' is 4 in the model" in err
    from tilefuse.graph_api import load_json
    json_graph = tmp_path / "g.json"
    json_graph.write_text(load_json("examples/mlp.json").to_json())
    code, _, err = run(["graph", json_graph, "-o", tmp_path / "g.dot", "--shape", "1x2"])
    assert code == EXIT_BAD_INPUT and "--shape and --batch apply to ONNX models" in err and err.count("\n") == 1


def test_a_symbolic_batch_model_is_tuned_and_benched_with_shape(tmp_path):
    model = symbolic_model(tmp_path / "m.onnx")
    db, log = tmp_path / "t.db", tmp_path / "t.jsonl"
    code, out, err = run(["tune", model, "--shape", "4x16", "--tuner", "random", "--trials", "3", "--min-repeat-ms",
                          "0", "--db", db, "--log", log, "--json"])
    assert code == EXIT_OK, err
    tasks = json.loads(out)["tasks"]
    assert tasks and tasks[0]["shape"] == [4, 8] and sum(t["trials"] for t in tasks) >= 1
    code, out, err = run(["bench", model, "--batch", "4", "--db", db, "--repeat", "2", "--json"])
    assert code == EXIT_OK, err
    data = json.loads(out)
    assert data["partitions"] >= 1 and data["default_ms"]["median"] > 0
    code, out, _ = run(["best", "--missing", model, "--batch", "4", "--db", db])
    assert code == EXIT_OK and "0 of" in out          # the workloads of batch 4 are the ones tuned
    code, out, _ = run(["best", "--missing", model, "--batch", "5", "--db", db])
    assert code == 1                                  # another batch: other workloads, without records
