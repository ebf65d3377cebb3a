"""Compiled kernels: LLVM IR -> object code for a target -> a callable on numpy arrays.

Every kernel, freshly compiled or loaded from an artifact (``tensorir.runtime.artifact``),
runs from its object code in an MCJIT engine of its own, so a saved kernel behaves exactly
like the one that was saved. A kernel built for a target this host cannot run (features it
lacks) keeps its object code and assembly, to be saved, but is never mapped or called.
"""
from __future__ import annotations

import ctypes
import hashlib
from dataclasses import dataclass

from .llvm_binding import llvm
import numpy as np

from .. import dtype as dt
from .abi import ARRAY_ENTRY_SUFFIX, PACKED_ENTRY_SUFFIX, PARAM_ALIGN, STATUS_NO_MEMORY
from .aligned import array_layout_is_known
from .lru import LRUCache
from .target import Target, TargetError, as_target, cached_target_machine, optimize_module
from .jit import load_native
from .threadpool import ensure_runtime

_CTYPES = {"float32": ctypes.c_float, "float64": ctypes.c_double, "int8": ctypes.c_int8,
           "uint8": ctypes.c_uint8, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
           "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64, "bool": ctypes.c_uint8}


@dataclass(frozen=True)
class ArgSpec:
    """What a kernel expects at one argument position."""
    name: str
    dtype: str
    shape: tuple | None  # None for a scalar
    written: bool = False
    shares: tuple = ()   # an output's: positions of inputs it may be the very array of (tensorir.in_place)

    @property
    def is_buffer(self) -> bool:
        return self.shape is not None


class Kernel:
    """A compiled function; call it with numpy arrays (and Python numbers for scalar params).

    Arrays must have exactly the expected shape and dtype, be C-contiguous and 16-byte aligned;
    outputs are written in place.

    Example:
        >>> import numpy as np
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import create_schedule, build
        >>> A = placeholder((4,), name="A")
        >>> B = compute((4,), lambda i: A[i] + 1.0, name="B")
        >>> f = build(create_schedule(B), [A, B])
        >>> b = np.zeros(4, "float32"); f(np.arange(4, dtype="float32"), b); b.tolist()
        [1.0, 2.0, 3.0, 4.0]
    """

    def __init__(self, name: str, args: list[ArgSpec], llvm_ir: str, object_code: bytes,
                 target: Target | None = None):
        self.name = name
        self.args = tuple(args)
        self._llvm_ir = llvm_ir
        self.object_code = object_code
        self.target = as_target(target)
        self._expect = tuple((np.dtype(a.dtype), a.shape, a.written) for a in args)
        self._fast = self._cfunc = None
        self._packed_address = None
        self._cannot_run = self.target.cannot_run_here()
        if self._cannot_run:
            return                      # never mapped: its code may hold instructions this CPU lacks
        ensure_runtime()
        self._engine = load_native(object_code)
        address = self._engine.address(name)
        if not address:
            raise ValueError(f"object code has no function named {name!r}")
        argtypes = [ctypes.c_void_p if a.is_buffer else _CTYPES[a.dtype] for a in args]
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)(address)
        array_address = self._engine.address(name + ARRAY_ENTRY_SUFFIX)
        if array_address and array_layout_is_known():
            array_types = [ctypes.py_object if a.is_buffer else _CTYPES[a.dtype] for a in args]
            self._fast = ctypes.CFUNCTYPE(ctypes.c_int32, *array_types)(array_address)
        self._packed_address = self._engine.address(name + PACKED_ENTRY_SUFFIX) or None

    # ------------------------------------------------------------------ calling
    def __call__(self, *arrays):
        # The hot path: only checks that cost tens of nanoseconds; the native entry reads the
        # data pointers and checks alignment and overlap. Any failure re-runs the slow,
        # explaining checks below.
        expect = self._expect
        if self._fast is None or len(arrays) != len(expect):
            return self._checked_call(arrays)
        values = []
        for spec, (want, shape, written), a in zip(self.args, expect, arrays):
            if shape is None:
                values.append(_scalar(spec, a, self.name))
            elif _fits(a, want, shape, written):
                values.append(a)
            else:
                return self._checked_call(arrays)
        if self._fast(*values):
            self._checked_call(arrays)

    def _checked_call(self, arrays):
        if self._cannot_run:
            raise TargetError(f"kernel {self.name} cannot run here: {self._cannot_run}; it can be saved and run "
                              f"on such a CPU")
        specs = self.args
        if len(arrays) != len(specs):
            names = ", ".join(a.name for a in specs)
            raise TypeError(f"kernel {self.name} takes {len(specs)} arguments ({names}), got {len(arrays)}")
        values = []
        for spec, (want, _, _), a in zip(specs, self._expect, arrays):
            if spec.shape is None:
                values.append(_scalar(spec, a, self.name))
                continue
            if not isinstance(a, np.ndarray):
                raise TypeError(f"kernel {self.name}: argument {spec.name} must be a numpy array, "
                                f"got {type(a).__name__}")
            if a.dtype != want:
                raise TypeError(f"kernel {self.name}: argument {spec.name} must have dtype {spec.dtype}, got {a.dtype}")
            if a.shape != spec.shape:
                raise ValueError(f"kernel {self.name}: argument {spec.name} must have shape {spec.shape}, got {a.shape}")
            if not a.flags.c_contiguous:
                raise ValueError(f"kernel {self.name}: argument {spec.name} must be C-contiguous "
                                 f"(use np.ascontiguousarray)")
            ptr = a.ctypes.data
            if ptr % PARAM_ALIGN and a.size:
                raise ValueError(f"kernel {self.name}: argument {spec.name} is not {PARAM_ALIGN}-byte aligned "
                                 f"(a view into another array?); pass a copy")
            if spec.written and not a.flags.writeable:
                raise ValueError(f"kernel {self.name}: output {spec.name} is read-only")
            values.append(ptr)
        self._check_overlap(arrays)
        if self._cfunc(*values) == STATUS_NO_MEMORY:
            raise MemoryError(f"kernel {self.name}: could not allocate its intermediate buffers")

    def _check_overlap(self, arrays):
        spans = [(a.ctypes.data, a.ctypes.data + a.nbytes, i) for i, a in enumerate(arrays)
                 if self.args[i].is_buffer and a.nbytes]
        for w in (i for i, spec in enumerate(self.args) if spec.written):
            a = arrays[w]
            if not a.nbytes:
                continue
            lo, hi = a.ctypes.data, a.ctypes.data + a.nbytes
            for olo, ohi, i in spans:
                if i != w and olo < hi and lo < ohi and not (i in self.args[w].shares and (olo, ohi) == (lo, hi)):
                    raise ValueError(f"kernel {self.name}: output {self.args[w].name} overlaps argument "
                                     f"{self.args[i].name}; outputs must not share memory with other arguments (but "
                                     f"an output may be the very array of an input in its ArgSpec.shares)")

    def accepts(self, position: int, value) -> bool:
        """Whether ``value`` fits the array argument at ``position`` as the native entry needs
        it (an ndarray of the argument's dtype and shape, C-contiguous, writeable when written):
        what a caller of ``unchecked_entry`` must make sure of (alignment and overlap aside).

        Example:
            >>> import numpy as np
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.schedule import create_schedule, build
            >>> A, B = placeholder((4,), name="A"), placeholder((4,), name="B")
            >>> C = compute((4,), lambda i: A[i] + B[i], name="C"); add = build(create_schedule(C), [A, B, C])
            >>> add.accepts(0, np.zeros(4, "float32")), add.accepts(0, np.zeros(4)), add.accepts(0, np.zeros(8, "float32")[::2])
            (True, False, False)
        """
        want, shape, written = self._expect[position]
        return shape is not None and _fits(value, want, shape, written)

    @property
    def unchecked_entry(self):
        """The native entry a caller may use when it guarantees every argument's type, dtype,
        shape, C-contiguity and (outputs) writeability, as a compiled graph does for the arrays
        it allocates: called with the arrays, it checks only their alignment and overlap and
        returns a nonzero status, having done nothing, when they fail or its scratch memory
        cannot be had (then call the kernel itself, which explains). None when the kernel
        takes scalars or the array layout is not known.

        Example:
            >>> import numpy as np
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.schedule import create_schedule, build
            >>> A, B = placeholder((4,), name="A"), placeholder((4,), name="B")
            >>> C = compute((4,), lambda i: A[i] + B[i], name="C"); add = build(create_schedule(C), [A, B, C])
            >>> a, b, out = np.ones(4, "float32"), np.ones(4, "float32"), np.zeros(4, "float32")
            >>> entry = add.unchecked_entry
            >>> entry(a, b, out), out.tolist()          # 0: done
            (0, [2.0, 2.0, 2.0, 2.0])
            >>> view = np.zeros(5, "float32")[1:]         # not 16-byte aligned
            >>> entry(a, b, view) != 0, view.tolist()     # refused, nothing written: call add(a, b, view) to hear why
            (True, [0.0, 0.0, 0.0, 0.0])
        """
        if self._fast is None or not all(spec.is_buffer for spec in self.args):
            return None
        return self._fast

    @property
    def packed_entry_address(self) -> int | None:
        """The address of ``i32 <name>.packed(void **pointers)``, which takes one array of its
        arguments' data pointers and checks nothing (each must be aligned, apart from the
        others but as ``in_place`` allows, and of the argument's shape and dtype): what a
        caller running many kernels in native code calls (``kernel_sequence``). None when the
        kernel takes scalars or cannot run here.

        Example:
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.schedule import create_schedule, build
            >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i] * 2.0, name="B")
            >>> build(create_schedule(B), [A, B]).packed_entry_address > 0
            True
        """
        return self._packed_address

    # ------------------------------------------------------------------ inspection
    @property
    def in_place(self) -> list[tuple[int, int]]:
        """(output position, input position) of each input the output may be the very array of
        (``tensorir.in_place``): a caller that no longer needs the input may pass it as the output.

        Example:
            >>> import numpy as np
            >>> from tilefuse.tensorir import placeholder, compute
            >>> from tilefuse.schedule import create_schedule, build
            >>> A, B = placeholder((4,), name="A"), placeholder((4,), name="B")
            >>> C = compute((4,), lambda i: A[i] + B[i], name="C"); add = build(create_schedule(C), [A, B, C])
            >>> add.in_place                   # C may be A or B
            [(2, 0), (2, 1)]
            >>> a = np.ones(4, "float32"); add(a, np.arange(4, dtype="float32"), a); a.tolist()
            [1.0, 2.0, 3.0, 4.0]
        """
        return [(w, i) for w, spec in enumerate(self.args) for i in spec.shares]

    def source(self, kind: str = "llvm") -> str:
        """The optimised LLVM IR (``"llvm"``) or the assembly (``"asm"``, for the kernel's target)
        of the kernel.

        Example:
            >>> "define" in kernel.source("llvm")  # doctest: +SKIP
            True
        """
        if kind == "llvm":
            return self._llvm_ir
        if kind == "asm":
            return cached_target_machine(self.target).emit_assembly(llvm.parse_assembly(self._llvm_ir))
        raise ValueError(f"unknown source kind {kind!r}; expected 'llvm' or 'asm'")

    def __repr__(self):
        sig = ", ".join(f"{a.name}: {a.dtype}{list(a.shape) if a.is_buffer else ''}" for a in self.args)
        return f"Kernel({self.name}({sig}))" if self.target == Target.host() else \
            f"Kernel({self.name}({sig}), target={str(self.target)!r})"


