"""Object code made callable without LLVM: a loader of x86-64 ELF relocatable objects.

A compiled kernel is an ELF object file (``Kernel.object_code``). Running it takes what a
linker and a loader do: place its sections in memory, give each undefined symbol an address
(the runtime's own functions, registered with ``register_symbol``; the C library's, found by
``dlsym``), patch every relocation, and make the code executable. LLVM's MCJIT engine can do
that, but a process then maps all of LLVM (40 MB of resident memory before the first kernel,
10 MB more for the first engine). A process that only runs kernels built before (a saved
model, a warm disk cache) needs none of LLVM's compiler, so this module does it alone.

Layout: the code and read-only sections, then a stub (``jmp *addr``) and a GOT slot per
external symbol, then the writable sections on pages of their own. Once patched, the first
pages become read and execute, the writable ones stay read and write.

What it takes: ``ET_REL`` objects for x86-64 with the relocations LLVM emits there
(``R_X86_64_64``, ``PC32``, ``PLT32``, ``PC64``, ``GOTPCREL`` and its relaxable forms, ``32``
and ``32S`` when in range). Anything else (another machine, another relocation, a symbol no
one defines) raises ``ObjectFormatError``; the caller then loads the object through MCJIT.
Unwinding tables (``.eh_frame``) are not loaded: nothing unwinds through a kernel.

Example:
    >>> from tilefuse.tensorir.runtime.jit import runtime_object
    >>> code = runtime_object("define i32 @seven() { ret i32 7 }", "example")
    >>> import ctypes
    >>> loaded = load_object(code)
    >>> ctypes.CFUNCTYPE(ctypes.c_int32)(loaded.address("seven"))()
    7
"""
from __future__ import annotations

import ctypes
import mmap
import struct
import threading

__all__ = ["ObjectFormatError", "LoadedObject", "load_object", "register_symbol", "registered_symbols"]


class ObjectFormatError(ValueError):
    """An object file this loader does not take (the caller falls back to LLVM's loader)."""


_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")

_ET_REL, _EM_X86_64 = 1, 62
_SHT_SYMTAB, _SHT_RELA, _SHT_NOBITS, _SHT_REL = 2, 4, 8, 9
_SHF_WRITE, _SHF_ALLOC, _SHF_EXECINSTR = 1, 2, 4
_SHN_UNDEF, _SHN_ABS, _SHN_COMMON = 0, 0xFFF1, 0xFFF2
_STB_LOCAL = 0
_SKIPPED_SECTIONS = (".eh_frame",)

# relocation types (System V x86-64 psABI)
_R_NONE, _R_64, _R_PC32, _R_PLT32, _R_GOTPCREL, _R_32, _R_32S, _R_PC64 = 0, 1, 2, 4, 9, 10, 11, 24
_R_GOTPCRELX, _R_REX_GOTPCRELX = 41, 42

_STUB = b"\xff\x25\x00\x00\x00\x00"      # jmp *0(%rip): the 8-byte address follows
_STUB_BYTES = 16
_PAGE = mmap.PAGESIZE

_symbols: dict[str, int] = {}            # the runtime's own functions, by name
_symbols_lock = threading.Lock()
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_MAP_FAILED = ctypes.c_void_p(-1).value


def register_symbol(name: str, address: int) -> None:
    """Make ``name`` resolve to ``address`` in every object loaded after (the thread pool's
    ``tilefuse_parallel_for``, the scratch callback).

    Example:
        >>> register_symbol("tilefuse_example_symbol", 4096)
        >>> _resolve("tilefuse_example_symbol")
        4096
    """
    with _symbols_lock:
        _symbols[name] = int(address)


def registered_symbols() -> dict:
    """The symbols ``register_symbol`` made known, by name.

    Example:
        >>> register_symbol("tilefuse_example_symbol", 4096)
        >>> registered_symbols()["tilefuse_example_symbol"]
        4096
    """
    with _symbols_lock:
        return dict(_symbols)


def _resolve(name: str) -> int:
    """The address of an external symbol: a registered one, else the process's (``dlsym``)."""
    address = _symbols.get(name)
    if address is None:
        try:
            address = ctypes.cast(getattr(_libc, name), ctypes.c_void_p).value
        except AttributeError:
            address = None
    if not address:
        raise ObjectFormatError(f"undefined symbol {name!r}: neither the runtime nor the process defines it")
    return address


