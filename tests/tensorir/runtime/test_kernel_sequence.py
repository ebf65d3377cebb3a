"""KernelSequence: kernels' packed entries called in order by one native call; the pointers a
caller sets; the first kernel that fails stops the sequence and is named."""
import numpy as np
import pytest

from tilefuse.schedule import build, create_schedule
from tilefuse.tensorir import compute, placeholder, var
from tilefuse.tensorir.runtime.jit import jit_ir
from tilefuse.tensorir.runtime.kernel_sequence import KernelSequence


def _unary(body, name, n=37):
    A = placeholder((n,), name="A")
    B = compute((n,), lambda i: body(A[i]), name="B")
    s = create_schedule(B)
    outer, inner = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(inner)
    return build(s, [A, B], name=name)


@pytest.fixture(scope="module")
def kernels():
    return _unary(lambda a: a * 2.0, "double"), _unary(lambda a: a + 1.0, "add_one")


def test_kernels_run_in_order_each_on_its_pointers(kernels):
    double, add_one = kernels
    x = np.arange(37, dtype="float32")
    y, z, w = (np.full(37, np.nan, np.float32) for _ in range(3))
    seq = KernelSequence([(double.packed_entry_address, [x.ctypes.data, y.ctypes.data]),
                          (add_one.packed_entry_address, [y.ctypes.data, z.ctypes.data]),
                          (double.packed_entry_address, [z.ctypes.data, w.ctypes.data])])
    assert seq.run() == 0
    np.testing.assert_array_equal(w, (x * 2 + 1) * 2)
    other = np.ones(37, np.float32)
    seq.point(0, 0, other.ctypes.data)              # the first kernel reads another array now
    assert seq.run() == 0
    np.testing.assert_array_equal(w, (other * 2 + 1) * 2)
    assert KernelSequence([]).run() == 0


def test_the_first_kernel_that_fails_stops_the_sequence_and_is_named(kernels):
    double, _ = kernels
    failing = jit_ir("define i32 @no_memory(ptr %pointers) { ret i32 1 }", "failing_kernel")
    x = np.arange(37, dtype="float32")
    y, z = np.zeros(37, np.float32), np.zeros(37, np.float32)
    seq = KernelSequence([(double.packed_entry_address, [x.ctypes.data, y.ctypes.data]),
                          (failing.address("no_memory"), []),
                          (double.packed_entry_address, [y.ctypes.data, z.ctypes.data])])
    assert seq.run() == 2                            # the second, 1-based
    np.testing.assert_array_equal(y, x * 2)          # the first ran
    assert not z.any()                               # the third did not


def test_a_kernel_with_scalar_arguments_has_no_packed_entry():
    A, alpha = placeholder((8,), name="A"), var("alpha", "float32")
    B = compute((8,), lambda i: A[i] * alpha, name="B")
    assert build(create_schedule(B), [A, alpha, B], name="scale").packed_entry_address is None
