"""Compiling partitions and whole graphs: results match the reference interpreter; mismatched
tensors raise clearly."""
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tilefuse.graph_api import Engine, GraphError, Stream, Tensor, compile_graph, reference
from tilefuse.graph_api.compiled_graph import _entry
from graph_building import Builder, attention, conv_bn_relu, mlp, residual_block
from tilefuse.schedule.hoist import PrepackedKernel
from tilefuse.tensorir.errors import Unsupported
from tilefuse.tensorir.runtime.aligned import CACHE_LINE


@pytest.mark.parametrize("build", [mlp, conv_bn_relu, residual_block, attention])
def test_compiled_graph_matches_the_reference(build):
    b = build()
    g = b.finalize()
    feeds = b.feeds()
    got = compile_graph(g).run(feeds)
    want = reference.run(g, feeds)
    assert got.keys() == want.keys()
    for tid in want:
        assert np.isfinite(want[tid]).all()
        np.testing.assert_allclose(got[tid], want[tid], rtol=1e-4, atol=1e-4)


def test_partition_compile_query_and_execute():
    b = mlp()
    g = b.finalize()
    p = g.get_partitions()[0]
    cp = p.compile(p.get_input_ports(), p.get_output_ports(), Engine("cpu"))
    out = p.get_output_ports()[0]
    assert cp.query_logical_tensor(out.id).shape == (8, 64)
    assert cp.get_inplace_ports() == []
    feeds = b.feeds()
    ins = [Tensor(cp.query_logical_tensor(t.id), Engine(), feeds[t.id]) for t in p.get_input_ports()]
    result = Tensor(cp.query_logical_tensor(out.id), Engine())
    cp.execute(Stream(Engine()), ins, [result])
    x, w, bias = (feeds[t.id] for t in p.get_input_ports())
    np.testing.assert_allclose(result.handle, np.maximum(x @ w + bias, 0), rtol=1e-4, atol=1e-4)


def test_execute_with_mismatched_tensors_raises():
    b = mlp()
    g = b.finalize()
    p = g.get_partitions()[0]
    cp = p.compile(p.get_input_ports(), p.get_output_ports())
    feeds = b.feeds()
    ins = [Tensor(t, Engine(), feeds[t.id]) for t in p.get_input_ports()]
    out = Tensor(cp.query_logical_tensor(p.get_output_ports()[0].id), Engine())
    bad = Tensor(ins[0].logical_tensor, Engine(), feeds[ins[0].logical_tensor.id][:, :5].copy())
    with pytest.raises(GraphError, match=r"input 0 must be f32\[8, 37\], got float32\[8, 5\]"):
        cp.execute(Stream(Engine()), [bad] + ins[1:], [out])
    with pytest.raises(GraphError, match="no input logical tensor 99"):
        stray = Tensor(ins[0].logical_tensor.__class__(99, "f32", (1,)), Engine())
        cp.execute(Stream(Engine()), ins + [stray], [out])
    with pytest.raises(GraphError, match="missing input tensor"):
        cp.execute(Stream(Engine()), ins[1:], [out])
    with pytest.raises(GraphError, match="compile is missing input logical tensor"):
        p.compile(p.get_input_ports()[1:], p.get_output_ports())


def test_compile_is_cached_by_structure():
    parts = [mlp().finalize().get_partitions()[0] for _ in range(2)]
    a, b = (p.compile(p.get_input_ports(), p.get_output_ports()) for p in parts)
    assert a.compiled.steps[0].kernel is b.compiled.steps[0].kernel


def test_unsupported_ops_run_in_the_reference_with_a_warning():
    b = Builder()
    x = b.input((4, 5))
    y = b.op("ReLU", [x])
    b.op("Wildcard", [y], out_shape=(4, 5))
    g = b.finalize()
    with pytest.warns(UserWarning, match=r"Wildcard \(op 1\)"):
        compile_graph(g)
    with pytest.raises(Unsupported, match=r"strict: 1 op\(s\) would run in the numpy reference .*Wildcard \(op 1\)"):
        compile_graph(g, strict=True)


