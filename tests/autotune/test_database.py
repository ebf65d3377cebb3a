"""Database: round trips, best-record view, per-target separation, dedupe, migration of a legacy
file, corrupt files, several processes writing one file, a writer killed mid-run."""
import json
import multiprocessing
import os
import re
import signal
import sqlite3
import time

import pytest

from tilefuse.autotune.database import (DB_SCHEMA_VERSION, Database, TuningDatabaseError, WorkloadInfo)
from tilefuse.autotune.record import Record, SCHEMA_VERSION
from tilefuse.autotune.target import Target, current_target, target_key

CPU_A = Target.of("cpu-a", "+avx2,+fma")
CPU_B = Target.of("cpu-b", "+avx512f")


def ok(workload, tile, cost, target=CPU_A, timestamp=None):
    return Record.create(workload, "dense", "complex", {"tile": tile}, costs=[cost, cost],
                         target=target, timestamp=timestamp)


def err(workload, tile, kind="crash", target=CPU_A):
    return Record.create(workload, "dense", "complex", {"tile": tile}, error_kind=kind,
                         error_msg=f"{kind} on tile {tile}", target=target)


@pytest.fixture
def db(tmp_path):
    with Database(tmp_path / "tuning.db") as database:
        yield database


# -- round trips and queries -------------------------------------------------------------------------

def test_records_round_trip_through_the_file(tmp_path):
    path = tmp_path / "sub" / "tuning.db"
    records = [ok("wk1", 4, 3e-3), err("wk1", 8, "timeout"), ok("wk2", 4, 1e-3, target=CPU_B)]
    with Database(path) as db:
        assert db.add_many(records) == 3
    with Database(path) as db:  # reopened: everything persisted
        assert db.records() == records
        assert db.records("wk1") == records[:2]
        assert db.records(target_key=CPU_B.key) == records[2:]
        assert db.records("wk1", ok_only=True) == records[:1]
        assert db.schema_version == DB_SCHEMA_VERSION


def test_file_is_in_wal_mode_with_the_documented_tables(db):
    conn = sqlite3.connect(db.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    assert {"workloads", "records", "meta", "best_records"} <= names
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(DB_SCHEMA_VERSION),)
    conn.close()


def test_rows_hold_json_and_a_null_mean_cost_for_errors(db):
    db.add_many([ok("wk1", [-1, 4], 2e-3), err("wk1", [-1, 8])])
    conn = sqlite3.connect(db.path)
    rows = conn.execute("SELECT config, config_key, costs, mean_cost, error_kind, versions, schema_version "
                        "FROM records ORDER BY id").fetchall()
    conn.close()
    assert rows[0][:5] == ('{"tile":[-1,4]}', '{"tile":[-1,4]}', "[0.002, 0.002]", 2e-3, None)
    assert json.loads(rows[0][5])["tilefuse"] and rows[0][6] == SCHEMA_VERSION
    assert rows[1][3] is None and rows[1][4] == "crash"


def test_best_picks_the_least_mean_cost_and_ignores_errors(db):
    db.add_many([ok("wk1", 4, 3e-3), err("wk1", 16), ok("wk1", 8, 1e-3), ok("wk1", 32, 2e-3),
                 err("wk1", 64, "wrong_answer")])
    best = db.best("wk1", CPU_A.key)
    assert best.config == {"tile": 8} and best.mean_cost == 1e-3


def test_best_breaks_ties_by_the_earliest_record(db):
    first, second = ok("wk1", 4, 1e-3, timestamp=1.0), ok("wk1", 8, 1e-3, timestamp=2.0)
    db.add_many([first, second])
    assert db.best("wk1", CPU_A.key) == first


def test_best_is_none_when_every_measurement_failed(db):
    db.add_many([err("wk1", 4), err("wk1", 8, "compile")])
    assert db.best("wk1", CPU_A.key) is None
    assert db.missing(["wk1"], CPU_A.key) == ["wk1"]


