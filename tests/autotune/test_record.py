"""Record: validation, JSON round trips, legacy migration; Target: feature normalisation and keys."""
import hashlib
import json
import math

import pytest
from hypothesis import given, strategies as st

from tilefuse.autotune.record import (ERROR_KINDS, MIGRATIONS, SCHEMA_VERSION, Record, config_key,
                             migrate_v0_to_v1)
from tilefuse.autotune.target import (Target, current_target, normalize_features, target_key, versions)
from tilefuse.schedule.space import Config

TARGET = Target.of("skylake-avx512", "+avx2,+fma,-avx512f")


def make(**overrides):
    fields = dict(workload_key="wk1", task_name="dense_relu", template="complex",
                  config={"tile_i": [-1, 4], "unroll": True}, costs=(2e-3, 1e-3), error_kind=None,
                  error_msg="", target_cpu=TARGET.cpu, target_features=TARGET.features,
                  target_key=TARGET.key, versions={"tilefuse": "0.1.0"}, timestamp=1700000000.5,
                  build_seconds=0.25)
    fields.update(overrides)
    return Record(**fields)


# -- round trips ---------------------------------------------------------------------------------

def test_ok_record_round_trips_through_json_text():
    r = make()
    text = json.dumps(r.to_json())
    back = Record.from_json(json.loads(text))
    assert back == r and hash(back) == hash(r)
    assert back.costs == (2e-3, 1e-3) and back.schema_version == SCHEMA_VERSION


def test_error_record_round_trips_and_has_infinite_mean_cost():
    r = make(costs=(), error_kind="timeout", error_msg="ran longer than 10 s")
    assert not r.is_ok and r.mean_cost == math.inf
    assert Record.from_json(r.to_json()) == r


def test_to_json_names_every_field_and_the_schema_version():
    d = make().to_json()
    assert d["schema_version"] == SCHEMA_VERSION
    assert set(d) == {"schema_version", "workload_key", "task_name", "template", "config", "costs",
                      "error_kind", "error_msg", "target_cpu", "target_features", "target_key",
                      "versions", "timestamp", "build_seconds"}
    assert d["costs"] == [2e-3, 1e-3]


def test_config_is_canonical_so_tuples_and_lists_compare_equal():
    a = make(config={"tile_i": (-1, 4), "unroll": True})
    b = make(config={"unroll": True, "tile_i": [-1, 4]})
    assert a == b and a.config == {"tile_i": [-1, 4], "unroll": True}
    assert a.config_key == '{"tile_i":[-1,4],"unroll":true}'


def test_config_key_matches_schedule_config_json():
    values = {"tile_j": [-1, 16, 4], "order": [2, 0, 1], "vec": "ji"}
    assert config_key(values) == Config(values).to_json()


def test_mean_cost_and_identity():
    r = make(costs=(1.0, 2.0, 6.0))
    assert r.mean_cost == 3.0 and r.is_ok
    assert r.identity == ("wk1", r.config_key, TARGET.key, 1700000000.5)


def test_record_is_immutable_and_owns_its_config():
    config = {"tile": [4]}
    r = make(config=config)
    config["tile"].append(8)
    assert r.config == {"tile": [4]}
    with pytest.raises(AttributeError):
        r.workload_key = "other"


def test_create_fills_this_machine_and_versions():
    r = Record.create("wk1", "t", "injective", {"v": 1}, costs=[1e-3], build_seconds=0.5)
    target = current_target()
    assert (r.target_cpu, r.target_features, r.target_key) == (target.cpu, target.features, target.key)
    assert r.versions == versions() and r.timestamp > 1.6e9 and r.build_seconds == 0.5
    other = Record.create("wk1", "t", "injective", {"v": 1}, costs=[1e-3], target=TARGET, timestamp=7.0)
    assert other.target_key == TARGET.key and other.timestamp == 7.0


json_values = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=5)
                           | st.floats(allow_nan=False, allow_infinity=False),
                           lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@given(config=st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=4),
       costs=st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=4))
def test_any_json_config_round_trips(config, costs):
    r = make(config=config, costs=costs)
    assert Record.from_json(json.loads(json.dumps(r.to_json()))) == r