def test_end_ops_name_the_outputs_and_compile_strictly():
    # oneDNN's End marks what the graph is asked for: the ReLU's output, not the Exp's
    import warnings
    b = Builder()
    x = b.input((4, 5))
    y = b.op("ReLU", [x])
    b.op("Exp", [y])
    b.op("End", [y], n_outputs=0)
    g = b.finalize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = compile_graph(g, strict=True)
    feed = np.linspace(-1, 1, 20, dtype="float32").reshape(4, 5)
    result = compiled.run({x.id: feed})
    assert list(result) == [y.id]
    np.testing.assert_array_equal(result[y.id], np.maximum(feed, 0))


def test_constant_weights_are_prepacked_once_per_weight_array():
    b = mlp(batch=5, sizes=(37, 50))
    g = b.finalize()
    (p,) = g.get_partitions()
    cp = p.compile(p.get_input_ports(), p.get_output_ports())
    kernel = cp.compiled.steps[0].kernel
    assert isinstance(kernel, PrepackedKernel), "the MatMul's constant weights should be packed apart"
    eng, stream = Engine(), Stream(Engine())
    feeds = b.feeds()

    def run(feeds):
        ins = [Tensor(t, eng, feeds[t.id]) for t in p.get_input_ports()]
        out = Tensor(cp.query_logical_tensor(p.get_output_ports()[0].id), eng)
        cp.execute(stream, ins, [out])
        return out.handle
    want = reference.run(g, feeds)
    np.testing.assert_allclose(run(feeds), next(iter(want.values())), rtol=1e-5, atol=1e-5)
    packed = kernel._cached[1][0]
    run({**feeds, 0: feeds[0] + 1})
    assert kernel._cached[1][0] is packed                # same weights: not packed again
    new_w = {**feeds, 1: feeds[1] * 2}
    np.testing.assert_allclose(run(new_w), next(iter(reference.run(g, new_w).values())), rtol=1e-5, atol=1e-5)
    assert kernel._cached[1][0] is not packed
    assert all(a.ctypes.data % CACHE_LINE == 0 for a in (packed, kernel._cached[1][0], run(feeds)))


def test_a_compiled_graph_puts_its_buffers_and_outputs_on_cache_lines():
    """numpy's large blocks start 16 or 32 bytes past a page: a kernel's vector loads from
    them would each span two cache lines."""
    b = residual_block()
    compiled = compile_graph(b.finalize())
    for _ in range(2):          # the first run allocates the arena, the second reuses it
        outputs = compiled.run(b.feeds())
        assert all(a.ctypes.data % CACHE_LINE == 0 for a in outputs.values())
        assert all(a.ctypes.data % CACHE_LINE == 0 for state in compiled._arenas for a in state.arena.values())
    assert compiled.memory.tensors, "the block's intermediate tensors are planned"


def test_variable_weights_are_not_prepacked():
    from graph_building import Builder
    b = Builder()
    x, w = b.input((5, 37)), b.input((37, 50))
    b.op("MatMul", [x, w])
    (p,) = b.finalize().get_partitions()
    cp = p.compile(p.get_input_ports(), p.get_output_ports())
    assert not isinstance(cp.compiled.steps[0].kernel, PrepackedKernel)


def test_compiled_graph_checks_its_feeds():
    b = mlp(batch=4, sizes=(8, 16))
    cg = compile_graph(b.finalize())
    feeds = b.feeds()
    with pytest.raises(GraphError, match=r"graph input 0 must be float32\[4, 8\], got float32\[4, 9\]"):
        cg.run({**feeds, 0: np.zeros((4, 9), "float32")})
    with pytest.raises(GraphError, match="graph input 0 must be float32.*got float64"):
        cg.run({**feeds, 0: feeds[0].astype("float64")})
    with pytest.raises(GraphError, match="no feed for graph input 0"):
        cg.run({k: v for k, v in feeds.items() if k != 0})


