"""ConfigSpace and Config: enumeration, indexing, sampling, JSON round trip, bad input."""
import json

import pytest

from tilefuse.schedule import Config, ConfigError, ConfigSpace


def space():
    s = ConfigSpace()
    s.define_split("tile", 24, num_outputs=3, policy="factors")
    s.define_knob("unroll", [1, 2, 4])
    s.define_reorder("order", 3)
    s.define_annotate("ann", 2, ["none", "unroll", "vectorize"])
    return s


def test_size_is_the_product_of_the_knobs():
    s = space()
    splits = len(s.knobs["tile"])
    assert len(s) == splits * 3 * 6 * 9
    assert all(24 % (a * b) == 0 and first == -1 for first, a, b in s.knobs["tile"].candidates)


def test_every_index_round_trips():
    s = space()
    for i in range(0, len(s), 7):
        assert s.index_of(s.get(i)) == i
    assert len({c.to_json() for c in s}) == len(s)


def test_sample_is_distinct_and_seeded():
    s = space()
    a, b = s.sample(50, seed=3), s.sample(50, seed=3)
    assert a == b and len(set(a)) == 50
    assert s.sample(50, seed=4) != a
    assert len(s.sample(10 ** 6)) == len(s)


def test_json_round_trip_is_exact():
    s = space()
    for cfg in s.sample(20, seed=0):
        text = cfg.to_json()
        again = Config.from_json(text)
        assert again == cfg and again.to_json() == text and s.index_of(again) == s.index_of(cfg)
        assert json.loads(text) == cfg.values


def test_power2_and_candidate_splits():
    s = ConfigSpace()
    s.define_split("p", 10, policy="power2")
    s.define_split("c", 10, policy="candidate", candidate=[[-1, 3], [-1, 7]])
    assert s.knobs["p"].candidates == ([-1, 1], [-1, 2], [-1, 4], [-1, 8])
    assert s.knobs["c"].candidates == ([-1, 3], [-1, 7])


def test_knobs_take_axes_as_autotvm_does():
    from tilefuse.tensorir import compute, placeholder
    A = placeholder((12, 5), name="A")
    B = compute((12, 5), lambda i, j: A[i, j], name="B")
    i, j = B.op.axis
    s = ConfigSpace()
    s.define_split("tile_i", i, num_outputs=2)
    s.define_reorder("order", [i, j])
    s.define_annotate("ann", [i, j], ["none", "unroll"])
    assert len(s.knobs["tile_i"]) == 6 and len(s.knobs["order"]) == 2 and len(s.knobs["ann"]) == 4


def test_bad_definitions_and_points():
    s = space()
    with pytest.raises(ConfigError, match="defined twice"):
        s.define_knob("unroll", [1])
    with pytest.raises(ConfigError, match="no candidate values"):
        s.define_knob("empty", [])
    with pytest.raises(ConfigError, match="unknown split policy"):
        s.define_split("x", 8, policy="odd")
    with pytest.raises(ConfigError, match="not a permutation"):
        s.define_reorder("r", 2, policy="candidate", candidate=[[0, 0]])
    with pytest.raises(ConfigError, match="unknown annotation"):
        s.define_annotate("a", 1, ["twist"])
    with pytest.raises(ConfigError, match="out of range"):
        s.get(len(s))
    with pytest.raises(ConfigError, match="has no candidate"):
        s.index_of(Config({**s.get(0).values, "unroll": 3}))
    with pytest.raises(ConfigError, match="do not match"):
        s.index_of(Config({"unroll": 1}))
    with pytest.raises(ConfigError, match="not valid JSON"):
        Config.from_json("{broken")
    with pytest.raises(ConfigError, match="must be an object"):
        Config.from_json("[1, 2]")
    with pytest.raises(ConfigError, match="has no knob 'nope'"):
        s.get(0)["nope"]


def test_a_knob_added_later_gives_stored_configs_its_value_when_absent():
    s = space()
    stored = s.get(5)                              # a config stored before the knob existed
    s.define_knob("winograd", [0, 2, 4], 0)
    assert len(s) == 3 * len(space())
    completed = s.complete(stored)
    assert completed.values == {**stored.values, "winograd": 0} and s.complete(completed) is completed
    assert s.index_of(stored) == s.index_of(completed) and s.get(s.index_of(stored)) == completed
    with pytest.raises(ConfigError, match="do not match"):           # a knob with no such value is still required
        s.index_of(Config({k: v for k, v in stored.values.items() if k != "unroll"}))
    with pytest.raises(ConfigError, match="not a candidate"):
        s.define_knob("vector", [8, 16], 4)
    with pytest.raises(ConfigError, match="one value when absent"):
        s.define_knob("lanes", [8, 16], 8, 16)


def test_searchable_is_asked_once_per_point_until_a_knob_or_rule_is_added():
    calls = []
    s = ConfigSpace()
    s.define_knob("a", [0, 1, 2])
    s.define_rule(lambda v: calls.append(v["a"]) or v["a"] != 1)
    assert [s.searchable(i) for i in range(3)] * 2 == [True, False, True] * 2
    assert calls == [0, 1, 2]                       # the second pass was remembered
    s.define_rule(lambda v: v["a"] != 2)
    assert [s.searchable(i) for i in range(3)] == [True, False, False]
    s.define_knob("b", [0, 1])                      # the indices mean other points now
    assert [s.searchable(i) for i in range(6)] == [True, True, False, False, False, False]