def test_targets_are_kept_apart(db):
    db.add_many([ok("wk1", 4, 1e-3, CPU_A), ok("wk1", 8, 5e-3, CPU_A),
                 ok("wk1", 8, 2e-3, CPU_B), ok("wk2", 4, 1e-3, CPU_B)])
    assert db.best("wk1", CPU_A.key).config == {"tile": 4}
    assert db.best("wk1", CPU_B.key).config == {"tile": 8}
    assert db.best("wk1") is None  # this machine is neither cpu-a nor cpu-b
    assert sorted(db.best_all(CPU_B.key)) == ["wk1", "wk2"]
    assert sorted(db.best_all(CPU_A.key)) == ["wk1"] and db.best_all() == {}
    assert db.missing(["wk1", "wk2"], CPU_A.key) == ["wk2"]
    assert db.missing(["wk1", "wk2"], CPU_B.key) == []
    assert db.measured_configs("wk1", CPU_A.key) == {'{"tile":4}', '{"tile":8}'}
    assert db.measured_configs("wk1", CPU_B.key) == {'{"tile":8}'}


def test_defaults_use_the_current_target(db):
    here = ok("wk1", 4, 1e-3, target=current_target())
    db.add(here)
    assert db.best("wk1") == here and db.best_all() == {"wk1": here}
    assert db.missing(["wk1", "wk2"]) == ["wk2"] and db.measured_configs("wk1") == {'{"tile":4}'}


def test_measured_configs_count_errors_too(db):
    db.add_many([ok("wk1", [-1, 4], 1e-3), err("wk1", [-1, 2], "timeout")])
    assert db.measured_configs("wk1", CPU_A.key) == {'{"tile":[-1,4]}', '{"tile":[-1,2]}'}
    assert db.measured_configs("wk2", CPU_A.key) == set()


def test_missing_keeps_order_and_drops_repeats(db):
    db.add(ok("wk2", 4, 1e-3))
    assert db.missing(["wk3", "wk2", "wk1", "wk3"], CPU_A.key) == ["wk3", "wk1"]
    with pytest.raises(TypeError, match="list of workload keys"):
        db.missing("wk1")


def test_the_same_measurement_is_stored_once(db):
    r = ok("wk1", 4, 1e-3)
    assert db.add(r) is True and db.add(r) is False
    assert db.add_many([r, ok("wk1", 8, 2e-3), ok("wk1", 8, 2e-3, timestamp=5.0),
                        ok("wk1", 8, 2e-3, timestamp=5.0)]) == 2
    assert len(db.records()) == 3


def test_add_many_is_all_or_nothing(db):
    with pytest.raises(TypeError, match="Record objects"):
        db.add_many([ok("wk1", 4, 1e-3), {"workload_key": "wk1"}])
    assert db.records() == [] and db.workloads() == []


def test_workloads_registered_explicitly_and_by_records(db):
    assert db.add_workload("wk1", "dense", "complex", {"m": 128, "dtype": "float32"}) is True
    assert db.add_workload("wk1", "dense", "complex", {"m": 128}) is False
    db.add(Record.create("wk2", "relu", "injective", {"v": 8}, costs=[1e-3], target=CPU_A))
    infos = db.workloads()
    assert [(w.key, w.task_name, w.template) for w in infos] == [("wk1", "dense", "complex"),
                                                                ("wk2", "relu", "injective")]
    assert infos[0].description == {"m": 128, "dtype": "float32"} and infos[1].description == {}
    assert isinstance(infos[0], WorkloadInfo) and infos[0].created > 0


@pytest.mark.parametrize("args, error, message", [
    (("wk1", "relu", "complex"), ValueError, "already registered as task 'dense'"),
    (("wk1", "dense", "injective"), ValueError, "template 'complex'"),
    (("", "dense", "complex"), ValueError, "must not be empty"),
    ((3, "dense", "complex"), ValueError, "key must be a str"),
    (("wk2", "dense", "complex", ["m", 1]), ValueError, "description must be a dict"),
    (("wk2", "dense", "complex", {"m": float("inf")}), ValueError, "not plain JSON"),
    (("wk2", "dense\ud800", "complex"), ValueError, "task_name must be valid Unicode text"),
])
def test_bad_workloads_are_rejected(db, args, error, message):
    db.add_workload("wk1", "dense", "complex")
    with pytest.raises(error, match=message):
        db.add_workload(*args)


