"""``autotune cache info`` and ``autotune cache clear``: the disk cache of compiled kernels
(``tensorir.runtime.disk_cache``), which every compile reads and fills unless
``TILEFUSE_CACHE_DIR=off``.

Each ``cmd_*`` function takes the parsed arguments and returns the exit code.
"""
from __future__ import annotations

import time

from tilefuse.tensorir.runtime.disk_cache import DIR_VAR, KernelCacheError, default_kernel_cache

from .cli_io import EXIT_OK, BadInput, format_table, print_json


def _cache(folder):
    """The cache in ``folder`` (None: the one compiles use, from the environment)."""
    try:
        cache = default_kernel_cache(None if folder is None else {DIR_VAR: folder})
    except KernelCacheError as err:
        raise BadInput(str(err)) from None
    if cache is None:
        raise BadInput(f"the kernel cache is off ({DIR_VAR}=off); unset {DIR_VAR} or give --dir FOLDER")
    if cache.folder.exists() and not cache.folder.is_dir():
        raise BadInput(f"kernel cache {cache.folder} is not a folder")
    return cache


def cmd_cache_info(args) -> int:
    """``autotune cache info``: where the cache is, its bound, and its entries (size, hits, last
    use), most recently used first (``--top`` of them in the table).

    Example:
        >>> import tempfile
        >>> from types import SimpleNamespace
        >>> cmd_cache_info(SimpleNamespace(dir=tempfile.mkdtemp(), json=False, top=20))   # doctest: +ELLIPSIS
        kernel cache .../tmp...: 0 entries, 0.0 MiB of 1024.0 MiB, 0 hits
        0
    """
    cache = _cache(args.dir)
    entries = cache.entries()
    total = sum(e.bytes for e in entries)
    hits = sum(e.hits for e in entries)
    if args.json:
        print_json({"folder": str(cache.folder), "max_bytes": cache.max_bytes, "bytes": total, "hits": hits,
                    "entries": [{"key": e.key, "bytes": e.bytes, "hits": e.hits, "last_used": e.last_used}
                                for e in entries]})
        return EXIT_OK
    print(f"kernel cache {cache.folder}: {len(entries)} entries, {_mib(total)} of {_mib(cache.max_bytes)}, "
          f"{hits} hits")
    if entries:
        now = time.time()
        rows = [[e.key[:16], f"{e.bytes / 1024:.1f}", e.hits, _ago(now - e.last_used)] for e in entries[:args.top]]
        print(format_table(["key", "KiB", "hits", "last used"], rows, right={1, 2, 3}))
        if len(entries) > args.top:
            print(f"... and {len(entries) - args.top} more (--top N shows more)")
    return EXIT_OK


def cmd_cache_clear(args) -> int:
    """``autotune cache clear``: remove every entry.

    Example:
        >>> import tempfile
        >>> from types import SimpleNamespace
        >>> cmd_cache_clear(SimpleNamespace(dir=tempfile.mkdtemp()))   # doctest: +ELLIPSIS
        removed 0 entries from kernel cache .../tmp...
        0
    """
    cache = _cache(args.dir)
    print(f"removed {cache.clear()} entries from kernel cache {cache.folder}")
    return EXIT_OK


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _ago(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{max(seconds, 0):.0f} s ago"
