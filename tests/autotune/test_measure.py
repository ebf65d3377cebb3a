"""Measurement: build and time candidates in worker processes, check them against the default
config, and record every way a candidate can fail while the others go on."""
import math

import numpy as np
import pytest

import tilefuse.autotune.measure as measure
from tilefuse.autotune.executor import Executor, JobResult, LocalExecutor
from tilefuse.autotune import timing
from tilefuse.autotune.measure import MeasureError, MeasureOptions, MeasureResult, compare_outputs, measure_batch
from measure_testing import (config_for, elementwise_task, matmul_task, misbehaving_builder, raise_value_error,
                             weights_task)
from tilefuse.schedule.space import Config, ConfigError


@pytest.fixture(scope="module")
def pool():
    with LocalExecutor(workers=2) as ex:
        yield ex


def always_fails(task, config):
    raise_value_error("nothing builds")


def builds_only_non_defaults(task, config):
    if config == task.template.default_config():
        raise_value_error("the default does not build")
    return measure.build_candidate(task, config)


# ---------------------------------------------------------------------------- real tasks

def test_matmul_configs_are_measured_in_order(pool):
    task = matmul_task()
    configs = task.space.sample(4, seed=5)
    configs.reverse()
    results = measure_batch(task, configs, MeasureOptions(repeat=3), pool)
    assert [r.config for r in results] == [c.values for c in configs]
    for r in results:
        assert r.ok and r.error_kind is None and r.error_msg == ""
        assert len(r.costs) == 3 and all(c > 0 for c in r.costs)
        assert r.build_seconds > 0 and r.timestamp > 0
        assert r.best_cost <= r.cost < math.inf


def test_injective_configs_and_dict_configs(pool):
    task = elementwise_task()
    configs = [{"vector": v, "unroll": u, "parallel": p} for v, u, p in ((16, 1, False), (64, 4, True), (8, 4, False))]
    results = measure_batch(task, configs, MeasureOptions(repeat=2, number=3), pool)
    assert [r.config for r in results] == configs
    assert all(r.ok and len(r.costs) == 2 for r in results)


def test_every_error_kind_is_recorded_and_the_rest_is_measured(pool):
    task = elementwise_task()
    kinds = ["compile", "crash", "timeout", "wrong_answer", "runtime"]
    good = [{"vector": 16, "unroll": 2, "parallel": True}, {"vector": 64, "unroll": 2, "parallel": False}]
    # each failure is followed by a good candidate, which must still be measured
    configs = [c for kind in kinds for c in (config_for(task, kind), good[kinds.index(kind) % 2])]
    pids = pool.worker_pids()
    results = measure_batch(task, configs, MeasureOptions(timeout=4, repeat=2), pool, builder=misbehaving_builder)
    assert [r.error_kind for r in results] == [k for kind in kinds for k in (kind, None)]
    assert [r.config for r in results] == configs
    by_kind = {r.error_kind: r for r in results if not r.ok}
    assert by_kind["compile"].error_msg.startswith("ValueError: this candidate does not compile")
    assert "SIGSEGV" in by_kind["crash"].error_msg
    assert "timeout of 4 s" in by_kind["timeout"].error_msg
    assert by_kind["wrong_answer"].error_msg.startswith("output B: ")
    assert by_kind["runtime"].error_msg.startswith("MemoryError: kernel nomem")
    for r in results:
        assert r.ok == (len(r.costs) == 2) and (r.cost < math.inf) == r.ok
    # the runner crashed and hung: it was replaced each time
    assert pool.worker_pids()[0] not in pids


def test_a_wrong_answer_is_never_the_best(pool):
    task = elementwise_task()
    configs = [config_for(task, "wrong_answer"), {"vector": 16, "unroll": 4, "parallel": False}]
    results = measure_batch(task, configs, MeasureOptions(repeat=1), pool, builder=misbehaving_builder)
    best = min(results, key=lambda r: r.cost)
    assert best.config == configs[1] and results[0].cost == math.inf


def test_check_off_needs_no_reference(pool):
    task = elementwise_task()
    configs = [config_for(task, "wrong_answer"), {"vector": 32, "unroll": 4, "parallel": False}]  # never a default
    results = measure_batch(task, configs, MeasureOptions(check=False, repeat=1), pool,
                            builder=builds_only_non_defaults)
    assert [r.error_kind for r in results] == [None, None]


def test_a_default_that_does_not_build_is_a_measure_error(pool):
    task = matmul_task(8, 8, 16)
    with pytest.raises(MeasureError, match="default config.*nothing builds"):
        measure_batch(task, task.space.sample(2, seed=1), MeasureOptions(), pool, builder=always_fails)


class CountingExecutor(Executor):
    """Delegates to another executor and records how many calls each phase had."""

    def __init__(self, inner):
        self.inner, self.phases = inner, []

    def run(self, calls, timeout, parallel=True):
        calls = list(calls)
        self.phases.append((parallel, len(calls)))
        return self.inner.run(calls, timeout, parallel)


