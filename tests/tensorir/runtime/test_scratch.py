"""The per-thread scratch block (tensorir.runtime.scratch) and the kernels that keep their large
intermediate buffers in it: the block is aligned, reused and grown, one per thread; a kernel
with a large root buffer stays correct called repeatedly, alternately with another kernel
that grows the block, and from several threads at once; a block that cannot be had is a
MemoryError."""
import ctypes
import threading

import numpy as np
import pytest

from tilefuse.schedule import build, create_schedule
from tilefuse.tensorir import compute, placeholder
from tilefuse.tensorir.codegen.llvm import STACK_LIMIT
from tilefuse.tensorir.runtime import scratch
from tilefuse.tensorir.runtime.scratch import SCRATCH, SCRATCH_ALIGN, callback_address, scratch_address
from threads_testing import run_on_threads


def _in_new_thread(fn):
    """fn() run on a fresh thread (a fresh scratch block), its result or its exception."""
    box = {}

    def body():
        try:
            box["value"] = fn()
        except BaseException as err:      # re-raised on the caller's thread
            box["error"] = err
    t = threading.Thread(target=body)
    t.start(); t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_the_block_is_aligned_reused_for_smaller_requests_and_grown_for_larger_ones():
    def steps():
        first = scratch_address(1000)
        assert first != 0 and first % SCRATCH_ALIGN == 0
        assert scratch_address(10) == first and scratch_address(1000) == first and scratch_address(0) == first
        ctypes.memset(first, 0xAB, 1000)                  # the whole request is writable
        bigger = scratch_address(1 << 20)
        assert bigger != 0 and bigger % SCRATCH_ALIGN == 0 and bigger != first
        ctypes.memset(bigger, 0xCD, 1 << 20)
        assert scratch_address(1000) == bigger and scratch_address(1 << 20) == bigger   # it never shrinks
        assert scratch_address((1 << 20) + 1) != bigger                                 # one byte more: grown
        return True
    assert _in_new_thread(steps)


def test_an_impossible_size_gives_zero_and_keeps_the_block():
    def steps():
        block = scratch_address(4096)
        assert scratch_address(1 << 62) == 0
        assert scratch_address(4096) == block             # the old block is still there
        return True
    assert _in_new_thread(steps)


