"""The picks checked in the model: a pick slower between its neighbours becomes the default."""
import math

import pytest

from tilefuse.autotune import Database, Task, current_target
from tilefuse.autotune import model_check
from tilefuse.autotune.database import Pick
from tilefuse.autotune.model_check import ModelCheck, check_in_model
from tilefuse.schedule.space import Config
from tilefuse.tensorir.runtime.threadpool import get_num_threads, set_num_threads
from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType
from tilefuse.graph_api.pipeline import partition


def two_layer_graph(n=64, k=256, m=256) -> Graph:
    """MatMul + ReLU, then MatMul: two workloads, one partition each."""
    graph = Graph()
    x = LogicalTensor(0, DataType.f32, (n, k))
    w1 = LogicalTensor(1, DataType.f32, (k, m), property_type=PropertyType.constant)
    w2 = LogicalTensor(2, DataType.f32, (m, m), property_type=PropertyType.constant)
    h, r, y = LogicalTensor(3, DataType.f32, (n, m)), LogicalTensor(4, DataType.f32, (n, m)), \
        LogicalTensor(5, DataType.f32, (n, m))
    graph.add_op(Op(0, OpKind.MatMul, [x, w1], [h], name="fc1"))
    graph.add_op(Op(1, OpKind.ReLU, [h], [r], name="relu"))
    graph.add_op(Op(2, OpKind.MatMul, [r, w2], [y], name="fc2"))
    graph.finalize()
    return graph


def tasks_of(graph) -> list[Task]:
    return [Task(p.compute_dag()) for p in partition(graph).partitions if p.is_supported()]


def other_config(task: Task, **knobs) -> dict:
    """The task's default config with ``knobs`` changed."""
    config = dict(task.template.default_config().values)
    config.update(knobs)
    task.space.index_of(Config(config))      # a point of the space
    return config


def pick(db, task, config):
    db.set_pick(task.key, current_target().key, Pick(config, 2e-3, 1e-3, 0.01))


def picked(db, task) -> dict:
    return db.pick(task.key, current_target().key).config


SLOW = {"tile_i": 1, "tile_j": 8, "pack": False, "order": "ji", "unroll_k": 1}   # one row of half a vector, unpacked


@pytest.fixture
def one_thread():
    """Kernels on one thread while timed: the suite's other worker holds the other core, and a
    kernel whose second thread waits for a time slice takes milliseconds, not microseconds."""
    threads = get_num_threads()
    set_num_threads(1)
    yield
    set_num_threads(threads)


def test_a_pick_slower_in_the_model_becomes_the_default(one_thread):
    graph = two_layer_graph()
    first, second = tasks_of(graph)
    with Database(":memory:") as db:
        pick(db, first, other_config(first, **SLOW))
        check = check_in_model(graph, db, rounds=2, round_seconds=0.02)
        assert [w.key for w in check.workloads] == [first.key]
        (w,) = check.workloads
        assert not w.kept and w.partitions == 1 and w.tuned_seconds > w.default_seconds > 0
        assert check.dropped == [w]
        assert picked(db, first) == dict(first.template.default_config().values)
        assert db.pick(second.key, current_target().key) is None     # never tuned: left alone
        assert check.tuned_seconds > check.default_seconds and check.checked_seconds == check.default_seconds
        assert check.spread >= 0
        # the pick now is the default: nothing left to check
        again = check_in_model(graph, db, rounds=2, round_seconds=0.02)
        assert again.workloads == [] and math.isnan(again.default_seconds)


def test_no_tuned_pick_checks_nothing(tmp_path):
    graph = two_layer_graph(n=8, k=16, m=8)
    first, _ = tasks_of(graph)
    assert check_in_model(graph, str(tmp_path / "fresh.db")) == ModelCheck()        # a path: opened and closed
    with Database(":memory:") as db:
        assert check_in_model(graph, db).workloads == []
        pick(db, first, dict(first.template.default_config().values))    # picked, but the default
        check = check_in_model(graph, db)
    assert check == ModelCheck() and check.dropped == []
    assert check.to_json() == {"default_ms": None, "tuned_ms": None, "checked_default_ms": None, "checked_ms": None,
                               "spread": None, "workloads": []}


