"""One measurement of one config of one tuning task: the unit the database and the logs store.

A ``Record`` is self-describing: workload, template, config, the measured costs (seconds per
run) or the error that stopped the measurement, the target it ran on, software versions, a
timestamp and the schema version of its JSON form. ``Record.from_json`` reads every schema
version ever written: older shapes go through ``MIGRATIONS`` one version at a time.

Schema history:

* version 0 (legacy, no ``schema_version`` key)::

      {"workload": KEY, "task": NAME, "template": NAME, "config": {...},
       "result": [seconds, ...], "error": null | "KIND: message" | "message",
       "cpu": NAME, "time": UNIX_SECONDS}

  only ``workload``, ``config`` and ``result`` are required; an error without a known
  ``KIND:`` prefix is a runtime error; the CPU features were not recorded, so a legacy record
  gets the target key of its CPU with no features (never the key of a real modern target).
* version 1: the fields of ``Record``, plus ``schema_version``.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from tilefuse.autotune.target import Target, current_target, target_key, versions as current_versions

SCHEMA_VERSION = 1
ERROR_KINDS = ("compile", "runtime", "timeout", "crash", "wrong_answer")


def config_key(config: dict) -> str:
    """The canonical JSON text of a config (sorted keys, no spaces), the same text as
    ``schedule.space.Config.to_json``; equal configs have equal keys.

    Example:
        >>> config_key({"tile_j": [-1, 8], "tile_i": [-1, 4]})
        '{"tile_i":[-1,4],"tile_j":[-1,8]}'
    """
    if not isinstance(config, dict):
        raise ValueError(f"config must be a dict of knob -> JSON value, got {type(config).__name__}")
    for name in config:
        if not isinstance(name, str):
            raise ValueError(f"config knob names must be str, got {name!r}")
    try:
        return json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config {config!r} is not plain JSON (finite numbers, str, bool, "
                         f"None, lists, dicts): {exc}") from None
    except RecursionError:
        raise ValueError("config is not plain JSON: it is nested too deeply") from None


def _finite_float(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number, got {value!r}")
    try:
        value = float(value)
    except OverflowError:          # an int beyond float's range (a JSON number like 1e400 written as digits)
        raise ValueError(f"{what} must be finite, got an int too large for a float") from None
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return value


def is_text(value: str) -> bool:
    """Whether a str is valid Unicode text: encodable as UTF-8 (no lone surrogates, such as a
    JSON ``"\\ud800"`` escape or an undecodable byte read with ``surrogateescape`` gives).
    A terminal, sqlite and a log file can take only such text.

    Example:
        >>> is_text("dense 32x128"), is_text("wk" + chr(0xD800))
        (True, False)
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _require_str(value: Any, what: str, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a str, got {type(value).__name__} {value!r}")
    if not allow_empty and not value:
        raise ValueError(f"{what} must not be empty")
    if not is_text(value):
        raise ValueError(f"{what} must be valid Unicode text (encodable as UTF-8), got {value!r}")
    return value


@dataclass(frozen=True, slots=True, eq=True)
class Record:
    """One measurement: the costs of running ``config`` of a task, or the error that stopped it.

    ``costs`` are seconds per run (one per repeat), non-empty exactly when ``error_kind`` is
    None. ``schema_version`` is the shape of these fields, always ``SCHEMA_VERSION`` in memory:
    older shapes are migrated on the way in. The config is stored in canonical form (a JSON round trip), so a record equals its
    own ``from_json(to_json())``. Use ``Record.create`` to fill target, versions and time from
    this process.

    Example:
        >>> r = Record("wk1", "dense", "complex", {"tile": [-1, 8]}, (0.002, 0.001),
        ...            None, "", "skylake", "+avx2", target_key("skylake", "+avx2"),
        ...            {"tilefuse": "0.1.0"}, 1700000000.0, 0.25)
        >>> r.is_ok, r.mean_cost
        (True, 0.0015)
        >>> Record.from_json(r.to_json()) == r
        True
    """
    workload_key: str
    task_name: str
    template: str
    config: dict
    costs: tuple
    error_kind: str | None
    error_msg: str
    target_cpu: str
    target_features: str
    target_key: str
    versions: dict
    timestamp: float
    build_seconds: float = 0.0
    schema_version: int = field(default=SCHEMA_VERSION)

    def __post_init__(self):
        _require_str(self.workload_key, "workload_key", allow_empty=False)
        _require_str(self.task_name, "task_name")
        _require_str(self.template, "template")
        # canonical config: a JSON round trip turns tuples into lists, so equal configs compare equal
        object.__setattr__(self, "config", json.loads(config_key(self.config)))
        if isinstance(self.costs, (str, bytes)) or not hasattr(self.costs, "__iter__"):
            raise ValueError(f"costs must be a sequence of seconds, got {self.costs!r}")
        costs = tuple(_finite_float(c, "each cost") for c in self.costs)
        if any(c < 0 for c in costs):
            raise ValueError(f"costs must be >= 0 seconds, got {costs}")
        object.__setattr__(self, "costs", costs)
        if self.error_kind is None:
            if not costs:
                raise ValueError("a record without an error must have at least one cost")
        else:
            if self.error_kind not in ERROR_KINDS:
                raise ValueError(f"unknown error kind {self.error_kind!r}; expected one of {ERROR_KINDS}")
            if costs:
                raise ValueError(f"an error record ({self.error_kind}) must have no costs, got {costs}")
        _require_str(self.error_msg, "error_msg")
        _require_str(self.target_cpu, "target_cpu")
        _require_str(self.target_features, "target_features")
        _require_str(self.target_key, "target_key", allow_empty=False)
        if not isinstance(self.versions, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and is_text(k) and is_text(v)
                for k, v in self.versions.items()):
            raise ValueError(f"versions must be a dict of str -> str (valid Unicode text), got {self.versions!r}")
        object.__setattr__(self, "versions", dict(self.versions))
        object.__setattr__(self, "timestamp", _finite_float(self.timestamp, "timestamp"))
        build_seconds = _finite_float(self.build_seconds, "build_seconds")
        if build_seconds < 0:
            raise ValueError(f"build_seconds must be >= 0, got {build_seconds}")
        object.__setattr__(self, "build_seconds", build_seconds)
        if isinstance(self.schema_version, bool) or self.schema_version != SCHEMA_VERSION:
            raise ValueError(f"a Record in memory has schema_version {SCHEMA_VERSION} (older "
                             f"shapes are migrated by from_json), got {self.schema_version!r}")

    def __hash__(self):
        return hash(self.identity)

    @classmethod
    def create(cls, workload_key: str, task_name: str, template: str, config: dict,
               costs=(), error_kind: str | None = None, error_msg: str = "",
               build_seconds: float = 0.0, target: Target | None = None,
               timestamp: float | None = None) -> "Record":
        """A record measured now on ``target`` (default: this machine) with this process's versions.

        Example:
            >>> r = Record.create("wk1", "dense", "complex", {"tile": 8}, error_kind="timeout",
            ...                   error_msg="ran longer than 10 s")
            >>> r.is_ok, r.mean_cost, r.target_key == current_target().key
            (False, inf, True)
        """
        target = target if target is not None else current_target()
        return cls(workload_key, task_name, template, config, tuple(costs), error_kind, error_msg,
                   target.cpu, target.features, target.key, current_versions(),
                   time.time() if timestamp is None else timestamp, build_seconds)

    @property
    def is_ok(self) -> bool:
        """True when the measurement succeeded (no error).

        Example:
            >>> Record.create("w", "t", "x", {}, costs=[1e-3]).is_ok
            True
        """
        return self.error_kind is None

    @property
    def mean_cost(self) -> float:
        """Mean seconds per run; infinity for an error record.

        Example:
            >>> Record.create("w", "t", "x", {}, costs=[1.0, 3.0]).mean_cost
            2.0
        """
        return sum(self.costs) / len(self.costs) if self.is_ok else math.inf

    @property
    def config_key(self) -> str:
        """Canonical JSON text of the config (see ``config_key``).

        Example:
            >>> Record.create("w", "t", "x", {"b": 1, "a": 2}, costs=[1.0]).config_key
            '{"a":2,"b":1}'
        """
        return config_key(self.config)

    @property
    def identity(self) -> tuple:
        """(workload_key, config_key, target_key, timestamp): what makes two stored copies of a
        measurement the same measurement (imports deduplicate on it).

        Example:
            >>> r = Record.create("w", "t", "x", {"a": 1}, costs=[1.0], timestamp=5.0)
            >>> r.identity == ("w", '{"a":1}', current_target().key, 5.0)
            True
        """
        return (self.workload_key, self.config_key, self.target_key, self.timestamp)

    def to_json(self) -> dict:
        """A JSON-ready dict of every field (costs as a list), with ``schema_version``.

        Example:
            >>> d = Record.create("w", "t", "x", {"a": 1}, costs=[1.0]).to_json()
            >>> d["costs"], d["schema_version"]
            ([1.0], 1)
        """
        return {
            "schema_version": SCHEMA_VERSION,
            "workload_key": self.workload_key,
            "task_name": self.task_name,
            "template": self.template,
            "config": json.loads(config_key(self.config)),
            "costs": list(self.costs),
            "error_kind": self.error_kind,
            "error_msg": self.error_msg,
            "target_cpu": self.target_cpu,
            "target_features": self.target_features,
            "target_key": self.target_key,
            "versions": dict(self.versions),
            "timestamp": self.timestamp,
            "build_seconds": self.build_seconds,
        }

    @classmethod
    def from_json(cls, data: dict) -> "Record":
        """The record of a dict written by ``to_json`` of any schema version (older versions are
        migrated); ValueError naming the problem for anything else. Unknown extra keys are
        ignored (newer minor additions).

        Example:
            >>> legacy = {"workload": "wk1", "config": {"tile": 4}, "result": [0.5, 1.5]}
            >>> r = Record.from_json(legacy)
            >>> r.workload_key, r.mean_cost, r.schema_version
            ('wk1', 1.0, 1)
        """
        if not isinstance(data, dict):
            raise ValueError(f"a record must be a JSON object, got {type(data).__name__}")
        version = data.get("schema_version", 0)
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ValueError(f"schema_version must be a non-negative int, got {version!r}")
        if version > SCHEMA_VERSION:
            raise ValueError(f"record has schema version {version}, newer than this tilefuse "
                             f"understands ({SCHEMA_VERSION}); upgrade tilefuse to read it")
        while version < SCHEMA_VERSION:
            data = MIGRATIONS[version](data)
            version += 1
        missing = [name for name in _V1_FIELDS if name not in data]
        if missing:
            raise ValueError(f"record is missing field(s) {missing}")
        if not isinstance(data["costs"], list):
            raise ValueError(f"costs must be a list of seconds, got {data['costs']!r}")
        return cls(**{name: data[name] for name in _V1_FIELDS}, schema_version=SCHEMA_VERSION)


_V1_FIELDS = ("workload_key", "task_name", "template", "config", "costs", "error_kind",
              "error_msg", "target_cpu", "target_features", "target_key", "versions",
              "timestamp", "build_seconds")


def first_measurements(records) -> list:
    """The trials among ``records`` (in measurement order): each one's first measurement of a
    config on a workload and target. A later record of the same config is a re-timing (the
    tuner times the default around every batch as its yardstick), not a trial.

    Example:
        >>> rs = [Record.create("w", "t", "x", {"a": a}, costs=[c]) for a, c in ((0, 2.0), (1, 1.0), (0, 3.0))]
        >>> [(r.config["a"], r.mean_cost) for r in first_measurements(rs)]
        [(0, 2.0), (1, 1.0)]
    """
    seen, found = set(), []
    for record in records:
        key = (record.workload_key, record.target_key, record.config_key)
        if key not in seen:
            seen.add(key)
            found.append(record)
    return found


def _legacy_error(error: Any) -> tuple[str | None, str]:
    if error is None:
        return None, ""
    if not isinstance(error, str):
        raise ValueError(f"legacy record error must be null or a message, got {error!r}")
    kind, sep, message = error.partition(":")
    if sep and kind.strip() in ERROR_KINDS:
        return kind.strip(), message.strip()
    return "runtime", error


def migrate_v0_to_v1(data: dict) -> dict:
    """The version-1 dict of a legacy (version 0) record; see the module docstring for the shape.

    Example:
        >>> d = migrate_v0_to_v1({"workload": "w", "config": {}, "result": [],
        ...                       "error": "timeout: over 10 s", "cpu": "skylake", "time": 3.0})
        >>> d["error_kind"], d["error_msg"], d["target_cpu"], d["timestamp"]
        ('timeout', 'over 10 s', 'skylake', 3.0)
    """
    missing = [name for name in ("workload", "config", "result") if name not in data]
    if missing:
        raise ValueError(f"legacy (version 0) record is missing field(s) {missing}")
    error_kind, error_msg = _legacy_error(data.get("error"))
    cpu = data.get("cpu", "unknown")
    if not isinstance(cpu, str) or not cpu:
        raise ValueError(f"legacy record cpu must be a non-empty str, got {cpu!r}")
    result = data["result"]
    if not isinstance(result, list):
        raise ValueError(f"legacy record result must be a list of seconds, got {result!r}")
    return {
        "schema_version": 1,
        "workload_key": data["workload"],
        "task_name": data.get("task", ""),
        "template": data.get("template", ""),
        "config": data["config"],
        "costs": result if error_kind is None else [],
        "error_kind": error_kind,
        "error_msg": error_msg,
        "target_cpu": cpu,
        "target_features": "",
        "target_key": target_key(cpu, ""),
        "versions": {},
        "timestamp": data.get("time", 0.0),
        "build_seconds": 0.0,
    }


# MIGRATIONS[v] turns a dict of schema version v into one of version v + 1.
MIGRATIONS: dict[int, Callable[[dict], dict]] = {0: migrate_v0_to_v1}
