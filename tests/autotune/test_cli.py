"""The ``autotune`` command: tune writes the database, the log and a table, re-runs measure
nothing new, bad input exits 2, an exhausted budget exits 3, and best/show/export/import/bench
work on what tune wrote. Tiny graphs, ``--trials 4`` with the random tuner."""
import contextlib
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tilefuse.autotune import cli_tune, timing
from tilefuse.autotune.cli import main, parse_duration
from tilefuse.autotune.cli_io import EXIT_BAD_INPUT, EXIT_BUDGET_EXHAUSTED, EXIT_OK, EXIT_UNUSABLE
from tilefuse.autotune.database import Database
from tilefuse.autotune.log import read_log
from tilefuse.autotune.record import first_measurements
from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType, load_json

REPO = Path(__file__).resolve().parents[2]
FAST = ["--tuner", "random", "--trials", "4", "--min-repeat-ms", "0", "--scheduler", "sequential"]  # 2 per task
RECORDS = 8    # per task: the default, then a batch of one candidate between two more timings of the default


def tiny_graph(n=8, k=16, m=8) -> Graph:
    """MatMul + ReLU, then SoftMax: two tasks (complex, reduction)."""
    graph = Graph()
    x = LogicalTensor(0, DataType.f32, (n, k))
    w = LogicalTensor(1, DataType.f32, (k, m), property_type=PropertyType.constant)
    h, r, y = (LogicalTensor(i, DataType.f32, (n, m)) for i in (2, 3, 4))
    graph.add_op(Op(0, OpKind.MatMul, [x, w], [h], name="fc"))
    graph.add_op(Op(1, OpKind.ReLU, [h], [r], name="relu"))
    graph.add_op(Op(2, OpKind.SoftMax, [r], [y], {"axis": -1}, name="softmax"))
    graph.finalize()
    return graph


def write_graph(path: Path, **shape) -> str:
    path.write_text(tiny_graph(**shape).to_json())
    return str(path)


def run(argv):
    """main(argv) with stdout and stderr captured: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def table_of(stdout: str) -> str:
    """The task table of tune's output (the header line up to its legend or a blank line)."""
    lines = stdout.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("task "))
    end = next((k for k in range(start, len(lines)) if not lines[k].strip() or lines[k].startswith("% trials:")),
               len(lines))
    return "\n".join(lines[start:end])


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """One tune run in a fresh directory with the default --db and --log, then the same
    command again."""
    work = tmp_path_factory.mktemp("tuned")
    graph = write_graph(work / "tiny.json")
    before = os.getcwd()
    os.chdir(work)
    try:
        first = run(["tune", graph, *FAST])
        log_after_first = (work / "tuning_logs" / "tiny.jsonl").read_text()
        second = run(["tune", graph, *FAST])
    finally:
        os.chdir(before)
    return {"dir": work, "graph": graph, "db": work / "tuning.db", "log": work / "tuning_logs" / "tiny.jsonl",
            "first": first, "second": second, "log_after_first": log_after_first}


# ---------------------------------------------------------------------------- tune

def test_tune_writes_database_log_and_a_table_per_task(tuned):
    code, out, err = tuned["first"]
    assert code == EXIT_OK, err
    assert tuned["db"].is_file()
    records = read_log(tuned["log"]).records
    assert len(records) == RECORDS and not read_log(tuned["log"]).problems
    assert len(first_measurements(records)) == 4
    table = table_of(out)
    header = table.splitlines()[0].split()
    assert header[:4] == ["task", "template", "weight", "trials"] and header[-3:] == ["speedup", "checked", "errors"]
    rows = table.splitlines()[2:]
    assert len(rows) == 2
    assert all(" default " in row or " tuned " in row for row in rows)     # each task's side-by-side check
    assert rows[0].startswith("matmul+relu 8x8") and " complex " in rows[0]
    assert " reduction " in rows[1]
    assert "4 new measurement(s), 0 resumed" in out
    with Database(tuned["db"]) as db:
        assert len(db.records()) == RECORDS and len(db.best_all()) == 2
        assert all(db.pick(key) is not None for key in db.best_all())
    assert "[1/2]" in out and "[2/2]" in out          # a plain progress line per batch (not a tty)