def test_step_times_time_each_step_that_runs_by_its_partition_index():
    b = Builder()
    y = b.op("MatMul", [b.input((6, 20)), b.input((20, 8), constant=True)])
    y = b.op("StaticReshape", [y], out_shape=(8, 6), shape=[8, 6], special_zero=False)   # a view: costs nothing
    b.op("MatMul", [y, b.input((6, 5), constant=True)])
    g = b.finalize()
    cg = compile_graph(g)
    feeds = b.feeds()
    times = cg.step_times(feeds, runs=4)
    partitions = g.get_partitions()
    views = [k for k, p in enumerate(partitions) if [op.kind.value for op in p.ops] == ["StaticReshape"]]
    assert views and sorted(times) == sorted(set(range(len(partitions))) - set(views))
    assert all(len(seconds) == 4 and all(s > 0 for s in seconds) for seconds in times.values())
    want = reference.run(g, feeds)           # the runs it timed leave the graph as it was
    for tid, array in cg.run(feeds).items():
        np.testing.assert_allclose(array, want[tid], rtol=1e-5, atol=1e-6)


def test_runs_call_kernels_unchecked_only_with_arrays_known_to_fit():
    # a run's arrays are the feeds (checked), its planned buffers and constants (checked once)
    # and compiled steps' outputs: the kernels' native entries are called without Python's checks
    b = Builder()
    y = b.op("MatMul", [b.input((6, 20)), b.input((20, 8))])        # weights fed: a plain kernel
    y = b.op("MatMul", [b.op("Tanh", [y]), b.input((8, 5))])
    b.op("Exp", [y])
    g = b.finalize()
    cg = compile_graph(g)
    want = reference.run(g, b.feeds())
    for tid, array in cg.run(b.feeds()).items():
        np.testing.assert_allclose(array, want[tid], rtol=1e-4, atol=1e-4)
    program = [i for i in cg._arenas[0].program if type(i) is tuple]
    assert len(program) == 2 and all(entry is kernel.unchecked_entry for entry, *_, kernel in program)
    # an array of another dtype, or a value from a step whose arrays are not known: checked calls
    entry, args, reads, writes, kernel = program[0]
    keys = [key for _, key in cg._run_steps[0].args]
    made = {key: (spec.shape, np.dtype(spec.dtype)) for key, spec in zip(keys, kernel.args)}
    assert _entry(kernel, [None] * len(args), keys, made) is kernel.unchecked_entry
    assert _entry(kernel, [None] * len(args), keys, {}) is kernel
    wrong = [np.zeros(spec.shape, "float64") for spec in kernel.args]
    assert _entry(kernel, wrong, keys, made) is kernel


def test_step_times_check_runs_and_feeds():
    b = mlp(batch=4, sizes=(8, 16))
    cg = compile_graph(b.finalize())
    feeds = b.feeds()
    for runs in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="runs must be a positive int"):
            cg.step_times(feeds, runs=runs)
    with pytest.raises(GraphError, match=r"graph input 0 must be float32\[4, 8\]"):
        cg.step_times({**feeds, 0: np.zeros((4, 9), "float32")})
    with pytest.raises(GraphError, match="no feed for graph input 0"):
        cg.step_times({k: v for k, v in feeds.items() if k != 0})


def test_feeds_name_inputs_only_and_may_come_in_input_order():
    b = mlp(batch=4, sizes=(8, 16))
    cg = compile_graph(b.finalize())
    feeds = b.feeds()
    want = cg.run(feeds)
    by_position = cg.run([feeds[t.id] for t in cg.input_ports])
    assert all(np.array_equal(want[k], by_position[k]) for k in want)
    with pytest.raises(GraphError, match=r"\[999\] are not graph input ids; the inputs are ids \[0"):
        cg.run({**feeds, 999: feeds[0]})
    with pytest.raises(GraphError, match="run got 1 arrays by position, but the graph has"):
        cg.run([feeds[0]])
    with pytest.raises(TypeError, match=r"run takes a dict \{input id: array\} or a list"):
        cg.run(feeds[0])


