"""The memory plan: blocks reused by liveness, never shared by tensors alive at once, views of
an in-place concat inside its block, graph outputs never planned; compiled graphs run on their
planned buffers, from several threads at once, and return outputs of their own."""
import numpy as np
import pytest

from tilefuse.graph_api import OpKind, compile_graph, reference
from tilefuse.graph_api.memory_plan import plan_memory
from tilefuse.tensorir.runtime.aligned import CACHE_LINE
from graph_building import Builder
from threads_testing import run_on_threads

F32 = "float32"


def live_ranges(steps, views, planned):
    """(first, last) step of every planned root, as the plan must see them."""
    def root(t):
        while t in views:
            t = views[t]
        return t
    first, last = {}, {}
    for k, (reads, writes) in enumerate(steps):
        for tid, _, _ in writes:
            first.setdefault(root(tid), k)
        for tid in reads:
            last[root(tid)] = k
    return {r: (first[r], max(last.get(r, first[r]), first[r])) for r in planned}


def assert_no_two_live_tensors_share_a_block(plan, steps, views=None):
    ranges = live_ranges(steps, views or {}, plan.tensors)
    items = list(plan.tensors.items())
    for a, (block_a, shape_a, dtype_a) in items:
        assert np.prod(shape_a) * np.dtype(dtype_a).itemsize <= plan.block_sizes[block_a]
        for b, (block_b, _, _) in items:
            if a < b and block_a == block_b:
                (fa, la), (fb, lb) = ranges[a], ranges[b]
                assert la < fb or lb < fa, f"tensors {a} and {b} share block {block_a} while both alive"


def test_a_chain_reuses_two_blocks():
    steps = [([0], [(1, (8, 8), F32)])] + [([k], [(k + 1, (8, 8), F32)]) for k in range(1, 9)] + [([9], [])]
    plan = plan_memory(steps, {}, keep=set())
    assert len(plan.block_sizes) == 2 and plan.nbytes == 2 * 256
    assert_no_two_live_tensors_share_a_block(plan, steps)


def test_graph_outputs_are_never_planned_and_a_larger_tensor_grows_a_free_block():
    steps = [([0], [(1, (4,), F32)]), ([1], [(2, (100,), F32)]), ([2], [(3, (100,), F32)]), ([3], [])]
    plan = plan_memory(steps, {}, keep={3})
    assert sorted(plan.tensors) == [1, 2]
    assert plan.block_sizes == (64, 448)                                 # 1's block stays: 2 is defined while 1 is read


def test_an_in_place_concat_is_one_tensor_its_slices_are_views_of():
    # 1 and 2 are written into slices of concat 3 (steps 0 and 1), 3 is read at step 2
    steps = [([0], [(1, (2, 4), F32)]), ([0], [(2, (2, 4), F32)]), ([3], [(4, (4, 4), F32)]), ([4], [])]
    plan = plan_memory(steps, views={1: 3, 2: 3}, keep=set(), wholes={3: ((4, 4), F32)})
    assert sorted(plan.tensors) == [3, 4]
    assert_no_two_live_tensors_share_a_block(plan, steps, views={1: 3, 2: 3})


def test_an_output_takes_the_block_of_an_input_read_there_for_the_last_time():
    # step 2 may compute 3 over 1 or over 2: 1 is read again at step 3, 2 is not
    steps = [([0], [(1, (4, 4), F32)]), ([1], [(2, (4, 4), F32)]), ([1, 2], [(3, (4, 4), F32)]), ([1, 3], [])]
    plan = plan_memory(steps, {}, keep=set(), in_place={(2, 3): (1, 2)})
    assert plan.tensors[3][0] == plan.tensors[2][0] != plan.tensors[1][0]
    assert len(plan.block_sizes) == 2
    assert_no_two_live_tensors_share_a_block(plan, steps[:2] + [([1], [(3, (4, 4), F32)]), steps[3]])
    # never over a graph input (not planned), a view, or a tensor of another shape: a block of its own
    plan = plan_memory(steps, {}, keep=set(), in_place={(2, 3): (0,)})
    assert len(plan.block_sizes) == 3
    viewed = [([0], [(1, (4, 4), F32)]), ([5], [(3, (4, 4), F32)]), ([3], [])]      # 5: a view of 1
    plan = plan_memory(viewed, {5: 1}, keep=set(), in_place={(1, 3): (5,)})
    assert plan.tensors[3][0] != plan.tensors[1][0]
    reshaped = [([0], [(1, (4, 4), F32)]), ([1], [(2, (16,), F32)]), ([2], [])]
    plan = plan_memory(reshaped, {}, keep=set(), in_place={(1, 2): (1,)})
    assert plan.tensors[2][0] != plan.tensors[1][0]


