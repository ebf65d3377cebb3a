"""The tuning database: a sqlite file (through sqlite-utils) of workloads and measured records.

Layout (database schema version ``DB_SCHEMA_VERSION``):

* ``workloads``: ``key`` (primary), ``task_name``, ``template``, ``description`` (JSON),
  ``created`` (unix seconds);
* ``records``: one row per measurement, the fields of ``Record`` (JSON text for config, costs
  and versions) plus ``config_key`` (canonical config JSON) and ``mean_cost`` (NULL for an
  error); ``schema_version`` is the record schema the row was first written in (0: migrated);
* ``meta``: ``key``/``value`` pairs, ``schema_version`` among them;
* view ``best_records``: the ok record of least mean cost per (workload_key, target_key),
  the earliest on a tie;
* ``claims``: the configs tuners are measuring right now, one row per (workload_key,
  target_key, config_key) with the claiming ``owner`` (a token per open ``Database``), its
  ``host`` and ``pid`` and the unix time it ``claimed`` the config. Coordination state, not
  data: created by the first ``claim``, outside the schema version (an older tilefuse ignores
  it), never exported.

Several tuners on one file measure each config once: before measuring, a tuner ``claim``s
its batch in one ``BEGIN IMMEDIATE`` transaction, which grants only the configs that are
neither measured nor claimed by another live tuner; storing a record (``add_many``) ends the
claim on its config, and ``release`` drops the claims of a batch that will not be stored. A
claim whose process is gone (same host, pid no longer running) or that is older than
``CLAIM_TIMEOUT_SECONDS`` is stale and granted to the next claimant, so a tuner killed with
``kill -9`` blocks nothing for good.

The file is opened in WAL mode; every write is one ``BEGIN IMMEDIATE`` transaction, so several
processes can tune into one file, and a process killed mid-run loses only what it had not
committed. Open one ``Database`` per process (a connection must not cross a fork).

Database schema history: version 0 (legacy) had no ``meta`` table, ``workloads`` without
``created`` and ``records`` with only ``id``, ``workload_key``, ``config``, ``costs``,
``error_kind``, ``error_msg``, ``target_cpu``, ``target_key`` and ``timestamp``. Opening such a file migrates it in
place: missing tables and columns are added and filled from the existing data.

What a file is gets decided from its tables and their columns before anything is written into
it (the WAL switch included): an empty file becomes a tuning database; another application's
sqlite file (even one with a table named ``records``), a damaged one (sqlite's quick_check), a
newer one or one whose ``meta`` schema_version is not a version is a ``TuningDatabaseError``
naming it, and is left byte-identical. Damage quick_check does not see surfaces later: a row
that no longer makes a valid record (text that is not UTF-8 included) is skipped with a warning
naming it, and any other sqlite error of a read or write is a ``TuningDatabaseError`` naming the
file and the fix; only "database is locked" (other writers held the file longer than
``BUSY_TIMEOUT_SECONDS``) stays an ``sqlite3.OperationalError``.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import random
import socket
import sqlite3
import time
import urllib.parse
import uuid
import warnings
from dataclasses import dataclass
from typing import Iterable

import sqlite_utils

from tilefuse.autotune.record import Record, SCHEMA_VERSION, config_key, is_text
from tilefuse.autotune.target import current_target
from tilefuse.tensorir.errors import TilefuseError

DB_SCHEMA_VERSION = 1
BUSY_TIMEOUT_SECONDS = 60.0
CLAIM_TIMEOUT_SECONDS = 1800.0   # a claim this old is stale even when its process looks alive
SQLITE_HEADER = b"SQLite format 3\x00"
"""The first bytes of every sqlite file."""

WORKLOAD_COLUMNS = {"key": str, "task_name": str, "template": str, "description": str,
                    "created": float}
RECORD_COLUMNS = {"id": int, "workload_key": str, "task_name": str, "template": str, "config": str, "config_key": str, "costs": str,
                  "mean_cost": float, "error_kind": str, "error_msg": str, "target_key": str,
                  "target_cpu": str, "target_features": str, "versions": str, "timestamp": float,
                  "build_seconds": float, "schema_version": int}

# the columns of a legacy (version 0) file's tables (see the module docstring): what tells one apart
# from another application's tables of the same names
LEGACY_WORKLOAD_COLUMNS = frozenset({"key", "task_name", "template", "description"})
LEGACY_RECORD_COLUMNS = frozenset({"id", "workload_key", "config", "costs", "error_kind", "error_msg",
                                   "target_cpu", "target_key", "timestamp"})
META_COLUMNS = frozenset({"key", "value"})

CLAIMS_SQL = """
CREATE TABLE IF NOT EXISTS claims (
    workload_key TEXT NOT NULL, target_key TEXT NOT NULL, config_key TEXT NOT NULL,
    owner TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, claimed REAL NOT NULL,
    PRIMARY KEY (workload_key, target_key, config_key))
"""

PICKS_SQL = """
CREATE TABLE IF NOT EXISTS picks (
    workload_key TEXT NOT NULL, target_key TEXT NOT NULL, config TEXT NOT NULL,
    default_cost REAL NOT NULL, tuned_cost REAL NOT NULL, spread REAL NOT NULL, timestamp REAL NOT NULL,
    PRIMARY KEY (workload_key, target_key))