def test_closed_database_and_foreign_process_are_refused(tmp_path, monkeypatch):
    db = Database(tmp_path / "t.db")
    monkeypatch.setattr(os, "getpid", lambda: -12345)
    with pytest.raises(RuntimeError, match="opened in another process"):
        db.records()
    monkeypatch.undo()
    db.close()
    with pytest.raises(ValueError, match="is closed"):
        db.records()


# -- bad files -------------------------------------------------------------------------------------

def test_a_text_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("these are not the tuning records you are looking for\n")
    with pytest.raises(TuningDatabaseError, match="notes.db.*not a sqlite database"):
        Database(path)
    assert path.read_text().startswith("these are not")  # untouched


def test_a_corrupt_sqlite_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "broken.db"
    with Database(path) as db:
        db.add(ok("wk1", 4, 1e-3))
    data = bytearray(path.read_bytes())
    data[16:] = b"\xff" * (len(data) - 16)  # keep the header, destroy the rest
    path.write_bytes(bytes(data))
    for suffix in ("-wal", "-shm"):
        if os.path.exists(str(path) + suffix):
            os.remove(str(path) + suffix)
    with pytest.raises(TuningDatabaseError, match="broken.db"):
        Database(path)


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(TuningDatabaseError, match="is a directory"):
        Database(tmp_path)


def test_another_applications_database_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL)")
    conn.commit()
    conn.close()
    with pytest.raises(TuningDatabaseError, match="something else.*invoices"):
        Database(path)
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["invoices"]
    conn.close()


FOREIGN_SCHEMAS = {
    "other tables": ["CREATE TABLE songs (title TEXT)", "INSERT INTO songs VALUES ('Pastel Blues')"],
    "a records table": ["CREATE TABLE records (id INTEGER PRIMARY KEY, artist TEXT, title TEXT)",
                        "INSERT INTO records VALUES (1, 'Nina Simone', 'Pastel Blues')"],
    "a workloads table": ["CREATE TABLE workloads (name TEXT, hours REAL)", "INSERT INTO workloads VALUES ('ops', 3.5)"],
    "half a legacy records table": ["CREATE TABLE records (id INTEGER PRIMARY KEY, workload_key TEXT, config TEXT)"],
    "a meta table": ["CREATE TABLE meta (key TEXT, value TEXT)", "INSERT INTO meta VALUES ('owner', 'someone')"],
    "a schema version": ["CREATE TABLE meta (key TEXT, value TEXT)", "INSERT INTO meta VALUES ('schema_version', '1')",
                         "CREATE TABLE songs (title TEXT)"],
    "only a view": ["CREATE VIEW numbers AS SELECT 1 AS one"],
}


@pytest.mark.parametrize("schema", FOREIGN_SCHEMAS)
def test_a_foreign_file_is_refused_before_anything_is_written_into_it(tmp_path, schema):
    path = tmp_path / "music.db"
    conn = sqlite3.connect(path)
    for statement in FOREIGN_SCHEMAS[schema]:
        conn.execute(statement)
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(TuningDatabaseError, match=r"music\.db' is a sqlite database of something else"):
        Database(path)
    assert path.read_bytes() == before                      # not even switched to WAL
    assert not os.path.exists(str(path) + "-wal")


def test_an_empty_file_becomes_a_tuning_database(tmp_path):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    with Database(path) as db:
        db.add(ok("wk1", 4, 1e-3))
        assert db.schema_version == DB_SCHEMA_VERSION and len(db.records()) == 1


def test_a_newer_database_is_refused_not_damaged(tmp_path):
    path = tmp_path / "future.db"
    Database(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(DB_SCHEMA_VERSION + 1)])
    conn.commit()
    conn.close()
    with pytest.raises(TuningDatabaseError, match="newer than this tilefuse"):
        Database(path)


