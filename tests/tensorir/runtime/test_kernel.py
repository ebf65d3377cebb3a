"""The Kernel object: argument validation and source (saving and loading: test_artifact.py)."""
import numpy as np
import pytest

from tilefuse.schedule import build, create_schedule
from tilefuse.tensorir import compute, placeholder, var


@pytest.fixture(scope="module")
def kernel():
    A = placeholder((8, 4), name="A")
    alpha = var("alpha", "float32")
    B = compute((8, 4), lambda i, j: A[i, j] * alpha, name="B")
    s = create_schedule(B)
    s[B].vectorize(B.op.axis[1])
    return build(s, [A, alpha, B], name="scale")


def _args():
    return np.ones((8, 4), "float32"), 2.0, np.zeros((8, 4), "float32")


def test_call_writes_output_in_place(kernel):
    a, alpha, b = _args()
    kernel(a, alpha, b)
    np.testing.assert_array_equal(b, 2 * a)
    assert repr(kernel) == "Kernel(scale(A: float32[8, 4], alpha: float32, B: float32[8, 4]))"


def test_wrong_argument_count(kernel):
    with pytest.raises(TypeError, match=r"takes 3 arguments \(A, alpha, B\), got 2"):
        kernel(np.ones((8, 4), "float32"), 2.0)


def test_wrong_dtype_names_the_argument(kernel):
    a, alpha, b = _args()
    with pytest.raises(TypeError, match="argument A must have dtype float32, got float64"):
        kernel(a.astype("float64"), alpha, b)


def test_wrong_shape_names_the_argument(kernel):
    a, alpha, b = _args()
    with pytest.raises(ValueError, match=r"argument B must have shape \(8, 4\), got \(4, 8\)"):
        kernel(a, alpha, b.reshape(4, 8))


def test_non_contiguous_array(kernel):
    a, alpha, b = _args()
    with pytest.raises(ValueError, match="argument A must be C-contiguous"):
        kernel(np.ones((4, 8), "float32").T, alpha, b)


def test_misaligned_view(kernel):
    a, alpha, b = _args()
    raw = np.zeros(8 * 4 + 1, "float32")
    view = raw[1:].reshape(8, 4)
    with pytest.raises(ValueError, match="argument B is not 16-byte aligned"):
        kernel(a, alpha, view)


@pytest.fixture(scope="module")
def flip():
    A = placeholder((8, 4), name="A")
    alpha = var("alpha", "float32")
    B = compute((8, 4), lambda i, j: A[7 - i, j] * alpha, name="B")
    return build(create_schedule(B), [A, alpha, B], name="flip")


def _aligned(shape, offset_bytes=0):
    """A float32 array of ``shape`` at ``offset_bytes`` past a 64-byte boundary."""
    n = int(np.prod(shape))
    raw = np.zeros(n + 64, "float32")
    start = (-raw.ctypes.data % 64 + offset_bytes) // 4
    return raw[start:start + n].reshape(shape)


def test_an_elementwise_output_may_be_computed_over_its_input(kernel):
    # B[i, j] reads only A[i, j]: A's array may be passed as B too (a graph does so with an
    # input nobody reads afterwards)
    assert kernel.in_place == [(2, 0)]
    a = np.arange(32, dtype="float32").reshape(8, 4)
    kernel(a, 3.0, a)
    np.testing.assert_array_equal(a, 3 * np.arange(32, dtype="float32").reshape(8, 4))
    kernel._checked_call((a, 0.5, a))           # the explaining checks agree with the native entry's
    np.testing.assert_array_equal(a, 1.5 * np.arange(32, dtype="float32").reshape(8, 4))


