"""Compiled kernels kept on disk between processes: the default ``KernelCache`` under every compile.

A restarted service, a notebook kernel or a CLI call compiles a model it compiled before; with
the cache, each kernel it built then is read back instead of going through LLVM again.

Where: ``$TILEFUSE_CACHE_DIR``, else ``$XDG_CACHE_HOME/tilefuse``, else ``~/.cache/tilefuse``;
``TILEFUSE_CACHE_DIR=off`` turns it off. Its size is bounded by ``TILEFUSE_CACHE_MAX_BYTES``
(default 1 GiB): past it, the least recently used entries go.

Entries: one file per kernel, ``kernels/<2 hex>/<key>.kernel``, holding a small frame (a magic
line, the key, the sha256 of the artifact) and the kernel artifact (``artifact.dumps``). The
key (``kernel_cache.cache_key``) hashes the kernel's signature and config, the target (CPU and
features), LLVM's version and the compiler's own code, so another CPU, another version or an
edited compiler never reads a stale entry. A read that finds a damaged, truncated or foreign
entry (another key's, another format) warns, returns nothing, and the kernel is built again and
replaces it. Files are written whole or not at all (``atomic_write``, without fsync: a cache
entry lost to a power cut is built again): two processes filling the cache at once both
succeed, and neither ever reads half a file.

Bookkeeping, kept cheap: a hit sets the entry's modification time (what eviction orders by) and
appends a line to ``hits.log`` (read by ``entries`` for ``autotune cache info``; it is compacted
now and then, and a hit recorded by another process while it is compacted may go uncounted).
A cache directory that cannot be written is read from as it is, with one warning.

Example:
    >>> import tempfile
    >>> cache = DiskKernelCache(tempfile.mkdtemp(), max_bytes=1 << 20)
    >>> key = "ab" * 32
    >>> cache.cached_kernel(key) is None
    True
    >>> cache.cache_kernel(key, b"compiled code"); cache.cached_kernel(key)
    b'compiled code'
    >>> [(e.key == key, e.bytes > 13, e.hits) for e in cache.entries()]
    [(True, True, 1)]
"""
from __future__ import annotations

import hashlib
import os
import re
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..errors import TilefuseError
from ..settings import positive_setting
from .atomic_file import atomic_write

DIR_VAR = "TILEFUSE_CACHE_DIR"
MAX_BYTES_VAR = "TILEFUSE_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 1 << 30
KEEP_AFTER_EVICTION = 0.9
"""Eviction brings the cache down to this share of its bound, so that it does not run at every write."""
HITS_LOG_LIMIT = 1 << 18
"""``hits.log`` is compacted (a line per key with its count) once it grows past this many bytes."""
STALE_TEMPORARY_SECONDS = 3600
"""A half-written file older than this was left by a killed process, and goes at eviction."""
_MAGIC = b"TILEFUSE-CACHED-KERNEL 1\n"
_KEY = re.compile(r"[0-9a-f]{64}")
_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# tilefuse's kernel cache: safe to delete.\n"


class KernelCacheError(TilefuseError, ValueError):
    """A kernel cache setting that cannot be used (``TILEFUSE_CACHE_MAX_BYTES`` not a number)."""


@dataclass(frozen=True)
class CacheEntry:
    """One cached kernel: its key, its size on disk, when it was last used (seconds since the
    epoch) and how many times it was read."""
    key: str
    bytes: int
    last_used: float
    hits: int