@pytest.mark.parametrize("version, message", [
    ("-3", "meta schema_version '-3' is not a database schema version"),
    ("x", "meta schema_version 'x' is not a database schema version"),
    ("", "meta schema_version '' is not a database schema version"),
    (str(DB_SCHEMA_VERSION + 1), "newer than this tilefuse"),
])
def test_a_schema_version_this_tilefuse_cannot_use_is_refused_and_left_alone(tmp_path, version, message):
    path = tmp_path / "odd.db"
    with Database(path) as db:
        db.add(ok("wk1", 4, 1e-3))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [version])
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(TuningDatabaseError, match=r"odd\.db.*" + re.escape(message)):
        Database(path)
    assert path.read_bytes() == before


# -- migration of a legacy (schema version 0) database ----------------------------------------------

def make_legacy_database(path):
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE workloads (key TEXT PRIMARY KEY, task_name TEXT, template TEXT, description TEXT);
        CREATE TABLE records (id INTEGER PRIMARY KEY, workload_key TEXT, config TEXT, costs TEXT,
                              error_kind TEXT, error_msg TEXT, target_cpu TEXT, target_key TEXT,
                              timestamp REAL);
        INSERT INTO workloads VALUES ('wk1', 'dense', 'complex', '{"m": 64}');
    """)
    legacy_key = target_key("oldcpu", "")
    rows = [
        ("wk1", '{"tile": [-1, 8], "unroll": true}', "[0.004, 0.002]", None, None, 10.0),
        ("wk1", '{"unroll": false, "tile": [-1, 4]}', "[0.001]", None, None, 11.0),
        ("wk1", '{"tile": [-1, 2]}', "[]", "timeout", "took too long", 12.0),
        ("wk7", '{"v": 4}', "[0.5]", None, None, 13.0),        # a workload never registered
        ("wk1", "{not json", "[0.0001]", None, None, 14.0),    # a damaged row
    ]
    conn.executemany("INSERT INTO records (workload_key, config, costs, error_kind, error_msg, target_cpu, "
                     "target_key, timestamp) VALUES (?, ?, ?, ?, ?, 'oldcpu', ?, ?)",
                     [(w, c, k, e, m, legacy_key, t) for w, c, k, e, m, t in rows])
    conn.commit()
    conn.close()
    return legacy_key


def test_a_legacy_database_is_migrated_in_place(tmp_path):
    path = tmp_path / "old.db"
    legacy_key = make_legacy_database(path)
    with Database(path) as db:
        assert db.schema_version == DB_SCHEMA_VERSION
        best = db.best("wk1", legacy_key)
        assert best.config == {"tile": [-1, 4], "unroll": False} and best.mean_cost == 1e-3
        assert best.task_name == "dense" and best.template == "complex"  # filled from workloads
        assert best.versions == {} and best.target_features == "" and best.build_seconds == 0.0
        assert db.measured_configs("wk1", legacy_key) >= {'{"tile":[-1,8],"unroll":true}',
                                                          '{"tile":[-1,4],"unroll":false}',
                                                          '{"tile":[-1,2]}'}
        assert db.best("wk7", legacy_key).mean_cost == 0.5
        assert [w.key for w in db.workloads()] == ["wk1", "wk7"]
        assert db.workloads()[0].description == {"m": 64}
        with pytest.warns(UserWarning, match="row id 5 skipped"):
            assert len(db.records("wk1")) == 3  # the damaged row is reported, the rest read
        db.add(ok("wk1", 16, 1e-4, target=CPU_A))  # and new records go in as usual
        assert db.best("wk1", CPU_A.key).config == {"tile": 16}
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT DISTINCT schema_version FROM records WHERE id <= 5").fetchall() == [(0,)]
    conn.close()
    with Database(path) as db:  # a second open finds nothing more to do
        assert db.schema_version == DB_SCHEMA_VERSION
        with pytest.warns(UserWarning, match="row id 5 skipped"):
            assert len(db.records()) == 5


def test_a_damaged_best_row_gives_way_to_the_next_valid_one(db):
    db.add_many([ok("wk1", 4, 1e-3), ok("wk1", 8, 2e-3), ok("wk1", 16, 3e-3)])
    conn = sqlite3.connect(db.path)
    conn.execute("UPDATE records SET costs = 'garbage' WHERE config_key = '{\"tile\":4}'")
    conn.commit()
    conn.close()
    with pytest.warns(UserWarning, match="row id 1 skipped.*costs is not JSON"):
        assert db.best("wk1", CPU_A.key).config == {"tile": 8}
    with pytest.warns(UserWarning, match="row id 1 skipped"):
        assert db.best_all(CPU_A.key)["wk1"].config == {"tile": 8}


# -- several processes -------------------------------------------------------------------------------

def write_records(path, worker, count, barrier):
    barrier.wait()  # every process opens (and creates) the file at once
    with Database(path) as db:
        for i in range(count):
            r = Record.create(f"wk{i % 3}", "dense", "complex", {"worker": worker, "i": i},
                              costs=[1e-3 * (1 + i)], target=CPU_A)
            assert db.add(r)


def test_four_processes_write_one_new_file(tmp_path):
    path = str(tmp_path / "shared.db")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    workers = [ctx.Process(target=write_records, args=(path, w, 50, barrier)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(120)
    assert [p.exitcode for p in workers] == [0, 0, 0, 0]
    with Database(path) as db:
        records = db.records()
        assert len(records) == 200
        assert len({(r.config["worker"], r.config["i"]) for r in records}) == 200
        assert db.best("wk0", CPU_A.key).config["i"] == 0
        assert db._conn().execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def write_until_killed(path, counter):
    with Database(path) as db:
        i = 0
        while True:
            db.add(Record.create("wk1", "dense", "complex", {"i": i}, costs=[1e-3], target=CPU_A))
            i += 1
            counter.value = i


def test_a_writer_killed_mid_run_loses_nothing_committed(tmp_path):
    path = str(tmp_path / "killed.db")
    ctx = multiprocessing.get_context("spawn")
    counter = ctx.Value("i", 0, lock=False)
    proc = ctx.Process(target=write_until_killed, args=(path, counter))
    proc.start()
    deadline = time.monotonic() + 60
    while counter.value < 30 and time.monotonic() < deadline and proc.is_alive():
        time.sleep(0.01)
    committed = counter.value
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    assert committed >= 30 and proc.exitcode == -signal.SIGKILL
    with Database(path) as db:
        stored = db.records()
        assert len(stored) >= committed
        assert [r.config["i"] for r in stored] == list(range(len(stored)))
        assert db._conn().execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_switching_to_wal_is_retried_while_another_opener_holds_the_file():
    from tilefuse.autotune.database import _enable_wal

    class LockedTwice:
        calls = 0

        def enable_wal(self):
            self.calls += 1
            if self.calls <= 2:
                raise sqlite3.OperationalError("database is locked")

    db = LockedTwice()
    _enable_wal(db)
    assert db.calls == 3

    class Broken:
        def enable_wal(self):
            raise sqlite3.OperationalError("disk I/O error")

    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        _enable_wal(Broken())


def damaged_database(path, record=None) -> bytes:
    """A database at ``path`` with one record (default: of wk1 on CPU_A), then its records
    table's root page overwritten (the header stays valid); its bytes."""
    with Database(path) as db:
        db.add(record or ok("wk1", 4, 1e-3))
    conn = sqlite3.connect(path)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'records'").fetchone()[0]
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    start = (root - 1) * page
    data[start:start + 400] = b"\xab" * 400
    path.write_bytes(bytes(data))
    return bytes(data)