def test_second_identical_run_measures_nothing_and_prints_the_same_table(tuned):
    code, out, err = tuned["second"]
    assert code == EXIT_OK, err
    assert tuned["log"].read_text() == tuned["log_after_first"]
    # the check in the model runs when a run measured something, and only that run marks the
    # picks it dropped ("in the model", a timing on a shared machine); the rest is the same
    first = [re.sub(r"\s+", " ", line.replace(" in the model", "")) for line in table_of(tuned["first"][1]).splitlines()]
    again = [re.sub(r"\s+", " ", line) for line in table_of(out).splitlines()]
    assert again[2:] == first[2:]
    assert "0 new measurement(s), 4 resumed" in out


def test_no_resume_measures_again(tuned, tmp_path):
    db, log = tmp_path / "t.db", tmp_path / "t.jsonl"
    assert run(["tune", tuned["graph"], *FAST, "--db", db, "--log", log])[0] == EXIT_OK
    code, out, _ = run(["tune", tuned["graph"], *FAST, "--db", db, "--log", log, "--no-resume", "--seed", "3"])
    assert code == EXIT_OK and "4 new measurement(s), 0 resumed" in out
    assert len(read_log(log).records) == 2 * RECORDS


def _spy_options(monkeypatch):
    seen = []
    real = cli_tune.tune

    def spy(*args, **kwargs):
        seen.append(kwargs["options"])
        return real(*args, **kwargs)
    monkeypatch.setattr(cli_tune, "tune", spy)
    return seen


def test_cache_flush_times_single_calls_after_flushing_the_weights(tuned, tmp_path, monkeypatch):
    seen = _spy_options(monkeypatch)
    db, log = tmp_path / "t.db", tmp_path / "t.jsonl"
    code, out, err = run(["tune", tuned["graph"], *FAST, "--db", db, "--log", log, "--cache-flush"])
    assert code == EXIT_OK, err
    assert seen[0].flush_cache and seen[0].repeat == timing.FLUSHED_REPEATS
    assert "weights are flushed from the caches before each timed call\n" in out      # asked: no reason given
    for r in read_log(log).records:     # all its repeats, or fewer ending with one slow enough to give up
        assert not r.is_ok or len(r.costs) == timing.FLUSHED_REPEATS or r.costs[-1] == max(r.costs)


@pytest.mark.parametrize("cache_bytes, options, flushed", [(1 << 30, [], False), (64, [], True),
                                                           (64, ["--no-cache-flush"], False)])
def test_weights_are_flushed_by_default_when_the_caches_cannot_hold_them(tuned, tmp_path, monkeypatch,
                                                                        cache_bytes, options, flushed):
    monkeypatch.setattr(timing, "last_level_cache_bytes", lambda: cache_bytes)
    seen = _spy_options(monkeypatch)
    code, out, err = run(["tune", tuned["graph"], *FAST, "--db", tmp_path / "t.db", "--log", tmp_path / "t.jsonl",
                          *options])
    assert code == EXIT_OK, err
    assert seen[0].flush_cache is flushed
    assert ("of weights do not fit in the caches; --no-cache-flush to time them cached" in out) is flushed


def test_a_cpu_that_cannot_flush_cache_lines(tuned, tmp_path, monkeypatch):
    monkeypatch.setattr(cli_tune, "flushes_here", lambda: False)
    monkeypatch.setattr(timing, "flushes_here", lambda: False)
    code, out, err = run(["tune", tuned["graph"], *FAST, "--db", tmp_path / "t.db", "--cache-flush"])
    assert code == EXIT_BAD_INPUT and "cannot flush cache lines" in err
    monkeypatch.setattr(timing, "last_level_cache_bytes", lambda: 64)      # the weights outgrow it: timed cached
    seen = _spy_options(monkeypatch)
    code, out, err = run(["tune", tuned["graph"], *FAST, "--db", tmp_path / "t.db", "--log", tmp_path / "t.jsonl"])
    assert code == EXIT_OK and not seen[0].flush_cache


