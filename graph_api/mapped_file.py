"""A saved session's file held for its session: mapped where a later rewrite in place can be
seen, read into memory where it cannot.

``SessionFile.open(path)`` maps the file (its arrays are then used where they lie, shared as
page cache by every process loading it) and remembers its size and modification time; a
session calls ``check()`` before each run, which raises a GraphError naming the file when
another program has rewritten it in place since (cut it shorter, which would kill the process
with SIGBUS at the next read of a lost page, or changed its bytes, which would give wrong
results). A file replaced by a rename (``save``, ``mv``) or removed keeps its old inode under
the map: the session runs on as loaded.

The check sees a write through the file's modification time, which the kernel takes from a
clock that advances in ticks of a few milliseconds: a write in the same tick as the last one
would leave it unchanged. A file modified less than ``RECENT_SECONDS`` before it is opened (or
with a time ahead of this clock) is therefore read into private memory instead, where no
later write reaches it. A rewrite during a run is not caught: replace a file others may still
run by renaming a new one over it.

Example:
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "data.bin")
    ...     with open(path, "wb") as f:
    ...         _ = f.write(b"saved bytes")
    ...     held = SessionFile.open(path)
    ...     bytes(held.data[:5]), held.mapped     # just written: read, not mapped
    (b'saved', False)
"""
from __future__ import annotations

import mmap
import os
import time

import numpy as np

from .logical_tensor import GraphError

RECENT_SECONDS = 2.0
"""A file modified this recently (by this host's clock) is read into memory, not mapped."""
ALIGN = 64
"""Where a copy's data starts (a multiple of it), as a mapping's pages do."""


class SessionFile:
    """The bytes of a saved session (``data``, a memoryview) and what ``check`` compares.

    Example:
        >>> SessionFile(memoryview(b"x"), "f.tfm", None, None).check()     # nothing to watch
    """

    def __init__(self, data: memoryview, where: str, fd, stamp):
        self.data, self.where, self._fd, self._stamp = data, where, fd, stamp

    @property
    def mapped(self) -> bool:
        """Whether ``data`` is the file mapped (else a private copy).

        Example:
            >>> SessionFile(memoryview(b"x"), "f.tfm", None, None).mapped
            False
        """
        return self._fd is not None

    @classmethod
    def open(cls, where: str) -> "SessionFile":
        """The file at ``where``, mapped (or read when it was modified a moment ago); OSError
        when it cannot be read.

        Example:
            >>> SessionFile.open(__file__).where == __file__
            True
        """
        fd = os.open(where, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if st.st_size == 0:
                return cls(memoryview(b""), where, None, None)
            if abs(time.time() - st.st_mtime) < RECENT_SECONDS or st.st_mtime > time.time():
                return cls(_read_aligned(fd, st.st_size), where, None, None)
            data = memoryview(mmap.mmap(fd, 0, access=mmap.ACCESS_READ))
        except BaseException:
            os.close(fd)
            raise
        return cls(data, where, fd, file_stamp(st))

    def check(self) -> None:
        """Raise a GraphError naming the file when a mapped file was rewritten in place since it
        was opened (its size or modification time changed).

        Example:
            >>> SessionFile.open(__file__).check()
        """
        if self._fd is None:
            return
        now = file_stamp(os.fstat(self._fd))
        if now != self._stamp:
            raise GraphError(f"{self.where} was rewritten in place since this session loaded it (size "
                             f"{self._stamp[0]} -> {now[0]} bytes, modified again); load it again, and replace a "
                             f"loaded file by renaming a new one over it")

    def __del__(self):
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None


def file_stamp(st) -> tuple:
    """What changes when an open file is rewritten in place: its size and modification time
    (of an ``os.stat_result``).

    Example:
        >>> file_stamp(os.stat(__file__))[0] == os.path.getsize(__file__)
        True
    """
    return st.st_size, st.st_mtime_ns


def _read_aligned(fd: int, size: int) -> memoryview:
    """The file's ``size`` bytes read into a private buffer starting at a multiple of ALIGN."""
    buffer = np.empty(size + ALIGN, np.uint8)
    start = -buffer.ctypes.data % ALIGN
    view = memoryview(buffer[start:start + size])
    done = 0
    while done < size:
        n = os.readv(fd, [view[done:]])
        if n == 0:
            raise OSError(f"the file ended after {done} of {size} bytes while it was read")
        done += n
    return view.cast("B")
