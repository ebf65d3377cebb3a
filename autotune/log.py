"""JSON-lines tuning logs: one self-describing record per line, append-only, human-readable.

Each line is ``Record.to_json()`` with ``"kind": "tilefuse-record"`` (and the record's
``schema_version``), keys sorted. Lines of older schema versions are migrated when read
(a legacy line has no ``kind``). Reading never fails on a bad line: a corrupt, truncated or
foreign line is reported in ``LogContents.problems`` with its line number and skipped.
"""
from __future__ import annotations

import fcntl
import io
import json
import os
from dataclasses import dataclass
from typing import Iterable

from tilefuse.autotune.record import Record
from tilefuse.tensorir.errors import TilefuseError

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


class LogWriteError(TilefuseError, OSError):
    """A tuning log that could not be written (a full disk, no permission, an I/O error),
    naming the file; nothing of the failed append stays in it.

    Example:
        >>> issubclass(LogWriteError, OSError)
        True
    """


def append_records(path: str | os.PathLike, records: Iterable[Record], skip_present: bool = False) -> int:
    """Append records to a log (created with its directories when missing) in one write, then
    flush and fsync; returns how many were written. All or nothing: a write or fsync that fails
    (a full disk, an I/O error) cuts the file back to its size before the append and raises
    ``LogWriteError``. A file whose last line was cut short (a process killed mid-write) first gets a
    newline, so the cut line stays alone and later lines stay readable. Appends from several
    processes do not interleave (file lock). ``skip_present``: leave out the records the log
    already holds (by ``Record.identity``), read under the same lock, so that processes catching
    up one log at once never write a record twice.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "logs" / "dense.jsonl"
        >>> r = Record.create("wk1", "dense", "complex", {"t": 8}, costs=[1e-3])
        >>> append_records(path, [r]), append_records(path, [r], skip_present=True)
        (1, 0)
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
    try:
        return _append(path, records, skip_present)
    except OSError as err:
        raise LogWriteError(f"cannot append to tuning log {path}: {err.strerror or err}") from err


def _append(path: str, records: list, skip_present: bool) -> int:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if skip_present and size:
            present = {r.identity for r in _parse_lines(io.BytesIO(_read_all(fd, size)))[0]}
            records = [r for r in records if r.identity not in present]
            if not records:
                return 0
        payload = "".join(record_line(r) + "\n" for r in records).encode("utf-8")
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            payload = b"\n" + payload
        _write_all_or_nothing(fd, payload, size)
    finally:
        os.close(fd)  # closing releases the lock
    return len(records)


def _read_all(fd: int, size: int) -> bytes:
    chunks, offset = [], 0
    while offset < size:
        chunk = os.pread(fd, min(size - offset, 1 << 20), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_all_or_nothing(fd: int, payload: bytes, size: int) -> None:
    """Write ``payload`` at the end of the file and fsync it; on failure cut the file back to
    ``size`` (its length before) and raise."""
    try:
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except OSError:
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        except OSError:
            pass  # the cut-short line stays; readers report and skip it
        raise


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
    with open(os.fspath(path), "rb") as f:
        records, problems = _parse_lines(f)
    return LogContents(tuple(records), tuple(problems))


def _parse_lines(lines: Iterable[bytes]) -> tuple[list, list]:
    """(records, problems) of raw log lines, numbered from 1; see ``read_log``."""
    records, problems = [], []
    for number, raw in enumerate(lines, start=1):
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
    return records, problems


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
    except RecursionError:         # arrays or objects nested deeper than Python's recursion limit
        raise ValueError("JSON nested too deeply to read") from None
    if not isinstance(data, dict):
        raise ValueError(f"a record line must be a JSON object, got {type(data).__name__}")
    kind = data.pop("kind", LOG_KIND)
    if kind != LOG_KIND:
        raise ValueError(f"line is a {_short_repr(kind)} entry, not a {LOG_KIND!r}")
    try:
        return Record.from_json(data)
    except RecursionError:         # a field nested nearly as deep as the limit, met again while checking it
        raise ValueError("a record field is nested too deeply to read") from None


def _short_repr(value, width: int = 80) -> str:
    try:
        text = repr(value)
    except RecursionError:
        return f"(deeply nested {type(value).__name__})"
    return text if len(text) <= width else text[:width - 3] + "..."


def import_log(db, path: str | os.PathLike) -> tuple[int, int, tuple]:
    """Add a log's records to a ``Database`` in one transaction: returns (imported, skipped,
    problems) where skipped counts records already in the database (so importing twice adds
    nothing) and problems are the unreadable lines, as in ``read_log``.

    Example:
        >>> import tempfile, pathlib
        >>> from tilefuse.autotune.database import Database
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
        >>> _ = append_records(path, [Record.create("wk1", "d", "c", {"t": 8}, costs=[1e-3])])
        >>> db = Database(":memory:")
        >>> import_log(db, path), import_log(db, path)
        ((1, 0, ()), (0, 1, ()))
    """
    return import_contents(db, read_log(path))


def import_contents(db, contents: LogContents) -> tuple[int, int, tuple]:
    """``import_log`` of a log already read (``read_log``'s ``LogContents``).

    Example:
        >>> import tempfile, pathlib
        >>> from tilefuse.autotune.database import Database
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
        >>> _ = append_records(path, [Record.create("wk1", "d", "c", {"t": 8}, costs=[1e-3])])
        >>> import_contents(Database(":memory:"), read_log(path))
        (1, 0, ())
    """
    imported = db.add_many(contents.records)
    return imported, len(contents.records) - imported, contents.problems


def export_log(db, path: str | os.PathLike, workload_key: str | None = None,
               target_key: str | None = None) -> int:
    """Append the database's records (optionally of one workload and/or target) to a log,
    leaving out those the log already holds (by ``Record.identity``); returns how many were
    written. Exporting twice writes nothing the second time.

    Example:
        >>> import tempfile, pathlib
        >>> from tilefuse.autotune.database import Database
        >>> db = Database(":memory:")
        >>> db.add(Record.create("wk1", "d", "c", {"t": 8}, costs=[1e-3]))
        True
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "out.jsonl"
        >>> export_log(db, path), export_log(db, path)
        (1, 0)
    """
    return append_records(path, db.records(workload_key=workload_key, target_key=target_key),
                          skip_present=True)