def test_json_summary_parses(tuned, tmp_path):
    code, out, err = run(["tune", tuned["graph"], *FAST, "--db", tuned["db"], "--log", tmp_path / "x.jsonl",
                          "--json", "--verbose"])
    assert code == EXIT_OK
    summary = json.loads(out)                          # progress and chatter went to stderr
    assert summary["status"] == "done" and summary["exit_code"] == 0
    assert summary["new_trials"] == 0 and summary["resumed_trials"] == 4
    assert [t["template"] for t in summary["tasks"]] == ["complex", "reduction"]
    task = summary["tasks"][0]
    assert task["trials"] == 2 and task["tuned_ms"] > 0 and task["tuned_gflops"] > 0
    assert set(task["errors"]) == {"compile", "runtime", "timeout", "crash", "wrong_answer"}
    assert task["messages"] == [] and isinstance(task["best_config"], dict)
    assert "tuning 2 task(s)" in err
    assert summary["model_check"] is None and "checking the picks in the model" not in err   # nothing new measured


def test_json_summary_has_the_check_in_the_model(tuned, tmp_path):
    code, out, err = run(["tune", tuned["graph"], *FAST, "--db", tmp_path / "t.db", "--log", tmp_path / "t.jsonl",
                          "--json"])
    assert code == EXIT_OK, err
    summary = json.loads(out)
    model = summary["model_check"]          # the picks as they run in the graph
    assert set(model) == {"default_ms", "tuned_ms", "checked_default_ms", "checked_ms", "spread", "workloads"}
    assert all(w["key"] in {t["key"] for t in summary["tasks"]} for w in model["workloads"])
    assert "checking the picks in the model" in err


def test_budget_exhausted_before_any_task_was_tuned_exits_3(tuned, tmp_path):
    # a microsecond: gone before the first batch can start (with 0.001 s the first batch may
    # still start in time on a fast machine, and then a task is tuned: exit 0)
    code, out, err = run(["tune", tuned["graph"], *FAST, "--db", tmp_path / "t.db", "--log", tmp_path / "t.jsonl",
                          "--time-budget", "0.000001"])
    assert code == EXIT_BUDGET_EXHAUSTED
    assert "time budget exhausted before any task was tuned" in err
    assert not (tmp_path / "t.jsonl").exists()


def test_tiny_budget_with_resumed_records_is_done(tuned, tmp_path):
    code, out, _ = run(["tune", tuned["graph"], *FAST, "--db", tuned["db"], "--log", tmp_path / "t.jsonl",
                        "--time-budget", "0.001"])
    assert code == EXIT_OK and "4 resumed" in out


def test_every_candidate_failing_exits_1_and_reports_errors_per_kind(tuned, tmp_path):
    argv = ["tune", tuned["graph"], "--tuner", "random", "--trials", "4", "--min-repeat-ms", "0",     # 1 us: not even a
            "--timeout", "0.000001", "--db", tmp_path / "t.db", "--log", tmp_path / "t.jsonl"]   # cached build fits
    code, out, err = run(argv)
    assert code == EXIT_UNUSABLE and "every measurement failed" in err
    rows = table_of(out).splitlines()[2:]
    assert len(rows) == 2 and not any(row.endswith("  0") for row in rows)
    assert "errors (first message of each kind; --verbose shows all):" in out
    assert "within the timeout of 1e-06 s" in out       # at build (compile) or at run (timeout)
    data = json.loads(run(argv + ["--json"])[1])
    assert data["exit_code"] == EXIT_UNUSABLE
    for task in data["tasks"]:
        assert task["tuned_ms"] is None and sum(task["errors"].values()) >= 1


