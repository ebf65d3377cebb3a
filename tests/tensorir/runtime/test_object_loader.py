"""The ELF object loader: code, constants, data and external calls relocated and runnable;
objects it does not take refused with ObjectFormatError (and loaded by MCJIT instead)."""
import ctypes
import struct

import numpy as np
import pytest

from tilefuse.tensorir.runtime import jit, object_loader
from tilefuse.tensorir.runtime.jit import load_native, runtime_object
from tilefuse.tensorir.runtime.object_loader import ObjectFormatError, load_object, register_symbol

IR = """
@counter = internal global i64 0, align 64
@table = internal constant [4 x float] [float 1.5, float 2.5, float 3.5, float 4.5]
declare i64 @labs(i64)
declare i64 @tilefuse_test_triple(i64)

define internal float @pick(i64 %i) {
  %p = getelementptr [4 x float], ptr @table, i64 0, i64 %i
  %v = load float, ptr %p
  ret float %v
}

define float @table_sum() {
  %a = call float @pick(i64 0)
  %b = call float @pick(i64 3)
  %s = fadd float %a, %b
  ret float %s
}

define i64 @bump(i64 %by) {
  %old = load i64, ptr @counter
  %new = add i64 %old, %by
  store i64 %new, ptr @counter
  ret i64 %new
}

define i64 @absolute(i64 %x) {
  %y = call i64 @labs(i64 %x)
  ret i64 %y
}

define i64 @tripled(i64 %x) {
  %y = call i64 @tilefuse_test_triple(i64 %x)
  ret i64 %y
}

define void @scale(ptr %x, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %p = getelementptr <8 x float>, ptr %x, i64 %i
  %v = load <8 x float>, ptr %p, align 4
  %w = fmul <8 x float> %v, <float 1.0, float 2.0, float 3.0, float 4.0, float 5.0, float 6.0, float 7.0, float 8.0>
  store <8 x float> %w, ptr %p, align 4
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}
"""

_TRIPLE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(lambda x: 3 * x)


@pytest.fixture(scope="module")
def code():
    register_symbol("tilefuse_test_triple", ctypes.cast(_TRIPLE, ctypes.c_void_p).value)
    return runtime_object(IR, "object_loader_test")


def _function(loaded, name, restype, *argtypes):
    return ctypes.CFUNCTYPE(restype, *argtypes)(loaded.address(name))


@pytest.mark.parametrize("load", [load_object, jit._EngineObject])
def test_constants_data_libc_and_runtime_symbols_are_relocated(code, load):
    loaded = load(code)
    assert _function(loaded, "table_sum", ctypes.c_float)() == 6.0
    bump = _function(loaded, "bump", ctypes.c_int64, ctypes.c_int64)
    assert (bump(5), bump(2)) == (5, 7)                         # writable data keeps its value
    assert _function(loaded, "absolute", ctypes.c_int64, ctypes.c_int64)(-42) == 42
    assert _function(loaded, "tripled", ctypes.c_int64, ctypes.c_int64)(14) == 42
    x = np.ones(8 * 3, "float32")
    _function(loaded, "scale", None, ctypes.c_void_p, ctypes.c_int64)(x.ctypes.data, 3)
    np.testing.assert_array_equal(x, np.tile(np.arange(1, 9, dtype="float32"), 3))
    assert loaded.address("pick") is None and loaded.address("nothing") is None   # internal, absent


def test_two_loads_have_data_of_their_own(code):
    first, second = load_object(code), load_object(code)
    _function(first, "bump", ctypes.c_int64, ctypes.c_int64)(10)
    assert _function(second, "bump", ctypes.c_int64, ctypes.c_int64)(1) == 1


def test_code_is_executable_and_not_writable(code):
    loaded = load_object(code)
    address = loaded.address("table_sum")
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, perms = line.split()[:2]
            low, high = (int(v, 16) for v in span.split("-"))
            if low <= address < high:
                assert perms.startswith("r-x")
                return
    pytest.fail("the loaded code is in no mapping")


def _patched(code: bytes, offset: int, fmt: str, value) -> bytes:
    data = bytearray(code)
    struct.pack_into(fmt, data, offset, value)
    return bytes(data)


def test_objects_it_does_not_take_are_refused(code):
    with pytest.raises(ObjectFormatError, match="not an ELF object"):
        load_object(b"\x7fELF")
    with pytest.raises(ObjectFormatError, match="machine 183"):
        load_object(_patched(code, 18, "<H", 183))             # e_machine: AArch64
    with pytest.raises(ObjectFormatError, match="ELF type 3"):
        load_object(_patched(code, 16, "<H", 3))               # e_type: a shared object
    with pytest.raises(ObjectFormatError, match="section table"):
        load_object(code[:200])
    unknown = runtime_object("declare i64 @tilefuse_no_such_function()\n"
                             "define i64 @f() {\n  %v = call i64 @tilefuse_no_such_function()\n  ret i64 %v\n}",
                             "object_loader_test_undefined")
    with pytest.raises(ObjectFormatError, match="undefined symbol 'tilefuse_no_such_function'"):
        load_object(unknown)


def test_an_object_the_loader_refuses_goes_through_mcjit(code, monkeypatch):
    def refuse(_):
        raise ObjectFormatError("refused for the test")
    monkeypatch.setattr(jit, "load_object", refuse)
    loaded = load_native(code)
    assert isinstance(loaded, jit._EngineObject)
    assert _function(loaded, "tripled", ctypes.c_int64, ctypes.c_int64)(5) == 15


def test_registered_symbols_are_listed():
    register_symbol("tilefuse_test_listed", 8192)
    assert object_loader.registered_symbols()["tilefuse_test_listed"] == 8192