def test_a_damaged_page_is_found_at_open_and_nothing_is_written_into_the_file(tmp_path):
    path = tmp_path / "damaged.db"
    before = damaged_database(path)
    with pytest.raises(TuningDatabaseError, match=r"'.*damaged\.db' is damaged \(sqlite quick_check: .*"
                                                  r"autotune import LOG --db"):
        Database(path)
    assert path.read_bytes() == before


def test_text_that_is_not_utf8_in_a_row_skips_the_row_with_a_warning(tmp_path):
    path = tmp_path / "rows.db"
    with Database(path) as db:
        db.add_many([ok("wk1", 4, 1e-3), ok("wk1", 8, 2e-3), ok("wk2", 4, 1e-3)])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE records SET task_name = CAST(x'c3ff28' AS TEXT) WHERE id = 1")
    conn.execute("UPDATE records SET target_features = CAST(x'80' AS TEXT) WHERE id = 3")
    conn.execute("UPDATE workloads SET template = CAST(x'ff' AS TEXT) WHERE key = 'wk2'")
    conn.commit()
    conn.close()
    with Database(path) as db:
        with pytest.warns(UserWarning) as caught:
            assert [r.config for r in db.records()] == [{"tile": 8}]
        assert [str(w.message).split(" (")[0] for w in caught] == [
            f"{path}: records row id 1 skipped: task_name must be valid Unicode text",
            f"{path}: records row id 3 skipped: target_features must be valid Unicode text"]
        with pytest.warns(UserWarning, match="records row id 1 skipped"):
            assert db.best("wk1", CPU_A.key).config == {"tile": 8}           # the next valid one
        with pytest.warns(UserWarning, match="records row id [13] skipped"):
            assert sorted(db.best_all(CPU_A.key)) == ["wk1"]
        with pytest.warns(UserWarning, match=r"rows\.db: workloads row 'wk2' skipped: column template"):
            assert [w.key for w in db.workloads()] == ["wk1"]


