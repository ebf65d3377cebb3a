"""Pictures from the ``autotune`` command: ``plot`` (best cost so far per task, from a log or a
database), ``bench --plot`` (latency bars, onnxruntime's among them for an ONNX model) and
``graph`` (DOT text, or a picture drawn by Graphviz). Bad input, a missing matplotlib or
Graphviz are exit 2 with a message, never a traceback. Tiny graphs, ``--trials 4`` with the
random tuner."""
import dataclasses
import json
import math
import os
import shutil
import sys

import pytest

from tilefuse.autotune import plots
from tilefuse.autotune.cli_io import EXIT_BAD_INPUT, EXIT_OK
from tilefuse.autotune.database import Database
from tilefuse.autotune.log import append_records, read_log
from tilefuse.autotune.record import Record, first_measurements
from test_cli import FAST, run, write_graph

matplotlib_image = pytest.importorskip("matplotlib.image")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A tiny graph (two tasks) tuned into a database and a log."""
    work = tmp_path_factory.mktemp("plots")
    graph = write_graph(work / "tiny.json")
    db, log = work / "tuning.db", work / "tiny.jsonl"
    code, _, err = run(["tune", graph, *FAST, "--db", db, "--log", log])
    assert code == EXIT_OK, err
    return {"dir": work, "graph": graph, "db": db, "log": log}


def assert_png(path):
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    height, width = matplotlib_image.imread(path).shape[:2]
    assert height > 0 and width > 0


def spy(monkeypatch, name):
    """Wrap ``plots.<name>`` so that each call's arguments and result are kept."""
    real, calls = getattr(plots, name), []

    def wrapper(*args, **kwargs):
        result = real(*args, **kwargs)
        calls.append({"args": args, "kwargs": kwargs, "result": result})
        return result
    monkeypatch.setattr(plots, name, wrapper)
    return calls


def assert_best_so_far(curve, records):
    """The curve of a workload is its least ok cost after each trial (a config's first
    record), in timestamp order."""
    ordered = first_measurements(sorted(records, key=lambda r: r.timestamp))
    assert curve.trials == tuple(range(1, len(ordered) + 1))
    for k, best in enumerate(curve.best_costs):
        ok = [r.mean_cost for r in ordered[:k + 1] if r.is_ok]
        assert best == (min(ok) if ok else math.inf)
    assert all(a >= b for a, b in zip(curve.best_costs, curve.best_costs[1:]))   # never rises


def record(key, name, cost=None, at=0.0, error="runtime"):
    if cost is None:
        return Record.create(key, name, "complex", {"at": at}, error_kind=error, error_msg="boom", timestamp=at)
    return Record.create(key, name, "complex", {"at": at}, costs=[cost], timestamp=at)


# ---------------------------------------------------------------------------- plot

def test_plot_from_a_log_draws_one_line_per_workload(tuned, tmp_path, monkeypatch):
    drawn = spy(monkeypatch, "draw_tuning_curves")
    out = tmp_path / "curve.png"
    code, stdout, err = run(["plot", tuned["log"], "-o", out])
    assert code == EXIT_OK, err
    assert_png(out)
    records = read_log(tuned["log"]).records
    curves = drawn[0]["args"][0]
    assert {c.workload_key for c in curves} == {r.workload_key for r in records} and len(curves) == 2
    for curve in curves:
        assert_best_so_far(curve, [r for r in records if r.workload_key == curve.workload_key])
        assert curve.label.split()[0] in {r.task_name for r in records}
    assert drawn[0]["result"] == "ms"                   # a log knows no flop counts
    assert stdout.startswith(f"wrote {out}: 2 task(s), 4 trial(s)") and "in ms" in stdout


def test_plot_from_a_database_is_told_by_its_content_and_shows_gflops(tuned, tmp_path, monkeypatch):
    drawn = spy(monkeypatch, "draw_tuning_curves")
    disguised = tmp_path / "records.jsonl"               # a sqlite file, whatever its suffix
    shutil.copy(tuned["db"], disguised)
    for source in (tuned["db"], disguised):
        out = tmp_path / f"{source.stem}.png"
        code, stdout, err = run(["plot", source, "-o", out])
        assert code == EXIT_OK, err
        assert_png(out)
        assert "best so far in GFLOPS" in stdout
    with Database(tuned["db"]) as db:
        records = db.records()
    for call in drawn:
        curves = call["args"][0]
        assert call["result"] == "GFLOPS" and len(curves) == 2 and all(c.flop > 0 for c in curves)
        assert "matmul+relu 8x8" in {c.label for c in curves} and all(c.label.endswith(" 8x8") for c in curves)
        for curve in curves:
            assert_best_so_far(curve, [r for r in records if r.workload_key == curve.workload_key])


