"""Seeded fuzz cases for tuning logs and databases: JSON-lines logs with mutated lines, and
sqlite databases that are truncated, overwritten in a page, zero-length, another application's,
of a newer schema, with damaged rows or a garbage WAL file, or read-only; fed to
``autotune.log``, ``autotune.database.Database`` and the ``autotune`` command (``show``,
``import``, ``export``, ``best``, ``tune`` on a one-op graph).

What must hold: the command exits 0, 1, 2 or 3, with a message on stderr when it is not 0, and
never prints a traceback (stdout encodes strictly as UTF-8, like a terminal's); a damaged or
foreign database is exit 2 and is left byte-identical; ``read_log`` never fails on a bad line;
after ``import``, ``export`` and ``tune`` the log and the database hold the same records (a
log/db pair does not diverge).

Each scenario of ``STORE_SCENARIOS`` is (name, plan, run): ``plan(rng)`` draws the case's
parameters (cheap, at generation), ``run(plan, tmp)`` does it in a temporary directory.

Example:
    >>> case = store_case(0)
    >>> case.description.startswith("log lines")
    True
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass

import numpy as np

from fuzz_outcomes import CLEAN, LEAK, OK, WRONG, Outcome, classify_exception, describe_exception, first_line, worst

REPO_LOG = "mlp.jsonl"
TINY_GRAPH = {"graph": [{"id": 0, "kind": "ReLU", "attrs": {}, "inputs": [
    {"id": 0, "dtype": "f32", "shape": [4, 8], "stride": [8, 1], "layout_type": "strided"}], "outputs": [
    {"id": 1, "dtype": "f32", "shape": [4, 8], "stride": [8, 1], "layout_type": "strided"}]}]}
ALLOWED_EXIT_CODES = (0, 1, 2, 3)


# ---------------------------------------------------------------------------- the command

@dataclass(frozen=True)
class CliResult:
    """What one ``autotune`` call did: exit code (None when an exception escaped ``main``),
    stdout, stderr and that exception.

    Example:
        >>> CliResult(0, "done", "", None).code
        0
    """
    code: int | None
    stdout: str
    stderr: str
    error: BaseException | None


def run_cli(argv: list) -> CliResult:
    """``autotune.cli.main(argv)`` with stdout encoded strictly as UTF-8 (as on a terminal) and
    stderr with backslash escapes (as Python's), both captured.

    Example:
        >>> run_cli(["show", "/no/such/log.jsonl"]).code
        2
    """
    from tilefuse.autotune import cli
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    code, error = None, None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main([str(a) for a in argv])
        except Exception as exc:   # a traceback the user would see
            error = exc
        try:
            out.flush()
        except Exception as exc:   # bytes a terminal cannot take, found at the flush
            error = error or exc
        err.flush()
    return CliResult(code, _text(out), _text(err), error)


def _text(stream) -> str:
    return stream.buffer.getvalue().decode("utf-8", errors="replace")


def cli_outcome(argv: list, result: CliResult, expected_codes=ALLOWED_EXIT_CODES) -> Outcome:
    """The outcome of one command: LEAK for an exception out of ``main`` or a traceback on
    stderr, WRONG for an exit code outside ``expected_codes`` or a failure without a message,
    CLEAN for exit 2 with a message, OK otherwise.

    Example:
        >>> cli_outcome(["best"], CliResult(2, "", "autotune: error: no db", None)).kind
        'clean'
    """
    command = " ".join(str(a) for a in argv[:1])
    if result.error is not None:
        return Outcome(LEAK, f"autotune {command}: traceback: {describe_exception(result.error)}")
    if "Traceback (most recent call last)" in result.stderr:
        return Outcome(LEAK, f"autotune {command}: printed a traceback: {first_line(result.stderr)}")
    if result.code not in ALLOWED_EXIT_CODES or result.code not in expected_codes:
        return Outcome(WRONG, f"autotune {command}: exit {result.code}, expected one of {list(expected_codes)} "
                              f"(stderr: {first_line(result.stderr)})")
    if result.code != 0 and not result.stderr.strip():
        return Outcome(WRONG, f"autotune {command}: exit {result.code} without a message on stderr")
    if result.code == 2:
        return Outcome(CLEAN, f"autotune {command}: exit 2: {first_line(result.stderr)}")
    return Outcome(OK, f"autotune {command}: exit {result.code}")


# ---------------------------------------------------------------------------- records and files

def sample_records(rng, count: int) -> list:
    """``count`` records of this CPU (random workloads, configs, costs; a few errors), plus lines
    of the repository's ``tuning_logs/mlp.jsonl`` (another CPU).

    Example:
        >>> len(sample_records(np.random.default_rng(0), 3)) >= 3
        True
    """
    from tilefuse.autotune.record import Record
    from fuzz_outcomes import REPO
    records = []
    for k in range(count):
        workload = f"wk{int(rng.integers(3))}"
        config = {"tile": int(rng.integers(1, 64)), "order": str(rng.choice(["ij", "ji"]))}
        if rng.random() < 0.2:
            records.append(Record.create(workload, "dense", "complex", config, error_kind="runtime",
                                         error_msg=f"failed {k}", timestamp=1000.0 + k))
        else:
            costs = [float(c) for c in rng.uniform(1e-5, 1e-3, int(rng.integers(1, 4)))]
            records.append(Record.create(workload, "dense", "complex", config, costs=costs, timestamp=1000.0 + k))
    from tilefuse.autotune.log import read_log
    shipped = read_log(REPO / "tuning_logs" / REPO_LOG).records
    records += list(shipped[: int(rng.integers(0, 4))])
    return records


def identities(records) -> set:
    """The ``Record.identity`` of each record.

    Example:
        >>> identities([])
        set()
    """
    return {r.identity for r in records}


def write_database(path: str, records) -> None:
    """A healthy tuning database at ``path`` holding ``records``, checkpointed (no WAL left).

    Example:
        >>> # write_database("/tmp/x/tuning.db", sample_records(rng, 4))
    """
    from tilefuse.autotune.database import Database
    with Database(path) as db:
        db.add_many(records)


def database_records(path: str):
    """The records of the database at ``path`` (a set of identities), or None when it cannot be
    opened.

    Example:
        >>> database_records("/no/such/dir/tuning.db") is None
        True
    """
    from tilefuse.autotune.database import Database
    if not os.path.exists(path):
        return None
    try:
        with Database(path) as db:
            return identities(db.records())
    except Exception:             # a damaged database: compared by the caller
        return None


def database_read_outcome(path: str, what: str) -> Outcome:
    """OK when ``Database(path).records()`` reads, else the classified error (named after
    ``what``, the command that ran before).

    Example:
        >>> database_read_outcome("/no/such/dir/t.db", "import").kind
        'ok'
    """
    from tilefuse.autotune.database import Database
    if not os.path.exists(path):
        return Outcome(OK)
    try:
        with Database(path) as db:
            db.records()
    except Exception as err:      # classified: a TuningDatabaseError is clean
        outcome = classify_exception(err, f"after {what}, Database.records()")
        return outcome if not outcome.allowed else Outcome(OK)
    return Outcome(OK)


def is_damaged(path: str) -> bool:
    """Whether sqlite's quick_check (on a copy, so nothing is written) finds ``path`` is not a
    healthy sqlite file. A missing or zero-length file is not damaged.

    Example:
        >>> is_damaged("/no/such/file.db")
        False
    """
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return False
    with tempfile.TemporaryDirectory(prefix="tilefuse-fuzz-check-") as tmp:
        copy = os.path.join(tmp, "copy.db")
        shutil.copyfile(path, copy)
        try:
            conn = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
            try:
                rows = conn.execute("PRAGMA quick_check").fetchall()
            finally:
                conn.close()
        except sqlite3.DatabaseError:
            return True
    return rows != [("ok",)]


def snapshot(path: str) -> bytes | None:
    """The bytes of ``path`` (None when it does not exist).

    Example:
        >>> snapshot("/no/such/file") is None
        True
    """
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def read_only_databases():
    """Every database opened in the block is read-only, as when its file or directory is not
    writable (the suite runs as root, so chmod would not stop writes).

    Example:
        >>> with read_only_databases():
        ...     pass
    """
    import tilefuse.autotune.database as database
    saved = database._read_only
    database._read_only = lambda path: True
    try:
        yield
    finally:
        database._read_only = saved


# ---------------------------------------------------------------------------- log lines

LINE_MUTATIONS = ["truncate", "flip char", "drop key", "wrong type", "huge int", "NaN cost", "lone surrogate",
                  "not UTF-8", "deep nesting", "duplicate", "legacy", "broken legacy", "schema version", "other kind",
                  "not an object", "blank and CRLF", "NUL bytes", "long line", "bad error kind", "empty workload"]


def mutate_line(line: str, kind: str, rng) -> bytes:
    """The log line ``line`` (a record's JSON) after mutation ``kind`` of ``LINE_MUTATIONS``, as
    bytes (one or more lines, newline-terminated).

    Example:
        >>> mutate_line('{"a": 1}', "other kind", np.random.default_rng(0))
        b'{"a": 1, "kind": "other"}\\n'
    """
    data = json.loads(line)
    fields = sorted(data)
    if kind == "truncate":
        return line[: int(rng.integers(1, len(line)))].encode() + b"\n"
    if kind == "flip char":
        at = int(rng.integers(len(line)))
        return (line[:at] + chr(int(rng.integers(32, 127))) + line[at + 1:]).encode() + b"\n"
    if kind == "drop key":
        data.pop(fields[int(rng.integers(len(fields)))], None)
    elif kind == "wrong type":
        key = fields[int(rng.integers(len(fields)))]
        data[key] = [5, "fast", [], {}, None, True, -1.5, [1, "x"]][int(rng.integers(8))]
    elif kind == "huge int":
        key = ["timestamp", "costs", "build_seconds", "schema_version"][int(rng.integers(4))]
        data[key] = [10 ** 400] if key == "costs" else 10 ** 400
    elif kind == "NaN cost":
        return line.replace('"costs": [', '"costs": [NaN, ', 1).encode() + b"\n" if '"costs": [' in line \
            else b'{"workload": "w", "config": {}, "result": [Infinity]}\n'
    elif kind == "lone surrogate":
        key = ["workload_key", "task_name", "target_cpu", "error_msg"][int(rng.integers(4))]
        data[key] = "wk\ud800x"
    elif kind == "not UTF-8":
        return line.encode()[:20] + b"\xff\xfe\xc3" + line.encode()[20:] + b"\n"
    elif kind == "deep nesting":
        depth = int(rng.integers(2000, 200_000))
        return (line[:-1] + ', "extra": ' + "[" * depth + "]" * depth + "}").encode() + b"\n"
    elif kind == "duplicate":
        return (line + "\n" + line + "\n").encode()
    elif kind == "legacy":
        return json.dumps({"workload": data.get("workload_key", "w"), "config": {"t": 1}, "result": [0.5],
                           "error": None, "cpu": "legacycpu", "time": 7.0}).encode() + b"\n"
    elif kind == "broken legacy":
        return json.dumps({"workload": "w", "config": {"t": 1}, "result": "x", "error": 5, "cpu": ""}).encode() + b"\n"
    elif kind == "schema version":
        data["schema_version"] = [99, -1, True, 1.0, "1"][int(rng.integers(5))]
    elif kind == "other kind":
        data["kind"] = "other"
    elif kind == "not an object":
        return ["[]", "null", "42", '"text"', "{}"][int(rng.integers(5))].encode() + b"\n"
    elif kind == "blank and CRLF":
        return b"\r\n   \r\n" + line.encode() + b"\r\n"
    elif kind == "NUL bytes":
        return line.encode().replace(b",", b",\x00", 1) + b"\n"
    elif kind == "long line":
        data["error_msg"] = "x" * 2_000_000
    elif kind == "bad error kind":
        data["error_kind"] = ["segfault", "", "timeout"][int(rng.integers(3))]
    else:
        data["workload_key"] = ""
    return json.dumps(data, sort_keys=True).encode() + b"\n"


def write_mutated_log(path: str, records, mutations, rng) -> None:
    """A log of ``records`` with each (line index, mutation kind) of ``mutations`` applied (a
    second mutation of one line is appended as a line of its own).

    Example:
        >>> # write_mutated_log("t.jsonl", records, [(0, "truncate")], rng)
    """
    from tilefuse.autotune.log import record_line
    lines = [record_line(r) for r in records]
    chunks = [line.encode() + b"\n" for line in lines]
    mutated = set()
    for index, kind in mutations:       # a line mutated twice: the second mutation is an extra line
        index %= len(lines)
        bad = mutate_line(lines[index], kind, rng)
        if index in mutated:
            chunks.append(bad)
        else:
            chunks[index] = bad
            mutated.add(index)
    with open(path, "wb") as f:
        f.write(b"".join(chunks))


def _read_log_outcome(path: str):
    """(records or None, outcome) of ``read_log``, which must never fail on a bad line."""
    from tilefuse.autotune.log import read_log
    try:
        return read_log(path), Outcome(OK)
    except Exception as err:      # read_log promises to skip bad lines
        outcome = classify_exception(err, "read_log")
        return None, Outcome(LEAK if outcome.allowed else outcome.kind,
                             f"read_log raised instead of skipping a bad line: {outcome.message}")


def _pair_outcome(db_path: str, log_path: str, what: str) -> Outcome:
    """WRONG when the records of the log and of the database differ (``export`` and ``import``
    must leave the same records on both sides)."""
    from tilefuse.autotune.log import read_log
    in_db = database_records(db_path)
    in_log = identities(read_log(log_path).records) if os.path.exists(log_path) else set()
    if in_db is None:
        unreadable = database_read_outcome(db_path, what)
        return unreadable if not unreadable.allowed else Outcome(WRONG, f"{what}: the database cannot be opened "
                                                                         f"afterwards")
    if in_db != in_log:
        return Outcome(WRONG, f"{what}: log and database diverge: {len(in_log - in_db)} record(s) only in the log, "
                              f"{len(in_db - in_log)} only in the database")
    return Outcome(OK)


def plan_log_lines(rng) -> dict:
    """A log of 2 to 8 records with 1 to 4 mutated lines.

    Example:
        >>> sorted(plan_log_lines(np.random.default_rng(0)))
        ['count', 'existing_db', 'mutations', 'seed']
    """
    count = int(rng.integers(2, 9))
    mutations = [(int(rng.integers(count)), LINE_MUTATIONS[int(rng.integers(len(LINE_MUTATIONS)))])
                 for _ in range(int(rng.integers(1, 5)))]
    return {"count": count, "mutations": mutations, "seed": int(rng.integers(2 ** 31)),
            "existing_db": bool(rng.random() < 0.4)}


def run_log_lines(plan: dict, tmp: str) -> Outcome:
    """``read_log``, ``show``, ``show --json``, ``import`` (twice: idempotent), ``export`` and
    ``import_log`` of a log with mutated lines; the database must then hold exactly the readable
    records (plus those it held before) and the exported log the database's.

    Example:
        >>> # run_log_lines(plan_log_lines(rng), tmp)
    """
    rng = np.random.default_rng(plan["seed"])
    records = sample_records(rng, plan["count"])
    log, db, out = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "tuning.db"), os.path.join(tmp, "out.jsonl")
    write_mutated_log(log, records, plan["mutations"], rng)
    before = set()
    if plan["existing_db"]:
        earlier = sample_records(np.random.default_rng(plan["seed"] + 1), 3)
        write_database(db, earlier)
        before = identities(earlier)
    contents, outcome = _read_log_outcome(log)
    outcomes = [outcome]
    # every line mutated past reading: no tuning log at all, which show and import refuse (exit 2)
    codes = (2,) if contents is not None and contents.problems and not contents.records else (0,)
    for argv in (["show", log], ["show", log, "--json"]):
        outcomes.append(cli_outcome(argv, run_cli(argv), expected_codes=codes))
    argv = ["import", log, "--db", db]
    outcomes.append(cli_outcome(argv, run_cli(argv), expected_codes=codes))
    stored = database_records(db) or set()
    if contents is not None and stored != before | identities(contents.records):
        outcomes.append(Outcome(WRONG, f"import: the database holds {len(stored)} records, expected the "
                                       f"{len(identities(contents.records))} readable ones of the log and the "
                                       f"{len(before)} it had"))
    outcomes.append(cli_outcome(argv, run_cli(argv), expected_codes=codes))
    if (database_records(db) or set()) != stored:
        outcomes.append(Outcome(WRONG, "import twice: the second import changed the database"))
    argv = ["export", "--db", db, out]
    if codes == (2,) and not plan["existing_db"]:       # nothing imported: no database to export
        outcomes.append(cli_outcome(argv, run_cli(argv), expected_codes=(2,)))
    else:
        outcomes.append(cli_outcome(argv, run_cli(argv), expected_codes=(0,)))
        outcomes.append(_pair_outcome(db, out, "export"))
    outcomes.append(_import_log_outcome(log, os.path.join(tmp, "api.db"), contents))
    return worst(outcomes)


def _import_log_outcome(log: str, db: str, contents) -> Outcome:
    """``autotune.log.import_log`` into a new database: no exception, and exactly the readable
    records stored."""
    from tilefuse.autotune.database import Database
    from tilefuse.autotune.log import import_log
    try:
        with Database(db) as database:
            imported, skipped, problems = import_log(database, log)
            stored = identities(database.records())
    except Exception as err:      # import_log reports bad lines, it does not raise for them
        return classify_exception(err, "import_log")
    if contents is not None and stored != identities(contents.records):
        return Outcome(WRONG, f"import_log stored {len(stored)} records, the log has "
                              f"{len(identities(contents.records))} readable ones")
    return Outcome(OK)


# ---------------------------------------------------------------------------- databases

COMMANDS = ["best", "best --missing", "export", "import", "tune", "api", "history"]


def command_argv(command: str, db: str, tmp: str) -> list:
    """The ``autotune`` arguments of ``command`` on database ``db`` (its graph, log and output
    files in ``tmp``).

    Example:
        >>> command_argv("best", "t.db", "/tmp")
        ['best', '--db', 't.db']
    """
    graph = os.path.join(tmp, "relu.json")
    if command in ("best --missing", "tune") and not os.path.exists(graph):
        with open(graph, "w") as f:
            json.dump(TINY_GRAPH, f)
    if command == "best":
        return ["best", "--db", db]
    if command == "best --missing":
        return ["best", "--db", db, "--missing", graph]
    if command == "export":
        return ["export", "--db", db, os.path.join(tmp, "exported.jsonl")]
    if command == "import":
        from tilefuse.autotune.log import append_records
        log = os.path.join(tmp, "import.jsonl")
        if not os.path.exists(log):
            append_records(log, sample_records(np.random.default_rng(7), 3))
        return ["import", log, "--db", db]
    return ["tune", graph, "--trials", "2", "--tuner", "random", "--min-repeat-ms", "0", "--db", db,
            "--log", os.path.join(tmp, "tune.jsonl")]


def _api_outcome(db: str) -> tuple[Outcome, bool]:
    """(outcome, refused) of opening ``db`` with ``Database`` and reading and writing it."""
    from tilefuse.autotune.database import Database
    from tilefuse.autotune.record import Record
    try:
        with Database(db) as database:
            database.best_all()
            database.records()
            database.workloads()
            database.add(Record.create("wk-api", "dense", "complex", {"t": 1}, costs=[1e-3]))
    except Exception as err:      # classified: TuningDatabaseError is the clean refusal
        return classify_exception(err, "Database"), True
    return Outcome(OK, "Database: read and written"), False


def _history_outcome(db: str, tmp: str) -> tuple[Outcome, bool]:
    """(outcome, refused) of compiling and running the one-op graph with
    ``autotune.HistoryBest(db)`` as its config source (and kernel cache)."""
    from tilefuse.autotune import HistoryBest
    from tilefuse.graph_api import compile_graph, load_json
    graph_path = os.path.join(tmp, "relu.json")
    with open(graph_path, "w") as f:
        json.dump(TINY_GRAPH, f)
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
    source = None
    try:
        source = HistoryBest(db)
        got = compile_graph(load_json(graph_path), configs=source).run({0: x})[1]
    except Exception as err:      # classified: TuningDatabaseError is the clean refusal
        return classify_exception(err, "HistoryBest"), True
    finally:
        if source is not None:
            source.db.close()
    if not np.array_equal(got, np.maximum(x, 0)):
        return Outcome(WRONG, "HistoryBest: the compiled graph computes a wrong ReLU"), False
    return Outcome(OK, "HistoryBest: compiled and ran"), False


def run_on_database(command: str, db: str, tmp: str, damaged: bool, foreign: bool = False,
                    read_only: bool = False) -> Outcome:
    """Run ``command`` on the database ``db`` and check: a damaged or foreign database is
    refused (exit 2, TuningDatabaseError) and left byte-identical, as is a read-only one by the
    commands that write; ``tune``'s log gains only records the database holds; what succeeds
    leaves log and database consistent.

    Example:
        >>> # run_on_database("best", "tuning.db", tmp, damaged=False)
    """
    refuse = damaged or foreign or (read_only and command in ("import", "tune", "api"))
    before, wal_before = snapshot(db), snapshot(db + "-wal")
    tune_log = os.path.join(tmp, "tune.jsonl")
    log_before = snapshot(tune_log)
    with read_only_databases() if read_only else contextlib.nullcontext():
        if command == "api":
            outcome, refused = _api_outcome(db)
        elif command == "history":
            outcome, refused = _history_outcome(db, tmp)
        else:
            argv = command_argv(command, db, tmp)
            result = run_cli(argv)
            expected = (2,) if refuse else (0, 1) if command == "best --missing" else (0,)
            if damaged is None:           # damage quick_check misses may still be met: exit 2 then
                expected += (2,)
            outcome, refused = cli_outcome(argv, result, expected), result.code == 2
    outcomes = [outcome]
    what = "damaged" if damaged else "another application's" if foreign else "read-only" if read_only else ""
    if refuse and outcome.allowed and not refused:
        outcomes.append(Outcome(WRONG, f"{command} accepted a {what} database"))
    if (refuse or read_only) and snapshot(db) != before:
        outcomes.append(Outcome(WRONG, f"{command} wrote into a {what} database (its bytes changed)"))
    if refuse and snapshot(db + "-wal") not in (wal_before, None, b""):
        outcomes.append(Outcome(WRONG, f"{command} wrote a WAL file next to a {what} database"))
    if command == "tune":
        outcomes.append(_tune_log_outcome(db, tune_log, log_before))
    return worst(outcomes)


def _tune_log_outcome(db: str, log: str, log_before: bytes | None) -> Outcome:
    """``tune`` must not leave records in its log that the database lacks."""
    from tilefuse.autotune.log import read_log
    if snapshot(log) == log_before or not os.path.exists(log):
        return Outcome(OK)
    in_db = database_records(db)
    if in_db is None:
        unreadable = database_read_outcome(db, "tune")
        if not unreadable.allowed:
            return unreadable
        in_db = set()
    only_log = identities(read_log(log).records) - in_db
    if only_log:
        return Outcome(WRONG, f"tune: {len(only_log)} record(s) reached the log but not the database")
    return Outcome(OK)


def _healthy(tmp: str, seed: int) -> str:
    db = os.path.join(tmp, "tuning.db")
    write_database(db, sample_records(np.random.default_rng(seed), 6))
    return db


def plan_command(rng) -> dict:
    """A command of ``COMMANDS`` and a seed.

    Example:
        >>> plan_command(np.random.default_rng(0))["command"] in COMMANDS
        True
    """
    return {"command": COMMANDS[int(rng.integers(len(COMMANDS)))], "seed": int(rng.integers(2 ** 31))}


def plan_truncated(rng) -> dict:
    """A command and where to cut the database: a fraction of its size or a page boundary.

    Example:
        >>> 0 <= plan_truncated(np.random.default_rng(0))["fraction"] < 1
        True
    """
    return {**plan_command(rng), "fraction": float(rng.uniform(0, 1)), "page_boundary": bool(rng.random() < 0.4)}


def run_truncated(plan: dict, tmp: str) -> Outcome:
    """A healthy database cut short, then the command.

    Example:
        >>> # run_truncated(plan_truncated(rng), tmp)
    """
    db = _healthy(tmp, plan["seed"])
    data = snapshot(db)
    cut = int(len(data) * plan["fraction"])
    if plan["page_boundary"]:
        cut -= cut % 4096
    with open(db, "wb") as f:
        f.write(data[:cut])
    return run_on_database(plan["command"], db, tmp, damaged=_damage_state(db))


def _damage_state(db: str):
    """True when quick_check finds damage; None when it does not (the damage may still be met
    later, so exit 2 is allowed); a zero-length file is a new, empty database (False)."""
    if os.path.getsize(db) == 0:
        return False
    return True if is_damaged(db) else None


def plan_overwritten(rng) -> dict:
    """A command and bytes to overwrite: in the header (first 100 bytes) or in a page.

    Example:
        >>> plan_overwritten(np.random.default_rng(0))["count"] >= 1
        True
    """
    return {**plan_command(rng), "header": bool(rng.random() < 0.25), "count": int(rng.integers(1, 400)),
            "where": float(rng.uniform(0, 1)), "byte_seed": int(rng.integers(2 ** 31))}


def run_overwritten(plan: dict, tmp: str) -> Outcome:
    """A healthy database with random bytes written over part of its header or of a page, then
    the command.

    Example:
        >>> # run_overwritten(plan_overwritten(rng), tmp)
    """
    db = _healthy(tmp, plan["seed"])
    data = bytearray(snapshot(db))
    if plan["header"]:
        start, count = 16 + int(plan["where"] * 80), min(plan["count"], 8)
    else:
        page = 1 + int(plan["where"] * (len(data) // 4096 - 1)) if len(data) > 4096 else 0
        start, count = page * 4096 + int(plan["where"] * 3000), plan["count"]
    noise = np.random.default_rng(plan["byte_seed"]).integers(0, 256, count, dtype=np.uint8).tobytes()
    data[start:start + count] = noise
    with open(db, "wb") as f:
        f.write(bytes(data))
    return run_on_database(plan["command"], db, tmp, damaged=_damage_state(db))


def run_zero_length(plan: dict, tmp: str) -> Outcome:
    """A zero-length database file (a new, empty database), then the command.

    Example:
        >>> # run_zero_length(plan_command(rng), tmp)
    """
    db = os.path.join(tmp, "tuning.db")
    open(db, "wb").close()
    return run_on_database(plan["command"], db, tmp, damaged=False)


FOREIGN_SCHEMAS = [
    ["CREATE TABLE songs (id INTEGER PRIMARY KEY, title TEXT)", "INSERT INTO songs VALUES (1, 'a')"],
    ["CREATE TABLE records (id INTEGER PRIMARY KEY, artist TEXT, title TEXT, year INTEGER)",
     "INSERT INTO records VALUES (1, 'Nina Simone', 'Pastel Blues', 1965)"],
    ["CREATE TABLE workloads (name TEXT, hours REAL)", "INSERT INTO workloads VALUES ('ops', 3.5)"],
    ["CREATE TABLE meta (key TEXT, value TEXT)", "INSERT INTO meta VALUES ('owner', 'someone')"],
    ["CREATE VIEW numbers AS SELECT 1 AS one"],
]


def plan_foreign(rng) -> dict:
    """A command and one of ``FOREIGN_SCHEMAS``.

    Example:
        >>> 0 <= plan_foreign(np.random.default_rng(0))["schema"] < len(FOREIGN_SCHEMAS)
        True
    """
    return {**plan_command(rng), "schema": int(rng.integers(len(FOREIGN_SCHEMAS)))}


def run_foreign(plan: dict, tmp: str) -> Outcome:
    """Another application's sqlite database (some with a table named ``records``,
    ``workloads`` or ``meta``), then the command: refused, untouched.

    Example:
        >>> # run_foreign(plan_foreign(rng), tmp)
    """
    db = os.path.join(tmp, "tuning.db")
    conn = sqlite3.connect(db)
    for statement in FOREIGN_SCHEMAS[plan["schema"]]:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return run_on_database(plan["command"], db, tmp, damaged=False, foreign=True)


def run_read_only(plan: dict, tmp: str) -> Outcome:
    """A healthy database that cannot be written (``_read_only`` says so), then the command:
    reads work, writes are refused with exit 2 and the file is untouched.

    Example:
        >>> # run_read_only(plan_command(rng), tmp)
    """
    db = _healthy(tmp, plan["seed"])
    outcome = run_on_database(plan["command"], db, tmp, damaged=False, read_only=True)
    if plan["command"] == "export" and outcome.allowed:
        return worst([outcome, _pair_outcome(db, os.path.join(tmp, "exported.jsonl"), "export from read-only")])
    return outcome


def plan_garbage(rng) -> dict:
    """A command and the size of a file that starts with the sqlite header and then is noise.

    Example:
        >>> plan_garbage(np.random.default_rng(0))["size"] >= 100
        True
    """
    return {**plan_command(rng), "size": int(rng.integers(100, 20_000))}


def run_garbage(plan: dict, tmp: str) -> Outcome:
    """The sqlite header followed by random bytes, then the command.

    Example:
        >>> # run_garbage(plan_garbage(rng), tmp)
    """
    db = os.path.join(tmp, "tuning.db")
    noise = np.random.default_rng(plan["seed"]).integers(0, 256, plan["size"], dtype=np.uint8).tobytes()
    with open(db, "wb") as f:
        f.write(b"SQLite format 3\x00" + noise)
    return run_on_database(plan["command"], db, tmp, damaged=_damage_state(db))


def plan_schema(rng) -> dict:
    """A command and a ``meta`` schema_version that this tilefuse cannot use.

    Example:
        >>> plan_schema(np.random.default_rng(0))["version"] in ("99", "x", "1.5", "-3", "")
        True
    """
    return {**plan_command(rng), "version": ["99", "x", "1.5", "-3", ""][int(rng.integers(5))]}


def run_schema(plan: dict, tmp: str) -> Outcome:
    """A tuning database whose ``meta`` table has another schema_version, then the command:
    a newer or unreadable version is refused and left untouched.

    Example:
        >>> # run_schema(plan_schema(rng), tmp)
    """
    db = _healthy(tmp, plan["seed"])
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [plan["version"]])
    conn.commit()
    conn.close()
    usable = plan["version"] in ("-3",)      # an older version would be migrated; a negative one is nonsense
    return run_on_database(plan["command"], db, tmp, damaged=None if usable else False, foreign=not usable)


ROW_DAMAGE = ["UPDATE records SET config = 'not json' WHERE id = 1",
              "UPDATE records SET costs = '[' WHERE id = 1",
              "UPDATE records SET costs = '[1e999]', mean_cost = 1e999 WHERE id = 1",
              "UPDATE records SET workload_key = NULL WHERE id = 1",
              "UPDATE records SET target_key = NULL WHERE id = 2",
              "UPDATE records SET error_kind = 'segfault' WHERE id = 1",
              "UPDATE records SET timestamp = 'yesterday' WHERE id = 1",
              "UPDATE records SET versions = '[1, 2]' WHERE id = 1",
              "UPDATE records SET mean_cost = -5, costs = '[-5]' WHERE id = 1",
              "UPDATE records SET config = '[1, 2]' WHERE id = 2",
              "UPDATE records SET build_seconds = 'slow' WHERE id = 1",
              "UPDATE workloads SET description = '{' WHERE 1",
              "UPDATE records SET costs = '{\"a\": 1}' WHERE id = 1",
              "UPDATE records SET config = x'ff00' WHERE id = 1",
              "DELETE FROM workloads",
              "UPDATE records SET task_name = CAST(x'c3ff28' AS TEXT) WHERE id = 1",
              "UPDATE records SET target_features = CAST(x'80' AS TEXT) WHERE id = 2"]


def plan_rows(rng) -> dict:
    """A command (not tune) and 1 to 3 statements of ``ROW_DAMAGE``.

    Example:
        >>> len(plan_rows(np.random.default_rng(0))["statements"]) >= 1
        True
    """
    command = ["best", "best --missing", "export", "api", "history"][int(rng.integers(5))]
    statements = sorted({int(rng.integers(len(ROW_DAMAGE))) for _ in range(int(rng.integers(1, 4)))})
    return {"command": command, "seed": int(rng.integers(2 ** 31)), "statements": statements}


def run_rows(plan: dict, tmp: str) -> Outcome:
    """A sound sqlite file whose rows no longer make valid records, then the command: damaged
    rows are skipped with a warning, never a traceback; an export writes only readable lines.

    Example:
        >>> # run_rows(plan_rows(rng), tmp)
    """
    from tilefuse.autotune.database import Database
    from tilefuse.autotune.record import Record
    db = os.path.join(tmp, "tuning.db")
    with Database(db) as database:
        for k in range(3):
            database.add(Record.create("wk1", "dense", "complex", {"t": k}, costs=[1e-3 * (k + 1)],
                                       timestamp=10.0 + k))
    conn = sqlite3.connect(db)
    for k in plan["statements"]:
        conn.execute(ROW_DAMAGE[k])
    conn.commit()
    conn.close()
    outcome = run_on_database(plan["command"], db, tmp, damaged=None)
    exported = os.path.join(tmp, "exported.jsonl")
    if plan["command"] == "export" and os.path.exists(exported):
        from tilefuse.autotune.log import read_log
        problems = read_log(exported).problems
        if problems:
            outcome = worst([outcome, Outcome(WRONG, f"export wrote {len(problems)} unreadable line(s): "
                                                     f"{problems[0][1]}")])
    return outcome


def run_wal_garbage(plan: dict, tmp: str) -> Outcome:
    """A healthy database with a ``-wal`` file of noise (or a WAL header and noise) next to it,
    then the command: the records stay what they were.

    Example:
        >>> # run_wal_garbage(plan_command(rng), tmp)
    """
    db = _healthy(tmp, plan["seed"])
    stored = database_records(db)
    rng = np.random.default_rng(plan["seed"])
    noise = rng.integers(0, 256, int(rng.integers(10, 9000)), dtype=np.uint8).tobytes()
    header = b"\x37\x7f\x06\x82\x00\x2d\xe2\x18" if rng.random() < 0.5 else b""
    with open(db + "-wal", "wb") as f:
        f.write(header + noise)
    outcome = run_on_database(plan["command"], db, tmp, damaged=None)
    after = database_records(db)
    if plan["command"] in ("best", "best --missing", "export") and after != stored:
        outcome = worst([outcome, Outcome(WRONG, "a garbage WAL file changed the records a read-only command saw")])
    return outcome


def plan_resume(rng) -> dict:
    """How to damage the log between two ``tune`` runs on one database.

    Example:
        >>> plan_resume(np.random.default_rng(0))["damage"] in RESUME_DAMAGE
        True
    """
    return {"damage": RESUME_DAMAGE[int(rng.integers(len(RESUME_DAMAGE)))], "seed": int(rng.integers(2 ** 31))}


RESUME_DAMAGE = ["cut the last line", "drop the first line", "garbage line", "empty the log", "delete the log",
                 "duplicate lines", "not UTF-8"]


def run_resume(plan: dict, tmp: str) -> Outcome:
    """``tune`` 2 trials, damage the log, ``tune`` 4 trials on the same database and log: the
    second run catches the log up (every database record in it) and adds each new record to
    both.

    Example:
        >>> # run_resume(plan_resume(rng), tmp)
    """
    db, log = os.path.join(tmp, "tuning.db"), os.path.join(tmp, "tune.jsonl")
    argv = command_argv("tune", db, tmp)
    first = cli_outcome(argv, run_cli(argv), expected_codes=(0,))
    if not first.allowed:
        return first
    _damage_log(log, plan["damage"])
    argv = argv[:2] + ["--trials", "4"] + argv[4:]
    second = cli_outcome(argv, run_cli(argv), expected_codes=(0,))
    from tilefuse.autotune.log import read_log
    in_db = database_records(db) or set()
    in_log = identities(read_log(log).records) if os.path.exists(log) else set()
    outcomes = [second]
    if not in_db <= in_log:
        outcomes.append(Outcome(WRONG, f"tune after '{plan['damage']}': {len(in_db - in_log)} database record(s) "
                                       f"missing from the log"))
    if not in_log <= in_db:
        outcomes.append(Outcome(WRONG, f"tune after '{plan['damage']}': {len(in_log - in_db)} log record(s) not "
                                       f"in the database"))
    return worst(outcomes)


def _damage_log(log: str, damage: str) -> None:
    data = snapshot(log) or b""
    lines = data.splitlines(keepends=True)
    if damage == "cut the last line" and lines:
        data = b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2]
    elif damage == "drop the first line":
        data = b"".join(lines[1:])
    elif damage == "garbage line":
        data += b"{not json\n"
    elif damage == "empty the log":
        data = b""
    elif damage == "duplicate lines":
        data += data
    elif damage == "not UTF-8":
        data += b"\xff\xfe\n"
    if damage == "delete the log":
        os.remove(log)
        return
    with open(log, "wb") as f:
        f.write(data)


def run_bad_paths(plan: dict, tmp: str) -> Outcome:
    """A directory where the database or a log should be, a database in a missing directory,
    a log that is a database: exit 2 with a one-line message (or 0 where the path is fine)."""
    directory = os.path.join(tmp, "a-directory")
    os.makedirs(directory)
    db = _healthy(tmp, plan["seed"])
    cases = [(["best", "--db", directory], (2,)), (["export", "--db", db, directory], (2,)),
             (["import", directory, "--db", db], (2,)), (["show", directory], (2,)), (["show", db], (2,)),
             (["import", db, "--db", os.path.join(tmp, "other.db")], (2,)),          # a database, not a log
             (["import", command_argv("import", db, tmp)[1], "--db", os.path.join(tmp, "new", "deeper", "t.db")],
              (0,)),
             (["import", command_argv("import", db, tmp)[1], "--db", directory], (2,)),
             (["best", "--db", os.path.join(tmp, "missing.db")], (2,))]
    return worst([cli_outcome(argv, run_cli(argv), codes) for argv, codes in cases])


# (name, plan, run)
STORE_SCENARIOS = [
    ("log lines", plan_log_lines, run_log_lines),
    ("truncated database", plan_truncated, run_truncated),
    ("page overwritten", plan_overwritten, run_overwritten),
    ("zero-length database", plan_command, run_zero_length),
    ("another application's database", plan_foreign, run_foreign),
    ("read-only database", plan_command, run_read_only),
    ("sqlite header and noise", plan_garbage, run_garbage),
    ("other schema version", plan_schema, run_schema),
    ("damaged rows", plan_rows, run_rows),
    ("garbage WAL file", plan_command, run_wal_garbage),
    ("log damaged between tune runs", plan_resume, run_resume),
    ("directories and missing paths", plan_command, run_bad_paths),
]


def store_case(seed: int):
    """Scenario ``seed % len(STORE_SCENARIOS)`` with parameters drawn from ``seed``.

    Example:
        >>> store_case(1).description.startswith("truncated database")
        True
    """
    from fuzz_cases import Case
    name, plan_fn, run_fn = STORE_SCENARIOS[seed % len(STORE_SCENARIOS)]
    plan = plan_fn(np.random.default_rng(seed))
    shown = {k: v for k, v in plan.items() if k != "seed"}

    def check() -> Outcome:
        with tempfile.TemporaryDirectory(prefix="tilefuse-fuzz-store-") as tmp:
            return run_fn(plan, tmp)
    return Case("store", seed, f"{name}: {shown}", check)