def test_damage_met_after_the_open_is_a_tuning_database_error_naming_the_file(tmp_path, monkeypatch):
    import tilefuse.autotune.database as database
    from tilefuse.autotune.dispatch import HistoryBest, workload_key
    from tilefuse.schedule import template_for
    from tilefuse.tensorir import compute, placeholder
    A = placeholder((8,), name="A")
    B = compute((8,), lambda i: A[i] * 2.0, name="B")
    template = template_for(B)
    path = tmp_path / "damaged.db"
    before = damaged_database(path, Record.create(workload_key(template), "B", template.name,
                                                  template.default_config().values, costs=[1e-3]))
    monkeypatch.setattr(database, "_check_integrity", lambda conn, p: None)   # damage quick_check misses
    fix = r"damaged\.db' cannot be used \(sqlite says: .*\); .*`autotune import LOG --db .*damaged\.db`"
    with Database(path) as db:
        for read in (db.records, db.best_all, lambda: db.best(workload_key(template))):
            with pytest.raises(TuningDatabaseError, match=fix):
                read()
        with pytest.raises(TuningDatabaseError, match=fix):
            db.add(ok("wk1", 8, 2e-3))
        with pytest.raises(TuningDatabaseError, match=fix):
            HistoryBest(db).config_for(template)
    assert path.read_bytes() == before


def test_a_locked_file_stays_an_operational_error_to_wait_for(tmp_path, monkeypatch):
    import tilefuse.autotune.database as database
    path = tmp_path / "busy.db"
    Database(path).close()
    monkeypatch.setattr(database, "BUSY_TIMEOUT_SECONDS", 0.05)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")                      # another writer holds the write lock
    try:
        with Database(path) as db:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                db.add(ok("wk1", 4, 1e-3))
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_read_only_database_is_read_without_wal_and_refuses_writes(tmp_path, monkeypatch):
    import tilefuse.autotune.database as database
    path = tmp_path / "shipped.db"
    with Database(path) as db:
        db.add(ok("wk1", 4, 1e-3))
    for suffix in ("-wal", "-shm"):
        assert not os.path.exists(str(path) + suffix)            # checkpointed at close
    monkeypatch.setattr(database, "_read_only", lambda p: True)   # as when the file or its directory is read-only
    with Database(path) as db:
        assert db.read_only and db.best("wk1", CPU_A.key).costs == (1e-3, 1e-3)
        with pytest.raises(TuningDatabaseError, match="is read-only here"):
            db.add(ok("wk1", 8, 2e-3))
    for suffix in ("-wal", "-shm"):
        assert not os.path.exists(str(path) + suffix)            # nothing created next to it


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_file_in_a_read_only_directory_opens_read_only(tmp_path):
    path = tmp_path / "ro" / "tuning.db"
    with Database(path) as db:
        db.add(ok("wk1", 4, 1e-3))
    os.chmod(path.parent, 0o555)
    try:
        with Database(path) as db:
            assert db.read_only and db.best("wk1", CPU_A.key) is not None
    finally:
        os.chmod(path.parent, 0o755)