def test_output_overlapping_an_input(kernel, flip):
    # not the very same array: B's rows would overwrite A's before they are read
    both = _aligned((12, 4))
    with pytest.raises(ValueError, match="output B overlaps argument A"):
        kernel(both[:8], 2.0, both[4:])
    with pytest.raises(ValueError, match="output B overlaps argument A"):
        kernel._checked_call((both[:8], 2.0, both[4:]))
    # B[i] reads A[7 - i]: never in place
    a = np.ones((8, 4), "float32")
    assert flip.in_place == []
    with pytest.raises(ValueError, match="output B overlaps argument A"):
        flip(a, 2.0, a)


def test_read_only_output(kernel):
    a, alpha, b = _args()
    b.flags.writeable = False
    with pytest.raises(ValueError, match="output B is read-only"):
        kernel(a, alpha, b)


def test_not_an_array_and_bad_scalars(kernel):
    a, alpha, b = _args()
    with pytest.raises(TypeError, match="argument A must be a numpy array, got list"):
        kernel(a.tolist(), alpha, b)
    with pytest.raises(TypeError, match="scalar alpha must be a number, got str"):
        kernel(a, "2", b)


@pytest.mark.parametrize("alpha", [2.5, np.float32(2.5), np.float64(2.5), np.array(2.5, "float32")])
def test_a_scalar_may_be_a_python_number_a_numpy_scalar_or_a_0d_array(kernel, alpha):
    a, _, b = _args()
    kernel(a, alpha, b)
    np.testing.assert_array_equal(b, a * np.float32(2.5))


def test_int_scalar_range_is_checked():
    A = placeholder((4,), "int8", name="A")
    n = var("n", "int8")
    B = compute((4,), lambda i: A[i] + n, name="B")
    f = build(create_schedule(B), [A, n, B])
    with pytest.raises(ValueError, match="scalar n=300 does not fit in int8"):
        f(np.zeros(4, "int8"), 300, np.zeros(4, "int8"))


def test_source_llvm_and_asm(kernel, flip):
    # pointers that may be the same array are not noalias; the others are
    assert "define noundef i32 @scale(ptr readonly" in kernel.source("llvm")
    assert "define noundef i32 @flip(ptr noalias" in flip.source("llvm")
    assert "vmulps" in kernel.source("asm") and "xmm" in kernel.source("asm")  # 4 lanes: 128-bit
    with pytest.raises(ValueError, match="unknown source kind"):
        kernel.source("c")


def test_failed_allocation_raises_memory_error():
    # an intermediate of 2^42 floats (16 TiB) cannot be allocated: a clear error, not a crash
    n = 1 << 21
    A = placeholder((n, 1), name="A")
    T = compute((n, 1 << 21), lambda i, j: A[i, 0] * 2.0, name="T")
    U = compute((1,), lambda i: T[0, 0] + 1.0, name="U")
    s = create_schedule(U)
    s[T].split(T.op.axis[0], factor=1 << 20)  # never reached: the allocation fails first
    f = build(s, [A, U])
    with pytest.raises(MemoryError, match="could not allocate"):
        f(np.zeros((n, 1), "float32"), np.zeros(1, "float32"))


def test_ir_compiled_again_reuses_its_object_code_and_other_ir_does_not():
    from tilefuse.tensorir.runtime.kernel import compile_llvm
    from tilefuse.tensorir.runtime.target import Target
    text = "define i32 @twice_cached(i32 %x) {\n  %y = mul i32 %x, 2\n  ret i32 %y\n}"
    first, again = compile_llvm("twice_cached", [], text), compile_llvm("twice_cached", [], text)
    assert again.object_code is first.object_code and again._engine is not first._engine
    other = compile_llvm("twice_cached", [], text.replace("mul i32 %x, 2", "mul i32 %x, 3"))
    assert other.object_code != first.object_code
    # another target is another entry, even for the same text
    elsewhere = Target.of("x86-64", "")
    assert compile_llvm("twice_cached", [], text, elsewhere).object_code is not first.object_code
    # a text that does not compile is refused each time, and nothing is kept for it
    for _ in range(2):
        with pytest.raises(RuntimeError):
            compile_llvm("broken", [], "define i32 @broken() {\n  ret i32 %nothing\n}")
