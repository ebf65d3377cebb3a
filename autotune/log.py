"""JSON-lines tuning logs: one self-describing record per line, append-only, human-readable.

Each line is ``Record.to_json()`` with ``"kind": "tilefuse-record"`` (and the record's
``schema_version``), keys sorted. Lines of older schema versions are migrated when read
(a legacy line has no ``kind``). Reading never fails on a bad line: a corrupt, truncated or
foreign line is reported in ``LogContents.problems`` with its line number and skipped.
"""
from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from typing import Iterable

from autotune.record import Record

LOG_KIND = "tilefuse-record"


@dataclass(frozen=True, slots=True)
class LogContents:
    """What ``read_log`` found: the records, and (line number, reason) for each skipped line.

    Example:
        >>> LogContents(records=(), problems=((3, "not JSON"),)).problems[0][0]
        3
    """
    records: tuple
    problems: tuple


def record_line(record: Record) -> str:
    """The log line of a record (without the newline).

    Example:
        >>> r = Record.create("wk1", "dense", "complex", {"tile": 8}, costs=[1e-3])
        >>> json.loads(record_line(r))["kind"]
        'tilefuse-record'
    """
    data = record.to_json()
    data["kind"] = LOG_KIND
    return json.dumps(data, sort_keys=True, allow_nan=False)


def append_records(path: str | os.PathLike, records: Iterable[Record]) -> int:
    """Append records to a log (created with its directories when missing) in one write, then
    flush and fsync; returns how many were written. A file whose last line was cut short (a
    process killed mid-write) first gets a newline, so the cut line stays alone and later
    lines stay readable. Appends from several processes do not interleave (file lock).

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "logs" / "dense.jsonl"
        >>> append_records(path, [Record.create("wk1", "dense", "complex", {"t": 8}, costs=[1e-3])])
        1
        >>> len(read_log(path).records)
        1
    """
    records = list(records)
    for record in records:
        if not isinstance(record, Record):
            raise TypeError(f"append_records takes Record objects, got {type(record).__name__}")
    if not records:
        return 0
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    payload = "".join(record_line(r) + "\n" for r in records).encode("utf-8")
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            payload = b"\n" + payload
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock
    return len(records)


def read_log(path: str | os.PathLike) -> LogContents:
    """Every readable record of a log, in file order, and the problems of the other lines
    (blank lines are ignored). A missing file is a FileNotFoundError.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
        >>> _ = path.write_text('{"workload": "wk1", "config": {}, "result": [0.5]}\\n{"trunc')
        >>> contents = read_log(path)
        >>> [r.workload_key for r in contents.records], contents.problems[0][0]
        (['wk1'], 2)
    """
    path = os.fspath(path)
    records, problems = [], []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.append((number, f"not UTF-8 text ({exc.reason})"))
                continue
            if not text.strip():
                continue
            try:
                record = parse_line(text)
            except ValueError as exc:
                problems.append((number, str(exc)))
                continue
            records.append(record)
    return LogContents(tuple(records), tuple(problems))


def parse_line(text: str) -> Record:
    """The record of one log line; ValueError saying what is wrong with it.

    Example:
        >>> parse_line('{"workload": "wk1", "config": {"t": 4}, "result": [1.0]}').config
        {'t': 4}
        >>> parse_line('{"kind": "other"}')
        Traceback (most recent call last):
        ...
        ValueError: line is a 'other' entry, not a 'tilefuse-record'
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        ending = "" if text.endswith("\n") else " (truncated last line?)"
        raise ValueError(f"not valid JSON ({exc.msg.removesuffix(' at')}, column {exc.colno}){ending}") from None
    if not isinstance(data, dict):
        raise ValueError(f"a record line must be a JSON object, got {type(data).__name__}")
    kind = data.pop("kind", LOG_KIND)
    if kind != LOG_KIND:
        raise ValueError(f"line is a {kind!r} entry, not a {LOG_KIND!r}")
    return Record.from_json(data)


def import_log(db, path: str | os.PathLike) -> tuple[int, int, tuple]:
    """Add a log's records to a ``Database`` in one transaction: returns (imported, skipped,
    problems) where skipped counts records already in the database (so importing twice adds
    nothing) and problems are the unreadable lines, as in ``read_log``.

    Example:
        >>> import tempfile, pathlib
        >>> from autotune.database import Database
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
        >>> _ = append_records(path, [Record.create("wk1", "d", "c", {"t": 8}, costs=[1e-3])])
        >>> db = Database(":memory:")
        >>> import_log(db, path), import_log(db, path)
        ((1, 0, ()), (0, 1, ()))
    """
    contents = read_log(path)
    imported = db.add_many(contents.records)
    return imported, len(contents.records) - imported, contents.problems


def export_log(db, path: str | os.PathLike, workload_key: str | None = None,
               target_key: str | None = None) -> int:
    """Append the database's records (optionally of one workload and/or target) to a log,
    leaving out those the log already holds (by ``Record.identity``); returns how many were
    written. Exporting twice writes nothing the second time.

    Example:
        >>> import tempfile, pathlib
        >>> from autotune.database import Database
        >>> db = Database(":memory:")
        >>> db.add(Record.create("wk1", "d", "c", {"t": 8}, costs=[1e-3]))
        True
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "out.jsonl"
        >>> export_log(db, path), export_log(db, path)
        (1, 0)
    """
    present = set()
    if os.path.exists(path):
        present = {r.identity for r in read_log(path).records}
    fresh = [r for r in db.records(workload_key=workload_key, target_key=target_key)
             if r.identity not in present]
    return append_records(path, fresh)