def test_a_residual_add_is_computed_over_the_residual():
    # conv -> relu -> conv -> add(x) -> relu, x the output of a first conv: the block's last
    # kernel (conv, add, relu) writes its output over x, which nothing reads afterwards
    b = Builder()
    attrs = dict(strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1], dilations=[1, 1],
                 data_format="NXC", weights_format="XIO")
    x = b.op("Convolution", [b.input((1, 11, 13, 24)), b.input((3, 3, 24, 24), constant=True)], **attrs)
    y = b.op("ReLU", [b.op("Convolution", [x, b.input((3, 3, 24, 24), constant=True)], **attrs)])
    y = b.op("Convolution", [y, b.input((3, 3, 24, 24), constant=True)], **attrs)
    out = b.op("ReLU", [b.op("Add", [y, x])])
    b.op("Convolution", [out, b.input((3, 3, 24, 24), constant=True)], **attrs)     # so out is planned too
    g = b.finalize()
    compiled = compile_graph(g)
    last = next(s for s in compiled._run_steps if s.kernel is not None and s.kernel.in_place)
    (written, read), = last.kernel.in_place
    blocks = {tid: block for tid, (block, _, _) in compiled.memory.tensors.items()}
    assert blocks[last.args[written][1]] == blocks[last.args[read][1]] == blocks[x.id]
    want = reference.run(g, b.feeds())
    for _ in range(2):
        got = compiled.run(b.feeds())
        for tid in want:        # four convolutions: values of 1e4 and some near 0 (float32's cancellation)
            np.testing.assert_allclose(got[tid], want[tid], rtol=1e-3, atol=1e-5 * np.abs(want[tid]).max())


@pytest.mark.parametrize("seed", range(20))
def test_random_step_lists_never_share_a_block_between_live_tensors(seed):
    rng = np.random.default_rng(seed)
    steps, made = [], []
    for k in range(int(rng.integers(3, 30))):
        reads = [int(t) for t in rng.choice(made, size=min(len(made), int(rng.integers(0, 3))), replace=False)] \
            if made else []
        writes = [(100 + len(made) + j, (int(rng.integers(1, 50)),), F32) for j in range(int(rng.integers(0, 3)))]
        made += [w[0] for w in writes]
        steps.append((reads, writes))
    keep = {t for t in made if rng.random() < 0.2}
    plan = plan_memory(steps, {}, keep)
    assert not keep & set(plan.tensors)
    assert_no_two_live_tensors_share_a_block(plan, steps)
    arena = plan.arena()
    assert set(arena) == set(plan.tensors)
    assert all(a.ctypes.data % CACHE_LINE == 0 for a in arena.values()), "each tensor starts on a cache line"


def conv_chain(depth=6, channels=8, size=9):
    b = Builder()
    x = b.input((1, channels, size, size))
    for _ in range(depth):
        w = b.input((channels, channels, 3, 3), constant=True)
        x = b.op("ReLU", [b.op("Convolution", [x, w], strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1],
                                dilations=[1, 1], data_format="NCX", weights_format="OIX")])
    return b


