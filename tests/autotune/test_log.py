"""JSON-lines logs: round trips, bad lines reported and skipped, import/export with a database,
several processes appending to one log."""
import json
import multiprocessing

import pytest

from tilefuse.autotune.database import Database
from tilefuse.autotune.log import (LOG_KIND, LogContents, append_records, export_log, import_log, parse_line,
                          read_log, record_line)
from tilefuse.autotune.record import Record, SCHEMA_VERSION
from tilefuse.autotune.target import Target

CPU_A = Target.of("cpu-a", "+avx2,+fma")
CPU_B = Target.of("cpu-b", "+avx512f")


def ok(workload, tile, cost, target=CPU_A):
    return Record.create(workload, "dense", "complex", {"tile": tile}, costs=[cost], target=target)


def err(workload, tile, kind="crash"):
    return Record.create(workload, "dense", "complex", {"tile": tile}, error_kind=kind,
                         error_msg="worker killed by signal 11", target=CPU_A)


def test_records_round_trip_through_a_log(tmp_path):
    path = tmp_path / "tuning_logs" / "dense.jsonl"  # parent directories are created
    records = [ok("wk1", 4, 1e-3), err("wk1", 8), ok("wk2", [-1, 16], 2e-3, CPU_B)]
    assert append_records(path, records[:2]) == 2
    assert append_records(path, records[2:]) == 1  # appended, not overwritten
    contents = read_log(path)
    assert contents == LogContents(tuple(records), ())


def test_each_line_is_one_self_describing_json_object(tmp_path):
    path = tmp_path / "t.jsonl"
    append_records(path, [ok("wk1", 4, 1e-3), err("wk1", 8, "timeout")])
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first["kind"] == LOG_KIND and first["schema_version"] == SCHEMA_VERSION
    assert first["workload_key"] == "wk1" and first["costs"] == [1e-3] and first["target_cpu"] == "cpu-a"
    assert list(first) == sorted(first)  # stable, diff-friendly key order
    assert json.loads(lines[1])["error_kind"] == "timeout"
    assert record_line(ok("wk1", 4, 1e-3)).count("\n") == 0


def test_a_corrupt_line_is_reported_and_skipped(tmp_path):
    path = tmp_path / "t.jsonl"
    good = [ok("wk1", t, t * 1e-3) for t in (1, 2, 3)]
    path.write_text(record_line(good[0]) + "\n" + "{this is not json}\n" + "\n"
                    + record_line(good[1]) + "\n" + "[1, 2]\n" + record_line(good[2]) + "\n")
    contents = read_log(path)
    assert contents.records == tuple(good)
    assert [number for number, _ in contents.problems] == [2, 5]
    assert "not valid JSON" in contents.problems[0][1]
    assert "must be a JSON object" in contents.problems[1][1]


def test_a_truncated_last_line_is_reported_and_the_next_append_is_readable(tmp_path):
    path = tmp_path / "t.jsonl"
    first, second = ok("wk1", 4, 1e-3), ok("wk1", 8, 2e-3)
    append_records(path, [first, second])
    text = path.read_text()
    path.write_text(text[: len(text) - 25])  # a writer killed mid-line
    contents = read_log(path)
    assert contents.records == (first,)
    assert contents.problems[0][0] == 2 and "truncated" in contents.problems[0][1]
    third = ok("wk1", 16, 3e-3)
    append_records(path, [third])
    contents = read_log(path)
    assert contents.records == (first, third)
    assert [number for number, _ in contents.problems] == [2]


@pytest.mark.parametrize("line, reason", [
    ('{"kind": "other-tool", "x": 1}', "not a 'tilefuse-record'"),
    ('{"kind": "tilefuse-record", "schema_version": 99, "workload_key": "w"}', "newer than this tilefuse"),
    ('{"kind": "tilefuse-record", "schema_version": 1, "workload_key": "w"}', "missing field"),
    ('{"workload": "w", "config": {"t": 1}, "result": [1.0], "error": "segfault: x"}', None),
    ('"just a string"', "must be a JSON object"),
])
def test_foreign_and_invalid_lines_are_problems_not_failures(tmp_path, line, reason):
    path = tmp_path / "t.jsonl"
    good = ok("wk1", 4, 1e-3)
    path.write_text(line + "\n" + record_line(good) + "\n")
    contents = read_log(path)
    if reason is None:  # a legacy line with an unknown error prefix is a valid runtime error
        assert len(contents.records) == 2 and contents.records[0].error_kind == "runtime"
    else:
        assert contents.records == (good,)
        assert contents.problems[0][0] == 1 and reason in contents.problems[0][1]


def test_lines_no_record_can_hold_are_problems_not_failures(tmp_path):
    path = tmp_path / "t.jsonl"
    good = ok("wk1", 4, 1e-3)
    path.write_text('{"workload": "w", "config": {}, "result": [0.5], "time": 1' + "0" * 400 + '}\n'  # beyond float
                    + '{"workload": "w", "config": {}, "result": [1' + "0" * 400 + ']}\n'
                    + "[" * 100_000 + "]" * 100_000 + "\n"                  # beyond the recursion limit
                    + '{"workload": "w", "config": {}, "result": [0.5], "extra": ' + "[" * 5000 + "]" * 5000 + '}\n'
                    + '{"workload": "wk\\ud800", "config": {}, "result": [0.5]}\n'   # a lone surrogate escape
                    + record_line(good).replace('"dense"', '"dense\\udcff"') + "\n"
                    + record_line(good) + "\n")
    contents = read_log(path)
    assert contents.records == (good,)
    assert [(number, reason.split(" (")[0]) for number, reason in contents.problems] == [
        (1, "timestamp must be finite, got an int too large for a float"),
        (2, "each cost must be finite, got an int too large for a float"),
        (3, "JSON nested too deeply to read"),
        (4, "JSON nested too deeply to read"),
        (5, "workload_key must be valid Unicode text"),
        (6, "task_name must be valid Unicode text")]
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_line('{"workload": ' * 100_000)