# ---------------------------------------------------------------------------- claims

def test_a_claim_is_granted_once_and_ends_with_its_record(tmp_path):
    path = tmp_path / "claims.db"
    a, b = Database(path), Database(path)
    keys = ['{"i":1}', '{"i":2}', '{"i":3}']
    assert a.claim("wk1", CPU_A.key, keys[:2]) == keys[:2]
    assert b.claim("wk1", CPU_A.key, keys) == keys[2:]                  # a holds the first two
    assert a.claim("wk1", CPU_A.key, keys[:1]) == keys[:1]              # its own claim again
    a.add(Record.create("wk1", "dense", "complex", {"i": 1}, costs=[1e-3], target=CPU_A))
    assert {c.config_key for c in a.claims("wk1")} == set(keys[1:])    # the record ended its claim
    assert b.claim("wk1", CPU_A.key, keys[:1]) == []                    # measured: never granted again
    assert b.claim("wk1", CPU_B.key, keys[:1]) == keys[:1]              # another target is another config
    a.release("wk1", CPU_A.key, keys)                                    # only a's own claims go
    assert {(c.config_key, c.owner) for c in b.claims("wk1")} == {(keys[2], b.claim_owner), (keys[0], b.claim_owner)}
    assert b.claim("wk1", CPU_A.key, keys[1:2]) == keys[1:2]
    a.close(), b.close()


def test_a_stale_claim_is_taken_over(tmp_path, monkeypatch):
    path = tmp_path / "claims.db"
    a, b = Database(path), Database(path)
    assert a.claim("wk1", CPU_A.key, ['{"i":1}', '{"i":2}']) == ['{"i":1}', '{"i":2}']
    # a's process is gone (a pid that runs no process), or its claim is older than the timeout
    a._conn().execute("UPDATE claims SET pid = 2147483600 WHERE config_key = '{\"i\":1}'")
    a._conn().execute("UPDATE claims SET claimed = 0 WHERE config_key = '{\"i\":2}'")
    a._conn().commit()
    assert b.claim("wk1", CPU_A.key, ['{"i":1}', '{"i":2}']) == ['{"i":1}', '{"i":2}']
    assert {c.owner for c in a.claims()} == {b.claim_owner}
    a.close(), b.close()


def test_a_read_only_file_shows_claims_and_grants_none(tmp_path, monkeypatch):
    import tilefuse.autotune.database as database
    path = tmp_path / "ro.db"
    with Database(path) as db:
        db.claim("wk1", CPU_A.key, ['{"i":1}'])
    monkeypatch.setattr(database, "_read_only", lambda p: True)
    with Database(path) as ro:
        assert ro.read_only and len(ro.claims()) == 1
        ro.release("wk1", CPU_A.key, ['{"i":1}'])                        # nothing it may write: a no-op
        with pytest.raises(TuningDatabaseError, match="read-only"):
            ro.claim("wk1", CPU_A.key, ['{"i":2}'])


def test_sqlites_multi_line_damage_report_is_folded_into_one_line():
    from tilefuse.autotune.database import _check_integrity

    class Reports:
        def execute(self, sql):
            return self

        def fetchall(self):
            return [("*** in database main ***\nOn tree page 2 cell 0: invalid page number 99",),
                    ("row 3 missing from index idx",)]

    with pytest.raises(TuningDatabaseError) as caught:
        _check_integrity(Reports(), "x.db")
    assert "\n" not in str(caught.value)
    assert "quick_check: *** in database main *** On tree page 2 cell 0: invalid page number 99; row 3" in str(caught.value)
