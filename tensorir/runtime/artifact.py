"""The one format compiled code is kept in: a versioned, checksummed artifact holding a
plain ``Kernel`` or a ``PrepackedKernel`` (its kernels and their wiring), the target it was
compiled for, and a caller's metadata (JSON: a graph partition keeps its argument positions
and output shapes there).

Layout: ``MAGIC``, the format version (u32), the header's length (u64), the header (JSON:
target, kernels with their signatures and LLVM IR, the prepacked wiring, the metadata), the
object code of each kernel, and the sha256 of everything before it. Reading refuses, with an
``ArtifactError`` naming the source, anything that is not an artifact, another format
version, a truncated or altered one (the checksum), and code for a target this host cannot
run (another architecture, or features it lacks, named), before any of it is mapped. Code for
another target (say AVX-512, built on an AVX2 machine) is saved as any other.

Example:
    >>> import numpy as np
    >>> from tilefuse.tensorir import placeholder, compute
    >>> from tilefuse.schedule import create_schedule, build
    >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i] + 1.0, name="B")
    >>> blob = dumps(build(create_schedule(B), [A, B]), {"note": "plus one"})
    >>> kernel, meta = loads(blob)
    >>> b = np.zeros(4, "float32"); kernel(np.arange(4, dtype="float32"), b); b.tolist(), meta
    ([1.0, 2.0, 3.0, 4.0], {'note': 'plus one'})
    >>> loads(blob[:-1])
    Traceback (most recent call last):
    ...
    tilefuse.tensorir.runtime.artifact.ArtifactError: kernel artifact: checksum mismatch (truncated or altered)
"""
from __future__ import annotations

import hashlib
import json
import mmap
import struct
from dataclasses import asdict

import llvmlite

from ..errors import TilefuseError
from .atomic_file import atomic_write
from .kernel import ArgSpec, Kernel
from .prepacked import NUMPY_PACKS, PrepackedKernel
from .target import Target

MAGIC = b"TILEFUSE-KERNEL\n"
VERSION = 6            # 2: one kernel, no checksum; 3: plain or prepacked, metadata, sha256; 4: panel packs;
                       # 5: numpy packs of any kind; 6: the kernels' target in full (triple, disabled features)
TOOLCHAIN = f"artifact {VERSION}, llvmlite {llvmlite.__version__}"
"""What made the code: part of every key under which compiled code is cached."""
_PREFIX = struct.Struct("<IQ")
_DIGEST = 32


class ArtifactError(TilefuseError, ValueError):
    """Bytes or a file that cannot be loaded as compiled code here; the message names it."""


def dumps(kernel, meta: dict | None = None) -> bytes:
    """``kernel`` (a Kernel or a PrepackedKernel) and ``meta`` (JSON-able) as an artifact.

    Example:
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import create_schedule, build
        >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i] * 2.0, name="B")
        >>> blob = dumps(build(create_schedule(B), [A, B]), {"args": [["in", 0], ["out", 0]]})
        >>> blob.startswith(MAGIC), loads(blob)
        (True, (Kernel(main(A: float32[4], B: float32[4])), {'args': [['in', 0], ['out', 0]]}))
    """
    if isinstance(kernel, PrepackedKernel):
        kernels = kernel.kernels
        wiring = {"main_args": kernel.main_args, "packs": [p for _, p in kernel.packs], "n_args": kernel.n_args,
                  "numpy_packs": [{"kind": k.name, **k.recipe()} if type(k) in NUMPY_PACKS.values() else None
                                  for k, _ in kernel.packs]}
    elif isinstance(kernel, Kernel):
        kernels, wiring = [kernel], None
    else:
        raise TypeError(f"an artifact holds a Kernel or a PrepackedKernel, got {type(kernel).__name__}")
    target = kernels[0].target
    if any(k.target != target for k in kernels):
        raise ValueError(f"an artifact's kernels are compiled for one target; these for "
                         f"{sorted({str(k.target) for k in kernels})}")
    header = json.dumps({
        "target": {"cpu": target.cpu, "features": target.features, "key": target.key, "triple": target.triple,
                   "disabled": target.disabled},
        "kernels": [{"name": k.name, "args": [asdict(a) for a in k.args], "llvm_ir": k.source("llvm"),
                     "size": len(k.object_code)} for k in kernels],
        "prepacked": wiring, "meta": meta or {},
    }).encode()
    body = MAGIC + _PREFIX.pack(VERSION, len(header)) + header + b"".join(k.object_code for k in kernels)
    return body + hashlib.sha256(body).digest()


