"""Timing (``autotune/timing.py``): kernel calls (number, repeat, min_repeat_ms, give_up,
flushed calls), kernels called as a compiled graph calls them, the yardstick, configs timed
in turn, engines timed in paused, interleaved blocks, and the statistics of timings."""
import math

import numpy as np
import pytest

from tilefuse.autotune import timing
from tilefuse.autotune.record import Record
from tilefuse.autotune.task import Task
from tilefuse.autotune.timing import (Yardstick, call_as_in_graph, constant_inputs, result_cost, rounds_in_turn,
                                      spread, time_calls)
from tilefuse.autotune.tuner import Measured
from measure_testing import elementwise_task, weights_task


# ---------------------------------------------------------------------------- kernel calls

class FakeClock:
    """Each call to the timed function takes ``step`` seconds of this clock."""

    def __init__(self, step):
        self.now, self.step, self.calls = 0.0, step, 0

    def tick(self):
        self.now += self.step
        self.calls += 1

    def __call__(self):
        return self.now


def test_number_and_repeat():
    clock = FakeClock(0.002)
    costs = time_calls(clock.tick, number=4, repeat=3, clock=clock)
    assert costs == pytest.approx((0.002, 0.002, 0.002))
    assert clock.calls == 12


def test_min_repeat_ms_grows_number():
    clock = FakeClock(0.001)                        # 1 ms per call
    costs = time_calls(clock.tick, number=1, repeat=2, min_repeat_ms=10, clock=clock)
    assert costs == pytest.approx((0.001, 0.001))
    # first try 1 call (1 ms < 10 ms: thrown away), then 10 calls per repeat
    assert clock.calls == 1 + 10 + 10


def test_min_repeat_ms_grows_at_least_by_the_golden_ratio():
    clock = FakeClock(0.004)                        # 4 ms per call, 10 ms wanted: ceil(2.5) = 3 calls
    time_calls(clock.tick, number=2, repeat=1, min_repeat_ms=10, clock=clock)
    assert clock.calls == 2 + 4                     # 2 (8 ms, too short), then max(3, ceil(2 * 1.618)) = 4


def test_flushed_timing_is_one_call_after_each_flush():
    events, ticks = [], iter(range(100))
    costs = time_calls(lambda: events.append("call"), number=5, repeat=3, min_repeat_ms=10,
                               clock=lambda: next(ticks), flush=lambda: events.append("flush"))
    assert costs == (1, 1, 1) and events == ["flush", "call"] * 3       # number and min_repeat_ms do not apply


def test_time_calls_gives_up_with_the_cache_flushed_too():
    flushes, ticks = [], iter(range(0, 1000, 2))
    costs = time_calls(lambda: None, repeat=4, clock=lambda: next(ticks), flush=lambda: flushes.append(1), give_up=1.5)
    assert costs == (2,) and len(flushes) == 1


def test_constant_inputs_are_the_weights():
    assert constant_inputs(weights_task()) == [1]
    assert constant_inputs(weights_task(constant=False)) == []
    assert constant_inputs(elementwise_task()) == []


def test_a_prepacked_kernel_is_timed_as_a_compiled_graph_calls_it(monkeypatch):
    from tilefuse.tensorir import compute, placeholder, reduce_axis, sum as rsum
    from tilefuse.tensorir.runtime.prepacked import PrepackedKernel
    a = placeholder((5, 24), name="a")
    w = placeholder((24, 40), name="w", constant=True)
    k = reduce_axis((0, 24), name="k")
    c = compute((5, 40), lambda i, j: rsum(a[i, k] * w[k, j], axis=k), name="c")
    task = Task(c)
    kernel = task.template.build(task.template.default_config())
    assert isinstance(kernel, PrepackedKernel)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((5, 24)).astype("float32"), rng.standard_normal((24, 40)).astype("float32"),
              np.zeros((5, 40), "float32")]
    call, weights = call_as_in_graph(kernel, arrays, [1])
    assert len(weights) == 1 and weights[0] is not arrays[1]        # the packed weights
    monkeypatch.setattr(PrepackedKernel, "__call__", lambda *args: pytest.fail("looked up its packs"))
    call()
    np.testing.assert_allclose(arrays[2], arrays[0] @ arrays[1], rtol=1e-5, atol=1e-5)
    plain = elementwise_task()
    x = [np.ones((64, 256), "float32"), np.zeros((64, 256), "float32")]
    call, weights = call_as_in_graph(plain.template.build(), x)
    call()                                                      # a plain kernel: its own call
    assert (x[1] == 3.0).all() and weights == []


