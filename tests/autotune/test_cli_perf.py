"""``autotune perf``: each engine in a process of its own, timed in turns; optional engines
that are missing or refuse the model are a note, bad input is one line and exit 2."""
import json

import pytest

from tilefuse.autotune import cli_perf
from tilefuse.autotune.cli_io import EXIT_BAD_INPUT, EXIT_OK
from tilefuse.autotune.cli_perf import EngineProcess, EngineStopped, named_feeds, output_difference

from test_cli import run
from test_cli_shapes import symbolic_model

RESNET = "examples/resnet_block.onnx"


def test_perf_times_every_installed_engine_side_by_side():
    compare = [name for name in ("onnxruntime", "openvino") if cli_perf.importlib.util.find_spec(name)]
    code, out, err = run(["perf", RESNET, "--duration", "0.3", "--threads", "1", "--json",
                          *(["--compare", ",".join(compare)] if compare else [])])
    assert code == EXIT_OK, err
    data = json.loads(out)
    assert list(data["engines"]) == ["tilefuse", *compare] and data["inputs"] == {"input": [1, 16, 32, 32]}
    for name, engine in data["engines"].items():
        assert 0 < engine["p50_ms"] <= engine["p90_ms"] <= engine["p99_ms"], name
        assert engine["runs"] >= 1 and engine["compile_seconds"] > 0
        assert engine["runs"] / engine["runs_per_second"] >= 0.3                  # the duration, timed
        assert engine["peak_rss_mib"] > data["python_numpy_rss_mib"] > 5        # its own process, more than Python
        assert engine["max_difference"] < 1e-3                                 # the same outputs as tilefuse's
    assert data["engines"]["tilefuse"]["peak_rss_mib"] < 2048


def test_perf_binds_a_symbolic_batch_and_notes_a_missing_engine(tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    model = symbolic_model(tmp_path / "m.onnx")
    real = cli_perf.importlib.util.find_spec
    monkeypatch.setattr(cli_perf.importlib.util, "find_spec", lambda name: None if name == "openvino" else real(name))
    monkeypatch.setattr(cli_perf, "output_difference", lambda ours, theirs: 0.5)     # as if it computed otherwise
    code, out, err = run(["perf", model, "--batch", "3", "--duration", "0.1", "--compare", "openvino,onnxruntime"])
    assert code == EXIT_OK, err
    assert err.splitlines() == [
        "autotune: note: openvino is not installed, so it is not compared (pip install openvino)",
        "autotune: warning: onnxruntime's outputs differ from tilefuse's by up to 0.5 of their largest magnitude"]
    assert "(x 3x16)" in out and "tilefuse with default configs" in out
    rows = [line.split()[0] for line in out.splitlines()[4:-1]]
    assert rows == ["tilefuse", "onnxruntime"]


def test_an_engine_that_cannot_load_names_its_error():
    engine = EngineProcess("nosuchengine")
    with pytest.raises(EngineStopped, match="nosuchengine cannot run the model: KeyError: 'nosuchengine'"):
        engine.load("m.onnx", named_feeds({}, {}, 0), 1, None)
    assert engine.process is None          # ended


@pytest.mark.parametrize("argv, message", [
    (["perf", RESNET, "--compare", "tensorrt"], "unknown engine 'tensorrt'; --compare takes onnxruntime, openvino"),
    (["perf", RESNET, "--duration", "0"], "more than 0 seconds"),
    (["perf", RESNET, "--threads", "0"], "must be at least 1"),
    (["perf", "examples/mlp.json"], "examples/mlp.json: perf runs ONNX models (.onnx)"),
    (["perf", "{dir}/none.onnx"], "none.onnx: no such model file"),
    (["perf", "{dir}/junk.onnx"], "junk.onnx: not a readable ONNX model"),
    (["perf", RESNET, "--shape", "input=2x16x32x32"], "dim 0 of input 'input' is 1 in the model"),
    (["perf", RESNET, "--db", "{dir}/none.db"], "--db {dir}/none.db: no such tuning database"),
])
def test_perf_refuses_bad_input_in_one_line(tmp_path, argv, message):
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07junk")
    code, out, err = run([a.format(dir=tmp_path) for a in argv])
    assert code == EXIT_BAD_INPUT and message.format(dir=tmp_path) in err.splitlines()[0], err
    assert not out


def test_outputs_that_differ_in_number_or_shape_are_infinitely_apart():
    import numpy as np
    assert output_difference([np.zeros(3)], [np.zeros(3), np.zeros(1)]) == float("inf")
    assert output_difference([np.zeros((2, 3))], [np.zeros((3, 2))]) == float("inf")
    assert output_difference([np.ones(2)], [np.ones(2)]) == 0.0