def loads(data: bytes, source: str = "kernel artifact"):
    """(kernel, meta) from ``dumps`` output; ArtifactError naming ``source`` when it cannot
    be used here.

    Example:
        >>> loads(b"junk")
        Traceback (most recent call last):
        ...
        tilefuse.tensorir.runtime.artifact.ArtifactError: kernel artifact: not a tilefuse kernel
    """
    header, body, start = read_envelope(bytes(data), MAGIC, VERSION, "tilefuse kernel", source)
    try:
        target, specs, wiring, meta = header["target"], header["kernels"], header["prepacked"], header["meta"]
    except (KeyError, TypeError) as err:
        raise ArtifactError(f"{source}: corrupt kernel header ({err})") from None
    try:
        target = Target(target["cpu"], target["features"], target["key"], target["triple"], target["disabled"])
    except (KeyError, TypeError, ValueError) as err:
        raise ArtifactError(f"{source}: corrupt target ({err})") from None
    refusal = target.cannot_run_here()
    if refusal:
        raise ArtifactError(f"{source}: {refusal}; it cannot run here (recompile it for this host)")
    at, kernels = start, []
    for spec in specs:
        code = body[at:at + spec["size"]]
        at += spec["size"]
        args = [ArgSpec(a["name"], a["dtype"], None if a["shape"] is None else tuple(a["shape"]), a["written"],
                        tuple(a.get("shares", ())))      # artifacts from before in-place outputs: none
                for a in spec["args"]]
        kernels.append(Kernel(spec["name"], args, spec["llvm_ir"], code, target))
    if wiring is None:
        return kernels[0], meta
    compiled = iter(kernels[1:])
    try:
        packs = [(_numpy_pack(recipe) if recipe is not None else next(compiled), positions)
                 for positions, recipe in zip(wiring["packs"], wiring["numpy_packs"])]
    except (KeyError, TypeError, ValueError, StopIteration) as err:
        raise ArtifactError(f"{source}: corrupt prepacked wiring ({err!r})") from None
    return PrepackedKernel(kernels[0], wiring["main_args"], packs, wiring["n_args"]), meta


def _numpy_pack(recipe: dict):
    """The numpy pack a ``{"kind": ..., **recipe}`` entry of the wiring describes."""
    recipe = dict(recipe)
    return NUMPY_PACKS[recipe.pop("kind")](**recipe)


def read_envelope(data, magic: bytes, version: int, what: str, source: str, error=ArtifactError):
    """(header, body, end of the header) of ``data`` (bytes-like) framed as compiled code is:
    ``magic``, the format version (u32), the header's length (u64), a JSON header object, what
    follows, and the sha256 of everything before it. ``error`` (naming ``source``) for data
    that is not a ``what``, is of another version, is truncated or altered, or whose header is
    not a JSON object; ``body`` is ``data`` without its digest.

    Example:
        >>> read_envelope(b"junk", MAGIC, VERSION, "tilefuse kernel", "x.tfk")
        Traceback (most recent call last):
        ...
        tilefuse.tensorir.runtime.artifact.ArtifactError: x.tfk: not a tilefuse kernel
    """
    if bytes(data[:len(magic)]) != magic:
        raise error(f"{source}: not a {what}")
    start = len(magic) + _PREFIX.size
    if len(data) < start + _DIGEST:
        raise error(f"{source}: truncated")
    found, size = _PREFIX.unpack_from(data, len(magic))
    if found != version:
        raise error(f"{source}: {what} format version {found}; this tilefuse reads version {version}")
    body, digest = data[:-_DIGEST], data[-_DIGEST:]
    if _sha256_of(body) != bytes(digest):
        raise error(f"{source}: checksum mismatch (truncated or altered)")
    try:
        header = json.loads(bytes(body[start:start + size]))
    except ValueError as err:
        raise error(f"{source}: corrupt header ({err})") from None
    if not isinstance(header, dict):
        raise error(f"{source}: corrupt header (not a JSON object)")
    return header, body, start + size


HASH_CHUNK = 64 << 20
"""Bytes of a mapped file hashed at a time, its pages let go after each (a multiple of pages)."""


def _sha256_of(view) -> bytes:
    """The sha256 of ``view``. When it is a mapped file from its start (a loaded session's), its
    pages are handed back to the kernel chunk by chunk once hashed: checking a 800 MB file then
    does not keep it all resident, and the pages a run needs come back from the page cache.

    Example:
        >>> _sha256_of(memoryview(b"abc")) == hashlib.sha256(b"abc").digest()
        True
    """
    mapped = view.obj if isinstance(view, memoryview) and isinstance(view.obj, mmap.mmap) else None
    if mapped is None or len(mapped) - len(view) > _DIGEST or not hasattr(mmap, "MADV_DONTNEED"):
        return hashlib.sha256(view).digest()        # not a mapped file's prefix: hashed as it is
    digest = hashlib.sha256()
    for at in range(0, len(view), HASH_CHUNK):
        chunk = view[at:at + HASH_CHUNK]
        digest.update(chunk)
        mapped.madvise(mmap.MADV_DONTNEED, at, len(chunk))
    return digest.digest()


def save(kernel, path, meta: dict | None = None) -> None:
    """Write ``kernel`` (and ``meta``) to ``path``, atomically (``atomic_file.atomic_write``:
    a reader of the old file keeps it whole, a failed save leaves it as it was); ``load``
    reads it back.

    Example:
        >>> import os, tempfile
        >>> import numpy as np
        >>> from tilefuse.tensorir import placeholder, compute
        >>> from tilefuse.schedule import create_schedule, build
        >>> A = placeholder((4,), name="A"); B = compute((4,), lambda i: A[i] * 2.0, name="B")
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     save(build(create_schedule(B), [A, B]), os.path.join(folder, "double.tfk"), {"note": "doubles"})
        ...     again, meta = load(os.path.join(folder, "double.tfk"))
        >>> b = np.zeros(4, "float32"); again(np.arange(4, dtype="float32"), b); b.tolist(), meta
        ([0.0, 2.0, 4.0, 6.0], {'note': 'doubles'})
    """
    blob = dumps(kernel, meta)
    with atomic_write(path) as f:
        f.write(blob)


def load(path):
    """(kernel, meta) from a file ``save`` wrote; ArtifactError naming the file otherwise.

    Example:
        >>> load(__file__)
        Traceback (most recent call last):
        ...
        tilefuse.tensorir.runtime.artifact.ArtifactError: ...artifact.py: not a tilefuse kernel
    """
    with open(path, "rb") as f:
        return loads(f.read(), source=str(path))