def test_each_thread_has_its_own_block():
    barrier = threading.Barrier(4)          # three threads and this one
    addresses, errors = {}, []

    def body(k):
        try:
            addresses[k] = scratch_address(1 << 16)
            barrier.wait(timeout=10)        # every block alive at once: none freed and its memory reused
            assert scratch_address(100) == addresses[k]
            barrier.wait(timeout=10)
        except BaseException as err:
            errors.append(err)
    threads = [threading.Thread(target=body, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    addresses["main"] = scratch_address(1 << 16)
    barrier.wait(timeout=10)
    barrier.wait(timeout=10)
    for t in threads:
        t.join()
    assert not errors
    assert len(set(addresses.values())) == 4 and 0 not in addresses.values()


def test_native_code_reaches_the_function_by_its_callback():
    call = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64)(callback_address())
    assert callback_address() != 0 and call(256) == scratch_address(256)


N = 200          # a 200 x 200 float32 buffer: 160000 bytes, over the stack limit
assert N * N * 4 > STACK_LIMIT


def _two_stage(n, scale, name):
    """C = A * scale + 1 with B = A * scale a root stage (an intermediate buffer of n*n floats)."""
    A = placeholder((n, n), name="A")
    B = compute((n, n), lambda i, j: A[i, j] * scale, name="B")
    C = compute((n, n), lambda i, j: B[i, j] + 1.0, name="C")
    return build(create_schedule(C), [A, C], name=name)


@pytest.fixture(scope="module")
def large():
    return _two_stage(N, 2.0, "large")


def test_a_large_root_buffer_is_placed_in_the_scratch_block(large):
    text = large.source("llvm")
    assert SCRATCH in text and "aligned_alloc" not in text


def test_small_buffers_stay_off_the_scratch_block():
    text = _two_stage(20, 2.0, "small").source("llvm")          # 1600 bytes: on the stack
    assert SCRATCH not in text and "aligned_alloc" not in text


def test_a_large_buffer_inside_a_parallel_loop_is_allocated_per_task():
    A = placeholder((4, N, N), name="A")
    B = compute((4, N, N), lambda b, i, j: A[b, i, j] * 3.0, name="B")
    C = compute((4, N, N), lambda b, i, j: B[b, i, j] - 1.0, name="C")
    s = create_schedule(C)
    s[C].parallel(C.op.axis[0])
    s[B].compute_at(s[C], C.op.axis[0])             # one N x N buffer per parallel iteration
    f = build(s, [A, C])
    text = f.source("llvm")
    assert SCRATCH not in text and "aligned_alloc" in text
    task = text[text.index("@main.parallel0("):].split("\nentry:")[1]
    entry = task[:task.index(":")]           # the task's entry block, up to the first loop's label
    assert entry.count("@aligned_alloc(") == 1, "allocated once per task (a thread's chunk), not per iteration"
    a = np.random.default_rng(0).standard_normal((4, N, N)).astype("float32")
    c = np.full_like(a, np.nan)
    f(a, c)
    np.testing.assert_array_equal(c, a * np.float32(3) - np.float32(1))


def test_repeated_calls_are_correct(large):
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = rng.standard_normal((N, N)).astype("float32")
        c = np.full_like(a, np.nan)
        large(a, c)
        np.testing.assert_array_equal(c, a * np.float32(2) + np.float32(1))


def test_kernels_that_grow_the_block_alternate_correctly(large):
    huge = _two_stage(600, -0.5, "huge")               # 1.44 MB: grows the block past large's
    assert SCRATCH in huge.source("llvm")
    rng = np.random.default_rng(2)

    def steps():
        for _ in range(5):
            a, h = rng.standard_normal((N, N)).astype("float32"), rng.standard_normal((600, 600)).astype("float32")
            c, d = np.full_like(a, np.nan), np.full_like(h, np.nan)
            large(a, c)
            huge(h, d)
            np.testing.assert_array_equal(c, a * np.float32(2) + np.float32(1))
            np.testing.assert_array_equal(d, h * np.float32(-0.5) + np.float32(1))
        return True
    assert _in_new_thread(steps)                        # a fresh block: it grows on the first huge call


def test_concurrent_calls_from_threads_each_get_their_own_result(large):
    done = []
    start = threading.Barrier(4)

    def body(k):
        rng = np.random.default_rng(100 + k)
        start.wait(timeout=10)
        for _ in range(200):
            a = (rng.standard_normal((N, N)) + 10 * k).astype("float32")     # a different input per thread
            c = np.full_like(a, np.nan)
            large(a, c)
            np.testing.assert_array_equal(c, a * np.float32(2) + np.float32(1))
        done.append(k)
    run_on_threads(body, 4)
    assert sorted(done) == [0, 1, 2, 3]


def _no_memory(*args, **kwargs):
    """A stand-in for the scratch module's allocator whose every allocation fails."""
    raise MemoryError("no memory")


def test_a_kernel_whose_scratch_block_cannot_be_had_raises_memory_error(large, monkeypatch):
    monkeypatch.setattr(scratch, "_local", threading.local())    # no block yet on any thread
    monkeypatch.setattr(scratch, "aligned_empty", _no_memory)
    a = np.ones((N, N), "float32")
    c = np.full_like(a, np.nan)
    with pytest.raises(MemoryError, match="large"):
        large(a, c)
    monkeypatch.undo()
    large(a, c)
    np.testing.assert_array_equal(c, np.full_like(a, 3.0))


class _Broken:
    def __getattr__(self, name):
        raise RuntimeError("broken thread-local storage")


def test_an_exception_in_the_callback_is_no_memory_not_a_wild_pointer(large, monkeypatch):
    monkeypatch.setattr(scratch, "_local", _Broken())
    a = np.ones((N, N), "float32")
    with pytest.raises(MemoryError, match="large"):
        large(a, np.empty_like(a))