@pytest.mark.parametrize("argv, message", [
    (["tune", "{dir}/nope.json", "--trials", "4"], "no such graph file"),
    (["tune", "{dir}/corrupt.json", "--trials", "4"], "invalid JSON"),
    (["tune", "{dir}/model.onnx", "--trials", "4"], "not an ONNX model with a graph"),
    (["tune", "{dir}/model.pb", "--trials", "4"], "unknown graph format '.pb'"),
    (["tune", "{graph}", "--trials", "4", "--tuner", "annealing"], "invalid choice: 'annealing'"),
    (["tune", "{graph}", "--trials", "4", "--time-budget", "ten minutes"], "bad duration 'ten minutes'"),
    (["tune", "{graph}", "--trials", "4", "--time-budget", "0s"], "more than 0 seconds"),
    (["tune", "{graph}", "--trials", "4", "--executor", "ssh://box"], "expected 'local' or 'dask://HOST:PORT'"),
    (["tune", "{graph}", "--trials", "4", "--executor", "dask://nohost"], "dask://HOST:PORT"),
    (["tune", "{graph}", "--trials", "0"], "must be at least 1"),
    (["tune", "{graph}"], "give --trials N, --time-budget DURATION (as many trials as fit), or both"),
    (["tune", "{graph}", "--trials", "4", "--db", "{dir}/notadb.db"], "notadb.db"),
    (["tune", "{graph}", "--trials", "4", "--log", "{dir}"], "is a directory"),
    (["tune", "{graph}", "--trials", "4", "--min-repeat-ms", "5000"], "does not fit in the timeout"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["best", "--db", "{dir}/missing.db"], "no tuning database at"),
    (["best", "--db", "{dir}/notadb.db"], "notadb.db"),
    (["show", "{dir}/missing.jsonl"], "no such log file"),
    (["import", "{dir}/missing.jsonl", "--db", "{dir}/new.db"], "no such log file"),
    (["export", "--db", "{dir}/missing.db", "{dir}/out.jsonl"], "no tuning database at"),
    (["bench", "{graph}", "--db", "{dir}/missing.db"], "no tuning database at"),
    (["bench", "{dir}/nope.json"], "no such graph file"),
])
def test_bad_input_exits_2_with_a_message(tmp_path, argv, message):
    graph = write_graph(tmp_path / "g.json")
    (tmp_path / "corrupt.json").write_text('{"graph": [')
    (tmp_path / "model.onnx").write_bytes(b"\x08\x07")
    (tmp_path / "model.pb").write_bytes(b"\x08\x07")
    (tmp_path / "notadb.db").write_text("this is not sqlite\n")
    code, out, err = run([a.format(dir=tmp_path, graph=graph) for a in argv])
    assert code == EXIT_BAD_INPUT
    assert message in err and err.startswith("autotune: error: ")
    assert "Traceback" not in err and not out
    assert not (tmp_path / "new.db").exists() and not (tmp_path / "missing.db").exists()


def test_help_exits_0(capsys):
    assert main(["tune", "--help"]) == EXIT_OK
    assert "--time-budget" in capsys.readouterr().out


# ---------------------------------------------------------------------------- best

def test_best_lists_the_best_record_per_workload(tuned):
    code, out, _ = run(["best", "--db", tuned["db"]])
    assert code == EXIT_OK and "2 workload(s)" in out
    data = json.loads(run(["best", "--db", tuned["db"], "--json"])[1])
    assert sorted(b["template"] for b in data["best"]) == ["complex", "reduction"]
    with Database(tuned["db"]) as db:
        assert {b["workload_key"]: b["mean_ms"] for b in data["best"]} == {
            k: pytest.approx(r.mean_cost * 1e3) for k, r in db.best_all().items()}


def test_best_missing_lists_untuned_workloads_and_exits_1(tuned, tmp_path):
    code, out, err = run(["best", "--db", tuned["db"], "--missing", tuned["graph"]])
    assert code == EXIT_OK and out.startswith("0 of 2 workload(s)") and not err
    other = write_graph(tmp_path / "wider.json", m=16)          # new matmul and softmax shapes
    code, out, err = run(["best", "--db", tuned["db"], "--missing", other])
    assert code == EXIT_UNUSABLE and out.startswith("2 of 2 workload(s)")
    assert "matmul+relu" in out
    assert err.startswith(f"autotune: 2 workload(s) of {other} have no record on this CPU") and err.count("\n") == 1
    code, out, err = run(["best", "--db", tuned["db"], "--missing", other, "--json"])
    data = json.loads(out)
    assert len(data["missing"]) == 2 and data["workloads"] == 2
    assert code == EXIT_UNUSABLE and "have no record on this CPU" in err


# ---------------------------------------------------------------------------- logs