class DiskKernelCache:
    """Kernel artifacts in ``folder`` (created when first written), at most ``max_bytes`` of
    them. See the module docstring.

    Example:
        >>> import tempfile
        >>> cache = DiskKernelCache(tempfile.mkdtemp(), max_bytes=1000)
        >>> for k in range(12):                 # 12 entries of about 190 bytes each
        ...     cache.cache_kernel(f"{k:064x}", bytes(100))
        >>> len(cache.entries()) < 12, cache.total_bytes() <= 1000
        (True, True)
    """

    def __init__(self, folder, max_bytes: int = DEFAULT_MAX_BYTES):
        self.folder = Path(folder)
        self.max_bytes = max_bytes
        self._bytes: int | None = None      # what this process believes the cache holds (None: not counted)
        self._warned_unwritable = False

    def __repr__(self) -> str:
        return f"DiskKernelCache({str(self.folder)!r})"

    def path_of(self, key: str) -> Path:
        """The file of ``key``'s entry.

        Example:
            >>> DiskKernelCache("/tmp/c").path_of("0f" * 32).relative_to("/tmp/c").parts[:2]
            ('kernels', '0f')
        """
        if not _KEY.fullmatch(key):
            raise KernelCacheError(f"a kernel cache key is 64 hex digits, got {key!r}")
        return self.folder / "kernels" / key[:2] / f"{key}.kernel"

    # ------------------------------------------------------------------ KernelCache

    def cached_kernel(self, key: str) -> bytes | None:
        """The artifact cached under ``key``, or None (never cached, evicted, or unusable: a
        damaged or foreign entry is warned about and left to be replaced)."""
        path = self.path_of(key)
        try:
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as err:
            warnings.warn(f"kernel cache entry {path} cannot be read ({err}); building the kernel again",
                          stacklevel=2)
            return None
        blob = _unframe(data, key)
        if blob is None:
            warnings.warn(f"kernel cache entry {path} is damaged, truncated or not this key's; building the "
                          f"kernel again and replacing it", stacklevel=2)
            return None
        self._record_hit(path, key)
        return blob

    def has_kernel(self, key: str) -> bool:
        """Whether an entry is kept under ``key`` (not read, nor counted as a hit)."""
        return self.path_of(key).is_file()

    def cache_kernel(self, key: str, blob: bytes) -> None:
        """Keep ``blob`` under ``key`` (replacing what is there), then evict the least recently
        used entries if the cache is over its bound."""
        path = self.path_of(key)
        data = _frame(key, blob)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._tag()
            with atomic_write(path, durable=False) as f:
                f.write(data)
        except OSError as err:
            if not self._warned_unwritable:
                self._warned_unwritable = True
                warnings.warn(f"the kernel cache {self.folder} cannot be written ({err}); compiled kernels are not "
                              f"kept for other processes (set {DIR_VAR} to another folder, or to 'off')",
                              stacklevel=2)
            return
        if self._bytes is None:
            self._bytes = self.total_bytes()
        else:
            self._bytes += len(data)
        if self._bytes > self.max_bytes:
            self.evict()

    # ------------------------------------------------------------------ management

    def entries(self) -> list:
        """Every entry as a ``CacheEntry``, most recently used first."""
        hits = self._hits()
        found = [CacheEntry(path.stem, stat.st_size, stat.st_mtime, hits.get(path.stem, 0))
                 for path, stat in self._entry_files()]
        return sorted(found, key=lambda e: -e.last_used)

    def total_bytes(self) -> int:
        """The size of every entry together."""
        return sum(stat.st_size for _, stat in self._entry_files())

    def evict(self) -> int:
        """Remove least recently used entries until the cache holds at most
        ``KEEP_AFTER_EVICTION`` of its bound (and half-written files of killed processes);
        returns how many entries went."""
        files = sorted(self._entry_files(), key=lambda item: item[1].st_mtime)
        total = sum(stat.st_size for _, stat in files)
        keep = int(self.max_bytes * KEEP_AFTER_EVICTION) if total > self.max_bytes else total
        removed = 0
        for path, stat in files:
            if total <= keep:
                break
            if _unlink(path):
                removed += 1
            total -= stat.st_size
        self._bytes = total
        self._remove_stale_temporaries()
        return removed

    def clear(self) -> int:
        """Remove every entry and the hit counts; returns how many entries went."""
        removed = sum(_unlink(path) for path, _ in self._entry_files())
        _unlink(self.folder / "hits.log")
        self._bytes = 0
        return removed

    # ------------------------------------------------------------------ inside

    def _entry_files(self) -> list:
        """(path, stat) of every entry file (half-written ones, whose names start with a dot, left out)."""
        return self._files(lambda name: name.endswith(".kernel") and not name.startswith("."))

    def _remove_stale_temporaries(self) -> None:
        now = time.time()
        for path, stat in self._files(lambda name: name.startswith(".") and name.endswith(".tmp")):
            if now - stat.st_mtime > STALE_TEMPORARY_SECONDS:
                _unlink(path)

    def _files(self, wanted) -> list:
        """(path, stat) of the files in the cache's subfolders whose names ``wanted`` takes."""
        found = []
        for sub in _scandir(self.folder / "kernels"):
            for item in _scandir(sub.path) if sub.is_dir(follow_symlinks=False) else ():
                if wanted(item.name):
                    try:
                        found.append((Path(item.path), item.stat(follow_symlinks=False)))
                    except FileNotFoundError:      # removed by another process meanwhile
                        pass
        return found

    def _record_hit(self, path: Path, key: str) -> None:
        log = self.folder / "hits.log"
        try:
            os.utime(path)
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                os.write(fd, f"{key} 1\n".encode())
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if size > HITS_LOG_LIMIT:
                self._compact_hits()
        except OSError:             # a read-only cache serves reads without counting them
            pass

    def _hits(self) -> Counter:
        counts: Counter = Counter()
        try:
            text = (self.folder / "hits.log").read_text(errors="replace")
        except OSError:
            return counts
        for line in text.splitlines():
            key, _, count = line.partition(" ")
            if _KEY.fullmatch(key) and count.isdigit():
                counts[key] += int(count)
        return counts

    def _compact_hits(self) -> None:
        live = {path.stem for path, _ in self._entry_files()}
        counts = {key: n for key, n in self._hits().items() if key in live}
        with atomic_write(self.folder / "hits.log") as f:
            f.write("".join(f"{key} {n}\n" for key, n in counts.items()).encode())

    def _tag(self) -> None:
        """A CACHEDIR.TAG, so that backup tools skip the folder."""
        tag = self.folder / "CACHEDIR.TAG"
        if not tag.exists():
            with atomic_write(tag) as f:
                f.write(_TAG.encode())