def test_plot_one_workload_by_key_prefix(tuned, tmp_path, monkeypatch):
    drawn = spy(monkeypatch, "draw_tuning_curves")
    key = read_log(tuned["log"]).records[0].workload_key
    code, stdout, err = run(["plot", tuned["log"], "-o", tmp_path / "one.svg", "--workload", key[:8]])
    assert code == EXIT_OK, err
    assert [c.workload_key for c in drawn[0]["args"][0]] == [key]
    assert (tmp_path / "one.svg").read_text().lstrip().startswith("<?xml")


def test_failed_measurements_are_trials_that_improve_nothing(tmp_path, monkeypatch):
    log = tmp_path / "hand.jsonl"
    written = [record("wk_a", "dense", 3e-3, at=2.0), record("wk_a", "dense", None, at=1.0),
               record("wk_b", "dense", None, at=0.5), record("wk_a", "dense", 1e-3, at=4.0),
               record("wk_a", "dense", None, at=3.0, error="timeout"), record("wk_a", "dense", 2e-3, at=5.0)]
    append_records(log, written)
    drawn = spy(monkeypatch, "draw_tuning_curves")
    code, stdout, err = run(["plot", log, "-o", tmp_path / "hand.png"])
    assert code == EXIT_OK, err
    assert "2 task(s), 6 trial(s) (3 failed)" in stdout
    wk_b, wk_a = drawn[0]["args"][0]                      # in the order of their first measurement
    assert wk_a.trials == (1, 2, 3, 4, 5) and wk_a.best_costs == (math.inf, 3e-3, 3e-3, 1e-3, 1e-3)
    assert wk_a.improvements() == [1, 3]
    assert wk_b.best_costs == (math.inf,) and math.isnan(wk_b.best_ms()[0])
    assert {wk_a.label, wk_b.label} == {"dense [wk_a]", "dense [wk_b]"}   # same name: keys tell them apart
    assert_best_so_far(wk_a, [r for r in written if r.workload_key == "wk_a"])
    assert_png(tmp_path / "hand.png")


def test_records_of_several_cpus_are_separate_lines():
    elsewhere = dataclasses.replace(record("wk", "dense", 1e-3, at=2.0), target_cpu="othercpu", target_key="other-key")
    records = [record("wk", "dense", 2e-3, at=1.0), elsewhere]
    curves = plots.tuning_curves(records)
    assert len(curves) == 2 and curves[1].label == "dense @ othercpu"
    assert [c.best_costs for c in curves] == [(2e-3,), (1e-3,)]


@pytest.mark.parametrize("source, output, message", [
    ("{dir}/missing.jsonl", "{dir}/out.png", "no such tuning log or database"),
    ("{dir}/corrupt.jsonl", "{dir}/out.png", "not a tuning log: none of its 2 line(s) is a record"),
    ("{dir}/empty.jsonl", "{dir}/out.png", "no tuning records to plot"),
    ("{dir}", "{dir}/out.png", "is a directory, not a tuning log"),
    ("{dir}/notadb.db", "{dir}/out.png", "not a tuning log: none of its"),   # not sqlite: read as a log
    ("{dir}/damaged.db", "{dir}/out.png", "damaged.db' is damaged"),
    ("{dir}/good.jsonl", "{dir}/a_file/out.png", "-o {dir}/a_file/out.png: cannot write"),
    ("{dir}/good.jsonl", "{dir}/no/such/dir/out.png", "cannot write: No such file or directory"),
    ("{dir}/good.jsonl", "{dir}", "is a directory; give a file path"),
    ("{dir}/good.jsonl", "{dir}/out.xyz", "unknown image format '.xyz'"),
    ("{dir}/good.jsonl", "{dir}/out", "unknown image format '(no suffix)'"),
])
def test_plot_bad_input_exits_2_with_a_message(tmp_path, source, output, message):
    (tmp_path / "corrupt.jsonl").write_text('{not json\n{"kind": "other"}\n')
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "notadb.db").write_text("this is not sqlite\n")
    (tmp_path / "damaged.db").write_bytes(b"SQLite format 3\x00" + b"\x07" * 2000)
    (tmp_path / "a_file").write_text("a file, not a directory")
    append_records(tmp_path / "good.jsonl", [record("wk", "dense", 1e-3)])
    before = sorted(os.listdir(tmp_path))
    code, out, err = run(["plot", source.format(dir=tmp_path), "-o", output.format(dir=tmp_path)])
    assert code == EXIT_BAD_INPUT
    assert err.splitlines()[-1].startswith("autotune: error: ") and message.format(dir=tmp_path) in err
    assert "Traceback" not in err and not out
    assert sorted(os.listdir(tmp_path)) == before           # no picture, no half-written file