def test_a_record_with_an_invalid_field_is_a_problem(tmp_path):
    path = tmp_path / "t.jsonl"
    data = json.loads(record_line(ok("wk1", 4, 1e-3)))
    data["error_kind"] = "meltdown"
    path.write_text(json.dumps(data) + "\n")
    contents = read_log(path)
    assert contents.records == () and "unknown error kind 'meltdown'" in contents.problems[0][1]


def test_bytes_that_are_not_utf8_are_a_problem(tmp_path):
    path = tmp_path / "t.jsonl"
    good = ok("wk1", 4, 1e-3)
    path.write_bytes(b"\xff\xfe\x00garbage\n" + record_line(good).encode() + b"\n")
    contents = read_log(path)
    assert contents.records == (good,) and "not UTF-8" in contents.problems[0][1]


def test_legacy_lines_are_read(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_text('{"workload": "wk1", "config": {"tile": 4}, "result": [0.002], "cpu": "haswell", "time": 5.0}\n'
                    '{"workload": "wk1", "config": {"tile": 8}, "result": [], "error": "compile: bad IR"}\n')
    contents = read_log(path)
    assert contents.problems == ()
    assert [(r.config["tile"], r.error_kind) for r in contents.records] == [(4, None), (8, "compile")]


def test_parse_line_and_missing_files():
    with pytest.raises(ValueError, match="truncated"):
        parse_line('{"workload": "w"')
    with pytest.raises(FileNotFoundError):
        read_log("/nonexistent/dir/log.jsonl")


def test_append_refuses_non_records_and_leaves_the_file_alone(tmp_path):
    path = tmp_path / "t.jsonl"
    append_records(path, [ok("wk1", 4, 1e-3)])
    before = path.read_bytes()
    with pytest.raises(TypeError, match="Record objects"):
        append_records(path, [ok("wk1", 8, 1e-3), {"workload": "wk1"}])
    assert path.read_bytes() == before
    assert append_records(path, []) == 0 and path.read_bytes() == before


# -- import / export ----------------------------------------------------------------------------------

def test_import_is_idempotent_and_reports_problems(tmp_path):
    path = tmp_path / "t.jsonl"
    records = [ok("wk1", 4, 2e-3), ok("wk1", 8, 1e-3), err("wk1", 16)]
    append_records(path, records)
    with open(path, "a") as f:
        f.write("{corrupt\n")
    with Database(tmp_path / "t.db") as db:
        imported, skipped, problems = import_log(db, path)
        assert (imported, skipped) == (3, 0) and [n for n, _ in problems] == [4]
        imported, skipped, problems = import_log(db, path)
        assert (imported, skipped) == (0, 3) and len(problems) == 1
        assert db.records() == records
        assert db.best("wk1", CPU_A.key).config == {"tile": 8}


def test_export_then_import_reproduces_the_database(tmp_path):
    records = [ok("wk1", 4, 2e-3), err("wk1", 8, "wrong_answer"), ok("wk2", 4, 1e-3, CPU_B)]
    log = tmp_path / "export.jsonl"
    with Database(tmp_path / "a.db") as source:
        source.add_many(records)
        assert export_log(source, log) == 3
        assert export_log(source, log) == 0  # the log already holds them all
    with Database(tmp_path / "b.db") as copy:
        assert import_log(copy, log) == (3, 0, ())
        assert copy.records() == records
        assert copy.best("wk2", CPU_B.key) == records[2]


def test_export_filters_by_workload_and_target(tmp_path):
    with Database(tmp_path / "a.db") as db:
        db.add_many([ok("wk1", 4, 2e-3), ok("wk2", 4, 1e-3), ok("wk1", 8, 1e-3, CPU_B)])
        assert export_log(db, tmp_path / "wk1.jsonl", workload_key="wk1") == 2
        assert export_log(db, tmp_path / "wk1a.jsonl", workload_key="wk1", target_key=CPU_A.key) == 1
        assert {r.workload_key for r in read_log(tmp_path / "wk1.jsonl").records} == {"wk1"}
        assert export_log(db, tmp_path / "none.jsonl", workload_key="wk9") == 0


# -- several processes ---------------------------------------------------------------------------------

def append_many(path, worker, count):
    for i in range(count):
        append_records(path, [Record.create("wk1", "dense", "complex", {"worker": worker, "i": i},
                                            costs=[1e-3], target=CPU_A)])


def test_four_processes_append_to_one_log(tmp_path):
    path = str(tmp_path / "shared.jsonl")
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=append_many, args=(path, w, 50)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
    assert [p.exitcode for p in workers] == [0, 0, 0, 0]
    contents = read_log(path)
    assert contents.problems == ()
    assert len({(r.config["worker"], r.config["i"]) for r in contents.records}) == 200