def test_feeds_that_are_not_16_byte_aligned_are_copied_not_refused():
    b = mlp(batch=4, sizes=(8, 16))
    cg = compile_graph(b.finalize())
    feeds = b.feeds()
    want = cg.run(feeds)
    misaligned = {}
    for tid, value in feeds.items():
        raw = np.zeros(value.nbytes + 32, np.uint8)
        start = (-raw.ctypes.data) % 16 + 4                  # 4 bytes past a 16-byte boundary
        array = raw[start:start + value.nbytes].view(value.dtype).reshape(value.shape)
        array[...] = value
        assert array.ctypes.data % 16 == 4
        misaligned[tid] = array
    got = cg.run(misaligned)
    assert all(np.array_equal(got[k], want[k]) for k in want)


def test_a_feed_that_fits_is_used_as_it_is_and_any_other_is_checked_or_converted():
    b = mlp(batch=4, sizes=(8, 16))
    cg = compile_graph(b.finalize())
    feeds = b.feeds()
    want = cg.run(feeds)
    assert all(cg._checked_values(feeds)[tid] is array for tid, array in feeds.items())     # no copy
    # a strided view, a read-only array: converted (or read as they are) with the same results
    (tid, x), *_ = feeds.items()
    wide = np.zeros((x.shape[0], 2 * x.shape[1]), x.dtype)
    wide[:, ::2] = x
    for fed in (wide[:, ::2], np.broadcast_to(x, x.shape)):
        got = cg.run({**feeds, tid: fed})
        assert all(np.array_equal(got[k], want[k]) for k in want)
    for bad, message in ((x.astype("float64"), r"must be float32\[4, 8\], got float64\[4, 8\]"),
                         (x[:, :7], r"must be float32\[4, 8\], got float32\[4, 7\]"),
                         (x.tolist(), r"got float64\[4, 8\]")):
        with pytest.raises(GraphError, match=message):
            cg.run({**feeds, tid: bad})
    # a compiled graph unpickled takes the same path
    again = pickle.loads(pickle.dumps(cg))
    assert all(again._checked_values(feeds)[tid] is array for tid, array in feeds.items())
    with pytest.raises(GraphError, match=r"must be float32\[4, 8\]"):
        again.run({**feeds, tid: x.astype("float64")})


def test_a_feed_for_a_bound_constant_is_refused_not_swapped_for_the_weight():
    from graph_building import Builder
    b = Builder()
    x, w = b.input((3, 5)), b.input((5, 4), constant=True)
    b.op("MatMul", [x, w])
    g = b.graph
    g.bind_constant(w.id, np.ones((5, 4), np.float32))
    g.finalize()
    cg = compile_graph(g)
    xs = np.ones((3, 5), np.float32)
    with pytest.raises(GraphError, match=rf"tensor\(s\) \[{w.id}\] are bound constants, not inputs"):
        cg.run({x.id: xs, w.id: np.zeros((5, 4), np.float32)})
    assert np.all(next(iter(cg.run({x.id: xs}).values())) == 5.0)