# -- bad inputs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides, message", [
    (dict(costs=(), error_kind="segfault"), "unknown error kind"),
    (dict(config=[("tile", 4)]), "config must be a dict"),
    (dict(config={"tile": {1, 2}}), "not plain JSON"),
    (dict(config={"tile": float("nan")}), "not plain JSON"),
    (dict(config={4: "x"}), "knob names must be str"),
    (dict(costs=(1e-3, float("inf"))), "finite"),
    (dict(costs=(float("nan"),)), "finite"),
    (dict(costs=(-1e-3,)), ">= 0"),
    (dict(costs=(True,)), "must be a number"),
    (dict(costs="0.1"), "sequence of seconds"),
    (dict(costs=()), "at least one cost"),
    (dict(error_kind="crash"), "must have no costs"),
    (dict(workload_key=""), "workload_key must not be empty"),
    (dict(workload_key=7), "workload_key must be a str"),
    (dict(versions={"tilefuse": 1}), "versions must be a dict"),
    (dict(timestamp=float("nan")), "timestamp must be finite"),
    (dict(timestamp="now"), "timestamp must be a number"),
    (dict(build_seconds=-1.0), "build_seconds must be >= 0"),
    (dict(schema_version=0), "schema_version"),
    (dict(target_key=""), "target_key must not be empty"),
    (dict(costs=(10 ** 400,)), "each cost must be finite"),            # an int beyond float's range
    (dict(timestamp=-10 ** 400), "timestamp must be finite"),
    (dict(task_name="dense\ud800"), "task_name must be valid Unicode text"),    # a lone surrogate
    (dict(workload_key="wk\udcff"), "workload_key must be valid Unicode text"),
    (dict(error_msg="\udfff", costs=(), error_kind="crash"), "error_msg must be valid Unicode text"),
    (dict(target_cpu="sky\ud800lake"), "target_cpu must be valid Unicode text"),
    (dict(versions={"tilefuse": "0.1\ud800"}), "versions must be a dict"),
])
def test_bad_fields_raise_value_error_naming_the_problem(overrides, message):
    with pytest.raises(ValueError, match=message):
        make(**overrides)


def test_every_error_kind_is_accepted():
    assert ERROR_KINDS == ("compile", "runtime", "timeout", "crash", "wrong_answer")
    for kind in ERROR_KINDS:
        assert make(costs=(), error_kind=kind).error_kind == kind


@pytest.mark.parametrize("data, message", [
    ([1, 2], "must be a JSON object"),
    ({"schema_version": 1, "workload_key": "w"}, "missing field"),
    ({**make().to_json(), "schema_version": SCHEMA_VERSION + 1}, "newer than this tilefuse"),
    ({**make().to_json(), "schema_version": "1"}, "schema_version must be"),
    ({**make().to_json(), "schema_version": -1}, "schema_version must be"),
    ({**make().to_json(), "costs": "0.1"}, "costs must be a list"),
    ({**make().to_json(), "error_kind": "oops"}, "unknown error kind"),
    ({**make().to_json(), "config": "tile=4"}, "config must be a dict"),
    ({"workload": "w", "config": {}}, r"legacy \(version 0\) record is missing field\(s\) \['result'\]"),
    ({"workload": "w", "config": {}, "result": [1.0], "error": 3}, "legacy record error"),
    ({"workload": "w", "config": {}, "result": 1.0}, "legacy record result must be a list"),
    ({"workload": "w", "config": {}, "result": [0.5], "time": 10 ** 400}, "timestamp must be finite"),
    (json.loads('{"workload": "wk\\ud800", "config": {}, "result": [0.5]}'), "workload_key must be valid Unicode"),
])
def test_from_json_rejects_malformed_input(data, message):
    with pytest.raises(ValueError, match=message):
        Record.from_json(data)


def test_a_config_nested_too_deeply_is_a_value_error():
    deep = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ValueError, match="nested too deeply"):
        config_key({"tile": deep})
    with pytest.raises(ValueError, match="nested too deeply"):
        make(config={"tile": deep})


def test_from_json_ignores_unknown_extra_keys():
    data = {**make().to_json(), "comment": "added by a newer minor version"}
    assert Record.from_json(data) == make()