class FakeClock:
    """Step times by pass: {engine: {partition index: seconds}} per call of time_steps."""

    def __init__(self, passes):
        self.passes, self.calls = list(passes), 0

    def __call__(self, engines, feeds, rounds, round_seconds):
        assert set(engines) == {"default", "tuned"}
        self.calls += 1
        return self.passes.pop(0), 0.01


@pytest.fixture
def tuned_pair():
    """A graph whose two matmuls both have a tuned pick (valid configs, not the defaults)."""
    graph = two_layer_graph(n=8, k=16, m=8)
    first, second = tasks_of(graph)
    db = Database(":memory:")
    configs = [other_config(t, tile_i=2, tile_j=8) for t in (first, second)]
    for task, config in zip((first, second), configs):
        pick(db, task, config)
    indices = [k for k, p in enumerate(partition(graph).partitions) if p.is_supported()]
    yield graph, db, (first, second), configs, indices
    db.close()


def test_picks_faster_in_the_model_are_kept(tuned_pair, monkeypatch):
    graph, db, (first, second), configs, (a, b) = tuned_pair
    clock = FakeClock([{"default": {a: 10e-6, b: 10e-6}, "tuned": {a: 8e-6, b: 9e-6}}])
    monkeypatch.setattr(model_check, "time_steps", clock)
    check = check_in_model(graph, db)
    assert clock.calls == 1 and check.dropped == []
    assert [w.speedup for w in check.workloads] == pytest.approx([1.25, 10 / 9])
    assert (check.default_seconds, check.tuned_seconds, check.checked_seconds) == pytest.approx((20e-6, 17e-6, 17e-6))
    assert [picked(db, t) for t in (first, second)] == configs


def test_a_pick_slower_there_is_dropped_and_the_rest_measured_again(tuned_pair, monkeypatch):
    graph, db, (first, second), configs, (a, b) = tuned_pair
    clock = FakeClock([{"default": {a: 10e-6, b: 10e-6}, "tuned": {a: 10.05e-6, b: 10.2e-6}},   # b: 2% slower
                       {"default": {a: 10e-6, b: 10e-6}, "tuned": {a: 8e-6, b: 10e-6}}])
    monkeypatch.setattr(model_check, "time_steps", clock)
    check = check_in_model(graph, db)
    assert clock.calls == 2
    assert [(w.key, w.kept) for w in check.workloads] == [(first.key, True), (second.key, False)]
    assert check.tuned_seconds == pytest.approx(20.25e-6) and check.checked_seconds == pytest.approx(18e-6)
    assert check.default_seconds == check.checked_default_seconds == pytest.approx(20e-6)
    assert picked(db, first) == configs[0]
    assert picked(db, second) == dict(second.template.default_config().values)
    dropped = db.pick(second.key, current_target().key)      # the costs it lost with, in the model
    assert (dropped.default_cost, dropped.tuned_cost) == pytest.approx((10e-6, 10.2e-6))


def test_each_pass_reports_the_default_it_measured_beside_the_picks(tuned_pair, monkeypatch):
    # the machine slowed down between the passes: the kept picks compare with the second default
    graph, db, (first, second), configs, (a, b) = tuned_pair
    clock = FakeClock([{"default": {a: 10e-6, b: 10e-6}, "tuned": {a: 10.5e-6, b: 8e-6}},
                       {"default": {a: 12e-6, b: 12e-6}, "tuned": {a: 12e-6, b: 9.6e-6}}])
    monkeypatch.setattr(model_check, "time_steps", clock)
    check = check_in_model(graph, db)
    assert (check.default_seconds, check.tuned_seconds) == pytest.approx((20e-6, 18.5e-6))
    assert (check.checked_default_seconds, check.checked_seconds) == pytest.approx((24e-6, 21.6e-6))
    assert check.to_json()["checked_default_ms"] == pytest.approx(24e-3)


def test_picks_that_win_alone_but_lose_together_are_all_dropped(tuned_pair, monkeypatch):
    graph, db, (first, second), configs, (a, b) = tuned_pair
    other = 99      # a step of neither workload (one the picks slow down: their neighbour)
    steps = {"default": {a: 10e-6, b: 10e-6, other: 1e-6}, "tuned": {a: 9e-6, b: 9e-6, other: 5e-6}}
    monkeypatch.setattr(model_check, "time_steps", FakeClock([steps]))
    check = check_in_model(graph, db)
    assert [w.kept for w in check.workloads] == [False, False]
    assert check.checked_seconds == check.default_seconds == pytest.approx(21e-6)
    assert check.tuned_seconds == pytest.approx(23e-6)
    for task in (first, second):
        assert picked(db, task) == dict(task.template.default_config().values)