class LoadedObject:
    """An object file's code and data in memory, relocated: ``address(name)`` gives a defined
    global symbol's address. The memory is unmapped when the object is collected, so whoever
    calls the code keeps the object alive (a ``Kernel`` holds its own).

    Example:
        >>> from tilefuse.tensorir.runtime.jit import runtime_object
        >>> loaded = load_object(runtime_object("define i32 @nine() { ret i32 9 }", "example"))
        >>> loaded.address("nine") != 0, loaded.address("missing")
        (True, None)
    """

    def __init__(self, base: int, size: int, exports: dict):
        self._base, self._size, self._exports = base, size, exports

    def address(self, name: str) -> int | None:
        return self._exports.get(name)

    def __del__(self):
        base, self._base = self._base, 0
        if base and _libc is not None:       # at interpreter exit the module may be torn down first
            _libc.munmap(base, self._size)


def load_object(code: bytes) -> LoadedObject:
    """The x86-64 ELF relocatable object ``code`` loaded and relocated (see the module
    docstring); ``ObjectFormatError`` when it is not one this loader takes.

    Example:
        >>> load_object(b"junk")
        Traceback (most recent call last):
        ...
        tilefuse.tensorir.runtime.object_loader.ObjectFormatError: not an ELF object
    """
    code = bytes(code)
    sections, symbols = _parse(code)
    loaded = [k for k, s in enumerate(sections) if s["flags"] & _SHF_ALLOC and s["name"] not in _SKIPPED_SECTIONS]
    externals = sorted({symbols[r_info >> 32]["name"] for rela in sections
                        if rela["type"] == _SHT_RELA and rela["info"] in loaded
                        for _, r_info, _ in _RELA.iter_unpack(code[rela["offset"]:rela["offset"] + rela["size"]])
                        if symbols[r_info >> 32]["shndx"] == _SHN_UNDEF})
    commons = [sym for sym in symbols if sym["shndx"] == _SHN_COMMON]

    # place: code and read-only data, stubs and GOT slots, then (page-aligned) writable data
    offsets, at = {}, 0
    for k in loaded:
        if not sections[k]["flags"] & _SHF_WRITE:
            at = _align(at, sections[k]["align"])
            offsets[k], at = at, at + sections[k]["size"]
    stubs = _align(at, 16)
    got = stubs + _STUB_BYTES * len(externals)
    at = _align(got + 8 * len(externals), _PAGE)
    readonly_end = at
    for k in loaded:
        if sections[k]["flags"] & _SHF_WRITE:
            at = _align(at, sections[k]["align"])
            offsets[k], at = at, at + sections[k]["size"]
    common_at = {}
    for sym in commons:                        # st_value holds a common symbol's alignment
        at = _align(at, max(sym["value"], 1))
        common_at[id(sym)], at = at, at + sym["size"]
    size = _align(max(at, 1), _PAGE)

    base = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if base in (None, _MAP_FAILED):
        raise MemoryError(f"cannot map {size} bytes for object code (errno {ctypes.get_errno()})")
    try:
        exports = _link(code, sections, symbols, loaded, offsets, externals, stubs, got, common_at, base)
        if readonly_end and _libc.mprotect(base, readonly_end, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
            raise MemoryError(f"cannot make object code executable (errno {ctypes.get_errno()})")
    except BaseException:
        _libc.munmap(base, size)
        raise
    return LoadedObject(base, size, exports)


def _link(code, sections, symbols, loaded, offsets, externals, stubs, got, common_at, base) -> dict:
    """Copy the sections to ``base``, fill the stubs and GOT, apply the relocations; the
    exported (global, defined) symbols' addresses."""
    for k in loaded:
        s = sections[k]
        if s["type"] != _SHT_NOBITS and s["size"]:
            ctypes.memmove(base + offsets[k], code[s["offset"]:s["offset"] + s["size"]], s["size"])
    external_address = {name: _resolve(name) for name in externals}
    stub_of, slot_of = {}, {}
    for n, name in enumerate(externals):
        stub, slot = base + stubs + _STUB_BYTES * n, base + got + 8 * n
        ctypes.memmove(stub, _STUB + struct.pack("<Q", external_address[name]), len(_STUB) + 8)
        ctypes.memmove(slot, struct.pack("<Q", external_address[name]), 8)
        stub_of[name], slot_of[name] = stub, slot

    def symbol_address(sym) -> int:
        shndx = sym["shndx"]
        if shndx == _SHN_UNDEF:
            return external_address[sym["name"]]
        if shndx == _SHN_ABS:
            return sym["value"]
        if shndx == _SHN_COMMON:
            return base + common_at[id(sym)]
        if shndx not in offsets:
            raise ObjectFormatError(f"symbol {sym['name']!r} lies in section {sections[shndx]['name']!r}, "
                                    f"which is not loaded")
        return base + offsets[shndx] + sym["value"]

    for rela in sections:
        if rela["type"] == _SHT_REL:
            raise ObjectFormatError("REL relocations (without addends) are not taken")
        if rela["type"] != _SHT_RELA or rela["info"] not in offsets:
            continue                      # relocations of a section not loaded (unwinding tables)
        target = base + offsets[rela["info"]]
        for r_offset, r_info, addend in _RELA.iter_unpack(code[rela["offset"]:rela["offset"] + rela["size"]]):
            kind, sym = r_info & 0xFFFFFFFF, symbols[r_info >> 32]
            place = target + r_offset
            if kind == _R_NONE:
                continue
            external = sym["shndx"] == _SHN_UNDEF
            if kind == _R_64:
                _store(place, "<Q", (symbol_address(sym) + addend) & 0xFFFFFFFFFFFFFFFF)
            elif kind == _R_PC64:
                _store(place, "<q", symbol_address(sym) + addend - place)
            elif kind == _R_PLT32:            # a call: an external one goes through its stub
                address = stub_of[sym["name"]] if external else symbol_address(sym)
                _store32(place, address + addend - place, signed=True, kind=kind)
            elif kind == _R_PC32:             # data or code, by its own address (in reach or refused)
                _store32(place, symbol_address(sym) + addend - place, signed=True, kind=kind)
            elif kind in (_R_GOTPCREL, _R_GOTPCRELX, _R_REX_GOTPCRELX):
                if not external:
                    raise ObjectFormatError(f"GOT relocation against local symbol {sym['name']!r}")
                _store32(place, slot_of[sym["name"]] + addend - place, signed=True, kind=kind)
            elif kind == _R_32:
                _store32(place, symbol_address(sym) + addend, signed=False, kind=kind)
            elif kind == _R_32S:
                _store32(place, symbol_address(sym) + addend, signed=True, kind=kind)
            else:
                raise ObjectFormatError(f"relocation type {kind} is not taken")
    return {sym["name"]: symbol_address(sym) for sym in symbols
            if sym["bind"] != _STB_LOCAL and sym["shndx"] != _SHN_UNDEF and sym["name"]}


def _store(place: int, fmt: str, value: int) -> None:
    data = struct.pack(fmt, value)
    ctypes.memmove(place, data, len(data))


def _store32(place: int, value: int, signed: bool, kind: int) -> None:
    low, high = (-(1 << 31), (1 << 31) - 1) if signed else (0, (1 << 32) - 1)
    if not low <= value <= high:
        raise ObjectFormatError(f"relocation type {kind}: value {value:#x} does not fit in 32 bits")
    _store(place, "<i" if signed else "<I", value)


def _align(value: int, alignment: int) -> int:
    alignment = max(int(alignment), 1)
    return (value + alignment - 1) // alignment * alignment


def _parse(code: bytes):
    """(sections, symbols) of an x86-64 ELF relocatable object, as dicts."""
    if len(code) < _EHDR.size or code[:4] != b"\x7fELF":
        raise ObjectFormatError("not an ELF object")
    (ident, e_type, machine, _, _, _, shoff, _, _, _, _, shentsize, shnum, shstrndx) = _EHDR.unpack_from(code)
    if ident[4] != 2 or ident[5] != 1:
        raise ObjectFormatError("not a 64-bit little-endian ELF object")
    if e_type != _ET_REL or machine != _EM_X86_64:
        raise ObjectFormatError(f"ELF type {e_type}, machine {machine}: only x86-64 relocatable objects are taken")
    if shentsize != _SHDR.size or shoff + shnum * shentsize > len(code) or shstrndx >= shnum:
        raise ObjectFormatError("truncated or malformed section table")
    sections = []
    for k in range(shnum):
        name, kind, flags, _, offset, size, link, info, align, _ = _SHDR.unpack_from(code, shoff + k * shentsize)
        if kind != _SHT_NOBITS and offset + size > len(code):
            raise ObjectFormatError(f"section {k} lies past the end of the object")
        sections.append({"name_at": name, "type": kind, "flags": flags, "offset": offset, "size": size,
                         "link": link, "info": info, "align": align})
    names = sections[shstrndx]
    for s in sections:
        s["name"] = _string(code, names, s["name_at"])
    tables = [s for s in sections if s["type"] == _SHT_SYMTAB]
    if len(tables) != 1:
        raise ObjectFormatError("an object without exactly one symbol table")
    table = tables[0]
    strings = sections[table["link"]]
    symbols = []
    for name, info, _, shndx, value, size in _SYM.iter_unpack(code[table["offset"]:table["offset"] + table["size"]]):
        symbols.append({"name": _string(code, strings, name), "bind": info >> 4, "shndx": shndx,
                        "value": value, "size": size})
    return sections, symbols


def _string(code: bytes, table: dict, at: int) -> str:
    start = table["offset"] + at
    end = code.find(b"\0", start, table["offset"] + table["size"])
    return code[start:end if end >= 0 else start].decode("utf-8", "replace")