def default_kernel_cache(environ=None) -> DiskKernelCache | None:
    """The disk cache ``environ`` (default: this process's environment) asks for (see the
    module docstring), or None when its ``TILEFUSE_CACHE_DIR`` is ``off``. Raises
    KernelCacheError for a ``TILEFUSE_CACHE_MAX_BYTES`` that is not a positive whole number.

    Example:
        >>> default_kernel_cache({"TILEFUSE_CACHE_DIR": "off"}) is None
        True
        >>> default_kernel_cache({"TILEFUSE_CACHE_DIR": "/tmp/kernels"})
        DiskKernelCache('/tmp/kernels')
        >>> default_kernel_cache({"XDG_CACHE_HOME": "/tmp/xdg", "TILEFUSE_CACHE_MAX_BYTES": "4096"}).max_bytes
        4096
        >>> default_kernel_cache({"TILEFUSE_CACHE_MAX_BYTES": "1 GB"})
        Traceback (most recent call last):
        ...
        tilefuse.tensorir.runtime.disk_cache.KernelCacheError: TILEFUSE_CACHE_MAX_BYTES must be a positive whole number, got '1 GB'
    """
    environ = os.environ if environ is None else environ
    folder = environ.get(DIR_VAR, "").strip()
    if folder.lower() == "off":
        return None
    if not folder:
        base = environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(base, "tilefuse")
    return _cache_at(folder, _max_bytes(environ.get(MAX_BYTES_VAR, "")))


_caches: dict = {}


def _cache_at(folder: str, max_bytes: int) -> DiskKernelCache:
    """One cache object per folder and bound in a process (it counts what it wrote)."""
    key = (os.path.abspath(folder), max_bytes)
    if key not in _caches:
        _caches[key] = DiskKernelCache(key[0], max_bytes)
    return _caches[key]


def _max_bytes(text: str) -> int:
    return positive_setting(MAX_BYTES_VAR, text, KernelCacheError) if text.strip() else DEFAULT_MAX_BYTES


def _frame(key: str, blob: bytes) -> bytes:
    return _MAGIC + key.encode() + b"\n" + hashlib.sha256(blob).digest() + blob


def _unframe(data: bytes, key: str) -> bytes | None:
    """The artifact of a framed entry when it is whole and ``key``'s, else None."""
    head = len(_MAGIC) + 65
    if not data.startswith(_MAGIC) or data[len(_MAGIC):head] != key.encode() + b"\n":
        return None
    digest, blob = data[head:head + 32], data[head + 32:]
    return blob if len(digest) == 32 and hashlib.sha256(blob).digest() == digest else None


def _scandir(folder) -> list:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False
