"""The ``autotune`` command on ONNX models: ``tune``, ``bench`` and ``best --missing`` take
the bundled ``examples/*.onnx``; initializers are bound constants (bench feeds only the data
input); corrupt or empty .onnx files exit 2 with a message. ``--trials 4`` with the random
tuner."""
import contextlib
import io
import json
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")
from tilefuse import graph_api  # noqa: E402
from tilefuse.autotune.cli import main  # noqa: E402
from tilefuse.autotune.cli_io import EXIT_BAD_INPUT, EXIT_OK, EXIT_UNUSABLE, load_graph  # noqa: E402
from tilefuse.autotune.database import Database  # noqa: E402
from tilefuse.autotune.extract import extract_tasks  # noqa: E402
from tilefuse.autotune.log import read_log  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RESNET = REPO / "examples" / "resnet_block.onnx"
ENCODER = REPO / "examples" / "transformer_encoder.onnx"
FAST = ["--tuner", "random", "--trials", "7", "--min-repeat-ms", "0"]   # one per task
needs_import = pytest.mark.skipif(not hasattr(graph_api, "from_onnx"), reason="graph_api.from_onnx is not there yet")


def run(argv):
    """main(argv) with stdout and stderr captured: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """``autotune tune examples/resnet_block.onnx`` into a fresh database and log."""
    work = tmp_path_factory.mktemp("onnx")
    db, log = work / "tuning.db", work / "resnet_block.jsonl"
    result = run(["tune", RESNET, *FAST, "--db", db, "--log", log])
    return {"dir": work, "db": db, "log": log, "result": result}


# ---------------------------------------------------------------------------- good models

@needs_import
def test_load_graph_reads_onnx_with_initializers_as_bound_constants():
    graph = load_graph(RESNET)
    compiled = graph_api.compile_graph(graph)
    # the image is the one input to feed; every weight is an initializer, so bound
    assert [tuple(p.shape) for p in compiled.input_ports] == [(1, 16, 32, 32)]
    assert all(p.is_supported() for p in graph.get_partitions())
    assert extract_tasks(graph)


@needs_import
def test_tune_onnx_model_writes_records_and_a_table(tuned):
    code, out, err = tuned["result"]
    assert code == EXIT_OK, err
    tasks = extract_tasks(load_graph(RESNET))
    assert f"tuning {len(tasks)} task(s) of {RESNET}" in out
    assert "7 new measurement(s), 0 resumed" in out
    assert len(read_log(tuned["log"]).records) == 7
    with Database(tuned["db"]) as db:
        assert len(db.records()) == 7


@needs_import
def test_tune_onnx_again_resumes(tuned):
    code, out, _ = run(["tune", RESNET, *FAST, "--db", tuned["db"], "--log", tuned["log"]])
    assert code == EXIT_OK and "0 new measurement(s), 7 resumed" in out


@needs_import
def test_best_missing_lists_untuned_workloads_of_an_onnx_model(tuned):
    tasks = extract_tasks(load_graph(RESNET))
    code, out, _ = run(["best", "--missing", RESNET, "--db", tuned["db"], "--json"])
    data = json.loads(out)
    assert data["workloads"] == len(tasks)
    # 4 random trials over the tasks by weight: the tasks that got none are the missing ones
    assert code == (EXIT_UNUSABLE if data["missing"] else EXIT_OK)
    with Database(tuned["db"]) as db:
        have = {r.workload_key for r in db.records()}
    assert {m["key"] for m in data["missing"]} == {t.key for t in tasks} - have
    # a database without any record of the model: every workload is missing, exit 1
    empty = tuned["dir"] / "empty.db"
    Database(empty).close()
    code, out, _ = run(["best", "--missing", RESNET, "--db", empty])
    assert code == EXIT_UNUSABLE
    assert f"{len(tasks)} of {len(tasks)} workload(s) of {RESNET} have no record" in out


@needs_import
def test_bench_onnx_model_feeds_only_the_data_input(tuned):
    code, out, err = run(["bench", RESNET, "--db", tuned["db"], "--repeat", "3", "--json"])
    assert code == EXIT_OK, err
    data = json.loads(out)
    assert data["outputs_match"] is True
    assert data["default_ms"]["median"] > 0 and data["tuned_ms"]["median"] > 0
    assert data["partitions"] == sum(t.weight for t in extract_tasks(load_graph(RESNET)))


@needs_import
def test_bench_transformer_without_records_runs_default_configs(tuned):
    code, out, err = run(["bench", ENCODER, "--db", tuned["db"], "--repeat", "2"])
    assert code == EXIT_OK, err
    assert "0 partition(s) of 0 workload(s) compile with a tuned config" in out
    assert "ran with default configs" in err and "speedup" in out


# ---------------------------------------------------------------------------- bad files

@pytest.mark.parametrize("content, message", [
    (b"\x08\x07\xff\xff", "not a readable ONNX model"),      # a protobuf ModelProto cannot parse
    (b"", "not an ONNX model with a graph"),                   # parses as an empty ModelProto
    (b"\x08\x07", "not an ONNX model with a graph"),           # ir_version 7 and nothing else
])
@pytest.mark.parametrize("command", [["tune", "{model}", "--trials", "4"], ["bench", "{model}"],
                                     ["best", "--missing", "{model}"]])
def test_bad_onnx_file_exits_2_with_a_message(tmp_path, content, message, command):
    model = tmp_path / "model.onnx"
    model.write_bytes(content)
    Database(tmp_path / "tuning.db").close()
    code, out, err = run([a.format(model=model) for a in command] + ["--db", tmp_path / "tuning.db"])
    assert code == EXIT_BAD_INPUT
    assert err.startswith("autotune: error: ") and message in err and str(model) in err
    assert "Traceback" not in err and not out


def test_onnx_without_an_importer_exits_2(monkeypatch, tmp_path):
    monkeypatch.delattr(graph_api, "from_onnx", raising=False)
    code, out, err = run(["tune", RESNET, *FAST, "--db", tmp_path / "t.db", "--log", tmp_path / "t.jsonl"])
    assert code == EXIT_BAD_INPUT and "no from_onnx" in err and not out


def _save_model(path, nodes, inputs):
    h = onnx.helper
    graph = h.make_graph(nodes, "model", [h.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)
                                          for name, shape in inputs],
                         [h.make_tensor_value_info("c", onnx.TensorProto.FLOAT, None)])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


@needs_import
def test_onnx_model_with_a_dynamic_shape_exits_2(tmp_path):
    path = _save_model(tmp_path / "dynamic.onnx", [onnx.helper.make_node("Relu", ["a"], ["c"])], [("a", ["N", 3])])
    code, out, err = run(["tune", path, *FAST, "--db", tmp_path / "t.db", "--log", tmp_path / "t.jsonl"])
    assert code == EXIT_BAD_INPUT, err
    assert err == (f"autotune: error: {path}: input 'a' has a symbolic dim 0 ('N'; shape Nx3): give its shape "
                   f"with --shape a=Nx3 (or --batch N)\n")
    assert not out


@needs_import
def test_onnx_node_without_a_mapping_is_a_warning_not_an_error(tmp_path):
    # Hardmax has no mapping: a Wildcard run by onnx's reference implementation, named in a
    # warning; nothing is left to tune
    path = _save_model(tmp_path / "odd.onnx", [onnx.helper.make_node("Hardmax", ["a"], ["c"])], [("a", [2, 3])])
    code, out, err = run(["tune", path, *FAST, "--db", tmp_path / "t.db", "--log", tmp_path / "t.jsonl"])
    assert code == EXIT_OK, err
    assert f"autotune: warning: {path}: ONNX op Hardmax" in err and "Wildcard" in err
    assert "no partition to tune" in err