def inception_block(batch=1, size=12, widths=(8, 12, 4, 16), extra_reader=False):
    """Four 1x1 convolutions (+ReLU) of one input, concatenated along the channels; in groups of
    two where the widths allow, so that they stay NCHW (the layout plan leaves graphs of grouped
    convolutions alone) and their concat is along a contiguous axis."""
    b = Builder()
    x = b.input((batch, 6, size, size))
    groups = 2 if all(c % 2 == 0 for c in widths) else 1
    branches = []
    for c in widths:
        w = b.input((c, 6 // groups, 1, 1), constant=True)
        y = b.op("Convolution", [x, w], strides=[1, 1], pads_begin=[0, 0], pads_end=[0, 0], dilations=[1, 1],
                 data_format="NCX", weights_format="OIX", groups=groups)
        branches.append(b.op("ReLU", [y]))
    b.op("Concat", branches, axis=1)
    if extra_reader:                          # a branch also read by another op
        b.op("Sigmoid", [branches[1]])
    return b


@pytest.mark.parametrize("batch, size, widths, in_place", [
    (1, 12, (8, 12, 4, 16), True),             # batch 1, channel slices 16-byte aligned: written in place
    (2, 12, (8, 12, 4, 16), False),            # batch 2: a channel slice is not one block
    (1, 7, (3, 5, 2, 4), False),               # 7x7 floats per channel: slices not 16-byte aligned
])
def test_a_concat_of_convolutions_is_written_in_place_where_it_can_be(batch, size, widths, in_place):
    for extra_reader in (False, True):
        b = inception_block(batch, size, widths, extra_reader)
        g = b.finalize()
        feeds = b.feeds()
        compiled = compile_graph(g)
        assert bool(compiled.in_place) == in_place
        concat = [p for p in g.get_partitions() if [op.kind.value for op in p.ops] == ["Concat"]]
        assert len(concat) == 1                                       # not fused into a convolution
        want = reference.run(g, feeds)
        for _ in range(2):                                            # a new output buffer each run
            got = compiled.run(feeds)
            for tid in want:
                np.testing.assert_allclose(got[tid], want[tid], rtol=1e-5, atol=1e-5)
        first, second = compiled.run(feeds), compiled.run(feeds)
        assert all(first[tid] is not second[tid] for tid in first)


def test_a_concat_of_a_concat_is_a_slice_of_it():
    """DenseNet's pattern: each block concatenates the growing feature map with a new one
    (grouped convolutions: they stay NCHW, so the concats are along a contiguous axis)."""
    b = Builder()
    x = b.input((1, 4, 8, 8))

    def conv(t, c_in, c_out):
        w = b.input((c_out, c_in // 2, 3, 3), constant=True)
        return b.op("ReLU", [b.op("Convolution", [t, w], strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1],
                                  dilations=[1, 1], data_format="NCX", weights_format="OIX", groups=2)])
    y0 = conv(x, 4, 8)
    y1 = conv(y0, 8, 4)
    c1 = b.op("Concat", [y0, y1], axis=1)                      # 12 channels
    y2 = conv(c1, 12, 4)
    b.op("Concat", [c1, y2], axis=1)                           # 16 channels: c1 is its slice
    g = b.finalize()
    feeds = b.feeds()
    compiled = compile_graph(g)
    assert len(compiled.in_place) == 2
    want = reference.run(g, feeds)
    got = compiled.run(feeds)
    for tid in want:
        np.testing.assert_allclose(got[tid], want[tid], rtol=1e-4, atol=1e-4)


def test_a_graph_with_a_tensor_over_the_size_limit_is_refused_when_partitioned(monkeypatch):
    from graph_building import Builder
    b = Builder()
    x = b.input((64, 64))
    b.op("ReLU", [x])
    g = b.finalize()
    monkeypatch.setenv("TILEFUSE_MAX_TENSOR_BYTES", str(64 * 64 * 4 - 1))
    with pytest.raises(GraphError, match=r"logical tensor 0 of shape \(64, 64\) needs 16\.0 KiB, over the limit"):
        compile_graph(g)


IN_A_FRESH_PROCESS = textwrap.dedent("""
    import os, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from graph_building import mlp
    from tilefuse.graph_api import build, compile_graph, reference
    from tilefuse.graph_api.build import KernelJob, kernel_job
    from tilefuse.graph_api.pipeline import partition

    PARENT, ORIGINAL = os.getpid(), KernelJob.build

    def built_only_in(where):
        def build_job(job):
            if (os.getpid() == PARENT) != (where == "parent"):
                raise RuntimeError(f"a kernel was built outside the {where}")
            return ORIGINAL(job)
        return build_job

    def jobs(graph):
        return [kernel_job(p, []) for p in partition(graph).partitions if p.is_supported()]
""")


def _run_fresh(body: str) -> None:
    """``body`` after ``IN_A_FRESH_PROCESS``, in an interpreter of its own: a pytest worker runs
    threads of its own, and builds fork workers only where no other thread runs."""
    code = IN_A_FRESH_PROCESS + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_distinct_partitions_build_in_worker_processes_and_compile_takes_them_from_the_cache():
    _run_fresh("""
        b = mlp(batch=5, sizes=(19, 33, 7))
        g = b.finalize()
        assert len({job.key for job in jobs(g)}) >= 2
        KernelJob.build = built_only_in("workers")
        assert all(b.kernel is not None for b in build.build_all(jobs(g), workers=2))
        KernelJob.build = lambda job: sys.exit("a kernel was built again")
        feeds = b.feeds()
        want = reference.run(g, feeds)
        got = compile_graph(g).run(feeds)
        for tid in want:
            np.testing.assert_allclose(got[tid], want[tid], rtol=1e-4, atol=1e-4)
    """)


def test_a_kernel_a_worker_cannot_build_is_built_or_refused_in_this_process():
    _run_fresh("""
        g = mlp(batch=3, sizes=(11, 13, 5)).finalize()
        KernelJob.build = built_only_in("parent")                    # every worker fails
        assert len(build.build_all(jobs(g), workers=2)) == len(jobs(g))
        build.clear_memory_cache()
        KernelJob.build = lambda job: (_ for _ in ()).throw(RuntimeError("could not lower"))   # so does this process
        try:
            compile_graph(g)
            sys.exit("compiled with no kernel built")
        except RuntimeError as err:
            assert "could not lower" in str(err)
        KernelJob.build = ORIGINAL
        assert len(compile_graph(g).steps) == len(partition(g).partitions)
    """)



def test_a_feed_over_the_size_limit_is_refused_before_any_copy(monkeypatch):
    b = mlp(batch=4, sizes=(8, 16))
    cg = compile_graph(b.finalize())
    monkeypatch.setenv("TILEFUSE_MAX_TENSOR_BYTES", str(1 << 20))
    huge = np.broadcast_to(np.float32(1), (1 << 20, 8))
    with pytest.raises(GraphError, match=r"graph input 0 of shape \(1048576, 8\) needs 32\.0 MiB, over the limit"):
        cg.run({**b.feeds(), 0: huge})


def test_a_gather_index_fed_out_of_range_is_refused_as_onnxruntime_does():
    from tilefuse.graph_api import DataType, Graph, LogicalTensor, Op, OpKind, PropertyType
    table = LogicalTensor(0, DataType.f32, (3, 5), property_type=PropertyType.constant)
    ids = LogicalTensor(1, DataType.s64, (4,))
    g = Graph()
    g.add_op(Op(0, OpKind.Gather, [table, ids], [LogicalTensor(2, DataType.f32, (4, 5))], {"axis": 0}, name="embed"))
    g.finalize()
    g.bind_constant(0, np.arange(15, dtype=np.float32).reshape(3, 5))
    compiled = compile_graph(g)
    np.testing.assert_array_equal(compiled.run({1: np.array([0, 2, -1, -3])})[2][:, 0], [0, 10, 10, 0])
    for bad, value in (([0, 3, 1, 1], 3), ([-4, 0, 0, 0], -4)):
        with pytest.raises(GraphError, match=rf"index {value} is out of range \[-3, 2\] of Gather 'embed' \(axis 0\)"):
            compiled.run({1: np.array(bad)})


def test_a_packed_weight_takes_the_memory_of_an_earlier_weight_of_its_size(monkeypatch):
    from tilefuse.graph_api import from_onnx
    from tilefuse.tensorir.runtime import spare_memory
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    weights = [rng.standard_normal((96, 96)).astype(np.float32) / 10 for _ in range(4)]
    nodes = [helper.make_node("MatMul", ["x" if k == 0 else f"h{k}", f"w{k}"], [f"h{k + 1}" if k < 3 else "y"])
             for k in range(4)]
    model = helper.make_model(helper.make_graph(
        nodes, "layers", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 96])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 96])],
        [numpy_helper.from_array(w, f"w{k}") for k, w in enumerate(weights)]))
    made = []
    real = spare_memory.aligned_empty
    monkeypatch.setattr(spare_memory, "aligned_empty", lambda *args: made.append(args) or real(*args))
    packs = []
    spare_empty = spare_memory.SpareMemory.empty
    monkeypatch.setattr(spare_memory.SpareMemory, "empty", lambda self, *args: packs.append(args) or
                        spare_empty(self, *args))
    g = from_onnx(model.SerializeToString())
    (x,) = [t for t in g.get_input_ports() if t.id not in g.constant_values]
    compiled = compile_graph(g, owned=True)
    assert len(packs) == 4 and len(made) == 1          # the three later packs in the earlier weights' memory
    feed = rng.standard_normal((3, 96)).astype(np.float32)
    want = feed @ weights[0] @ weights[1] @ weights[2] @ weights[3]
    for _ in range(2):
        (got,) = compiled.run({x.id: feed}).values()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _weights_bound(b):
    """The builder's graph with its constant inputs bound (weights, as a model's are: its
    kernels prepacked), and the feeds of the others."""
    feeds = b.feeds()
    for tid, t in b.inputs.items():
        if t.property_type.name == "constant":
            b.graph.bind_constant(tid, feeds.pop(tid))
    return b.finalize(), feeds


