"""Native code in memory: object code loaded (``load_native``), and the runtime's own
hand-written LLVM IR (the thread pool, the cache-line helpers) made into code of the host once
per machine (``jit_ir``).

``load_native`` loads object code with ``object_loader`` (no LLVM at all), or, for an object
that loader does not take, through an MCJIT engine. ``jit_ir``'s object code comes from the
disk cache of compiled kernels (``disk_cache``) when that holds it; else the IR is parsed,
checked, optimised (O3) and compiled, and the object code kept there. A process that only
loads saved kernels (``load_compiled``) then needs neither LLVM's compiler nor its loader. The
key hashes the IR text itself, the host target and llvmlite's version.

Example:
    >>> code = jit_ir("define i32 @seven() { ret i32 7 }", "example")
    >>> code.address("seven") != 0
    True
"""
from __future__ import annotations

import hashlib

import llvmlite
from .llvm_binding import llvm, outside_this_process

from .disk_cache import default_kernel_cache
from .object_loader import ObjectFormatError, load_object, registered_symbols
from .target import Target, host_target_machine, new_target_machine, optimize_module


def jit_ir(text: str, name: str):
    """Hand-written LLVM IR ``text`` as native code of the host, module ``name``, loaded by
    ``load_native`` (see the module docstring); the caller keeps the result alive as long as
    it calls the code.

    Example:
        >>> code = jit_ir("define i32 @eight() { ret i32 8 }", "example")
        >>> code.address("eight") != 0
        True
    """
    return load_native(runtime_object(text, name))


def load_native(code: bytes):
    """Object code ``code`` loaded for calling: an object with ``address(name)`` (the address
    of a defined function, None for another name), which must stay alive while its code may
    run. ``object_loader`` loads it; an object that loader does not take goes through an
    MCJIT engine.

    Example:
        >>> loaded = load_native(runtime_object("define i32 @ten() { ret i32 10 }", "example"))
        >>> loaded.address("ten") != 0, loaded.address("eleven")
        (True, None)
    """
    try:
        return load_object(code)
    except ObjectFormatError:
        return _EngineObject(code)


class _EngineObject:
    """Object code in an MCJIT engine of its own (``load_native``'s fallback), with the
    runtime's registered symbols made known to LLVM."""

    def __init__(self, code: bytes):
        for name, address in registered_symbols().items():
            llvm.add_symbol(name, address)
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), new_target_machine())   # empty module
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(code))
        self._engine.finalize_object()

    def address(self, name: str) -> int | None:
        return self._engine.get_function_address(name) or None


def runtime_object(text: str, name: str) -> bytes:
    """The host's object code of runtime IR ``text`` (module ``name``): from the disk cache,
    else compiled (``outside_this_process``) and kept there.

    Example:
        >>> runtime_object("define void @nothing() { ret void }", "example")[:4]
        b'\\x7fELF'
    """
    host = Target.host()
    key = hashlib.sha256(repr(("runtime", name, text, host.key, host.triple, llvmlite.__version__)).encode())
    cache = default_kernel_cache()
    code = None if cache is None else cache.cached_kernel(key.hexdigest())
    if code is None:
        code = outside_this_process(_compiled_object, text, name)
        if cache is not None:
            cache.cache_kernel(key.hexdigest(), code)
    return code


def _compiled_object(text: str, name: str) -> bytes:
    """Runtime IR ``text`` parsed, checked, optimised and compiled for the host."""
    tm = host_target_machine()
    module = llvm.parse_assembly(text)
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    module.name = name
    module.verify()
    optimize_module(module)
    return tm.emit_object(module)
