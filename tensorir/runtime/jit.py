"""The runtime's own native code: hand-written LLVM IR (the thread pool, the cache-line
helpers) made into code of the host once per machine.

``jit_ir`` returns an MCJIT engine holding the code. Its object code comes from the disk cache
of compiled kernels (``disk_cache``) when that holds it; else the IR is parsed, checked,
optimised (O3) and compiled, and the object code kept there. A process that only loads saved
kernels (``load_compiled``) then needs LLVM's object loader alone, never its compiler. The
key hashes the IR text itself, the host target and llvmlite's version.

Example:
    >>> engine = jit_ir("define i32 @seven() { ret i32 7 }", "example")
    >>> engine.get_function_address("seven") != 0
    True
"""
from __future__ import annotations

import hashlib

import llvmlite
import llvmlite.binding as llvm

from .disk_cache import default_kernel_cache
from .target import Target, host_target_machine, new_target_machine, optimize_module


def jit_ir(text: str, name: str) -> llvm.ExecutionEngine:
    """Hand-written LLVM IR ``text`` as native code of the host in an MCJIT engine of its own,
    as module ``name`` (see the module docstring); the caller keeps the engine alive as long as
    it calls the code.

    Example:
        >>> engine = jit_ir("define i32 @eight() { ret i32 8 }", "example")
        >>> engine.get_function_address("eight") != 0
        True
    """
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), new_target_machine())   # an empty module
    engine.add_object_file(llvm.ObjectFileRef.from_data(runtime_object(text, name)))
    engine.finalize_object()
    return engine


def runtime_object(text: str, name: str) -> bytes:
    """The host's object code of runtime IR ``text`` (module ``name``): from the disk cache,
    else compiled and kept there.

    Example:
        >>> runtime_object("define void @nothing() { ret void }", "example")[:4]
        b'\\x7fELF'
    """
    host = Target.host()
    key = hashlib.sha256(repr(("runtime", name, text, host.key, host.triple, llvmlite.__version__)).encode())
    cache = default_kernel_cache()
    code = None if cache is None else cache.cached_kernel(key.hexdigest())
    if code is None:
        tm = host_target_machine()
        module = llvm.parse_assembly(text)
        module.triple = tm.triple
        module.data_layout = str(tm.target_data)
        module.name = name
        module.verify()
        optimize_module(module)
        code = tm.emit_object(module)
        if cache is not None:
            cache.cache_kernel(key.hexdigest(), code)
    return code