def test_the_check_stops_after_its_passes(tuned_pair, monkeypatch):
    graph, db, (first, second), configs, (a, b) = tuned_pair
    monkeypatch.setattr(model_check, "PASSES", 1)
    clock = FakeClock([{"default": {a: 10e-6, b: 10e-6}, "tuned": {a: 11e-6, b: 8e-6}},
                       {"default": {a: 10e-6, b: 10e-6, 99: 4e-6}, "tuned": {a: 10e-6, b: 10.2e-6, 99: 1e-6}}])
    monkeypatch.setattr(model_check, "time_steps", clock)
    check = check_in_model(graph, db)
    assert clock.calls == 2     # the last pass keeps what it measured, b 2% slower, as the whole run wins
    assert [(w.key, w.kept) for w in check.workloads] == [(first.key, False), (second.key, True)]
    assert picked(db, second) == configs[1]


def test_picks_faster_together_stay_when_a_later_pass_loses_them_to_noise(tuned_pair, monkeypatch):
    # the run: all picks together 1.8x faster, one pick slower in its own steps (noise, or
    # a neighbour that gains from it); without it the next pass measured no gain, and the old
    # check then dropped every pick. The set that ran fastest against its default is kept.
    graph, db, (first, second), configs, (a, b) = tuned_pair
    clock = FakeClock([{"default": {a: 10e-6, b: 26e-6}, "tuned": {a: 10.5e-6, b: 9.5e-6}},
                       {"default": {a: 100e-6, b: 100e-6}, "tuned": {a: 100e-6, b: 100e-6}}])   # busy machine
    monkeypatch.setattr(model_check, "time_steps", clock)
    check = check_in_model(graph, db)
    assert clock.calls == 2 and check.dropped == []
    assert (check.default_seconds, check.tuned_seconds) == pytest.approx((36e-6, 20e-6))
    assert (check.checked_default_seconds, check.checked_seconds) == pytest.approx((36e-6, 20e-6))
    assert [t for w in check.workloads for t in (w.default_seconds, w.tuned_seconds)] == \
        pytest.approx([10e-6, 10.5e-6, 26e-6, 9.5e-6])
    assert [picked(db, t) for t in (first, second)] == configs       # the pick the first pass dropped is back
    assert db.pick(first.key, current_target().key).speedup == pytest.approx(2.0)   # its kernel check's costs


def test_picks_slower_in_the_model_are_all_dropped_with_their_costs_there(tuned_pair, monkeypatch):
    graph, db, (first, second), configs, (a, b) = tuned_pair
    clock = FakeClock([{"default": {a: 10e-6, b: 10e-6}, "tuned": {a: 15e-6, b: 12e-6}}])
    monkeypatch.setattr(model_check, "time_steps", clock)
    check = check_in_model(graph, db)
    assert clock.calls == 1 and [w.kept for w in check.workloads] == [False, False]
    assert (check.default_seconds, check.tuned_seconds) == pytest.approx((20e-6, 27e-6))
    assert check.checked_seconds == check.checked_default_seconds == pytest.approx(20e-6)
    for task, slower in ((first, 1.5), (second, 1.2)):
        dropped = db.pick(task.key, current_target().key)
        assert dropped.config == dict(task.template.default_config().values)
        assert dropped.tuned_cost / dropped.default_cost == pytest.approx(slower)


def test_random_feeds_draw_floats_for_every_float_type():
    import numpy as np
    ports = [LogicalTensor(k, dtype, (3, 5)) for k, dtype in
             enumerate((DataType.f32, DataType.f64, DataType.f16, DataType.bf16, DataType.u64, DataType.boolean))]
    feeds = model_check.random_feeds(ports, seed=2)
    assert [feeds[t.id].dtype for t in ports] == [t.dtype.numpy for t in ports]
    assert all(not np.array_equal(feeds[k].astype(np.float64), np.round(feeds[k].astype(np.float64)))
               for k in range(4))                        # normal draws, not integers
    assert feeds[4].max() < 4 and feeds[5].dtype == bool