def test_the_reference_is_built_once_per_task(pool):
    task = matmul_task(16, 8, 32)
    default = task.template.default_config()
    others = [c for c in task.space.sample(3, seed=4) if c != default][:2]
    counting = CountingExecutor(pool)
    results = measure_batch(task, [others[0], default], MeasureOptions(repeat=1), counting)
    assert all(r.ok for r in results)
    assert counting.phases == [(True, 2), (False, 2)]     # the default candidate is the reference
    results = measure_batch(task, [others[1]], MeasureOptions(repeat=1), counting)
    assert results[0].ok and counting.phases[2:] == [(True, 1), (False, 1)]   # reused
    results = measure_batch(task, [default, others[1]], MeasureOptions(repeat=1), counting)
    assert counting.phases[4:] == [(True, 1), (False, 2)]  # the default timed again is not built again
    assert results[0].ok and results[0].build_seconds == 0 and results[1].build_seconds > 0
    other_task = matmul_task(16, 8, 48)
    measure_batch(other_task, [other_task.space.get(0)], MeasureOptions(repeat=1), counting)
    assert counting.phases[6:] == [(True, 2), (False, 1)]  # the candidate and the reference


def test_a_config_listed_several_times_is_built_once_and_timed_at_each_place(pool):
    task = matmul_task()
    a, b = task.space.sample(2, seed=3)
    default = task.template.default_config()
    counting = CountingExecutor(pool)
    measure._reference_blobs.clear()        # an earlier test's build of this default would be reused
    configs = [default, a, b] * 3
    results = measure_batch(task, configs, MeasureOptions(repeat=2), counting)
    assert counting.phases == [(True, 3), (False, 9)]
    assert [r.config for r in results] == [c.values for c in configs]
    assert all(r.ok and len(r.costs) == 2 and r.build_seconds > 0 for r in results)
    assert results[0].build_seconds == results[3].build_seconds      # the same build, reported at each place


def test_bad_arguments(pool):
    task = elementwise_task()
    with pytest.raises(ConfigError):
        measure_batch(task, [{"vector": 7, "unroll": 1, "parallel": False}], executor=pool)
    with pytest.raises(ConfigError):
        measure_batch(task, [{"tile": 1}], executor=pool)
    with pytest.raises(TypeError, match="Config"):
        measure_batch(task, ["vector=8"], executor=pool)
    with pytest.raises(TypeError, match="Task"):
        measure_batch("task", [], executor=pool)
    with pytest.raises(TypeError, match="MeasureOptions"):
        measure_batch(task, [], {"repeat": 1}, pool)
    with pytest.raises(TypeError, match="builder"):
        measure_batch(task, [], executor=pool, builder="fast")
    assert measure_batch(task, [], executor=pool) == []


def test_a_builder_returning_no_kernel_is_a_compile_error(pool):
    task = elementwise_task()
    results = measure_batch(task, [{"vector": 8, "unroll": 1, "parallel": True}], MeasureOptions(check=False),
                            pool, builder=returns_text)
    assert results[0].error_kind == "compile" and "not a Kernel" in results[0].error_msg


def returns_text(task, config):
    return "kernel"


# ---------------------------------------------------------------------------- timing

def test_min_repeat_ms_is_met_by_real_runs(pool):
    task = elementwise_task()
    results = measure_batch(task, [{"vector": 16, "unroll": 4, "parallel": False}],
                            MeasureOptions(repeat=2, min_repeat_ms=20), pool)
    assert results[0].ok and len(results[0].costs) == 2
    # a kernel this small runs in microseconds: a repeat of 20 ms averages many runs, so the
    # costs are well below 20 ms
    assert max(results[0].costs) < 0.02


# ---------------------------------------------------------------------------- records and checks

def test_measure_options_validation():
    for kwargs, error in [({"number": 0}, ValueError), ({"repeat": 0}, ValueError), ({"repeat": 1.5}, TypeError),
                          ({"min_repeat_ms": -1}, ValueError), ({"timeout": 0}, ValueError),
                          ({"timeout": float("nan")}, ValueError), ({"check": 1}, TypeError),
                          ({"flush_cache": "yes"}, TypeError),
                          ({"rtol": -1e-3}, ValueError), ({"seed": -1}, ValueError), ({"number": True}, TypeError),
                          ({"repeat": 10, "min_repeat_ms": 1000, "timeout": 5}, ValueError)]:
        with pytest.raises(error):
            MeasureOptions(**kwargs)
    options = MeasureOptions(number=2, repeat=5, min_repeat_ms=1.5, timeout=3, check=False, rtol=0.1, atol=0, seed=9)
    assert (options.number, options.repeat, options.min_repeat_ms, options.seed) == (2, 5, 1.5, 9)


def test_measure_result_validation_and_round_trip():
    with pytest.raises(ValueError, match="error_kind"):
        MeasureResult({}, error_kind="segfault")
    with pytest.raises(ValueError, match="costs"):
        MeasureResult({"a": 1})
    r = MeasureResult({"a": [1, 2]}, error_kind="timeout", error_msg="slow", build_seconds=0.5)
    assert MeasureResult.from_dict(r.to_dict()) == r and r.best_cost == math.inf
    ok = MeasureResult(Config({"a": 1}).values, costs=[1, 3])
    assert ok.costs == (1.0, 3.0) and ok.cost == 2.0