def test_a_compiled_chain_runs_on_a_few_reused_buffers_and_returns_its_own_outputs():
    b = conv_chain()
    g = b.finalize()
    feeds = b.feeds()
    compiled = compile_graph(g)
    one_tensor = 8 * 9 * 9 * 4
    assert compiled.memory.nbytes <= 2 * (one_tensor + 64)           # five intermediates in two blocks
    want = reference.run(g, feeds)
    first, second = compiled.run(feeds), compiled.run(feeds)
    for tid in want:
        np.testing.assert_allclose(first[tid], want[tid], rtol=1e-3, atol=1e-3)
        assert first[tid] is not second[tid] and not np.shares_memory(first[tid], second[tid])
        np.testing.assert_array_equal(first[tid], second[tid])


def test_runs_from_several_threads_at_once_give_the_same_outputs():
    b = conv_chain(depth=4, size=17)
    compiled = compile_graph(b.finalize())
    rng = np.random.default_rng(0)
    inputs = [{**b.feeds(), 0: rng.standard_normal((1, 8, 17, 17)).astype(F32)} for _ in range(4)]
    want = [compiled.run(f) for f in inputs]
    got = [[] for _ in inputs]

    def worker(k):
        for _ in range(25):
            got[k].append(compiled.run(inputs[k]))
    run_on_threads(worker, 4)
    for k, runs in enumerate(got):
        for out in runs:
            for tid in out:
                np.testing.assert_array_equal(out[tid], want[k][tid])


def product(b, x):
    """``x @ w`` over the last axis: a kernel of its own (a complex op), never fused before it."""
    return b.op("MatMul", [x, b.input((x.shape[-1], x.shape[-1]), constant=True)], x.shape)


def test_channel_slices_and_reshapes_are_views_kept_alive_until_their_last_reader():
    # a product's output sliced in two channel groups (aligned: 4 channels of 9x9 floats) and
    # reshaped; the products after them would reuse the sliced buffer if the views did not keep it
    b = Builder()
    x = b.input((1, 8, 9, 9))
    y = b.op("ReLU", [product(b, x)], x.shape)
    low = b.op("Slice", [y], (1, 4, 9, 9), starts=[0], ends=[4], axes=[1])
    high = b.op("Slice", [y], (1, 4, 9, 9), starts=[4], ends=[8], axes=[1])
    a = b.op("ReLU", [product(b, low)], low.shape)
    c = b.op("ReLU", [product(b, a)], a.shape)
    flat = b.op("StaticReshape", [high], (1, 4, 81), shape=[1, 4, 81], special_zero=False)
    d = b.op("Add", [b.op("StaticReshape", [c], (1, 4, 81), shape=[1, 4, 81], special_zero=False), flat])
    g = b.finalize()
    compiled = compile_graph(g)
    views = [s for s in compiled._run_steps if s.view is not None]
    assert {s.ops[0].kind.value for s in views} == {"Slice", "StaticReshape"}     # the products' rows too
    assert sum(s.ops[0].kind is OpKind.Slice for s in views) == 2 and len(views) >= 4
    assert all(s.kernel is None for s in views)
    feeds = b.feeds()
    want = reference.run(g, feeds)
    for _ in range(2):                      # the second run reuses the first run's buffers
        np.testing.assert_allclose(compiled.run(feeds)[d.id], want[d.id], rtol=1e-4, atol=1e-4)


def test_a_slice_that_is_not_an_aligned_block_or_is_an_output_is_copied():
    b = Builder()
    x = b.input((1, 6, 3, 3))
    y = b.op("ReLU", [x])
    odd = b.op("Slice", [y], (1, 3, 3, 3), starts=[1], ends=[4], axes=[1])     # starts 36 bytes in
    rows = b.op("Slice", [y], (1, 6, 2, 3), starts=[0], ends=[2], axes=[2])    # not one block
    b.op("Exp", [odd]), b.op("Exp", [rows])
    out = b.op("Slice", [y], (1, 4, 3, 3), starts=[0], ends=[4], axes=[1])     # a graph output
    g = b.finalize()
    compiled = compile_graph(g)
    assert not any(s.view for s in compiled._run_steps)
    feeds = b.feeds()
    got, want = compiled.run(feeds), reference.run(g, feeds)
    for tid in want:
        np.testing.assert_allclose(got[tid], want[tid], rtol=1e-5)
    assert got[out.id].base is None or not np.shares_memory(got[out.id], compiled.run(feeds)[out.id])
