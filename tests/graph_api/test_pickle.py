"""Compiled graphs pickle as what they run: their kernels' artifacts, the constants their
steps read (packed weights, not the originals) and the configs they were built with;
unpickled (here, or in a spawned worker) they compute the same outputs with no LLVM; a
damaged pickle, or one whose kernels cannot run here, is refused with a clear error."""
import multiprocessing
import operator
import pickle
from pathlib import Path

import numpy as np
import pytest

from tilefuse.graph_api import build, compile_graph, from_onnx
from tilefuse.graph_api.build import clear_memory_cache
from tilefuse.graph_api.compiled_graph import _digest
from graph_building import mlp
from tilefuse.schedule.config_source import FixedConfigs
from tilefuse.schedule.space import Config
from tilefuse.tensorir.runtime.aligned import CACHE_LINE

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
    return [step.config for step in compiled.steps if step.kernel is not None]


def test_small_graph_round_trip_gives_identical_outputs():
    graph, feeds = bound_mlp()
    compiled = compile_graph(graph)
    again = round_trip(compiled)
    assert again is not compiled and again.strict is False
    assert [t.id for t in again.input_ports] == [t.id for t in compiled.input_ports] == list(feeds)
    assert again.chosen_configs == compiled.chosen_configs
    assert again.bound.keys() == compiled.bound.keys()
    for key, value in compiled.bound.items():
        np.testing.assert_array_equal(again.bound[key], value)
    assert_same_outputs(compiled, again, feeds)
    assert_same_outputs(compiled, round_trip(again), feeds)           # a restored graph pickles again


def test_packed_weights_travel_instead_of_the_originals():
    graph, feeds = bound_mlp(batch=9, sizes=(300, 200, 7))
    compiled = compile_graph(graph, configs=FixedConfigs(lambda t: Config({**t.default_config().values, "pack": True})
                                                         if "pack" in t.space.knobs else None))
    packed = [key for key in compiled.bound if isinstance(key, tuple)]
    assert packed, "the matmuls pack their weights at compile time"
    weights = [tid for tid, value in graph.constant_values.items() if value.ndim == 2]
    biases = [tid for tid, value in graph.constant_values.items() if value.ndim == 1]
    assert len(weights) == 2 and not set(weights) & compiled.bound.keys(), "no step reads a weight it packed"
    assert set(biases) <= compiled.bound.keys()                        # read as they are
    again = round_trip(compiled)
    assert_same_outputs(compiled, again, feeds)
    for bound in (compiled.bound, again.bound):     # the kernels' vector loads never span two lines
        assert all(value.ctypes.data % CACHE_LINE == 0 for value in bound.values())


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

    monkeypatch.setattr(build.KernelJob, "build", no_llvm)
    again = pickle.loads(data)
    assert used_configs(again) == used_configs(compiled)
    assert_same_outputs(compiled, again, feeds)


@pytest.mark.parametrize("kernels", ["from another host", "damaged"])
def test_kernels_that_cannot_run_here_are_refused_naming_the_step(kernels, monkeypatch):
    from tilefuse.tensorir.runtime import artifact, target
    graph, _ = bound_mlp(batch=5, sizes=(23, 41, 13))
    if kernels == "from another host":
        from host_vectors import ABSENT_FEATURE
        if ABSENT_FEATURE is None:
            pytest.skip("the host has every feature LLVM knows")
        host = target.Target.host()
        other = target.Target.of("other-cpu", f"{host.features},+{ABSENT_FEATURE}")
        monkeypatch.setattr(artifact.Target, "host", staticmethod(lambda: other))
        data = pickle.dumps(compile_graph(graph))
        monkeypatch.undo()
        message = f"compiled for CPU other-cpu with features this host .* lacks: {ABSENT_FEATURE}"
    else:                               # one byte of a kernel's code flipped, the pickle's checksum made good
        restore, (version, payload, buffers, _) = compile_graph(graph).__reduce_ex__(4)
        at = payload.index(artifact.MAGIC) + 200
        payload = payload[:at] + bytes([payload[at] ^ 0xFF]) + payload[at + 1:]
        data = pickle.dumps(_Reduced(restore, (version, payload, buffers, _digest(payload, buffers))))
        message = "checksum mismatch"
    with pytest.raises(pickle.UnpicklingError, match=f"(?s)the kernel of step .*{message}.*compile the graph again"):
        pickle.loads(data)


class _Reduced:
    """Pickles as ``restore(*args)``: a hand-made compiled graph pickle."""

    def __init__(self, restore, args):
        self.restore, self.args = restore, args

    def __reduce__(self):
        return self.restore, self.args


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
    restore, (version, payload, buffers, digest) = compile_graph(graph).__reduce_ex__(4)
    with pytest.raises(pickle.UnpicklingError, match=f"format {version + 1}; this tilefuse reads format {version}"):
        restore(version + 1, payload, buffers, digest)
    assert buffers, "the weights travel as buffers"
    with pytest.raises(pickle.UnpicklingError, match=r"checksum mismatch"):
        restore(version, payload, [b[:-4] for b in buffers], digest)