def test_compare_outputs():
    e = np.array([[1.0, 2.0], [3.0, np.nan]], "float32")
    assert compare_outputs([e.copy()], [e], ["C"], 1e-3, 1e-4) is None
    close = e * (1 + 1e-5)
    assert compare_outputs([close], [e], ["C"], 1e-3, 1e-4) is None
    wrong = e.copy()
    wrong[1, 0] = 3.1
    msg = compare_outputs([wrong], [e], ["C"], 1e-3, 1e-4)
    assert "1 of 4 elements" in msg and "(1, 0)" in msg and "expected 3.0" in msg
    ints = np.array([1, 2, 3], "int32")
    assert compare_outputs([ints + 0], [ints], ["I"], 1.0, 1.0) is None
    assert "output I" in compare_outputs([ints + 1], [ints], ["I"], 1.0, 1.0)
    # a value near zero in an output of large values may differ by rtol of their rms (a long
    # sum's rounding), but not by much more
    big = np.full(100, 50.0, "float32")
    big[0] = 0.01
    rounded = big.copy()
    rounded[0] += 0.02
    assert compare_outputs([rounded], [big], ["C"], 1e-3, 1e-4) is None
    rounded[0] += 0.1
    assert "1 of 100 elements" in compare_outputs([rounded], [big], ["C"], 1e-3, 1e-4)
    # the first mismatching output is named
    assert compare_outputs([e, ints + 1], [e, ints], ["C", "I"], 1e-3, 1e-4).startswith("output I")


class InProcessExecutor(Executor):
    """Runs the calls in this process, where a test's monkeypatches apply."""

    def run(self, calls, timeout, parallel=True):
        return [JobResult(value=fn(*args)) for fn, args in calls]


def test_a_cache_flush_pushes_out_the_weights_before_each_timed_call(monkeypatch):
    flushed = []
    monkeypatch.setattr(timing, "flush_from_caches", lambda *arrays: flushed.append(arrays))
    task = weights_task()
    packed = {**task.template.default_config().values, "pack": True}
    results = measure_batch(task, [packed, {**packed, "pack": False}], MeasureOptions(repeat=4, flush_cache=True),
                            InProcessExecutor())
    assert all(r.ok and len(r.costs) == 4 for r in results)
    assert len(flushed) == 8 and all(len(arrays) == 2 for arrays in flushed)
    # the packed panels (24 x 40 rounded up to whole panels), then the weights as they are
    assert flushed[0][0].size >= 24 * 40 and flushed[0][0].shape != (24, 40)
    assert flushed[4][0].shape == (24, 40)
    assert all(arrays[1].nbytes == 0 for arrays in flushed)      # no scratch buffers: nothing more


def test_a_cache_flush_pushes_out_the_scratch_buffers_too(monkeypatch):
    # a padded copy of the input (34 x 34 x 32 floats, 148 KB) lives in the thread's scratch block
    from tilefuse.tensorir import ops, placeholder
    x = placeholder((1, 32, 32, 32), name="x")
    w = placeholder((3, 3, 32, 16), name="w", constant=True)
    task = measure.Task(ops.conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1]))
    flushed = []
    monkeypatch.setattr(timing, "flush_from_caches", lambda *arrays: flushed.append(arrays))
    (result,) = measure_batch(task, [task.template.default_config()], MeasureOptions(repeat=2, flush_cache=True),
                              InProcessExecutor())
    assert result.ok and len(flushed) == 2
    weights, scratch = flushed[0]
    assert weights.size >= 3 * 3 * 32 * 16 and scratch.nbytes >= 34 * 34 * 32 * 4


def test_a_cache_flush_leaves_a_kernel_without_weights_timed_as_usual(monkeypatch):
    monkeypatch.setattr(timing, "flush_from_caches", lambda *arrays: pytest.fail("flushed data inputs"))
    timed = []
    monkeypatch.setattr(timing, "time_calls", lambda call, *args, flush=None, give_up=None:
                        timed.append((args, flush)) or (1e-3,))
    for task in (elementwise_task(), weights_task(constant=False)):
        results = measure_batch(task, [task.template.default_config()],
                                MeasureOptions(repeat=4, min_repeat_ms=5, flush_cache=True), InProcessExecutor())
        assert results[0].ok
    assert timed == [((1, 4, 5), None)] * 2


def test_a_config_slower_than_give_up_is_timed_once(pool):
    task = matmul_task(16, 8, 32)
    default = task.template.default_config()
    slow, fast = measure_batch(task, [default, default], MeasureOptions(repeat=5), pool, give_up=0.0), \
        measure_batch(task, [default], MeasureOptions(repeat=5), pool, give_up=10.0)
    assert [len(r.costs) for r in slow] == [1, 1] and all(r.ok for r in slow)
    assert len(fast[0].costs) == 5
