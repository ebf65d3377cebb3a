"""Compiled graphs pickle: the graph with the configs its partitions were built with and its
kernels' artifacts; unpickled (here, or in a spawned worker) they compute the same outputs
with the same schedules, recompiling when the artifacts cannot be used; a damaged pickle is
refused with a clear error."""
import hashlib
import multiprocessing
import operator
import pickle
from pathlib import Path

import numpy as np
import pytest

from graph_api import build, compile_graph, from_onnx
from graph_api.build import clear_memory_cache
from graph_building import mlp
from schedule.config_source import FixedConfigs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def bound_mlp(batch=7, sizes=(37, 50, 19)):
    """An MLP whose weights are bound constants (no size a multiple of a tile): (graph, feeds)."""
    b = mlp(batch, sizes)
    feeds = b.feeds()
    for tid, t in b.inputs.items():
        if t.property_type.value == "constant":
            b.graph.bind_constant(tid, feeds.pop(tid))
    return b.finalize(), feeds


def last_config(template):
    """The last point of the template's space, or its first when the last is the default."""
    last = template.space.get(len(template.space) - 1)
    return template.space.get(0) if last == template.default_config() else last


def round_trip(compiled):
    return pickle.loads(pickle.dumps(compiled))


def assert_same_outputs(a, b, feeds):
    want, got = a.run(feeds), b.run(feeds)
    assert got.keys() == want.keys()
    for tid in want:
        np.testing.assert_array_equal(got[tid], want[tid])


def used_configs(compiled):
    return [step.compiled.config for step in compiled.steps if step.compiled is not None]


def reduced_with(compiled, change_state):
    """``compiled.__reduce__()`` with the pickled state changed by ``change_state`` and a valid
    checksum (what another host, or damaged kernels, would send)."""
    restore, (version, payload, _) = compiled.__reduce__()
    state = pickle.loads(payload)
    change_state(state)
    payload = pickle.dumps(state)
    return restore, (version, payload, hashlib.sha256(payload).digest())


def test_small_graph_round_trip_gives_identical_outputs():
    graph, feeds = bound_mlp()
    compiled = compile_graph(graph)
    again = round_trip(compiled)
    assert again is not compiled and again.strict is False
    assert [t.id for t in again.input_ports] == [t.id for t in compiled.input_ports] == list(feeds)
    assert again.chosen_configs == compiled.chosen_configs
    assert again.graph.constant_values.keys() == graph.constant_values.keys()
    for tid, value in graph.constant_values.items():
        np.testing.assert_array_equal(again.graph.constant_values[tid], value)
        assert not again.graph.constant_values[tid].flags.writeable     # read-only, as bound
    assert_same_outputs(compiled, again, feeds)
    assert_same_outputs(compiled, round_trip(again), feeds)           # a restored graph pickles again


def test_bundled_onnx_model_round_trip_gives_identical_outputs():
    pytest.importorskip("onnx")
    graph = from_onnx(str(EXAMPLES / "resnet_block.onnx"))
    assert graph.constant_values, "the initializers are bound constants"
    again_graph = pickle.loads(pickle.dumps(graph))                  # the graph alone pickles too
    compiled = compile_graph(graph, strict=True)
    (port,) = compiled.input_ports
    feeds = {port.id: np.random.default_rng(1).standard_normal(port.shape).astype("float32")}
    assert_same_outputs(compiled, round_trip(compiled), feeds)
    assert round_trip(compiled).strict is True
    assert_same_outputs(compiled, compile_graph(again_graph), feeds)


def test_non_default_configs_survive_the_pickle_without_their_source():
    graph, feeds = bound_mlp()
    source = FixedConfigs(lambda template: last_config(template))      # a lambda: it does not pickle
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(source)
    compiled = compile_graph(graph, configs=source)
    defaults = compile_graph(graph)
    assert all(c is not None for c in used_configs(compiled))
    assert used_configs(defaults) == [None] * len(used_configs(compiled))
    again = round_trip(compiled)
    assert used_configs(again) == used_configs(compiled)
    assert again.chosen_configs == compiled.chosen_configs
    assert_same_outputs(compiled, again, feeds)


def test_unpickled_on_this_host_the_kernels_load_from_their_artifacts(monkeypatch):
    graph, feeds = bound_mlp(batch=6, sizes=(19, 33))
    compiled = compile_graph(graph, configs=FixedConfigs(last_config))
    data = pickle.dumps(compiled)
    clear_memory_cache()

    def no_llvm(*args):
        raise AssertionError("a kernel was built again")

    monkeypatch.setattr(build, "_build", no_llvm)
    again = pickle.loads(data)
    assert used_configs(again) == used_configs(compiled)
    assert_same_outputs(compiled, again, feeds)


@pytest.mark.parametrize("kernels", ["from another host", "damaged"])
def test_recompiles_with_the_recorded_configs_when_the_kernels_cannot_be_loaded(kernels):
    graph, feeds = bound_mlp(batch=5, sizes=(23, 41, 13))
    compiled = compile_graph(graph, configs=FixedConfigs(last_config))

    def change(state):
        assert len(state["kernels"]) == len(used_configs(compiled))
        if kernels == "damaged":
            state["kernels"] = {key: blob[:-1] for key, blob in state["kernels"].items()}
        else:
            state["kernels"] = {}

    restore, args = reduced_with(compiled, change)
    clear_memory_cache()                        # nothing built in this process helps: LLVM builds them
    again = restore(*args)
    assert used_configs(again) == used_configs(compiled) and None not in used_configs(again)
    assert_same_outputs(compiled, again, feeds)


def test_sent_to_a_spawned_worker_it_computes_the_same_outputs():
    graph, feeds = bound_mlp(batch=3, sizes=(29, 11))
    compiled = compile_graph(graph, configs=FixedConfigs(last_config))
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        got = pool.apply(compiled.run, (feeds,))
        configs = pool.apply(operator.attrgetter("chosen_configs"), (compiled,))
    want = compiled.run(feeds)
    assert got.keys() == want.keys()
    for tid in want:
        np.testing.assert_array_equal(got[tid], want[tid])
    assert configs == compiled.chosen_configs and None not in configs.values()


def test_truncated_or_altered_pickle_raises_a_clear_error():
    graph, _ = bound_mlp()
    data = pickle.dumps(compile_graph(graph))
    with pytest.raises(pickle.UnpicklingError, match="truncated"):
        pickle.loads(data[: len(data) // 2])
    altered = bytearray(data)
    altered[len(data) // 2] ^= 0xFF
    with pytest.raises(pickle.UnpicklingError, match=r"checksum mismatch \(truncated or altered\)"):
        pickle.loads(bytes(altered))
    restore, (version, payload, digest) = compile_graph(graph).__reduce__()
    with pytest.raises(pickle.UnpicklingError, match=f"format {version + 1}; this tilefuse reads format {version}"):
        restore(version + 1, payload, digest)