# ---------------------------------------------------------------------------- costs, rounds, yardstick

def test_result_cost_is_the_mean_or_inf_for_errors():
    assert result_cost(Measured((1e-3, 3e-3))) == pytest.approx(2e-3)
    assert result_cost(Measured((1e-3,), "timeout")) == math.inf
    assert result_cost(Measured(())) == math.inf
    assert result_cost(Measured((math.nan,))) == math.inf


def test_configs_in_turn_are_one_batch_and_each_round_is_the_median_of_its_calls():
    batches = []

    def measure(configs):
        batches.append(list(configs))
        return [Measured((1.0, 9.0, 2.0)) if c == "a" else Measured((), "crash") for c in configs]
    assert rounds_in_turn(measure, ["a", "b"], 3) == [[2.0] * 3, [math.inf] * 3]
    assert batches == [["a", "b"] * 3]


def test_spread_is_the_median_over_the_least():
    assert spread([2.0, 3.0, 2.5]) == pytest.approx(0.25)
    assert spread([1.0]) == 0.0


def test_the_yardstick_reads_failed_timings_and_records_without_a_default_around_them():

    def timed(knob, cost=None):
        if cost is None:
            return Record.create("w", "t", "x", {"k": knob}, error_kind="crash", error_msg="SIGSEGV")
        return Record.create("w", "t", "x", {"k": knob}, costs=[cost])
    key = {k: timed(k, 1.0).config_key for k in range(5)}
    stick = Yardstick(key[0])
    stick.note([timed(1, 3.0)])                          # before any timing of the default: its own cost
    stick.note([timed(0, 2.0), timed(2, 1.0), timed(3), timed(0)])     # the tail failed: the head alone
    stick.note([timed(0), timed(4, 0.5)])                # no timing around it that ran
    assert stick.defaults == [2.0] and stick.reference == 2.0
    assert [stick.cost(key[k], 9.0) for k in range(1, 5)] == [9.0, 1.0, 9.0, 9.0]
    assert stick.cost(key[0], 5.0) == stick.reference          # the default costs the reference exactly
    assert Yardstick(key[0]).reference == math.inf


# ---------------------------------------------------------------------------- engines

def test_bench_times_engines_in_paused_blocks_taking_turns(monkeypatch):
    # one engine right after another would run beside its spinning worker threads: a pause
    # and an untimed call come before each block, and each engine's runs come in blocks
    events = []
    monkeypatch.setattr(timing.time, "sleep", lambda seconds: events.append("pause"))
    times = timing.time_interleaved({"a": lambda: events.append("a"), "b": lambda: events.append("b")}, repeat=6,
                                 blocks=2, warmup=0)
    assert [len(t) for t in times.values()] == [6, 6]
    block = ["pause"] + ["a"] * 4 + ["pause"] + ["b"] * 4          # an untimed call, then 3 timed
    assert events == block * 2


def test_bench_spreads_a_slow_models_runs_over_short_blocks():
    # a slow spell of the machine lasts about a second: it must fall on every engine alike
    assert timing.bench_blocks(30, 1e-4) == timing.BENCH_BLOCKS                   # a small model: few long blocks
    blocks = timing.bench_blocks(60, 0.045)                                     # resnet50: ~3 runs per block
    assert 60 * 0.045 / blocks <= timing.BENCH_BLOCK_SECONDS and blocks == 18
    assert timing.bench_blocks(4, 2.0) == 4 and timing.bench_blocks(2, 1e-6) == 2   # never more blocks than runs


def test_bench_warms_each_engine_up_after_its_pause(monkeypatch):
    # the runs right after a pause wake sleeping threads: untimed runs fill the warm-up time
    clock = [0.0]
    events = []
    monkeypatch.setattr(timing.time, "sleep", lambda seconds: events.append("pause"))
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock[0])

    def run():
        clock[0] += 0.004
        events.append("run")
    times = timing.time_interleaved({"a": run}, repeat=2, blocks=1, warmup=0.01)
    assert events == ["pause"] + ["run"] * 3 + ["run"] * 2        # 3 untimed runs pass 10 ms, then 2 timed
    assert times["a"] == pytest.approx([0.004, 0.004])