# -- legacy (schema version 0) records -------------------------------------------------------------

def test_legacy_ok_record_is_migrated():
    legacy = {"workload": "wk9", "task": "matmul", "template": "complex", "config": {"tile": [-1, 8]},
              "result": [0.5, 1.5], "error": None, "cpu": "haswell", "time": 1600000000.0}
    r = Record.from_json(legacy)
    assert (r.workload_key, r.task_name, r.template, r.config) == ("wk9", "matmul", "complex", {"tile": [-1, 8]})
    assert r.costs == (0.5, 1.5) and r.is_ok and r.timestamp == 1600000000.0
    assert r.target_cpu == "haswell" and r.target_features == ""
    assert r.target_key == target_key("haswell", "") and r.schema_version == SCHEMA_VERSION
    assert r.versions == {} and r.build_seconds == 0.0


@pytest.mark.parametrize("error, kind, message", [
    ("compile: LLVM rejected the module", "compile", "LLVM rejected the module"),
    ("wrong_answer:max abs diff 3.0", "wrong_answer", "max abs diff 3.0"),
    ("worker died", "runtime", "worker died"),
    ("note: not a kind", "runtime", "note: not a kind"),
])
def test_legacy_error_records_are_classified(error, kind, message):
    r = Record.from_json({"workload": "w", "config": {}, "result": [1.0], "error": error})
    assert (r.error_kind, r.error_msg, r.costs) == (kind, message, ())


def test_legacy_record_never_claims_a_real_target():
    r = Record.from_json({"workload": "w", "config": {}, "result": [1.0], "cpu": current_target().cpu})
    assert r.target_key != current_target().key or current_target().features == ""


def test_migration_table_covers_every_older_version():
    assert sorted(MIGRATIONS) == list(range(SCHEMA_VERSION))
    assert MIGRATIONS[0] is migrate_v0_to_v1
    migrated = migrate_v0_to_v1({"workload": "w", "config": {"a": 1}, "result": [2.0]})
    assert migrated["schema_version"] == 1


# -- target ------------------------------------------------------------------------------------------

def test_features_are_normalised_to_sorted_enabled_ones():
    assert normalize_features("+sse2,-avx512f,+avx2,+sse2, +fma") == "+avx2,+fma,+sse2"
    assert normalize_features("-avx512f") == ""
    with pytest.raises(ValueError, match="bad LLVM feature"):
        normalize_features("+avx2,+")
    with pytest.raises(TypeError):
        normalize_features(None)


def test_target_key_is_stable_and_depends_on_cpu_and_features():
    assert target_key("skylake", "+fma,+avx2") == target_key("skylake", "-sse4a,+avx2,+fma")
    # the value is part of the on-disk format: records tuned on one machine are found on another
    # (sha256 of "cpu|features", 16 hex digits)
    assert target_key("skylake", "+avx2,+fma") == hashlib.sha256(b"skylake|+avx2,+fma").hexdigest()[:16]
    assert target_key("skylake", "+avx2") != target_key("skylake", "+avx2,+fma")
    assert target_key("skylake", "+avx2") != target_key("haswell", "+avx2")


def test_target_checks_its_fields_agree():
    with pytest.raises(ValueError, match="not normalised"):
        Target("skylake", "+fma,+avx2", target_key("skylake", "+avx2,+fma"))
    with pytest.raises(ValueError, match="does not match"):
        Target("skylake", "+avx2", "0" * 16)
    with pytest.raises(ValueError, match="non-empty"):
        Target.of("", "+avx2")


def test_current_target_is_the_host_cpu():
    import llvmlite.binding as llvm
    t = current_target()
    raw = llvm.get_host_cpu_features().flatten()
    assert t.cpu == llvm.get_host_cpu_name() and t.features == normalize_features(raw) and len(t.key) == 16


def test_versions_name_the_software_and_are_a_fresh_dict():
    v = versions()
    assert set(v) == {"tilefuse", "llvmlite", "xgboost", "python"}
    assert all(isinstance(x, str) and x for x in v.values())
    v["tilefuse"] = "changed"
    assert versions()["tilefuse"] != "changed"