def test_consecutive_kernels_run_in_one_native_call_as_they_would_one_by_one():
    from tilefuse.graph_api.compiled_graph import _NativeRun
    b = Builder()
    x = b.input((6, 37))
    y = b.op("MatMul", [x, b.input((37, 20), constant=True)])     # an output the next kernel reads too
    z = b.op("SoftMax", [y], axis=-1)
    u = b.op("Exp", [b.op("MatMul", [z, b.input((20, 9), constant=True)])])
    for t in (y, u):
        b.op("End", [t], n_outputs=0)
    g, feeds = _weights_bound(b)
    compiled = compile_graph(g)
    got = compiled.run(feeds)
    state = compiled._arenas[0]
    (native,) = [i for i in state.plan if type(i) is _NativeRun]
    assert len(native.instructions) == sum(s.kernel is not None for s in compiled.steps) >= 3
    want = reference.run(g, {**feeds, **g.constant_values})
    assert list(got) == list(want) == [y.id, u.id]
    for tid in want:
        np.testing.assert_allclose(got[tid], want[tid], rtol=1e-5, atol=1e-5)
    state.plan = None                  # each kernel called from Python: the same values
    one_by_one = compiled.run(feeds)
    for tid in want:
        np.testing.assert_array_equal(one_by_one[tid], got[tid])