def test_plot_workload_prefix_matching_nothing_exits_2(tuned, tmp_path):
    code, out, err = run(["plot", tuned["log"], "-o", tmp_path / "x.png", "--workload", "zz"])
    assert code == EXIT_BAD_INPUT and "no workload with a key starting 'zz'" in err and not out


def test_without_matplotlib_plots_exit_2_and_the_rest_works(tuned, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # `import matplotlib` fails
    for argv in (["plot", tuned["log"], "-o", tmp_path / "x.png"],
                 ["bench", tuned["graph"], "--db", tuned["db"], "--plot", tmp_path / "x.png"]):
        code, out, err = run(argv)
        assert code == EXIT_BAD_INPUT, err
        assert "matplotlib is not installed: pip install -e '.[plot]'" in err
        assert "Traceback" not in err and not out and not (tmp_path / "x.png").exists()
    code, out, _ = run(["show", tuned["log"]])
    assert code == EXIT_OK and "8 record(s)" in out     # 4 trials and 4 re-timings of a default
    code, _, err = run(["graph", tuned["graph"], "-o", tmp_path / "g.dot"])
    assert code == EXIT_OK, err


# ---------------------------------------------------------------------------- bench --plot

def _tiny_onnx_model(path):
    """x (4x8) @ w (8x8 initializer), then Relu: one data input, one partition to compile."""
    import numpy as np
    onnx = pytest.importorskip("onnx")
    h = onnx.helper
    weight = onnx.numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 8)).astype("float32"), "w")
    graph = h.make_graph([h.make_node("MatMul", ["x", "w"], ["h"]), h.make_node("Relu", ["h"], ["y"])], "tiny",
                         [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 8])],
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 8])], initializer=[weight])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


def _has_onnxruntime() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def test_bench_plot_of_an_onnx_model_draws_default_tuned_and_onnxruntime(tmp_path, monkeypatch):
    model = _tiny_onnx_model(tmp_path / "tiny.onnx")
    Database(tmp_path / "empty.db").close()
    drawn = spy(monkeypatch, "draw_latency_bars")
    out = tmp_path / "bench.png"
    code, stdout, err = run(["bench", model, "--db", tmp_path / "empty.db", "--repeat", "2", "--plot", out])
    assert code == EXIT_OK, err
    assert_png(out)
    expected = ["default", "tuned"] + (["onnxruntime"] if _has_onnxruntime() else [])
    bars = drawn[0]["result"]
    assert [b.label for b in bars] == expected and all(b.median_ms > 0 and b.min_ms <= b.median_ms for b in bars)
    rows = [line.split()[0] for line in stdout.splitlines()[3:] if line.strip() and not line.startswith("wrote")]
    assert rows == expected + ["speedup"]
    assert f"wrote {out}: {', '.join(expected)}" in stdout
    code, stdout, _ = run(["bench", model, "--db", tmp_path / "empty.db", "--repeat", "2", "--json"])
    data = json.loads(stdout)                            # without --plot too; nothing else changes
    assert code == EXIT_OK and ("onnxruntime_ms" in data) == _has_onnxruntime()
    assert list(data)[-3:] == ["noise", "speedup", "outputs_match"]