def test_show_lists_records_and_reports_corrupt_lines_on_stderr(tuned, tmp_path):
    log = tmp_path / "damaged.jsonl"
    lines = tuned["log"].read_text().splitlines()
    log.write_text("\n".join(lines[:2] + ["{not json", '{"kind": "other"}'] + lines[2:]) + "\n{\"trunc")
    code, out, err = run(["show", log])
    assert code == EXIT_OK
    assert f"{RECORDS} record(s)" in out and "3 unreadable line(s)" in out
    assert f"{log}:3: skipped: not valid JSON" in err and f"{log}:4:" in err and f"{log}:{RECORDS + 3}:" in err
    data = json.loads(run(["show", log, "--json"])[1])
    assert len(data["records"]) == RECORDS and [p["line"] for p in data["problems"]] == [3, 4, RECORDS + 3]


def test_export_then_import_round_trips_and_is_idempotent(tuned, tmp_path):
    out_log, new_db = tmp_path / "out.jsonl", tmp_path / "new.db"
    code, out, _ = run(["export", "--db", tuned["db"], out_log])
    assert code == EXIT_OK and out.startswith(f"exported {RECORDS} of {RECORDS} record(s)")
    assert run(["export", "--db", tuned["db"], out_log])[1].startswith(f"exported 0 of {RECORDS}")
    code, out, _ = run(["import", out_log, "--db", new_db])
    assert code == EXIT_OK and out.startswith(f"imported {RECORDS} record(s)") and "(0 already there)" in out
    assert run(["import", out_log, "--db", new_db])[1].startswith("imported 0 record(s)")
    with Database(new_db) as a, Database(tuned["db"]) as b:
        assert set(a.records()) == set(b.records())
    with out_log.open("a") as f:
        f.write("garbage\n")
    code, out, err = run(["import", out_log, "--db", new_db])
    assert code == EXIT_OK and "1 unreadable line(s)" in out and f":{RECORDS + 1}: skipped" in err


def test_export_one_workload_by_key_prefix(tuned, tmp_path):
    with Database(tuned["db"]) as db:
        key = db.records()[0].workload_key
    code, out, _ = run(["export", "--db", tuned["db"], tmp_path / "one.jsonl", "--workload", key[:10]])
    assert code == EXIT_OK and out.startswith(f"exported {RECORDS // 2} of {RECORDS // 2} record(s) of workload")
    assert {r.workload_key for r in read_log(tmp_path / "one.jsonl").records} == {key}
    code, _, err = run(["export", "--db", tuned["db"], tmp_path / "x.jsonl", "--workload", "zz"])
    assert code == EXIT_BAD_INPUT and "no workload 'zz'" in err
    code, _, err = run(["export", "--db", tuned["db"], tmp_path / "x.jsonl", "--workload", ""])
    assert code == EXIT_BAD_INPUT and "is ambiguous" in err and not (tmp_path / "x.jsonl").exists()


# ---------------------------------------------------------------------------- bench

def test_bench_times_default_and_tuned_side_by_side(tuned):
    code, out, err = run(["bench", tuned["graph"], "--db", tuned["db"], "--repeat", "3"])
    assert code == EXIT_OK, err
    from tilefuse.autotune import current_target
    from tilefuse.autotune.extract import extract_tasks
    with Database(tuned["db"]) as db:      # a pick of another config than the default: what "tuned" counts
        picks = [(db.pick(t.key, current_target().key), t) for t in extract_tasks(load_json(tuned["graph"]))]
    count = sum(p is not None and p.config != dict(t.template.default_config().values) for p, t in picks)
    assert (f"2 compiled partition(s) of 2 workload(s); {count} partition(s) of {count} workload(s) compile with a "
            f"tuned config from {tuned['db']}, the others with their default (0 without a record)") in out, out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[3:]}
    assert set(rows) == {"default", "tuned", "speedup"} and rows["speedup"][0].endswith("x")
    assert rows["default"][2].startswith("±") and rows["default"][2].endswith("%")     # the runs' spread
    data = json.loads(run(["bench", tuned["graph"], "--db", tuned["db"], "--repeat", "2", "--json"])[1])
    assert data["outputs_match"] and data["untuned_partitions"] == 0 and data["tuned_workloads"] == count
    assert data["speedup"]["median"] == pytest.approx(data["default_ms"]["median"] / data["tuned_ms"]["median"])
    assert data["noise"]["tuned"] == pytest.approx(data["tuned_ms"]["median"] / data["tuned_ms"]["min"] - 1)