def test_a_kernel_that_fails_in_the_native_call_is_called_again_from_python_with_those_after_it():
    from tilefuse.graph_api.compiled_graph import _NativeRun
    from tilefuse.tensorir.runtime.jit import jit_ir
    g, feeds = _weights_bound(mlp(sizes=(37, 64, 19, 5)))
    compiled = compile_graph(g)
    want = {k: v.copy() for k, v in compiled.run(feeds).items()}
    (native,) = [i for i in compiled._arenas[0].plan if type(i) is _NativeRun]
    failing = jit_ir("define i32 @no_scratch(ptr %pointers) { ret i32 1 }", "failing_kernel")
    native.sequence._entries[1] = failing.address("no_scratch")    # the second kernel fails natively
    got = compiled.run({k: v * 0 + v for k, v in feeds.items()})
    for tid in want:
        np.testing.assert_array_equal(got[tid], want[tid])


def test_a_run_writes_into_the_last_runs_output_only_when_the_caller_dropped_it():
    b = mlp(batch=4, sizes=(8, 16))
    cg = compile_graph(b.finalize())
    feeds = b.feeds()
    (out,) = cg.output_ids
    kept = cg.run(feeds)[out]
    first = kept.copy()
    other = {k: v * 2 for k, v in feeds.items()}
    again = cg.run(other)[out]
    assert again is not kept and np.array_equal(kept, first)        # held by the caller: untouched
    address = again.ctypes.data
    del again
    reused = cg.run(feeds)[out]
    assert reused.ctypes.data == address and np.array_equal(reused, first)     # dropped: written again
    view = reused[1:]
    del reused
    fresh = cg.run(other)[out]
    assert fresh.ctypes.data != view.ctypes.data - view.strides[0]               # a view keeps it alive
    np.testing.assert_array_equal(view, first[1:])