def test_bench_plot_without_onnxruntime_draws_two_bars_and_keeps_the_json(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    model = _tiny_onnx_model(tmp_path / "tiny.onnx")
    Database(tmp_path / "empty.db").close()
    drawn = spy(monkeypatch, "draw_latency_bars")
    code, stdout, err = run(["bench", model, "--db", tmp_path / "empty.db", "--repeat", "2", "--json",
                             "--plot", tmp_path / "bench.svg"])
    assert code == EXIT_OK, err
    assert [b.label for b in drawn[0]["result"]] == ["default", "tuned"]
    assert "chart has no onnxruntime bar" in err and f"wrote {tmp_path / 'bench.svg'}" in err
    assert list(json.loads(stdout)) == ["graph", "db", "repeat", "seed", "partitions", "workloads", "tuned_partitions",
                                        "tuned_workloads", "untuned_partitions",
                                        "missing", "default_ms", "tuned_ms", "noise", "speedup", "outputs_match"]


def test_bench_plot_of_a_json_graph_and_a_bad_plot_path(tuned, tmp_path, monkeypatch):
    drawn = spy(monkeypatch, "draw_latency_bars")
    code, _, err = run(["bench", tuned["graph"], "--db", tuned["db"], "--repeat", "2", "--plot", tmp_path / "b.png"])
    assert code == EXIT_OK, err
    assert [b.label for b in drawn[0]["result"]] == ["default", "tuned"]
    assert_png(tmp_path / "b.png")
    code, out, err = run(["bench", tuned["graph"], "--db", tuned["db"], "--plot", tmp_path / "no" / "b.png"])
    assert code == EXIT_BAD_INPUT and "--plot" in err and "cannot write" in err and not out
    assert "Traceback" not in err and len(drawn) == 1     # refused before measuring


# ---------------------------------------------------------------------------- graph

def test_graph_writes_dot_text(tuned, tmp_path):
    out = tmp_path / "g.dot"
    code, stdout, err = run(["graph", tuned["graph"], "-o", out])
    assert code == EXIT_OK, err
    text = out.read_text()
    assert text.startswith("digraph") and "cluster" in text and "MatMul" in text
    assert stdout.startswith(f"wrote {out} (dot): 2 partition(s)")


def test_graph_of_an_onnx_model(tmp_path):
    model = _tiny_onnx_model(tmp_path / "tiny.onnx")
    code, _, err = run(["graph", model, "-o", tmp_path / "g.gv"])
    assert code == EXIT_OK, err
    assert (tmp_path / "g.gv").read_text().startswith("digraph")


def test_graph_svg_is_drawn_by_graphviz_or_refused_naming_it(tuned, tmp_path):
    out = tmp_path / "g.svg"
    code, _, err = run(["graph", tuned["graph"], "-o", out])
    if shutil.which("dot"):
        assert code == EXIT_OK, err
        assert out.read_text().lstrip().startswith(("<?xml", "<svg"))
    else:
        assert code == EXIT_BAD_INPUT and "Graphviz is not installed" in err and not out.exists()


def test_graph_picture_without_graphviz_exits_2_and_says_dot_text_works(tuned, tmp_path, monkeypatch):
    (tmp_path / "empty_bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty_bin"))     # no `dot` anywhere
    for suffix in (".svg", ".png"):
        code, out, err = run(["graph", tuned["graph"], "-o", tmp_path / f"g{suffix}"])
        assert code == EXIT_BAD_INPUT
        assert "Graphviz is not installed" in err and "apt install graphviz" in err and "GRAPH.dot" in err
        assert "Traceback" not in err and not out and not (tmp_path / f"g{suffix}").exists()


def _fake_dot(tmp_path, monkeypatch, body):
    folder = tmp_path / "fake_bin"
    folder.mkdir()
    (folder / "dot").write_text("#!/bin/sh\n" + body + "\n")
    (folder / "dot").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")


def test_graphviz_failing_or_hanging_is_exit_2(tuned, tmp_path, monkeypatch):
    _fake_dot(tmp_path, monkeypatch, 'echo "Error: syntax error in line 1" >&2; exit 1')
    code, _, err = run(["graph", tuned["graph"], "-o", tmp_path / "g.svg"])
    assert code == EXIT_BAD_INPUT and "Graphviz dot failed (exit 1): Error: syntax error in line 1" in err
    assert not (tmp_path / "g.svg").exists()
    (tmp_path / "fake_bin" / "dot").write_text("#!/bin/sh\nexec sleep 30\n")
    code, _, err = run(["graph", tuned["graph"], "-o", tmp_path / "g.png", "--timeout", "0.3"])
    assert code == EXIT_BAD_INPUT and "ran longer than 0.3 s" in err and "Traceback" not in err


@pytest.mark.parametrize("output, message", [
    ("{dir}/g.txt", "unknown graph picture format '.txt'"),
    ("{dir}/a_file/g.dot", "cannot write"),
])
def test_graph_bad_output_exits_2(tuned, tmp_path, output, message):
    (tmp_path / "a_file").write_text("a file, not a directory")
    code, out, err = run(["graph", tuned["graph"], "-o", output.format(dir=tmp_path)])
    assert code == EXIT_BAD_INPUT and message in err and "Traceback" not in err and not out


def test_graph_of_a_missing_model_exits_2(tmp_path):
    code, _, err = run(["graph", tmp_path / "nope.onnx", "-o", tmp_path / "g.dot"])
    assert code == EXIT_BAD_INPUT and "no such graph file" in err