def _scalar(spec: ArgSpec, value, kernel: str):
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if spec.dtype == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"kernel {kernel}: scalar {spec.name} must be a bool, got {type(value).__name__}")
        return int(value)
    if dt.is_float(spec.dtype):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"kernel {kernel}: scalar {spec.name} must be a number, got {type(value).__name__}")
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"kernel {kernel}: scalar {spec.name} must be an int, got {type(value).__name__}")
    if not dt.min_value(spec.dtype) <= value <= dt.max_value(spec.dtype):
        raise ValueError(f"kernel {kernel}: scalar {spec.name}={value} does not fit in {spec.dtype}")
    return value


def _fits(a, want: np.dtype, shape: tuple, written: bool) -> bool:
    """The array checks of a call's hot path (tens of nanoseconds each)."""
    return (isinstance(a, np.ndarray) and a.dtype == want and a.shape == shape
            and a.flags.c_contiguous and (not written or a.flags.writeable))


COMPILED_CACHE_SIZE = 256
"""Object code kept in process for IR text compiled before (a tuner's final check, or tests,
build the same kernel again): LLVM's optimisation and code generation take 0.1-0.2 s a kernel.
An entry is its optimised IR text and object code, 5-200 KB (resnet50's layers: 90 KB on
average), so the cache holds some tens of MB at most."""

_compiled = LRUCache(COMPILED_CACHE_SIZE)


def compile_llvm(name: str, args: list[ArgSpec], llvm_ir: str, target: Target | None = None) -> Kernel:
    """Parse, verify, optimise (O3) and compile LLVM IR text for ``target`` (default: the
    host) into a Kernel; IR text compiled before in this process for the same target reuses
    its object code (the last ``COMPILED_CACHE_SIZE`` of them).

    Example:
        >>> k = compile_llvm("f", [], 'define void @f() { ret void }'); k()
    """
    target = as_target(target)
    key = (target, hashlib.sha256(llvm_ir.encode()).digest())
    compiled = _compiled.get(key)
    if compiled is None:
        tm = cached_target_machine(target)
        module = llvm.parse_assembly(llvm_ir)
        module.triple = tm.triple
        module.data_layout = str(tm.target_data)
        module.verify()
        optimize_module(module, target)
        compiled = (str(module), tm.emit_object(module))
        _compiled.put(key, compiled)
    return Kernel(name, args, *compiled, target)