"""

BEST_RECORDS_SQL = """
SELECT r.* FROM records AS r
WHERE r.error_kind IS NULL AND r.mean_cost IS NOT NULL AND r.id = (
    SELECT b.id FROM records AS b
    WHERE b.workload_key = r.workload_key AND b.target_key = r.target_key
      AND b.error_kind IS NULL AND b.mean_cost IS NOT NULL
    ORDER BY b.mean_cost, b.id LIMIT 1)
"""


class TuningDatabaseError(TilefuseError, ValueError):
    """The file given as a tuning database cannot be used: not sqlite, another application's,
    corrupt (found at open, or met by a later read or write), or written by a newer tilefuse.
    The message names the file."""


def _is_locked(exc: sqlite3.DatabaseError) -> bool:
    """Whether sqlite's error means another process holds the file (wait and retry), not damage."""
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def _database_errors(method):
    """A ``Database`` method whose sqlite errors (damage that quick_check at open did not see, met
    when a page is read or written) are a TuningDatabaseError naming the file and the fix;
    "database is locked" stays an OperationalError (other writers: wait and retry)."""
    @functools.wraps(method)
    def checked(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if _is_locked(exc):
                raise
            raise TuningDatabaseError(
                f"tuning database {self.path!r} cannot be used (sqlite says: {exc}); if it is damaged, move it "
                f"away and rebuild it from the tuning logs with `autotune import LOG --db {self.path}`") from None
    return checked


@dataclass(frozen=True, slots=True)
class Pick:
    """What a workload compiles with after its check (``Database.pick``): ``config`` (the
    tuned best, or the default when the tuned one was not faster), the default's and the tuned
    config's costs measured side by side (seconds, the best of interleaved rounds), and the
    measurement noise: how far the median round lies above the best one, relatively.

    Example:
        >>> Pick({"tile": 8}, 2e-3, 1e-3, 0.02).speedup
        2.0
    """
    config: dict
    default_cost: float
    tuned_cost: float
    spread: float

    @property
    def speedup(self) -> float:
        """The default's cost over the tuned config's, as measured side by side."""
        return self.default_cost / self.tuned_cost if self.tuned_cost > 0 else math.nan


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    """One row of the ``workloads`` table.

    Example:
        >>> WorkloadInfo("wk1", "dense", "complex", {"shape": [4, 4]}, 0.0).template
        'complex'
    """
    key: str
    task_name: str
    template: str
    description: dict
    created: float


@dataclass(frozen=True, slots=True)
class Claim:
    """One row of the ``claims`` table: ``owner`` (the ``claim_owner`` of a ``Database``,
    running as ``pid`` on ``host``) is measuring ``config_key`` of a workload on a target
    since ``claimed`` (unix seconds).

    Example:
        >>> c = Claim("wk1", "cpu-key", '{"tile":8}', "a1b2", "box", 4242, 0.0)
        >>> c.is_stale(now=10.0, stale_after=5.0)
        True
    """
    workload_key: str
    target_key: str
    config_key: str
    owner: str
    host: str
    pid: int
    claimed: float

    def is_stale(self, now: float | None = None, stale_after: float = CLAIM_TIMEOUT_SECONDS) -> bool:
        """True when the claim may be taken over: it is ``stale_after`` seconds old, or it was
        made on this host by a process that is no longer running (another host's pids cannot
        be checked: only the age counts there).

        Example:
            >>> Claim("wk1", "t", "{}", "me", socket.gethostname(), os.getpid(), time.time()).is_stale()
            False
        """
        now = time.time() if now is None else now
        if now - self.claimed >= stale_after:
            return True
        return self.host == _this_host() and not _process_alive(self.pid)


class Database:
    """A tuning database file (created when missing), e.g. ``Database("tuning.db")``.

    Example:
        >>> with Database(":memory:") as db:
        ...     r = Record.create("wk1", "dense", "complex", {"tile": 8}, costs=[2e-3])
        ...     db.add(r)
        ...     db.best("wk1") == r, db.missing(["wk1", "wk2"])
        True
        (True, ['wk2'])
    """

    def __init__(self, path: str | os.PathLike = "tuning.db"):
        self.path = os.fspath(path)
        self._pid = os.getpid()
        self.claim_owner = uuid.uuid4().hex      # whose claims (``claim``) this object makes
        self.read_only = self.path != ":memory:" and _read_only(self.path)
        if self.path != ":memory:":
            _check_sqlite_file(self.path)
            if not self.read_only:
                os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        try:
            if self.read_only:    # no WAL switch and no -shm file: readable where nothing may be written
                uri = f"file:{urllib.parse.quote(os.path.abspath(self.path))}?mode=ro&immutable=1"
                conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_SECONDS)
            else:
                conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS)
        except sqlite3.Error as exc:
            raise TuningDatabaseError(f"cannot open tuning database {self.path!r}: {exc}") from None
        # a damaged row's text that is not UTF-8 reads as a str with surrogates (rather than an
        # OperationalError for the whole query); Record refuses it, so the row is skipped with a warning
        conn.text_factory = _decode_text
        self._db = sqlite_utils.Database(conn, execute_plugins=False)
        try:
            if self.path != ":memory:" and os.path.exists(self.path) and os.path.getsize(self.path):
                _check_integrity(conn, self.path)
            # decided from what is in the file before anything is written into it (the WAL switch
            # included): another application's file is refused as it was
            version = _layout_version(self._db, self.path)
            if not self.read_only:
                _enable_wal(self._db)
                self._migrate(version)
            elif version != DB_SCHEMA_VERSION:
                raise TuningDatabaseError(f"{self.path!r} is read-only and in an older database schema; copy it "
                                          f"somewhere writable so that it can be migrated")
        except sqlite3.DatabaseError as exc:
            conn.close()
            if _is_locked(exc):
                raise  # other writers held the file longer than BUSY_TIMEOUT_SECONDS
            raise TuningDatabaseError(
                f"{self.path!r} is not a usable tuning database (sqlite says: {exc})") from None
        except BaseException:
            conn.close()
            raise

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent).

        Example:
            >>> db = Database(":memory:"); db.close(); db.close()
        """
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Database({self.path!r})"

    @property
    @_database_errors
    def schema_version(self) -> int:
        """The schema version of the open file (``DB_SCHEMA_VERSION`` once opened).

        Example:
            >>> Database(":memory:").schema_version == DB_SCHEMA_VERSION
            True
        """
        return self._stored_schema_version()

    def _conn(self) -> sqlite_utils.Database:
        if self._db is None:
            raise ValueError(f"tuning database {self.path!r} is closed")
        if os.getpid() != self._pid:
            raise RuntimeError(f"tuning database {self.path!r} was opened in another process; "
                               "open a new Database in each process")
        return self._db

    @contextlib.contextmanager
    def _write(self):
        """One write transaction taking the write lock up front (waits for other writers)."""
        if self.read_only:
            raise TuningDatabaseError(f"tuning database {self.path!r} is read-only here (the file or its directory "
                                      f"is not writable); pass a writable --db to record into")
        db = self._conn()
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.conn.rollback()
            raise
        else:
            db.conn.commit()

    # -- schema and migration ---------------------------------------------------------------

    def _stored_schema_version(self) -> int:
        db = self._conn()
        if "meta" not in db.table_names():
            return 0
        version = _meta_schema_version(db, self.path)
        return 0 if version is None else version

    def _migrate(self, version: int) -> None:
        """Bring a file of database schema ``version`` (``_layout_version``) to ``DB_SCHEMA_VERSION``."""
        if version == DB_SCHEMA_VERSION:
            return
        with self._write() as db:
            version = _layout_version(db, self.path)  # another process may have migrated meanwhile
            while version < DB_SCHEMA_VERSION:
                _DB_MIGRATIONS[version](db)
                version += 1
            db["meta"].insert({"key": "schema_version", "value": str(version)}, replace=True)

    # -- writes ------------------------------------------------------------------------------

    @_database_errors
    def add_workload(self, key: str, task_name: str, template: str,
                     description: dict | None = None) -> bool:
        """Register a workload; True when it was new. Registering it again is a no-op, but the
        same key with another task name or template is a ValueError (keys are structural).

        Example:
            >>> db = Database(":memory:")
            >>> db.add_workload("wk1", "dense", "complex", {"shape": [128, 768]})
            True
            >>> db.add_workload("wk1", "dense", "complex")
            False
        """
        for name, value in (("key", key), ("task_name", task_name), ("template", template)):
            if not isinstance(value, str):
                raise ValueError(f"workload {name} must be a str, got {value!r}")
            if not is_text(value):
                raise ValueError(f"workload {name} must be valid Unicode text (encodable as UTF-8), got {value!r}")
        if not key:
            raise ValueError("workload key must not be empty")
        description = {} if description is None else description
        if not isinstance(description, dict):
            raise ValueError(f"workload description must be a dict, got {type(description).__name__}")
        try:
            description_json = json.dumps(description, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"workload description is not plain JSON: {exc}") from None
        with self._write() as db:
            row = db.execute("SELECT task_name, template FROM workloads WHERE key = ?",
                             [key]).fetchone()
            if row is not None:
                if tuple(row) != (task_name, template):
                    raise ValueError(
                        f"workload {key!r} is already registered as task {row[0]!r} of template "
                        f"{row[1]!r}, not task {task_name!r} of template {template!r}")
                return False
            db["workloads"].insert({"key": key, "task_name": task_name, "template": template,
                                    "description": description_json, "created": time.time()})
            return True

    def add(self, record: Record) -> bool:
        """Store one record in its own transaction; False when an identical measurement (same
        ``Record.identity``) is already stored. Registers its workload if needed.

        Example:
            >>> db = Database(":memory:")
            >>> r = Record.create("wk1", "dense", "complex", {"tile": 8}, costs=[1e-3])
            >>> db.add(r), db.add(r)
            (True, False)
        """
        return self.add_many([record]) == 1

    @_database_errors
    def add_many(self, records: Iterable[Record]) -> int:
        """Store records in one transaction (all or none); returns how many were new
        (measurements already stored, by ``Record.identity``, are skipped). The claims on their
        configs (see ``claim``) end in the same transaction.

        Example:
            >>> db = Database(":memory:")
            >>> rs = [Record.create("wk1", "dense", "complex", {"tile": t}, costs=[t * 1e-3])
            ...       for t in (4, 8)]
            >>> db.add_many(rs), db.add_many(rs)
            (2, 0)
        """
        records = list(records)
        for record in records:
            if not isinstance(record, Record):
                raise TypeError(f"add_many takes Record objects, got {type(record).__name__}")
        if not records:
            return 0
        with self._write() as db:
            seen = set()
            rows = []
            for record in records:
                identity = record.identity
                if identity in seen or self._stored(db, identity):
                    continue
                seen.add(identity)
                rows.append(_record_row(record))
            workloads = {}
            for record in records:
                workloads.setdefault(record.workload_key, {
                    "key": record.workload_key, "task_name": record.task_name,
                    "template": record.template, "description": "{}", "created": time.time()})
            db["workloads"].insert_all(workloads.values(), ignore=True)
            if rows:
                db["records"].insert_all(rows)
            if _has_claims(db):     # a stored measurement ends the claim on its config
                db.conn.executemany(
                    "DELETE FROM claims WHERE workload_key = ? AND target_key = ? AND config_key = ?",
                    {(r.workload_key, r.target_key, r.config_key) for r in records})
            return len(rows)

    @_database_errors
    def claim(self, workload_key: str, target_key: str, config_keys: Iterable[str]) -> list[str]:
        """Claim configs (canonical ``config_key``s) of a workload on a target before measuring
        them; returns those granted, in the given order. A config is refused when it is already
        measured, or claimed by another tuner whose claim is not stale (``Claim.is_stale``):
        that tuner will store its record. One transaction, so two tuners never get the same
        config. Storing a config's record (``add_many``) ends its claim; ``release`` gives back
        the ones that will not be stored.

        Example:
            >>> import tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "tuning.db")
            >>> a, b = Database(path), Database(path)          # two tuners on one file
            >>> a.claim("wk1", "t", ['{"t":4}', '{"t":8}']), b.claim("wk1", "t", ['{"t":8}', '{"t":16}'])
            (['{"t":4}', '{"t":8}'], ['{"t":16}'])
        """
        keys = list(dict.fromkeys(config_keys))
        if not keys:
            return []
        with self._write() as db:
            db.conn.execute(CLAIMS_SQL)
            marks = ",".join("?" * len(keys))
            measured = {row[0] for row in db.execute(
                f"SELECT DISTINCT config_key FROM records WHERE workload_key = ? AND target_key = ? "
                f"AND config_key IN ({marks})", [workload_key, target_key, *keys])}
            held = {row["config_key"]: Claim(**row) for row in db.query(
                f"SELECT * FROM claims WHERE workload_key = ? AND target_key = ? AND config_key IN ({marks})",
                [workload_key, target_key, *keys])}
            now = time.time()
            granted = [key for key in keys if key not in measured
                       and (key not in held or held[key].owner == self.claim_owner or held[key].is_stale(now))]
            db.conn.executemany(
                "INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(workload_key, target_key, key, self.claim_owner, _this_host(), os.getpid(), now)
                 for key in granted])
        return granted

    @_database_errors
    def release(self, workload_key: str, target_key: str, config_keys: Iterable[str]) -> None:
        """Drop this object's claims on ``config_keys`` (a batch that will not be stored:
        its measurement was interrupted or failed before a record was made); others' claims
        and configs never claimed are left alone.

        Example:
            >>> db = Database(":memory:")
            >>> db.claim("wk1", "t", ['{"t":4}']); db.release("wk1", "t", ['{"t":4}'])
            ['{"t":4}']
            >>> db.claims()
            []
        """
        keys = list(config_keys)
        if not keys or self.read_only or not _has_claims(self._conn()):
            return
        with self._write() as db:
            db.conn.executemany(
                "DELETE FROM claims WHERE workload_key = ? AND target_key = ? AND config_key = ? AND owner = ?",
                [(workload_key, target_key, key, self.claim_owner) for key in keys])

    @_database_errors
    def set_pick(self, workload_key: str, target_key: str, pick: "Pick") -> None:
        """Keep ``pick``, the config a workload compiles with on a target after its best tuned
        config was measured again against the default (``autotune.tune``); it replaces an
        earlier pick.

        Example:
            >>> db = Database(":memory:")
            >>> db.set_pick("wk1", "t", Pick({"tile": 8}, 2e-3, 1e-3, 0.01)); db.pick("wk1", "t").config
            {'tile': 8}
        """
        with self._write() as db:
            db.conn.execute(PICKS_SQL)
            db.conn.execute("INSERT OR REPLACE INTO picks VALUES (?, ?, ?, ?, ?, ?, ?)",
                            [workload_key, target_key, json.dumps(pick.config, sort_keys=True), pick.default_cost,
                             pick.tuned_cost, pick.spread, time.time()])

    @_database_errors
    def pick(self, workload_key: str, target_key: str | None = None) -> "Pick | None":
        """The config a workload compiles with on a target (default: this machine) as its last
        check against the default chose it, or None when it was never checked (or the row is
        damaged: then the best record decides, as before any check).

        Example:
            >>> Database(":memory:").pick("wk1") is None
            True
        """
        target_key = current_target().key if target_key is None else target_key
        conn = self._conn()
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'picks'").fetchone() is None:
            return None
        row = conn.execute("SELECT config, default_cost, tuned_cost, spread FROM picks "
                           "WHERE workload_key = ? AND target_key = ?", [workload_key, target_key]).fetchone()
        if row is None:
            return None
        try:
            config = json.loads(row[0])
            if not isinstance(config, dict):
                raise ValueError(f"config {config!r} is no object")
            return Pick(config, float(row[1]), float(row[2]), float(row[3]))
        except (TypeError, ValueError) as err:
            warnings.warn(f"tuning database {self.path!r}: the pick of workload {workload_key[:16]} is damaged "
                          f"({err}); its best record is used", stacklevel=2)
            return None

    @_database_errors
    def claims(self, workload_key: str | None = None) -> list[Claim]:
        """The claims held now (stale ones included), optionally of one workload.

        Example:
            >>> Database(":memory:").claims()
            []
        """
        db = self._conn()
        if not _has_claims(db):
            return []
        where, params = _where(workload_key=workload_key)
        return [Claim(**row) for row in db.query("SELECT * FROM claims" + _where_sql(where), params)]

    @staticmethod
    def _stored(db: sqlite_utils.Database, identity: tuple) -> bool:
        return db.execute(
            "SELECT 1 FROM records WHERE workload_key = ? AND config_key = ? AND target_key = ? "
            "AND timestamp = ? LIMIT 1", list(identity)).fetchone() is not None

    # -- reads -------------------------------------------------------------------------------

    @_database_errors
    def records(self, workload_key: str | None = None, target_key: str | None = None,
                ok_only: bool = False) -> list[Record]:
        """Stored records in insertion order, optionally of one workload and/or one target
        (None: all targets), optionally only successful ones. A row that no longer makes a
        valid Record is skipped with a warning naming it.

        Example:
            >>> db = Database(":memory:")
            >>> db.add(Record.create("wk1", "dense", "complex", {"tile": 8}, error_kind="crash"))
            True
            >>> len(db.records("wk1")), len(db.records("wk1", ok_only=True))
            (1, 0)
        """
        where, params = _where(workload_key=workload_key, target_key=target_key)
        if ok_only:
            where.append("error_kind IS NULL AND mean_cost IS NOT NULL")
        sql = "SELECT * FROM records" + _where_sql(where) + " ORDER BY id"
        return self._rows_to_records(self._conn().query(sql, params))

    @_database_errors
    def best(self, workload_key: str, target_key: str | None = None) -> Record | None:
        """The ok record of least mean cost of a workload on a target (default: this machine),
        or None when it has none.

        Example:
            >>> db = Database(":memory:")
            >>> db.add_many(Record.create("wk1", "dense", "complex", {"tile": t}, costs=[c])
            ...             for t, c in ((4, 3e-3), (8, 1e-3), (16, 2e-3)))
            3
            >>> db.best("wk1").config, db.best("wk2")
            ({'tile': 8}, None)
        """
        target_key = current_target().key if target_key is None else target_key
        rows = self._conn().query(
            "SELECT * FROM best_records WHERE workload_key = ? AND target_key = ?",
            [workload_key, target_key])
        found = self._rows_to_records(rows)
        if found or not self._has_ok_rows(workload_key, target_key):
            return found[0] if found else None
        # the best row is damaged (reported by a warning): the next valid one in cost order
        candidates = self.records(workload_key, target_key, ok_only=True)
        return min(candidates, key=lambda r: r.mean_cost, default=None)

    def _has_ok_rows(self, workload_key: str, target_key: str) -> bool:
        return self._conn().execute(
            "SELECT 1 FROM best_records WHERE workload_key = ? AND target_key = ? LIMIT 1",
            [workload_key, target_key]).fetchone() is not None

    @_database_errors
    def best_all(self, target_key: str | None = None) -> dict[str, Record]:
        """The best record of every workload tuned on a target (default: this machine).

        Example:
            >>> db = Database(":memory:")
            >>> db.add(Record.create("wk1", "dense", "complex", {"tile": 8}, costs=[1e-3]))
            True
            >>> sorted(db.best_all())
            ['wk1']
        """
        target_key = current_target().key if target_key is None else target_key
        rows = list(self._conn().query(
            "SELECT * FROM best_records WHERE target_key = ? ORDER BY workload_key", [target_key]))
        found = {r.workload_key: r for r in self._rows_to_records(rows)}
        result = {}
        for row in rows:  # a damaged best row (warned about) gives way to the next valid one
            key = row["workload_key"]
            record = found[key] if key in found else self.best(key, target_key)
            if record is not None:
                result[key] = record
        return result

    @_database_errors
    def measured_configs(self, workload_key: str, target_key: str | None = None) -> set[str]:
        """Canonical config keys (``config_key``) already measured for a workload on a target
        (default: this machine), errors included: a tuner that resumes measures none of them
        again.

        Example:
            >>> db = Database(":memory:")
            >>> db.add(Record.create("wk1", "dense", "complex", {"tile": 8}, error_kind="timeout"))
            True
            >>> db.measured_configs("wk1")
            {'{"tile":8}'}
        """
        target_key = current_target().key if target_key is None else target_key
        cursor = self._conn().execute(
            "SELECT DISTINCT config_key FROM records WHERE workload_key = ? AND target_key = ?",
            [workload_key, target_key])
        return {row[0] for row in cursor if row[0] is not None}

    @_database_errors
    def missing(self, workload_keys: Iterable[str], target_key: str | None = None) -> list[str]:
        """The workload keys (in the given order, without repeats) with no ok record on a
        target (default: this machine).

        Example:
            >>> db = Database(":memory:")
            >>> db.add(Record.create("wk1", "dense", "complex", {"tile": 8}, costs=[1e-3]))
            True
            >>> db.missing(["wk2", "wk1", "wk2"])
            ['wk2']
        """
        if isinstance(workload_keys, str):
            raise TypeError("missing takes a list of workload keys, not one str")
        target_key = current_target().key if target_key is None else target_key
        tuned = {row[0] for row in self._conn().execute(
            "SELECT workload_key FROM best_records WHERE target_key = ?", [target_key])}
        result = []
        for key in workload_keys:
            if key not in tuned and key not in result:
                result.append(key)
        return result

    @_database_errors
    def workloads(self) -> list[WorkloadInfo]:
        """Registered workloads, by key. A row whose text is not valid (damage) is skipped with a
        warning naming it.

        Example:
            >>> db = Database(":memory:")
            >>> db.add_workload("wk1", "dense", "complex", {"m": 128})
            True
            >>> [(w.key, w.description) for w in db.workloads()]
            [('wk1', {'m': 128})]
        """
        result = []
        for row in self._conn().query("SELECT * FROM workloads ORDER BY key"):
            try:
                result.append(_row_workload(row))
            except (ValueError, TypeError) as exc:
                warnings.warn(f"{self.path}: workloads row {row.get('key')!r} skipped: {exc}", stacklevel=3)
        return result

    # -- compiled code ----------------------------------------------------------------------

    @_database_errors
    def cache_kernel(self, key: str, blob: bytes) -> None:
        """Keep compiled code under ``key`` (the caller's hash of workload, config, target and
        code version), so a later compile of a tuned model skips LLVM. A cache: replaced
        freely, never migrated.

        Example:
            >>> with Database(":memory:") as db:
            ...     db.cache_kernel("k1", b"code"); db.cached_kernel("k1"), db.cached_kernel("k2")
            (b'code', None)
        """
        with self._write() as db:
            db["kernels"].insert({"key": key, "blob": bytes(blob), "timestamp": time.time()},
                                 pk="key", replace=True)

    @_database_errors
    def cached_kernel(self, key: str) -> bytes | None:
        """The code ``cache_kernel`` kept under ``key``, or None.

        Example:
            >>> Database(":memory:").cached_kernel("nothing") is None
            True
        """
        db = self._conn()
        if "kernels" not in db.table_names():
            return None
        row = db.execute("SELECT blob FROM kernels WHERE key = ?", [key]).fetchone()
        return row[0] if row is not None and isinstance(row[0], bytes) else None   # damaged: a miss

    def _rows_to_records(self, rows: Iterable[dict]) -> list[Record]:
        result = []
        for row in rows:
            try:
                result.append(_row_record(row))
            except (ValueError, TypeError) as exc:
                warnings.warn(f"{self.path}: records row id {row.get('id')} skipped: {exc}",
                              stacklevel=4)
        return result


# -- rows <-> records --------------------------------------------------------------------------

def _record_row(record: Record) -> dict:
    return {
        "workload_key": record.workload_key,
        "task_name": record.task_name,
        "template": record.template,
        "config": record.config_key,
        "config_key": record.config_key,
        "costs": json.dumps(list(record.costs)),
        "mean_cost": record.mean_cost if record.is_ok else None,
        "error_kind": record.error_kind,
        "error_msg": record.error_msg,
        "target_key": record.target_key,
        "target_cpu": record.target_cpu,
        "target_features": record.target_features,
        "versions": json.dumps(record.versions, sort_keys=True),
        "timestamp": record.timestamp,
        "build_seconds": record.build_seconds,
        "schema_version": record.schema_version,
    }


def _row_record(row: dict) -> Record:
    def load(column, default):
        text = row.get(column)
        if text is None:
            return default
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"column {column} is not JSON: {text!r}") from None

    return Record(
        workload_key=row["workload_key"], task_name=row.get("task_name") or "",
        template=row.get("template") or "",
        config=load("config", None), costs=tuple(load("costs", [])),
        error_kind=row.get("error_kind"), error_msg=row.get("error_msg") or "",
        target_cpu=row.get("target_cpu") or "", target_features=row.get("target_features") or "",
        target_key=row.get("target_key"), versions=load("versions", {}),
        timestamp=row.get("timestamp") if row.get("timestamp") is not None else 0.0,
        build_seconds=row.get("build_seconds") or 0.0, schema_version=SCHEMA_VERSION)


def _row_workload(row: dict) -> WorkloadInfo:
    for column in ("key", "task_name", "template", "description"):
        value = row.get(column)
        if value is not None and not (isinstance(value, str) and is_text(value)):
            raise ValueError(f"column {column} is not valid text: {value!r}")
    if not row.get("key"):
        raise ValueError("it has no key")
    try:
        description = json.loads(row["description"] or "{}")
    except (json.JSONDecodeError, RecursionError):
        description = {"unparsed": row["description"]}
    return WorkloadInfo(row["key"], row["task_name"] or "", row["template"] or "",
                        description, float(row["created"] or 0.0))


def _where(**columns) -> tuple[list[str], list]:
    where, params = [], []
    for column, value in columns.items():
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    return where, params


def _where_sql(where: list[str]) -> str:
    return " WHERE " + " AND ".join(where) if where else ""


def _has_claims(db: sqlite_utils.Database) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'claims'").fetchone() is not None


def _this_host() -> str:
    return socket.gethostname()


def _process_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _enable_wal(db: sqlite_utils.Database) -> None:
    """Switch the file to WAL mode. Several processes opening a new file at once can make the
    switch report "database is locked" at once (sqlite does not wait for it): retry until
    ``BUSY_TIMEOUT_SECONDS``."""
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    delay = 0.005
    while True:
        try:
            db.enable_wal()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(delay * (1 + random.random()))
        delay = min(delay * 2, 0.2)


def _read_only(path: str) -> bool:
    """Whether the database at ``path`` can only be read: the file or its directory is not
    writable (WAL needs its -wal and -shm files next to it)."""
    if os.path.exists(path):
        return not os.access(path, os.W_OK) or not os.access(os.path.dirname(os.path.abspath(path)), os.W_OK)
    return False


def _decode_text(data: bytes) -> str:
    """The connection's ``text_factory``: UTF-8, with bytes that are not (damage) kept as lone
    surrogates, which ``Record`` refuses as not valid text."""
    return data.decode("utf-8", "surrogateescape")


def _meta_schema_version(db: sqlite_utils.Database, path: str) -> int | None:
    """The ``schema_version`` of the ``meta`` table (None when it has none); TuningDatabaseError
    for a value that is not a schema version (a non-negative int)."""
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return None
    try:
        version = int(row[0])
    except (TypeError, ValueError):
        version = None
    if version is None or version < 0:
        raise TuningDatabaseError(
            f"{path!r}: meta schema_version {row[0]!r} is not a database schema version (a non-negative int); "
            f"the file is damaged or not a tuning database: move it away or pass another --db path")
    return version


def _layout_version(db: sqlite_utils.Database, path: str) -> int:
    """The database schema version of the file at ``path``, read from it without writing:
    0 for a new (empty) file and for a legacy one, else ``meta``'s ``schema_version``.
    TuningDatabaseError when the file is no tuning database, told by its tables' columns (not
    only their names: another application may have a table named ``records``), or one newer
    than this tilefuse, or its schema version is not one."""
    objects = db.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'").fetchall()
    if not objects:
        return 0                            # a new file: nothing in it yet
    tables = {name for kind, name in objects if kind == "table"}

    def columns(table: str) -> set:
        return {row[1] for row in db.execute(f"PRAGMA table_info([{table}])")}

    def foreign(why: str) -> TuningDatabaseError:
        return TuningDatabaseError(f"{path!r} is a sqlite database of something else ({why}), not a tuning "
                                   f"database; pass another --db path")

    if not tables & {"workloads", "records"}:
        raise foreign(f"tables {sorted(tables)}" if tables else
                      "no tables, only " + ", ".join(sorted(f"{kind} {name}" for kind, name in objects)))
    version = None
    if "meta" in tables:
        if not META_COLUMNS <= columns("meta"):
            raise foreign(f"its table meta has columns {sorted(columns('meta'))}, not {sorted(META_COLUMNS)}")
        version = _meta_schema_version(db, path)
    version = 0 if version is None else version
    if version > DB_SCHEMA_VERSION:
        raise TuningDatabaseError(
            f"{path!r} has database schema version {version}, newer than this tilefuse "
            f"understands ({DB_SCHEMA_VERSION}); upgrade tilefuse to use it")
    if version == 0:                        # legacy: the tables it has, each with its legacy columns
        expected = {"workloads": LEGACY_WORKLOAD_COLUMNS, "records": LEGACY_RECORD_COLUMNS}
        required = ()
    else:
        expected = {"workloads": WORKLOAD_COLUMNS.keys(), "records": RECORD_COLUMNS.keys()}
        required = ("workloads", "records")
    for table, wanted in expected.items():
        if table not in tables:
            if table in required:
                raise foreign(f"schema version {version} but no table {table}")
            continue
        lacking = set(wanted) - columns(table)
        if lacking:
            raise foreign(f"its table {table} lacks the column(s) {sorted(lacking)} of a tuning database's")
    return version


def _check_integrity(conn: sqlite3.Connection, path: str) -> None:
    """TuningDatabaseError when sqlite's quick_check finds damage: nothing is read from or
    written into a damaged file."""
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        if _is_locked(exc):
            raise
        rows = [(str(exc),)]
    if rows != [("ok",)]:
        found = "; ".join(" ".join(str(r[0]).split()) for r in rows[:3])    # sqlite's rows span lines
        raise TuningDatabaseError(f"tuning database {path!r} is damaged (sqlite quick_check: {found}); move it "
                                  f"away and rebuild it from the tuning logs with `autotune import LOG --db {path}`")


def starts_like_sqlite(path) -> bool:
    """Whether the file at ``path`` starts with the sqlite header, whatever its suffix (OSError
    when it cannot be read).

    Example:
        >>> import tempfile, pathlib
        >>> log = pathlib.Path(tempfile.mkdtemp()) / "t.db"; _ = log.write_text("{}")
        >>> starts_like_sqlite(log)
        False
    """
    with open(path, "rb") as f:
        return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER


def _check_sqlite_file(path: str) -> None:
    if os.path.isdir(path):
        raise TuningDatabaseError(f"tuning database path {path!r} is a directory, not a file")
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    if not starts_like_sqlite(path):
        raise TuningDatabaseError(f"{path!r} is not a sqlite database (it does not start with "
                                  "the sqlite header); move it away or pass another --db path")


# -- database migrations -------------------------------------------------------------------------

def _migrate_db_v0_to_v1(db: sqlite_utils.Database) -> None:
    """Create the version-1 layout, or bring a legacy (version 0) one up to it in place."""
    db["meta"].create({"key": str, "value": str}, pk="key", if_not_exists=True)
    _create_or_extend(db, "workloads", WORKLOAD_COLUMNS, pk="key")
    _create_or_extend(db, "records", RECORD_COLUMNS, pk="id")

    db.execute("UPDATE workloads SET description = '{}' WHERE description IS NULL")
    db.execute("UPDATE workloads SET created = 0 WHERE created IS NULL")
    for column in ("task_name", "template"):
        db.execute(f"UPDATE records SET {column} = coalesce((SELECT w.{column} FROM workloads AS w "
                   f"WHERE w.key = records.workload_key), '') WHERE {column} IS NULL")
    db.execute("UPDATE records SET target_features = '' WHERE target_features IS NULL")
    db.execute("UPDATE records SET versions = '{}' WHERE versions IS NULL")
    db.execute("UPDATE records SET build_seconds = 0 WHERE build_seconds IS NULL")
    db.execute("UPDATE records SET error_msg = '' WHERE error_msg IS NULL")
    db.execute("UPDATE records SET schema_version = 0 WHERE schema_version IS NULL")
    fills = []
    for row_id, config, costs, error_kind in db.execute(
            "SELECT id, config, costs, error_kind FROM records "
            "WHERE config_key IS NULL OR (mean_cost IS NULL AND error_kind IS NULL)").fetchall():
        canonical = _canonical_or_none(config)
        mean = _mean_or_none(costs, error_kind) if canonical is not None else None
        fills.append((config if canonical is None else canonical, mean, row_id))
    db.conn.executemany("UPDATE records SET config_key = ?, mean_cost = ? WHERE id = ?", fills)
    # legacy rows may name workloads that were never registered
    db.execute("INSERT OR IGNORE INTO workloads (key, task_name, template, description, created) "
               "SELECT DISTINCT workload_key, '', '', '{}', 0 FROM records")

    db["records"].create_index(["workload_key", "target_key", "mean_cost"],
                               index_name="records_by_workload_target", if_not_exists=True)
    db["records"].create_index(["workload_key", "config_key", "target_key", "timestamp"],
                               index_name="records_by_identity", if_not_exists=True)
    db.create_view("best_records", BEST_RECORDS_SQL, replace=True)


def _create_or_extend(db: sqlite_utils.Database, name: str, columns: dict, pk: str) -> None:
    table = db[name]
    if not table.exists():
        table.create(columns, pk=pk)
        return
    present = set(table.columns_dict)
    for column, column_type in columns.items():
        if column not in present:
            table.add_column(column, column_type)


def _canonical_or_none(config_text):
    try:
        return config_key(json.loads(config_text))
    except (TypeError, ValueError):
        return None  # a damaged row: kept as is, never a best; reading it reports it


def _mean_or_none(costs_text, error_kind):
    if error_kind is not None:
        return None
    try:
        costs = [float(c) for c in json.loads(costs_text)]
    except (TypeError, ValueError):
        return None
    if not costs or not all(math.isfinite(c) for c in costs):
        return None
    return sum(costs) / len(costs)


# _DB_MIGRATIONS[v] brings a database of schema version v to version v + 1 (inside a transaction).
_DB_MIGRATIONS = {0: _migrate_db_v0_to_v1}