def test_bench_warns_about_workloads_without_records(tuned, tmp_path):
    Database(tmp_path / "empty.db").close()
    code, out, err = run(["bench", tuned["graph"], "--db", tmp_path / "empty.db", "--repeat", "1"])
    assert code == EXIT_OK
    assert "0 partition(s) of 0 workload(s) compile with a tuned config" in out and "(2 without a record)" in out
    assert err.count("2 workloads have no tuning record for") == 1 and "autotune best --missing" in err
    assert "autotune: 2 workload(s) ran with default configs" in err


# ---------------------------------------------------------------------------- pieces

def test_parse_duration():
    assert [parse_duration(t) for t in ("45", "0.5", "90s", "10m", "1h", "1h30m", "2.5m", " 1H ")] == \
        [45, 0.5, 90, 600, 3600, 5400, 150, 3600]
    for bad in ("", "m", "10x", "1m1h", "5m5m", "-3", "0", "inf", "nan"):
        with pytest.raises(ValueError):
            parse_duration(bad)


# ---------------------------------------------------------------------------- entry points

def test_python_m_autotune_runs_the_command(tuned, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "tilefuse.autotune", "show", str(tuned["log"])], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and f"{RECORDS} record(s)" in done.stdout
    done = subprocess.run([sys.executable, "-m", "tilefuse.autotune", "tune", "missing.json", "--trials", "4"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and "no such graph file" in done.stderr


def test_conv_block_example_is_what_its_generator_writes():
    spec = importlib.util.spec_from_file_location("make_conv_block_graph", REPO / "examples" / "make_conv_block_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = REPO / "examples" / "conv_block.json"
    assert path.read_text() == module.conv_block_graph().to_json()
    graph = load_json(path)
    # (partitions of the layout plan's transposes stand for no user op)
    assert [[op.kind.value for op in p.get_ops()] for p in graph.get_partitions() if p.get_ops()] == [
        ["Convolution", "BiasAdd", "ReLU"], ["Convolution", "BiasAdd", "Add", "ReLU"]]


def test_a_damaged_database_is_exit_2_with_the_fix_and_is_left_as_it_was(tmp_path):
    from test_database import damaged_database
    path = tmp_path / "tuning.db"
    before = damaged_database(path)
    graph = write_graph(tmp_path / "tiny.json")
    for argv in (["best", "--db", path], ["export", "--db", path, tmp_path / "out.jsonl"],
                 ["tune", graph, "--trials", "2", "--db", path, "--log", tmp_path / "log.jsonl"]):
        code, _, err = run(argv)
        assert code == EXIT_BAD_INPUT, (argv, err)
        assert "is damaged" in err and "autotune import LOG --db" in err and "Traceback" not in err
        assert err.count("\n") == 1, err           # one line, sqlite's own multi-line report folded in
    assert path.read_bytes() == before


def test_another_applications_database_is_exit_2_and_left_as_it_was(tmp_path):
    import sqlite3
    path = tmp_path / "music.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE records (id INTEGER PRIMARY KEY, artist TEXT, title TEXT)")
    conn.execute("INSERT INTO records VALUES (1, 'Nina Simone', 'Pastel Blues')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    log = tmp_path / "in.jsonl"
    log.write_text('{"workload": "wk1", "config": {"t": 1}, "result": [0.5]}\n')
    graph = write_graph(tmp_path / "tiny.json")
    for argv in (["best", "--db", path], ["best", "--db", path, "--missing", graph], ["import", log, "--db", path],
                 ["export", "--db", path, tmp_path / "out.jsonl"],
                 ["tune", graph, "--trials", "2", "--db", path, "--log", tmp_path / "log.jsonl"]):
        code, _, err = run(argv)
        assert code == EXIT_BAD_INPUT, (argv, err)
        assert "music.db' is a sqlite database of something else" in err and "Traceback" not in err
    assert path.read_bytes() == before


def test_a_negative_schema_version_is_exit_2_and_left_as_it_was(tmp_path):
    import sqlite3
    path = tmp_path / "tuning.db"
    Database(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '-3' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    for argv in (["best", "--db", path], ["export", "--db", path, tmp_path / "out.jsonl"]):
        code, _, err = run(argv)
        assert code == EXIT_BAD_INPUT and "schema_version '-3' is not a database schema version" in err, err
    assert path.read_bytes() == before


def test_show_and_import_report_lines_no_record_can_hold(tmp_path):
    log, db = tmp_path / "odd.jsonl", tmp_path / "tuning.db"
    log.write_text('{"workload": "w", "config": {}, "result": [0.5], "time": 1' + "0" * 400 + '}\n'
                   + "[" * 100_000 + "\n"
                   + '{"workload": "wk\\ud800", "config": {}, "result": [0.5]}\n'
                   + '{"workload": "wk1", "task": "dense\\udcff", "config": {}, "result": [0.5]}\n'
                   + '{"workload": "wk1", "config": {"t": 1}, "result": [0.5]}\n')
    for argv in (["show", log], ["show", log, "--json"], ["import", log, "--db", db]):
        code, out, err = run(argv)
        assert code == EXIT_OK and "Traceback" not in err, (argv, err)
        out.encode("utf-8")                                         # what a terminal can take
        assert [line.split(": skipped: ")[0] for line in err.splitlines()] == [f"{log}:{n}" for n in (1, 2, 3, 4)]
    assert "1 record(s) in" in run(["show", log])[1]
    with Database(db) as database:
        assert [r.config for r in database.records()] == [{"t": 1}]


def test_a_log_that_cannot_be_written_is_refused_before_anything_is_measured(tmp_path):
    graph = write_graph(tmp_path / "tiny.json")
    (tmp_path / "a_file").write_text("not a directory")
    db = tmp_path / "tuning.db"
    code, _, err = run(["tune", graph, "--trials", "2", "--db", db, "--log", tmp_path / "a_file" / "log.jsonl"])
    assert code == EXIT_BAD_INPUT and "--log" in err and "cannot write" in err and "Traceback" not in err
    assert not db.exists() or Database(db).records() == []


def test_a_log_write_failing_mid_run_is_exit_2_and_the_next_run_catches_the_log_up(tmp_path, monkeypatch):
    import errno
    from tilefuse.autotune import log as log_module
    graph = write_graph(tmp_path / "tiny.json")
    db, log = tmp_path / "tuning.db", tmp_path / "log.jsonl"
    real_write, writes = log_module._write_all_or_nothing, []

    def full_disk_on_the_second_write(fd, payload, size):
        writes.append(len(payload))
        if len(writes) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write(fd, payload, size)

    monkeypatch.setattr(log_module, "_write_all_or_nothing", full_disk_on_the_second_write)
    code, _, err = run(["tune", graph, *FAST, "--db", db, "--log", log])
    assert code == EXIT_BAD_INPUT and "Traceback" not in err
    assert f"cannot append to tuning log {log}: No space left on device" in err and "next `autotune tune`" in err
    with Database(db) as database:
        stored = {r.identity for r in database.records()}
    assert len(read_log(log).records) < len(stored)            # the db is ahead of the log
    monkeypatch.setattr(log_module, "_write_all_or_nothing", real_write)
    code, _, err = run(["tune", graph, *FAST, "--db", db, "--log", log])
    assert code == EXIT_OK, err
    with Database(db) as database:
        assert {r.identity for r in read_log(log).records} == {r.identity for r in database.records()}
    assert not read_log(log).problems


def test_the_gradient_scheduler_spends_the_run_s_trials_and_the_table_shows_each_share(tuned, tmp_path):
    args = [a for a in FAST if a not in ("--scheduler", "sequential")]
    code, out, err = run(["tune", tuned["graph"], *args, "--trials", "9", "--db", tmp_path / "g.db",
                          "--log", tmp_path / "g.jsonl"])
    assert code == EXIT_OK, err
    assert "(gradient)" in out + err
    rows = table_of(out).splitlines()[2:]
    cells = [row.split() for row in rows]
    trials = [int(c[c.index("complex" if "complex" in c else "reduction") + 2]) for c in cells]
    shares = [int(c[c.index("complex" if "complex" in c else "reduction") + 3][:-1]) for c in cells]   # % trials
    assert sum(trials) == 9 and all(t >= 1 for t in trials)
    assert abs(sum(shares) - 100) <= 1


def test_tune_reports_what_the_check_in_the_model_dropped(tuned, tmp_path, monkeypatch):
    from tilefuse.autotune.model_check import ModelCheck, WorkloadCheck
    from tilefuse.tensorir.errors import Unsupported
    db, log = tmp_path / "t.db", tmp_path / "t.jsonl"
    with Database(tuned["db"]) as old:
        key = old.records()[0].workload_key
    dropped = ModelCheck(1e-4, 1.2e-4, 1e-4, 0.02, [WorkloadCheck(key, "matmul+relu", 1, 4e-5, 6e-5, False)])
    monkeypatch.setattr(cli_tune, "check_in_model", lambda graph, database: dropped)
    code, out, err = run(["tune", tuned["graph"], *FAST, "--db", db, "--log", log])     # measures: checks
    assert code == EXIT_OK, err
    assert "in the model (steps summed): default 0.100 ms, every pick 0.120 ms (0.83x, ±2%); 1 of 1 tuned pick(s) " \
           "dropped (slower there): matmul+relu" in out

    def fails(graph, database):
        raise Unsupported("no kernel for this op")
    monkeypatch.setattr(cli_tune, "check_in_model", fails)
    code, out, err = run(["tune", tuned["graph"], *FAST, "--db", db, "--log", log, "--no-resume", "--seed", "5"])
    assert code == EXIT_OK and "the picks were not checked in the model: no kernel for this op" in err
    assert "in the model:" not in out


@pytest.mark.parametrize("command", ["show", "plot", "import"])
def test_a_file_that_is_no_log_is_one_line_and_exit_2(command, tmp_path, capsys):
    text = tmp_path / "notes.md"
    text.write_text("# notes\n\nnot a record\n" * 40)
    binary = tmp_path / "garbage.db"
    binary.write_bytes(bytes(range(256)) * 20)
    for path in (text, binary):
        argv = {"show": ["show", str(path)], "plot": ["plot", str(path), "-o", str(tmp_path / "c.png")],
                "import": ["import", str(path), "--db", str(tmp_path / "t.db")]}[command]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "not a tuning log: none of its" in err, err
    assert not (tmp_path / "t.db").exists()          # nothing was made for a file that is no log


def test_show_of_the_readme_is_one_line_and_exit_2(capsys):
    readme = Path(__file__).resolve().parents[2] / "README.md"
    assert main(["show", str(readme)]) == EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert not out and err.count("\n") == 1 and "README.md: not a tuning log: none of its" in err


def test_no_arguments_print_the_help_and_exit_2(capsys):
    assert main([]) == EXIT_BAD_INPUT          # no command ran: a script's `autotune $EMPTY` fails
    out, err = capsys.readouterr()
    assert not out and err.startswith("usage: autotune") and "tune" in err and "exit codes:" in err


def test_a_time_budget_alone_bounds_the_run_and_progress_shows_the_time_left(tmp_path):
    graph = write_graph(tmp_path / "g.json")
    code, out, err = run(["tune", graph, "--time-budget", "1.5", "--tuner", "random", "--min-repeat-ms", "0",
                          "--db", tmp_path / "t.db", "--log", tmp_path / "t.jsonl"])
    assert code == EXIT_OK, err
    progress = [line for line in out.splitlines() if line.startswith("[")]
    assert "time budget 1.5 s," in out and progress, out
    assert all(" left" in line and "trials/" not in line.split("run: ")[1] for line in progress)
    assert "stopped before their trials" not in out          # with no trial count, the budget is the end
    new = int(out.split(" new measurement(s)")[0].split()[-1])
    assert new >= len(progress) >= 2          # the defaults of both tasks, then batches while time is left
